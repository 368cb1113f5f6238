/*
 * The driver interface and the BlockDriverState graph node.
 *
 * Drivers see only this header.  The generic layer (block/block.c for the
 * graph, block/io.c for requests) guarantees what each callback's comment
 * says; a driver never re-checks those guarantees.
 */
#ifndef QBLOCK_BLOCK_INT_H
#define QBLOCK_BLOCK_INT_H

#include "block/block-common.h"
#include "block/block.h"
#include "block/debug-events.h"
#include "block/snapshot.h"
#include "qblock/block-driver.h"
#include "qblock/block-node.h"

/*
 * Largest alignment a node may ask for.  Lengths and offsets are kept at
 * or below INT64_MAX rounded down to it (BDRV_MAX_LENGTH, as in QEMU), so
 * that rounding one up to a sector or to any alignment never overflows:
 * open refuses a node that is longer, and bdrv_getlength() reports
 * -EFBIG for one that grew past it.
 */
#define BDRV_MAX_ALIGNMENT (1LL << 30)
#define BDRV_MAX_LENGTH (INT64_MAX & ~(BDRV_MAX_ALIGNMENT - 1))

/* Limits a node announces from bdrv_refresh_limits (0 = no limit/default). */
typedef struct BlockLimits {
    /* requests reaching the driver are aligned to this (power of 2, >= 1) */
    uint32_t request_alignment;
    /* largest request the driver accepts in one call; 0 = unlimited */
    uint64_t max_transfer;
    /* preferred discard alignment and maximum */
    uint32_t pdiscard_alignment;
    int64_t max_pdiscard;
    /* preferred write-zeroes alignment and maximum */
    uint32_t pwrite_zeroes_alignment;
    int64_t max_pwrite_zeroes;
    /* preferred transfer size (cluster size for formats) */
    uint32_t opt_transfer;
    /* alignment of buffers in memory for O_DIRECT */
    size_t min_mem_alignment;
    size_t opt_mem_alignment;
    int max_iov;
} BlockLimits;

/* Progress of a long amend: @done of @total units of work. */
typedef void BlockDriverAmendStatusCB(BlockDriverState *bs, int64_t done,
                                      int64_t total, void *opaque);

/*
 * The driver table.  One static const instance per driver at the end of its
 * file, registered with block_init(bdrv_register, &drv) after it.
 *
 * Unless noted, callbacks are optional (NULL: the generic layer emulates
 * the operation or reports -ENOTSUP).  Coroutine callbacks (co_) run in the
 * node's AioContext and may yield.  I/O callbacks never print; they return
 * 0 or -errno.
 */
/*
 * Where a format's creation writes the new image: the file it creates by
 * name (qemu-img create: @filename), or open nodes (blockdev-create:
 * @file, @data_file when the image has an external data file, and
 * @extents, the @n_extents nodes of a VMDK's extent files in order); or,
 * for a protocol whose images are not files (ssh, rbd), @location: the
 * options of a node that would open the image (blockdev-create).
 */
typedef struct BdrvCreateTarget {
    const char *filename;
    QDict *location;
    BlockDriverState *file;
    BlockDriverState *data_file;
    BlockDriverState *const *extents;
    unsigned int n_extents;
} BdrvCreateTarget;

struct BlockDriver {
    /* "qcow2", "raw", "file", "null-co", "blkdebug" */
    const char *format_name;
    /* size of the driver state that bs->opaque points to */
    size_t instance_size;
    /* protocol prefix ("blkdebug" for "blkdebug:conf:image"), or NULL */
    const char *protocol_name;
    /* true for protocol drivers that open a filename (file) */
    bool bdrv_needs_filename;
    /* true for drivers that have a "file" child and an image format */
    bool is_format;
    /* filter: reads and writes pass unchanged to its one child */
    bool is_filter;
    /* true if the driver can store a backing file reference */
    bool supports_backing;

    /* runtime options this driver absorbs (generated from qapi/) */
    const QemuOptsList *runtime_opts;
    /*
     * Options that change what the node shows (raw's offset and size), as
     * opposed to how it works (file's aio, locking): only these go into a
     * json: filename.  NULL-terminated; a name ending in '.' matches every
     * option under it.  NULL: every option of the node counts.
     */
    const char *const *strong_runtime_opts;
    /*
     * Options that blockdev-reopen may leave out to reset them to their
     * default (QEMU's mutable_opts); a name ending in '.' matches every
     * option under it.  NULL-terminated; NULL: none.  An option given at
     * open and left out of a reopen is refused otherwise.
     */
    const char *const *mutable_opts;
    /*
     * Optional: a reopen that keeps the old options (qemu-io's reopen -o,
     * not blockdev-reopen) lays the changes over a copy of them; first
     * the driver drops from @old what @changes replace as a group (qcow2:
     * a new overlap-check template replaces every overlap-check.* flag).
     * NULL: each option given replaces the old one of the same name.
     */
    void (*bdrv_join_options)(QDict *changes, QDict *old);
    /* creation options (qemu-img create -o), or NULL */
    const QemuOptsList *create_opts;

    /*
     * Format probing: returns a score (0 = not this format, 100 = certain)
     * for the first @buf_size bytes of @filename.
     */
    int (*bdrv_probe)(const uint8_t *buf, int buf_size, const char *filename);
    /*
     * Protocol probing by name, before any "proto:" prefix is looked at:
     * a score (0 = not mine, 100 = certain) for @filename, which may
     * name a device (host_device, host_cdrom).  Must not block for long.
     */
    int (*bdrv_probe_device)(const char *filename);
    /*
     * For protocols: turns "prefix:rest" or a plain filename into options
     * in @options (e.g. "filename").
     */
    void (*bdrv_parse_filename)(const char *filename, QDict *options,
                                Error **errp);

    /*
     * Required.  Opens the node.  @options holds this node's options; the
     * driver absorbs the ones it knows (runtime_opts) and opens its
     * children with bdrv_open_child(); keys left over are reported by the
     * generic layer as "Block format 'x' does not support the option 'y'".
     * @flags are the BDRV_O_* flags.
     */
    int (*bdrv_open)(BlockDriverState *bs, QDict *options, int flags,
                     Error **errp);
    /* Called once when the node is freed, after every request drained. */
    void (*bdrv_close)(BlockDriverState *bs);
    /*
     * bdrv_add_child()/bdrv_del_child(): the generic checks are done (the
     * child exists, the node has no parent and makes no cycle); the node
     * is drained around the change.  NULL: not supported.
     */
    void (*bdrv_add_child)(BlockDriverState *parent,
                           BlockDriverState *child_bs, Error **errp);
    void (*bdrv_del_child)(BlockDriverState *parent, BdrvChild *child,
                           Error **errp);
    /*
     * Optional (NULL: nothing of the node is bound to its AioContext).
     * The node moves to @new_ctx (bdrv_try_change_aio_context()): moves
     * what is bound to the old context (timers, AIO rings) there, or
     * leaves everything as it was and fails with @errp set.  Called
     * drained, by the thread that holds both contexts, before
     * bs->aio_context changes.
     */
    int (*bdrv_change_aio_context)(BlockDriverState *bs, AioContext *new_ctx,
                                   Error **errp);
    /*
     * Optional.  A drained section of the node, or of a node below it,
     * begins (or ends): requests of the node that wait for something
     * other than their children (a throttle group's limits) must go on,
     * or the drain would wait for them.  Calls pair up; sections of
     * several nodes below may overlap, so a driver counts them.
     */
    void (*bdrv_drained_begin)(BlockDriverState *bs);
    void (*bdrv_drained_end)(BlockDriverState *bs);

    /* Creates an image; @opts follow create_opts. */
    int coroutine_fn (*bdrv_co_create_opts)(const BlockDriver *drv,
                                            const char *filename,
                                            QemuOpts *opts, Error **errp);
    /*
     * Optional, protocols: removes the file of the open node @bs, which a
     * failed creation made (file: unlink).  NULL: -ENOTSUP.
     */
    int (*bdrv_delete_file)(BlockDriverState *bs, Error **errp);
    /*
     * Optional: creates the image (blockdev-create) on the open nodes of
     * @tgt (formats), or at @tgt->location (ssh, rbd), with the same
     * @opts and checks as bdrv_co_create_opts.  NULL: blockdev-create
     * refuses the driver, but a protocol that creates files by name.
     */
    int coroutine_fn (*bdrv_co_create_on_node)(const BlockDriver *drv,
                                               const BdrvCreateTarget *tgt,
                                               QemuOpts *opts, Error **errp);

    /*
     * Reopen: prepare may fail and must not change the node; commit applies,
     * abort undoes prepare.  @state->flags/options are the new ones.
     */
    int (*bdrv_reopen_prepare)(BDRVReopenState *state, Error **errp);
    void (*bdrv_reopen_commit)(BDRVReopenState *state);
    void (*bdrv_reopen_abort)(BDRVReopenState *state);
    /*
     * Optional: runs once the whole reopen is committed, the node's new
     * permissions taken, so it may write (qcow2 marks its bitmaps in use
     * when the node became writable).  Cannot fail the reopen.
     */
    void (*bdrv_reopen_commit_post)(BlockDriverState *bs);

    /*
     * Data path.  The generic layer guarantees: offset and bytes are
     * multiples of bs->bl.request_alignment (except a tail at end of file
     * for protocols that allow it), bytes <= bl.max_transfer when set, the
     * range lies within the node's length for reads, and the node is
     * writable and not marked corrupt when a write starts.  That test is
     * made once, on entry: a driver that can mark its node corrupt while
     * a request waits (on its lock, on I/O) must refuse the request's
     * writes itself after that point, where no yield separates its test
     * from the write (qcow2: qcow2_pre_write_overlap_check()); it need
     * not test again on entry.  @qiov has exactly @bytes bytes.  The
     * only read flag that reaches co_preadv is BDRV_REQ_PREFETCH, and
     * only where the driver sets it in supported_read_flags: then @qiov
     * is NULL and the data is wanted in the layers below (NBD_CMD_CACHE),
     * not in memory.
     */
    int coroutine_fn (*bdrv_co_preadv)(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags);
    int coroutine_fn (*bdrv_co_pwritev)(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags);
    /* Only BDRV_REQ_MAY_UNMAP, FUA and NO_FALLBACK (as allowed by
     * supported_zero_flags) reach it; -ENOTSUP makes the generic layer
     * write a zeroed buffer instead (unless NO_FALLBACK). */
    int coroutine_fn (*bdrv_co_pwrite_zeroes)(BlockDriverState *bs,
                                              int64_t offset, int64_t bytes,
                                              BdrvRequestFlags flags);
    int coroutine_fn (*bdrv_co_pdiscard)(BlockDriverState *bs,
                                         int64_t offset, int64_t bytes);
    /*
     * Writes compressed clusters (format drivers).  @bytes == 0 at offset 0
     * ends a stream of compressed writes: qcow2 rounds its file up to
     * whole sectors then, as QEMU does.
     */
    int coroutine_fn (*bdrv_co_pwritev_compressed)(BlockDriverState *bs,
                                                   int64_t offset,
                                                   int64_t bytes,
                                                   QEMUIOVector *qiov);
    /*
     * Flushing, in three steps done by bdrv_co_flush() in this order:
     * flush_to_os writes the driver's caches (qcow2 metadata) to the child,
     * then the children are flushed, then flush_to_disk makes this node's
     * own storage durable (fdatasync for file).  A driver that implements
     * bdrv_co_flush does everything itself instead.
     */
    int coroutine_fn (*bdrv_co_flush)(BlockDriverState *bs);
    int coroutine_fn (*bdrv_co_flush_to_os)(BlockDriverState *bs);
    int coroutine_fn (*bdrv_co_flush_to_disk)(BlockDriverState *bs);

    /*
     * Allocation status of [offset, offset + bytes): returns BDRV_BLOCK_*
     * bits for the first *pnum bytes (*pnum > 0 and <= bytes), with *map and
     * *file set when OFFSET_VALID.  @want_zero asks for precise ZERO
     * information even if costly.  NULL: everything is DATA|ALLOCATED (for
     * protocols) or RAW pass-through to bs->file (for filters).
     */
    int coroutine_fn (*bdrv_co_block_status)(BlockDriverState *bs,
                                             bool want_zero, int64_t offset,
                                             int64_t bytes, int64_t *pnum,
                                             int64_t *map,
                                             BlockDriverState **file);
    /*
     * Resizes to @offset bytes.  @exact: the size must be exactly @offset
     * (else growing more is allowed, e.g. for block devices).
     */
    int coroutine_fn (*bdrv_co_truncate)(BlockDriverState *bs, int64_t offset,
                                         bool exact, PreallocMode prealloc,
                                         BdrvRequestFlags flags,
                                         Error **errp);
    /* Required.  Length in bytes, or -errno. */
    int64_t (*bdrv_getlength)(BlockDriverState *bs);
    /* Bytes used on the host ("disk size" in qemu-img info). */
    int64_t (*bdrv_get_allocated_file_size)(BlockDriverState *bs);
    /*
     * 1 if a node just created reads as zeroes where nothing was written,
     * 0 if not (a device keeps its old data).  NULL: a filter asks its
     * file child, any other driver says 1 (formats map what was never
     * written to zeroes themselves; files grow with zeroes).
     */
    int (*bdrv_has_zero_init)(BlockDriverState *bs);

    /*
     * For drivers with a filename syntax of their own that names their
     * children ("blkdebug:CONFIG:IMAGE"): sets bs->exact_filename from the
     * node's options and the children's exact_filename (already
     * refreshed), or leaves it "" when that syntax cannot say everything
     * (a json: filename is then used).  Called by bdrv_refresh_filename()
     * after every open and reopen.
     */
    void (*bdrv_refresh_filename)(BlockDriverState *bs);

    /*
     * The alignment every request to this driver has (a format that
     * reads and writes whole sectors); 0: none of its own.
     * bdrv_refresh_limits() sets bs->bl.request_alignment to it before it
     * calls the callback below, so a driver that needs nothing else has
     * no callback.
     */
    uint32_t request_alignment;
    /* Fills bs->bl; the generic layer has merged the children's first. */
    void (*bdrv_refresh_limits)(BlockDriverState *bs, Error **errp);
    int (*bdrv_get_info)(BlockDriverState *bs, BlockDriverInfo *bdi);
    /*
     * Format-specific information (QEMU's ImageInfoSpecific) for qemu-img
     * info, qemu-io info and the monitor: a new tree {"type": <format>,
     * "data": {...}} whose "data" members come in QEMU's order; the human
     * "Format specific information:" lines are rendered from "data".
     * Optional: NULL (or a NULL result) means the format has none.
     */
    JsonNode *(*bdrv_get_specific_info)(BlockDriverState *bs);
    /*
     * Size of a new image of this format (qemu-img measure) created with
     * @opts (create_opts, "size" set unless @in_bs is given), holding the
     * data of @in_bs (NULL: an empty image).  Fills @info; 0 or -errno
     * with @errp set.
     */
    int (*bdrv_measure)(QemuOpts *opts, BlockDriverState *in_bs,
                        BlockMeasureInfo *info, Error **errp);
    /*
     * Whether the image can store one more persistent dirty bitmap
     * @name of @granularity (the format's limits); false with @errp set.
     * Optional: NULL means the format stores no bitmaps.  The format
     * stores the node's persistent bitmaps when it closes.
     */
    /*
     * Whether this image can keep persistent dirty bitmaps at all (qcow2:
     * version 3).  Optional: NULL means no.
     */
    bool (*bdrv_supports_persistent_dirty_bitmap)(BlockDriverState *bs);
    bool (*bdrv_can_store_new_dirty_bitmap)(BlockDriverState *bs,
                                            const char *name,
                                            uint32_t granularity,
                                            Error **errp);
    /*
     * The node's persistent bitmaps are about to hold what the image's
     * stored copy of them may lack: a write set new bits in one (the
     * request path calls this after marking them, before the driver sees
     * the write: io.c invariant 6), or a user changes one
     * (bdrv_dirty_bitmap_before_change()).  A format that keeps its stored
     * bitmaps consistent between flushes marks them in use on disk,
     * durably, before it returns (qcow2-bitmap.c); an error fails the
     * write or the command.  Coroutine, no lock held.  Optional.
     */
    int coroutine_fn (*bdrv_co_mark_bitmaps_in_use)(BlockDriverState *bs);
    /*
     * Removes the persistent bitmap @name from the image now (it may not
     * be there yet: 0).  Not in a coroutine.  Optional with the above.
     */
    int (*bdrv_remove_persistent_dirty_bitmap)(BlockDriverState *bs,
                                               const char *name,
                                               Error **errp);
    /*
     * Records @backing_file (NULL: none) and @backing_fmt (may be NULL) as
     * the image's backing file, on disk; opens nothing.  -ENOSPC if the
     * header has no room for the name.
     */
    int (*bdrv_change_backing_file)(BlockDriverState *bs,
                                    const char *backing_file,
                                    const char *backing_fmt);
    /*
     * Drops every cluster of the image so that it shows its backing file
     * (qemu-img commit); snapshots keep theirs.  Outside coroutine
     * context.  NULL: -ENOTSUP, which qemu-img commit ignores.
     */
    int (*bdrv_make_empty)(BlockDriverState *bs);
    /* The options qemu-img amend accepts, or NULL. */
    const QemuOptsList *amend_opts;
    /*
     * Changes an open image to the options set in @opts (amend_opts; only
     * those given).  Outside coroutine context, the node writable; may
     * call @status_cb.  @force: qemu-img amend --force.  0 or -errno with
     * @errp set.
     */
    int (*bdrv_amend_options)(BlockDriverState *bs, QemuOpts *opts,
                              BlockDriverAmendStatusCB *status_cb,
                              void *cb_opaque, bool force, Error **errp);
    /* Consistency check and repair (qemu-img check). */
    int coroutine_fn (*bdrv_co_check)(BlockDriverState *bs,
                                      BdrvCheckResult *result,
                                      BdrvCheckMode fix);

    /*
     * Internal snapshots (block/snapshot.c calls them, outside coroutine
     * context, with the node drained; NULL: the format has none).  Each
     * returns 0 or -errno; create, goto and delete leave the image on
     * stable storage when they succeed.  goto looks up @snapshot_id as an
     * ID, then as a name; delete needs whichever of ID and name is given
     * to match; load_tmp only runs on read-only nodes.
     */
    int (*bdrv_snapshot_create)(BlockDriverState *bs,
                                QEMUSnapshotInfo *sn_info);
    int (*bdrv_snapshot_goto)(BlockDriverState *bs, const char *snapshot_id);
    int (*bdrv_snapshot_delete)(BlockDriverState *bs,
                                const char *snapshot_id, const char *name,
                                Error **errp);
    int (*bdrv_snapshot_list)(BlockDriverState *bs,
                              QEMUSnapshotInfo **psn_info);
    int (*bdrv_snapshot_load_tmp)(BlockDriverState *bs,
                                  const char *snapshot_id, const char *name,
                                  Error **errp);
    /* The VM state area (bytes at @pos of it); coroutine context. */
    int coroutine_fn (*bdrv_co_save_vmstate)(BlockDriverState *bs,
                                             QEMUIOVector *qiov,
                                             int64_t pos);
    int coroutine_fn (*bdrv_co_load_vmstate)(BlockDriverState *bs,
                                             QEMUIOVector *qiov,
                                             int64_t pos);

    /*
     * Permissions.  check_perm may fail (e.g. file locking conflict) and
     * must not change anything; set_perm then commits, abort_perm_update
     * rolls back a successful check_perm that was not committed.
     */
    /*
     * What the node asks of its child @c and lets others do with it, given
     * what its own parents ask (@perm) and share (@shared).  NULL: filters
     * pass both through; everything else gets bdrv_default_perms().
     */
    void (*bdrv_child_perm)(BlockDriverState *bs, BdrvChild *c,
                            uint64_t perm, uint64_t shared,
                            uint64_t *nperm, uint64_t *nshared);
    int (*bdrv_check_perm)(BlockDriverState *bs, uint64_t perm,
                           uint64_t shared, Error **errp);
    void (*bdrv_set_perm)(BlockDriverState *bs, uint64_t perm,
                          uint64_t shared);
    void (*bdrv_abort_perm_update)(BlockDriverState *bs);

    /*
     * blkdebug hooks (only blkdebug implements them).  The four
     * breakpoint hooks come together: a driver has all of them or none
     * (block-debug.c finds the node that handles breakpoints once).
     */
    void (*bdrv_debug_event)(BlockDriverState *bs, BlkdebugEvent event);
    int (*bdrv_debug_breakpoint)(BlockDriverState *bs, const char *event,
                                 const char *tag);
    int (*bdrv_debug_remove_breakpoint)(BlockDriverState *bs,
                                        const char *tag);
    int (*bdrv_debug_resume)(BlockDriverState *bs, const char *tag);
    bool (*bdrv_debug_is_suspended)(BlockDriverState *bs, const char *tag);

    /* Which BDRV_REQ_* flags of the read/write/zero paths the driver
     * handles. */
    unsigned supported_read_flags;
    unsigned supported_write_flags;
    unsigned supported_zero_flags;
    unsigned supported_truncate_flags;
};

/*
 * What the graph asks of an edge's parent, whatever the parent is: a node
 * (block.c supplies bdrv_child_of_bds) or a user above the graph
 * (block-backend.c supplies the BlockBackend's class).  The request path
 * and drain reach parents only through these callbacks, so that they never
 * name the layers above them.  Each callback gets the edge; the parent's
 * own state is in c->opaque (for bdrv_child_of_bds, the parent node, also
 * in c->parent).
 */
typedef struct BdrvChildClass {
    /*
     * Required.  True while the parent has requests in flight that may
     * still reach the child (its own, or those of anything above it):
     * drain polls until every parent of a drained node answers false.
     */
    bool (*drained_poll)(BdrvChild *c);
    /*
     * Required.  Who the parent is, for a person reading an error
     * ("node 'fmt0'", "block device 'disk0'"); the caller frees it.
     */
    char *(*get_parent_desc)(BdrvChild *c);
    /*
     * Optional.  A node at or below the child began (ended) a drained
     * section: the first bdrv_drained_begin() and the last
     * bdrv_drained_end() of that node.  Block jobs pause on it; requests
     * already wait at the drain barrier without it.
     */
    void (*drained_begin)(BdrvChild *c);
    void (*drained_end)(BdrvChild *c);
    /*
     * Optional.  The child's length changed: a truncate of it succeeded
     * (block_resize, qemu-img resize).  Called in the coroutine of the
     * truncate, after the new length is in effect; it must not wait.
     */
    void (*resize)(BdrvChild *c);
    /*
     * Optional (NULL: the parent cannot follow, and the node cannot move).
     * For a parent that is no node: whether it can follow the child into
     * AioContext @ctx (bdrv_try_change_aio_context()); sets @errp with the
     * reason if not.
     */
    bool (*can_set_aio_ctx)(BdrvChild *c, AioContext *ctx, Error **errp);
    /* Required with can_set_aio_ctx: the parent follows, drained. */
    void (*set_aio_ctx)(BdrvChild *c, AioContext *ctx);
} BdrvChildClass;

/* The class of edges whose parent is a node (block.c). */
extern const BdrvChildClass bdrv_child_of_bds;

/* A parent's edge to a child node. */
struct BdrvChild {
    BlockDriverState *bs;       /* the child */
    char *name;                 /* "file", "backing", "image", ... */
    const BdrvChildClass *klass;
    void *opaque;               /* the parent's state, for klass */
    BlockDriverState *parent;   /* NULL when the parent is no node */
    /*
     * The BlockBackend whose root edge this is, or NULL; set by
     * block-backend.c for the users that list a node's devices (monitor
     * queries, snapshot names).  The graph and the request path never read
     * it: they go through klass.
     */
    BlockBackend *parent_blk;
    uint64_t perm;              /* what the parent uses */
    uint64_t shared_perm;       /* what the parent lets others use */
    bool is_backing;
};

typedef struct BdrvTrackedRequest BdrvTrackedRequest;

/*
 * Something that must see each write to a node as it happens (a mirror
 * job tracking what changed, or copying guest writes to its target at
 * once).  after_write() runs in the request's coroutine after a write,
 * zero write or discard of [offset, offset + bytes) reached the node's
 * driver, whatever its result (a failed write may have changed the data
 * too), while the request is still tracked; it may do I/O.  @qiov holds
 * the data of a write, NULL for a zero write or a discard; @ret is the
 * driver's result.
 */
typedef struct BdrvWriteHook BdrvWriteHook;
struct BdrvWriteHook {
    void coroutine_fn (*after_write)(BdrvWriteHook *hook, int64_t offset,
                                     int64_t bytes, QEMUIOVector *qiov,
                                     int ret);
};

/*
 * For a node whose requests pass through to bs->file (filters, raw): it
 * takes the write, zero-write and truncate flags its file takes, and
 * WRITE_UNCHANGED, which passing on honours by itself (io.c).  Called at
 * open, once bs->file is attached.
 */
void bdrv_inherit_file_flags(BlockDriverState *bs);

/*
 * Driver callbacks of a node that passes a request on to bs->file
 * unchanged (block/filter-passthrough.c), for filters whose own work is
 * elsewhere: the table names these instead of a wrapper of its own.
 */
int64_t bdrv_filter_getlength(BlockDriverState *bs);
int coroutine_fn bdrv_filter_co_preadv(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags);
int coroutine_fn bdrv_filter_co_pwritev(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags);
int coroutine_fn bdrv_filter_co_pwrite_zeroes(BlockDriverState *bs,
                                              int64_t offset, int64_t bytes,
                                              BdrvRequestFlags flags);
int coroutine_fn bdrv_filter_co_pdiscard(BlockDriverState *bs,
                                         int64_t offset, int64_t bytes);
/* Also passes on the empty write that ends a stream of compressed ones. */
int coroutine_fn bdrv_filter_co_pwritev_compressed(BlockDriverState *bs,
                                                   int64_t offset,
                                                   int64_t bytes,
                                                   QEMUIOVector *qiov);
int coroutine_fn bdrv_filter_co_truncate(BlockDriverState *bs,
                                         int64_t offset, bool exact,
                                         PreallocMode prealloc,
                                         BdrvRequestFlags flags,
                                         Error **errp);

/*
 * Before each write, zero write and discard of [offset, offset + bytes):
 * reports BLOCK_WRITE_THRESHOLD if it ends past @bs's write threshold,
 * and clears the threshold (write-threshold.c).
 */
void bdrv_write_threshold_check_write(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes);

/* Adds (removes) @hook to the writes of @bs (io.c). */
void bdrv_add_write_hook(BlockDriverState *bs, BdrvWriteHook *hook);
void bdrv_remove_write_hook(BlockDriverState *bs, BdrvWriteHook *hook);

struct BlockDriverState {
    /* --- set at open, immutable until close --- */
    const BlockDriver *drv;
    void *opaque;               /* driver state, drv->instance_size bytes */
    AioContext *aio_context;
    char filename[PATH_MAX];    /* what the user named */
    /* a filename that opens this node alone, or "" (json: is then used);
     * block.c sets it for protocols opened from a filename and for formats
     * over them; other drivers may set it in bdrv_open ("null-co://") */
    char exact_filename[PATH_MAX];
    char node_name[32];
    /* the backing file as stored in the image, and its format */
    char backing_file[PATH_MAX];
    char backing_format[16];
    /* backing_file resolved against the image's directory */
    char auto_backing_file[PATH_MAX];
    QDict *options;             /* the options the node was opened with */
    QDict *explicit_options;    /* those the user gave explicitly */
    int open_flags;             /* BDRV_O_* */
    /* the format was probed, not given: raw then guards sector 0 */
    bool probed;
    /* the format encrypts guest data (luks, qcow2 encrypt.format=...) */
    bool encrypted;
    BdrvChild *file;            /* the protocol child of a format, or NULL */
    BdrvChild *backing;
    GList *children;            /* BdrvChild *, every child */
    GList *parents;             /* BdrvChild *, edges pointing at us */
    int refcnt;
    /* force-share=on: the node shares every permission with other users */
    bool force_share;
    /*
     * The parent that opened this node from its own options (not by
     * reference), which blockdev-reopen reopens along with it; NULL for
     * a node added on its own or once that parent let it go.
     */
    BlockDriverState *inherits_from;

    /* --- event-loop thread only --- */
    bool read_only;
    bool sg;
    BlockLimits bl;
    unsigned supported_read_flags;     /* BDRV_REQ_PREFETCH or 0 */
    unsigned supported_write_flags;
    unsigned supported_zero_flags;
    unsigned supported_truncate_flags;
    BlockdevDetectZeroesOptions detect_zeroes;
    uint64_t perm;              /* union of the parents' perms */
    uint64_t shared_perm;       /* intersection of the parents' shared */
    /* in-flight requests (BdrvTrackedRequest), for serialisation & drain */
    GList *tracked_requests;
    /* how many of them are serialising: 0 lets others skip the list */
    unsigned int serialising_in_flight;
    unsigned int in_flight;
    /*
     * Flush bookkeeping (io.c): write_gen counts completed writes,
     * flushed_gen is the write_gen a successful flush covered; one flush
     * at a time (active_flush_req), the others wait in flush_queue.
     */
    uint64_t write_gen;
    uint64_t flushed_gen;
    bool active_flush_req;
    CoQueue flush_queue;
    /* nonzero while requests are drained: new ones wait */
    int quiesce_counter;
    CoQueue drain_queue;
    /* BdrvWriteHook *: who sees every write (io.c invariant 7) */
    GSList *write_hooks;
    /* write-threshold.c: offset past which a write is reported, 0: none */
    uint64_t write_threshold;
    BdrvNodeStats stats;
    /*
     * set by format drivers when they find their metadata inconsistent;
     * io.c refuses writes, zero writes, discards and resizes that start
     * after (bdrv_check_writable); see the data path callbacks' contract
     * for requests already in flight
     */
    bool corrupt;
    /*
     * the node's dirty bitmaps, linked through their own next pointer
     * (block/dirty-bitmap.c); io.c marks them around every write
     */
    struct BdrvDirtyBitmap *dirty_bitmaps;
    /*
     * grows when a bitmap of the node loses bits or starts recording
     * (dirty-bitmap.c invariant 7), for io.c's second marking
     */
    uint64_t dirty_bitmap_gen;
    /* list entry of all_bdrv_states (block.c) */
    GList *all_link;
    /* const char *: why users forbid operations (block-op-blockers.c) */
    GSList *op_blockers;
};

/* State passed to the reopen callbacks. */
struct BDRVReopenState {
    BlockDriverState *bs;
    int flags;
    QDict *options;             /* new options; driver absorbs its own */
    void *opaque;               /* driver's private staging data */
};

/* A request in flight, for serialisation (RMW) and drain. */
struct BdrvTrackedRequest {
    BlockDriverState *bs;
    int64_t offset;
    int64_t bytes;
    bool is_write;
    /* the range rounded out to the alignment it serialises against */
    int64_t overlap_offset;
    int64_t overlap_bytes;
    bool serialising;
    Coroutine *co;
    CoQueue wait_queue;         /* requests waiting for this one */
    BdrvTrackedRequest *waiting_for;
    /* entry of bs->tracked_requests, embedded so tracking never allocates */
    GList link;
};

/* Registry. */
void bdrv_register(const BlockDriver *bdrv);
/* Runs every driver's registration once (called by bdrv_init()). */
#define block_init(fn, arg)                                             \
    static void __attribute__((constructor)) block_init_##fn##_##arg(void) \
    {                                                                   \
        fn(&arg);                                                       \
    }

/*
 * For a format driver: reads @bytes at @offset of @bs's backing file
 * (which it must have) into @qiov at @qiov_offset; what lies past the
 * backing file's end reads as zeroes.
 */
int coroutine_fn bdrv_co_read_backing(BlockDriverState *bs, uint64_t offset,
                                      uint64_t bytes, QEMUIOVector *qiov,
                                      size_t qiov_offset);

/*
 * One piece of a request (bdrv_co_each_piece()): does the first part of
 * the @bytes at @offset, whose data stands at @qiov_offset of @qiov (when
 * the request has a @qiov), as far as the driver can at once.  Returns
 * how many bytes it did, 1 to @bytes, or a negative errno.
 */
typedef int64_t coroutine_fn BdrvPieceFn(BlockDriverState *bs,
                                         int64_t offset, int64_t bytes,
                                         QEMUIOVector *qiov,
                                         size_t qiov_offset, void *opaque);
/*
 * The request loop of a driver that splits a request (a format at its
 * clusters, copy-on-read at what it copies): calls @fn on what is left
 * of the request until it is all done, or returns the first error
 * (block/read-mapped.c).
 */
int coroutine_fn bdrv_co_each_piece(BlockDriverState *bs, int64_t offset,
                                    int64_t bytes, QEMUIOVector *qiov,
                                    BdrvPieceFn *fn, void *opaque);
/*
 * A format driver's map of the disk: how many bytes from @offset (1 to
 * @bytes) lie together, with *@host their offset in bs->file, or -1
 * where the image has no data for them (they read from the backing node
 * when there is one, else as zeroes), or BDRV_PIECE_ZERO where the image
 * says they read as zeroes, backing node or not; or a negative errno.
 */
#define BDRV_PIECE_ZERO (-2)
typedef int64_t coroutine_fn BdrvPieceMap(BlockDriverState *bs,
                                          int64_t offset, int64_t bytes,
                                          int64_t *host);
/*
 * For a format whose disk lies in its file, its backing node or reads as
 * zeroes: reads @bytes at @offset into @qiov, piece by piece as @map
 * gives them (block/read-mapped.c).
 */
int coroutine_fn bdrv_co_preadv_mapped(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvPieceMap *map);
/*
 * For the open of a driver that only reads (vvfat): refuses a read-write
 * open unless auto-read-only lets the node fall back to read-only, as
 * QEMU does ("Image is read-only").
 */
int bdrv_open_read_only(BlockDriverState *bs, int flags, Error **errp);
/*
 * The same for a format driver that only reads (bochs, cloop, dmg), which
 * then opens bs->file.
 */
int bdrv_open_read_only_format(BlockDriverState *bs, QDict *options,
                               int flags, Error **errp);

/* How bdrv_open_child() opens a child. */
typedef enum BdrvChildOpenFlags {
    /* the child is the parent's backing file (inherits flags as one) */
    BDRV_CHILD_OPEN_BACKING = 1 << 0,
    /* no child given in the options: NULL without an error */
    BDRV_CHILD_OPEN_OPTIONAL = 1 << 1,
    /*
     * the parent has force-share=on, which the child inherits unless its
     * options say otherwise (set by the open code from the parent node)
     */
    BDRV_CHILD_OPEN_FORCE_SHARE = 1 << 2,
    /*
     * a data child of a node that is no format (quorum's children,
     * blkverify's test image): its format is probed, as QEMU does, where
     * other children are opened as protocols
     */
    BDRV_CHILD_OPEN_PROBE_FORMAT = 1 << 3,
} BdrvChildOpenFlags;

/* Opens a child of @parent from options "@name.*" in @options (or the
 * reference/filename given), registering it under @name. */
BdrvChild *bdrv_open_child(const char *filename, QDict *options,
                           const char *bdref_key, BlockDriverState *parent,
                           BdrvChildOpenFlags flags, Error **errp);
void bdrv_unref_child(BlockDriverState *parent, BdrvChild *child);
/* Attaches an already open node as a child.  The edge takes over the
 * caller's reference to @child_bs (dropped on failure). */
BdrvChild *bdrv_attach_child(BlockDriverState *parent,
                             BlockDriverState *child_bs, const char *name,
                             bool is_backing, Error **errp);
/*
 * Attaches @child_bs below a parent that is no node (a BlockBackend) as
 * its root edge @name of class @klass (@opaque: the parent's state) with
 * @perm/@shared_perm, checked against the node's other users; on a
 * conflict nothing changes and NULL is returned.  Like bdrv_attach_child,
 * the edge takes over the caller's reference (dropped on failure).
 */
BdrvChild *bdrv_root_attach_child(BlockDriverState *child_bs,
                                  const char *name,
                                  const BdrvChildClass *klass, void *opaque,
                                  uint64_t perm, uint64_t shared_perm,
                                  Error **errp);
/* Detaches a root edge, releases its permissions, drops the reference. */
void bdrv_root_unref_child(BdrvChild *child);
/*
 * Opens a node of @drv, which need not be registered (a block job's own
 * filter, which blockdev-add must not offer), named @node_name (NULL: an
 * automatic "#blockN" name) from @options (consumed): the driver's own
 * options and references to existing nodes as children.  The node is
 * the caller's reference; NULL with @errp set (QEMU's node-name
 * messages) on failure.
 */
BlockDriverState *bdrv_new_open_driver(const BlockDriver *drv,
                                       const char *node_name,
                                       QDict *options, int flags,
                                       Error **errp);
/*
 * bdrv_replace_node() (block.h) moving only the users of @from for which
 * @moves (NULL: every user) returns true: a block job keeps its own edges
 * on @from when it moves the others to its target.
 */
int bdrv_replace_node_moving(BlockDriverState *from, BlockDriverState *to,
                             bool (*moves)(BdrvChild *c), Error **errp);

/*
 * A coroutine function that bdrv_run_co() runs to completion; @bs and
 * @opaque are what bdrv_run_co() was given.  Returns 0 or -errno (or what
 * the caller of bdrv_run_co() expects back).
 */
typedef int coroutine_fn BdrvCoFn(BlockDriverState *bs, void *opaque);

/*
 * Runs @fn(@bs, @opaque) to completion and returns its result: directly
 * when the caller is a coroutine, else in a new coroutine entered at once,
 * polling @bs's AioContext (the main context when @bs is NULL) until it
 * returns.  It adds no in-flight accounting: the request functions @fn
 * calls count themselves (block/io-sync.c).
 */
int bdrv_run_co(BlockDriverState *bs, BdrvCoFn *fn, void *opaque);

/*
 * True while a parent of @bs (through the klass of each edge in
 * bs->parents) has requests in flight: what a parent node's drained_poll
 * asks of the parents above it (block/drain.c).
 */
bool bdrv_parents_drained_poll(BlockDriverState *bs);

/*
 * Users above the graph that bdrv_drain_all() drains before the nodes
 * (block-backend.c registers each BlockBackend, in creation order).  The
 * entry lives in the user's own structure, so registering never allocates.
 */
typedef struct BdrvDrainAllEntry {
    void (*drain)(void *opaque);
    void *opaque;
    GList link;                 /* entry of drain.c's registry */
} BdrvDrainAllEntry;
void bdrv_drain_all_register(BdrvDrainAllEntry *entry);
void bdrv_drain_all_unregister(BdrvDrainAllEntry *entry);

/*
 * Emits a blkdebug event on @bs (only a blkdebug node reacts).  Drivers
 * use BLKDBG_EVENT(bs->file, ...) at their metadata steps, so that a
 * blkdebug node configured as their file sees them; the generic layer
 * emits the request events (pwritev, flush_to_disk...) on each node.
 */
void bdrv_debug_event(BlockDriverState *bs, BlkdebugEvent event);
#define BLKDBG_EVENT(child, evt)                                        \
    do {                                                                \
        if (child) {                                                    \
            bdrv_debug_event((child)->bs, (evt));                       \
        }                                                               \
    } while (0)

/*
 * bdrv_co_create_opts for a protocol that cannot create (block/create-simple.c):
 * opens what is at @filename, makes sure it holds the size in @opts and
 * zeroes its first sector.  Its create_opts need "size" and may have
 * "preallocation" (only off is accepted).
 */
int coroutine_fn bdrv_co_create_opts_simple(const BlockDriver *drv,
                                            const char *filename,
                                            QemuOpts *opts, Error **errp);

/*
 * The callbacks of a stub driver that stands for one whose library was
 * not found at configure time (block/driver-missing.c): each fails with
 * a message naming the driver (its format_name) and what to install.
 */
void bdrv_missing_parse_filename(const char *filename, QDict *options,
                                 Error **errp);
int bdrv_missing_open(BlockDriverState *bs, QDict *options, int flags,
                      Error **errp);
int coroutine_fn bdrv_missing_co_create_opts(const BlockDriver *drv,
                                             const char *filename,
                                             QemuOpts *opts, Error **errp);
int64_t bdrv_missing_getlength(BlockDriverState *bs);

/*
 * For a format's bdrv_measure: the virtual size of the image measured,
 * which is @in_bs's length when there is one, else the "size" of @opts.
 * Returns it, or -errno with @errp set.
 */
int64_t bdrv_measure_virtual_size(QemuOpts *opts, BlockDriverState *in_bs,
                                  Error **errp);

/*
 * For a format's bdrv_co_create_opts (block/create-format.c): creates the
 * protocol-level file @filename that will hold an image of format @fmt,
 * passing on the options of @opts that are the protocol's and not the
 * format's (nocow, extent_size_hint), and opens it for writing, past its
 * end too.  Returns the file's BlockBackend, or NULL with @errp set.
 */
BlockBackend *bdrv_create_format_file(const BlockDriver *fmt,
                                      const char *filename, QemuOpts *opts,
                                      Error **errp);
/*
 * For a format's bdrv_co_create_on_node: a user of the open node @bs that
 * the image is written on, as if bdrv_create_format_file() had just made
 * it (writing, resizing, past its end too).  Returns it, or NULL with
 * @errp set (another user forbids writing).
 */
BlockBackend *bdrv_create_format_on_node(BlockDriverState *bs, Error **errp);
/*
 * The "subformat" creation option of vpc and vhdx: 1 for fixed, 0 for
 * dynamic or none given, -EINVAL with QEMU's message for another.
 */
int bdrv_create_opt_fixed(QemuOpts *opts, Error **errp);
/*
 * Where a format's creation fails after bdrv_create_format_file(): removes
 * the file again (QEMU's luks does: no half-made image is left behind, nor
 * the file that was there before, which creation emptied).  A protocol
 * that cannot delete is left alone; another failure is reported.
 */
void bdrv_delete_format_file(BlockBackend *blk);

/*
 * bdrv_parse_filename for protocols that open a path: puts @filename
 * without its @prefix ("file:") into options' "filename".  A name left
 * with a colon before its first slash ("file:image:top") would read as
 * another protocol's when it is opened again (a backing file name, a
 * json: name), so it becomes "./image:top", as in QEMU.
 */
void bdrv_parse_filename_strip_prefix(const char *filename,
                                      const char *prefix, QDict *options);

/* Helpers for drivers whose getlength depends on a child. */
int bdrv_refresh_total_sectors(BlockDriverState *bs, int64_t hint);

/*
 * The permissions a format with metadata asks of its file child: it reads
 * metadata always and writes/resizes it whenever it is writable, and lets
 * nobody else write or resize the file under its metadata.
 */
void bdrv_default_perms(BlockDriverState *bs, BdrvChild *child,
                        uint64_t parent_perm, uint64_t parent_shared,
                        uint64_t *nperm, uint64_t *nshared);

/*
 * io.c's invariant 1: a request is counted in flight from its entry to its
 * completion, and so is a driver's own background work on the node (a
 * timer's coroutine that writes metadata), so that a drain waits for it.
 */
static inline void bdrv_inc_in_flight(BlockDriverState *bs)
{
    bs->in_flight++;
}

static inline void bdrv_dec_in_flight(BlockDriverState *bs)
{
    assert(bs->in_flight > 0);
    bs->in_flight--;
}

#endif
