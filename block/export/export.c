/*
 * Block exports: the registry of export types, the export list and the
 * life cycle every export type shares (see include/block/export.h for the
 * states and their invariants).
 */
#include "block/export.h"

#include "block/block_int.h"
#include "util/iothread.h"
#include "util/qapi-event.h"

static GPtrArray *blk_exp_drivers;
/* BlockExport *, in creation order (the link is embedded) */
static GQueue blk_exp_list = G_QUEUE_INIT;

void blk_exp_register(const BlockExportDriver *drv)
{
    assert(drv->create && drv->request_shutdown);
    if (!blk_exp_drivers) {
        blk_exp_drivers = g_ptr_array_new();
    }
    assert(!blk_exp_type_available(drv->type));
    g_ptr_array_add(blk_exp_drivers, (gpointer)drv);
}

static const BlockExportDriver *blk_exp_find_driver(const char *type)
{
    for (guint i = 0; blk_exp_drivers && i < blk_exp_drivers->len; i++) {
        const BlockExportDriver *drv = g_ptr_array_index(blk_exp_drivers, i);

        if (!strcmp(drv->type, type)) {
            return drv;
        }
    }
    return NULL;
}

bool blk_exp_type_available(const char *type)
{
    return blk_exp_find_driver(type) != NULL;
}

BlockExport *blk_exp_find(const char *id)
{
    for (GList *l = blk_exp_list.head; l; l = l->next) {
        BlockExport *exp = l->data;

        if (!strcmp(exp->id, id)) {
            return exp;
        }
    }
    return NULL;
}

BlockExport *blk_exp_next(BlockExport *exp)
{
    GList *l = exp ? exp->link.next : blk_exp_list.head;

    return l ? l->data : NULL;
}

/*
 * Moves the export's nodes back to the main loop, so that the iothread
 * can go (invariant 2 of util/iothread.c).  QEMU leaves them where they
 * are; nothing but the iothread's deletion can tell.  Another user of
 * the nodes in the iothread (a second export, a block job) refuses the
 * move, and is the one to move them back when it ends: not an error.
 */
static void blk_exp_leave_iothread(BlockExport *exp)
{
    AioContext *ctx = iothread_get_aio_context(exp->iothreads[0]);

    aio_context_acquire(ctx);
    blk_set_aio_context(exp->blk, qemu_get_aio_context(), NULL);
    aio_context_release(ctx);
    for (unsigned int i = 0; i < exp->nr_iothreads; i++) {
        iothread_unref(exp->iothreads[i]);
    }
    g_clear_pointer(&exp->iothreads, g_free);
    exp->nr_iothreads = 0;
}

static void blk_exp_free(BlockExport *exp)
{
    AioContext *ctx;

    if (exp->nr_iothreads) {
        blk_exp_leave_iothread(exp);
    }
    /*
     * A block job keeps its nodes in the iothread (block/blockjob.c
     * inv. 5), so the move back may have been refused: the node's users
     * (the job, which the edge's going notifies) are that context's.
     */
    ctx = exp->blk ? blk_get_aio_context(exp->blk) : qemu_get_aio_context();
    if (ctx != qemu_get_aio_context()) {
        aio_context_acquire(ctx);
    }
    blk_unref(exp->blk);
    if (ctx != qemu_get_aio_context()) {
        aio_context_release(ctx);
    }
    g_free(exp->opaque);
    g_free(exp->id);
    g_free(exp);
}

void blk_exp_set_write_cache(BlockBackend *blk, bool writeback)
{
    for (GList *l = blk_exp_list.head; l; l = l->next) {
        BlockExport *exp = l->data;

        if (exp->blk == blk && exp->drv->set_write_cache) {
            exp->drv->set_write_cache(exp, writeback);
            return;
        }
    }
    blk_set_enable_write_cache(blk, writeback);
}

static void blk_exp_resize_cb(void *opaque)
{
    BlockExport *exp = opaque;

    exp->drv->resize(exp);
}

static const BlockDevOps blk_exp_dev_ops = {
    .resize_cb = blk_exp_resize_cb,
};

/* The BlockBackend an export serves, with the permissions it needs. */
static BlockBackend *blk_exp_open_blk(JsonObject *opts, bool writable,
                                      Error **errp)
{
    const char *node_name = json_object_get_string_member(opts, "node-name");
    BlockDriverState *bs = bdrv_find_node(node_name);
    uint64_t perm = BLK_PERM_CONSISTENT_READ;
    BlockBackend *blk;

    if (!bs) {
        error_setg(errp, "Cannot find device='' nor node-name='%s'",
                   node_name);
        return NULL;
    }
    if (writable) {
        if (bdrv_is_read_only(bs)) {
            error_setg(errp, "Cannot export read-only node as writable");
            return NULL;
        }
        perm |= BLK_PERM_WRITE;
    }
    /*
     * Exports share everything, as QEMU's do: whether another user may
     * write beside them is up to that user's own permissions.
     */
    blk = blk_new_with_bs(bs, perm, BLK_PERM_ALL, errp);
    if (!blk) {
        return NULL;
    }
    blk_set_enable_write_cache(
        blk, !json_object_get_boolean_member_with_default(opts, "writethrough",
                                                          false));
    return blk;
}

/*
 * "iothread": one id (QEMU 7.2's form) or a list of ids (the form later
 * QEMU versions take for vhost-user-blk), each an iothread that exists,
 * none twice.  Returns the iothreads in order (*@n of them; NULL and 0
 * when the option is absent), or NULL with @errp set.
 */
static IOThread **blk_exp_find_iothreads(JsonObject *opts, unsigned int *n,
                                         Error **errp)
{
    JsonNode *node = json_object_get_member(opts, "iothread");
    g_autofree IOThread **list = NULL;
    JsonArray *ids;
    guint len;

    *n = 0;
    if (!node) {
        return NULL;
    }
    if (JSON_NODE_HOLDS_VALUE(node) &&
        json_node_get_value_type(node) == G_TYPE_STRING) {
        list = g_new(IOThread *, 1);
        list[0] = iothread_find(json_node_get_string(node), errp);
        if (!list[0]) {
            return NULL;
        }
        *n = 1;
        return g_steal_pointer(&list);
    }
    if (!JSON_NODE_HOLDS_ARRAY(node)) {
        /* QEMU 7.2's words: it takes a string only */
        error_setg(errp, "Invalid parameter type for 'iothread', expected: "
                   "string");
        return NULL;
    }
    ids = json_node_get_array(node);
    len = json_array_get_length(ids);
    if (len == 0) {
        error_setg(errp, "Parameter 'iothread' is an empty list: it names "
                   "no iothread");
        return NULL;
    }
    list = g_new(IOThread *, len);
    for (guint i = 0; i < len; i++) {
        JsonNode *id = json_array_get_element(ids, i);

        if (!JSON_NODE_HOLDS_VALUE(id) ||
            json_node_get_value_type(id) != G_TYPE_STRING) {
            error_setg(errp, "Invalid parameter type for 'iothread[%u]', "
                       "expected: string", i);
            return NULL;
        }
        list[i] = iothread_find(json_node_get_string(id), errp);
        if (!list[i]) {
            return NULL;
        }
        for (guint j = 0; j < i; j++) {
            if (list[j] == list[i]) {
                error_setg(errp, "iothread \"%s\" is listed twice in "
                           "'iothread' (items %u and %u)",
                           iothread_get_id(list[i]), j, i);
                return NULL;
            }
        }
    }
    *n = len;
    return g_steal_pointer(&list);
}

/*
 * iothread=ID or a list: moves the export's nodes into the first
 * iothread's context; the others serve the export's queues or
 * connections (the export type spreads them, blk_exp_spread_contexts()).
 * As QEMU, a node that cannot move (another user of it stays in the
 * main loop) fails the export only with fixed-iothread=on; otherwise the
 * export serves everything from where the node is.
 */
static int blk_exp_enter_iothread(BlockExport *exp, JsonObject *opts,
                                  Error **errp)
{
    bool fixed = json_object_get_boolean_member_with_default(
                     opts, "fixed-iothread", false);
    g_autofree IOThread **iothreads = NULL;
    unsigned int n;
    AioContext *ctx;
    int ret;

    if (!json_object_has_member(opts, "iothread")) {
        return 0;
    }
    iothreads = blk_exp_find_iothreads(opts, &n, errp);
    if (!iothreads) {
        return -EINVAL;
    }
    ctx = iothread_get_aio_context(iothreads[0]);
    aio_context_acquire(ctx);
    ret = blk_set_aio_context(exp->blk, ctx, fixed ? errp : NULL);
    aio_context_release(ctx);
    if (ret < 0) {
        return fixed ? ret : 0;
    }
    if (blk_get_aio_context(exp->blk) == ctx) {
        for (unsigned int i = 0; i < n; i++) {
            iothread_ref(iothreads[i]);
        }
        exp->iothreads = g_steal_pointer(&iothreads);
        exp->nr_iothreads = n;
    }
    return 0;
}

AioContext **blk_exp_spread_contexts(BlockExport *exp, unsigned int n)
{
    AioContext **ctxs = g_new(AioContext *, n);

    for (unsigned int k = 0; k < n; k++) {
        ctxs[k] = exp->nr_iothreads ?
                  iothread_get_aio_context(
                      exp->iothreads[k % exp->nr_iothreads]) : exp->ctx;
    }
    return ctxs;
}

BlockExport *blk_exp_add(JsonObject *opts, Error **errp)
{
    const char *type = json_object_get_string_member(opts, "type");
    const char *id = json_object_get_string_member(opts, "id");
    const BlockExportDriver *drv = blk_exp_find_driver(type);
    BlockExport *exp;

    if (!drv) {
        error_setg(errp, "Export type '%s' is not available in this build",
                   type);
        return NULL;
    }
    if (blk_exp_find(id)) {
        error_setg(errp, "Block export id '%s' is already in use", id);
        return NULL;
    }
    if (json_object_has_member(opts, "iothread")) {
        unsigned int n;
        g_autofree IOThread **iothreads = blk_exp_find_iothreads(opts, &n,
                                                                 errp);

        if (!iothreads) {
            return NULL;
        }
    }

    exp = g_new0(BlockExport, 1);
    exp->drv = drv;
    exp->id = g_strdup(id);
    exp->writable = json_object_get_boolean_member_with_default(
                        opts, "writable", false);
    exp->refcount = 1;
    exp->user_owned = true;
    exp->link.data = exp;
    exp->opaque = drv->instance_size ? g_malloc0(drv->instance_size) : NULL;
    exp->blk = blk_exp_open_blk(opts, exp->writable, errp);
    if (exp->blk && blk_exp_enter_iothread(exp, opts, errp) < 0) {
        blk_exp_free(exp);
        return NULL;
    }
    exp->ctx = exp->blk ? blk_get_aio_context(exp->blk) : NULL;
    if (!exp->blk || drv->create(exp, opts, errp) < 0) {
        blk_exp_free(exp);
        return NULL;
    }
    if (drv->resize) {
        blk_set_dev_ops(exp->blk, &blk_exp_dev_ops, exp);
    }
    g_queue_push_tail_link(&blk_exp_list, &exp->link);
    return exp;
}

void blk_exp_ref(BlockExport *exp)
{
    assert(exp->refcount > 0);
    exp->refcount++;
}

void blk_exp_unref_cb(void *exp)
{
    blk_exp_unref(exp);
}

void blk_exp_unref(BlockExport *exp)
{
    QDict *data;

    if (qemu_get_current_aio_context() != qemu_get_aio_context()) {
        /*
         * An export's driver in an iothread lets go from there: the
         * export list and the events are the main loop's (invariant 8
         * of docs/architecture.md's threading rules).
         */
        aio_bh_schedule_oneshot(qemu_get_aio_context(), blk_exp_unref_cb,
                                exp);
        return;
    }
    assert(exp->refcount > 0);
    if (--exp->refcount > 0) {
        return;
    }
    /* invariant 1: the export's own reference went with the removal */
    assert(!exp->user_owned);
    if (exp->drv->delete) {
        exp->drv->delete(exp);
    }
    g_queue_unlink(&blk_exp_list, &exp->link);
    data = qdict_new();
    qdict_put_str(data, "id", exp->id);
    /*
     * The event once the node is free, as QEMU sends it: letting go of
     * the BlockBackend drains the node, which waits for the requests in
     * flight below it (a copy-before-write filter's slow copy), and a
     * client told earlier could find the node still in use.
     */
    blk_exp_free(exp);
    qapi_event_emit("BLOCK_EXPORT_DELETED", data);
}

void blk_exp_request_shutdown(BlockExport *exp)
{
    if (!exp->user_owned) {
        return;
    }
    /* the reference keeps the export alive while its driver disconnects */
    blk_exp_ref(exp);
    exp->drv->request_shutdown(exp);
    exp->user_owned = false;
    blk_exp_unref(exp);
    blk_exp_unref(exp);
}

int blk_exp_del(const char *id, bool hard, Error **errp)
{
    BlockExport *exp = blk_exp_find(id);

    if (!exp) {
        error_setg(errp, "Export '%s' is not found", id);
        return -ENOENT;
    }
    if (!exp->user_owned) {
        error_setg(errp, "Export '%s' is already shutting down", id);
        return -EBUSY;
    }
    if (!hard && (exp->drv->client_count ? exp->drv->client_count(exp) > 0
                                          : exp->refcount > 1)) {
        error_setg(errp, "export '%s' still in use", id);
        error_append_hint(errp, "Use mode='hard' to force client "
                          "disconnect\n");
        return -EBUSY;
    }
    blk_exp_request_shutdown(exp);
    return 0;
}

static bool blk_exp_any_of_type(const char *type)
{
    for (BlockExport *exp = blk_exp_next(NULL); exp; exp = blk_exp_next(exp)) {
        if (!type || !strcmp(exp->drv->type, type)) {
            return true;
        }
    }
    return false;
}

void blk_exp_close_all_type(const char *type)
{
    BlockExport *exp = blk_exp_next(NULL);

    while (exp) {
        /* shutting down may delete it: step past it first */
        BlockExport *next = blk_exp_next(exp);

        if (!type || !strcmp(exp->drv->type, type)) {
            blk_exp_request_shutdown(exp);
        }
        exp = next;
    }
    AIO_WAIT_WHILE(qemu_get_aio_context(), blk_exp_any_of_type(type));
}

void blk_exp_close_all(void)
{
    blk_exp_close_all_type(NULL);
}
