/*
 * The tls-cipher-suites object (crypto/tls-cipher-suites.c): the IANA
 * bytes of the suites a priority allows, QEMU's messages for a priority
 * GnuTLS refuses, and the object's properties.  The lists of a dozen
 * priorities are compared byte for byte with QEMU's by
 * tests/interop/qsd-objects.sh.
 */
#include "util/osdep.h"

#include "crypto/tls-cipher-suites.h"
#include "util/user-object.h"

/* ECDHE-RSA with AES-128-GCM over TLS 1.2 alone: one suite, 0xC02F */
#define ONE_SUITE "NONE:+VERS-TLS1.2:+AES-128-GCM:+AEAD:+ECDHE-RSA:" \
                  "+SIGN-ALL:+GROUP-ALL:+COMP-NULL"

static bool has_suite(GByteArray *list, uint8_t hi, uint8_t lo)
{
    for (guint i = 0; i + 1 < list->len; i += 2) {
        if (list->data[i] == hi && list->data[i + 1] == lo) {
            return true;
        }
    }
    return false;
}

static void test_one_suite(void)
{
    g_autoptr(GByteArray) list =
        qcrypto_tls_cipher_suites_compute(ONE_SUITE, &error_abort);

    g_assert_cmpmem(list->data, list->len, "\xc0\x2f", 2);
}

static void test_normal(void)
{
    g_autoptr(GByteArray) normal =
        qcrypto_tls_cipher_suites_compute("NORMAL", &error_abort);
    g_autoptr(GByteArray) no13 =
        qcrypto_tls_cipher_suites_compute("NORMAL:-VERS-TLS1.3",
                                          &error_abort);
    g_autoptr(GByteArray) anon =
        qcrypto_tls_cipher_suites_compute("NORMAL:+ANON-DH", &error_abort);

    g_assert_cmpuint(normal->len, >, 0);
    g_assert_cmpuint(normal->len % 2, ==, 0);
    /* each suite once, though GnuTLS walks many combinations */
    for (guint i = 0; i < normal->len; i += 2) {
        for (guint j = i + 2; j < normal->len; j += 2) {
            g_assert_false(normal->data[i] == normal->data[j] &&
                           normal->data[i + 1] == normal->data[j + 1]);
        }
    }
    /* TLS 1.3's suites are 0x13xx; ECDHE-RSA AES-128-GCM is in NORMAL */
    g_assert_true(has_suite(normal, 0x13, 0x01));
    g_assert_true(has_suite(normal, 0xc0, 0x2f));
    g_assert_false(has_suite(no13, 0x13, 0x01));
    g_assert_true(has_suite(no13, 0xc0, 0x2f));
    /* anonymous DH: TLS_DH_anon_WITH_AES_128_GCM_SHA256 is 0x00A6 */
    g_assert_false(has_suite(normal, 0x00, 0xa6));
    g_assert_true(has_suite(anon, 0x00, 0xa6));
}

static void assert_refused(const char *priority, const char *expect)
{
    Error *err = NULL;

    g_assert_null(qcrypto_tls_cipher_suites_compute(priority, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, expect);
    error_free(err);
}

static void test_refused(void)
{
    assert_refused("@@BOGUS", "Syntax error using priority '@@BOGUS': "
                   "The request is invalid.");
    assert_refused("NONE", "Syntax error using priority 'NONE': "
                   "No or insufficient priorities were set.");
}

static char *get_json(const char *id, const char *name)
{
    g_autoptr(JsonNode) node = user_object_get_property(id, name,
                                                        &error_abort);

    return json_to_text(node, 0);
}

static void test_object(void)
{
    g_autoptr(JsonNode) bogus = json_parse_text("\"@@BOGUS\"", 9,
                                                &error_abort);
    Error *err = NULL;
    g_autofree char *suites = NULL;
    g_autofree char *dir = NULL;

    g_assert_false(user_object_add_cmdline("tls-cipher-suites,id=c0",
                                           &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "'priority' property is not set");
    g_clear_pointer(&err, error_free);
    g_assert_true(user_object_add_cmdline(
        "tls-cipher-suites,id=c0,priority=" ONE_SUITE, &error_abort));
    suites = get_json("c0", "cipher-suites");
    g_assert_cmpstr(suites, ==, "[192, 47]");
    /* unset strings read "", as QEMU's */
    dir = get_json("c0", "dir");
    g_assert_cmpstr(dir, ==, "\"\"");
    /* a refused priority keeps the list it had */
    g_assert_false(user_object_set_property("c0", "priority", bogus, &err));
    g_clear_pointer(&err, error_free);
    g_free(suites);
    suites = get_json("c0", "cipher-suites");
    g_assert_cmpstr(suites, ==, "[192, 47]");
    g_assert_true(user_object_del("c0", &error_abort));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/tls-cipher-suites/one-suite", test_one_suite);
    g_test_add_func("/tls-cipher-suites/normal", test_normal);
    g_test_add_func("/tls-cipher-suites/refused", test_refused);
    g_test_add_func("/tls-cipher-suites/object", test_object);
    return g_test_run();
}
