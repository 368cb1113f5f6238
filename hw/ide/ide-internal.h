/*
 * The IDE channel's private state, shared by the files of hw/ide:
 * ide-core.c (registers, commands, PIO), ide-dma.c (bus master),
 * ide-identify.c (IDENTIFY data) and ide-vmstate.c (device state).
 *
 * Calling conventions: everything runs in the thread of the drives'
 * AioContext; register accesses come from the guest side (outside
 * coroutine context), completions from the event loop.
 */
#ifndef HW_IDE_INTERNAL_H
#define HW_IDE_INTERNAL_H

#include "hw/ide.h"
#include "hw/ata.h"

/*
 * Largest READ/WRITE MULTIPLE block: 16 sectors (8 KiB) is what disks
 * commonly announce and what Linux uses; it sizes the PIO buffer.
 */
#define IDE_MAX_MULT_SECTORS 16
#define IDE_IO_BUFFER_SIZE   (IDE_MAX_MULT_SECTORS * ATA_SECTOR_SIZE)
_Static_assert(IDE_IO_BUFFER_SIZE >= ATA_ID_WORDS * 2,
               "IDENTIFY data fits the PIO buffer");

/* What the command in progress transfers (IDEState.xfer). */
typedef enum IDETransfer {
    IDE_XFER_NONE,      /* no data: idle, or a non-data command running */
    IDE_XFER_PIO_IN,    /* PIO data-in: READ SECTORS/MULTIPLE, IDENTIFY */
    IDE_XFER_PIO_OUT,   /* PIO data-out: WRITE SECTORS/MULTIPLE */
    IDE_XFER_DMA_IN,    /* READ DMA: device to guest memory */
    IDE_XFER_DMA_OUT,   /* WRITE DMA: guest memory to device */
    IDE_XFER_VERIFY,    /* READ VERIFY: reads, transfers nothing */
    IDE_XFER__MAX,
} IDETransfer;

typedef struct IDEState {
    /* --- set by ide_bus_attach, immutable --- */
    IDEBus *bus;
    BlockBackend *blk;          /* NULL: no drive at this unit */
    uint8_t unit;
    bool wce_default;           /* the write cache after a hardware reset */
    uint64_t nb_sectors;
    uint16_t default_cyls;      /* CHS geometry reported by IDENTIFY */
    uint8_t default_heads;
    uint8_t default_secs;
    char serial[ATA_ID_SERNO_LEN + 1];
    char model[ATA_ID_PROD_LEN + 1];
    char firmware[ATA_ID_FW_REV_LEN + 1];

    /* --- guest-visible registers --- */
    uint8_t feature, nsector, lbal, lbam, lbah;
    /* the previous contents, read with HOB and used by LBA48 commands */
    uint8_t hob_feature, hob_nsector, hob_lbal, hob_lbam, hob_lbah;
    uint8_t device;
    uint8_t status;
    uint8_t error;
    bool irq_pending;           /* this device asserts INTRQ */

    /* --- settings (SET FEATURES, SET MULTIPLE, INITIALIZE DEVICE) --- */
    uint8_t mult_sectors;       /* 0: multiple mode disabled */
    uint8_t xfer_mode;          /* SET FEATURES 03h value in effect */
    bool look_ahead;
    bool revert_on_srst;        /* SRST restores the defaults */
    uint8_t heads;              /* CHS translation in effect */
    uint8_t secs;

    /* --- copied by save for load to apply or check (ide-vmstate.c) --- */
    bool wce;                   /* the BlockBackend's write cache flag */
    bool present;               /* blk != NULL */
    uint64_t saved_nb_sectors;

    /* --- the command in progress --- */
    uint8_t cmd;
    uint8_t xfer;               /* IDETransfer */
    bool fua;                   /* writes carry BDRV_REQ_FUA */
    uint64_t lba;               /* next sector to transfer */
    uint32_t remaining;         /* sectors not yet transferred */
    uint32_t block_sectors;     /* sectors per DRQ block (PIO) */
    /* PIO: the guest moves io_buffer[data_pos, data_end) through DATA */
    uint32_t data_pos;
    uint32_t data_end;
    uint8_t io_buffer[IDE_IO_BUFFER_SIZE];

    /* --- the request in flight (not saved: save needs none) --- */
    bool aio_pending;
    uint32_t aio_sectors;
    QEMUIOVector pio_qiov;      /* over io_buffer */
    QEMUIOVector dma_qiov;      /* over guest memory */
    bool dma_exact;             /* the transfer ends at the PRD table's EOT */
} IDEState;

/* The channel's bus-master registers (one channel of a PIIX BMIDE). */
typedef struct IDEBMDMA {
    uint8_t cmd;
    uint8_t status;
    uint32_t prdt;
} IDEBMDMA;

struct IDEBus {
    IDEState ifs[2];
    GuestMemory mem;
    IRQLine irq;
    uint8_t devctl;             /* Device Control as last written */
    IDEBMDMA bm;
    /* the level last put on the line (recomputed, not saved) */
    int irq_level;
};

/* The drive that the device register currently selects. */
static inline IDEState *ide_selected(IDEBus *bus)
{
    return &bus->ifs[(bus->ifs[0].device & ATA_DEV_DEV) ? 1 : 0];
}

/* ide-core.c: command completion, used by the DMA engine. */
void ide_raise_irq(IDEState *s);
void ide_update_irq(IDEBus *bus);
void ide_cmd_done(IDEState *s);
void ide_cmd_abort(IDEState *s, uint8_t error);
/* Fails the command in progress with an I/O error at sector @lba. */
void ide_cmd_io_error(IDEState *s, uint64_t lba);
/* Puts the SET FEATURES/SET MULTIPLE settings back to their defaults. */
void ide_drive_reset_settings(IDEState *s);

/* True for a SET FEATURES 03h transfer mode the disk supports. */
bool ide_xfer_mode_valid(uint8_t mode);

/* ide-dma.c */
/* A DMA command is set up: transfer now if the bus master runs. */
void ide_dma_cmd_ready(IDEState *s);
void ide_bmdma_reset(IDEBus *bus);

/* ide-identify.c: fills @id (256 little-endian words) for drive @s. */
void ide_identify_fill(IDEState *s, uint8_t *id);

#endif
