/*
 * Cache modes (DESIGN.md's table): each mode string gives open flags and
 * the BlockBackend's write cache flag, and on a real file they mean what
 * they say: O_DIRECT for none/directsync, a flush after each write for
 * writethrough/directsync, no flush reaching the file for unsafe.  Over
 * qcow2, writethrough costs the bounded number of file flushes per write
 * that docs/cache-modes.md gives.
 */

#include "block/block_int.h"
#include "qblock/block-backend.h"

typedef struct CacheModeCase {
    const char *mode;
    int flags;              /* BDRV_O_CACHE_MASK bits */
    bool writethrough;
} CacheModeCase;

static const CacheModeCase cache_modes[] = {
    { "writeback",    0,                                 false },
    { "writethrough", 0,                                 true },
    { "none",         BDRV_O_NOCACHE,                    false },
    { "off",          BDRV_O_NOCACHE,                    false },
    { "directsync",   BDRV_O_NOCACHE,                    true },
    { "unsafe",       BDRV_O_NO_FLUSH,                   false },
};

static void test_parse_table(void)
{
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cache_modes); i++) {
        const CacheModeCase *c = &cache_modes[i];
        /* stale cache bits are replaced, other bits kept */
        int flags = BDRV_O_RDWR | BDRV_O_CACHE_MASK;
        bool wt = !c->writethrough;

        g_assert_cmpint(bdrv_parse_cache_mode(c->mode, &flags, &wt), ==, 0);
        g_assert_cmphex(flags & BDRV_O_CACHE_MASK, ==, c->flags);
        g_assert_true(flags & BDRV_O_RDWR);
        g_assert_cmpint(wt, ==, c->writethrough);
    }
}

static void test_parse_unknown(void)
{
    int flags = BDRV_O_RDWR;
    bool wt = false;

    g_assert_cmpint(bdrv_parse_cache_mode("bogus", &flags, &wt), ==, -1);
    g_assert_cmpint(bdrv_parse_cache_mode("", &flags, &wt), ==, -1);
    g_assert_cmpint(bdrv_parse_cache_mode("Writeback", &flags, &wt), ==, -1);
    g_assert_cmphex(flags, ==, BDRV_O_RDWR);
}

static char *make_image(int64_t size)
{
    GError *gerr = NULL;
    char *path = NULL;
    int fd = g_file_open_tmp("qblock-cache-XXXXXX", &path, &gerr);

    g_assert_no_error(gerr);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    close(fd);
    return path;
}

/* Opens @path with the file driver under the given cache mode. */
static BlockBackend *open_with_mode(const char *path, const char *mode)
{
    QDict *opts = qdict_new();
    int flags = BDRV_O_RDWR;
    bool writethrough;
    BlockBackend *blk;

    g_assert_cmpint(bdrv_parse_cache_mode(mode, &flags, &writethrough), ==,
                    0);
    qdict_put_str(opts, "driver", "file");
    qdict_put_str(opts, "filename", path);
    blk = blk_new_open(NULL, NULL, opts, flags, &error_abort);
    blk_set_enable_write_cache(blk, !writethrough);
    return blk;
}

/* The fcntl flags of this process's descriptor of @path, or -1. */
static int fd_flags_of(const char *path)
{
    GDir *dir = g_dir_open("/proc/self/fd", 0, NULL);
    const char *name;
    int flags = -1;

    g_assert_nonnull(dir);
    while (flags < 0 && (name = g_dir_read_name(dir))) {
        char *link = g_strdup_printf("/proc/self/fd/%s", name);
        char *target = g_file_read_link(link, NULL);

        if (target && !strcmp(target, path)) {
            char *info_path = g_strdup_printf("/proc/self/fdinfo/%s", name);
            char *info = NULL;
            const char *f;

            g_assert_true(g_file_get_contents(info_path, &info, NULL, NULL));
            f = strstr(info, "flags:");
            g_assert_nonnull(f);
            flags = strtol(f + strlen("flags:"), NULL, 8);
            g_free(info);
            g_free(info_path);
        }
        g_free(target);
        g_free(link);
    }
    g_dir_close(dir);
    return flags;
}

static void test_file_direct(void)
{
    char *path = make_image(MiB);
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cache_modes); i++) {
        const CacheModeCase *c = &cache_modes[i];
        BlockBackend *blk = open_with_mode(path, c->mode);
        int fl = fd_flags_of(path);

        g_assert_cmpint(fl, >=, 0);
        g_assert_cmpint(!!(fl & O_DIRECT), ==, !!(c->flags & BDRV_O_NOCACHE));
        /* writethrough is never done by the kernel: no O_DSYNC/O_SYNC */
        g_assert_cmpint(fl & (O_DSYNC | O_SYNC), ==, 0);
        g_assert_cmpint(blk_enable_write_cache(blk), ==, !c->writethrough);
        blk_unref(blk);
    }
    unlink(path);
    g_free(path);
}

/* Flushes that reach the file node after three writes and one flush. */
static uint64_t flushes_after_writes(const char *path, const char *mode)
{
    BlockBackend *blk = open_with_mode(path, mode);
    void *buf = blk_blockalign(blk, 4096);
    uint64_t flushes;
    int i;

    memset(buf, 0x3c, 4096);
    for (i = 0; i < 3; i++) {
        g_assert_cmpint(blk_pwrite(blk, i * 4096, 4096, buf, 0), ==, 0);
    }
    flushes = blk_bs(blk)->stats.flushes;
    g_assert_cmpint(blk_flush(blk), ==, 0);
    flushes = flushes * 10 + (blk_bs(blk)->stats.flushes - flushes);
    qemu_vfree(buf);
    blk_unref(blk);
    return flushes;
}

/*
 * Tens: flushes caused by the three writes; units: by the explicit flush
 * (none when writethrough already flushed everything).
 */
static void test_file_flushes(void)
{
    char *path = make_image(MiB);

    g_assert_cmpuint(flushes_after_writes(path, "writeback"), ==, 1);
    g_assert_cmpuint(flushes_after_writes(path, "writethrough"), ==, 30);
    g_assert_cmpuint(flushes_after_writes(path, "none"), ==, 1);
    g_assert_cmpuint(flushes_after_writes(path, "directsync"), ==, 30);
    g_assert_cmpuint(flushes_after_writes(path, "unsafe"), ==, 0);
    unlink(path);
    g_free(path);
}

/* A fresh qcow2 image of @size with the driver's default options. */
static char *make_qcow2(int64_t size)
{
    const BlockDriver *drv = bdrv_find_format("qcow2");
    char *path = make_image(0);
    QemuOptsList *list;
    QemuOpts *opts;

    g_assert_nonnull(drv);
    list = qemu_opts_append(NULL, drv->create_opts);
    opts = qemu_opts_create(list);
    qemu_opt_set_number(opts, "size", size, &error_abort);
    g_assert_cmpint(bdrv_create(drv, path, opts, &error_abort), ==, 0);
    qemu_opts_del(opts);
    qemu_opts_free(list);
    return path;
}

static BlockBackend *open_qcow2(const char *path, const char *mode)
{
    QDict *opts = qdict_new();
    int flags = BDRV_O_RDWR;
    bool writethrough;
    BlockBackend *blk;

    g_assert_cmpint(bdrv_parse_cache_mode(mode, &flags, &writethrough), ==,
                    0);
    qdict_put_str(opts, "driver", "qcow2");
    qdict_put_str(opts, "file.driver", "file");
    qdict_put_str(opts, "file.filename", path);
    blk = blk_new_open(NULL, NULL, opts, flags, &error_abort);
    blk_set_enable_write_cache(blk, !writethrough);
    return blk;
}

/* Flushes reaching the file node while one 4 KiB write at @offset runs. */
static uint64_t qcow2_write_flushes(BlockBackend *blk, int64_t offset)
{
    BlockDriverState *file = blk_bs(blk)->file->bs;
    uint64_t before = file->stats.flushes;
    uint8_t buf[4096];

    memset(buf, 0xa5, sizeof(buf));
    g_assert_cmpint(blk_pwrite(blk, offset, sizeof(buf), buf, 0), ==, 0);
    return file->stats.flushes - before;
}

/*
 * qcow2 has no writethrough logic of its own: the flushes it issues order
 * its metadata, the BlockBackend's one flush makes the write durable.  An
 * overwrite costs exactly that one flush; an allocating write adds the
 * flush that orders the refcount update before the L2 update, and one
 * that needs a new L2 table the flushes that order the table's refcount,
 * the table and the L1 entry (the same counts as QEMU 7.2's qemu-io).
 */
static void test_qcow2_writethrough_flushes(void)
{
    char *path = make_qcow2(64 * MiB);
    BlockBackend *blk = open_qcow2(path, "writethrough");
    int fl = fd_flags_of(path);

    g_assert_cmpint(fl, >=, 0);
    g_assert_cmpint(fl & (O_DSYNC | O_SYNC), ==, 0);
    /*
     * The first write allocates the first L2 table.  Exact counts, the
     * ones QEMU 7.2's qemu-io makes (fdatasync calls counted with strace):
     * a missing ordering flush must fail here, not hide below a bound.
     */
    g_assert_cmpuint(qcow2_write_flushes(blk, 0), ==, 5);
    g_assert_cmpuint(qcow2_write_flushes(blk, 0), ==, 1);
    g_assert_cmpuint(qcow2_write_flushes(blk, 8192), ==, 1);
    /* a cluster of its own, in the same L2 table */
    g_assert_cmpuint(qcow2_write_flushes(blk, 1 * MiB), ==, 2);
    g_assert_cmpuint(qcow2_write_flushes(blk, 1 * MiB), ==, 1);
    blk_unref(blk);

    /* in writeback, no write flushes; a flush then reaches the file once */
    blk = open_qcow2(path, "writeback");
    g_assert_cmpuint(qcow2_write_flushes(blk, 0), ==, 0);
    g_assert_cmpuint(qcow2_write_flushes(blk, 2 * MiB), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    g_assert_cmpuint(blk_bs(blk)->file->bs->stats.flushes, >=, 1);
    blk_unref(blk);
    unlink(path);
    g_free(path);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();

    g_test_add_func("/cache-modes/parse-table", test_parse_table);
    g_test_add_func("/cache-modes/parse-unknown", test_parse_unknown);
    g_test_add_func("/cache-modes/file-direct", test_file_direct);
    g_test_add_func("/cache-modes/file-flushes", test_file_flushes);
    g_test_add_func("/cache-modes/qcow2-writethrough-flushes",
                    test_qcow2_writethrough_flushes);
    return g_test_run();
}
