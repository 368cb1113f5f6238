/*
 * The TLS credentials types (crypto/tls-creds.c): what --object checks
 * when it creates them (the directory and its files, named in errors as
 * QEMU names them), lookups by endpoint, and deletion refused while a
 * server or a node holds them; an anonymous handshake over a socket pair
 * (and its refusal by a PSK server).  The handshakes are checked against
 * the real QEMU tools by tests/interop/nbd-tls.sh and nbd-tls-objects.sh.
 */
#include "util/osdep.h"

#include <sys/socket.h>

#include "crypto/tls-creds.h"
#include "crypto/tls-session.h"
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

/*
 * A handshake between the credentials @client_id and @server_id over a
 * socket pair, both ends stepped in turn (non-blocking); 0 if both ends
 * finished it, else the first failure (its message in @errp), and a
 * record sent from the client reaches the server.
 */
static int handshake(const char *client_id, const char *server_id,
                     Error **errp)
{
    QCryptoTLSCreds *cc = qcrypto_tls_creds_get(
        client_id, QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT, &error_abort);
    QCryptoTLSCreds *sc = qcrypto_tls_creds_get(
        server_id, QCRYPTO_TLS_CREDS_ENDPOINT_SERVER, &error_abort);
    QCryptoTLSSession *cs, *ss;
    int fds[2], cret = -EAGAIN, sret = -EAGAIN;
    char buf[8] = "";

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds),
                    ==, 0);
    cs = qcrypto_tls_session_new(cc, NULL, fds[0], &error_abort);
    ss = qcrypto_tls_session_new(sc, NULL, fds[1], &error_abort);
    /* each step sends what the other end waits for: bounded */
    for (int i = 0; i < 1000 && (cret == -EAGAIN || sret == -EAGAIN); i++) {
        if (cret == -EAGAIN) {
            cret = qcrypto_tls_session_handshake(cs, errp);
        }
        if (sret == -EAGAIN && cret != -EPROTO) {
            sret = qcrypto_tls_session_handshake(ss, errp);
        }
        if (cret < 0 && cret != -EAGAIN) {
            break;
        }
        if (sret < 0 && sret != -EAGAIN) {
            break;
        }
    }
    if (cret == 0 && sret == 0) {
        g_assert_cmpint(qcrypto_tls_session_write(cs, "hello", 6), ==, 6);
        g_assert_cmpint(qcrypto_tls_session_read(ss, buf, sizeof(buf)), ==,
                        6);
        g_assert_cmpstr(buf, ==, "hello");
    }
    qcrypto_tls_session_free(cs);
    qcrypto_tls_session_free(ss);
    close(fds[0]);
    close(fds[1]);
    qcrypto_tls_creds_put(cc);
    qcrypto_tls_creds_put(sc);
    /* the end that failed, else one still waiting, else 0 */
    if (cret < 0 && cret != -EAGAIN) {
        return cret;
    }
    return sret < 0 && sret != -EAGAIN ? sret : cret ?: sret;
}

static void test_anon(void)
{
    g_autofree char *dh = g_build_filename(dir, "dh-params.pem", NULL);
    g_autofree char *bad = g_strdup_printf(
        "tls-creds-anon,id=a3,dir=%s,endpoint=server", dir);
    g_autofree char *expect = g_strdup_printf(
        "Unable to load DH parameters from %s: ", dh);
    g_autofree char *keys = g_build_filename(dir, "keys.psk", NULL);
    Error *err = NULL;

    /* no files needed: a client has none, a server GnuTLS's groups */
    add_ok("tls-creds-anon,id=a0");
    add_ok("tls-creds-anon,id=a1,endpoint=server,verify-peer=on");
    add_ok("tls-creds-anon,id=a2,endpoint=server,dir=%s", dir);
    g_assert_cmpint(handshake("a0", "a1", &error_abort), ==, 0);
    g_assert_cmpint(handshake("a0", "a2", &error_abort), ==, 0);
    /* dh-params.pem, when it is there, must be PKCS#3 PEM */
    g_assert_true(g_file_set_contents(dh, "junk\n", -1, NULL));
    add_fails(bad, expect);
    unlink(dh);

    /* a PSK server has nothing in common with an anonymous client */
    g_assert_true(g_file_set_contents(keys, "qemu:0123456789abcdef\n", -1,
                                      NULL));
    add_ok("tls-creds-psk,id=p3,dir=%s,endpoint=server", dir);
    g_assert_cmpint(handshake("a0", "p3", &err), ==, -EPROTO);
    g_assert_true(g_str_has_prefix(error_get_pretty(err),
                                   "TLS handshake failed: "));
    g_clear_pointer(&err, error_free);
    unlink(keys);
    g_assert_null(qcrypto_tls_creds_get("a1",
                                        QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT,
                                        &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Expected TLS credentials for a client endpoint");
    error_free(err);
    user_object_del_all();
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    dir = g_dir_make_tmp("tls-creds-XXXXXX", NULL);
    g_assert_nonnull(dir);
    g_test_add_func("/tls-creds/x509/missing-files", test_x509_missing_files);
    g_test_add_func("/tls-creds/psk", test_psk);
    g_test_add_func("/tls-creds/anon", test_anon);
    ret = g_test_run();
    rmdir(dir);
    g_free(dir);
    return ret;
}
