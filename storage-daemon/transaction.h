/*
 * The transaction command: several actions that succeed or fail as one,
 * with QEMU's semantics, and the single-action transactions that
 * blockdev-snapshot-sync and its kin are.
 *
 * Life of a transaction:
 *
 *     for each action in order:  prepare --fails--> abort every action
 *                                   |              prepared so far and
 *                                   |              the failed one, last
 *                                   v              first; the error is
 *     all prepared:              commit each,      the reply
 *                                in order
 *     then, either way:          end each one's drain and
 *                                clean it, in order
 *
 * ADDING AN ACTION.  An action is a TransactionActionDriver, defined in
 * the file of the command it groups (storage-daemon/blockdev-ops.c for
 * the snapshots), declared below, and listed in transaction_actions[] in
 * transaction.c; its type goes into the schema (qapi/block-ops.json):
 * a value of TransactionActionKind and a variant of TransactionAction
 * whose "data" member is the command's argument struct.  Nothing else
 * changes.  A command that is also an action is registered with
 * transaction_register_single_command(), so that its errors are the
 * action's.
 *
 * Everything runs in the main loop thread outside coroutine context (a
 * QMP command).
 */
#ifndef QBLOCK_TRANSACTION_H
#define QBLOCK_TRANSACTION_H

#include "block/block-common.h"
#include "util/json.h"

typedef struct Transaction Transaction;
typedef struct TransactionAction TransactionAction;

/* The transaction as a whole, as its actions see it. */
struct Transaction {
    /* properties.completion-mode: true for "grouped" */
    bool grouped;
    /*
     * For actions that start jobs in grouped mode: the first of them
     * creates the group (the job layer's transaction) and keeps it here,
     * with the function that drops it when the transaction ends; the
     * others join it.  NULL until then.
     */
    void *job_group;
    void (*job_group_unref)(void *job_group);
};

typedef struct TransactionActionDriver {
    /* the action's TransactionActionKind value ("blockdev-snapshot") */
    const char *type;
    /* bytes of state that action->opaque points to (may be 0) */
    size_t instance_size;
    /*
     * True if the action accepts completion-mode "grouped" (actions that
     * start jobs); the others are refused with QEMU's message before
     * their prepare runs.
     */
    bool supports_grouped;
    /*
     * Required.  Checks the action and does it so that it can still be
     * undone: takes the snapshot, appends the overlay, drains what must
     * stay quiet until the end (transaction_action_drain()).  @data is
     * the action's "data" object, checked against the schema.  Returns
     * 0, or -errno with @errp set; abort and clean run after a failure
     * too, so state it left half done must tell them what there is to
     * undo.
     */
    int (*prepare)(TransactionAction *action, JsonObject *data,
                   Error **errp);
    /* Optional.  Every action was prepared: make it final.  Cannot fail. */
    void (*commit)(TransactionAction *action);
    /*
     * Optional.  Some action failed to prepare (maybe this one): undo
     * what prepare did.  Cannot fail; what it cannot undo it reports.
     */
    void (*abort)(TransactionAction *action);
    /*
     * Optional.  After commit or abort: release what prepare held.  The
     * drain of transaction_action_drain() has ended already.
     */
    void (*clean)(TransactionAction *action);
} TransactionActionDriver;

struct TransactionAction {
    const TransactionActionDriver *drv;
    Transaction *txn;
    void *opaque;               /* drv->instance_size bytes, zeroed */
    BlockDriverState *drained;  /* transaction_action_drain()'s node */
};

/*
 * For a prepare: drains @bs (once per action) until the transaction is
 * over, so that no request of its users runs across the action; the
 * transaction ends the drain after commit or abort, before clean.
 */
void transaction_action_drain(TransactionAction *action,
                              BlockDriverState *bs);

/* The actions of this daemon (transaction_actions[] lists them). */
extern const TransactionActionDriver transaction_action_abort;
/* storage-daemon/backup-qmp.c */
extern const TransactionActionDriver transaction_action_drive_backup;
extern const TransactionActionDriver transaction_action_blockdev_backup;
/* storage-daemon/dirty-bitmap-qmp.c */
extern const TransactionActionDriver
    transaction_action_block_dirty_bitmap_add;
extern const TransactionActionDriver
    transaction_action_block_dirty_bitmap_remove;
extern const TransactionActionDriver
    transaction_action_block_dirty_bitmap_clear;
extern const TransactionActionDriver
    transaction_action_block_dirty_bitmap_enable;
extern const TransactionActionDriver
    transaction_action_block_dirty_bitmap_disable;
extern const TransactionActionDriver
    transaction_action_block_dirty_bitmap_merge;
extern const TransactionActionDriver transaction_action_blockdev_snapshot;
extern const TransactionActionDriver
    transaction_action_blockdev_snapshot_sync;
extern const TransactionActionDriver
    transaction_action_blockdev_snapshot_internal_sync;

/*
 * Registers the command named as the action of @drv, which runs that
 * action alone, with the command's arguments (checked against the
 * schema, the same as the action's data) as its data, as a transaction
 * of its own.
 */
void transaction_register_single_command(const TransactionActionDriver *drv);

/* Registers the transaction command. */
void transaction_register_commands(void);

#endif
