/*
 * rbd: librbd's own LUKS encryption (Ceph 16 and later): formatting a new
 * image and loading the key of one at open.
 *
 * librbd keeps the LUKS header in the image's first objects and, once the
 * key is loaded, shows only what follows it: every read, write, discard
 * and the size are then in the decrypted view, so the rest of the driver
 * is unchanged.  The passphrase comes from a secret object; its bytes are
 * zeroed as soon as librbd has them.
 */
#include "block/rbd.h"
#include "crypto/secret.h"

/* The format's enum value; -1 (with @errp set) for an unknown one. */
static int qrbd_encryption_format_of(const char *name, Error **errp)
{
    if (!strcmp(name, "luks")) {
        return RBD_ENCRYPTION_FORMAT_LUKS1;
    }
    if (!strcmp(name, "luks2")) {
        return RBD_ENCRYPTION_FORMAT_LUKS2;
    }
    error_setg(errp, "Parameter 'encrypt.format' does not accept value "
               "'%s' (luks or luks2)", name);
    return -1;
}

/*
 * Calls librbd's format (@load false) or load (@load true) with the
 * passphrase of secret @secret_id.  The LUKS1 and LUKS2 option structs of
 * librbd have the same layout, so one serves both.
 */
static int qrbd_encryption_call(rbd_image_t image, int format,
                                rbd_encryption_algorithm_t alg,
                                const char *secret_id, bool load,
                                Error **errp)
{
    rbd_encryption_luks1_format_options_t opts = { .alg = alg };
    size_t len;
    uint8_t *pass = crypto_secret_lookup(secret_id, &len, errp);
    int ret;

    G_STATIC_ASSERT(sizeof(rbd_encryption_luks1_format_options_t) ==
                    sizeof(rbd_encryption_luks2_format_options_t));
    if (!pass) {
        return -EINVAL;
    }
    opts.passphrase = (const char *)pass;
    opts.passphrase_size = len;
    ret = load ? qrbd_lib.rbd_encryption_load(image, format, &opts,
                                              sizeof(opts))
               : qrbd_lib.rbd_encryption_format(image, format, &opts,
                                                sizeof(opts));
    crypto_secret_free(pass, len);
    if (ret < 0) {
        /* QEMU's words */
        error_setg_errno(errp, -ret, "encryption %s fail",
                         load ? "load" : "format");
    }
    return ret;
}

int qrbd_encryption_load(rbd_image_t image, const char *format,
                         const char *secret_id, Error **errp)
{
    int fmt = qrbd_encryption_format_of(format, errp);

    if (fmt < 0) {
        return -EINVAL;
    }
    if (!secret_id) {
        error_setg(errp, "Parameter 'encrypt.key-secret' is missing");
        return -EINVAL;
    }
    return qrbd_encryption_call(image, fmt, RBD_ENCRYPTION_ALGORITHM_AES256,
                                secret_id, true, errp);
}

int qrbd_encryption_create(rados_ioctx_t io_ctx, const char *name,
                           QemuOpts *opts, uint64_t size, Error **errp)
{
    const char *format = qemu_opt_get(opts, "encrypt.format");
    const char *secret_id = qemu_opt_get(opts, "encrypt.key-secret");
    const char *cipher = qemu_opt_get(opts, "encrypt.cipher-alg");
    rbd_encryption_algorithm_t alg = RBD_ENCRYPTION_ALGORITHM_AES256;
    rbd_image_t image;
    uint64_t effective;
    int fmt, ret;

    fmt = qrbd_encryption_format_of(format, errp);
    if (fmt < 0) {
        return -EINVAL;
    }
    if (cipher && !strcmp(cipher, "aes-128")) {
        alg = RBD_ENCRYPTION_ALGORITHM_AES128;
    }
    ret = qrbd_lib.rbd_open(io_ctx, name, &image, NULL);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "error opening the new image %s", name);
        return ret;
    }
    ret = qrbd_encryption_call(image, fmt, alg, secret_id, false, errp);
    qrbd_lib.rbd_close(image);
    if (ret < 0) {
        return ret;
    }
    /*
     * The header took the image's first objects.  Opened again with the
     * key (formatting leaves the size librbd reports unchanged), the image
     * grows by what the decrypted view lacks.
     */
    ret = qrbd_lib.rbd_open(io_ctx, name, &image, NULL);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "error opening the new image %s", name);
        return ret;
    }
    ret = qrbd_encryption_call(image, fmt, alg, secret_id, true, errp);
    if (ret == 0) {
        ret = qrbd_lib.rbd_get_size(image, &effective);
        /* resize counts the header in, as the size of the objects */
        if (ret == 0 && effective < size) {
            ret = qrbd_lib.rbd_resize(image, size + (size - effective));
        }
        if (ret < 0) {
            error_setg_errno(errp, -ret, "cannot make the encrypted image "
                             "%s %" PRIu64 " bytes", name, size);
        }
    }
    qrbd_lib.rbd_close(image);
    return ret;
}
