/*
 * What the luks driver and qcow2's LUKS encryption share on top of
 * crypto/luks.h: the encryption of guest data in the worker pool, and a
 * header stored at an offset of a child.
 */
#ifndef QBLOCK_BLOCK_CRYPTO_H
#define QBLOCK_BLOCK_CRYPTO_H

#include "block/block_int.h"
#include "crypto/luks.h"
#include "util/buffer-pool.h"

/*
 * Idle bounce buffers an encrypted node keeps for its next requests
 * (util/buffer-pool.h): what `qblock-img convert` keeps in flight (8
 * requests of 2 MiB), which also covers a guest's 64 requests of 64 KiB,
 * so that neither allocates per request.  At 4 MiB, six of convert's
 * eight buffers were freed and faulted in again for every request:
 * 28.5k page faults for 256 MiB instead of 10.1k, a tenth of its CPU
 * time (docs/performance.md).  A node keeps only what it used at once.
 */
#define BLOCK_CRYPTO_BOUNCE_IDLE_MAX (16 * MiB)

/* A LUKS header at @offset of @child (qcow2: its LUKS area). */
typedef struct BlockCryptoChildIO {
    BdrvChild *child;
    uint64_t offset;
    /* create: the size the area may take; 0 means grow the child */
    uint64_t limit;
} BlockCryptoChildIO;

/* CryptoLuksIO over @cio (which must outlive its use). */
CryptoLuksIO block_crypto_child_io(BlockCryptoChildIO *cio);

typedef enum BlockCryptoDirection {
    BLOCK_CRYPTO_DECRYPT,
    BLOCK_CRYPTO_ENCRYPT,
} BlockCryptoDirection;

/*
 * Encrypts or decrypts @len bytes of @buf in place, whose first sector
 * has IV sector number @offset / 512, in the worker pool of @bs's
 * AioContext: a large buffer is cut into chunks that run in parallel, so
 * the event loop never encrypts and several CPUs share the work.
 * Returns 0 or -EIO.
 */
int coroutine_fn block_crypto_co_run(BlockDriverState *bs, CryptoLuks *luks,
                                     BlockCryptoDirection dir,
                                     uint64_t offset, uint8_t *buf,
                                     size_t len);

/*
 * amend's key slot options (state, keyslot, new-secret, old-secret,
 * iter-time), which QEMU's luks and qcow2 (@prefix "encrypt.") share.
 */
int block_crypto_parse_amend(QemuOpts *opts, const char *prefix,
                             CryptoLuksAmendOptions *a, Error **errp);

/*
 * The open of qcow's and qcow2's legacy AES encryption, with QEMU's
 * messages: @format (encrypt.format, may be NULL) must be "aes", and
 * unless @flags has BDRV_O_NO_IO the passphrase of secret @secret
 * becomes the key (*@crypto; NULL with BDRV_O_NO_IO).  Marks @bs
 * encrypted.  Returns 0 or -EINVAL.
 */
int block_crypto_open_legacy_aes(BlockDriverState *bs, const char *format,
                                 const char *secret, int flags,
                                 CryptoLuks **crypto, Error **errp);

#endif
