/*
 * parallels: the format driver for Parallels' (Virtuozzo's) expanding disk
 * images, as QEMU 7.2 reads, writes, checks and creates them.
 *
 * The file is a 64-byte little-endian header, a block allocation table
 * (BAT, one 32-bit entry per cluster of the disk, 0 for a cluster never
 * written), then the clusters in the order they were first written.  An
 * entry counts 512-byte sectors in the old layout ("WithoutFreeSpace"
 * magic) and clusters in the newer one ("WithouFreSpacExt"); the disk size
 * is 32 bits of sectors in the old layout and 64 in the newer.  While a
 * writer has the image open, the header's inuse word holds
 * PARALLELS_INUSE_MAGIC; an image found so was not closed and is opened
 * for writing only by check -r.
 *
 * Invariants:
 *  1. After open cluster_size = tracks * 512 > 0 with tracks at most
 *     PARALLELS_MAX_TRACKS, the BAT has bat_entries <= PARALLELS_MAX_BAT
 *     entries held in memory as on disk (little-endian), and every file
 *     offset computed from an entry (entry * off_multiplier * 512 plus a
 *     cluster) fits in 63 bits or the request that meets it fails.
 *  2. While the node is writable the file's header says inuse, so a crash
 *     leaves an image that check -r all must repair; a clean close (or a
 *     reopen read-only) clears it.
 *  3. A write lands only in a cluster that lies wholly past the BAT
 *     (bat_end): no entry, however hostile, lets data overwrite the header
 *     or the table.
 *  4. data_end (where the next cluster goes) is past bat_end and every
 *     allocated cluster, and a multiple of the entry unit; allocation
 *     (moving data_end and setting an entry) happens under s->lock, and a
 *     cluster's data is written before its entry points at it.
 */
#ifndef BLOCK_PARALLELS_H
#define BLOCK_PARALLELS_H

#include "block/block_int.h"

#define PARALLELS_MAGIC_OLD     "WithoutFreeSpace"
#define PARALLELS_MAGIC_EXT     "WithouFreSpacExt"
#define PARALLELS_VERSION       2
#define PARALLELS_INUSE_MAGIC   0x746f6e59u   /* "Ynot" */
#define PARALLELS_EXT_MAGIC     0xab234cef23dcea87ull
#define PARALLELS_SECTOR        512
#define PARALLELS_HEADER_SIZE   64
/* QEMU's limits: a table of at most INT_MAX / 4 entries, clusters of at
 * most INT32_MAX / 513 sectors */
#define PARALLELS_MAX_BAT       (INT32_MAX / 4)
#define PARALLELS_MAX_TRACKS    (INT32_MAX / 513)
#define PARALLELS_DEFAULT_CLUSTER   (1u << 20)

typedef struct QEMU_PACKED ParallelsHeader {
    char magic[16];
    uint32_t version;
    uint32_t heads;
    uint32_t cylinders;
    uint32_t tracks;            /* sectors per cluster */
    uint32_t bat_entries;
    uint64_t nb_sectors;        /* the old layout uses the low 32 bits */
    uint32_t inuse;
    uint32_t data_off;          /* sectors; 0: right after the BAT */
    uint32_t flags;
    uint64_t ext_off;           /* sectors; the format extension, or 0 */
} ParallelsHeader;
_Static_assert(sizeof(ParallelsHeader) == PARALLELS_HEADER_SIZE,
               "parallels header");

typedef struct BDRVParallelsState {
    ParallelsHeader header;     /* as on disk */
    uint32_t *bat;              /* bat_entries, little-endian (inv. 1) */
    uint32_t bat_entries;
    uint64_t disk_size;
    uint64_t cluster_size;
    uint64_t off_multiplier;    /* sectors an entry counts */
    uint64_t bat_end;           /* bytes of header and table (inv. 3) */
    uint64_t data_off;          /* the header's, in bytes */
    CoMutex lock;               /* allocation (inv. 4) */
    uint64_t data_end;          /* inv. 4 */
    bool inuse_marked;          /* this node set inuse (inv. 2) */
    bool found_inuse;           /* inuse was set before this open */
} BDRVParallelsState;

/* The file offset of the cluster @index points at, 0 if none. */
static inline uint64_t parallels_entry_offset(const BDRVParallelsState *s,
                                              uint32_t index)
{
    return (uint64_t)GUINT32_FROM_LE(s->bat[index]) * s->off_multiplier *
           PARALLELS_SECTOR;
}

void parallels_find_data_end(BDRVParallelsState *s);
int64_t parallels_map(const BDRVParallelsState *s, int64_t offset,
                      int64_t bytes, int64_t *at);

/* parallels-write.c */
int parallels_mark_inuse(BlockDriverState *bs, Error **errp);
int parallels_clear_inuse(BlockDriverState *bs);
int coroutine_fn parallels_co_pwritev(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      BdrvRequestFlags flags);
int coroutine_fn parallels_co_check(BlockDriverState *bs,
                                    BdrvCheckResult *result,
                                    BdrvCheckMode fix);

/* parallels-ext.c */
int parallels_load_extension(BlockDriverState *bs, Error **errp);

/* parallels-create.c */
int coroutine_fn parallels_co_create_opts(const BlockDriver *drv,
                                          const char *filename,
                                          QemuOpts *opts, Error **errp);
int coroutine_fn parallels_co_create_on_node(const BlockDriver *drv,
                                             const BdrvCreateTarget *tgt,
                                             QemuOpts *opts, Error **errp);

#endif
