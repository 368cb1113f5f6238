/*
 * keyval_parse(): the KEY=VALUE,... syntax of --blockdev/--object style
 * options, with the error texts QEMU 7.2 prints for the same input
 * (observed through `qemu-img info --object ...`, which uses keyval).
 */
#include "util/qdict.h"

/* "key=value" pairs joined by '|', in dict order. */
static char *keyval_dump(const QDict *qdict)
{
    GString *out = g_string_new(NULL);

    for (const QDictEntry *e = qdict_first(qdict); e;
         e = qdict_next(qdict, e)) {
        g_assert_cmpint(qdict_entry_type(e), ==, QTYPE_QSTRING);
        g_string_append_printf(out, "%s%s=%s", out->len ? "|" : "",
                               qdict_entry_key(e), qdict_entry_value(e));
    }
    return g_string_free(out, FALSE);
}

static void check_ok(const char *params, const char *implied,
                     const char *expect)
{
    Error *err = NULL;
    g_autoptr(QDict) qdict = keyval_parse(params, implied, &err);
    g_autofree char *dump = NULL;

    if (!qdict) {
        g_error("keyval_parse(\"%s\") failed: %s", params,
                error_get_pretty(err));
    }
    dump = keyval_dump(qdict);
    g_assert_cmpstr(dump, ==, expect);
}

static void check_err(const char *params, const char *implied,
                      const char *expect)
{
    Error *err = NULL;
    QDict *qdict = keyval_parse(params, implied, &err);

    if (qdict) {
        g_autofree char *dump = keyval_dump(qdict);

        g_error("keyval_parse(\"%s\") succeeded: %s", params, dump);
    }
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==, expect);
    error_free(err);
}

static void test_basic(void)
{
    check_ok("", NULL, "");
    check_ok("driver=qcow2", NULL, "driver=qcow2");
    check_ok("driver=raw,file.filename=/tmp/x,file.driver=file", NULL,
             "driver=raw|file.filename=/tmp/x|file.driver=file");
    check_ok("a=,b=", NULL, "a=|b=");
    check_ok("a=b=c", NULL, "a=b=c");
    check_ok("A-b_9=1", NULL, "A-b_9=1");
    check_ok("a.b.c.d.e.f.g.h=deep", NULL, "a.b.c.d.e.f.g.h=deep");
}

static void test_trailing_comma_and_repeats(void)
{
    check_ok("a=1,", NULL, "a=1");
    /* A repeated key overrides, keeping its first position. */
    check_ok("a=1,b=2,a=3", NULL, "a=3|b=2");
}

static void test_comma_escapes(void)
{
    check_ok("a=x,,y", NULL, "a=x,y");
    check_ok("a=x,,", NULL, "a=x,");
    check_ok("a=x,,,", NULL, "a=x,");
    check_ok("a=x,,,,", NULL, "a=x,,");
    check_ok("a=x,,,b=1", NULL, "a=x,|b=1");
    check_ok("a=,,,,,,", NULL, "a=,,,");
    check_ok("id=s,,x=1", NULL, "id=s,x=1");
}

static void test_implied_key(void)
{
    check_ok("secret,id=s", "qom-type", "qom-type=secret|id=s");
    check_ok("se.cret", "qom-type", "qom-type=se.cret");
    check_ok("se@cret", "qom-type", "qom-type=se@cret");
    check_ok("qom-type=x,id=s", "qom-type", "qom-type=x|id=s");
    check_ok("secret,", "qom-type", "qom-type=secret");
    /* Only the first element may omit its key. */
    check_err("id=s,secret", "qom-type",
              "Expected '=' after parameter 'secret'");
    /* An implied value ends at the first comma: no escapes there. */
    check_err("sec,,ret,id=s", "qom-type", "Invalid parameter ''");
    check_err(",id=s", "qom-type", "Invalid parameter ''");
    check_err(",", "qom-type", "Invalid parameter ''");
    /* Without an implied key a bare word is an error. */
    check_err("file.filename", NULL,
              "Expected '=' after parameter 'file.filename'");
}

static void test_bad_keys(void)
{
    check_err("=x", NULL, "Invalid parameter ''");
    check_err("a=1,=", NULL, "Invalid parameter ''");
    check_err("a..b=1", NULL, "Invalid parameter 'a..b'");
    check_err("a.=1", NULL, "Invalid parameter 'a.'");
    check_err(".a=1", NULL, "Invalid parameter '.a'");
    check_err("x@y=1", NULL, "Invalid parameter 'x@y'");
    check_err("x@y", NULL, "Invalid parameter 'x@y'");
    check_err("9x=1", NULL, "Invalid parameter '9x'");
    check_err("0=1", NULL, "Invalid parameter '0'");
    check_err("_a=1", NULL, "Invalid parameter '_a'");
    check_err("-a=1", NULL, "Invalid parameter '-a'");
    check_err("a.-=1", NULL, "Invalid parameter 'a.-'");
    check_err("a.0x=1", NULL, "Invalid parameter 'a.0x'");
    check_err("a=1,x", NULL, "Expected '=' after parameter 'x'");
    check_err("a,,b=1", NULL, "Expected '=' after parameter 'a'");
}

static void test_key_length(void)
{
    g_autofree char *a127 = g_strnfill(127, 'a');
    g_autofree char *a128 = g_strnfill(128, 'a');
    g_autofree char *ok_one = g_strdup_printf("%s=1", a127);
    g_autofree char *ok_two = g_strdup_printf("%s.%s=1", a127, a127);
    g_autofree char *long_one = g_strdup_printf("%s=1", a128);
    g_autofree char *long_first = g_strdup_printf("%s.b=1", a128);
    g_autofree char *long_second = g_strdup_printf("a.%s=1", a128);
    g_autofree char *too_long = g_strdup_printf("Parameter '%s' is too long",
                                                a128);
    g_autofree char *frag_too_long =
        g_strdup_printf("Parameter fragment '%s' is too long", a128);

    check_ok(ok_one, NULL, ok_one);
    check_ok(ok_two, NULL, ok_two);
    check_err(long_one, NULL, too_long);
    /* Checked before the missing '=' is. */
    check_err(a128, NULL, too_long);
    check_err(long_first, NULL, frag_too_long);
    check_err(long_second, NULL, frag_too_long);
}

static void test_inconsistent(void)
{
    check_err("a.b=1,a=2", NULL, "Parameters 'a.*' used inconsistently");
    check_err("a=2,a.b=1", NULL, "Parameters 'a.*' used inconsistently");
    check_err("a.b=1,a.c=2,a=3", NULL,
              "Parameters 'a.*' used inconsistently");
    check_err("a.b.c=1,a.b=2", NULL,
              "Parameters 'a.b.*' used inconsistently");
    check_err("a=1,a.b.c=2", NULL, "Parameters 'a.*' used inconsistently");
}

static void test_lists(void)
{
    check_ok("inject-error.0.event=pwritev,inject-error.0.errno=5,"
             "inject-error.1.event=flush", NULL,
             "inject-error.0.event=pwritev|inject-error.0.errno=5|"
             "inject-error.1.event=flush");
    check_ok("a.1=y,a.0=x", NULL, "a.1=y|a.0=x");
    check_ok("a.00=1", NULL, "a.00=1");
    check_err("a.1=1", NULL, "Parameter 'a.0' missing");
    check_err("a.b.0=1,a.b.1=2,a.b.3=1", NULL, "Parameter 'a.b.2' missing");
    check_err("a.0=1,a.x=1", NULL, "Parameters 'a.*' used inconsistently");
    check_err("a.b=1,a.0=1", NULL, "Parameters 'a.*' used inconsistently");
    check_err("a.1=1,a.01=2", NULL, "Parameter 'a.0' missing");
    check_err("a.0=1,a.99999999999999999999999=2", NULL,
              "Parameter 'a.1' missing");
    /* A syntax error after a list problem is the one reported. */
    check_err("a.1=1,b", NULL, "Expected '=' after parameter 'b'");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/keyval/basic", test_basic);
    g_test_add_func("/keyval/trailing-comma-repeats",
                    test_trailing_comma_and_repeats);
    g_test_add_func("/keyval/comma-escapes", test_comma_escapes);
    g_test_add_func("/keyval/implied-key", test_implied_key);
    g_test_add_func("/keyval/bad-keys", test_bad_keys);
    g_test_add_func("/keyval/key-length", test_key_length);
    g_test_add_func("/keyval/inconsistent", test_inconsistent);
    g_test_add_func("/keyval/lists", test_lists);
    return g_test_run();
}
