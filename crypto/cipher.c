/*
 * Block ciphers (see include/crypto/cipher.h): the table of algorithms
 * and modes, the checks every library relies on, and the dispatch to the
 * library that runs each algorithm (crypto/cipher-int.h).
 */
#include "crypto/cipher-int.h"

#include "util/cutils.h"

struct CryptoCipher {
    const CryptoCipherDriver *driver;
    void *state;                /* the driver's */
    CryptoCipherMode mode;
    size_t block_len;
};

static const struct {
    const char *name;           /* QEMU's QCryptoCipherAlgorithm */
    const char *family;         /* the LUKS header's cipher_name */
    size_t key_len;
    size_t block_len;
    const CryptoCipherDriver *driver;   /* the library that runs it */
} crypto_cipher_algs[CRYPTO_CIPHER_ALG__MAX] = {
    [CRYPTO_CIPHER_AES_128] = { "aes-128", "aes", 16, 16,
                                &crypto_cipher_gcrypt },
    [CRYPTO_CIPHER_AES_192] = { "aes-192", "aes", 24, 16,
                                &crypto_cipher_gcrypt },
    [CRYPTO_CIPHER_AES_256] = { "aes-256", "aes", 32, 16,
                                &crypto_cipher_gcrypt },
    [CRYPTO_CIPHER_CAST5_128] = { "cast5-128", "cast5", 16, 8,
                                  &crypto_cipher_gcrypt },
    [CRYPTO_CIPHER_SERPENT_128] = { "serpent-128", "serpent", 16, 16,
                                    &crypto_cipher_gcrypt },
    [CRYPTO_CIPHER_SERPENT_192] = { "serpent-192", "serpent", 24, 16,
                                    &crypto_cipher_gcrypt },
    [CRYPTO_CIPHER_SERPENT_256] = { "serpent-256", "serpent", 32, 16,
                                    &crypto_cipher_gcrypt },
    [CRYPTO_CIPHER_TWOFISH_128] = { "twofish-128", "twofish", 16, 16,
                                    &crypto_cipher_gcrypt },
    /* libgcrypt has no 192-bit Twofish; nettle has */
    [CRYPTO_CIPHER_TWOFISH_192] = { "twofish-192", "twofish", 24, 16,
                                    &crypto_cipher_nettle },
    [CRYPTO_CIPHER_TWOFISH_256] = { "twofish-256", "twofish", 32, 16,
                                    &crypto_cipher_gcrypt },
};

static const char *const crypto_cipher_mode_names[CRYPTO_CIPHER_MODE__MAX] = {
    [CRYPTO_CIPHER_MODE_ECB] = "ecb",
    [CRYPTO_CIPHER_MODE_CBC] = "cbc",
    [CRYPTO_CIPHER_MODE_XTS] = "xts",
    [CRYPTO_CIPHER_MODE_CTR] = "ctr",
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
    return qemu_name_index(crypto_cipher_mode_names, CRYPTO_CIPHER_MODE__MAX,
                           name);
}

const char *crypto_cipher_mode_name(CryptoCipherMode mode)
{
    return crypto_cipher_mode_names[mode];
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
    if (mode == CRYPTO_CIPHER_MODE_XTS &&
        crypto_cipher_algs[alg].block_len != 16) {
        error_setg(errp, "Cipher '%s' with mode '%s' is not supported",
                   crypto_cipher_algs[alg].name,
                   crypto_cipher_mode_names[mode]);
        return false;
    }
    return true;
}

CryptoCipher *crypto_cipher_new(CryptoCipherAlg alg, CryptoCipherMode mode,
                                const uint8_t *key, size_t key_len,
                                Error **errp)
{
    CryptoCipher *cipher;
    void *state;

    if (!crypto_cipher_supports(alg, mode, errp)) {
        return NULL;
    }
    if (key_len != crypto_cipher_key_len(alg, mode)) {
        error_setg(errp, "Cipher key length %zu should be %zu", key_len,
                   crypto_cipher_key_len(alg, mode));
        return NULL;
    }
    state = crypto_cipher_algs[alg].driver->open(alg, mode, key, key_len,
                                                 errp);
    if (!state) {
        return NULL;
    }
    cipher = g_new0(CryptoCipher, 1);
    cipher->driver = crypto_cipher_algs[alg].driver;
    cipher->state = state;
    cipher->mode = mode;
    cipher->block_len = crypto_cipher_algs[alg].block_len;
    return cipher;
}

void crypto_cipher_free(CryptoCipher *cipher)
{
    if (cipher) {
        cipher->driver->close(cipher->state);
        g_free(cipher);
    }
}

int crypto_cipher_setiv(CryptoCipher *cipher, const uint8_t *iv,
                        size_t iv_len, Error **errp)
{
    if (cipher->mode == CRYPTO_CIPHER_MODE_ECB) {
        return 0;
    }
    if (iv_len != cipher->block_len) {
        error_setg(errp, "Expected IV size %zu not %zu", cipher->block_len,
                   iv_len);
        return -EINVAL;
    }
    return cipher->driver->setiv(cipher->state, iv, iv_len, errp);
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

/* Encrypts or decrypts @len bytes of @buf in place, as @dir says. */
static int crypto_cipher_run(CryptoCipher *cipher, uint8_t *buf, size_t len,
                             CryptoCipherDirection dir, Error **errp)
{
    if (crypto_cipher_check_len(cipher, len, errp) < 0) {
        return -EINVAL;
    }
    return cipher->driver->run(cipher->state, buf, len, dir, errp);
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
