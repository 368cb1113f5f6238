/*
 * vpc: creating images, laid out as qemu-img 7.2 lays them out, so that
 * an image qblock-img creates (or converts to) is the one qemu-img would
 * write, but for the footer's UUID (random) and timestamp (the clock).
 *
 * Dynamic: the footer copy (0), the dynamic header (512), the BAT (1536,
 * all entries unallocated, padded with ones to a sector), the footer.
 * Fixed: the disk's bytes (a hole) and the footer.  The footer says
 * creator "qemu" 5.3 on "Wi2k", or "qem2" with force_size, whose size
 * readers take from the byte count rather than the geometry.
 */
#include "block/vpc.h"
#include "qapi/qapi-opts.h"
#include "qblock/block-backend.h"

typedef struct VpcCreate {
    uint64_t size;              /* bytes, a multiple of the sector */
    bool fixed;
    bool force_size;
    uint16_t cylinders;
    uint8_t heads;
    uint8_t sectors_per_track;
} VpcCreate;

/*
 * The size QEMU gives the disk: without force_size, the first CHS
 * geometry holding the requested sectors, unless only the largest one
 * would (then the size as asked); with it, the size as asked and the
 * largest geometry, which tells readers to trust the byte count.
 */
static int vpc_create_size(VpcCreate *c, uint64_t requested, Error **errp)
{
    int64_t sectors = DIV_ROUND_UP(requested, VPC_SECTOR);

    c->cylinders = c->heads = c->sectors_per_track = 0;
    if (c->force_size) {
        c->cylinders = 65535;
        c->heads = 16;
        c->sectors_per_track = 255;
    } else {
        int64_t chs = 0;

        for (int64_t i = 0; sectors > chs && chs != VPC_MAX_GEOMETRY; i++) {
            vpc_geometry(sectors + i, &c->cylinders, &c->heads,
                         &c->sectors_per_track);
            chs = (int64_t)c->cylinders * c->heads * c->sectors_per_track;
        }
        if (chs != VPC_MAX_GEOMETRY) {
            sectors = chs;
        }
    }
    if (sectors > VPC_MAX_SECTORS) {
        error_setg(errp, "Disk size is too large, max size is 2040 GiB");
        return -EFBIG;
    }
    c->size = sectors * VPC_SECTOR;
    return 0;
}

static int vpc_create_parse(VpcCreate *c, QemuOpts *opts, Error **errp)
{
    int fixed = bdrv_create_opt_fixed(opts, errp);

    if (fixed < 0) {
        return fixed;
    }
    c->fixed = fixed;
    c->force_size = qemu_opt_get_bool(opts, "force_size", false);
    return vpc_create_size(c, qemu_opt_get_size(opts, "size", 0), errp);
}

static void vpc_create_footer(const VpcCreate *c, VpcFooter *f)
{
    memset(f, 0, sizeof(*f));
    memcpy(f->cookie, VPC_FOOTER_COOKIE, 8);
    f->features = GUINT32_TO_BE(VPC_FEATURES);
    f->version = GUINT32_TO_BE(VPC_VERSION);
    f->data_offset = GUINT64_TO_BE(c->fixed ? VPC_NO_OFFSET
                                            : VPC_CREATE_HEADER_AT);
    f->timestamp = GUINT32_TO_BE((uint32_t)(time(NULL) -
                                            VPC_TIMESTAMP_BASE));
    memcpy(f->creator_app, c->force_size ? "qem2" : "qemu", 4);
    f->creator_version = GUINT32_TO_BE(VPC_CREATOR_VERSION);
    memcpy(f->creator_os, VPC_CREATOR_OS, 4);
    f->orig_size = GUINT64_TO_BE(c->size);
    f->current_size = GUINT64_TO_BE(c->size);
    f->cylinders = GUINT16_TO_BE(c->cylinders);
    f->heads = c->heads;
    f->sectors_per_track = c->sectors_per_track;
    f->type = GUINT32_TO_BE(c->fixed ? VPC_TYPE_FIXED : VPC_TYPE_DYNAMIC);
    /* a version 4 (random) UUID */
    for (size_t i = 0; i < sizeof(f->uuid); i += 4) {
        uint32_t r = g_random_int();

        memcpy(f->uuid + i, &r, 4);
    }
    f->uuid[6] = (f->uuid[6] & 0x0f) | 0x40;
    f->uuid[8] = (f->uuid[8] & 0x3f) | 0x80;
    f->checksum = GUINT32_TO_BE(vpc_checksum(f, sizeof(*f)));
}

static int vpc_create_dynamic(const VpcCreate *c, BlockBackend *blk,
                              const VpcFooter *f, Error **errp)
{
    uint64_t blocks = DIV_ROUND_UP(c->size, VPC_CREATE_BLOCK_SIZE);
    uint64_t bat_len = ROUND_UP(blocks * sizeof(uint32_t), VPC_SECTOR);
    /* a disk of no block has an empty BAT, and g_malloc(0) gives NULL */
    g_autofree uint8_t *bat = g_malloc(MAX(bat_len, 1));
    VpcDynHeader h = { 0 };
    int ret;

    memset(bat, 0xff, bat_len);
    memcpy(h.cookie, VPC_DYN_COOKIE, 8);
    h.data_offset = GUINT64_TO_BE(VPC_NO_OFFSET);
    h.table_offset = GUINT64_TO_BE(VPC_CREATE_BAT_AT);
    h.version = GUINT32_TO_BE(VPC_VERSION);
    h.max_table_entries = GUINT32_TO_BE(blocks);
    h.block_size = GUINT32_TO_BE(VPC_CREATE_BLOCK_SIZE);
    h.checksum = GUINT32_TO_BE(vpc_checksum(&h, sizeof(h)));

    ret = blk_pwrite(blk, 0, sizeof(*f), f, 0);
    if (ret == 0) {
        ret = blk_pwrite(blk, VPC_CREATE_HEADER_AT, sizeof(h), &h, 0);
    }
    if (ret == 0) {
        ret = blk_pwrite(blk, VPC_CREATE_BAT_AT, bat_len, bat, 0);
    }
    if (ret == 0) {
        ret = blk_pwrite(blk, VPC_CREATE_BAT_AT + bat_len, sizeof(*f), f, 0);
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the VHD image");
    }
    return ret;
}

static int vpc_create_fixed(const VpcCreate *c, BlockBackend *blk,
                            const VpcFooter *f, Error **errp)
{
    int ret = blk_truncate(blk, c->size + sizeof(*f), false,
                           PREALLOC_MODE_OFF, 0, errp);

    if (ret < 0) {
        return ret;
    }
    ret = blk_pwrite(blk, c->size, sizeof(*f), f, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the VHD footer");
    }
    return ret;
}

/*
 * Writes the image on @blk, emptied first (a node may have held data).
 * With @exact (blockdev-create), as QEMU: a size that its geometry would
 * round is refused, unless force_size keeps it.
 */
static int vpc_create_on(BlockBackend *blk, QemuOpts *opts, bool exact,
                         Error **errp)
{
    uint64_t requested = qemu_opt_get_size(opts, "size", 0);
    VpcCreate c;
    VpcFooter f;
    int ret = vpc_create_parse(&c, opts, errp);

    if (ret < 0) {
        return ret;
    }
    if (exact && !c.force_size && c.size != requested) {
        error_setg(errp, "The requested image size cannot be represented "
                   "in CHS geometry");
        error_append_hint(errp, "Try size=%" PRIu64 " or force-size=on (the "
                          "latter makes the image incompatible with "
                          "Virtual PC)\n", c.size);
        return -EINVAL;
    }
    ret = blk_truncate(blk, 0, false, PREALLOC_MODE_OFF, 0, errp);
    if (ret < 0) {
        return ret;
    }
    vpc_create_footer(&c, &f);
    return c.fixed ? vpc_create_fixed(&c, blk, &f, errp)
                   : vpc_create_dynamic(&c, blk, &f, errp);
}

int coroutine_fn vpc_co_create_opts(const BlockDriver *drv,
                                    const char *filename, QemuOpts *opts,
                                    Error **errp)
{
    BlockBackend *blk = bdrv_create_format_file(drv, filename, opts, errp);
    int ret;

    if (!blk) {
        return -EIO;
    }
    /* as QEMU: the file stays, emptied, if the options are refused */
    ret = vpc_create_on(blk, opts, false, errp);
    blk_unref(blk);
    return ret;
}

int coroutine_fn vpc_co_create_on_node(const BlockDriver *drv,
                                       const BdrvCreateTarget *tgt,
                                       QemuOpts *opts, Error **errp)
{
    BlockBackend *blk = bdrv_create_format_on_node(tgt->file, errp);
    int ret;

    if (!blk) {
        return -EIO;
    }
    ret = vpc_create_on(blk, opts, true, errp);
    blk_unref(blk);
    return ret;
}
