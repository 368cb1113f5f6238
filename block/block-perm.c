/*
 * Permissions: what each user of a node (its parents' edges) may do with
 * it and lets others do, combined per node and checked and committed
 * through the whole subtree below a changed edge as one transaction.
 *
 * Invariants:
 *  1. bs->perm is the union of the perm of the edges in bs->parents and
 *     bs->shared_perm the intersection of their shared_perm (everything
 *     when there is none); no edge uses a permission that another edge to
 *     the same node does not share.  An update checks every node below the
 *     changed edge (drv->bdrv_check_perm) before it commits all of them
 *     (drv->bdrv_set_perm), or rolls all of them back.
 *  2. A read-only node grants neither WRITE nor WRITE_UNCHANGED.
 *
 * All of this runs in the main loop thread outside coroutine context.
 */
#include "block/block_int.h"
#include "block-internal.h"

static uint64_t bdrv_edge_shared(BdrvChild *c)
{
    return c->bs->force_share ? BLK_PERM_ALL : c->shared_perm;
}

static void bdrv_cumulative_perms(BlockDriverState *bs, uint64_t *perm,
                                  uint64_t *shared)
{
    *perm = 0;
    *shared = BLK_PERM_ALL;
    for (GList *l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        *perm |= c->perm;
        *shared &= bdrv_edge_shared(c);
    }
}

void bdrv_default_perms(BlockDriverState *bs, BdrvChild *child,
                        uint64_t parent_perm, uint64_t parent_shared,
                        uint64_t *nperm, uint64_t *nshared)
{
    if (child->is_backing) {
        /*
         * A backing file is only read, for the data the parent reads; it
         * may change under us only if the parent accepts changing data.
         */
        *nperm = parent_perm & BLK_PERM_CONSISTENT_READ;
        *nshared = BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE_UNCHANGED;
        if (parent_shared & BLK_PERM_WRITE) {
            *nshared |= BLK_PERM_WRITE | BLK_PERM_RESIZE;
        }
        return;
    }

    /* A format reads its metadata, and writes it whenever it is writable. */
    *nperm = parent_perm;
    if (!(bs->open_flags & BDRV_O_NO_IO)) {
        *nperm |= BLK_PERM_CONSISTENT_READ;
    }
    if (bdrv_is_writable(bs)) {
        *nperm |= BLK_PERM_WRITE | BLK_PERM_RESIZE;
    }
    *nshared = parent_shared & ~(BLK_PERM_WRITE | BLK_PERM_RESIZE);
}

void bdrv_child_perms(BlockDriverState *bs, BdrvChild *c, uint64_t perm,
                      uint64_t shared, uint64_t *nperm, uint64_t *nshared)
{
    if (bs->drv && bs->drv->bdrv_child_perm) {
        bs->drv->bdrv_child_perm(bs, c, perm, shared, nperm, nshared);
        return;
    }
    if (bs->drv && bs->drv->is_filter && !c->is_backing) {
        *nperm = perm;
        *nshared = shared;
        return;
    }
    bdrv_default_perms(bs, c, perm, shared, nperm, nshared);
}

static char *bdrv_edge_user_desc(BdrvChild *c)
{
    return c->klass->get_parent_desc(c);
}

static int bdrv_check_edge_conflicts(BlockDriverState *bs, Error **errp)
{
    for (GList *la = bs->parents; la; la = la->next) {
        BdrvChild *a = la->data;

        for (GList *lb = bs->parents; lb; lb = lb->next) {
            BdrvChild *b = lb->data;
            uint64_t missing = b->perm & ~bdrv_edge_shared(a);
            g_autofree char *perms = NULL;
            g_autofree char *a_user = NULL;
            g_autofree char *b_user = NULL;

            if (a == b || !missing) {
                continue;
            }
            perms = bdrv_perm_names(missing);
            a_user = bdrv_edge_user_desc(a);
            b_user = bdrv_edge_user_desc(b);
            error_setg(errp, "Permission conflict on node '%s': permissions "
                       "'%s' are both required by %s (uses node '%s' as "
                       "'%s' child) and unshared by %s (uses node '%s' as "
                       "'%s' child).", bs->node_name, perms, b_user,
                       bs->node_name, b->name, a_user, bs->node_name,
                       a->name);
            return -EPERM;
        }
    }
    return 0;
}

static void bdrv_topo_visit(BlockDriverState *bs, GHashTable *seen,
                            GPtrArray *post_order)
{
    if (!g_hash_table_add(seen, bs)) {
        return;
    }
    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;

        bdrv_topo_visit(c->bs, seen, post_order);
    }
    g_ptr_array_add(post_order, bs);
}

/* @bs and every node below it, each after all its parents among them. */
static GPtrArray *bdrv_topological_order(BlockDriverState *bs)
{
    g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
    GPtrArray *post_order = g_ptr_array_new();
    GPtrArray *order = g_ptr_array_new();

    bdrv_topo_visit(bs, seen, post_order);
    for (guint i = post_order->len; i > 0; i--) {
        g_ptr_array_add(order, post_order->pdata[i - 1]);
    }
    g_ptr_array_free(post_order, true);
    return order;
}

/* One edge or node as it was before a permission update. */
typedef struct BdrvPermUndo {
    BdrvChild *edge;            /* NULL for a node record */
    BlockDriverState *bs;
    uint64_t perm;
    uint64_t shared;
} BdrvPermUndo;

static void bdrv_perm_undo_push(GArray *undo, BdrvChild *edge,
                                BlockDriverState *bs)
{
    BdrvPermUndo u = {
        .edge = edge,
        .bs = bs,
        .perm = edge ? edge->perm : bs->perm,
        .shared = edge ? edge->shared_perm : bs->shared_perm,
    };

    g_array_append_val(undo, u);
}

static void bdrv_perm_undo_apply(GArray *undo)
{
    for (guint i = undo->len; i > 0; i--) {
        BdrvPermUndo *u = &g_array_index(undo, BdrvPermUndo, i - 1);

        if (u->edge) {
            u->edge->perm = u->perm;
            u->edge->shared_perm = u->shared;
        } else {
            u->bs->perm = u->perm;
            u->bs->shared_perm = u->shared;
        }
    }
}

/*
 * Invariant 2.  @going_read_only (may be NULL): the nodes a reopen makes
 * read-only, so that a refused update can say which of the two happened.
 */
static int bdrv_check_writable_for(BlockDriverState *bs, uint64_t perm,
                                   GHashTable *going_read_only,
                                   Error **errp)
{
    if (!(perm & (BLK_PERM_WRITE | BLK_PERM_WRITE_UNCHANGED)) ||
        bdrv_is_writable(bs)) {
        return 0;
    }
    if (going_read_only && g_hash_table_contains(going_read_only, bs)) {
        error_setg(errp, "Read-only block node '%s' cannot support "
                   "read-write users", bs->node_name);
    } else {
        error_setg(errp, "Block node is read-only");
    }
    return -EPERM;
}

static void bdrv_perm_tran_free(BdrvPermTran *tran)
{
    g_ptr_array_free(tran->order, true);
    g_array_free(tran->undo, true);
    g_ptr_array_free(tran->checked, true);
}

/* Tells every node its new permissions (invariant 1, second half). */
void bdrv_perm_commit(BdrvPermTran *tran)
{
    for (guint i = 0; i < tran->order->len; i++) {
        BlockDriverState *n = tran->order->pdata[i];

        if (n->drv && n->drv->bdrv_set_perm) {
            n->drv->bdrv_set_perm(n, n->perm, n->shared_perm);
        }
    }
    bdrv_perm_tran_free(tran);
}

void bdrv_perm_abort(BdrvPermTran *tran)
{
    bdrv_perm_undo_apply(tran->undo);
    for (guint i = tran->checked->len; i > 0; i--) {
        BlockDriverState *n = tran->checked->pdata[i - 1];

        if (n->drv && n->drv->bdrv_abort_perm_update) {
            n->drv->bdrv_abort_perm_update(n);
        }
    }
    bdrv_perm_tran_free(tran);
}

/* Invariant 1, first half: block-internal.h. */
int bdrv_perm_check(BlockDriverState *bs, GHashTable *going_read_only,
                    BdrvPermTran *tran, Error **errp)
{
    int ret = 0;

    tran->order = bdrv_topological_order(bs);
    tran->undo = g_array_new(false, false, sizeof(BdrvPermUndo));
    tran->checked = g_ptr_array_new();

    for (guint i = 0; i < tran->order->len; i++) {
        BlockDriverState *n = tran->order->pdata[i];
        uint64_t perm, shared;

        ret = bdrv_check_edge_conflicts(n, errp);
        if (ret < 0) {
            goto fail;
        }
        bdrv_cumulative_perms(n, &perm, &shared);
        ret = bdrv_check_writable_for(n, perm, going_read_only, errp);
        if (ret < 0) {
            goto fail;
        }
        if (n->drv && n->drv->bdrv_check_perm) {
            ret = n->drv->bdrv_check_perm(n, perm, shared, errp);
            if (ret < 0) {
                goto fail;
            }
        }
        g_ptr_array_add(tran->checked, n);

        bdrv_perm_undo_push(tran->undo, NULL, n);
        n->perm = perm;
        n->shared_perm = shared;
        for (GList *l = n->children; l; l = l->next) {
            BdrvChild *c = l->data;

            bdrv_perm_undo_push(tran->undo, c, NULL);
            bdrv_child_perms(n, c, perm, shared, &c->perm, &c->shared_perm);
        }
    }
    return 0;

fail:
    bdrv_perm_abort(tran);
    return ret;
}

int bdrv_refresh_perms(BlockDriverState *bs, Error **errp)
{
    BdrvPermTran tran;
    int ret = bdrv_perm_check(bs, NULL, &tran, errp);

    if (ret == 0) {
        bdrv_perm_commit(&tran);
    }
    return ret;
}

int bdrv_child_try_set_perm(BdrvChild *c, uint64_t perm, uint64_t shared,
                            Error **errp)
{
    uint64_t old_perm = c->perm;
    uint64_t old_shared = c->shared_perm;
    int ret;

    c->perm = perm;
    c->shared_perm = shared;
    ret = bdrv_refresh_perms(c->bs, errp);
    if (ret < 0) {
        c->perm = old_perm;
        c->shared_perm = old_shared;
    }
    return ret;
}
