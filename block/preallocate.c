/*
 * preallocate: a filter between a format and its file that, when a write
 * goes past the end of the file, allocates prealloc-size bytes more at
 * once (rounded up to prealloc-align) with a zero write that only a fast
 * way may do (fallocate), and gives back what is left unused when the
 * node stops writing (QEMU's "preallocate" driver).  On file systems
 * where each extension is costly (network and cluster file systems) a
 * growing image then extends its file once in a while instead of at
 * every new cluster.
 *
 * The node reports as its length the end of the data written through it
 * (data_end); the file is longer by what is preallocated (file_end).
 *
 * Invariants:
 *  1. data_end and file_end are known (>= 0) only while the edge to the
 *     file holds WRITE and RESIZE (preallocate_may_grow): nobody else may
 *     then resize the file or write to it (preallocate_child_perm), so
 *     the two stay true.  Otherwise both are -1 and every call passes
 *     through.
 *  2. data_end <= file_end, and the file reads as zeroes past data_end:
 *     the preallocating zero write covers [file_end, new file_end) before
 *     data_end moves into it.
 *  3. Preallocation is given back (the file truncated to data_end)
 *     before the edge loses WRITE or RESIZE (preallocate_check_perm), at
 *     close, and before a truncate; the truncate then starts from the
 *     file as the parents see it.
 *  4. Extending requests hold s->lock from the decision to extend until
 *     data_end is moved, so that two of them never zero the same range
 *     or move data_end backwards.
 */

#include "block/block_int.h"
#include "qapi/qapi-opts.h"

typedef struct BDRVPreallocateState {
    int64_t prealloc_size;
    int64_t prealloc_align;     /* 0: none */
    int64_t data_end;           /* invariants 1, 2 */
    int64_t file_end;
    CoMutex lock;               /* invariant 4 */
} BDRVPreallocateState;

typedef struct PreallocateOpts {
    int64_t size;
    int64_t align;
} PreallocateOpts;

/* Invariant 1: whether the edge to the file lets this node grow it. */
static bool preallocate_may_grow(BlockDriverState *bs)
{
    uint64_t need = BLK_PERM_WRITE | BLK_PERM_RESIZE;

    return bs->file && (bs->file->perm & need) == need;
}

static bool preallocate_parse(BlockDriverState *bs, QDict *options,
                              PreallocateOpts *o, Error **errp)
{
    QemuOpts *opts = qemu_opts_absorb_qdict(&qapi_opts_preallocate_runtime,
                                            options, errp);
    /* whole sectors at least, as QEMU asks, even of a byte-granular file */
    uint32_t align = MAX(BDRV_SECTOR_SIZE,
                         bs->file->bs->bl.request_alignment);

    if (!opts) {
        return false;
    }
    o->size = qemu_opt_get_size(opts, "prealloc-size", 128 * MiB);
    o->align = qemu_opt_get_size(opts, "prealloc-align", MiB);
    qemu_opts_del(opts);
    /* past INT64_MAX the file offsets would overflow */
    if (o->size < 0 || o->align < 0) {
        error_setg(errp, "prealloc-size and prealloc-align must be below "
                   "2^63");
        return false;
    }
    if (o->align % align) {
        error_setg(errp, "prealloc-align parameter of preallocate filter is "
                   "not aligned to %" PRIu32, align);
        return false;
    }
    return true;
}

static int preallocate_open(BlockDriverState *bs, QDict *options, int flags,
                            Error **errp)
{
    BDRVPreallocateState *s = bs->opaque;
    PreallocateOpts o;

    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    if (!preallocate_parse(bs, options, &o, errp)) {
        bdrv_unref_child(bs, bs->file);
        bs->file = NULL;
        return -EINVAL;
    }
    s->prealloc_size = o.size;
    s->prealloc_align = o.align;
    s->data_end = s->file_end = -1;
    qemu_co_mutex_init(&s->lock);
    bdrv_inherit_file_flags(bs);
    return 0;
}

/*
 * Invariant 3: truncates the file to data_end and forgets both ends.
 * Runs outside a coroutine (close, permission changes); a failure leaves
 * zeroes past the data, which is all preallocation ever is.
 */
static void preallocate_give_back(BlockDriverState *bs)
{
    BDRVPreallocateState *s = bs->opaque;
    Error *local_err = NULL;

    if (s->data_end >= 0 && s->file_end > s->data_end &&
        preallocate_may_grow(bs) &&
        bdrv_truncate(bs->file, s->data_end, true, PREALLOC_MODE_OFF, 0,
                      &local_err) < 0) {
        warn_report_err(local_err);
    }
    s->data_end = s->file_end = -1;
}

static void preallocate_close(BlockDriverState *bs)
{
    preallocate_give_back(bs);
}

/*
 * Invariant 3 for a reopen to read-only: the new flags apply to the file
 * too before the permissions change, so the preallocation goes now,
 * while the file is still writable.  Should the reopen fail after all,
 * only zeroes past the data are gone.
 */
static int preallocate_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    PreallocateOpts *o = g_new(PreallocateOpts, 1);

    if (!preallocate_parse(state->bs, state->options, o, errp)) {
        g_free(o);
        return -EINVAL;
    }
    if (!(state->flags & BDRV_O_RDWR)) {
        preallocate_give_back(state->bs);
    }
    state->opaque = o;
    return 0;
}

static void preallocate_reopen_commit(BDRVReopenState *state)
{
    BDRVPreallocateState *s = state->bs->opaque;
    g_autofree PreallocateOpts *o = state->opaque;

    state->opaque = NULL;
    s->prealloc_size = o->size;
    s->prealloc_align = o->align;
}

static void preallocate_reopen_abort(BDRVReopenState *state)
{
    g_free(state->opaque);
    state->opaque = NULL;
}

/*
 * Invariant 1: while this node may grow the file, nobody else may write
 * to it or resize it; the rest passes through as for any filter.
 */
static void preallocate_child_perm(BlockDriverState *bs, BdrvChild *c,
                                   uint64_t perm, uint64_t shared,
                                   uint64_t *nperm, uint64_t *nshared)
{
    *nperm = perm;
    *nshared = shared;
    if ((perm & (BLK_PERM_WRITE | BLK_PERM_RESIZE)) ==
        (BLK_PERM_WRITE | BLK_PERM_RESIZE)) {
        *nshared &= ~(BLK_PERM_WRITE | BLK_PERM_RESIZE);
    }
}

/* Invariant 3: the edge is about to lose WRITE or RESIZE. */
static int preallocate_check_perm(BlockDriverState *bs, uint64_t perm,
                                  uint64_t shared, Error **errp)
{
    uint64_t need = BLK_PERM_WRITE | BLK_PERM_RESIZE;

    if ((perm & need) != need) {
        preallocate_give_back(bs);
    }
    return 0;
}

static int64_t preallocate_getlength(BlockDriverState *bs)
{
    BDRVPreallocateState *s = bs->opaque;

    return s->data_end >= 0 ? s->data_end : bdrv_getlength(bs->file->bs);
}

/*
 * Before a write that ends at @end: where it goes past data_end, moves
 * data_end there, preallocating first if it also goes past file_end
 * (invariants 2 and 4).  A file system that cannot allocate fast refuses
 * the zero write (BDRV_REQ_NO_FALLBACK); the write then extends the file
 * by itself.
 */
static void coroutine_fn preallocate_extend(BlockDriverState *bs,
                                            int64_t end)
{
    BDRVPreallocateState *s = bs->opaque;

    if (!preallocate_may_grow(bs)) {
        return;
    }
    if (s->data_end < 0) {
        int64_t len = bdrv_getlength(bs->file->bs);

        if (len < 0) {
            return;
        }
        s->data_end = s->file_end = len;
    }
    if (end <= s->data_end) {
        return;
    }
    qemu_co_mutex_lock(&s->lock);
    if (end > s->file_end) {
        int64_t want = end + s->prealloc_size;

        if (s->prealloc_align > 0) {
            want = QEMU_ALIGN_UP(want, s->prealloc_align);
        }
        if (bdrv_co_pwrite_zeroes(bs->file, s->file_end, want - s->file_end,
                                  BDRV_REQ_NO_FALLBACK) == 0) {
            s->file_end = want;
        } else {
            s->file_end = end;
        }
    }
    s->data_end = MAX(s->data_end, end);
    qemu_co_mutex_unlock(&s->lock);
}

static int coroutine_fn preallocate_co_pwritev(BlockDriverState *bs,
                                               int64_t offset, int64_t bytes,
                                               QEMUIOVector *qiov,
                                               BdrvRequestFlags flags)
{
    preallocate_extend(bs, offset + bytes);
    return bdrv_filter_co_pwritev(bs, offset, bytes, qiov, flags);
}

static int coroutine_fn preallocate_co_pwrite_zeroes(BlockDriverState *bs,
                                                     int64_t offset,
                                                     int64_t bytes,
                                                     BdrvRequestFlags flags)
{
    preallocate_extend(bs, offset + bytes);
    return bdrv_filter_co_pwrite_zeroes(bs, offset, bytes, flags);
}

static int coroutine_fn preallocate_co_pwritev_compressed(
    BlockDriverState *bs, int64_t offset, int64_t bytes, QEMUIOVector *qiov)
{
    preallocate_extend(bs, offset + bytes);
    return bdrv_filter_co_pwritev_compressed(bs, offset, bytes, qiov);
}

/*
 * Invariant 3: the preallocation goes first, so that the file's own
 * truncate sees the length the parents see, and the ends are read again
 * at the next extending write.
 */
static int coroutine_fn preallocate_co_truncate(BlockDriverState *bs,
                                                int64_t offset, bool exact,
                                                PreallocMode prealloc,
                                                BdrvRequestFlags flags,
                                                Error **errp)
{
    BDRVPreallocateState *s = bs->opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    if (s->data_end >= 0 && s->file_end > s->data_end) {
        ret = bdrv_co_truncate(bs->file, s->data_end, true,
                               PREALLOC_MODE_OFF, 0, errp);
        if (ret < 0) {
            qemu_co_mutex_unlock(&s->lock);
            return ret;
        }
    }
    s->data_end = s->file_end = -1;
    ret = bdrv_co_truncate(bs->file, offset, exact, prealloc, flags, errp);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

static const BlockDriver bdrv_preallocate = {
    .format_name                    = "preallocate",
    .instance_size                  = sizeof(BDRVPreallocateState),
    /* opened as QEMU opens filters: a filename names the file child */
    .is_format                      = true,
    .is_filter                      = true,
    .runtime_opts                   = &qapi_opts_preallocate_runtime,
    .bdrv_open                      = preallocate_open,
    .bdrv_close                     = preallocate_close,
    .bdrv_reopen_prepare            = preallocate_reopen_prepare,
    .bdrv_reopen_commit             = preallocate_reopen_commit,
    .bdrv_reopen_abort              = preallocate_reopen_abort,
    .bdrv_child_perm                = preallocate_child_perm,
    .bdrv_check_perm                = preallocate_check_perm,
    .bdrv_getlength                 = preallocate_getlength,
    .bdrv_co_preadv                 = bdrv_filter_co_preadv,
    .bdrv_co_pwritev                = preallocate_co_pwritev,
    .bdrv_co_pwrite_zeroes          = preallocate_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = bdrv_filter_co_pdiscard,
    .bdrv_co_pwritev_compressed     = preallocate_co_pwritev_compressed,
    .bdrv_co_truncate               = preallocate_co_truncate,
};

block_init(bdrv_register, bdrv_preallocate)
