/*
 * quorum: a node over several children that hold the same data (QEMU's
 * "quorum" driver).  A write goes to every child and succeeds when at
 * least vote-threshold of them succeed; a read reads every child and
 * returns the content that at least vote-threshold of them agree on,
 * reporting the children that disagree (QUORUM_REPORT_BAD) and, with
 * rewrite-corrupted, writing the agreed content back to them.  With
 * read-pattern=fifo a read takes the first child that reads without an
 * error instead.  QEMU's options, messages and events.
 *
 * Invariants:
 *  1. 1 <= threshold <= num_children in quorum mode (checked at open).
 *  2. A request's outcome depends on all its children's results: it
 *     returns only after every child request it started has completed,
 *     so no child request outlives its buffers.
 *  3. A read's result is the buffer of a child in the winning version;
 *     the caller's vector is written once, after the vote.
 *  4. The children change (x-blockdev-change) only while the node is
 *     drained, so that no request sees two lists; a new child is named
 *     children.N with N = next_child_index, which goes back by one when
 *     the child removed is the last one named (QEMU's names).
 *
 * A request runs in the node's AioContext; its child requests run as
 * coroutines of that context.
 */

#include "block/block_int.h"
#include "qapi/qapi-opts.h"
#include "qblock/block-backend.h"
#include "util/qapi-event.h"

typedef enum QuorumReadPattern {
    QUORUM_READ_PATTERN_QUORUM,
    QUORUM_READ_PATTERN_FIFO,
} QuorumReadPattern;

typedef enum QuorumOpType {
    QUORUM_OP_READ,
    QUORUM_OP_WRITE,
    QUORUM_OP_FLUSH,
} QuorumOpType;

static const char *const quorum_op_names[] = {
    [QUORUM_OP_READ] = "read",
    [QUORUM_OP_WRITE] = "write",
    [QUORUM_OP_FLUSH] = "flush",
};

typedef struct BDRVQuorumState {
    BdrvChild **children;
    int num_children;
    unsigned next_child_index;      /* invariant 4 */
    int threshold;                  /* invariant 1 */
    bool is_blkverify;              /* two children, both must agree */
    bool rewrite_corrupted;
    QuorumReadPattern read_pattern;
} BDRVQuorumState;

/* One request to the quorum node, and its requests to the children. */
typedef struct QuorumRequest {
    BlockDriverState *bs;
    int64_t offset;
    int64_t bytes;
    QEMUIOVector *qiov;             /* the caller's; NULL for zero writes */
    BdrvRequestFlags flags;
    bool is_read;
    /* per child: its result and, for reads, its own buffer */
    int *ret;
    uint8_t **bufs;
    QEMUIOVector *qiovs;
} QuorumRequest;

typedef struct QuorumChildRequest {
    QuorumRequest *req;
    int index;
} QuorumChildRequest;

static void quorum_report_bad(QuorumOpType type, int64_t offset,
                              int64_t bytes, const char *node_name, int ret)
{
    QDict *data = qdict_new();
    int64_t start = offset / BDRV_SECTOR_SIZE;
    int64_t end = DIV_ROUND_UP(offset + bytes, BDRV_SECTOR_SIZE);

    qdict_put_str(data, "type", quorum_op_names[type]);
    if (ret < 0) {
        qdict_put_str(data, "error", strerror(-ret));
    }
    qdict_put_str(data, "node-name", node_name);
    qdict_put_int(data, "sector-num", start);
    qdict_put_int(data, "sectors-count", end - start);
    qapi_event_emit("QUORUM_REPORT_BAD", data);
}

static void quorum_report_failure(QuorumRequest *req)
{
    QDict *data = qdict_new();
    int64_t start = req->offset / BDRV_SECTOR_SIZE;
    int64_t end = DIV_ROUND_UP(req->offset + req->bytes, BDRV_SECTOR_SIZE);

    qdict_put_str(data, "reference", bdrv_get_device_or_node_name(req->bs));
    qdict_put_int(data, "sector-num", start);
    qdict_put_int(data, "sectors-count", end - start);
    qapi_event_emit("QUORUM_FAILURE", data);
}

static void coroutine_fn quorum_child_entry(void *opaque)
{
    QuorumChildRequest *creq = opaque;
    QuorumRequest *req = creq->req;
    BDRVQuorumState *s = req->bs->opaque;
    BdrvChild *child = s->children[creq->index];
    int ret;

    if (req->is_read) {
        ret = bdrv_co_preadv(child, req->offset, req->bytes,
                             &req->qiovs[creq->index], 0);
    } else if (req->flags & BDRV_REQ_ZERO_WRITE) {
        ret = bdrv_co_pwrite_zeroes(child, req->offset, req->bytes,
                                    req->flags & ~BDRV_REQ_ZERO_WRITE);
    } else {
        ret = bdrv_co_pwritev(child, req->offset, req->bytes, req->qiov,
                              req->flags);
    }
    req->ret[creq->index] = ret;
    if (ret < 0) {
        quorum_report_bad(req->is_read ? QUORUM_OP_READ : QUORUM_OP_WRITE,
                          req->offset, req->bytes,
                          bdrv_get_node_name(child->bs), ret);
    }
}

/* Runs the request on every child at once (invariant 2). */
static void coroutine_fn quorum_run_children(QuorumRequest *req)
{
    BDRVQuorumState *s = req->bs->opaque;
    g_autofree QuorumChildRequest *creqs =
        g_new(QuorumChildRequest, s->num_children);
    g_autofree void **opaques = g_new(void *, s->num_children);

    for (int i = 0; i < s->num_children; i++) {
        creqs[i] = (QuorumChildRequest) { .req = req, .index = i };
        opaques[i] = &creqs[i];
    }
    aio_co_run_all(quorum_child_entry, opaques, s->num_children);
}

static int quorum_success_count(QuorumRequest *req)
{
    BDRVQuorumState *s = req->bs->opaque;
    int n = 0;

    for (int i = 0; i < s->num_children; i++) {
        n += req->ret[i] == 0;
    }
    return n;
}

/* The error most children failed with (the first of equal counts). */
static int quorum_vote_error(QuorumRequest *req)
{
    BDRVQuorumState *s = req->bs->opaque;
    int best = 0, best_count = 0;

    for (int i = 0; i < s->num_children; i++) {
        int count = 0;

        if (!req->ret[i]) {
            continue;
        }
        for (int j = 0; j < s->num_children; j++) {
            count += req->ret[j] == req->ret[i];
        }
        if (count > best_count) {
            best = req->ret[i];
            best_count = count;
        }
    }
    return best;
}

/* Fewer than threshold children succeeded: the request fails. */
static bool quorum_too_many_failed(QuorumRequest *req, int *ret)
{
    BDRVQuorumState *s = req->bs->opaque;

    if (quorum_success_count(req) >= s->threshold) {
        return false;
    }
    *ret = quorum_vote_error(req);
    quorum_report_failure(req);
    return true;
}

static bool quorum_same(QuorumRequest *req, int a, int b)
{
    return !memcmp(req->bufs[a], req->bufs[b], req->bytes);
}

/* blkverify mode: the two children must agree, or the process stops. */
static void quorum_blkverify_check(QuorumRequest *req)
{
    ssize_t pos = qemu_iovec_compare(&req->qiovs[0], &req->qiovs[1]);

    if (pos >= 0) {
        fprintf(stderr, "quorum: offset=%" PRId64 " bytes=%" PRId64
                " contents mismatch at offset %" PRId64 "\n",
                req->offset, req->bytes, req->offset + pos);
        /* as blkverify_fail(): QEMU's exit, without exit handlers */
        fflush(NULL);
        _exit(1);
    }
}

/* Writes the winning content @winner back to the children that differ. */
static void coroutine_fn quorum_rewrite(QuorumRequest *req, int winner)
{
    BDRVQuorumState *s = req->bs->opaque;

    for (int i = 0; i < s->num_children; i++) {
        if (!req->ret[i] && !quorum_same(req, i, winner)) {
            /* QEMU ignores the result: the next read votes again */
            bdrv_co_pwritev(s->children[i], req->offset, req->bytes,
                            &req->qiovs[winner], 0);
        }
    }
}

/*
 * The vote over the children that read without an error: the content
 * most of them returned wins if at least threshold did (ties: the
 * content of the later child, as QEMU's); the others are reported.
 */
static int coroutine_fn quorum_vote(QuorumRequest *req)
{
    BDRVQuorumState *s = req->bs->opaque;
    int winner = -1, winner_votes = 0;

    if (s->is_blkverify) {
        quorum_blkverify_check(req);
    }
    for (int i = s->num_children - 1; i >= 0; i--) {
        int votes = 0;

        if (req->ret[i]) {
            continue;
        }
        for (int j = 0; j < s->num_children; j++) {
            votes += !req->ret[j] && quorum_same(req, i, j);
        }
        if (votes > winner_votes) {
            winner = i;
            winner_votes = votes;
        }
    }
    assert(winner >= 0);
    if (winner_votes < s->threshold) {
        quorum_report_failure(req);
        return -EIO;
    }
    qemu_iovec_from_buf(req->qiov, 0, req->bufs[winner], req->bytes);
    for (int i = 0; i < s->num_children; i++) {
        if (!req->ret[i] && !quorum_same(req, i, winner)) {
            quorum_report_bad(QUORUM_OP_READ, req->offset, req->bytes,
                              bdrv_get_node_name(s->children[i]->bs), 0);
        }
    }
    if (s->rewrite_corrupted) {
        quorum_rewrite(req, winner);
    }
    return 0;
}

static int coroutine_fn quorum_read_all(QuorumRequest *req)
{
    BDRVQuorumState *s = req->bs->opaque;
    g_autofree int *rets = g_new0(int, s->num_children);
    int ret;

    req->ret = rets;
    req->bufs = g_new0(uint8_t *, s->num_children);
    req->qiovs = g_new0(QEMUIOVector, s->num_children);
    for (int i = 0; i < s->num_children; i++) {
        req->bufs[i] = qemu_blockalign(s->children[i]->bs, req->bytes);
        qemu_iovec_init_buf(&req->qiovs[i], req->bufs[i], req->bytes);
    }
    quorum_run_children(req);
    if (!quorum_too_many_failed(req, &ret)) {
        ret = quorum_vote(req);
    }
    for (int i = 0; i < s->num_children; i++) {
        qemu_vfree(req->bufs[i]);
    }
    g_free(req->bufs);
    g_free(req->qiovs);
    return ret;
}

/* Writes (or zeroes) on every child; fewer than threshold successes fail. */
static int coroutine_fn quorum_write_all(QuorumRequest *req)
{
    BDRVQuorumState *s = req->bs->opaque;
    g_autofree int *rets = g_new0(int, s->num_children);
    int ret = 0;

    req->ret = rets;
    quorum_run_children(req);
    quorum_too_many_failed(req, &ret);
    return ret;
}

/* read-pattern=fifo: the first child that reads without an error. */
static int coroutine_fn quorum_read_fifo(QuorumRequest *req)
{
    BDRVQuorumState *s = req->bs->opaque;
    int ret = -EIO;

    for (int i = 0; i < s->num_children; i++) {
        ret = bdrv_co_preadv(s->children[i], req->offset, req->bytes,
                             req->qiov, 0);
        if (ret >= 0) {
            break;
        }
        quorum_report_bad(QUORUM_OP_READ, req->offset, req->bytes,
                          bdrv_get_node_name(s->children[i]->bs), ret);
    }
    return ret;
}

static int coroutine_fn quorum_co_preadv(BlockDriverState *bs,
                                         int64_t offset, int64_t bytes,
                                         QEMUIOVector *qiov,
                                         BdrvRequestFlags flags)
{
    BDRVQuorumState *s = bs->opaque;
    QuorumRequest req = {
        .bs = bs, .offset = offset, .bytes = bytes, .qiov = qiov,
        .is_read = true,
    };

    if (s->read_pattern == QUORUM_READ_PATTERN_FIFO) {
        return quorum_read_fifo(&req);
    }
    return quorum_read_all(&req);
}

static int coroutine_fn quorum_co_pwritev(BlockDriverState *bs,
                                          int64_t offset, int64_t bytes,
                                          QEMUIOVector *qiov,
                                          BdrvRequestFlags flags)
{
    QuorumRequest req = {
        .bs = bs, .offset = offset, .bytes = bytes, .qiov = qiov,
        .flags = flags,
    };

    return quorum_write_all(&req);
}

static int coroutine_fn quorum_co_pwrite_zeroes(BlockDriverState *bs,
                                                int64_t offset,
                                                int64_t bytes,
                                                BdrvRequestFlags flags)
{
    return quorum_co_pwritev(bs, offset, bytes, NULL,
                             flags | BDRV_REQ_ZERO_WRITE);
}

/*
 * Every child in turn; enough successes win, else the error most
 * children returned (QEMU's).
 */
static int coroutine_fn quorum_co_flush(BlockDriverState *bs)
{
    BDRVQuorumState *s = bs->opaque;
    g_autofree int *rets = g_new0(int, s->num_children);
    QuorumRequest req = { .bs = bs, .ret = rets };

    for (int i = 0; i < s->num_children; i++) {
        rets[i] = bdrv_co_flush(s->children[i]->bs);
        if (rets[i] < 0) {
            quorum_report_bad(QUORUM_OP_FLUSH, 0, 0,
                              bdrv_get_node_name(s->children[i]->bs),
                              rets[i]);
        }
    }
    return quorum_success_count(&req) >= s->threshold ? 0 :
           quorum_vote_error(&req);
}

/*
 * Zero where every child reads zeroes through its whole chain, else
 * data, with no offset: the data is no single child's (QEMU's).  A
 * child that fails is reported and the range counts as data.
 */
static int coroutine_fn quorum_co_block_status(BlockDriverState *bs,
                                               bool want_zero,
                                               int64_t offset, int64_t bytes,
                                               int64_t *pnum, int64_t *map,
                                               BlockDriverState **file)
{
    BDRVQuorumState *s = bs->opaque;
    int64_t zero_bytes = bytes, data_bytes = 0;

    for (int i = 0; i < s->num_children; i++) {
        int64_t n;
        int ret = bdrv_co_block_status_above(s->children[i]->bs, NULL,
                                             want_zero, offset, bytes, &n,
                                             NULL, NULL, NULL);

        if (ret < 0) {
            quorum_report_bad(QUORUM_OP_READ, offset, bytes,
                              bdrv_get_node_name(s->children[i]->bs), ret);
            data_bytes = bytes;
            break;
        }
        if (ret & BDRV_BLOCK_ZERO) {
            zero_bytes = MIN(zero_bytes, n);
        } else {
            zero_bytes = 0;
        }
        if (ret & BDRV_BLOCK_DATA) {
            data_bytes = MAX(data_bytes, n);
        }
    }
    if (zero_bytes) {
        *pnum = zero_bytes;
        return BDRV_BLOCK_ZERO;
    }
    *pnum = data_bytes ? data_bytes : bytes;
    return BDRV_BLOCK_DATA;
}

/* All children must be as long as the first. */
static int64_t quorum_getlength(BlockDriverState *bs)
{
    BDRVQuorumState *s = bs->opaque;
    int64_t len = bdrv_getlength(s->children[0]->bs);

    for (int i = 1; len >= 0 && i < s->num_children; i++) {
        int64_t other = bdrv_getlength(s->children[i]->bs);

        if (other < 0) {
            return other;
        }
        if (other != len) {
            return -EIO;
        }
    }
    return len;
}

/* How many children.N the options give, N counting from 0. */
static int quorum_count_children(QDict *options)
{
    int n = 0;

    for (;; n++) {
        g_autofree char *key = g_strdup_printf("children.%d", n);
        g_autofree char *prefix = g_strdup_printf("children.%d.", n);

        if (!qdict_haskey(options, key) &&
            !qdict_has_prefixed_entries(options, prefix)) {
            return n;
        }
    }
}

/* The options; QEMU's checks and messages (invariant 1). */
static int quorum_parse_options(BDRVQuorumState *s, QDict *options,
                                Error **errp)
{
    QemuOpts *opts;
    const char *pattern;
    int ret = -EINVAL;

    opts = qemu_opts_absorb_qdict(&qapi_opts_quorum_runtime, options, errp);
    if (!opts) {
        return -EINVAL;
    }
    pattern = qemu_opt_get(opts, "read-pattern");
    if (!pattern || !strcmp(pattern, "quorum")) {
        s->read_pattern = QUORUM_READ_PATTERN_QUORUM;
    } else if (!strcmp(pattern, "fifo")) {
        s->read_pattern = QUORUM_READ_PATTERN_FIFO;
    } else {
        error_setg(errp, "Please set read-pattern as fifo or quorum");
        goto out;
    }
    s->threshold = qemu_opt_get_number(opts, "vote-threshold", 0);
    if (s->threshold < 1) {
        error_setg(errp, "Parameter 'vote-threshold' expects a value >= 1");
        goto out;
    }
    if (s->threshold > s->num_children) {
        error_setg(errp, "threshold may not exceed children count");
        goto out;
    }
    if (s->read_pattern == QUORUM_READ_PATTERN_FIFO) {
        ret = 0;
        goto out;
    }
    if (qemu_opt_get_bool(opts, "blkverify", false)) {
        if (s->num_children != 2 || s->threshold != 2) {
            error_setg(errp, "blkverify=on can only be set if there are "
                       "exactly two files and vote-threshold is 2");
            goto out;
        }
        s->is_blkverify = true;
    }
    s->rewrite_corrupted = qemu_opt_get_bool(opts, "rewrite-corrupted",
                                             false);
    if (s->rewrite_corrupted && s->is_blkverify) {
        error_setg(errp, "rewrite-corrupted=on cannot be used with "
                   "blkverify=on");
        goto out;
    }
    ret = 0;
out:
    qemu_opts_del(opts);
    return ret;
}

static void quorum_close(BlockDriverState *bs)
{
    BDRVQuorumState *s = bs->opaque;

    for (int i = 0; i < s->num_children; i++) {
        if (s->children[i]) {
            bdrv_unref_child(bs, s->children[i]);
        }
    }
    g_free(s->children);
    s->children = NULL;
    s->num_children = 0;
}

static int quorum_open(BlockDriverState *bs, QDict *options, int flags,
                       Error **errp)
{
    BDRVQuorumState *s = bs->opaque;
    int n = quorum_count_children(options);
    int64_t len;
    int ret;

    if (n < 1) {
        error_setg(errp, "Number of provided children must be 1 or more");
        return -EINVAL;
    }
    s->num_children = n;
    ret = quorum_parse_options(s, options, errp);
    if (ret < 0) {
        s->num_children = 0;
        return ret;
    }
    s->children = g_new0(BdrvChild *, n);
    for (int i = 0; i < n; i++) {
        g_autofree char *name = g_strdup_printf("children.%d", i);

        s->children[i] = bdrv_open_child(NULL, options, name, bs,
                                         BDRV_CHILD_OPEN_PROBE_FORMAT, errp);
        if (!s->children[i]) {
            quorum_close(bs);
            return -EINVAL;
        }
    }
    s->next_child_index = n;
    /* QEMU's open finds the length here, and its message */
    len = quorum_getlength(bs);
    if (len < 0) {
        error_setg_errno(errp, -len, "Could not refresh total sector count");
        quorum_close(bs);
        return len;
    }
    bs->supported_write_flags = BDRV_REQ_WRITE_UNCHANGED;
    bs->supported_zero_flags = BDRV_REQ_WRITE_UNCHANGED;
    return 0;
}

static int quorum_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    /* the children and the vote stay as they were opened */
    return 0;
}

/* Invariant 4; the generic checks are bdrv_add_child()'s. */
static void quorum_add_child(BlockDriverState *bs, BlockDriverState *child_bs,
                             Error **errp)
{
    BDRVQuorumState *s = bs->opaque;
    g_autofree char *name = NULL;
    int64_t len, child_len;
    BdrvChild *child;

    if (s->is_blkverify) {
        error_setg(errp, "Cannot add a child to a quorum in blkverify mode");
        return;
    }
    /*
     * QEMU adds a child of another length, and the quorum's length can no
     * longer be read (every request to it fails here): refused instead.
     */
    len = bdrv_getlength(bs);
    child_len = bdrv_getlength(child_bs);
    if (len >= 0 && child_len >= 0 && child_len != len) {
        error_setg(errp, "Cannot add '%s' to quorum '%s': its length (%"
                   PRId64 " bytes) differs from the quorum's (%" PRId64
                   " bytes)", bdrv_get_node_name(child_bs),
                   bdrv_get_node_name(bs), child_len, len);
        return;
    }
    name = g_strdup_printf("children.%u", s->next_child_index);
    /* the edge takes a reference of its own: the node stays named */
    bdrv_ref(child_bs);
    child = bdrv_attach_child(bs, child_bs, name, false, errp);
    if (!child) {
        return;
    }
    s->children = g_renew(BdrvChild *, s->children, s->num_children + 1);
    s->children[s->num_children++] = child;
    s->next_child_index++;
}

static void quorum_del_child(BlockDriverState *bs, BdrvChild *child,
                             Error **errp)
{
    BDRVQuorumState *s = bs->opaque;
    g_autofree char *last = NULL;
    int i;

    /* invariant 1; blkverify mode has as many children as its threshold */
    if (s->num_children <= s->threshold) {
        error_setg(errp, "The number of children cannot be lower than the "
                   "vote threshold %d", s->threshold);
        return;
    }
    for (i = 0; s->children[i] != child; i++) {
        assert(i + 1 < s->num_children);
    }
    last = g_strdup_printf("children.%u", s->next_child_index - 1);
    if (!strcmp(child->name, last)) {
        s->next_child_index--;
    }
    memmove(&s->children[i], &s->children[i + 1],
            (s->num_children - i - 1) * sizeof(s->children[0]));
    s->num_children--;
    bdrv_unref_child(bs, child);
}

static const char *const quorum_strong_runtime_opts[] = {
    "vote-threshold", "blkverify", "rewrite-corrupted", "read-pattern",
    NULL,
};

static const BlockDriver bdrv_quorum = {
    .format_name                    = "quorum",
    .instance_size                  = sizeof(BDRVQuorumState),
    /* as QEMU's: no protocol, so block status shows no offsets */
    .is_format                      = true,
    .runtime_opts                   = &qapi_opts_quorum_runtime,
    .strong_runtime_opts            = quorum_strong_runtime_opts,
    .bdrv_open                      = quorum_open,
    .bdrv_close                     = quorum_close,
    .bdrv_reopen_prepare            = quorum_reopen_prepare,
    .bdrv_add_child                 = quorum_add_child,
    .bdrv_del_child                 = quorum_del_child,
    .bdrv_getlength                 = quorum_getlength,
    .bdrv_co_preadv                 = quorum_co_preadv,
    .bdrv_co_pwritev                = quorum_co_pwritev,
    .bdrv_co_pwrite_zeroes          = quorum_co_pwrite_zeroes,
    .bdrv_co_flush                  = quorum_co_flush,
    .bdrv_co_block_status           = quorum_co_block_status,
};

block_init(bdrv_register, bdrv_quorum)
