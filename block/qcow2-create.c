/*
 * qcow2 image creation: the creation options, the fixed layout QEMU
 * writes (header, refcount table, one refcount block, L1 table), and the
 * growth through the driver itself for what that layout cannot hold.
 */
#include "block/qcow2.h"

#include "qblock/block-backend.h"
#include "util/cutils.h"

/* ---------------------------------------------------------------------- */
/* Creating images */

typedef struct Qcow2CreateOpts {
    uint64_t size;
    int version;
    const char *backing_file;
    const char *backing_fmt;
    const char *data_file;
    bool data_file_raw;
    uint64_t cluster_size;
    PreallocMode prealloc;
    bool lazy_refcounts;
    uint64_t refcount_bits;
    Qcow2CompressionType compression_type;
    bool extended_l2;
    bool encrypt;               /* encrypt.format=luks */
} Qcow2CreateOpts;

/* The "v3 or greater" requirements, in QEMU's words. */
static int qcow2_create_need_v3(const Qcow2CreateOpts *c, bool condition,
                                const char *what, Error **errp)
{
    if (condition && c->version < 3) {
        error_setg(errp, "%s only supported with compatibility level 1.1 "
                   "and above (use version=v3 or greater)", what);
        return -EINVAL;
    }
    return 0;
}

int qcow2_compat_version(const char *compat)
{
    if (!compat || !strcmp(compat, "1.1") || !strcmp(compat, "v3")) {
        return 3;
    }
    if (!strcmp(compat, "0.10") || !strcmp(compat, "v2")) {
        return 2;
    }
    return 0;
}

int qcow2_check_cluster_size(uint64_t cluster_size, Error **errp)
{
    if (!is_power_of_2(cluster_size) ||
        cluster_size < (1 << QCOW2_MIN_CLUSTER_BITS) ||
        cluster_size > (1 << QCOW2_MAX_CLUSTER_BITS)) {
        error_setg(errp, "Cluster size must be a power of two between %d "
                   "and %dk", 1 << QCOW2_MIN_CLUSTER_BITS,
                   1 << (QCOW2_MAX_CLUSTER_BITS - 10));
        return -EINVAL;
    }
    return 0;
}

static int qcow2_parse_create_opts(QemuOpts *opts, Qcow2CreateOpts *c,
                                   Error **errp)
{
    const char *compat = qemu_opt_get(opts, "compat");
    const char *prealloc = qemu_opt_get(opts, "preallocation");
    const char *ctype = qemu_opt_get(opts, "compression_type");
    int ret;

    c->size = ROUND_UP(qemu_opt_get_size(opts, "size", 0), BDRV_SECTOR_SIZE);
    c->backing_file = qemu_opt_get(opts, "backing_file");
    c->backing_fmt = qemu_opt_get(opts, "backing_fmt");
    c->data_file = qemu_opt_get(opts, "data_file");
    c->data_file_raw = qemu_opt_get_bool(opts, "data_file_raw", false);
    c->cluster_size = qemu_opt_get_size(opts, "cluster_size",
                                        1 << QCOW2_DEFAULT_CLUSTER_BITS);
    c->lazy_refcounts = qemu_opt_get_bool(opts, "lazy_refcounts", false);
    c->refcount_bits = qemu_opt_get_number(opts, "refcount_bits",
                                           1 << QCOW2_DEFAULT_REFCOUNT_ORDER);

    c->version = qcow2_compat_version(compat);
    if (!c->version) {
        error_setg(errp, "Parameter 'version' does not accept value '%s'",
                   compat);
        return -EINVAL;
    }
    c->prealloc = PREALLOC_MODE__MAX;
    for (int i = 0; i < PREALLOC_MODE__MAX; i++) {
        if (!prealloc || !strcmp(prealloc, PreallocMode_str[i])) {
            c->prealloc = prealloc ? i : PREALLOC_MODE_OFF;
            break;
        }
    }
    if (c->prealloc == PREALLOC_MODE__MAX) {
        error_setg(errp, "Parameter 'preallocation' does not accept value "
                   "'%s'", prealloc);
        return -EINVAL;
    }
    if (!ctype || !strcmp(ctype, "zlib")) {
        c->compression_type = QCOW2_COMPRESSION_TYPE_ZLIB;
    } else if (!strcmp(ctype, "zstd")) {
        c->compression_type = QCOW2_COMPRESSION_TYPE_ZSTD;
    } else {
        error_setg(errp, "Parameter 'compression-type' does not accept "
                   "value '%s'", ctype);
        return -EINVAL;
    }

    if (c->backing_fmt && !c->backing_file) {
        error_setg(errp, "Backing format cannot be used without backing "
                   "file");
        return -EINVAL;
    }
    /* an image with a longer name could not be opened (QEMU's limit) */
    if (c->backing_file &&
        strlen(c->backing_file) > QCOW2_MAX_BACKING_FILE_NAME) {
        error_setg_errno(errp, EINVAL, "Could not assign backing file '%s' "
                         "with format '%s'", c->backing_file,
                         c->backing_fmt ? c->backing_fmt : "");
        return -EINVAL;
    }
    ret = qcow2_check_cluster_size(c->cluster_size, errp);
    if (ret < 0) {
        return ret;
    }
    ret = qcow2_crypt_wanted(opts, errp);
    if (ret < 0) {
        return ret;
    }
    c->encrypt = ret != QCOW2_CRYPT_NONE;
    c->extended_l2 = qemu_opt_get_bool(opts, "extended_l2", false);
    if (c->extended_l2) {
        ret = qcow2_create_need_v3(c, true, "Extended L2 entries are", errp);
        if (ret < 0) {
            return ret;
        }
        if (c->cluster_size < (1 << QCOW2_MIN_EXTL2_CLUSTER_BITS)) {
            error_setg(errp, "Extended L2 entries are only supported with "
                       "cluster sizes of at least %d bytes",
                       1 << QCOW2_MIN_EXTL2_CLUSTER_BITS);
            return -EINVAL;
        }
    }
    ret = qcow2_create_need_v3(c, c->lazy_refcounts, "Lazy refcounts", errp);
    if (ret < 0) {
        return ret;
    }
    if (c->refcount_bits > 64 || !is_power_of_2(c->refcount_bits)) {
        error_setg(errp, "Refcount width must be a power of two and may not "
                   "exceed 64 bits");
        return -EINVAL;
    }
    if (c->version < 3 && c->refcount_bits != 16) {
        error_setg(errp, "Different refcount widths than 16 bits require "
                   "compatibility level 1.1 or above (use version=v3 or "
                   "greater)");
        return -EINVAL;
    }
    if (c->data_file) {
        ret = qcow2_create_need_v3(c, true, "External data files are",
                                   errp);
        if (ret < 0) {
            return ret;
        }
    }
    if (c->data_file_raw && !c->data_file) {
        error_setg(errp, "data-file-raw requires data-file");
        return -EINVAL;
    }
    if (c->data_file_raw && c->backing_file) {
        error_setg(errp, "Backing file and data-file-raw cannot be used at "
                   "the same time");
        return -EINVAL;
    }
    /* preallocated clusters hide the backing file unless their
     * subclusters can stay unallocated */
    if (c->backing_file && c->prealloc != PREALLOC_MODE_OFF &&
        !c->extended_l2) {
        error_setg(errp, "Backing file and preallocation can only be used "
                   "at the same time if extended_l2 is on");
        return -EINVAL;
    }
    if (c->compression_type != QCOW2_COMPRESSION_TYPE_ZLIB &&
        c->version < 3) {
        error_setg(errp, "Non-zlib compression type is only supported with "
                   "compatibility level 1.1 and above (use version=v3 or "
                   "greater)");
        return -EINVAL;
    }
    return 0;
}

/* The image file, or its data file, created or given as a node. */
static BlockBackend *qcow2_create_target_blk(const BlockDriver *drv,
                                             const BdrvCreateTarget *tgt,
                                             bool data_file,
                                             const Qcow2CreateOpts *c,
                                             QemuOpts *opts, Error **errp)
{
    if (tgt->file) {
        return bdrv_create_format_on_node(data_file ? tgt->data_file
                                                    : tgt->file, errp);
    }
    return bdrv_create_format_file(drv,
                                   data_file ? c->data_file : tgt->filename,
                                   opts, errp);
}

/* Sets refcount entry @index of a refcount block to 1, any width. */
static void qcow2_refblock_set_one(uint8_t *block, int refcount_order,
                                   uint64_t index)
{
    int bits = 1 << refcount_order;

    if (bits < 8) {
        /* sub-byte entries are packed from the least significant bit */
        block[index * bits / 8] |= 1 << ((index * bits) % 8);
    } else {
        block[(index + 1) * (bits / 8) - 1] = 1;
    }
}

/*
 * Writes an empty image: header, refcount table, one refcount block and
 * the L1 table in clusters 0, 1, 2 and 3.., as QEMU lays them out.  With
 * @l1_size 0 and size 0 this is the seed that a later resize grows.
 */
static int qcow2_write_layout(BlockBackend *blk, BDRVQcow2State *t,
                              uint64_t size, Error **errp)
{
    size_t cs = t->cluster_size;
    uint64_t l1_bytes = (uint64_t)t->l1_size * sizeof(uint64_t);
    uint64_t nb_clusters = 3 + DIV_ROUND_UP(l1_bytes, cs);
    g_autofree uint8_t *buf = g_malloc0(3 * cs + l1_bytes);
    uint64_t reftable0 = GUINT64_TO_BE(2 * cs);
    int ret;

    ret = qcow2_header_serialise(t, size, buf, cs);
    if (ret < 0) {
        error_setg(errp, "Header extensions do not fit in a cluster");
        return ret;
    }
    memcpy(buf + cs, &reftable0, sizeof(reftable0));
    for (uint64_t i = 0; i < nb_clusters; i++) {
        qcow2_refblock_set_one(buf + 2 * cs, t->refcount_order, i);
    }
    ret = blk_pwrite(blk, 0, 3 * cs + l1_bytes, buf, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write qcow2 header");
        return ret;
    }
    return 0;
}

/* A state that describes the new image, for qcow2_header_serialise(). */
static void qcow2_create_state(BDRVQcow2State *t, const Qcow2CreateOpts *c)
{
    memset(t, 0, sizeof(*t));
    t->qcow_version = c->version;
    t->cluster_bits = ctz64(c->cluster_size);
    t->cluster_size = c->cluster_size;
    t->l2_bits = t->cluster_bits - (c->extended_l2 ? 4 : 3);
    if (c->extended_l2) {
        t->extended_l2 = true;
        t->incompatible_features |= QCOW2_INCOMPAT_EXTL2;
    }
    t->refcount_order = ctz64(c->refcount_bits);
    t->refcount_table_offset = c->cluster_size;
    t->refcount_table_size = c->cluster_size / sizeof(uint64_t);
    t->compression_type = c->compression_type;
    if (c->compression_type != QCOW2_COMPRESSION_TYPE_ZLIB) {
        t->incompatible_features |= QCOW2_INCOMPAT_COMPRESSION;
    }
    if (c->data_file) {
        t->incompatible_features |= QCOW2_INCOMPAT_DATA_FILE;
        t->image_data_file = (char *)c->data_file;
    }
    if (c->data_file_raw) {
        t->autoclear_features |= QCOW2_AUTOCLEAR_DATA_FILE_RAW;
    }
    if (c->lazy_refcounts) {
        t->compatible_features |= QCOW2_COMPAT_LAZY_REFCOUNTS;
    }
    t->image_backing_file = (char *)c->backing_file;
    t->image_backing_format = (char *)c->backing_fmt;
}

/*
 * Grows the seed image to its size through the driver itself (L1 growth,
 * preallocation), as QEMU does, for what the fixed layout cannot hold
 * (@grow); and sets up encryption, whose header the allocator places.
 * On nodes, the image is opened over them by name, never by a second
 * open of their files (which their locks would refuse).
 */
static int qcow2_create_grow(const BdrvCreateTarget *tgt,
                             const Qcow2CreateOpts *c, QemuOpts *opts,
                             bool grow, Error **errp)
{
    QDict *options = qdict_new();
    BlockBackend *blk;
    int ret;

    qdict_put_str(options, "driver", "qcow2");
    if (tgt->file) {
        qdict_put_str(options, "file", bdrv_get_node_name(tgt->file));
        if (tgt->data_file) {
            qdict_put_str(options, "data-file",
                          bdrv_get_node_name(tgt->data_file));
        }
    }
    blk = blk_new_open(tgt->file ? NULL : tgt->filename, NULL, options,
                       BDRV_O_RDWR | BDRV_O_RESIZE | BDRV_O_NO_BACKING,
                       errp);
    if (!blk) {
        return -EIO;
    }
    ret = c->encrypt ? qcow2_crypt_create(blk_bs(blk), opts, errp) : 0;
    if (ret == 0 && grow) {
        ret = blk_truncate(blk, c->size, false, c->prealloc, 0, errp);
        if (ret < 0) {
            error_prepend(errp, "Could not resize image: ");
        }
    }
    blk_unref(blk);
    return ret;
}

int coroutine_fn qcow2_co_create_target(const BlockDriver *drv,
                                        const BdrvCreateTarget *tgt,
                                        QemuOpts *opts, Error **errp)
{
    Qcow2CreateOpts c = { 0 };
    BDRVQcow2State t;
    BlockBackend *blk = NULL;
    uint64_t l1_size, refblock_entries, l1_clusters;
    bool fixed_layout;
    int ret;

    ret = qcow2_parse_create_opts(opts, &c, errp);
    if (ret < 0) {
        return ret;
    }
    if (tgt->file && !c.data_file != !tgt->data_file) {
        error_setg(errp, "A data file needs both its name and its node");
        return -EINVAL;
    }
    qcow2_create_state(&t, &c);
    l1_size = qcow2_size_to_l1(&t, c.size);
    if (l1_size > QCOW_MAX_L1_SIZE / sizeof(uint64_t)) {
        error_setg(errp, "The image size is too large for file format "
                   "'qcow2'");
        return -EFBIG;
    }

    /* a raw data file is the disk: every cluster maps to its own offset
     * from the start (QEMU preallocates the metadata for it too) */
    if (c.data_file_raw && c.prealloc == PREALLOC_MODE_OFF) {
        c.prealloc = PREALLOC_MODE_METADATA;
    }
    if (c.data_file) {
        blk = qcow2_create_target_blk(drv, tgt, true, &c, opts, errp);
        if (!blk) {
            return -EIO;
        }
        /*
         * The data file is as long as the disk; falloc and full reserve
         * all of it (QEMU does so too), metadata leaves it sparse.
         */
        ret = blk_truncate(blk, c.size, false,
                           c.prealloc != PREALLOC_MODE_METADATA ?
                           c.prealloc : PREALLOC_MODE_OFF, 0, errp);
        blk_unref(blk);
        if (ret < 0) {
            return ret;
        }
    }
    blk = qcow2_create_target_blk(drv, tgt, false, &c, opts, errp);
    if (!blk) {
        return -EIO;
    }

    /* the fixed layout holds the L1 table if one refcount block covers
     * it; anything else grows through the allocator */
    refblock_entries = (uint64_t)c.cluster_size * 8 / c.refcount_bits;
    l1_clusters = DIV_ROUND_UP(l1_size * sizeof(uint64_t), c.cluster_size);
    fixed_layout = c.prealloc == PREALLOC_MODE_OFF && !c.data_file_raw &&
                   3 + l1_clusters <= refblock_entries;
    if (fixed_layout) {
        t.l1_size = l1_size;
        t.l1_table_offset = l1_size ? 3 * c.cluster_size : 0;
    }
    ret = qcow2_write_layout(blk, &t, fixed_layout ? c.size : 0, errp);
    blk_unref(blk);
    if (ret < 0 || (fixed_layout && !c.encrypt)) {
        return ret;
    }
    return qcow2_create_grow(tgt, &c, opts, !fixed_layout, errp);
}

int coroutine_fn qcow2_co_create_opts(const BlockDriver *drv,
                                      const char *filename,
                                      QemuOpts *opts, Error **errp)
{
    BdrvCreateTarget tgt = { .filename = filename };

    return qcow2_co_create_target(drv, &tgt, opts, errp);
}
