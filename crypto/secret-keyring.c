/*
 * The secret_keyring object type: a secret that is the payload of a key
 * of the Linux kernel's key retention service (keyrings(7)), named by its
 * serial number, as QEMU's.  The key is read once, when the object is
 * created, with the keyctl(2) system call (KEYCTL_READ; libkeyutils only
 * wraps it); then it is a secret like any other (format=, keyid=, iv=:
 * crypto/secret.c).  The process must be allowed to read the key: it
 * possesses the keys of its keyrings (the user keyring, @u, included) or
 * the key's permissions give its user read.
 */
#include "util/osdep.h"

#include <linux/keyctl.h>
#include <sys/syscall.h>

#include "secret-int.h"
#include "util/user-object.h"

#define SECRET_KEYRING_TYPE "secret_keyring"
/*
 * A key that grows between the call that sizes it and the read is read
 * again; a key updated that often by someone else is not worth waiting
 * for.
 */
#define SECRET_KEYRING_READ_TRIES 8

static long secret_keyring_read(int32_t serial, uint8_t *buf, size_t len)
{
    return syscall(SYS_keyctl, KEYCTL_READ, serial, buf, len, 0);
}

/*
 * The payload of key @serial, NUL-terminated, in *@data (*@len bytes);
 * -errno if the kernel refuses it.  KEYCTL_READ returns the payload's
 * whole size, copying what fits: read until it all fits.
 */
static int secret_keyring_load(int32_t serial, uint8_t **data, size_t *len)
{
    uint8_t *buf = NULL;
    size_t size = 0;

    for (int i = 0; i < SECRET_KEYRING_READ_TRIES; i++) {
        long ret = secret_keyring_read(serial, buf, size);

        if (ret < 0) {
            int err = errno;

            crypto_secret_free(buf, size + 1);
            return -err;
        }
        if ((size_t)ret <= size && buf) {
            buf[ret] = '\0';
            *data = buf;
            *len = ret;
            return 0;
        }
        crypto_secret_free(buf, size + 1);
        size = ret;
        buf = g_malloc(size + 1);
    }
    crypto_secret_free(buf, size + 1);
    return -EAGAIN;
}

static void *secret_keyring_create(const char *id, JsonObject *props,
                                   Error **errp)
{
    /* the schema has checked that it is there and fits an int32 */
    int32_t serial = json_object_get_int_member(props, "serial");
    uint8_t *data = NULL;
    size_t len = 0;
    int ret;

    if (serial == 0) {
        error_setg(errp, "'serial' should not be equal to 0");
        return NULL;
    }
    ret = secret_keyring_load(serial, &data, &len);
    if (ret < 0) {
        /* QEMU's words, with the serial as keyctl prints it */
        error_setg_errno(errp, -ret, "Unable to read serial key %08x",
                         (uint32_t)serial);
        return NULL;
    }
    return crypto_secret_new(props, data, len, errp);
}

static const char *const secret_keyring_qom_list[] = {
    CRYPTO_SECRET_QOM_LIST_COMMON, "serial", NULL,
};

static const UserObjectType secret_keyring_type = {
    .name = SECRET_KEYRING_TYPE,
    .create = secret_keyring_create,
    .destroy = crypto_secret_destroy,
    .get_property = crypto_secret_get_property,
    .qom_list_order = secret_keyring_qom_list,
};
user_object_type_init(secret_keyring_type)
