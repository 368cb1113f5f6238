/*
 * Hash algorithms by QEMU's names (QCryptoHashAlgorithm), as LUKS headers
 * and the encrypt.hash-alg/ivgen-hash-alg options write them.
 */
#ifndef QBLOCK_CRYPTO_HASH_H
#define QBLOCK_CRYPTO_HASH_H

#include "util/osdep.h"
#include "util/error.h"

typedef enum CryptoHashAlg {
    CRYPTO_HASH_MD5,
    CRYPTO_HASH_SHA1,
    CRYPTO_HASH_SHA224,
    CRYPTO_HASH_SHA256,
    CRYPTO_HASH_SHA384,
    CRYPTO_HASH_SHA512,
    CRYPTO_HASH_RIPEMD160,
    CRYPTO_HASH_ALG__MAX,
} CryptoHashAlg;

/* -1 if @name is unknown. */
int crypto_hash_lookup(const char *name);
const char *crypto_hash_name(CryptoHashAlg alg);
size_t crypto_hash_digest_len(CryptoHashAlg alg);
/* libgcrypt's id of the algorithm, for its KDF and MD calls. */
int crypto_hash_gcry_algo(CryptoHashAlg alg);

/* @out gets crypto_hash_digest_len(alg) bytes. */
void crypto_hash_bytes(CryptoHashAlg alg, const struct iovec *iov,
                       int niov, uint8_t *out);

#endif
