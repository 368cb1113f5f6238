/*
 * The statistics lines of qblock-io's "stats" command; see io-stats.h.
 */
#include "io-stats.h"

#include "qblock/block-node.h"

static void tool_print_node_stats(FILE *f, BlockDriverState *bs,
                                  const char *path);

typedef struct ToolStatsWalk {
    FILE *f;
    const char *path;           /* of the parent node */
} ToolStatsWalk;

static void tool_print_child_stats(BlockDriverState *child, const char *name,
                                   void *opaque)
{
    ToolStatsWalk *w = opaque;
    g_autofree char *child_path = g_strdup_printf("%s.%s", w->path, name);

    tool_print_node_stats(w->f, child, child_path);
}

static void tool_print_node_stats(FILE *f, BlockDriverState *bs,
                                  const char *path)
{
    const BdrvNodeStats *st = bdrv_get_node_stats(bs);
    const char *format = bdrv_get_format_name(bs);
    const char *node_name = bdrv_get_node_name(bs);
    ToolStatsWalk w = { .f = f, .path = path };

    fprintf(f, "node %s %s %s: reads=%" PRIu64 " writes=%" PRIu64
            " zero_writes=%" PRIu64 " discards=%" PRIu64 " flushes=%" PRIu64
            " bytes_read=%" PRIu64 " bytes_written=%" PRIu64 "\n",
            path, format ? format : "-", node_name[0] ? node_name : "-",
            st->reads, st->writes, st->zero_writes, st->discards,
            st->flushes, st->bytes_read, st->bytes_written);
    bdrv_foreach_child(bs, tool_print_child_stats, &w);
}

void tool_print_io_stats(FILE *f, BlockBackend *blk)
{
    static const char *const names[BLOCK_MAX_IOTYPE] = {
        [BLOCK_ACCT_READ] = "rd",
        [BLOCK_ACCT_WRITE] = "wr",
        [BLOCK_ACCT_FLUSH] = "flush",
        [BLOCK_ACCT_UNMAP] = "unmap",
    };
    const BlockAcctStats *st = blk_get_stats(blk);

    fprintf(f, "backend:");
    for (int t = BLOCK_ACCT_READ; t < BLOCK_MAX_IOTYPE; t++) {
        fprintf(f, " %s_bytes=%" PRIu64, names[t], st->nr_bytes[t]);
    }
    for (int t = BLOCK_ACCT_READ; t < BLOCK_MAX_IOTYPE; t++) {
        fprintf(f, " %s_operations=%" PRIu64, names[t], st->nr_ops[t]);
    }
    for (int t = BLOCK_ACCT_READ; t < BLOCK_MAX_IOTYPE; t++) {
        fprintf(f, " failed_%s_operations=%" PRIu64, names[t],
                st->failed_ops[t]);
    }
    for (int t = BLOCK_ACCT_READ; t < BLOCK_MAX_IOTYPE; t++) {
        fprintf(f, " invalid_%s_operations=%" PRIu64, names[t],
                st->invalid_ops[t]);
    }
    fprintf(f, " wr_highest_offset=%" PRIu64 "\n", st->wr_highest_offset);
    if (blk_bs(blk)) {
        tool_print_node_stats(f, blk_bs(blk), "root");
    }
}
