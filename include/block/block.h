/*
 * The block layer's API for its users inside qblock: opening nodes,
 * issuing requests on them, and querying them.  Tools and devices normally
 * go through a BlockBackend (block-backend.h) instead.
 */
#ifndef QBLOCK_BLOCK_H
#define QBLOCK_BLOCK_H

#include "block/block-common.h"

/* Registers the built-in drivers; idempotent. */
void bdrv_init(void);

const BlockDriver *bdrv_find_format(const char *format_name);
/*
 * The protocol driver for @filename: the one whose protocol_name prefixes
 * it ("blkdebug:..."), else file.  Errors: "Unknown protocol 'x'".
 */
const BlockDriver *bdrv_find_protocol(const char *filename,
                                bool allow_protocol_prefix, Error **errp);
/* Calls @fn for every registered format name, sorted (qemu-img --help). */
void bdrv_iterate_format(void (*fn)(void *opaque, const char *name),
                         void *opaque);

/*
 * Opens a node graph.  @filename may be a plain file name, "proto:..." or
 * "json:{...}"; @options (consumed: one reference is taken over) may add
 * or replace options ("driver", "file.filename", "cache.direct", ...).
 * Without "driver", the format is probed from the content; when raw is
 * probed the caller is warned as QEMU warns.  Errors name the file:
 * "Could not open 'x': No such file or directory".
 */
BlockDriverState *bdrv_open(const char *filename, const char *reference,
                            QDict *options, int flags, Error **errp);
void bdrv_ref(BlockDriverState *bs);
void bdrv_unref(BlockDriverState *bs);

/* Creates an image of format @drv (qemu-img create). */
int bdrv_create(const BlockDriver *drv, const char *filename, QemuOpts *opts,
                Error **errp);
/* Creates the protocol-level file for @filename (e.g. an empty file). */
int bdrv_create_file(const char *filename, QemuOpts *opts, Error **errp);

/*
 * Changes options of an open node (qemu-io reopen): read-only, cache
 * options, driver options.  Either every change applies or none.
 * @flags are the new BDRV_O_* flags; @opts (may be NULL) override them
 * and are consumed, as in bdrv_open().
 */
int bdrv_reopen(BlockDriverState *bs, QDict *opts, int flags, Error **errp);
int bdrv_reopen_set_read_only(BlockDriverState *bs, bool read_only,
                              Error **errp);
/*
 * blockdev-reopen: reopens @nodes[0..@n) in one transaction, each with
 * exactly the flat options @options[i] (consumed; "driver" and
 * "node-name" included): what they leave out goes back to its default,
 * the implicit children given as options are reopened with them, and
 * "file" or "backing" may name another existing node ("backing" also
 * null), as in QEMU 7.2.  Either every node changes or none; errors are
 * QEMU's.
 */
int bdrv_reopen_many(BlockDriverState **nodes, QDict **options, size_t n,
                     Error **errp);

/* Requests on a child edge (what drivers use for their children). */
int coroutine_fn bdrv_co_preadv(BdrvChild *child, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags);
int coroutine_fn bdrv_co_pwritev(BdrvChild *child, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 BdrvRequestFlags flags);
/*
 * The same on the @bytes of @qiov from byte @qiov_offset on: for a driver
 * that splits a request into pieces of its file.
 */
int coroutine_fn bdrv_co_preadv_part(BdrvChild *child, int64_t offset,
                                     int64_t bytes, QEMUIOVector *qiov,
                                     size_t qiov_offset,
                                     BdrvRequestFlags flags);
int coroutine_fn bdrv_co_pwritev_part(BdrvChild *child, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      size_t qiov_offset,
                                      BdrvRequestFlags flags);
int coroutine_fn bdrv_co_pwrite_zeroes(BdrvChild *child, int64_t offset,
                                       int64_t bytes, BdrvRequestFlags flags);
int coroutine_fn bdrv_co_pdiscard(BdrvChild *child, int64_t offset,
                                  int64_t bytes);
int coroutine_fn bdrv_co_flush(BlockDriverState *bs);
int coroutine_fn bdrv_co_truncate(BdrvChild *child, int64_t offset,
                                  bool exact, PreallocMode prealloc,
                                  BdrvRequestFlags flags, Error **errp);
int coroutine_fn bdrv_co_block_status(BlockDriverState *bs, bool want_zero,
                                      int64_t offset, int64_t bytes,
                                      int64_t *pnum, int64_t *map,
                                      BlockDriverState **file);
/*
 * Status through the backing chain from @bs down to (excluding) @base:
 * ALLOCATED if some layer above @base has the data, with the depth of the
 * layer that does in *depth (1 = @bs) when non-NULL.
 */
int coroutine_fn bdrv_co_block_status_above(BlockDriverState *bs,
                                            BlockDriverState *base,
                                            bool want_zero, int64_t offset,
                                            int64_t bytes, int64_t *pnum,
                                            int64_t *map,
                                            BlockDriverState **file,
                                            int *depth);
int coroutine_fn bdrv_co_is_allocated(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, int64_t *pnum);
/*
 * True if block status says that [offset, offset + bytes) of @bs reads as
 * zeroes through its whole chain (past a layer's end counts as zeroes).
 * Cheap and conservative: false on any error or where a layer does not
 * know (data that happens to be zero is not read).
 */
bool coroutine_fn bdrv_co_is_zero_fast(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes);

/* Synchronous wrappers: usable in and out of coroutine context (outside,
 * they run a coroutine and poll the node's context until it is done). */
int bdrv_pread(BdrvChild *child, int64_t offset, int64_t bytes, void *buf,
               BdrvRequestFlags flags);
int bdrv_pwrite(BdrvChild *child, int64_t offset, int64_t bytes,
                const void *buf, BdrvRequestFlags flags);
int bdrv_pwrite_sync(BdrvChild *child, int64_t offset, int64_t bytes,
                     const void *buf, BdrvRequestFlags flags);
int bdrv_pwrite_zeroes(BdrvChild *child, int64_t offset, int64_t bytes,
                       BdrvRequestFlags flags);
int bdrv_flush(BlockDriverState *bs);
int bdrv_truncate(BdrvChild *child, int64_t offset, bool exact,
                  PreallocMode prealloc, BdrvRequestFlags flags,
                  Error **errp);
int bdrv_block_status(BlockDriverState *bs, int64_t offset, int64_t bytes,
                      int64_t *pnum, int64_t *map, BlockDriverState **file);
int bdrv_block_status_above(BlockDriverState *bs, BlockDriverState *base,
                            int64_t offset, int64_t bytes, int64_t *pnum,
                            int64_t *map, BlockDriverState **file,
                            int *depth);
int bdrv_is_allocated(BlockDriverState *bs, int64_t offset, int64_t bytes,
                      int64_t *pnum);
int bdrv_check(BlockDriverState *bs, BdrvCheckResult *res, BdrvCheckMode fix);
/*
 * Changes the backing file that the image of @bs names (qemu-img rebase):
 * NULL removes it.  With @require, a backing file needs a format
 * (-EINVAL otherwise, as QEMU); a format without a file is -EINVAL too.
 * The open graph is not changed.
 */
int bdrv_change_backing_file(BlockDriverState *bs, const char *backing_file,
                             const char *backing_fmt, bool require);
/* Empties the image of @bs (bdrv_make_empty callback); -ENOTSUP if the
 * format cannot. */
int bdrv_make_empty(BlockDriverState *bs, Error **errp);
/*
 * The image in the backing chain of @bs that @filename names, or NULL:
 * the backing file name an image records, or a name taken relative to
 * the directory of the image that records it (never to the current
 * directory), as QEMU looks it up for commit -b.
 */
BlockDriverState *bdrv_find_backing_image(BlockDriverState *bs,
                                          const char *filename);

/*
 * The VM state area: a byte space beside the guest disk where a
 * hypervisor saves device and RAM state before it creates an internal
 * snapshot (qcow2 keeps it after the end of the virtual disk, in guest
 * offset space, so that the snapshot's L1 table captures it).  @size
 * bytes at @pos of it; 0 or -errno, -ENOTSUP if the format has none.
 * Saving does not flush (a VM saves its state in many pieces):
 * bdrv_snapshot_create() makes it durable before a snapshot refers to
 * it, and blk_save_vmstate() flushes after each piece in writethrough
 * mode.
 */
int coroutine_fn bdrv_co_writev_vmstate(BlockDriverState *bs,
                                        QEMUIOVector *qiov, int64_t pos);
int coroutine_fn bdrv_co_readv_vmstate(BlockDriverState *bs,
                                       QEMUIOVector *qiov, int64_t pos);
int bdrv_save_vmstate(BlockDriverState *bs, const uint8_t *buf, int64_t pos,
                      int64_t size);
int bdrv_load_vmstate(BlockDriverState *bs, uint8_t *buf, int64_t pos,
                      int64_t size);

/*
 * Live graph changes (block/block-graph.c).  The caller drains the nodes
 * concerned first.
 *
 * bdrv_replace_node: every user of @from (parent nodes, BlockBackends:
 * exports) becomes a user of @to instead, except @to itself; refused,
 * with @errp naming the conflict, if the permissions do not allow it,
 * and then nothing changed.
 *
 * bdrv_set_backing_hd: @backing_hd (NULL: none) becomes the backing node
 * of @bs, replacing the one it had; the image's header is not changed.
 *
 * bdrv_append: @bs_new goes on top of @bs_top (QEMU's bdrv_append, an
 * external snapshot): @bs_top becomes its backing node and its users
 * move to @bs_new.  All or nothing.
 */
int bdrv_replace_node(BlockDriverState *from, BlockDriverState *to,
                      Error **errp);
int bdrv_set_backing_hd(BlockDriverState *bs, BlockDriverState *backing_hd,
                        Error **errp);
int bdrv_append(BlockDriverState *bs_new, BlockDriverState *bs_top,
                Error **errp);
/*
 * Opens the backing file the image of @bs names, as an open without
 * BDRV_O_NO_BACKING would have (drive-mirror's target of mode existing,
 * at the pivot); nothing if @bs has a backing node or its image names
 * none.  0 or -errno with QEMU's "Could not open backing file: ...".
 */
int bdrv_open_backing_file(BlockDriverState *bs, Error **errp);
/*
 * x-blockdev-change: @child_bs, a node no one uses, becomes a new child
 * of @parent, which names it; the child of @parent named @child_name is
 * removed.  Only drivers whose children are a list (quorum) allow it;
 * refused with QEMU's message, nothing changed, otherwise.
 */
void bdrv_add_child(BlockDriverState *parent, BlockDriverState *child_bs,
                    Error **errp);
void bdrv_del_child(BlockDriverState *parent, const char *child_name,
                    Error **errp);
/* What the driver of @bs is: a format with backing files, a filter. */
bool bdrv_supports_backing(BlockDriverState *bs);
bool bdrv_is_filter(BlockDriverState *bs);
/*
 * True if only BlockBackends (or nothing) use @bs: no node, no block job
 * (QEMU's bdrv_is_root_node()).
 */
bool bdrv_is_root_node(BlockDriverState *bs);
/* True if a user that is no node uses @bs: a BlockBackend, a job. */
bool bdrv_has_root_parents(BlockDriverState *bs);
/* The union of the permissions its users hold (BLK_PERM_*). */
uint64_t bdrv_get_cumulative_perm(BlockDriverState *bs);
/*
 * True, with QEMU's "Node 'x' is busy: node is used as backing hd of
 * 'y'" in @errp, if @bs is the backing node of another node: QEMU blocks
 * snapshots and most other operations on such a node.
 */
bool bdrv_backing_busy(BlockDriverState *bs, Error **errp);

/*
 * The monitor's operations that a node's users may forbid (QEMU's
 * BlockOpType; block/block-op-blockers.c): each command asks for the
 * operation it is about to do on a node, in QEMU's order.
 */
typedef enum BlockOpType {
    BLOCK_OP_TYPE_BACKUP_SOURCE,
    BLOCK_OP_TYPE_BACKUP_TARGET,
    BLOCK_OP_TYPE_CHANGE,
    BLOCK_OP_TYPE_COMMIT_SOURCE,
    BLOCK_OP_TYPE_COMMIT_TARGET,
    BLOCK_OP_TYPE_DRIVE_DEL,
    BLOCK_OP_TYPE_EXTERNAL_SNAPSHOT,
    BLOCK_OP_TYPE_INTERNAL_SNAPSHOT,
    BLOCK_OP_TYPE_INTERNAL_SNAPSHOT_DELETE,
    BLOCK_OP_TYPE_MIRROR_SOURCE,
    BLOCK_OP_TYPE_MIRROR_TARGET,
    BLOCK_OP_TYPE_RESIZE,
    BLOCK_OP_TYPE_STREAM,
    BLOCK_OP_TYPE__MAX,
} BlockOpType;

/*
 * A user of @bs (a block job) forbids every operation on it, for
 * @reason ("block device is in use by block job: stream"), which stays
 * the caller's and must live until bdrv_op_unblock_all() with the same
 * pointer.  The caller holds a reference to @bs meanwhile.
 */
void bdrv_op_block_all(BlockDriverState *bs, const char *reason);
void bdrv_op_unblock_all(BlockDriverState *bs, const char *reason);
/* True if no user forbids anything on @bs by bdrv_op_block_all(). */
bool bdrv_op_blockers_empty(BlockDriverState *bs);
/*
 * True, with QEMU's "Node 'x' is busy: REASON" in @errp, if a user of
 * @bs forbids @op: a job on it (the newest one's reason), or the node it
 * backs (bdrv_backing_busy(); a backing node allows stream, commit into
 * it and backup).
 */
bool bdrv_op_is_blocked(BlockDriverState *bs, BlockOpType op, Error **errp);

/* Waits until no request is in flight on @bs and its children. */
void bdrv_drain(BlockDriverState *bs);
void bdrv_drain_all(void);
/*
 * Moves @bs, with every node connected to it through children and node
 * parents, into @ctx (QEMU's bdrv_try_change_aio_context()).  Every
 * parent that is no node must follow (@ignore, the caller's own edge,
 * excepted), or the move is refused with the parent's reason.  The
 * caller holds the old and the new context (aio_context_acquire()).
 * Returns 0 or -errno with @errp set; nothing moved then.
 */
int bdrv_try_change_aio_context(BlockDriverState *bs, AioContext *ctx,
                                BdrvChild *ignore, Error **errp);
/*
 * A node just opened over existing children (a block job's filter), with
 * no parent yet, joins its children's context, where a node's
 * neighbours must be (threading rule 2).  The caller holds both
 * contexts.  0, or -errno with @errp set: the children are in different
 * contexts, or the driver cannot move.
 */
int bdrv_join_children_aio_context(BlockDriverState *bs, Error **errp);
/*
 * @bs, which a user that went (a block job) kept in an iothread's
 * context, goes back to the main loop with every node connected to it
 * if no parent that is no node (an export, a job) is left on them, so
 * that the iothread can go (invariant 2 of util/iothread.c).  Nothing
 * happens otherwise: such a parent keeps them, and takes them back when
 * it goes.  Main loop thread, holding @bs's context.
 */
void bdrv_leave_unused_aio_context(BlockDriverState *bs);
void bdrv_drained_begin(BlockDriverState *bs);
void bdrv_drained_end(BlockDriverState *bs);

/* Queries. */
int64_t bdrv_get_allocated_file_size(BlockDriverState *bs);
int bdrv_get_info(BlockDriverState *bs, BlockDriverInfo *bdi);
const char *bdrv_get_format_name(BlockDriverState *bs);
/* The protocol prefix of a protocol node ("file", "nbd"), else NULL. */
const char *bdrv_get_protocol_name(BlockDriverState *bs);
const char *bdrv_get_node_name(const BlockDriverState *bs);
bool bdrv_is_read_only(BlockDriverState *bs);
bool bdrv_is_writable(BlockDriverState *bs);
AioContext *bdrv_get_aio_context(BlockDriverState *bs);
BlockDriverState *bdrv_find_node(const char *node_name);
/*
 * The node that @name names where QMP or an option takes a device or a
 * node name; NULL with QEMU's message when there is none.
 */
BlockDriverState *bdrv_lookup_node(const char *name, Error **errp);
/* The node below filters and formats that holds the data (file). */
BlockDriverState *bdrv_backing_chain_next(BlockDriverState *bs);
BlockDriverState *bdrv_filter_or_cow_bs(BlockDriverState *bs);
/* Allocates a buffer aligned for @bs's O_DIRECT needs. */
void *qemu_blockalign(BlockDriverState *bs, size_t size);
void *qemu_try_blockalign(BlockDriverState *bs, size_t size);
size_t bdrv_opt_mem_align(BlockDriverState *bs);
size_t bdrv_min_mem_align(BlockDriverState *bs);
/* Refreshes bs->filename / exact_filename (json: form if needed). */
void bdrv_refresh_filename(BlockDriverState *bs);
/* Iterates over every node with a node name (qemu-img info --backing-chain
 * uses the chain instead). */
BlockDriverState *bdrv_next_node(BlockDriverState *bs);
/* The same walk backwards: the node opened last first (QEMU's order). */
BlockDriverState *bdrv_prev_node(BlockDriverState *bs);

/* Permission updates from parents (BlockBackend uses these). */
int bdrv_child_try_set_perm(BdrvChild *c, uint64_t perm, uint64_t shared,
                            Error **errp);

/* blkdebug control (qemu-io break/resume/...). */
int bdrv_debug_breakpoint(BlockDriverState *bs, const char *event,
                          const char *tag);
int bdrv_debug_remove_breakpoint(BlockDriverState *bs, const char *tag);
int bdrv_debug_resume(BlockDriverState *bs, const char *tag);
bool bdrv_debug_is_suspended(BlockDriverState *bs, const char *tag);

#endif
