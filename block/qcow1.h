/*
 * The qcow (version 1) driver's shared state: what block/qcow1.c
 * (opening, reading, block status, the L2 cache), block/qcow1-write.c
 * (cluster allocation, compressed writes) and block/qcow1-create.c
 * (creation) know of an image of QEMU's first copy-on-write format.
 * It is not qcow2 (block/qcow2*.c): no refcounts, no snapshots, no
 * extensions; the file only grows.
 *
 * The file: a 48-byte big-endian header, the backing file's name (if
 * any) right after it, the L1 table at l1_table_offset (one big-endian
 * uint64 per 2^(cluster_bits + l2_bits) bytes of the disk: the file
 * offset of an L2 table or 0), L2 tables of 2^l2_bits entries (the file
 * offset of a cluster, 0 for none, or a compressed cluster: bit 63 set,
 * the compressed size in the bits above the offset), data clusters.
 *
 * Invariants:
 *  1. After open the header passed QEMU's checks (cluster_bits 9..16,
 *     l2_bits 6..13, size >= 2, l1_size <= INT_MAX / 8), and l1_table
 *     holds l1_loaded <= l1_size entries in host order: the entries the
 *     file holds.  The rest read as 0 (QEMU reads a file's end as
 *     zeroes) unless an allocation since open set them: those are in
 *     l1_extra, so that memory grows with the tables allocated, not with
 *     the index a hostile header lets a write reach (up to 2^28).
 *  2. Every offset read from the image is checked before use: an L2
 *     table or a cluster must lie below QCOW1_OFFSET_MAX, a data cluster
 *     must be sector-aligned (QEMU's -EIO otherwise), a compressed
 *     cluster's size is below the cluster size by construction of its
 *     mask.  A bad one is reported (error_report) and gives -EIO.
 *  3. The L1 table, the L2 cache, the compressed-cluster cache and every
 *     allocation (which appends to the file) are used under s->lock; an
 *     entry changes from 0 (or compressed) to a cluster only after the
 *     cluster's data is in the file.  Reads of data clusters run
 *     unlocked, with the entry copied out first.
 *  4. An encrypted image (crypt_method 1, legacy AES) has s->crypto set
 *     unless opened without I/O; guest data is encrypted in a bounce
 *     buffer, never in the caller's, and the request alignment is 512.
 *  5. No write lands on the header: an L1 or L2 entry that a hostile
 *     image places in its first 48 bytes is refused for writing with EIO
 *     (qcow1_check_target; QEMU writes over its own header there); a
 *     data cluster is at a non-zero sector by invariant 2.  Reading them
 *     is harmless and stays allowed, as in QEMU.
 */
#ifndef BLOCK_QCOW1_H
#define BLOCK_QCOW1_H

#include "block/block_int.h"
#include "crypto/luks.h"

#define QCOW1_MAGIC             0x514649fbu     /* "QFI\xfb" */
#define QCOW1_VERSION           1u
#define QCOW1_CRYPT_NONE        0u
#define QCOW1_CRYPT_AES         1u
#define QCOW1_OFLAG_COMPRESSED  (1ull << 63)
#define QCOW1_SECTOR            512
#define QCOW1_L2_CACHE_SIZE     16
/* QEMU's limit on the name read from the header */
#define QCOW1_BACKING_NAME_MAX  1023
/* inv. 2: no table or cluster of ours lies at or past 2^56 */
#define QCOW1_OFFSET_MAX        (1ull << 56)

typedef struct QEMU_PACKED Qcow1Header {
    uint32_t magic;
    uint32_t version;
    uint64_t backing_file_offset;
    uint32_t backing_file_size;
    uint32_t mtime;
    uint64_t size;
    uint8_t cluster_bits;
    uint8_t l2_bits;
    uint16_t padding;
    uint32_t crypt_method;
    uint64_t l1_table_offset;
} Qcow1Header;
_Static_assert(sizeof(Qcow1Header) == 48, "QEMU's qcow header is 48 bytes");

typedef struct BDRVQcow1State {
    unsigned cluster_bits;
    unsigned l2_bits;
    uint32_t cluster_size;
    uint32_t l2_size;               /* entries in an L2 table */
    uint64_t cluster_offset_mask;   /* of a compressed entry */
    uint64_t disk_size;             /* whole sectors, as QEMU */
    uint64_t l1_table_offset;
    uint64_t l1_size;               /* entries the disk needs */
    uint64_t l1_loaded;             /* entries in l1_table (inv. 1) */
    uint64_t *l1_table;             /* host order */
    GHashTable *l1_extra;           /* index -> uint64_t *, inv. 1 */
    /* inv. 3: QEMU's 16 most used L2 tables, big-endian as on disk */
    uint64_t *l2_cache;
    uint64_t l2_cache_offsets[QCOW1_L2_CACHE_SIZE];
    uint32_t l2_cache_counts[QCOW1_L2_CACHE_SIZE];
    /* the last compressed cluster read, decompressed (inv. 3) */
    uint8_t *cluster_cache;
    uint64_t cluster_cache_offset;  /* UINT64_MAX: none */
    CryptoLuks *crypto;             /* inv. 4 */
    CoMutex lock;
} BDRVQcow1State;

/* Where a guest offset lies: its L2 entry and the tables holding it. */
typedef struct Qcow1Map {
    uint64_t entry;         /* the L2 entry, host order; 0: none */
    uint64_t l1_index;
    uint64_t l2_offset;     /* 0: no L2 table */
    uint32_t l2_index;
} Qcow1Map;

static inline bool qcow1_is_compressed(uint64_t entry)
{
    return entry & QCOW1_OFLAG_COMPRESSED;
}

/* A request's piece within one cluster: @n bytes of @qiov from @done. */
typedef int coroutine_fn Qcow1PieceFn(BlockDriverState *bs, uint64_t offset,
                                      uint64_t n, QEMUIOVector *qiov,
                                      size_t done);

/* The L1 entry @index (inv. 1), host order; 0: no L2 table. */
static inline uint64_t qcow1_l1_get(const BDRVQcow1State *s, uint64_t index)
{
    const uint64_t *extra;

    assert(index < s->l1_size);
    if (index < s->l1_loaded) {
        return s->l1_table[index];
    }
    extra = g_hash_table_lookup(s->l1_extra, GUINT_TO_POINTER(index));
    return extra ? *extra : 0;
}

/* block/qcow1.c */
/* Runs @fn on each cluster's piece of the request, in order. */
int coroutine_fn qcow1_each_cluster(BlockDriverState *bs, int64_t offset,
                                    int64_t bytes, QEMUIOVector *qiov,
                                    Qcow1PieceFn *fn);
int coroutine_fn qcow1_map(BlockDriverState *bs, uint64_t offset,
                           Qcow1Map *m);
uint64_t *coroutine_fn qcow1_l2_load(BlockDriverState *bs,
                                     uint64_t l2_offset, bool is_new,
                                     int *ret);
int coroutine_fn qcow1_read_compressed(BlockDriverState *bs,
                                       uint64_t entry);

/* block/qcow1-write.c */
int coroutine_fn qcow1_co_pwritev(BlockDriverState *bs, int64_t offset,
                                  int64_t bytes, QEMUIOVector *qiov,
                                  BdrvRequestFlags flags);
int coroutine_fn qcow1_co_pwritev_compressed(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             QEMUIOVector *qiov);
int qcow1_make_empty(BlockDriverState *bs);

/* block/qcow1-create.c */
int coroutine_fn qcow1_co_create_opts(const BlockDriver *drv,
                                      const char *filename, QemuOpts *opts,
                                      Error **errp);
int coroutine_fn qcow1_co_create_on_node(const BlockDriver *drv,
                                         const BdrvCreateTarget *tgt,
                                         QemuOpts *opts, Error **errp);

#endif
