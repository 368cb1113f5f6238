/*
 * The statistics lines of qblock-io's "stats" command; see io-stats.h.
 */
#include "io-stats.h"

#include "block/block_int.h"

static void tool_print_node_stats(FILE *f, BlockDriverState *bs,
                                  const char *path)
{
    const BdrvNodeStats *st = &bs->stats;

    fprintf(f, "node %s %s %s: reads=%" PRIu64 " writes=%" PRIu64
            " zero_writes=%" PRIu64 " discards=%" PRIu64 " flushes=%" PRIu64
            " bytes_read=%" PRIu64 " bytes_written=%" PRIu64 "\n",
            path, bs->drv ? bs->drv->format_name : "-",
            bs->node_name[0] ? bs->node_name : "-",
            st->reads, st->writes, st->zero_writes, st->discards,
            st->flushes, st->bytes_read, st->bytes_written);
    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *child = l->data;
        g_autofree char *child_path = g_strdup_printf("%s.%s", path,
                                                      child->name);

        tool_print_node_stats(f, child->bs, child_path);
    }
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
