/*
 * luks: the image format of a LUKS version 1 volume over any protocol, as
 * QEMU's luks driver reads and writes it.  The header and key material
 * (crypto/luks.c) take the start of the file; the guest sees the payload
 * after them, decrypted.
 *
 * Invariants:
 *  1. Guest data is encrypted and decrypted only in the worker pool
 *     (block/crypto.c), in bounce buffers of this driver: the caller's
 *     buffer is never encrypted in place (it may be guest memory).
 *  2. A node opened with BDRV_O_NO_IO (qemu-img info) has no master key
 *     and refuses I/O; it still reports the header.
 *  3. The payload offset is within the file at open: a header that claims
 *     otherwise is refused before anything is read from it.
 *  4. Bounce buffers come from s->bounce and go back there when the
 *     request piece is done; none outlives its request.
 */
#include "block/crypto.h"

#include "crypto/secret.h"
#include "qapi/qapi-opts.h"
#include "qblock/block-backend.h"

/* bounce buffers are at most this big; longer requests loop */
#define LUKS_BOUNCE_MAX (1024 * 1024)

typedef struct BDRVLuksState {
    /* immutable after open */
    CryptoLuks *luks;
    uint64_t payload_offset;
    BufferPool *bounce;         /* thread-safe */
} BDRVLuksState;

static int luks_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    /* magic and version 1 (big-endian) */
    if (buf_size >= 8 && !memcmp(buf, "LUKS\xba\xbe\0\x01", 8)) {
        return 100;
    }
    return 0;
}

static int luks_open(BlockDriverState *bs, QDict *options, int flags,
                     Error **errp)
{
    BDRVLuksState *s = bs->opaque;
    BlockCryptoChildIO cio = { 0 };
    CryptoLuksIO io;
    QemuOpts *opts;
    g_autofree char *secret = NULL;
    int64_t file_len;

    opts = qemu_opts_absorb_qdict(&qapi_opts_luks_runtime, options, errp);
    if (!opts) {
        return -EINVAL;
    }
    secret = g_strdup(qemu_opt_get(opts, "key-secret"));
    qemu_opts_del(opts);

    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    cio.child = bs->file;
    io = block_crypto_child_io(&cio);
    s->luks = crypto_luks_open(secret, &io,
                               flags & BDRV_O_NO_IO ? CRYPTO_LUKS_OPEN_NO_IO
                                                    : 0, errp);
    if (!s->luks) {
        return -EINVAL;
    }
    s->payload_offset = crypto_luks_payload_offset(s->luks);
    file_len = bdrv_getlength(bs->file->bs);
    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not get the size of '%s'",
                         bs->file->bs->filename);
        return file_len;
    }
    /* invariant 3 */
    if (s->payload_offset > (uint64_t)file_len) {
        error_setg(errp, "LUKS payload offset %" PRIu64 " is beyond the end "
                   "of the file (%" PRId64 " bytes)", s->payload_offset,
                   file_len);
        return -EINVAL;
    }
    s->bounce = buffer_pool_new(BLOCK_CRYPTO_BOUNCE_IDLE_MAX);
    bs->encrypted = true;
    return 0;
}

static void luks_close(BlockDriverState *bs)
{
    BDRVLuksState *s = bs->opaque;

    buffer_pool_free(s->bounce);
    crypto_luks_free(s->luks);
}

static void luks_refresh_limits(BlockDriverState *bs, Error **errp)
{
    bs->bl.request_alignment = MAX(bs->bl.request_alignment,
                                   CRYPTO_LUKS_SECTOR_SIZE);
}

static int64_t luks_getlength(BlockDriverState *bs)
{
    BDRVLuksState *s = bs->opaque;
    int64_t len = bdrv_getlength(bs->file->bs);

    if (len < 0) {
        return len;
    }
    /* the file may have shrunk under us since open */
    return len > (int64_t)s->payload_offset ? len - s->payload_offset : 0;
}

static int coroutine_fn luks_co_rw(BlockDriverState *bs, int64_t offset,
                                   int64_t bytes, QEMUIOVector *qiov,
                                   BlockCryptoDirection dir)
{
    BDRVLuksState *s = bs->opaque;
    size_t bounce_len = MIN(bytes, LUKS_BOUNCE_MAX);
    uint8_t *bounce;
    int ret = 0;

    if (bs->open_flags & BDRV_O_NO_IO) {
        return -EIO;            /* invariant 2 */
    }
    /* invariant 4 */
    bounce = buffer_pool_try_get(s->bounce, bdrv_opt_mem_align(bs->file->bs),
                                 bounce_len);
    if (!bounce) {
        return -ENOMEM;
    }
    for (int64_t done = 0; done < bytes && ret == 0; done += bounce_len) {
        size_t n = MIN(bounce_len, bytes - done);
        uint64_t host = s->payload_offset + offset + done;
        QEMUIOVector bounce_qiov;

        qemu_iovec_init_buf(&bounce_qiov, bounce, n);

        if (dir == BLOCK_CRYPTO_ENCRYPT) {
            qemu_iovec_to_buf(qiov, done, bounce, n);
            ret = block_crypto_co_run(bs, s->luks, dir, offset + done,
                                      bounce, n);
            if (ret == 0) {
                ret = bdrv_co_pwritev(bs->file, host, n, &bounce_qiov, 0);
            }
        } else {
            ret = bdrv_co_preadv(bs->file, host, n, &bounce_qiov, 0);
            if (ret == 0) {
                ret = block_crypto_co_run(bs, s->luks, dir, offset + done,
                                          bounce, n);
            }
            if (ret == 0) {
                qemu_iovec_from_buf(qiov, done, bounce, n);
            }
        }
    }
    buffer_pool_put(s->bounce, bounce, bounce_len);
    return ret;
}

static int coroutine_fn luks_co_preadv(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags)
{
    return luks_co_rw(bs, offset, bytes, qiov, BLOCK_CRYPTO_DECRYPT);
}

static int coroutine_fn luks_co_pwritev(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    return luks_co_rw(bs, offset, bytes, qiov, BLOCK_CRYPTO_ENCRYPT);
}

static int coroutine_fn luks_co_truncate(BlockDriverState *bs, int64_t offset,
                                         bool exact, PreallocMode prealloc,
                                         BdrvRequestFlags flags, Error **errp)
{
    BDRVLuksState *s = bs->opaque;

    if (offset > INT64_MAX - (int64_t)s->payload_offset) {
        error_setg(errp, "Size %" PRId64 " is too large for a LUKS payload "
                   "at %" PRIu64, offset, s->payload_offset);
        return -EINVAL;
    }
    return bdrv_co_truncate(bs->file, offset + s->payload_offset, exact,
                            prealloc, flags, errp);
}

static JsonNode *luks_get_specific_info(BlockDriverState *bs)
{
    BDRVLuksState *s = bs->opaque;
    g_autoptr(JsonObject) info = json_object_new();

    json_object_set_string_member(info, "type", "luks");
    json_object_set_object_member(info, "data",
                                  crypto_luks_get_info(s->luks));
    return json_node_init_object(json_node_alloc(), info);
}

static const char *luks_opts_get(void *opaque, const char *name)
{
    return qemu_opt_get(opaque, name);
}

static int luks_parse_opts(QemuOpts *opts, CryptoLuksCreateOptions *c,
                           Error **errp)
{
    crypto_luks_create_options_default(c);
    return crypto_luks_parse_create_options(c, luks_opts_get, opts, errp) ?
           0 : -EINVAL;
}

/* The header's I/O on the BlockBackend of a new image. */
static int luks_blk_read(void *opaque, uint64_t offset, void *buf,
                         size_t len, Error **errp)
{
    int ret = blk_pread(opaque, offset, len, buf, 0);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read LUKS header");
    }
    return ret < 0 ? ret : 0;
}

static int luks_blk_write(void *opaque, uint64_t offset, const void *buf,
                          size_t len, Error **errp)
{
    int ret = blk_pwrite(opaque, offset, len, buf, 0);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write LUKS header");
    }
    return ret < 0 ? ret : 0;
}

static int luks_blk_init(void *opaque, uint64_t len, Error **errp)
{
    return blk_truncate(opaque, len, false, PREALLOC_MODE_OFF, 0, errp);
}

/*
 * Writes a LUKS image of the size @opts give on @blk, emptied first (a
 * node given to blockdev-create may hold the data of a former image): the
 * header, key material and payload, preallocated as "preallocation" (the
 * file protocol's option, as in QEMU) says.
 */
static int luks_create_on(BlockBackend *blk, QemuOpts *opts, Error **errp)
{
    uint64_t size = ROUND_UP(qemu_opt_get_size(opts, "size", 0),
                             CRYPTO_LUKS_SECTOR_SIZE);
    CryptoLuksCreateOptions c;
    int prealloc = qemu_opt_get_enum(opts, "preallocation");
    CryptoLuks *luks;
    CryptoLuksIO io = {
        .read = luks_blk_read,
        .write = luks_blk_write,
        .init = luks_blk_init,
        .opaque = blk,
    };
    int ret;

    ret = luks_parse_opts(opts, &c, errp);
    if (ret < 0) {
        return ret;
    }
    ret = blk_truncate(blk, 0, false, PREALLOC_MODE_OFF, 0, errp);
    if (ret < 0) {
        return ret;
    }
    luks = crypto_luks_create(&c, &io, errp);
    if (!luks) {
        return -EINVAL;
    }
    ret = blk_truncate(blk, crypto_luks_payload_offset(luks) + size, false,
                       prealloc < 0 ? PREALLOC_MODE_OFF : prealloc, 0, errp);
    crypto_luks_free(luks);
    return ret;
}

static int coroutine_fn luks_co_create_opts(const BlockDriver *drv,
                                            const char *filename,
                                            QemuOpts *opts, Error **errp)
{
    BlockBackend *blk;
    int ret;

    blk = bdrv_create_format_file(drv, filename, opts, errp);
    if (!blk) {
        return -EIO;
    }
    ret = luks_create_on(blk, opts, errp);
    if (ret < 0) {
        bdrv_delete_format_file(blk);
    }
    blk_unref(blk);
    return ret;
}

/* blockdev-create: the image on the open node tgt->file. */
static int coroutine_fn luks_co_create_on_node(const BlockDriver *drv,
                                               const BdrvCreateTarget *tgt,
                                               QemuOpts *opts, Error **errp)
{
    BlockBackend *blk = bdrv_create_format_on_node(tgt->file, errp);
    int ret;

    if (!blk) {
        return -EPERM;
    }
    ret = luks_create_on(blk, opts, errp);
    blk_unref(blk);
    return ret;
}

static int luks_measure(QemuOpts *opts, BlockDriverState *in_bs,
                        BlockMeasureInfo *info, Error **errp)
{
    CryptoLuksCreateOptions c;
    char *passphrase;
    int64_t size;

    if (luks_parse_opts(opts, &c, errp) < 0) {
        return -EINVAL;
    }
    /* as QEMU, which builds a throw-away header: the secret must exist */
    if (!c.key_secret) {
        error_setg(errp, "Parameter 'key-secret' is required for cipher");
        return -EINVAL;
    }
    passphrase = crypto_secret_lookup_as_utf8(c.key_secret, errp);
    if (!passphrase) {
        return -EINVAL;
    }
    crypto_secret_free_str(passphrase);
    size = bdrv_measure_virtual_size(opts, in_bs, errp);
    if (size < 0) {
        return size;
    }
    /*
     * The payload is written whole (holes would read as noise).  QEMU
     * adds the size as given, not rounded to a sector: so do we, so that
     * both print the same figure.
     */
    info->required = info->fully_allocated =
        crypto_luks_header_len(&c) + size;
    return 0;
}

static int luks_amend_options(BlockDriverState *bs, QemuOpts *opts,
                              BlockDriverAmendStatusCB *status_cb,
                              void *cb_opaque, bool force, Error **errp)
{
    BDRVLuksState *s = bs->opaque;
    BlockCryptoChildIO cio = { .child = bs->file };
    CryptoLuksIO io = block_crypto_child_io(&cio);
    CryptoLuksAmendOptions a;
    int ret;

    ret = block_crypto_parse_amend(opts, "", &a, errp);
    if (ret == 0) {
        ret = crypto_luks_amend(s->luks, &io, &a, force, errp);
    }
    return ret;
}

static int luks_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    memset(bdi, 0, sizeof(*bdi));
    return 0;
}

static const BlockDriver bdrv_luks = {
    .format_name                    = "luks",
    .instance_size                  = sizeof(BDRVLuksState),
    .is_format                      = true,
    .runtime_opts                   = &qapi_opts_luks_runtime,
    .create_opts                    = &qapi_opts_luks_create,
    .amend_opts                     = &qapi_opts_luks_amend,
    .bdrv_probe                     = luks_probe,
    .bdrv_open                      = luks_open,
    .bdrv_close                     = luks_close,
    .bdrv_co_create_opts            = luks_co_create_opts,
    .bdrv_co_create_on_node         = luks_co_create_on_node,
    .bdrv_co_preadv                 = luks_co_preadv,
    .bdrv_co_pwritev                = luks_co_pwritev,
    .bdrv_co_truncate               = luks_co_truncate,
    .bdrv_getlength                 = luks_getlength,
    .bdrv_get_info                  = luks_get_info,
    .bdrv_get_specific_info         = luks_get_specific_info,
    .bdrv_refresh_limits            = luks_refresh_limits,
    .bdrv_measure                   = luks_measure,
    .bdrv_amend_options             = luks_amend_options,
};

block_init(bdrv_register, bdrv_luks)
