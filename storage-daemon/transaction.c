/*
 * Transactions (transaction.h): prepare every action, then commit all or
 * abort all, then clean all, as QEMU's qmp_transaction does.
 *
 * Invariants:
 *  1. An action is on the list before its prepare runs, so that a
 *     prepare that fails half way still gets its abort and its clean.
 *  2. Abort runs only after some prepare failed, on every listed action,
 *     last first; commit only when every prepare succeeded, in order;
 *     clean always, in order, once per action, right after the end of
 *     the action's drain (transaction_action_drain).
 *  3. Before the first prepare, every request in flight anywhere has
 *     completed (bdrv_drain_all), so that what the actions see of their
 *     nodes is what the clients were answered.
 */
#include "transaction.h"

#include "block/block.h"
#include "qapi-qmp.h"
#include "qmp-dispatch.h"

/* Every action a transaction accepts: add yours here (transaction.h). */
static const TransactionActionDriver *const transaction_actions[] = {
    &transaction_action_abort,
    &transaction_action_block_dirty_bitmap_add,
    &transaction_action_block_dirty_bitmap_clear,
    &transaction_action_block_dirty_bitmap_disable,
    &transaction_action_block_dirty_bitmap_enable,
    &transaction_action_block_dirty_bitmap_merge,
    &transaction_action_block_dirty_bitmap_remove,
    &transaction_action_blockdev_backup,
    &transaction_action_blockdev_snapshot,
    &transaction_action_blockdev_snapshot_internal_sync,
    &transaction_action_blockdev_snapshot_sync,
    &transaction_action_drive_backup,
};

static const TransactionActionDriver *transaction_find_action(
    const char *type)
{
    for (size_t i = 0; i < ARRAY_SIZE(transaction_actions); i++) {
        if (!strcmp(transaction_actions[i]->type, type)) {
            return transaction_actions[i];
        }
    }
    /* the schema admits only the kinds it declares: all are listed */
    g_assert_not_reached();
}

void transaction_action_drain(TransactionAction *action,
                              BlockDriverState *bs)
{
    assert(!action->drained);
    bdrv_drained_begin(bs);
    action->drained = bs;
}

/* One action and its data, as the request gave them. */
typedef struct TransactionItem {
    const char *type;
    JsonObject *data;
} TransactionItem;

static void transaction_free_action(TransactionAction *action)
{
    g_free(action->opaque);
    g_free(action);
}

static int transaction_prepare(TransactionAction *action, JsonObject *data,
                               Error **errp)
{
    if (action->txn->grouped && !action->drv->supports_grouped) {
        error_setg(errp, "Action '%s' does not support Transaction "
                   "property completion-mode = grouped", action->drv->type);
        return -EINVAL;
    }
    return action->drv->prepare(action, data, errp);
}

/* Runs @items as one transaction (the invariants above). */
static int transaction_run(const TransactionItem *items, size_t n,
                           bool grouped, Error **errp)
{
    Transaction txn = { .grouped = grouped };
    g_autoptr(GPtrArray) actions = g_ptr_array_new();
    int ret = 0;

    /* invariant 3 */
    bdrv_drain_all();
    for (size_t i = 0; i < n && ret == 0; i++) {
        TransactionAction *action = g_new0(TransactionAction, 1);

        action->drv = transaction_find_action(items[i].type);
        action->txn = &txn;
        action->opaque = action->drv->instance_size ?
                         g_malloc0(action->drv->instance_size) : NULL;
        /* invariant 1 */
        g_ptr_array_add(actions, action);
        ret = transaction_prepare(action, items[i].data, errp);
    }
    /* invariant 2 */
    if (ret == 0) {
        for (guint i = 0; i < actions->len; i++) {
            TransactionAction *action = actions->pdata[i];

            if (action->drv->commit) {
                action->drv->commit(action);
            }
        }
    } else {
        for (guint i = actions->len; i > 0; i--) {
            TransactionAction *action = actions->pdata[i - 1];

            if (action->drv->abort) {
                action->drv->abort(action);
            }
        }
    }
    for (guint i = 0; i < actions->len; i++) {
        TransactionAction *action = actions->pdata[i];

        if (action->drained) {
            bdrv_drained_end(action->drained);
        }
        if (action->drv->clean) {
            action->drv->clean(action);
        }
        transaction_free_action(action);
    }
    if (txn.job_group) {
        txn.job_group_unref(txn.job_group);
    }
    return ret;
}

/*
 * The one implementation of every command that is also an action
 * (transaction_register_single_command): @opaque is the action's driver,
 * whose type is the command's name and whose data are its arguments.
 */
static void transaction_qmp_single(JsonObject *args, const void *opaque,
                                   JsonNode **ret, Error **errp)
{
    const TransactionActionDriver *drv = opaque;
    TransactionItem item = { .type = drv->type, .data = args };

    transaction_run(&item, 1, false, errp);
}

void transaction_register_single_command(const TransactionActionDriver *drv)
{
    qmp_register_command_data(drv->type, transaction_qmp_single, drv);
}

static void qmp_transaction(JsonObject *args, JsonNode **ret, Error **errp)
{
    JsonArray *list = json_object_get_array_member(args, "actions");
    guint n = json_array_get_length(list);
    g_autofree TransactionItem *items = g_new0(TransactionItem, MAX(n, 1));
    bool grouped = false;

    if (json_object_has_member(args, "properties")) {
        JsonObject *props = json_object_get_object_member(args,
                                                          "properties");

        grouped = !strcmp(json_object_get_string_member_with_default(
                              props, "completion-mode", "individual"),
                          "grouped");
    }
    for (guint i = 0; i < n; i++) {
        JsonObject *a = json_array_get_object_element(list, i);

        /* the schema checked that both are there, with their types */
        items[i].type = json_object_get_string_member(a, "type");
        items[i].data = json_object_get_object_member(a, "data");
    }
    transaction_run(items, n, grouped, errp);
}

/* ---- the abort action ---- */

static int transaction_abort_prepare(TransactionAction *action,
                                     JsonObject *data, Error **errp)
{
    error_setg(errp, "Transaction aborted using Abort action");
    return -ECANCELED;
}

const TransactionActionDriver transaction_action_abort = {
    .type               = "abort",
    /* it fails whatever the mode, as in QEMU */
    .supports_grouped   = true,
    .prepare            = transaction_abort_prepare,
};

void transaction_register_commands(void)
{
    qmp_register_command("transaction", qmp_transaction);
}
