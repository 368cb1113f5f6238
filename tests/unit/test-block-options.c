/*
 * The option parsers every node and tool shares (block/block-options.c)
 * and the blkdebug event names (block/debug-events.c).
 */
#include "block/block-common.h"
#include "block/debug-events.h"

static void test_cache_modes(void)
{
    /* the table of DESIGN.md: write cache, O_DIRECT, flushes */
    static const struct {
        const char *mode;
        int flags;
        bool writethrough;
    } table[] = {
        { "writeback",    0,               false },
        { "writethrough", 0,               true  },
        { "none",         BDRV_O_NOCACHE,  false },
        { "off",          BDRV_O_NOCACHE,  false },
        { "directsync",   BDRV_O_NOCACHE,  true  },
        { "unsafe",       BDRV_O_NO_FLUSH, false },
    };

    for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
        /* the old cache bits go, the other flags stay */
        int flags = BDRV_O_RDWR | BDRV_O_CACHE_MASK;
        bool wt = !table[i].writethrough;

        g_assert_cmpint(bdrv_parse_cache_mode(table[i].mode, &flags, &wt),
                        ==, 0);
        g_assert_cmpint(flags, ==, BDRV_O_RDWR | table[i].flags);
        g_assert_cmpint(wt, ==, table[i].writethrough);
    }
    {
        int flags = BDRV_O_NOCACHE;
        bool wt = true;

        g_assert_cmpint(bdrv_parse_cache_mode("fast", &flags, &wt), ==, -1);
        g_assert_cmpint(flags, ==, BDRV_O_NOCACHE);
        g_assert_true(wt);
    }
}

static void test_aio_and_discard(void)
{
    int flags = BDRV_O_RDWR;

    g_assert_cmpint(bdrv_parse_aio("native", &flags), ==, 0);
    g_assert_cmpint(flags, ==, BDRV_O_RDWR | BDRV_O_NATIVE_AIO);
    g_assert_cmpint(bdrv_parse_aio("io_uring", &flags), ==, 0);
    g_assert_cmpint(flags, ==, BDRV_O_RDWR | BDRV_O_IO_URING);
    g_assert_cmpint(bdrv_parse_aio("threads", &flags), ==, 0);
    g_assert_cmpint(flags, ==, BDRV_O_RDWR);
    g_assert_cmpint(bdrv_parse_aio("posix", &flags), ==, -1);

    g_assert_cmpint(bdrv_parse_discard_flags("unmap", &flags), ==, 0);
    g_assert_cmpint(flags, ==, BDRV_O_RDWR | BDRV_O_UNMAP);
    g_assert_cmpint(bdrv_parse_discard_flags("off", &flags), ==, 0);
    g_assert_cmpint(flags, ==, BDRV_O_RDWR);
    g_assert_cmpint(bdrv_parse_discard_flags("on", &flags), ==, 0);
    g_assert_cmpint(bdrv_parse_discard_flags("ignore", &flags), ==, 0);
    g_assert_cmpint(flags, ==, BDRV_O_RDWR);
    g_assert_cmpint(bdrv_parse_discard_flags("maybe", &flags), ==, -1);
}

static void test_perm_names(void)
{
    g_autofree char *all = bdrv_perm_names(BLK_PERM_ALL);
    g_autofree char *none = bdrv_perm_names(0);

    g_assert_cmpstr(bdrv_perm_name(BLK_PERM_CONSISTENT_READ), ==,
                    "consistent read");
    g_assert_cmpstr(bdrv_perm_name(BLK_PERM_WRITE), ==, "write");
    g_assert_cmpstr(bdrv_perm_name(BLK_PERM_WRITE_UNCHANGED), ==,
                    "write unchanged");
    g_assert_cmpstr(bdrv_perm_name(BLK_PERM_RESIZE), ==, "resize");
    g_assert_null(bdrv_perm_name(BLK_PERM_WRITE | BLK_PERM_RESIZE));
    g_assert_cmpstr(all, ==, "consistent read, write, write unchanged, "
                    "resize");
    g_assert_cmpstr(none, ==, "");
    g_assert_cmpstr(PreallocMode_str[PREALLOC_MODE_FALLOC], ==, "falloc");
    g_assert_cmpstr(PreallocMode_str[PREALLOC_MODE_METADATA], ==,
                    "metadata");
}

static void test_debug_event_names(void)
{
    g_assert_cmpstr(blkdebug_event_name(BLKDBG_L1_UPDATE), ==, "l1_update");
    g_assert_cmpstr(blkdebug_event_name(BLKDBG_NONE), ==, "none");
    g_assert_null(blkdebug_event_name(BLKDBG__MAX));
    g_assert_cmpint(blkdebug_event_lookup("refblock_alloc"), ==,
                    BLKDBG_REFBLOCK_ALLOC);
    g_assert_cmpint(blkdebug_event_lookup("no_such_event"), ==, -1);
    for (int i = 0; i < BLKDBG__MAX; i++) {
        g_assert_cmpint(blkdebug_event_lookup(blkdebug_event_name(i)), ==, i);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/block-options/cache-modes", test_cache_modes);
    g_test_add_func("/block-options/aio-and-discard", test_aio_and_discard);
    g_test_add_func("/block-options/perm-names", test_perm_names);
    g_test_add_func("/block-options/debug-event-names",
                    test_debug_event_names);
    return g_test_run();
}
