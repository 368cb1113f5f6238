/*
 * What the two files of reopen share: block-reopen.c (the transaction:
 * prepare, permissions, commit or abort, child edges moved) and
 * block-reopen-opts.c (blockdev-reopen's rules: which nodes are queued
 * with which options, which children they are to have).  The invariants
 * are block-reopen.c's.  Nothing else includes it.
 */
#ifndef QBLOCK_BLOCK_REOPEN_INT_H
#define QBLOCK_BLOCK_REOPEN_INT_H

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

/* The flags a child inherits from its parent's new @flags. */
#define BDRV_REOPEN_INHERITABLE \
    (BDRV_O_RDWR | BDRV_O_AUTO_RDONLY | BDRV_O_CACHE_MASK)

/* ---- block-reopen.c ---- */

/* The queue: a GPtrArray of BdrvReopenEntry that frees them. */
GPtrArray *bdrv_reopen_queue_new(void);
/* @bs's entry in @queue, or NULL. */
BdrvReopenEntry *bdrv_reopen_find(GPtrArray *queue, BlockDriverState *bs);
/* A new entry of @bs at the end of @queue, with a reference (inv. 3). */
BdrvReopenEntry *bdrv_reopen_entry_new(GPtrArray *queue, BlockDriverState *bs);
/*
 * Queues @bs with the option changes @changes (consumed) over its current
 * options and @flags, then its non-backing children, which inherit the
 * resulting flags as at open, and its backing child if @changes has
 * "backing.*" options (bdrv_reopen()'s way; nothing if already queued).
 */
void bdrv_reopen_queue_add(GPtrArray *queue, BlockDriverState *bs,
                           QDict *changes, int flags);
/* Invariant 2: is @bs @top, or below it? */
bool bdrv_reopen_is_below(BlockDriverState *top, BlockDriverState *bs);
/*
 * Points "file" or "backing" (@which) of @e at e->swaps[which].new_bs at
 * once (invariant 1), so that the next node's cycle check sees it, as
 * QEMU's does; undone by the abort.
 */
int bdrv_reopen_apply_swap(BdrvReopenEntry *e, int which, Error **errp);
/* Drains the queue's nodes, runs the transaction, ends the drains. */
int bdrv_reopen_run(GPtrArray *queue, Error **errp);

/* ---- block-reopen-opts.c: for blockdev-reopen's entries ---- */

/*
 * The keys of @d in the order QEMU's QDict iterates them (by hash bucket),
 * so that of several bad options the one QEMU names is named.
 */
GPtrArray *bdrv_reopen_keys_in_qemu_order(QDict *d);
/* Options of the node's open left out that its driver cannot reset. */
int bdrv_reopen_check_reset(BdrvReopenEntry *e, Error **errp);
/*
 * After the driver prepared: "backing" given when needed, and the
 * "backing" and "file" changes checked and applied.
 */
int bdrv_reopen_prepare_children(BdrvReopenEntry *e, Error **errp);

#endif
