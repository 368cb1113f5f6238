/*
 * PBKDF2 over libgcrypt, and its calibration (include/crypto/pbkdf.h).
 */
#include "crypto/pbkdf.h"

#include <gcrypt.h>

#include "crypto/init.h"

/*
 * A calibration run shorter than this is too exposed to the clock's
 * granularity and to scheduling to extrapolate from.
 */
#define PBKDF_CALIBRATE_MIN_NS (50 * 1000 * 1000)
/* where doubling starts: cheap, yet far above any fixed per-call cost */
#define PBKDF_CALIBRATE_START_ITERS (1 << 12)

int crypto_pbkdf2(CryptoHashAlg hash, const uint8_t *key, size_t key_len,
                  const uint8_t *salt, size_t salt_len, uint64_t iterations,
                  uint8_t *out, size_t out_len, Error **errp)
{
    gcry_error_t err;

    crypto_init();
    if (iterations == 0 || iterations > ULONG_MAX) {
        error_setg(errp, "PBKDF iterations %" PRIu64 " must be between 1 "
                   "and %lu", iterations, ULONG_MAX);
        return -EINVAL;
    }
    err = gcry_kdf_derive(key, key_len, GCRY_KDF_PBKDF2,
                          crypto_hash_gcry_algo(hash), salt, salt_len,
                          iterations, out_len, out);
    if (err) {
        error_setg(errp, "Cannot run PBKDF2 with %s: %s",
                   crypto_hash_name(hash), gcry_strerror(err));
        return -EIO;
    }
    return 0;
}

static int64_t crypto_pbkdf_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

uint64_t crypto_pbkdf2_count_iters(CryptoHashAlg hash, size_t out_len,
                                   uint64_t ms)
{
    static const uint8_t key[32] = "qblock calibration passphrase";
    static const uint8_t salt[32] = "qblock calibration salt";
    g_autofree uint8_t *out = g_malloc(out_len);
    uint64_t iters = PBKDF_CALIBRATE_START_ITERS;
    int64_t elapsed;
    double per_ns;

    for (;;) {
        int64_t start = crypto_pbkdf_now_ns();

        /* a known hash with a valid count cannot fail */
        crypto_pbkdf2(hash, key, sizeof(key), salt, sizeof(salt), iters,
                      out, out_len, &error_abort);
        elapsed = crypto_pbkdf_now_ns() - start;
        if (elapsed >= PBKDF_CALIBRATE_MIN_NS || iters >= UINT32_MAX) {
            break;
        }
        iters *= 2;
    }
    per_ns = (double)iters / MAX(elapsed, 1);
    return MAX(1, MIN((double)UINT32_MAX, per_ns * ms * 1e6));
}
