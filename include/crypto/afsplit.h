/*
 * The anti-forensic information splitter of LUKS (TKS1, as cryptsetup
 * defines it): a key becomes @stripes blocks of which all are needed to
 * recover it, so that destroying any part of a key slot destroys the key.
 */
#ifndef QBLOCK_CRYPTO_AFSPLIT_H
#define QBLOCK_CRYPTO_AFSPLIT_H

#include "crypto/hash.h"

/* @out gets @key_len * @stripes bytes: random stripes, then the key's. */
void crypto_afsplit_encode(CryptoHashAlg hash, size_t key_len,
                           uint32_t stripes, const uint8_t *key,
                           uint8_t *out);
/* The inverse: @key gets @key_len bytes from @in. */
void crypto_afsplit_decode(CryptoHashAlg hash, size_t key_len,
                           uint32_t stripes, const uint8_t *in,
                           uint8_t *key);

#endif
