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

#include <stddef.h>
#include <stdint.h>

#define FUZZ_MEM_MAX_SIZE   (64 * 1024 * 1024)

/* Registers the driver (and every other one, via bdrv_init()); once. */
void fuzz_mem_register(void);
/* The bytes the next "fuzz-mem" node starts with (copied at open). */
void fuzz_mem_set_image(const uint8_t *data, size_t len);

#endif
