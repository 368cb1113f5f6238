/*
 * Drain: quiescing a node so that no request is in flight in its part of
 * the graph, and holding new requests back until the drained section ends.
 *
 * A drained section of a node lasts from bdrv_drained_begin() to the
 * matching bdrv_drained_end(); sections nest (bs->quiesce_counter).
 *
 * Invariants:
 *  1. Requests entering the graph from a user above it wait at the
 *     drain barrier (bdrv_drain_barrier) while a node above,
 *     at or below their root is drained; requests that nodes issue to
 *     their children never wait, so requests in flight when a drain starts
 *     can always finish.
 *  2. bdrv_quiesced_nodes is the number of nodes whose quiesce_counter is
 *     nonzero, so that the barrier costs nothing while nobody drains.
 *  3. bdrv_drained_begin() returns when no request is counted in flight in
 *     the node's subtree (io.c's invariant 1) and every parent's class
 *     answers drained_poll false: the parents above the node are asked
 *     through their edges, never by name, so this layer does not know what
 *     sits above the graph.
 *
 * All functions run in the node's AioContext thread.
 */

#include "block/block_int.h"
#include "io-internal.h"

/*
 * Nodes whose quiesce_counter is nonzero, anywhere (invariant 2).
 * Atomic: the main loop and the iothreads (a block job's final drain)
 * drain their own nodes at the same time.
 */
static unsigned int bdrv_quiesced_nodes;

/* What bdrv_drain_all() drains before the nodes, in registration order. */
static GQueue drain_all_users = G_QUEUE_INIT;

static bool bdrv_subtree_quiesced(BlockDriverState *bs,
                                  BlockDriverState **found)
{
    GList *l;

    if (bs->quiesce_counter > 0) {
        *found = bs;
        return true;
    }
    for (l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;

        if (c->bs && bdrv_subtree_quiesced(c->bs, found)) {
            return true;
        }
    }
    return false;
}

static bool bdrv_ancestors_quiesced(BlockDriverState *bs,
                                    BlockDriverState **found)
{
    GList *l;

    for (l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        if (!c->parent) {
            continue;
        }
        if (c->parent->quiesce_counter > 0) {
            *found = c->parent;
            return true;
        }
        if (bdrv_ancestors_quiesced(c->parent, found)) {
            return true;
        }
    }
    return false;
}

BlockDriverState *bdrv_drain_barrier(BlockDriverState *bs)
{
    BlockDriverState *found = NULL;

    if (likely(!__atomic_load_n(&bdrv_quiesced_nodes, __ATOMIC_RELAXED)) ||
        !bs) {
        return NULL;
    }
    if (bdrv_subtree_quiesced(bs, &found) ||
        bdrv_ancestors_quiesced(bs, &found)) {
        return found;
    }
    return NULL;
}

static bool bdrv_subtree_busy(BlockDriverState *bs)
{
    GList *l;

    if (bs->in_flight > 0) {
        return true;
    }
    for (l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;

        if (c->bs && bdrv_subtree_busy(c->bs)) {
            return true;
        }
    }
    return false;
}

/* Requests above @bs, asked of each parent through its edge's class. */
bool bdrv_parents_drained_poll(BlockDriverState *bs)
{
    GList *l;

    for (l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        if (c->klass->drained_poll(c)) {
            return true;
        }
    }
    return false;
}

static bool bdrv_drain_busy(BlockDriverState *bs)
{
    return bdrv_subtree_busy(bs) || bdrv_parents_drained_poll(bs);
}

/* Tells @bs's driver that a section of @bs or below begins or ends. */
static void bdrv_driver_drained_notify(BlockDriverState *bs, bool begin)
{
    void (*fn)(BlockDriverState *bs);

    if (!bs->drv) {
        return;
    }
    fn = begin ? bs->drv->bdrv_drained_begin : bs->drv->bdrv_drained_end;
    if (fn) {
        fn(bs);
    }
}

/*
 * Tells every parent above @bs, through the node parents up to the
 * users, that a section of @bs begins (@begin) or ends.
 */
static void bdrv_parents_drained_notify(BlockDriverState *bs, bool begin)
{
    for (GList *l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;
        void (*fn)(BdrvChild *c) = begin ? c->klass->drained_begin :
                                           c->klass->drained_end;

        if (fn) {
            fn(c);
        }
        if (c->parent) {
            bdrv_driver_drained_notify(c->parent, begin);
            bdrv_parents_drained_notify(c->parent, begin);
        }
    }
}

void bdrv_drained_begin(BlockDriverState *bs)
{
    AioContext *ctx = bdrv_get_aio_context(bs);

    if (bs->quiesce_counter++ == 0) {
        __atomic_fetch_add(&bdrv_quiesced_nodes, 1, __ATOMIC_SEQ_CST);
        bdrv_driver_drained_notify(bs, true);
        bdrv_parents_drained_notify(bs, true);
    }
    if (!qemu_in_coroutine()) {
        AIO_WAIT_WHILE(ctx, bdrv_drain_busy(bs));
        return;
    }
    /* a coroutine must not poll: it lets the loop run a round and looks */
    while (bdrv_drain_busy(bs)) {
        aio_co_schedule(ctx, qemu_coroutine_self());
        qemu_coroutine_yield();
    }
}

void bdrv_drained_end(BlockDriverState *bs)
{
    assert(bs->quiesce_counter > 0);
    if (--bs->quiesce_counter == 0) {
        assert(__atomic_load_n(&bdrv_quiesced_nodes, __ATOMIC_RELAXED) > 0);
        __atomic_fetch_sub(&bdrv_quiesced_nodes, 1, __ATOMIC_SEQ_CST);
        bdrv_driver_drained_notify(bs, false);
        bdrv_parents_drained_notify(bs, false);
        qemu_co_queue_restart_all(&bs->drain_queue);
    }
}

void bdrv_drain(BlockDriverState *bs)
{
    bdrv_drained_begin(bs);
    bdrv_drained_end(bs);
}

void bdrv_drain_all_register(BdrvDrainAllEntry *entry)
{
    entry->link.data = entry;
    g_queue_push_tail_link(&drain_all_users, &entry->link);
}

void bdrv_drain_all_unregister(BdrvDrainAllEntry *entry)
{
    g_queue_unlink(&drain_all_users, &entry->link);
}

void bdrv_drain_all(void)
{
    g_autoptr(GPtrArray) nodes = g_ptr_array_new();
    GList *l;
    BlockDriverState *bs;

    /* the users above the graph first, so that their requests finish */
    for (l = drain_all_users.head; l; l = l->next) {
        BdrvDrainAllEntry *entry = l->data;

        entry->drain(entry->opaque);
    }
    /*
     * One drained section over all nodes, as QEMU's: a job above several
     * of them pauses once, not once per node (its JOB_STATUS_CHANGE
     * events are QEMU's).  The references keep a node that a job ending
     * meanwhile drops until its section is over.
     */
    for (bs = bdrv_next_node(NULL); bs; bs = bdrv_next_node(bs)) {
        bdrv_ref(bs);
        g_ptr_array_add(nodes, bs);
    }
    for (guint i = 0; i < nodes->len; i++) {
        bdrv_drained_begin(nodes->pdata[i]);
    }
    for (guint i = 0; i < nodes->len; i++) {
        bdrv_drained_end(nodes->pdata[i]);
        bdrv_unref(nodes->pdata[i]);
    }
}

