/*
 * parallels creation, as qemu-img create -f parallels writes it: the
 * newer layout ("WithouFreSpacExt", entries in clusters), a header with
 * QEMU's geometry (16 heads, 32 sectors a track), an empty table, and the
 * file ending where the data begin: the first cluster boundary past the
 * table.
 */
#include "block/parallels.h"
#include "qapi/qapi-opts.h"
#include "qblock/block-backend.h"

/* QEMU's bound: the table's entries must be countable in 32 bits. */
#define PARALLELS_MAX_CLUSTERS  (1ull << 32)

static void parallels_create_header(ParallelsHeader *h, uint64_t sectors,
                                    uint32_t tracks, uint32_t entries,
                                    uint64_t data_off)
{
    memset(h, 0, sizeof(*h));
    memcpy(h->magic, PARALLELS_MAGIC_EXT, sizeof(h->magic));
    h->version = GUINT32_TO_LE(PARALLELS_VERSION);
    h->heads = GUINT32_TO_LE(16);
    h->cylinders = GUINT32_TO_LE(sectors / 16 / 32);
    h->tracks = GUINT32_TO_LE(tracks);
    h->bat_entries = GUINT32_TO_LE(entries);
    h->nb_sectors = GUINT64_TO_LE(sectors);
    h->data_off = GUINT32_TO_LE(data_off / PARALLELS_SECTOR);
}

/* Checks the sizes as QEMU, then writes the image on @blk. */
static int parallels_create_on(BlockBackend *blk, uint64_t size,
                               uint64_t cluster, Error **errp)
{
    ParallelsHeader h;
    uint64_t sectors, entries, data_off;
    int ret;

    cluster = ROUND_UP(cluster, PARALLELS_SECTOR);
    size = ROUND_UP(size, PARALLELS_SECTOR);
    if (cluster > INT32_MAX) {
        error_setg(errp, "Cluster size is too large");
        return -EINVAL;
    }
    if (cluster == 0 || size / cluster >= PARALLELS_MAX_CLUSTERS) {
        error_setg(errp, "Image size is too large for this cluster size");
        return -E2BIG;
    }
    sectors = size / PARALLELS_SECTOR;
    entries = DIV_ROUND_UP(size, cluster);
    data_off = ROUND_UP(PARALLELS_HEADER_SIZE + entries * sizeof(uint32_t),
                        cluster);
    parallels_create_header(&h, sectors, cluster / PARALLELS_SECTOR, entries,
                            data_off);
    /* a node given to blockdev-create may hold old data: zero the table */
    ret = blk_pwrite_zeroes(blk, 0, data_off, 0);
    if (ret == 0) {
        ret = blk_pwrite(blk, 0, sizeof(h), &h, 0);
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the parallels header");
        return ret;
    }
    return blk_truncate(blk, data_off, false, PREALLOC_MODE_OFF, 0, errp);
}

int coroutine_fn parallels_co_create_opts(const BlockDriver *drv,
                                          const char *filename,
                                          QemuOpts *opts, Error **errp)
{
    uint64_t size = qemu_opt_get_size(opts, "size", 0);
    uint64_t cluster = qemu_opt_get_size(opts, "cluster_size",
                                         PARALLELS_DEFAULT_CLUSTER);
    BlockBackend *blk;
    int ret;

    blk = bdrv_create_format_file(drv, filename, opts, errp);
    if (!blk) {
        return -EIO;
    }
    ret = parallels_create_on(blk, size, cluster, errp);
    if (ret < 0) {
        bdrv_delete_format_file(blk);
    }
    blk_unref(blk);
    return ret < 0 ? ret : 0;
}

/* blockdev-create: QEMU's BlockdevCreateOptionsParallels. */
int coroutine_fn parallels_co_create_on_node(const BlockDriver *drv,
                                             const BdrvCreateTarget *tgt,
                                             QemuOpts *opts, Error **errp)
{
    uint64_t size = qemu_opt_get_size(opts, "size", 0);
    uint64_t cluster = qemu_opt_get_size(opts, "cluster_size",
                                         PARALLELS_DEFAULT_CLUSTER);
    BlockBackend *blk = bdrv_create_format_on_node(tgt->file, errp);
    int ret;

    if (!blk) {
        return -EIO;
    }
    /* a node given to blockdev-create is the user's: never removed */
    /* qemu-img create rounds both up; blockdev-create takes them as is */
    if (!QEMU_IS_ALIGNED(size, PARALLELS_SECTOR)) {
        error_setg(errp, "Image size must be a multiple of 512 bytes");
        ret = -EINVAL;
    } else if (!QEMU_IS_ALIGNED(cluster, PARALLELS_SECTOR)) {
        error_setg(errp, "Cluster size must be a multiple of 512 bytes");
        ret = -EINVAL;
    } else {
        ret = parallels_create_on(blk, size, cluster, errp);
    }
    blk_unref(blk);
    return ret < 0 ? ret : 0;
}
