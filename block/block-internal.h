/*
 * What the graph's files (block.c, block-perm.c, block-reopen.c,
 * block-filename.c) share beyond block_int.h: the permission transaction,
 * the common options of open and reopen, and file name syntax.  Nothing
 * outside these files includes it.
 */
#ifndef QBLOCK_BLOCK_INTERNAL_H
#define QBLOCK_BLOCK_INTERNAL_H

#include "block/block_int.h"

/* ---- permissions (block-perm.c) ---- */

/* A permission update that was checked but not yet committed. */
typedef struct BdrvPermTran {
    GPtrArray *order;           /* the nodes, parents first */
    GArray *undo;               /* BdrvPermUndo */
    GPtrArray *checked;         /* nodes whose check_perm succeeded */
} BdrvPermTran;

/*
 * Computes and checks the permissions of @bs and of every node below it
 * from the edges of their parents, after the caller changed some edge to
 * @bs (block-perm.c's invariant 1, first half).  @going_read_only (NULL
 * outside a reopen) holds the nodes a reopen makes read-only, for the
 * error message.  On success the caller must bdrv_perm_commit() @tran; on
 * failure nothing below @bs has changed.
 */
int bdrv_perm_check(BlockDriverState *bs, GHashTable *going_read_only,
                    BdrvPermTran *tran, Error **errp);
/* Tells every node of @tran its new permissions, and frees @tran. */
void bdrv_perm_commit(BdrvPermTran *tran);
/*
 * Puts back what bdrv_perm_check() changed for @tran, and frees it: for a
 * caller that checked several subtrees and must drop all when one fails.
 */
void bdrv_perm_abort(BdrvPermTran *tran);
/* Checks and commits in one go. */
int bdrv_refresh_perms(BlockDriverState *bs, Error **errp);
/* What @bs asks of its child @c, given what its own parents ask of it. */
void bdrv_child_perms(BlockDriverState *bs, BdrvChild *c, uint64_t perm,
                      uint64_t shared, uint64_t *nperm, uint64_t *nshared);

/* ---- options common to every node (block.c) ---- */

/* The common option values of one open or reopen, before they apply. */
typedef struct BdrvCommonOpts {
    int flags;
    BlockdevDetectZeroesOptions detect_zeroes;
    bool force_share;
    char *driver;
    char *node_name;
} BdrvCommonOpts;

void bdrv_common_opts_clear(BdrvCommonOpts *c);
/*
 * Absorbs the options every node takes (qapi group bdrv-common) from
 * @options into @c; c->flags must hold the flags they modify.
 */
int bdrv_absorb_common_opts(QDict *options, BdrvCommonOpts *c,
                            Error **errp);
/*
 * Keeps in bs->options only what belongs to @bs itself, from @all
 * (block.c's invariant 3).
 */
void bdrv_store_own_options(BlockDriverState *bs, QDict *all);
/* Merges the children's limits into @bs's, then lets the driver refine. */
void bdrv_refresh_limits(BlockDriverState *bs);
/* Whether @bs is @top or lies below it (block.c). */
bool bdrv_in_subtree(BlockDriverState *top, BlockDriverState *bs);

/* ---- file names (block.c, block-filename.c) ---- */

/* "proto:rest" names a protocol; "dir/a:b" is a path (as in QEMU). */
bool bdrv_path_has_protocol(const char *path);
/* The options of a "json:{...}" file name, or NULL with @errp set. */
QDict *bdrv_parse_json_filename(const char *filename, Error **errp);

#endif
