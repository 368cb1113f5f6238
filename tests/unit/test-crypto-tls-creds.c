/*
 * The TLS credentials types (crypto/tls-creds.c): what --object checks
 * when it creates them (the directory and its files, named in errors as
 * QEMU names them), lookups by endpoint, and deletion refused while a
 * server or a node holds them.  The handshake itself is checked against
 * the real QEMU tools by tests/interop/nbd-tls.sh.
 */
#include "util/osdep.h"

#include "crypto/tls-creds.h"
#include "util/user-object.h"

static char *dir;

static void add_ok(const char *fmt, ...)
{
    va_list ap;
    g_autofree char *arg = NULL;
    Error *err = NULL;

    va_start(ap, fmt);
    arg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (!user_object_add_cmdline(arg, &err)) {
        g_error("--object %s: %s", arg, error_get_pretty(err));
    }
}

/* --object ARG fails with a message that starts as @expect. */
static void add_fails(const char *arg, const char *expect)
{
    Error *err = NULL;

    g_assert_false(user_object_add_cmdline(arg, &err));
    if (!g_str_has_prefix(error_get_pretty(err), expect)) {
        g_error("--object %s: '%s' does not start with '%s'", arg,
                error_get_pretty(err), expect);
    }
    error_free(err);
}

static void test_x509_missing_files(void)
{
    g_autofree char *arg = g_strdup_printf("tls-creds-x509,id=x0,dir=%s",
                                           dir);
    g_autofree char *expect = g_strdup_printf(
        "Unable to access credentials %s/ca-cert.pem: No such file or "
        "directory", dir);
    g_autofree char *srv = g_strdup_printf(
        "tls-creds-x509,id=x1,dir=%s,endpoint=server,verify-peer=off", dir);
    g_autofree char *srv_expect = g_strdup_printf(
        "Unable to access credentials %s/server-cert.pem: No such file or "
        "directory", dir);

    add_fails(arg, expect);
    /* a server that verifies no client needs no CA, but its own pair */
    add_fails(srv, srv_expect);
    add_fails("tls-creds-x509,id=x2", "tls-creds-x509 'x2': the "
              "credentials directory (dir) is required");
    add_fails("tls-creds-x509,id=x3,dir=/d,endpoint=middle",
              "Parameter 'endpoint' does not accept value 'middle'");
    g_assert_null(user_object_find("x0", "tls-creds-x509"));
}

static void test_psk(void)
{
    g_autofree char *keys = g_build_filename(dir, "keys.psk", NULL);
    g_autofree char *arg = g_strdup_printf(
        "tls-creds-psk,id=p2,dir=%s,username=nobody", dir);
    g_autofree char *expect = g_strdup_printf(
        "Username nobody not found in PSK file %s", keys);
    Error *err = NULL;
    QCryptoTLSCreds *creds;

    g_assert_true(g_file_set_contents(keys, "alice:0123456789abcdef\n"
                                      "bob:fedcba9876543210\n", -1, NULL));
    add_ok("tls-creds-psk,id=p0,dir=%s,endpoint=server", dir);
    add_ok("tls-creds-psk,id=p1,dir=%s,username=bob", dir);
    add_fails(arg, expect);

    /* lookups: by endpoint, with QEMU's words */
    g_assert_null(qcrypto_tls_creds_get("p0", QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT,
                                        &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Expected TLS credentials for a client endpoint");
    g_clear_pointer(&err, error_free);
    g_assert_null(qcrypto_tls_creds_get("nope",
                                        QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT,
                                        &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "No TLS credentials with id 'nope'");
    g_clear_pointer(&err, error_free);

    /* a holder blocks object-del until it lets go */
    creds = qcrypto_tls_creds_get("p1", QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT,
                                  &error_abort);
    g_assert_cmpstr(qcrypto_tls_creds_id(creds), ==, "p1");
    g_assert_false(user_object_del("p1", &err));
    g_clear_pointer(&err, error_free);
    qcrypto_tls_creds_put(creds);
    g_assert_true(user_object_del("p1", &error_abort));
    g_assert_true(user_object_del("p0", &error_abort));
    unlink(keys);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    dir = g_dir_make_tmp("tls-creds-XXXXXX", NULL);
    g_assert_nonnull(dir);
    g_test_add_func("/tls-creds/x509/missing-files", test_x509_missing_files);
    g_test_add_func("/tls-creds/psk", test_psk);
    ret = g_test_run();
    rmdir(dir);
    g_free(dir);
    return ret;
}
