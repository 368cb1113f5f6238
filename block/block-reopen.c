/*
 * Reopen: changing the flags and options of an open node (and of the
 * children that inherit them) as one transaction.  Every driver in the
 * queue prepares (and may refuse) first; then the new permissions are
 * checked for the whole subtree; only then does each driver commit, or
 * each prepared driver abort, so that a refused reopen leaves every node
 * as it was.  The node is drained throughout: no request sees a node half
 * switched.
 *
 * blockdev-reopen's rules of which nodes are queued with which options,
 * and which children they are to have, are in block-reopen-opts.c; the
 * transaction that applies them, child edges moved included, is here.
 *
 * Invariants:
 *  1. A child edge that a reopen points at another node is moved before
 *     the permission check of the new graph and moved back if anything
 *     fails; the node it pointed at keeps a reference until the commit,
 *     so that nothing is freed in a reopen that is undone.
 *  2. No node is below itself: a new child that has the parent in its
 *     subtree is refused before anything moves.
 *  3. Every node of the queue is drained and holds a reference from the
 *     start of the transaction to its end.
 *
 * All of this runs in the main loop thread outside coroutine context.
 */
#include "block-reopen-int.h"

BdrvReopenEntry *bdrv_reopen_find(GPtrArray *queue, BlockDriverState *bs)
{
    for (guint i = 0; i < queue->len; i++) {
        BdrvReopenEntry *e = queue->pdata[i];

        if (e->state.bs == bs) {
            return e;
        }
    }
    return NULL;
}

BdrvReopenEntry *bdrv_reopen_entry_new(GPtrArray *queue, BlockDriverState *bs)
{
    BdrvReopenEntry *e = g_new0(BdrvReopenEntry, 1);

    e->state.bs = bs;
    e->old_flags = bs->open_flags;
    e->old_read_only = bs->read_only;
    bdrv_ref(bs);               /* invariant 3 */
    g_ptr_array_add(queue, e);
    return e;
}

/*
 * The common options are absorbed here already, because the children's
 * flags depend on them; an error in them is reported by the prepare step.
 */
void bdrv_reopen_queue_add(GPtrArray *queue, BlockDriverState *bs,
                           QDict *changes, int flags)
{
    BdrvReopenEntry *e;
    int inheritable = BDRV_REOPEN_INHERITABLE;
    g_autoptr(GPtrArray) child_changes = g_ptr_array_new();

    if (bdrv_reopen_find(queue, bs)) {
        qdict_unref(changes);
        return;
    }
    e = bdrv_reopen_entry_new(queue, bs);

    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;
        g_autofree char *prefix = g_strdup_printf("%s.", c->name);
        QDict *sub = NULL;

        qdict_extract_subqdict(changes, &sub, prefix);
        g_ptr_array_add(child_changes, sub);
    }

    e->state.options = qdict_clone(bs->options);
    qdict_del(e->state.options, "driver");
    if (bs->drv->bdrv_join_options) {
        bs->drv->bdrv_join_options(changes, e->state.options);
    }
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

bool bdrv_reopen_is_below(BlockDriverState *top, BlockDriverState *bs)
{
    if (top == bs) {
        return true;
    }
    for (GList *l = top->children; l; l = l->next) {
        BdrvChild *c = l->data;

        if (bdrv_reopen_is_below(c->bs, bs)) {
            return true;
        }
    }
    return false;
}

/* Invariant 1: moves @c to @to (reference included), permissions aside. */
static void bdrv_reopen_move_edge(BdrvChild *c, BlockDriverState *to)
{
    bdrv_ref(to);
    c->bs->parents = g_list_remove(c->bs->parents, c);
    to->parents = g_list_append(to->parents, c);
    c->bs = to;
}

/*
 * Invariant 1.  A backing edge that is to go stays until the commit: its
 * leaving only releases permissions.  A new backing edge is attached,
 * which checks its own permissions.
 */
int bdrv_reopen_apply_swap(BdrvReopenEntry *e, int which, Error **errp)
{
    BlockDriverState *bs = e->state.bs;
    BdrvReopenSwap *sw = &e->swaps[which];
    BdrvChild *old = which == BDRV_REOPEN_BACKING ? bs->backing : bs->file;

    if (!sw->new_bs) {
        return 0;
    }
    if (old) {
        sw->old_bs = old->bs;   /* the edge's reference, now ours */
        sw->edge = old;
        bdrv_reopen_move_edge(old, sw->new_bs);
        return 0;
    }
    bdrv_ref(sw->new_bs);
    sw->edge = bdrv_attach_child(bs, sw->new_bs, "backing", true, errp);
    if (!sw->edge) {
        return -EPERM;
    }
    sw->added = true;
    return 0;
}

static int bdrv_reopen_check_unchanged(BdrvReopenEntry *e, Error **errp)
{
    BlockDriverState *bs = e->state.bs;

    if (e->explicit_options && e->common.force_share != bs->force_share) {
        error_setg(errp, "Cannot change the option 'force-share'");
        return -EINVAL;
    }

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
    g_autoptr(GPtrArray) left = NULL;
    int ret;

    if (e->queue_err) {
        error_propagate(errp, e->queue_err);
        e->queue_err = NULL;
        return -EINVAL;
    }
    ret = bdrv_reopen_check_unchanged(e, errp);
    if (ret == 0 && e->explicit_options && bs->explicit_options) {
        ret = bdrv_reopen_check_reset(e, errp);
    }
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
    if (e->explicit_options) {
        ret = bdrv_reopen_prepare_children(e, errp);
        if (ret < 0) {
            return ret;
        }
    }

    /* What the driver did not take must be what the node already has. */
    left = bdrv_reopen_keys_in_qemu_order(state->options);
    for (guint i = 0; i < left->len; i++) {
        const char *key = left->pdata[i];

        if (!qdict_haskey(bs->options, key) ||
            g_strcmp0(qdict_get_try_str(bs->options, key),
                      qdict_get_try_str(state->options, key))) {
            error_setg(errp, "Cannot change the option '%s'", key);
            return -EINVAL;
        }
    }
    return 0;
}

static void bdrv_reopen_entry_free(BdrvReopenEntry *e)
{
    /* invariant 1: every edge moved was committed or moved back */
    for (int i = 0; i < BDRV_REOPEN_SWAPS; i++) {
        assert(!e->swaps[i].old_bs);
    }
    bdrv_unref(e->state.bs);    /* invariant 3 */
    if (e->explicit_options) {
        qdict_unref(e->explicit_options);
    }
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

/* Undoes every bdrv_reopen_apply_swap() of the queue, last first. */
static void bdrv_reopen_undo_swaps(GPtrArray *queue)
{
    for (guint i = queue->len; i > 0; i--) {
        BdrvReopenEntry *e = queue->pdata[i - 1];

        for (int w = BDRV_REOPEN_SWAPS; w > 0; w--) {
            BdrvReopenSwap *sw = &e->swaps[w - 1];
            BlockDriverState *new_bs = sw->edge ? sw->edge->bs : NULL;

            if (sw->added) {
                bdrv_unref_child(e->state.bs, sw->edge);
            } else if (sw->old_bs) {
                new_bs->parents = g_list_remove(new_bs->parents, sw->edge);
                sw->old_bs->parents = g_list_append(sw->old_bs->parents,
                                                    sw->edge);
                sw->edge->bs = sw->old_bs;
                sw->old_bs = NULL;
                bdrv_refresh_perms(new_bs, NULL);
                bdrv_unref(new_bs);
            }
            sw->added = false;
            sw->edge = NULL;
        }
    }
}

/* The nodes left behind let go of what they no longer need. */
static void bdrv_reopen_commit_swaps(BdrvReopenEntry *e)
{
    BlockDriverState *bs = e->state.bs;

    for (int w = 0; w < BDRV_REOPEN_SWAPS; w++) {
        BdrvReopenSwap *sw = &e->swaps[w];
        BlockDriverState *old_bs = sw->old_bs;

        if (sw->requested && !sw->new_bs && bs->backing) {
            bdrv_unref_child(bs, bs->backing);
        }
        if (!old_bs) {
            continue;
        }
        sw->old_bs = NULL;
        if (old_bs->inherits_from == bs) {
            old_bs->inherits_from = NULL;
        }
        /* only less than before: nothing can conflict */
        bdrv_refresh_perms(old_bs, NULL);
        bdrv_unref(old_bs);
    }
}

/* Checks the subtree of @bs as one more part of @trans. */
static int bdrv_reopen_check_subtree(BlockDriverState *bs,
                                     GHashTable *going_read_only,
                                     GArray *trans, Error **errp)
{
    BdrvPermTran tran;

    if (bdrv_perm_check(bs, going_read_only, &tran, errp) < 0) {
        while (trans->len) {
            bdrv_perm_abort(&g_array_index(trans, BdrvPermTran,
                                           trans->len - 1));
            g_array_set_size(trans, trans->len - 1);
        }
        return -EPERM;
    }
    g_array_append_val(trans, tran);
    return 0;
}

/* Is @bs below another node of the queue than itself? */
static bool bdrv_reopen_below_other(GPtrArray *queue, BlockDriverState *bs)
{
    for (guint j = 0; j < queue->len; j++) {
        BdrvReopenEntry *o = queue->pdata[j];

        if (o->state.bs != bs && bdrv_reopen_is_below(o->state.bs, bs)) {
            return true;
        }
    }
    return false;
}

/*
 * Invariant 1 of block-perm.c for every subtree the reopen touched: first
 * the nodes that lost a parent, whose demands on their children shrink,
 * then the queue's nodes that are below no other of them.  All are
 * committed, or none.
 */
static int bdrv_reopen_check_perms(GPtrArray *queue, GArray *trans,
                                   Error **errp)
{
    g_autoptr(GHashTable) going_read_only = g_hash_table_new(NULL, NULL);
    guint i;

    for (i = 0; i < queue->len; i++) {
        BdrvReopenEntry *e = queue->pdata[i];

        if (!e->old_read_only && !(e->state.flags & BDRV_O_RDWR)) {
            g_hash_table_add(going_read_only, e->state.bs);
        }
    }
    for (i = 0; i < queue->len; i++) {
        BdrvReopenEntry *e = queue->pdata[i];

        for (int w = 0; w < BDRV_REOPEN_SWAPS; w++) {
            if (e->swaps[w].old_bs &&
                bdrv_reopen_check_subtree(e->swaps[w].old_bs,
                                          going_read_only, trans,
                                          errp) < 0) {
                return -EPERM;
            }
        }
    }
    for (i = 0; i < queue->len; i++) {
        BlockDriverState *bs = ((BdrvReopenEntry *)queue->pdata[i])->state.bs;

        if (!bdrv_reopen_below_other(queue, bs) &&
            bdrv_reopen_check_subtree(bs, going_read_only, trans,
                                      errp) < 0) {
            return -EPERM;
        }
    }
    return 0;
}

static int bdrv_reopen_multiple(GPtrArray *queue, Error **errp)
{
    g_autoptr(GArray) trans = g_array_new(false, false,
                                          sizeof(BdrvPermTran));
    guint i;
    int ret = 0;

    for (i = 0; i < queue->len; i++) {
        ret = bdrv_reopen_prepare(queue->pdata[i], errp);
        if (ret < 0) {
            goto abort;
        }
    }

    bdrv_reopen_apply_flags(queue, true);
    ret = bdrv_reopen_check_perms(queue, trans, errp);
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
        if (e->explicit_options) {
            if (n->explicit_options) {
                qdict_unref(n->explicit_options);
            }
            n->explicit_options = qdict_ref(e->explicit_options);
        }
    }
    /* the drivers switched to their new state: now they take the perms */
    for (i = 0; i < trans->len; i++) {
        bdrv_perm_commit(&g_array_index(trans, BdrvPermTran, i));
    }
    for (i = 0; i < queue->len; i++) {
        bdrv_reopen_commit_swaps(queue->pdata[i]);
    }
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
    for (i = 0; i < queue->len; i++) {
        bdrv_refresh_filename(((BdrvReopenEntry *)queue->pdata[i])->state.bs);
    }
    return 0;

abort:
    bdrv_reopen_undo_swaps(queue);
    for (i = 0; i < queue->len; i++) {
        BdrvReopenEntry *e = queue->pdata[i];
        BlockDriverState *n = e->state.bs;

        if (e->prepared && n->drv->bdrv_reopen_abort) {
            n->drv->bdrv_reopen_abort(&e->state);
        }
    }
    return ret;
}

GPtrArray *bdrv_reopen_queue_new(void)
{
    return g_ptr_array_new_with_free_func(
        (GDestroyNotify)bdrv_reopen_entry_free);
}

/* Invariant 3. */
int bdrv_reopen_run(GPtrArray *queue, Error **errp)
{
    guint n = queue->len;
    int ret;

    for (guint i = 0; i < n; i++) {
        bdrv_drained_begin(((BdrvReopenEntry *)queue->pdata[i])->state.bs);
    }
    ret = bdrv_reopen_multiple(queue, errp);
    for (guint i = n; i > 0; i--) {
        bdrv_drained_end(((BdrvReopenEntry *)queue->pdata[i - 1])->state.bs);
    }
    return ret;
}

int bdrv_reopen(BlockDriverState *bs, QDict *opts, int flags, Error **errp)
{
    g_autoptr(GPtrArray) queue = bdrv_reopen_queue_new();

    bdrv_reopen_queue_add(queue, bs, opts ?: qdict_new(), flags);
    return bdrv_reopen_run(queue, errp);
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
