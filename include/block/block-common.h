/*
 * Constants and small types shared by the block layer's users and drivers.
 */
#ifndef QBLOCK_BLOCK_COMMON_H
#define QBLOCK_BLOCK_COMMON_H

#include "util/osdep.h"
#include "util/error.h"
#include "util/qdict.h"
#include "util/iov.h"
#include "util/aio.h"
#include "util/coroutine.h"
#include "util/qemu-option.h"

typedef struct BlockDriver BlockDriver;
typedef struct BlockDriverState BlockDriverState;
typedef struct BdrvChild BdrvChild;
typedef struct BlockBackend BlockBackend;
typedef struct BDRVReopenState BDRVReopenState;

/* Open flags (bdrv_open, blk_new_open). */
#define BDRV_O_NO_SHARE     0x0001 /* don't share read/write with others */
#define BDRV_O_RDWR         0x0002
#define BDRV_O_RESIZE       0x0004 /* request permission to resize */
#define BDRV_O_SNAPSHOT     0x0008 /* temporary overlay, discarded on close */
#define BDRV_O_TEMPORARY    0x0010 /* delete the file on close */
#define BDRV_O_NOCACHE      0x0020 /* O_DIRECT (cache.direct=on) */
#define BDRV_O_NATIVE_AIO   0x0080 /* aio=native (libaio) */
#define BDRV_O_NO_BACKING   0x0100 /* don't open the backing file */
#define BDRV_O_NO_FLUSH     0x0200 /* cache.no-flush=on: flushes are no-ops */
#define BDRV_O_COPY_ON_READ 0x0400
#define BDRV_O_INACTIVE     0x0800
#define BDRV_O_CHECK        0x1000 /* opened by qemu-img check: lenient */
#define BDRV_O_ALLOW_RDWR   0x2000 /* may be reopened read-write */
#define BDRV_O_UNMAP        0x4000 /* discard=unmap: pass discards down */
#define BDRV_O_PROTOCOL     0x8000 /* open as protocol, no format probing */
#define BDRV_O_NO_IO        0x10000 /* metadata only (qemu-img info) */
#define BDRV_O_AUTO_RDONLY  0x20000 /* fall back to read-only */
#define BDRV_O_IO_URING     0x40000 /* aio=io_uring */

#define BDRV_O_CACHE_MASK   (BDRV_O_NOCACHE | BDRV_O_NO_FLUSH)

/* Option names shared by every node (block.c absorbs them). */
#define BDRV_OPT_CACHE_DIRECT   "cache.direct"
#define BDRV_OPT_CACHE_NO_FLUSH "cache.no-flush"
#define BDRV_OPT_READ_ONLY      "read-only"
#define BDRV_OPT_AUTO_READ_ONLY "auto-read-only"
#define BDRV_OPT_DISCARD        "discard"
#define BDRV_OPT_FORCE_SHARE    "force-share"

/* Request flags. */
typedef enum BdrvRequestFlags {
    BDRV_REQ_COPY_ON_READ    = 0x1,
    BDRV_REQ_ZERO_WRITE      = 0x2,
    /* the range may be deallocated, provided it then reads as zeroes */
    BDRV_REQ_MAY_UNMAP       = 0x4,
    /* data reaches stable storage before the request completes */
    BDRV_REQ_FUA             = 0x10,
    BDRV_REQ_WRITE_COMPRESSED = 0x20,
    /* rewrites data that is already there (copy-on-read, mirror) */
    BDRV_REQ_WRITE_UNCHANGED = 0x40,
    /* waits for, and blocks, every overlapping request */
    BDRV_REQ_SERIALISING     = 0x80,
    /* fail with -ENOTSUP instead of emulating a zero write slowly */
    BDRV_REQ_NO_FALLBACK     = 0x100,
    BDRV_REQ_PREFETCH        = 0x200,
    BDRV_REQ_MASK            = 0x3ff,
} BdrvRequestFlags;

/* Block status bits (bdrv_block_status). */
#define BDRV_BLOCK_DATA         0x01 /* reads return data from this layer */
#define BDRV_BLOCK_ZERO         0x02 /* reads return zeroes */
#define BDRV_BLOCK_OFFSET_VALID 0x04 /* *map is the offset in *file */
#define BDRV_BLOCK_RAW          0x08 /* ask *file at *map (for filters) */
#define BDRV_BLOCK_ALLOCATED    0x10 /* the content comes from this layer */
#define BDRV_BLOCK_EOF          0x20 /* the range reaches the end of file */
#define BDRV_BLOCK_RECURSE      0x40 /* also ask the protocol for zeroes */

/* Permissions a user of a node asks for / lets others have. */
enum {
    BLK_PERM_CONSISTENT_READ = 0x01,
    BLK_PERM_WRITE           = 0x02,
    BLK_PERM_WRITE_UNCHANGED = 0x04,
    BLK_PERM_RESIZE          = 0x08,
    BLK_PERM_ALL             = 0x0f,
};
/* "consistent read", "write", "write unchanged", "resize" */
const char *bdrv_perm_name(uint64_t single_perm);
/* Comma-separated names of every bit in @perm (caller frees). */
char *bdrv_perm_names(uint64_t perm);

typedef enum PreallocMode {
    PREALLOC_MODE_OFF,
    PREALLOC_MODE_METADATA,
    PREALLOC_MODE_FALLOC,
    PREALLOC_MODE_FULL,
    PREALLOC_MODE__MAX,
} PreallocMode;
extern const char *const PreallocMode_str[];  /* "off", "metadata", ... */

typedef enum BlockdevDetectZeroesOptions {
    BLOCKDEV_DETECT_ZEROES_OPTIONS_OFF,
    BLOCKDEV_DETECT_ZEROES_OPTIONS_ON,
    BLOCKDEV_DETECT_ZEROES_OPTIONS_UNMAP,
} BlockdevDetectZeroesOptions;

typedef enum BlockdevAioOptions {
    BLOCKDEV_AIO_OPTIONS_THREADS,
    BLOCKDEV_AIO_OPTIONS_NATIVE,
    BLOCKDEV_AIO_OPTIONS_IO_URING,
} BlockdevAioOptions;

/*
 * Translates a cache mode (writeback, writethrough, none, directsync,
 * unsafe; "off" is an alias of none) into open flags and the write cache
 * flag, as the table in DESIGN.md says.  Returns -1 on an unknown mode.
 */
int bdrv_parse_cache_mode(const char *mode, int *flags, bool *writethrough);
/* threads, native, io_uring: sets BDRV_O_NATIVE_AIO/IO_URING in *flags. */
int bdrv_parse_aio(const char *mode, int *flags);
/* ignore/off, unmap/on: sets BDRV_O_UNMAP in *flags. */
int bdrv_parse_discard_flags(const char *mode, int *flags);

/* Information every format can report (qemu-img info, map). */
typedef struct BlockDriverInfo {
    /* cluster size in bytes, 0 if the format has none */
    int cluster_size;
    /* offset at which VM state is saved, 0 if unsupported */
    int64_t vm_state_offset;
    bool is_dirty;
    /*
     * Every write must be of whole clusters, each written once and
     * compressed (a stream-optimized VMDK): convert writes to it as with
     * -c, as qemu-img does.
     */
    bool needs_compressed_writes;
} BlockDriverInfo;

/* I/O accounting: the counters query-blockstats reports. */
typedef enum BlockAcctType {
    BLOCK_ACCT_NONE = 0,
    BLOCK_ACCT_READ,
    BLOCK_ACCT_WRITE,
    BLOCK_ACCT_FLUSH,
    BLOCK_ACCT_UNMAP,
    BLOCK_MAX_IOTYPE,
} BlockAcctType;

typedef struct BlockAcctStats {
    uint64_t nr_bytes[BLOCK_MAX_IOTYPE];
    uint64_t nr_ops[BLOCK_MAX_IOTYPE];
    uint64_t failed_ops[BLOCK_MAX_IOTYPE];
    uint64_t invalid_ops[BLOCK_MAX_IOTYPE];
    uint64_t total_time_ns[BLOCK_MAX_IOTYPE];
    int64_t last_access_time_ns;
    /* highest offset + bytes of a completed write */
    uint64_t wr_highest_offset;
} BlockAcctStats;

/* Results of a consistency check (qemu-img check). */
typedef enum BdrvCheckMode {
    BDRV_FIX_LEAKS  = 1,
    BDRV_FIX_ERRORS = 2,
} BdrvCheckMode;

typedef struct BdrvCheckResult {
    int corruptions;
    int leaks;
    int check_errors;
    int corruptions_fixed;
    int leaks_fixed;
    int64_t image_end_offset;
    /* allocated_clusters, total_clusters, fragmented_clusters, ... */
    struct {
        int64_t total_clusters;
        int64_t allocated_clusters;
        int64_t fragmented_clusters;
        int64_t compressed_clusters;
    } bfi;
} BdrvCheckResult;

#endif
