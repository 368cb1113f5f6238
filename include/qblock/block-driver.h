/*
 * What a user of the block layer (a tool, the storage daemon) may ask of a
 * driver, found with bdrv_find_format() or bdrv_get_driver(): its name,
 * its option tables, which optional operations it has; and the
 * image-level operations that qemu-img needs beyond block.h (measure,
 * amend).
 *
 * The driver table stays private to block_int.h: a user never calls a
 * driver callback itself, so the generic layer keeps every guarantee the
 * callbacks' contracts promise.
 */
#ifndef QBLOCK_BLOCK_DRIVER_H
#define QBLOCK_BLOCK_DRIVER_H

#include "block/block-common.h"

/* What qemu-img measure reports for an image of a format (bytes). */
typedef struct BlockMeasureInfo {
    int64_t required;           /* for the data that would be written */
    int64_t fully_allocated;    /* with every cluster allocated */
    bool has_bitmaps;           /* the target could keep the source's */
    int64_t bitmaps;            /* persistent dirty bitmaps' size */
} BlockMeasureInfo;

/* "qcow2", "raw", "file", ... */
const char *bdrv_driver_name(const BlockDriver *drv);
/*
 * The driver's option tables: creation (qemu-img create -o), the options
 * of an open node (blockdev-add), amendment (qemu-img amend -o).  NULL
 * where the driver has none.
 */
const QemuOptsList *bdrv_driver_create_opts(const BlockDriver *drv);
const QemuOptsList *bdrv_driver_runtime_opts(const BlockDriver *drv);
const QemuOptsList *bdrv_driver_amend_opts(const BlockDriver *drv);
/* Whether the driver can change an open image's options (amend). */
bool bdrv_driver_can_amend(const BlockDriver *drv);
/* Whether the driver can write compressed clusters (convert -c). */
bool bdrv_driver_can_compress(const BlockDriver *drv);
/* Whether the driver's images have backing files (the "backing" option). */
bool bdrv_driver_supports_backing(const BlockDriver *drv);
/* Whether the driver reaches storage itself ("file", "nbd"): a protocol. */
bool bdrv_driver_is_protocol(const BlockDriver *drv);

/*
 * The size of a new image of format @drv created with @opts (its create
 * options; "size" set unless @in_bs is given) and holding the data of
 * @in_bs (NULL: an empty image).  Fills @info; 0, or -errno with @errp
 * set: -ENOTSUP "Block driver 'x' does not support size measurement".
 */
int bdrv_measure(const BlockDriver *drv, QemuOpts *opts, BlockDriverState *in_bs,
                 BlockMeasureInfo *info, Error **errp);

/* Progress of a long amend: @done of @total units of work. */
typedef void BlockAmendStatusCB(BlockDriverState *bs, int64_t done,
                                int64_t total, void *opaque);
/*
 * Changes the open image @bs to the options set in @opts (its driver's
 * amend options; only those given change), as qemu-img amend does.  Call
 * it outside coroutine context, on a writable node; @status_cb (may be
 * NULL) reports progress.  @force: qemu-img amend --force.  0, or -errno
 * with @errp set: -ENOTSUP "Format driver 'x' does not support option
 * amendment".
 */
int bdrv_amend(BlockDriverState *bs, QemuOpts *opts,
               BlockAmendStatusCB *status_cb, void *cb_opaque, bool force,
               Error **errp);

#endif
