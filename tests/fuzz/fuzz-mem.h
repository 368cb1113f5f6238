/*
 * The "fuzz-mem" protocol: a node whose bytes live in memory, so that the
 * harnesses feed a mutated image to a format driver without touching a
 * file.  A node takes a copy of the image set by fuzz_mem_set_image() at
 * the time it is opened; writes change only that copy.
 *
 * The node grows on writes past its end, up to FUZZ_MEM_MAX_SIZE: a
 * hostile image may ask for an allocation far away, which a sparse file
 * would absorb but memory cannot, so such a write fails with ENOSPC (as a
 * full disk would) instead of exhausting the fuzzer's memory.
 */
#ifndef FUZZ_MEM_H
#define FUZZ_MEM_H

#include "block/block-common.h"

#define FUZZ_MEM_MAX_SIZE   (64 * 1024 * 1024)

/* Registers the driver (and every other one, via bdrv_init()); once. */
void fuzz_mem_register(void);
/* The bytes the next "fuzz-mem" node starts with (copied at open). */
void fuzz_mem_set_image(const uint8_t *data, size_t len);
/*
 * Where a harness aims guest I/O of @io_size bytes in a disk of @len
 * bytes: the input's last 8 bytes, read as a little-endian offset, taken
 * modulo what fits and aligned to 512, so that the fuzzer chooses it.
 */
int64_t fuzz_mem_io_offset(const uint8_t *data, size_t size, int64_t len,
                           int64_t io_size);
/*
 * Reads up to FUZZ_MEM_IO_SIZE bytes of @blk's disk (@len bytes) and asks
 * their block status at three places: the start, the offset the input
 * chooses (fuzz_mem_io_offset()) and the end.
 */
#define FUZZ_MEM_IO_SIZE (16 * 1024)
void fuzz_mem_read_spots(BlockBackend *blk, const uint8_t *data, size_t size,
                         int64_t len);
/*
 * Unless @blk is read-only, writes up to FUZZ_MEM_WRITE_SIZE bytes of
 * 0x5a at the offset the input chooses, a sector at the start and across
 * the middle of the disk (where formats put a block boundary), then
 * flushes: what allocates in an image whose tables lie.
 */
#define FUZZ_MEM_WRITE_SIZE 4096
void fuzz_mem_write_spots(BlockBackend *blk, const uint8_t *data,
                          size_t size, int64_t len);
/*
 * Opens @data as an image of format @driver on a "fuzz-mem" node, with
 * @flags (0: read-only), with no backing file when @no_backing (for a
 * format that has them: no host file is reached).  NULL when the driver
 * refuses the image, which must say why.
 */
BlockBackend *fuzz_mem_open_image(const char *driver, const uint8_t *data,
                                  size_t size, bool no_backing, int flags);

#endif
