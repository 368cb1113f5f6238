/*
 * Hash algorithms over libgcrypt (see include/crypto/hash.h).
 */
#include "crypto/hash.h"

#include <gcrypt.h>

#include "crypto/init.h"

static const struct {
    const char *name;
    int gcry_algo;
} crypto_hash_algs[CRYPTO_HASH_ALG__MAX] = {
    [CRYPTO_HASH_MD5] = { "md5", GCRY_MD_MD5 },
    [CRYPTO_HASH_SHA1] = { "sha1", GCRY_MD_SHA1 },
    [CRYPTO_HASH_SHA224] = { "sha224", GCRY_MD_SHA224 },
    [CRYPTO_HASH_SHA256] = { "sha256", GCRY_MD_SHA256 },
    [CRYPTO_HASH_SHA384] = { "sha384", GCRY_MD_SHA384 },
    [CRYPTO_HASH_SHA512] = { "sha512", GCRY_MD_SHA512 },
    [CRYPTO_HASH_RIPEMD160] = { "ripemd160", GCRY_MD_RMD160 },
};

int crypto_hash_lookup(const char *name)
{
    for (int i = 0; i < CRYPTO_HASH_ALG__MAX; i++) {
        if (!strcmp(crypto_hash_algs[i].name, name)) {
            return i;
        }
    }
    return -1;
}

const char *crypto_hash_name(CryptoHashAlg alg)
{
    return crypto_hash_algs[alg].name;
}

size_t crypto_hash_digest_len(CryptoHashAlg alg)
{
    return gcry_md_get_algo_dlen(crypto_hash_algs[alg].gcry_algo);
}

int crypto_hash_gcry_algo(CryptoHashAlg alg)
{
    return crypto_hash_algs[alg].gcry_algo;
}

void crypto_hash_bytes(CryptoHashAlg alg, const struct iovec *iov,
                       int niov, uint8_t *out)
{
    gcry_buffer_t bufs[niov];

    crypto_init();
    memset(bufs, 0, sizeof(bufs));
    for (int i = 0; i < niov; i++) {
        bufs[i].size = bufs[i].len = iov[i].iov_len;
        bufs[i].data = iov[i].iov_base;
    }
    /* cannot fail for a known algorithm without flags */
    gcry_md_hash_buffers(crypto_hash_algs[alg].gcry_algo, 0, out, bufs, niov);
}
