/*
 * Block ciphers for LUKS (libgcrypt, and nettle where libgcrypt lacks
 * one: crypto/cipher-int.h): the algorithms and modes QEMU 7.2 offers for
 * LUKS, by QEMU's names.
 *
 * A CryptoCipher holds one key and one IV; it is not safe to use from two
 * threads at once (the LUKS layer keeps a pool of them for that).
 */
#ifndef QBLOCK_CRYPTO_CIPHER_H
#define QBLOCK_CRYPTO_CIPHER_H

#include "util/osdep.h"
#include "util/error.h"

typedef enum CryptoCipherAlg {
    CRYPTO_CIPHER_AES_128,
    CRYPTO_CIPHER_AES_192,
    CRYPTO_CIPHER_AES_256,
    CRYPTO_CIPHER_CAST5_128,
    CRYPTO_CIPHER_SERPENT_128,
    CRYPTO_CIPHER_SERPENT_192,
    CRYPTO_CIPHER_SERPENT_256,
    CRYPTO_CIPHER_TWOFISH_128,
    CRYPTO_CIPHER_TWOFISH_192,
    CRYPTO_CIPHER_TWOFISH_256,
    CRYPTO_CIPHER_ALG__MAX,
} CryptoCipherAlg;

typedef enum CryptoCipherMode {
    CRYPTO_CIPHER_MODE_ECB,
    CRYPTO_CIPHER_MODE_CBC,
    CRYPTO_CIPHER_MODE_XTS,
    CRYPTO_CIPHER_MODE_CTR,
    CRYPTO_CIPHER_MODE__MAX,
} CryptoCipherMode;

typedef struct CryptoCipher CryptoCipher;

/* QEMU's names: "aes-256", "xts"; -1 if unknown. */
int crypto_cipher_alg_lookup(const char *name);
const char *crypto_cipher_alg_name(CryptoCipherAlg alg);
int crypto_cipher_mode_lookup(const char *name);
const char *crypto_cipher_mode_name(CryptoCipherMode mode);

/* The LUKS family name ("aes") and the key size of one key, in bytes. */
const char *crypto_cipher_alg_family(CryptoCipherAlg alg);
size_t crypto_cipher_alg_key_len(CryptoCipherAlg alg);
size_t crypto_cipher_alg_block_len(CryptoCipherAlg alg);
/* The algorithm of family @family whose key is @key_len bytes; -1 if none. */
int crypto_cipher_alg_from_family(const char *family, size_t key_len);

/* The key length @mode needs for @alg: twice the algorithm's for XTS. */
size_t crypto_cipher_key_len(CryptoCipherAlg alg, CryptoCipherMode mode);

/*
 * Whether the library can do @alg in @mode (XTS needs a 128-bit block);
 * sets "Cipher 'x' with mode 'y' is not supported" otherwise.
 */
bool crypto_cipher_supports(CryptoCipherAlg alg, CryptoCipherMode mode,
                            Error **errp);

CryptoCipher *crypto_cipher_new(CryptoCipherAlg alg, CryptoCipherMode mode,
                                const uint8_t *key, size_t key_len,
                                Error **errp);
void crypto_cipher_free(CryptoCipher *cipher);

/* @iv is the block length (none for ECB: @iv_len 0). */
int crypto_cipher_setiv(CryptoCipher *cipher, const uint8_t *iv,
                        size_t iv_len, Error **errp);
/* In place; @len a multiple of the block length (any length for CTR). */
int crypto_cipher_encrypt(CryptoCipher *cipher, uint8_t *buf, size_t len,
                          Error **errp);
int crypto_cipher_decrypt(CryptoCipher *cipher, uint8_t *buf, size_t len,
                          Error **errp);

#endif
