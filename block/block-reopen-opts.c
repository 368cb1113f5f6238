/*
 * blockdev-reopen's rules (QEMU 7.2's, with keep_old_opts false): which
 * nodes go into the reopen transaction with which options, and which
 * nodes their children are to be; block-reopen.c runs the transaction.
 *
 *  - Each node named gets exactly the options given: a common option left
 *    out goes back to its default, a driver option to its default where
 *    the driver allows it (drv->mutable_opts), else the reopen is refused.
 *  - A child the node opened from its own options (bs->inherits_from) is
 *    reopened with it, from the options given for it, or with its old
 *    ones if it is named by its node name; it inherits the node's
 *    read-only and cache flags unless its options set them.
 *  - "file" and "backing" naming another node (or null, for "backing")
 *    change the child, checked here and moved by block-reopen.c
 *    (its invariants 1 and 2).
 *
 * Main loop thread, outside coroutine context.
 */
#include "block-reopen-int.h"

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

/*
 * A filter a block job put in the graph without a name of the user's
 * (QEMU's implicit node): it is the job's to take out.
 */
static bool bdrv_reopen_is_implicit(BlockDriverState *bs)
{
    return bs->drv->is_filter && bs->node_name[0] == '#' &&
           !bs->inherits_from;
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
int bdrv_reopen_prepare_children(BdrvReopenEntry *e, Error **errp)
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
 * QEMU's QDict hash of a key (qobject/qdict.c): a QDict of 512 buckets
 * iterates them in order, and a bucket's keys newest first.  Only the
 * order of error messages depends on it.
 */
#define BDRV_REOPEN_QEMU_BUCKETS 512

static unsigned bdrv_reopen_qemu_bucket(const char *key)
{
    uint32_t value = 0x238F13AFu * (uint32_t)strlen(key);

    for (unsigned i = 0; key[i]; i++) {
        value += (uint32_t)(unsigned char)key[i] << (i * 5 % 24);
    }
    return (1103515243u * value + 12345u) % BDRV_REOPEN_QEMU_BUCKETS;
}

typedef struct BdrvReopenKey {
    const char *key;
    unsigned bucket;
    unsigned pos;               /* insertion order */
} BdrvReopenKey;

static gint bdrv_reopen_key_cmp(gconstpointer a, gconstpointer b)
{
    const BdrvReopenKey *x = a, *y = b;

    if (x->bucket != y->bucket) {
        return x->bucket < y->bucket ? -1 : 1;
    }
    return x->pos > y->pos ? -1 : x->pos < y->pos;
}

GPtrArray *bdrv_reopen_keys_in_qemu_order(QDict *d)
{
    g_autoptr(GArray) keys = g_array_new(false, false,
                                         sizeof(BdrvReopenKey));
    GPtrArray *out = g_ptr_array_new();
    unsigned pos = 0;

    for (const QDictEntry *o = qdict_first(d); o; o = qdict_next(d, o)) {
        BdrvReopenKey k = {
            .key = qdict_entry_key(o),
            .bucket = bdrv_reopen_qemu_bucket(qdict_entry_key(o)),
            .pos = pos++,
        };

        g_array_append_val(keys, k);
    }
    g_array_sort(keys, bdrv_reopen_key_cmp);
    for (guint i = 0; i < keys->len; i++) {
        g_ptr_array_add(out, (gpointer)g_array_index(keys, BdrvReopenKey,
                                                     i).key);
    }
    return out;
}

/*
 * blockdev-reopen: an option the node was opened with and the reopen
 * leaves out goes back to its default only where the driver allows it
 * (QEMU's bdrv_reset_options_allowed()).
 */
int bdrv_reopen_check_reset(BdrvReopenEntry *e, Error **errp)
{
    BlockDriverState *bs = e->state.bs;
    g_autoptr(GPtrArray) keys =
        bdrv_reopen_keys_in_qemu_order(bs->explicit_options);

    for (guint i = 0; i < keys->len; i++) {
        const char *key = keys->pdata[i];

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
