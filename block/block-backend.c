/*
 * BlockBackend: a user's handle on a node graph (see block-backend.h).
 *
 * Invariants:
 *  1. blk->in_flight counts the requests of this backend from their entry
 *     (or submission, for the aio forms) until their completion has been
 *     reported (the aio callback has returned).  A request waiting at the
 *     drain barrier is not counted, so drain never waits for it.
 *  2. Writethrough: a write, zero write or compressed write that succeeds
 *     is followed by a flush of the root node before it completes, when
 *     blk->enable_write_cache was false when the write entered the graph,
 *     when it returned from it, or (aio forms) when its callback is about
 *     to run.  The flag is read there and nowhere else: a write the guest
 *     issued to a writethrough disk stays durable at completion even if
 *     the guest enabled the cache meanwhile, and one whose completion is
 *     reported after a switch to writethrough is flushed first, also when
 *     the switch came between the graph's completion and the callback.
 *  3. An aio callback runs from blk->done_bh, i.e. from the event loop
 *     and outside coroutine context, never before blk_aio_*() returned,
 *     in completion order (a write that needs a late writethrough flush
 *     completes when that flush does).
 *  4. Each request is accounted exactly once into blk->stats (done, failed
 *     or invalid); a writethrough flush is accounted as a flush of its own.
 *  5. Group commit: a successful write gets the next number of
 *     blk->writes_done; blk->flushed_writes is the highest writes_done
 *     value read at the start of a flush of this backend that succeeded.
 *     A write whose number is at most flushed_writes is durable, so its
 *     writethrough flush is skipped; otherwise it waits for the
 *     writethrough flush in progress, or starts one.  One flush thus
 *     covers every write that completed before it started, and a deep
 *     queue of writethrough writes costs about one flush per round
 *     instead of one per write.
 *
 * Everything runs in the thread of blk->ctx.
 */

#include "block/block_int.h"
#include "block/accounting.h"
#include "qblock/block-backend.h"
#include "io-internal.h"

/*
 * What a write leaves for its completion: its number among the backend's
 * completed writes (0: it failed, or was no write), and whether a
 * writethrough flush already covered it.
 */
typedef struct BlkWriteDone {
    uint64_t seq;
    bool flushed;
} BlkWriteDone;

typedef enum BlkAioOp {
    BLK_AIO_READ,
    BLK_AIO_WRITE,
    BLK_AIO_WRITE_ZEROES,
    BLK_AIO_DISCARD,
    BLK_AIO_FLUSH,
    BLK_AIO_WRITE_COMPRESSED,
} BlkAioOp;

struct BlockAIOCB {
    BlockBackend *blk;
    BlockCompletionFunc *cb;
    void *opaque;
    BlkAioOp op;
    int64_t offset;
    int64_t bytes;
    QEMUIOVector *qiov;
    BdrvRequestFlags flags;
    int ret;
    BlkWriteDone wd;        /* what a write left for its completion */
    bool done;              /* the request has finished */
    bool returned;          /* blk_aio_*() has returned to its caller */
    BlockAIOCB *next;       /* in blk's completion list or free list */
};

struct BlockBackend {
    char *name;
    int refcnt;
    AioContext *ctx;
    BdrvChild *root;
    uint64_t perm;
    uint64_t shared_perm;
    bool enable_write_cache;
    bool allow_write_beyond_eof;
    bool disable_request_queuing;
    /* another user's node move may take it along (blk_set_aio_context) */
    bool allow_aio_context_change;
    const BlockDevOps *dev_ops;
    void *dev_opaque;
    BlockAcctStats stats;
    unsigned int in_flight;
    /* group commit (invariant 5) */
    uint64_t writes_done;
    uint64_t flushed_writes;
    bool wt_flush_active;
    CoQueue wt_flush_queue;
    /* finished aio requests whose callbacks are due, oldest first */
    BlockAIOCB *done_head;
    BlockAIOCB **done_tail;
    QEMUBH *done_bh;
    /* request blocks kept for reuse, so that aio requests do not allocate */
    BlockAIOCB *free_acbs;
    GList link;             /* entry of all_blks */
    BdrvDrainAllEntry drain_all_entry;
};

static GQueue all_blks = G_QUEUE_INIT;

static void blk_aio_done_bh(void *opaque);

/* ---- the BlockBackend as a parent in the graph ---- */

/* Invariant 1: what drain waits for above the root node. */
static bool blk_root_drained_poll(BdrvChild *c)
{
    BlockBackend *blk = c->opaque;

    return blk->in_flight > 0;
}

static char *blk_root_get_parent_desc(BdrvChild *c)
{
    BlockBackend *blk = c->opaque;

    if (blk->name[0]) {
        return g_strdup_printf("block device '%s'", blk->name);
    }
    return g_strdup("an unnamed block device");
}

static void blk_root_resize(BdrvChild *c)
{
    BlockBackend *blk = c->opaque;

    if (blk->dev_ops && blk->dev_ops->resize_cb) {
        blk->dev_ops->resize_cb(blk->dev_opaque);
    }
}

/* A user's BlockBackend stays where its user runs, unless it allows. */
static bool blk_root_can_set_aio_ctx(BdrvChild *c, AioContext *ctx,
                                     Error **errp)
{
    BlockBackend *blk = c->opaque;

    if (!blk->allow_aio_context_change) {
        error_setg(errp, "Cannot change iothread of active block backend");
        return false;
    }
    return true;
}

/* Drained: no request is in flight, a completion may still be due. */
static void blk_root_set_aio_ctx(BdrvChild *c, AioContext *ctx)
{
    BlockBackend *blk = c->opaque;

    qemu_bh_delete(blk->done_bh);
    blk->ctx = ctx;
    blk->done_bh = aio_bh_new(ctx, blk_aio_done_bh, blk);
    if (blk->done_head) {
        qemu_bh_schedule(blk->done_bh);
    }
}

static const BdrvChildClass blk_root_class = {
    .drained_poll = blk_root_drained_poll,
    .get_parent_desc = blk_root_get_parent_desc,
    .resize = blk_root_resize,
    .can_set_aio_ctx = blk_root_can_set_aio_ctx,
    .set_aio_ctx = blk_root_set_aio_ctx,
};

/* Takes over the caller's reference to @bs, as bdrv_root_attach_child. */
static BdrvChild *blk_attach_root(BlockBackend *blk, BlockDriverState *bs,
                                  Error **errp)
{
    BdrvChild *root = bdrv_root_attach_child(bs, "root", &blk_root_class,
                                             blk, blk->perm,
                                             blk->shared_perm, errp);

    if (root) {
        root->parent_blk = blk;
    }
    return root;
}

static void blk_drain_all_cb(void *opaque)
{
    blk_drain(opaque);
}

BlockBackend *blk_new(AioContext *ctx, uint64_t perm, uint64_t shared_perm)
{
    BlockBackend *blk = g_new0(BlockBackend, 1);

    blk->name = g_strdup("");
    blk->refcnt = 1;
    blk->ctx = ctx ? ctx : qemu_get_aio_context();
    blk->perm = perm;
    blk->shared_perm = shared_perm;
    blk->enable_write_cache = true;
    qemu_co_queue_init(&blk->wt_flush_queue);
    blk->done_tail = &blk->done_head;
    blk->done_bh = aio_bh_new(blk->ctx, blk_aio_done_bh, blk);
    blk->link.data = blk;
    g_queue_push_tail_link(&all_blks, &blk->link);
    blk->drain_all_entry.drain = blk_drain_all_cb;
    blk->drain_all_entry.opaque = blk;
    bdrv_drain_all_register(&blk->drain_all_entry);
    return blk;
}

BlockBackend *blk_new_open(const char *filename, const char *reference,
                           QDict *options, int flags, Error **errp)
{
    uint64_t perm = BLK_PERM_CONSISTENT_READ;
    uint64_t shared = BLK_PERM_ALL;
    BlockDriverState *bs;
    BlockBackend *blk;

    /* Resizing is asked for separately, as in QEMU: a writer that does not
     * resize (qemu-io, a convert target) can share an image with one that
     * forbids resizing (qemu-nbd). */
    if (flags & BDRV_O_RDWR) {
        perm |= BLK_PERM_WRITE;
    }
    if (flags & BDRV_O_RESIZE) {
        perm |= BLK_PERM_RESIZE;
    }
    if (flags & BDRV_O_NO_SHARE) {
        shared = BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE_UNCHANGED;
    }
    bs = bdrv_open(filename, reference, options, flags, errp);
    if (!bs) {
        return NULL;
    }
    blk = blk_new(bdrv_get_aio_context(bs), perm, shared);
    blk->root = blk_attach_root(blk, bs, errp);
    if (!blk->root) {
        blk_unref(blk);
        return NULL;
    }
    return blk;
}

int blk_insert_bs(BlockBackend *blk, BlockDriverState *bs, Error **errp)
{
    assert(!blk->root);
    bdrv_ref(bs);
    blk->root = blk_attach_root(blk, bs, errp);
    return blk->root ? 0 : -EPERM;
}

BlockBackend *blk_new_with_bs(BlockDriverState *bs, uint64_t perm,
                              uint64_t shared, Error **errp)
{
    BlockBackend *blk = blk_new(bdrv_get_aio_context(bs), perm, shared);

    if (blk_insert_bs(blk, bs, errp) < 0) {
        blk_unref(blk);
        return NULL;
    }
    return blk;
}

void blk_remove_bs(BlockBackend *blk)
{
    BdrvChild *root = blk->root;

    if (!root) {
        return;
    }
    blk_drain(blk);
    blk->root = NULL;
    bdrv_root_unref_child(root);
}

void blk_ref(BlockBackend *blk)
{
    assert(blk->refcnt > 0);
    blk->refcnt++;
}

static void blk_delete(BlockBackend *blk)
{
    BlockAIOCB *acb;

    blk_remove_bs(blk);
    AIO_WAIT_WHILE(blk->ctx, blk->in_flight > 0);
    assert(!blk->done_head);
    qemu_bh_delete(blk->done_bh);
    while ((acb = blk->free_acbs)) {
        blk->free_acbs = acb->next;
        g_free(acb);
    }
    g_queue_unlink(&all_blks, &blk->link);
    bdrv_drain_all_unregister(&blk->drain_all_entry);
    g_free(blk->name);
    g_free(blk);
}

void blk_unref(BlockBackend *blk)
{
    if (!blk) {
        return;
    }
    assert(blk->refcnt > 0);
    if (blk->refcnt > 1) {
        blk->refcnt--;
        return;
    }
    /* draining may run callbacks that take and drop references */
    blk_drain(blk);
    assert(blk->refcnt == 1);
    blk->refcnt = 0;
    blk_delete(blk);
}

BlockDriverState *blk_bs(BlockBackend *blk)
{
    return blk->root ? blk->root->bs : NULL;
}

AioContext *blk_get_aio_context(BlockBackend *blk)
{
    return blk->ctx;
}

const char *blk_name(const BlockBackend *blk)
{
    return blk->name;
}

void blk_set_name(BlockBackend *blk, const char *name)
{
    g_free(blk->name);
    blk->name = g_strdup(name ? name : "");
}

int blk_set_aio_context(BlockBackend *blk, AioContext *ctx, Error **errp)
{
    BlockDriverState *bs = blk_bs(blk);
    int ret;

    if (!bs) {
        blk_root_set_aio_ctx(&(BdrvChild) { .opaque = blk }, ctx);
        return 0;
    }
    ret = bdrv_try_change_aio_context(bs, ctx, blk->root, errp);
    if (ret == 0 && blk->ctx != ctx) {
        blk_root_set_aio_ctx(blk->root, ctx);
    }
    return ret;
}

void blk_set_allow_aio_context_change(BlockBackend *blk, bool allow)
{
    blk->allow_aio_context_change = allow;
}

void blk_set_disable_request_queuing(BlockBackend *blk, bool disable)
{
    blk->disable_request_queuing = disable;
}

void blk_set_dev_ops(BlockBackend *blk, const BlockDevOps *ops,
                     void *opaque)
{
    blk->dev_ops = ops;
    blk->dev_opaque = opaque;
}

int blk_set_perm(BlockBackend *blk, uint64_t perm, uint64_t shared_perm,
                 Error **errp)
{
    if (blk->root) {
        int ret = bdrv_child_try_set_perm(blk->root, perm, shared_perm,
                                          errp);

        if (ret < 0) {
            return ret;
        }
    }
    blk->perm = perm;
    blk->shared_perm = shared_perm;
    return 0;
}

void blk_get_perm(BlockBackend *blk, uint64_t *perm, uint64_t *shared_perm)
{
    *perm = blk->perm;
    *shared_perm = blk->shared_perm;
}

void blk_set_allow_write_beyond_eof(BlockBackend *blk, bool allow)
{
    blk->allow_write_beyond_eof = allow;
}

bool blk_enable_write_cache(BlockBackend *blk)
{
    return blk->enable_write_cache;
}

void blk_set_enable_write_cache(BlockBackend *blk, bool wce)
{
    blk->enable_write_cache = wce;
}

BlockAcctStats *blk_get_stats(BlockBackend *blk)
{
    return &blk->stats;
}

unsigned int blk_in_flight(BlockBackend *blk)
{
    return blk->in_flight;
}

BlockBackend *blk_next(BlockBackend *blk)
{
    GList *l = blk ? blk->link.next : all_blks.head;

    return l ? l->data : NULL;
}

const char *bdrv_get_device_or_node_name(const BlockDriverState *bs)
{
    for (BlockBackend *blk = blk_next(NULL); blk; blk = blk_next(blk)) {
        if (blk_bs(blk) == bs && blk->name && *blk->name) {
            return blk->name;
        }
    }
    return bdrv_get_node_name(bs);
}

void *blk_try_blockalign(BlockBackend *blk, size_t size)
{
    BlockDriverState *bs = blk_bs(blk);

    if (!bs) {
        return qemu_try_memalign(qemu_real_host_page_size(), size);
    }
    return qemu_try_blockalign(bs, size);
}

void *blk_blockalign(BlockBackend *blk, size_t size)
{
    BlockDriverState *bs = blk_bs(blk);

    if (!bs) {
        return qemu_memalign(qemu_real_host_page_size(), size);
    }
    return qemu_blockalign(bs, size);
}

int64_t blk_getlength(BlockBackend *blk)
{
    BlockDriverState *bs = blk_bs(blk);

    if (!bs || !bs->drv) {
        return -ENOMEDIUM;
    }
    return bdrv_getlength(bs);
}

/* ---- drain ---- */

void blk_drain(BlockBackend *blk)
{
    BlockDriverState *bs = blk_bs(blk);

    if (bs) {
        bdrv_drained_begin(bs);
    }
    /* the backend's own requests, also those past the graph (invariant 1) */
    AIO_WAIT_WHILE(blk->ctx, blk->in_flight > 0);
    if (bs) {
        bdrv_drained_end(bs);
    }
}

void blk_drain_all(void)
{
    bdrv_drain_all();
}

/* Invariant 1: not counted while it waits, so drain can finish. */
static void coroutine_fn blk_wait_while_drained(BlockBackend *blk)
{
    BlockDriverState *barrier;

    if (blk->disable_request_queuing) {
        return;
    }
    while ((barrier = bdrv_drain_barrier(blk_bs(blk)))) {
        blk->in_flight--;
        qemu_co_queue_wait(&barrier->drain_queue, NULL);
        blk->in_flight++;
    }
}

/* ---- coroutine requests (invariant 1: in_flight held by the caller) ---- */

static bool blk_is_available(BlockBackend *blk)
{
    BlockDriverState *bs = blk_bs(blk);

    return bs && bs->drv;
}

/* The range checks QEMU's BlockBackend makes before any request. */
static int blk_check_byte_request(BlockBackend *blk, int64_t offset,
                                  int64_t bytes)
{
    int64_t len;

    if (bytes < 0) {
        return -EIO;
    }
    if (!blk_is_available(blk)) {
        return -ENOMEDIUM;
    }
    if (offset < 0) {
        return -EIO;
    }
    if (!blk->allow_write_beyond_eof) {
        len = bdrv_getlength(blk_bs(blk));
        if (len < 0) {
            return len;
        }
        if (offset > len || len - offset < bytes) {
            return -EIO;
        }
    }
    return 0;
}

static void blk_acct_end(BlockBackend *blk, BlockAcctCookie *cookie, int ret)
{
    if (ret < 0) {
        block_acct_failed(&blk->stats, cookie);
    } else {
        block_acct_done(&blk->stats, cookie);
    }
}

/*
 * A flush of the graph, accounted, recording what it covers (invariant
 * 5).  It does not wait at the drain barrier: a writethrough flush is the
 * end of a write already in flight, which a drain lets finish.
 */
static int coroutine_fn blk_co_flush_graph(BlockBackend *blk)
{
    BlockAcctCookie cookie;
    uint64_t start;
    int ret;

    if (!blk_is_available(blk)) {
        block_acct_invalid(&blk->stats, BLOCK_ACCT_FLUSH);
        return -ENOMEDIUM;
    }
    start = blk->writes_done;
    block_acct_start(&blk->stats, &cookie, 0, BLOCK_ACCT_FLUSH);
    ret = bdrv_co_flush(blk_bs(blk));
    blk_acct_end(blk, &cookie, ret);
    if (ret == 0) {
        blk->flushed_writes = MAX(blk->flushed_writes, start);
    }
    return ret;
}

static int coroutine_fn blk_co_do_flush(BlockBackend *blk)
{
    blk_wait_while_drained(blk);
    return blk_co_flush_graph(blk);
}

/* Invariant 5: makes write number @seq durable, sharing flushes. */
static int coroutine_fn blk_co_writethrough_flush(BlockBackend *blk,
                                                  uint64_t seq)
{
    int ret = 0;

    while (blk->flushed_writes < seq) {
        if (blk->wt_flush_active) {
            qemu_co_queue_wait(&blk->wt_flush_queue, NULL);
            continue;
        }
        blk->wt_flush_active = true;
        ret = blk_co_flush_graph(blk);
        blk->wt_flush_active = false;
        qemu_co_queue_restart_all(&blk->wt_flush_queue);
        if (ret < 0) {
            break;
        }
    }
    return ret;
}

/*
 * What every request does first: wait out a drain, check the range
 * (counted as an invalid request if it is out of bounds), then start the
 * accounting in @cookie.  0 or -errno.
 */
static int coroutine_fn blk_co_request_begin(BlockBackend *blk,
                                             int64_t offset, int64_t bytes,
                                             BlockAcctType type,
                                             BlockAcctCookie *cookie)
{
    int ret;

    blk_wait_while_drained(blk);
    ret = blk_check_byte_request(blk, offset, bytes);
    if (ret < 0) {
        block_acct_invalid(&blk->stats, type);
        return ret;
    }
    block_acct_start(&blk->stats, cookie, bytes, type);
    return 0;
}

static int coroutine_fn blk_co_do_preadv(BlockBackend *blk, int64_t offset,
                                         int64_t bytes, QEMUIOVector *qiov,
                                         BdrvRequestFlags flags)
{
    BlockAcctCookie cookie;
    int ret;

    ret = blk_co_request_begin(blk, offset, bytes, BLOCK_ACCT_READ, &cookie);
    if (ret < 0) {
        return ret;
    }
    ret = bdrv_co_preadv(blk->root, offset, bytes, qiov, flags);
    blk_acct_end(blk, &cookie, ret);
    return ret;
}

/*
 * Every kind of write: plain (@qiov), zeroes (BDRV_REQ_ZERO_WRITE) and
 * compressed (BDRV_REQ_WRITE_COMPRESSED).  Invariant 2.
 */
static int coroutine_fn blk_co_do_pwritev(BlockBackend *blk, int64_t offset,
                                          int64_t bytes, QEMUIOVector *qiov,
                                          BdrvRequestFlags flags,
                                          BlkWriteDone *wd)
{
    BlkWriteDone local = { 0 };
    BlockAcctCookie cookie;
    bool wce_at_start;
    int ret;

    ret = blk_co_request_begin(blk, offset, bytes, BLOCK_ACCT_WRITE, &cookie);
    if (ret < 0) {
        return ret;
    }
    wce_at_start = blk->enable_write_cache;
    if (flags & BDRV_REQ_ZERO_WRITE) {
        ret = bdrv_co_pwrite_zeroes(blk->root, offset, bytes,
                                    flags & ~BDRV_REQ_ZERO_WRITE);
    } else {
        ret = bdrv_co_pwritev(blk->root, offset, bytes, qiov, flags);
    }
    if (!wd) {
        wd = &local;
    }
    if (ret == 0) {
        block_acct_write_end(&blk->stats, offset + bytes);
        wd->seq = ++blk->writes_done;
        if (!wce_at_start || !blk->enable_write_cache) {
            ret = blk_co_writethrough_flush(blk, wd->seq);
            wd->flushed = true;
        }
    }
    blk_acct_end(blk, &cookie, ret);
    return ret;
}

static int coroutine_fn blk_co_do_pdiscard(BlockBackend *blk, int64_t offset,
                                           int64_t bytes)
{
    BlockAcctCookie cookie;
    int ret;

    ret = blk_co_request_begin(blk, offset, bytes, BLOCK_ACCT_UNMAP, &cookie);
    if (ret < 0) {
        return ret;
    }
    ret = bdrv_co_pdiscard(blk->root, offset, bytes);
    blk_acct_end(blk, &cookie, ret);
    return ret;
}

/*
 * Runs one request of the coroutine, aio or sync forms; in_flight held by
 * the caller.  Writes fill *wd (may be NULL).
 */
static int coroutine_fn blk_co_do_op(BlockBackend *blk, BlkAioOp op,
                                     int64_t offset, int64_t bytes,
                                     QEMUIOVector *qiov,
                                     BdrvRequestFlags flags, BlkWriteDone *wd)
{
    switch (op) {
    case BLK_AIO_READ:
        return blk_co_do_preadv(blk, offset, bytes, qiov, flags);
    case BLK_AIO_WRITE:
    case BLK_AIO_WRITE_ZEROES:
    case BLK_AIO_WRITE_COMPRESSED:
        return blk_co_do_pwritev(blk, offset, bytes, qiov, flags, wd);
    case BLK_AIO_DISCARD:
        return blk_co_do_pdiscard(blk, offset, bytes);
    case BLK_AIO_FLUSH:
        return blk_co_do_flush(blk);
    }
    g_assert_not_reached();
}

/* Invariant 1: counted while it runs, as the aio forms are. */
static int coroutine_fn blk_co_op(BlockBackend *blk, BlkAioOp op,
                                  int64_t offset, int64_t bytes,
                                  QEMUIOVector *qiov, BdrvRequestFlags flags)
{
    int ret;

    blk->in_flight++;
    ret = blk_co_do_op(blk, op, offset, bytes, qiov, flags, NULL);
    blk->in_flight--;
    return ret;
}

int coroutine_fn blk_co_preadv(BlockBackend *blk, int64_t offset,
                               int64_t bytes, QEMUIOVector *qiov,
                               BdrvRequestFlags flags)
{
    return blk_co_op(blk, BLK_AIO_READ, offset, bytes, qiov, flags);
}

int coroutine_fn blk_co_pwritev(BlockBackend *blk, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags)
{
    return blk_co_op(blk, BLK_AIO_WRITE, offset, bytes, qiov,
                     flags & ~BDRV_REQ_ZERO_WRITE);
}

int coroutine_fn blk_co_pwrite_zeroes(BlockBackend *blk, int64_t offset,
                                      int64_t bytes, BdrvRequestFlags flags)
{
    return blk_co_op(blk, BLK_AIO_WRITE_ZEROES, offset, bytes, NULL,
                     flags | BDRV_REQ_ZERO_WRITE);
}

int coroutine_fn blk_co_pwritev_compressed(BlockBackend *blk, int64_t offset,
                                           int64_t bytes, QEMUIOVector *qiov)
{
    return blk_co_op(blk, BLK_AIO_WRITE_COMPRESSED, offset, bytes, qiov,
                     BDRV_REQ_WRITE_COMPRESSED);
}

int coroutine_fn blk_co_pdiscard(BlockBackend *blk, int64_t offset,
                                 int64_t bytes)
{
    return blk_co_op(blk, BLK_AIO_DISCARD, offset, bytes, NULL, 0);
}

int coroutine_fn blk_co_flush(BlockBackend *blk)
{
    return blk_co_op(blk, BLK_AIO_FLUSH, 0, 0, NULL, 0);
}

int coroutine_fn blk_co_truncate(BlockBackend *blk, int64_t offset,
                                 bool exact, PreallocMode prealloc,
                                 BdrvRequestFlags flags, Error **errp)
{
    int ret;

    blk->in_flight++;
    blk_wait_while_drained(blk);
    if (!blk_is_available(blk)) {
        error_setg(errp, "No medium inserted");
        ret = -ENOMEDIUM;
    } else {
        ret = bdrv_co_truncate(blk->root, offset, exact, prealloc, flags,
                               errp);
    }
    blk->in_flight--;
    return ret;
}

/* ---- asynchronous requests ---- */

static BlockAIOCB *blk_acb_get(BlockBackend *blk)
{
    BlockAIOCB *acb = blk->free_acbs;

    if (acb) {
        blk->free_acbs = acb->next;
    } else {
        acb = g_new(BlockAIOCB, 1);
    }
    return acb;
}

/* Invariant 3: the callback is due; run it from the loop. */
static void blk_aio_queue_done(BlockAIOCB *acb)
{
    BlockBackend *blk = acb->blk;

    acb->next = NULL;
    *blk->done_tail = acb;
    blk->done_tail = &acb->next;
    qemu_bh_schedule(blk->done_bh);
}

/* Invariant 2: the cache went off after the write left the graph. */
static void coroutine_fn blk_aio_late_flush_entry(void *opaque)
{
    BlockAIOCB *acb = opaque;

    acb->ret = blk_co_writethrough_flush(acb->blk, acb->wd.seq);
    blk_aio_queue_done(acb);
}

static void blk_aio_done_bh(void *opaque)
{
    BlockBackend *blk = opaque;
    BlockAIOCB *acb;

    blk_ref(blk);
    while ((acb = blk->done_head)) {
        blk->done_head = acb->next;
        if (!blk->done_head) {
            blk->done_tail = &blk->done_head;
        } else {
            /* a callback that polls the loop completes the rest itself */
            qemu_bh_schedule(blk->done_bh);
        }
        if (acb->wd.seq && !acb->wd.flushed && !blk->enable_write_cache &&
            acb->ret == 0) {
            /* it comes back through blk_aio_queue_done() once flushed */
            acb->wd.flushed = true;
            qemu_coroutine_enter(qemu_coroutine_create(
                blk_aio_late_flush_entry, acb));
            continue;
        }
        acb->cb(acb->opaque, acb->ret);
        blk->in_flight--;
        acb->next = blk->free_acbs;
        blk->free_acbs = acb;
    }
    qemu_bh_cancel(blk->done_bh);
    blk_unref(blk);
}

static void coroutine_fn blk_aio_entry(void *opaque)
{
    BlockAIOCB *acb = opaque;

    acb->ret = blk_co_do_op(acb->blk, acb->op, acb->offset, acb->bytes,
                            acb->qiov, acb->flags, &acb->wd);
    acb->done = true;
    if (acb->returned) {
        blk_aio_queue_done(acb);
    }
}

static BlockAIOCB *blk_aio_submit(BlockBackend *blk, BlkAioOp op,
                                  int64_t offset, int64_t bytes,
                                  QEMUIOVector *qiov, BdrvRequestFlags flags,
                                  BlockCompletionFunc *cb, void *opaque)
{
    BlockAIOCB *acb = blk_acb_get(blk);
    Coroutine *co;

    *acb = (BlockAIOCB) {
        .blk = blk,
        .cb = cb,
        .opaque = opaque,
        .op = op,
        .offset = offset,
        .bytes = bytes,
        .qiov = qiov,
        .flags = flags,
    };
    blk->in_flight++;
    co = qemu_coroutine_create(blk_aio_entry, acb);
    qemu_coroutine_enter(co);
    acb->returned = true;
    if (acb->done) {
        blk_aio_queue_done(acb);
    }
    return acb;
}

BlockAIOCB *blk_aio_preadv(BlockBackend *blk, int64_t offset,
                           QEMUIOVector *qiov, BdrvRequestFlags flags,
                           BlockCompletionFunc *cb, void *opaque)
{
    return blk_aio_submit(blk, BLK_AIO_READ, offset, qiov->size, qiov,
                          flags, cb, opaque);
}

BlockAIOCB *blk_aio_pwritev(BlockBackend *blk, int64_t offset,
                            QEMUIOVector *qiov, BdrvRequestFlags flags,
                            BlockCompletionFunc *cb, void *opaque)
{
    return blk_aio_submit(blk, BLK_AIO_WRITE, offset, qiov->size, qiov,
                          flags & ~BDRV_REQ_ZERO_WRITE, cb, opaque);
}

BlockAIOCB *blk_aio_pwrite_zeroes(BlockBackend *blk, int64_t offset,
                                  int64_t bytes, BdrvRequestFlags flags,
                                  BlockCompletionFunc *cb, void *opaque)
{
    return blk_aio_submit(blk, BLK_AIO_WRITE_ZEROES, offset, bytes, NULL,
                          flags | BDRV_REQ_ZERO_WRITE, cb, opaque);
}

BlockAIOCB *blk_aio_pdiscard(BlockBackend *blk, int64_t offset,
                             int64_t bytes, BlockCompletionFunc *cb,
                             void *opaque)
{
    return blk_aio_submit(blk, BLK_AIO_DISCARD, offset, bytes, NULL, 0, cb,
                          opaque);
}

BlockAIOCB *blk_aio_flush(BlockBackend *blk, BlockCompletionFunc *cb,
                          void *opaque)
{
    return blk_aio_submit(blk, BLK_AIO_FLUSH, 0, 0, NULL, 0, cb, opaque);
}

/* ---- synchronous requests ---- */

typedef struct BlkSyncCo {
    BlockBackend *blk;
    BlkAioOp op;
    int64_t offset;
    int64_t bytes;
    QEMUIOVector *qiov;
    BdrvRequestFlags flags;
} BlkSyncCo;

/* A synchronous request runs as blk_co_*() do. */
static int coroutine_fn blk_sync_co_entry(BlockDriverState *bs, void *opaque)
{
    BlkSyncCo *s = opaque;

    return blk_co_op(s->blk, s->op, s->offset, s->bytes, s->qiov, s->flags);
}

/*
 * Runs a request to completion in coroutine context (bdrv_run_co()):
 * directly in a coroutine, else in a new one while the loop is polled.
 */
static int blk_sync_request(BlockBackend *blk, BlkAioOp op, int64_t offset,
                            int64_t bytes, QEMUIOVector *qiov,
                            BdrvRequestFlags flags)
{
    BlkSyncCo s = {
        .blk = blk, .op = op, .offset = offset, .bytes = bytes,
        .qiov = qiov, .flags = flags,
    };

    return bdrv_run_co(blk_bs(blk), blk_sync_co_entry, &s);
}

int blk_preadv(BlockBackend *blk, int64_t offset, int64_t bytes,
               QEMUIOVector *qiov, BdrvRequestFlags flags)
{
    return blk_sync_request(blk, BLK_AIO_READ, offset, bytes, qiov, flags);
}

int blk_pwritev(BlockBackend *blk, int64_t offset, int64_t bytes,
                QEMUIOVector *qiov, BdrvRequestFlags flags)
{
    return blk_sync_request(blk, BLK_AIO_WRITE, offset, bytes, qiov,
                            flags & ~BDRV_REQ_ZERO_WRITE);
}

int blk_pread(BlockBackend *blk, int64_t offset, int64_t bytes, void *buf,
              BdrvRequestFlags flags)
{
    QEMUIOVector qiov;

    if (bytes < 0) {
        return -EIO;
    }
    qemu_iovec_init_buf(&qiov, buf, bytes);
    return blk_preadv(blk, offset, bytes, &qiov, flags);
}

int blk_pwrite(BlockBackend *blk, int64_t offset, int64_t bytes,
               const void *buf, BdrvRequestFlags flags)
{
    QEMUIOVector qiov;

    if (bytes < 0) {
        return -EIO;
    }
    qemu_iovec_init_buf(&qiov, (void *)buf, bytes);
    return blk_pwritev(blk, offset, bytes, &qiov, flags);
}

int blk_pwrite_zeroes(BlockBackend *blk, int64_t offset, int64_t bytes,
                      BdrvRequestFlags flags)
{
    return blk_sync_request(blk, BLK_AIO_WRITE_ZEROES, offset, bytes, NULL,
                            flags | BDRV_REQ_ZERO_WRITE);
}

int blk_pwrite_compressed(BlockBackend *blk, int64_t offset, int64_t bytes,
                          const void *buf)
{
    QEMUIOVector qiov;

    if (bytes < 0) {
        return -EIO;
    }
    qemu_iovec_init_buf(&qiov, (void *)buf, bytes);
    return blk_sync_request(blk, BLK_AIO_WRITE_COMPRESSED, offset, bytes,
                            &qiov, BDRV_REQ_WRITE_COMPRESSED);
}

int blk_pdiscard(BlockBackend *blk, int64_t offset, int64_t bytes)
{
    return blk_sync_request(blk, BLK_AIO_DISCARD, offset, bytes, NULL, 0);
}

int blk_flush(BlockBackend *blk)
{
    return blk_sync_request(blk, BLK_AIO_FLUSH, 0, 0, NULL, 0);
}

int blk_save_vmstate(BlockBackend *blk, const uint8_t *buf, int64_t pos,
                     int64_t size)
{
    BlockDriverState *bs = blk_bs(blk);
    int ret;

    if (!bs) {
        return -ENOMEDIUM;
    }
    ret = bdrv_save_vmstate(bs, buf, pos, size);
    /* writethrough: the state is durable once saving returns */
    if (ret == 0 && !blk->enable_write_cache) {
        ret = bdrv_flush(bs);
    }
    return ret;
}

int blk_load_vmstate(BlockBackend *blk, uint8_t *buf, int64_t pos,
                     int64_t size)
{
    BlockDriverState *bs = blk_bs(blk);

    return bs ? bdrv_load_vmstate(bs, buf, pos, size) : -ENOMEDIUM;
}

typedef struct BlkTruncateCo {
    BlockBackend *blk;
    int64_t offset;
    bool exact;
    PreallocMode prealloc;
    BdrvRequestFlags flags;
    Error **errp;
} BlkTruncateCo;

static int coroutine_fn blk_truncate_entry(BlockDriverState *bs,
                                           void *opaque)
{
    BlkTruncateCo *s = opaque;

    return blk_co_truncate(s->blk, s->offset, s->exact, s->prealloc,
                           s->flags, s->errp);
}

int blk_truncate(BlockBackend *blk, int64_t offset, bool exact,
                 PreallocMode prealloc, BdrvRequestFlags flags, Error **errp)
{
    BlkTruncateCo s = {
        .blk = blk, .offset = offset, .exact = exact, .prealloc = prealloc,
        .flags = flags, .errp = errp,
    };

    return bdrv_run_co(blk_bs(blk), blk_truncate_entry, &s);
}
