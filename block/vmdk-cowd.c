/*
 * vmdk: ESX's sparse extents ("COWD", extent type VMFSSPARSE, create type
 * vmfsSparse), read and written as QEMU 7.2 reads and writes them.
 *
 * VMware's "Virtual Disk Format 1.1" describes the extent: a header of
 * four sectors (magic "COWD", version, flags, the extent's size in
 * sectors, the grain size in sectors, the grain directory's sector and
 * number of entries, VMware's next free sector, then the geometry or
 * parent's name, generation, name and description), a grain directory
 * of 32-bit sector offsets of grain tables, and grain tables of a fixed
 * 4096 entries giving each grain's sector (0: never written).  There is
 * no redundant directory, no zeroed grain and no compression, so once
 * the header is read the extent is a sparse one like a hosted extent
 * and block/vmdk.c and block/vmdk-write.c read and write it by the same
 * code (VmdkExtent.cowd marks what differs).
 *
 * What QEMU does, and so qblock (tests/interop/vmdk-cowd-interop.sh
 * compares them):
 *  - the extent's size is its header's, whatever the descriptor's
 *    extent line says; the version and flags are not looked at;
 *  - the directory has the header's number of entries, which may be
 *    fewer than the extent's grains need: what lies past it reads as
 *    zeroes, has no block status (EIO), fails a write (EINVAL) and
 *    check ("could not get cluster_offset");
 *  - a table entry of 1 is a grain at sector 1 (no zeroed grains);
 *  - a new grain goes at the end of the file, rounded up to a grain;
 *    the header's free sector is left as it was;
 *  - a file opened alone (not named by a descriptor) must hold
 *    descriptor text, "CID=" and "parentCID=", at byte 512 (inside the
 *    header's parent name), which QEMU reads as the descriptor.
 *
 * Where qblock differs, deliberately: a grain size of 0 or of a
 * 2^20 sectors or more (QEMU divides by zero: SIGFPE), one that is not a
 * power of two or over 1 MiB (qblock's reads), a directory past the end
 * of the file (QEMU reads it as zeroes, after allocating it: up to
 * 128 MiB) and an extent of 0 sectors are refused at open; a write to a
 * grain whose table is missing allocates the table, as for a hosted
 * extent (QEMU reports success and drops the data); a write to a grain
 * that a table places in the header or directory fails (QEMU overwrites
 * them).
 */
#include "block/vmdk.h"

/*
 * Invariant 1 for the ESX sparse extent @e (its file open, e->sectors
 * set from the header) whose header is @h: the grain size checked, the
 * directory read.
 */
int vmdk_cowd_open(VmdkExtent *e, const VMDK3Header *h, Error **errp)
{
    uint32_t grain = GUINT32_FROM_LE(h->grain_size);
    uint32_t entries = GUINT32_FROM_LE(h->num_gd_entries);
    uint64_t gd_sector = GUINT32_FROM_LE(h->gd_offset);
    int64_t file_size = bdrv_getlength(e->file->bs);

    /* QEMU's message above 1 GiB; below it a grain of 0 crashes QEMU */
    if (grain == 0 || grain > VMDK_QEMU_MAX_GRAIN_SECTORS) {
        error_setg(errp, "Invalid granularity, image may be corrupt");
        return -EINVAL;
    }
    if (grain > VMDK_MAX_GRAIN_SECTORS || (grain & (grain - 1))) {
        error_setg(errp, "Unsupported granularity of %" PRIu32 " sectors "
                   "(grains of a power of two up to %d sectors are read)",
                   grain, VMDK_MAX_GRAIN_SECTORS);
        return -ENOTSUP;
    }
    if (entries > VMDK_MAX_GD_ENTRIES) {
        error_setg(errp, "L1 size too big");
        return -EFBIG;
    }
    if (file_size < 0) {
        error_setg_errno(errp, -file_size, "Could not get the extent's "
                         "size");
        return file_size;
    }
    e->cowd = true;
    e->header_sectors = VMDK3_HEADER_SECTORS;
    e->grain_sectors = grain;
    e->gtes = VMDK3_GTES;
    e->gd_sector = gd_sector;
    e->gd_entries = entries;
    /* what writes must leave alone (block/vmdk-write.c) */
    e->data_start = VMDK3_HEADER_SECTORS;
    return vmdk_read_gd(e, file_size, errp);
}

/*
 * A standalone ESX sparse file, bs->file, whose header is @h: as QEMU
 * opens one, its descriptor is the text at byte 512 (at most
 * VMDK3_DESC_SIZE bytes), which must name a CID and a parent CID; its
 * create type is not reported.  A new CID is written there, inside the
 * header (block/vmdk-write.c's vmdk_update_cid()).
 */
int vmdk_cowd_open_alone(BlockDriverState *bs, const VMDK3Header *h,
                         Error **errp)
{
    BDRVVmdkState *s = bs->opaque;
    int64_t size = bdrv_getlength(bs->file->bs);
    g_autofree char *desc = NULL;
    VmdkExtent *e;

    if (size < 0) {
        error_setg_errno(errp, -size, "Could not get the image's size");
        return size;
    }
    if (size > VMDK3_DESC_OFFSET) {
        desc = vmdk_read_desc(bs, VMDK3_DESC_OFFSET,
                              MIN(size - VMDK3_DESC_OFFSET, VMDK3_DESC_SIZE),
                              errp);
        if (!desc) {
            return -EINVAL;
        }
    }
    if (!desc || !strstr(desc, "CID=") || !strstr(desc, "parentCID=")) {
        /* QEMU says no more than "Invalid argument" */
        error_setg(errp, "Invalid argument: an ESX sparse (COWD) file opened "
                   "alone needs descriptor text with CID= and parentCID= "
                   "at byte %d", VMDK3_DESC_OFFSET);
        return -EINVAL;
    }
    g_clear_pointer(&s->create_type, g_free);
    /* the new CID must stay in the header */
    s->desc_room = (VMDK3_HEADER_SECTORS - 1) * VMDK_SECTOR;
    e = vmdk_add_extent(s, VMDK_SPARSE, "",
                        GUINT32_FROM_LE(h->num_sectors), errp);
    if (!e) {
        return -EINVAL;
    }
    e->file = bs->file;
    e->desc_sector = VMDK3_DESC_OFFSET / VMDK_SECTOR;
    e->desc_sectors = MIN(DIV_ROUND_UP(strlen(desc) + 1, VMDK_SECTOR),
                          VMDK3_HEADER_SECTORS - 1);
    return vmdk_cowd_open(e, h, errp);
}
