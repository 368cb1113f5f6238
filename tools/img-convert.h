/*
 * qblock-img convert: the copy engine and its state, shared by the command
 * line (img-convert.c) and the copy itself (img-convert-copy.c).
 *
 * convert works in 512-byte sectors, as qemu-img does, so that the target
 * gets the same size and the same allocation.  The copy runs in up to 16
 * coroutines (-m) on the main AioContext.  Each takes the next chunk under
 * the state lock: a run of one block status (data, zeroes, or "leave it to
 * the backing file"), at most one buffer long.  Reads run in parallel;
 * writes too with -W; otherwise in the order of the disk (invariant 2).
 *
 * Invariants:
 *  1. sector_num only grows, and only under lock: chunks never overlap.
 *  2. Without -W, writes start in the order of the disk.  wr_offs is
 *     the end of the last chunk whose write completed or, on a target
 *     that allocates nothing (overlap_writes: raw, or a protocol node),
 *     started; a coroutine starts its write only when wr_offs equals its
 *     chunk's start.  On such a target a coroutine advances wr_offs and
 *     wakes the next writer just before its own write; the woken one
 *     runs from the event loop (aio_co_wake() inside a coroutine
 *     schedules), so only once this one has yielded in its write, by
 *     then submitted: writes overlap, and where the data lands (what a
 *     thinly provisioned device or file allocates) follows their order.
 *     A format allocates as it writes, piece by piece, so there writes
 *     go one at a time, and an image is laid out as qemu-img's.
 *  3. A coroutine that waits has wait_sector_num set to its chunk's start;
 *     the owner of the chunk before it wakes it once done, whether it
 *     wrote or gave up after an error, so no waiter is left behind.
 */
#ifndef QBLOCK_IMG_CONVERT_H
#define QBLOCK_IMG_CONVERT_H

#include "qblock-img.h"

/* Bounds of -S and of the copy buffer, in sectors (16 MiB). */
#define IMG_MAX_BUF_SECTORS 32768
/* Default copy buffer: 2 MiB. */
#define IMG_IO_BUF_SECTORS 4096
/* Default -S: 4 KiB. */
#define IMG_MIN_SPARSE_DEFAULT 8
#define IMG_MAX_COROUTINES 16
/* Clusters per compressed write request, which a format may compress in
 * parallel (qcow2 does, one worker thread per cluster, up to 16). */
#define IMG_COMPRESS_CLUSTERS 16
/* Largest request the block layer takes, in sectors. */
#define IMG_REQUEST_MAX_SECTORS (INT_MAX >> BDRV_SECTOR_BITS)

typedef enum ImgConvertStatus {
    IMG_BLK_ZERO,
    IMG_BLK_DATA,
    IMG_BLK_BACKING_FILE,
} ImgConvertStatus;

typedef struct ImgConvertState {
    /* --- set before the copy starts, read-only after --- */
    BlockBackend **src;
    int64_t *src_sectors;
    int64_t *src_bytes;
    int *src_alignment;
    int src_num;
    int64_t total_sectors;
    BlockBackend *target;
    bool target_has_backing;
    /* length of the new target's backing file in sectors, or -1 */
    int64_t target_backing_sectors;
    bool has_zero_init;
    bool compressed;
    bool salvage;
    bool quiet;
    bool wr_in_order;
    /* invariant 2: the target allocates nothing (raw, or no format) */
    bool overlap_writes;
    int min_sparse;
    int alignment;
    int64_t cluster_sectors;
    int64_t buf_sectors;
    int num_coroutines;
    ImgProgress progress;
    int64_t allocated_sectors;

    /* --- under lock --- */
    CoMutex lock;
    int64_t sector_num;
    int64_t sector_next_status;
    ImgConvertStatus status;
    int src_cur;
    int64_t src_cur_offset;

    /* --- main context only (coroutines run there) --- */
    /* -EINPROGRESS while copying, then 0 or the first error */
    int ret;
    int running_coroutines;
    int64_t wr_offs;
    int64_t allocated_done;
    Coroutine *co[IMG_MAX_COROUTINES];
    int64_t wait_sector_num[IMG_MAX_COROUTINES];
} ImgConvertState;

/*
 * Copies every source into the target as the state says, in
 * s->num_coroutines coroutines; 0 or the first error (printed).
 */
int img_convert_do_copy(ImgConvertState *s);

#endif
