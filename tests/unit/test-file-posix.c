/*
 * The file protocol driver through the block layer: reads and writes with
 * each AIO backend (with and without O_DIRECT), zeroes, discard,
 * allocation status, truncate with preallocation, create, length, the
 * O_DIRECT alignment, short reads at end of file, and the open errors.
 *
 * Images live in a directory that supports O_DIRECT (the temporary
 * directory, else the current one); O_DIRECT cases are skipped with the
 * reason when none does, and io_uring/native cases when the kernel refuses
 * them.  Block devices are host_device's (test-file-host-device.c).
 */
#include "util/osdep.h"
#include "qblock/block-backend.h"
#include "block/block_int.h"
#include "qapi/qapi-opts.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* Where the images go; direct_dir is NULL without O_DIRECT support. */
static char *test_dir;
static char *direct_dir;
static unsigned image_counter;

typedef struct AioMode {
    const char *name;           /* test path component */
    const char *aio;            /* "aio" option */
    bool direct;                /* cache.direct=on (BDRV_O_NOCACHE) */
} AioMode;

static const AioMode aio_modes[] = {
    { "threads", "threads", false },
    { "threads-direct", "threads", true },
    { "native-direct", "native", true },
    { "io_uring", "io_uring", false },
    { "io_uring-direct", "io_uring", true },
};

static bool dir_supports_o_direct(const char *dir)
{
    g_autofree char *path = g_build_filename(dir, "probe", NULL);
    void *buf = qemu_memalign(4096, 4096);
    int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
    bool ok = false;

    if (fd >= 0) {
        memset(buf, 0, 4096);
        ok = pwrite(fd, buf, 4096, 0) == 4096;
        close(fd);
    }
    unlink(path);
    qemu_vfree(buf);
    return ok;
}

static void setup_dirs(void)
{
    const char *candidates[] = { g_get_tmp_dir(), "." };

    for (size_t i = 0; i < ARRAY_SIZE(candidates); i++) {
        g_autofree char *tmpl = g_build_filename(candidates[i],
                                                 "qblock-file-XXXXXX", NULL);
        char *dir;

        if (!g_mkdtemp(tmpl)) {
            continue;
        }
        dir = g_steal_pointer(&tmpl);
        if (!test_dir) {
            test_dir = dir;
        }
        if (dir_supports_o_direct(dir)) {
            direct_dir = dir;
            break;
        }
        if (dir != test_dir) {
            rmdir(dir);
            g_free(dir);
        }
    }
    g_assert(test_dir);
}

static char *new_image(const AioMode *mode, int64_t size)
{
    const char *dir = mode && mode->direct ? direct_dir : test_dir;
    char *path = g_strdup_printf("%s/img%u", dir, image_counter++);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    close(fd);
    return path;
}

static BlockBackend *open_image(const char *path, const AioMode *mode,
                                int flags, Error **errp)
{
    QDict *opts = qdict_new();

    qdict_put_str(opts, "driver", "file");
    /*
     * These tests cover the in-place path too (test_in_place()), which is
     * off by default (test_in_place_off_by_default()).
     */
    qdict_put_str(opts, "x-in-place-writes", "on");
    if (mode) {
        qdict_put_str(opts, "aio", mode->aio);
        if (mode->direct) {
            flags |= BDRV_O_NOCACHE;
        }
    }
    return blk_new_open(path, NULL, opts, flags, errp);
}

/*
 * Opens @path in @mode, or marks the test skipped (no O_DIRECT directory,
 * or the kernel refuses the backend) and returns NULL.
 */
static BlockBackend *open_or_skip(const char *path, const AioMode *mode,
                                  int flags)
{
    Error *err = NULL;
    BlockBackend *blk = open_image(path, mode, flags, &err);

    if (!blk) {
        const char *msg = error_get_pretty(err);

        if (strstr(msg, "Unable to use")) {
            g_autofree char *why = g_strdup_printf("aio=%s unavailable: %s",
                                                   mode->aio, msg);
            g_test_skip(why);
            error_free(err);
            return NULL;
        }
        g_error("opening %s: %s", path, msg);
    }
    return blk;
}

/*
 * A new image of @size (its name in *@path), opened read-write; NULL, the
 * image removed and the test skipped, where the backend is unavailable.
 */
static BlockBackend *new_image_open_or_skip(const AioMode *mode, int64_t size,
                                            char **path)
{
    BlockBackend *blk;

    *path = new_image(mode, size);
    blk = open_or_skip(*path, mode, BDRV_O_RDWR);
    if (!blk) {
        unlink(*path);
    }
    return blk;
}

static bool skip_without_direct(const AioMode *mode)
{
    if (mode->direct && !direct_dir) {
        g_test_skip("no directory here supports O_DIRECT");
        return true;
    }
    return false;
}

static void *pattern_buf(size_t len, uint8_t seed)
{
    uint8_t *buf = qemu_memalign(4096, len);

    for (size_t i = 0; i < len; i++) {
        buf[i] = seed + i * 7 + (i >> 9);
    }
    return buf;
}

/* Reads the file directly, bypassing qblock. */
static void file_read(const char *path, int64_t offset, void *buf,
                      size_t len)
{
    int fd = open(path, O_RDONLY);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, buf, len, offset), ==, len);
    close(fd);
}

static int64_t file_allocated(const char *path)
{
    struct stat st;

    g_assert_cmpint(stat(path, &st), ==, 0);
    return (int64_t)st.st_blocks * 512;
}

/* The fcntl flags the driver opened @path with, from /proc/self/fdinfo. */
static int driver_fd_flags(const char *path)
{
    g_autoptr(GDir) dir = g_dir_open("/proc/self/fd", 0, NULL);
    const char *name;
    g_autofree char *real = realpath(path, NULL);

    g_assert(dir && real);
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *link = g_strdup_printf("/proc/self/fd/%s", name);
        g_autofree char *target = g_file_read_link(link, NULL);
        g_autofree char *info_path = NULL;
        g_autofree char *info = NULL;
        const char *flags;

        if (!target || strcmp(target, real)) {
            continue;
        }
        info_path = g_strdup_printf("/proc/self/fdinfo/%s", name);
        g_assert(g_file_get_contents(info_path, &info, NULL, NULL));
        flags = strstr(info, "flags:");
        g_assert(flags);
        return strtol(flags + strlen("flags:"), NULL, 8);
    }
    g_assert_not_reached();
}

/* --- Running driver callbacks and concurrent requests in coroutines --- */

typedef struct DriverRead {
    BlockDriverState *bs;
    int64_t offset;
    QEMUIOVector *qiov;
    int ret;
    bool done;
} DriverRead;

static void coroutine_fn driver_read_entry(void *opaque)
{
    DriverRead *d = opaque;

    d->ret = d->bs->drv->bdrv_co_preadv(d->bs, d->offset, d->qiov->size,
                                        d->qiov, 0);
    d->done = true;
}

/* Calls the driver's read directly, below the generic layer's clamping. */
static int driver_read(BlockDriverState *bs, int64_t offset,
                       QEMUIOVector *qiov)
{
    DriverRead d = { .bs = bs, .offset = offset, .qiov = qiov };
    AioContext *ctx = bdrv_get_aio_context(bs);

    aio_co_enter(ctx, qemu_coroutine_create(driver_read_entry, &d));
    AIO_WAIT_WHILE(ctx, !d.done);
    return d.ret;
}

typedef struct ParallelWrite {
    BlockBackend *blk;
    int64_t offset;
    QEMUIOVector qiov;
    int ret;
    unsigned *pending;
} ParallelWrite;

static void coroutine_fn parallel_write_entry(void *opaque)
{
    ParallelWrite *p = opaque;

    p->ret = blk_co_pwritev(p->blk, p->offset, p->qiov.size, &p->qiov, 0);
    (*p->pending)--;
}

/* --- Tests --------------------------------------------------------------- */

static void test_rw(const void *opaque)
{
    const AioMode *mode = opaque;
    const size_t len = 64 * KiB;
    g_autofree char *path = NULL;
    BlockBackend *blk;
    uint8_t *wbuf, *rbuf, *part;
    QEMUIOVector qiov;

    if (skip_without_direct(mode)) {
        return;
    }
    blk = new_image_open_or_skip(mode, 1 * MiB, &path);
    if (!blk) {
        return;
    }
    wbuf = pattern_buf(len, 1);
    rbuf = qemu_memalign(4096, len);

    g_assert_cmpint(blk_pwrite(blk, 128 * KiB, len, wbuf, 0), ==, 0);
    g_assert_cmpint(blk_pread(blk, 128 * KiB, len, rbuf, 0), ==, 0);
    g_assert_cmpmem(rbuf, len, wbuf, len);
    part = g_malloc(len);
    file_read(path, 128 * KiB, part, len);
    g_assert_cmpmem(part, len, wbuf, len);

    /* A vector of several elements lands in the same place. */
    memset(rbuf, 0, len);
    qemu_iovec_init(&qiov, 3);
    qemu_iovec_add(&qiov, rbuf, 4096);
    qemu_iovec_add(&qiov, rbuf + 4096, len - 8192);
    qemu_iovec_add(&qiov, rbuf + len - 4096, 4096);
    g_assert_cmpint(blk_preadv(blk, 128 * KiB, len, &qiov, 0), ==, 0);
    g_assert_cmpmem(rbuf, len, wbuf, len);
    qemu_iovec_destroy(&qiov);

    /* Unaligned requests (read-modify-write above O_DIRECT). */
    g_assert_cmpint(blk_pwrite(blk, 1000, 3000, wbuf, 0), ==, 0);
    file_read(path, 1000, part, 3000);
    g_assert_cmpmem(part, 3000, wbuf, 3000);
    g_assert_cmpint(blk_pread(blk, 999, 3002, rbuf, 0), ==, 0);
    g_assert_cmpint(rbuf[0], ==, 0);
    g_assert_cmpmem(rbuf + 1, 3000, wbuf, 3000);
    g_assert_cmpint(rbuf[3001], ==, 0);

    g_assert_cmpint(blk_flush(blk), ==, 0);
    blk_unref(blk);
    g_free(part);
    qemu_vfree(wbuf);
    qemu_vfree(rbuf);
    unlink(path);
}

/* Queue depth 64: the batched submission paths and their completions. */
static void test_parallel(const void *opaque)
{
    const AioMode *mode = opaque;
    enum { DEPTH = 64, BLOCK = 4096 };
    g_autofree char *path = NULL;
    ParallelWrite writes[DEPTH];
    BlockBackend *blk;
    uint8_t *bufs, *check;
    unsigned pending = DEPTH;

    if (skip_without_direct(mode)) {
        return;
    }
    blk = new_image_open_or_skip(mode, DEPTH * BLOCK, &path);
    if (!blk) {
        return;
    }
    bufs = pattern_buf(DEPTH * BLOCK, 3);
    for (int i = 0; i < DEPTH; i++) {
        writes[i] = (ParallelWrite) {
            .blk = blk,
            .offset = (int64_t)(DEPTH - 1 - i) * BLOCK,
            .pending = &pending,
            .ret = -EINPROGRESS,
        };
        qemu_iovec_init_buf(&writes[i].qiov, bufs + i * BLOCK, BLOCK);
    }
    for (int i = 0; i < DEPTH; i++) {
        aio_co_enter(blk_get_aio_context(blk),
                     qemu_coroutine_create(parallel_write_entry, &writes[i]));
    }
    AIO_WAIT_WHILE(blk_get_aio_context(blk), pending > 0);

    check = g_malloc(BLOCK);
    for (int i = 0; i < DEPTH; i++) {
        g_assert_cmpint(writes[i].ret, ==, 0);
        file_read(path, writes[i].offset, check, BLOCK);
        g_assert_cmpmem(check, BLOCK, bufs + i * BLOCK, BLOCK);
    }
    blk_unref(blk);
    g_free(check);
    qemu_vfree(bufs);
    unlink(path);
}

/*
 * Through the page cache, a page-aligned 4 KiB write and a read of cached
 * data complete in place, without a trip to a worker: the coroutine that
 * makes them finishes before aio_co_enter() returns, before the event loop
 * runs.  With O_DIRECT they go to the backend and the coroutine waits.
 * Either way the data is in the file.
 */
static void test_in_place(const void *opaque)
{
    const AioMode *mode = opaque;
    enum { BLOCK = 4096 };
    g_autofree char *path = NULL;
    ParallelWrite w;
    BlockBackend *blk;
    uint8_t *buf, *check;
    unsigned pending;

    if (skip_without_direct(mode)) {
        return;
    }
    blk = new_image_open_or_skip(mode, 1 * MiB, &path);
    if (!blk) {
        return;
    }
    buf = pattern_buf(BLOCK, 5);
    check = g_malloc(BLOCK);
    for (int i = 0; i < 8; i++) {
        pending = 1;
        w = (ParallelWrite) {
            .blk = blk, .offset = (int64_t)i * 64 * KiB,
            .pending = &pending, .ret = -EINPROGRESS,
        };
        qemu_iovec_init_buf(&w.qiov, buf, BLOCK);
        aio_co_enter(blk_get_aio_context(blk),
                     qemu_coroutine_create(parallel_write_entry, &w));
        if (mode->direct) {
            g_assert_cmpuint(pending, ==, 1);
        } else {
            g_assert_cmpuint(pending, ==, 0);
        }
        AIO_WAIT_WHILE(blk_get_aio_context(blk), pending > 0);
        g_assert_cmpint(w.ret, ==, 0);
        file_read(path, w.offset, check, BLOCK);
        g_assert_cmpmem(check, BLOCK, buf, BLOCK);
        /*
         * An in-place write slower than RAW_IN_PLACE_SLOW_NS (a
         * preemption on a loaded machine is enough) sends the next ones
         * to the worker, by design; a fresh open forgets that, so that
         * each write here is one that must be made in place.
         */
        blk_unref(blk);
        blk = open_or_skip(path, mode, BDRV_O_RDWR);
        g_assert_nonnull(blk);
    }
    blk_unref(blk);
    g_free(check);
    qemu_vfree(buf);
    unlink(path);
}

/*
 * By default (x-in-place-writes=off) a buffered write goes to the backend:
 * its coroutine is still waiting when aio_co_enter() returns.  A read of
 * cached data is still made in place (RWF_NOWAIT never blocks).
 */
static void test_in_place_off_by_default(const void *opaque)
{
    const AioMode *mode = opaque;
    enum { BLOCK = 4096 };
    g_autofree char *path = NULL;
    QDict *opts;
    unsigned pending = 1;
    ParallelWrite w;
    BlockBackend *blk;
    uint8_t *buf, *check;

    if (mode->direct) {
        g_test_skip("in-place transfers are for the page cache only");
        return;
    }
    path = new_image(mode, 1 * MiB);
    opts = qdict_new();
    qdict_put_str(opts, "driver", "file");
    qdict_put_str(opts, "aio", mode->aio);
    blk = blk_new_open(path, NULL, opts, BDRV_O_RDWR, &error_abort);
    buf = pattern_buf(BLOCK, 9);
    check = g_malloc(BLOCK);
    w = (ParallelWrite) {
        .blk = blk, .offset = 64 * KiB, .pending = &pending,
        .ret = -EINPROGRESS,
    };
    qemu_iovec_init_buf(&w.qiov, buf, BLOCK);
    aio_co_enter(blk_get_aio_context(blk),
                 qemu_coroutine_create(parallel_write_entry, &w));
    g_assert_cmpuint(pending, ==, 1);
    AIO_WAIT_WHILE(blk_get_aio_context(blk), pending > 0);
    g_assert_cmpint(w.ret, ==, 0);
    file_read(path, w.offset, check, BLOCK);
    g_assert_cmpmem(check, BLOCK, buf, BLOCK);
    blk_unref(blk);
    g_free(check);
    qemu_vfree(buf);
    unlink(path);
}

/*
 * A write that the kernel does only in part in place is finished (here:
 * failed) by the backend: RLIMIT_FSIZE, which the kernel applies to the
 * write's offset whatever the file's size, lets the first 2 KiB of a
 * 4 KiB write through and refuses the rest with EFBIG.  The error reaches
 * the caller and the first part is in the file.
 */
static void test_in_place_short_write(const void *opaque)
{
    const AioMode *mode = opaque;
    const int64_t end = 64 * KiB;
    g_autofree char *path = NULL;
    struct rlimit old, limit;
    BlockBackend *blk;
    uint8_t *buf, *check;
    int ret;

    if (mode->direct) {
        g_test_skip("in-place transfers are for the page cache only");
        return;
    }
    blk = new_image_open_or_skip(mode, 2 * end, &path);
    if (!blk) {
        return;
    }
    buf = pattern_buf(4096, 7);
    check = g_malloc(4096);
    signal(SIGXFSZ, SIG_IGN);
    g_assert_cmpint(getrlimit(RLIMIT_FSIZE, &old), ==, 0);
    limit = (struct rlimit) { .rlim_cur = end + 2048,
                              .rlim_max = old.rlim_max };
    g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &limit), ==, 0);
    ret = blk_pwrite(blk, end, 4096, buf, 0);
    g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &old), ==, 0);
    signal(SIGXFSZ, SIG_DFL);
    g_assert_cmpint(ret, ==, -EFBIG);
    file_read(path, end, check, 2048);
    g_assert_cmpmem(check, 2048, buf, 2048);
    blk_unref(blk);
    g_free(check);
    qemu_vfree(buf);
    unlink(path);
}

/* A read past the end of the file returns the data, then zeroes. */
static void test_short_read(const void *opaque)
{
    const AioMode *mode = opaque;
    g_autofree char *path = NULL;
    BlockBackend *blk;
    uint8_t *data, *buf;
    QEMUIOVector qiov;
    int fd;

    if (skip_without_direct(mode)) {
        return;
    }
    path = new_image(mode, 0);
    data = pattern_buf(1000, 9);
    fd = open(path, O_WRONLY);
    g_assert_cmpint(pwrite(fd, data, 1000, 0), ==, 1000);
    close(fd);

    blk = open_or_skip(path, mode, 0);
    if (!blk) {
        unlink(path);
        return;
    }
    g_assert_cmpint(blk_bs(blk)->drv->bdrv_getlength(blk_bs(blk)), ==, 1000);
    buf = qemu_memalign(4096, 8192);
    memset(buf, 0xa5, 8192);
    qemu_iovec_init_buf(&qiov, buf, 8192);
    g_assert_cmpint(driver_read(blk_bs(blk), 0, &qiov), ==, 0);
    g_assert_cmpmem(buf, 1000, data, 1000);
    g_assert_true(buffer_is_zero(buf + 1000, 8192 - 1000));

    /* Entirely beyond the end: all zeroes. */
    memset(buf, 0xa5, 8192);
    g_assert_cmpint(driver_read(blk_bs(blk), 8192, &qiov), ==, 0);
    g_assert_true(buffer_is_zero(buf, 8192));

    blk_unref(blk);
    qemu_vfree(buf);
    qemu_vfree(data);
    unlink(path);
}

/* O_DIRECT only with cache.direct, never O_DSYNC; limits that match. */
static void test_open_flags_and_alignment(const void *opaque)
{
    const AioMode *mode = opaque;
    g_autofree char *path = NULL;
    BlockBackend *blk;
    BlockDriverState *bs;
    int flags;

    if (skip_without_direct(mode)) {
        return;
    }
    blk = new_image_open_or_skip(mode, 1 * MiB, &path);
    if (!blk) {
        return;
    }
    bs = blk_bs(blk);
    flags = driver_fd_flags(path);
    g_assert_cmpint(flags & O_ACCMODE, ==, O_RDWR);
    g_assert_cmpint(flags & O_DSYNC, ==, 0);
    g_assert_cmpint(!!(flags & O_DIRECT), ==, mode->direct);
    if (mode->direct) {
        g_assert_true(is_power_of_2(bs->bl.request_alignment));
        g_assert_cmpint(bs->bl.request_alignment, >=, 512);
        g_assert_cmpint(bs->bl.request_alignment, <=, 4096);
        g_assert_true(is_power_of_2(bs->bl.min_mem_alignment));
        g_assert_cmpint(bs->bl.opt_mem_alignment, >=,
                        bs->bl.min_mem_alignment);
    } else {
        g_assert_cmpint(bs->bl.request_alignment, ==, 1);
    }
    g_assert_cmpint(bs->bl.max_transfer % bs->bl.request_alignment, ==, 0);
    blk_unref(blk);
    unlink(path);
}

/* A buffer O_DIRECT cannot use is bounced by the driver. */
static void test_misaligned_buffer(void)
{
    const AioMode *mode = &aio_modes[1];
    g_autofree char *path = NULL;
    BlockBackend *blk;
    uint8_t *data, *raw, *buf;
    QEMUIOVector qiov;
    int fd;

    if (skip_without_direct(mode)) {
        return;
    }
    path = new_image(mode, 0);
    data = pattern_buf(4096, 5);
    fd = open(path, O_WRONLY);
    g_assert_cmpint(pwrite(fd, data, 4096, 0), ==, 4096);
    close(fd);
    blk = open_or_skip(path, mode, 0);
    g_assert_nonnull(blk);
    raw = g_malloc(4096 + 1);
    buf = raw + 1;
    qemu_iovec_init_buf(&qiov, buf, 4096);
    g_assert_cmpint(driver_read(blk_bs(blk), 0, &qiov), ==, 0);
    g_assert_cmpmem(buf, 4096, data, 4096);
    blk_unref(blk);
    g_free(raw);
    qemu_vfree(data);
    unlink(path);
}

static void test_write_zeroes(const void *opaque)
{
    const AioMode *mode = opaque;
    const size_t len = 256 * KiB;
    g_autofree char *path = NULL;
    BlockBackend *blk;
    uint8_t *data, *buf;
    int64_t before;

    if (skip_without_direct(mode)) {
        return;
    }
    path = new_image(mode, 1 * MiB);
    blk = open_or_skip(path, mode, BDRV_O_RDWR | BDRV_O_UNMAP);
    if (!blk) {
        unlink(path);
        return;
    }
    data = pattern_buf(1 * MiB, 2);
    buf = qemu_memalign(4096, 1 * MiB);
    g_assert_cmpint(blk_pwrite(blk, 0, 1 * MiB, data, 0), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);

    /* Plain zeroes: the range stays allocated. */
    before = file_allocated(path);
    g_assert_cmpint(blk_pwrite_zeroes(blk, 0, len, 0), ==, 0);
    g_assert_cmpint(blk_pread(blk, 0, 1 * MiB, buf, 0), ==, 0);
    g_assert_true(buffer_is_zero(buf, len));
    g_assert_cmpmem(buf + len, 1 * MiB - len, data + len, 1 * MiB - len);
    g_assert_cmpint(file_allocated(path), ==, before);

    /* May unmap, with discard=unmap: the range is deallocated. */
    g_assert_cmpint(blk_pwrite_zeroes(blk, len, len, BDRV_REQ_MAY_UNMAP),
                    ==, 0);
    g_assert_cmpint(blk_pread(blk, len, len, buf, 0), ==, 0);
    g_assert_true(buffer_is_zero(buf, len));
    g_assert_cmpint(file_allocated(path), <=, before - len);

    /* Beyond the end of file: the file grows, reading zeroes. */
    blk_set_allow_write_beyond_eof(blk, true);
    g_assert_cmpint(blk_pwrite_zeroes(blk, 2 * MiB, len, 0), ==, 0);
    g_assert_cmpint(blk_getlength(blk), ==, 2 * MiB + len);
    g_assert_cmpint(blk_pread(blk, 1 * MiB, 1 * MiB, buf, 0), ==, 0);
    g_assert_true(buffer_is_zero(buf, 1 * MiB));

    blk_unref(blk);
    qemu_vfree(buf);
    qemu_vfree(data);
    unlink(path);
}

static void test_discard_and_block_status(const void *opaque)
{
    const AioMode *mode = opaque;
    g_autofree char *path = NULL;
    BlockBackend *blk;
    BlockDriverState *bs, *file;
    uint8_t *data, *buf;
    int64_t pnum, map;
    int ret;

    if (skip_without_direct(mode)) {
        return;
    }
    path = new_image(mode, 1 * MiB);
    blk = open_or_skip(path, mode, BDRV_O_RDWR | BDRV_O_UNMAP);
    if (!blk) {
        unlink(path);
        return;
    }
    bs = blk_bs(blk);

    /* A new sparse file is one hole. */
    ret = bdrv_block_status(bs, 0, 1 * MiB, &pnum, &map, &file);
    g_assert_cmpint(ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ZERO), ==,
                    BDRV_BLOCK_ZERO);
    g_assert_cmpint(pnum, ==, 1 * MiB);

    data = pattern_buf(1 * MiB, 4);
    g_assert_cmpint(blk_pwrite(blk, 0, 1 * MiB, data, 0), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    g_assert_cmpint(blk_pdiscard(blk, 256 * KiB, 256 * KiB), ==, 0);

    buf = qemu_memalign(4096, 256 * KiB);
    g_assert_cmpint(blk_pread(blk, 256 * KiB, 256 * KiB, buf, 0), ==, 0);
    g_assert_true(buffer_is_zero(buf, 256 * KiB));

    ret = bdrv_block_status(bs, 0, 1 * MiB, &pnum, &map, &file);
    g_assert_cmpint(ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ZERO), ==,
                    BDRV_BLOCK_DATA);
    g_assert_true(ret & BDRV_BLOCK_OFFSET_VALID);
    g_assert_cmpint(pnum, ==, 256 * KiB);
    g_assert_cmpint(map, ==, 0);
    g_assert_true(file == bs);

    ret = bdrv_block_status(bs, 256 * KiB, 768 * KiB, &pnum, &map, &file);
    g_assert_cmpint(ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ZERO), ==,
                    BDRV_BLOCK_ZERO);
    g_assert_true(ret & BDRV_BLOCK_OFFSET_VALID);
    g_assert_cmpint(pnum, ==, 256 * KiB);
    g_assert_cmpint(map, ==, 256 * KiB);

    ret = bdrv_block_status(bs, 512 * KiB, 512 * KiB, &pnum, &map, &file);
    g_assert_cmpint(ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ZERO), ==,
                    BDRV_BLOCK_DATA);
    g_assert_cmpint(pnum, ==, 512 * KiB);

    blk_unref(blk);
    qemu_vfree(buf);
    qemu_vfree(data);
    unlink(path);
}

static void test_truncate(void)
{
    g_autofree char *path = new_image(NULL, 64 * KiB);
    BlockBackend *blk = open_image(path, NULL, BDRV_O_RDWR | BDRV_O_RESIZE,
                                   &error_abort);
    Error *err = NULL;

    g_assert_cmpint(blk_truncate(blk, 1 * MiB, true, PREALLOC_MODE_OFF, 0,
                                 &error_abort), ==, 0);
    g_assert_cmpint(blk_getlength(blk), ==, 1 * MiB);
    g_assert_cmpint(file_allocated(path), <, 64 * KiB);

    g_assert_cmpint(blk_truncate(blk, 2 * MiB, true, PREALLOC_MODE_FALLOC, 0,
                                 &error_abort), ==, 0);
    g_assert_cmpint(blk_getlength(blk), ==, 2 * MiB);
    g_assert_cmpint(file_allocated(path), >=, 1 * MiB);

    g_assert_cmpint(blk_truncate(blk, 3 * MiB, true, PREALLOC_MODE_FULL, 0,
                                 &error_abort), ==, 0);
    g_assert_cmpint(blk_getlength(blk), ==, 3 * MiB);
    g_assert_cmpint(file_allocated(path), >=, 2 * MiB);

    g_assert_cmpint(blk_truncate(blk, 1 * MiB, true, PREALLOC_MODE_FALLOC, 0,
                                 &err), ==, -ENOTSUP);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Cannot use preallocation for shrinking files");
    error_free(err);
    err = NULL;

    g_assert_cmpint(blk_truncate(blk, 4 * MiB, true, PREALLOC_MODE_METADATA,
                                 0, &err), <, 0);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Unsupported preallocation mode: metadata");
    error_free(err);

    g_assert_cmpint(blk_truncate(blk, 4096, true, PREALLOC_MODE_OFF, 0,
                                 &error_abort), ==, 0);
    g_assert_cmpint(blk_getlength(blk), ==, 4096);
    blk_unref(blk);
    unlink(path);
}

static int create_file(const char *path, const char *params, Error **errp)
{
    QemuOpts *opts = qemu_opts_parse(&qapi_opts_file_create, params,
                                     &error_abort);
    int ret = bdrv_create_file(path, opts, errp);

    qemu_opts_del(opts);
    return ret;
}

static void test_create(void)
{
    g_autofree char *path = g_strdup_printf("%s/created", test_dir);
    g_autofree char *prefixed = g_strdup_printf("file:%s", path);
    g_autofree char *missing = g_strdup_printf("%s/no/such/dir", test_dir);
    g_autofree char *expected = NULL;
    Error *err = NULL;
    struct stat st;
    int fd;

    g_assert_cmpint(create_file(path, "size=1M", &error_abort), ==, 0);
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 1 * MiB);
    g_assert_cmpint(st.st_blocks * 512, <, 1 * MiB);

    /* An existing file loses its content. */
    fd = open(path, O_WRONLY);
    g_assert_cmpint(pwrite(fd, "data", 4, 0), ==, 4);
    close(fd);
    g_assert_cmpint(create_file(prefixed, "size=64K,preallocation=full",
                                &error_abort), ==, 0);
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 64 * KiB);
    g_assert_cmpint(st.st_blocks * 512, >=, 64 * KiB);
    {
        char head[4];

        file_read(path, 0, head, 4);
        g_assert_true(buffer_is_zero(head, 4));
    }

    g_assert_cmpint(create_file(path, "size=2M,preallocation=falloc",
                                &error_abort), ==, 0);
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 2 * MiB);
    g_assert_cmpint(st.st_blocks * 512, >=, 2 * MiB);

    g_assert_cmpint(create_file(path, "size=1M,nocow=on", &error_abort),
                    ==, 0);
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 1 * MiB);

    g_assert_cmpint(create_file(path, "size=1M,preallocation=metadata",
                                &err), <, 0);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Unsupported preallocation mode: metadata");
    error_free(err);
    err = NULL;
    /* Refused before the existing file was touched. */
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 1 * MiB);

    g_assert_cmpint(create_file(missing, "size=1M", &err), ==, -ENOENT);
    expected = g_strdup_printf("Could not create '%s': No such file or "
                               "directory", missing);
    g_assert_nonnull(strstr(error_get_pretty(err), expected));
    error_free(err);
    unlink(path);
}

static void test_getlength_and_allocation(void)
{
    g_autofree char *path = new_image(NULL, 3 * MiB + 17);
    BlockBackend *blk = open_image(path, NULL, 0, &error_abort);
    BlockDriverState *bs = blk_bs(blk);

    /* The driver is exact; the block layer counts whole sectors. */
    g_assert_cmpint(bs->drv->bdrv_getlength(bs), ==, 3 * MiB + 17);
    g_assert_cmpint(blk_getlength(blk), ==, 3 * MiB + 512);
    g_assert_cmpint(bdrv_get_allocated_file_size(bs), ==,
                    file_allocated(path));
    blk_unref(blk);
    unlink(path);
}

static void test_open_errors(void)
{
    g_autofree char *missing = g_strdup_printf("%s/missing", test_dir);
    g_autofree char *expected = g_strdup_printf(
        "Could not open '%s': No such file or directory", missing);
    g_autofree char *path = new_image(NULL, 4096);
    AioMode native = { "native", "native", false };
    Error *err = NULL;
    QDict *opts;

    g_assert_null(open_image(missing, NULL, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, expected);
    error_free(err);
    err = NULL;

    g_assert_null(open_image(path, &native, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "aio=native was specified, but it requires "
                    "cache.direct=on, which was not specified.");
    error_free(err);
    err = NULL;

    g_assert_null(open_image("/dev/null", NULL, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "'file' driver requires '/dev/null' to be a regular "
                    "file");
    error_free(err);
    err = NULL;

    opts = qdict_new();
    qdict_put_str(opts, "driver", "file");
    g_assert_null(blk_new_open(NULL, NULL, opts, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "The 'file' block driver requires a file name");
    error_free(err);
    unlink(path);
}

/* cache.direct and read-only change by reopening the fd. */
static void test_reopen(void)
{
    g_autofree char *path = NULL;
    BlockBackend *blk;
    BlockDriverState *bs;
    uint8_t *buf;

    if (!direct_dir) {
        g_test_skip("no directory here supports O_DIRECT");
        return;
    }
    path = new_image(&aio_modes[1], 64 * KiB);
    blk = open_image(path, NULL, BDRV_O_RDWR, &error_abort);
    bs = blk_bs(blk);
    buf = pattern_buf(4096, 8);
    g_assert_cmpint(driver_fd_flags(path) & O_DIRECT, ==, 0);

    g_assert_cmpint(bdrv_reopen(bs, NULL, bs->open_flags | BDRV_O_NOCACHE,
                                &error_abort), ==, 0);
    g_assert_cmpint(driver_fd_flags(path) & O_DIRECT, ==, O_DIRECT);
    g_assert_cmpint(bs->bl.request_alignment, >=, 512);
    g_assert_cmpint(blk_pwrite(blk, 4096, 4096, buf, 0), ==, 0);

    g_assert_cmpint(bdrv_reopen(bs, NULL, bs->open_flags & ~BDRV_O_NOCACHE,
                                &error_abort), ==, 0);
    g_assert_cmpint(driver_fd_flags(path) & O_DIRECT, ==, 0);
    g_assert_cmpint(bs->bl.request_alignment, ==, 1);

    blk_unref(blk);
    qemu_vfree(buf);
    unlink(path);
}

static void add_mode_tests(const char *name, GTestDataFunc fn)
{
    for (size_t i = 0; i < ARRAY_SIZE(aio_modes); i++) {
        g_autofree char *test_path = g_strdup_printf("/file-posix/%s/%s",
                                                     name, aio_modes[i].name);

        g_test_add_data_func(test_path, &aio_modes[i], fn);
    }
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    qemu_init_progname(argv[0]);
    bdrv_init();
    setup_dirs();

    add_mode_tests("rw", test_rw);
    add_mode_tests("parallel", test_parallel);
    add_mode_tests("short-read", test_short_read);
    add_mode_tests("in-place", test_in_place);
    add_mode_tests("in-place-short-write", test_in_place_short_write);
    add_mode_tests("in-place-off-by-default", test_in_place_off_by_default);
    add_mode_tests("open-flags", test_open_flags_and_alignment);
    add_mode_tests("write-zeroes", test_write_zeroes);
    add_mode_tests("discard-block-status", test_discard_and_block_status);
    g_test_add_func("/file-posix/misaligned-buffer", test_misaligned_buffer);
    g_test_add_func("/file-posix/truncate", test_truncate);
    g_test_add_func("/file-posix/create", test_create);
    g_test_add_func("/file-posix/getlength", test_getlength_and_allocation);
    g_test_add_func("/file-posix/open-errors", test_open_errors);
    g_test_add_func("/file-posix/reopen", test_reopen);

    ret = g_test_run();
    rmdir(test_dir);
    if (direct_dir && direct_dir != test_dir) {
        rmdir(direct_dir);
    }
    return ret;
}
