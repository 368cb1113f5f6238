/*
 * PBKDF2 (RFC 2898) and the calibration of its iteration count.
 */
#ifndef QBLOCK_CRYPTO_PBKDF_H
#define QBLOCK_CRYPTO_PBKDF_H

#include "crypto/hash.h"

int crypto_pbkdf2(CryptoHashAlg hash, const uint8_t *key, size_t key_len,
                  const uint8_t *salt, size_t salt_len, uint64_t iterations,
                  uint8_t *out, size_t out_len, Error **errp);

/*
 * How many iterations of PBKDF2 with @hash take @ms milliseconds on this
 * machine, at least 1.  Measured on the monotonic clock with doubling
 * runs until one lasts long enough to be read exactly: never fails, even
 * where the CPU time a VM reports is too coarse to measure (where QEMU
 * 7.2 gives up with "Unable to get accurate CPU usage").
 */
uint64_t crypto_pbkdf2_count_iters(CryptoHashAlg hash, size_t out_len,
                                   uint64_t ms);

#endif
