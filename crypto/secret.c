/*
 * The `secret` object type and lookups of secrets (see
 * include/crypto/secret.h).
 *
 * Loading a secret, in QEMU's order and with its messages:
 *  1. exactly one of data= and file= (file: its whole content);
 *  2. with keyid=: the data is ciphertext (base64-decoded first when
 *     format=base64), decrypted with AES-256-CBC under the 32-byte secret
 *     keyid and the base64 iv=, and its PKCS#7 padding removed;
 *  3. without keyid=: format=base64 data is decoded.
 *
 * Invariant 1: every buffer that held secret bytes (the file's content,
 * ciphertext, plaintext, the key) is zeroed before it is freed.
 */
#include "util/osdep.h"

#include <gcrypt.h>

#include "crypto/init.h"
#include "crypto/secret.h"
#include "secret-int.h"
#include "util/json.h"
#include "util/user-object.h"

#define SECRET_TYPE "secret"
/* secret-keyring.c's type, whose state is a CryptoSecret as well */
#define SECRET_KEYRING_TYPE "secret_keyring"
/* AES-256-CBC: a key of 256 bits, blocks and IV of 128 */
#define SECRET_KEY_LEN 32
#define SECRET_BLOCK_LEN 16

void crypto_secret_free(void *data, size_t len)
{
    if (data) {
        explicit_bzero(data, len);
        g_free(data);
    }
}

void crypto_secret_free_str(char *str)
{
    if (str) {
        crypto_secret_free(str, strlen(str));
    }
}

/* A copy of @len bytes with a NUL after them, for text secrets. */
static uint8_t *crypto_secret_dup(const uint8_t *data, size_t len)
{
    uint8_t *copy = g_malloc(len + 1);

    memcpy(copy, data, len);
    copy[len] = '\0';
    return copy;
}

/* QEMU's base64 check: g_base64_decode() ignores what it cannot read. */
static uint8_t *crypto_secret_base64_decode(const char *text, size_t len,
                                            size_t *out_len, Error **errp)
{
    guchar *raw;
    uint8_t *out;
    gsize raw_len;

    if (memchr(text, '\0', len)) {
        error_setg(errp, "Base64 data contains embedded NUL characters");
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        if (!g_ascii_isalnum(text[i]) && !strchr("+/=", text[i])) {
            error_setg(errp, "Base64 data contains invalid characters");
            return NULL;
        }
    }
    {
        g_autofree char *str = g_strndup(text, len);

        raw = g_base64_decode(str, &raw_len);
        explicit_bzero(str, len);
    }
    out = crypto_secret_dup(raw, raw_len);
    crypto_secret_free(raw, raw_len);
    *out_len = raw_len;
    return out;
}

static bool crypto_secret_read_input(JsonObject *props, uint8_t **input,
                                     size_t *len, Error **errp)
{
    const char *data = json_object_get_string_member_with_default(
                           props, "data", NULL);
    const char *file = json_object_get_string_member_with_default(
                           props, "file", NULL);
    g_autoptr(GError) gerr = NULL;
    gchar *content;
    gsize content_len;

    if (data && file) {
        error_setg(errp, "'file' and 'data' are mutually exclusive");
        return false;
    }
    if (data) {
        *len = strlen(data);
        *input = crypto_secret_dup((const uint8_t *)data, *len);
        return true;
    }
    if (!file) {
        error_setg(errp, "Either 'file' or 'data' must be provided");
        return false;
    }
    if (!g_file_get_contents(file, &content, &content_len, &gerr)) {
        error_setg(errp, "Unable to read %s: %s", file, gerr->message);
        return false;
    }
    *input = crypto_secret_dup((const uint8_t *)content, content_len);
    *len = content_len;
    crypto_secret_free(content, content_len);
    return true;
}

static bool crypto_secret_cbc_decrypt(const uint8_t *key, const uint8_t *iv,
                                      uint8_t *buf, size_t len, Error **errp)
{
    gcry_cipher_hd_t hd;
    gcry_error_t err;

    crypto_init();
    err = gcry_cipher_open(&hd, GCRY_CIPHER_AES256, GCRY_CIPHER_MODE_CBC, 0);
    if (!err) {
        err = gcry_cipher_setkey(hd, key, SECRET_KEY_LEN);
        if (!err) {
            err = gcry_cipher_setiv(hd, iv, SECRET_BLOCK_LEN);
        }
        if (!err) {
            err = gcry_cipher_decrypt(hd, buf, len, NULL, 0);
        }
        gcry_cipher_close(hd);
    }
    if (err) {
        error_setg(errp, "Cannot decrypt secret with aes-256-cbc: %s",
                   gcry_strerror(err));
        return false;
    }
    return true;
}

/* Step 2 of the header comment: @input is replaced by the plaintext. */
static bool crypto_secret_decrypt(JsonObject *props, bool base64,
                                  uint8_t **input, size_t *len, Error **errp)
{
    const char *keyid = json_object_get_string_member(props, "keyid");
    const char *iv_text = json_object_get_string_member_with_default(
                              props, "iv", NULL);
    g_autofree uint8_t *iv = NULL;
    uint8_t *key;
    size_t key_len, iv_len;
    unsigned pad;
    bool ok = false;

    key = crypto_secret_lookup(keyid, &key_len, errp);
    if (!key) {
        return false;
    }
    if (key_len != SECRET_KEY_LEN) {
        error_setg(errp, "Key should be %d bytes in length", SECRET_KEY_LEN);
        goto out;
    }
    if (!iv_text) {
        error_setg(errp, "IV is required to decrypt secret");
        goto out;
    }
    iv = crypto_secret_base64_decode(iv_text, strlen(iv_text), &iv_len,
                                     errp);
    if (!iv) {
        goto out;
    }
    if (iv_len != SECRET_BLOCK_LEN) {
        error_setg(errp, "IV should be %d bytes in length not %zu",
                   SECRET_BLOCK_LEN, iv_len);
        goto out;
    }
    if (base64) {
        size_t raw_len;
        uint8_t *raw = crypto_secret_base64_decode((char *)*input, *len,
                                                   &raw_len, errp);

        if (!raw) {
            goto out;
        }
        crypto_secret_free(*input, *len);
        *input = raw;
        *len = raw_len;
    }
    if (*len % SECRET_BLOCK_LEN) {
        error_setg(errp, "Length %zu must be a multiple of block size %d",
                   *len, SECRET_BLOCK_LEN);
        goto out;
    }
    if (!crypto_secret_cbc_decrypt(key, iv, *input, *len, errp)) {
        goto out;
    }
    pad = *len ? (*input)[*len - 1] : 0;
    if (pad == 0 || pad > SECRET_BLOCK_LEN || pad > *len) {
        error_setg(errp, "Incorrect number of padding bytes (%u) found on "
                   "decrypted data", pad);
        goto out;
    }
    *len -= pad;
    explicit_bzero(*input + *len, pad);
    ok = true;
out:
    crypto_secret_free(key, key_len);
    return ok;
}

void *crypto_secret_new(JsonObject *props, uint8_t *input, size_t len,
                        Error **errp)
{
    const char *format = json_object_get_string_member_with_default(
                             props, "format", "raw");
    bool base64 = !strcmp(format, "base64");
    g_autoptr(GList) members = json_object_get_members(props);
    CryptoSecret *secret;

    if (json_object_has_member(props, "keyid")) {
        if (!crypto_secret_decrypt(props, base64, &input, &len, errp)) {
            crypto_secret_free(input, len);
            return NULL;
        }
    } else if (base64) {
        size_t raw_len;
        uint8_t *raw = crypto_secret_base64_decode((char *)input, len,
                                                   &raw_len, errp);

        crypto_secret_free(input, len);
        if (!raw) {
            return NULL;
        }
        input = raw;
        len = raw_len;
    }
    secret = g_new0(CryptoSecret, 1);
    secret->data = input;
    secret->len = len;
    /* what qom-get shows: the common properties with QEMU's defaults */
    secret->props = json_object_new();
    json_object_set_boolean_member(secret->props, "loaded", true);
    json_object_set_string_member(secret->props, "format", format);
    json_object_set_string_member(secret->props, "keyid", "");
    json_object_set_string_member(secret->props, "iv", "");
    for (GList *l = members; l; l = l->next) {
        if (strcmp(l->data, "data")) {
            json_object_set_member(secret->props, l->data, json_node_copy(
                json_object_get_member(props, l->data)));
        }
    }
    return secret;
}

JsonNode *crypto_secret_get_property(void *state, const char *name)
{
    CryptoSecret *secret = state;
    JsonNode *shown = json_object_get_member(secret->props, name);

    return shown ? json_node_copy(shown) : NULL;
}

static void *crypto_secret_create(const char *id, JsonObject *props,
                                  Error **errp)
{
    uint8_t *input;
    size_t len;
    CryptoSecret *secret;

    if (!crypto_secret_read_input(props, &input, &len, errp)) {
        return NULL;
    }
    secret = crypto_secret_new(props, input, len, errp);
    if (secret && !json_object_has_member(secret->props, "file")) {
        json_object_set_string_member(secret->props, "file", "");
    }
    return secret;
}

void crypto_secret_destroy(void *state)
{
    CryptoSecret *secret = state;

    crypto_secret_free(secret->data, secret->len);
    json_object_unref(secret->props);
    g_free(secret);
}

uint8_t *crypto_secret_lookup(const char *id, size_t *len, Error **errp)
{
    CryptoSecret *secret = user_object_find_state(id, SECRET_TYPE) ?:
                           user_object_find_state(id, SECRET_KEYRING_TYPE);

    if (!secret) {
        error_setg(errp, "No secret with id '%s'", id);
        return NULL;
    }
    *len = secret->len;
    return crypto_secret_dup(secret->data, secret->len);
}

char *crypto_secret_lookup_as_utf8(const char *id, Error **errp)
{
    size_t len;
    uint8_t *data = crypto_secret_lookup(id, &len, errp);

    if (data && (memchr(data, '\0', len) ||
                 !g_utf8_validate((const char *)data, len, NULL))) {
        error_setg(errp, "Data from secret %s is not valid UTF-8", id);
        crypto_secret_free(data, len);
        return NULL;
    }
    return (char *)data;
}

/* Refused by qom-get ("is not readable"): QEMU shows a secret's data. */
static const char *const crypto_secret_hidden[] = { "data", NULL };

static const char *const crypto_secret_qom_list[] = {
    CRYPTO_SECRET_QOM_LIST_COMMON, "file", "data", NULL,
};

static const UserObjectType crypto_secret_type = {
    .name = SECRET_TYPE,
    .create = crypto_secret_create,
    .destroy = crypto_secret_destroy,
    .get_property = crypto_secret_get_property,
    .write_only = crypto_secret_hidden,
    .qom_list_order = crypto_secret_qom_list,
};
user_object_type_init(crypto_secret_type)
