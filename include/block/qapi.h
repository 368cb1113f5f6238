/*
 * Nodes and BlockBackends described as the QMP schema's types
 * (qapi/block-qmp.json): what query-named-block-nodes and query-blockstats
 * return.  Members come in the schema's order.
 */
#ifndef QBLOCK_BLOCK_QAPI_H
#define QBLOCK_BLOCK_QAPI_H

#include "qblock/block-backend.h"
#include "util/json.h"

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

/* BlockStats of a node and, below it, of its file and backing nodes. */
JsonNode *bdrv_query_node_stats(BlockDriverState *bs);
/* BlockDeviceStats of a BlockBackend's own accounting. */
JsonNode *blk_query_stats(BlockBackend *blk);

#endif
