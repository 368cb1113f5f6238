/*
 * The "fuzz-mem" protocol (see fuzz-mem.h).
 *
 * Invariants:
 *  1. s->data holds s->size bytes, and s->size <= FUZZ_MEM_MAX_SIZE.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"

typedef struct FuzzMemState {
    uint8_t *data;
    int64_t size;
} FuzzMemState;

static const uint8_t *fuzz_mem_image;
static size_t fuzz_mem_image_len;

void fuzz_mem_set_image(const uint8_t *data, size_t len)
{
    fuzz_mem_image = data;
    fuzz_mem_image_len = len;
}

int64_t fuzz_mem_io_offset(const uint8_t *data, size_t size, int64_t len,
                           int64_t io_size)
{
    uint64_t v = 0;

    for (size_t i = 0; i < 8 && i < size; i++) {
        v = v << 8 | data[size - 1 - i];
    }
    if (len <= io_size) {
        return 0;
    }
    return (v % (len - io_size)) & ~(int64_t)511;
}

static int fuzz_mem_open(BlockDriverState *bs, QDict *options, int flags,
                         Error **errp)
{
    FuzzMemState *s = bs->opaque;
    size_t len = MIN(fuzz_mem_image_len, FUZZ_MEM_MAX_SIZE);

    s->size = len;
    s->data = g_malloc(MAX(len, 1));
    if (len) {
        memcpy(s->data, fuzz_mem_image, len);
    }
    return 0;
}

static void fuzz_mem_close(BlockDriverState *bs)
{
    FuzzMemState *s = bs->opaque;

    g_free(s->data);
}

static int64_t fuzz_mem_getlength(BlockDriverState *bs)
{
    FuzzMemState *s = bs->opaque;

    return s->size;
}

/* Makes [0, end) addressable; ENOSPC past the cap (header comment). */
static int fuzz_mem_grow(FuzzMemState *s, int64_t end)
{
    if (end <= s->size) {
        return 0;
    }
    if (end > FUZZ_MEM_MAX_SIZE) {
        return -ENOSPC;
    }
    s->data = g_realloc(s->data, end);
    memset(s->data + s->size, 0, end - s->size);
    s->size = end;
    assert(s->size <= FUZZ_MEM_MAX_SIZE); /* invariant 1 */
    return 0;
}

static int coroutine_fn fuzz_mem_preadv(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    FuzzMemState *s = bs->opaque;
    int64_t avail = offset < s->size ? MIN(bytes, s->size - offset) : 0;

    qemu_iovec_from_buf(qiov, 0, s->data + offset, avail);
    qemu_iovec_memset(qiov, avail, 0, bytes - avail);
    return 0;
}

static int coroutine_fn fuzz_mem_pwritev(BlockDriverState *bs, int64_t offset,
                                         int64_t bytes, QEMUIOVector *qiov,
                                         BdrvRequestFlags flags)
{
    FuzzMemState *s = bs->opaque;
    int ret = fuzz_mem_grow(s, offset + bytes);

    if (ret < 0) {
        return ret;
    }
    qemu_iovec_to_buf(qiov, 0, s->data + offset, bytes);
    return 0;
}

static int coroutine_fn fuzz_mem_pwrite_zeroes(BlockDriverState *bs,
                                               int64_t offset, int64_t bytes,
                                               BdrvRequestFlags flags)
{
    FuzzMemState *s = bs->opaque;
    int ret = fuzz_mem_grow(s, offset + bytes);

    if (ret < 0) {
        return ret;
    }
    memset(s->data + offset, 0, bytes);
    return 0;
}

/* Discarded bytes read back as zeroes, as on a file with holes punched. */
static int coroutine_fn fuzz_mem_pdiscard(BlockDriverState *bs,
                                          int64_t offset, int64_t bytes)
{
    FuzzMemState *s = bs->opaque;

    if (offset < s->size) {
        memset(s->data + offset, 0, MIN(bytes, s->size - offset));
    }
    return 0;
}

static int coroutine_fn fuzz_mem_flush_to_disk(BlockDriverState *bs)
{
    return 0;
}

static int coroutine_fn fuzz_mem_truncate(BlockDriverState *bs,
                                          int64_t offset, bool exact,
                                          PreallocMode prealloc,
                                          BdrvRequestFlags flags,
                                          Error **errp)
{
    FuzzMemState *s = bs->opaque;

    if (offset > FUZZ_MEM_MAX_SIZE) {
        error_setg(errp, "fuzz-mem node '%s' cannot grow to %" PRId64
                   " bytes (the cap is %d)", bs->node_name, offset,
                   FUZZ_MEM_MAX_SIZE);
        return -ENOSPC;
    }
    fuzz_mem_grow(s, offset);
    s->size = offset;
    return 0;
}

static BlockDriver bdrv_fuzz_mem = {
    .format_name            = "fuzz-mem",
    .instance_size          = sizeof(FuzzMemState),
    .bdrv_open              = fuzz_mem_open,
    .bdrv_close             = fuzz_mem_close,
    .bdrv_getlength         = fuzz_mem_getlength,
    .bdrv_co_preadv         = fuzz_mem_preadv,
    .bdrv_co_pwritev        = fuzz_mem_pwritev,
    .bdrv_co_pwrite_zeroes  = fuzz_mem_pwrite_zeroes,
    .bdrv_co_pdiscard       = fuzz_mem_pdiscard,
    .bdrv_co_flush_to_disk  = fuzz_mem_flush_to_disk,
    .bdrv_co_truncate       = fuzz_mem_truncate,
};

void fuzz_mem_register(void)
{
    static bool done;

    if (!done) {
        bdrv_init();
        bdrv_register(&bdrv_fuzz_mem);
        done = true;
    }
}

BlockBackend *fuzz_mem_open_image(const char *driver, const uint8_t *data,
                                  size_t size, bool no_backing, int flags)
{
    QDict *opts = qdict_new();
    Error *err = NULL;
    BlockBackend *blk;

    fuzz_mem_register();
    fuzz_mem_set_image(data, size);
    qdict_put_str(opts, "driver", driver);
    qdict_put_str(opts, "file.driver", "fuzz-mem");
    if (no_backing) {
        qdict_put_str(opts, "backing", "");
    }
    blk = blk_new_open(NULL, NULL, opts, flags, &err);
    if (!blk) {
        /* every refusal says why */
        assert(err && error_get_pretty(err)[0]);
        error_free(err);
    }
    return blk;
}

/* Reads at @off and asks its block status. */
static void fuzz_mem_read_at(BlockBackend *blk, int64_t off, int64_t len)
{
    static uint8_t buf[FUZZ_MEM_IO_SIZE];
    int64_t n = MIN(len - off, FUZZ_MEM_IO_SIZE);
    int64_t pnum;

    blk_pread(blk, off, n, buf, 0);
    bdrv_block_status(blk_bs(blk), off, n, &pnum, NULL, NULL);
}

void fuzz_mem_read_spots(BlockBackend *blk, const uint8_t *data, size_t size,
                         int64_t len)
{
    fuzz_mem_read_at(blk, 0, len);
    fuzz_mem_read_at(blk, fuzz_mem_io_offset(data, size, len,
                                             FUZZ_MEM_IO_SIZE), len);
    fuzz_mem_read_at(blk, len > FUZZ_MEM_IO_SIZE ? len - FUZZ_MEM_IO_SIZE : 0,
                     len);
}

void fuzz_mem_write_spots(BlockBackend *blk, const uint8_t *data, size_t size,
                          int64_t len)
{
    static uint8_t buf[FUZZ_MEM_WRITE_SIZE];
    int64_t off = fuzz_mem_io_offset(data, size, len, FUZZ_MEM_WRITE_SIZE);
    int64_t mid = QEMU_ALIGN_DOWN(len / 2, 512);

    if (bdrv_is_read_only(blk_bs(blk))) {
        return;
    }
    memset(buf, 0x5a, sizeof(buf));
    blk_pwrite(blk, off, MIN(len - off, FUZZ_MEM_WRITE_SIZE), buf, 0);
    blk_pwrite(blk, 0, MIN(len, 512), buf, 0);
    blk_pwrite(blk, mid, MIN(len - mid, FUZZ_MEM_WRITE_SIZE), buf, 0);
    blk_flush(blk);
}
