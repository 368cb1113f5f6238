/*
 * block/driver-missing.c: a stub driver, compiled where its library was
 * not found, fails every way in (a file name, an open, a create) with
 * the message that names the driver and what to install.  The stubs
 * themselves are only built without the library, so this drives the
 * callbacks through a table of its own, as a stub's table names them.
 */
#include "block/block_int.h"

static const BlockDriver test_ssh_stub = {
    .format_name            = "ssh",
    .protocol_name          = "ssh",
    .bdrv_parse_filename    = bdrv_missing_parse_filename,
    .bdrv_open              = bdrv_missing_open,
    .bdrv_co_create_opts    = bdrv_missing_co_create_opts,
    .bdrv_getlength         = bdrv_missing_getlength,
};

static const BlockDriver test_rbd_stub = {
    .format_name            = "rbd",
    .protocol_name          = "rbd",
    .bdrv_open              = bdrv_missing_open,
    .bdrv_co_create_opts    = bdrv_missing_co_create_opts,
};

#define SSH_MISSING "ssh support is not built in: libssh was not found " \
                    "when qblock was configured (install libssh-dev, " \
                    "then reconfigure)"
#define RBD_MISSING "rbd support is not built in: librbd and librados " \
                    "were not found when qblock was configured (install " \
                    "librbd-dev and librados-dev, then reconfigure)"

static void test_parse_filename(void)
{
    QDict *options = qdict_new();
    Error *err = NULL;

    test_ssh_stub.bdrv_parse_filename("ssh://user@host/disk.img", options,
                                      &err);
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==, SSH_MISSING);
    error_free(err);
    qdict_unref(options);
}

static void test_open(void)
{
    BlockDriverState bs = { .drv = &test_rbd_stub };
    Error *err = NULL;

    g_assert_cmpint(test_rbd_stub.bdrv_open(&bs, NULL, 0, &err), ==,
                    -ENOTSUP);
    g_assert_cmpstr(error_get_pretty(err), ==, RBD_MISSING);
    error_free(err);

    bs.drv = &test_ssh_stub;
    g_assert_cmpint(test_ssh_stub.bdrv_getlength(&bs), ==, -ENOMEDIUM);
}

static void test_create(void)
{
    Error *err = NULL;

    g_assert_cmpint(test_ssh_stub.bdrv_co_create_opts(&test_ssh_stub,
                                                      "ssh://h/x", NULL,
                                                      &err), ==, -ENOTSUP);
    g_assert_cmpstr(error_get_pretty(err), ==, SSH_MISSING);
    error_free(err);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/driver-missing/parse-filename", test_parse_filename);
    g_test_add_func("/driver-missing/open", test_open);
    g_test_add_func("/driver-missing/create", test_create);
    return g_test_run();
}
