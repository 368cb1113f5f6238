/*
 * qcow2: the size of an image before it exists (qemu-img measure).
 *
 * "fully allocated" is what an image of the disk size takes with every
 * cluster allocated: the header cluster, L2 tables for every cluster, an
 * L1 table in whole clusters, the data, and the refcount blocks and table
 * that count all of it, themselves included.  "required" is the same
 * metadata with only the data clusters the source has (every cluster with
 * at least one byte of data counts whole; zeroes and holes count nothing),
 * or all of them with full/falloc preallocation.  The figures are QEMU's:
 * scripts size volumes with them.
 */
#include "block/qcow2.h"
#include "util/cutils.h"

/* Bytes of an L2 entry: extended entries carry a subcluster bitmap. */
#define QCOW2_MEASURE_L2E_SIZE 8
#define QCOW2_MEASURE_L2E_SIZE_EXTENDED 16
/* Extended L2 entries need 32 subclusters of at least 512 bytes. */
#define QCOW2_MEASURE_MIN_EXTL2_CLUSTER (16 * 1024)

/*
 * Clusters of refcount blocks and table needed to count @clusters
 * clusters and themselves: the smallest fixed point of the count.
 */
static int64_t qcow2_measure_refcount_clusters(int64_t clusters,
                                               int64_t cluster_size,
                                               int refcount_order)
{
    int64_t per_block = cluster_size * 8 >> refcount_order;
    int64_t per_table_cluster = cluster_size / sizeof(uint64_t);
    int64_t blocks = 0, table = 0, prev;

    do {
        prev = blocks + table;
        blocks = DIV_ROUND_UP(clusters + blocks + table, per_block);
        table = DIV_ROUND_UP(blocks, per_table_cluster);
    } while (blocks + table != prev);
    return blocks + table;
}

/* The file size of an image of @disk_size with every cluster allocated. */
static int64_t qcow2_measure_full(int64_t disk_size, int64_t cluster_size,
                                  int refcount_order, bool extended_l2)
{
    int64_t l2e = extended_l2 ? QCOW2_MEASURE_L2E_SIZE_EXTENDED
                              : QCOW2_MEASURE_L2E_SIZE;
    int64_t aligned = ROUND_UP(disk_size, cluster_size);
    int64_t meta = cluster_size;            /* the header */
    int64_t l2_entries, l1_entries;

    /* L2 tables in whole clusters, the L1 table likewise */
    l2_entries = ROUND_UP(aligned / cluster_size, cluster_size / l2e);
    meta += l2_entries * l2e;
    l1_entries = ROUND_UP(l2_entries * l2e / cluster_size,
                          cluster_size / (int64_t)sizeof(uint64_t));
    meta += l1_entries * sizeof(uint64_t);
    meta += qcow2_measure_refcount_clusters((meta + aligned) / cluster_size,
                                            cluster_size, refcount_order) *
            cluster_size;
    return meta + aligned;
}

/* Bytes of whole clusters of @in_bs that hold data (see the top). */
static int64_t qcow2_measure_data(BlockDriverState *in_bs,
                                  int64_t cluster_size, Error **errp)
{
    int64_t size = bdrv_getlength(in_bs);
    int64_t offset = 0, total = 0;

    if (size < 0) {
        error_setg_errno(errp, -size, "Unable to get image virtual_size");
        return size;
    }
    while (offset < size) {
        int64_t pnum;
        int ret = bdrv_block_status_above(in_bs, NULL, offset,
                                          size - offset, &pnum, NULL, NULL,
                                          NULL);

        if (ret < 0) {
            error_setg_errno(errp, -ret, "Unable to get block status");
            return ret;
        }
        if (!(ret & BDRV_BLOCK_ZERO) &&
            (ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ALLOCATED)) ==
            (BDRV_BLOCK_DATA | BDRV_BLOCK_ALLOCATED)) {
            int64_t start = QEMU_ALIGN_DOWN(offset, cluster_size);

            pnum = ROUND_UP(offset + pnum, cluster_size) - offset;
            total += offset + pnum - start;
        }
        offset += pnum;
    }
    return total;
}

/* The options that shape the image, with QEMU's checks and messages. */
typedef struct Qcow2MeasureOpts {
    int64_t cluster_size;
    int refcount_order;
    int version;
    bool extended_l2;
    PreallocMode prealloc;
} Qcow2MeasureOpts;

static int qcow2_measure_parse(QemuOpts *opts, Qcow2MeasureOpts *m,
                               Error **errp)
{
    const char *compat = qemu_opt_get(opts, "compat");
    const char *prealloc = qemu_opt_get(opts, "preallocation");
    uint64_t refcount_bits;

    m->extended_l2 = qemu_opt_get_bool(opts, "extended_l2", false);
    m->cluster_size = qemu_opt_get_size(opts, "cluster_size",
                                        1 << QCOW2_DEFAULT_CLUSTER_BITS);
    if (qcow2_check_cluster_size(m->cluster_size, errp) < 0) {
        return -EINVAL;
    }
    if (m->extended_l2 &&
        m->cluster_size < QCOW2_MEASURE_MIN_EXTL2_CLUSTER) {
        error_setg(errp, "Extended L2 entries are only supported with "
                   "cluster sizes of at least %d bytes",
                   QCOW2_MEASURE_MIN_EXTL2_CLUSTER);
        return -EINVAL;
    }
    m->version = qcow2_compat_version(compat);
    if (!m->version) {
        error_setg(errp, "Invalid compatibility level: '%s'", compat);
        return -EINVAL;
    }
    refcount_bits = qemu_opt_get_number(opts, "refcount_bits",
                                        1 << QCOW2_DEFAULT_REFCOUNT_ORDER);
    if (refcount_bits > 64 || !is_power_of_2(refcount_bits)) {
        error_setg(errp, "Refcount width must be a power of two and may not "
                   "exceed 64 bits");
        return -EINVAL;
    }
    if (m->version < 3 && refcount_bits != 16) {
        error_setg(errp, "Different refcount widths than 16 bits require "
                   "compatibility level 1.1 or above (use compat=1.1 or "
                   "greater)");
        return -EINVAL;
    }
    m->refcount_order = ctz64(refcount_bits);
    m->prealloc = PREALLOC_MODE_OFF;
    if (prealloc) {
        int mode = qemu_name_index(PreallocMode_str, PREALLOC_MODE__MAX,
                                   prealloc);

        if (mode < 0) {
            error_setg(errp, "invalid parameter value: %s", prealloc);
            return -EINVAL;
        }
        m->prealloc = mode;
    }
    return 0;
}

/* True if the source is an image that keeps persistent dirty bitmaps. */
static bool qcow2_measure_source_has_bitmaps(BlockDriverState *in_bs)
{
    if (!in_bs->drv || strcmp(in_bs->drv->format_name, "qcow2")) {
        return false;
    }
    return ((BDRVQcow2State *)in_bs->opaque)->qcow_version >= 3;
}

int qcow2_measure(QemuOpts *opts, BlockDriverState *in_bs,
                  BlockMeasureInfo *info, Error **errp)
{
    Qcow2MeasureOpts m;
    int64_t disk_size, data, l2_tables, luks;
    int ret;

    ret = qcow2_measure_parse(opts, &m, errp);
    if (ret < 0) {
        return ret;
    }
    luks = qcow2_crypt_measure(opts, m.cluster_size, errp);
    if (luks < 0) {
        return luks;
    }
    disk_size = bdrv_measure_virtual_size(opts, in_bs, errp);
    if (disk_size < 0) {
        return disk_size;
    }
    /*
     * The L1 table must fit QEMU's limit.  A size this close to INT64_MAX
     * is far past it, and rounding it up to a cluster would overflow.
     */
    if (disk_size > INT64_MAX - m.cluster_size) {
        error_setg(errp, "The image size is too large (try using a larger "
                   "cluster size)");
        return -EINVAL;
    }
    disk_size = ROUND_UP(disk_size, m.cluster_size);
    l2_tables = DIV_ROUND_UP(disk_size / m.cluster_size,
                             m.cluster_size / (m.extended_l2 ?
                                               QCOW2_MEASURE_L2E_SIZE_EXTENDED :
                                               QCOW2_MEASURE_L2E_SIZE));
    if (l2_tables * (int64_t)sizeof(uint64_t) > QCOW_MAX_L1_SIZE) {
        error_setg(errp, "The image size is too large (try using a larger "
                   "cluster size)");
        return -EINVAL;
    }

    /*
     * A backing file for the new image may share nothing with the input:
     * every cluster may have to be written (QEMU assumes so too).
     */
    if (m.prealloc == PREALLOC_MODE_FULL ||
        m.prealloc == PREALLOC_MODE_FALLOC ||
        (in_bs && qemu_opt_get(opts, "backing_file"))) {
        data = disk_size;
    } else if (in_bs) {
        data = qcow2_measure_data(in_bs, m.cluster_size, errp);
        if (data < 0) {
            return data;
        }
    } else {
        data = 0;
    }
    info->fully_allocated = qcow2_measure_full(disk_size, m.cluster_size,
                                               m.refcount_order,
                                               m.extended_l2);
    /* the LUKS header clusters come on top, as in QEMU */
    info->fully_allocated += luks;
    info->required = info->fully_allocated - disk_size + data;
    info->has_bitmaps = m.version >= 3 && in_bs &&
                        qcow2_measure_source_has_bitmaps(in_bs);
    info->bitmaps = info->has_bitmaps ?
                    qcow2_bitmaps_measure(in_bs, m.cluster_size) : 0;
    return 0;
}
