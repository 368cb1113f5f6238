/*
 * The ciphers libgcrypt runs (see crypto/cipher-int.h).
 */
#include "crypto/cipher-int.h"

#include <gcrypt.h>

#include "crypto/init.h"

typedef struct CryptoCipherGcrypt {
    gcry_cipher_hd_t hd;
    CryptoCipherMode mode;
} CryptoCipherGcrypt;

/* 0: not libgcrypt's (cipher.c never asks for those) */
static const int crypto_cipher_gcrypt_algs[CRYPTO_CIPHER_ALG__MAX] = {
    [CRYPTO_CIPHER_AES_128] = GCRY_CIPHER_AES128,
    [CRYPTO_CIPHER_AES_192] = GCRY_CIPHER_AES192,
    [CRYPTO_CIPHER_AES_256] = GCRY_CIPHER_AES256,
    [CRYPTO_CIPHER_CAST5_128] = GCRY_CIPHER_CAST5,
    [CRYPTO_CIPHER_SERPENT_128] = GCRY_CIPHER_SERPENT128,
    [CRYPTO_CIPHER_SERPENT_192] = GCRY_CIPHER_SERPENT192,
    [CRYPTO_CIPHER_SERPENT_256] = GCRY_CIPHER_SERPENT256,
    [CRYPTO_CIPHER_TWOFISH_128] = GCRY_CIPHER_TWOFISH128,
    [CRYPTO_CIPHER_TWOFISH_256] = GCRY_CIPHER_TWOFISH,
};

static const int crypto_cipher_gcrypt_modes[CRYPTO_CIPHER_MODE__MAX] = {
    [CRYPTO_CIPHER_MODE_ECB] = GCRY_CIPHER_MODE_ECB,
    [CRYPTO_CIPHER_MODE_CBC] = GCRY_CIPHER_MODE_CBC,
    [CRYPTO_CIPHER_MODE_XTS] = GCRY_CIPHER_MODE_XTS,
    [CRYPTO_CIPHER_MODE_CTR] = GCRY_CIPHER_MODE_CTR,
};

static void *crypto_cipher_gcrypt_open(CryptoCipherAlg alg,
                                       CryptoCipherMode mode,
                                       const uint8_t *key, size_t key_len,
                                       Error **errp)
{
    CryptoCipherGcrypt *c;
    gcry_error_t err;

    assert(crypto_cipher_gcrypt_algs[alg]);
    crypto_init();
    c = g_new0(CryptoCipherGcrypt, 1);
    c->mode = mode;
    err = gcry_cipher_open(&c->hd, crypto_cipher_gcrypt_algs[alg],
                           crypto_cipher_gcrypt_modes[mode], 0);
    if (!err) {
        err = gcry_cipher_setkey(c->hd, key, key_len);
        if (err) {
            gcry_cipher_close(c->hd);
        }
    }
    if (err) {
        error_setg(errp, "Cannot initialize cipher %s-%s: %s",
                   crypto_cipher_alg_name(alg), crypto_cipher_mode_name(mode),
                   gcry_strerror(err));
        g_free(c);
        return NULL;
    }
    return c;
}

static void crypto_cipher_gcrypt_close(void *state)
{
    CryptoCipherGcrypt *c = state;

    /* libgcrypt wipes the key schedule on close */
    gcry_cipher_close(c->hd);
    g_free(c);
}

static int crypto_cipher_gcrypt_setiv(void *state, const uint8_t *iv,
                                      size_t iv_len, Error **errp)
{
    CryptoCipherGcrypt *c = state;
    gcry_error_t err;

    err = c->mode == CRYPTO_CIPHER_MODE_CTR ?
          gcry_cipher_setctr(c->hd, iv, iv_len) :
          gcry_cipher_setiv(c->hd, iv, iv_len);
    if (err) {
        error_setg(errp, "Cannot set IV: %s", gcry_strerror(err));
        return -EIO;
    }
    return 0;
}

static int crypto_cipher_gcrypt_run(void *state, uint8_t *buf, size_t len,
                                    CryptoCipherDirection dir, Error **errp)
{
    CryptoCipherGcrypt *c = state;
    gcry_error_t err;

    if (dir == CRYPTO_CIPHER_ENCRYPT) {
        err = gcry_cipher_encrypt(c->hd, buf, len, NULL, 0);
    } else {
        err = gcry_cipher_decrypt(c->hd, buf, len, NULL, 0);
    }
    if (err) {
        error_setg(errp, "Cannot %s data: %s",
                   dir == CRYPTO_CIPHER_ENCRYPT ? "encrypt" : "decrypt",
                   gcry_strerror(err));
        return -EIO;
    }
    return 0;
}

const CryptoCipherDriver crypto_cipher_gcrypt = {
    .open  = crypto_cipher_gcrypt_open,
    .close = crypto_cipher_gcrypt_close,
    .setiv = crypto_cipher_gcrypt_setiv,
    .run   = crypto_cipher_gcrypt_run,
};
