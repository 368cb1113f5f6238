/*
 * Reopen: changing the flags and options of an open node (and of the
 * children that inherit them) as one transaction.  Every driver in the
 * queue prepares (and may refuse) first; then the new permissions are
 * checked for the whole subtree; only then does each driver commit, or
 * each prepared driver abort, so that a refused reopen leaves every node
 * as it was.  The node is drained throughout: no request sees a node half
 * switched.
 *
 * All of this runs in the main loop thread outside coroutine context.
 */
#include "block/block_int.h"
#include "block-internal.h"

/* One node of a reopen transaction. */
typedef struct BdrvReopenEntry {
    BDRVReopenState state;
    BdrvCommonOpts common;
    /* the node's own options as they will be after the commit */
    QDict *new_options;
    /* a bad common option, found when the entry was queued */
    Error *queue_err;
    int old_flags;
    bool old_read_only;
    bool prepared;
} BdrvReopenEntry;

static BdrvReopenEntry *bdrv_reopen_find(GPtrArray *queue,
                                         BlockDriverState *bs)
{
    for (guint i = 0; i < queue->len; i++) {
        BdrvReopenEntry *e = queue->pdata[i];

        if (e->state.bs == bs) {
            return e;
        }
    }
    return NULL;
}

/*
 * Queues @bs with the option changes @changes (consumed) and @flags, then
 * its non-backing children, which inherit the resulting flags as at open,
 * and its backing child if @changes has "backing.*" options.
 * The common options are absorbed here already, because the children's
 * flags depend on them; an error in them is reported by the prepare step.
 */
static void bdrv_reopen_queue_add(GPtrArray *queue, BlockDriverState *bs,
                                  QDict *changes, int flags)
{
    BdrvReopenEntry *e;
    int inheritable = BDRV_O_RDWR | BDRV_O_AUTO_RDONLY | BDRV_O_CACHE_MASK;
    g_autoptr(GPtrArray) child_changes = g_ptr_array_new();

    if (bdrv_reopen_find(queue, bs)) {
        qdict_unref(changes);
        return;
    }
    e = g_new0(BdrvReopenEntry, 1);
    e->state.bs = bs;
    e->old_flags = bs->open_flags;
    e->old_read_only = bs->read_only;
    g_ptr_array_add(queue, e);

    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;
        g_autofree char *prefix = g_strdup_printf("%s.", c->name);
        QDict *sub = NULL;

        qdict_extract_subqdict(changes, &sub, prefix);
        g_ptr_array_add(child_changes, sub);
    }

    e->state.options = qdict_clone(bs->options);
    qdict_del(e->state.options, "driver");
    qdict_join(e->state.options, changes, true);
    qdict_unref(changes);
    e->common.flags = flags;
    bdrv_absorb_common_opts(e->state.options, &e->common, &e->queue_err);
    e->state.flags = e->common.flags;

    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;
        QDict *sub = g_ptr_array_steal_index(child_changes, 0);

        /*
         * A backing file keeps its own flags (read-only, whatever its
         * overlay becomes); it is reopened only to check or apply the
         * "backing.*" options given for it.
         */
        if (c->is_backing) {
            if (qdict_size(sub) == 0) {
                qdict_unref(sub);
            } else {
                bdrv_reopen_queue_add(queue, c->bs, sub, c->bs->open_flags);
            }
            continue;
        }
        bdrv_reopen_queue_add(queue, c->bs, sub,
                              (c->bs->open_flags & ~inheritable) |
                              (e->state.flags & inheritable));
    }
}

static int bdrv_reopen_check_unchanged(BdrvReopenEntry *e, Error **errp)
{
    BlockDriverState *bs = e->state.bs;

    if (e->common.driver && strcmp(e->common.driver, bs->drv->format_name)) {
        error_setg(errp, "Cannot change the option 'driver'");
        return -EINVAL;
    }
    if (e->common.node_name && strcmp(e->common.node_name, bs->node_name)) {
        error_setg(errp, "Cannot change the option 'node-name'");
        return -EINVAL;
    }
    return 0;
}

static int bdrv_reopen_prepare(BdrvReopenEntry *e, Error **errp)
{
    BDRVReopenState *state = &e->state;
    BlockDriverState *bs = state->bs;
    const QDictEntry *left;
    int ret;

    if (e->queue_err) {
        error_propagate(errp, e->queue_err);
        e->queue_err = NULL;
        return -EINVAL;
    }
    ret = bdrv_reopen_check_unchanged(e, errp);
    if (ret < 0) {
        return ret;
    }
    e->new_options = qdict_clone(state->options);

    if (!bs->drv->bdrv_reopen_prepare) {
        error_setg(errp, "Block format '%s' used by node '%s' does not "
                   "support reopening files", bs->drv->format_name,
                   bs->node_name);
        return -ENOTSUP;
    }
    ret = bs->drv->bdrv_reopen_prepare(state, errp);
    if (ret < 0) {
        return ret;
    }
    e->prepared = true;

    /* What the driver did not take must be what the node already has. */
    for (left = qdict_first(state->options); left;
         left = qdict_next(state->options, left)) {
        const char *key = qdict_entry_key(left);

        if (!qdict_haskey(bs->options, key) ||
            g_strcmp0(qdict_get_try_str(bs->options, key),
                      qdict_entry_value(left))) {
            error_setg(errp, "Cannot change the option '%s'", key);
            return -EINVAL;
        }
    }
    return 0;
}

static void bdrv_reopen_entry_free(BdrvReopenEntry *e)
{
    error_free(e->queue_err);
    bdrv_common_opts_clear(&e->common);
    if (e->state.options) {
        qdict_unref(e->state.options);
    }
    if (e->new_options) {
        qdict_unref(e->new_options);
    }
    g_free(e);
}

/* Applies the new flags for the permission check, or takes them back. */
static void bdrv_reopen_apply_flags(GPtrArray *queue, bool apply)
{
    for (guint i = 0; i < queue->len; i++) {
        BdrvReopenEntry *e = queue->pdata[i];
        BlockDriverState *bs = e->state.bs;

        bs->open_flags = apply ? e->state.flags : e->old_flags;
        bs->read_only = apply ? !(e->state.flags & BDRV_O_RDWR)
                              : e->old_read_only;
    }
}

static int bdrv_reopen_multiple(BlockDriverState *bs, GPtrArray *queue,
                                Error **errp)
{
    BdrvPermTran tran;
    GHashTable *going_read_only;
    guint i;
    int ret = 0;

    for (i = 0; i < queue->len; i++) {
        ret = bdrv_reopen_prepare(queue->pdata[i], errp);
        if (ret < 0) {
            goto abort;
        }
    }

    going_read_only = g_hash_table_new(NULL, NULL);
    for (i = 0; i < queue->len; i++) {
        BdrvReopenEntry *e = queue->pdata[i];

        if (!e->old_read_only && !(e->state.flags & BDRV_O_RDWR)) {
            g_hash_table_add(going_read_only, e->state.bs);
        }
    }
    bdrv_reopen_apply_flags(queue, true);
    ret = bdrv_perm_check(bs, going_read_only, &tran, errp);
    g_hash_table_unref(going_read_only);
    if (ret < 0) {
        bdrv_reopen_apply_flags(queue, false);
        goto abort;
    }

    for (i = 0; i < queue->len; i++) {
        BdrvReopenEntry *e = queue->pdata[i];
        BlockDriverState *n = e->state.bs;

        if (n->drv->bdrv_reopen_commit) {
            n->drv->bdrv_reopen_commit(&e->state);
        }
        n->detect_zeroes = e->common.detect_zeroes;
        n->force_share = e->common.force_share;
        bdrv_store_own_options(n, e->new_options);
    }
    /* the drivers switched to their new state: now they take the perms */
    bdrv_perm_commit(&tran);
    for (i = queue->len; i > 0; i--) {
        BdrvReopenEntry *e = queue->pdata[i - 1];

        bdrv_refresh_limits(e->state.bs);
    }
    for (i = 0; i < queue->len; i++) {
        BlockDriverState *n = ((BdrvReopenEntry *)queue->pdata[i])->state.bs;

        if (n->drv->bdrv_reopen_commit_post) {
            n->drv->bdrv_reopen_commit_post(n);
        }
    }
    bdrv_refresh_filename(bs);
    return 0;

abort:
    for (i = 0; i < queue->len; i++) {
        BdrvReopenEntry *e = queue->pdata[i];
        BlockDriverState *n = e->state.bs;

        if (e->prepared && n->drv->bdrv_reopen_abort) {
            n->drv->bdrv_reopen_abort(&e->state);
        }
    }
    return ret;
}

int bdrv_reopen(BlockDriverState *bs, QDict *opts, int flags, Error **errp)
{
    g_autoptr(GPtrArray) queue = g_ptr_array_new_with_free_func(
        (GDestroyNotify)bdrv_reopen_entry_free);
    int ret;

    /* no request may see a node half switched */
    bdrv_drained_begin(bs);
    bdrv_reopen_queue_add(queue, bs, opts ?: qdict_new(), flags);
    ret = bdrv_reopen_multiple(bs, queue, errp);
    bdrv_drained_end(bs);
    return ret;
}

int bdrv_reopen_set_read_only(BlockDriverState *bs, bool read_only,
                              Error **errp)
{
    int flags = bs->open_flags;

    if (bs->read_only == read_only) {
        return 0;
    }
    flags = read_only ? (flags & ~BDRV_O_RDWR) : (flags | BDRV_O_RDWR);
    return bdrv_reopen(bs, NULL, flags, errp);
}
