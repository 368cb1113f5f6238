/*
 * The ATA disk on an IDE channel: registers, command execution, PIO data
 * transfers, reset and interrupts (ATA8-ACS; ATA/ATAPI-7 for the register
 * protocol of a parallel channel).  Bus-master DMA is in ide-dma.c.
 *
 * States of a drive, as its Status register shows them:
 *
 *              command (non-data, or failed at once): done + IRQ
 *            +------------------------------------------------+
 *            v                                                |
 *   IDLE (DRDY) --READ/VERIFY/FLUSH/SET FEATURES 82h--> BUSY (BSY)
 *     ^  |  |                                          |   ^  |
 *     |  |  +--WRITE [MULTIPLE]--> DRQ_OUT --block in--+   |  |
 *     |  |                           ^                     |  |
 *     |  |                           +--more: DRQ + IRQ----+  |
 *     |  +--READ DMA/WRITE DMA--> DMA_WAIT --BM start--> BUSY |
 *     |                                                       |
 *     +---last block out of DRQ_IN / request done + IRQ-------+
 *                                 BUSY --block read--> DRQ_IN (+ IRQ)
 *
 *   IDLE:     status DRDY|DSC (|ERR after a failed command)
 *   BUSY:     status BSY, a request in flight (aio_pending) or SRST held
 *   DRQ_IN:   status DRDY|DSC|DRQ, xfer PIO_IN: the guest reads a block
 *   DRQ_OUT:  status DRDY|DSC|DRQ, xfer PIO_OUT: the guest writes a block
 *   DMA_WAIT: status DRDY|DSC|DRQ, xfer DMA_*: waits for the bus master
 *
 * Transitions: ide_exec_cmd() leaves IDLE; ide_pio_read_cb() enters
 * DRQ_IN; ide_pio_block_end() leaves DRQ_IN/DRQ_OUT; ide_pio_write_cb(),
 * ide_verify_cb() and ide_flush_cb() complete requests; ide-dma.c leaves
 * DMA_WAIT and completes DMA; ide_ctrl_write() (SRST) and ide_bus_reset()
 * force IDLE from anywhere, waiting for the request in flight first.
 *
 * Invariants:
 *  1. aio_pending implies status == BSY; a drive has at most one request
 *     in flight.  At most one drive of the channel is past IDLE: the
 *     other cannot be selected meanwhile (invariant 6).
 *  2. DRQ is set exactly in DRQ_IN, DRQ_OUT (data_pos < data_end) and
 *     DMA_WAIT.
 *  3. The interrupt line is high exactly when the selected drive has
 *     irq_pending and Device Control's nIEN is clear (ide_update_irq()).
 *     Reading Status or writing Command clears irq_pending.
 *  4. The write cache state is the BlockBackend's flag (ide-identify.c
 *     invariant 1); only save/load copy it, into IDEState.wce.
 *  5. lba and remaining describe what is left after the request in
 *     flight's predecessors: a completed request advances them by the
 *     sectors it moved (aio_sectors), a failed one leaves them at its
 *     start, whose address the LBA registers then report.
 *  6. Writes to command block registers while the selected drive shows
 *     BSY or DRQ are ignored, as ATA allows: a host must not make them.
 */

#include "config-host.h"
#include "ide-internal.h"

/* Default CHS geometry of the translated disk (what BIOSes expect). */
#define IDE_DEFAULT_HEADS 16
#define IDE_DEFAULT_SECS  63
#define IDE_MAX_CYLS      16383

static const char ide_default_model[] = "QBLOCK HARDDISK";

/* ---- interrupts and completion ---- */

void ide_update_irq(IDEBus *bus)
{
    IDEState *s = ide_selected(bus);
    int level = s->irq_pending && !(bus->devctl & ATA_DEVCTL_NIEN);

    if (level != bus->irq_level) {
        bus->irq_level = level;
        irq_line_set(&bus->irq, level);
    }
}

void ide_raise_irq(IDEState *s)
{
    s->irq_pending = true;
    /* the bus master latches every INTRQ of the channel */
    s->bus->bm.status |= BM_STATUS_INTR;
    ide_update_irq(s->bus);
}

void ide_cmd_done(IDEState *s)
{
    s->status = ATA_STAT_DRDY | ATA_STAT_DSC;
    s->xfer = IDE_XFER_NONE;
    ide_raise_irq(s);
}

void ide_cmd_abort(IDEState *s, uint8_t error)
{
    s->status = ATA_STAT_DRDY | ATA_STAT_DSC | ATA_STAT_ERR;
    s->error = error;
    s->xfer = IDE_XFER_NONE;
    ide_raise_irq(s);
}

static bool ide_cmd_is_lba48(uint8_t cmd)
{
    switch (cmd) {
    case ATA_CMD_READ_EXT:
    case ATA_CMD_READ_DMA_EXT:
    case ATA_CMD_READ_MULTIPLE_EXT:
    case ATA_CMD_WRITE_EXT:
    case ATA_CMD_WRITE_DMA_EXT:
    case ATA_CMD_WRITE_MULTIPLE_EXT:
    case ATA_CMD_WRITE_DMA_FUA_EXT:
    case ATA_CMD_WRITE_MULTIPLE_FUA_EXT:
    case ATA_CMD_VERIFY_EXT:
    case ATA_CMD_FLUSH_CACHE_EXT:
        return true;
    default:
        return false;
    }
}

/* Puts @lba into the address registers, as the command addressed it. */
static void ide_set_lba(IDEState *s, uint64_t lba)
{
    if (ide_cmd_is_lba48(s->cmd)) {
        s->lbal = lba;
        s->lbam = lba >> 8;
        s->lbah = lba >> 16;
        s->hob_lbal = lba >> 24;
        s->hob_lbam = lba >> 32;
        s->hob_lbah = lba >> 40;
    } else if (s->device & ATA_DEV_LBA) {
        s->lbal = lba;
        s->lbam = lba >> 8;
        s->lbah = lba >> 16;
        s->device = (s->device & ~ATA_DEV_HEAD_MASK) |
                    ((lba >> 24) & ATA_DEV_HEAD_MASK);
    } else {
        uint32_t track = lba / s->secs;
        uint32_t cyl = track / s->heads;

        s->lbal = lba % s->secs + 1;
        s->lbam = cyl;
        s->lbah = cyl >> 8;
        s->device = (s->device & ~ATA_DEV_HEAD_MASK) | (track % s->heads);
    }
}

void ide_cmd_io_error(IDEState *s, uint64_t lba)
{
    bool is_read = s->xfer == IDE_XFER_PIO_IN ||
                   s->xfer == IDE_XFER_DMA_IN || s->xfer == IDE_XFER_VERIFY;

    ide_set_lba(s, lba);
    ide_cmd_abort(s, is_read ? ATA_ERR_UNC : ATA_ERR_ABRT);
}

/* ---- settings ---- */

void ide_drive_reset_settings(IDEState *s)
{
    s->mult_sectors = IDE_MAX_MULT_SECTORS;
    s->xfer_mode = ATA_XFER_UDMA | 5;
    s->look_ahead = true;
    s->revert_on_srst = true;
    s->heads = s->default_heads;
    s->secs = s->default_secs;
}

/* The registers' values after reset and diagnostics: the ATA signature. */
static void ide_set_signature(IDEState *s)
{
    s->nsector = s->hob_nsector = 1;
    s->lbal = s->hob_lbal = 1;
    s->lbam = s->hob_lbam = 0;
    s->lbah = s->hob_lbah = 0;
    s->feature = s->hob_feature = 0;
    s->device = 0;
    s->error = ATA_DIAG_OK;
}

/* Leaves whatever the drive did: waits for its request (invariant 1). */
static void ide_drive_quiesce(IDEState *s)
{
    if (s->aio_pending) {
        blk_drain(s->blk);
    }
    assert(!s->aio_pending);
    s->xfer = IDE_XFER_NONE;
    s->data_pos = s->data_end = 0;
    s->remaining = 0;
    s->irq_pending = false;
}

/* ---- request submission ---- */

/* Reads or writes @n sectors at s->lba through io_buffer. */
static void ide_submit_pio(IDEState *s, uint32_t n, bool is_write,
                           BlockCompletionFunc *cb)
{
    assert(n > 0 && n <= IDE_MAX_MULT_SECTORS);
    s->status = ATA_STAT_BSY;
    s->aio_pending = true;
    s->aio_sectors = n;
    qemu_iovec_init_buf(&s->pio_qiov, s->io_buffer, n * ATA_SECTOR_SIZE);
    if (is_write) {
        blk_aio_pwritev(s->blk, s->lba * ATA_SECTOR_SIZE, &s->pio_qiov,
                        s->fua ? BDRV_REQ_FUA : 0, cb, s);
    } else {
        blk_aio_preadv(s->blk, s->lba * ATA_SECTOR_SIZE, &s->pio_qiov, 0,
                       cb, s);
    }
}

/* Invariant 5: the request that just finished moved aio_sectors. */
static void ide_request_advance(IDEState *s)
{
    s->lba += s->aio_sectors;
    s->remaining -= s->aio_sectors;
}

/*
 * One piece of a command that runs in pieces finished with @ret: an
 * error or the last piece ends the command; true while more remains.
 */
static bool ide_request_continue(IDEState *s, int ret)
{
    s->aio_pending = false;
    if (ret < 0) {
        ide_cmd_io_error(s, s->lba);
        return false;
    }
    ide_request_advance(s);
    if (!s->remaining) {
        ide_cmd_done(s);
        return false;
    }
    return true;
}

/* ---- PIO ---- */

static void ide_pio_read_cb(void *opaque, int ret)
{
    IDEState *s = opaque;

    s->aio_pending = false;
    if (ret < 0) {
        ide_cmd_io_error(s, s->lba);
        return;
    }
    s->data_pos = 0;
    s->data_end = s->aio_sectors * ATA_SECTOR_SIZE;
    ide_request_advance(s);
    s->status = ATA_STAT_DRDY | ATA_STAT_DSC | ATA_STAT_DRQ;
    ide_raise_irq(s);
}

static void ide_pio_read_next(IDEState *s)
{
    ide_submit_pio(s, MIN(s->remaining, s->block_sectors), false,
                   ide_pio_read_cb);
}

/* DRQ_OUT: the guest is to write the next block. */
static void ide_pio_expect_block(IDEState *s)
{
    s->data_pos = 0;
    s->data_end = MIN(s->remaining, s->block_sectors) * ATA_SECTOR_SIZE;
    s->status = ATA_STAT_DRDY | ATA_STAT_DSC | ATA_STAT_DRQ;
}

static void ide_pio_write_cb(void *opaque, int ret)
{
    IDEState *s = opaque;

    if (ide_request_continue(s, ret)) {
        ide_pio_expect_block(s);
        ide_raise_irq(s);
    }
}

/* The guest has moved the whole block through the data register. */
static void ide_pio_block_end(IDEState *s)
{
    if (s->xfer == IDE_XFER_PIO_OUT) {
        ide_submit_pio(s, s->data_end / ATA_SECTOR_SIZE, true,
                       ide_pio_write_cb);
    } else if (s->remaining) {
        ide_pio_read_next(s);
    } else {
        /* the end of a data-in command raises no interrupt */
        s->status = ATA_STAT_DRDY | ATA_STAT_DSC;
        s->xfer = IDE_XFER_NONE;
    }
}

/* The drive whose data register is accessible, or NULL. */
static IDEState *ide_pio_drive(IDEBus *bus, bool is_write)
{
    IDEState *s = ide_selected(bus);

    if (!s->blk || !(s->status & ATA_STAT_DRQ) ||
        s->xfer != (is_write ? IDE_XFER_PIO_OUT : IDE_XFER_PIO_IN)) {
        return NULL;
    }
    assert(s->data_pos < s->data_end && s->data_end <= IDE_IO_BUFFER_SIZE);
    return s;
}

uint16_t ide_data_read16(IDEBus *bus)
{
    IDEState *s = ide_pio_drive(bus, false);
    uint16_t val;

    if (!s) {
        return 0xffff;
    }
    val = s->io_buffer[s->data_pos] | (s->io_buffer[s->data_pos + 1] << 8);
    s->data_pos += 2;
    if (s->data_pos >= s->data_end) {
        ide_pio_block_end(s);
    }
    return val;
}

void ide_data_write16(IDEBus *bus, uint16_t val)
{
    IDEState *s = ide_pio_drive(bus, true);

    if (!s) {
        return;
    }
    s->io_buffer[s->data_pos] = val;
    s->io_buffer[s->data_pos + 1] = val >> 8;
    s->data_pos += 2;
    if (s->data_pos >= s->data_end) {
        ide_pio_block_end(s);
    }
}

/* 32-bit accesses are two 16-bit ones, low half first. */
uint32_t ide_data_read32(IDEBus *bus)
{
    uint32_t lo = ide_data_read16(bus);

    return lo | ((uint32_t)ide_data_read16(bus) << 16);
}

void ide_data_write32(IDEBus *bus, uint32_t val)
{
    ide_data_write16(bus, val);
    ide_data_write16(bus, val >> 16);
}

/* ---- commands ---- */

/*
 * The range of a read/write/verify command, checked against the disk;
 * false (and the command aborted with IDNF) if it does not fit.
 */
static bool ide_cmd_range(IDEState *s, uint64_t *lba, uint32_t *count)
{
    if (ide_cmd_is_lba48(s->cmd)) {
        *count = (s->hob_nsector << 8) | s->nsector;
        *count = *count ? *count : ATA_LBA48_MAX_COUNT;
        *lba = ((uint64_t)s->hob_lbah << 40) | ((uint64_t)s->hob_lbam << 32) |
               ((uint64_t)s->hob_lbal << 24) | (s->lbah << 16) |
               (s->lbam << 8) | s->lbal;
    } else if (s->device & ATA_DEV_LBA) {
        *count = s->nsector ? s->nsector : ATA_LBA28_MAX_COUNT;
        *lba = ((uint64_t)(s->device & ATA_DEV_HEAD_MASK) << 24) |
               (s->lbah << 16) | (s->lbam << 8) | s->lbal;
    } else {
        uint32_t cyl = (s->lbah << 8) | s->lbam;
        uint32_t head = s->device & ATA_DEV_HEAD_MASK;

        *count = s->nsector ? s->nsector : ATA_LBA28_MAX_COUNT;
        if (s->lbal == 0 || s->lbal > s->secs || head >= s->heads) {
            ide_cmd_abort(s, ATA_ERR_IDNF);
            return false;
        }
        *lba = ((uint64_t)cyl * s->heads + head) * s->secs + s->lbal - 1;
    }
    if (*lba > s->nb_sectors || s->nb_sectors - *lba < *count) {
        ide_set_lba(s, MIN(*lba, s->nb_sectors));
        ide_cmd_abort(s, ATA_ERR_IDNF);
        return false;
    }
    return true;
}

/* Sets up a read/write/verify of the addressed range; false if aborted. */
static bool ide_start_transfer(IDEState *s, IDETransfer xfer,
                               uint32_t block_sectors)
{
    uint64_t lba;
    uint32_t count;

    if (!ide_cmd_range(s, &lba, &count)) {
        return false;
    }
    s->xfer = xfer;
    s->lba = lba;
    s->remaining = count;
    s->block_sectors = block_sectors;
    return true;
}

static void ide_cmd_read_pio(IDEState *s, uint32_t block_sectors)
{
    if (ide_start_transfer(s, IDE_XFER_PIO_IN, block_sectors)) {
        ide_pio_read_next(s);
    }
}

static void ide_cmd_write_pio(IDEState *s, uint32_t block_sectors)
{
    if (ide_start_transfer(s, IDE_XFER_PIO_OUT, block_sectors)) {
        ide_pio_expect_block(s);
    }
}

static void ide_cmd_multiple(IDEState *s, bool is_write)
{
    if (!s->mult_sectors) {
        ide_cmd_abort(s, ATA_ERR_ABRT);
    } else if (is_write) {
        ide_cmd_write_pio(s, s->mult_sectors);
    } else {
        ide_cmd_read_pio(s, s->mult_sectors);
    }
}

static void ide_cmd_dma(IDEState *s, bool is_write)
{
    if (ide_start_transfer(s, is_write ? IDE_XFER_DMA_OUT : IDE_XFER_DMA_IN,
                           0)) {
        ide_dma_cmd_ready(s);
    }
}

static void ide_verify_cb(void *opaque, int ret)
{
    IDEState *s = opaque;

    if (ide_request_continue(s, ret)) {
        ide_submit_pio(s, MIN(s->remaining, IDE_MAX_MULT_SECTORS), false,
                       ide_verify_cb);
    }
}

/* READ VERIFY reads the range from the image, transferring nothing. */
static void ide_cmd_verify(IDEState *s)
{
    if (ide_start_transfer(s, IDE_XFER_VERIFY, IDE_MAX_MULT_SECTORS)) {
        ide_submit_pio(s, MIN(s->remaining, IDE_MAX_MULT_SECTORS), false,
                       ide_verify_cb);
    }
}

static void ide_flush_cb(void *opaque, int ret)
{
    IDEState *s = opaque;

    s->aio_pending = false;
    if (ret < 0) {
        ide_cmd_abort(s, ATA_ERR_ABRT);
    } else {
        ide_cmd_done(s);
    }
}

static void ide_flush(IDEState *s)
{
    s->status = ATA_STAT_BSY;
    s->aio_pending = true;
    s->aio_sectors = 0;
    blk_aio_flush(s->blk, ide_flush_cb, s);
}

static void ide_cmd_identify(IDEState *s)
{
    ide_identify_fill(s, s->io_buffer);
    s->xfer = IDE_XFER_PIO_IN;
    s->remaining = 0;
    s->data_pos = 0;
    s->data_end = ATA_ID_WORDS * 2;
    s->status = ATA_STAT_DRDY | ATA_STAT_DSC | ATA_STAT_DRQ;
    ide_raise_irq(s);
}

bool ide_xfer_mode_valid(uint8_t mode)
{
    unsigned n = mode & ATA_XFER_MODE_MASK;

    switch (mode & ATA_XFER_CLASS_MASK) {
    case ATA_XFER_PIO_DEFAULT:
        return n <= 1;      /* 00h: default, 01h: default without IORDY */
    case ATA_XFER_PIO:
        return n <= 4;
    case ATA_XFER_MWDMA:
        return n <= 2;
    case ATA_XFER_UDMA:
        return n <= 5;
    default:
        return false;
    }
}

static void ide_cmd_set_features(IDEState *s)
{
    switch (s->feature) {
    case ATA_SF_ENABLE_WCE:
        blk_set_enable_write_cache(s->blk, true);
        break;
    case ATA_SF_DISABLE_WCE:
        /* a disk writes its cache back when the cache is turned off */
        blk_set_enable_write_cache(s->blk, false);
        ide_flush(s);
        return;
    case ATA_SF_SET_XFER_MODE:
        if (!ide_xfer_mode_valid(s->nsector)) {
            ide_cmd_abort(s, ATA_ERR_ABRT);
            return;
        }
        s->xfer_mode = s->nsector;
        break;
    case ATA_SF_ENABLE_LOOKAHEAD:
    case ATA_SF_DISABLE_LOOKAHEAD:
        s->look_ahead = s->feature == ATA_SF_ENABLE_LOOKAHEAD;
        break;
    case ATA_SF_ENABLE_REVERT:
    case ATA_SF_DISABLE_REVERT:
        s->revert_on_srst = s->feature == ATA_SF_ENABLE_REVERT;
        break;
    default:
        ide_cmd_abort(s, ATA_ERR_ABRT);
        return;
    }
    ide_cmd_done(s);
}

static void ide_cmd_set_multiple(IDEState *s)
{
    if (s->nsector > IDE_MAX_MULT_SECTORS ||
        (s->nsector && !is_power_of_2(s->nsector))) {
        ide_cmd_abort(s, ATA_ERR_ABRT);
        return;
    }
    s->mult_sectors = s->nsector;
    ide_cmd_done(s);
}

static void ide_cmd_init_dev_params(IDEState *s)
{
    if (s->nsector == 0) {
        ide_cmd_abort(s, ATA_ERR_ABRT);
        return;
    }
    s->secs = s->nsector;
    s->heads = (s->device & ATA_DEV_HEAD_MASK) + 1;
    ide_cmd_done(s);
}

/* EXECUTE DEVICE DIAGNOSTIC: both devices run it, device 0 reports. */
static void ide_cmd_diagnose(IDEBus *bus)
{
    for (int i = 0; i < 2; i++) {
        IDEState *d = &bus->ifs[i];

        ide_set_signature(d);
        if (d->blk) {
            d->status = ATA_STAT_DRDY | ATA_STAT_DSC;
        }
    }
    if (bus->ifs[0].blk) {
        ide_raise_irq(&bus->ifs[0]);
    }
}

static void ide_exec_cmd(IDEBus *bus, uint8_t cmd)
{
    IDEState *s = ide_selected(bus);

    if (!s->blk || (s->status & (ATA_STAT_BSY | ATA_STAT_DRQ))) {
        /* no device to run it, or invariant 6 */
        return;
    }
    s->irq_pending = false;
    ide_update_irq(bus);
    s->cmd = cmd;
    s->error = 0;
    s->fua = false;

    switch (cmd) {
    case ATA_CMD_IDENTIFY:
        ide_cmd_identify(s);
        break;
    case ATA_CMD_READ:
    case ATA_CMD_READ_NORETRY:
    case ATA_CMD_READ_EXT:
        ide_cmd_read_pio(s, 1);
        break;
    case ATA_CMD_WRITE:
    case ATA_CMD_WRITE_NORETRY:
    case ATA_CMD_WRITE_EXT:
        ide_cmd_write_pio(s, 1);
        break;
    case ATA_CMD_READ_MULTIPLE:
    case ATA_CMD_READ_MULTIPLE_EXT:
        ide_cmd_multiple(s, false);
        break;
    case ATA_CMD_WRITE_MULTIPLE_FUA_EXT:
        s->fua = true;
        /* fall through */
    case ATA_CMD_WRITE_MULTIPLE:
    case ATA_CMD_WRITE_MULTIPLE_EXT:
        ide_cmd_multiple(s, true);
        break;
    case ATA_CMD_READ_DMA:
    case ATA_CMD_READ_DMA_NORETRY:
    case ATA_CMD_READ_DMA_EXT:
        ide_cmd_dma(s, false);
        break;
    case ATA_CMD_WRITE_DMA_FUA_EXT:
        s->fua = true;
        /* fall through */
    case ATA_CMD_WRITE_DMA:
    case ATA_CMD_WRITE_DMA_NORETRY:
    case ATA_CMD_WRITE_DMA_EXT:
        ide_cmd_dma(s, true);
        break;
    case ATA_CMD_VERIFY:
    case ATA_CMD_VERIFY_NORETRY:
    case ATA_CMD_VERIFY_EXT:
        ide_cmd_verify(s);
        break;
    case ATA_CMD_FLUSH_CACHE:
    case ATA_CMD_FLUSH_CACHE_EXT:
        ide_flush(s);
        break;
    case ATA_CMD_SET_FEATURES:
        ide_cmd_set_features(s);
        break;
    case ATA_CMD_SET_MULTIPLE:
        ide_cmd_set_multiple(s);
        break;
    case ATA_CMD_INIT_DEV_PARAMS:
        ide_cmd_init_dev_params(s);
        break;
    case ATA_CMD_CHECK_POWER_MODE:
        s->nsector = ATA_POWER_ACTIVE;
        ide_cmd_done(s);
        break;
    case ATA_CMD_STANDBY_IMMEDIATE:
    case ATA_CMD_IDLE_IMMEDIATE:
    case ATA_CMD_STANDBY:
    case ATA_CMD_IDLE:
        /* an image never spins down */
        ide_cmd_done(s);
        break;
    case ATA_CMD_DIAGNOSE:
        ide_cmd_diagnose(bus);
        break;
    default:
        if ((cmd & 0xf0) == ATA_CMD_RECALIBRATE) {
            ide_cmd_done(s);
            break;
        }
        /* NOP, PACKET, IDENTIFY PACKET and everything unknown */
        ide_cmd_abort(s, ATA_ERR_ABRT);
        break;
    }
}

/* ---- registers ---- */

static bool ide_bus_empty(IDEBus *bus)
{
    return !bus->ifs[0].blk && !bus->ifs[1].blk;
}

/*
 * The registers that keep a high-order byte for 48-bit commands: the
 * current byte of @reg in @s, with *@hob the previous one, so that reads
 * and writes name the pairs once; NULL for the other registers.  (The
 * feature register reads as the error register.)
 */
static uint8_t *ide_reg_pair(IDEState *s, unsigned reg, uint8_t **hob)
{
    switch (reg) {
    case ATA_REG_FEATURE:
        *hob = &s->hob_feature;
        return &s->feature;
    case ATA_REG_NSECTOR:
        *hob = &s->hob_nsector;
        return &s->nsector;
    case ATA_REG_LBAL:
        *hob = &s->hob_lbal;
        return &s->lbal;
    case ATA_REG_LBAM:
        *hob = &s->hob_lbam;
        return &s->lbam;
    case ATA_REG_LBAH:
        *hob = &s->hob_lbah;
        return &s->lbah;
    }
    return NULL;
}

uint8_t ide_cmd_read(IDEBus *bus, unsigned reg)
{
    IDEState *s = ide_selected(bus);
    uint8_t *cur, *hob;

    if (ide_bus_empty(bus)) {
        /* nothing drives the lines: they float high */
        return 0xff;
    }
    switch (reg) {
    case ATA_REG_ERROR:
        return s->blk ? s->error : 0;
    case ATA_REG_NSECTOR:
    case ATA_REG_LBAL:
    case ATA_REG_LBAM:
    case ATA_REG_LBAH:
        cur = ide_reg_pair(s, reg, &hob);
        return bus->devctl & ATA_DEVCTL_HOB ? *hob : *cur;
    case ATA_REG_DEVICE:
        return s->device;
    case ATA_REG_STATUS:
        if (!s->blk) {
            /* device 0 answers for an absent device 1 */
            return 0;
        }
        s->irq_pending = false;
        ide_update_irq(bus);
        return s->status;
    default:
        return 0xff;
    }
}

void ide_cmd_write(IDEBus *bus, unsigned reg, uint8_t val)
{
    IDEState *sel = ide_selected(bus);

    if (reg == ATA_REG_COMMAND) {
        ide_exec_cmd(bus, val);
        return;
    }
    if (sel->status & (ATA_STAT_BSY | ATA_STAT_DRQ)) {
        return;     /* invariant 6 */
    }
    /* writing any command block register clears HOB */
    bus->devctl &= ~ATA_DEVCTL_HOB;
    /* a register write latches into both drives; the old value is HOB */
    for (int i = 0; i < 2; i++) {
        IDEState *s = &bus->ifs[i];
        uint8_t *hob;
        uint8_t *cur = ide_reg_pair(s, reg, &hob);

        if (cur) {
            *hob = *cur;
            *cur = val;
        } else if (reg == ATA_REG_DEVICE) {
            s->device = val;
        }
    }
    /* selecting the other drive changes whose interrupt the line shows */
    ide_update_irq(bus);
}

uint8_t ide_ctrl_read(IDEBus *bus)
{
    IDEState *s = ide_selected(bus);

    if (ide_bus_empty(bus)) {
        return 0xff;
    }
    return s->blk ? s->status : 0;
}

static void ide_srst_begin(IDEBus *bus)
{
    for (int i = 0; i < 2; i++) {
        IDEState *s = &bus->ifs[i];

        if (s->blk) {
            ide_drive_quiesce(s);
            s->status = ATA_STAT_BSY;
        }
    }
    ide_bmdma_reset(bus);
}

static void ide_srst_end(IDEBus *bus)
{
    for (int i = 0; i < 2; i++) {
        IDEState *s = &bus->ifs[i];

        ide_set_signature(s);
        if (!s->blk) {
            continue;
        }
        s->status = ATA_STAT_DRDY | ATA_STAT_DSC;
        /*
         * The write cache is not a setting SRST reverts: a driver that
         * turned it off relies on it staying off through error recovery.
         */
        if (s->revert_on_srst) {
            ide_drive_reset_settings(s);
        }
    }
}

void ide_ctrl_write(IDEBus *bus, uint8_t val)
{
    bool was_reset = bus->devctl & ATA_DEVCTL_SRST;
    bool reset = val & ATA_DEVCTL_SRST;

    bus->devctl = val;
    if (reset && !was_reset) {
        ide_srst_begin(bus);
    } else if (!reset && was_reset) {
        /* a reset completes without an interrupt */
        ide_srst_end(bus);
    }
    ide_update_irq(bus);
}

/* ---- the channel ---- */

IDEBus *ide_bus_new(const GuestMemory *mem, const IRQLine *irq)
{
    IDEBus *bus = g_new0(IDEBus, 1);

    bus->mem = *mem;
    bus->irq = *irq;
    for (int i = 0; i < 2; i++) {
        bus->ifs[i].bus = bus;
        bus->ifs[i].unit = i;
        ide_set_signature(&bus->ifs[i]);
    }
    ide_bmdma_reset(bus);
    return bus;
}

static int ide_copy_string(char *dst, size_t size, const char *src,
                           const char *what, unsigned unit, Error **errp)
{
    if (strlen(src) >= size) {
        error_setg(errp, "IDE unit %u: %s '%s' is longer than %zu "
                   "characters", unit, what, src, size - 1);
        return -EINVAL;
    }
    for (const char *p = src; *p; p++) {
        if (*p < 0x20 || *p > 0x7e) {
            error_setg(errp, "IDE unit %u: %s '%s' has a character that is "
                       "not printable ASCII", unit, what, src);
            return -EINVAL;
        }
    }
    g_strlcpy(dst, src, size);
    return 0;
}

int ide_bus_attach(IDEBus *bus, unsigned unit, const IDEDriveConf *conf,
                   Error **errp)
{
    g_autofree char *serial = NULL;
    IDEState *s;
    int64_t len;

    if (unit > 1) {
        error_setg(errp, "IDE unit %u does not exist (a channel has 0 and "
                   "1)", unit);
        return -EINVAL;
    }
    s = &bus->ifs[unit];
    if (s->blk) {
        error_setg(errp, "IDE unit %u already has a drive", unit);
        return -EBUSY;
    }
    len = blk_getlength(conf->blk);
    if (len < 0) {
        error_setg_errno(errp, -len, "IDE unit %u: cannot get the image "
                         "size", unit);
        return len;
    }
    if (len < ATA_SECTOR_SIZE) {
        error_setg(errp, "IDE unit %u: the image (%" PRId64 " bytes) is "
                   "smaller than one sector", unit, len);
        return -EINVAL;
    }
    serial = conf->serial ? g_strdup(conf->serial)
                          : g_strdup_printf("QB000%u", unit);
    if (ide_copy_string(s->serial, sizeof(s->serial), serial,
                        "serial number", unit, errp) < 0 ||
        ide_copy_string(s->model, sizeof(s->model),
                        conf->model ? conf->model : ide_default_model,
                        "model", unit, errp) < 0) {
        return -EINVAL;
    }
    g_strlcpy(s->firmware, QBLOCK_VERSION, sizeof(s->firmware));

    s->nb_sectors = len / ATA_SECTOR_SIZE;
    s->default_heads = IDE_DEFAULT_HEADS;
    s->default_secs = IDE_DEFAULT_SECS;
    s->default_cyls = MIN(s->nb_sectors / (IDE_DEFAULT_HEADS *
                                           IDE_DEFAULT_SECS), IDE_MAX_CYLS);
    s->default_cyls = MAX(s->default_cyls, 1);
    blk_ref(conf->blk);
    s->blk = conf->blk;
    s->wce_default = blk_enable_write_cache(s->blk);
    ide_drive_reset_settings(s);
    ide_set_signature(s);
    s->status = ATA_STAT_DRDY | ATA_STAT_DSC;
    return 0;
}

void ide_bus_reset(IDEBus *bus)
{
    for (int i = 0; i < 2; i++) {
        IDEState *s = &bus->ifs[i];

        ide_set_signature(s);
        if (!s->blk) {
            continue;
        }
        ide_drive_quiesce(s);
        ide_drive_reset_settings(s);
        blk_set_enable_write_cache(s->blk, s->wce_default);
        s->status = ATA_STAT_DRDY | ATA_STAT_DSC;
    }
    bus->devctl = 0;
    ide_bmdma_reset(bus);
    ide_update_irq(bus);
}

bool ide_bus_busy(IDEBus *bus)
{
    return bus->ifs[0].aio_pending || bus->ifs[1].aio_pending;
}

void ide_bus_free(IDEBus *bus)
{
    if (!bus) {
        return;
    }
    for (int i = 0; i < 2; i++) {
        IDEState *s = &bus->ifs[i];

        if (s->blk) {
            ide_drive_quiesce(s);
            blk_unref(s->blk);
        }
    }
    g_free(bus);
}
