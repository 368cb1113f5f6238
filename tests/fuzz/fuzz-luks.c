/*
 * fuzz-luks: a LUKS1 header as the `luks` driver and qcow2's
 * encrypt.format=luks read one from an image nobody vouches for: the
 * 592-byte header parsed and checked (magic, version, cipher and mode
 * names, hash, key length, iteration counts, payload offset, every key
 * slot's state, stripes and material offset) by luks_header_load(), the
 * same function both drivers call before they ask for a passphrase.
 *
 * Unlocking is left out: it derives keys with the header's iteration
 * counts, which the parser bounds but which are far too slow to run per
 * input; the bounds themselves are what is fuzzed here.
 *
 * The input is the start of the volume; a read past its end fails as a
 * short file does.
 */
#include "util/osdep.h"
#include "util/error.h"
#include "crypto/luks-int.h"

typedef struct FuzzLuksVolume {
    const uint8_t *data;
    size_t size;
} FuzzLuksVolume;

static int fuzz_luks_read(void *opaque, uint64_t offset, void *buf,
                          size_t len, Error **errp)
{
    const FuzzLuksVolume *vol = opaque;

    if (offset > vol->size || len > vol->size - offset) {
        error_setg(errp, "Read of %zu bytes at %" PRIu64 " is past the "
                   "end of the volume (%zu bytes)", len, offset, vol->size);
        return -EIO;
    }
    memcpy(buf, vol->data + offset, len);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzLuksVolume vol = { .data = data, .size = size };
    const CryptoLuksIO io = { .read = fuzz_luks_read, .opaque = &vol };
    LuksHeader hdr;
    LuksParams params;
    Error *err = NULL;

    if (luks_header_load(&io, &hdr, &params, &err) < 0) {
        /* every refusal says why */
        assert(err && error_get_pretty(err)[0]);
        error_free(err);
        return 0;
    }
    assert(!err);
    /* what the drivers rely on once the header is accepted */
    assert(hdr.key_bytes >= 1 && hdr.key_bytes <= 64);
    assert((uint64_t)hdr.payload_offset * CRYPTO_LUKS_SECTOR_SIZE >=
           sizeof(hdr));
    return 0;
}
