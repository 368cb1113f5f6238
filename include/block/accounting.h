/*
 * I/O accounting: each request is timed from start to completion and
 * counted into a BlockAcctStats (the counters query-blockstats reports).
 *
 * A request is accounted exactly once: block_acct_start() fills a cookie
 * kept with the request, then one of block_acct_done() (success) or
 * block_acct_failed() (error from below) consumes it.  A request refused
 * before it was issued (bad range) is counted by block_acct_invalid()
 * instead, without a cookie.
 */
#ifndef QBLOCK_ACCOUNTING_H
#define QBLOCK_ACCOUNTING_H

#include "block/block-common.h"

typedef struct BlockAcctCookie {
    int64_t bytes;
    int64_t start_time_ns;
    BlockAcctType type;
} BlockAcctCookie;

void block_acct_start(BlockAcctStats *stats, BlockAcctCookie *cookie,
                      int64_t bytes, BlockAcctType type);
/* Counts the op and its bytes and adds its latency. */
void block_acct_done(BlockAcctStats *stats, BlockAcctCookie *cookie);
/* Counts a failed op; its latency is added, its bytes are not. */
void block_acct_failed(BlockAcctStats *stats, BlockAcctCookie *cookie);
void block_acct_invalid(BlockAcctStats *stats, BlockAcctType type);
/* Records that a write ending at @end_offset completed. */
void block_acct_write_end(BlockAcctStats *stats, uint64_t end_offset);

#endif
