/*
 * The ssh driver's options without a server: ssh:// file names
 * (block/ssh-options.c) become the flat options QEMU's driver makes of
 * them; those, or the current spelling (server.*, host-key-check.*),
 * become what the connection uses, with QEMU's defaults (port 22, the
 * local user, known_hosts); malformed names and options are refused with
 * QEMU's message or one that names the offending part.
 */
#include "util/osdep.h"
#include "block/ssh.h"

typedef struct NameCase {
    const char *filename;
    const char *user;
    const char *host;
    const char *port;
    const char *path;
    const char *check;
} NameCase;

static const NameCase good_names[] = {
    { "ssh://example.org/img", NULL, "example.org", "22", "/img", NULL },
    { "ssh://bob@10.0.0.1:2222/srv/disk.qcow2", "bob", "10.0.0.1", "2222",
      "/srv/disk.qcow2", NULL },
    { "ssh://h/a%20b?host_key_check=no", NULL, "h", "22", "/a b", "no" },
    { "ssh://[::1]:22/x?host_key_check=sha256:0a:0B", NULL, "::1", "22",
      "/x", "sha256:0a:0B" },
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

        qssh_parse_filename(c->filename, o, &err);
        g_assert_null(err);
        check_str(o, "user", c->user);
        check_str(o, "host", c->host);
        check_str(o, "port", c->port);
        check_str(o, "path", c->path);
        check_str(o, "host_key_check", c->check);
    }
}

typedef struct BadName {
    const char *filename;
    const char *error;
} BadName;

static const BadName bad_names[] = {
    { "ssh:///img", "missing hostname in URI" },
    { "ssh://host", "missing remote path in URI" },
    { "sftp://host/img", "URI scheme must be 'ssh'" },
    { "ssh://host/img?foo=bar",
      "unsupported parameter 'foo' in URI (only host_key_check is "
      "allowed)" },
};

static void test_bad_names(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_names); i++) {
        g_autoptr(QDict) o = qdict_new();
        Error *err = NULL;

        qssh_parse_filename(bad_names[i].filename, o, &err);
        g_assert_nonnull(err);
        g_assert_cmpstr(error_get_pretty(err), ==, bad_names[i].error);
        error_free(err);
    }
}

/* A file name and options of its own cannot both say where. */
static void test_name_and_options(void)
{
    g_autoptr(QDict) o = qdict_new();
    Error *err = NULL;

    qdict_put_str(o, "user", "alice");
    qssh_parse_filename("ssh://h/img", o, &err);
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(error_get_pretty(err), "cannot be used at the "
                            "same time as a file option"));
    error_free(err);
}

/* Parses "k=v,k=v" into options and then into @so. */
static bool parse(const char *text, SSHConnectOpts *so, Error **errp)
{
    g_autoptr(QDict) o = keyval_parse_flat(text, NULL, &error_abort);

    memset(so, 0, sizeof(*so));
    return qssh_opts_parse(o, so, errp);
}

static void test_options(void)
{
    SSHConnectOpts so;

    /* the older spelling; the port a number; defaults filled in */
    g_assert_true(parse("host=h,port=0,path=/p", &so, &error_abort));
    g_assert_cmpstr(so.host, ==, "h");
    g_assert_cmpstr(so.port, ==, "0");
    g_assert_cmpstr(so.user, ==, g_get_user_name());
    g_assert_cmpint(so.key_mode, ==, QSSH_HOST_KEY_KNOWN_HOSTS);
    g_assert_null(so.legacy_key_check);
    qssh_opts_free(&so);

    g_assert_true(parse("server.host=h,server.port=22,path=/p,user=u,"
                        "host-key-check.mode=hash,host-key-check.type=sha1,"
                        "host-key-check.hash=ab", &so, &error_abort));
    g_assert_cmpstr(so.port, ==, "22");
    g_assert_cmpstr(so.user, ==, "u");
    g_assert_cmpint(so.key_mode, ==, QSSH_HOST_KEY_HASH);
    g_assert_cmpint(so.hash_type, ==, QSSH_HASH_SHA1);
    g_assert_cmpstr(so.hash, ==, "ab");
    qssh_opts_free(&so);

    g_assert_true(parse("host=h,path=/p,host_key_check=md5:cd", &so,
                        &error_abort));
    g_assert_cmpint(so.key_mode, ==, QSSH_HOST_KEY_HASH);
    g_assert_cmpint(so.hash_type, ==, QSSH_HASH_MD5);
    g_assert_cmpstr(so.hash, ==, "cd");
    g_assert_cmpstr(so.legacy_key_check, ==, "md5:cd");
    qssh_opts_free(&so);

    g_assert_true(parse("host=h,path=/p,host_key_check=no", &so,
                        &error_abort));
    g_assert_cmpint(so.key_mode, ==, QSSH_HOST_KEY_NONE);
    qssh_opts_free(&so);
}

static const BadName bad_options[] = {
    { "host=h,port=0.42,path=/p", "Parameter 'port' expects a number" },
    { "port=22,path=/p", "port may not be used without host" },
    { "path=/p", "Parameter 'server' is missing" },
    { "server.host=h,path=/p", "Parameter 'server.port' is missing" },
    { "host=h", "Parameter 'path' is missing" },
    { "host=h,path=/p,host_key_check=maybe",
      "unknown host_key_check setting (maybe)" },
    { "server.host=h,server.port=22,path=/p,host-key-check.mode=hash,"
      "host-key-check.hash=ab", "Parameter 'host-key-check.type' is "
      "missing" },
    { "server.host=h,server.port=22,path=/p,"
      "host-key-check.mode=sometimes",
      "Parameter 'host-key-check.mode' does not accept value 'sometimes'" },
};

static void test_bad_options(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_options); i++) {
        SSHConnectOpts so;
        Error *err = NULL;

        g_assert_false(parse(bad_options[i].filename, &so, &err));
        g_assert_nonnull(err);
        g_assert_cmpstr(error_get_pretty(err), ==, bad_options[i].error);
        error_free(err);
        qssh_opts_free(&so);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/ssh/filename/good", test_good_names);
    g_test_add_func("/ssh/filename/bad", test_bad_names);
    g_test_add_func("/ssh/filename/with-options", test_name_and_options);
    g_test_add_func("/ssh/options/good", test_options);
    g_test_add_func("/ssh/options/bad", test_bad_options);
    return g_test_run();
}
