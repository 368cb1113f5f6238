/*
 * The rbd driver's options without a cluster: QEMU's legacy file names
 * (block/rbd-filename.c) become the options QEMU's driver gets, with
 * escapes undone and librados's own pairs kept in order; the blockdev
 * options (block/rbd-connect.c) become what librados is told; malformed
 * names and options are refused with QEMU's message or one that names
 * the offending part.
 */
#include "util/osdep.h"
#include "block/rbd.h"
#include "util/json.h"

typedef struct NameCase {
    const char *filename;
    const char *pool;
    const char *ns;             /* NULL: no namespace option */
    const char *image;
    const char *snapshot;
    const char *conf;
    const char *user;
    const char *pairs;          /* RBD_OPT_KEYVALUE_PAIRS, or NULL */
} NameCase;

static const NameCase good_names[] = {
    { "rbd:rbd/img", "rbd", NULL, "img", NULL, NULL, NULL, NULL },
    { "rbd:p/ns/img@snap", "p", "ns", "img", "snap", NULL, NULL, NULL },
    { "rbd:p/img:conf=/etc/ceph/c.conf:id=admin", "p", NULL, "img", NULL,
      "/etc/ceph/c.conf", "admin", NULL },
    { "rbd:p/img:mon_host=10.0.0.1\\:6789\\;10.0.0.2:auth_supported=none",
      "p", NULL, "img", NULL, NULL, NULL,
      "[\"mon_host\",\"10.0.0.1:6789;10.0.0.2\",\"auth_supported\","
      "\"none\"]" },
    /* an '@' after the image part names no snapshot (QEMU's would) */
    { "rbd:p/img:conf=/etc/ceph@site/c.conf", "p", NULL, "img", NULL,
      "/etc/ceph@site/c.conf", NULL, NULL },
    /* escapes make ':', '@' and '/' part of a name */
    { "rbd:p\\:x/im\\@g\\/h", "p:x", NULL, "im@g/h", NULL, NULL, NULL,
      NULL },
    { "rbd:p/img@s\\:1:key=AQ==", "p", NULL, "img", "s:1", NULL, NULL,
      "[\"key\",\"AQ==\"]" },
};

static void check_str(QDict *o, const char *key, const char *want)
{
    g_assert_cmpstr(qdict_get_try_str(o, key), ==, want);
}

static void test_good_names(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(good_names); i++) {
        const NameCase *c = &good_names[i];
        g_autoptr(QDict) o = qdict_new();
        Error *err = NULL;

        qrbd_parse_filename(c->filename, o, &err);
        g_assert_null(err);
        check_str(o, "pool", c->pool);
        check_str(o, "namespace", c->ns);
        check_str(o, "image", c->image);
        check_str(o, "snapshot", c->snapshot);
        check_str(o, "conf", c->conf);
        check_str(o, "user", c->user);
        check_str(o, RBD_OPT_KEYVALUE_PAIRS, c->pairs);
    }
}

typedef struct BadName {
    const char *filename;
    const char *error;
} BadName;

static const BadName bad_names[] = {
    { "rbd:rbd", "Pool name is required" },
    { "rbd:/img", "Pool name is required" },
    { "rbd:rbd/", "rbd file name 'rbd:rbd/' names no image (rbd:POOL/IMAGE)" },
    { "rbd:rbd/img:conf", "conf option conf has no value" },
    { "rbd:rbd/img:id=a:mon_host", "conf option mon_host has no value" },
};

static void test_bad_names(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_names); i++) {
        g_autoptr(QDict) o = qdict_new();
        Error *err = NULL;

        qrbd_parse_filename(bad_names[i].filename, o, &err);
        g_assert_nonnull(err);
        g_assert_cmpstr(error_get_pretty(err), ==, bad_names[i].error);
        error_free(err);
    }
}

static void test_name_and_options(void)
{
    g_autoptr(QDict) o = qdict_new();
    Error *err = NULL;

    qdict_put_str(o, "image", "other");
    qrbd_parse_filename("rbd:rbd/img", o, &err);
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==, "rbd file name 'rbd:rbd/img' "
                    "cannot be combined with the option 'image'");
    error_free(err);
}

/* Parses @opts (key=value,...) as the node's options; false on error. */
static bool parse_opts(const char *opts, RBDConnectOpts *o, Error **errp)
{
    g_autoptr(QDict) d = qdict_new();
    g_auto(GStrv) kv = g_strsplit(opts, ",", -1);
    bool ok;

    for (char **p = kv; *p; p++) {
        g_auto(GStrv) pair = g_strsplit(*p, "=", 2);

        qdict_put_str(d, pair[0], pair[1]);
    }
    ok = qrbd_connect_opts_parse(d, o, false, errp);
    /* everything the driver knows was taken */
    if (ok && qdict_size(d)) {
        g_error("left over: %s", qdict_entry_key(qdict_first(d)));
    }
    return ok;
}

static void test_blockdev_options(void)
{
    RBDConnectOpts o = {0};
    Error *err = NULL;

    g_assert_true(parse_opts("pool=p,image=i,user=u,server.0.host=10.0.0.1,"
                             "server.0.port=3300,server.1.host=::1,"
                             "server.1.port=6789,auth-client-required.0=cephx,"
                             "auth-client-required.1=none", &o, &err));
    g_assert_cmpstr(o.mon_host, ==, "10.0.0.1:3300,[::1]:6789");
    g_assert_cmpstr(o.auth_client_required, ==, "cephx;none");
    g_assert_cmpstr(o.user, ==, "u");
    g_assert_cmpstr(o.namespace, ==, "");
    qrbd_connect_opts_free(&o);

}

/* The pairs of a legacy name, as QEMU's json: file names carry them. */
static void test_keyvalue_pairs(void)
{
    static const struct {
        const char *json;
        const char *error;      /* NULL: accepted */
    } cases[] = {
        { "[\"mon_host\", \"h\", \"key\", \"AQ==\"]", NULL },
        { "[\"mon_host\"]", "=keyvalue-pairs must be a JSON array of keys "
          "and values: [\"mon_host\"]" },
        { "[1, 2]", "=keyvalue-pairs must be a JSON array of strings: "
          "[1, 2]" },
        { "{\"a\": \"b\"}", "=keyvalue-pairs must be a JSON array of keys "
          "and values: {\"a\": \"b\"}" },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(QDict) d = qdict_new();
        RBDConnectOpts o = {0};
        Error *err = NULL;
        bool ok;

        qdict_put_str(d, "pool", "p");
        qdict_put_str(d, "image", "i");
        qdict_put_str(d, RBD_OPT_KEYVALUE_PAIRS, cases[i].json);
        ok = qrbd_connect_opts_parse(d, &o, false, &err);
        if (cases[i].error) {
            g_assert_false(ok);
            g_assert_cmpstr(error_get_pretty(err), ==, cases[i].error);
            error_free(err);
        } else {
            g_assert_true(ok);
            g_assert_cmpstr(o.keyvalue[0], ==, "mon_host");
            g_assert_cmpstr(o.keyvalue[3], ==, "AQ==");
            g_assert_null(o.keyvalue[4]);
        }
        qrbd_connect_opts_free(&o);
    }
}

typedef struct BadOpts {
    const char *opts;
    const char *error;
} BadOpts;

static const BadOpts bad_opts[] = {
    { "image=i", "Parameter 'pool' is missing" },
    { "pool=p", "Parameter 'image' is missing" },
    { "pool=p,image=i,server.0.host=h",
      "Parameter 'server.0.port' is missing" },
    { "pool=p,image=i,server.1.host=h,server.1.port=1",
      "server: give the monitors as server.0.host, server.0.port, "
      "server.1.host, ... (only host and port, numbered from 0 without "
      "gaps)" },
    { "pool=p,image=i,auth-client-required.0=krb",
      "Parameter 'auth-client-required.0' does not accept value 'krb' "
      "(cephx or none)" },
    { "pool=p,image=i,key-secret=sec0", "No secret with id 'sec0'" },
};

static void test_bad_options(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_opts); i++) {
        RBDConnectOpts o = {0};
        Error *err = NULL;

        g_assert_false(parse_opts(bad_opts[i].opts, &o, &err));
        g_assert_nonnull(err);
        g_assert_cmpstr(error_get_pretty(err), ==, bad_opts[i].error);
        error_free(err);
        qrbd_connect_opts_free(&o);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/rbd/filename/good", test_good_names);
    g_test_add_func("/rbd/filename/bad", test_bad_names);
    g_test_add_func("/rbd/filename/with-options", test_name_and_options);
    g_test_add_func("/rbd/options/blockdev", test_blockdev_options);
    g_test_add_func("/rbd/options/bad", test_bad_options);
    g_test_add_func("/rbd/options/keyvalue-pairs", test_keyvalue_pairs);
    return g_test_run();
}
