/*
 * QDict: typed values, insertion order, replacement, deletion during
 * iteration, clone/join, sub-dict extraction and reference counting.
 */
#include "util/qdict.h"

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
    return g_test_run();
}
