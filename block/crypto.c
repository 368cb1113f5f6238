/*
 * LUKS glue for block drivers (block/crypto.h): header I/O over a child,
 * and encryption jobs in the worker pool.
 *
 * A job's chunks run in worker threads and touch only their own part of
 * the buffer and a cipher taken from the volume's pool (crypto/luks.h,
 * invariant 3); the waiting coroutine is woken by the last completion,
 * which runs in the coroutine's AioContext.
 */
#include "block/crypto.h"

#include "util/thread-pool.h"

/*
 * Work per worker job: big enough that the hand-off costs little next to
 * AES (64 KiB take some 15 us with AES-NI), small enough that a 2 MiB
 * request spreads over many CPUs.
 */
#define BLOCK_CRYPTO_CHUNK (64 * 1024)

static int block_crypto_child_read(void *opaque, uint64_t offset, void *buf,
                                   size_t len, Error **errp)
{
    BlockCryptoChildIO *cio = opaque;
    int ret = bdrv_pread(cio->child, cio->offset + offset, len, buf, 0);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read encryption header at "
                         "offset %" PRIu64, cio->offset + offset);
        return ret;
    }
    return 0;
}

static int block_crypto_child_write(void *opaque, uint64_t offset,
                                    const void *buf, size_t len,
                                    Error **errp)
{
    BlockCryptoChildIO *cio = opaque;
    int ret;

    if (cio->limit && offset + len > cio->limit) {
        error_setg(errp, "Encryption header write of %zu bytes at %" PRIu64
                   " exceeds its area of %" PRIu64 " bytes", len, offset,
                   cio->limit);
        return -ENOSPC;
    }
    ret = bdrv_pwrite(cio->child, cio->offset + offset, len, buf, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write encryption header at "
                         "offset %" PRIu64, cio->offset + offset);
        return ret;
    }
    return 0;
}

static int block_crypto_child_init(void *opaque, uint64_t len, Error **errp)
{
    BlockCryptoChildIO *cio = opaque;

    if (cio->limit) {
        if (len > cio->limit) {
            error_setg(errp, "Encryption header of %" PRIu64 " bytes does "
                       "not fit in %" PRIu64, len, cio->limit);
            return -ENOSPC;
        }
        return 0;
    }
    return bdrv_truncate(cio->child, cio->offset + len, false,
                         PREALLOC_MODE_OFF, 0, errp);
}

CryptoLuksIO block_crypto_child_io(BlockCryptoChildIO *cio)
{
    return (CryptoLuksIO) {
        .read = block_crypto_child_read,
        .write = block_crypto_child_write,
        .init = block_crypto_child_init,
        .opaque = cio,
    };
}

typedef struct BlockCryptoJob {
    CryptoLuks *luks;
    BlockCryptoDirection dir;
    Coroutine *co;
    int pending;                /* chunks not completed; event loop only */
    int ret;
} BlockCryptoJob;

typedef struct BlockCryptoChunk {
    BlockCryptoJob *job;
    uint64_t offset;
    uint8_t *buf;
    size_t len;
} BlockCryptoChunk;

/* In a worker thread. */
static int block_crypto_chunk_work(void *opaque)
{
    BlockCryptoChunk *c = opaque;
    Error *err = NULL;
    int ret;

    ret = (c->job->dir == BLOCK_CRYPTO_ENCRYPT ? crypto_luks_encrypt
                                               : crypto_luks_decrypt)
          (c->job->luks, c->offset, c->buf, c->len, &err);
    /* the only failures are impossible ones (a cipher that cannot be
     * created twice); the request fails with EIO, the reason is dropped */
    error_free(err);
    return ret < 0 ? -EIO : 0;
}

/* In the coroutine's AioContext. */
static void block_crypto_chunk_done(void *opaque, int ret)
{
    BlockCryptoChunk *c = opaque;
    BlockCryptoJob *job = c->job;

    if (ret < 0) {
        job->ret = ret;
    }
    if (--job->pending == 0) {
        aio_co_wake(job->co);
    }
}

int coroutine_fn block_crypto_co_run(BlockDriverState *bs, CryptoLuks *luks,
                                     BlockCryptoDirection dir,
                                     uint64_t offset, uint8_t *buf,
                                     size_t len)
{
    ThreadPool *pool = aio_get_thread_pool(bdrv_get_aio_context(bs));
    size_t n = MAX(DIV_ROUND_UP(len, BLOCK_CRYPTO_CHUNK), 1);
    g_autofree BlockCryptoChunk *chunks = g_new(BlockCryptoChunk, n);
    BlockCryptoJob job = {
        .luks = luks,
        .dir = dir,
        .co = qemu_coroutine_self(),
        .pending = n,
    };

    assert(len % CRYPTO_LUKS_SECTOR_SIZE == 0);
    if (n == 1) {
        chunks[0] = (BlockCryptoChunk) { &job, offset, buf, len };
        return thread_pool_submit_co(pool, block_crypto_chunk_work,
                                     &chunks[0]);
    }
    for (size_t i = 0; i < n; i++) {
        size_t off = i * BLOCK_CRYPTO_CHUNK;

        chunks[i] = (BlockCryptoChunk) {
            &job, offset + off, buf + off, MIN(BLOCK_CRYPTO_CHUNK, len - off)
        };
        thread_pool_submit_aio(pool, block_crypto_chunk_work, &chunks[i],
                               block_crypto_chunk_done, &chunks[i]);
    }
    qemu_coroutine_yield();
    return job.ret;
}

int block_crypto_parse_amend(QemuOpts *opts, const char *prefix,
                             CryptoLuksAmendOptions *a, Error **errp)
{
    g_autofree char *state_key = g_strconcat(prefix, "state", NULL);
    g_autofree char *slot_key = g_strconcat(prefix, "keyslot", NULL);
    g_autofree char *new_key = g_strconcat(prefix, "new-secret", NULL);
    g_autofree char *old_key = g_strconcat(prefix, "old-secret", NULL);
    g_autofree char *iter_key = g_strconcat(prefix, "iter-time", NULL);
    /* x-blockdev-amend's only (qemu-img's opts never hold it) */
    g_autofree char *secret_key = g_strconcat(prefix, "secret", NULL);
    const char *state = qemu_opt_get(opts, state_key);
    uint64_t slot = qemu_opt_get_number(opts, slot_key, 0);

    *a = (CryptoLuksAmendOptions) {
        .keyslot = qemu_opt_has(opts, slot_key) ? (int)slot : -1,
        .new_secret = qemu_opt_get(opts, new_key),
        .old_secret = qemu_opt_get(opts, old_key),
        .secret = qemu_opt_get(opts, secret_key),
        .iter_time_ms = qemu_opt_get_number(opts, iter_key, 2000),
    };
    if (!state) {
        error_setg(errp, "Parameter '%s' is missing", state_key);
        return -EINVAL;
    }
    if (strcmp(state, "active") && strcmp(state, "inactive")) {
        error_setg(errp, "Parameter '%s' does not accept value '%s'",
                   state_key, state);
        return -EINVAL;
    }
    if (qemu_opt_has(opts, slot_key) && slot >= CRYPTO_LUKS_NUM_SLOTS) {
        /* QEMU's words, the number as its C int printed unsigned */
        error_setg(errp, "Invalid keyslot %u specified, must be between 0 "
                   "and %d", (unsigned)slot, CRYPTO_LUKS_NUM_SLOTS - 1);
        return -EINVAL;
    }
    a->active = !strcmp(state, "active");
    return 0;
}

int block_crypto_open_legacy_aes(BlockDriverState *bs, const char *format,
                                 const char *secret, int flags,
                                 CryptoLuks **crypto, Error **errp)
{
    if (format && strcmp(format, "aes")) {
        error_setg(errp, "Header reported 'aes' encryption format but "
                   "options specify '%s'", format);
        return -EINVAL;
    }
    bs->encrypted = true;
    *crypto = NULL;
    if (flags & BDRV_O_NO_IO) {
        return 0;
    }
    if (!secret) {
        error_setg(errp, "Parameter 'encrypt.key-secret' is required for "
                   "cipher");
        return -EINVAL;
    }
    *crypto = crypto_luks_new_qcow_aes(secret, errp);
    return *crypto ? 0 : -EINVAL;
}
