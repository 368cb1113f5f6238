/*
 * block/blkcrash.c: unflushed writes stay out of the file but are read
 * back, a flush moves them into the file in order, a power cut loses all
 * of them (or a random part) and kills the node, and the file below then
 * holds exactly what a disk would.
 */

#include "block/blkcrash.h"
#include "qblock/block-backend.h"
#include <sys/stat.h>

static char *make_file(int64_t size)
{
    GError *gerr = NULL;
    char *path = NULL;
    int fd = g_file_open_tmp("qblock-blkcrash-XXXXXX", &path, &gerr);

    g_assert_no_error(gerr);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    close(fd);
    return path;
}

static BlockBackend *open_crash(const char *path)
{
    QDict *opts = qdict_new();
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "blkcrash");
    qdict_put_str(opts, "file.driver", "file");
    qdict_put_str(opts, "file.filename", path);
    blk = blk_new_open(NULL, NULL, opts,
                       BDRV_O_RDWR | BDRV_O_RESIZE | BDRV_O_UNMAP,
                       &error_abort);
    g_assert_nonnull(blk);
    return blk;
}

/* The file's bytes at @offset, read past the filter. */
static void file_read(const char *path, int64_t offset, void *buf,
                      size_t len)
{
    int fd = open(path, O_RDONLY);

    g_assert_cmpint(fd, >=, 0);
    memset(buf, 0xee, len);
    g_assert_cmpint(pread(fd, buf, len, offset), >=, 0);
    close(fd);
}

static void test_cache_and_flush(void)
{
    g_autofree char *path = make_file(64 * KiB);
    BlockBackend *blk = open_crash(path);
    BlockDriverState *bs = blk_bs(blk);
    uint8_t a[4096], b[4096], got[4096], zero[4096] = { 0 };

    memset(a, 0xaa, sizeof(a));
    memset(b, 0xbb, sizeof(b));
    g_assert_true(blkcrash_find(bs) == bs);
    g_assert_cmpint(blk_pwrite(blk, 0, 4096, a, 0), ==, 0);
    /* a later, overlapping write wins over the earlier one */
    g_assert_cmpint(blk_pwrite(blk, 2048, 4096, b, 0), ==, 0);
    g_assert_cmpuint(blkcrash_unflushed_bytes(bs), ==, 8192);
    g_assert_true(blkcrash_is_unflushed(bs, 6000, 10));
    g_assert_false(blkcrash_is_unflushed(bs, 8192, 512));
    g_assert_cmpint(blk_pread(blk, 0, 4096, got, 0), ==, 0);
    g_assert_cmpmem(got, 2048, a, 2048);
    g_assert_cmpmem(got + 2048, 2048, b, 2048);
    /* the file has none of it yet */
    file_read(path, 0, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), zero, sizeof(zero));

    g_assert_cmpint(blk_flush(blk), ==, 0);
    g_assert_cmpuint(blkcrash_unflushed_bytes(bs), ==, 0);
    g_assert_cmpuint(bs->file->bs->stats.flushes, ==, 1);
    file_read(path, 0, got, sizeof(got));
    g_assert_cmpmem(got, 2048, a, 2048);
    g_assert_cmpmem(got + 2048, 2048, b, 2048);

    /* zero writes and discards are cached as zeroes */
    g_assert_cmpint(blk_pwrite_zeroes(blk, 0, 1024, 0), ==, 0);
    g_assert_cmpint(blk_pdiscard(blk, 1024, 1024), ==, 0);
    g_assert_cmpint(blk_pread(blk, 0, 4096, got, 0), ==, 0);
    g_assert_cmpmem(got, 2048, zero, 2048);
    g_assert_cmpmem(got + 2048, 2048, b, 2048);
    blk_unref(blk);
    unlink(path);
}

static void test_power_cut_all(void)
{
    g_autofree char *path = make_file(64 * KiB);
    BlockBackend *blk = open_crash(path);
    BlockDriverState *bs = blk_bs(blk);
    uint8_t a[4096], got[4096];

    memset(a, 0x11, sizeof(a));
    g_assert_cmpint(blk_pwrite(blk, 0, 4096, a, 0), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    memset(a, 0x22, sizeof(a));
    g_assert_cmpint(blk_pwrite(blk, 0, 4096, a, 0), ==, 0);
    /* a write past the end (as formats make) grows the disk while cached */
    blk_set_allow_write_beyond_eof(blk, true);
    g_assert_cmpint(blk_pwrite(blk, 64 * KiB, 4096, a, 0), ==, 0);
    g_assert_cmpint(blk_getlength(blk), ==, 68 * KiB);

    g_assert_cmpint(blkcrash_power_cut(bs, BLKCRASH_CUT_ALL, 0), ==, 2);
    /* dead: nothing more reaches the file, not even from a flush */
    g_assert_cmpint(blk_pread(blk, 0, 4096, got, 0), ==, -EIO);
    g_assert_cmpint(blk_pwrite(blk, 0, 4096, a, 0), ==, -EIO);
    g_assert_cmpint(blk_flush(blk), ==, -EIO);
    g_assert_cmpint(blkcrash_power_cut(bs, BLKCRASH_CUT_ALL, 0), ==,
                    -EINVAL);
    blk_unref(blk);
    file_read(path, 0, got, sizeof(got));
    memset(a, 0x11, sizeof(a));
    g_assert_cmpmem(got, sizeof(got), a, sizeof(a));
    {
        struct stat st;

        g_assert_cmpint(stat(path, &st), ==, 0);
        g_assert_cmpint(st.st_size, ==, 64 * KiB);
    }
    unlink(path);
}

/*
 * Random cuts keep a subset: whole writes, or single sectors of them; the
 * same seed picks the same subset, and over many seeds both outcomes of
 * each choice happen.
 */
static void test_power_cut_random(void)
{
    const int nwrites = 8;

    for (int mode = BLKCRASH_CUT_RANDOM_WRITES;
         mode <= BLKCRASH_CUT_RANDOM_SECTORS; mode++) {
        int kept_total = 0, sectors_total = 0;
        int torn = 0;

        for (uint32_t seed = 1; seed <= 16; seed++) {
            g_autofree char *path = make_file(64 * KiB);
            BlockBackend *blk = open_crash(path);
            uint8_t buf[2048];

            for (int i = 0; i < nwrites; i++) {
                memset(buf, i + 1, sizeof(buf));
                g_assert_cmpint(blk_pwrite(blk, i * 4096, sizeof(buf), buf,
                                           0), ==, 0);
            }
            g_assert_cmpint(blkcrash_power_cut(blk_bs(blk), mode, seed), ==,
                            nwrites);
            blk_unref(blk);
            for (int i = 0; i < nwrites; i++) {
                int kept = 0;

                file_read(path, i * 4096, buf, sizeof(buf));
                for (int sect = 0; sect < 4; sect++) {
                    uint8_t v = buf[sect * 512];

                    g_assert_true(v == 0 || v == i + 1);
                    kept += v != 0;
                }
                if (mode == BLKCRASH_CUT_RANDOM_WRITES) {
                    g_assert_true(kept == 0 || kept == 4);
                } else {
                    torn += kept != 0 && kept != 4;
                }
                kept_total += kept == 4;
                sectors_total += kept;
            }
            unlink(path);
        }
        g_assert_cmpint(kept_total, >, 0);
        g_assert_cmpint(sectors_total, <, 16 * nwrites * 4);
        if (mode == BLKCRASH_CUT_RANDOM_SECTORS) {
            g_assert_cmpint(torn, >, 0);
        }
    }
}

/* An armed cut fails the request it waits for and everything after it. */
static void test_armed_cut(void)
{
    g_autofree char *path = make_file(64 * KiB);
    BlockBackend *blk = open_crash(path);
    BlockDriverState *bs = blk_bs(blk);
    uint8_t buf[512], got[512];

    memset(buf, 0x5a, sizeof(buf));
    g_assert_cmpint(blkcrash_arm(bs, 0, BLKCRASH_CUT_ALL, 0), ==, -EINVAL);
    g_assert_cmpint(blk_pwrite(blk, 0, 512, buf, 0), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    g_assert_cmpuint(blkcrash_requests(bs), ==, 2);
    g_assert_cmpint(blkcrash_arm(bs, 2, BLKCRASH_CUT_ALL, 0), ==, -EINVAL);
    g_assert_cmpint(blkcrash_arm(bs, 4, BLKCRASH_CUT_ALL, 0), ==, 0);
    g_assert_cmpint(blk_pwrite(blk, 512, 512, buf, 0), ==, 0);
    g_assert_false(blkcrash_is_dead(bs));
    /* request 4: the flush that would have saved the second write */
    g_assert_cmpint(blk_flush(blk), ==, -EIO);
    g_assert_true(blkcrash_is_dead(bs));
    g_assert_cmpint(blk_pread(blk, 0, 512, got, 0), ==, -EIO);
    blk_unref(blk);
    file_read(path, 0, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), buf, sizeof(buf));
    file_read(path, 512, got, sizeof(got));
    g_assert_cmpuint(got[0], ==, 0);
    unlink(path);
}

static void test_journal_limit(void)
{
    g_autofree char *path = make_file(1 * MiB);
    QDict *opts = qdict_new();
    BlockBackend *blk;
    uint8_t buf[4096] = { 0 };

    qdict_put_str(opts, "driver", "blkcrash");
    qdict_put_str(opts, "journal-max", "8k");
    qdict_put_str(opts, "file.driver", "file");
    qdict_put_str(opts, "file.filename", path);
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
    g_assert_cmpint(blk_pwrite(blk, 0, 4096, buf, 0), ==, 0);
    g_assert_cmpint(blk_pwrite(blk, 4096, 4096, buf, 0), ==, 0);
    g_assert_cmpint(blk_pwrite(blk, 8192, 4096, buf, 0), ==, -ENOSPC);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    g_assert_cmpint(blk_pwrite(blk, 8192, 4096, buf, 0), ==, 0);
    blk_unref(blk);
    unlink(path);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    g_test_add_func("/blkcrash/cache-and-flush", test_cache_and_flush);
    g_test_add_func("/blkcrash/power-cut-all", test_power_cut_all);
    g_test_add_func("/blkcrash/power-cut-random", test_power_cut_random);
    g_test_add_func("/blkcrash/armed-cut", test_armed_cut);
    g_test_add_func("/blkcrash/journal-limit", test_journal_limit);
    return g_test_run();
}
