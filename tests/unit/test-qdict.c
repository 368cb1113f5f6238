/*
 * QDict: typed values, insertion order, replacement, deletion during
 * iteration, clone/join, sub-dict extraction and reference counting;
 * json: filenames in (flattening, types, QEMU's error texts) and out
 * (nesting, arrays, QEMU's spacing and escapes).
 */
#include "util/qdict.h"

#include "util/json.h"

/* "key=value(type)" for every entry, in order, joined by spaces. */
static char *qdict_dump(const QDict *qdict)
{
    static const char *const type_names[] = {
        [QTYPE_QSTRING] = "str", [QTYPE_QNUM] = "num",
        [QTYPE_QBOOL] = "bool", [QTYPE_QNULL] = "null",
    };
    GString *out = g_string_new(NULL);

    for (const QDictEntry *e = qdict_first(qdict); e;
         e = qdict_next(qdict, e)) {
        const char *value = qdict_entry_value(e);

        g_string_append_printf(out, "%s%s=%s(%s)", out->len ? " " : "",
                               qdict_entry_key(e), value ? value : "",
                               type_names[qdict_entry_type(e)]);
    }
    return g_string_free(out, FALSE);
}

static void assert_dump(const QDict *qdict, const char *expect)
{
    g_autofree char *dump = qdict_dump(qdict);

    g_assert_cmpstr(dump, ==, expect);
}

static void test_put_get_types(void)
{
    g_autoptr(QDict) d = qdict_new();

    qdict_put_str(d, "driver", "qcow2");
    qdict_put_int(d, "size", 65536);
    qdict_put_int(d, "neg", INT64_MIN);
    qdict_put_bool(d, "read-only", true);
    qdict_put_bool(d, "force-share", false);
    qdict_put_typed(d, "ratio", "1.5", QTYPE_QNUM);
    qdict_put_typed(d, "nothing", NULL, QTYPE_QNULL);

    g_assert_cmpuint(qdict_size(d), ==, 7);
    g_assert_cmpstr(qdict_get_try_str(d, "driver"), ==, "qcow2");
    g_assert_cmpstr(qdict_get_try_str(d, "size"), ==, "65536");
    g_assert_cmpstr(qdict_get_try_str(d, "read-only"), ==, "true");
    g_assert_null(qdict_get_try_str(d, "nothing"));
    g_assert_true(qdict_haskey(d, "nothing"));
    g_assert_null(qdict_get_try_str(d, "absent"));
    g_assert_false(qdict_haskey(d, "absent"));
    assert_dump(d, "driver=qcow2(str) size=65536(num) "
                "neg=-9223372036854775808(num) read-only=true(bool) "
                "force-share=false(bool) ratio=1.5(num) nothing=(null)");
}

static void test_replace_keeps_position(void)
{
    g_autoptr(QDict) d = qdict_new();

    qdict_put_str(d, "a", "1");
    qdict_put_str(d, "b", "2");
    qdict_put_str(d, "c", "3");
    qdict_put_int(d, "a", 10);
    g_assert_cmpuint(qdict_size(d), ==, 3);
    assert_dump(d, "a=10(num) b=2(str) c=3(str)");

    qdict_set_default_str(d, "b", "ignored");
    qdict_set_default_str(d, "d", "4");
    assert_dump(d, "a=10(num) b=2(str) c=3(str) d=4(str)");
}

static void test_del(void)
{
    g_autoptr(QDict) d = qdict_new();

    g_assert_false(qdict_del(d, "x"));
    qdict_put_str(d, "a", "1");
    qdict_put_str(d, "b", "2");
    qdict_put_str(d, "c", "3");
    g_assert_true(qdict_del(d, "b"));
    assert_dump(d, "a=1(str) c=3(str)");
    g_assert_true(qdict_del(d, "a"));
    g_assert_true(qdict_del(d, "c"));
    g_assert_null(qdict_first(d));
    g_assert_cmpuint(qdict_size(d), ==, 0);
    /* The dict is usable again after being emptied. */
    qdict_put_str(d, "z", "26");
    assert_dump(d, "z=26(str)");
}

static void test_del_while_iterating(void)
{
    g_autoptr(QDict) d = qdict_new();
    const QDictEntry *e, *next;
    char key[16];

    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        qdict_put_int(d, key, i);
    }
    for (e = qdict_first(d); e; e = next) {
        next = qdict_next(d, e);
        if (atoi(qdict_entry_value(e)) % 3) {
            qdict_del(d, qdict_entry_key(e));
        }
    }
    assert_dump(d, "k0=0(num) k3=3(num) k6=6(num) k9=9(num)");
}

static void test_clone_and_join(void)
{
    g_autoptr(QDict) a = qdict_new();
    g_autoptr(QDict) b = qdict_new();
    g_autoptr(QDict) c = NULL;

    qdict_put_str(a, "driver", "raw");
    qdict_put_int(a, "size", 4096);
    c = qdict_clone(a);
    qdict_put_str(a, "driver", "qcow2");
    assert_dump(c, "driver=raw(str) size=4096(num)");

    qdict_put_str(b, "size", "8192");
    qdict_put_bool(b, "read-only", true);
    qdict_join(c, b, false);
    assert_dump(c, "driver=raw(str) size=4096(num) read-only=true(bool)");
    qdict_join(c, b, true);
    assert_dump(c, "driver=raw(str) size=8192(str) read-only=true(bool)");
    /* The source of a join is not changed. */
    assert_dump(b, "size=8192(str) read-only=true(bool)");
}

static void test_extract_subqdict(void)
{
    g_autoptr(QDict) d = qdict_new();
    g_autoptr(QDict) file = NULL;
    g_autoptr(QDict) none = NULL;

    qdict_put_str(d, "driver", "qcow2");
    qdict_put_str(d, "file.driver", "file");
    qdict_put_str(d, "filex", "not a child");
    qdict_put_str(d, "file.filename", "/tmp/a");
    qdict_put_bool(d, "file.locking", false);
    qdict_put_str(d, "backing.file.filename", "/tmp/b");

    g_assert_true(qdict_has_prefixed_entries(d, "file."));
    g_assert_true(qdict_has_prefixed_entries(d, "backing."));
    g_assert_false(qdict_has_prefixed_entries(d, "data-file."));

    qdict_extract_subqdict(d, &file, "file.");
    assert_dump(file, "driver=file(str) filename=/tmp/a(str) "
                "locking=false(bool)");
    assert_dump(d, "driver=qcow2(str) filex=not a child(str) "
                "backing.file.filename=/tmp/b(str)");
    g_assert_false(qdict_has_prefixed_entries(d, "file."));

    qdict_extract_subqdict(d, &none, "data-file.");
    g_assert_cmpuint(qdict_size(none), ==, 0);
    g_assert_cmpuint(qdict_size(d), ==, 3);
}

static void test_refcount(void)
{
    QDict *d = qdict_new();
    QDict *again = qdict_ref(d);

    g_assert_true(again == d);
    qdict_put_str(d, "a", "b");
    qdict_unref(d);
    /* Still alive through the second reference (ASan would complain). */
    g_assert_cmpstr(qdict_get_try_str(again, "a"), ==, "b");
    qdict_unref(again);
    qdict_unref(NULL);
}

static void test_many_keys(void)
{
    g_autoptr(QDict) d = qdict_new();
    char key[32];

    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof(key), "inject-error.%d.event", i);
        qdict_put_int(d, key, i);
    }
    g_assert_cmpuint(qdict_size(d), ==, 5000);
    g_assert_cmpstr(qdict_get_try_str(d, "inject-error.4321.event"), ==,
                    "4321");
    g_assert_cmpstr(qdict_entry_key(qdict_first(d)), ==,
                    "inject-error.0.event");
}

static void check_json(const char *json, const char *expect_dump)
{
    Error *err = NULL;
    g_autoptr(QDict) d = qdict_from_json(json, &err);

    if (!d) {
        g_error("qdict_from_json(%s) failed: %s", json,
                error_get_pretty(err));
    }
    assert_dump(d, expect_dump);
}

static void check_json_err(const char *json, const char *expect)
{
    Error *err = NULL;
    QDict *d = qdict_from_json(json, &err);

    if (d) {
        g_autofree char *dump = qdict_dump(d);

        g_error("qdict_from_json(%s) succeeded: %s", json, dump);
    }
    g_assert_cmpstr(error_get_pretty(err), ==, expect);
    error_free(err);
}

static void test_json_flatten(void)
{
    check_json("{\"driver\":\"raw\",\"file\":{\"driver\":\"file\","
               "\"filename\":\"/tmp/x\"}}",
               "driver=raw(str) file.driver=file(str) "
               "file.filename=/tmp/x(str)");
    check_json("{\"file.filename\": \"/a\", \"file\": {\"x\": {\"y\": 1}}}",
               "file.filename=/a(str) file.x.y=1(num)");
    check_json("{\"inject-error\": [{\"event\": \"pwritev\", \"errno\": 5},"
               " {\"event\": \"flush\"}], \"l\": [[true], []]}",
               "inject-error.0.event=pwritev(str) inject-error.0.errno=5(num) "
               "inject-error.1.event=flush(str) l.0.0=true(bool)");
    /* Empty objects and arrays hold no option. */
    check_json(" { } ", "");
    check_json("{\"file\": {}}", "");
}

static void test_json_scalars(void)
{
    check_json("{\"size\": 4096, \"neg\": -1, \"zero\": -0, \"ro\": true,"
               " \"rw\": false, \"x\": null}",
               "size=4096(num) neg=-1(num) zero=0(num) ro=true(bool) "
               "rw=false(bool) x=(null)");
    /*
     * Integers keep every digit in int64; beyond, a double (QEMU keeps
     * uint64 exact, json-glib trees cannot: see include/util/json.h).
     */
    check_json("{\"max\": 9223372036854775807, "
               "\"min\": -9223372036854775808, "
               "\"over\": 18446744073709551615}",
               "max=9223372036854775807(num) min=-9223372036854775808(num) "
               "over=1.8446744073709552e+19(num)");
    check_json("{\"a\": 4096.0, \"b\": 1.5e3, \"c\": 0.5, \"d\": 1E2}",
               "a=4096(num) b=1500(num) c=0.5(num) d=100(num)");
}

static void test_json_strings(void)
{
    check_json("{\"a\": \"q\\\"b\\\\s\\/n\\nt\\t\", 'b': 'single \"x\"'}",
               "a=q\"b\\s/n\nt\t(str) b=single \"x\"(str)");
    check_json("{\"e\": \"\\u00e9\\uD83D\\uDE00\"}",
               "e=\u00e9\U0001F600(str)");
    check_json("{\"raw\": \"\u00e9\"}", "raw=\u00e9(str)");
}

static void test_json_errors(void)
{
    check_json_err("", "Expecting a JSON value");
    check_json_err("  \n ", "Expecting a JSON value");
    check_json_err("{\"driver\":\"raw\"",
                   "JSON parse error, premature EOI");
    check_json_err("{\"driver\": \"raw\", \"file\": {",
                   "JSON parse error, premature EOI");
    check_json_err("{\"a\":\"x", "JSON parse error, premature EOI");
    check_json_err("{\"a\":", "JSON parse error, premature EOI");
    check_json_err("{\"driver\": raw}",
                   "JSON parse error, invalid keyword 'raw'");
    check_json_err("{\"a\": tru}", "JSON parse error, invalid keyword 'tru'");
    check_json_err("{\"a\":1,}", "JSON parse error, expecting value");
    check_json_err("{\"a\":[1,]}", "JSON parse error, expecting value");
    check_json_err("{\"a\" 1}", "JSON parse error, missing : in object pair");
    check_json_err("{1:2}", "JSON parse error, key is not a string in object");
    check_json_err("{\"a\":1 \"b\":2}",
                   "JSON parse error, expected separator in dict");
    check_json_err("{\"a\":[1 2]}",
                   "JSON parse error, expected separator in list");
    check_json_err("{\"a\":\"\\q\"}",
                   "JSON parse error, invalid escape sequence in string");
    check_json_err("{\"a\":\"\\u12\"}",
                   "JSON parse error, invalid escape sequence in string");
    check_json_err("{\"a\":\"\\ud800\"}",
                   "JSON parse error, \\ud800 is not a valid Unicode "
                   "character");
    check_json_err("{\"a\":\"x\ty\"}",
                   "JSON parse error, control character 0x09 in string");
    check_json_err("{\"a\":01}", "JSON parse error, invalid number '01'");
    /* QEMU's texts: the number ends where its grammar does */
    check_json_err("{\"a\":0x10}",
                   "JSON parse error, expected separator in dict");
    check_json_err("{\"a\":.5}", "JSON parse error, stray '.'");
    check_json_err("{\"a\":1.}", "JSON parse error, invalid number '1.'");
    check_json_err("{\"a\":-}", "JSON parse error, invalid number '-'");
    check_json_err("{\"a\":+1}", "JSON parse error, stray '+'");
    check_json_err("{\"a\":1k}",
                   "JSON parse error, expected separator in dict");
    check_json_err("{\"a\":1e400}",
                   "JSON parse error, number '1e400' is out of range");
    check_json_err("{\"a\":#}", "JSON parse error, stray '#'");
    check_json_err("{/*c*/\"a\":1}",
                   "JSON parse error, key is not a string in object");
    check_json_err("{\"a\":1}x", "Expecting at most one JSON value");
    check_json_err("{\"a\":1}{\"b\":2}", "Expecting at most one JSON value");
    /* QEMU refuses a repeated member rather than keep one of them */
    check_json_err("{\"a\": 1, \"a\": \"two\"}",
                   "JSON parse error, duplicate key");
}

static void test_json_not_object(void)
{
    check_json_err("[1,2]", "Invalid JSON object given");
    check_json_err("\"abc\"", "Invalid JSON object given");
    check_json_err("42", "Invalid JSON object given");
    check_json_err("null", "Invalid JSON object given");
    /* A broken non-object says what is broken. */
    check_json_err("[1,", "JSON parse error, premature EOI");
}

static void test_json_nesting(void)
{
    g_autofree char *open_ok = g_strnfill(1023, '[');
    g_autofree char *close_ok = g_strnfill(1023, ']');
    g_autofree char *ok = g_strdup_printf("{\"a\":%s1%s}", open_ok, close_ok);
    g_autofree char *open_bad = g_strnfill(1024, '[');
    g_autofree char *bad = g_strdup_printf("{\"a\":%s1}", open_bad);
    g_autoptr(QDict) d = qdict_from_json(ok, &error_abort);
    const char *key = qdict_entry_key(qdict_first(d));

    g_assert_cmpuint(strlen(key), ==, 1 + 2 * 1023);
    check_json_err(bad, "JSON nesting depth limit exceeded");
}

static void check_to_json(const QDict *d, const char *expect)
{
    g_autofree char *json = qdict_to_json(d);

    g_assert_cmpstr(json, ==, expect);
}

static void test_json_output(void)
{
    /* QEMU 7.2 prints this json: filename for the same options. */
    static const char qemu_out[] =
        "{\"offset\": 512, \"driver\": \"raw\", \"size\": 4096, \"file\": "
        "{\"driver\": \"file\", \"filename\": \"/tmp/utdx\"}}";
    g_autoptr(QDict) d = qdict_from_json(qemu_out, &error_abort);
    g_autoptr(QDict) kv = NULL;
    g_autoptr(QDict) empty = qdict_new();
    g_autofree char *filename = qdict_to_json_filename(d);

    check_to_json(d, qemu_out);
    g_assert_cmpstr(filename, ==, "json:{\"offset\": 512, \"driver\": "
                    "\"raw\", \"size\": 4096, \"file\": {\"driver\": "
                    "\"file\", \"filename\": \"/tmp/utdx\"}}");
    check_to_json(empty, "{}");

    /* Options from key=value text are strings, quoted as QEMU does. */
    kv = qdict_new();
    qdict_put_str(kv, "driver", "raw");
    qdict_put_str(kv, "size", "4096");
    qdict_put_str(kv, "file.driver", "file");
    qdict_put_str(kv, "file.filename", "/tmp/ut\"d \u00e9\\x");
    qdict_put_bool(kv, "read-only", true);
    qdict_put_typed(kv, "x", NULL, QTYPE_QNULL);
    /* in QEMU's QDict order at every level, as QEMU prints json: names */
    check_to_json(kv, "{\"x\": null, \"driver\": \"raw\", \"size\": \"4096\", "
                  "\"read-only\": true, \"file\": {\"driver\": \"file\", "
                  "\"filename\": \"/tmp/ut\\\"d \\u00E9\\\\x\"}}");
}

static void test_json_output_escapes(void)
{
    g_autoptr(QDict) d = qdict_new();

    /* DEL, a control byte, invalid UTF-8, a character beyond the BMP. */
    qdict_put_str(d, "f", "/tmp/u\x7f\x01\xff\xf0\x9f\x98\x80");
    qdict_put_str(d, "c", "\b\f\n\r\t/");
    check_to_json(d, "{\"f\": \"/tmp/u\\u007F\\u0001\\uFFFD\\uD83D\\uDE00\", "
                  "\"c\": \"\\b\\f\\n\\r\\t/\"}");
}

static void test_json_output_arrays(void)
{
    g_autoptr(QDict) d = qdict_new();
    g_autoptr(QDict) e = qdict_new();
    g_autoptr(QDict) back = NULL;
    g_autofree char *json = NULL;

    qdict_put_str(d, "driver", "blkdebug");
    qdict_put_str(d, "inject-error.1.event", "flush");
    qdict_put_str(d, "inject-error.0.event", "pwritev");
    qdict_put_int(d, "inject-error.0.errno", 5);
    check_to_json(d, "{\"inject-error\": [{\"event\": \"pwritev\", "
                  "\"errno\": 5}, {\"event\": \"flush\"}], "
                  "\"driver\": \"blkdebug\"}");
    /* And it reads back to the same options. */
    json = qdict_to_json(d);
    back = qdict_from_json(json, &error_abort);
    assert_dump(back, "inject-error.0.event=pwritev(str) "
                "inject-error.0.errno=5(num) inject-error.1.event=flush(str) "
                "driver=blkdebug(str)");

    /* Not 0..n-1: an object.  A value and a prefix at once: kept flat. */
    qdict_put_str(e, "a.1", "x");
    qdict_put_str(e, "b.01", "y");
    qdict_put_str(e, "0", "top");
    qdict_put_str(e, "file", "img");
    qdict_put_str(e, "file.locking", "off");
    check_to_json(e, "{\"0\": \"top\", \"file.locking\": \"off\", "
                  "\"a\": {\"1\": \"x\"}, \"b\": {\"01\": \"y\"}, "
                  "\"file\": \"img\"}");
}

/*
 * The same QDict as a tree (events, keyval arguments): nested as in the
 * text, numbers typed as the parser would read the text, except that the
 * text keeps a uint64 exact where the tree has only a double.
 */
static void test_json_node(void)
{
    g_autoptr(QDict) d = qdict_new();
    g_autoptr(JsonNode) node = NULL;
    g_autofree char *tree_text = NULL;

    qdict_put_str(d, "node-name", "n0");
    qdict_put_int(d, "offset", -512);
    qdict_put_typed(d, "size", "18446744073709551615", QTYPE_QNUM);
    qdict_put_typed(d, "ratio", "0.5", QTYPE_QNUM);
    qdict_put_bool(d, "nospace", false);
    qdict_put_str(d, "list.0.x", "a");
    qdict_put_typed(d, "list.1", NULL, QTYPE_QNULL);
    /* the text in QEMU's QDict order, the tree in the order added */
    check_to_json(d, "{\"list\": [{\"x\": \"a\"}, null], \"nospace\": false, "
                  "\"offset\": -512, \"node-name\": \"n0\", "
                  "\"size\": 18446744073709551615, \"ratio\": 0.5}");
    node = qdict_to_json_node(d);
    tree_text = json_to_text(node, 0);
    g_assert_cmpstr(tree_text, ==,
                    "{\"node-name\": \"n0\", \"offset\": -512, "
                    "\"size\": 1.8446744073709552e+19, \"ratio\": 0.5, "
                    "\"nospace\": false, \"list\": [{\"x\": \"a\"}, null]}");
    g_assert_cmpint(json_node_get_value_type(
                        json_object_get_member(json_node_get_object(node),
                                               "offset")), ==, G_TYPE_INT64);
}

/* A parsed object flattens as its text does (QMP's blockdev-add). */
static void test_json_from_object(void)
{
    const char *text = "{\"driver\": \"raw\", \"file\": {\"driver\": "
                       "\"file\", \"filename\": \"/x\"}, \"n\": 1.5e3}";
    g_autoptr(JsonNode) node = json_parse_text(text, strlen(text),
                                               &error_abort);
    g_autoptr(QDict) d = qdict_from_json_object(json_node_get_object(node));

    assert_dump(d, "driver=raw(str) file.driver=file(str) "
                "file.filename=/x(str) n=1500(num)");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/qdict/put-get-types", test_put_get_types);
    g_test_add_func("/qdict/replace", test_replace_keeps_position);
    g_test_add_func("/qdict/del", test_del);
    g_test_add_func("/qdict/del-while-iterating", test_del_while_iterating);
    g_test_add_func("/qdict/clone-join", test_clone_and_join);
    g_test_add_func("/qdict/extract-subqdict", test_extract_subqdict);
    g_test_add_func("/qdict/refcount", test_refcount);
    g_test_add_func("/qdict/many-keys", test_many_keys);
    g_test_add_func("/qdict/json/flatten", test_json_flatten);
    g_test_add_func("/qdict/json/scalars", test_json_scalars);
    g_test_add_func("/qdict/json/strings", test_json_strings);
    g_test_add_func("/qdict/json/errors", test_json_errors);
    g_test_add_func("/qdict/json/not-object", test_json_not_object);
    g_test_add_func("/qdict/json/nesting", test_json_nesting);
    g_test_add_func("/qdict/json/output", test_json_output);
    g_test_add_func("/qdict/json/output-escapes", test_json_output_escapes);
    g_test_add_func("/qdict/json/output-arrays", test_json_output_arrays);
    g_test_add_func("/qdict/json/node", test_json_node);
    g_test_add_func("/qdict/json/from-object", test_json_from_object);
    return g_test_run();
}
