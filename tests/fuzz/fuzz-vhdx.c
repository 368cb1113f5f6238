/*
 * fuzz-vhdx: a mutated VHDX image, held in memory (fuzz-mem), goes
 * through what qblock-img info/convert and qblock-io do with one: probe,
 * open (read-only: the driver never writes), reads at the start, at an
 * offset the input chooses and at the end of the disk, close.  What is
 * fuzzed is block/vhdx.c's checks of the headers, region table, metadata
 * and BAT (its invariants 2 to 4) and block/vhdx-log.c's scan of a
 * dirty log; with a flag, the open is qemu-img check -r's (read-write,
 * BDRV_O_CHECK), which replays that log into the in-memory image; with
 * another, a read-write open (which replays it too) and allocating
 * writes at the three places (block/vhdx-write.c, and the log entries of
 * vhdx-log.c), each read back: what a write that succeeded wrote must
 * read back (fuzz-mem bounds the file's growth, so a huge block fails).
 *
 * A VHDX image is megabytes of mostly zeroes with its structures at
 * fixed places (QEMU's layout), so the input is not the image: it is the
 * structures' first bytes, one after the other (vhdx_fuzz_segments), put
 * at their places in a 6 MiB image of zeroes; then a byte of flags that
 * say which checksums the harness recomputes (so that mutations get past
 * them) and how to open, then bytes for the data area at 4 MiB.  The input's last bytes,
 * read as a little-endian offset, also place the middle read.
 * tests/fuzz/make-corpus-vhdx.py writes inputs of this shape.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"
#include "util/crc32c.h"

#define FUZZ_VHDX_IMAGE_SIZE    (6 * 1024 * 1024)
#define FUZZ_VHDX_DATA_OFFSET   (4 * 1024 * 1024)
#define FUZZ_VHDX_IO_SIZE       (16 * 1024)
#define FUZZ_VHDX_LOG_OFFSET    0x100000
#define FUZZ_VHDX_FIX_HEADERS   1
#define FUZZ_VHDX_FIX_REGIONS   2
#define FUZZ_VHDX_FIX_LOG       4
#define FUZZ_VHDX_CHECK_OPEN    8
#define FUZZ_VHDX_WRITE         16

/* Where the input's bytes go; make-corpus-vhdx.py has the same table. */
static const struct {
    uint32_t file_offset;
    uint32_t length;
} vhdx_fuzz_segments[] = {
    { 0x000000, 0x10 },     /* file identifier */
    { 0x010000, 0x100 },    /* header 1 */
    { 0x020000, 0x100 },    /* header 2 */
    { 0x030000, 0x200 },    /* region table 1: 15 entries */
    { 0x100000, 0x2000 },   /* the log's first two sectors */
    { 0x200000, 0x200 },    /* the BAT: 64 entries */
    { 0x300000, 0x200 },    /* the metadata table: 15 entries */
    { 0x310000, 0x100 },    /* the metadata items */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Writes a pattern of @n bytes at @off; if that worked, reads it back. */
static void vhdx_fuzz_write(BlockBackend *blk, int64_t off, int64_t n,
                            uint8_t pattern)
{
    static uint8_t out[FUZZ_VHDX_IO_SIZE], in[FUZZ_VHDX_IO_SIZE];

    memset(out, pattern, n);
    if (blk_pwrite(blk, off, n, out, 0) < 0) {
        return;
    }
    if (blk_pread(blk, off, n, in, 0) >= 0) {
        assert(!memcmp(in, out, n));
    }
}

/* Recomputes the CRC-32C at @at + 4 over @len bytes of @image. */
static void vhdx_fuzz_fix_crc(uint8_t *image, uint32_t at, uint32_t len)
{
    uint32_t crc;

    memset(image + at + 4, 0, 4);
    crc = GUINT32_TO_LE(crc32c(0, image + at, len));
    memcpy(image + at + 4, &crc, 4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t image[FUZZ_VHDX_IMAGE_SIZE];
    static uint8_t buf[FUZZ_VHDX_IO_SIZE];
    size_t used = 0;
    uint8_t flags = 0;
    BlockBackend *blk;
    int64_t len, off;

    memset(image, 0, sizeof(image));
    for (size_t i = 0; i < ARRAY_SIZE(vhdx_fuzz_segments); i++) {
        size_t n = MIN(size - used, vhdx_fuzz_segments[i].length);

        memcpy(image + vhdx_fuzz_segments[i].file_offset, data + used, n);
        used += n;
    }
    if (used < size) {
        flags = data[used++];
    }
    memcpy(image + FUZZ_VHDX_DATA_OFFSET, data + used,
           MIN(size - used, (size_t)(FUZZ_VHDX_IMAGE_SIZE -
                                     FUZZ_VHDX_DATA_OFFSET)));
    if (flags & FUZZ_VHDX_FIX_HEADERS) {
        vhdx_fuzz_fix_crc(image, 0x10000, 4096);
        vhdx_fuzz_fix_crc(image, 0x20000, 4096);
    }
    if (flags & FUZZ_VHDX_FIX_REGIONS) {
        vhdx_fuzz_fix_crc(image, 0x30000, 64 * 1024);
    }
    if (flags & FUZZ_VHDX_FIX_LOG) {
        uint32_t entry_length;

        memcpy(&entry_length, image + FUZZ_VHDX_LOG_OFFSET + 8, 4);
        entry_length = GUINT32_FROM_LE(entry_length);
        vhdx_fuzz_fix_crc(image, FUZZ_VHDX_LOG_OFFSET,
                          MIN(entry_length, 0x100000u));
    }

    blk = fuzz_mem_open_image("vhdx", image, sizeof(image), false,
                              flags & FUZZ_VHDX_CHECK_OPEN ?
                              BDRV_O_RDWR | BDRV_O_CHECK :
                              flags & FUZZ_VHDX_WRITE ? BDRV_O_RDWR : 0);
    if (!blk) {
        return 0;
    }
    len = blk_getlength(blk);
    assert(len >= 0);
    if (len > 0) {
        off = fuzz_mem_io_offset(data, size, len, FUZZ_VHDX_IO_SIZE);
        blk_pread(blk, 0, MIN(len, FUZZ_VHDX_IO_SIZE), buf, 0);
        blk_pread(blk, off, MIN(len - off, FUZZ_VHDX_IO_SIZE), buf, 0);
        off = len > FUZZ_VHDX_IO_SIZE ? len - FUZZ_VHDX_IO_SIZE : 0;
        blk_pread(blk, off, len - off, buf, 0);
    }
    if (len > 0 && (flags & FUZZ_VHDX_WRITE) &&
        !(flags & FUZZ_VHDX_CHECK_OPEN)) {
        int64_t n = MIN(len, FUZZ_VHDX_IO_SIZE);

        vhdx_fuzz_write(blk, 0, n, 0xa1);
        off = fuzz_mem_io_offset(data, size, len, FUZZ_VHDX_IO_SIZE);
        vhdx_fuzz_write(blk, off, MIN(len - off, FUZZ_VHDX_IO_SIZE), 0xb2);
        vhdx_fuzz_write(blk, len - n, n, 0xc3);
        blk_flush(blk);
    }
    blk_unref(blk);
    return 0;
}
