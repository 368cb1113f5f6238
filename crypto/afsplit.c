/*
 * The LUKS anti-forensic splitter (include/crypto/afsplit.h).
 *
 * With D_0 = 0 and D_i = H(D_{i-1} xor S_i) for the first stripes - 1
 * stripes S_i (random on encode), the last stripe is D xor key.  H is the
 * "diffuse" function: the block hashed one digest at a time, each digest
 * prefixed with its big-endian index, the tail cut to length.
 */
#include "crypto/afsplit.h"

#include <gcrypt.h>

#include "crypto/init.h"

static void crypto_afsplit_xor(uint8_t *dst, const uint8_t *a,
                               const uint8_t *b, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        dst[i] = a[i] ^ b[i];
    }
}

static void crypto_afsplit_diffuse(CryptoHashAlg hash, uint8_t *block,
                                   size_t len)
{
    size_t digest_len = crypto_hash_digest_len(hash);
    uint8_t digest[64];

    assert(digest_len <= sizeof(digest));
    for (size_t off = 0, i = 0; off < len; off += digest_len, i++) {
        uint32_t be_index = GUINT32_TO_BE(i);
        size_t chunk = MIN(digest_len, len - off);
        struct iovec iov[2] = {
            { &be_index, sizeof(be_index) },
            { block + off, chunk },
        };

        crypto_hash_bytes(hash, iov, 2, digest);
        memcpy(block + off, digest, chunk);
    }
    explicit_bzero(digest, sizeof(digest));
}

void crypto_afsplit_encode(CryptoHashAlg hash, size_t key_len,
                           uint32_t stripes, const uint8_t *key,
                           uint8_t *out)
{
    g_autofree uint8_t *d = g_malloc0(key_len);

    assert(stripes >= 1);
    crypto_init();
    gcry_randomize(out, key_len * (stripes - 1), GCRY_STRONG_RANDOM);
    for (uint32_t i = 0; i + 1 < stripes; i++) {
        crypto_afsplit_xor(d, d, out + i * key_len, key_len);
        crypto_afsplit_diffuse(hash, d, key_len);
    }
    crypto_afsplit_xor(out + (stripes - 1) * key_len, d, key, key_len);
    explicit_bzero(d, key_len);
}

void crypto_afsplit_decode(CryptoHashAlg hash, size_t key_len,
                           uint32_t stripes, const uint8_t *in,
                           uint8_t *key)
{
    g_autofree uint8_t *d = g_malloc0(key_len);

    assert(stripes >= 1);
    for (uint32_t i = 0; i + 1 < stripes; i++) {
        crypto_afsplit_xor(d, d, in + i * key_len, key_len);
        crypto_afsplit_diffuse(hash, d, key_len);
    }
    crypto_afsplit_xor(key, d, in + (stripes - 1) * key_len, key_len);
    explicit_bzero(d, key_len);
}
