/*
 * Named events that format drivers emit at their metadata steps.  blkdebug
 * matches rules against them (inject-error, set-state, break points); the
 * names are the ones QEMU's blkdebug accepts, so that config files written
 * for QEMU work unchanged.
 */
#ifndef QBLOCK_DEBUG_EVENTS_H
#define QBLOCK_DEBUG_EVENTS_H

#define BLKDBG_EVENT_LIST(X)                                            \
    X(L1_UPDATE, "l1_update")                                           \
    X(L1_GROW_ALLOC_TABLE, "l1_grow_alloc_table")                       \
    X(L1_GROW_WRITE_TABLE, "l1_grow_write_table")                       \
    X(L1_GROW_ACTIVATE_TABLE, "l1_grow_activate_table")                 \
    X(L2_LOAD, "l2_load")                                               \
    X(L2_UPDATE, "l2_update")                                           \
    X(L2_UPDATE_COMPRESSED, "l2_update_compressed")                     \
    X(L2_ALLOC_COW_READ, "l2_alloc_cow_read")                           \
    X(L2_ALLOC_WRITE, "l2_alloc_write")                                 \
    X(READ_AIO, "read_aio")                                             \
    X(READ_BACKING_AIO, "read_backing_aio")                             \
    X(READ_COMPRESSED, "read_compressed")                               \
    X(WRITE_AIO, "write_aio")                                           \
    X(WRITE_COMPRESSED, "write_compressed")                             \
    X(VMSTATE_LOAD, "vmstate_load")                                     \
    X(VMSTATE_SAVE, "vmstate_save")                                     \
    X(COW_READ, "cow_read")                                             \
    X(COW_WRITE, "cow_write")                                           \
    X(REFTABLE_LOAD, "reftable_load")                                   \
    X(REFTABLE_GROW, "reftable_grow")                                   \
    X(REFTABLE_UPDATE, "reftable_update")                               \
    X(REFBLOCK_LOAD, "refblock_load")                                   \
    X(REFBLOCK_UPDATE, "refblock_update")                               \
    X(REFBLOCK_UPDATE_PART, "refblock_update_part")                     \
    X(REFBLOCK_ALLOC, "refblock_alloc")                                 \
    X(REFBLOCK_ALLOC_HOOKUP, "refblock_alloc_hookup")                   \
    X(REFBLOCK_ALLOC_WRITE, "refblock_alloc_write")                     \
    X(REFBLOCK_ALLOC_WRITE_BLOCKS, "refblock_alloc_write_blocks")       \
    X(REFBLOCK_ALLOC_WRITE_TABLE, "refblock_alloc_write_table")         \
    X(REFBLOCK_ALLOC_SWITCH_TABLE, "refblock_alloc_switch_table")       \
    X(CLUSTER_ALLOC, "cluster_alloc")                                   \
    X(CLUSTER_ALLOC_BYTES, "cluster_alloc_bytes")                       \
    X(CLUSTER_FREE, "cluster_free")                                     \
    X(FLUSH_TO_OS, "flush_to_os")                                       \
    X(FLUSH_TO_DISK, "flush_to_disk")                                   \
    X(PWRITEV_RMW_HEAD, "pwritev_rmw_head")                             \
    X(PWRITEV_RMW_AFTER_HEAD, "pwritev_rmw_after_head")                 \
    X(PWRITEV_RMW_TAIL, "pwritev_rmw_tail")                             \
    X(PWRITEV_RMW_AFTER_TAIL, "pwritev_rmw_after_tail")                 \
    X(PWRITEV, "pwritev")                                               \
    X(PWRITEV_ZERO, "pwritev_zero")                                     \
    X(PWRITEV_DONE, "pwritev_done")                                     \
    X(EMPTY_IMAGE_PREPARE, "empty_image_prepare")                       \
    X(L1_SHRINK_WRITE_TABLE, "l1_shrink_write_table")                   \
    X(L1_SHRINK_FREE_L2_CLUSTERS, "l1_shrink_free_l2_clusters")         \
    X(COR_WRITE, "cor_write")                                           \
    X(CLUSTER_ALLOC_SPACE, "cluster_alloc_space")                       \
    X(NONE, "none")

typedef enum BlkdebugEvent {
#define BLKDBG_ENUM_ITEM(sym, name) BLKDBG_##sym,
    BLKDBG_EVENT_LIST(BLKDBG_ENUM_ITEM)
#undef BLKDBG_ENUM_ITEM
    BLKDBG__MAX,
} BlkdebugEvent;

/* "l1_update" for BLKDBG_L1_UPDATE; NULL if out of range. */
const char *blkdebug_event_name(BlkdebugEvent event);
/* The event named @name, or -1. */
int blkdebug_event_lookup(const char *name);

#endif
