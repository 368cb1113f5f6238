/*
 * hw/ide driven as a guest driver would: IDENTIFY contents, PIO and DMA
 * data round trips (LBA28, LBA48, CHS, READ/WRITE MULTIPLE), errors for
 * bad addresses and hostile PRD tables, interrupts, reset, and the write
 * cache: SET FEATURES 82h/02h flip the BlockBackend's flag, IDENTIFY word
 * 85 shows it, and in writethrough every DMA write costs exactly one flush
 * of the file node.
 */

#include "ide-guest.h"

#define DISK_SIZE (64 * MiB)
#define STATUS_OK (ATA_STAT_DRDY | ATA_STAT_DSC)
#define STATUS_ERR (ATA_STAT_DRDY | ATA_STAT_DSC | ATA_STAT_ERR)

typedef struct IDEFixture {
    char *path;
    BlockBackend *blk;
    IDEGuest *ig;
} IDEFixture;

static void fixture_open(IDEFixture *f, const char *fmt, int64_t size,
                         const char *mode)
{
    f->path = qguest_image_new(fmt, size);
    f->blk = qguest_blk_open(f->path, fmt, mode, NULL);
    f->ig = ide_guest_new(f->blk);
}

static void fixture_close(IDEFixture *f)
{
    ide_guest_free(f->ig);
    blk_unref(f->blk);
    unlink(f->path);
    g_free(f->path);
}

/* An ATA string from IDENTIFY words, trailing spaces removed. */
static char *id_string(const uint16_t *id, int word, int len)
{
    char *s = g_malloc0(len + 1);

    for (int i = 0; i < len; i++) {
        uint16_t w = id[word + i / 2];

        s[i] = i % 2 ? w & 0xff : w >> 8;
    }
    return g_strchomp(s);
}

static bool id_wce(IDEGuest *ig)
{
    uint16_t id[ATA_ID_WORDS];

    g_assert_cmphex(ide_guest_identify(ig, id), ==, STATUS_OK);
    /* supported is always set, enabled follows the flag */
    g_assert_true(id[ATA_ID_COMMAND_SET_1] & ATA_ID_CS1_WCACHE);
    return id[ATA_ID_CFS_ENABLE_1] & ATA_ID_CS1_WCACHE;
}

static void test_identify(void)
{
    IDEFixture f;
    uint16_t id[ATA_ID_WORDS];
    uint64_t sectors = DISK_SIZE / 512;
    g_autofree char *serial = NULL, *model = NULL, *fw = NULL;
    uint8_t sum = 0;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    g_assert_cmphex(ide_guest_identify(f.ig, id), ==, STATUS_OK);
    serial = id_string(id, ATA_ID_SERNO, ATA_ID_SERNO_LEN);
    model = id_string(id, ATA_ID_PROD, ATA_ID_PROD_LEN);
    fw = id_string(id, ATA_ID_FW_REV, ATA_ID_FW_REV_LEN);
    g_assert_cmpstr(serial, ==, "QBSERIAL01");
    g_assert_cmpstr(model, ==, "QBLOCK HARDDISK");
    g_assert_cmpuint(strlen(fw), >, 0);

    g_assert_cmphex(id[ATA_ID_CONFIG] & 0x8000, ==, 0);    /* ATA device */
    g_assert_true(id[ATA_ID_CAPABILITY] & ATA_ID_CAP_LBA);
    g_assert_true(id[ATA_ID_CAPABILITY] & ATA_ID_CAP_DMA);
    g_assert_cmpuint(id[ATA_ID_LBA_CAPACITY] |
                     ((uint32_t)id[ATA_ID_LBA_CAPACITY + 1] << 16), ==,
                     sectors);
    g_assert_cmpuint(id[ATA_ID_LBA_CAPACITY_2] |
                     ((uint64_t)id[ATA_ID_LBA_CAPACITY_2 + 1] << 16) |
                     ((uint64_t)id[ATA_ID_LBA_CAPACITY_2 + 2] << 32) |
                     ((uint64_t)id[ATA_ID_LBA_CAPACITY_2 + 3] << 48), ==,
                     sectors);
    g_assert_cmpuint((uint32_t)id[ATA_ID_CYLS] * id[ATA_ID_HEADS] *
                     id[ATA_ID_SECTORS], <=, sectors);
    g_assert_cmpuint(id[ATA_ID_HEADS], ==, 16);
    g_assert_cmpuint(id[ATA_ID_SECTORS], ==, 63);
    g_assert_cmphex(id[ATA_ID_MAX_MULTSECT], ==, 0x8010);
    g_assert_cmphex(id[ATA_ID_MULTSECT], ==, 0x0110);
    g_assert_cmphex(id[ATA_ID_MWDMA_MODES] & 0xff, ==, 0x07);
    g_assert_cmphex(id[ATA_ID_UDMA_MODES], ==, 0x203f); /* UDMA5 selected */
    /* LBA48 and both flushes: supported and enabled */
    g_assert_cmphex(id[ATA_ID_COMMAND_SET_2] & 0xc000, ==, 0x4000);
    g_assert_true(id[ATA_ID_COMMAND_SET_2] & ATA_ID_CS2_LBA48);
    g_assert_true(id[ATA_ID_COMMAND_SET_2] & ATA_ID_CS2_FLUSH);
    g_assert_true(id[ATA_ID_COMMAND_SET_2] & ATA_ID_CS2_FLUSH_EXT);
    g_assert_true(id[ATA_ID_CFS_ENABLE_2] & ATA_ID_CS2_LBA48);
    g_assert_true(id[ATA_ID_CFS_ENABLE_2] & ATA_ID_CS2_FLUSH);
    g_assert_true(id[ATA_ID_CFS_ENABLE_2] & ATA_ID_CS2_FLUSH_EXT);
    g_assert_true(id[ATA_ID_CFSSE] & ATA_ID_CSE_FUA);
    g_assert_true(id[ATA_ID_COMMAND_SET_1] & ATA_ID_CS1_WCACHE);
    g_assert_true(id[ATA_ID_CFS_ENABLE_1] & ATA_ID_CS1_WCACHE);
    g_assert_cmphex(id[ATA_ID_INTEGRITY] & 0xff, ==, ATA_ID_INTEGRITY_SIG);
    for (int i = 0; i < ATA_ID_WORDS; i++) {
        sum += (id[i] & 0xff) + (id[i] >> 8);
    }
    g_assert_cmpuint(sum, ==, 0);
    fixture_close(&f);
}

/* The initial write cache state comes from the drive's cache mode. */
static void test_wce_from_cache_mode(void)
{
    IDEFixture f;

    fixture_open(&f, "raw", DISK_SIZE, "writethrough");
    g_assert_false(id_wce(f.ig));
    fixture_close(&f);
    fixture_open(&f, "raw", DISK_SIZE, "none");
    g_assert_true(id_wce(f.ig));
    fixture_close(&f);
}

static void test_pio_round_trip(void)
{
    IDEFixture f;
    uint8_t out[16 * 512], in[16 * 512], disk[16 * 512];
    unsigned irqs;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    qguest_pattern(out, sizeof(out), 100, 1);
    /* WRITE SECTORS: an interrupt after each of the 3 sectors */
    g_assert_cmphex(ide_guest_pio(f.ig, ATA_CMD_WRITE, 100, 3, 1, out,
                                  &irqs), ==, STATUS_OK);
    g_assert_cmpuint(irqs, ==, 3);
    g_assert_cmpint(blk_pread(f.blk, 100 * 512, 3 * 512, disk, 0), ==, 0);
    g_assert_cmpmem(disk, 3 * 512, out, 3 * 512);
    /* READ SECTORS: one interrupt per sector, none at the end */
    g_assert_cmphex(ide_guest_pio(f.ig, ATA_CMD_READ, 100, 3, 1, in, &irqs),
                    ==, STATUS_OK);
    g_assert_cmpuint(irqs, ==, 3);
    g_assert_cmpmem(in, 3 * 512, out, 3 * 512);

    /* READ/WRITE MULTIPLE in blocks of 4: 10 sectors are 3 blocks */
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_MULTIPLE, 0, 4), ==,
                    STATUS_OK);
    qguest_pattern(out, sizeof(out), 2000, 2);
    g_assert_cmphex(ide_guest_pio(f.ig, ATA_CMD_WRITE_MULTIPLE, 2000, 10, 4,
                                  out, &irqs), ==, STATUS_OK);
    g_assert_cmpuint(irqs, ==, 3);
    memset(in, 0, sizeof(in));
    g_assert_cmphex(ide_guest_pio(f.ig, ATA_CMD_READ_MULTIPLE_EXT, 2000, 10,
                                  4, in, &irqs), ==, STATUS_OK);
    g_assert_cmpuint(irqs, ==, 3);
    g_assert_cmpmem(in, 10 * 512, out, 10 * 512);
    /* the EXT forms address the same sectors */
    memset(in, 0, sizeof(in));
    g_assert_cmphex(ide_guest_pio(f.ig, ATA_CMD_READ_EXT, 2000, 10, 1, in,
                                  NULL), ==, STATUS_OK);
    g_assert_cmpmem(in, 10 * 512, out, 10 * 512);
    fixture_close(&f);
}

static void test_multiple_mode_checks(void)
{
    IDEFixture f;
    uint8_t buf[512];

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    /* not a power of two, and more than the 16 IDENTIFY word 47 allows */
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_MULTIPLE, 0, 3), ==,
                    STATUS_ERR);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_ERROR), ==, ATA_ERR_ABRT);
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_MULTIPLE, 0, 32), ==,
                    STATUS_ERR);
    /* 0 disables multiple mode: READ MULTIPLE is then aborted */
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_MULTIPLE, 0, 0), ==,
                    STATUS_OK);
    g_assert_cmphex(ide_guest_pio(f.ig, ATA_CMD_READ_MULTIPLE, 0, 1, 1, buf,
                                  NULL), ==, STATUS_ERR);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_ERROR), ==, ATA_ERR_ABRT);
    fixture_close(&f);
}

static void test_dma_round_trip(void)
{
    IDEFixture f;
    size_t len = 300 * 512;
    g_autofree uint8_t *out = g_malloc(len), *in = g_malloc(len);
    g_autofree uint8_t *disk = g_malloc(len);
    uint8_t bm;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    qguest_pattern(out, len, 5000, 3);
    /* PRDs of 3 KiB: 50 of them, one crossing the RAM halves' boundary */
    g_assert_cmphex(ide_guest_dma(f.ig, ATA_CMD_WRITE_DMA_EXT, 5000, 300, 3072,
                                  out, &bm), ==, STATUS_OK);
    /* the table was used up to its EOT: the bus master is no more active */
    g_assert_cmphex(bm & (BM_STATUS_ACTIVE | BM_STATUS_ERROR | BM_STATUS_INTR),
                    ==, BM_STATUS_INTR);
    g_assert_cmpint(blk_pread(f.blk, 5000 * 512, len, disk, 0), ==, 0);
    g_assert_cmpmem(disk, len, out, len);
    g_assert_cmphex(ide_guest_dma(f.ig, ATA_CMD_READ_DMA_EXT, 5000, 300, 0,
                                  in, &bm), ==, STATUS_OK);
    g_assert_cmpmem(in, len, out, len);
    /* 256 sectors: the 0 in the LBA28 count */
    memset(in, 0, len);
    g_assert_cmphex(ide_guest_dma(f.ig, ATA_CMD_READ_DMA, 5000, 256,
                                  65536, in, NULL), ==, STATUS_OK);
    g_assert_cmpmem(in, 256 * 512, out, 256 * 512);
    fixture_close(&f);
}

/* A PRD table larger than the transfer leaves the bus master active. */
static void test_dma_large_prdt(void)
{
    IDEFixture f;
    uint8_t bm, status;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    qguest_writel(f.ig->g, f.ig->prdt, f.ig->buf);
    qguest_writew(f.ig->g, f.ig->prdt + 4, 0);      /* 64 KiB */
    qguest_writew(f.ig->g, f.ig->prdt + 6, ATA_PRD_EOT);
    ide_bmdma_write(f.ig->bus, BM_REG_PRDT, 4, f.ig->prdt);
    ide_guest_taskfile(f.ig, ATA_CMD_READ_DMA, 0, 8, false);
    ide_bmdma_write(f.ig->bus, BM_REG_COMMAND, 1, BM_CMD_READ | BM_CMD_START);
    status = ide_guest_dma_finish(f.ig, &bm);
    g_assert_cmphex(status, ==, STATUS_OK);
    g_assert_cmphex(bm & (BM_STATUS_ACTIVE | BM_STATUS_INTR), ==,
                    BM_STATUS_ACTIVE | BM_STATUS_INTR);
    /* the driver's stop cleared ACTIVE */
    g_assert_cmphex(ide_bmdma_read(f.ig->bus, BM_REG_STATUS, 1) &
                    BM_STATUS_ACTIVE, ==, 0);
    fixture_close(&f);
}

/* Start before the command works too (some drivers do that). */
static void test_dma_start_first(void)
{
    IDEFixture f;
    uint8_t out[4 * 512], in[4 * 512];

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    qguest_pattern(out, sizeof(out), 7, 4);
    g_assert_cmpint(blk_pwrite(f.blk, 7 * 512, sizeof(out), out, 0), ==, 0);
    qguest_writel(f.ig->g, f.ig->prdt, f.ig->buf);
    qguest_writew(f.ig->g, f.ig->prdt + 4, sizeof(in));
    qguest_writew(f.ig->g, f.ig->prdt + 6, ATA_PRD_EOT);
    ide_bmdma_write(f.ig->bus, BM_REG_PRDT, 4, f.ig->prdt);
    ide_bmdma_write(f.ig->bus, BM_REG_COMMAND, 1, BM_CMD_READ | BM_CMD_START);
    ide_guest_taskfile(f.ig, ATA_CMD_READ_DMA, 7, 4, false);
    g_assert_cmphex(ide_guest_dma_finish(f.ig, NULL), ==, STATUS_OK);
    qguest_memread(f.ig->g, f.ig->buf, in, sizeof(in));
    g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
    fixture_close(&f);
}

/* LBA48 reaches past the 2^28 sectors (128 GiB) LBA28 can address. */
static void test_lba48(void)
{
    IDEFixture f;
    uint64_t lba = ATA_LBA28_MAX_SECTORS + 12345;
    uint8_t out[3 * 512], in[3 * 512], disk[3 * 512];
    uint16_t id[ATA_ID_WORDS];

    fixture_open(&f, "raw", 200 * GiB, "writeback");
    g_assert_cmphex(ide_guest_identify(f.ig, id), ==, STATUS_OK);
    /* words 60-61 saturate at 2^28 - 1, words 100-103 hold the size */
    g_assert_cmphex(id[ATA_ID_LBA_CAPACITY] |
                    ((uint32_t)id[ATA_ID_LBA_CAPACITY + 1] << 16), ==,
                    0x0fffffff);
    g_assert_cmpuint(id[ATA_ID_LBA_CAPACITY_2] |
                     ((uint64_t)id[ATA_ID_LBA_CAPACITY_2 + 1] << 16) |
                     ((uint64_t)id[ATA_ID_LBA_CAPACITY_2 + 2] << 32), ==,
                     200 * GiB / 512);
    qguest_pattern(out, sizeof(out), lba, 5);
    g_assert_cmphex(ide_guest_dma(f.ig, ATA_CMD_WRITE_DMA_EXT, lba, 3, 0,
                                  out, NULL), ==, STATUS_OK);
    g_assert_cmpint(blk_pread(f.blk, lba * 512, sizeof(disk), disk, 0), ==,
                    0);
    g_assert_cmpmem(disk, sizeof(disk), out, sizeof(out));
    g_assert_cmphex(ide_guest_pio(f.ig, ATA_CMD_READ_EXT, lba, 3, 1, in,
                                  NULL), ==, STATUS_OK);
    g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
    /* with the HOB bit, the registers read back the high bytes */
    ide_ctrl_write(f.ig->bus, ATA_DEVCTL_HOB);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_LBAL), ==,
                    (lba >> 24) & 0xff);
    ide_ctrl_write(f.ig->bus, 0);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_LBAL), ==, lba & 0xff);
    fixture_close(&f);
}

/* CHS addressing with the default translation (16 heads, 63 sectors). */
static void test_chs(void)
{
    IDEFixture f;
    uint8_t out[512], disk[512];
    uint32_t cyl = 7, head = 3, sect = 9;
    uint64_t lba = (cyl * 16 + head) * 63 + sect - 1;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    qguest_pattern(out, sizeof(out), lba, 6);
    ide_cmd_write(f.ig->bus, ATA_REG_NSECTOR, 1);
    ide_cmd_write(f.ig->bus, ATA_REG_LBAL, sect);
    ide_cmd_write(f.ig->bus, ATA_REG_LBAM, cyl);
    ide_cmd_write(f.ig->bus, ATA_REG_LBAH, 0);
    ide_cmd_write(f.ig->bus, ATA_REG_DEVICE, ATA_DEV_OBS | head);
    ide_cmd_write(f.ig->bus, ATA_REG_COMMAND, ATA_CMD_WRITE);
    g_assert_cmphex(ide_guest_wait_not_busy(f.ig) & ATA_STAT_DRQ, ==,
                    ATA_STAT_DRQ);
    for (int i = 0; i < 256; i++) {
        ide_data_write16(f.ig->bus, out[2 * i] | (out[2 * i + 1] << 8));
    }
    qguest_wait_irq(f.ig->g);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_STATUS), ==, STATUS_OK);
    g_assert_cmpint(blk_pread(f.blk, lba * 512, 512, disk, 0), ==, 0);
    g_assert_cmpmem(disk, 512, out, 512);
    /* sector 0 does not exist in CHS */
    ide_cmd_write(f.ig->bus, ATA_REG_LBAL, 0);
    ide_cmd_write(f.ig->bus, ATA_REG_COMMAND, ATA_CMD_READ);
    qguest_wait_irq(f.ig->g);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_STATUS), ==, STATUS_ERR);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_ERROR), ==, ATA_ERR_IDNF);
    fixture_close(&f);
}

/* Every data command past the end fails with IDNF and an interrupt. */
static void test_out_of_range(void)
{
    static const uint8_t cmds[] = {
        ATA_CMD_READ, ATA_CMD_WRITE, ATA_CMD_READ_EXT, ATA_CMD_READ_DMA,
        ATA_CMD_WRITE_DMA_EXT, ATA_CMD_VERIFY, ATA_CMD_VERIFY_EXT,
    };
    uint64_t sectors = DISK_SIZE / 512;
    IDEFixture f;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
        uint8_t cmd = cmds[i];
        bool lba48 = cmd == ATA_CMD_READ_EXT || cmd == ATA_CMD_VERIFY_EXT ||
                     cmd == ATA_CMD_WRITE_DMA_EXT;

        /* the last sector and the one after it */
        ide_guest_taskfile(f.ig, cmd, sectors - 1, 2, lba48);
        qguest_wait_irq(f.ig->g);
        g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_STATUS), ==,
                        STATUS_ERR);
        g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_ERROR), ==,
                        ATA_ERR_IDNF);
    }
    /* READ VERIFY inside the disk succeeds */
    ide_guest_taskfile(f.ig, ATA_CMD_VERIFY_EXT, sectors - 40, 40, true);
    qguest_wait_irq(f.ig->g);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_STATUS), ==, STATUS_OK);
    fixture_close(&f);
}

static void test_unknown_command(void)
{
    static const uint8_t cmds[] = {
        ATA_CMD_NOP, ATA_CMD_PACKET, ATA_CMD_IDENTIFY_PACKET, 0x61, 0xff,
    };
    IDEFixture f;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
        g_assert_cmphex(ide_guest_nodata(f.ig, cmds[i], 0, 0), ==,
                        STATUS_ERR);
        g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_ERROR), ==,
                        ATA_ERR_ABRT);
    }
    /* unknown SET FEATURES subcommands and transfer modes are refused */
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_FEATURES, 0x77, 0), ==,
                    STATUS_ERR);
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_SET_XFER_MODE, ATA_XFER_UDMA | 6),
                    ==, STATUS_ERR);
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_SET_XFER_MODE, ATA_XFER_MWDMA | 2),
                    ==, STATUS_OK);
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_CHECK_POWER_MODE, 0, 0),
                    ==, STATUS_OK);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_NSECTOR), ==,
                    ATA_POWER_ACTIVE);
    fixture_close(&f);
}

/* Bad PRD tables fail the command with ABRT and the bus master's ERROR. */
static void test_dma_hostile_prdt(void)
{
    IDEFixture f;
    IDEGuest *ig;
    uint64_t ram = 16 * MiB;
    uint8_t bm;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    ig = f.ig;

    /* a table outside guest RAM */
    ide_bmdma_write(ig->bus, BM_REG_PRDT, 4, 0xfff00000);
    ide_bmdma_write(ig->bus, BM_REG_COMMAND, 1, BM_CMD_READ);
    ide_guest_taskfile(ig, ATA_CMD_READ_DMA, 0, 1, false);
    ide_bmdma_write(ig->bus, BM_REG_COMMAND, 1, BM_CMD_READ | BM_CMD_START);
    g_assert_cmphex(ide_guest_dma_finish(ig, &bm), ==, STATUS_ERR);
    g_assert_cmphex(bm & (BM_STATUS_ERROR | BM_STATUS_ACTIVE), ==,
                    BM_STATUS_ERROR);

    /* a buffer that runs past the end of RAM */
    qguest_writel(ig->g, ig->prdt, ram - 256);
    qguest_writew(ig->g, ig->prdt + 4, 512);
    qguest_writew(ig->g, ig->prdt + 6, ATA_PRD_EOT);
    ide_bmdma_write(ig->bus, BM_REG_PRDT, 4, ig->prdt);
    ide_guest_taskfile(ig, ATA_CMD_READ_DMA, 0, 1, false);
    ide_bmdma_write(ig->bus, BM_REG_COMMAND, 1, BM_CMD_READ | BM_CMD_START);
    g_assert_cmphex(ide_guest_dma_finish(ig, &bm), ==, STATUS_ERR);
    g_assert_true(bm & BM_STATUS_ERROR);

    /* a table that ends (EOT) before the transfer does */
    qguest_writel(ig->g, ig->prdt, ig->buf);
    qguest_writew(ig->g, ig->prdt + 4, 512);
    qguest_writew(ig->g, ig->prdt + 6, ATA_PRD_EOT);
    ide_guest_taskfile(ig, ATA_CMD_READ_DMA, 0, 2, false);
    ide_bmdma_write(ig->bus, BM_REG_COMMAND, 1, BM_CMD_READ | BM_CMD_START);
    g_assert_cmphex(ide_guest_dma_finish(ig, &bm), ==, STATUS_ERR);
    g_assert_true(bm & BM_STATUS_ERROR);

    /* a whole 64 KiB of descriptors without EOT, each of 2 bytes */
    for (uint64_t i = 0; i < ATA_PRD_TABLE_MAX; i++) {
        qguest_writel(ig->g, ig->prdt + i * 8, ig->buf);
        qguest_writel(ig->g, ig->prdt + i * 8 + 4, 2);
    }
    ide_guest_taskfile(ig, ATA_CMD_READ_DMA_EXT, 0, 64, true);
    ide_bmdma_write(ig->bus, BM_REG_COMMAND, 1, BM_CMD_READ | BM_CMD_START);
    g_assert_cmphex(ide_guest_dma_finish(ig, &bm), ==, STATUS_ERR);
    g_assert_true(bm & BM_STATUS_ERROR);

    /* the direction bit says "to memory" for a WRITE DMA */
    qguest_writel(ig->g, ig->prdt, ig->buf);
    qguest_writew(ig->g, ig->prdt + 4, 512);
    qguest_writew(ig->g, ig->prdt + 6, ATA_PRD_EOT);
    ide_guest_taskfile(ig, ATA_CMD_WRITE_DMA, 0, 1, false);
    ide_bmdma_write(ig->bus, BM_REG_COMMAND, 1, BM_CMD_READ | BM_CMD_START);
    g_assert_cmphex(ide_guest_dma_finish(ig, &bm), ==, STATUS_ERR);
    g_assert_cmphex(ide_cmd_read(ig->bus, ATA_REG_ERROR), ==, ATA_ERR_ABRT);
    g_assert_true(bm & BM_STATUS_ERROR);

    /* and the channel still works */
    {
        uint8_t out[512], in[512];

        qguest_pattern(out, sizeof(out), 1, 7);
        g_assert_cmphex(ide_guest_dma(ig, ATA_CMD_WRITE_DMA, 1, 1, 0, out,
                                      NULL), ==, STATUS_OK);
        g_assert_cmphex(ide_guest_dma(ig, ATA_CMD_READ_DMA, 1, 1, 0, in,
                                      NULL), ==, STATUS_OK);
        g_assert_cmpmem(in, 512, out, 512);
    }
    fixture_close(&f);
}

/* I/O errors of the image: UNC for reads, ABRT for writes. */
static void test_io_error(void)
{
    g_autofree char *path = qguest_image_new("raw", DISK_SIZE);
    QDict *extra = qdict_new();
    BlockBackend *blk;
    IDEGuest *ig;
    uint8_t buf[4 * 512] = { 0 };

    qdict_put_str(extra, "file.driver", "blkdebug");
    qdict_put_str(extra, "file.image.driver", "file");
    qdict_put_str(extra, "file.image.filename", path);
    qdict_put_str(extra, "file.inject-error.0.event", "read_aio");
    qdict_put_str(extra, "file.inject-error.0.sector", "80");
    qdict_put_str(extra, "file.inject-error.1.event", "write_aio");
    qdict_put_str(extra, "file.inject-error.1.sector", "90");
    blk = qguest_blk_open(path, "raw", "writeback", extra);
    ig = ide_guest_new(blk);

    g_assert_cmphex(ide_guest_pio(ig, ATA_CMD_READ, 80, 1, 1, buf, NULL), ==,
                    STATUS_ERR);
    g_assert_cmphex(ide_cmd_read(ig->bus, ATA_REG_ERROR), ==, ATA_ERR_UNC);
    g_assert_cmpuint(ide_cmd_read(ig->bus, ATA_REG_LBAL), ==, 80);
    g_assert_cmphex(ide_guest_dma(ig, ATA_CMD_READ_DMA, 78, 4, 0, buf, NULL),
                    ==, STATUS_ERR);
    g_assert_cmphex(ide_cmd_read(ig->bus, ATA_REG_ERROR), ==, ATA_ERR_UNC);
    g_assert_cmphex(ide_guest_dma(ig, ATA_CMD_WRITE_DMA, 90, 1, 0, buf,
                                  NULL), ==, STATUS_ERR);
    g_assert_cmphex(ide_cmd_read(ig->bus, ATA_REG_ERROR), ==, ATA_ERR_ABRT);
    /* elsewhere the disk works */
    g_assert_cmphex(ide_guest_dma(ig, ATA_CMD_READ_DMA, 10, 4, 0, buf, NULL),
                    ==, STATUS_OK);
    ide_guest_free(ig);
    blk_unref(blk);
    unlink(path);
}

/* nIEN keeps the line low; the bus master still latches the interrupt. */
static void test_nien(void)
{
    IDEFixture f;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    ide_ctrl_write(f.ig->bus, ATA_DEVCTL_NIEN);
    ide_cmd_write(f.ig->bus, ATA_REG_COMMAND, ATA_CMD_IDENTIFY);
    g_assert_cmphex(ide_guest_wait_not_busy(f.ig), ==,
                    STATUS_OK | ATA_STAT_DRQ);
    qguest_settle();
    g_assert_cmpint(f.ig->g->irq_level, ==, 0);
    g_assert_true(ide_bmdma_read(f.ig->bus, BM_REG_STATUS, 1) &
                  BM_STATUS_INTR);
    /* enabling it shows the pending interrupt; reading Status clears it */
    ide_ctrl_write(f.ig->bus, 0);
    g_assert_cmpint(f.ig->g->irq_level, ==, 1);
    g_assert_cmphex(ide_ctrl_read(f.ig->bus), ==, STATUS_OK | ATA_STAT_DRQ);
    g_assert_cmpint(f.ig->g->irq_level, ==, 1);
    ide_cmd_read(f.ig->bus, ATA_REG_STATUS);
    g_assert_cmpint(f.ig->g->irq_level, ==, 0);
    for (int i = 0; i < ATA_ID_WORDS; i++) {
        ide_data_read16(f.ig->bus);
    }
    g_assert_cmphex(ide_ctrl_read(f.ig->bus), ==, STATUS_OK);
    fixture_close(&f);
}

/* SRST: BSY while held, the signature after; the write cache stays. */
static void test_srst(void)
{
    uint16_t id[ATA_ID_WORDS];
    IDEFixture f;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_DISABLE_WCE, 0), ==, STATUS_OK);
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_MULTIPLE, 0, 2), ==,
                    STATUS_OK);
    /* a DMA command waiting for the bus master is abandoned */
    ide_guest_taskfile(f.ig, ATA_CMD_READ_DMA, 0, 1, false);
    g_assert_true(ide_ctrl_read(f.ig->bus) & ATA_STAT_DRQ);
    ide_ctrl_write(f.ig->bus, ATA_DEVCTL_SRST);
    g_assert_cmphex(ide_ctrl_read(f.ig->bus), ==, ATA_STAT_BSY);
    ide_ctrl_write(f.ig->bus, 0);
    g_assert_cmphex(ide_ctrl_read(f.ig->bus), ==, STATUS_OK);
    g_assert_cmpint(f.ig->g->irq_level, ==, 0);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_NSECTOR), ==, 1);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_LBAL), ==, 1);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_LBAM), ==, 0);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_LBAH), ==, 0);
    g_assert_cmphex(ide_cmd_read(f.ig->bus, ATA_REG_ERROR), ==, ATA_DIAG_OK);
    g_assert_false(blk_enable_write_cache(f.blk));
    g_assert_false(id_wce(f.ig));
    /* settings revert by default (SET FEATURES CCh)... */
    g_assert_cmphex(ide_guest_identify(f.ig, id), ==, STATUS_OK);
    g_assert_cmphex(id[ATA_ID_MULTSECT], ==, 0x0110);
    /* ...and a hardware reset restores the configured write cache */
    ide_bus_reset(f.ig->bus);
    g_assert_true(blk_enable_write_cache(f.blk));
    g_assert_true(id_wce(f.ig));
    fixture_close(&f);
}

/* Flushes reaching the file node during one DMA write of @count sectors. */
static uint64_t dma_write_flushes(IDEFixture *f, uint8_t cmd, uint64_t lba,
                                  uint32_t count)
{
    g_autofree uint8_t *buf = g_malloc((size_t)count * 512);
    uint64_t before = qguest_file_flushes(f->blk);

    qguest_pattern(buf, (size_t)count * 512, lba, 8);
    g_assert_cmphex(ide_guest_dma(f->ig, cmd, lba, count, 0, buf, NULL), ==,
                    STATUS_OK);
    return qguest_file_flushes(f->blk) - before;
}

static uint64_t flush_cmd_flushes(IDEFixture *f, uint8_t cmd)
{
    uint64_t before = qguest_file_flushes(f->blk);

    g_assert_cmphex(ide_guest_nodata(f->ig, cmd, 0, 0), ==, STATUS_OK);
    return qguest_file_flushes(f->blk) - before;
}

/*
 * The scenario: SET FEATURES 82h, IDENTIFY word 85 off, each DMA
 * write then one flush of the file node; 02h stops that; FLUSH CACHE
 * flushes once.  Over raw and over qcow2 (overwrites).
 */
static void test_write_cache_toggle_fmt(const char *fmt)
{
    IDEFixture f;
    uint8_t buf[8 * 512];

    fixture_open(&f, fmt, DISK_SIZE, "writeback");
    /* allocate what the test overwrites, so qcow2 has no metadata work */
    qguest_pattern(buf, sizeof(buf), 0, 9);
    for (int i = 0; i < 8; i++) {
        g_assert_cmpint(blk_pwrite(f.blk, i * 64 * KiB, sizeof(buf), buf, 0),
                        ==, 0);
    }
    g_assert_cmpint(blk_flush(f.blk), ==, 0);
    g_assert_true(id_wce(f.ig));
    g_assert_cmpuint(dma_write_flushes(&f, ATA_CMD_WRITE_DMA, 0, 8), ==, 0);

    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_DISABLE_WCE, 0), ==, STATUS_OK);
    g_assert_false(blk_enable_write_cache(f.blk));
    g_assert_false(id_wce(f.ig));
    for (int i = 0; i < 5; i++) {
        uint8_t cmd = i % 2 ? ATA_CMD_WRITE_DMA_EXT : ATA_CMD_WRITE_DMA;

        g_assert_cmpuint(dma_write_flushes(&f, cmd, i * 128, 8), ==, 1);
    }
    /* PIO writes are writes too */
    {
        uint64_t before = qguest_file_flushes(f.blk);

        g_assert_cmphex(ide_guest_pio(f.ig, ATA_CMD_WRITE, 256, 1, 1, buf,
                                      NULL), ==, STATUS_OK);
        g_assert_cmpuint(qguest_file_flushes(f.blk) - before, ==, 1);
    }

    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_ENABLE_WCE, 0), ==, STATUS_OK);
    g_assert_true(blk_enable_write_cache(f.blk));
    g_assert_true(id_wce(f.ig));
    for (int i = 0; i < 3; i++) {
        g_assert_cmpuint(dma_write_flushes(&f, ATA_CMD_WRITE_DMA, i * 128, 8),
                         ==, 0);
    }
    g_assert_cmpuint(flush_cmd_flushes(&f, ATA_CMD_FLUSH_CACHE), ==, 1);
    /* nothing written since: the next flush has nothing to make durable */
    g_assert_cmpuint(flush_cmd_flushes(&f, ATA_CMD_FLUSH_CACHE_EXT), ==, 0);
    g_assert_cmpuint(dma_write_flushes(&f, ATA_CMD_WRITE_DMA, 0, 8), ==, 0);
    g_assert_cmpuint(flush_cmd_flushes(&f, ATA_CMD_FLUSH_CACHE_EXT), ==, 1);
    /* FUA in writeback flushes that write only */
    g_assert_cmpuint(dma_write_flushes(&f, ATA_CMD_WRITE_DMA_FUA_EXT, 0, 8),
                     ==, 1);
    g_assert_cmpuint(dma_write_flushes(&f, ATA_CMD_WRITE_DMA, 0, 8), ==, 0);
    fixture_close(&f);
}

static void test_write_cache_toggle_raw(void)
{
    test_write_cache_toggle_fmt("raw");
}

static void test_write_cache_toggle_qcow2(void)
{
    test_write_cache_toggle_fmt("qcow2");
}

/*
 * SET FEATURES 82h writes the cache back: data written in writeback is
 * durable once the command completes.
 */
static void test_disable_wce_flushes(void)
{
    IDEFixture f;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    g_assert_cmpuint(dma_write_flushes(&f, ATA_CMD_WRITE_DMA, 0, 8), ==, 0);
    g_assert_cmpuint(qguest_file_flushes(f.blk), ==, 0);
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_DISABLE_WCE, 0), ==, STATUS_OK);
    g_assert_cmpuint(qguest_file_flushes(f.blk), ==, 1);
    fixture_close(&f);
}

/*
 * A command written while the drive is busy is ignored (ATA forbids it),
 * so a SET FEATURES cannot overtake a DMA write in flight: the write
 * completes in the mode it was issued in, the toggle applies after.
 */
static void test_toggle_while_busy(void)
{
    IDEFixture f;
    uint64_t before;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    before = qguest_file_flushes(f.blk);
    ide_guest_dma_start(f.ig, ATA_CMD_WRITE_DMA, 0, 64, 0);
    g_assert_true(ide_ctrl_read(f.ig->bus) & ATA_STAT_BSY);
    ide_cmd_write(f.ig->bus, ATA_REG_FEATURE, ATA_SF_DISABLE_WCE);
    ide_cmd_write(f.ig->bus, ATA_REG_COMMAND, ATA_CMD_SET_FEATURES);
    g_assert_true(blk_enable_write_cache(f.blk));
    g_assert_cmphex(ide_guest_dma_finish(f.ig, NULL), ==, STATUS_OK);
    g_assert_cmpuint(qguest_file_flushes(f.blk) - before, ==, 0);
    g_assert_true(blk_enable_write_cache(f.blk));
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_DISABLE_WCE, 0), ==, STATUS_OK);
    g_assert_false(blk_enable_write_cache(f.blk));
    fixture_close(&f);
}

/* ---- device state ---- */

static void save_channel(IDEGuest *ig, VMStateBuffer *b)
{
    vmstate_buffer_init(b);
    vmstate_save_header(b);
    g_assert_cmpint(vmstate_save(b, &vmstate_ide_bus, 0, ig->bus,
                                 &error_abort), ==, 0);
}

/* Loads @b into @ig's channel; NULL or the error message. */
static char *load_channel(IDEGuest *ig, VMStateBuffer *b)
{
    Error *err = NULL;
    char *msg = NULL;

    b->pos = 0;
    if (vmstate_load_header(b, &err) == 0) {
        vmstate_load(b, &vmstate_ide_bus, 0, ig->bus, &err);
    }
    if (err) {
        msg = g_strdup(error_get_pretty(err));
        error_free(err);
    }
    return msg;
}

/* A channel on a fresh BlockBackend of the same image (the target). */
static void fixture_reopen(IDEFixture *f, IDEFixture *target,
                           const char *mode)
{
    target->path = NULL;
    target->blk = qguest_blk_open(f->path, "raw", mode, NULL);
    target->ig = ide_guest_new(target->blk);
}

static void fixture_close_target(IDEFixture *t)
{
    ide_guest_free(t->ig);
    blk_unref(t->blk);
}

/*
 * The guest turned the write cache off; after a load into a fresh device
 * whose drive defaults to writeback, IDENTIFY shows it off and every write
 * is flushed, and the other settings came along.
 */
static void test_vmstate_write_cache(void)
{
    IDEFixture f, t;
    uint16_t id[ATA_ID_WORDS];
    VMStateBuffer b;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_DISABLE_WCE, 0), ==, STATUS_OK);
    g_assert_cmphex(ide_guest_nodata(f.ig, ATA_CMD_SET_MULTIPLE, 0, 8), ==,
                    STATUS_OK);
    save_channel(f.ig, &b);

    fixture_reopen(&f, &t, "writeback");
    g_assert_true(id_wce(t.ig));
    g_assert_null(load_channel(t.ig, &b));
    g_assert_false(blk_enable_write_cache(t.blk));
    g_assert_cmphex(ide_guest_identify(t.ig, id), ==, STATUS_OK);
    g_assert_false(id[ATA_ID_CFS_ENABLE_1] & ATA_ID_CS1_WCACHE);
    g_assert_cmphex(id[ATA_ID_MULTSECT], ==, 0x0108);
    for (int i = 0; i < 3; i++) {
        g_assert_cmpuint(dma_write_flushes(&t, ATA_CMD_WRITE_DMA, i * 8, 8),
                         ==, 1);
    }
    /* and the other way round: a cache enabled in the state is enabled */
    g_assert_cmphex(ide_guest_nodata(t.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_ENABLE_WCE, 0), ==, STATUS_OK);
    vmstate_buffer_destroy(&b);
    save_channel(t.ig, &b);
    fixture_close_target(&t);
    fixture_reopen(&f, &t, "writethrough");
    g_assert_null(load_channel(t.ig, &b));
    g_assert_true(id_wce(t.ig));
    g_assert_cmpuint(dma_write_flushes(&t, ATA_CMD_WRITE_DMA, 0, 8), ==, 0);
    fixture_close_target(&t);
    vmstate_buffer_destroy(&b);
    fixture_close(&f);
}

/* A PIO write half done moves to the new device and finishes there. */
static void test_vmstate_pio_in_progress(void)
{
    IDEFixture f, t;
    uint8_t out[2 * 512], disk[2 * 512];
    VMStateBuffer b;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    qguest_pattern(out, sizeof(out), 40, 11);
    ide_guest_taskfile(f.ig, ATA_CMD_WRITE, 40, 2, false);
    g_assert_true(ide_guest_wait_not_busy(f.ig) & ATA_STAT_DRQ);
    for (int i = 0; i < 100; i++) {
        ide_data_write16(f.ig->bus, out[2 * i] | (out[2 * i + 1] << 8));
    }
    save_channel(f.ig, &b);

    fixture_reopen(&f, &t, "writeback");
    g_assert_null(load_channel(t.ig, &b));
    g_assert_cmphex(ide_ctrl_read(t.ig->bus), ==, STATUS_OK | ATA_STAT_DRQ);
    for (int i = 100; i < 256; i++) {
        ide_data_write16(t.ig->bus, out[2 * i] | (out[2 * i + 1] << 8));
    }
    qguest_wait_irq(t.ig->g);
    g_assert_true(ide_cmd_read(t.ig->bus, ATA_REG_STATUS) & ATA_STAT_DRQ);
    for (int i = 256; i < 512; i++) {
        ide_data_write16(t.ig->bus, out[2 * i] | (out[2 * i + 1] << 8));
    }
    qguest_wait_irq(t.ig->g);
    g_assert_cmphex(ide_cmd_read(t.ig->bus, ATA_REG_STATUS), ==, STATUS_OK);
    g_assert_cmpint(blk_pread(t.blk, 40 * 512, sizeof(disk), disk, 0), ==, 0);
    g_assert_cmpmem(disk, sizeof(disk), out, sizeof(out));
    fixture_close_target(&t);
    vmstate_buffer_destroy(&b);
    fixture_close(&f);
}

/* A DMA command waiting for the bus master runs once the target starts it. */
static void test_vmstate_dma_waiting(void)
{
    IDEFixture f, t;
    uint8_t out[4 * 512], in[4 * 512];
    VMStateBuffer b;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    qguest_pattern(out, sizeof(out), 60, 12);
    g_assert_cmpint(blk_pwrite(f.blk, 60 * 512, sizeof(out), out, 0), ==, 0);
    qguest_writel(f.ig->g, f.ig->prdt, f.ig->buf);
    qguest_writew(f.ig->g, f.ig->prdt + 4, sizeof(in));
    qguest_writew(f.ig->g, f.ig->prdt + 6, ATA_PRD_EOT);
    ide_bmdma_write(f.ig->bus, BM_REG_PRDT, 4, f.ig->prdt);
    ide_bmdma_write(f.ig->bus, BM_REG_COMMAND, 1, BM_CMD_READ);
    ide_guest_taskfile(f.ig, ATA_CMD_READ_DMA, 60, 4, false);
    save_channel(f.ig, &b);

    /* the target's guest memory holds the same PRD table */
    fixture_reopen(&f, &t, "writeback");
    qguest_writel(t.ig->g, t.ig->prdt, t.ig->buf);
    qguest_writew(t.ig->g, t.ig->prdt + 4, sizeof(in));
    qguest_writew(t.ig->g, t.ig->prdt + 6, ATA_PRD_EOT);
    g_assert_null(load_channel(t.ig, &b));
    ide_bmdma_write(t.ig->bus, BM_REG_COMMAND, 1, BM_CMD_READ | BM_CMD_START);
    g_assert_cmphex(ide_guest_dma_finish(t.ig, NULL), ==, STATUS_OK);
    qguest_memread(t.ig->g, t.ig->buf, in, sizeof(in));
    g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
    fixture_close_target(&t);
    vmstate_buffer_destroy(&b);
    fixture_close(&f);
}

static void test_vmstate_busy_refused(void)
{
    IDEFixture f;
    VMStateBuffer b;
    Error *err = NULL;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    ide_guest_dma_start(f.ig, ATA_CMD_WRITE_DMA, 0, 64, 0);
    g_assert_true(ide_bus_busy(f.ig->bus));
    vmstate_buffer_init(&b);
    g_assert_cmpint(vmstate_save(&b, &vmstate_ide_bus, 0, f.ig->bus, &err),
                    ==, -EBUSY);
    g_assert_cmpstr(error_get_pretty(err), ==, "IDE unit 0 has a request in "
                    "flight; drain it before saving");
    error_free(err);
    g_assert_cmphex(ide_guest_dma_finish(f.ig, NULL), ==, STATUS_OK);
    g_assert_cmpint(vmstate_save(&b, &vmstate_ide_bus, 0, f.ig->bus,
                                 &error_abort), ==, 0);
    vmstate_buffer_destroy(&b);
    fixture_close(&f);
}

/* The offset of field @name's value in the stream (the first such). */
static size_t stream_field(VMStateBuffer *b, const char *name)
{
    size_t len = strlen(name);

    for (size_t i = 0; i + 1 + len + 5 < b->data->len; i++) {
        if (b->data->data[i] == len &&
            !memcmp(b->data->data + i + 1, name, len)) {
            return i + 1 + len + 5;
        }
    }
    g_error("no field '%s' in the stream", name);
}

static void stream_put(VMStateBuffer *b, size_t off, uint64_t val,
                       int size)
{
    for (int i = 0; i < size; i++) {
        b->data->data[off + i] = val >> (8 * (size - 1 - i));
    }
}

typedef struct HostileField {
    const char *name;
    uint64_t value;
    int size;
    const char *error;
} HostileField;

/* Values a crafted stream could hold, each refused by the check named. */
static void test_vmstate_hostile(void)
{
    static const HostileField cases[] = {
        { "data_pos", 600, 4, "PIO window 600-512" },
        { "data_end", 65536, 4, "is not inside the 8192-byte buffer" },
        { "data_pos", 3, 4, "PIO window 3-512" },
        { "xfer", 99, 1, "transfer state 99 cannot be saved" },
        { "xfer", 5, 1, "transfer state 5 cannot be saved" },  /* VERIFY */
        { "lba", DISK_SIZE / 512 - 1, 8, "is outside the disk" },
        { "mult_sectors", 3, 1, "settings out of range (multiple 3" },
        { "xfer_mode", 0x47, 1, "transfer mode 0x47" },
        { "heads", 0, 1, "0 heads" },
        { "status", ATA_STAT_DRDY, 1, "does not match transfer state" },
        { "saved_nb_sectors", 1, 8, "the state is of a disk of 1 sectors" },
        { "block_sectors", 17, 4, "PIO block of 17 sectors" },
    };
    IDEFixture f, t;
    VMStateBuffer b;

    fixture_open(&f, "raw", DISK_SIZE, "writeback");
    /* a state with a PIO read in progress: data_pos 0 of 512 */
    ide_guest_taskfile(f.ig, ATA_CMD_READ, 10, 4, false);
    qguest_wait_irq(f.ig->g);
    save_channel(f.ig, &b);
    fixture_reopen(&f, &t, "writeback");
    g_assert_null(load_channel(t.ig, &b));
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const HostileField *c = &cases[i];
        VMStateBuffer bad;
        g_autofree char *msg = NULL;

        vmstate_buffer_init_data(&bad, b.data->data, b.data->len);
        stream_put(&bad, stream_field(&bad, c->name), c->value, c->size);
        msg = load_channel(t.ig, &bad);
        g_assert_nonnull(msg);
        if (!strstr(msg, c->error)) {
            g_error("%s=%" PRIu64 ": expected '%s' in: %s", c->name,
                    c->value, c->error, msg);
        }
        vmstate_buffer_destroy(&bad);
        /* a failed load leaves the state undefined: reset before reuse */
        ide_bus_reset(t.ig->bus);
    }
    fixture_close_target(&t);

    /* a channel without the drive the state has */
    {
        QGuest *g = qguest_new(1 * MiB);
        IDEBus *empty = ide_bus_new(&g->mem, &g->irq);
        Error *err = NULL;

        b.pos = 0;
        g_assert_cmpint(vmstate_load_header(&b, &error_abort), ==, 0);
        g_assert_cmpint(vmstate_load(&b, &vmstate_ide_bus, 0, empty, &err),
                        <, 0);
        g_assert_cmpstr(error_get_pretty(err), ==, "IDE unit 0: the state "
                        "has a drive, this channel has none");
        error_free(err);
        ide_bus_free(empty);
        qguest_free(g);
    }
    vmstate_buffer_destroy(&b);
    fixture_close(&f);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();

    g_test_add_func("/ide/identify", test_identify);
    g_test_add_func("/ide/wce-from-cache-mode", test_wce_from_cache_mode);
    g_test_add_func("/ide/pio-round-trip", test_pio_round_trip);
    g_test_add_func("/ide/multiple-mode-checks", test_multiple_mode_checks);
    g_test_add_func("/ide/dma-round-trip", test_dma_round_trip);
    g_test_add_func("/ide/dma-large-prdt", test_dma_large_prdt);
    g_test_add_func("/ide/dma-start-first", test_dma_start_first);
    g_test_add_func("/ide/lba48", test_lba48);
    g_test_add_func("/ide/chs", test_chs);
    g_test_add_func("/ide/out-of-range", test_out_of_range);
    g_test_add_func("/ide/unknown-command", test_unknown_command);
    g_test_add_func("/ide/dma-hostile-prdt", test_dma_hostile_prdt);
    g_test_add_func("/ide/io-error", test_io_error);
    g_test_add_func("/ide/nien", test_nien);
    g_test_add_func("/ide/srst", test_srst);
    g_test_add_func("/ide/write-cache-toggle/raw",
                    test_write_cache_toggle_raw);
    g_test_add_func("/ide/write-cache-toggle/qcow2",
                    test_write_cache_toggle_qcow2);
    g_test_add_func("/ide/disable-wce-flushes", test_disable_wce_flushes);
    g_test_add_func("/ide/toggle-while-busy", test_toggle_while_busy);
    g_test_add_func("/ide/vmstate/write-cache", test_vmstate_write_cache);
    g_test_add_func("/ide/vmstate/pio-in-progress",
                    test_vmstate_pio_in_progress);
    g_test_add_func("/ide/vmstate/dma-waiting", test_vmstate_dma_waiting);
    g_test_add_func("/ide/vmstate/busy-refused", test_vmstate_busy_refused);
    g_test_add_func("/ide/vmstate/hostile", test_vmstate_hostile);
    return g_test_run();
}
