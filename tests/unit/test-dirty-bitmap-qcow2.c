/*
 * block/qcow2-bitmap.c against hostile images: a bitmaps extension,
 * directory or table that lies (counts, sizes, offsets past the end of
 * the file, unaligned or reserved bits, bad granularity or name sizes)
 * makes the open fail with an error that names the structure, check
 * reports it as a corruption, and nothing crashes, hangs or allocates
 * what the image asks for.  Also: a stored bitmap reads back with its
 * bits, state and granularity.
 */
#include "block/block_int.h"
#include "block/dirty-bitmap.h"
#include "qblock/block-backend.h"

#define IMG_SIZE    (4 * MiB)

static char *test_dir;

/* Offsets of the bitmaps extension's fields and of the first entry. */
typedef struct BitmapLayout {
    int64_t ext;            /* the extension's data (nb_bitmaps) */
    int64_t dir;            /* the first directory entry */
    int64_t table;          /* its bitmap table */
} BitmapLayout;

static char *img_path(const char *name)
{
    return g_build_filename(test_dir, name, NULL);
}

static BlockBackend *open_img(const char *path, int flags, Error **errp)
{
    QDict *opts = qdict_new();

    qdict_put_str(opts, "driver", "qcow2");
    return blk_new_open(path, NULL, opts, flags, errp);
}

/* A 4 MiB image with bitmap "b0" (64 KiB granularity) dirty at 1 MiB. */
static void make_image(const char *path)
{
    const BlockDriver *drv = bdrv_find_format("qcow2");
    QemuOptsList *list = qemu_opts_append(NULL, drv->create_opts);
    QemuOpts *opts = qemu_opts_parse(list, "size=4M", &error_abort);
    BlockBackend *blk;
    uint8_t buf[4096] = { 1 };

    g_assert_cmpint(bdrv_create(drv, path, opts, &error_abort), ==, 0);
    qemu_opts_del(opts);
    qemu_opts_free(list);
    blk = open_img(path, BDRV_O_RDWR, &error_abort);
    g_assert_nonnull(bdrv_dirty_bitmap_add(blk_bs(blk), "b0", 0,
                                           BDRV_BITMAP_ADD_PERSISTENT,
                                           &error_abort));
    g_assert_cmpint(blk_pwrite(blk, 1 * MiB, sizeof(buf), buf, 0), ==, 0);
    blk_unref(blk);
}

static uint64_t be_at(int fd, int64_t off, int size)
{
    uint8_t b[8] = { 0 };
    uint64_t v = 0;

    g_assert_cmpint(pread(fd, b, size, off), ==, size);
    for (int i = 0; i < size; i++) {
        v = (v << 8) | b[i];
    }
    return v;
}

static void put_be(int fd, int64_t off, int size, uint64_t v)
{
    uint8_t b[8];

    for (int i = size - 1; i >= 0; i--) {
        b[i] = v & 0xff;
        v >>= 8;
    }
    g_assert_cmpint(pwrite(fd, b, size, off), ==, size);
}

static BitmapLayout find_layout(int fd)
{
    BitmapLayout l = { 0 };
    int64_t off = be_at(fd, 100, 4);    /* header_length */

    for (;;) {
        uint32_t magic = be_at(fd, off, 4);
        uint32_t len = be_at(fd, off + 4, 4);

        g_assert_cmpuint(magic, !=, 0);
        if (magic == 0x23852875) {
            l.ext = off + 8;
            break;
        }
        off += 8 + ROUND_UP(len, 8);
    }
    l.dir = be_at(fd, l.ext + 16, 8);
    l.table = be_at(fd, l.dir, 8);
    return l;
}

typedef struct Corruption {
    const char *name;
    /* the field and its new value */
    enum { AT_EXT, AT_DIR, AT_TABLE } where;
    int64_t offset;
    int size;
    uint64_t value;
    const char *error;      /* a part of the open's error */
} Corruption;

static const Corruption corruptions[] = {
    { "count past QEMU's limit", AT_EXT, 0, 4, 70000, "bitmaps, exceeding" },
    { "count the directory cannot hold", AT_EXT, 0, 4, 9,
      "cannot hold 9 bitmaps" },
    { "directory size past the limit", AT_EXT, 8, 8, 1ULL << 40,
      "exceeds the maximum" },
    { "directory size too small", AT_EXT, 8, 8, 8, "cannot hold" },
    { "directory offset unaligned", AT_EXT, 16, 8, 0x10008,
      "invalid bitmap directory offset" },
    { "directory past the end of the file", AT_EXT, 16, 8, 1ULL << 40,
      "past the end of the file" },
    { "granularity 2^63", AT_DIR, 17, 1, 63, "granularity out of range" },
    { "granularity 2^8", AT_DIR, 17, 1, 8, "granularity out of range" },
    { "table offset unaligned", AT_DIR, 0, 8, 512, "not cluster aligned" },
    { "table past the end of the file", AT_DIR, 0, 8, 1ULL << 40,
      "table past the end of the file" },
    { "table size 2^32 - 1", AT_DIR, 8, 4, 0xffffffff,
      "table size out of range" },
    { "table size 0", AT_DIR, 8, 4, 0, "table size out of range" },
    { "name size 0", AT_DIR, 18, 2, 0, "is corrupted" },
    { "name size past the directory", AT_DIR, 18, 2, 60000, "is corrupted" },
    { "extra data past the directory", AT_DIR, 20, 4, 0x7fffffff,
      "is corrupted" },
    { "reserved flags", AT_DIR, 12, 4, 0x80, "reserved flags set" },
    { "unknown type", AT_DIR, 16, 1, 2, "unknown type" },
    { "table entry with reserved bits", AT_TABLE, 0, 8, 0x12345,
      "invalid table entry 0" },
    { "table entry past the end of the file", AT_TABLE, 0, 8, 1ULL << 40,
      "points past the end of the file" },
};

static void test_hostile(gconstpointer data)
{
    const Corruption *c = data;
    g_autofree char *path = img_path("hostile.qcow2");
    BitmapLayout l;
    BlockBackend *blk;
    BdrvCheckResult res = { 0 };
    Error *err = NULL;
    int fd;

    make_image(path);
    fd = open(path, O_RDWR);
    g_assert_cmpint(fd, >=, 0);
    l = find_layout(fd);
    put_be(fd, (c->where == AT_EXT ? l.ext : c->where == AT_DIR ? l.dir : l.table) +
               c->offset, c->size, c->value);
    close(fd);

    /* read-only and read-write opens refuse it, naming what is wrong */
    for (int flags = 0; flags <= BDRV_O_RDWR; flags += BDRV_O_RDWR) {
        g_assert_null(open_img(path, flags, &err));
        g_assert_nonnull(err);
        if (!strstr(error_get_pretty(err), c->error)) {
            g_error("%s: '%s' does not say '%s'", c->name,
                    error_get_pretty(err), c->error);
        }
        error_free(err);
        err = NULL;
    }
    /* check opens it and reports a corruption (or refuses the header) */
    blk = open_img(path, BDRV_O_CHECK, &err);
    if (blk) {
        g_assert_cmpint(bdrv_check(blk_bs(blk), &res, 0), ==, 0);
        g_assert_cmpint(res.corruptions, >, 0);
        blk_unref(blk);
    } else {
        g_assert_nonnull(strstr(error_get_pretty(err), c->error));
        error_free(err);
    }
    unlink(path);
}

/* A stored bitmap reads back as it was; a disabled one stays disabled. */
static void test_round_trip(void)
{
    g_autofree char *path = img_path("round.qcow2");
    BlockBackend *blk;
    BdrvDirtyBitmap *b0, *b1;
    g_autofree char *sum0 = NULL, *sum1 = NULL;

    make_image(path);
    blk = open_img(path, BDRV_O_RDWR, &error_abort);
    b0 = bdrv_find_dirty_bitmap(blk_bs(blk), "b0");
    g_assert_nonnull(b0);
    g_assert_true(bdrv_dirty_bitmap_get(b0, 1 * MiB));
    g_assert_cmpint(bdrv_get_dirty_count(b0), ==, 64 * KiB);
    b1 = bdrv_dirty_bitmap_add(blk_bs(blk), "b1", 512,
                               BDRV_BITMAP_ADD_PERSISTENT |
                               BDRV_BITMAP_ADD_DISABLED, &error_abort);
    bdrv_set_dirty_bitmap(b1, 0, IMG_SIZE);
    bdrv_reset_dirty_bitmap(b1, 512, 1024);
    sum0 = bdrv_dirty_bitmap_sha256(b0);
    sum1 = bdrv_dirty_bitmap_sha256(b1);
    blk_unref(blk);

    blk = open_img(path, 0, &error_abort);
    b0 = bdrv_find_dirty_bitmap(blk_bs(blk), "b0");
    b1 = bdrv_find_dirty_bitmap(blk_bs(blk), "b1");
    g_assert_true(b0 && b1);
    g_assert_true(bdrv_dirty_bitmap_readonly(b0));
    g_assert_true(bdrv_dirty_bitmap_enabled(b0));
    g_assert_false(bdrv_dirty_bitmap_enabled(b1));
    g_assert_cmpint(bdrv_dirty_bitmap_granularity(b1), ==, 512);
    g_assert_cmpint(bdrv_get_dirty_count(b1), ==, IMG_SIZE - 1024);
    {
        g_autofree char *s0 = bdrv_dirty_bitmap_sha256(b0);
        g_autofree char *s1 = bdrv_dirty_bitmap_sha256(b1);

        g_assert_cmpstr(s0, ==, sum0);
        g_assert_cmpstr(s1, ==, sum1);
    }
    blk_unref(blk);
    unlink(path);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    test_dir = g_dir_make_tmp("test-dirty-bitmap-qcow2-XXXXXX", NULL);
    g_assert_nonnull(test_dir);
    g_test_add_func("/dirty-bitmap-qcow2/round-trip", test_round_trip);
    for (size_t i = 0; i < G_N_ELEMENTS(corruptions); i++) {
        g_autofree char *name = g_strdup_printf("/dirty-bitmap-qcow2/"
                                                "hostile/%s",
                                                corruptions[i].name);

        g_strdelimit(name + strlen("/dirty-bitmap-qcow2/hostile/"), " /",
                     '-');
        g_test_add_data_func(name, &corruptions[i], test_hostile);
    }
    ret = g_test_run();
    rmdir(test_dir);
    g_free(test_dir);
    return ret;
}
