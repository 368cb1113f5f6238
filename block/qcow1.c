/*
 * qcow: the format driver for QEMU's first copy-on-write format (qcow
 * version 1), read-write, as QEMU 7.2's.  Opening, the L2 cache,
 * reading (through the backing file where the image has no cluster,
 * inflating compressed clusters, decrypting legacy AES ones), block
 * status and the driver table live here; allocation and compressed
 * writes in block/qcow1-write.c, creation in block/qcow1-create.c.
 * The on-disk layout and the invariants are in block/qcow1.h.
 */
#include "block/qcow1.h"

#include <zlib.h>

#include "block/crypto.h"
#include "qapi/qapi-opts.h"

static int qcow1_probe(const uint8_t *buf, int buf_size,
                       const char *filename)
{
    const Qcow1Header *h = (const Qcow1Header *)buf;

    if (buf_size < (int)sizeof(*h)) {
        return 0;
    }
    return GUINT32_FROM_BE(h->magic) == QCOW1_MAGIC &&
           GUINT32_FROM_BE(h->version) == QCOW1_VERSION ? 100 : 0;
}

/* QEMU's checks of the header, in QEMU's order and words (inv. 1). */
static int qcow1_check_header(const Qcow1Header *h, Error **errp)
{
    uint64_t size = GUINT64_FROM_BE(h->size);

    if (GUINT32_FROM_BE(h->magic) != QCOW1_MAGIC) {
        error_setg(errp, "Image not in qcow format");
        return -EINVAL;
    }
    if (GUINT32_FROM_BE(h->version) != QCOW1_VERSION) {
        error_setg(errp, "qcow (v%" PRIu32 ") does not support qcow "
                   "version %" PRIu32, QCOW1_VERSION,
                   GUINT32_FROM_BE(h->version));
        if (GUINT32_FROM_BE(h->version) == 2 ||
            GUINT32_FROM_BE(h->version) == 3) {
            error_append_hint(errp, "Try the 'qcow2' driver instead.\n");
        }
        return -ENOTSUP;
    }
    if (size <= 1) {
        error_setg(errp, "Image size is too small (must be at least 2 "
                   "bytes)");
        return -EINVAL;
    }
    if (h->cluster_bits < 9 || h->cluster_bits > 16) {
        error_setg(errp, "Cluster size must be between 512 and 64k");
        return -EINVAL;
    }
    /* 512 bytes to 64 KiB of eight-byte entries */
    if (h->l2_bits < 9 - 3 || h->l2_bits > 16 - 3) {
        error_setg(errp, "L2 table size must be between 512 and 64k");
        return -EINVAL;
    }
    return 0;
}

/* The legacy AES method and the encrypt.* options (inv. 4). */
static int qcow1_open_crypto(BlockDriverState *bs, uint32_t method,
                             QemuOpts *opts, int flags, Error **errp)
{
    BDRVQcow1State *s = bs->opaque;
    const char *format = qemu_opt_get(opts, "encrypt.format");
    const char *secret = qemu_opt_get(opts, "encrypt.key-secret");

    if (method == QCOW1_CRYPT_NONE) {
        if (format) {
            error_setg(errp, "No encryption in image header, but options "
                       "specified format '%s'", format);
            return -EINVAL;
        }
        return 0;
    }
    if (method != QCOW1_CRYPT_AES) {
        error_setg(errp, "invalid encryption method in qcow header");
        return -EINVAL;
    }
    return block_crypto_open_legacy_aes(bs, format, secret, flags,
                                        &s->crypto, errp);
}

/* The backing file's name, as QEMU reads it (no format: it is probed). */
static int qcow1_read_backing_name(BlockDriverState *bs,
                                   const Qcow1Header *h, Error **errp)
{
    uint64_t offset = GUINT64_FROM_BE(h->backing_file_offset);
    uint32_t len = GUINT32_FROM_BE(h->backing_file_size);
    int ret;

    if (!offset) {
        return 0;
    }
    if (len > QCOW1_BACKING_NAME_MAX || len >= sizeof(bs->backing_file)) {
        error_setg(errp, "Backing file name too long");
        return -EINVAL;
    }
    /* inv. 2 */
    if (offset > QCOW1_OFFSET_MAX) {
        error_setg(errp, "Backing file name offset 0x%" PRIx64 " is "
                   "invalid", offset);
        return -EINVAL;
    }
    ret = bdrv_pread(bs->file, offset, len, bs->backing_file, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the backing file name");
        return ret;
    }
    bs->backing_file[len] = '\0';
    return 0;
}

/* inv. 1: the L1 entries the file holds; the others read as 0. */
static int qcow1_read_l1(BlockDriverState *bs, Error **errp)
{
    BDRVQcow1State *s = bs->opaque;
    int64_t file_len = bdrv_getlength(bs->file->bs);
    uint64_t in_file = 0;
    int ret;

    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not get the file's length");
        return file_len;
    }
    if ((uint64_t)file_len > s->l1_table_offset) {
        in_file = DIV_ROUND_UP((uint64_t)file_len - s->l1_table_offset,
                               sizeof(uint64_t));
    }
    /* l1_size <= INT_MAX / 8: an index is a guint */
    s->l1_extra = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                        g_free);
    s->l1_loaded = MIN(in_file, s->l1_size);
    s->l1_table = g_try_new0(uint64_t, MAX(s->l1_loaded, 1));
    if (!s->l1_table) {
        error_setg(errp, "Could not allocate memory for L1 table");
        return -ENOMEM;
    }
    ret = bdrv_pread(bs->file, s->l1_table_offset,
                     s->l1_loaded * sizeof(uint64_t), s->l1_table, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read L1 table");
        return ret;
    }
    for (uint64_t i = 0; i < s->l1_loaded; i++) {
        s->l1_table[i] = GUINT64_FROM_BE(s->l1_table[i]);
    }
    return 0;
}

static void qcow1_close(BlockDriverState *bs)
{
    BDRVQcow1State *s = bs->opaque;

    g_clear_pointer(&s->l1_table, g_free);
    g_clear_pointer(&s->l1_extra, g_hash_table_destroy);
    g_clear_pointer(&s->l2_cache, g_free);
    g_clear_pointer(&s->cluster_cache, g_free);
    crypto_luks_free(s->crypto);
    s->crypto = NULL;
}

static int qcow1_open_image(BlockDriverState *bs, QemuOpts *opts, int flags,
                            Error **errp)
{
    BDRVQcow1State *s = bs->opaque;
    Qcow1Header h;
    uint64_t size;
    unsigned shift;
    int ret;

    ret = bdrv_pread(bs->file, 0, sizeof(h), &h, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the qcow header");
        return ret;
    }
    ret = qcow1_check_header(&h, errp);
    if (ret < 0) {
        return ret;
    }
    size = GUINT64_FROM_BE(h.size);
    ret = qcow1_open_crypto(bs, GUINT32_FROM_BE(h.crypt_method), opts, flags,
                            errp);
    if (ret < 0) {
        return ret;
    }
    s->cluster_bits = h.cluster_bits;
    s->cluster_size = 1u << s->cluster_bits;
    s->l2_bits = h.l2_bits;
    s->l2_size = 1u << s->l2_bits;
    s->disk_size = size / QCOW1_SECTOR * QCOW1_SECTOR;
    s->cluster_offset_mask = (1ull << (63 - s->cluster_bits)) - 1;
    shift = s->cluster_bits + s->l2_bits;
    if (size > UINT64_MAX - (1ull << shift)) {
        error_setg(errp, "Image too large");
        return -EINVAL;
    }
    s->l1_size = (size + (1ull << shift) - 1) >> shift;
    if (s->l1_size > INT_MAX / sizeof(uint64_t)) {
        error_setg(errp, "Image too large");
        return -EINVAL;
    }
    s->l1_table_offset = GUINT64_FROM_BE(h.l1_table_offset);
    if (s->l1_table_offset > QCOW1_OFFSET_MAX) {
        error_setg(errp, "L1 table offset 0x%" PRIx64 " is invalid",
                   s->l1_table_offset);
        return -EINVAL;
    }
    ret = qcow1_read_l1(bs, errp);
    if (ret < 0) {
        return ret;
    }
    /* at most 16 * 64 KiB and 64 KiB (inv. 1 bounds both sizes) */
    s->l2_cache = g_try_malloc0((size_t)QCOW1_L2_CACHE_SIZE * s->l2_size *
                                sizeof(uint64_t));
    s->cluster_cache = g_try_malloc(s->cluster_size);
    if (!s->l2_cache || !s->cluster_cache) {
        error_setg(errp, "Could not allocate the qcow caches");
        return -ENOMEM;
    }
    s->cluster_cache_offset = UINT64_MAX;
    return qcow1_read_backing_name(bs, &h, errp);
}

static int qcow1_open(BlockDriverState *bs, QDict *options, int flags,
                      Error **errp)
{
    BDRVQcow1State *s = bs->opaque;
    QemuOpts *opts;
    int ret;

    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    opts = qemu_opts_absorb_qdict(&qapi_opts_qcow_runtime, options, errp);
    if (!opts) {
        return -EINVAL;
    }
    qemu_co_mutex_init(&s->lock);
    ret = qcow1_open_image(bs, opts, flags, errp);
    qemu_opts_del(opts);
    if (ret < 0) {
        qcow1_close(bs);
    }
    return ret;
}

static int qcow1_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    return 0;
}

/*
 * The L2 table at @l2_offset, from the cache (QEMU's: the least used of
 * 16 is replaced); @is_new: a table just allocated, zeroed and written
 * to the file here.  NULL with *@ret set on error.  Inv. 3: s->lock held.
 */
uint64_t *coroutine_fn qcow1_l2_load(BlockDriverState *bs,
                                     uint64_t l2_offset, bool is_new,
                                     int *ret)
{
    BDRVQcow1State *s = bs->opaque;
    size_t bytes = (size_t)s->l2_size * sizeof(uint64_t);
    uint64_t *table;
    int slot = 0;

    for (int i = 0; i < QCOW1_L2_CACHE_SIZE; i++) {
        if (s->l2_cache_offsets[i] == l2_offset) {
            if (++s->l2_cache_counts[i] == UINT32_MAX) {
                for (int j = 0; j < QCOW1_L2_CACHE_SIZE; j++) {
                    s->l2_cache_counts[j] >>= 1;
                }
            }
            return s->l2_cache + (size_t)i * s->l2_size;
        }
        if (s->l2_cache_counts[i] < s->l2_cache_counts[slot]) {
            slot = i;
        }
    }
    table = s->l2_cache + (size_t)slot * s->l2_size;
    /* a failed load leaves the slot empty */
    s->l2_cache_offsets[slot] = 0;
    if (is_new) {
        QEMUIOVector qiov;

        memset(table, 0, bytes);
        qemu_iovec_init_buf(&qiov, table, bytes);
        BLKDBG_EVENT(bs->file, BLKDBG_L2_ALLOC_WRITE);
        *ret = bdrv_co_pwritev(bs->file, l2_offset, bytes, &qiov, 0);
    } else {
        QEMUIOVector qiov;

        qemu_iovec_init_buf(&qiov, table, bytes);
        BLKDBG_EVENT(bs->file, BLKDBG_L2_LOAD);
        *ret = bdrv_co_preadv(bs->file, l2_offset, bytes, &qiov, 0);
    }
    if (*ret < 0) {
        return NULL;
    }
    s->l2_cache_offsets[slot] = l2_offset;
    s->l2_cache_counts[slot] = 1;
    return table;
}

/*
 * Fills @m for the guest @offset: the L2 entry (0 where there is no
 * table or no cluster).  Inv. 2: a table's offset is checked before it
 * is read, a data cluster's before it is used.  Inv. 3: s->lock held.
 */
int coroutine_fn qcow1_map(BlockDriverState *bs, uint64_t offset,
                           Qcow1Map *m)
{
    BDRVQcow1State *s = bs->opaque;
    uint64_t *table;
    int ret;

    *m = (Qcow1Map) {
        .l1_index = offset >> (s->l2_bits + s->cluster_bits),
        .l2_index = (offset >> s->cluster_bits) & (s->l2_size - 1),
    };
    m->l2_offset = qcow1_l1_get(s, m->l1_index);
    if (!m->l2_offset) {
        return 0;
    }
    if (m->l2_offset >= QCOW1_OFFSET_MAX) {
        error_report("qcow: L2 table offset 0x%" PRIx64 " of L1 entry %"
                     PRIu64 " is invalid", m->l2_offset, m->l1_index);
        return -EIO;
    }
    table = qcow1_l2_load(bs, m->l2_offset, false, &ret);
    if (!table) {
        return ret;
    }
    m->entry = GUINT64_FROM_BE(table[m->l2_index]);
    if (m->entry && !qcow1_is_compressed(m->entry) &&
        (m->entry >= QCOW1_OFFSET_MAX || m->entry % QCOW1_SECTOR)) {
        error_report("qcow: cluster offset 0x%" PRIx64 " of L2 table at 0x%"
                     PRIx64 ", entry %" PRIu32 " is invalid", m->entry,
                     m->l2_offset, m->l2_index);
        return -EIO;
    }
    return 0;
}

/* Raw deflate (no zlib header, 4 KiB window), the whole output or -EIO. */
static int qcow1_inflate(uint8_t *out, size_t out_len, const uint8_t *in,
                         size_t in_len)
{
    z_stream strm = {
        .next_in = (Bytef *)in,
        .avail_in = in_len,
        .next_out = out,
        .avail_out = out_len,
    };
    int ret;

    if (inflateInit2(&strm, -12) != Z_OK) {
        return -EIO;
    }
    ret = inflate(&strm, Z_FINISH);
    inflateEnd(&strm);
    /* QEMU takes a stream whose end marker lies past the input, too */
    if ((ret != Z_STREAM_END && ret != Z_BUF_ERROR) || strm.avail_out) {
        return -EIO;
    }
    return 0;
}

/*
 * The compressed cluster of @entry, inflated into s->cluster_cache
 * unless it is already there.  Inv. 3: s->lock held.
 */
int coroutine_fn qcow1_read_compressed(BlockDriverState *bs, uint64_t entry)
{
    BDRVQcow1State *s = bs->opaque;
    uint64_t coffset = entry & s->cluster_offset_mask;
    /* inv. 2: below the cluster size by the mask */
    size_t csize = (entry >> (63 - s->cluster_bits)) & (s->cluster_size - 1);
    g_autofree uint8_t *in = NULL;
    QEMUIOVector qiov;
    int ret;

    if (s->cluster_cache_offset == coffset) {
        return 0;
    }
    if (coffset >= QCOW1_OFFSET_MAX) {
        error_report("qcow: compressed cluster offset 0x%" PRIx64 " is "
                     "invalid", coffset);
        return -EIO;
    }
    in = g_malloc(MAX(csize, 1));
    qemu_iovec_init_buf(&qiov, in, csize);
    BLKDBG_EVENT(bs->file, BLKDBG_READ_COMPRESSED);
    ret = bdrv_co_preadv(bs->file, coffset, csize, &qiov, 0);
    if (ret < 0) {
        return ret;
    }
    s->cluster_cache_offset = UINT64_MAX;
    if (qcow1_inflate(s->cluster_cache, s->cluster_size, in, csize) < 0) {
        error_report("qcow: compressed cluster at 0x%" PRIx64 " (%zu bytes) "
                     "does not inflate to a cluster", coffset, csize);
        return -EIO;
    }
    s->cluster_cache_offset = coffset;
    return 0;
}

/* Reads @n bytes at @offset, within one cluster, into @qiov at @done. */
static int coroutine_fn qcow1_read_piece(BlockDriverState *bs,
                                         uint64_t offset, uint64_t n,
                                         QEMUIOVector *qiov, size_t done)
{
    BDRVQcow1State *s = bs->opaque;
    uint64_t in_cluster = offset & (s->cluster_size - 1);
    QEMUIOVector bounce;
    uint8_t *buf;
    Qcow1Map m;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qcow1_map(bs, offset, &m);
    if (ret == 0 && qcow1_is_compressed(m.entry)) {
        ret = qcow1_read_compressed(bs, m.entry);
        if (ret == 0) {
            qemu_iovec_from_buf(qiov, done, s->cluster_cache + in_cluster, n);
        }
    }
    qemu_co_mutex_unlock(&s->lock);
    if (ret < 0 || qcow1_is_compressed(m.entry)) {
        return ret;
    }
    if (!m.entry) {
        if (bs->backing) {
            return bdrv_co_read_backing(bs, offset, n, qiov, done);
        }
        qemu_iovec_memset(qiov, done, 0, n);
        return 0;
    }
    if (!s->crypto) {
        BLKDBG_EVENT(bs->file, BLKDBG_READ_AIO);
        return bdrv_co_preadv_part(bs->file, m.entry + in_cluster, n, qiov,
                                   done, 0);
    }
    /* inv. 4: decrypted in a bounce buffer, sectors whole (alignment) */
    buf = qemu_try_blockalign(bs->file->bs, n);
    if (!buf) {
        return -ENOMEM;
    }
    qemu_iovec_init_buf(&bounce, buf, n);
    BLKDBG_EVENT(bs->file, BLKDBG_READ_AIO);
    ret = bdrv_co_preadv(bs->file, m.entry + in_cluster, n, &bounce, 0);
    if (ret < 0) {
        qemu_vfree(buf);
        return ret;
    }
    ret = block_crypto_co_run(bs, s->crypto, BLOCK_CRYPTO_DECRYPT, offset,
                              buf, n);
    if (ret == 0) {
        qemu_iovec_from_buf(qiov, done, buf, n);
    }
    qemu_vfree(buf);
    return ret;
}

/* One piece of qcow1_each_cluster(): @opaque points to its Qcow1PieceFn. */
static int64_t coroutine_fn qcow1_cluster_piece(BlockDriverState *bs,
                                                int64_t offset, int64_t bytes,
                                                QEMUIOVector *qiov,
                                                size_t done, void *opaque)
{
    BDRVQcow1State *s = bs->opaque;
    Qcow1PieceFn **fn = opaque;
    uint64_t in_cluster = offset & (s->cluster_size - 1);
    uint64_t n = MIN(s->cluster_size - in_cluster, (uint64_t)bytes);
    int ret = (*fn)(bs, offset, n, qiov, done);

    return ret < 0 ? ret : (int64_t)n;
}

int coroutine_fn qcow1_each_cluster(BlockDriverState *bs, int64_t offset,
                                    int64_t bytes, QEMUIOVector *qiov,
                                    Qcow1PieceFn *fn)
{
    return bdrv_co_each_piece(bs, offset, bytes, qiov, qcow1_cluster_piece,
                              &fn);
}

static int coroutine_fn qcow1_co_preadv(BlockDriverState *bs,
                                        int64_t offset, int64_t bytes,
                                        QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    return qcow1_each_cluster(bs, offset, bytes, qiov, qcow1_read_piece);
}

static int coroutine_fn qcow1_co_block_status(BlockDriverState *bs,
                                              bool want_zero, int64_t offset,
                                              int64_t bytes, int64_t *pnum,
                                              int64_t *map,
                                              BlockDriverState **file)
{
    BDRVQcow1State *s = bs->opaque;
    uint64_t in_cluster = offset & (s->cluster_size - 1);
    Qcow1Map m;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qcow1_map(bs, offset, &m);
    qemu_co_mutex_unlock(&s->lock);
    if (ret < 0) {
        return ret;
    }
    *pnum = MIN((int64_t)(s->cluster_size - in_cluster), bytes);
    if (!m.entry) {
        return 0;
    }
    /* as QEMU: neither a compressed nor an encrypted cluster is mapped */
    if (qcow1_is_compressed(m.entry) || s->crypto || bs->encrypted) {
        return BDRV_BLOCK_DATA;
    }
    *map = m.entry + in_cluster;
    *file = bs->file->bs;
    return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
}

static int64_t qcow1_getlength(BlockDriverState *bs)
{
    BDRVQcow1State *s = bs->opaque;

    return s->disk_size;
}

static int qcow1_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    BDRVQcow1State *s = bs->opaque;

    bdi->cluster_size = s->cluster_size;
    return 0;
}

static const BlockDriver bdrv_qcow1 = {
    .format_name                    = "qcow",
    .instance_size                  = sizeof(BDRVQcow1State),
    .is_format                      = true,
    .supports_backing               = true,
    .bdrv_probe                     = qcow1_probe,
    .bdrv_open                      = qcow1_open,
    .bdrv_close                     = qcow1_close,
    .bdrv_reopen_prepare            = qcow1_reopen_prepare,
    .bdrv_co_preadv                 = qcow1_co_preadv,
    .bdrv_co_pwritev                = qcow1_co_pwritev,
    .bdrv_co_pwritev_compressed     = qcow1_co_pwritev_compressed,
    .runtime_opts                   = &qapi_opts_qcow_runtime,
    .create_opts                    = &qapi_opts_qcow_create,
    .bdrv_co_create_opts            = qcow1_co_create_opts,
    .bdrv_co_create_on_node         = qcow1_co_create_on_node,
    .bdrv_co_block_status           = qcow1_co_block_status,
    .bdrv_getlength                 = qcow1_getlength,
    .bdrv_get_info                  = qcow1_get_info,
    /* as QEMU: whole sectors, which encryption needs (inv. 4) */
    .request_alignment              = QCOW1_SECTOR,
    .bdrv_make_empty                = qcow1_make_empty,
};

block_init(bdrv_register, bdrv_qcow1)
