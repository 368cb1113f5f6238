/*
 * LUKS version 1 volumes as QEMU writes and reads them: the header and
 * its eight key slots, creating and unlocking them, and the encryption of
 * the payload, sector by sector.  The storage is the caller's (a raw
 * `luks` image, or the LUKS area inside a qcow2 file), reached through
 * CryptoLuksIO.
 *
 * Invariants:
 *  1. Nothing is written while a header is validated or unlocked: a bad
 *     header or passphrase leaves the storage as it was.
 *  2. The master key lives only inside a CryptoLuks (the cipher pool and
 *     ivgen keyed with it); every other buffer that held it, or a
 *     passphrase, or a derived slot key, is zeroed before it is freed.
 *  3. crypto_luks_encrypt/decrypt may run in several threads at once:
 *     each takes a cipher of its own from the pool under pool_lock.
 */
#ifndef QBLOCK_CRYPTO_LUKS_H
#define QBLOCK_CRYPTO_LUKS_H

#include "crypto/cipher.h"
#include "crypto/hash.h"
#include "crypto/ivgen.h"
#include "util/json.h"

/* LUKS1 encrypts in 512-byte sectors whatever the device's sector size */
#define CRYPTO_LUKS_SECTOR_SIZE 512
#define CRYPTO_LUKS_NUM_SLOTS 8

typedef struct CryptoLuks CryptoLuks;

/* The storage of a LUKS header; offsets from the header's start. */
typedef struct CryptoLuksIO {
    int (*read)(void *opaque, uint64_t offset, void *buf, size_t len,
                Error **errp);
    int (*write)(void *opaque, uint64_t offset, const void *buf, size_t len,
                 Error **errp);
    /* create only: make room for a header of @len bytes */
    int (*init)(void *opaque, uint64_t len, Error **errp);
    void *opaque;
} CryptoLuksIO;

typedef struct CryptoLuksCreateOptions {
    const char *key_secret;     /* id of the passphrase's secret */
    CryptoCipherAlg cipher_alg;
    CryptoCipherMode cipher_mode;
    CryptoIvgenAlg ivgen_alg;
    CryptoHashAlg ivgen_hash_alg;
    CryptoHashAlg hash_alg;
    uint64_t iter_time_ms;
} CryptoLuksCreateOptions;

/* QEMU's defaults: aes-256, xts, plain64, sha256, sha256, 2000 ms. */
void crypto_luks_create_options_default(CryptoLuksCreateOptions *opts);

/*
 * Parses the encrypt.* / luks creation options (key-secret, cipher-alg,
 * cipher-mode, ivgen-alg, ivgen-hash-alg, hash-alg, iter-time), absent
 * ones keeping their defaults.  @get returns an option's text or NULL.
 */
bool crypto_luks_parse_create_options(CryptoLuksCreateOptions *opts,
                                      const char *(*get)(void *opaque,
                                                         const char *name),
                                      void *opaque, Error **errp);

/* The bytes of header and key material that a volume of @opts needs. */
uint64_t crypto_luks_header_len(const CryptoLuksCreateOptions *opts);

CryptoLuks *crypto_luks_create(const CryptoLuksCreateOptions *opts,
                               const CryptoLuksIO *io, Error **errp);

typedef enum CryptoLuksOpenFlags {
    /* header only, no passphrase: for info, measure and probing */
    CRYPTO_LUKS_OPEN_NO_IO = 1 << 0,
} CryptoLuksOpenFlags;

/*
 * The sector encryption of qcow2's legacy AES method (crypt_method 1),
 * which is LUKS's payload encryption without a header: AES-128-CBC,
 * plain64 IVs, the key the passphrase's first 16 bytes, zero-padded.
 * crypto_luks_get_info() and crypto_luks_amend() do not apply to it.
 */
CryptoLuks *crypto_luks_new_qcow_aes(const char *key_secret, Error **errp);

/* @key_secret may be NULL with CRYPTO_LUKS_OPEN_NO_IO. */
CryptoLuks *crypto_luks_open(const char *key_secret, const CryptoLuksIO *io,
                             unsigned flags, Error **errp);
void crypto_luks_free(CryptoLuks *luks);

/* Where the payload starts, in bytes from the header's start. */
uint64_t crypto_luks_payload_offset(const CryptoLuks *luks);

/*
 * In place, @len bytes at @offset bytes into the payload (both multiples
 * of CRYPTO_LUKS_SECTOR_SIZE): the IV of each sector is its number,
 * @offset / 512 + i.  Invariant 3.
 */
int crypto_luks_encrypt(CryptoLuks *luks, uint64_t offset, uint8_t *buf,
                        size_t len, Error **errp);
int crypto_luks_decrypt(CryptoLuks *luks, uint64_t offset, uint8_t *buf,
                        size_t len, Error **errp);

/*
 * The "luks" data of qemu-img info's format-specific information (ivgen
 * alg, hash alg, cipher alg, uuid, cipher mode, slots, payload offset,
 * master key iters), members in QEMU's order.
 */
JsonObject *crypto_luks_get_info(const CryptoLuks *luks);

/*
 * Key slot management for amend: with @active, a new slot (@keyslot or
 * the first free one, -1) with the passphrase of secret @new_secret;
 * without, the slots that @old_secret opens (or @keyslot) are erased, the
 * last one refused.  The master key is needed: @luks was opened with I/O.
 */
typedef struct CryptoLuksAmendOptions {
    bool active;
    int keyslot;                /* -1: any */
    const char *new_secret;
    const char *old_secret;
    /* adding: the secret that must open a slot; NULL: the one opened with */
    const char *secret;
    uint64_t iter_time_ms;
} CryptoLuksAmendOptions;

int crypto_luks_amend(CryptoLuks *luks, const CryptoLuksIO *io,
                      const CryptoLuksAmendOptions *opts, bool force,
                      Error **errp);

#endif
