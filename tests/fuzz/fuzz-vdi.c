/*
 * fuzz-vdi: a mutated VDI image, held in memory (fuzz-mem), goes through
 * what qblock-img info/convert/map/check and qblock-io do with one:
 * probe, open read-write (else read-only, as an image whose data area
 * overlaps its block map must be), block status and reads at the start,
 * at an offset the input chooses and at the end of the disk, writes of
 * part of a block there, at the start and in the middle (allocating
 * blocks whose indices come from the header's count), a flush, check,
 * close.  What is
 * fuzzed is block/vdi.c's header checks (its invariant 1: every block has
 * a map entry, every offset computed from one fits), the block map that
 * lies past the end of the file, and block/vdi-write.c's allocation in a
 * file whose count and map lie.
 *
 * check runs only for a map of at most 2^16 blocks: QEMU's check, which
 * qblock follows, prints a line per block that shares an index, and a
 * hostile header may claim 2^29 blocks.  The input is the image itself;
 * its last bytes, read as a little-endian offset, also place the middle
 * read.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"

#define FUZZ_VDI_CHECK_MAX  (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    BlockBackend *blk;
    BdrvCheckResult result = { 0 };
    uint32_t blocks = 0;
    int64_t len;

    bdrv_find_format("vdi")->bdrv_probe(data, size, NULL);
    blk = fuzz_mem_open_image("vdi", data, size, false, BDRV_O_RDWR);
    if (!blk) {
        /* an overlapping layout is read-only; a bad one fails again */
        blk = fuzz_mem_open_image("vdi", data, size, false, 0);
    }
    if (!blk) {
        return 0;
    }
    len = blk_getlength(blk);
    assert(len >= 0 && len % 512 == 0);
    if (len > 0) {
        fuzz_mem_read_spots(blk, data, size, len);
        fuzz_mem_write_spots(blk, data, size, len);
    }
    /* the header's blocks_in_image, at 0x180 (zero past a short input) */
    if (size >= 0x180 + sizeof(blocks)) {
        memcpy(&blocks, data + 0x180, sizeof(blocks));
    }
    if (GUINT32_FROM_LE(blocks) <= FUZZ_VDI_CHECK_MAX) {
        bdrv_check(blk_bs(blk), &result, 0);
    }
    blk_unref(blk);
    return 0;
}
