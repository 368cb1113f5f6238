/*
 * The authorization object types (crypto/tls-authz.c, crypto/authz-list.c,
 * crypto/authz-list-file.c) as a TLS session asks them: authz-simple's
 * one identity, authz-list's rules in order (exact and glob), its default
 * policy, authz-list-file's file read again when it changes, and a
 * lookup of an id that names no authorization object.  The handshakes themselves are
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

static char *dir;

static void write_file(const char *path, const char *text)
{
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
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

#define ACL_ALLOW_1 "{\"rules\": [{\"match\": \"client1\", " \
                    "\"policy\": \"allow\"}]}"
#define ACL_ALLOW_2 "{\"policy\": \"deny\", \"rules\": [" \
                    "{\"match\": \"client[23]\", \"policy\": \"allow\", " \
                    "\"format\": \"glob\"}]}"

static void test_list_file_refresh(void)
{
    g_autofree char *acl = g_build_filename(dir, "acl.json", NULL);
    g_autofree char *tmp = g_build_filename(dir, "acl.new", NULL);
    g_autofree char *arg = g_strdup_printf(
        "authz-list-file,id=f0,filename=%s", acl);

    write_file(acl, ACL_ALLOW_1);
    add(arg);
    g_assert_true(allowed("f0", "client1"));
    g_assert_false(allowed("f0", "client2"));
    /* replaced by rename: the next check reads it again */
    write_file(tmp, ACL_ALLOW_2);
    g_assert_cmpint(rename(tmp, acl), ==, 0);
    g_assert_false(allowed("f0", "client1"));
    g_assert_true(allowed("f0", "client3"));
    /* invalid: everyone is denied (invariant 1) until it is valid again */
    write_file(acl, "{\"policy\": \"allow\", \"rules\": 1}");
    g_assert_false(allowed("f0", "client1"));
    g_assert_false(allowed("f0", "client3"));
    g_assert_cmpint(unlink(acl), ==, 0);
    g_assert_false(allowed("f0", "client3"));
    write_file(acl, ACL_ALLOW_1);
    g_assert_true(allowed("f0", "client1"));
    g_assert_true(user_object_del("f0", &error_abort));
    unlink(acl);
}

static void test_list_file_no_refresh(void)
{
    g_autofree char *acl = g_build_filename(dir, "acl.json", NULL);
    g_autofree char *arg = g_strdup_printf(
        "authz-list-file,id=f1,filename=%s,refresh=off", acl);

    write_file(acl, ACL_ALLOW_1);
    add(arg);
    write_file(acl, ACL_ALLOW_2);
    g_assert_true(allowed("f1", "client1"));
    g_assert_false(allowed("f1", "client2"));
    g_assert_true(user_object_del("f1", &error_abort));
    unlink(acl);
}

static void test_list_file_errors(void)
{
    g_autofree char *acl = g_build_filename(dir, "bad.json", NULL);
    g_autofree char *arg = g_strdup_printf(
        "authz-list-file,id=f2,filename=%s", acl);
    g_autofree char *missing = g_strdup_printf("Unable to read '%s': ", acl);
    g_autofree char *invalid = g_strdup_printf("Invalid ACL file '%s': ",
                                               acl);
    g_autofree char *expect = NULL;

    add_fails(arg, missing);
    write_file(acl, "{\"rules\": [");
    add_fails(arg, invalid);
    write_file(acl, "[]");
    expect = g_strdup_printf("%sthe rules must be a JSON object", invalid);
    add_fails(arg, expect);
    g_free(expect);
    write_file(acl, "{\"rules\": [{\"match\": \"x\"}]}");
    expect = g_strdup_printf("%sParameter 'rules[0].policy' is missing",
                             invalid);
    add_fails(arg, expect);
    g_free(expect);
    write_file(acl, "{\"policy\": \"maybe\"}");
    expect = g_strdup_printf("%sParameter 'policy' does not accept value "
                             "'maybe'", invalid);
    add_fails(arg, expect);
    add_fails("authz-list-file,id=f3", "Parameter 'filename' is missing");
    /* a file over 1 MiB is refused before it is read whole */
    {
        g_autofree char *big = g_malloc(1024 * 1024 + 1);

        memset(big, ' ', 1024 * 1024 + 1);
        g_assert_true(g_file_set_contents(acl, big, 1024 * 1024 + 1, NULL));
        g_free(expect);
        expect = g_strdup_printf("Unable to read '%s': larger than 1048576 "
                                 "bytes", acl);
        add_fails(arg, expect);
    }
    g_assert_null(user_object_find("f2", "authz-list-file"));
    unlink(acl);
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
    int ret;

    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/authz/simple", test_simple);
    g_test_add_func("/authz/list/order", test_list_order);
    g_test_add_func("/authz/list/exact-is-not-glob",
                    test_list_exact_is_not_glob);
    g_test_add_func("/authz/list/default-allow", test_list_default_allow);
    g_test_add_func("/authz/list-file/refresh", test_list_file_refresh);
    g_test_add_func("/authz/list-file/no-refresh", test_list_file_no_refresh);
    g_test_add_func("/authz/list-file/errors", test_list_file_errors);
    g_test_add_func("/authz/unknown-id", test_unknown_id);
    dir = g_dir_make_tmp("authz-XXXXXX", NULL);
    g_assert_nonnull(dir);
    ret = g_test_run();
    rmdir(dir);
    g_free(dir);
    return ret;
}
