/*
 * Sector IVs (include/crypto/ivgen.h).  The essiv cipher is shared by
 * every thread that encrypts with this ivgen, so its use is serialised
 * by ivgen->lock (one block encryption: short).
 */
#include "crypto/ivgen.h"

#include "util/cutils.h"

struct CryptoIvgen {
    CryptoIvgenAlg alg;
    CryptoCipher *essiv;        /* ECB, keyed with H(master key) */
    GMutex lock;                /* guards essiv */
};

static const char *const crypto_ivgen_names[CRYPTO_IVGEN_ALG__MAX] = {
    [CRYPTO_IVGEN_PLAIN] = "plain",
    [CRYPTO_IVGEN_PLAIN64] = "plain64",
    [CRYPTO_IVGEN_ESSIV] = "essiv",
};

int crypto_ivgen_lookup(const char *name)
{
    return qemu_name_index(crypto_ivgen_names, CRYPTO_IVGEN_ALG__MAX, name);
}

const char *crypto_ivgen_name(CryptoIvgenAlg alg)
{
    return crypto_ivgen_names[alg];
}

CryptoIvgen *crypto_ivgen_new(CryptoIvgenAlg alg, CryptoCipherAlg cipher_alg,
                              CryptoHashAlg hash, const uint8_t *key,
                              size_t key_len, Error **errp)
{
    CryptoIvgen *ivgen = g_new0(CryptoIvgen, 1);

    ivgen->alg = alg;
    g_mutex_init(&ivgen->lock);
    if (alg == CRYPTO_IVGEN_ESSIV) {
        size_t salt_len = crypto_hash_digest_len(hash);
        const char *family = crypto_cipher_alg_family(cipher_alg);
        int essiv_alg = crypto_cipher_alg_from_family(family, salt_len);
        uint8_t salt[64];
        struct iovec iov = { (void *)key, key_len };

        if (essiv_alg < 0) {
            error_setg(errp, "Cipher '%s' has no key size matching hash "
                       "'%s' (%zu bytes) for essiv", family,
                       crypto_hash_name(hash), salt_len);
            crypto_ivgen_free(ivgen);
            return NULL;
        }
        crypto_hash_bytes(hash, &iov, 1, salt);
        ivgen->essiv = crypto_cipher_new(essiv_alg, CRYPTO_CIPHER_MODE_ECB,
                                         salt, salt_len, errp);
        explicit_bzero(salt, sizeof(salt));
        if (!ivgen->essiv) {
            crypto_ivgen_free(ivgen);
            return NULL;
        }
    }
    return ivgen;
}

void crypto_ivgen_free(CryptoIvgen *ivgen)
{
    if (ivgen) {
        crypto_cipher_free(ivgen->essiv);
        g_mutex_clear(&ivgen->lock);
        g_free(ivgen);
    }
}

int crypto_ivgen_calculate(CryptoIvgen *ivgen, uint64_t sector,
                           uint8_t *iv, size_t iv_len, Error **errp)
{
    uint64_t le = GUINT64_TO_LE(ivgen->alg == CRYPTO_IVGEN_PLAIN ?
                                (uint32_t)sector : sector);
    int ret;

    memset(iv, 0, iv_len);
    memcpy(iv, &le, MIN(sizeof(le), iv_len));
    if (ivgen->alg != CRYPTO_IVGEN_ESSIV) {
        return 0;
    }
    g_mutex_lock(&ivgen->lock);
    ret = crypto_cipher_encrypt(ivgen->essiv, iv, iv_len, errp);
    g_mutex_unlock(&ivgen->lock);
    return ret;
}
