/*
 * blkcrash: a filter that simulates a disk's volatile write cache and a
 * power cut, for durability tests (see docs/block-options.md, blkcrash).
 *
 * Writes (and zero writes, discards) that reached the node since its last
 * flush are "in the cache": kept in memory, visible to reads, not in the
 * file.  A flush moves them into the file in the order they were made and
 * then flushes the file.  blkcrash_power_cut() loses the cache and kills
 * the node: every later request fails with -EIO, so not even closing the
 * image writes anything more, and the file holds exactly what a disk
 * would after losing power.
 */
#ifndef BLOCK_BLKCRASH_H
#define BLOCK_BLKCRASH_H

#include "block/block_int.h"

typedef enum BlkcrashCut {
    /* every unflushed write is lost */
    BLKCRASH_CUT_ALL,
    /* each unflushed write independently reached the disk or not */
    BLKCRASH_CUT_RANDOM_WRITES,
    /* each 512-byte sector of each unflushed write independently did */
    BLKCRASH_CUT_RANDOM_SECTORS,
} BlkcrashCut;

/*
 * The first blkcrash node at or below @bs, following file/children
 * edges; NULL if there is none.
 */
BlockDriverState *blkcrash_find(BlockDriverState *bs);
/*
 * Waits for the node's requests in flight, then cuts the power as @mode
 * says (random choices from @seed).  Returns the number of unflushed
 * writes the cache held, or -errno (-EINVAL: not a live blkcrash node).
 */
int blkcrash_power_cut(BlockDriverState *bs, BlkcrashCut mode,
                       uint32_t seed);
/*
 * Arms a cut for the @request-th request to reach the node (counted from
 * its open, see blkcrash_requests()): when it arrives the power goes as
 * @mode says and it fails, as does everything after it.  -EINVAL if the
 * node is not a live blkcrash node or @request is already past.
 */
int blkcrash_arm(BlockDriverState *bs, uint64_t request, BlkcrashCut mode,
                 uint32_t seed);
/* Reads, writes, zero writes, discards and flushes that reached the node. */
uint64_t blkcrash_requests(BlockDriverState *bs);
bool blkcrash_is_dead(BlockDriverState *bs);
/* True if some unflushed write overlaps [offset, offset + bytes). */
bool blkcrash_is_unflushed(BlockDriverState *bs, int64_t offset,
                           int64_t bytes);
/* Bytes of unflushed writes the node holds. */
uint64_t blkcrash_unflushed_bytes(BlockDriverState *bs);

#endif
