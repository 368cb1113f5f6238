/*
 * The qed driver's shared state: what block/qed.c (opening, reading,
 * block status, backing file changes), block/qed-table.c (the L1/L2
 * lookup and table writes), block/qed-write.c (allocating writes, zero
 * writes, resize), block/qed-check.c (check and repair) and
 * block/qed-create.c (creation) know of a QEMU Enhanced Disk image.
 *
 * The file: a header of header_size clusters (the 64-byte QedHeader, then
 * the backing file's name), the L1 table of table_size clusters at
 * l1_table_offset, then L2 tables (table_size clusters each) and data
 * clusters in the order they were allocated, each at the file's end.  An
 * L1 entry is 0 (no L2 table) or an L2 table's offset; an L2 entry is 0
 * (unallocated: the backing file shows through), 1 (QED_CLUSTER_ZERO:
 * reads as zeroes) or a data cluster's offset.  Everything is
 * little-endian.
 *
 * Invariants:
 *  1. After open the header passed QEMU's checks: cluster_size a power of
 *     two in [4 KiB, 64 MiB], table_size a power of two in [1, 16],
 *     image_size a multiple of 512 within qed_max_image_size(),
 *     header_size * cluster_size < 2^32, the backing name inside the
 *     header clusters, l1_table_offset a valid table offset (inv. 2).  So
 *     table_nelems (a power of two, at most 2^27) entries cover the L1 and
 *     every L2 table, and every disk offset below image_size has an L1
 *     index below table_nelems.
 *  2. Every offset taken from a table is checked before use
 *     (qed_check_cluster_offset / qed_check_table_offset): cluster-aligned,
 *     past the header clusters and below file_size, the file's length
 *     rounded down to a cluster.  A cluster or table offset that fails is
 *     an error (-EINVAL) of the request, never followed.
 *  3. file_size only grows, by whole clusters, while s->lock is held: a
 *     new cluster or table lies at the old file_size, so no two owners
 *     ever share one.  Allocating writes hold s->lock from the lookup to
 *     the last table write, so the tables a lookup read are those the
 *     allocation updates.
 *  4. The need-check flag (QED_F_NEED_CHECK) is on disk before the first
 *     table entry that an allocation changes, unless the image has a
 *     backing file (then the data is flushed before the table write, as
 *     QEMU does); it is cleared only with no allocation in flight, after
 *     a flush: 5 s after the last allocating write (the need-check timer,
 *     as QEMU's), when a drained section begins with the timer pending,
 *     at close, on going read-only, or by a check that found nothing
 *     unfixed.
 *  5. The need-check timer is armed only on a writable node outside a
 *     drained section (s->drained == 0), so that no metadata write starts
 *     while the node is drained; its coroutine is counted in flight.
 */
#ifndef BLOCK_QED_H
#define BLOCK_QED_H

#include "block/block_int.h"

/* "QED\0" read as a little-endian word */
#define QED_MAGIC                   (0x51u | 0x45u << 8 | 0x44u << 16)
/* incompatible features: an image with another bit set is refused */
#define QED_F_BACKING_FILE          0x01u
#define QED_F_NEED_CHECK            0x02u
#define QED_F_BACKING_FORMAT_NO_PROBE 0x04u
#define QED_FEATURE_MASK            (QED_F_BACKING_FILE | QED_F_NEED_CHECK | \
                                     QED_F_BACKING_FORMAT_NO_PROBE)
/* no compatible or auto-clear feature is known: unknown ones are kept or
 * cleared on a writable open, as QEMU does */
#define QED_COMPAT_FEATURE_MASK     0u
#define QED_AUTOCLEAR_FEATURE_MASK  0u

#define QED_MIN_CLUSTER_SIZE        (4u * 1024)
#define QED_MAX_CLUSTER_SIZE        (64u * 1024 * 1024)
#define QED_DEFAULT_CLUSTER_SIZE    (64u * 1024)
#define QED_MIN_TABLE_SIZE          1u
#define QED_MAX_TABLE_SIZE          16u
#define QED_DEFAULT_TABLE_SIZE      4u
/* an L2 entry that reads as zeroes: no cluster can start at byte 1 */
#define QED_CLUSTER_ZERO            1u
#define QED_SECTOR                  512u
/* table entries in a sector: tables are written in whole sectors */
#define QED_SECTOR_ENTRIES          (QED_SECTOR / sizeof(uint64_t))

typedef struct QEMU_PACKED QedHeader {
    uint32_t magic;
    uint32_t cluster_size;
    uint32_t table_size;            /* of L1 and L2 tables, in clusters */
    uint32_t header_size;           /* in clusters */
    uint64_t features;
    uint64_t compat_features;
    uint64_t autoclear_features;
    uint64_t l1_table_offset;
    uint64_t image_size;
    uint32_t backing_filename_offset;   /* from the file's start */
    uint32_t backing_filename_size;
} QedHeader;
_Static_assert(sizeof(QedHeader) == 64, "QED's header is 64 bytes");

/* What a disk offset maps to (qed_find_cluster). */
typedef enum QedCluster {
    QED_FOUND,          /* a data cluster: *host is its byte */
    QED_ZERO,           /* an L2 entry of 1 */
    QED_UNALLOC_L2,     /* an L2 entry of 0 */
    QED_UNALLOC_L1,     /* no L2 table */
} QedCluster;

typedef struct BDRVQedState {
    /* immutable after open */
    uint32_t table_nelems;      /* entries of a table (inv. 1) */
    unsigned int l2_shift;      /* log2(cluster_size) */
    unsigned int l1_shift;      /* l2_shift + log2(table_nelems) */

    /* under lock (inv. 3): the header in host order, the L1 table in host
     * order (table_nelems entries), the file's length in clusters */
    CoMutex lock;
    QedHeader header;
    uint64_t *l1;
    uint64_t file_size;

    /* clears the need-check flag (inv. 4, 5); NULL until a write */
    QEMUTimer *need_check_timer;
    unsigned int drained;       /* nested drained sections of the node */
} BDRVQedState;

static inline uint64_t qed_offset_into_cluster(const BDRVQedState *s,
                                               uint64_t offset)
{
    return offset & (s->header.cluster_size - 1);
}

static inline uint64_t qed_start_of_cluster(const BDRVQedState *s,
                                            uint64_t offset)
{
    return offset & ~(uint64_t)(s->header.cluster_size - 1);
}

static inline uint64_t qed_bytes_to_clusters(const BDRVQedState *s,
                                             uint64_t bytes)
{
    return (bytes + s->header.cluster_size - 1) >> s->l2_shift;
}

static inline uint64_t qed_l1_index(const BDRVQedState *s, uint64_t pos)
{
    return pos >> s->l1_shift;
}

static inline uint64_t qed_l2_index(const BDRVQedState *s, uint64_t pos)
{
    return (pos >> s->l2_shift) & (s->table_nelems - 1);
}

/* block/qed.c */
bool qed_is_cluster_size_valid(uint32_t cluster_size);
bool qed_is_table_size_valid(uint32_t table_size);
uint64_t qed_max_image_size(uint32_t cluster_size, uint32_t table_size);
bool qed_is_image_size_valid(uint64_t image_size, uint32_t cluster_size,
                             uint32_t table_size);
void qed_header_to_le(const QedHeader *cpu, QedHeader *le);
int qed_write_header(BlockDriverState *bs);

/* block/qed-table.c */
bool qed_check_cluster_offset(const BDRVQedState *s, uint64_t offset);
bool qed_check_table_offset(const BDRVQedState *s, uint64_t offset);
int qed_read_table(BlockDriverState *bs, uint64_t offset, uint32_t index,
                   uint32_t n, uint64_t *entries);
int qed_write_table(BlockDriverState *bs, uint64_t offset,
                    const uint64_t *table, uint32_t index, uint32_t n);
int qed_find_cluster(BlockDriverState *bs, uint64_t pos, uint64_t *len,
                     uint64_t *host);
int coroutine_fn qed_co_find_cluster(BlockDriverState *bs, uint64_t pos,
                                     uint64_t *len, uint64_t *host);

/* block/qed-write.c */
int coroutine_fn qed_co_pwritev(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags);
int coroutine_fn qed_co_pwrite_zeroes(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, BdrvRequestFlags flags);
int coroutine_fn qed_co_truncate(BlockDriverState *bs, int64_t offset,
                                 bool exact, PreallocMode prealloc,
                                 BdrvRequestFlags flags, Error **errp);

/* block/qed-clean.c */
void qed_mark_clean(BlockDriverState *bs);
void qed_need_check_timer_free(BlockDriverState *bs);
void qed_need_check_timer_arm(BlockDriverState *bs);
int qed_change_aio_context(BlockDriverState *bs, AioContext *new_ctx,
                           Error **errp);
void qed_drained_begin(BlockDriverState *bs);
void qed_drained_end(BlockDriverState *bs);

/* block/qed-check.c */
int qed_check(BlockDriverState *bs, BdrvCheckResult *result, bool fix);
int coroutine_fn qed_co_check(BlockDriverState *bs, BdrvCheckResult *result,
                              BdrvCheckMode fix);

/* block/qed-create.c */
int coroutine_fn qed_co_create_opts(const BlockDriver *drv,
                                    const char *filename, QemuOpts *opts,
                                    Error **errp);
int coroutine_fn qed_co_create_on_node(const BlockDriver *drv,
                                       const BdrvCreateTarget *tgt,
                                       QemuOpts *opts, Error **errp);

#endif
