/*
 * What a user of the block layer (a tool, the storage daemon) may read of
 * a node beyond block.h: its file names and open flags, its driver, its
 * backing node and children, the BlockBackends attached to it, its
 * request limits and its counters.
 *
 * The node's struct stays private to block_int.h, so that the generic
 * layer and the drivers can change it without touching its users: these
 * calls are the whole view a user gets.  Each one only reads; none
 * yields, so any thread that may use the node may call them.
 */
#ifndef QBLOCK_BLOCK_NODE_H
#define QBLOCK_BLOCK_NODE_H

#include "block/block-common.h"

/*
 * Per-node counters of requests that reached the driver (tests use them
 * to count flushes at the file node).
 */
typedef struct BdrvNodeStats {
    uint64_t reads, writes, zero_writes, discards;
    uint64_t flushes;           /* calls that reached flush_to_disk/flush */
    uint64_t bytes_read, bytes_written;
} BdrvNodeStats;

/* Length in bytes, rounded up to whole sectors as QEMU reports it; -errno. */
int64_t bdrv_getlength(BlockDriverState *bs);
/* Whether @bs reads as zeroes after creation (a device keeps old data). */
bool bdrv_has_zero_init(BlockDriverState *bs);

/* Resolves @backing relative to @base's directory; caller frees. */
char *bdrv_get_full_backing_filename_from_filename(const char *base,
                                                   const char *backing,
                                                   Error **errp);
/*
 * Resolves @backing as a backing file name of @bs: relative to the
 * directory of @bs's file name, or, where that is a json: name, of the
 * first node below it along the file children with a plain one (an image
 * under a filter).  Caller frees; NULL with @errp where there is none.
 */
char *bdrv_get_full_backing_filename(BlockDriverState *bs,
                                     const char *backing, Error **errp);

/*
 * The name the node was opened under, and a name that opens this node
 * alone ("" if none does: a json: name is then needed).  Both are as
 * bdrv_refresh_filename() last left them.
 */
const char *bdrv_get_filename(BlockDriverState *bs);
const char *bdrv_get_exact_filename(BlockDriverState *bs);
/* The BDRV_O_* flags of the last open or reopen. */
int bdrv_get_open_flags(BlockDriverState *bs);
/* The node's driver (block-driver.h says what can be asked of it). */
const BlockDriver *bdrv_get_driver(BlockDriverState *bs);

/* The node behind the backing edge of @bs, or NULL if it has none. */
BlockDriverState *bdrv_backing_bs(BlockDriverState *bs);
/* The backing format the image of @bs records, "" if none. */
const char *bdrv_get_backing_format(BlockDriverState *bs);

typedef void BdrvChildFunc(BlockDriverState *child, const char *name,
                           void *opaque);
/*
 * Calls @fn for every child of @bs, in the order they were attached, with
 * the edge's name ("file", "backing", "image", ...).  @fn must not change
 * the graph.
 */
void bdrv_foreach_child(BlockDriverState *bs, BdrvChildFunc *fn,
                        void *opaque);

/* The references held on @bs (parents, BlockBackends, the monitor). */
int bdrv_get_refcnt(BlockDriverState *bs);
/* True if a BlockBackend is attached to @bs. */
bool bdrv_has_blk(BlockDriverState *bs);
/*
 * The BlockBackends attached to @bs, in the order they were attached;
 * the caller frees the list (g_slist_free), not the backends.
 */
GSList *bdrv_get_parent_blks(BlockDriverState *bs);

/*
 * Request limits the node announced: the alignment every request to it is
 * rounded to, the transfer size it prefers (cluster size for formats, 0
 * if none) and the discard granularity (0 if none).
 */
uint32_t bdrv_get_request_alignment(BlockDriverState *bs);
uint32_t bdrv_get_opt_transfer(BlockDriverState *bs);
uint32_t bdrv_get_pdiscard_alignment(BlockDriverState *bs);

/*
 * The write threshold of a node (QEMU's block-set-write-threshold): the
 * first write, zero write or discard that ends past it emits the event
 * BLOCK_WRITE_THRESHOLD and sets it back to 0, which means none.  Used
 * to grow a thin volume before the image on it fills it.
 */
void bdrv_write_threshold_set(BlockDriverState *bs, uint64_t threshold);
uint64_t bdrv_write_threshold_get(BlockDriverState *bs);

/* The node's own counters, live: they change as requests complete. */
const BdrvNodeStats *bdrv_get_node_stats(BlockDriverState *bs);

#endif
