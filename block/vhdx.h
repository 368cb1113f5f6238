/*
 * The vhdx driver's shared state and on-disk layout: what block/vhdx.c
 * (probing, opening, reading) and block/vhdx-log.c (the log's scan and
 * replay) know
 * of a Hyper-V VHDX image, after Microsoft's VHDX specification v1.0.
 * All on-disk integers are little-endian; GUIDs are stored as Microsoft
 * lays them out (the first three fields little-endian), and are compared
 * here as 16 raw bytes.  The invariants are block/vhdx.c's.
 */
#ifndef BLOCK_VHDX_H
#define BLOCK_VHDX_H

#include "block/block_int.h"

#define VHDX_FILE_SIGNATURE     "vhdxfile"
#define VHDX_HEADER_SIGNATURE   "head"
#define VHDX_REGION_SIGNATURE   "regi"
#define VHDX_METADATA_SIGNATURE "metadata"
#define VHDX_LOG_SIGNATURE      "loge"

#define VHDX_HEADER1_OFFSET     (64 * 1024)
#define VHDX_HEADER2_OFFSET     (128 * 1024)
#define VHDX_HEADER_SIZE        4096
#define VHDX_REGION1_OFFSET     (192 * 1024)
#define VHDX_REGION2_OFFSET     (256 * 1024)
#define VHDX_REGION_TABLE_SIZE  (64 * 1024)
#define VHDX_MAX_REGION_ENTRIES 2047
#define VHDX_METADATA_TABLE_SIZE (64 * 1024)
#define VHDX_MAX_METADATA_ENTRIES 2047
/* the header section, file identifier to region tables */
#define VHDX_HEADER_SECTION_END (1024 * 1024)
#define VHDX_MIB                (1024 * 1024)

#define VHDX_BLOCK_SIZE_MIN     (1u << 20)
#define VHDX_BLOCK_SIZE_MAX     (256u << 20)
/* QEMU's: at most 64 TiB */
#define VHDX_MAX_DISK_SIZE      (UINT64_C(64) << 40)
#define VHDX_SECTOR             512
/* sectors one sector bitmap block (1 MiB) describes */
#define VHDX_SECTORS_PER_BITMAP (UINT64_C(1) << 23)

/* BAT entry: state in bits 0-2, file offset in MiB from bit 20 */
#define VHDX_BAT_STATE_MASK     UINT64_C(7)
#define VHDX_BAT_OFFSET_MASK    (~UINT64_C(0xfffff))
enum {
    VHDX_BLOCK_NOT_PRESENT      = 0,
    VHDX_BLOCK_UNDEFINED        = 1,
    VHDX_BLOCK_ZERO             = 2,
    VHDX_BLOCK_UNMAPPED         = 3,
    /* no state of the specification: reading such a block fails, as QEMU's */
    VHDX_BLOCK_RESERVED         = 4,
    VHDX_BLOCK_UNMAPPED_V095    = 5,    /* draft spec's UNMAPPED */
    VHDX_BLOCK_FULLY_PRESENT    = 6,
    VHDX_BLOCK_PARTIALLY_PRESENT = 7,   /* differencing images only */
};

#define VHDX_LOG_SECTOR         4096
#define VHDX_LOG_DESCRIPTOR     32

#define VHDX_PARAMS_LEAVE_BLOCKS_ALLOCATED 1u
#define VHDX_PARAMS_HAS_PARENT  2u

typedef struct QEMU_PACKED VhdxHeader {
    char signature[4];
    uint32_t checksum;
    uint64_t sequence_number;
    uint8_t file_write_guid[16];
    uint8_t data_write_guid[16];
    uint8_t log_guid[16];
    uint16_t log_version;
    uint16_t version;
    uint32_t log_length;
    uint64_t log_offset;
} VhdxHeader;

typedef struct QEMU_PACKED VhdxRegionTableHeader {
    char signature[4];
    uint32_t checksum;
    uint32_t entry_count;
    uint32_t reserved;
} VhdxRegionTableHeader;

typedef struct QEMU_PACKED VhdxRegionEntry {
    uint8_t guid[16];
    uint64_t file_offset;
    uint32_t length;
    uint32_t required;      /* bit 0 */
} VhdxRegionEntry;

typedef struct QEMU_PACKED VhdxMetadataTableHeader {
    char signature[8];
    uint16_t reserved;
    uint16_t entry_count;
    uint32_t reserved2[5];
} VhdxMetadataTableHeader;

typedef struct QEMU_PACKED VhdxMetadataEntry {
    uint8_t item_id[16];
    uint32_t offset;        /* from the metadata region's start */
    uint32_t length;
    uint32_t flags;         /* bit 0 user, bit 1 virtual disk, 2 required */
    uint32_t reserved;
} VhdxMetadataEntry;

typedef struct QEMU_PACKED VhdxLogEntryHeader {
    char signature[4];
    uint32_t checksum;      /* over the whole entry */
    uint32_t entry_length;
    uint32_t tail;
    uint64_t sequence_number;
    uint32_t descriptor_count;
    uint32_t reserved;
    uint8_t log_guid[16];
    uint64_t flushed_file_offset;
    uint64_t last_file_offset;
} VhdxLogEntryHeader;

_Static_assert(sizeof(VhdxHeader) == 80, "vhdx header");
_Static_assert(sizeof(VhdxRegionEntry) == 32, "vhdx region entry");
_Static_assert(sizeof(VhdxMetadataEntry) == 32, "vhdx metadata entry");
_Static_assert(sizeof(VhdxMetadataTableHeader) == 32, "vhdx metadata");
_Static_assert(sizeof(VhdxLogEntryHeader) == 64, "vhdx log entry");

/* the region GUIDs (block/vhdx.c) */
extern const uint8_t vhdx_bat_guid[16];
extern const uint8_t vhdx_metadata_guid[16];

/* the metadata items qblock reads and writes, in QEMU's order */
enum {
    VHDX_ITEM_FILE_PARAMETERS,
    VHDX_ITEM_DISK_SIZE,
    VHDX_ITEM_PAGE83,
    VHDX_ITEM_LOGICAL_SECTOR,
    VHDX_ITEM_PHYSICAL_SECTOR,
    VHDX_ITEM_PARENT_LOCATOR,
    VHDX_ITEMS
};
typedef struct VhdxItemKind {
    uint8_t guid[16];
    uint32_t size;
} VhdxItemKind;
extern const VhdxItemKind vhdx_items[VHDX_ITEMS];

/* A byte range of the file that one structure owns (invariant 3). */
typedef struct VhdxRange {
    uint64_t start;
    uint64_t end;           /* exclusive */
} VhdxRange;

/*
 * Set by open; after it, only the write path (block/vhdx-write.c, under
 * lock) changes the headers, the BAT entries and the log's place
 * (block/vhdx.c inv. 1); check clears log_replayed once it has counted
 * the replay.
 */
typedef struct BDRVVhdxState {
    VhdxHeader header;      /* the current one, host-endian */
    int current_header_slot;    /* 0: at 64 KiB, 1: at 128 KiB */
    /* each slot keeps its own data write GUID, as QEMU's updates do */
    uint8_t data_write_guid[2][16];
    uint8_t session_guid[16];   /* the file write GUID of this open */
    bool first_visible_write;   /* no header update made yet */
    bool log_replayed;      /* by this open (check counts it repaired) */
    uint32_t log_write_pos; /* where the next log entry goes */
    uint64_t log_sequence;  /* the next log entry's sequence number */
    CoMutex lock;           /* allocation, the log, the headers */
    uint64_t bat_offset;
    uint32_t bat_length;
    uint64_t metadata_offset;
    uint32_t metadata_length;
    uint32_t block_size;
    uint32_t params_flags;
    uint32_t logical_sector_size;
    uint32_t physical_sector_size;
    uint64_t disk_size;     /* whole sectors, as QEMU */
    uint64_t chunk_ratio;   /* payload blocks per sector bitmap block */
    uint64_t data_blocks;
    uint64_t bat_entries;
    uint64_t bat_loaded;    /* the entries inside the file (inv. 4) */
    uint64_t *bat;          /* bat_loaded entries, host-endian */
    VhdxRange *ranges;      /* newest first: QEMU's order of report */
    unsigned int nranges;
} BDRVVhdxState;

/*
 * Claims [start, start + length) of the file for one structure; fails,
 * with QEMU's message, where it overlaps one already claimed.
 */
int vhdx_claim_range(BDRVVhdxState *s, uint64_t start, uint64_t length,
                     Error **errp);

/*
 * Whether the log holds entries to replay (vhdx-log.c): 1 if so, 0 if
 * the log is clean or holds no valid entry of the header's log GUID, a
 * negative errno with @errp set when the log's place in the file is
 * wrong.
 */
int vhdx_log_is_dirty(BlockDriverState *bs, BDRVVhdxState *s, Error **errp);

/*
 * Replays the log's active sequence into the file and rewrites both
 * headers without the log GUID (vhdx-log.c): 0 when done or when there
 * was nothing to replay, a negative errno with @errp set when the log is
 * bad (nothing is written then) or a write failed.
 */
int vhdx_log_replay(BlockDriverState *bs, BDRVVhdxState *s, Error **errp);

/* vhdx-write.c */

/* A random (version 4) GUID, in Microsoft's byte order. */
void vhdx_random_guid(uint8_t *guid);

/* What vhdx_update_headers changes besides the sequence and file GUID. */
typedef enum VhdxHeaderUpdate {
    VHDX_HEADER_KEEP        = 0,
    VHDX_HEADER_NEW_DATA    = 1,    /* a new data write GUID per slot */
    VHDX_HEADER_SET_LOG     = 2,    /* the log GUID to @log_guid */
} VhdxHeaderUpdate;

/*
 * QEMU's header update, made twice: the slot not current is rewritten
 * (sequence number one above the current, the session's file write
 * GUID), synced, and becomes current; so both slots end up rewritten.
 * In or out of a coroutine (open's replay calls it).
 */
int vhdx_update_headers(BlockDriverState *bs, BDRVVhdxState *s,
                        VhdxHeaderUpdate what, const uint8_t *log_guid);

/*
 * The first guest-visible change of an open (a write, or open's replay)
 * updates the headers once, with new data write GUIDs.
 */
int vhdx_user_visible_write(BlockDriverState *bs, BDRVVhdxState *s);

int coroutine_fn vhdx_co_pwritev(BlockDriverState *bs, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 BdrvRequestFlags flags);

/*
 * vhdx-log.c: writes BAT entry @index through the log as QEMU does: the
 * data flushed, a new log GUID in the headers, a log entry holding the
 * BAT's 4 KiB sector, flushed, the sector in place, flushed, the log GUID
 * cleared.  A crash at any point leaves an image whose log replays to a
 * consistent BAT.
 */
int coroutine_fn vhdx_log_write_bat(BlockDriverState *bs, BDRVVhdxState *s,
                                    uint64_t index);

/* vhdx-create.c */
int coroutine_fn vhdx_co_create_opts(const BlockDriver *drv,
                                     const char *filename, QemuOpts *opts,
                                     Error **errp);
int coroutine_fn vhdx_co_create_on_node(const BlockDriver *drv,
                                        const BdrvCreateTarget *tgt,
                                        QemuOpts *opts, Error **errp);

#endif
