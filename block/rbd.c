/*
 * rbd: a Ceph RBD image as a protocol node, through librbd.
 *
 * Open connects to the cluster and opens the image (rbd-connect.c); the
 * data path then hands every request to librbd's asynchronous calls
 * (rbd_aio_readv, _writev, _discard, _write_zeroes, _flush), as many in
 * flight as the layers above send.  librbd completes them in its own
 * threads: qrbd_aio_done() (such a thread) only queues the request on
 * s->done and sets s->notifier; qrbd_aio_reap() (the node's AioContext,
 * the notifier's fd handler) takes the queue, releases each completion
 * and wakes each request's coroutine.  Calls that librbd only offers
 * synchronously and that wait for the cluster (block status through
 * rbd_diff_iterate2, resize) run in the context's thread pool, so that a
 * slow or dead cluster never stops the event loop; the objects that block
 * status finds allocated are remembered (rbd-alloc-cache.c), so that an
 * NBD export's query before each read costs no walk once it has found them.
 *
 * Invariants:
 *  1. A request is on s->done at most once, between its completion by
 *     librbd and its reaping; only qrbd_aio_reap() takes it off, in the
 *     node's context, after its coroutine has yielded (the coroutine
 *     yields right after submitting, without returning to the loop, so
 *     the reaper can only see it once it waits).
 *  2. s->done, its lock, the notifier and s->callbacks_running are the
 *     only state librbd's threads touch: s->done only while holding the
 *     lock, the notifier only while counted in s->callbacks_running, which
 *     a callback enters before it queues its request and leaves after its
 *     last touch of s.
 *  3. s->in_flight counts submitted requests not yet reaped; close runs
 *     drained, with it 0, before the notifier and the image go.
 */
#include "block/rbd.h"
#include "qapi/qapi-opts.h"
#include "util/thread-pool.h"

/* ---------------------------------------------------------------------- */
/* Completion */

/* librbd's callback thread: queue and wake the loop (invariants 1, 2). */
static void qrbd_aio_done(rbd_completion_t c, void *opaque)
{
    RBDAioRequest *req = opaque;
    BDRVRBDState *s = req->s;

    g_atomic_int_inc(&s->callbacks_running);
    req->ret = qrbd_lib.rbd_aio_get_return_value(c);
    g_mutex_lock(&s->done_lock);
    req->next = s->done;
    s->done = req;
    g_mutex_unlock(&s->done_lock);
    /*
     * Outside the lock: the loop thread that wakes takes the lock at once,
     * and finding it still held cost each request a futex wait and two
     * more context switches.  @req may be gone from here on; s stays until
     * close, which waits for this callback to leave (invariant 2).
     */
    event_notifier_set(&s->notifier);
    g_atomic_int_add(&s->callbacks_running, -1);
}

/* The notifier's handler, in the node's context: wake every request. */
static void qrbd_aio_reap(void *opaque)
{
    BDRVRBDState *s = opaque;
    RBDAioRequest *list, *next;

    event_notifier_test_and_clear(&s->notifier);
    g_mutex_lock(&s->done_lock);
    list = s->done;
    s->done = NULL;
    g_mutex_unlock(&s->done_lock);
    for (RBDAioRequest *req = list; req; req = next) {
        next = req->next;
        assert(!req->done);     /* invariant 1 */
        qrbd_lib.rbd_aio_release(req->c);
        req->done = true;
        s->in_flight--;
        aio_co_wake(req->co);
    }
}

typedef enum RBDAioType {
    RBD_AIO_READ,
    RBD_AIO_WRITE,
    RBD_AIO_DISCARD,
    RBD_AIO_WRITE_ZEROES,
    RBD_AIO_FLUSH,
} RBDAioType;

typedef struct RBDAioCmd {
    RBDAioType type;
    uint64_t offset;
    uint64_t bytes;
    QEMUIOVector *qiov;         /* read and write */
    int zero_flags;             /* RBD_WRITE_ZEROES_FLAG_* */
} RBDAioCmd;

static int qrbd_aio_submit(BDRVRBDState *s, const RBDAioCmd *cmd,
                           rbd_completion_t c)
{
    switch (cmd->type) {
    case RBD_AIO_READ:
        return qrbd_lib.rbd_aio_readv(s->image, cmd->qiov->iov,
                                      cmd->qiov->niov, cmd->offset, c);
    case RBD_AIO_WRITE:
        return qrbd_lib.rbd_aio_writev(s->image, cmd->qiov->iov,
                                       cmd->qiov->niov, cmd->offset, c);
    case RBD_AIO_DISCARD:
        return qrbd_lib.rbd_aio_discard(s->image, cmd->offset, cmd->bytes, c);
    case RBD_AIO_WRITE_ZEROES:
        return qrbd_lib.rbd_aio_write_zeroes(s->image, cmd->offset,
                                             cmd->bytes, c, cmd->zero_flags,
                                             0);
    case RBD_AIO_FLUSH:
        return qrbd_lib.rbd_aio_flush(s->image, c);
    }
    g_assert_not_reached();
}

/* Submits @cmd to librbd and waits for it; librbd's result or -errno. */
static int64_t coroutine_fn qrbd_co_request(BlockDriverState *bs,
                                            const RBDAioCmd *cmd)
{
    BDRVRBDState *s = bs->opaque;
    RBDAioRequest req = {
        .s = s,
        .co = qemu_coroutine_self(),
    };
    int ret;

    ret = qrbd_lib.rbd_aio_create_completion(&req, qrbd_aio_done, &req.c);
    if (ret < 0) {
        return ret;
    }
    ret = qrbd_aio_submit(s, cmd, req.c);
    if (ret < 0) {
        qrbd_lib.rbd_aio_release(req.c);
        return ret;
    }
    s->in_flight++;
    /* invariant 1: reaped only once we wait, in this same context */
    while (!req.done) {
        qemu_coroutine_yield();
    }
    return req.ret;
}

/* ---------------------------------------------------------------------- */
/* Data path */

/*
 * A read and a write are the same command but for its type: @qiov's data
 * at @offset.  librbd's result (for a read, the bytes read) or -errno.
 */
static int64_t coroutine_fn qrbd_co_rw(BlockDriverState *bs, RBDAioType type,
                                       int64_t offset, int64_t bytes,
                                       QEMUIOVector *qiov)
{
    RBDAioCmd cmd = {
        .type = type,
        .offset = offset,
        .bytes = bytes,
        .qiov = qiov,
    };

    return qrbd_co_request(bs, &cmd);
}

static int coroutine_fn qrbd_co_preadv(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags)
{
    int64_t ret = qrbd_co_rw(bs, RBD_AIO_READ, offset, bytes, qiov);

    if (ret < 0) {
        return ret;
    }
    /* librbd reads short only past the end of a shrunk image: zeroes */
    if (ret < bytes) {
        qemu_iovec_memset(qiov, ret, 0, bytes - ret);
    }
    return 0;
}

static int coroutine_fn qrbd_co_pwritev(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    int64_t ret = qrbd_co_rw(bs, RBD_AIO_WRITE, offset, bytes, qiov);

    return ret < 0 ? ret : 0;
}

/*
 * A zero write or a discard, after which the objects of its range may be
 * gone, even after a failure: the allocation cache forgets the range
 * (alloc cache invariant 3) in this one place for both.
 */
static int coroutine_fn qrbd_co_unmapping_request(BlockDriverState *bs,
                                                  const RBDAioCmd *cmd)
{
    BDRVRBDState *s = bs->opaque;
    int64_t ret = qrbd_co_request(bs, cmd);

    qrbd_alloc_cache_forget(&s->alloc, cmd->offset, cmd->bytes);
    return ret < 0 ? ret : 0;
}

static int coroutine_fn qrbd_co_pwrite_zeroes(BlockDriverState *bs,
                                              int64_t offset, int64_t bytes,
                                              BdrvRequestFlags flags)
{
    RBDAioCmd cmd = {
        .type = RBD_AIO_WRITE_ZEROES,
        .offset = offset,
        .bytes = bytes,
        /* without MAY_UNMAP the range must stay allocated */
        .zero_flags = (flags & BDRV_REQ_MAY_UNMAP) ? 0 :
                      RBD_WRITE_ZEROES_FLAG_THICK_PROVISION,
    };

    return qrbd_co_unmapping_request(bs, &cmd);
}

static int coroutine_fn qrbd_co_pdiscard(BlockDriverState *bs, int64_t offset,
                                         int64_t bytes)
{
    RBDAioCmd cmd = {
        .type = RBD_AIO_DISCARD,
        .offset = offset,
        .bytes = bytes,
    };

    return qrbd_co_unmapping_request(bs, &cmd);
}

static int coroutine_fn qrbd_co_flush(BlockDriverState *bs)
{
    RBDAioCmd cmd = { .type = RBD_AIO_FLUSH };
    int64_t ret = qrbd_co_request(bs, &cmd);

    return ret < 0 ? ret : 0;
}

/* ---------------------------------------------------------------------- */
/* Block status */

/*
 * Collects the first extent that rbd_diff_iterate2 reports as existing
 * and ending after @min_end (the caller's offset: the walk covers whole
 * objects around it).
 */
typedef struct RBDDiffCall {
    rbd_image_t image;
    uint64_t offset;
    uint64_t bytes;
    uint64_t min_end;
    bool found;
    uint64_t ext_offset;
    uint64_t ext_bytes;
} RBDDiffCall;

/* Returned by the callback to stop the walk at the first extent. */
#define RBD_DIFF_STOP (-EINTR)

static int qrbd_diff_cb(uint64_t offset, size_t len, int exists, void *opaque)
{
    RBDDiffCall *call = opaque;

    /* with no "from" snapshot every extent exists; a hole never shows */
    if (!exists || offset + len <= call->min_end) {
        return 0;
    }
    call->found = true;
    call->ext_offset = offset;
    call->ext_bytes = len;
    return RBD_DIFF_STOP;
}

/* A worker thread: the walk reads the object map from the cluster. */
static int qrbd_diff_worker(void *opaque)
{
    RBDDiffCall *call = opaque;
    int ret;

    /* whole objects: the object map says no more, and is cheap to read */
    ret = qrbd_lib.rbd_diff_iterate2(call->image, NULL, call->offset,
                                     call->bytes, true, true, qrbd_diff_cb,
                                     call);
    return ret == RBD_DIFF_STOP ? 0 : ret;
}

/*
 * Allocation from the object map (fast-diff): an object that was never
 * written, or was discarded, reads as zeroes.  Without a valid fast-diff
 * map the walk would read every object, so everything is data then, as
 * QEMU reports it.  Objects found allocated are remembered (s->alloc):
 * an NBD export asks before every read, and the walk, in a worker thread,
 * costs about as many context switches as a 4 KiB read itself.
 */
static int coroutine_fn qrbd_co_block_status(BlockDriverState *bs,
                                             bool want_zero, int64_t offset,
                                             int64_t bytes, int64_t *pnum,
                                             int64_t *map,
                                             BlockDriverState **file)
{
    BDRVRBDState *s = bs->opaque;
    uint64_t known = qrbd_alloc_cache_lookup(&s->alloc, offset, bytes);
    uint64_t features, img_flags, generation, size, end;
    RBDDiffCall call = {
        .image = s->image,
        .min_end = offset,
    };
    int ret;

    *map = offset;
    *file = bs;
    *pnum = bytes;
    if (known) {
        *pnum = known;
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
    }
    if (qrbd_lib.rbd_get_features(s->image, &features) < 0 ||
        !(features & RBD_FEATURE_FAST_DIFF) ||
        qrbd_lib.rbd_get_flags(s->image, &img_flags) < 0 ||
        (img_flags & RBD_FLAG_FAST_DIFF_INVALID) ||
        qrbd_lib.rbd_get_size(s->image, &size) < 0) {
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
    }
    /*
     * Whole objects, so that the extents found can be remembered: the map
     * says no more about part of one, and is read whole anyway.
     */
    call.offset = QEMU_ALIGN_DOWN(offset, s->object_size);
    end = MIN(QEMU_ALIGN_UP(offset + bytes, s->object_size), size);
    call.bytes = end > call.offset ? end - call.offset : 0;
    generation = qrbd_alloc_cache_generation(&s->alloc);
    ret = thread_pool_submit_co(aio_get_thread_pool(s->ctx),
                                qrbd_diff_worker, &call);
    if (ret < 0) {
        return ret;
    }
    if (call.found) {
        qrbd_alloc_cache_fill(&s->alloc, generation, call.ext_offset,
                              call.ext_bytes);
    }
    if (!call.found || call.ext_offset >= offset + bytes) {
        return BDRV_BLOCK_ZERO | BDRV_BLOCK_OFFSET_VALID;
    }
    if (call.ext_offset > offset) {
        *pnum = call.ext_offset - offset;
        return BDRV_BLOCK_ZERO | BDRV_BLOCK_OFFSET_VALID;
    }
    /* whole objects: the extent may begin before @offset */
    *pnum = MIN((int64_t)(call.ext_offset + call.ext_bytes - offset), bytes);
    return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
}

/* ---------------------------------------------------------------------- */
/* Size */

static int64_t qrbd_getlength(BlockDriverState *bs)
{
    BDRVRBDState *s = bs->opaque;
    uint64_t size;
    int ret;

    /* another client may have resized it: librbd watches the header */
    ret = qrbd_lib.rbd_get_size(s->image, &size);
    if (ret < 0) {
        return ret;
    }
    return size > INT64_MAX ? -EFBIG : (int64_t)size;
}

typedef struct RBDResizeCall {
    rbd_image_t image;
    uint64_t size;
} RBDResizeCall;

static int qrbd_resize_worker(void *opaque)
{
    RBDResizeCall *call = opaque;

    return qrbd_lib.rbd_resize(call->image, call->size);
}

static int coroutine_fn qrbd_co_truncate(BlockDriverState *bs, int64_t offset,
                                         bool exact, PreallocMode prealloc,
                                         BdrvRequestFlags flags, Error **errp)
{
    BDRVRBDState *s = bs->opaque;
    RBDResizeCall call = { .image = s->image, .size = offset };
    int ret;

    if (prealloc != PREALLOC_MODE_OFF) {
        error_setg(errp, "Unsupported preallocation mode '%s'",
                   PreallocMode_str[prealloc]);
        return -ENOTSUP;
    }
    ret = thread_pool_submit_co(aio_get_thread_pool(s->ctx),
                                qrbd_resize_worker, &call);
    /* a shrink drops objects, a failed one perhaps some (inv. 3) */
    qrbd_alloc_cache_forget_all(&s->alloc);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "failed to resize rbd image '%s' to "
                         "%" PRId64 " bytes", s->opts.image, offset);
        return ret;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Open and close */

static int qrbd_open_image(BlockDriverState *bs, Error **errp)
{
    BDRVRBDState *s = bs->opaque;
    const RBDConnectOpts *o = &s->opts;
    rbd_image_info_t info;
    int ret;

    if (o->snapshot || !(bs->open_flags & BDRV_O_RDWR)) {
        ret = qrbd_lib.rbd_open_read_only(s->io_ctx, o->image, &s->image,
                                          o->snapshot);
    } else {
        ret = qrbd_lib.rbd_open(s->io_ctx, o->image, &s->image, NULL);
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "error reading header from %s",
                         o->image);
        s->image = NULL;
        return ret;
    }
    if (o->encrypt_format) {
        ret = qrbd_encryption_load(s->image, o->encrypt_format,
                                   o->encrypt_key_secret, errp);
        if (ret < 0) {
            return ret;
        }
    }
    ret = qrbd_lib.rbd_stat(s->image, &info, sizeof(info));
    if (ret < 0) {
        error_setg_errno(errp, -ret, "error getting image info from %s",
                         o->image);
        return ret;
    }
    s->object_size = info.obj_size;
    qrbd_alloc_cache_init(&s->alloc, info.obj_size, info.size);
    return 0;
}

static int qrbd_open_node(BlockDriverState *bs, QDict *options, int flags,
                          Error **errp)
{
    BDRVRBDState *s = bs->opaque;
    int ret;

    if (!qrbd_connect_opts_parse(options, &s->opts, false, errp)) {
        ret = -EINVAL;
        goto fail;
    }
    if (s->opts.snapshot && (flags & BDRV_O_RDWR)) {
        if (!(flags & BDRV_O_AUTO_RDONLY)) {
            /* QEMU's words, which scripts written against it match */
            error_setg(errp, "rbd snapshots are read-only");
            ret = -EACCES;
            goto fail;
        }
        bs->read_only = true;
    }
    ret = qrbd_connect(&s->opts, !(flags & BDRV_O_NOCACHE), &s->cluster,
                       &s->io_ctx, errp);
    if (ret < 0) {
        goto fail;
    }
    ret = qrbd_open_image(bs, errp);
    if (ret < 0) {
        goto fail;
    }
    ret = event_notifier_init(&s->notifier, false);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "rbd image '%s': cannot create the "
                         "completion notifier", s->opts.image);
        goto fail;
    }
    g_mutex_init(&s->done_lock);
    s->ctx = bdrv_get_aio_context(bs);
    aio_set_fd_handler(s->ctx, event_notifier_get_fd(&s->notifier),
                       qrbd_aio_reap, NULL, s);
    bs->supported_zero_flags = BDRV_REQ_MAY_UNMAP | BDRV_REQ_NO_FALLBACK;
    return 0;

fail:
    /* the node is freed without bdrv_close after a failed open */
    qrbd_alloc_cache_destroy(&s->alloc);
    if (s->image) {
        qrbd_lib.rbd_close(s->image);
    }
    qrbd_disconnect(s->cluster, s->io_ctx);
    qrbd_connect_opts_free(&s->opts);
    return ret;
}

static void qrbd_close_node(BlockDriverState *bs)
{
    BDRVRBDState *s = bs->opaque;

    assert(s->in_flight == 0); /* invariant 3: closed drained */
    /*
     * Every request was reaped, so every callback has entered
     * s->callbacks_running before queueing its request; the last ones may
     * still be setting the notifier: wait until they have left
     * (invariant 2).  They are a few instructions from leaving.
     */
    while (g_atomic_int_get(&s->callbacks_running) > 0) {
        g_thread_yield();
    }
    aio_set_fd_handler(s->ctx, event_notifier_get_fd(&s->notifier),
                       NULL, NULL, NULL);
    event_notifier_cleanup(&s->notifier);
    g_mutex_clear(&s->done_lock);
    qrbd_alloc_cache_destroy(&s->alloc);
    qrbd_lib.rbd_close(s->image);
    qrbd_disconnect(s->cluster, s->io_ctx);
    qrbd_connect_opts_free(&s->opts);
}

/*
 * Drained (invariant 3: nothing in flight, so nothing on s->done): only
 * the notifier's handler is bound to the context.  A callback still
 * setting the notifier wakes the new context's handler, which finds
 * nothing to reap.
 */
static int qrbd_change_aio_context(BlockDriverState *bs, AioContext *new_ctx,
                                   Error **errp)
{
    BDRVRBDState *s = bs->opaque;
    int fd = event_notifier_get_fd(&s->notifier);

    assert(s->in_flight == 0);
    aio_set_fd_handler(s->ctx, fd, NULL, NULL, NULL);
    s->ctx = new_ctx;
    aio_set_fd_handler(s->ctx, fd, qrbd_aio_reap, NULL, s);
    return 0;
}

static int qrbd_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    BDRVRBDState *s = state->bs->opaque;

    if ((state->flags & BDRV_O_RDWR) && s->opts.snapshot) {
        error_setg(errp, "rbd snapshot '%s' of image '%s' is read-only",
                   s->opts.snapshot, s->opts.image);
        return -EACCES;
    }
    return 0;
}

/*
 * No file name of ours: the rbd: syntax cannot say every option, so a
 * json: one is built from the node's options.  QEMU's options hold the
 * namespace, "" by default, when they came from an rbd: file name (after
 * the driver, where its schema adds it); so do ours, so that both tools
 * print the same name.
 */
static void qrbd_refresh_filename(BlockDriverState *bs)
{
    if (g_str_has_prefix(bs->filename, "rbd:")) {
        qdict_set_default_str(bs->options, "namespace", "");
    }
    bs->exact_filename[0] = '\0';
}

/*
 * Requests need no alignment: librbd splits them at object boundaries
 * itself.  Zero writes are best aligned to objects, which librbd can then
 * drop whole.  No preferred transfer size or discard alignment, as in
 * QEMU's driver: either would raise convert's chunk from 2 MiB to the
 * object size, and one 4 MiB write in flight at a time (convert without
 * -W) took twice as long as two 2 MiB ones on the test cluster (1 GiB,
 * half data: qemu-img 0.54-1.22 s, qblock 0.95-2.61 s before).
 */
static void qrbd_refresh_limits(BlockDriverState *bs, Error **errp)
{
    BDRVRBDState *s = bs->opaque;

    bs->bl.request_alignment = 1;
    bs->bl.pwrite_zeroes_alignment = s->object_size;
    bs->bl.max_pdiscard = INT_MAX - INT_MAX % s->object_size;
    bs->bl.max_pwrite_zeroes = bs->bl.max_pdiscard;
}

static int qrbd_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    BDRVRBDState *s = bs->opaque;

    bdi->cluster_size = s->object_size;
    return 0;
}

/*
 * QEMU's rbd information holds only the encryption format of an image
 * that librbd encrypts, which qblock does not open yet: an empty object,
 * which qemu-img info prints as a bare heading, as QEMU does.
 */
static JsonNode *qrbd_get_specific_info(BlockDriverState *bs)
{
    g_autoptr(JsonObject) info = json_object_new();
    JsonNode *node = json_node_new(JSON_NODE_OBJECT);

    json_object_set_string_member(info, "type", "rbd");
    json_object_set_object_member(info, "data", json_object_new());
    json_node_set_object(node, info);
    return node;
}

/* What names a different image; the rest only how to reach it. */
static const char *const qrbd_strong_runtime_opts[] = {
    "pool",
    "namespace",
    "image",
    "conf",
    "snapshot",
    "user",
    "server.",
    RBD_OPT_PASSWORD_SECRET,    /* in QEMU's list too, unlike key-secret */
    NULL
};

static const BlockDriver bdrv_rbd = {
    .format_name            = "rbd",
    .protocol_name          = "rbd",
    .instance_size          = sizeof(BDRVRBDState),
    .runtime_opts           = &qapi_opts_rbd_runtime,
    .strong_runtime_opts    = qrbd_strong_runtime_opts,
    .bdrv_needs_filename    = false,
    .bdrv_parse_filename    = qrbd_parse_filename,
    .bdrv_open              = qrbd_open_node,
    .bdrv_close             = qrbd_close_node,
    .bdrv_change_aio_context = qrbd_change_aio_context,
    .bdrv_reopen_prepare    = qrbd_reopen_prepare,
    .bdrv_refresh_filename  = qrbd_refresh_filename,
    .bdrv_refresh_limits    = qrbd_refresh_limits,
    .bdrv_getlength         = qrbd_getlength,
    .bdrv_get_info          = qrbd_get_info,
    .bdrv_co_truncate       = qrbd_co_truncate,
    .create_opts            = &qapi_opts_rbd_create,
    .bdrv_co_create_opts    = qrbd_co_create_opts,
    .bdrv_co_create_on_node = qrbd_co_create_on_node,
    .bdrv_co_preadv         = qrbd_co_preadv,
    .bdrv_co_pwritev        = qrbd_co_pwritev,
    .bdrv_co_pwrite_zeroes  = qrbd_co_pwrite_zeroes,
    .bdrv_co_pdiscard       = qrbd_co_pdiscard,
    .bdrv_co_flush_to_disk  = qrbd_co_flush,
    .bdrv_co_block_status   = qrbd_co_block_status,
    .bdrv_get_specific_info = qrbd_get_specific_info,
    .bdrv_snapshot_create   = qrbd_snapshot_create,
    .bdrv_snapshot_goto     = qrbd_snapshot_goto,
    .bdrv_snapshot_delete   = qrbd_snapshot_delete,
    .bdrv_snapshot_list     = qrbd_snapshot_list,
};

block_init(bdrv_register, bdrv_rbd)
