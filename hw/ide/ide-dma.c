/*
 * Bus-master DMA of the IDE channel (the PIIX bus-master IDE interface):
 * the command, status and PRD table registers, and the transfer of a READ
 * DMA / WRITE DMA command between guest memory and the image.
 *
 * A transfer starts when both a DMA command waits (DMA_WAIT, see
 * ide-core.c) and the Start bit is set, in either order.  The PRD table is
 * read from guest memory then, and the whole command becomes one request
 * on the BlockBackend whose I/O vector points into guest memory.
 *
 * Invariants:
 *  1. The PRD table is walked once per transfer, at most ATA_PRD_TABLE_MAX
 *     descriptors (a table may not cross 64 KiB), and each buffer is
 *     checked to lie in guest RAM before the request is issued: a guest's
 *     bad table fails the command, it never reaches host memory outside
 *     RAM.
 *  2. A table that describes fewer bytes than the command moves, or whose
 *     direction (BM_CMD_READ) contradicts the command, fails the command
 *     with ABRT and sets BM_STATUS_ERROR.  (A PIIX would stop and wait
 *     forever; an error the driver sees is kinder.)
 *  3. BM_STATUS_ACTIVE is set by Start and cleared by Stop, by an error,
 *     or by a transfer that used the table up to its EOT descriptor; a
 *     larger table leaves it set, as on hardware.
 */

#include "ide-internal.h"

/* Most I/O vector entries of one transfer: a request's vector stays small
 * enough for any driver below (IOV_MAX is 1024 on Linux). */
#define IDE_DMA_MAX_IOV 1024

void ide_bmdma_reset(IDEBus *bus)
{
    /* keep the firmware's DMA-capable bits: they describe the wiring */
    bus->bm.cmd = 0;
    bus->bm.status &= BM_STATUS_DMA_CAP(0) | BM_STATUS_DMA_CAP(1);
}

/* Invariant 2. */
static void ide_dma_fail(IDEState *s)
{
    IDEBus *bus = s->bus;

    bus->bm.status = (bus->bm.status & ~BM_STATUS_ACTIVE) | BM_STATUS_ERROR;
    ide_cmd_abort(s, ATA_ERR_ABRT);
}

/*
 * Maps the buffers of the PRD table for @bytes of transfer into
 * s->dma_qiov.  Returns 0, or -EINVAL for a table that is too short or
 * out of RAM (invariant 1); *exact tells whether the transfer ends at the
 * table's EOT (invariant 3).
 */
static int ide_dma_map_prdt(IDEState *s, uint64_t bytes, bool *exact)
{
    IDEBus *bus = s->bus;
    uint64_t mapped = 0;

    *exact = false;
    qemu_iovec_init(&s->dma_qiov, 16);
    for (size_t i = 0; i < ATA_PRD_TABLE_MAX; i++) {
        ATAPrd prd;
        uint32_t count;
        uint64_t take;
        bool eot;

        if (guest_memory_read(&bus->mem, bus->bm.prdt + i * sizeof(prd),
                              &prd, sizeof(prd)) < 0) {
            return -EINVAL;
        }
        /* bit 0 of both address and count is reserved */
        count = GUINT16_FROM_LE(prd.count) & ~1u;
        count = count ? count : ATA_PRD_MAX_BYTES;
        eot = GUINT16_FROM_LE(prd.flags) & ATA_PRD_EOT;
        take = MIN(count, bytes - mapped);
        if (guest_memory_map_iov(&bus->mem, GUINT32_FROM_LE(prd.addr) & ~1u,
                                 take, &s->dma_qiov, IDE_DMA_MAX_IOV) < 0) {
            return -EINVAL;
        }
        mapped += take;
        if (mapped == bytes) {
            *exact = take == count && eot;
            return 0;
        }
        if (eot) {
            return -EINVAL;
        }
    }
    return -EINVAL;
}

static void ide_dma_cb(void *opaque, int ret)
{
    IDEState *s = opaque;
    IDEBus *bus = s->bus;

    s->aio_pending = false;
    qemu_iovec_destroy(&s->dma_qiov);
    if (ret < 0) {
        ide_cmd_io_error(s, s->lba);
        return;
    }
    s->lba += s->aio_sectors;
    s->remaining -= s->aio_sectors;
    if (s->dma_exact) {
        bus->bm.status &= ~BM_STATUS_ACTIVE;
    }
    ide_cmd_done(s);
}

static void ide_dma_run(IDEState *s)
{
    IDEBus *bus = s->bus;
    bool to_memory = s->xfer == IDE_XFER_DMA_IN;
    uint64_t bytes = (uint64_t)s->remaining * ATA_SECTOR_SIZE;
    int64_t offset = s->lba * ATA_SECTOR_SIZE;

    if (!!(bus->bm.cmd & BM_CMD_READ) != to_memory ||
        ide_dma_map_prdt(s, bytes, &s->dma_exact) < 0) {
        qemu_iovec_destroy(&s->dma_qiov);
        ide_dma_fail(s);
        return;
    }
    s->status = ATA_STAT_BSY;
    s->aio_pending = true;
    s->aio_sectors = s->remaining;
    if (to_memory) {
        blk_aio_preadv(s->blk, offset, &s->dma_qiov, 0, ide_dma_cb, s);
    } else {
        blk_aio_pwritev(s->blk, offset, &s->dma_qiov,
                        s->fua ? BDRV_REQ_FUA : 0, ide_dma_cb, s);
    }
}

void ide_dma_cmd_ready(IDEState *s)
{
    s->status = ATA_STAT_DRDY | ATA_STAT_DSC | ATA_STAT_DRQ;
    if (s->bus->bm.cmd & BM_CMD_START) {
        ide_dma_run(s);
    }
}

/* The drive whose DMA command waits for the bus master, or NULL. */
static IDEState *ide_dma_waiting(IDEBus *bus)
{
    IDEState *s = ide_selected(bus);
    bool is_dma = s->xfer == IDE_XFER_DMA_IN || s->xfer == IDE_XFER_DMA_OUT;

    return s->blk && is_dma && !s->aio_pending ? s : NULL;
}

static void ide_bmdma_write_cmd(IDEBus *bus, uint8_t val)
{
    bool was_started = bus->bm.cmd & BM_CMD_START;
    IDEState *s;

    bus->bm.cmd = val & (BM_CMD_START | BM_CMD_READ);
    if (!(val & BM_CMD_START)) {
        /* a request in flight cannot be taken back; it completes */
        bus->bm.status &= ~BM_STATUS_ACTIVE;
        return;
    }
    if (was_started) {
        return;
    }
    bus->bm.status |= BM_STATUS_ACTIVE;
    s = ide_dma_waiting(bus);
    if (s) {
        ide_dma_run(s);
    }
}

/* The registers as 8 bytes, for accesses of any size. */
static uint8_t ide_bmdma_read_byte(IDEBus *bus, unsigned offset)
{
    switch (offset) {
    case BM_REG_COMMAND:
        return bus->bm.cmd;
    case BM_REG_STATUS:
        return bus->bm.status;
    case BM_REG_PRDT ... BM_REG_PRDT + 3:
        return bus->bm.prdt >> (8 * (offset - BM_REG_PRDT));
    default:
        return 0;
    }
}

uint32_t ide_bmdma_read(IDEBus *bus, unsigned offset, unsigned size)
{
    uint32_t val = 0;

    for (unsigned i = 0; i < size && i < 4; i++) {
        if (offset + i < BM_REG_COUNT) {
            val |= (uint32_t)ide_bmdma_read_byte(bus, offset + i) << (8 * i);
        }
    }
    return val;
}

static void ide_bmdma_write_byte(IDEBus *bus, unsigned offset, uint8_t val)
{
    switch (offset) {
    case BM_REG_COMMAND:
        ide_bmdma_write_cmd(bus, val);
        break;
    case BM_REG_STATUS:
        /* ERROR and INTR are write-1-to-clear, the DMA-capable bits R/W */
        bus->bm.status &= ~(val & (BM_STATUS_ERROR | BM_STATUS_INTR));
        bus->bm.status = (bus->bm.status & ~(BM_STATUS_DMA_CAP(0) |
                                             BM_STATUS_DMA_CAP(1))) |
                         (val & (BM_STATUS_DMA_CAP(0) | BM_STATUS_DMA_CAP(1)));
        break;
    case BM_REG_PRDT ... BM_REG_PRDT + 3: {
        unsigned shift = 8 * (offset - BM_REG_PRDT);

        bus->bm.prdt = (bus->bm.prdt & ~(0xffu << shift)) |
                       ((uint32_t)val << shift);
        /* the table is dword aligned: bits 1:0 are reserved */
        bus->bm.prdt &= ~3u;
        break;
    }
    }
}

void ide_bmdma_write(IDEBus *bus, unsigned offset, unsigned size,
                     uint32_t val)
{
    for (unsigned i = 0; i < size && i < 4; i++) {
        if (offset + i < BM_REG_COUNT) {
            ide_bmdma_write_byte(bus, offset + i, val >> (8 * i));
        }
    }
}
