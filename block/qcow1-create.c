/*
 * qcow creation, as qemu-img create -f qcow writes it: the header, the
 * backing file's name right after it, the L1 table (zeroes, in whole
 * sectors) at the header's end rounded up to 8 bytes.  4 KiB clusters
 * and 512-entry L2 tables; 512-byte clusters and 4096-entry tables with
 * a backing file, so that a write never has to copy a sector it does
 * not cover.  Nothing else is written: the file is that long.
 */
#include "block/qcow1.h"

#include "qapi/qapi-opts.h"
#include "qblock/block-backend.h"

typedef struct Qcow1CreateOpts {
    uint64_t size;
    const char *backing_file;       /* NULL: none */
    const char *encrypt_format;     /* NULL: none; "aes" or "qcow" */
    const char *key_secret;
} Qcow1CreateOpts;

/* QEMU's checks, after the file is made (which stays, empty). */
static int qcow1_create_check(const Qcow1CreateOpts *c, Error **errp)
{
    CryptoLuks *crypto;

    if (c->size == 0) {
        error_setg(errp, "Image size is too small, cannot be zero length");
        return -EINVAL;
    }
    if (!c->encrypt_format) {
        return 0;
    }
    if (strcmp(c->encrypt_format, "qcow") && strcmp(c->encrypt_format,
                                                     "aes")) {
        error_setg(errp, "Unsupported encryption format");
        return -EINVAL;
    }
    if (!c->key_secret) {
        error_setg(errp, "Parameter 'encrypt.key-secret' is required for "
                   "cipher");
        return -EINVAL;
    }
    /* the secret must exist, as QEMU's creation of the cipher checks */
    crypto = crypto_luks_new_qcow_aes(c->key_secret, errp);
    if (!crypto) {
        return -EINVAL;
    }
    crypto_luks_free(crypto);
    return 0;
}

static int qcow1_create_write(BlockBackend *blk, const Qcow1CreateOpts *c,
                              Error **errp)
{
    /* "fat:" is QEMU's vvfat backing, which names no file */
    const char *backing = c->backing_file && strcmp(c->backing_file, "fat:")
                          ? c->backing_file : NULL;
    size_t name_len = backing ? strlen(backing) : 0;
    uint64_t header_size = ROUND_UP(sizeof(Qcow1Header) + name_len, 8);
    Qcow1Header h = {
        .magic = GUINT32_TO_BE(QCOW1_MAGIC),
        .version = GUINT32_TO_BE(QCOW1_VERSION),
        .size = GUINT64_TO_BE(c->size),
        .cluster_bits = c->backing_file ? 9 : 12,
        .l2_bits = c->backing_file ? 12 : 9,
        .crypt_method = GUINT32_TO_BE(c->encrypt_format ? QCOW1_CRYPT_AES
                                                        : QCOW1_CRYPT_NONE),
        .l1_table_offset = GUINT64_TO_BE(header_size),
    };
    unsigned shift = h.cluster_bits + h.l2_bits;
    uint64_t l1_bytes = ((c->size + (1ull << shift) - 1) >> shift) *
                        sizeof(uint64_t);
    int ret;

    if (backing) {
        h.backing_file_offset = GUINT64_TO_BE(sizeof(h));
        h.backing_file_size = GUINT32_TO_BE(name_len);
    }
    ret = blk_pwrite(blk, 0, sizeof(h), &h, 0);
    if (ret == 0 && backing) {
        ret = blk_pwrite(blk, sizeof(h), name_len, backing, 0);
    }
    if (ret == 0) {
        /* as QEMU, whole sectors of zeroes: the file's length with them */
        ret = blk_pwrite_zeroes(blk, header_size,
                                ROUND_UP(l1_bytes, QCOW1_SECTOR), 0);
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the qcow image");
    }
    return ret;
}

static int qcow1_create_on(BlockBackend *blk, const Qcow1CreateOpts *c,
                           Error **errp)
{
    int ret = qcow1_create_check(c, errp);

    return ret < 0 ? ret : qcow1_create_write(blk, c, errp);
}

static void qcow1_parse_create_opts(QemuOpts *opts, Qcow1CreateOpts *c)
{
    c->size = qemu_opt_get_size(opts, "size", 0);
    c->backing_file = qemu_opt_get(opts, "backing_file");
    c->encrypt_format = qemu_opt_get(opts, "encrypt.format");
    c->key_secret = qemu_opt_get(opts, "encrypt.key-secret");
}

int coroutine_fn qcow1_co_create_opts(const BlockDriver *drv,
                                      const char *filename, QemuOpts *opts,
                                      Error **errp)
{
    const char *backing_fmt = qemu_opt_get(opts, "backing_fmt");
    Qcow1CreateOpts c;
    BlockBackend *blk;
    int ret;

    /* as QEMU: not stored, but it must name a driver (before the file) */
    if (backing_fmt && !bdrv_find_format(backing_fmt)) {
        error_setg(errp, "unrecognized backing format '%s'", backing_fmt);
        return -EINVAL;
    }
    qcow1_parse_create_opts(opts, &c);
    /* as QEMU: silently rounded up to a sector */
    c.size = ROUND_UP(c.size, QCOW1_SECTOR);
    if (qemu_opt_get_bool(opts, "encryption", false)) {
        if (c.encrypt_format) {
            error_setg(errp, "'encrypt.format' and its alias 'encryption' "
                       "can't be used at the same time");
            return -EINVAL;
        }
        c.encrypt_format = "aes";
    }
    blk = bdrv_create_format_file(drv, filename, opts, errp);
    if (!blk) {
        return -EIO;
    }
    /* QEMU's QCryptoBlockFormat names, "aes" its qemu-img alias of qcow */
    if (c.encrypt_format && strcmp(c.encrypt_format, "aes") &&
        strcmp(c.encrypt_format, "qcow") && strcmp(c.encrypt_format, "luks")) {
        error_setg(errp, "Parameter 'format' does not accept value '%s'",
                   c.encrypt_format);
        ret = -EINVAL;
    } else {
        ret = qcow1_create_on(blk, &c, errp);
    }
    /* a failed write removes the file; a refused option leaves it, empty */
    if (ret < 0 && ret != -EINVAL) {
        bdrv_delete_format_file(blk);
    }
    blk_unref(blk);
    return ret < 0 ? ret : 0;
}

/* blockdev-create: QEMU's BlockdevCreateOptionsQcow. */
int coroutine_fn qcow1_co_create_on_node(const BlockDriver *drv,
                                         const BdrvCreateTarget *tgt,
                                         QemuOpts *opts, Error **errp)
{
    Qcow1CreateOpts c;
    BlockBackend *blk;
    int ret;

    qcow1_parse_create_opts(opts, &c);
    blk = bdrv_create_format_on_node(tgt->file, errp);
    if (!blk) {
        return -EIO;
    }
    /* a node given to blockdev-create is the user's: never removed */
    ret = qcow1_create_on(blk, &c, errp);
    blk_unref(blk);
    return ret < 0 ? ret : 0;
}
