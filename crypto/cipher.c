/*
 * Block ciphers over libgcrypt (see include/crypto/cipher.h).
 */
#include "crypto/cipher.h"

#include <gcrypt.h>

#include "crypto/init.h"

struct CryptoCipher {
    gcry_cipher_hd_t hd;
    CryptoCipherMode mode;
    size_t block_len;
};

static const struct {
    const char *name;           /* QEMU's QCryptoCipherAlgorithm */
    const char *family;         /* the LUKS header's cipher_name */
    int gcry_algo;
    size_t key_len;
    size_t block_len;
} crypto_cipher_algs[CRYPTO_CIPHER_ALG__MAX] = {
    [CRYPTO_CIPHER_AES_128] = { "aes-128", "aes", GCRY_CIPHER_AES128, 16, 16 },
    [CRYPTO_CIPHER_AES_192] = { "aes-192", "aes", GCRY_CIPHER_AES192, 24, 16 },
    [CRYPTO_CIPHER_AES_256] = { "aes-256", "aes", GCRY_CIPHER_AES256, 32, 16 },
    [CRYPTO_CIPHER_CAST5_128] = { "cast5-128", "cast5", GCRY_CIPHER_CAST5,
                                  16, 8 },
    [CRYPTO_CIPHER_SERPENT_128] = { "serpent-128", "serpent",
                                    GCRY_CIPHER_SERPENT128, 16, 16 },
    [CRYPTO_CIPHER_SERPENT_192] = { "serpent-192", "serpent",
                                    GCRY_CIPHER_SERPENT192, 24, 16 },
    [CRYPTO_CIPHER_SERPENT_256] = { "serpent-256", "serpent",
                                    GCRY_CIPHER_SERPENT256, 32, 16 },
    [CRYPTO_CIPHER_TWOFISH_128] = { "twofish-128", "twofish",
                                    GCRY_CIPHER_TWOFISH128, 16, 16 },
    /* libgcrypt has no 192-bit Twofish: its name stays, refused at use */
    [CRYPTO_CIPHER_TWOFISH_192] = { "twofish-192", "twofish", 0, 24, 16 },
    [CRYPTO_CIPHER_TWOFISH_256] = { "twofish-256", "twofish",
                                    GCRY_CIPHER_TWOFISH, 32, 16 },
};

static const struct {
    const char *name;
    int gcry_mode;
} crypto_cipher_modes[CRYPTO_CIPHER_MODE__MAX] = {
    [CRYPTO_CIPHER_MODE_ECB] = { "ecb", GCRY_CIPHER_MODE_ECB },
    [CRYPTO_CIPHER_MODE_CBC] = { "cbc", GCRY_CIPHER_MODE_CBC },
    [CRYPTO_CIPHER_MODE_XTS] = { "xts", GCRY_CIPHER_MODE_XTS },
    [CRYPTO_CIPHER_MODE_CTR] = { "ctr", GCRY_CIPHER_MODE_CTR },
};

int crypto_cipher_alg_lookup(const char *name)
{
    for (int i = 0; i < CRYPTO_CIPHER_ALG__MAX; i++) {
        if (!strcmp(crypto_cipher_algs[i].name, name)) {
            return i;
        }
    }
    return -1;
}

const char *crypto_cipher_alg_name(CryptoCipherAlg alg)
{
    return crypto_cipher_algs[alg].name;
}

int crypto_cipher_mode_lookup(const char *name)
{
    for (int i = 0; i < CRYPTO_CIPHER_MODE__MAX; i++) {
        if (!strcmp(crypto_cipher_modes[i].name, name)) {
            return i;
        }
    }
    return -1;
}

const char *crypto_cipher_mode_name(CryptoCipherMode mode)
{
    return crypto_cipher_modes[mode].name;
}

const char *crypto_cipher_alg_family(CryptoCipherAlg alg)
{
    return crypto_cipher_algs[alg].family;
}

size_t crypto_cipher_alg_key_len(CryptoCipherAlg alg)
{
    return crypto_cipher_algs[alg].key_len;
}

size_t crypto_cipher_alg_block_len(CryptoCipherAlg alg)
{
    return crypto_cipher_algs[alg].block_len;
}

int crypto_cipher_alg_from_family(const char *family, size_t key_len)
{
    for (int i = 0; i < CRYPTO_CIPHER_ALG__MAX; i++) {
        if (!strcmp(crypto_cipher_algs[i].family, family) &&
            crypto_cipher_algs[i].key_len == key_len) {
            return i;
        }
    }
    return -1;
}

size_t crypto_cipher_key_len(CryptoCipherAlg alg, CryptoCipherMode mode)
{
    return crypto_cipher_algs[alg].key_len *
           (mode == CRYPTO_CIPHER_MODE_XTS ? 2 : 1);
}

bool crypto_cipher_supports(CryptoCipherAlg alg, CryptoCipherMode mode,
                            Error **errp)
{
    /* XTS is defined for 128-bit blocks only (IEEE 1619) */
    if (!crypto_cipher_algs[alg].gcry_algo ||
        (mode == CRYPTO_CIPHER_MODE_XTS &&
         crypto_cipher_algs[alg].block_len != 16)) {
        error_setg(errp, "Cipher '%s' with mode '%s' is not supported",
                   crypto_cipher_algs[alg].name,
                   crypto_cipher_modes[mode].name);
        return false;
    }
    return true;
}

CryptoCipher *crypto_cipher_new(CryptoCipherAlg alg, CryptoCipherMode mode,
                                const uint8_t *key, size_t key_len,
                                Error **errp)
{
    CryptoCipher *cipher;
    gcry_error_t err;

    if (!crypto_cipher_supports(alg, mode, errp)) {
        return NULL;
    }
    if (key_len != crypto_cipher_key_len(alg, mode)) {
        error_setg(errp, "Cipher key length %zu should be %zu", key_len,
                   crypto_cipher_key_len(alg, mode));
        return NULL;
    }
    crypto_init();
    cipher = g_new0(CryptoCipher, 1);
    cipher->mode = mode;
    cipher->block_len = crypto_cipher_algs[alg].block_len;
    err = gcry_cipher_open(&cipher->hd, crypto_cipher_algs[alg].gcry_algo,
                           crypto_cipher_modes[mode].gcry_mode, 0);
    if (!err) {
        err = gcry_cipher_setkey(cipher->hd, key, key_len);
        if (err) {
            gcry_cipher_close(cipher->hd);
        }
    }
    if (err) {
        error_setg(errp, "Cannot initialize cipher %s-%s: %s",
                   crypto_cipher_algs[alg].name,
                   crypto_cipher_modes[mode].name, gcry_strerror(err));
        g_free(cipher);
        return NULL;
    }
    return cipher;
}

void crypto_cipher_free(CryptoCipher *cipher)
{
    if (cipher) {
        /* libgcrypt wipes the key schedule on close */
        gcry_cipher_close(cipher->hd);
        g_free(cipher);
    }
}

int crypto_cipher_setiv(CryptoCipher *cipher, const uint8_t *iv,
                        size_t iv_len, Error **errp)
{
    gcry_error_t err;

    if (cipher->mode == CRYPTO_CIPHER_MODE_ECB) {
        return 0;
    }
    if (iv_len != cipher->block_len) {
        error_setg(errp, "Expected IV size %zu not %zu", cipher->block_len,
                   iv_len);
        return -EINVAL;
    }
    err = cipher->mode == CRYPTO_CIPHER_MODE_CTR ?
          gcry_cipher_setctr(cipher->hd, iv, iv_len) :
          gcry_cipher_setiv(cipher->hd, iv, iv_len);
    if (err) {
        error_setg(errp, "Cannot set IV: %s", gcry_strerror(err));
        return -EIO;
    }
    return 0;
}

static int crypto_cipher_check_len(CryptoCipher *cipher, size_t len,
                                   Error **errp)
{
    if (cipher->mode != CRYPTO_CIPHER_MODE_CTR && len % cipher->block_len) {
        error_setg(errp, "Length %zu must be a multiple of block size %zu",
                   len, cipher->block_len);
        return -EINVAL;
    }
    return 0;
}

/* Which way crypto_cipher_run() transforms the data. */
typedef enum CryptoCipherDirection {
    CRYPTO_CIPHER_ENCRYPT,
    CRYPTO_CIPHER_DECRYPT,
} CryptoCipherDirection;

/* Encrypts or decrypts @len bytes of @buf in place, as @dir says. */
static int crypto_cipher_run(CryptoCipher *cipher, uint8_t *buf, size_t len,
                             CryptoCipherDirection dir, Error **errp)
{
    gcry_error_t err;

    if (crypto_cipher_check_len(cipher, len, errp) < 0) {
        return -EINVAL;
    }
    if (dir == CRYPTO_CIPHER_ENCRYPT) {
        err = gcry_cipher_encrypt(cipher->hd, buf, len, NULL, 0);
    } else {
        err = gcry_cipher_decrypt(cipher->hd, buf, len, NULL, 0);
    }
    if (err) {
        error_setg(errp, "Cannot %s data: %s",
                   dir == CRYPTO_CIPHER_ENCRYPT ? "encrypt" : "decrypt",
                   gcry_strerror(err));
        return -EIO;
    }
    return 0;
}

int crypto_cipher_encrypt(CryptoCipher *cipher, uint8_t *buf, size_t len,
                          Error **errp)
{
    return crypto_cipher_run(cipher, buf, len, CRYPTO_CIPHER_ENCRYPT, errp);
}

int crypto_cipher_decrypt(CryptoCipher *cipher, uint8_t *buf, size_t len,
                          Error **errp)
{
    return crypto_cipher_run(cipher, buf, len, CRYPTO_CIPHER_DECRYPT, errp);
}
