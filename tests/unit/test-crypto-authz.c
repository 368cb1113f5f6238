/*
 * The authorization object types (crypto/tls-authz.c, crypto/authz-list.c)
 * as a TLS session asks them: authz-simple's one identity, authz-list's
 * rules in order (exact and glob), its default policy, and a lookup of an
 * id that names no authorization object.  The handshakes themselves are
 * checked against the real QEMU tools by tests/interop/nbd-tls.sh.
 */
#include "util/osdep.h"

#include "crypto/tls-authz.h"
#include "util/user-object.h"

static void add(const char *arg)
{
    Error *err = NULL;

    if (!user_object_add_cmdline(arg, &err)) {
        g_error("--object %s: %s", arg, error_get_pretty(err));
    }
}

static bool allowed(const char *id, const char *identity)
{
    return qauthz_is_allowed_by_id(id, identity, &error_abort);
}

static void test_simple(void)
{
    add("authz-simple,id=s0,identity=O=Example,,CN=client1");
    g_assert_true(allowed("s0", "O=Example,CN=client1"));
    g_assert_false(allowed("s0", "O=Example,CN=client2"));
    g_assert_false(allowed("s0", "O=Example,CN=client1x"));
    g_assert_true(user_object_del("s0", &error_abort));
}

static void test_list_order(void)
{
    /* the first rule that matches decides, whatever the later ones say */
    add("authz-list,id=l0,policy=deny,"
        "rules.0.match=O=Example,,CN=client3,rules.0.policy=deny,"
        "rules.1.match=O=Example,,CN=*,rules.1.policy=allow,"
        "rules.1.format=glob");
    g_assert_true(allowed("l0", "O=Example,CN=client1"));
    g_assert_false(allowed("l0", "O=Example,CN=client3"));
    /* no rule matches: the policy */
    g_assert_false(allowed("l0", "O=Other,CN=client1"));
    g_assert_true(user_object_del("l0", &error_abort));
}

static void test_list_exact_is_not_glob(void)
{
    add("authz-list,id=l1,rules.0.match=user*,rules.0.policy=allow");
    g_assert_true(allowed("l1", "user*"));
    g_assert_false(allowed("l1", "user1"));
    g_assert_true(user_object_del("l1", &error_abort));
}

static void test_list_default_allow(void)
{
    add("authz-list,id=l2,policy=allow,"
        "rules.0.match=bad?,rules.0.policy=deny,rules.0.format=glob");
    g_assert_false(allowed("l2", "bad1"));
    g_assert_true(allowed("l2", "bad12"));
    g_assert_true(allowed("l2", "good"));
    g_assert_true(user_object_del("l2", &error_abort));
    /* no rules at all: the default policy, deny */
    add("authz-list,id=l3");
    g_assert_false(allowed("l3", "anyone"));
    g_assert_true(user_object_del("l3", &error_abort));
}

static void test_unknown_id(void)
{
    Error *err = NULL;

    add("secret,id=sec0,data=x");
    g_assert_false(qauthz_is_allowed_by_id("sec0", "anyone", &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "No authorization object with id 'sec0'");
    error_free(err);
    g_assert_true(user_object_del("sec0", &error_abort));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/authz/simple", test_simple);
    g_test_add_func("/authz/list/order", test_list_order);
    g_test_add_func("/authz/list/exact-is-not-glob",
                    test_list_exact_is_not_glob);
    g_test_add_func("/authz/list/default-allow", test_list_default_allow);
    g_test_add_func("/authz/unknown-id", test_unknown_id);
    return g_test_run();
}
