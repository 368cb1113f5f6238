/*
 * fuzz-qcow2: a mutated qcow2 image, held in memory (fuzz-mem), goes
 * through what qblock-io and qblock-img do with an untrusted image: open
 * (read-write, else read-only), check, a few reads, writes, zero writes
 * and discards, a repairing check, close.
 *
 * The image must not reach a host file: the options forbid a backing
 * file ("backing": ""), and an image that asks for an external data file
 * gets a second, empty fuzz-mem node as that file instead of the path it
 * names.
 *
 * The input is the image itself; its last bytes, read as a little-endian
 * offset, also place the guest I/O, so that the fuzzer can aim the
 * writes at clusters the image maps in odd ways.
 *
 * Every open names one secret, FUZZ_QCOW2_SECRET, as encrypt.key-secret
 * (an image without encryption ignores it), so that a LUKS-encrypted
 * image whose passphrase it is unlocks and its data path runs: the seed
 * luks-aes128-cbc-1k.qcow2 (tests/fuzz/make-corpus-qcow2-luks.py) is one,
 * with 1 PBKDF2 iteration so that unlocking costs microseconds.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"
#include "util/user-object.h"

/* The incompatible-features field of a version 3 header, and its bit. */
#define FUZZ_QCOW2_INCOMPAT_OFFSET  72
#define FUZZ_QCOW2_DATA_FILE_BIT    (1u << 2)
/* Guest I/O is a few clusters' worth: enough to allocate, cheap to run. */
#define FUZZ_QCOW2_IO_SIZE          (64 * 1024)
/* The passphrase of the LUKS seed, as a secret object. */
#define FUZZ_QCOW2_SECRET_ID        "fuzz-sec"
#define FUZZ_QCOW2_SECRET           "secret,id=" FUZZ_QCOW2_SECRET_ID \
                                    ",data=fuzz"

static bool fuzz_qcow2_wants_data_file(const uint8_t *data, size_t size)
{
    uint64_t incompat = 0;

    if (size < FUZZ_QCOW2_INCOMPAT_OFFSET + 8) {
        return false;
    }
    for (int i = 0; i < 8; i++) {
        incompat = incompat << 8 | data[FUZZ_QCOW2_INCOMPAT_OFFSET + i];
    }
    return incompat & FUZZ_QCOW2_DATA_FILE_BIT;
}

static BlockBackend *fuzz_qcow2_open(bool data_file, int flags)
{
    QDict *opts = qdict_new();
    Error *err = NULL;
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "qcow2");
    qdict_put_str(opts, "file.driver", "fuzz-mem");
    qdict_put_str(opts, "backing", "");
    qdict_put_str(opts, "encrypt.key-secret", FUZZ_QCOW2_SECRET_ID);
    if (data_file) {
        qdict_put_str(opts, "data-file.driver", "fuzz-mem");
    }
    blk = blk_new_open(NULL, NULL, opts, flags, &err);
    error_free(err);
    return blk;
}

static void fuzz_qcow2_io(BlockBackend *blk, int64_t off, bool writable)
{
    static uint8_t buf[FUZZ_QCOW2_IO_SIZE];
    int64_t len = blk_getlength(blk);

    if (len <= 0) {
        return;
    }
    blk_pread(blk, 0, MIN(len, FUZZ_QCOW2_IO_SIZE), buf, 0);
    blk_pread(blk, off, MIN(len - off, FUZZ_QCOW2_IO_SIZE), buf, 0);
    if (!writable) {
        return;
    }
    memset(buf, 0xa5, sizeof(buf));
    blk_pwrite(blk, off, MIN(len - off, 4096), buf, 0);
    blk_pwrite(blk, 0, MIN(len, 512), buf, 0);
    blk_pwrite_zeroes(blk, off, MIN(len - off, FUZZ_QCOW2_IO_SIZE / 2),
                      BDRV_REQ_MAY_UNMAP);
    blk_pdiscard(blk, 0, MIN(len, FUZZ_QCOW2_IO_SIZE));
    blk_pread(blk, off, MIN(len - off, FUZZ_QCOW2_IO_SIZE), buf, 0);
    blk_flush(blk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bool data_file = fuzz_qcow2_wants_data_file(data, size);
    bool writable = true;
    BdrvCheckResult res;
    BlockBackend *blk;

    static bool secret_added;

    fuzz_mem_register();
    if (!secret_added) {
        user_object_add_cmdline(FUZZ_QCOW2_SECRET, &error_abort);
        secret_added = true;
    }
    fuzz_mem_set_image(data, size);
    blk = fuzz_qcow2_open(data_file, BDRV_O_RDWR);
    if (!blk) {
        /* a corrupt bit, or a feature refused for writing: read it */
        writable = false;
        blk = fuzz_qcow2_open(data_file, 0);
    }
    if (!blk) {
        return 0;
    }
    memset(&res, 0, sizeof(res));
    bdrv_check(blk_bs(blk), &res, 0);
    fuzz_qcow2_io(blk, fuzz_mem_io_offset(data, size, blk_getlength(blk),
                                          FUZZ_QCOW2_IO_SIZE),
                  writable);
    if (writable) {
        memset(&res, 0, sizeof(res));
        bdrv_check(blk_bs(blk), &res, BDRV_FIX_LEAKS | BDRV_FIX_ERRORS);
    }
    blk_unref(blk);
    return 0;
}
