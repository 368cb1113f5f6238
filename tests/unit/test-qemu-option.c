/*
 * QemuOpts against option tables: absorbing from a QDict with type
 * checks and defaults, "-o" strings, setters and getters, enum lookups,
 * merged tables and the `-o help` layout, with the error texts QEMU 7.2
 * prints for the same bad values.
 */
#include "util/qemu-option.h"
#include "qapi/qapi-opts.h"

static const char *const test_enum_values[] = { "threads", "native",
                                                "io_uring", NULL };

static const QemuOptDesc test_desc[] = {
    { "str", QEMU_OPT_STRING, "a string", NULL, NULL },
    { "flag", QEMU_OPT_BOOL, "a bool", "off", NULL },
    { "count", QEMU_OPT_NUMBER, "a number", "7", NULL },
    { "size", QEMU_OPT_SIZE, "a size", NULL, NULL },
    { "aio", QEMU_OPT_ENUM, "an enum", "threads", test_enum_values },
    { "cache.direct", QEMU_OPT_BOOL, NULL, NULL, NULL },
    { NULL, 0, NULL, NULL, NULL },
};

static const QemuOptsList test_list = { "test", test_desc };

static void check_set_err(const char *name, const char *value,
                          const char *expect)
{
    QemuOpts *opts = qemu_opts_create(&test_list);
    Error *err = NULL;

    if (qemu_opt_set(opts, name, value, &err)) {
        g_error("%s=%s was accepted", name, value);
    }
    g_assert_cmpstr(error_get_pretty(err), ==, expect);
    g_assert_false(qemu_opt_has(opts, name));
    error_free(err);
    qemu_opts_del(opts);
}

static void test_bad_values(void)
{
    check_set_err("aio", "nope", "Parameter 'aio' does not accept value "
                  "'nope'");
    check_set_err("aio", "", "Parameter 'aio' does not accept value ''");
    check_set_err("cache.direct", "bogus",
                  "Parameter 'cache.direct' expects 'on' or 'off'");
    check_set_err("flag", "1", "Parameter 'flag' expects 'on' or 'off'");
    check_set_err("size", "12Q",
                  "Parameter 'size' expects a non-negative number below 2^64");
    check_set_err("size", "-1",
                  "Parameter 'size' expects a non-negative number below 2^64");
    check_set_err("size", "1.5",
                  "Parameter 'size' expects a non-negative number below 2^64");
    check_set_err("size", "16E",
                  "Parameter 'size' expects a non-negative number below 2^64");
    check_set_err("count", "x", "Parameter 'count' expects a number");
    check_set_err("count", "12k", "Parameter 'count' expects a number");
    check_set_err("count", "99999999999999999999",
                  "Value '99999999999999999999' is too large for parameter "
                  "'count'");
    /* QEMU 7.2 reads "-1" as strtoull() does: UINT64_MAX */
    check_set_err("count", "--1", "Parameter 'count' expects a number");
    check_set_err("count", "-99999999999999999999",
                  "Value '-99999999999999999999' is too large for parameter "
                  "'count'");
    check_set_err("bogus", "1", "Invalid parameter 'bogus'");
    check_set_err("", "1", "Invalid parameter ''");
}

static void test_size_hint(void)
{
    QemuOpts *opts = qemu_opts_create(&test_list);
    Error *err = NULL;

    g_assert_false(qemu_opt_set(opts, "size", "12Q", &err));
    g_assert_cmpstr(error_get_hint(err), ==,
                    "Optional suffix k, M, G, T, P or E means kilo-, mega-, "
                    "giga-, tera-, peta-\nand exabytes, respectively.\n");
    error_free(err);
    qemu_opts_del(opts);
}

static void test_getters_and_defaults(void)
{
    QemuOpts *opts = qemu_opts_create(&test_list);

    /* Nothing given: schema defaults, else the caller's default. */
    g_assert_false(qemu_opt_has(opts, "count"));
    g_assert_cmpuint(qemu_opt_get_number(opts, "count", 99), ==, 7);
    g_assert_cmpuint(qemu_opt_get_size(opts, "size", 512), ==, 512);
    g_assert_false(qemu_opt_get_bool(opts, "flag", true));
    g_assert_true(qemu_opt_get_bool(opts, "cache.direct", true));
    g_assert_cmpstr(qemu_opt_get(opts, "aio"), ==, "threads");
    g_assert_cmpint(qemu_opt_get_enum(opts, "aio"), ==, 0);
    g_assert_null(qemu_opt_get(opts, "str"));
    g_assert_cmpint(qemu_opt_get_enum(opts, "str"), ==, -1);
    g_assert_null(qemu_opt_get(opts, "not-in-table"));

    g_assert_true(qemu_opt_set(opts, "size", "1.5G", &error_abort));
    g_assert_true(qemu_opt_set(opts, "flag", "yes", &error_abort));
    g_assert_true(qemu_opt_set(opts, "count", "0x10", &error_abort));
    g_assert_true(qemu_opt_set(opts, "aio", "io_uring", &error_abort));
    g_assert_true(qemu_opt_set_bool(opts, "cache.direct", false,
                                    &error_abort));
    g_assert_cmpuint(qemu_opt_get_size(opts, "size", 0), ==, GiB + GiB / 2);
    g_assert_cmpstr(qemu_opt_get(opts, "size"), ==, "1.5G");
    g_assert_true(qemu_opt_get_bool(opts, "flag", false));
    g_assert_false(qemu_opt_get_bool(opts, "cache.direct", true));
    g_assert_cmpstr(qemu_opt_get(opts, "cache.direct"), ==, "off");
    g_assert_cmpuint(qemu_opt_get_number(opts, "count", 0), ==, 16);
    g_assert_cmpint(qemu_opt_get_enum(opts, "aio"), ==, 2);

    g_assert_true(qemu_opt_set_number(opts, "count", UINT64_MAX,
                                      &error_abort));
    g_assert_cmpuint(qemu_opt_get_number(opts, "count", 0), ==, UINT64_MAX);
    qemu_opts_del(opts);
}

static void test_unset_and_get_del(void)
{
    QemuOpts *opts = qemu_opts_create(&test_list);
    char *value;

    qemu_opt_set(opts, "str", "hello", &error_abort);
    g_assert_true(qemu_opt_unset(opts, "str"));
    g_assert_false(qemu_opt_unset(opts, "str"));
    g_assert_false(qemu_opt_has(opts, "str"));

    qemu_opt_set(opts, "str", "x", &error_abort);
    value = qemu_opt_get_del(opts, "str");
    g_assert_cmpstr(value, ==, "x");
    g_free(value);
    g_assert_false(qemu_opt_has(opts, "str"));
    g_assert_null(qemu_opt_get_del(opts, "str"));

    /* Unset with a default: the default comes back. */
    value = qemu_opt_get_del(opts, "aio");
    g_assert_cmpstr(value, ==, "threads");
    g_free(value);
    qemu_opts_del(opts);
}

static void test_absorb_qdict(void)
{
    g_autoptr(QDict) options = qdict_from_json(
        "{\"driver\": \"raw\", \"size\": 4096, \"aio\": \"native\", "
        "\"flag\": true, \"cache\": {\"direct\": \"on\"}, "
        "\"file\": {\"filename\": \"/tmp/x\"}}", &error_abort);
    g_autoptr(QDict) back = NULL;
    g_autofree char *json = NULL;
    QemuOpts *opts = qemu_opts_absorb_qdict(&test_list, options,
                                            &error_abort);

    g_assert_cmpuint(qemu_opt_get_size(opts, "size", 0), ==, 4096);
    g_assert_cmpint(qemu_opt_get_enum(opts, "aio"), ==, 1);
    g_assert_true(qemu_opt_get_bool(opts, "flag", false));
    g_assert_true(qemu_opt_get_bool(opts, "cache.direct", false));
    /* Unknown keys stay behind for the caller or a child. */
    g_assert_cmpuint(qdict_size(options), ==, 2);
    g_assert_cmpstr(qdict_get_try_str(options, "driver"), ==, "raw");
    g_assert_cmpstr(qdict_get_try_str(options, "file.filename"), ==,
                    "/tmp/x");

    /* Values keep their JSON type on the way back out. */
    back = qemu_opts_to_qdict(opts, NULL);
    json = qdict_to_json(back);
    g_assert_cmpstr(json, ==, "{\"size\": 4096, \"aio\": \"native\", "
                    "\"cache\": {\"direct\": \"on\"}, \"flag\": true}");
    qemu_opts_del(opts);
}

static void test_absorb_errors(void)
{
    static const struct {
        const char *json;
        const char *error;
    } cases[] = {
        { "{\"aio\": \"nope\"}",
          "Parameter 'aio' does not accept value 'nope'" },
        { "{\"cache.direct\": \"bogus\"}",
          "Parameter 'cache.direct' expects 'on' or 'off'" },
        { "{\"size\": -1}",
          "Parameter 'size' expects a non-negative number below 2^64" },
        { "{\"size\": 1.5}",
          "Parameter 'size' expects a non-negative number below 2^64" },
        { "{\"size\": 18446744073709551616}",
          "Parameter 'size' expects a non-negative number below 2^64" },
        { "{\"count\": true}", "Parameter 'count' expects a number" },
        { "{\"count\": null}",
          "Invalid parameter type for 'count', expected: number" },
        { "{\"aio\": null}",
          "Invalid parameter type for 'aio', expected: string" },
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        g_autoptr(QDict) options = qdict_from_json(cases[i].json,
                                                   &error_abort);
        Error *err = NULL;

        qdict_put_str(options, "str", "kept");
        g_assert_null(qemu_opts_absorb_qdict(&test_list, options, &err));
        g_assert_cmpstr(error_get_pretty(err), ==, cases[i].error);
        /* A failed absorb leaves the options as they were. */
        g_assert_cmpuint(qdict_size(options), ==, 2);
        error_free(err);
    }
}

static void test_absorb_generated_table(void)
{
    g_autoptr(QDict) options = keyval_parse(
        "driver=file,filename=/tmp/x,aio=io_uring,locking=off,"
        "node-name=n0", NULL, &error_abort);
    QemuOpts *opts = qemu_opts_absorb_qdict(&qapi_opts_file_runtime,
                                            options, &error_abort);

    g_assert_cmpstr(qemu_opt_get(opts, "filename"), ==, "/tmp/x");
    g_assert_cmpint(qemu_opt_get_enum(opts, "aio"), ==, 2);
    g_assert_cmpint(qemu_opt_get_enum(opts, "locking"), ==, 2);
    g_assert_cmpuint(qemu_opt_get_number(opts, "aio-max-batch", 9), ==, 0);
    g_assert_cmpuint(qdict_size(options), ==, 2);
    qemu_opts_del(opts);
}

static void test_parse(void)
{
    Error *err = NULL;
    QemuOpts *opts = qemu_opts_parse(&test_list,
                                     "size=1M,str=a,,b,flag,size=2M,", &err);

    g_assert_nonnull(opts);
    g_assert_cmpuint(qemu_opt_get_size(opts, "size", 0), ==, 2 * MiB);
    g_assert_cmpstr(qemu_opt_get(opts, "str"), ==, "a,b");
    /* A bare name means "on". */
    g_assert_cmpstr(qemu_opt_get(opts, "flag"), ==, "on");
    qemu_opts_del(opts);

    opts = qemu_opts_parse(&test_list, "", &error_abort);
    g_assert_false(qemu_opt_has(opts, "size"));
    qemu_opts_del(opts);

    g_assert_null(qemu_opts_parse(&test_list, "size=1M,bogus=1", &err));
    g_assert_cmpstr(error_get_pretty(err), ==, "Invalid parameter 'bogus'");
    error_free(err);
    err = NULL;
    g_assert_null(qemu_opts_parse(&test_list, "size=1M,=1", &err));
    g_assert_cmpstr(error_get_pretty(err), ==, "Invalid parameter ''");
    error_free(err);
    err = NULL;
    /* "size=1M,,x" is the value "1M,x"; a bare "size" is "size=on". */
    g_assert_null(qemu_opts_parse(&test_list, "size=1M,,x", &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Parameter 'size' expects a non-negative number below 2^64");
    error_free(err);
    err = NULL;
    g_assert_null(qemu_opts_parse(&test_list, "size", &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Parameter 'size' expects a non-negative number below 2^64");
    error_free(err);
    err = NULL;

    /* Enum values are judged later, by qemu_opts_check_enums(). */
    opts = qemu_opts_parse(&test_list, "aio=nope", &error_abort);
    g_assert_cmpstr(qemu_opt_get(opts, "aio"), ==, "nope");
    g_assert_false(qemu_opts_check_enums(opts, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Parameter 'aio' does not accept value 'nope'");
    error_free(err);
    qemu_opts_del(opts);
    opts = qemu_opts_parse(&test_list, "aio=native", &error_abort);
    g_assert_true(qemu_opts_check_enums(opts, &error_abort));
    qemu_opts_del(opts);
}

static void test_append(void)
{
    QemuOptsList *merged = qemu_opts_append(NULL, &qapi_opts_raw_create);
    size_t n = 0;

    merged = qemu_opts_append(merged, &qapi_opts_file_create);
    for (const QemuOptDesc *d = merged->desc; d->name; d++) {
        n++;
    }
    /* raw's size, then file's options without its duplicate size. */
    g_assert_cmpuint(n, ==, 4);
    g_assert_cmpstr(merged->desc[0].name, ==, "size");
    g_assert_cmpstr(merged->desc[0].help, ==, "Virtual disk size");
    g_assert_cmpstr(merged->desc[1].name, ==, "nocow");
    g_assert_nonnull(qemu_opts_find_desc(merged, "extent_size_hint"));
    g_assert_null(qemu_opts_find_desc(merged, "aio"));
    qemu_opts_free(merged);
}

/* Byte for byte what `qemu-img create -f raw -o help x` prints in 7.2. */
static void test_print_help(void)
{
    if (g_test_subprocess()) {
        QemuOptsList *merged = qemu_opts_append(NULL, &qapi_opts_raw_create);

        merged = qemu_opts_append(merged, &qapi_opts_file_create);
        qemu_opts_print_help(merged, true);
        qemu_opts_print_help(&test_list, false);
        qemu_opts_free(merged);
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_passed();
    g_test_trap_assert_stdout(
        "Supported options:\n"
        "  extent_size_hint=<size> - Extent size hint for the image file, "
        "0 to disable\n"
        "  nocow=<bool (on/off)>  - Turn off copy-on-write (valid only on "
        "btrfs)\n"
        "  preallocation=<str>    - Preallocation mode (allowed values: "
        "off, falloc, full)\n"
        "  size=<size>            - Virtual disk size\n"
        "  aio=<str>              - an enum\n"
        "  cache.direct=<bool (on/off)>\n"
        "  count=<num>            - a number\n"
        "  flag=<bool (on/off)>   - a bool\n"
        "  size=<size>            - a size\n"
        "  str=<str>              - a string\n");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/qemu-option/bad-values", test_bad_values);
    g_test_add_func("/qemu-option/size-hint", test_size_hint);
    g_test_add_func("/qemu-option/getters-defaults",
                    test_getters_and_defaults);
    g_test_add_func("/qemu-option/unset-get-del", test_unset_and_get_del);
    g_test_add_func("/qemu-option/absorb", test_absorb_qdict);
    g_test_add_func("/qemu-option/absorb-errors", test_absorb_errors);
    g_test_add_func("/qemu-option/absorb-generated",
                    test_absorb_generated_table);
    g_test_add_func("/qemu-option/parse", test_parse);
    g_test_add_func("/qemu-option/append", test_append);
    g_test_add_func("/qemu-option/print-help", test_print_help);
    return g_test_run();
}
