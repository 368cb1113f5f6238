/*
 * I/O accounting helpers (see include/block/accounting.h).
 *
 * Stats are updated from the thread of the AioContext that runs the
 * requests only, so plain increments suffice.
 */

#include "block/accounting.h"

void block_acct_start(BlockAcctStats *stats, BlockAcctCookie *cookie,
                      int64_t bytes, BlockAcctType type)
{
    assert(type > BLOCK_ACCT_NONE && type < BLOCK_MAX_IOTYPE);
    cookie->bytes = bytes;
    cookie->start_time_ns = get_clock_ns();
    cookie->type = type;
}

static int64_t block_acct_finish(BlockAcctStats *stats,
                                 BlockAcctCookie *cookie)
{
    int64_t now = get_clock_ns();

    assert(cookie->type > BLOCK_ACCT_NONE && cookie->type < BLOCK_MAX_IOTYPE);
    stats->total_time_ns[cookie->type] += now - cookie->start_time_ns;
    stats->last_access_time_ns = now;
    return now;
}

void block_acct_done(BlockAcctStats *stats, BlockAcctCookie *cookie)
{
    block_acct_finish(stats, cookie);
    stats->nr_bytes[cookie->type] += cookie->bytes;
    stats->nr_ops[cookie->type]++;
}

void block_acct_failed(BlockAcctStats *stats, BlockAcctCookie *cookie)
{
    block_acct_finish(stats, cookie);
    stats->failed_ops[cookie->type]++;
}

void block_acct_invalid(BlockAcctStats *stats, BlockAcctType type)
{
    assert(type > BLOCK_ACCT_NONE && type < BLOCK_MAX_IOTYPE);
    stats->invalid_ops[type]++;
    stats->last_access_time_ns = get_clock_ns();
}

void block_acct_write_end(BlockAcctStats *stats, uint64_t end_offset)
{
    if (end_offset > stats->wr_highest_offset) {
        stats->wr_highest_offset = end_offset;
    }
}
