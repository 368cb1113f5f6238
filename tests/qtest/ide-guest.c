/*
 * A guest driver for hw/ide (see ide-guest.h).
 */

#include "ide-guest.h"

#define IDE_GUEST_RAM      (16 * MiB)
#define IDE_GUEST_BUF_SIZE (4 * MiB)

static void ide_guest_reset(void *opaque)
{
    ide_bus_reset(opaque);
}

IDEGuest *ide_guest_new(BlockBackend *blk)
{
    IDEGuest *ig = g_new0(IDEGuest, 1);
    IDEDriveConf conf = { .blk = blk, .serial = "QBSERIAL01" };

    ig->g = qguest_new(IDE_GUEST_RAM);
    ig->bus = ide_bus_new(&ig->g->mem, &ig->g->irq);
    g_assert_cmpint(ide_bus_attach(ig->bus, 0, &conf, &error_abort), ==, 0);
    g_assert_cmpint(savevm_register_device(ig->g->savevm, &vmstate_ide_bus, 0,
                                           ig->bus, ide_guest_reset,
                                           &error_abort), ==, 0);
    g_assert_cmpint(savevm_register_drive(ig->g->savevm, "ide0-hd0", blk,
                                          &error_abort), ==, 0);
    ig->prdt = qguest_alloc(ig->g, 64 * KiB, 64 * KiB);
    /* the data buffer straddles the boundary between the two RAM halves */
    ig->buf = IDE_GUEST_RAM / 2 - IDE_GUEST_BUF_SIZE / 2;
    ig->buf_size = IDE_GUEST_BUF_SIZE;
    g_assert_cmpuint(ig->g->alloc_next, <=, ig->buf);
    return ig;
}

void ide_guest_free(IDEGuest *ig)
{
    ide_bus_free(ig->bus);
    qguest_free(ig->g);
    g_free(ig);
}

static bool ide_guest_not_busy(void *opaque)
{
    IDEGuest *ig = opaque;

    return !(ide_ctrl_read(ig->bus) & ATA_STAT_BSY);
}

uint8_t ide_guest_wait_not_busy(IDEGuest *ig)
{
    qguest_wait(ide_guest_not_busy, ig);
    return ide_ctrl_read(ig->bus);
}

void ide_guest_taskfile(IDEGuest *ig, uint8_t cmd, uint64_t lba,
                        uint32_t count, bool lba48)
{
    IDEBus *bus = ig->bus;

    if (lba48) {
        ide_cmd_write(bus, ATA_REG_NSECTOR, count >> 8);
        ide_cmd_write(bus, ATA_REG_LBAL, lba >> 24);
        ide_cmd_write(bus, ATA_REG_LBAM, lba >> 32);
        ide_cmd_write(bus, ATA_REG_LBAH, lba >> 40);
        ide_cmd_write(bus, ATA_REG_NSECTOR, count);
        ide_cmd_write(bus, ATA_REG_LBAL, lba);
        ide_cmd_write(bus, ATA_REG_LBAM, lba >> 8);
        ide_cmd_write(bus, ATA_REG_LBAH, lba >> 16);
        ide_cmd_write(bus, ATA_REG_DEVICE, ATA_DEV_LBA);
    } else {
        ide_cmd_write(bus, ATA_REG_NSECTOR, count);
        ide_cmd_write(bus, ATA_REG_LBAL, lba);
        ide_cmd_write(bus, ATA_REG_LBAM, lba >> 8);
        ide_cmd_write(bus, ATA_REG_LBAH, lba >> 16);
        ide_cmd_write(bus, ATA_REG_DEVICE,
                      ATA_DEV_OBS | ATA_DEV_LBA | ((lba >> 24) & 0x0f));
    }
    ide_cmd_write(bus, ATA_REG_COMMAND, cmd);
}

uint8_t ide_guest_nodata(IDEGuest *ig, uint8_t cmd, uint8_t feature,
                         uint8_t nsector)
{
    ide_cmd_write(ig->bus, ATA_REG_FEATURE, feature);
    ide_cmd_write(ig->bus, ATA_REG_NSECTOR, nsector);
    ide_cmd_write(ig->bus, ATA_REG_COMMAND, cmd);
    qguest_wait_irq(ig->g);
    return ide_cmd_read(ig->bus, ATA_REG_STATUS);
}

uint8_t ide_guest_identify(IDEGuest *ig, uint16_t id[ATA_ID_WORDS])
{
    uint8_t status;

    ide_cmd_write(ig->bus, ATA_REG_COMMAND, ATA_CMD_IDENTIFY);
    qguest_wait_irq(ig->g);
    status = ide_cmd_read(ig->bus, ATA_REG_STATUS);
    g_assert_cmphex(status, ==, ATA_STAT_DRDY | ATA_STAT_DSC | ATA_STAT_DRQ);
    for (int i = 0; i < ATA_ID_WORDS; i++) {
        id[i] = ide_data_read16(ig->bus);
    }
    return ide_ctrl_read(ig->bus);
}

bool ide_guest_is_write_cmd(uint8_t cmd)
{
    switch (cmd) {
    case ATA_CMD_WRITE:
    case ATA_CMD_WRITE_EXT:
    case ATA_CMD_WRITE_MULTIPLE:
    case ATA_CMD_WRITE_MULTIPLE_EXT:
    case ATA_CMD_WRITE_MULTIPLE_FUA_EXT:
    case ATA_CMD_WRITE_DMA:
    case ATA_CMD_WRITE_DMA_EXT:
    case ATA_CMD_WRITE_DMA_FUA_EXT:
        return true;
    default:
        return false;
    }
}

static bool ide_guest_is_lba48(uint8_t cmd)
{
    switch (cmd) {
    case ATA_CMD_READ_EXT:
    case ATA_CMD_WRITE_EXT:
    case ATA_CMD_READ_MULTIPLE_EXT:
    case ATA_CMD_WRITE_MULTIPLE_EXT:
    case ATA_CMD_WRITE_MULTIPLE_FUA_EXT:
    case ATA_CMD_READ_DMA_EXT:
    case ATA_CMD_WRITE_DMA_EXT:
    case ATA_CMD_WRITE_DMA_FUA_EXT:
    case ATA_CMD_VERIFY_EXT:
        return true;
    default:
        return false;
    }
}

uint8_t ide_guest_pio(IDEGuest *ig, uint8_t cmd, uint64_t lba,
                      uint32_t count, uint32_t block, void *buf,
                      unsigned *irqs)
{
    bool is_write = ide_guest_is_write_cmd(cmd);
    uint8_t *p = buf;
    unsigned n_irqs = 0;
    uint32_t done = 0;
    uint8_t status;

    ide_guest_taskfile(ig, cmd, lba, count, ide_guest_is_lba48(cmd));
    if (is_write) {
        /* the first block is asked for without an interrupt */
        status = ide_guest_wait_not_busy(ig);
    } else {
        qguest_wait_irq(ig->g);
        n_irqs++;
        status = ide_cmd_read(ig->bus, ATA_REG_STATUS);
    }
    while (done < count && (status & ATA_STAT_DRQ)) {
        uint32_t n = MIN(block, count - done);

        for (uint32_t i = 0; i < n * 256; i++) {
            uint8_t *w = p + (size_t)done * 512 + i * 2;

            if (is_write) {
                ide_data_write16(ig->bus, w[0] | (w[1] << 8));
            } else {
                uint16_t v = ide_data_read16(ig->bus);

                w[0] = v;
                w[1] = v >> 8;
            }
        }
        done += n;
        if (is_write || done < count) {
            qguest_wait_irq(ig->g);
            n_irqs++;
            status = ide_cmd_read(ig->bus, ATA_REG_STATUS);
        } else {
            status = ide_ctrl_read(ig->bus);
        }
    }
    if (irqs) {
        *irqs = n_irqs;
    }
    return status;
}

static void ide_guest_build_prdt(IDEGuest *ig, uint64_t bytes,
                                 uint32_t prd_bytes)
{
    uint64_t off = 0;
    int i = 0;

    prd_bytes = prd_bytes ? prd_bytes : ATA_PRD_MAX_BYTES;
    g_assert_cmpuint(bytes, <=, ig->buf_size);
    while (off < bytes) {
        uint32_t n = MIN(prd_bytes, bytes - off);
        uint64_t e = ig->prdt + i * sizeof(ATAPrd);

        qguest_writel(ig->g, e, ig->buf + off);
        qguest_writew(ig->g, e + 4, n == ATA_PRD_MAX_BYTES ? 0 : n);
        qguest_writew(ig->g, e + 6, off + n == bytes ? ATA_PRD_EOT : 0);
        off += n;
        i++;
    }
}

void ide_guest_dma_start(IDEGuest *ig, uint8_t cmd, uint64_t lba,
                         uint32_t count, uint32_t prd_bytes)
{
    bool is_write = ide_guest_is_write_cmd(cmd);
    IDEBus *bus = ig->bus;

    ide_guest_build_prdt(ig, (uint64_t)count * 512, prd_bytes);
    /* libata's order: set up the bus master, issue, then start it */
    ide_bmdma_write(bus, BM_REG_PRDT, 4, ig->prdt);
    ide_bmdma_write(bus, BM_REG_COMMAND, 1, is_write ? 0 : BM_CMD_READ);
    ide_bmdma_write(bus, BM_REG_STATUS, 1,
                    BM_STATUS_ERROR | BM_STATUS_INTR | BM_STATUS_DMA_CAP(0));
    ide_guest_taskfile(ig, cmd, lba, count, ide_guest_is_lba48(cmd));
    ide_bmdma_write(bus, BM_REG_COMMAND, 1,
                    (is_write ? 0 : BM_CMD_READ) | BM_CMD_START);
}

uint8_t ide_guest_dma_finish(IDEGuest *ig, uint8_t *bm_status)
{
    IDEBus *bus = ig->bus;
    uint8_t bm, status;

    qguest_wait_irq(ig->g);
    bm = ide_bmdma_read(bus, BM_REG_STATUS, 1);
    if (bm_status) {
        *bm_status = bm;
    }
    ide_bmdma_write(bus, BM_REG_COMMAND, 1,
                    ide_bmdma_read(bus, BM_REG_COMMAND, 1) & ~BM_CMD_START);
    status = ide_cmd_read(bus, ATA_REG_STATUS);
    ide_bmdma_write(bus, BM_REG_STATUS, 1,
                    BM_STATUS_ERROR | BM_STATUS_INTR | BM_STATUS_DMA_CAP(0));
    return status;
}

uint8_t ide_guest_dma(IDEGuest *ig, uint8_t cmd, uint64_t lba,
                      uint32_t count, uint32_t prd_bytes, void *buf,
                      uint8_t *bm_status)
{
    bool is_write = ide_guest_is_write_cmd(cmd);
    size_t bytes = (size_t)count * 512;
    uint8_t status;

    if (is_write) {
        qguest_memwrite(ig->g, ig->buf, buf, bytes);
    } else {
        qguest_memset(ig->g, ig->buf, 0xcc, bytes);
    }
    ide_guest_dma_start(ig, cmd, lba, count, prd_bytes);
    status = ide_guest_dma_finish(ig, bm_status);
    if (!is_write && !(status & ATA_STAT_ERR)) {
        qguest_memread(ig->g, ig->buf, buf, bytes);
    }
    return status;
}
