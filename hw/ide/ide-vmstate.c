/*
 * Device state of the IDE channel: both drives' registers, settings and
 * PIO transfer, the bus master and the device control register.
 *
 * Invariants:
 *  1. A channel with a request in flight is not saved (pre_save refuses):
 *     the state never needs to describe half a request.  A PIO block the
 *     guest is moving, or a DMA command waiting for the bus master, is
 *     state like any other and resumes after the load.
 *  2. The write cache flag travels in IDEState.wce: copied from the
 *     BlockBackend when saving, applied to it after a successful check
 *     when loading.  Loading it onto a drive means that drive's writes
 *     behave as the saved guest had configured them.
 *  3. post_load accepts only states the device can reach: ide-core.c's
 *     invariants hold for what it lets through, so a crafted stream cannot
 *     make the device index past io_buffer or address past the disk.
 */

#include "ide-internal.h"

static int ide_drive_pre_save(void *opaque, Error **errp)
{
    IDEState *s = opaque;

    if (s->aio_pending) {
        error_setg(errp, "IDE unit %u has a request in flight; drain it "
                   "before saving", s->unit);
        return -EBUSY;
    }
    s->present = s->blk != NULL;
    s->wce = s->blk && blk_enable_write_cache(s->blk);
    s->saved_nb_sectors = s->nb_sectors;
    return 0;
}

/* Invariant 3: the transfer in progress is one the device could be in. */
static int ide_drive_check_xfer(IDEState *s, Error **errp)
{
    bool drq = s->status & ATA_STAT_DRQ;
    bool pio = s->xfer == IDE_XFER_PIO_IN || s->xfer == IDE_XFER_PIO_OUT;
    bool dma = s->xfer == IDE_XFER_DMA_IN || s->xfer == IDE_XFER_DMA_OUT;

    if (s->xfer >= IDE_XFER__MAX || s->xfer == IDE_XFER_VERIFY) {
        error_setg(errp, "IDE unit %u: transfer state %u cannot be saved",
                   s->unit, s->xfer);
        return -EINVAL;
    }
    if (drq != (pio || dma)) {
        error_setg(errp, "IDE unit %u: status %#x does not match transfer "
                   "state %u", s->unit, s->status, s->xfer);
        return -EINVAL;
    }
    if (s->data_end > IDE_IO_BUFFER_SIZE || s->data_pos > s->data_end ||
        s->data_end % 2 || s->data_pos % 2 || (pio && s->data_pos ==
                                                s->data_end)) {
        error_setg(errp, "IDE unit %u: PIO window %u-%u is not inside the "
                   "%d-byte buffer", s->unit, s->data_pos, s->data_end,
                   IDE_IO_BUFFER_SIZE);
        return -EINVAL;
    }
    if (s->block_sectors > IDE_MAX_MULT_SECTORS ||
        (s->xfer == IDE_XFER_PIO_OUT && s->data_end !=
         MIN(s->remaining, s->block_sectors) * ATA_SECTOR_SIZE)) {
        error_setg(errp, "IDE unit %u: PIO block of %u sectors does not "
                   "match the transfer", s->unit, s->block_sectors);
        return -EINVAL;
    }
    if (s->lba > s->nb_sectors || s->nb_sectors - s->lba < s->remaining) {
        error_setg(errp, "IDE unit %u: transfer at sector %" PRIu64 " (%u "
                   "sectors) is outside the disk", s->unit, s->lba,
                   s->remaining);
        return -EINVAL;
    }
    return 0;
}

static int ide_drive_post_load(void *opaque, int version_id, Error **errp)
{
    IDEState *s = opaque;

    if (s->present != (s->blk != NULL)) {
        error_setg(errp, "IDE unit %u: the state %s a drive, this channel "
                   "%s", s->unit, s->present ? "has" : "has no",
                   s->blk ? "has one" : "has none");
        return -EINVAL;
    }
    if (!s->blk) {
        return 0;
    }
    if (s->saved_nb_sectors != s->nb_sectors) {
        error_setg(errp, "IDE unit %u: the state is of a disk of %" PRIu64
                   " sectors, this one has %" PRIu64, s->unit,
                   s->saved_nb_sectors, s->nb_sectors);
        return -EINVAL;
    }
    if ((s->mult_sectors && !is_power_of_2(s->mult_sectors)) ||
        s->mult_sectors > IDE_MAX_MULT_SECTORS ||
        !ide_xfer_mode_valid(s->xfer_mode) || s->heads == 0 ||
        s->heads > ATA_DEV_HEAD_MASK + 1 || s->secs == 0) {
        error_setg(errp, "IDE unit %u: settings out of range (multiple %u, "
                   "transfer mode %#x, %u heads, %u sectors)", s->unit,
                   s->mult_sectors, s->xfer_mode, s->heads, s->secs);
        return -EINVAL;
    }
    if (ide_drive_check_xfer(s, errp) < 0) {
        return -EINVAL;
    }
    blk_set_enable_write_cache(s->blk, s->wce);
    return 0;
}

static const VMStateDescription vmstate_ide_drive = {
    .name = "ide-drive",
    .version_id = 1,
    .minimum_version_id = 1,
    .size = sizeof(IDEState),
    .pre_save = ide_drive_pre_save,
    .post_load = ide_drive_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_BOOL(present, IDEState),
        VMSTATE_UINT64(saved_nb_sectors, IDEState),
        VMSTATE_UINT8(feature, IDEState),
        VMSTATE_UINT8(nsector, IDEState),
        VMSTATE_UINT8(lbal, IDEState),
        VMSTATE_UINT8(lbam, IDEState),
        VMSTATE_UINT8(lbah, IDEState),
        VMSTATE_UINT8(hob_feature, IDEState),
        VMSTATE_UINT8(hob_nsector, IDEState),
        VMSTATE_UINT8(hob_lbal, IDEState),
        VMSTATE_UINT8(hob_lbam, IDEState),
        VMSTATE_UINT8(hob_lbah, IDEState),
        VMSTATE_UINT8(device, IDEState),
        VMSTATE_UINT8(status, IDEState),
        VMSTATE_UINT8(error, IDEState),
        VMSTATE_BOOL(irq_pending, IDEState),
        VMSTATE_UINT8(mult_sectors, IDEState),
        VMSTATE_UINT8(xfer_mode, IDEState),
        VMSTATE_BOOL(look_ahead, IDEState),
        VMSTATE_BOOL(revert_on_srst, IDEState),
        VMSTATE_UINT8(heads, IDEState),
        VMSTATE_UINT8(secs, IDEState),
        VMSTATE_BOOL(wce, IDEState),
        VMSTATE_UINT8(cmd, IDEState),
        VMSTATE_UINT8(xfer, IDEState),
        VMSTATE_BOOL(fua, IDEState),
        VMSTATE_UINT64(lba, IDEState),
        VMSTATE_UINT32(remaining, IDEState),
        VMSTATE_UINT32(block_sectors, IDEState),
        VMSTATE_UINT32(data_pos, IDEState),
        VMSTATE_UINT32(data_end, IDEState),
        VMSTATE_BUFFER(io_buffer, IDEState),
        VMSTATE_END_OF_LIST()
    },
};

static int ide_bus_post_load(void *opaque, int version_id, Error **errp)
{
    IDEBus *bus = opaque;
    int active = 0;

    bus->bm.cmd &= BM_CMD_START | BM_CMD_READ;
    bus->bm.status &= BM_STATUS_ACTIVE | BM_STATUS_ERROR | BM_STATUS_INTR |
                      BM_STATUS_DMA_CAP(0) | BM_STATUS_DMA_CAP(1);
    bus->bm.prdt &= ~3u;
    for (int i = 0; i < 2; i++) {
        IDEState *s = &bus->ifs[i];
        bool dma = s->xfer == IDE_XFER_DMA_IN || s->xfer == IDE_XFER_DMA_OUT;

        if ((s->status & ATA_STAT_BSY) && !(bus->devctl & ATA_DEVCTL_SRST)) {
            error_setg(errp, "IDE unit %u is busy outside a reset", i);
            return -EINVAL;
        }
        if (dma && (bus->bm.cmd & BM_CMD_START)) {
            /* the transfer would have started when both were there */
            error_setg(errp, "IDE unit %u waits for a bus master that runs",
                       i);
            return -EINVAL;
        }
        active += s->xfer != IDE_XFER_NONE;
    }
    if (active > 1) {
        error_setg(errp, "Both IDE units are in a transfer");
        return -EINVAL;
    }
    ide_update_irq(bus);
    return 0;
}

const VMStateDescription vmstate_ide_bus = {
    .name = "ide-bus",
    .version_id = 1,
    .minimum_version_id = 1,
    .size = sizeof(IDEBus),
    .post_load = ide_bus_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT8(devctl, IDEBus),
        VMSTATE_UINT8(bm.cmd, IDEBus),
        VMSTATE_UINT8(bm.status, IDEBus),
        VMSTATE_UINT32(bm.prdt, IDEBus),
        VMSTATE_STRUCT_ARRAY(ifs, IDEBus, 2, vmstate_ide_drive, IDEState),
        VMSTATE_END_OF_LIST()
    },
};
