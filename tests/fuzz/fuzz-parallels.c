/*
 * fuzz-parallels: a mutated Parallels image, held in memory (fuzz-mem),
 * goes through what qblock-img info/convert/map/check, qblock-nbd and
 * qblock-io do with one: probe; open read-only (which loads the format
 * extension's dirty bitmaps), reads at the start, at an offset the input
 * chooses and at the end of the disk, close; open read-write, writes of
 * part of a cluster there, at the start and in the middle (allocating
 * clusters past what the table and its entries name), a flush, check and
 * check -r all, close.  What is fuzzed is block/parallels.c's header
 * checks (its invariant 1: every offset from an entry fits or fails the
 * request), block/parallels-ext.c's features and bitmap tables, the
 * in-use flag, and block/parallels-write.c's allocation and check in a
 * file whose table lies (invariant 3: no write lands in the header or
 * table).
 *
 * check runs only for a table of at most 2^16 entries, which bounds the
 * lines it prints.  The input is the image itself; its last bytes, read
 * as a little-endian offset, also place the middle read.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"

#define FUZZ_PARALLELS_CHECK_MAX  (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    BlockBackend *blk;
    BdrvCheckResult result = { 0 };
    uint32_t entries = 0;
    int64_t len;

    bdrv_find_format("parallels")->bdrv_probe(data, size, NULL);
    blk = fuzz_mem_open_image("parallels", data, size, false, 0);
    if (blk) {
        len = blk_getlength(blk);
        assert(len >= 0 && len % 512 == 0);
        if (len > 0) {
            fuzz_mem_read_spots(blk, data, size, len);
        }
        blk_unref(blk);
    }
    blk = fuzz_mem_open_image("parallels", data, size, false, BDRV_O_RDWR);
    if (!blk) {
        return 0;
    }
    len = blk_getlength(blk);
    if (len > 0) {
        fuzz_mem_write_spots(blk, data, size, len);
    }
    /* the header's bat_entries, at 0x20 (zero past a short input) */
    if (size >= 0x20 + sizeof(entries)) {
        memcpy(&entries, data + 0x20, sizeof(entries));
    }
    if (GUINT32_FROM_LE(entries) <= FUZZ_PARALLELS_CHECK_MAX) {
        bdrv_check(blk_bs(blk), &result, 0);
        if (!bdrv_is_read_only(blk_bs(blk))) {
            memset(&result, 0, sizeof(result));
            bdrv_check(blk_bs(blk), &result, BDRV_FIX_ERRORS | BDRV_FIX_LEAKS);
        }
    }
    blk_unref(blk);
    return 0;
}
