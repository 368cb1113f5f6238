/*
 * The NBD client's file names (block/nbd-uri.c): every form QEMU accepts
 * becomes the same server.* and export options QEMU's driver gets, and
 * malformed names are refused with a message naming the file name.
 */
#include "util/osdep.h"
#include "block/nbd-client.h"

typedef struct NameCase {
    const char *filename;
    const char *type;
    const char *host;
    const char *port;
    const char *path;
    const char *export;         /* NULL: no export option (the default) */
} NameCase;

static const NameCase good_names[] = {
    /* a URI's default port is no port option: QEMU's file names omit it */
    { "nbd://localhost/exp", "inet", "localhost", NULL, NULL, "exp" },
    { "nbd://localhost:10809/exp", "inet", "localhost", NULL, NULL, "exp" },
    { "nbd://127.0.0.1:10900/a/b", "inet", "127.0.0.1", "10900", NULL,
      "a/b" },
    { "nbd://host", "inet", "host", NULL, NULL, NULL },
    { "nbd://host/", "inet", "host", NULL, NULL, NULL },
    { "nbd+tcp://[::1]:99/e", "inet", "::1", "99", NULL, "e" },
    { "nbd://h/with%20space", "inet", "h", NULL, NULL, "with space" },
    { "nbd+unix:///exp?socket=/tmp/s.sock", "unix", NULL, NULL,
      "/tmp/s.sock", "exp" },
    { "nbd+unix://?socket=/tmp/s", "unix", NULL, NULL, "/tmp/s", NULL },
    { "nbd+unix:///?socket=/a%20b", "unix", NULL, NULL, "/a b", NULL },
    { "nbd:unix:/tmp/s.sock", "unix", NULL, NULL, "/tmp/s.sock", NULL },
    { "nbd:unix:/tmp/s.sock:exportname=e1", "unix", NULL, NULL,
      "/tmp/s.sock", "e1" },
    { "nbd:localhost:10809", "inet", "localhost", "10809", NULL, NULL },
    { "nbd:127.0.0.1:2000:exportname=x", "inet", "127.0.0.1", "2000", NULL,
      "x" },
    { "nbd:[::1]:2000", "inet", "::1", "2000", NULL, NULL },
};

static void test_good_names(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(good_names); i++) {
        const NameCase *c = &good_names[i];
        g_autoptr(QDict) opts = qdict_new();
        Error *err = NULL;

        nbd_client_parse_filename(c->filename, opts, &err);
        g_assert_null(err);
        g_assert_cmpstr(qdict_get_try_str(opts, NBD_OPT_KEY_SERVER_TYPE), ==,
                        c->type);
        g_assert_cmpstr(qdict_get_try_str(opts, NBD_OPT_KEY_SERVER_HOST), ==,
                        c->host);
        g_assert_cmpstr(qdict_get_try_str(opts, NBD_OPT_KEY_SERVER_PORT), ==,
                        c->port);
        g_assert_cmpstr(qdict_get_try_str(opts, NBD_OPT_KEY_SERVER_PATH), ==,
                        c->path);
        g_assert_cmpstr(qdict_get_try_str(opts, NBD_OPT_KEY_EXPORT), ==,
                        c->export);
    }
}

static const char *const bad_names[] = {
    "nbd+unix:///exp",                  /* no socket */
    "nbd+unix:///exp?socket=",          /* empty socket */
    "nbd+unix:///e?socket=/s&x=1",      /* a parameter too many */
    "nbd+unix://host/e?socket=/s",      /* a host for a socket */
    "nbd:///exp",                       /* no host */
    "nbd://host/e?socket=/s",           /* a query for TCP */
    "nbd://user@host/e",                /* a user */
    "nbd+ssh://host/e",                 /* unknown scheme */
    "nbd:unix:",                        /* no socket path */
    "nbd:localhost",                    /* no port */
    "nbd:localhost:",                   /* empty port */
    "nbd",                              /* nothing at all */
};

static void test_bad_names(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_names); i++) {
        g_autoptr(QDict) opts = qdict_new();
        Error *err = NULL;

        nbd_client_parse_filename(bad_names[i], opts, &err);
        g_assert_nonnull(err);
        /* The message names what the user typed. */
        g_assert_nonnull(strstr(error_get_pretty(err), bad_names[i]));
        error_free(err);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/nbd-client/filename/good", test_good_names);
    g_test_add_func("/nbd-client/filename/bad", test_bad_names);
    return g_test_run();
}
