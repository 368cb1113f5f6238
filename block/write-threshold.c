/*
 * Write thresholds (QEMU's block-set-write-threshold): a management
 * application that keeps an image on a thin volume (an LVM logical volume
 * of oVirt, say) sets a threshold on the node that writes the volume, is
 * told by BLOCK_WRITE_THRESHOLD when a write goes past it, and grows the
 * volume before the image reaches its end.
 *
 * Invariants:
 *  1. The event is sent at most once per threshold set: the write that
 *     sends it clears the threshold first (QEMU: no flood of events
 *     while a guest goes on writing past it).
 *  2. bs->write_threshold is read and written atomically: the monitor
 *     sets it from the main loop while the node's requests check it in
 *     an iothread.
 */
#include "block/block_int.h"
#include "qblock/block-node.h"
#include "util/qapi-event.h"

void bdrv_write_threshold_set(BlockDriverState *bs, uint64_t threshold)
{
    __atomic_store_n(&bs->write_threshold, threshold, __ATOMIC_RELAXED);
}

uint64_t bdrv_write_threshold_get(BlockDriverState *bs)
{
    return __atomic_load_n(&bs->write_threshold, __ATOMIC_RELAXED);
}

void bdrv_write_threshold_check_write(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes)
{
    uint64_t threshold = bdrv_write_threshold_get(bs);
    uint64_t end = offset + bytes;
    QDict *data;

    if (likely(!threshold) || end <= threshold) {
        return;
    }
    /* invariant 1: of writes that race past it, one reports */
    if (!__atomic_compare_exchange_n(&bs->write_threshold, &threshold, 0,
                                     false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED)) {
        return;
    }
    data = qdict_new();
    qdict_put_str(data, "node-name", bs->node_name);
    qdict_put_int(data, "amount-exceeded", end - threshold);
    qdict_put_int(data, "write-threshold", threshold);
    qapi_event_emit("BLOCK_WRITE_THRESHOLD", data);
}
