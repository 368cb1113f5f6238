/*
 * The daemon's block nodes: the ones --blockdev and blockdev-add open
 * ("monitor-owned": the daemon holds a reference until blockdev-del or
 * shutdown), and the QMP commands that add, remove and describe nodes.
 */
#ifndef QBLOCK_BLOCKDEV_H
#define QBLOCK_BLOCKDEV_H

#include "util/error.h"
#include "util/qdict.h"

/*
 * --blockdev: @arg is keyval (driver=file,node-name=f0,filename=x, the
 * driver implied first) or a JSON object ('{"driver": "file", ...}').
 */
int blockdev_add_cmdline(const char *arg, Error **errp);
/*
 * The options of one node as blockdev-add takes them (@node, a JSON
 * object), checked against the schema and the drivers' option tables,
 * as the flat dict the block layer takes; NULL with @errp set.
 */
QDict *blockdev_options_to_qdict(JsonNode *node, Error **errp);
/* Registers blockdev-add/-del, query-named-block-nodes, query-blockstats
 * and x-blockdev-set-write-cache. */
void blockdev_register_commands(void);
/*
 * Flushes and closes every monitor-owned node, the last opened first.
 * Flush failures are reported on stderr; returns -EIO if there was one.
 * The exports must be gone already.
 */
int blockdev_close_all(void);

#endif
