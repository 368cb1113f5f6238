/*
 * A hierarchical bitmap: a plain array of bits plus summary levels that let
 * a search for the next set bit skip empty stretches in O(levels).
 *
 * Bits are numbered from 0 to size - 1.  The bottom level is the bitmap
 * itself, 64 bits per word, bit i in word i / 64 at position i % 64 (so
 * that the words written little-endian give the byte layout of qcow2's
 * bitmaps and of QEMU's sha256 of a bitmap).  Level k + 1 has one bit per
 * word of level k.  The whole structure is owned by one thread.
 */
#ifndef QBLOCK_HBITMAP_H
#define QBLOCK_HBITMAP_H

#include "util/osdep.h"

typedef struct HBitmap HBitmap;

/* A bitmap of @size bits, all clear. */
HBitmap *hbitmap_alloc(uint64_t size);
void hbitmap_free(HBitmap *hb);
/* An independent copy, bits and size. */
HBitmap *hbitmap_copy(const HBitmap *hb);

uint64_t hbitmap_size(const HBitmap *hb);
/* The number of set bits. */
uint64_t hbitmap_count(const HBitmap *hb);
bool hbitmap_get(const HBitmap *hb, uint64_t bit);

/* Set or clear bits [@first, @first + @count), clipped to the size. */
void hbitmap_set(HBitmap *hb, uint64_t first, uint64_t count);
void hbitmap_reset(HBitmap *hb, uint64_t first, uint64_t count);
void hbitmap_reset_all(HBitmap *hb);

/*
 * The first set (clear) bit in [@first, @first + @count), or -1 if there
 * is none.  @count is clipped to the size.
 */
int64_t hbitmap_next_set(const HBitmap *hb, uint64_t first, uint64_t count);
int64_t hbitmap_next_clear(const HBitmap *hb, uint64_t first,
                           uint64_t count);

/* Grows (new bits clear) or shrinks the bitmap to @size bits. */
void hbitmap_truncate(HBitmap *hb, uint64_t size);

/* @dst |= @src; both have the same size. */
void hbitmap_merge(HBitmap *dst, const HBitmap *src);

/*
 * The bits [@first, @first + @count) as bytes, bit i of byte j being bit
 * @first + 8 * j + i; @first is a multiple of 64.  Bits past the size read
 * as clear.  @buf holds DIV_ROUND_UP(@count, 8) bytes.
 */
void hbitmap_serialize(const HBitmap *hb, uint8_t *buf, uint64_t first,
                       uint64_t count);
/*
 * Sets the bits that are set in @buf (the layout of hbitmap_serialize()),
 * or all of [@first, @first + @count) when @buf is NULL.  Bits past the
 * size are ignored.
 */
void hbitmap_deserialize(HBitmap *hb, const uint8_t *buf, uint64_t first,
                         uint64_t count);

/* SHA-256 of the bottom level as little-endian 64-bit words, in hex. */
char *hbitmap_sha256(const HBitmap *hb);

#endif
