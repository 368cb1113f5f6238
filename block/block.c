/*
 * The node graph: the driver registry, nodes and their names, child edges
 * and references, opening nodes from options, image creation and check.
 * Permissions (block-perm.c), reopen (block-reopen.c), backing and json:
 * file names (block-filename.c), the blkdebug hooks (block-debug.c) and
 * the queries that need no request path (block-query.c) live beside it.
 *
 * Invariants:
 *  1. Every node is in all_bdrv_states from bdrv_new() until it is freed,
 *     and once opened has a node name unique among them (given by the user
 *     or "#blockN").  The opened nodes stand in the order their drivers
 *     opened (bdrv_opened()): a node after its file, before its backing
 *     node, which query-named-block-nodes reports newest first, as QEMU.
 *  2. bs->refcnt counts the edges pointing at the node plus the references
 *     of bdrv_open()/bdrv_ref() callers; at zero the node is drained,
 *     closed, its children unreferenced and it is freed.
 *  3. bs->options holds the node's own options (children's removed,
 *     "driver" included, the common options of qapi_opts_bdrv_common
 *     absorbed into open_flags and fields).
 *
 * All of this runs in the main loop thread outside coroutine context; the
 * coroutine callbacks of drivers (create, check) are run by bdrv_run_co()
 * (block/io-sync.c).
 */
#include "block/block_int.h"
#include "block/dirty-bitmap.h"
#include "block-internal.h"
#include "util/cutils.h"
#include "qapi/qapi-opts.h"

/* How much of an image format probing reads (all formats decide on it). */
#define BDRV_PROBE_BUF_SIZE 2048

/* const BlockDriver *, in registration order */
static GSList *bdrv_drivers;
static GQueue all_bdrv_states = G_QUEUE_INIT;
static unsigned int bdrv_node_counter;  /* for "#blockN" names */

/* Images whose backing file is being opened, innermost last (loops). */
static GPtrArray *bdrv_backing_stack;

/* ---------------------------------------------------------------------- */
/* Driver registry */

void bdrv_register(const BlockDriver *bdrv)
{
    if (!g_slist_find(bdrv_drivers, bdrv)) {
        /* GLib lists hold plain pointers; the tables are only read */
        bdrv_drivers = g_slist_append(bdrv_drivers, (gpointer)bdrv);
    }
}

void bdrv_init(void)
{
    /*
     * The drivers registered themselves from constructors; what is left is
     * to make the calling thread the owner of the main context.
     */
    qemu_get_aio_context();
}

const BlockDriver *bdrv_find_format(const char *format_name)
{
    for (GSList *l = bdrv_drivers; l; l = l->next) {
        const BlockDriver *drv = l->data;

        if (!strcmp(drv->format_name, format_name)) {
            return drv;
        }
    }
    return NULL;
}

bool bdrv_path_has_protocol(const char *path)
{
    return path[strcspn(path, ":/")] == ':';
}

/*
 * The driver whose bdrv_probe_device scores @filename highest (the first
 * registered among equals), or NULL if none claims it: a name like
 * /dev/sdb opens host_device without "host_device:" in front, as in QEMU.
 */
static const BlockDriver *bdrv_find_device_driver(const char *filename)
{
    const BlockDriver *best = NULL;
    int best_score = 0;

    for (GSList *l = bdrv_drivers; l; l = l->next) {
        const BlockDriver *drv = l->data;
        int score = drv->bdrv_probe_device
                    ? drv->bdrv_probe_device(filename) : 0;

        if (score > best_score) {
            best = drv;
            best_score = score;
        }
    }
    return best;
}

const BlockDriver *bdrv_find_protocol(const char *filename,
                                bool allow_protocol_prefix, Error **errp)
{
    const BlockDriver *device_drv = bdrv_find_device_driver(filename);
    size_t len;

    if (device_drv) {
        return device_drv;
    }
    if (!allow_protocol_prefix || !bdrv_path_has_protocol(filename)) {
        const BlockDriver *drv = bdrv_find_format("file");

        if (!drv) {
            error_setg(errp, "Unknown protocol 'file'");
        }
        return drv;
    }

    len = strcspn(filename, ":");
    for (GSList *l = bdrv_drivers; l; l = l->next) {
        const BlockDriver *drv = l->data;

        if (drv->protocol_name && strlen(drv->protocol_name) == len &&
            !strncmp(drv->protocol_name, filename, len)) {
            return drv;
        }
    }
    error_setg(errp, "Unknown protocol '%.*s'", (int)len, filename);
    return NULL;
}

static gint bdrv_name_cmp(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void bdrv_iterate_format(void (*fn)(void *opaque, const char *name),
                         void *opaque)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new();

    for (GSList *l = bdrv_drivers; l; l = l->next) {
        const BlockDriver *drv = l->data;

        g_ptr_array_add(names, (gpointer)drv->format_name);
    }
    g_ptr_array_sort(names, bdrv_name_cmp);
    for (guint i = 0; i < names->len; i++) {
        if (i > 0 && !strcmp(names->pdata[i], names->pdata[i - 1])) {
            continue;
        }
        fn(opaque, names->pdata[i]);
    }
}

/* ---------------------------------------------------------------------- */
/* Nodes and node names */

static BlockDriverState *bdrv_new(void)
{
    BlockDriverState *bs = g_new0(BlockDriverState, 1);

    bs->refcnt = 1;
    bs->aio_context = qemu_get_aio_context();
    bs->shared_perm = BLK_PERM_ALL;
    qemu_co_queue_init(&bs->drain_queue);
    qemu_co_queue_init(&bs->flush_queue);
    g_queue_push_tail(&all_bdrv_states, bs);
    bs->all_link = g_queue_peek_tail_link(&all_bdrv_states);
    return bs;
}

/* Invariant 1: @bs's driver opened; it moves to the end of the list. */
static void bdrv_opened(BlockDriverState *bs)
{
    g_queue_unlink(&all_bdrv_states, bs->all_link);
    g_queue_push_tail_link(&all_bdrv_states, bs->all_link);
}

BlockDriverState *bdrv_find_node(const char *node_name)
{
    for (GList *l = all_bdrv_states.head; l; l = l->next) {
        BlockDriverState *bs = l->data;

        if (bs->node_name[0] && !strcmp(bs->node_name, node_name)) {
            return bs;
        }
    }
    return NULL;
}

BlockDriverState *bdrv_lookup_node(const char *name, Error **errp)
{
    BlockDriverState *bs = bdrv_find_node(name);

    if (!bs) {
        error_setg(errp, "Cannot find device='%s' nor node-name='%s'", name,
                   name);
    }
    return bs;
}

/*
 * The one walk behind bdrv_next_node() and bdrv_prev_node(): the first
 * node with a name from @l on, towards the tail or (@backwards) the head
 * of all_bdrv_states; NULL past the end.
 */
static BlockDriverState *bdrv_named_node_from(GList *l, bool backwards)
{
    for (; l; l = backwards ? l->prev : l->next) {
        BlockDriverState *bs = l->data;

        if (bs->node_name[0]) {
            return bs;
        }
    }
    return NULL;
}

BlockDriverState *bdrv_next_node(BlockDriverState *bs)
{
    return bdrv_named_node_from(bs ? bs->all_link->next
                                   : all_bdrv_states.head, false);
}

BlockDriverState *bdrv_prev_node(BlockDriverState *bs)
{
    return bdrv_named_node_from(bs ? bs->all_link->prev
                                   : all_bdrv_states.tail, true);
}

static int bdrv_assign_node_name(BlockDriverState *bs, const char *node_name,
                                 Error **errp)
{
    if (!node_name) {
        /* '#' cannot start a user's name, so generated ones never clash */
        snprintf(bs->node_name, sizeof(bs->node_name), "#block%u",
                 bdrv_node_counter++);
        return 0;
    }
    if (!id_wellformed(node_name)) {
        error_setg(errp, "Invalid node-name: '%s'", node_name);
        return -EINVAL;
    }
    if (bdrv_find_node(node_name)) {
        error_setg(errp, "Duplicate nodes with node-name='%s'", node_name);
        return -EINVAL;
    }
    if (strlen(node_name) >= sizeof(bs->node_name)) {
        error_setg(errp, "Node name too long");
        return -EINVAL;
    }
    pstrcpy(bs->node_name, sizeof(bs->node_name), node_name);
    return 0;
}

const char *bdrv_get_node_name(const BlockDriverState *bs)
{
    return bs->node_name;
}

/* ---------------------------------------------------------------------- */
/* Edges and references */

static void bdrv_delete(BlockDriverState *bs);

void bdrv_ref(BlockDriverState *bs)
{
    bs->refcnt++;
}

void bdrv_unref(BlockDriverState *bs)
{
    if (!bs) {
        return;
    }
    assert(bs->refcnt > 0);
    if (--bs->refcnt == 0) {
        bdrv_delete(bs);
    }
}

/*
 * Links @c into its node's parents and takes the permissions it asks; on
 * a conflict frees @c and drops the reference it was to hold.
 */
static int bdrv_link_edge(BdrvChild *c, Error **errp)
{
    BlockDriverState *bs = c->bs;
    int ret;

    bs->parents = g_list_append(bs->parents, c);
    ret = bdrv_refresh_perms(bs, errp);
    if (ret < 0) {
        bs->parents = g_list_remove(bs->parents, c);
        g_free(c->name);
        g_free(c);
        bdrv_unref(bs);
    }
    return ret;
}

/* Unlinks @c, releases its permissions and drops its reference. */
static void bdrv_unlink_edge(BdrvChild *c)
{
    BlockDriverState *bs = c->bs;

    bs->parents = g_list_remove(bs->parents, c);
    /* Only releasing permissions: nothing can conflict. */
    bdrv_refresh_perms(bs, NULL);
    g_free(c->name);
    g_free(c);
    bdrv_unref(bs);
}

/* A parent node has requests in flight, or something above it has. */
static bool bdrv_child_cb_drained_poll(BdrvChild *c)
{
    return c->parent->in_flight > 0 || bdrv_parents_drained_poll(c->parent);
}

static char *bdrv_child_cb_get_parent_desc(BdrvChild *c)
{
    return g_strdup_printf("node '%s'", c->parent->node_name);
}

const BdrvChildClass bdrv_child_of_bds = {
    .drained_poll = bdrv_child_cb_drained_poll,
    .get_parent_desc = bdrv_child_cb_get_parent_desc,
};

static BdrvChild *bdrv_new_edge(BlockDriverState *child_bs, const char *name,
                                const BdrvChildClass *klass, void *opaque)
{
    BdrvChild *c = g_new0(BdrvChild, 1);

    c->bs = child_bs;
    c->name = g_strdup(name);
    c->klass = klass;
    c->opaque = opaque;
    return c;
}

bool bdrv_in_subtree(BlockDriverState *top, BlockDriverState *bs)
{
    if (top == bs) {
        return true;
    }
    for (GList *l = top->children; l; l = l->next) {
        if (bdrv_in_subtree(((BdrvChild *)l->data)->bs, bs)) {
            return true;
        }
    }
    return false;
}

BdrvChild *bdrv_attach_child(BlockDriverState *parent,
                             BlockDriverState *child_bs, const char *name,
                             bool is_backing, Error **errp)
{
    BdrvChild *c;

    /* the graph is a DAG: every walk down it ends (QEMU's message) */
    if (bdrv_in_subtree(child_bs, parent)) {
        error_setg(errp, "Making '%s' a %s child of '%s' would create a "
                   "cycle", bdrv_get_node_name(child_bs), name,
                   bdrv_get_node_name(parent));
        bdrv_unref(child_bs);
        return NULL;
    }
    c = bdrv_new_edge(child_bs, name, &bdrv_child_of_bds, parent);

    c->parent = parent;
    c->is_backing = is_backing;
    bdrv_child_perms(parent, c, parent->perm, parent->shared_perm,
                     &c->perm, &c->shared_perm);
    if (bdrv_link_edge(c, errp) < 0) {
        return NULL;
    }

    parent->children = g_list_append(parent->children, c);
    if (is_backing) {
        if (!parent->backing) {
            parent->backing = c;
        }
    } else if (!parent->file &&
               (!strcmp(name, "file") ||
                (parent->drv && parent->drv->is_filter))) {
        parent->file = c;
    }
    return c;
}

void bdrv_unref_child(BlockDriverState *parent, BdrvChild *child)
{
    if (!child) {
        return;
    }
    assert(child->parent == parent);
    if (child->bs->inherits_from == parent) {
        child->bs->inherits_from = NULL;
    }
    parent->children = g_list_remove(parent->children, child);
    if (parent->file == child) {
        parent->file = NULL;
    }
    if (parent->backing == child) {
        parent->backing = NULL;
    }
    bdrv_unlink_edge(child);
}

BdrvChild *bdrv_root_attach_child(BlockDriverState *child_bs,
                                  const char *name,
                                  const BdrvChildClass *klass, void *opaque,
                                  uint64_t perm, uint64_t shared_perm,
                                  Error **errp)
{
    BdrvChild *c = bdrv_new_edge(child_bs, name, klass, opaque);

    c->perm = perm;
    c->shared_perm = shared_perm;
    if (bdrv_link_edge(c, errp) < 0) {
        return NULL;
    }
    return c;
}

void bdrv_root_unref_child(BdrvChild *child)
{
    assert(!child->parent);
    bdrv_unlink_edge(child);
}

static void bdrv_delete(BlockDriverState *bs)
{
    assert(!bs->parents);
    assert(bdrv_op_blockers_empty(bs));     /* block-op-blockers.c inv. 1 */

    if (bs->drv) {
        bdrv_drain(bs);
        if (bs->drv->bdrv_close) {
            bs->drv->bdrv_close(bs);
        }
    }
    /* after close: a format stores its persistent bitmaps there */
    bdrv_release_all_dirty_bitmaps(bs);
    while (bs->children) {
        bdrv_unref_child(bs, bs->children->data);
    }

    g_queue_delete_link(&all_bdrv_states, bs->all_link);
    if (bs->options) {
        qdict_unref(bs->options);
    }
    if (bs->explicit_options) {
        qdict_unref(bs->explicit_options);
    }
    g_free(bs->opaque);
    g_free(bs);
}

/* ---------------------------------------------------------------------- */
/* Opening */

/*
 * The flags a child inherits: cache and I/O mode always; the file child
 * also the parent's writability, and it is a protocol (no probing) that
 * passes discards down since its parent already applies the policy; a
 * backing file is opened read-only.
 */
static int bdrv_inherited_flags(int parent_flags, bool is_backing)
{
    int flags = parent_flags & ~(BDRV_O_SNAPSHOT | BDRV_O_TEMPORARY |
                                 BDRV_O_NO_BACKING | BDRV_O_COPY_ON_READ |
                                 BDRV_O_PROTOCOL);

    if (is_backing) {
        return flags & ~(BDRV_O_RDWR | BDRV_O_AUTO_RDONLY);
    }
    return flags | BDRV_O_PROTOCOL | BDRV_O_UNMAP;
}

void bdrv_common_opts_clear(BdrvCommonOpts *c)
{
    g_free(c->driver);
    g_free(c->node_name);
}

static void bdrv_flag_from_opt(QemuOpts *opts, const char *name, int flag,
                               int *flags)
{
    if (qemu_opt_has(opts, name)) {
        if (qemu_opt_get_bool(opts, name, false)) {
            *flags |= flag;
        } else {
            *flags &= ~flag;
        }
    }
}

int bdrv_absorb_common_opts(QDict *options, BdrvCommonOpts *c,
                                   Error **errp)
{
    QemuOpts *opts = qemu_opts_absorb_qdict(&qapi_opts_bdrv_common, options,
                                            errp);
    const char *discard;
    int dz;
    int ret = -EINVAL;

    if (!opts) {
        return -EINVAL;
    }

    c->driver = g_strdup(qemu_opt_get(opts, "driver"));
    c->node_name = g_strdup(qemu_opt_get(opts, "node-name"));
    if (qemu_opt_has(opts, BDRV_OPT_READ_ONLY)) {
        if (qemu_opt_get_bool(opts, BDRV_OPT_READ_ONLY, false)) {
            c->flags &= ~BDRV_O_RDWR;
        } else {
            c->flags |= BDRV_O_RDWR;
        }
    }
    bdrv_flag_from_opt(opts, BDRV_OPT_AUTO_READ_ONLY, BDRV_O_AUTO_RDONLY,
                       &c->flags);
    bdrv_flag_from_opt(opts, BDRV_OPT_CACHE_DIRECT, BDRV_O_NOCACHE,
                       &c->flags);
    bdrv_flag_from_opt(opts, BDRV_OPT_CACHE_NO_FLUSH, BDRV_O_NO_FLUSH,
                       &c->flags);

    discard = qemu_opt_get(opts, BDRV_OPT_DISCARD);
    if (qemu_opt_has(opts, BDRV_OPT_DISCARD) &&
        bdrv_parse_discard_flags(discard, &c->flags) < 0) {
        error_setg(errp, "Invalid discard option");
        goto out;
    }

    dz = qemu_opt_get_enum(opts, "detect-zeroes");
    c->detect_zeroes = dz < 0 ? BLOCKDEV_DETECT_ZEROES_OPTIONS_OFF : dz;
    if (c->detect_zeroes == BLOCKDEV_DETECT_ZEROES_OPTIONS_UNMAP &&
        !(c->flags & BDRV_O_UNMAP)) {
        error_setg(errp, "setting detect-zeroes to unmap is not allowed "
                   "without setting discard operation to unmap");
        goto out;
    }

    c->force_share = qemu_opt_get_bool(opts, BDRV_OPT_FORCE_SHARE, false);
    if (c->force_share && (c->flags & BDRV_O_RDWR)) {
        error_setg(errp, "force-share=on can only be used with read-only "
                   "images");
        goto out;
    }
    ret = 0;
out:
    qemu_opts_del(opts);
    return ret;
}

static bool bdrv_key_is_child_opt(const char *key, const char *child_name)
{
    size_t len = strlen(child_name);

    return !strncmp(key, child_name, len) &&
           (key[len] == '\0' || key[len] == '.');
}

/* Invariant 3. */
void bdrv_store_own_options(BlockDriverState *bs, QDict *all)
{
    QDict *own = qdict_clone(all);
    const QDictEntry *e = qdict_first(own);

    while (e) {
        const QDictEntry *next = qdict_next(own, e);
        const char *key = qdict_entry_key(e);

        for (GList *l = bs->children; l; l = l->next) {
            BdrvChild *c = l->data;

            if (bdrv_key_is_child_opt(key, c->name)) {
                qdict_del(own, key);
                break;
            }
        }
        e = next;
    }
    qdict_put_str(own, "driver", bs->drv->format_name);
    if (bs->options) {
        qdict_unref(bs->options);
    }
    bs->options = own;
}

void bdrv_refresh_limits(BlockDriverState *bs)
{
    BlockLimits *bl = &bs->bl;

    memset(bl, 0, sizeof(*bl));
    bl->request_alignment = 1;
    bl->min_mem_alignment = 512;
    bl->opt_mem_alignment = qemu_real_host_page_size();
    bl->max_iov = IOV_MAX;

    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;
        BlockLimits *cbl = &c->bs->bl;

        if (c->is_backing) {
            continue;
        }
        bl->opt_transfer = MAX(bl->opt_transfer, cbl->opt_transfer);
        if (cbl->max_transfer &&
            (!bl->max_transfer || cbl->max_transfer < bl->max_transfer)) {
            bl->max_transfer = cbl->max_transfer;
        }
        bl->min_mem_alignment = MAX(bl->min_mem_alignment,
                                    cbl->min_mem_alignment);
        bl->opt_mem_alignment = MAX(bl->opt_mem_alignment,
                                    cbl->opt_mem_alignment);
        if (cbl->max_iov) {
            bl->max_iov = MIN(bl->max_iov, cbl->max_iov);
        }
    }
    if (bs->drv->request_alignment) {
        bl->request_alignment = bs->drv->request_alignment;
    }
    if (bs->drv->bdrv_refresh_limits) {
        bs->drv->bdrv_refresh_limits(bs, NULL);
    }
}

/*
 * Runs the driver's open with the common options already absorbed.  On
 * failure the node has no driver and no children left.
 */
static int bdrv_open_driver(BlockDriverState *bs, const BlockDriver *drv,
                            QDict *options, int flags, Error **errp)
{
    int ret;

    bs->drv = drv;
    bs->open_flags = flags;
    bs->read_only = !(flags & BDRV_O_RDWR);
    bs->supported_write_flags = drv->supported_write_flags;
    bs->supported_zero_flags = drv->supported_zero_flags;
    bs->supported_truncate_flags = drv->supported_truncate_flags;
    bs->opaque = g_malloc0(drv->instance_size);

    ret = drv->bdrv_open(bs, options, flags, errp);
    if (ret < 0) {
        goto fail;
    }
    /* QEMU's check and message, so that the length can be rounded up */
    if (drv->bdrv_getlength(bs) > BDRV_MAX_LENGTH) {
        ret = -EFBIG;
        error_setg_errno(errp, -ret, "Could not refresh total sector count");
        if (drv->bdrv_close) {
            drv->bdrv_close(bs);
        }
        goto fail;
    }
    bdrv_refresh_limits(bs);
    return 0;

fail:
    bdrv_release_all_dirty_bitmaps(bs);
    while (bs->children) {
        bdrv_unref_child(bs, bs->children->data);
    }
    g_free(bs->opaque);
    bs->opaque = NULL;
    bs->drv = NULL;
    return ret;
}

static BlockDriverState *bdrv_open_inherit(const char *filename,
                                           const char *reference,
                                           QDict *options, int flags,
                                           Error **errp);

/*
 * Opens (but does not attach) the child @bdref_key of a node that is being
 * opened with @parent_flags, from "@bdref_key.*" options, a reference in
 * "@bdref_key" or @filename.  NULL without error if none is given and
 * @flags has BDRV_CHILD_OPEN_OPTIONAL.
 */
static BlockDriverState *bdrv_open_child_bs(const char *filename,
                                            QDict *options,
                                            const char *bdref_key,
                                            int parent_flags,
                                            BdrvChildOpenFlags flags,
                                            Error **errp)
{
    g_autofree char *prefix = g_strdup_printf("%s.", bdref_key);
    g_autofree char *reference = NULL;
    QDict *child_opts = NULL;
    int child_flags = bdrv_inherited_flags(parent_flags,
                                           flags & BDRV_CHILD_OPEN_BACKING);

    if (flags & BDRV_CHILD_OPEN_PROBE_FORMAT) {
        child_flags &= ~BDRV_O_PROTOCOL;
    }
    qdict_extract_subqdict(options, &child_opts, prefix);
    reference = g_strdup(qdict_get_try_str(options, bdref_key));
    qdict_del(options, bdref_key);

    if (!filename && !reference && !qdict_size(child_opts)) {
        qdict_unref(child_opts);
        if (!(flags & BDRV_CHILD_OPEN_OPTIONAL)) {
            error_setg(errp, "A block device must be specified for \"%s\"",
                       bdref_key);
        }
        return NULL;
    }
    /*
     * force-share is inherited, as in QEMU: a format node shares neither
     * WRITE nor RESIZE of its file, so without it -U would stop at the
     * format and qemu-img info -U on an image in use would fail.  A child
     * given by reference keeps its own setting.
     */
    if ((flags & BDRV_CHILD_OPEN_FORCE_SHARE) && !reference &&
        !qdict_haskey(child_opts, BDRV_OPT_FORCE_SHARE)) {
        qdict_put_str(child_opts, BDRV_OPT_FORCE_SHARE, "on");
    }
    return bdrv_open_inherit(filename, reference, child_opts, child_flags,
                             errp);
}

BdrvChild *bdrv_open_child(const char *filename, QDict *options,
                           const char *bdref_key, BlockDriverState *parent,
                           BdrvChildOpenFlags flags, Error **errp)
{
    BlockDriverState *bs;
    bool by_reference = qdict_get_try_str(options, bdref_key) != NULL;

    if (parent->force_share) {
        flags |= BDRV_CHILD_OPEN_FORCE_SHARE;
    }
    bs = bdrv_open_child_bs(filename, options, bdref_key, parent->open_flags,
                            flags, errp);
    if (!bs) {
        return NULL;
    }
    if (!by_reference) {
        bs->inherits_from = parent;
    }
    return bdrv_attach_child(parent, bs, bdref_key,
                             flags & BDRV_CHILD_OPEN_BACKING, errp);
}

/* Reads the start of @file_bs and asks every format how likely it is. */
static const BlockDriver *bdrv_probe_format(BlockDriverState *file_bs,
                                            Error **errp)
{
    BdrvChild probe = {
        .bs = file_bs,
        .name = (char *)"probe",
        .perm = BLK_PERM_CONSISTENT_READ,
        .shared_perm = BLK_PERM_ALL,
    };
    uint8_t buf[BDRV_PROBE_BUF_SIZE] = { 0 };
    const BlockDriver *best = NULL;
    int best_score = 0;
    int64_t len = bdrv_getlength(file_bs);
    int64_t bytes = MIN(MAX(len, 0), BDRV_PROBE_BUF_SIZE);

    if (bytes > 0) {
        int ret = bdrv_pread(&probe, 0, bytes, buf, 0);

        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not read image for "
                             "determining its format");
            return NULL;
        }
    }
    for (GSList *l = bdrv_drivers; l; l = l->next) {
        const BlockDriver *drv = l->data;
        int score;

        if (!drv->bdrv_probe) {
            continue;
        }
        score = drv->bdrv_probe(buf, bytes, file_bs->filename);
        if (score > best_score) {
            best_score = score;
            best = drv;
        }
    }
    if (!best) {
        error_setg(errp, "Could not determine image format: No compatible "
                   "driver found");
    }
    return best;
}

/*
 * Fills "filename" (or what the driver's parser makes of the name) into
 * the options of a protocol node.
 */
static int bdrv_fill_protocol_options(const BlockDriver *drv,
                                      const char *filename, QDict *options,
                                      Error **errp)
{
    Error *local_err = NULL;
    const char *rest;

    if (!filename) {
        return 0;
    }
    if (drv->bdrv_parse_filename) {
        drv->bdrv_parse_filename(filename, options, &local_err);
        if (local_err) {
            error_propagate(errp, local_err);
            return -EINVAL;
        }
        return 0;
    }
    if (drv->protocol_name && strstart(filename, drv->protocol_name, &rest) &&
        rest[0] == ':') {
        filename = rest + 1;
    }
    qdict_set_default_str(options, "filename", filename);
    return 0;
}

static void bdrv_warn_probed_raw(BlockDriverState *bs)
{
    const char *name = bs->file ? bs->file->bs->filename : bs->filename;

    fprintf(stderr,
            "WARNING: Image format was not specified for '%s' and probing "
            "guessed raw.\n"
            "         Automatically detecting the format is dangerous for "
            "raw images, write operations on block 0 will be restricted.\n"
            "         Specify the 'raw' format explicitly to remove the "
            "restrictions.\n", name);
}

static bool bdrv_same_file(const char *a, const char *b)
{
    g_autofree char *ra = realpath(a, NULL);
    g_autofree char *rb = realpath(b, NULL);

    if (ra && rb) {
        return !strcmp(ra, rb);
    }
    return !strcmp(a, b);
}

/*
 * Opens the backing file the format found in its image (bs->backing_file)
 * or the one the options name, unless BDRV_O_NO_BACKING.
 */
/*
 * The backing file the header names, as it would be opened, for an image
 * whose backing node is not opened from it now: a node attached later
 * (an external snapshot's) is compared with it to tell whether the
 * image's own name still describes the chain (block-filename.c).
 */
static void bdrv_note_auto_backing_file(BlockDriverState *bs)
{
    g_autofree char *name = NULL;

    if (bs->backing_file[0]) {
        name = bdrv_get_full_backing_filename(bs, bs->backing_file, NULL);
    }
    pstrcpy(bs->auto_backing_file, sizeof(bs->auto_backing_file),
            name ? name : "");
}

static int bdrv_open_backing(BlockDriverState *bs, QDict *options,
                             Error **errp)
{
    g_autofree char *backing_name = NULL;
    const char *ref = qdict_get_try_str(options, "backing");
    Error *local_err = NULL;
    BdrvChild *child;

    if (bs->open_flags & BDRV_O_NO_BACKING ||
        (qdict_haskey(options, "backing") && (!ref || !ref[0]))) {
        bdrv_note_auto_backing_file(bs);
    }
    if (bs->open_flags & BDRV_O_NO_BACKING) {
        QDict *dropped = NULL;

        qdict_extract_subqdict(options, &dropped, "backing.");
        qdict_unref(dropped);
        qdict_del(options, "backing");
        return 0;
    }
    if (qdict_haskey(options, "backing") && (!ref || !ref[0])) {
        /* "backing": null or "": explicitly no backing file */
        qdict_del(options, "backing");
        return 0;
    }

    if (bs->backing_file[0]) {
        backing_name = bdrv_get_full_backing_filename(bs, bs->backing_file,
                                                      &local_err);
        if (!backing_name) {
            error_propagate_prepend(errp, local_err,
                                    "Could not open backing file: ");
            return -EINVAL;
        }
        pstrcpy(bs->auto_backing_file, sizeof(bs->auto_backing_file),
                backing_name);
    }
    if (!ref && !backing_name && !qdict_has_prefixed_entries(options,
                                                             "backing.")) {
        return 0;
    }
    if (ref || qdict_haskey(options, "backing.file.filename") ||
        qdict_haskey(options, "backing.filename")) {
        g_clear_pointer(&backing_name, g_free);
    } else if (bs->backing_format[0]) {
        qdict_set_default_str(options, "backing.driver", bs->backing_format);
    }

    if (!bdrv_backing_stack) {
        bdrv_backing_stack = g_ptr_array_new();
    }
    g_ptr_array_add(bdrv_backing_stack, bs->filename);
    for (guint i = 0; backing_name && i < bdrv_backing_stack->len; i++) {
        if (bdrv_same_file(bdrv_backing_stack->pdata[i], backing_name)) {
            g_ptr_array_remove_index(bdrv_backing_stack,
                                     bdrv_backing_stack->len - 1);
            error_setg(errp, "Could not open backing file: Backing file "
                       "'%s' creates an infinite loop", backing_name);
            return -ELOOP;
        }
    }
    child = bdrv_open_child(backing_name, options, "backing", bs,
                            BDRV_CHILD_OPEN_BACKING, &local_err);
    g_ptr_array_remove_index(bdrv_backing_stack,
                             bdrv_backing_stack->len - 1);
    if (!child) {
        error_propagate_prepend(errp, local_err,
                                "Could not open backing file: ");
        return -EINVAL;
    }
    bdrv_refresh_limits(bs);
    return 0;
}

int bdrv_open_backing_file(BlockDriverState *bs, Error **errp)
{
    g_autoptr(QDict) options = qdict_new();

    if (bs->backing) {
        return 0;
    }
    bs->open_flags &= ~BDRV_O_NO_BACKING;
    return bdrv_open_backing(bs, options, errp);
}

static int bdrv_check_unused_options(BlockDriverState *bs, QDict *options,
                                     Error **errp)
{
    const QDictEntry *e = qdict_first(options);

    if (!e) {
        return 0;
    }
    if (bs->open_flags & BDRV_O_PROTOCOL) {
        error_setg(errp, "Block protocol '%s' doesn't support the option "
                   "'%s'", bs->drv->format_name, qdict_entry_key(e));
    } else {
        error_setg(errp, "Block format '%s' does not support the option "
                   "'%s'", bs->drv->format_name, qdict_entry_key(e));
    }
    return -EINVAL;
}

static BlockDriverState *bdrv_open_reference(const char *reference,
                                             const char *filename,
                                             QDict *options, Error **errp)
{
    BlockDriverState *bs = NULL;

    if (filename || qdict_size(options)) {
        error_setg(errp, "Cannot reference an existing block device with "
                   "additional options or a new filename");
    } else {
        bs = bdrv_lookup_node(reference, errp);
        if (bs) {
            bdrv_ref(bs);
        }
    }
    qdict_unref(options);
    return bs;
}

/*
 * Opens a format node's file child before the format is known, so that the
 * content can be probed; the driver then finds it through the reference
 * left in options["file"].
 */
static int bdrv_open_file_for_format(BlockDriverState *bs,
                                     const char *filename, QDict *options,
                                     int *flags, BlockDriverState **file_bs,
                                     Error **errp)
{
    Error *local_err = NULL;
    bool by_reference = qdict_get_try_str(options, "file") != NULL;

    *file_bs = bdrv_open_child_bs(filename, options, "file", *flags,
                                  BDRV_CHILD_OPEN_OPTIONAL |
                                  (bs->force_share ?
                                   BDRV_CHILD_OPEN_FORCE_SHARE : 0),
                                  &local_err);
    if (local_err) {
        error_propagate(errp, local_err);
        return -EINVAL;
    }
    if (!*file_bs) {
        return 0;
    }
    if (!by_reference) {
        (*file_bs)->inherits_from = bs;
    }
    if ((*flags & BDRV_O_AUTO_RDONLY) && (*file_bs)->read_only) {
        *flags &= ~BDRV_O_RDWR;
    }
    pstrcpy(bs->filename, sizeof(bs->filename), (*file_bs)->filename);
    qdict_put_str(options, "file", (*file_bs)->node_name);
    return 0;
}

static BlockDriverState *bdrv_open_inherit(const char *filename,
                                           const char *reference,
                                           QDict *options, int flags,
                                           Error **errp)
{
    BdrvCommonOpts common = { 0 };
    BlockDriverState *bs = NULL;
    BlockDriverState *file_bs = NULL;
    const BlockDriver *drv = NULL;
    QDict *own_options = NULL;
    bool probed = false;
    int ret;

    if (!options) {
        options = qdict_new();
    }
    if (reference) {
        return bdrv_open_reference(reference, filename, options, errp);
    }
    if (filename && g_str_has_prefix(filename, "json:")) {
        QDict *json = bdrv_parse_json_filename(filename, errp);

        if (!json) {
            goto fail;
        }
        /* explicit options win over the ones in the json: filename */
        qdict_join(options, json, false);
        qdict_unref(json);
        filename = NULL;
    }

    bs = bdrv_new();
    bs->explicit_options = qdict_clone(options);
    common.flags = flags;
    if (bdrv_absorb_common_opts(options, &common, errp) < 0 ||
        bdrv_assign_node_name(bs, common.node_name, errp) < 0) {
        goto fail;
    }
    flags = common.flags;
    bs->detect_zeroes = common.detect_zeroes;
    bs->force_share = common.force_share;
    if (filename) {
        pstrcpy(bs->filename, sizeof(bs->filename), filename);
    }

    if (common.driver) {
        drv = bdrv_find_format(common.driver);
        if (!drv) {
            error_setg(errp, "Unknown driver '%s'", common.driver);
            goto fail;
        }
        /* an explicit driver decides between format and protocol */
        flags &= ~BDRV_O_PROTOCOL;
        if (!drv->is_format) {
            flags |= BDRV_O_PROTOCOL;
        }
    }

    if (flags & BDRV_O_PROTOCOL) {
        const char *name = filename ?: qdict_get_try_str(options, "filename");

        if (!drv) {
            drv = bdrv_find_protocol(name ?: "", true, errp);
            if (!drv) {
                goto fail;
            }
        }
        if (bdrv_fill_protocol_options(drv, filename, options, errp) < 0) {
            goto fail;
        }
        name = qdict_get_try_str(options, "filename");
        if (drv->bdrv_needs_filename) {
            if (!name) {
                error_setg(errp, "The '%s' block driver requires a file name",
                           drv->format_name);
                goto fail;
            }
            pstrcpy(bs->filename, sizeof(bs->filename), name);
            pstrcpy(bs->exact_filename, sizeof(bs->exact_filename), name);
        }
    } else {
        if (bdrv_open_file_for_format(bs, filename, options, &flags,
                                      &file_bs, errp) < 0) {
            goto fail;
        }
        if (!drv) {
            if (!file_bs) {
                error_setg(errp, "Must specify either driver or file");
                goto fail;
            }
            drv = bdrv_probe_format(file_bs, errp);
            if (!drv) {
                goto fail;
            }
            probed = true;
        }
    }

    bs->probed = probed;
    own_options = qdict_clone(options);
    ret = bdrv_open_driver(bs, drv, options, flags, errp);
    bdrv_unref(file_bs);
    file_bs = NULL;
    if (ret < 0) {
        goto fail;
    }
    if (probed && !strcmp(drv->format_name, "raw") && bdrv_is_writable(bs)) {
        bdrv_warn_probed_raw(bs);
    }
    bdrv_opened(bs);
    if (drv->supports_backing && bdrv_open_backing(bs, options, errp) < 0) {
        goto fail;
    }
    if (bdrv_check_unused_options(bs, options, errp) < 0) {
        goto fail;
    }

    bdrv_store_own_options(bs, own_options);
    qdict_unref(own_options);
    bdrv_refresh_filename(bs);
    bdrv_common_opts_clear(&common);
    qdict_unref(options);
    return bs;

fail:
    if (own_options) {
        qdict_unref(own_options);
    }
    bdrv_unref(file_bs);
    bdrv_unref(bs);
    bdrv_common_opts_clear(&common);
    qdict_unref(options);
    return NULL;
}

/*
 * A node of a driver that is not registered (a block job's own filter):
 * no probing, no backing file, options only for the driver itself.
 * Consumes @options.
 */
BlockDriverState *bdrv_new_open_driver(const BlockDriver *drv,
                                       const char *node_name,
                                       QDict *options, int flags,
                                       Error **errp)
{
    BlockDriverState *bs = bdrv_new();
    QDict *own_options = qdict_clone(options);
    int ret;

    bs->explicit_options = qdict_clone(options);
    qdict_put_str(bs->explicit_options, "driver", drv->format_name);
    ret = bdrv_assign_node_name(bs, node_name, errp);
    if (ret == 0) {
        ret = bdrv_open_driver(bs, drv, options, flags, errp);
    }
    if (ret == 0) {
        ret = bdrv_check_unused_options(bs, options, errp);
    }
    if (ret < 0) {
        qdict_unref(own_options);
        qdict_unref(options);
        bdrv_unref(bs);
        return NULL;
    }
    bdrv_store_own_options(bs, own_options);
    qdict_unref(own_options);
    qdict_unref(options);
    bdrv_refresh_filename(bs);
    bdrv_opened(bs);
    return bs;
}

/*
 * BDRV_O_SNAPSHOT: puts a temporary qcow2 overlay above @base, which takes
 * every write, so that the image itself is only read.  The overlay file is
 * unlinked as soon as it is open: nothing is left behind however the
 * program ends.  Takes @base's reference; returns the overlay or NULL.
 */
static BlockDriverState *bdrv_append_temp_snapshot(BlockDriverState *base,
                                                   int flags, Error **errp)
{
    const BlockDriver *qcow2 = bdrv_find_format("qcow2");
    const char *tmpdir = g_getenv("TMPDIR");
    int64_t size = bdrv_getlength(base);
    g_autofree char *path = NULL;
    BlockDriverState *overlay = NULL;
    QemuOpts *create;
    QDict *opts;
    int fd, ret;

    if (size < 0) {
        error_setg_errno(errp, -size, "Could not get image size");
        goto out;
    }
    if (!qcow2) {
        error_setg(errp, "Temporary snapshots need the qcow2 driver");
        goto out;
    }
    path = g_strdup_printf("%s/vl.XXXXXX",
                           tmpdir && tmpdir[0] ? tmpdir : "/var/tmp");
    fd = mkstemp(path);
    if (fd < 0) {
        error_setg_errno(errp, errno, "Could not get temporary filename");
        goto out;
    }
    close(fd);
    create = qemu_opts_create(qcow2->create_opts);
    qemu_opt_set_number(create, "size", size, &error_abort);
    ret = bdrv_create(qcow2, path, create, errp);
    qemu_opts_del(create);
    if (ret < 0) {
        error_prepend(errp, "Could not create temporary overlay '%s': ",
                      path);
        unlink(path);
        goto out;
    }
    opts = qdict_new();
    qdict_put_str(opts, "driver", "qcow2");
    qdict_put_str(opts, "file.driver", "file");
    qdict_put_str(opts, "file.filename", path);
    qdict_put_str(opts, "backing", bdrv_get_node_name(base));
    overlay = bdrv_open_inherit(NULL, NULL, opts,
                                (flags & ~BDRV_O_SNAPSHOT) | BDRV_O_RDWR,
                                errp);
    unlink(path);
out:
    /* the overlay's backing edge holds the image now, if it opened */
    bdrv_unref(base);
    return overlay;
}

BlockDriverState *bdrv_open(const char *filename, const char *reference,
                            QDict *options, int flags, Error **errp)
{
    BlockDriverState *bs;

    if (!(flags & BDRV_O_SNAPSHOT)) {
        return bdrv_open_inherit(filename, reference, options, flags, errp);
    }
    /* the image is only read: the overlay takes the writes */
    bs = bdrv_open_inherit(filename, reference, options,
                           flags & ~(BDRV_O_SNAPSHOT | BDRV_O_RDWR), errp);
    if (!bs) {
        return NULL;
    }
    return bdrv_append_temp_snapshot(bs, flags, errp);
}

/* ---------------------------------------------------------------------- */
/* Driver coroutines run from outside coroutine context */

typedef struct BdrvCoCall {
    const BlockDriver *drv;
    const char *filename;
    QemuOpts *opts;
    BdrvCheckResult *res;
    BdrvCheckMode fix;
    Error **errp;
} BdrvCoCall;

static int coroutine_fn bdrv_create_co_entry(BlockDriverState *bs,
                                             void *opaque)
{
    BdrvCoCall *call = opaque;

    return call->drv->bdrv_co_create_opts(call->drv, call->filename,
                                          call->opts, call->errp);
}

int bdrv_create(const BlockDriver *drv, const char *filename, QemuOpts *opts,
                Error **errp)
{
    BdrvCoCall call = {
        .drv = drv,
        .filename = filename,
        .opts = opts,
        .errp = errp,
    };

    if (!drv->bdrv_co_create_opts) {
        error_setg(errp, "Driver '%s' does not support image creation",
                   drv->format_name);
        return -ENOTSUP;
    }
    if (!qemu_opts_check_enums(opts, errp)) {
        return -EINVAL;
    }
    return bdrv_run_co(NULL, bdrv_create_co_entry, &call);
}

int bdrv_create_file(const char *filename, QemuOpts *opts, Error **errp)
{
    const BlockDriver *drv = bdrv_find_protocol(filename, true, errp);

    if (!drv) {
        return -ENOENT;
    }
    if (!drv->bdrv_co_create_opts) {
        error_setg(errp, "Protocol driver '%s' does not support image "
                   "creation", drv->format_name);
        return -ENOTSUP;
    }
    return bdrv_create(drv, filename, opts, errp);
}

static int coroutine_fn bdrv_check_co_entry(BlockDriverState *bs,
                                            void *opaque)
{
    BdrvCoCall *call = opaque;

    return bs->drv->bdrv_co_check(bs, call->res, call->fix);
}

int bdrv_check(BlockDriverState *bs, BdrvCheckResult *res, BdrvCheckMode fix)
{
    BdrvCoCall call = { .res = res, .fix = fix };

    memset(res, 0, sizeof(*res));
    if (!bs->drv) {
        return -ENOMEDIUM;
    }
    if (!bs->drv->bdrv_co_check) {
        return -ENOTSUP;
    }
    return bdrv_run_co(bs, bdrv_check_co_entry, &call);
}

/* ---------------------------------------------------------------------- */
/* Emptying an image onto its backing file */

int bdrv_make_empty(BlockDriverState *bs, Error **errp)
{
    int ret;

    if (!bs->drv) {
        error_setg(errp, "Node is closed");
        return -ENOMEDIUM;
    }
    if (!bs->drv->bdrv_make_empty) {
        error_setg(errp, "%s does not support emptying nodes",
                   bs->drv->format_name);
        return -ENOTSUP;
    }
    if (!bdrv_is_writable(bs)) {
        error_setg(errp, "Cannot empty the read-only image '%s'",
                   bs->filename);
        return -EACCES;
    }
    bdrv_drained_begin(bs);
    ret = bs->drv->bdrv_make_empty(bs);
    bdrv_drained_end(bs);
    if (ret < 0) {
        /* unquoted, as QEMU's tools print it */
        error_setg_errno(errp, -ret, "Failed to empty %s", bs->filename);
    }
    return ret;
}
