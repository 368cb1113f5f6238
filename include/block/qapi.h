/*
 * Nodes and BlockBackends described as the QMP schema's types
 * (qapi/block-qmp.json): what query-named-block-nodes and query-blockstats
 * return, and the ImageInfo that qemu-img info prints.  Members come in
 * the schema's order.  One description serves the monitor and the tools,
 * as in QEMU, so that they never disagree.
 */
#ifndef QBLOCK_BLOCK_QAPI_H
#define QBLOCK_BLOCK_QAPI_H

#include "block/snapshot.h"
#include "qblock/block-backend.h"
#include "util/json.h"

/* QEMU's ImageInfo: one image of a chain. */
typedef struct ImageInfo {
    char *filename;
    const char *format;             /* the driver's name */
    int64_t virtual_size;
    int64_t actual_size;            /* -1: unavailable */
    bool has_dirty_flag;            /* the driver reports its state */
    bool dirty_flag;                /* not cleanly shut down */
    int cluster_size;               /* 0: the format has none */
    bool encrypted;                 /* guest data is encrypted */
    char *backing_filename;         /* NULL: no backing file */
    char *full_backing_filename;    /* NULL: cannot be determined */
    char *backing_format;           /* NULL: not recorded */
    QEMUSnapshotInfo *snapshots;
    int nb_snapshots;
    JsonNode *format_specific;      /* ImageInfoSpecific; NULL: none */
    struct ImageInfo *backing_image;    /* NULL: none, or flat */
} ImageInfo;

/*
 * The ImageInfo of @bs and, unless @flat, of its backing chain.  Returns
 * NULL with an error naming the image if its size or its snapshots cannot
 * be read.
 */
ImageInfo *bdrv_query_image_info(BlockDriverState *bs, bool flat,
                                 Error **errp);
void image_info_free(ImageInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ImageInfo, image_info_free)
/* @info as a JSON object (a new tree), members in QEMU's order. */
JsonNode *image_info_to_json(const ImageInfo *info);
/*
 * The driver's ImageInfoSpecific of @bs ({"type": ..., "data": {...}}, a
 * new tree), or NULL if its format has none.
 */
JsonNode *bdrv_get_specific_info(BlockDriverState *bs);
/*
 * The "Format specific information:" lines of qemu-img info and qemu-io
 * info, rendered from @specific's "data" as QEMU renders them; NULL if
 * there are none (@specific may be NULL).  The caller frees the string.
 */
char *image_info_specific_human(JsonNode *specific);

/*
 * BlockDeviceInfo of @bs; with @flat, its ImageInfo leaves out the
 * backing chain.  Returns NULL with an error if the node's size cannot be
 * read.
 */
JsonNode *bdrv_block_device_info(BlockDriverState *bs, bool flat,
                                 Error **errp);
/*
 * The write cache @bs's users see: false if a BlockBackend attached to it
 * is in writethrough mode, true otherwise (also when it has none).
 */
bool bdrv_users_write_cache(BlockDriverState *bs);

/*
 * XDbgBlockGraph of x-debug-query-block-graph: every BlockBackend, block
 * job and node and the edges between them (block/qapi-graph.c).
 */
JsonNode *bdrv_debug_block_graph(void);

/* BlockStats of a node and, below it, of its file and backing nodes. */
JsonNode *bdrv_query_node_stats(BlockDriverState *bs);
/* BlockDeviceStats of a BlockBackend's own accounting. */
JsonNode *blk_query_stats(BlockBackend *blk);

#endif
