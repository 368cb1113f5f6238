/*
 * block/block.c and the request path: a node's length is rounded up to
 * whole sectors and to alignments without overflow, also next to
 * INT64_MAX.  As QEMU does, open refuses a node longer than
 * BDRV_MAX_LENGTH ("Could not refresh total sector count: File too
 * large"); a node of exactly that length opens, reports it and serves
 * requests at its very end.  Built with -fsanitize=undefined, the sizes
 * near INT64_MAX made the sector round-up in bdrv_getlength() overflow.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

static BlockBackend *open_null(const char *options, Error **errp)
{
    QDict *opts = keyval_parse(options, NULL, &error_abort);

    return blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, errp);
}

static void check_refused(const char *fmt, int64_t size)
{
    g_autofree char *options = g_strdup_printf(fmt, size);
    Error *err = NULL;
    BlockBackend *blk = open_null(options, &err);

    if (blk) {
        g_test_message("%s opened, length %" PRId64, options,
                       blk_getlength(blk));
        blk_unref(blk);
    }
    g_assert_null(blk);
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "Could not refresh total sector count: "
                            "File too large"));
    error_free(err);
}

/* INT64_MAX and everything between it and BDRV_MAX_LENGTH is refused. */
static void test_too_long_refused(void)
{
    static const int64_t sizes[] = {
        INT64_MAX,
        INT64_MAX - 1,
        INT64_MAX - 511,                /* rounds up to 2^63 */
        INT64_MAX - 512,
        BDRV_MAX_LENGTH + 1,            /* rounds up past the limit */
        BDRV_MAX_LENGTH + BDRV_SECTOR_SIZE,
    };

    for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
        check_refused("driver=null-co,size=%" PRId64, sizes[i]);
        /* a format above it: the protocol's open already fails */
        check_refused("driver=raw,file.driver=null-co,file.size=%" PRId64,
                      sizes[i]);
    }
}

/* The longest node there can be opens and works at its very end. */
static void test_max_length(void)
{
    g_autofree char *options = g_strdup_printf(
        "driver=raw,file.driver=null-co,file.read-zeroes=on,"
        "file.size=%" PRId64, (int64_t)BDRV_MAX_LENGTH);
    BlockBackend *blk = open_null(options, &error_abort);
    BlockDriverState *bs = blk_bs(blk);
    int64_t last = BDRV_MAX_LENGTH - 4096;
    int64_t pnum, map;
    uint8_t buf[4096];

    g_assert_cmpint(blk_getlength(blk), ==, BDRV_MAX_LENGTH);
    g_assert_cmpint(bdrv_getlength(bs->file->bs), ==, BDRV_MAX_LENGTH);

    memset(buf, 0xa5, sizeof(buf));
    g_assert_cmpint(blk_pread(blk, last, sizeof(buf), buf, 0), ==, 0);
    g_assert_cmpint(buf[0], ==, 0);
    g_assert_cmpint(buf[sizeof(buf) - 1], ==, 0);
    g_assert_cmpint(blk_pwrite(blk, last, sizeof(buf), buf, 0), ==, 0);
    /* one byte past the end, and a length reaching past INT64_MAX */
    g_assert_cmpint(blk_pread(blk, BDRV_MAX_LENGTH, 1, buf, 0), ==, -EIO);
    g_assert_cmpint(blk_pread(blk, last, INT64_MAX - 4096, buf, 0), <, 0);

    /* block status at the end, where aligning the range up is closest */
    g_assert_cmpint(bdrv_block_status(bs, last, INT64_MAX - last, &pnum,
                                      &map, NULL) & BDRV_BLOCK_EOF,
                    ==, BDRV_BLOCK_EOF);
    g_assert_cmpint(pnum, ==, 4096);
    blk_unref(blk);
}

/* A length that is no whole number of sectors is rounded up, not down. */
static void test_round_up_near_limit(void)
{
    g_autofree char *options = g_strdup_printf(
        "driver=null-co,size=%" PRId64,
        (int64_t)(BDRV_MAX_LENGTH - BDRV_SECTOR_SIZE + 1));
    BlockBackend *blk = open_null(options, &error_abort);

    g_assert_cmpint(blk_getlength(blk), ==, BDRV_MAX_LENGTH);
    blk_unref(blk);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    g_test_add_func("/block-length/too-long-refused", test_too_long_refused);
    g_test_add_func("/block-length/max-length", test_max_length);
    g_test_add_func("/block-length/round-up-near-limit",
                    test_round_up_near_limit);
    return g_test_run();
}
