/*
 * What a crash test expects of an image after a power cut: a log of the
 * versions written to each 512-byte sector, which of them the guest may
 * count on, and the checks of the image by both tools.
 *
 * Invariants (l = one CrashSector):
 *  1. l->seeds holds every version the workload asked for, in order
 *     (seed 0: zeroes).  A version is logged before its request is made,
 *     so a request that the cut interrupts may still have reached the
 *     disk and is a legal outcome.
 *  2. l->completed is the last version whose request returned success;
 *     l->durable is the last that was completed when a flush returned
 *     success (-1: none).  After the cut the sector must hold a version
 *     at index l->durable or later.
 */
#ifndef TESTS_CRASH_MODEL_H
#define TESTS_CRASH_MODEL_H

#include "block/block_int.h"
#include "qblock/block-backend.h"

#define CRASH_SECTOR 512

typedef struct CrashSector {
    int64_t lba;
    GArray *seeds;              /* uint32_t, invariant 1 */
    int completed;              /* invariant 2 */
    int durable;
    /* the sector may be cut off by a shrink that is under way */
    bool may_vanish;
} CrashSector;

typedef struct CrashModel {
    GHashTable *sectors;        /* lba -> CrashSector */
    /* disk sizes: the last one set, and the last one a flush made sure of */
    int64_t len_completed;
    int64_t len_durable;
    bool shrinking;             /* crash_model_may_shrink() was called */
} CrashModel;

/* What qemu-img check may find that QEMU's own ordering leaves too. */
typedef enum CrashAllow {
    CRASH_ALLOW_NONE = 0,
    /* clusters counted but unused */
    CRASH_ALLOW_LEAKS = 1 << 0,
    /* "ERROR OFLAG_COPIED": the COPIED bit of an L1/L2 entry disagrees
     * with the refcount (1 or more) of the cluster it names, and nothing
     * else is wrong */
    CRASH_ALLOW_COPIED = 1 << 1,
} CrashAllow;

/* The outcome of checking one image. */
typedef struct CrashVerdict {
    bool leaked;                /* qemu-img check found leaks */
    bool copied;                /* ... OFLAG_COPIED mismatches, allowed */
    char *failure;              /* NULL: passed; else why not (g_free) */
} CrashVerdict;

void crash_model_init(CrashModel *m, int64_t len);
void crash_model_destroy(CrashModel *m);
/* Fills @buf with version @seed of the sectors from @lba on. */
void crash_pattern(uint8_t *buf, size_t len, int64_t lba, uint32_t seed);
/* Logs version @seed of [@offset, @offset + @bytes) (invariant 1). */
void crash_model_log(CrashModel *m, int64_t offset, int64_t bytes,
                     uint32_t seed);
/* The request of the last crash_model_log() of that range returned. */
void crash_model_completed(CrashModel *m, int64_t offset, int64_t bytes);
/* A flush returned: everything completed is durable (invariant 2). */
void crash_model_flushed(CrashModel *m);
/* Sectors at or past @len may be cut off from here on. */
void crash_model_may_shrink(CrashModel *m, int64_t len);

/*
 * Checks the image at @path after a cut: qemu-img check finds nothing
 * that @allow does not name, qemu-img info opens it, its corrupt bit is
 * clear, and, opened by qblock's qcow2 (its backing chain included), its
 * info (what qblock-img info shows) can be read and every sector of @m
 * holds a version it may hold.  @m may be NULL: the image only.
 * qemu-img runs once per distinct image that names no other file; what
 * it said is reused for the same bytes (crash-model.c).
 */
CrashVerdict crash_verify(const char *path, CrashModel *m, CrashAllow allow);
/* True if the real qemu-img, the oracle of these tests, is installed. */
bool crash_have_qemu_img(void);
/* The qblock-img beside this test program in the build directory. */
const char *crash_qblock_img(void);
/* A g_new'd copy of the file @src at a fresh temporary path. */
char *crash_copy_file(const char *src);
/* A fresh, empty temporary path ("qblock-crash-<what>-XXXXXX"). */
char *crash_tmp_path(const char *what);

/* The fields of a qcow2 header that the tests look at. */
typedef struct CrashHeader {
    uint32_t version;
    uint32_t cluster_bits;
    uint64_t size;
    uint32_t l1_size;
    uint64_t l1_table_offset;
    uint64_t refcount_table_offset;
    uint32_t refcount_table_clusters;
    uint32_t nb_snapshots;
    uint64_t incompatible_features;
    uint32_t refcount_order;
    /* nonzero entries of the L1 table and of the refcount table */
    int l1_used;
    int reftable_used;
} CrashHeader;

void crash_read_header(const char *path, CrashHeader *h);

#endif
