/*
 * throttle: a filter that holds the requests to its child to the limits
 * of a throttle group (QEMU's "throttle" driver; the scheduling is in
 * block/throttle-groups.c).
 *
 * Invariants:
 *  1. From open to close the node is a member of exactly one group,
 *     the one its throttle-group option names.
 *  2. Every request but a flush passes the group before the child sees
 *     it: reads as reads, and every kind of write as a write.
 *  3. A drained section of the node or of a node below it lifts the
 *     limits for its length (throttle-groups.h invariant 3): the drain
 *     waits for this node's requests, which would otherwise wait for the
 *     limits, possibly for long.
 */

#include "block/block_int.h"
#include "block/throttle-groups.h"
#include "qapi/qapi-opts.h"

typedef struct BDRVThrottleState {
    ThrottleGroupMember member;     /* invariant 1 */
} BDRVThrottleState;

/* The group named in @options, absorbed; checked to exist. */
static char *throttle_parse_group(QDict *options, Error **errp)
{
    g_autofree char *group = NULL;
    QemuOpts *opts;

    opts = qemu_opts_absorb_qdict(&qapi_opts_throttle_runtime, options,
                                  errp);
    if (!opts) {
        return NULL;
    }
    group = g_strdup(qemu_opt_get(opts, "throttle-group"));
    qemu_opts_del(opts);
    if (!group) {
        error_setg(errp, "Please specify a throttle group");
        return NULL;
    }
    if (!throttle_group_exists(group)) {
        error_setg(errp, "Throttle group '%s' does not exist", group);
        return NULL;
    }
    return g_steal_pointer(&group);
}

static int throttle_open(BlockDriverState *bs, QDict *options, int flags,
                         Error **errp)
{
    BDRVThrottleState *s = bs->opaque;
    g_autofree char *group = NULL;

    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    group = throttle_parse_group(options, errp);
    if (!group ||
        !throttle_group_register(&s->member, group,
                                 bdrv_get_aio_context(bs), errp)) {
        bdrv_unref_child(bs, bs->file);
        bs->file = NULL;
        return -EINVAL;
    }
    bdrv_inherit_file_flags(bs);
    return 0;
}

static void throttle_close(BlockDriverState *bs)
{
    BDRVThrottleState *s = bs->opaque;

    throttle_group_unregister(&s->member);
}

/* The group may change on reopen, as in QEMU. */
static int throttle_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    char *group = throttle_parse_group(state->options, errp);

    if (!group) {
        return -EINVAL;
    }
    state->opaque = group;
    return 0;
}

static void throttle_reopen_commit(BDRVReopenState *state)
{
    BDRVThrottleState *s = state->bs->opaque;
    g_autofree char *group = state->opaque;

    state->opaque = NULL;
    if (strcmp(group, throttle_group_get_id(&s->member))) {
        throttle_group_unregister(&s->member);
        /* the group exists: prepare found it, and the reopen holds */
        throttle_group_register(&s->member, group,
                                bdrv_get_aio_context(state->bs),
                                &error_abort);
    }
}

static void throttle_reopen_abort(BDRVReopenState *state)
{
    g_free(state->opaque);
    state->opaque = NULL;
}

/* Invariant 2. */
static int coroutine_fn throttle_co_preadv(BlockDriverState *bs,
                                           int64_t offset, int64_t bytes,
                                           QEMUIOVector *qiov,
                                           BdrvRequestFlags flags)
{
    BDRVThrottleState *s = bs->opaque;

    throttle_group_co_intercept(&s->member, bytes, THROTTLE_READ);
    return bdrv_filter_co_preadv(bs, offset, bytes, qiov, flags);
}

static int coroutine_fn throttle_co_pwritev(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov,
                                            BdrvRequestFlags flags)
{
    BDRVThrottleState *s = bs->opaque;

    throttle_group_co_intercept(&s->member, bytes, THROTTLE_WRITE);
    return bdrv_filter_co_pwritev(bs, offset, bytes, qiov, flags);
}

static int coroutine_fn throttle_co_pwrite_zeroes(BlockDriverState *bs,
                                                  int64_t offset,
                                                  int64_t bytes,
                                                  BdrvRequestFlags flags)
{
    BDRVThrottleState *s = bs->opaque;

    throttle_group_co_intercept(&s->member, bytes, THROTTLE_WRITE);
    return bdrv_filter_co_pwrite_zeroes(bs, offset, bytes, flags);
}

static int coroutine_fn throttle_co_pdiscard(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes)
{
    BDRVThrottleState *s = bs->opaque;

    throttle_group_co_intercept(&s->member, bytes, THROTTLE_WRITE);
    return bdrv_filter_co_pdiscard(bs, offset, bytes);
}

static int coroutine_fn throttle_co_pwritev_compressed(BlockDriverState *bs,
                                                       int64_t offset,
                                                       int64_t bytes,
                                                       QEMUIOVector *qiov)
{
    BDRVThrottleState *s = bs->opaque;

    throttle_group_co_intercept(&s->member, bytes, THROTTLE_WRITE);
    return bdrv_filter_co_pwritev_compressed(bs, offset, bytes, qiov);
}

/* Invariant 3. */
static void throttle_drained_begin(BlockDriverState *bs)
{
    BDRVThrottleState *s = bs->opaque;

    throttle_group_disable_limits(&s->member);
}

static void throttle_drained_end(BlockDriverState *bs)
{
    BDRVThrottleState *s = bs->opaque;

    throttle_group_enable_limits(&s->member);
}

static int throttle_change_aio_context(BlockDriverState *bs,
                                       AioContext *new_ctx, Error **errp)
{
    BDRVThrottleState *s = bs->opaque;

    throttle_group_change_aio_context(&s->member, new_ctx);
    return 0;
}

static const BlockDriver bdrv_throttle = {
    .format_name                    = "throttle",
    .instance_size                  = sizeof(BDRVThrottleState),
    /* opened as QEMU opens filters: a filename names the file child */
    .is_format                      = true,
    .is_filter                      = true,
    .runtime_opts                   = &qapi_opts_throttle_runtime,
    .bdrv_open                      = throttle_open,
    .bdrv_close                     = throttle_close,
    .bdrv_reopen_prepare            = throttle_reopen_prepare,
    .bdrv_reopen_commit             = throttle_reopen_commit,
    .bdrv_reopen_abort              = throttle_reopen_abort,
    .bdrv_change_aio_context        = throttle_change_aio_context,
    .bdrv_drained_begin             = throttle_drained_begin,
    .bdrv_drained_end               = throttle_drained_end,
    .bdrv_getlength                 = bdrv_filter_getlength,
    .bdrv_co_preadv                 = throttle_co_preadv,
    .bdrv_co_pwritev                = throttle_co_pwritev,
    .bdrv_co_pwrite_zeroes          = throttle_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = throttle_co_pdiscard,
    .bdrv_co_pwritev_compressed     = throttle_co_pwritev_compressed,
    .bdrv_co_truncate               = bdrv_filter_co_truncate,
};

block_init(bdrv_register, bdrv_throttle)
