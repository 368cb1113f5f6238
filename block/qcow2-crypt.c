/*
 * qcow2 encryption: encrypt.format=luks (crypt_method 2), as QEMU lays it
 * out: a LUKS header in clusters of the image that the "full disk
 * encryption header pointer" extension points to, and every guest sector
 * encrypted with the LUKS volume's cipher, its IV the sector number of
 * the *host* offset (QEMU's rule for LUKS in qcow2; only the legacy AES
 * method uses guest offsets).
 *
 * Invariants:
 *  1. Metadata (header, L1/L2 tables, refcounts, snapshots) is never
 *     encrypted: only guest data that reaches the data file through
 *     qcow2_crypt_co_pwritev()/preadv().
 *  2. Guest data is encrypted in bounce buffers in the worker pool
 *     (block/crypto.c), never in the caller's buffer and never in the
 *     event loop.
 *  3. An encrypted image's requests are aligned to 512 bytes (LUKS
 *     sectors): qcow2_refresh_limits() sets it while s->crypto is set.
 *  4. Bounce buffers come from s->crypto_bounce and go back there when
 *     the request piece is done; none outlives its request.
 */
#include "block/qcow2.h"

#include "block/crypto.h"
#include "crypto/secret.h"

/* the bounce buffer of one request piece, at most */
#define QCOW2_CRYPT_BOUNCE_MAX (2 * 1024 * 1024)

typedef struct QEMU_PACKED Qcow2CryptoHeaderExt {
    uint64_t offset;
    uint64_t length;
} Qcow2CryptoHeaderExt;

/* The legacy method: no header of its own, the passphrase is the key. */
static int qcow2_crypt_open_aes(BlockDriverState *bs,
                                const Qcow2HeaderExts *exts,
                                const char *format, const char *secret,
                                int flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (exts->has_crypto_header) {
        error_setg(errp, "Crypto header extension only expected with LUKS "
                   "encryption");
        return -EINVAL;
    }
    return block_crypto_open_legacy_aes(bs, format, secret, flags,
                                        &s->crypto, errp);
}

int qcow2_crypt_open(BlockDriverState *bs, const Qcow2HeaderExts *exts,
                     QDict *options, int flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree char *secret = g_strdup(qdict_get_try_str(
                                           options, "encrypt.key-secret"));
    g_autofree char *format = g_strdup(qdict_get_try_str(
                                           options, "encrypt.format"));
    BlockCryptoChildIO cio;
    CryptoLuksIO io;
    int64_t file_len;

    qdict_del(options, "encrypt.key-secret");
    qdict_del(options, "encrypt.format");
    if (s->crypt_method == QCOW2_CRYPT_NONE) {
        if (exts->has_crypto_header) {
            error_setg(errp, "Crypto header extension only expected when "
                       "encryption is enabled");
            return -EINVAL;
        }
        if (format) {
            error_setg(errp, "Parameter 'encrypt.format' is given, but the "
                       "image is not encrypted");
            return -EINVAL;
        }
        return 0;
    }
    if (s->crypt_method == QCOW2_CRYPT_AES) {
        return qcow2_crypt_open_aes(bs, exts, format, secret, flags, errp);
    }
    if (format && strcmp(format, "luks")) {
        error_setg(errp, "Header reported 'luks' encryption format but "
                   "options specify '%s'", format);
        return -EINVAL;
    }
    if (!exts->has_crypto_header) {
        error_setg(errp, "Missing crypto header for crypt method 2");
        return -EINVAL;
    }
    file_len = bdrv_getlength(bs->file->bs);
    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not get the size of '%s'",
                         bs->file->bs->filename);
        return file_len;
    }
    if (!exts->crypto_header_offset ||
        offset_into_cluster(s, exts->crypto_header_offset) ||
        exts->crypto_header_length < 592 ||
        exts->crypto_header_offset > (uint64_t)file_len ||
        exts->crypto_header_length > (uint64_t)file_len -
                                     exts->crypto_header_offset) {
        error_setg(errp, "Invalid crypto header: offset %" PRIu64 ", length "
                   "%" PRIu64 " in a file of %" PRId64 " bytes",
                   exts->crypto_header_offset, exts->crypto_header_length,
                   file_len);
        return -EINVAL;
    }
    s->crypto_header_offset = exts->crypto_header_offset;
    s->crypto_header_length = exts->crypto_header_length;
    if (!secret && !(flags & BDRV_O_NO_IO)) {
        error_setg(errp, "Parameter 'encrypt.key-secret' is required for "
                   "cipher");
        return -EINVAL;
    }
    cio = (BlockCryptoChildIO) {
        .child = bs->file,
        .offset = s->crypto_header_offset,
        .limit = s->crypto_header_length,
    };
    io = block_crypto_child_io(&cio);
    s->crypto = crypto_luks_open(secret, &io,
                                 flags & BDRV_O_NO_IO ?
                                 CRYPTO_LUKS_OPEN_NO_IO : 0, errp);
    if (!s->crypto) {
        return -EINVAL;
    }
    bs->encrypted = true;
    return 0;
}

void qcow2_crypt_close(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    crypto_luks_free(s->crypto);
    s->crypto = NULL;
    buffer_pool_free(s->crypto_bounce);
    s->crypto_bounce = NULL;
}

int qcow2_crypt_wanted(QemuOpts *opts, Error **errp)
{
    const char *format = qemu_opt_get(opts, "encrypt.format");

    if (qemu_opt_get_bool(opts, "encryption", false)) {
        if (format) {
            error_setg(errp, "'encrypt.format' and its alias 'encryption' "
                       "can't be used at the same time");
            return -EINVAL;
        }
        format = "aes";
    }
    if (!format) {
        return QCOW2_CRYPT_NONE;
    }
    /* qcow: QEMU's name of the same (QCryptoBlockFormat, blockdev-create) */
    if (!strcmp(format, "aes") || !strcmp(format, "qcow")) {
        return QCOW2_CRYPT_AES;
    }
    if (!strcmp(format, "luks")) {
        return QCOW2_CRYPT_LUKS;
    }
    error_setg(errp, "Parameter 'encrypt.format' does not accept value "
               "'%s'", format);
    return -EINVAL;
}

static const char *qcow2_crypt_opt(void *opaque, const char *name)
{
    g_autofree char *key = g_strconcat("encrypt.", name, NULL);

    return qemu_opt_get(opaque, key);
}

/* Parses encrypt.*; the key secret must name a secret, as for create. */
static int qcow2_crypt_parse_create(QemuOpts *opts,
                                    CryptoLuksCreateOptions *c,
                                    Error **errp)
{
    char *passphrase;

    crypto_luks_create_options_default(c);
    if (!crypto_luks_parse_create_options(c, qcow2_crypt_opt, opts, errp)) {
        return -EINVAL;
    }
    if (!c->key_secret) {
        error_setg(errp, "Parameter 'encrypt.key-secret' is required for "
                   "cipher");
        return -EINVAL;
    }
    passphrase = crypto_secret_lookup_as_utf8(c->key_secret, errp);
    if (!passphrase) {
        return -EINVAL;
    }
    crypto_secret_free_str(passphrase);
    return 0;
}

int64_t qcow2_crypt_measure(QemuOpts *opts, int cluster_size, Error **errp)
{
    CryptoLuksCreateOptions c;
    int ret = qcow2_crypt_wanted(opts, errp);

    if (ret != QCOW2_CRYPT_LUKS) {
        return MIN(ret, 0);     /* an error, or no header to count */
    }
    ret = qcow2_crypt_parse_create(opts, &c, errp);
    if (ret < 0) {
        return ret;
    }
    return ROUND_UP(crypto_luks_header_len(&c), cluster_size);
}

/* The LUKS header's storage while an image is created. */
typedef struct Qcow2CryptCreate {
    BlockDriverState *bs;
    BlockCryptoChildIO cio;
} Qcow2CryptCreate;

static int qcow2_crypt_create_init(void *opaque, uint64_t len, Error **errp)
{
    Qcow2CryptCreate *cc = opaque;
    BlockDriverState *bs = cc->bs;
    BDRVQcow2State *s = bs->opaque;
    uint64_t bytes = size_to_clusters(s, len) * s->cluster_size;
    int64_t offset;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    offset = qcow2_alloc_clusters(bs, bytes);
    qemu_co_mutex_unlock(&s->lock);
    if (offset < 0) {
        error_setg_errno(errp, -offset, "Could not allocate clusters for "
                         "the encryption header");
        return offset;
    }
    ret = bdrv_pwrite_zeroes(bs->file, offset, bytes, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not zero the encryption header");
        return ret;
    }
    s->crypto_header_offset = offset;
    s->crypto_header_length = len;
    cc->cio.offset = offset;
    cc->cio.limit = len;
    return 0;
}

static int qcow2_crypt_create_write(void *opaque, uint64_t offset,
                                    const void *buf, size_t len,
                                    Error **errp)
{
    Qcow2CryptCreate *cc = opaque;
    CryptoLuksIO io = block_crypto_child_io(&cc->cio);

    return io.write(io.opaque, offset, buf, len, errp);
}

static int qcow2_crypt_create_read(void *opaque, uint64_t offset, void *buf,
                                   size_t len, Error **errp)
{
    Qcow2CryptCreate *cc = opaque;
    CryptoLuksIO io = block_crypto_child_io(&cc->cio);

    return io.read(io.opaque, offset, buf, len, errp);
}

int coroutine_fn qcow2_crypt_create(BlockDriverState *bs, QemuOpts *opts,
                                    Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    CryptoLuksCreateOptions c;
    Qcow2CryptCreate cc = {
        .bs = bs,
        .cio = { .child = bs->file },
    };
    CryptoLuksIO io = {
        .read = qcow2_crypt_create_read,
        .write = qcow2_crypt_create_write,
        .init = qcow2_crypt_create_init,
        .opaque = &cc,
    };
    int method = qcow2_crypt_wanted(opts, errp);
    int ret = 0;

    if (method < 0) {
        return method;
    }
    if (method == QCOW2_CRYPT_AES) {
        const char *secret = qemu_opt_get(opts, "encrypt.key-secret");

        if (!secret) {
            error_setg(errp, "Parameter 'encrypt.key-secret' is required "
                       "for cipher");
            return -EINVAL;
        }
        s->crypto = crypto_luks_new_qcow_aes(secret, errp);
    } else if (method == QCOW2_CRYPT_LUKS) {
        ret = qcow2_crypt_parse_create(opts, &c, errp);
        if (ret < 0) {
            return ret;
        }
        s->crypto = crypto_luks_create(&c, &io, errp);
    }
    if (ret < 0 || !s->crypto) {
        return -EINVAL;
    }
    s->crypt_method = method;
    bs->encrypted = true;
    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_update_header(bs);
    qemu_co_mutex_unlock(&s->lock);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the qcow2 header");
    }
    return ret;
}

/* Moves @bytes of @qiov from @qiov_offset straight to or from the file. */
static int coroutine_fn qcow2_crypt_co_plain(BlockDriverState *bs,
                                             uint64_t host_offset,
                                             uint64_t bytes,
                                             QEMUIOVector *qiov,
                                             size_t qiov_offset,
                                             BlockCryptoDirection dir)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    if (dir == BLOCK_CRYPTO_ENCRYPT) {
        ret = bdrv_co_pwritev_part(s->data_file, host_offset, bytes, qiov,
                                   qiov_offset, 0);
    } else {
        ret = bdrv_co_preadv_part(s->data_file, host_offset, bytes, qiov,
                                  qiov_offset, 0);
    }
    return ret;
}

/*
 * Moves @bytes of @qiov from @qiov_offset between the guest and the data
 * file at @host_offset: through the cipher, one bounce buffer's worth at a
 * time, when the image is encrypted (@dir says which way), else straight.
 */
static int coroutine_fn qcow2_crypt_co_rw(BlockDriverState *bs,
                                          uint64_t host_offset,
                                          uint64_t guest_offset,
                                          uint64_t bytes, QEMUIOVector *qiov,
                                          size_t qiov_offset,
                                          BlockCryptoDirection dir)
{
    BDRVQcow2State *s = bs->opaque;
    size_t bounce_len = MIN(bytes, QCOW2_CRYPT_BOUNCE_MAX);
    uint64_t iv_offset = s->crypt_method == QCOW2_CRYPT_AES ? guest_offset
                                                           : host_offset;
    uint8_t *bounce;
    int ret = 0;

    if (s->crypt_method == QCOW2_CRYPT_NONE) {
        return qcow2_crypt_co_plain(bs, host_offset, bytes, qiov,
                                    qiov_offset, dir);
    }

    if (!s->crypto || (bs->open_flags & BDRV_O_NO_IO)) {
        return -EIO;
    }
    /* invariant 3 */
    assert(QEMU_IS_ALIGNED(host_offset | bytes, CRYPTO_LUKS_SECTOR_SIZE));
    /*
     * invariant 4; s->crypto is set by open, create and the AES path, so
     * the pool comes with the first request (no yield since the test)
     */
    if (!s->crypto_bounce) {
        s->crypto_bounce = buffer_pool_new(BLOCK_CRYPTO_BOUNCE_IDLE_MAX);
    }
    bounce = buffer_pool_try_get(s->crypto_bounce,
                                 bdrv_opt_mem_align(s->data_file->bs),
                                 bounce_len);
    if (!bounce) {
        return -ENOMEM;
    }
    for (uint64_t done = 0; done < bytes && ret == 0; done += bounce_len) {
        size_t n = MIN(bounce_len, bytes - done);
        QEMUIOVector bq;

        qemu_iovec_init_buf(&bq, bounce, n);
        if (dir == BLOCK_CRYPTO_ENCRYPT) {
            qemu_iovec_to_buf(qiov, qiov_offset + done, bounce, n);
            ret = block_crypto_co_run(bs, s->crypto, dir, iv_offset + done,
                                      bounce, n);
            if (ret == 0) {
                ret = bdrv_co_pwritev(s->data_file, host_offset + done, n,
                                      &bq, 0);
            }
        } else {
            ret = bdrv_co_preadv(s->data_file, host_offset + done, n, &bq,
                                 0);
            if (ret == 0) {
                ret = block_crypto_co_run(bs, s->crypto, dir,
                                          iv_offset + done, bounce, n);
            }
            if (ret == 0) {
                qemu_iovec_from_buf(qiov, qiov_offset + done, bounce, n);
            }
        }
    }
    buffer_pool_put(s->crypto_bounce, bounce, bounce_len);
    return ret;
}

int coroutine_fn qcow2_crypt_co_pwritev(BlockDriverState *bs,
                                        uint64_t host_offset,
                                        uint64_t guest_offset, uint64_t bytes,
                                        QEMUIOVector *qiov,
                                        size_t qiov_offset)
{
    return qcow2_crypt_co_rw(bs, host_offset, guest_offset, bytes, qiov,
                             qiov_offset, BLOCK_CRYPTO_ENCRYPT);
}

int coroutine_fn qcow2_crypt_co_preadv(BlockDriverState *bs,
                                       uint64_t host_offset,
                                       uint64_t guest_offset, uint64_t bytes,
                                       QEMUIOVector *qiov,
                                       size_t qiov_offset)
{
    return qcow2_crypt_co_rw(bs, host_offset, guest_offset, bytes, qiov,
                             qiov_offset, BLOCK_CRYPTO_DECRYPT);
}

JsonNode *qcow2_crypt_get_info(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(JsonObject) info = NULL;
    JsonObject *luks;
    g_autoptr(GList) members = NULL;

    /* QAPI's flat union: the discriminator, then the LUKS members */
    if (s->crypt_method == QCOW2_CRYPT_AES) {
        info = json_object_new();
        json_object_set_string_member(info, "format", "aes");
        return json_node_init_object(json_node_alloc(), info);
    }
    if (s->crypt_method != QCOW2_CRYPT_LUKS || !s->crypto) {
        return NULL;
    }
    info = json_object_new();
    json_object_set_string_member(info, "format", "luks");
    luks = crypto_luks_get_info(s->crypto);
    members = json_object_get_members(luks);
    for (GList *l = members; l; l = l->next) {
        json_object_set_member(info, l->data, json_node_copy(
            json_object_get_member(luks, l->data)));
    }
    json_object_unref(luks);
    return json_node_init_object(json_node_alloc(), info);
}

int qcow2_crypt_amend(BlockDriverState *bs, QemuOpts *opts, bool force,
                      Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    BlockCryptoChildIO cio = {
        .child = bs->file,
        .offset = s->crypto_header_offset,
        .limit = s->crypto_header_length,
    };
    CryptoLuksIO io = block_crypto_child_io(&cio);
    CryptoLuksAmendOptions a;
    int ret;

    if (!s->crypto || s->crypt_method != QCOW2_CRYPT_LUKS) {
        error_setg(errp, "Can't amend encryption options - encryption not "
                   "present");
        return -EINVAL;
    }
    ret = block_crypto_parse_amend(opts, "encrypt.", &a, errp);
    if (ret == 0) {
        ret = crypto_luks_amend(s->crypto, &io, &a, force, errp);
    }
    return ret;
}
