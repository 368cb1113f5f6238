/*
 * Reopen: changing the flags and options of an open node (and of the
 * children that inherit them) as one transaction.  Every driver in the
 * queue prepares (and may refuse) first; then the new permissions are
 * checked for the whole subtree; only then does each driver commit, or
 * each prepared driver abort, so that a refused reopen leaves every node
 * as it was.  The node is drained throughout: no request sees a node half
 * switched.
 *
 * blockdev-reopen (bdrv_reopen_many()) reopens several nodes in one such
 * transaction with exactly the options given, as QEMU 7.2 does: an option
 * left out goes back to its default, a node's implicit children (those it
 * opened from its own options) are reopened with it, and its "file" or
 * "backing" may name another node (or null, for "backing").
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
#include "block/block_int.h"
#include "block-internal.h"

/* "file" or "backing" of a node, pointed at another node by a reopen. */
typedef struct BdrvReopenSwap {
    bool requested;
    BlockDriverState *new_bs;   /* NULL: no child (backing: null) */
    BdrvChild *edge;            /* the edge moved or added, once applied */
    BlockDriverState *old_bs;   /* invariant 1: a reference, while moved */
    bool added;                 /* the edge did not exist before */
} BdrvReopenSwap;

enum { BDRV_REOPEN_FILE, BDRV_REOPEN_BACKING, BDRV_REOPEN_SWAPS };

/* One node of a reopen transaction. */
typedef struct BdrvReopenEntry {
    BDRVReopenState state;
    BdrvCommonOpts common;
    /* the node's own options as they will be after the commit */
    QDict *new_options;
    /* blockdev-reopen: the options as given, which options left out reset */
    QDict *explicit_options;
    /* a bad common option, found when the entry was queued */
    Error *queue_err;
    int old_flags;
    bool old_read_only;
    bool prepared;
    BdrvReopenSwap swaps[BDRV_REOPEN_SWAPS];
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
/* The flags a child inherits from its parent's new @flags. */
#define BDRV_REOPEN_INHERITABLE \
    (BDRV_O_RDWR | BDRV_O_AUTO_RDONLY | BDRV_O_CACHE_MASK)

static BdrvReopenEntry *bdrv_reopen_entry_new(GPtrArray *queue,
                                              BlockDriverState *bs)
{
    BdrvReopenEntry *e = g_new0(BdrvReopenEntry, 1);

    e->state.bs = bs;
    e->old_flags = bs->open_flags;
    e->old_read_only = bs->read_only;
    bdrv_ref(bs);               /* invariant 3 */
    g_ptr_array_add(queue, e);
    return e;
}

static void bdrv_reopen_queue_add(GPtrArray *queue, BlockDriverState *bs,
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

static void bdrv_reopen_queue_add_exact(GPtrArray *queue,
                                        BlockDriverState *bs,
                                        QDict *options, int flags);

/*
 * The children of @e's node under blockdev-reopen's rules: one named by
 * its current node is kept (and reopened with its old options if the node
 * opened it); an implicit one given as options is reopened with exactly
 * those; "file" and "backing" naming another node are left in the
 * options for bdrv_reopen_parse_swap(); "x.*" options of a child the node
 * did not open stay too, and are refused as options that cannot change.
 */
static void bdrv_reopen_queue_children(GPtrArray *queue, BdrvReopenEntry *e)
{
    BlockDriverState *bs = e->state.bs;
    QDict *options = e->state.options;
    int inherited = e->state.flags & BDRV_REOPEN_INHERITABLE;

    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;
        g_autofree char *prefix = g_strdup_printf("%s.", c->name);
        int child_flags = (c->bs->open_flags & ~BDRV_REOPEN_INHERITABLE) |
                          inherited;
        bool implicit = c->bs->inherits_from == bs;
        QDict *sub = NULL;

        if (c->is_backing) {
            /* a backing file stays read-only, whatever its overlay is */
            child_flags = c->bs->open_flags;
        }
        if (qdict_haskey(options, c->name)) {
            if (g_strcmp0(qdict_get_try_str(options, c->name),
                          c->bs->node_name)) {
                continue;
            }
            qdict_del(options, c->name);
            if (implicit && !c->is_backing) {
                bdrv_reopen_queue_add(queue, c->bs, qdict_new(),
                                      child_flags);
            }
            continue;
        }
        if (!implicit || !qdict_has_prefixed_entries(options, prefix)) {
            continue;
        }
        qdict_extract_subqdict(options, &sub, prefix);
        bdrv_reopen_queue_add_exact(queue, c->bs, sub, child_flags);
    }
}

/*
 * Queues @bs to be reopened with exactly @options (consumed), starting
 * from @flags for the common options they leave out.
 */
static void bdrv_reopen_queue_add_exact(GPtrArray *queue,
                                        BlockDriverState *bs,
                                        QDict *options, int flags)
{
    BdrvReopenEntry *e;

    if (bdrv_reopen_find(queue, bs)) {
        qdict_unref(options);
        return;
    }
    e = bdrv_reopen_entry_new(queue, bs);
    e->explicit_options = qdict_clone(options);
    e->state.options = options;
    e->common.flags = flags;
    bdrv_absorb_common_opts(options, &e->common, &e->queue_err);
    e->state.flags = e->common.flags;
    bdrv_reopen_queue_children(queue, e);
}

/* The flags of a node whose options leave every common option out. */
static int bdrv_reopen_default_flags(BlockDriverState *bs)
{
    return (bs->open_flags & ~(BDRV_O_AUTO_RDONLY | BDRV_O_NOCACHE |
                               BDRV_O_NO_FLUSH | BDRV_O_UNMAP)) |
           BDRV_O_RDWR;
}

/* Invariant 2: is @bs @top or below it? */
static bool bdrv_reopen_is_below(BlockDriverState *top, BlockDriverState *bs)
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

/*
 * A filter a block job put in the graph without a name of the user's
 * (QEMU's implicit node): it is the job's to take out.
 */
static bool bdrv_reopen_is_implicit(BlockDriverState *bs)
{
    return bs->drv->is_filter && bs->node_name[0] == '#' &&
           !bs->inherits_from;
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
 * Points "file" or "backing" of @e at its new node (invariant 1), at once,
 * so that the next node's cycle check sees it, as QEMU's does.  A backing
 * edge that is to go stays until the commit: its leaving only releases
 * permissions.  A new backing edge is attached, which checks its own
 * permissions.
 */
static int bdrv_reopen_apply_swap(BdrvReopenEntry *e, int which,
                                  Error **errp)
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

/*
 * "file" or "backing" of @e given as a node name (or null): which node
 * the child is to be, checked as QEMU 7.2 checks it.
 */
static int bdrv_reopen_parse_swap(BdrvReopenEntry *e, int which,
                                  Error **errp)
{
    BlockDriverState *bs = e->state.bs;
    bool is_backing = which == BDRV_REOPEN_BACKING;
    const char *name = is_backing ? "backing" : "file";
    BdrvChild *old = is_backing ? bs->backing : bs->file;
    BlockDriverState *new_bs = NULL;
    const char *ref;

    if (!qdict_haskey(e->state.options, name)) {
        return 0;
    }
    ref = qdict_get_try_str(e->state.options, name);
    if (ref) {
        new_bs = bdrv_find_node(ref);
        if (!new_bs) {
            error_setg(errp, "Cannot find device='' nor node-name='%s'", ref);
            return -EINVAL;
        }
        if (bdrv_reopen_is_below(new_bs, bs)) {
            error_setg(errp, "Making '%s' a %s child of '%s' would create a "
                       "cycle", ref, name, bs->node_name);
            return -EINVAL;
        }
    } else if (!is_backing) {
        error_setg(errp, "Invalid parameter type for 'file', expected: "
                   "BlockdevRef");
        return -EINVAL;
    }
    if (old ? old->bs == new_bs : !new_bs) {
        return 0;
    }
    if (old && bdrv_reopen_is_implicit(old->bs)) {
        /* naming the node below the job's filter keeps the filter */
        if (old->bs->file && old->bs->file->bs == new_bs) {
            return 0;
        }
        error_setg(errp, "Cannot replace implicit %s child of %s", name,
                   bs->node_name);
        return -EPERM;
    }
    if (bs->drv->is_filter && !old) {
        error_setg(errp, "'%s' is a %s filter node that does not support a "
                   "%s child", bs->node_name, bs->drv->format_name, name);
        return -EINVAL;
    }
    if (is_backing && !bs->drv->is_filter && !bs->drv->supports_backing) {
        error_setg(errp, "Driver '%s' of node '%s' does not support backing "
                   "files", bs->drv->format_name, bs->node_name);
        return -EINVAL;
    }
    if (!is_backing && !old) {
        error_setg(errp, "Node '%s' of driver '%s' has no 'file' child to "
                   "change", bs->node_name, bs->drv->format_name);
        return -EINVAL;
    }
    if (new_bs &&
        bdrv_get_aio_context(new_bs) != bdrv_get_aio_context(bs)) {
        error_setg(errp, "Cannot make node '%s' the %s child of '%s': they "
                   "are in different iothreads (AioContexts)",
                   new_bs->node_name, name, bs->node_name);
        return -EINVAL;
    }
    e->swaps[which].requested = true;
    e->swaps[which].new_bs = new_bs;
    return bdrv_reopen_apply_swap(e, which, errp);
}

/*
 * What blockdev-reopen checks beyond the driver: the backing child named
 * when the node has one, and the "backing" and "file" changes.
 */
static int bdrv_reopen_prepare_children(BdrvReopenEntry *e, Error **errp)
{
    BlockDriverState *bs = e->state.bs;
    int ret;

    if (bs->drv->supports_backing &&
        !qdict_haskey(e->state.options, "backing") &&
        (bs->backing || bs->backing_file[0])) {
        error_setg(errp, "backing is missing for '%s'", bs->node_name);
        return -EINVAL;
    }
    ret = bdrv_reopen_parse_swap(e, BDRV_REOPEN_BACKING, errp);
    if (ret < 0) {
        return ret;
    }
    qdict_del(e->state.options, "backing");
    qdict_del(e->new_options, "backing");
    ret = bdrv_reopen_parse_swap(e, BDRV_REOPEN_FILE, errp);
    qdict_del(e->state.options, "file");
    qdict_del(e->new_options, "file");
    return ret;
}

/* The common options that a reopen may leave out (QEMU's list). */
static const char *const bdrv_reopen_resettable[] = {
    "node-name", "discard", "cache.direct", "cache.no-flush", "read-only",
    "auto-read-only", "detect-zeroes", NULL
};

static bool bdrv_reopen_opt_in(const char *const *list, const char *key)
{
    for (; list && *list; list++) {
        size_t len = strlen(*list);

        if (!strcmp(*list, key) ||
            ((*list)[len - 1] == '.' && !strncmp(*list, key, len))) {
            return true;
        }
    }
    return false;
}

static bool bdrv_reopen_is_child_key(BlockDriverState *bs, const char *key)
{
    if (!strcmp(key, "file") || !strcmp(key, "backing") ||
        g_str_has_prefix(key, "file.") || g_str_has_prefix(key, "backing.")) {
        return true;
    }
    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;
        size_t len = strlen(c->name);

        if (!strncmp(key, c->name, len) &&
            (key[len] == '\0' || key[len] == '.')) {
            return true;
        }
    }
    return false;
}

/*
 * blockdev-reopen: an option the node was opened with and the reopen
 * leaves out goes back to its default only where the driver allows it
 * (QEMU's bdrv_reset_options_allowed()).
 */
static int bdrv_reopen_check_reset(BdrvReopenEntry *e, Error **errp)
{
    BlockDriverState *bs = e->state.bs;

    for (const QDictEntry *o = qdict_first(bs->explicit_options); o;
         o = qdict_next(bs->explicit_options, o)) {
        const char *key = qdict_entry_key(o);

        if (!qdict_haskey(e->explicit_options, key) &&
            !bdrv_reopen_is_child_key(bs, key) &&
            !bdrv_reopen_opt_in(bdrv_reopen_resettable, key) &&
            !bdrv_reopen_opt_in(bs->drv->mutable_opts, key)) {
            error_setg(errp, "Option '%s' cannot be reset to its default "
                       "value", key);
            return -EINVAL;
        }
    }
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
    const QDictEntry *left;
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

static GPtrArray *bdrv_reopen_queue_new(void)
{
    return g_ptr_array_new_with_free_func(
        (GDestroyNotify)bdrv_reopen_entry_free);
}

/* Invariant 3: every node queued stands still until the queue is done. */
static int bdrv_reopen_run(GPtrArray *queue, Error **errp)
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

int bdrv_reopen_many(BlockDriverState **nodes, QDict **options, size_t n,
                     Error **errp)
{
    g_autoptr(GPtrArray) queue = bdrv_reopen_queue_new();

    for (size_t i = 0; i < n; i++) {
        bdrv_reopen_queue_add_exact(queue, nodes[i], options[i],
                                    bdrv_reopen_default_flags(nodes[i]));
    }
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
