/*
 * The I/O statistics of an image as qblock-io's "stats" command prints
 * them (qblock-nbd writes the same lines at exit with QBLOCK_NBD_STATS):
 * the BlockBackend's counters as query-blockstats names them, then one
 * line per node of the graph, depth first.  Tests read them to count the
 * flushes that reached a file.
 */
#ifndef QBLOCK_IO_STATS_H
#define QBLOCK_IO_STATS_H

#include "qblock/block-backend.h"

#include <stdio.h>

void tool_print_io_stats(FILE *f, BlockBackend *blk);

#endif
