/*
 * Dirty bitmaps: which parts of a node were written since a point in time.
 *
 * A BdrvDirtyBitmap belongs to one node and covers its whole length, one
 * bit per @granularity bytes (a power of two, at least 512).  While it is
 * enabled, every write, zero write, discard and copy-on-read write that
 * reaches the node through the request path (block/io.c) sets the bits of
 * the range it touched, whether or not it succeeded.  A disabled bitmap
 * keeps what it has.  Named bitmaps are what users see (QMP, qemu-img
 * bitmap, qcow2's persistent bitmaps, NBD's qemu:dirty-bitmap:NAME);
 * anonymous ones (name NULL) serve jobs such as mirror.
 *
 * Jobs use successors as QEMU's backup does: create_successor() freezes
 * the bitmap (disabled and busy) and lets an anonymous successor record
 * new writes; on success abdicate() gives the name to the successor and
 * drops the frozen one, on failure reclaim() merges the successor back.
 *
 * Offsets and lengths are in bytes.  Everything runs in the node's
 * AioContext thread; nothing here yields.
 */
#ifndef QBLOCK_DIRTY_BITMAP_H
#define QBLOCK_DIRTY_BITMAP_H

#include <json-glib/json-glib.h>

#include "block/block-common.h"
#include "util/hbitmap.h"

typedef struct BdrvDirtyBitmap BdrvDirtyBitmap;

/* Longest name a bitmap may have, as QEMU (and qcow2's directory) allow. */
#define BDRV_BITMAP_MAX_NAME_SIZE 1023
/* Granularity limits: a sector, and 2 GiB as qcow2's directory allows. */
#define BDRV_BITMAP_MIN_GRANULARITY 512
#define BDRV_BITMAP_MAX_GRANULARITY (1ULL << 31)

/* What bdrv_dirty_bitmap_check() refuses; each flag names one state. */
typedef enum BdrvDirtyBitmapFlags {
    BDRV_BITMAP_BUSY = 1 << 0,          /* in use by a job or an export */
    BDRV_BITMAP_RO = 1 << 1,            /* stored read-only in its image */
    BDRV_BITMAP_INCONSISTENT = 1 << 2,  /* its image was not closed cleanly */
    BDRV_BITMAP_DEFAULT = BDRV_BITMAP_BUSY | BDRV_BITMAP_RO |
                          BDRV_BITMAP_INCONSISTENT,
    BDRV_BITMAP_ALLOW_RO = BDRV_BITMAP_BUSY | BDRV_BITMAP_INCONSISTENT,
} BdrvDirtyBitmapFlags;

/* How bdrv_dirty_bitmap_add() creates a bitmap; 0 is transient and enabled. */
typedef enum BdrvDirtyBitmapAddFlags {
    BDRV_BITMAP_ADD_PERSISTENT = 1 << 0, /* stored in its image on close */
    BDRV_BITMAP_ADD_DISABLED = 1 << 1,   /* records no writes until enabled */
} BdrvDirtyBitmapAddFlags;

/*
 * A new enabled bitmap, all clear, on @bs.  @name may be NULL (anonymous);
 * a named one must be unique on the node.  Errors name the node, the
 * bitmap and the value refused.
 */
BdrvDirtyBitmap *bdrv_create_dirty_bitmap(BlockDriverState *bs,
                                          uint32_t granularity,
                                          const char *name, Error **errp);
/* Frees @bitmap; it must not be busy nor have a successor. */
void bdrv_release_dirty_bitmap(BdrvDirtyBitmap *bitmap);
/* Frees every bitmap of @bs (the node is closing). */
void bdrv_release_all_dirty_bitmaps(BlockDriverState *bs);

BdrvDirtyBitmap *bdrv_find_dirty_bitmap(BlockDriverState *bs,
                                        const char *name);
/* The bitmaps of @bs, newest first (as QEMU): first, then next to NULL. */
BdrvDirtyBitmap *bdrv_dirty_bitmap_first(BlockDriverState *bs);
BdrvDirtyBitmap *bdrv_dirty_bitmap_next(BdrvDirtyBitmap *bitmap);
bool bdrv_has_named_bitmaps(BlockDriverState *bs);

/*
 * 0 if @bitmap may be used in the way @flags describes, else -1 with an
 * error that names it ("Bitmap 'b0' is currently in use by another
 * operation and cannot be used", as QEMU words them).
 */
int bdrv_dirty_bitmap_check(const BdrvDirtyBitmap *bitmap,
                            BdrvDirtyBitmapFlags flags, Error **errp);

/* ---- properties ---- */
BlockDriverState *bdrv_dirty_bitmap_bs(const BdrvDirtyBitmap *bitmap);
const char *bdrv_dirty_bitmap_name(const BdrvDirtyBitmap *bitmap);
uint32_t bdrv_dirty_bitmap_granularity(const BdrvDirtyBitmap *bitmap);
/* the length of the node it covers, in bytes */
int64_t bdrv_dirty_bitmap_size(const BdrvDirtyBitmap *bitmap);
/* bytes marked dirty: dirty bits times the granularity */
int64_t bdrv_get_dirty_count(const BdrvDirtyBitmap *bitmap);
bool bdrv_dirty_bitmap_enabled(const BdrvDirtyBitmap *bitmap);
bool bdrv_dirty_bitmap_busy(const BdrvDirtyBitmap *bitmap);
bool bdrv_dirty_bitmap_readonly(const BdrvDirtyBitmap *bitmap);
bool bdrv_dirty_bitmap_inconsistent(const BdrvDirtyBitmap *bitmap);
bool bdrv_dirty_bitmap_get_persistence(const BdrvDirtyBitmap *bitmap);
bool bdrv_dirty_bitmap_has_successor(const BdrvDirtyBitmap *bitmap);

void bdrv_enable_dirty_bitmap(BdrvDirtyBitmap *bitmap);
void bdrv_disable_dirty_bitmap(BdrvDirtyBitmap *bitmap);
/* Enables (@enable) or disables @bitmap: one of the two above. */
void bdrv_dirty_bitmap_switch(BdrvDirtyBitmap *bitmap, bool enable);
void bdrv_dirty_bitmap_set_busy(BdrvDirtyBitmap *bitmap, bool busy);
void bdrv_dirty_bitmap_set_readonly(BdrvDirtyBitmap *bitmap, bool value);
/* inconsistent also disables it: it can only be removed */
void bdrv_dirty_bitmap_set_inconsistent(BdrvDirtyBitmap *bitmap);
/* persistent: the format stores it in the image on flush and close */
void bdrv_dirty_bitmap_set_persistence(BdrvDirtyBitmap *bitmap,
                                       bool persistent);

/* ---- contents ---- */
bool bdrv_dirty_bitmap_get(const BdrvDirtyBitmap *bitmap, int64_t offset);
/* Marks [offset, offset + bytes), widened to the granularity. */
void bdrv_set_dirty_bitmap(BdrvDirtyBitmap *bitmap, int64_t offset,
                           int64_t bytes);
/*
 * Clears the granules that [offset, offset + bytes) covers entirely (and
 * the last, partial granule when the range reaches the node's end): a
 * granule only partly copied stays dirty.
 */
void bdrv_reset_dirty_bitmap(BdrvDirtyBitmap *bitmap, int64_t offset,
                             int64_t bytes);
/*
 * Clears all of @bitmap.  With @backup, the old contents go there so that
 * bdrv_restore_dirty_bitmap() can undo it (a transaction's abort).
 */
void bdrv_clear_dirty_bitmap(BdrvDirtyBitmap *bitmap, HBitmap **backup);
/* Puts back @backup (taken by clear or merge) and frees it. */
void bdrv_restore_dirty_bitmap(BdrvDirtyBitmap *bitmap, HBitmap *backup);
/*
 * @dest |= @src, for bitmaps of nodes of the same length (granularities
 * may differ: a source granule sets every destination granule it
 * touches).  @dest must pass the DEFAULT check, @src ALLOW_RO.  With
 * @backup, @dest's old contents go there.
 */
bool bdrv_merge_dirty_bitmap(BdrvDirtyBitmap *dest,
                             const BdrvDirtyBitmap *src, HBitmap **backup,
                             Error **errp);

/*
 * The first dirty byte offset in [offset, offset + bytes), or -1.  The
 * result is @offset or a granule boundary after it.  @bytes -1: to the end.
 */
int64_t bdrv_dirty_bitmap_next_dirty(const BdrvDirtyBitmap *bitmap,
                                     int64_t offset, int64_t bytes);
/* The same for a clean byte. */
int64_t bdrv_dirty_bitmap_next_zero(const BdrvDirtyBitmap *bitmap,
                                    int64_t offset, int64_t bytes);
/*
 * The first dirty area that starts in [start, end): true with
 * *dirty_start and *dirty_count (at most @max_dirty_count bytes, clipped
 * to @end), false if [start, end) is clean.
 */
bool bdrv_dirty_bitmap_next_dirty_area(const BdrvDirtyBitmap *bitmap,
                                       int64_t start, int64_t end,
                                       int64_t max_dirty_count,
                                       int64_t *dirty_start,
                                       int64_t *dirty_count);

/* ---- successors (backup) ---- */
int bdrv_dirty_bitmap_create_successor(BdrvDirtyBitmap *bitmap,
                                       Error **errp);
/* Success: the successor takes the name and properties; @bitmap is freed. */
BdrvDirtyBitmap *bdrv_dirty_bitmap_abdicate(BdrvDirtyBitmap *bitmap,
                                            Error **errp);
/* Failure: the successor's bits go back into @bitmap, which is unfrozen. */
BdrvDirtyBitmap *bdrv_reclaim_dirty_bitmap(BdrvDirtyBitmap *bitmap,
                                           Error **errp);
/* The frozen bitmap's successor starts recording (bitmap-mode=...). */
void bdrv_dirty_bitmap_enable_successor(BdrvDirtyBitmap *bitmap);

/* ---- serialisation (qcow2 bitmap tables) ---- */
/* Bytes a serialised range of the bitmap takes. */
uint64_t bdrv_dirty_bitmap_serialization_size(const BdrvDirtyBitmap *bitmap,
                                              int64_t offset, int64_t bytes);
/*
 * The byte range a serialised chunk must start on: 64 granules (whole
 * words).  A qcow2 bitmap cluster covers cluster_size * 8 granules.
 */
int64_t bdrv_dirty_bitmap_serialization_align(const BdrvDirtyBitmap *bitmap);
void bdrv_dirty_bitmap_serialize_part(const BdrvDirtyBitmap *bitmap,
                                      uint8_t *buf, int64_t offset,
                                      int64_t bytes);
/* ORs the bits of @buf in; @buf NULL sets the whole range. */
void bdrv_dirty_bitmap_deserialize_part(BdrvDirtyBitmap *bitmap,
                                        const uint8_t *buf, int64_t offset,
                                        int64_t bytes);

/* QEMU's x-debug-block-dirty-bitmap-sha256: of the bits as LE words. */
char *bdrv_dirty_bitmap_sha256(const BdrvDirtyBitmap *bitmap);

/*
 * ---- what users ask for (block/dirty-bitmap-cmds.c) ----
 * The checks and messages of QEMU's block-dirty-bitmap-* commands, shared
 * by the monitor and qblock-img bitmap.  A persistent bitmap is stored in
 * its image by the format at a flush and when the image is closed (or
 * inactivated); a removed one leaves the image at once.
 */
/*
 * Before a user changes a bitmap of @bs other than by writing (add, clear,
 * merge, enable, disable, a transaction's undo): if it is @persistent,
 * the format marks the stored copy in use (the BlockDriver's
 * bdrv_co_mark_bitmaps_in_use).  Not in a coroutine.  0, or -1 with @errp.
 */
int bdrv_dirty_bitmap_before_change(BlockDriverState *bs, bool persistent,
                                    Error **errp);
/* The bitmap @name of @bs, or NULL with "Dirty bitmap 'x' not found". */
BdrvDirtyBitmap *bdrv_dirty_bitmap_lookup(BlockDriverState *bs,
                                          const char *name, Error **errp);
/*
 * The bitmap @name of @bs if it is in none of the states @flags refuse
 * (bdrv_dirty_bitmap_check()); else NULL with the message of either.
 */
BdrvDirtyBitmap *bdrv_dirty_bitmap_lookup_checked(BlockDriverState *bs,
                                                  const char *name,
                                                  BdrvDirtyBitmapFlags flags,
                                                  Error **errp);
/*
 * block-dirty-bitmap-add: @granularity 0 takes the node's default (its
 * cluster size, at least 4 KiB, else 64 KiB).
 */
BdrvDirtyBitmap *bdrv_dirty_bitmap_add(BlockDriverState *bs,
                                       const char *name,
                                       uint32_t granularity,
                                       BdrvDirtyBitmapAddFlags flags,
                                       Error **errp);
int bdrv_dirty_bitmap_remove(BlockDriverState *bs, const char *name,
                             Error **errp);
/*
 * Takes @bitmap out of its image if it is persistent (the one in memory
 * stays): block-dirty-bitmap-remove's first step.  0, or -1 with @errp.
 */
int bdrv_dirty_bitmap_remove_persistent(BdrvDirtyBitmap *bitmap,
                                        Error **errp);
int bdrv_dirty_bitmap_clear_cmd(BlockDriverState *bs, const char *name,
                                Error **errp);
/* block-dirty-bitmap-enable (@enable) and -disable. */
int bdrv_dirty_bitmap_switch_cmd(BlockDriverState *bs, const char *name,
                                 bool enable, Error **errp);
/*
 * Merges @nsrc bitmaps into @target of @bs, all or nothing.  With
 * @backup, @target's old contents go there (a transaction's abort).
 */
int bdrv_dirty_bitmap_merge_cmd(BlockDriverState *bs, const char *target,
                                BdrvDirtyBitmap *const *srcs, int nsrc,
                                HBitmap **backup, Error **errp);
/* The BlockDirtyInfo list of query-named-block-nodes, newest first. */
JsonNode *bdrv_query_dirty_bitmaps(BlockDriverState *bs);
/* Whether @bs keeps persistent bitmaps at all (qcow2 v3 does). */
bool bdrv_supports_persistent_dirty_bitmap(BlockDriverState *bs);
/* Whether @bs can store a new persistent bitmap (the format decides). */
bool bdrv_can_store_new_dirty_bitmap(BlockDriverState *bs, const char *name,
                                     uint32_t granularity, Error **errp);

/* ---- hooks of the request path (block/io.c) ---- */
/*
 * Marks [offset, offset + bytes) in every enabled bitmap of @bs.  Returns
 * whether it set a bit that was clear in a persistent bitmap or in the
 * successor of one (what a stored copy of the bitmaps may lack).
 */
bool bdrv_set_dirty(BlockDriverState *bs, int64_t offset, int64_t bytes);
/* The node's length became @bytes: every bitmap follows. */
void bdrv_dirty_bitmap_truncate(BlockDriverState *bs, int64_t bytes);

#endif
