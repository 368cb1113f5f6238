/*
 * Size parsing with suffixes, strict integer parsing, the size formats of
 * qemu-img info and qemu-io (checked against what QEMU 7.2 prints),
 * boolean values and the small string helpers.
 */
#include "util/cutils.h"

static void check_strtosz(const char *text, int expect_ret, uint64_t expect)
{
    uint64_t val = 0xdeadbeef;
    int ret = qemu_strtosz(text, NULL, &val);

    if (ret != expect_ret) {
        g_error("qemu_strtosz(\"%s\") returned %d, expected %d",
                text, ret, expect_ret);
    }
    if (ret == 0 && val != expect) {
        g_error("qemu_strtosz(\"%s\") = %" PRIu64 ", expected %" PRIu64,
                text, val, expect);
    }
    if (ret < 0) {
        /* A failed parse leaves the result alone. */
        g_assert_cmpuint(val, ==, 0xdeadbeef);
    }
}

static void test_strtosz_suffixes(void)
{
    check_strtosz("0", 0, 0);
    check_strtosz("512", 0, 512);
    check_strtosz("1b", 0, 1);
    check_strtosz("1B", 0, 1);
    check_strtosz("1k", 0, KiB);
    check_strtosz("1K", 0, KiB);
    check_strtosz("1536K", 0, 1536 * KiB);
    check_strtosz("1m", 0, MiB);
    check_strtosz("1M", 0, MiB);
    check_strtosz("1000M", 0, 1000 * MiB);
    check_strtosz("1G", 0, GiB);
    check_strtosz("1T", 0, TiB);
    check_strtosz("1P", 0, PiB);
    check_strtosz("1E", 0, EiB);
    check_strtosz("15E", 0, 15 * (uint64_t)EiB);
    check_strtosz(" 1M", 0, MiB);
    check_strtosz("+1", 0, 1);
    /* A leading zero is not octal, "0x" is hexadecimal. */
    check_strtosz("010", 0, 10);
    check_strtosz("0x10", 0, 16);
    check_strtosz("18446744073709551615", 0, UINT64_MAX);
}

static void test_strtosz_fractions(void)
{
    check_strtosz("1.5G", 0, GiB + GiB / 2);
    check_strtosz("1.5k", 0, 1536);
    check_strtosz("1.M", 0, MiB);
    /* Rounded to the nearest byte, as QEMU 7.2 does: 102.4 and 921.6. */
    check_strtosz("0.1k", 0, 102);
    check_strtosz("0.9k", 0, 922);
    check_strtosz("0.00000001k", 0, 0);
    check_strtosz("7.9E", 0, 9108079886394091136ULL);
    /* A non-zero fraction needs a multiplier above one byte. */
    check_strtosz("1.5", -EINVAL, 0);
    check_strtosz("1.5b", -EINVAL, 0);
    check_strtosz("1.5B", -EINVAL, 0);
    /* a zero fraction is a whole number of bytes, as in QEMU (iotest 049) */
    check_strtosz("1024.0", 0, 1024);
    check_strtosz("1024.0b", 0, 1024);
    check_strtosz("1.00B", 0, 1);
    check_strtosz(".5M", -EINVAL, 0);
    check_strtosz("1.5.5k", -EINVAL, 0);
    check_strtosz("0x1.8M", -EINVAL, 0);
}

static void test_strtosz_invalid(void)
{
    check_strtosz("", -EINVAL, 0);
    check_strtosz("M", -EINVAL, 0);
    check_strtosz("12Q", -EINVAL, 0);
    check_strtosz("1MB", -EINVAL, 0);
    check_strtosz("1M ", -EINVAL, 0);
    check_strtosz("1 M", -EINVAL, 0);
    check_strtosz("1e3", -EINVAL, 0);
    check_strtosz("1_000", -EINVAL, 0);
    check_strtosz("0x", -EINVAL, 0);
    check_strtosz("0x10M", -EINVAL, 0);
    check_strtosz("inf", -EINVAL, 0);
    check_strtosz("nan", -EINVAL, 0);
    check_strtosz("-", -EINVAL, 0);
    check_strtosz("abc", -EINVAL, 0);
    g_assert_cmpint(qemu_strtosz(NULL, NULL, &(uint64_t){0}), ==, -EINVAL);
}

static void test_strtosz_range(void)
{
    check_strtosz("-1", -ERANGE, 0);
    check_strtosz(" -1", -ERANGE, 0);
    check_strtosz("-1M", -ERANGE, 0);
    check_strtosz("-0", -ERANGE, 0);
    check_strtosz("16E", -ERANGE, 0);
    check_strtosz("15.99999999999999999999E", -ERANGE, 0);
    check_strtosz("18446744073709551616", -ERANGE, 0);
    check_strtosz("99999999999999999999999", -ERANGE, 0);
    check_strtosz("17179869184G", -ERANGE, 0);
}

static void test_strtosz_end(void)
{
    const char *end;
    const char *text = "12Q";
    uint64_t val = 0;

    /* With @end an unknown suffix is left to the caller. */
    g_assert_cmpint(qemu_strtosz(text, &end, &val), ==, 0);
    g_assert_cmpuint(val, ==, 12);
    g_assert_true(end == text + 2);

    text = "4k,rest";
    g_assert_cmpint(qemu_strtosz(text, &end, &val), ==, 0);
    g_assert_cmpuint(val, ==, 4096);
    g_assert_cmpstr(end, ==, ",rest");

    text = "x";
    g_assert_cmpint(qemu_strtosz(text, &end, &val), ==, -EINVAL);
    g_assert_true(end == text);

    text = "1.5x";
    g_assert_cmpint(qemu_strtosz(text, &end, &val), ==, -EINVAL);
}

static void test_strtosz_mib(void)
{
    uint64_t val = 0;

    g_assert_cmpint(qemu_strtosz_MiB("64", NULL, &val), ==, 0);
    g_assert_cmpuint(val, ==, 64 * MiB);
    g_assert_cmpint(qemu_strtosz_MiB("1.5", NULL, &val), ==, 0);
    g_assert_cmpuint(val, ==, MiB + MiB / 2);
    g_assert_cmpint(qemu_strtosz_MiB("4k", NULL, &val), ==, 0);
    g_assert_cmpuint(val, ==, 4096);
    g_assert_cmpint(qemu_strtosz_MiB("512b", NULL, &val), ==, 0);
    g_assert_cmpuint(val, ==, 512);
    g_assert_cmpint(qemu_strtosz_MiB("17592186044416", NULL, &val), ==,
                    -ERANGE);
    g_assert_cmpint(qemu_strtosz_MiB("x", NULL, &val), ==, -EINVAL);
}

static void test_strtoi64(void)
{
    int64_t val;
    const char *end;

    g_assert_cmpint(qemu_strtoi64("-42", NULL, 0, &val), ==, 0);
    g_assert_cmpint(val, ==, -42);
    g_assert_cmpint(qemu_strtoi64("0x1f", NULL, 0, &val), ==, 0);
    g_assert_cmpint(val, ==, 31);
    g_assert_cmpint(qemu_strtoi64("010", NULL, 0, &val), ==, 0);
    g_assert_cmpint(val, ==, 8);
    g_assert_cmpint(qemu_strtoi64("010", NULL, 10, &val), ==, 0);
    g_assert_cmpint(val, ==, 10);
    g_assert_cmpint(qemu_strtoi64("9223372036854775807", NULL, 0, &val),
                    ==, 0);
    g_assert_cmpint(val, ==, INT64_MAX);
    g_assert_cmpint(qemu_strtoi64("9223372036854775808", NULL, 0, &val),
                    ==, -ERANGE);
    g_assert_cmpint(val, ==, INT64_MAX);
    g_assert_cmpint(qemu_strtoi64("-9223372036854775809", NULL, 0, &val),
                    ==, -ERANGE);
    g_assert_cmpint(val, ==, INT64_MIN);
    g_assert_cmpint(qemu_strtoi64("", NULL, 0, &val), ==, -EINVAL);
    g_assert_cmpint(qemu_strtoi64("12x", NULL, 0, &val), ==, -EINVAL);
    g_assert_cmpint(qemu_strtoi64("12 ", NULL, 0, &val), ==, -EINVAL);
    g_assert_cmpint(qemu_strtoi64("x", NULL, 0, &val), ==, -EINVAL);
    g_assert_cmpint(qemu_strtoi64(NULL, NULL, 0, &val), ==, -EINVAL);

    g_assert_cmpint(qemu_strtoi64("12x", &end, 0, &val), ==, 0);
    g_assert_cmpint(val, ==, 12);
    g_assert_cmpstr(end, ==, "x");
    g_assert_cmpint(qemu_strtoi64("x", &end, 0, &val), ==, -EINVAL);
    g_assert_cmpstr(end, ==, "x");
}

static void test_strtou64(void)
{
    uint64_t val;

    g_assert_cmpint(qemu_strtou64("18446744073709551615", NULL, 0, &val),
                    ==, 0);
    g_assert_cmpuint(val, ==, UINT64_MAX);
    g_assert_cmpint(qemu_strtou64("18446744073709551616", NULL, 0, &val),
                    ==, -ERANGE);
    g_assert_cmpuint(val, ==, UINT64_MAX);
    /* strtoull() would turn "-1" into UINT64_MAX; we refuse it. */
    g_assert_cmpint(qemu_strtou64("-1", NULL, 0, &val), ==, -ERANGE);
    g_assert_cmpint(qemu_strtou64(" -5", NULL, 10, &val), ==, -ERANGE);
    g_assert_cmpint(qemu_strtou64("-0", NULL, 0, &val), ==, 0);
    g_assert_cmpuint(val, ==, 0);
    g_assert_cmpint(qemu_strtou64("0x10", NULL, 0, &val), ==, 0);
    g_assert_cmpuint(val, ==, 16);
    g_assert_cmpint(qemu_strtou64("1k", NULL, 0, &val), ==, -EINVAL);
    g_assert_cmpint(qemu_strtou64("", NULL, 0, &val), ==, -EINVAL);
}

static void test_strtoi(void)
{
    int val;

    g_assert_cmpint(qemu_strtoi("2147483647", NULL, 0, &val), ==, 0);
    g_assert_cmpint(val, ==, INT_MAX);
    g_assert_cmpint(qemu_strtoi("2147483648", NULL, 0, &val), ==, -ERANGE);
    g_assert_cmpint(val, ==, INT_MAX);
    g_assert_cmpint(qemu_strtoi("-2147483649", NULL, 0, &val), ==, -ERANGE);
    g_assert_cmpint(val, ==, INT_MIN);
    g_assert_cmpint(qemu_strtoi("-7", NULL, 0, &val), ==, 0);
    g_assert_cmpint(val, ==, -7);
    g_assert_cmpint(qemu_strtoi("7 ", NULL, 0, &val), ==, -EINVAL);
}

static void check_size_to_str(uint64_t val, const char *expect)
{
    g_autofree char *text = size_to_str(val);

    if (strcmp(text, expect)) {
        g_error("size_to_str(%" PRIu64 ") = \"%s\", expected \"%s\"",
                val, text, expect);
    }
}

/* Each expectation was read from `qemu-img info` of QEMU 7.2. */
static void test_size_to_str(void)
{
    check_size_to_str(0, "0 B");
    check_size_to_str(512, "512 B");
    check_size_to_str(999, "999 B");
    check_size_to_str(1000, "0.977 KiB");
    check_size_to_str(1024, "1 KiB");
    check_size_to_str(1536, "1.5 KiB");
    check_size_to_str(4096, "4 KiB");
    check_size_to_str(65536, "64 KiB");
    check_size_to_str(1023 * KiB, "0.999 MiB");
    check_size_to_str(1023488, "1e+03 KiB");
    check_size_to_str(1024000, "0.977 MiB");
    check_size_to_str(1048064, "1 MiB");
    check_size_to_str(1536 * KiB, "1.5 MiB");
    check_size_to_str(10 * MiB, "10 MiB");
    check_size_to_str(10 * MiB + 512, "10 MiB");
    check_size_to_str(100 * MiB, "100 MiB");
    check_size_to_str(123457024, "118 MiB");
    check_size_to_str(1000 * MiB, "0.977 GiB");
    check_size_to_str(GiB, "1 GiB");
    check_size_to_str(GiB + GiB / 2, "1.5 GiB");
    check_size_to_str(1048576000000ULL, "977 GiB");
    check_size_to_str(PiB, "1 PiB");
    check_size_to_str(EiB, "1 EiB");
    check_size_to_str(UINT64_MAX, "16 EiB");
}

static void check_size_to_str_io(double val, const char *expect)
{
    g_autofree char *text = size_to_str_io(val);

    if (strcmp(text, expect)) {
        g_error("size_to_str_io(%f) = \"%s\", expected \"%s\"",
                val, text, expect);
    }
}

/* Each expectation was read from qemu-io 7.2's "wrote ..." summaries. */
static void test_size_to_str_io(void)
{
    check_size_to_str_io(1, "1 bytes");
    check_size_to_str_io(512, "512 bytes");
    check_size_to_str_io(1000, "1000 bytes");
    check_size_to_str_io(537.764802, "537.764802 bytes");
    check_size_to_str_io(65536, "64 KiB");
    check_size_to_str_io(1047552, "1023 KiB");
    check_size_to_str_io(1048064, "1023.500 KiB");
    check_size_to_str_io(1048576, "1 MiB");
    check_size_to_str_io(1572864, "1.500 MiB");
    check_size_to_str_io(217.541 * MiB, "217.541 MiB");
    check_size_to_str_io(GiB, "1 GiB");
    check_size_to_str_io(2.0 * EiB, "2 EiB");
}

static void test_bool_parse(void)
{
    static const char *const yes[] = { "on", "yes", "true" };
    static const char *const no[] = { "off", "no", "false" };
    Error *err = NULL;
    bool val;

    for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
        val = false;
        g_assert_true(qapi_bool_parse("x", yes[i], &val, &error_abort));
        g_assert_true(val);
        g_assert_true(qapi_bool_parse("x", no[i], &val, &error_abort));
        g_assert_false(val);
    }
    for (const char *const *bad = (const char *const[]){ "1", "0", "ON",
                                                         "", "bogus", NULL };
         *bad; bad++) {
        g_assert_false(qapi_bool_parse("cache.direct", *bad, &val, &err));
        g_assert_cmpstr(error_get_pretty(err), ==,
                        "Parameter 'cache.direct' expects 'on' or 'off'");
        error_free(err);
        err = NULL;
    }
}

static void test_pstrcpy(void)
{
    char buf[8];

    pstrcpy(buf, sizeof(buf), "abc");
    g_assert_cmpstr(buf, ==, "abc");
    pstrcpy(buf, sizeof(buf), "0123456789");
    g_assert_cmpstr(buf, ==, "0123456");
    pstrcpy(buf, 1, "x");
    g_assert_cmpstr(buf, ==, "");
}

static void test_strstart(void)
{
    const char *rest = NULL;

    g_assert_true(strstart("json:{}", "json:", &rest));
    g_assert_cmpstr(rest, ==, "{}");
    rest = NULL;
    g_assert_false(strstart("jso", "json:", &rest));
    g_assert_null(rest);
    g_assert_true(strstart("abc", "", NULL));
}

/* The table's holes match nothing, and a prefix is not the name. */
static void test_name_index(void)
{
    static const char *const names[] = { "off", NULL, "full", "falloc" };

    g_assert_cmpint(qemu_name_index(names, 4, "off"), ==, 0);
    g_assert_cmpint(qemu_name_index(names, 4, "falloc"), ==, 3);
    g_assert_cmpint(qemu_name_index(names, 4, "ful"), ==, -1);
    g_assert_cmpint(qemu_name_index(names, 4, ""), ==, -1);
    g_assert_cmpint(qemu_name_index(names, 3, "falloc"), ==, -1);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cutils/strtosz/suffixes", test_strtosz_suffixes);
    g_test_add_func("/cutils/strtosz/fractions", test_strtosz_fractions);
    g_test_add_func("/cutils/strtosz/invalid", test_strtosz_invalid);
    g_test_add_func("/cutils/strtosz/range", test_strtosz_range);
    g_test_add_func("/cutils/strtosz/end", test_strtosz_end);
    g_test_add_func("/cutils/strtosz/mib", test_strtosz_mib);
    g_test_add_func("/cutils/strtoi64", test_strtoi64);
    g_test_add_func("/cutils/strtou64", test_strtou64);
    g_test_add_func("/cutils/strtoi", test_strtoi);
    g_test_add_func("/cutils/size-to-str", test_size_to_str);
    g_test_add_func("/cutils/size-to-str-io", test_size_to_str_io);
    g_test_add_func("/cutils/bool-parse", test_bool_parse);
    g_test_add_func("/cutils/pstrcpy", test_pstrcpy);
    g_test_add_func("/cutils/strstart", test_strstart);
    g_test_add_func("/cutils/name-index", test_name_index);
    return g_test_run();
}
