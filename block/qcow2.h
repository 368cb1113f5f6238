/*
 * qcow2: private declarations shared by the qcow2 driver's files.
 *
 *   qcow2.c           options, open/close/reopen, resize, backing file
 *                     changes, queries, the driver table
 *   qcow2-header.c    probing, reading, validating and writing the
 *                     header and its extensions; dirty and corrupt bits
 *   qcow2-io.c        the data path (preadv/pwritev, zero writes,
 *                     discard, block status, flush, VM state) and all
 *                     copy-on-write; preallocation
 *   qcow2-compress.c  compression, compressed reads and writes
 *   qcow2-create.c    image creation
 *   qcow2-cluster.c   L1/L2 mapping only: guest offset -> host cluster,
 *                     allocation of data clusters (the pending L2 update),
 *                     zero clusters, discard, L1 growth
 *   qcow2-refcount.c  refcount table and blocks: allocation and freeing of
 *                     host clusters, refcount table growth
 *   qcow2-check.c     qemu-img check and its repairs
 *   qcow2-cache.c     the L2 and refcount table caches
 *   qcow2-overlap.c   metadata overlap checks in front of every write
 *   qcow2-snapshot.c  the snapshot table and internal snapshots (create,
 *                     goto, delete, list, load_tmp), the VM state offset
 *   qcow2-measure.c   qemu-img measure
 *   qcow2-amend.c     qemu-img amend: up/downgrade, refcount width, ...
 *   qcow2-make-empty.c  emptying an image after qemu-img commit
 *
 * On-disk format: all integers big-endian.  A host cluster is
 * 1 << cluster_bits bytes (512 B .. 2 MiB).
 *
 * Invariants (cited everywhere as "qcow2.h inv. N"; each file that has
 * invariants of its own lists them at its top, cited as "<file> inv. N"):
 *  1. An L2 table entry that points at a newly allocated cluster is never
 *     written to the file before the refcount block that gives that cluster
 *     refcount >= 1 (the L2 cache depends on the refcount cache; see
 *     qcow2_cache_set_dependency).  A crash can leak clusters, never leave
 *     an L2 entry pointing at a free cluster.
 *  2. A guest data cluster's contents (including its copy-on-write head and
 *     tail) are written before the L2 entry that maps it.
 *  3. OFLAG_COPIED is set in an L1/L2 entry iff the refcount of the cluster
 *     it points to is exactly 1.
 *  4. Metadata structures are modified only under s->lock (CoMutex); guest
 *     data I/O to already-allocated clusters runs without it.
 *  5. With lazy refcounts (compatible bit 0) refcount updates may stay in
 *     the cache until it evicts them or the image is marked clean (a guest
 *     flush writes the L2 tables only); the dirty bit (incompatible bit 0)
 *     is set in the header before the first such deferred update matters
 *     and cleared only after the refcounts are written consistent.
 *  6. An image with the corrupt bit (incompatible bit 1) is opened
 *     read-only only; once the driver finds its metadata inconsistent it
 *     sets the bit and bs->corrupt, and nothing more reaches the file:
 *     the generic layer refuses requests that start later, and
 *     qcow2_pre_write_overlap_check(), right before each write, refuses
 *     those that were already in flight (the one place qcow2 tests it).
 *  7. Every write to the file is preceded by a metadata overlap check
 *     (qcow2_pre_write_overlap_check) that names the structures the write
 *     is meant to update; the overlap index follows every change of the
 *     active L1 table, the refcount table and the snapshot table, and of
 *     the place of any structure with a single range
 *     (qcow2_overlap_singles_changed()).
 *  8. A node whose refcount structure was overwritten and could not be
 *     completed (s->refcounts_lost: a failed reset while emptying the
 *     image) writes nothing more to the file, caches included; its dirty
 *     bit stays set, so the next read-write open rebuilds the refcounts.
 */
#ifndef BLOCK_QCOW2_H
#define BLOCK_QCOW2_H

#include "block/block_int.h"
#include "util/qemu-option.h"

#define QCOW_MAGIC 0x514649fbU /* "QFI\xfb" */

#define QCOW2_MIN_CLUSTER_BITS 9
#define QCOW2_MAX_CLUSTER_BITS 21
#define QCOW2_DEFAULT_CLUSTER_BITS 16

/* Refcount widths 1..64 bits: refcount_order 0..6. */
#define QCOW2_MAX_REFCOUNT_ORDER 6
#define QCOW2_DEFAULT_REFCOUNT_ORDER 4

/*
 * Limits that keep a hostile header from making us allocate absurd amounts
 * of memory: QEMU refuses L1 tables over 32 MiB and refcount tables over
 * 8 MiB, so no valid image needs more.
 */
#define QCOW_MAX_L1_SIZE (32 * MiB)
#define QCOW_MAX_REFTABLE_SIZE (8 * MiB)
/* Snapshot table limits (a snapshot table entry is at most ~64 KiB). */
#define QCOW_MAX_SNAPSHOTS 65536
/* QEMU's bound on the whole table, and on one entry's extra data. */
#define QCOW_MAX_SNAPSHOTS_SIZE (1024 * QCOW_MAX_SNAPSHOTS)
/* QEMU's limit on the number of bitmaps of an image */
#define QCOW2_MAX_BITMAPS 65535
/* 1 KiB per entry for at most 65535 bitmaps, as QEMU bounds it */
#define QCOW2_MAX_BITMAP_DIRECTORY_SIZE (1024 * 65535)
#define QCOW_MAX_SNAPSHOT_EXTRA_DATA 1024
/* Backing file names are at most 1023 bytes, as in QEMU. */
#define QCOW2_MAX_BACKING_FILE_NAME 1023

/* Subclusters per cluster with extended L2 entries, and the least
 * cluster size that keeps them at 512 bytes or more. */
#define QCOW2_SUBCLUSTERS   32
#define QCOW2_MIN_EXTL2_CLUSTER_BITS 14
/* The subcluster bitmap of an extended L2 entry. */
#define QCOW2_SC_ALLOC(n)       (1ULL << (n))
#define QCOW2_SC_ZERO(n)        (1ULL << (32 + (n)))
/* Bits of subclusters [first, end). */
#define QCOW2_SC_ALLOC_RANGE(first, end) \
    (((1ULL << (end)) - 1) & ~((1ULL << (first)) - 1))
#define QCOW2_SC_ZERO_RANGE(first, end) \
    (QCOW2_SC_ALLOC_RANGE(first, end) << 32)
#define QCOW2_SC_ALL_ALLOC  0x00000000ffffffffULL
#define QCOW2_SC_ALL_ZERO   0xffffffff00000000ULL

/* L1/L2 entry bits. */
#define QCOW_OFLAG_COPIED     (1ULL << 63)
#define QCOW_OFLAG_COMPRESSED (1ULL << 62)
#define QCOW_OFLAG_ZERO       (1ULL << 0)
#define L1E_OFFSET_MASK       0x00fffffffffffe00ULL
#define L2E_OFFSET_MASK       0x00fffffffffffe00ULL
#define L1E_RESERVED_MASK     0x7f000000000001ffULL
#define L2E_STD_RESERVED_MASK 0x3f000000000001feULL
#define REFT_OFFSET_MASK      0xfffffffffffffe00ULL
#define REFT_RESERVED_MASK    0x1ffULL

/* Header feature bits. */
enum {
    QCOW2_INCOMPAT_DIRTY       = 1 << 0,
    QCOW2_INCOMPAT_CORRUPT     = 1 << 1,
    QCOW2_INCOMPAT_DATA_FILE   = 1 << 2,
    QCOW2_INCOMPAT_COMPRESSION = 1 << 3,
    QCOW2_INCOMPAT_EXTL2       = 1 << 4,
    QCOW2_INCOMPAT_MASK        = 0x1f,

    QCOW2_COMPAT_LAZY_REFCOUNTS = 1 << 0,
    QCOW2_COMPAT_FEAT_MASK      = 0x1,

    QCOW2_AUTOCLEAR_BITMAPS       = 1 << 0,
    QCOW2_AUTOCLEAR_DATA_FILE_RAW = 1 << 1,
    QCOW2_AUTOCLEAR_MASK          = 0x3,
};

/*
 * Metadata structures, as the overlap checks know them (qcow2-overlap.c).
 * The bit order is QEMU's: when a write overlaps several, the lowest bit
 * is the one reported.
 */
enum {
    QCOW2_OL_MAIN_HEADER      = 1 << 0,
    QCOW2_OL_ACTIVE_L1        = 1 << 1,
    QCOW2_OL_ACTIVE_L2        = 1 << 2,
    QCOW2_OL_REFCOUNT_TABLE   = 1 << 3,
    QCOW2_OL_REFCOUNT_BLOCK   = 1 << 4,
    QCOW2_OL_SNAPSHOT_TABLE   = 1 << 5,
    QCOW2_OL_INACTIVE_L1      = 1 << 6,
    QCOW2_OL_INACTIVE_L2      = 1 << 7,
    QCOW2_OL_BITMAP_DIRECTORY = 1 << 8,

    QCOW2_OL_NONE = 0,
    /* checks of constant cost that read nothing */
    QCOW2_OL_CONSTANT = QCOW2_OL_MAIN_HEADER | QCOW2_OL_ACTIVE_L1 |
                        QCOW2_OL_REFCOUNT_TABLE | QCOW2_OL_SNAPSHOT_TABLE |
                        QCOW2_OL_BITMAP_DIRECTORY,
    /* also what is known without reading from disk (the default) */
    QCOW2_OL_CACHED = QCOW2_OL_CONSTANT | QCOW2_OL_ACTIVE_L2 |
                      QCOW2_OL_REFCOUNT_BLOCK | QCOW2_OL_INACTIVE_L1,
    /* also the snapshots' L2 tables, read from their L1 tables once */
    QCOW2_OL_ALL = QCOW2_OL_CACHED | QCOW2_OL_INACTIVE_L2,
};

/* Header extension magics. */
#define QCOW2_EXT_MAGIC_END             0
#define QCOW2_EXT_MAGIC_BACKING_FORMAT  0xe2792acaU
#define QCOW2_EXT_MAGIC_FEATURE_TABLE   0x6803f857U
#define QCOW2_EXT_MAGIC_CRYPTO_HEADER   0x0537be77U
#define QCOW2_EXT_MAGIC_BITMAPS         0x23852875U
#define QCOW2_EXT_MAGIC_DATA_FILE       0x44415441U

typedef enum Qcow2CompressionType {
    QCOW2_COMPRESSION_TYPE_ZLIB = 0,
    QCOW2_COMPRESSION_TYPE_ZSTD = 1,
} Qcow2CompressionType;

/* The header as stored (v2 ends at 72 bytes, v3 at header_length >= 104). */
typedef struct QEMU_PACKED QCowHeader {
    uint32_t magic;
    uint32_t version;
    uint64_t backing_file_offset;
    uint32_t backing_file_size;
    uint32_t cluster_bits;
    uint64_t size;
    uint32_t crypt_method;
    uint32_t l1_size;
    uint64_t l1_table_offset;
    uint64_t refcount_table_offset;
    uint32_t refcount_table_clusters;
    uint32_t nb_snapshots;
    uint64_t snapshots_offset;
    /* version 3 */
    uint64_t incompatible_features;
    uint64_t compatible_features;
    uint64_t autoclear_features;
    uint32_t refcount_order;
    uint32_t header_length;
    uint8_t compression_type;
    uint8_t padding[7];
} QCowHeader;
_Static_assert(sizeof(QCowHeader) == 112, "qcow2 v3 header is 112 bytes");
_Static_assert(offsetof(QCowHeader, incompatible_features) == 72,
               "v2 header is 72 bytes");
_Static_assert(offsetof(QCowHeader, compression_type) == 104,
               "compression type at byte 104");

typedef struct QEMU_PACKED Qcow2FeatureNameEntry {
    uint8_t type;       /* 0 incompatible, 1 compatible, 2 autoclear */
    uint8_t bit;
    char name[46];
} Qcow2FeatureNameEntry;
_Static_assert(sizeof(Qcow2FeatureNameEntry) == 48, "feature name entry");

/*
 * Where the node's persistent bitmaps stand against the image's stored
 * copy of them (qcow2-bitmap.c, invariants 1 and 4).
 */
typedef enum Qcow2BitmapsState {
    /*
     * Checkpointed: the consistent entries of the directory are clean on
     * disk and hold every bit the node's bitmaps hold (or will, when the
     * store that set this state commits); a new bit needs them marked in
     * use first.
     */
    QCOW2_BITMAPS_STORED = 0,
    /* Every entry is in use on disk: the next flush stores them. */
    QCOW2_BITMAPS_IN_USE,
} Qcow2BitmapsState;

/* The data of the bitmaps header extension. */
typedef struct QEMU_PACKED Qcow2BitmapHeaderExt {
    uint32_t nb_bitmaps;
    uint32_t reserved32;
    uint64_t bitmap_directory_size;
    uint64_t bitmap_directory_offset;
} Qcow2BitmapHeaderExt;
_Static_assert(sizeof(Qcow2BitmapHeaderExt) == 24, "bitmaps extension");

/* A header extension we do not understand, kept to be written back. */
typedef struct Qcow2UnknownHeaderExtension {
    uint32_t magic;
    uint32_t len;
    uint8_t data[];
} Qcow2UnknownHeaderExtension;

/* What a header extension walk found, before it is applied to the state. */
typedef struct Qcow2HeaderExts {
    char *backing_format;
    char *data_file;
    Qcow2FeatureNameEntry *feature_table;
    size_t feature_table_len;   /* entries */
    bool has_crypto_header;
    uint64_t crypto_header_offset;      /* the extension's two fields */
    uint64_t crypto_header_length;
    bool has_bitmaps;
    uint32_t nb_bitmaps;
    uint64_t bitmap_directory_offset;
    uint64_t bitmap_directory_size;
    GList *unknown;             /* Qcow2UnknownHeaderExtension * */
} Qcow2HeaderExts;

typedef struct Qcow2Cache Qcow2Cache;
/*
 * The overlap index (qcow2-overlap.c): an open-addressing hash table from
 * host cluster index to packed reference counts, with linear probing.  Its
 * layout is here because the check in front of every write looks a
 * cluster up inline (qcow2_overlap_index_clears() below).  A slot whose
 * counts are 0 is empty.
 */
typedef struct Qcow2OverlapSlot {
    uint64_t cluster;
    uint64_t counts;
} Qcow2OverlapSlot;

typedef struct Qcow2OverlapIndex {
    Qcow2OverlapSlot *slots;
    uint64_t mask;              /* slots - 1; a power of two minus one */
    int shift;                  /* 64 - log2(slots) */
    uint64_t used;
} Qcow2OverlapIndex;

static inline uint64_t qcow2_overlap_hash(const Qcow2OverlapIndex *ix,
                                          uint64_t cluster)
{
    /* Fibonacci hashing: the top bits of the product are well mixed */
    return (cluster * 0x9e3779b97f4a7c15ULL) >> ix->shift;
}

/* The slot of @cluster, or the empty slot where it would go. */
static inline uint64_t qcow2_overlap_find(const Qcow2OverlapIndex *ix,
                                          uint64_t cluster)
{
    uint64_t i = qcow2_overlap_hash(ix, cluster);

    while (ix->slots[i].counts && ix->slots[i].cluster != cluster) {
        i = (i + 1) & ix->mask;
    }
    return i;
}

/*
 * The structures with one range each (header, active L1 table, refcount
 * table, snapshot table, bitmap directory), in that order, as the index
 * has marked their clusters.
 */
enum { QCOW2_OL_SINGLE_RANGES = 5 };
typedef struct Qcow2OverlapRange {
    uint64_t offset;
    uint64_t size;
} Qcow2OverlapRange;

/* One snapshot table entry, host-endian (qcow2-snapshot.c). */
typedef struct QCowSnapshot {
    uint64_t l1_table_offset;
    uint32_t l1_size;
    char *id_str;
    char *name;
    uint64_t disk_size;         /* the virtual disk size when taken */
    uint64_t vm_state_size;
    uint32_t date_sec;
    uint32_t date_nsec;
    uint64_t vm_clock_nsec;
    uint64_t icount;            /* -1: not recorded */
    /* extra data this driver does not know, written back unchanged */
    uint32_t unknown_extra_data_size;
    void *unknown_extra_data;
} QCowSnapshot;

/* Kinds of cluster an L2 entry can describe. */
typedef enum QCow2ClusterType {
    QCOW2_CLUSTER_UNALLOCATED,   /* reads from backing (or zeroes) */
    QCOW2_CLUSTER_ZERO_PLAIN,    /* zero flag, no host cluster */
    QCOW2_CLUSTER_ZERO_ALLOC,    /* zero flag, host cluster preallocated */
    QCOW2_CLUSTER_NORMAL,        /* data at a host offset */
    QCOW2_CLUSTER_COMPRESSED,
    /* extended L2 only: a subcluster that reads from the backing file (or
     * zeroes) in a cluster that has a host cluster */
    QCOW2_CLUSTER_UNALLOCATED_ALLOC,
} QCow2ClusterType;

typedef struct BDRVQcow2State {
    /* --- immutable after open --- */
    int cluster_bits;
    int cluster_size;
    int l2_bits;                /* entries per L2 table = 1 << l2_bits */
    int l2_size;
    /*
     * Extended L2 entries (incompatible bit 4): each entry is followed by
     * a 64-bit bitmap over the cluster's 32 subclusters, bit n "subcluster
     * n allocated", bit 32 + n "subcluster n reads as zeroes".
     */
    bool extended_l2;
    int subcluster_bits;        /* log2 of the subcluster size */
    int subcluster_size;
    int64_t cluster_offset_mask;    /* compressed: host offset bits */
    int csize_shift, csize_mask;    /* compressed: sector count bits */
    int refcount_order;
    int refcount_bits;
    uint64_t refcount_max;
    int refcount_block_bits;    /* entries per refcount block (log2) */
    int refcount_block_size;
    int qcow_version;
    Qcow2CompressionType compression_type;
    BdrvChild *data_file;       /* == bs->file unless data_file is set */
    char *image_data_file;      /* the data file name from the header */
    /*
     * Encryption (qcow2-crypt.c): the header's crypt_method; with LUKS
     * the clusters of the LUKS header and the unlocked volume (NULL when
     * opened for info only, BDRV_O_NO_IO).
     */
    uint32_t crypt_method;
    uint64_t crypto_header_offset;
    uint64_t crypto_header_length;
    struct CryptoLuks *crypto;
    /* encryption's bounce buffers (thread-safe), made by the first one */
    struct BufferPool *crypto_bounce;

    /* --- under lock (CoMutex), qcow2.h inv. 4 --- */
    CoMutex lock;
    uint64_t *l1_table;         /* host-endian copy of the active L1 */
    int l1_size;
    int64_t l1_table_offset;
    uint64_t *refcount_table;   /* host-endian copy */
    uint32_t refcount_table_size;   /* entries */
    int64_t refcount_table_offset;
    /* lowest host cluster index that may be free (allocation hint) */
    int64_t free_cluster_index;
    int64_t free_byte_offset;   /* for compressed clusters, 0 = none */
    Qcow2Cache *l2_table_cache;
    Qcow2Cache *refcount_block_cache;
    uint64_t incompatible_features;
    uint64_t compatible_features;
    uint64_t autoclear_features;
    uint32_t nb_snapshots;
    int64_t snapshots_offset;
    int snapshots_size;         /* bytes of the table on disk */
    QCowSnapshot *snapshots;    /* nb_snapshots entries */
    /* entries whose extra data the table in memory repairs (too much of
     * it, dropped when opened for check; too little for v3), for check
     * to report or repair */
    GArray *snapshot_table_flaws;       /* Qcow2SnapshotFlaw */
    bool use_lazy_refcounts;
    bool discard_passthrough_request;
    bool discard_passthrough_snapshot;
    bool discard_passthrough_other;
    bool discard_no_unref;

    /* header contents we keep and write back */
    size_t unknown_header_fields_size;
    void *unknown_header_fields;
    GList *unknown_header_ext;  /* Qcow2UnknownHeaderExtension * */
    char *image_backing_file;
    char *image_backing_format;

    /* --- cache options --- */
    uint64_t l2_cache_size;
    uint64_t l2_cache_entry_size;
    uint64_t refcount_cache_size;
    int64_t cache_clean_interval;
    QEMUTimer *cache_clean_timer;

    /* in-flight cluster allocations, for serialising overlapping writes */
    GList *cluster_allocs;      /* QCowL2Meta * */
    CoQueue dependent_requests;

    /* --- qcow2-refcount.c, under lock --- */
    /* freed ranges not yet discarded in the file (Qcow2DiscardRegion *) */
    GList *discards;
    /* true: collect discards until qcow2_process_discards() (batching) */
    bool cache_discards;

    /* --- qcow2-overlap.c, under lock (qcow2.h inv. 7) --- */
    int overlap_check;          /* QCOW2_OL_* mask of what is checked */
    /* host cluster index -> reference counts of the indexed structures */
    Qcow2OverlapIndex *overlap_index;
    /* what the index's single-range marks come from (qcow2-overlap.c 4.) */
    Qcow2OverlapRange overlap_marked[QCOW2_OL_SINGLE_RANGES];
    bool overlap_inactive_l2_loaded;
    /* index entries looked at by checks (statistics, for tests) */
    uint64_t overlap_lookups;
    /* a snapshot operation or amend is rewriting shared L2 tables */
    bool overlap_shared_l2_writes;
    /*
     * From the bitmaps header extension while the bitmaps are valid (the
     * autoclear bit is set); 0 if there is none (qcow2-bitmap.c).
     */
    uint32_t nb_bitmaps;
    uint64_t bitmap_directory_offset;
    uint64_t bitmap_directory_size;
    /*
     * What the stored bitmaps are to the node's (qcow2-bitmap.c
     * invariants 1 and 4); read without the lock by the request path's
     * test, changed under it.
     */
    Qcow2BitmapsState bitmaps_state;

    /* --- qcow2.c, under lock --- */
    /* the guest-visible size (the header's size field) */
    int64_t virtual_size;
    /* a non-fatal corruption was reported (reported once) */
    bool signaled_corruption;
    /* qcow2.h inv. 8: the refcounts on disk are lost until a repair */
    bool refcounts_lost;
    /* whether the image looks preallocated with preallocation=metadata
     * (block status then asks the file for holes); decided once */
    bool metadata_preallocation_checked;
    bool metadata_preallocation;
} BDRVQcow2State;

/*
 * One allocating write's pending L2 update (see qcow2-cluster.c).  The
 * cow_* ranges are guest-cluster-relative head and tail that the write does
 * not cover.  qcow2-io.c writes them (together with the guest data where
 * they are contiguous with it, else on their own) and then sets both
 * cow_*_bytes to 0, before qcow2_alloc_cluster_link_l2() updates the L2
 * table (qcow2.h inv. 2).  qcow2-cluster.c owns this struct and may add
 * fields.
 */
typedef struct QCowL2Meta {
    uint64_t offset;            /* guest offset of the first cluster */
    uint64_t alloc_offset;      /* host offset of the allocation */
    int nb_clusters;
    /* head and tail of the first/last cluster to copy (bytes) */
    uint64_t cow_start_offset, cow_start_bytes;
    uint64_t cow_end_offset, cow_end_bytes;
    CoQueue dependent_requests;
    struct QCowL2Meta *next;
    /*
     * The clusters were preallocated zero clusters (ZERO_ALLOC, COPIED)
     * that the write reuses, or are the identity-mapped clusters of an
     * external data file, which have no refcounts: linking keeps them,
     * abort does not free them.
     */
    bool keep_old_clusters;
    /* on s->cluster_allocs: link_l2 or abort has not finished with it */
    bool in_flight;
    /*
     * preallocation: nothing was written, so with subclusters the bitmap
     * stays as it is (the clusters read as before)
     */
    bool prealloc;
    /* what the write and its copy-on-write fill, from @offset: with
     * subclusters these become allocated (cow_* may be zeroed meanwhile) */
    uint64_t filled_start, filled_end;
} QCowL2Meta;

/* Conversions. */
static inline int64_t offset_into_cluster(BDRVQcow2State *s, int64_t offset)
{
    return offset & (s->cluster_size - 1);
}

static inline int64_t start_of_cluster(BDRVQcow2State *s, int64_t offset)
{
    return offset & ~(int64_t)(s->cluster_size - 1);
}

static inline int64_t size_to_clusters(BDRVQcow2State *s, int64_t size)
{
    return (size + (s->cluster_size - 1)) >> s->cluster_bits;
}

static inline int offset_to_l1_index(BDRVQcow2State *s, uint64_t offset)
{
    return offset >> (s->l2_bits + s->cluster_bits);
}

static inline int offset_to_l2_index(BDRVQcow2State *s, int64_t offset)
{
    return (offset >> s->cluster_bits) & (s->l2_size - 1);
}

/* Guest bytes one L1 entry covers. */
static inline uint64_t qcow2_l1_entry_span(BDRVQcow2State *s)
{
    return (uint64_t)s->cluster_size << s->l2_bits;
}

/* L1 entries needed for a disk of @size bytes. */
static inline uint64_t qcow2_size_to_l1(BDRVQcow2State *s, uint64_t size)
{
    uint64_t span = qcow2_l1_entry_span(s);

    return size / span + (size % span != 0);
}

/*
 * Calling conventions shared by every qcow2 file:
 *  - functions that touch metadata are coroutine_fn and are called with
 *    s->lock held (qcow2.h inv. 4); they may yield (I/O) while holding it.
 *  - they return 0 (or a non-negative value documented below) or -errno;
 *    they never print.  Inconsistent metadata found on the way is reported
 *    with qcow2_signal_corruption() and answered with -EIO.
 *  - every write qcow2 issues to its file child goes through
 *    bdrv_co_pwrite()/bdrv_co_pwritev() on s->data_file (guest data) or
 *    bs->file (metadata) at exactly one place per structure (header, L1,
 *    L2 via the cache, refcount table, refcount block via the cache, COW),
 *    so that the metadata overlap checks can be put in front of them.
 */

/* Why a cluster is freed: decides whether the file is told (discard). */
typedef enum Qcow2DiscardType {
    QCOW2_DISCARD_NEVER = 0,
    QCOW2_DISCARD_ALWAYS,
    QCOW2_DISCARD_REQUEST,      /* guest discard (pass-discard-request) */
    QCOW2_DISCARD_SNAPSHOT,     /* snapshot deleted (pass-discard-snapshot) */
    QCOW2_DISCARD_OTHER,        /* metadata moved etc. (pass-discard-other) */
} Qcow2DiscardType;

/* A compressed cluster descriptor from an L2 entry. */
static inline void qcow2_parse_compressed_l2_entry(BDRVQcow2State *s,
                                                   uint64_t l2_entry,
                                                   uint64_t *coffset,
                                                   int *csize)
{
    int nb_csectors;

    *coffset = l2_entry & s->cluster_offset_mask;
    nb_csectors = ((l2_entry >> s->csize_shift) & s->csize_mask) + 1;
    *csize = nb_csectors * 512 - (*coffset & 511);
}

/* How many requests to the file one guest request keeps in flight. */
#define QCOW2_MAX_PARALLEL_IO 16

/*
 * The pieces of one guest request that go to different host places run
 * as coroutines of their own, at most QCOW2_MAX_PARALLEL_IO at a time;
 * the request's coroutine waits for a free slot and for the last one.
 */
typedef struct Qcow2TaskPool {
    Coroutine *waiter;
    int in_flight;
    int ret;                    /* the first error */
} Qcow2TaskPool;

typedef struct Qcow2Task Qcow2Task;
struct Qcow2Task {
    Qcow2TaskPool *pool;
    BlockDriverState *bs;
    int (*fn)(Qcow2Task *t);
    QCow2ClusterType type;
    uint64_t host_offset;       /* or the compressed descriptor */
    uint64_t offset;            /* guest */
    uint64_t bytes;
    QEMUIOVector *qiov;
    size_t qiov_offset;
    void *opaque;               /* the task's own data (compression job) */
};

/* The data file is the disk itself (autoclear bit data-file-raw). */
static inline bool qcow2_data_file_is_raw(BDRVQcow2State *s)
{
    return s->autoclear_features & QCOW2_AUTOCLEAR_DATA_FILE_RAW;
}

/* qcow2-io.c */
/*
 * Reads guest data through the driver's own read path (takes s->lock
 * itself, so call it without the lock).  Copy-on-write uses it to fetch
 * the old contents of a cluster that is being reallocated, before the new
 * L2 entry is linked: backing data, zeroes or a compressed cluster.
 */
int coroutine_fn qcow2_co_preadv(BlockDriverState *bs, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 BdrvRequestFlags flags);
/* Runs @t (taking ownership) in @pool; with @alone it runs inline. */
int coroutine_fn qcow2_pool_run(Qcow2TaskPool *pool, Qcow2Task *t,
                                bool alone);
/* Waits for the tasks of @pool; returns @ret or the first task error. */
int coroutine_fn qcow2_pool_finish(Qcow2TaskPool *pool, int ret);
/*
 * preallocation=metadata: allocates and maps host clusters for every
 * cluster of [offset, offset + bytes) that has none the active image owns
 * (contents: whatever the file holds; partial clusters keep their guest
 * data by copy-on-write).  *host_end is the end of the highest host
 * cluster used, so that the caller can extend the data file to it.
 */
int coroutine_fn qcow2_preallocate_range(BlockDriverState *bs,
                                         uint64_t offset, uint64_t bytes,
                                         uint64_t *host_end);
int coroutine_fn qcow2_co_pwritev(BlockDriverState *bs, int64_t offset,
                                  int64_t bytes, QEMUIOVector *qiov,
                                  BdrvRequestFlags flags);
int coroutine_fn qcow2_co_pwrite_zeroes(BlockDriverState *bs,
                                        int64_t offset, int64_t bytes,
                                        BdrvRequestFlags flags);
int coroutine_fn qcow2_co_pdiscard(BlockDriverState *bs, int64_t offset,
                                   int64_t bytes);
int coroutine_fn qcow2_co_block_status(BlockDriverState *bs, bool want_zero,
                                       int64_t offset, int64_t bytes,
                                       int64_t *pnum, int64_t *map,
                                       BlockDriverState **file);
int coroutine_fn qcow2_co_flush_to_os(BlockDriverState *bs);
int coroutine_fn qcow2_co_save_vmstate(BlockDriverState *bs,
                                       QEMUIOVector *qiov, int64_t pos);
int coroutine_fn qcow2_co_load_vmstate(BlockDriverState *bs,
                                       QEMUIOVector *qiov, int64_t pos);

/* qcow2-compress.c */
/* Reads part of the compressed cluster @l2_entry (guest @offset). */
int coroutine_fn qcow2_co_read_compressed(BlockDriverState *bs,
                                          uint64_t l2_entry, uint64_t offset,
                                          uint64_t bytes, QEMUIOVector *qiov,
                                          size_t qiov_offset);
/*
 * Writes whole clusters compressed (the last one may end at the end of
 * the disk); a zero-length write ends the stream.
 */
int coroutine_fn qcow2_co_pwritev_compressed(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             QEMUIOVector *qiov);

/*
 * qcow2-create.c: the BlockDriver create callbacks, by file name
 * (qemu-img create) and on nodes (blockdev-create); one code path.
 */
int coroutine_fn qcow2_co_create_opts(const BlockDriver *drv, const char *filename,
                                      QemuOpts *opts, Error **errp);
int coroutine_fn qcow2_co_create_target(const BlockDriver *drv,
                                        const BdrvCreateTarget *tgt,
                                        QemuOpts *opts, Error **errp);
/*
 * The cluster_size creation option: a power of two from 512 bytes to
 * 2 MiB.  0, or -EINVAL with QEMU's message (create and measure).
 */
int qcow2_check_cluster_size(uint64_t cluster_size, Error **errp);

/*
 * The image version a compat option names: 3 for "1.1" or "v3" (and for
 * NULL, the default), 2 for "0.10" or "v2", 0 for any other value.  Create,
 * measure and amend each reject an unknown one with their own message.
 */
int qcow2_compat_version(const char *compat);

/* qcow2-header.c */
int qcow2_probe(const uint8_t *buf, int buf_size, const char *filename);
/*
 * Reads and validates the header into @s and its extensions into @exts
 * (which the caller applies, then clears with qcow2_header_exts_clear()).
 */
int qcow2_read_header(BlockDriverState *bs, int flags, Qcow2HeaderExts *exts,
                      Error **errp);
void qcow2_header_exts_clear(Qcow2HeaderExts *exts);
/*
 * Lays out the header cluster of @s for a disk of @size bytes into @buf;
 * returns the bytes used or -ENOSPC.  Image creation writes it directly.
 */
int qcow2_header_serialise(BDRVQcow2State *s, uint64_t size, uint8_t *buf,
                           size_t buflen);
int qcow2_mark_dirty(BlockDriverState *bs);
int qcow2_mark_clean(BlockDriverState *bs);
/* Clears the corrupt bit after a successful repair. */
int qcow2_mark_consistent(BlockDriverState *bs);
int qcow2_update_header(BlockDriverState *bs);
/*
 * The one place where the header cluster is written (after the overlap
 * check: qcow2.h inv. 7), synchronously flushed.
 */
int qcow2_header_write(BlockDriverState *bs, uint64_t offset,
                       const void *buf, size_t len);
/*
 * Reports inconsistent metadata: marks the image corrupt (qcow2.h inv. 6),
 * prints "qcow2: Marking image as corrupt: <message>; further corruption
 * events will be suppressed" once, and makes the node refuse writes.
 */
void qcow2_signal_corruption(BlockDriverState *bs, bool fatal, int64_t offset,
                             int64_t size, const char *fmt, ...)
    QEMU_PRINTF(5, 6);

/* qcow2-crypt.c */
#define QCOW2_CRYPT_NONE 0
#define QCOW2_CRYPT_AES  1
#define QCOW2_CRYPT_LUKS 2
/*
 * Takes encrypt.key-secret and encrypt.format out of @options and, for an
 * encrypted image, checks the header extension and unlocks the LUKS
 * volume (header only with BDRV_O_NO_IO).
 */
int qcow2_crypt_open(BlockDriverState *bs, const Qcow2HeaderExts *exts,
                     QDict *options, int flags, Error **errp);
void qcow2_crypt_close(BlockDriverState *bs);
/* create: the QCOW2_CRYPT_* method @opts ask for, or -errno */
int qcow2_crypt_wanted(QemuOpts *opts, Error **errp);
/* create: sets up what encrypt.* asks for (a LUKS header, or AES) */
int coroutine_fn qcow2_crypt_create(BlockDriverState *bs, QemuOpts *opts,
                                    Error **errp);
/*
 * Guest data at @guest_offset to and from the data file at @host_offset:
 * encrypted in the worker pool when the image is encrypted (LUKS takes
 * its IVs from the host offset, legacy AES from the guest offset, as in
 * QEMU), passed through otherwise.
 */
int coroutine_fn qcow2_crypt_co_pwritev(BlockDriverState *bs,
                                        uint64_t host_offset,
                                        uint64_t guest_offset, uint64_t bytes,
                                        QEMUIOVector *qiov,
                                        size_t qiov_offset);
int coroutine_fn qcow2_crypt_co_preadv(BlockDriverState *bs,
                                       uint64_t host_offset,
                                       uint64_t guest_offset, uint64_t bytes,
                                       QEMUIOVector *qiov,
                                       size_t qiov_offset);
/*
 * measure: the bytes the LUKS header of a new image with @opts takes (0
 * without encryption), whole clusters; -errno with @errp set.
 */
int64_t qcow2_crypt_measure(QemuOpts *opts, int cluster_size, Error **errp);
/* The "encrypt" member of the format-specific info, or NULL. */
JsonNode *qcow2_crypt_get_info(BlockDriverState *bs);
/* amend's encrypt.* options on an open LUKS image */
int qcow2_crypt_amend(BlockDriverState *bs, QemuOpts *opts, bool force,
                      Error **errp);

/* qcow2.c */
/* The driver's truncate (takes s->lock itself): amend resizes with it. */
int coroutine_fn qcow2_co_truncate(BlockDriverState *bs, int64_t offset,
                                   bool exact, PreallocMode prealloc,
                                   BdrvRequestFlags flags, Error **errp);

/* qcow2-refcount.c */
int qcow2_refcount_init(BlockDriverState *bs);
void qcow2_refcount_close(BlockDriverState *bs);
int qcow2_get_refcount(BlockDriverState *bs, int64_t cluster_index,
                       uint64_t *refcount);
/* Entry @index of a refcount block of 1 << @refcount_order bit entries. */
uint64_t qcow2_refblock_get_entry(int refcount_order, const void *block,
                                  uint64_t index);
void qcow2_refblock_set_entry(int refcount_order, void *block, uint64_t index,
                              uint64_t value);
/*
 * Writes @n host-endian entries from @entries at index @first of the
 * refcount table at @table_offset, and flushes: the one place where
 * refcount tables are written.
 */
int qcow2_write_reftable(BlockDriverState *bs, int64_t table_offset,
                         uint64_t first, const uint64_t *entries,
                         uint64_t n);
/*
 * Points the header at the refcount table already written at
 * @table_offset (@table_clusters long) and makes @table, of @entries
 * host-endian entries, the image's table: the state takes it over and
 * *@table becomes NULL.  The caller frees the old table's clusters.
 */
int qcow2_install_reftable(BlockDriverState *bs, uint64_t **table,
                           uint64_t entries, int64_t table_offset,
                           uint32_t table_clusters);
/* Allocates @size bytes of whole clusters; returns the host offset. */
int64_t qcow2_alloc_clusters(BlockDriverState *bs, uint64_t size);
/*
 * The same, for a structure that QEMU names when it would have to go to
 * offset 0 (an "L2 table"): the corruption message names @what too.
 */
int64_t qcow2_alloc_named_clusters(BlockDriverState *bs, uint64_t size,
                                   const char *what);
/*
 * Allocates the clusters from @offset on that are free, up to
 * @nb_clusters and short of the largest host offset; returns how many
 * (0 if the first is in use), or -errno.
 */
int64_t qcow2_alloc_clusters_at(BlockDriverState *bs, uint64_t offset,
                                int64_t nb_clusters);
int64_t qcow2_alloc_bytes(BlockDriverState *bs, int size);
/*
 * Drops one reference to each cluster of [offset, offset + size); clusters
 * that reach refcount 0 are discarded in the file if @type is enabled.
 */
void qcow2_free_clusters(BlockDriverState *bs, int64_t offset, int64_t size,
                         Qcow2DiscardType type);
/*
 * qcow2_free_clusters() for clusters that no table on disk references
 * (a table just allocated and never hooked in): their refcounts need not
 * wait for the L2 cache to be written first.
 */
void qcow2_free_unreferenced_clusters(BlockDriverState *bs, int64_t offset,
                                      int64_t size, Qcow2DiscardType type);
/* Frees whatever an L2 entry points to (normal, zero-alloc, compressed). */
void qcow2_free_any_cluster(BlockDriverState *bs, uint64_t l2_entry,
                            int nb_clusters, Qcow2DiscardType type);
int qcow2_update_cluster_refcount(BlockDriverState *bs, int64_t cluster_index,
                                  uint64_t addend, bool decrease,
                                  Qcow2DiscardType type);
/* The same for every cluster that [offset, offset + length) touches. */
int qcow2_update_refcount_range(BlockDriverState *bs, int64_t offset,
                                int64_t length, uint64_t addend,
                                bool decrease, Qcow2DiscardType type);
/*
 * One more reference to each cluster of [offset, offset + length), which
 * must be in use already (a snapshot taking a reference): one attempt
 * only.  A cluster without a refcount block is not in use; giving it a
 * refcount needs a new block, after which this returns -EAGAIN and
 * leaves the clusters' refcounts unchanged, as QEMU does when a snapshot
 * table names such a cluster.
 */
int qcow2_ref_used_range(BlockDriverState *bs, int64_t offset,
                         int64_t length);
/*
 * qcow2-check.c
 *
 * qemu-img check: rebuilds the refcounts from every reference (header,
 * L1, L2, data and compressed clusters, refcount table and blocks,
 * snapshot table), compares with the stored ones, checks OFLAG_COPIED and
 * reserved bits, and repairs leaks/errors as @fix allows.  Fills @res
 * (corruptions, leaks, *_fixed, image_end_offset, bfi.*).
 */
int qcow2_check_refcounts(BlockDriverState *bs, BdrvCheckResult *res,
                          BdrvCheckMode fix);
/*
 * Issues the discards that freeing queued (if @ret >= 0) and forgets them.
 * Freeing issues them itself unless s->cache_discards is set; a caller that
 * sets it to batch many frees calls this before dropping s->lock.
 */
void qcow2_process_discards(BlockDriverState *bs, int ret);
/*
 * After a shrink: takes out of the refcount table (and frees) every
 * refcount block that gives a refcount to nothing but itself, as QEMU
 * does; the table keeps its size.
 */
int qcow2_shrink_reftable(BlockDriverState *bs);
/* Writes dirty L2 then refcount tables to the file (no fdatasync). */
int qcow2_write_caches(BlockDriverState *bs);
/* qcow2_write_caches, then flushes the file. */
int qcow2_flush_caches(BlockDriverState *bs);

/*
 * qcow2-cluster.c
 *
 * L2 tables are accessed in cache entries ("slices") of
 * s->l2_cache_entry_size bytes: qcow2.c sets it at open (a power of two,
 * 512 .. cluster_size; QEMU's l2-cache-entry-size, default cluster_size)
 * and creates s->l2_table_cache with that table size.
 */
/*
 * Makes the active L1 table at least @min_size entries (exactly @min_size
 * with @exact_size, else with room to grow): writes a new table, switches
 * the header to it in one write, frees the old one.
 */
int coroutine_fn qcow2_grow_l1_table(BlockDriverState *bs, uint64_t min_size,
                                     bool exact_size);
/* Writes the sector of the active L1 table holding entry @l1_index. */
int coroutine_fn qcow2_write_l1_entry(BlockDriverState *bs, int l1_index);
/*
 * Writes @n host-endian entries from @entries at @offset of the file, in
 * disk order (big-endian), after the overlap check for the structures in
 * @ign (qcow2.h inv. 7); does not flush.  L1 tables, active and of
 * snapshots, and the refcount table all reach the file through it.
 * Returns 0 or -errno.
 */
int qcow2_write_table64(BlockDriverState *bs, int ign, int64_t offset,
                        const uint64_t *entries, uint64_t n);
QCow2ClusterType qcow2_get_cluster_type(BlockDriverState *bs,
                                        uint64_t l2_entry);
/*
 * Maps guest [offset, offset + *bytes): returns 0 or -errno; sets *type,
 * *host_offset and shrinks *bytes to the run of clusters of the same type
 * (and contiguous host offsets), never past the end of an L2 slice.
 * *host_offset is the host offset of the byte at @offset for NORMAL and
 * ZERO_ALLOC, the raw L2 entry for COMPRESSED (one cluster at a time; see
 * qcow2_parse_compressed_l2_entry), 0 otherwise.
 */
int coroutine_fn qcow2_get_host_offset(BlockDriverState *bs, uint64_t offset,
                                       unsigned int *bytes,
                                       uint64_t *host_offset,
                                       QCow2ClusterType *type);
/*
 * Finds or allocates host clusters for a write of [offset, offset +
 * *bytes); shrinks *bytes to what one contiguous host range covers and
 * sets *host_offset to the host offset of the byte at @offset.  On entry
 * *host_offset is 0, or the cluster-aligned host offset where the
 * previous piece of the same request ended: new clusters continue there
 * as far as they are free (QEMU's layout) before any are searched for.
 * *m is NULL when the clusters are written in place (NORMAL with
 * OFLAG_COPIED); otherwise it is one QCowL2Meta (m->next is NULL)
 * describing the pending L2 update, to be completed by
 * qcow2_alloc_cluster_link_l2 after the data is written (qcow2.h inv. 2)
 * or undone by qcow2_alloc_cluster_abort.  May wait (dropping s->lock)
 * for an overlapping allocation in flight.
 */
int coroutine_fn qcow2_alloc_host_offset(BlockDriverState *bs,
                                         uint64_t offset,
                                         unsigned int *bytes,
                                         uint64_t *host_offset,
                                         QCowL2Meta **m);
/*
 * Once the data and the copy-on-write head and tail are written (both
 * cow_*_bytes 0; qcow2-io.c does that), updates the L2 entries, frees the
 * clusters they pointed to, and ends the
 * allocation (waking requests that wait for it).  On failure it undoes the
 * allocation itself (as qcow2_alloc_cluster_abort; calling that as well is
 * harmless).  The caller g_free()s @m afterwards in either case.
 */
int coroutine_fn qcow2_alloc_cluster_link_l2(BlockDriverState *bs,
                                             QCowL2Meta *m);
/*
 * Gives guest cluster @offset an L2 table of the active image (allocating
 * it) before the compressed bytes are allocated, so that, as in QEMU, the
 * table comes before the data in the file.  Waits for allocations in
 * flight on that cluster first.
 */
int coroutine_fn qcow2_prepare_compressed_cluster(BlockDriverState *bs,
                                                  uint64_t offset);
/*
 * Points the L2 entry of guest cluster @offset at the compressed
 * descriptor @l2_entry, whose bytes are already written and referenced
 * (qcow2.h inv. 2), and frees what the entry pointed to before.  Waits for
 * allocations in flight on that cluster first.
 */
int coroutine_fn qcow2_link_compressed_cluster(BlockDriverState *bs,
                                               uint64_t offset,
                                               uint64_t l2_entry);
/* Frees @m's new clusters and ends the allocation; the caller frees @m. */
void coroutine_fn qcow2_alloc_cluster_abort(BlockDriverState *bs,
                                            QCowL2Meta *m);
/*
 * Discards the clusters of [offset, offset + bytes) (@offset cluster
 * aligned, @bytes whole clusters or up to the end of the image): with
 * @full_discard the entries become unallocated (the backing file shows
 * through), else they read as zeroes (v3 zero flag where a backing file or
 * an allocation needs it; v2: unallocated).  Host clusters are freed with
 * @type, which decides whether the file is told.
 */
int coroutine_fn qcow2_cluster_discard(BlockDriverState *bs, uint64_t offset,
                                       uint64_t bytes, bool full_discard,
                                       Qcow2DiscardType type);
/*
 * Sets the zero flag on the clusters of [offset, offset + bytes) (same
 * alignment as discard); with BDRV_REQ_MAY_UNMAP in @flags host clusters
 * are freed, else kept as ZERO_ALLOC.  v2 images have no zero flag: a
 * discard without a backing file, else -ENOTSUP (the caller writes zeroes).
 */
int coroutine_fn qcow2_subcluster_zeroize(BlockDriverState *bs,
                                          uint64_t offset, uint64_t bytes,
                                          int flags);
/* Writes the whole active L1 table (s->l1_table) and flushes. */
int coroutine_fn qcow2_write_l1_table(BlockDriverState *bs);
/*
 * Calls @fn for every entry of the L2 table at @l2_offset, through the L2
 * cache, with the entry's type; @fn may change *entry (the slice is then
 * marked dirty; the caller sets the cache dependencies that the change
 * needs).  Invalid entries are reported as corruption (-EIO) before @fn
 * sees them.  Stops at the first negative return of @fn.
 */
typedef int Qcow2L2EntryFn(BlockDriverState *bs, QCow2ClusterType type,
                           uint64_t *entry, void *opaque);
int coroutine_fn qcow2_l2_table_map(BlockDriverState *bs, uint64_t l2_offset,
                                    Qcow2L2EntryFn *fn, void *opaque);

/*
 * qcow2-snapshot.c
 *
 * The VM state area starts at the first L1 entry past the end of the
 * disk, as in QEMU, so that the disk can grow a little without moving it.
 */
static inline int64_t qcow2_vm_state_offset(BDRVQcow2State *s)
{
    uint64_t span = (uint64_t)s->cluster_size << s->l2_bits;

    return DIV_ROUND_UP((uint64_t)s->virtual_size, span) * span;
}
/* Reads the snapshot table at open; @repair (check -r) drops what cannot
 * be kept instead of failing. */
int qcow2_read_snapshots(BlockDriverState *bs, bool repair, Error **errp);
/*
 * check's part for the snapshot table, before the refcounts are checked:
 * reports what the table read at open dropped or could not read; entries
 * with too much extra data fail the check unless @fix has
 * BDRV_FIX_ERRORS.
 */
int coroutine_fn qcow2_check_snapshot_table(BlockDriverState *bs,
                                            BdrvCheckResult *res,
                                            BdrvCheckMode fix);
/*
 * With BDRV_FIX_ERRORS, after the refcounts are checked (and repaired),
 * rewrites the table without what was dropped (counted as repaired
 * corruptions).  Until then the refcount check counts the table as it
 * lies on disk, as QEMU's does: an entry whose extra data overran into an
 * unallocated cluster is a refcount error that is repaired first.
 */
int coroutine_fn qcow2_fix_snapshot_table(BlockDriverState *bs,
                                          BdrvCheckResult *res,
                                          BdrvCheckMode fix);
void qcow2_free_snapshots(BlockDriverState *bs);
/*
 * Reads the L1 table of @sn (host-endian, g_free'd by the caller) after
 * checking that the entry describes a possible one.
 */
int qcow2_snapshot_read_l1(BlockDriverState *bs, const QCowSnapshot *sn,
                           uint64_t **l1, Error **errp);
/*
 * Writes s->snapshots as a new table, switches the header to it and frees
 * the old one: the one place where the snapshot table is written.
 */
int coroutine_fn qcow2_write_snapshots(BlockDriverState *bs);
int qcow2_snapshot_create(BlockDriverState *bs, QEMUSnapshotInfo *sn_info);
int qcow2_snapshot_goto(BlockDriverState *bs, const char *snapshot_id);
int qcow2_snapshot_delete(BlockDriverState *bs, const char *snapshot_id,
                          const char *name, Error **errp);
int qcow2_snapshot_list(BlockDriverState *bs, QEMUSnapshotInfo **psn_tab);
int qcow2_snapshot_load_tmp(BlockDriverState *bs, const char *snapshot_id,
                            const char *name, Error **errp);

/* qcow2-amend.c: the BlockDriver amend callback (qemu-img amend). */
int qcow2_amend_options(BlockDriverState *bs, QemuOpts *opts,
                        BlockDriverAmendStatusCB *status_cb, void *cb_opaque,
                        bool force, Error **errp);

/*
 * qcow2-bitmap.c: persistent dirty bitmaps.  All are called with s->lock
 * held, in a coroutine.
 */
/*
 * Loads the directory's bitmaps into the node; marks them in use if rw
 * (QCOW2_BITMAPS_IN_USE: the first flush stores them).
 */
int coroutine_fn qcow2_load_dirty_bitmaps(BlockDriverState *bs, int flags,
                                          Error **errp);
/*
 * After a reopen: read-only bitmaps when the node is read-only; when it is
 * writable, the consistent bitmaps marked in use on disk (invariant 1 of
 * qcow2-bitmap.c) and writable again.
 */
int coroutine_fn qcow2_reopen_bitmaps(BlockDriverState *bs, bool writable,
                                      Error **errp);
/* Writes the node's persistent bitmaps and a new directory (close). */
int coroutine_fn qcow2_store_dirty_bitmaps(BlockDriverState *bs,
                                           Error **errp);
/*
 * The checkpoint of a flush (qcow2-bitmap.c invariant 4): stores the
 * bitmaps if they changed since they were stored (QCOW2_BITMAPS_IN_USE).
 * A failure leaves them in use and is reported, not returned: the flush
 * of the data is not at stake.
 */
void coroutine_fn qcow2_checkpoint_bitmaps(BlockDriverState *bs);
/*
 * Marks the stored bitmaps in use on disk (in place, flushed) if the node
 * is checkpointed (invariant 4); with s->lock held.  Truncate calls it.
 */
int coroutine_fn qcow2_mark_bitmaps_in_use_locked(BlockDriverState *bs);
/*
 * The BlockDriver's bdrv_co_mark_bitmaps_in_use: the above, taking the
 * lock itself (without it when the node is not checkpointed).
 */
int coroutine_fn qcow2_co_mark_bitmaps_in_use(BlockDriverState *bs);
/* BlockDriver callbacks: version 3 images keep bitmaps; QEMU's limits on
 * a new persistent bitmap. */
bool qcow2_supports_persistent_dirty_bitmap(BlockDriverState *bs);
bool qcow2_can_store_new_dirty_bitmap(BlockDriverState *bs, const char *name,
                                      uint32_t granularity, Error **errp);
/* The BlockDriver callback: drops @name from the image now (takes the
 * lock itself; not in a coroutine). */
int qcow2_remove_persistent_dirty_bitmap(BlockDriverState *bs,
                                         const char *name, Error **errp);
/* Calls @fn for every cluster range the bitmaps use (check). */
typedef int Qcow2BitmapRefFn(void *opaque, int64_t offset, int64_t size);
int qcow2_bitmaps_for_each_ref(BlockDriverState *bs, BdrvCheckResult *res,
                               Qcow2BitmapRefFn *fn, void *opaque);
/* The "bitmaps" array of qemu-img info, NULL if there is none. */
JsonArray *qcow2_get_bitmap_info_list(BlockDriverState *bs);
/* Bytes the persistent bitmaps of @in_bs take as qcow2 (measure). */
uint64_t qcow2_bitmaps_measure(BlockDriverState *in_bs, int cluster_size);

/* qcow2-make-empty.c: the BlockDriver make_empty callback. */
int qcow2_make_empty(BlockDriverState *bs);

/* qcow2-measure.c: the BlockDriver measure callback. */
int qcow2_measure(QemuOpts *opts, BlockDriverState *in_bs,
                  BlockMeasureInfo *info, Error **errp);

/* qcow2-overlap.c */
/*
 * Parses overlap-check, overlap-check.template and overlap-check.<name>
 * from @opts into a QCOW2_OL_* mask (default: the "cached" template).
 */
int qcow2_overlap_read_options(QemuOpts *opts, int *mask, Error **errp);
/* Builds the index from the active L1, refcount and snapshot tables. */
int qcow2_overlap_init(BlockDriverState *bs, Error **errp);
void qcow2_overlap_close(BDRVQcow2State *s);
/* An active L1 entry changed from @old_l1_entry to @new_l1_entry. */
void qcow2_overlap_l2_changed(BDRVQcow2State *s, uint64_t old_l1_entry,
                              uint64_t new_l1_entry);
/* A refcount table entry changed. */
void qcow2_overlap_refblock_changed(BDRVQcow2State *s, uint64_t old_entry,
                                    uint64_t new_entry);
/* The active L1 table or the refcount table was replaced as a whole. */
void qcow2_overlap_rebuild_active(BDRVQcow2State *s);
/*
 * The snapshot table changed (s->snapshots, nb_snapshots, snapshots_offset
 * and snapshots_size describe the new one): takes the snapshots' L1
 * tables' locations anew (and reads their L2 tables' if inactive-l2 is
 * checked).
 */
int qcow2_overlap_snapshots_changed(BlockDriverState *bs);
/*
 * Snapshot operations and amend rewrite L2 tables that snapshots share
 * (their COPIED flags, reference walks, expanded zero clusters): between
 * qcow2_overlap_begin_shared_l2_writes() and _end_, which writes the L2
 * cache out first, the L2 cache's writes are not checked against the
 * snapshots' L2 tables.  qcow2_overlap_l2_cache_ign() is what the L2
 * cache's writes ignore.
 */
void qcow2_overlap_begin_shared_l2_writes(BlockDriverState *bs);
void qcow2_overlap_end_shared_l2_writes(BlockDriverState *bs);
int qcow2_overlap_l2_cache_ign(BlockDriverState *bs);
/* Clusters in the index (statistics, for tests). */
uint64_t qcow2_overlap_index_size(BDRVQcow2State *s);
/*
 * The place or size of the header, the active L1 table, the refcount
 * table, the snapshot table or the bitmap directory changed (or a change
 * was rolled back): called right after the fields are assigned.
 */
void qcow2_overlap_singles_changed(BDRVQcow2State *s);
/*
 * The structures with one range each (a QCOW2_OL_* mask) that lie, at
 * least in part, in the header cluster, where only the header can be: an
 * image whose refcount table offset was overwritten with 0, say.  Such a
 * structure is read from the header's bytes and holds nothing valid, so
 * the header's own writes are not checked against it: refused, they would
 * keep the image from being marked corrupt, and check -r all from
 * installing the refcount table it rebuilt elsewhere.
 */
int qcow2_overlap_in_header(BDRVQcow2State *s);
/* The message name of a QCOW2_OL_* structure ("active L1 table"). */
const char *qcow2_overlap_name(int type);
/*
 * The first checked structure (a QCOW2_OL_* bit) that [offset, offset +
 * size) of the file overlaps, ignoring those in @ign; 0 if none; -errno if
 * the check could not be made.
 */
int qcow2_check_metadata_overlap(BlockDriverState *bs, int ign,
                                 int64_t offset, int64_t size);
/*
 * qcow2_pre_write_overlap_check() when the index does not clear a write.
 * Called with s->lock held (qcow2.h inv. 7): it may read the snapshots' L1
 * tables and mark the image corrupt, both of which yield and change state
 * that the lock guards.
 */
int coroutine_fn qcow2_pre_write_overlap_check_slow(BlockDriverState *bs,
                                                    int ign, int64_t offset,
                                                    int64_t size);

/*
 * True if the index alone shows that [offset, offset + size) of the file
 * overlaps no structure checked outside @ign; false means "look closer".
 *
 * Inline because it is on the path of every guest write: every cluster of
 * a checked structure is in the index (those of the single-range ones
 * marked, qcow2-overlap.c inv. 4), so a write within one cluster
 * that the index does not hold overlaps nothing, which one hash probe
 * shows.  A write across clusters, or while inactive L2 tables are still
 * to be read, is left to the full check.
 */
static inline bool qcow2_overlap_index_clears(BlockDriverState *bs, int ign,
                                              int64_t offset, int64_t size)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2OverlapIndex *ix = s->overlap_index;
    int chk = s->overlap_check & ~ign;
    uint64_t cluster = (uint64_t)offset >> s->cluster_bits;

    if (!chk || !ix) {
        return true;
    }
    if (size <= 0 ||
        ((uint64_t)offset + size - 1) >> s->cluster_bits != cluster ||
        ((chk & QCOW2_OL_INACTIVE_L2) && !s->overlap_inactive_l2_loaded)) {
        return false;
    }
    s->overlap_lookups++;
    return !ix->slots[qcow2_overlap_find(ix, cluster)].counts;
}

/*
 * qcow2.h inv. 6: a node marked corrupt writes nothing more, except in an
 * open for check -r, whose purpose is to repair a corrupt image; qcow2.h
 * inv. 8: neither does a node whose refcounts are lost.
 */
static inline bool qcow2_refuses_writes(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    return (bs->corrupt && !(bs->open_flags & BDRV_O_CHECK)) ||
           s->refcounts_lost;
}

/*
 * qcow2_check_metadata_overlap, and on a hit marks the image corrupt and
 * returns -EIO (qcow2.h inv. 7).  Called with s->lock held.
 */
static inline int coroutine_fn qcow2_overlap_check_write(
    BlockDriverState *bs, int ign, int64_t offset, int64_t size)
{
    if (qcow2_overlap_index_clears(bs, ign, offset, size)) {
        return 0;
    }
    return qcow2_pre_write_overlap_check_slow(bs, ign, offset, size);
}

/*
 * Every write to bs->file calls this first (qcow2.h inv. 7), with @ign the
 * structures the write is meant to update; it is also the one place where
 * qcow2 refuses to write to an image marked corrupt (qcow2.h inv. 6): with
 * no yield between it and the write, a request that waited (on s->lock,
 * on I/O) while another one marked the image corrupt is refused here, so
 * nothing more reaches the file.  Called with s->lock held; guest data
 * written without it is checked by qcow2_pre_write_data_check_unlocked().
 */
static inline int coroutine_fn qcow2_pre_write_overlap_check(
    BlockDriverState *bs, int ign, int64_t offset, int64_t size)
{
    if (qcow2_refuses_writes(bs)) {
        return -EIO;
    }
    return qcow2_overlap_check_write(bs, ign, offset, size);
}

/* The check for guest data at host @offset of s->data_file, under s->lock. */
static inline int coroutine_fn qcow2_pre_write_data_check(
    BlockDriverState *bs, int64_t offset, int64_t size)
{
    BDRVQcow2State *s = bs->opaque;

    /* an external data file holds no metadata, but takes no writes either
     * once the image is corrupt (qcow2.h inv. 6) */
    if (s->data_file != bs->file) {
        return qcow2_refuses_writes(bs) ? -EIO : 0;
    }
    return qcow2_pre_write_overlap_check(bs, 0, offset, size);
}

/*
 * qcow2_pre_write_data_check() for guest data written without s->lock
 * (qcow2-io.c).  The one-probe fast path needs no lock: all coroutines of
 * a node run in one thread and neither the probe nor the index updates
 * yield, so the probe reads the index as a lock holder left it at a yield
 * point, never half-changed.  The index changes in the same step as the
 * in-memory table that places a structure (qcow2-overlap.c inv. 1
 * and 4), so the probe is as current as those tables; while the inactive
 * L2 tables are being read, overlap_inactive_l2_loaded is false and the
 * probe defers to the full check.  The full check reads tables and may
 * mark the image corrupt, so it takes the lock.
 */
static inline int coroutine_fn qcow2_pre_write_data_check_unlocked(
    BlockDriverState *bs, int64_t offset, int64_t size)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    /* qcow2.h inv. 6, as in qcow2_pre_write_overlap_check() */
    if (qcow2_refuses_writes(bs)) {
        return -EIO;
    }
    if (s->data_file != bs->file ||
        qcow2_overlap_index_clears(bs, 0, offset, size)) {
        return 0;
    }
    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_pre_write_overlap_check_slow(bs, 0, offset, size);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/* qcow2-cache.c */
Qcow2Cache *qcow2_cache_create(BlockDriverState *bs, int num_tables,
                               unsigned table_size);
int qcow2_cache_destroy(Qcow2Cache *c);
void qcow2_cache_entry_mark_dirty(Qcow2Cache *c, void *table);
int qcow2_cache_flush(BlockDriverState *bs, Qcow2Cache *c);
int qcow2_cache_write(BlockDriverState *bs, Qcow2Cache *c);
/* @c is written only after @dependency (qcow2.h inv. 1). */
int qcow2_cache_set_dependency(BlockDriverState *bs, Qcow2Cache *c,
                               Qcow2Cache *dependency);
/* @c's next write is preceded by a flush of the file (e.g. after a
 * cluster a table pointed to was freed and may be reused for data). */
void qcow2_cache_depends_on_flush(Qcow2Cache *c);
int qcow2_cache_empty(BlockDriverState *bs, Qcow2Cache *c);
int qcow2_cache_get(BlockDriverState *bs, Qcow2Cache *c, uint64_t offset,
                    void **table);
int qcow2_cache_get_empty(BlockDriverState *bs, Qcow2Cache *c,
                          uint64_t offset, void **table);
void qcow2_cache_put(Qcow2Cache *c, void **table);
/* The cached table at @offset (held or not), or NULL: for discard. */
void *qcow2_cache_is_table_offset(Qcow2Cache *c, uint64_t offset);
void qcow2_cache_discard(Qcow2Cache *c, void *table);
void qcow2_cache_clean_unused(Qcow2Cache *c);

#endif
