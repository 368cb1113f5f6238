/*
 * IDENTIFY DEVICE data of the ATA disk: the 256 words a driver reads to
 * learn the disk's size, transfer modes and features (ATA8-ACS 7.16).
 *
 * Invariants:
 *  1. Words 85 bit 5 (write cache enabled) is the BlockBackend's write
 *     cache flag at the moment of the command, never a copy.
 *  2. Every "supported" bit names a command or feature the model
 *     implements (ide-core.c); the matching "enabled" bit is its current
 *     state.
 *  3. Word 255 makes the 512 bytes sum to zero modulo 256.
 */

#include "ide-internal.h"

static void ide_id_put(uint8_t *id, int word, uint16_t val)
{
    id[2 * word] = val;
    id[2 * word + 1] = val >> 8;
}

/* ATA strings: space padded, two characters per word, first one high. */
static void ide_id_put_string(uint8_t *id, int word, const char *str,
                              int len)
{
    size_t n = strlen(str);

    for (int i = 0; i < len; i++) {
        char c = i < (int)n ? str[i] : ' ';

        id[2 * word + (i ^ 1)] = c;
    }
}

/* The SET FEATURES 03h value in effect, as words 63 and 88 show it. */
static void ide_id_put_xfer_modes(IDEState *s, uint8_t *id)
{
    uint16_t mwdma = 0x0007;    /* multiword DMA 0-2 supported */
    uint16_t udma = 0x003f;     /* Ultra DMA 0-5 supported */
    unsigned mode = s->xfer_mode & ATA_XFER_MODE_MASK;

    switch (s->xfer_mode & ATA_XFER_CLASS_MASK) {
    case ATA_XFER_MWDMA:
        mwdma |= 1 << (8 + mode);
        break;
    case ATA_XFER_UDMA:
        udma |= 1 << (8 + mode);
        break;
    }
    ide_id_put(id, ATA_ID_MWDMA_MODES, mwdma);
    ide_id_put(id, ATA_ID_UDMA_MODES, udma);
}

void ide_identify_fill(IDEState *s, uint8_t *id)
{
    uint64_t lba28 = MIN(s->nb_sectors, (uint64_t)ATA_LBA28_MAX_SECTORS - 1);
    uint32_t cur_capacity = (uint32_t)s->default_cyls * s->heads * s->secs;
    uint16_t wcache = blk_enable_write_cache(s->blk) ? ATA_ID_CS1_WCACHE : 0;
    uint8_t sum = 0;

    memset(id, 0, ATA_ID_WORDS * 2);
    /* a fixed, non-removable ATA device */
    ide_id_put(id, ATA_ID_CONFIG, 0x0040);
    ide_id_put(id, ATA_ID_CYLS, s->default_cyls);
    ide_id_put(id, ATA_ID_HEADS, s->default_heads);
    ide_id_put(id, ATA_ID_SECTORS, s->default_secs);
    ide_id_put_string(id, ATA_ID_SERNO, s->serial, ATA_ID_SERNO_LEN);
    ide_id_put_string(id, ATA_ID_FW_REV, s->firmware, ATA_ID_FW_REV_LEN);
    ide_id_put_string(id, ATA_ID_PROD, s->model, ATA_ID_PROD_LEN);
    /* bits 15:8 are 80h by definition; 7:0 the largest multiple block */
    ide_id_put(id, ATA_ID_MAX_MULTSECT, 0x8000 | IDE_MAX_MULT_SECTORS);
    ide_id_put(id, ATA_ID_CAPABILITY,
               ATA_ID_CAP_IORDY | ATA_ID_CAP_LBA | ATA_ID_CAP_DMA);
    ide_id_put(id, ATA_ID_CAPABILITY_2, ATA_ID_VALID_01);
    ide_id_put(id, ATA_ID_OLD_PIO_MODES, 0x0200);
    /* words 54-58, 64-70 and 88 are valid */
    ide_id_put(id, ATA_ID_FIELD_VALID, 0x0007);
    ide_id_put(id, ATA_ID_CUR_CYLS, s->default_cyls);
    ide_id_put(id, ATA_ID_CUR_HEADS, s->heads);
    ide_id_put(id, ATA_ID_CUR_SECTORS, s->secs);
    ide_id_put(id, ATA_ID_CUR_CAPACITY, cur_capacity);
    ide_id_put(id, ATA_ID_CUR_CAPACITY + 1, cur_capacity >> 16);
    /* bit 8: the multiple setting in bits 7:0 is valid */
    ide_id_put(id, ATA_ID_MULTSECT, s->mult_sectors ? 0x0100 |
               s->mult_sectors : 0);
    ide_id_put(id, ATA_ID_LBA_CAPACITY, lba28);
    ide_id_put(id, ATA_ID_LBA_CAPACITY + 1, lba28 >> 16);
    ide_id_put_xfer_modes(s, id);
    /* PIO modes 3 and 4; minimum cycle times of 120 ns */
    ide_id_put(id, ATA_ID_PIO_MODES, 0x0003);
    ide_id_put(id, ATA_ID_EIDE_DMA_MIN, 120);
    ide_id_put(id, ATA_ID_EIDE_DMA_TIME, 120);
    ide_id_put(id, ATA_ID_EIDE_PIO, 120);
    ide_id_put(id, ATA_ID_EIDE_PIO_IORDY, 120);
    /* ATA/ATAPI-4 to ATA/ATAPI-7 */
    ide_id_put(id, ATA_ID_MAJOR_VER, 0x00f0);
    ide_id_put(id, ATA_ID_COMMAND_SET_1,
               ATA_ID_CS1_PM | ATA_ID_CS1_WCACHE | ATA_ID_CS1_LOOKAHEAD);
    ide_id_put(id, ATA_ID_COMMAND_SET_2, ATA_ID_VALID_01 |
               ATA_ID_CS2_FLUSH_EXT | ATA_ID_CS2_FLUSH | ATA_ID_CS2_LBA48);
    ide_id_put(id, ATA_ID_CFSSE, ATA_ID_VALID_01 | ATA_ID_CSE_FUA);
    ide_id_put(id, ATA_ID_CFS_ENABLE_1, ATA_ID_CS1_PM | wcache |
               (s->look_ahead ? ATA_ID_CS1_LOOKAHEAD : 0));
    ide_id_put(id, ATA_ID_CFS_ENABLE_2,
               ATA_ID_CS2_FLUSH_EXT | ATA_ID_CS2_FLUSH | ATA_ID_CS2_LBA48);
    ide_id_put(id, ATA_ID_CSF_DEFAULT, ATA_ID_VALID_01 | ATA_ID_CSE_FUA);
    /*
     * Hardware reset result: valid (bit 14), an 80-conductor cable
     * (bit 13, which lets a driver pick UDMA modes above 2), and the
     * device's jumper-selected number, diagnostics passed.
     */
    ide_id_put(id, ATA_ID_HW_CONFIG, 0x6000 |
               (s->unit ? 0x0b00 : 0x000b));
    for (int i = 0; i < 4; i++) {
        ide_id_put(id, ATA_ID_LBA_CAPACITY_2 + i, s->nb_sectors >> (16 * i));
    }
    /* one 512-byte logical sector per physical sector (bit 14: valid) */
    ide_id_put(id, ATA_ID_SECTOR_SIZE, ATA_ID_VALID_01);

    id[2 * ATA_ID_INTEGRITY] = ATA_ID_INTEGRITY_SIG;
    for (int i = 0; i < ATA_ID_WORDS * 2 - 1; i++) {
        sum += id[i];
    }
    id[2 * ATA_ID_INTEGRITY + 1] = -sum;
}
