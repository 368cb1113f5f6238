/*
 * Synchronous forms of the request path, for callers outside coroutine
 * context (tools, tests, open and close of drivers), and the one helper
 * that runs a coroutine function to completion from anywhere.
 *
 * Each wrapper runs the coroutine form of its request through
 * bdrv_run_co(): directly when already in a coroutine, else in a new
 * coroutine while the node's AioContext is polled.  The requests do their
 * own in-flight accounting (io.c's invariant 1), so the wrappers add none.
 *
 * All functions run in the node's AioContext thread, or in a thread that
 * holds that context (aio_context_acquire()).
 */

#include "block/block_int.h"

typedef struct BdrvRunCo {
    BlockDriverState *bs;
    BdrvCoFn *fn;
    void *opaque;
    int ret;
    bool done;
} BdrvRunCo;

static void coroutine_fn bdrv_run_co_entry(void *opaque)
{
    BdrvRunCo *r = opaque;

    r->ret = r->fn(r->bs, r->opaque);
    r->done = true;
}

int bdrv_run_co(BlockDriverState *bs, BdrvCoFn *fn, void *opaque)
{
    BdrvRunCo r = { .bs = bs, .fn = fn, .opaque = opaque };

    if (qemu_in_coroutine()) {
        return fn(bs, opaque);
    }
    /*
     * In the node's context: a caller that holds an iothread's context
     * (a QMP command) must not make it a coroutine of its own loop, which
     * its wake-ups would then go to.
     */
    aio_co_enter(bdrv_get_aio_context(bs),
                 qemu_coroutine_create(bdrv_run_co_entry, &r));
    AIO_WAIT_WHILE(bdrv_get_aio_context(bs), !r.done);
    return r.ret;
}

typedef enum BdrvSyncOp {
    BDRV_SYNC_READ,
    BDRV_SYNC_WRITE,
    BDRV_SYNC_FLUSH,
    BDRV_SYNC_TRUNCATE,
    BDRV_SYNC_BLOCK_STATUS,
    BDRV_SYNC_BLOCK_STATUS_ABOVE,
    BDRV_SYNC_IS_ALLOCATED,
    BDRV_SYNC_SAVE_VMSTATE,
    BDRV_SYNC_LOAD_VMSTATE,
} BdrvSyncOp;

typedef struct BdrvSyncCo {
    BdrvSyncOp op;
    BdrvChild *child;
    BlockDriverState *bs;
    BlockDriverState *base;
    int64_t offset;
    int64_t bytes;
    QEMUIOVector *qiov;
    BdrvRequestFlags flags;
    bool exact;
    PreallocMode prealloc;
    Error **errp;
    int64_t *pnum;
    int64_t *map;
    BlockDriverState **file;
    int *depth;
} BdrvSyncCo;

static int coroutine_fn bdrv_sync_co_entry(BlockDriverState *bs,
                                           void *opaque)
{
    BdrvSyncCo *s = opaque;

    switch (s->op) {
    case BDRV_SYNC_READ:
        return bdrv_co_preadv(s->child, s->offset, s->bytes, s->qiov,
                              s->flags);
    case BDRV_SYNC_WRITE:
        return bdrv_co_pwritev(s->child, s->offset, s->bytes, s->qiov,
                               s->flags);
    case BDRV_SYNC_FLUSH:
        return bdrv_co_flush(s->bs);
    case BDRV_SYNC_TRUNCATE:
        return bdrv_co_truncate(s->child, s->offset, s->exact, s->prealloc,
                                s->flags, s->errp);
    case BDRV_SYNC_BLOCK_STATUS:
        return bdrv_co_block_status(s->bs, true, s->offset, s->bytes,
                                    s->pnum, s->map, s->file);
    case BDRV_SYNC_BLOCK_STATUS_ABOVE:
        return bdrv_co_block_status_above(s->bs, s->base, true, s->offset,
                                          s->bytes, s->pnum, s->map,
                                          s->file, s->depth);
    case BDRV_SYNC_IS_ALLOCATED:
        return bdrv_co_is_allocated(s->bs, s->offset, s->bytes, s->pnum);
    case BDRV_SYNC_SAVE_VMSTATE:
        return bdrv_co_writev_vmstate(s->bs, s->qiov, s->offset);
    case BDRV_SYNC_LOAD_VMSTATE:
        return bdrv_co_readv_vmstate(s->bs, s->qiov, s->offset);
    }
    g_assert_not_reached();
}

static BlockDriverState *bdrv_child_bs(BdrvChild *child)
{
    return child ? child->bs : NULL;
}

/*
 * bdrv_pread() and bdrv_pwrite(): @op (BDRV_SYNC_READ or BDRV_SYNC_WRITE)
 * of one flat buffer, which both wrap in a vector the same way.
 */
static int bdrv_sync_buf(BdrvChild *child, BdrvSyncOp op, int64_t offset,
                         int64_t bytes, void *buf, BdrvRequestFlags flags)
{
    QEMUIOVector qiov;
    BdrvSyncCo s = {
        .op = op, .child = child, .offset = offset,
        .bytes = bytes, .qiov = &qiov, .flags = flags,
    };

    if (bytes < 0) {
        return -EIO;
    }
    qemu_iovec_init_buf(&qiov, buf, bytes);
    return bdrv_run_co(bdrv_child_bs(child), bdrv_sync_co_entry, &s);
}

int bdrv_pread(BdrvChild *child, int64_t offset, int64_t bytes, void *buf,
               BdrvRequestFlags flags)
{
    return bdrv_sync_buf(child, BDRV_SYNC_READ, offset, bytes, buf, flags);
}

int bdrv_pwrite(BdrvChild *child, int64_t offset, int64_t bytes,
                const void *buf, BdrvRequestFlags flags)
{
    return bdrv_sync_buf(child, BDRV_SYNC_WRITE, offset, bytes, (void *)buf,
                         flags);
}

int bdrv_pwrite_sync(BdrvChild *child, int64_t offset, int64_t bytes,
                     const void *buf, BdrvRequestFlags flags)
{
    int ret = bdrv_pwrite(child, offset, bytes, buf, flags);

    if (ret < 0) {
        return ret;
    }
    return bdrv_flush(bdrv_child_bs(child));
}

int bdrv_pwrite_zeroes(BdrvChild *child, int64_t offset, int64_t bytes,
                       BdrvRequestFlags flags)
{
    BdrvSyncCo s = {
        .op = BDRV_SYNC_WRITE, .child = child, .offset = offset,
        .bytes = bytes, .flags = flags | BDRV_REQ_ZERO_WRITE,
    };

    if (child && child->bs && !(child->bs->open_flags & BDRV_O_UNMAP)) {
        s.flags &= ~BDRV_REQ_MAY_UNMAP;
    }
    return bdrv_run_co(bdrv_child_bs(child), bdrv_sync_co_entry, &s);
}

int bdrv_flush(BlockDriverState *bs)
{
    BdrvSyncCo s = { .op = BDRV_SYNC_FLUSH, .bs = bs };

    return bdrv_run_co(bs, bdrv_sync_co_entry, &s);
}

int bdrv_truncate(BdrvChild *child, int64_t offset, bool exact,
                  PreallocMode prealloc, BdrvRequestFlags flags,
                  Error **errp)
{
    BdrvSyncCo s = {
        .op = BDRV_SYNC_TRUNCATE, .child = child, .offset = offset,
        .exact = exact, .prealloc = prealloc, .flags = flags, .errp = errp,
    };

    return bdrv_run_co(bdrv_child_bs(child), bdrv_sync_co_entry, &s);
}

int bdrv_block_status(BlockDriverState *bs, int64_t offset, int64_t bytes,
                      int64_t *pnum, int64_t *map, BlockDriverState **file)
{
    int64_t dummy;
    BdrvSyncCo s = {
        .op = BDRV_SYNC_BLOCK_STATUS, .bs = bs, .offset = offset,
        .bytes = bytes, .pnum = pnum ? pnum : &dummy, .map = map,
        .file = file,
    };

    return bdrv_run_co(bs, bdrv_sync_co_entry, &s);
}

int bdrv_block_status_above(BlockDriverState *bs, BlockDriverState *base,
                            int64_t offset, int64_t bytes, int64_t *pnum,
                            int64_t *map, BlockDriverState **file,
                            int *depth)
{
    int64_t dummy;
    BdrvSyncCo s = {
        .op = BDRV_SYNC_BLOCK_STATUS_ABOVE, .bs = bs, .base = base,
        .offset = offset, .bytes = bytes, .pnum = pnum ? pnum : &dummy,
        .map = map, .file = file, .depth = depth,
    };

    return bdrv_run_co(bs, bdrv_sync_co_entry, &s);
}

/* The VM state area: BDRV_SYNC_SAVE_VMSTATE or BDRV_SYNC_LOAD_VMSTATE. */
static int bdrv_sync_vmstate(BlockDriverState *bs, BdrvSyncOp op, void *buf,
                             int64_t pos, int64_t size)
{
    QEMUIOVector qiov;
    BdrvSyncCo s = {
        .op = op, .bs = bs, .offset = pos, .qiov = &qiov,
    };

    if (size < 0) {
        return -EINVAL;
    }
    qemu_iovec_init_buf(&qiov, buf, size);
    return bdrv_run_co(bs, bdrv_sync_co_entry, &s);
}

int bdrv_save_vmstate(BlockDriverState *bs, const uint8_t *buf, int64_t pos,
                      int64_t size)
{
    return bdrv_sync_vmstate(bs, BDRV_SYNC_SAVE_VMSTATE, (void *)buf, pos,
                             size);
}

int bdrv_load_vmstate(BlockDriverState *bs, uint8_t *buf, int64_t pos,
                      int64_t size)
{
    return bdrv_sync_vmstate(bs, BDRV_SYNC_LOAD_VMSTATE, buf, pos, size);
}

int bdrv_is_allocated(BlockDriverState *bs, int64_t offset, int64_t bytes,
                      int64_t *pnum)
{
    BdrvSyncCo s = {
        .op = BDRV_SYNC_IS_ALLOCATED, .bs = bs, .offset = offset,
        .bytes = bytes, .pnum = pnum,
    };

    return bdrv_run_co(bs, bdrv_sync_co_entry, &s);
}

