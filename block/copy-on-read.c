/*
 * copy-on-read: a filter that copies into its child what a read finds
 * only in the child's backing chain, so that the next read finds it in
 * the child itself (QEMU's "copy-on-read" driver).
 *
 * The copy is done by the generic layer at the child (block/io.c, for
 * reads flagged BDRV_REQ_COPY_ON_READ): it serialises the read against
 * overlapping writes, reads whole clusters, writes them back as
 * BDRV_REQ_WRITE_UNCHANGED and leaves ranges the child already has alone.
 * This file decides which reads carry the flag and asks for the
 * permission the copy needs.
 *
 * Invariants (s = the node's BDRVCopyOnReadState):
 *  1. The node asks its child for BLK_PERM_WRITE_UNCHANGED whenever it is
 *     active, so a read-only child refuses the filter at open ("Block node
 *     is read-only"), as QEMU does, instead of silently not copying.
 *  2. s->bottom is NULL or a non-filter node this node holds a reference
 *     to until close.  With s->bottom set, a read is flagged only where
 *     the data comes from a layer at or above s->bottom: what lies below
 *     it is read through, never copied (the "bottom" option of QEMU 7.2,
 *     used by block-stream to stop at a base).
 *  3. Writes, zero writes and discards reach the child unchanged, flags
 *     included, so the child's zero and discard semantics are the
 *     filter's.
 *
 * Nothing here changes after open: no lock.
 */

#include "block/block_int.h"
#include "qapi/qapi-opts.h"

typedef struct BDRVCopyOnReadState {
    /* --- set at open, immutable until close --- */
    BlockDriverState *bottom;   /* invariant 2 */
} BDRVCopyOnReadState;

/* What the parents' use of this node means for the child, and the rest. */
#define COR_PERM_PASSTHROUGH \
    (BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE | BLK_PERM_RESIZE)
#define COR_PERM_UNCHANGED (BLK_PERM_ALL & ~(BLK_PERM_WRITE | BLK_PERM_RESIZE))

/* Looks up the "bottom" node and checks it as QEMU does (invariant 2). */
static int cor_open_bottom(BDRVCopyOnReadState *s, const char *name,
                           Error **errp)
{
    BlockDriverState *bottom = bdrv_find_node(name);

    if (!bottom) {
        error_setg(errp, "Bottom node '%s' not found", name);
        return -EINVAL;
    }
    if (!bottom->drv) {
        error_setg(errp, "Bottom node '%s' not opened", name);
        return -EINVAL;
    }
    if (bottom->drv->is_filter) {
        error_setg(errp, "Bottom node '%s' is a filter", name);
        return -EINVAL;
    }
    bdrv_ref(bottom);
    s->bottom = bottom;
    return 0;
}

static int cor_open(BlockDriverState *bs, QDict *options, int flags,
                    Error **errp)
{
    BDRVCopyOnReadState *s = bs->opaque;
    g_autofree char *bottom = NULL;
    QemuOpts *opts;
    int ret;

    opts = qemu_opts_absorb_qdict(&qapi_opts_copy_on_read_runtime, options,
                                  errp);
    if (!opts) {
        return -EINVAL;
    }
    bottom = g_strdup(qemu_opt_get(opts, "bottom"));
    qemu_opts_del(opts);

    bs->file = bdrv_open_child(NULL, options, "file", bs, 0,
                               errp);
    if (!bs->file) {
        return -EINVAL;
    }
    if (bottom) {
        ret = cor_open_bottom(s, bottom, errp);
        if (ret < 0) {
            bdrv_unref_child(bs, bs->file);
            bs->file = NULL;
            return ret;
        }
    }

    bdrv_inherit_file_flags(bs);
    return 0;
}

static void cor_close(BlockDriverState *bs)
{
    BDRVCopyOnReadState *s = bs->opaque;

    if (s->bottom) {
        bdrv_unref(s->bottom);
        s->bottom = NULL;
    }
}

static int cor_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    /* "bottom" stays as it was opened; nothing to stage. */
    return 0;
}

/* Invariant 1. */
static void cor_child_perm(BlockDriverState *bs, BdrvChild *c,
                           uint64_t perm, uint64_t shared,
                           uint64_t *nperm, uint64_t *nshared)
{
    *nperm = perm & COR_PERM_PASSTHROUGH;
    *nshared = (shared & COR_PERM_PASSTHROUGH) | COR_PERM_UNCHANGED;
    /* an inactive node (incoming migration) must not write at all */
    if (!(bs->open_flags & BDRV_O_INACTIVE)) {
        *nperm |= BLK_PERM_WRITE_UNCHANGED;
    }
}

/*
 * How many bytes from @offset (at most @bytes) read alike, and whether
 * they are to be copied (invariant 2): 1 yes, 0 no, or -errno.
 */
static int coroutine_fn cor_should_copy(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, int64_t *pnum)
{
    BDRVCopyOnReadState *s = bs->opaque;
    int ret;

    if (!s->bottom) {
        *pnum = bytes;
        return 1;
    }
    assert(!s->bottom->drv->is_filter);     /* invariant 2 */
    /* the status above the layer below bottom includes bottom itself */
    ret = bdrv_co_block_status_above(bs->file->bs,
                                     bdrv_backing_chain_next(s->bottom),
                                     false, offset, bytes, pnum, NULL, NULL,
                                     NULL);
    if (ret < 0) {
        return ret;
    }
    return !!(ret & BDRV_BLOCK_ALLOCATED);
}

/* One piece of a read; @opaque points to the request's flags. */
static int64_t coroutine_fn cor_read_piece(BlockDriverState *bs,
                                           int64_t offset, int64_t bytes,
                                           QEMUIOVector *qiov, size_t done,
                                           void *opaque)
{
    BdrvRequestFlags f = *(BdrvRequestFlags *)opaque & ~BDRV_REQ_COPY_ON_READ;
    int64_t n;
    int ret = cor_should_copy(bs, offset, bytes, &n);

    if (ret < 0) {
        return ret;
    }
    if (ret) {
        f |= BDRV_REQ_COPY_ON_READ;
    }
    ret = bdrv_co_preadv_part(bs->file, offset, n, qiov, done, f);
    return ret < 0 ? ret : n;
}

static int coroutine_fn cor_co_preadv(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      BdrvRequestFlags flags)
{
    return bdrv_co_each_piece(bs, offset, bytes, qiov, cor_read_piece,
                              &flags);
}

static const BlockDriver bdrv_copy_on_read = {
    .format_name                    = "copy-on-read",
    .instance_size                  = sizeof(BDRVCopyOnReadState),
    /* opened as QEMU opens filters: a filename names the file child */
    .is_format                      = true,
    .is_filter                      = true,
    .runtime_opts                   = &qapi_opts_copy_on_read_runtime,
    .bdrv_open                      = cor_open,
    .bdrv_close                     = cor_close,
    .bdrv_reopen_prepare            = cor_reopen_prepare,
    .bdrv_child_perm                = cor_child_perm,
    .bdrv_getlength                 = bdrv_filter_getlength,
    .bdrv_co_preadv                 = cor_co_preadv,
    /* invariant 3: the write paths pass through */
    .bdrv_co_pwritev                = bdrv_filter_co_pwritev,
    .bdrv_co_pwrite_zeroes          = bdrv_filter_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = bdrv_filter_co_pdiscard,
    .bdrv_co_pwritev_compressed     = bdrv_filter_co_pwritev_compressed,
    .bdrv_co_truncate               = bdrv_filter_co_truncate,
};

block_init(bdrv_register, bdrv_copy_on_read)
