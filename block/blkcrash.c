/*
 * blkcrash: a volatile write cache in front of a file, and a power cut
 * (see include/block/blkcrash.h).
 *
 * Invariants (s = the node's BDRVBlkcrashState):
 *  1. s->journal holds the writes since the last flush that moved them
 *     out, oldest first.  Reading [a, b) returns the file's bytes with
 *     every journal entry overlapping it applied on top, in journal order:
 *     what the disk's cache would return.
 *  2. A flush applies the entries present when it starts, in order, to the
 *     file (writes only, no flush), then removes them under s->lock's
 *     write side, then the generic layer flushes the file.  Reads hold
 *     the read side from their file read to their overlay, so no read can
 *     miss an entry that was applied after its file read.
 *  3. Nothing but a flush (or a truncate, which flushes first) writes to
 *     the file; after blkcrash_power_cut() nothing does
 *     at all: s->dead makes every request fail with -EIO.
 *  4. s->journal_bytes is the sum of the entries' lengths and never
 *     exceeds s->journal_max.
 *
 *  5. An armed cut (blkcrash_arm) happens when the given request arrives,
 *     counting every read, write, zero write, discard and flush: that
 *     request and every later one fail with -EIO.  Sweeping the number
 *     over a workload cuts the power at every point of its I/O.
 *
 * Lock: s->lock (CoRwlock) guards removal from the journal; appending
 * never yields and needs no lock.
 */

#include "block/blkcrash.h"
#include "qapi/qapi-opts.h"

typedef struct BlkcrashWrite {
    int64_t offset;
    int64_t bytes;
    uint8_t *data;          /* NULL: zeroes (zero write, discard) */
    GList link;             /* entry of s->journal, embedded */
} BlkcrashWrite;

typedef struct BDRVBlkcrashState {
    GQueue journal;         /* BlkcrashWrite, oldest first */
    uint64_t journal_bytes;
    uint64_t journal_max;
    CoRwlock lock;
    bool dead;
    /* requests that reached the node, and the one that cuts the power */
    uint64_t requests;
    uint64_t cut_at;            /* 0: not armed */
    BlkcrashCut cut_mode;
    uint32_t cut_seed;
} BDRVBlkcrashState;

static const BlockDriver bdrv_blkcrash;

static int blkcrash_cut(BlockDriverState *bs, BlkcrashCut mode,
                        uint32_t seed);

/*
 * Counts a request; returns -EIO if the power is off, including when this
 * request is the one an armed cut waits for (it never happens then).
 */
static int blkcrash_enter(BlockDriverState *bs)
{
    BDRVBlkcrashState *s = bs->opaque;

    if (s->dead) {
        return -EIO;
    }
    s->requests++;
    if (s->cut_at && s->requests == s->cut_at) {
        blkcrash_cut(bs, s->cut_mode, s->cut_seed);
        return -EIO;
    }
    return 0;
}

static void blkcrash_write_free(BlkcrashWrite *w)
{
    g_free(w->data);
    g_free(w);
}

static void blkcrash_journal_clear(BDRVBlkcrashState *s)
{
    GList *link;

    /* the links are embedded: unlink them, never let GLib free them */
    while ((link = g_queue_pop_head_link(&s->journal))) {
        blkcrash_write_free(link->data);
    }
    s->journal_bytes = 0;
}

static int blkcrash_open(BlockDriverState *bs, QDict *options, int flags,
                         Error **errp)
{
    BDRVBlkcrashState *s = bs->opaque;
    QemuOpts *opts;

    opts = qemu_opts_absorb_qdict(&qapi_opts_blkcrash_runtime, options,
                                  errp);
    if (!opts) {
        return -EINVAL;
    }
    s->journal_max = qemu_opt_get_size(opts, "journal-max", 256 * MiB);
    qemu_opts_del(opts);
    g_queue_init(&s->journal);
    qemu_co_rwlock_init(&s->lock);
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    /* FUA is emulated by a flush of this node, which is what FUA means */
    bs->supported_write_flags = 0;
    bs->supported_zero_flags = 0;
    return 0;
}

static void blkcrash_close(BlockDriverState *bs)
{
    blkcrash_journal_clear(bs->opaque);
}

static int blkcrash_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    return 0;
}

static int64_t blkcrash_journal_end(BDRVBlkcrashState *s)
{
    int64_t end = 0;

    for (GList *l = s->journal.head; l; l = l->next) {
        BlkcrashWrite *w = l->data;

        end = MAX(end, w->offset + w->bytes);
    }
    return end;
}

/* A write past the file's end grows the disk as soon as it is cached. */
static int64_t blkcrash_getlength(BlockDriverState *bs)
{
    BDRVBlkcrashState *s = bs->opaque;
    int64_t len = bdrv_getlength(bs->file->bs);

    return len < 0 ? len : MAX(len, blkcrash_journal_end(s));
}

/* Invariant 1: the cached writes over what the file returned. */
static void blkcrash_overlay(BDRVBlkcrashState *s, int64_t offset,
                             int64_t bytes, QEMUIOVector *qiov)
{
    for (GList *l = s->journal.head; l; l = l->next) {
        BlkcrashWrite *w = l->data;
        int64_t start = MAX(offset, w->offset);
        int64_t end = MIN(offset + bytes, w->offset + w->bytes);

        if (start >= end) {
            continue;
        }
        if (w->data) {
            qemu_iovec_from_buf(qiov, start - offset,
                                w->data + (start - w->offset), end - start);
        } else {
            qemu_iovec_memset(qiov, start - offset, 0, end - start);
        }
    }
}

static int coroutine_fn blkcrash_co_preadv(BlockDriverState *bs,
                                           int64_t offset, int64_t bytes,
                                           QEMUIOVector *qiov,
                                           BdrvRequestFlags flags)
{
    BDRVBlkcrashState *s = bs->opaque;
    int64_t file_len;
    int64_t in_file;
    int ret = blkcrash_enter(bs);

    if (ret < 0) {
        return ret;
    }
    qemu_co_rwlock_rdlock(&s->lock);
    file_len = bdrv_getlength(bs->file->bs);
    if (file_len < 0) {
        ret = file_len;
        goto out;
    }
    /* the part past the file's end exists only in the cache */
    in_file = MAX(0, MIN(bytes, file_len - offset));
    if (in_file > 0) {
        ret = bdrv_co_preadv_part(bs->file, offset, in_file, qiov, 0, 0);
        if (ret < 0) {
            goto out;
        }
    }
    if (s->dead) {
        /* the cache went with the power while we waited or read */
        ret = -EIO;
        goto out;
    }
    if (in_file < bytes) {
        qemu_iovec_memset(qiov, in_file, 0, bytes - in_file);
    }
    blkcrash_overlay(s, offset, bytes, qiov);
out:
    qemu_co_rwlock_unlock(&s->lock);
    return ret < 0 ? ret : 0;
}

/* Puts a write into the cache (invariant 4). */
static int blkcrash_cache_write(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov)
{
    BDRVBlkcrashState *s = bs->opaque;
    BlkcrashWrite *w;
    int ret = blkcrash_enter(bs);

    if (ret < 0) {
        return ret;
    }
    if (bytes > s->journal_max - s->journal_bytes) {
        return -ENOSPC;
    }
    w = g_new0(BlkcrashWrite, 1);
    w->offset = offset;
    w->bytes = bytes;
    if (qiov) {
        w->data = g_malloc(bytes);
        qemu_iovec_to_buf(qiov, 0, w->data, bytes);
    }
    w->link.data = w;
    g_queue_push_tail_link(&s->journal, &w->link);
    s->journal_bytes += bytes;
    return 0;
}

static int coroutine_fn blkcrash_co_pwritev(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov,
                                            BdrvRequestFlags flags)
{
    return blkcrash_cache_write(bs, offset, bytes, qiov);
}

static int coroutine_fn blkcrash_co_pwrite_zeroes(BlockDriverState *bs,
                                                  int64_t offset,
                                                  int64_t bytes,
                                                  BdrvRequestFlags flags)
{
    return blkcrash_cache_write(bs, offset, bytes, NULL);
}

/* A discarded range reads as zeroes, as the file's hole punching does. */
static int coroutine_fn blkcrash_co_pdiscard(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes)
{
    return blkcrash_cache_write(bs, offset, bytes, NULL);
}

static int coroutine_fn blkcrash_apply(BlockDriverState *bs, BlkcrashWrite *w)
{
    if (w->data) {
        QEMUIOVector qiov;

        qemu_iovec_init_buf(&qiov, w->data, w->bytes);
        return bdrv_co_pwritev(bs->file, w->offset, w->bytes, &qiov, 0);
    }
    return bdrv_co_pwrite_zeroes(bs->file, w->offset, w->bytes, 0);
}

/*
 * Invariant 2: the cache into the file; the generic layer flushes it.
 * Each write to the file yields, and the power may go meanwhile (an armed
 * cut in another request): the journal is then gone and is not touched.
 */
static int coroutine_fn blkcrash_co_flush_to_os(BlockDriverState *bs)
{
    BDRVBlkcrashState *s = bs->opaque;
    GList *last = s->journal.tail;
    GList *l = s->journal.head;
    int ret = blkcrash_enter(bs);

    if (ret < 0 || !last) {
        return ret;
    }
    for (;;) {
        ret = blkcrash_apply(bs, l->data);
        if (s->dead) {
            return -EIO;
        }
        if (ret < 0) {
            return ret;
        }
        if (l == last) {
            break;
        }
        l = l->next;
    }
    qemu_co_rwlock_wrlock(&s->lock);
    if (s->dead) {
        qemu_co_rwlock_unlock(&s->lock);
        return -EIO;
    }
    for (;;) {
        GList *head = s->journal.head;
        BlkcrashWrite *w = head->data;

        g_queue_unlink(&s->journal, head);
        s->journal_bytes -= w->bytes;
        blkcrash_write_free(w);
        if (head == last) {
            break;
        }
    }
    qemu_co_rwlock_unlock(&s->lock);
    return 0;
}

static int coroutine_fn blkcrash_co_truncate(BlockDriverState *bs,
                                             int64_t offset, bool exact,
                                             PreallocMode prealloc,
                                             BdrvRequestFlags flags,
                                             Error **errp)
{
    /* through the generic flush, which runs one flush of a node at a time */
    int ret = bdrv_co_flush(bs);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "blkcrash could not write its cache "
                         "before resizing");
        return ret;
    }
    return bdrv_co_truncate(bs->file, offset, exact, prealloc, flags, errp);
}

/* Conservative: everything is data, nothing known to be zero. */
static int coroutine_fn blkcrash_co_block_status(BlockDriverState *bs,
                                                 bool want_zero,
                                                 int64_t offset,
                                                 int64_t bytes, int64_t *pnum,
                                                 int64_t *map,
                                                 BlockDriverState **file)
{
    *pnum = bytes;
    return BDRV_BLOCK_DATA;
}

/* ---- test interface ---- */

BlockDriverState *blkcrash_find(BlockDriverState *bs)
{
    while (bs) {
        if (bs->drv == &bdrv_blkcrash) {
            return bs;
        }
        bs = bs->file ? bs->file->bs : NULL;
    }
    return NULL;
}

/* Writes the chosen sectors of @w straight to the file (power is failing). */
static int blkcrash_persist_sectors(BlockDriverState *bs, BlkcrashWrite *w,
                                    GRand *rand)
{
    static const uint8_t zeroes[BDRV_SECTOR_SIZE];
    int64_t pos = w->offset;

    while (pos < w->offset + w->bytes) {
        int64_t end = MIN(QEMU_ALIGN_DOWN(pos, BDRV_SECTOR_SIZE) +
                          BDRV_SECTOR_SIZE, w->offset + w->bytes);
        const void *src = w->data ? w->data + (pos - w->offset) : zeroes;

        if (g_rand_boolean(rand)) {
            int ret = bdrv_pwrite(bs->file, pos, end - pos, src, 0);

            if (ret < 0) {
                return ret;
            }
        }
        pos = end;
    }
    return 0;
}

/*
 * The power goes: what of the cache reaches the file is chosen now, the
 * rest is lost, and the node is dead.  Runs in or out of coroutine
 * context, with other requests possibly in flight (they see s->dead).
 */
static int blkcrash_cut(BlockDriverState *bs, BlkcrashCut mode,
                        uint32_t seed)
{
    BDRVBlkcrashState *s = bs->opaque;
    GRand *rand = g_rand_new_with_seed(seed);
    int count = 0;
    int ret = 0;

    s->dead = true;
    for (GList *l = s->journal.head; l && ret == 0; l = l->next) {
        BlkcrashWrite *w = l->data;

        count++;
        if (mode == BLKCRASH_CUT_RANDOM_SECTORS) {
            ret = blkcrash_persist_sectors(bs, w, rand);
        } else if (mode == BLKCRASH_CUT_RANDOM_WRITES &&
                   g_rand_boolean(rand)) {
            if (w->data) {
                ret = bdrv_pwrite(bs->file, w->offset, w->bytes, w->data, 0);
            } else {
                ret = bdrv_pwrite_zeroes(bs->file, w->offset, w->bytes, 0);
            }
        }
    }
    g_rand_free(rand);
    blkcrash_journal_clear(s);
    return ret < 0 ? ret : count;
}

int blkcrash_power_cut(BlockDriverState *bs, BlkcrashCut mode,
                       uint32_t seed)
{
    BDRVBlkcrashState *s = bs->opaque;

    if (bs->drv != &bdrv_blkcrash || s->dead) {
        return -EINVAL;
    }
    bdrv_drain(bs);
    return blkcrash_cut(bs, mode, seed);
}

int blkcrash_arm(BlockDriverState *bs, uint64_t request, BlkcrashCut mode,
                 uint32_t seed)
{
    BDRVBlkcrashState *s = bs->opaque;

    if (bs->drv != &bdrv_blkcrash || s->dead || request <= s->requests) {
        return -EINVAL;
    }
    s->cut_at = request;
    s->cut_mode = mode;
    s->cut_seed = seed;
    return 0;
}

uint64_t blkcrash_requests(BlockDriverState *bs)
{
    return ((BDRVBlkcrashState *)bs->opaque)->requests;
}

bool blkcrash_is_dead(BlockDriverState *bs)
{
    return ((BDRVBlkcrashState *)bs->opaque)->dead;
}

bool blkcrash_is_unflushed(BlockDriverState *bs, int64_t offset,
                           int64_t bytes)
{
    BDRVBlkcrashState *s = bs->opaque;

    for (GList *l = s->journal.head; l; l = l->next) {
        BlkcrashWrite *w = l->data;

        if (w->offset < offset + bytes && offset < w->offset + w->bytes) {
            return true;
        }
    }
    return false;
}

uint64_t blkcrash_unflushed_bytes(BlockDriverState *bs)
{
    return ((BDRVBlkcrashState *)bs->opaque)->journal_bytes;
}

static const BlockDriver bdrv_blkcrash = {
    .format_name                    = "blkcrash",
    .instance_size                  = sizeof(BDRVBlkcrashState),
    .is_filter                      = true,
    .runtime_opts                   = &qapi_opts_blkcrash_runtime,
    .bdrv_open                      = blkcrash_open,
    .bdrv_close                     = blkcrash_close,
    .bdrv_reopen_prepare            = blkcrash_reopen_prepare,
    .bdrv_co_preadv                 = blkcrash_co_preadv,
    .bdrv_co_pwritev                = blkcrash_co_pwritev,
    .bdrv_co_pwrite_zeroes          = blkcrash_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = blkcrash_co_pdiscard,
    .bdrv_co_flush_to_os            = blkcrash_co_flush_to_os,
    .bdrv_co_truncate               = blkcrash_co_truncate,
    .bdrv_co_block_status           = blkcrash_co_block_status,
    .bdrv_getlength                 = blkcrash_getlength,
};

block_init(bdrv_register, bdrv_blkcrash)
