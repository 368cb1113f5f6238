/*
 * The libraries behind crypto/cipher.c.  Each algorithm of the table in
 * cipher.c names the library that runs it: libgcrypt for all it has
 * (its AES-XTS is the fastest, docs/encryption.md), nettle for what
 * libgcrypt lacks (192-bit Twofish), so that every cipher QEMU 7.2 offers
 * on Debian, whose QEMU is built with nettle, opens in qblock too.
 *
 * cipher.c has checked the algorithm, the mode and the key length before
 * it calls open; a state is used by one thread at a time.
 */
#ifndef QBLOCK_CRYPTO_CIPHER_INT_H
#define QBLOCK_CRYPTO_CIPHER_INT_H

#include "crypto/cipher.h"

/* Which way crypto_cipher_run() transforms the data. */
typedef enum CryptoCipherDirection {
    CRYPTO_CIPHER_ENCRYPT,
    CRYPTO_CIPHER_DECRYPT,
} CryptoCipherDirection;

typedef struct CryptoCipherDriver {
    /* Required.  The library's state for @key, or NULL with @errp set. */
    void *(*open)(CryptoCipherAlg alg, CryptoCipherMode mode,
                  const uint8_t *key, size_t key_len, Error **errp);
    /* Required.  Wipes the key schedule and frees @state. */
    void (*close)(void *state);
    /* Required.  @iv_len is the block length; never called for ECB. */
    int (*setiv)(void *state, const uint8_t *iv, size_t iv_len,
                 Error **errp);
    /*
     * Required.  In place; @len is a multiple of the block length except
     * in CTR mode.  0 or -errno with @errp set.
     */
    int (*run)(void *state, uint8_t *buf, size_t len,
               CryptoCipherDirection dir, Error **errp);
} CryptoCipherDriver;

extern const CryptoCipherDriver crypto_cipher_gcrypt;
extern const CryptoCipherDriver crypto_cipher_nettle;

#endif
