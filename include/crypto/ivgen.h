/*
 * Initialisation vectors of disk sectors, as dm-crypt and LUKS name
 * them: plain (the sector number's low 32 bits, little-endian), plain64
 * (all 64 bits) and essiv (the 64-bit number encrypted under the hash of
 * the master key, so that IVs cannot be predicted).
 */
#ifndef QBLOCK_CRYPTO_IVGEN_H
#define QBLOCK_CRYPTO_IVGEN_H

#include "crypto/cipher.h"
#include "crypto/hash.h"

typedef enum CryptoIvgenAlg {
    CRYPTO_IVGEN_PLAIN,
    CRYPTO_IVGEN_PLAIN64,
    CRYPTO_IVGEN_ESSIV,
    CRYPTO_IVGEN_ALG__MAX,
} CryptoIvgenAlg;

typedef struct CryptoIvgen CryptoIvgen;

int crypto_ivgen_lookup(const char *name);
const char *crypto_ivgen_name(CryptoIvgenAlg alg);

/*
 * @cipher_alg and @key: the data's cipher and master key (essiv derives
 * its own from them with @hash; the others ignore them).
 */
CryptoIvgen *crypto_ivgen_new(CryptoIvgenAlg alg, CryptoCipherAlg cipher_alg,
                              CryptoHashAlg hash, const uint8_t *key,
                              size_t key_len, Error **errp);
void crypto_ivgen_free(CryptoIvgen *ivgen);

/* Fills @iv (@iv_len bytes) for @sector.  Thread-safe. */
int crypto_ivgen_calculate(CryptoIvgen *ivgen, uint64_t sector,
                           uint8_t *iv, size_t iv_len, Error **errp);

#endif
