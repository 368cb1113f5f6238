/*
 * The one JSON stack: the strict parser (QEMU 7.2's error texts, observed
 * through qemu-storage-daemon's QMP socket and qemu-img's json:
 * filenames, and the offset of the fault), the writer (QEMU's spacing,
 * escapes, number formats, pretty layout and both member orders, from a
 * tree or a stream of calls) and the streamer's framing and limits.
 */
#include "util/json.h"

/* Parses @text and writes it back compactly. */
static char *roundtrip(const char *text)
{
    Error *err = NULL;
    JsonNode *node = json_parse_text(text, strlen(text), &err);
    char *out;

    if (!node) {
        g_error("parsing '%s' failed: %s", text, error_get_pretty(err));
    }
    out = json_to_text(node, 0);
    json_node_unref(node);
    return out;
}

static void check_roundtrip(const char *text, const char *expect)
{
    g_autofree char *out = roundtrip(text);

    g_assert_cmpstr(out, ==, expect);
}

static void check_error(const char *text, const char *expect)
{
    Error *err = NULL;
    JsonNode *node = json_parse_text(text, strlen(text), &err);

    if (node) {
        g_error("'%s' was accepted", text);
    }
    g_assert_cmpstr(error_get_pretty(err), ==, expect);
    error_free(err);
}

static void test_values(void)
{
    check_roundtrip("{\"a\":1,\"b\":[true,false,null],\"c\":\"x\"}",
                    "{\"a\": 1, \"b\": [true, false, null], \"c\": \"x\"}");
    check_roundtrip(" { } ", "{}");
    check_roundtrip("[ ]", "[]");
    check_roundtrip("-0", "0");
    check_roundtrip("9223372036854775807", "9223372036854775807");
    check_roundtrip("-9223372036854775808", "-9223372036854775808");
    /* beyond int64: a double, as QEMU makes numbers beyond uint64 */
    check_roundtrip("18446744073709551616", "1.8446744073709552e+19");
    check_roundtrip("1.5", "1.5");
    check_roundtrip("1e3", "1000");
    check_roundtrip("{'a':'b'}", "{\"a\": \"b\"}");
    /* members keep their order */
    check_roundtrip("{\"z\":1,\"a\":2,\"m\":3}",
                    "{\"z\": 1, \"a\": 2, \"m\": 3}");
}

static void test_strings(void)
{
    check_roundtrip("\"\\u00e9\\ud83d\\ude00\"", "\"\\u00E9\\uD83D\\uDE00\"");
    check_roundtrip("\"\xc3\xa9\"", "\"\\u00E9\"");
    check_roundtrip("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
                    "\"a\\\"b\\\\c/d\\b\\f\\n\\r\\t\"");
    check_roundtrip("\"\\u0001\\u007f\"", "\"\\u0001\\u007F\"");
    check_roundtrip("'it\\'s'", "\"it's\"");
    check_error("\"\\ud800\"",
                "JSON parse error, \\ud800 is not a valid Unicode character");
    /* U+0000 as modified UTF-8 inside, \u0000 again outside, as QEMU */
    check_roundtrip("\"a\\u0000b\"", "\"a\\u0000b\"");
    check_error("\"\\q\"",
                "JSON parse error, invalid escape sequence in string");
    check_error("\"\\u12\"",
                "JSON parse error, invalid escape sequence in string");
    check_error("\"a\x01\"",
                "JSON parse error, control character 0x01 in string");
    check_error("\"\xff\xfe\"",
                "JSON parse error, invalid UTF-8 sequence in string");
    check_error("\"abc", "JSON parse error, premature EOI");
}

static void test_errors(void)
{
    check_error("{\"a\":}", "JSON parse error, expecting value");
    check_error("{\"a\" 1}", "JSON parse error, missing : in object pair");
    check_error("{\"a\":1,}", "JSON parse error, expecting value");
    check_error("{\"a\":1 \"b\":2}",
                "JSON parse error, expected separator in dict");
    check_error("[1 2]", "JSON parse error, expected separator in list");
    check_error("[1,]", "JSON parse error, expecting value");
    check_error("{1:2}", "JSON parse error, key is not a string in object");
    check_error("{\"a\":1,\"a\":2}", "JSON parse error, duplicate key");
    check_error("{bad}", "JSON parse error, key is not a string in object");
    check_error("tru", "JSON parse error, invalid keyword 'tru'");
    check_error("{\"a\":0x10}",
                "JSON parse error, expected separator in dict");
    check_error("01", "JSON parse error, invalid number '01'");
    check_error("1.", "JSON parse error, invalid number '1.'");
    check_error("-", "JSON parse error, invalid number '-'");
    check_error("1e", "JSON parse error, invalid number '1e'");
    check_error("1e400", "JSON parse error, number '1e400' is out of range");
    check_error("/*c*/1", "JSON parse error, stray '/'");
    check_error("]", "JSON parse error, expecting value");
    check_error("", "JSON parse error, premature EOI");
    check_error("{\"a\":1", "JSON parse error, premature EOI");
    check_error("{} {}", "Expecting at most one JSON value");
}

static void test_nesting(void)
{
    GString *deep = g_string_new(NULL);
    Error *err = NULL;

    for (int i = 0; i < JSON_MAX_NESTING; i++) {
        g_string_append_c(deep, '[');
    }
    for (int i = 0; i < JSON_MAX_NESTING; i++) {
        g_string_append_c(deep, ']');
    }
    g_assert_nonnull(json_parse_text(deep->str, deep->len, &err));
    g_string_prepend_c(deep, '[');
    g_string_append_c(deep, ']');
    g_assert_null(json_parse_text(deep->str, deep->len, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "JSON nesting depth limit exceeded");
    error_free(err);
    g_string_free(deep, TRUE);
}

static void test_pretty(void)
{
    Error *err = NULL;
    const char *text = "{\"return\":{},\"list\":[1,{\"a\":[]}]}";
    JsonNode *node = json_parse_text(text, strlen(text), &err);
    g_autofree char *out = json_to_text(node, JSON_WRITE_PRETTY);

    g_assert_cmpstr(out, ==,
                    "{\n"
                    "    \"return\": {\n"
                    "    },\n"
                    "    \"list\": [\n"
                    "        1,\n"
                    "        {\n"
                    "            \"a\": [\n"
                    "            ]\n"
                    "        }\n"
                    "    ]\n"
                    "}");
    json_node_unref(node);
}

/* Numbers at the edges of int64 and of double, both ways. */
static void test_numbers(void)
{
    check_roundtrip("[9223372036854775807, -9223372036854775808]",
                    "[9223372036854775807, -9223372036854775808]");
    /* one past int64 either way: a double */
    check_roundtrip("9223372036854775808", "9.2233720368547758e+18");
    check_roundtrip("-9223372036854775809", "-9.2233720368547758e+18");
    check_roundtrip("1.7976931348623157e308", "1.7976931348623157e+308");
    check_roundtrip("-1.7976931348623157e308", "-1.7976931348623157e+308");
    check_roundtrip("4.9406564584124654e-324", "4.9406564584124654e-324");
    check_roundtrip("0.1", "0.10000000000000001");
    check_roundtrip("-0.0", "-0");
    check_roundtrip("2.5E+2", "250");
    check_error("1.8e308", "JSON parse error, number '1.8e308' is out of "
                "range");
    check_error("-1e400", "JSON parse error, number '-1e400' is out of "
                "range");
    check_error("+1", "JSON parse error, stray '+'");
    check_error(".5", "JSON parse error, stray '.'");
}

/* Escapes the writer chooses for every kind of character. */
static void test_write_escapes(void)
{
    g_autoptr(GString) out = g_string_new(NULL);

    json_append_string(out, "\x01\x1f\x7f \"\\/\b\f\n\r\t~");
    g_assert_cmpstr(out->str, ==,
                    "\"\\u0001\\u001F\\u007F \\\"\\\\/\\b\\f\\n\\r\\t~\"");
    g_string_truncate(out, 0);
    /* two-byte, three-byte, four-byte UTF-8; then bytes that are not */
    json_append_string(out, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\xff\xc3|");
    g_assert_cmpstr(out->str, ==,
                    "\"\\u00E9\\u20AC\\uD83D\\uDE00|\\uFFFD\\uFFFD|\"");
}

/*
 * Both member orders: as inserted (the monitor), and QEMU's QDict order
 * (qemu-img --output=json), compared with what qemu-img 7.2 printed for
 * `info --output=json` of a compat=0.10 image.
 */
static void test_key_order(void)
{
    const char *text =
        "{\"filename\": \"v2.qcow2\", \"format\": \"qcow2\", "
        "\"dirty-flag\": false, \"actual-size\": 200704, "
        "\"virtual-size\": 1048576, \"cluster-size\": 65536, "
        "\"format-specific\": {\"type\": \"qcow2\", \"data\": "
        "{\"compat\": \"0.10\", \"compression-type\": \"zlib\", "
        "\"refcount-bits\": 16}}}";
    g_autoptr(JsonNode) node = json_parse_text(text, strlen(text),
                                               &error_abort);
    g_autofree char *inserted = json_to_text(node, 0);
    g_autofree char *qemu_img = json_to_text(node, JSON_WRITE_PRETTY |
                                                   JSON_WRITE_QDICT_ORDER);

    g_assert_cmpstr(inserted, ==, text);
    g_assert_cmpstr(qemu_img, ==,
                    "{\n"
                    "    \"virtual-size\": 1048576,\n"
                    "    \"filename\": \"v2.qcow2\",\n"
                    "    \"cluster-size\": 65536,\n"
                    "    \"format\": \"qcow2\",\n"
                    "    \"actual-size\": 200704,\n"
                    "    \"format-specific\": {\n"
                    "        \"type\": \"qcow2\",\n"
                    "        \"data\": {\n"
                    "            \"compat\": \"0.10\",\n"
                    "            \"compression-type\": \"zlib\",\n"
                    "            \"refcount-bits\": 16\n"
                    "        }\n"
                    "    },\n"
                    "    \"dirty-flag\": false\n"
                    "}");
}

/*
 * Members in one QDict bucket ("aa" and "aq" both hash to 110): the newer
 * one comes first, as QEMU inserts at the head of a bucket's list; the
 * buckets themselves in increasing order (qemu-img check prints its
 * members in this order).
 */
static void test_key_order_ties(void)
{
    const char *text = "{\"aa\": 1, \"aq\": 2, \"filename\": \"f\", "
                       "\"format\": \"raw\", \"check-errors\": 0, "
                       "\"image-end-offset\": 1, \"total-clusters\": 2}";
    g_autoptr(JsonNode) node = json_parse_text(text, strlen(text),
                                               &error_abort);
    g_autofree const char **order =
        json_object_ordered_members(json_node_get_object(node),
                                    JSON_WRITE_QDICT_ORDER);
    g_autofree char *joined = g_strjoinv(",", (char **)order);

    g_assert_cmpstr(joined, ==, "image-end-offset,aq,aa,total-clusters,"
                    "check-errors,filename,format");
}

/* The stream writer prints what the tree writer prints. */
static void test_writer_stream(void)
{
    g_autoptr(GString) out = g_string_new(NULL);
    JsonWriter *w = json_writer_new(out, 0);

    json_writer_start_object(w, NULL);
    json_writer_str(w, "s", "x\"y");
    json_writer_int64(w, "i", INT64_MIN);
    json_writer_double(w, "d", 0.5);
    json_writer_literal(w, "u", "18446744073709551615");
    json_writer_start_array(w, "a");
    json_writer_literal(w, NULL, "null");
    json_writer_start_object(w, NULL);
    json_writer_end_object(w);
    json_writer_end_array(w);
    json_writer_end_object(w);
    json_writer_free(w);
    g_assert_cmpstr(out->str, ==,
                    "{\"s\": \"x\\\"y\", \"i\": -9223372036854775808, "
                    "\"d\": 0.5, \"u\": 18446744073709551615, "
                    "\"a\": [null, {}]}");

    g_string_truncate(out, 0);
    w = json_writer_new(out, JSON_WRITE_PRETTY);
    json_writer_start_array(w, NULL);
    json_writer_int64(w, NULL, 1);
    json_writer_start_array(w, NULL);
    json_writer_end_array(w);
    json_writer_end_array(w);
    json_writer_free(w);
    g_assert_cmpstr(out->str, ==, "[\n    1,\n    [\n    ]\n]");
}

/* Where each malformed document goes wrong, as an offset into it. */
static void check_error_at(const char *text, size_t expect_offset,
                           const char *expect)
{
    Error *err = NULL;
    size_t offset = SIZE_MAX;
    JsonNode *node = json_parse_text_at(text, strlen(text), &offset, &err);

    if (node) {
        g_error("'%s' was accepted", text);
    }
    g_assert_cmpstr(error_get_pretty(err), ==, expect);
    g_assert_cmpuint(offset, ==, expect_offset);
    error_free(err);
}

static void test_error_offset(void)
{
    check_error_at("{\"a\": 1,}", 8, "JSON parse error, expecting value");
    check_error_at("[1, 2 3]", 6,
                   "JSON parse error, expected separator in list");
    check_error_at("{\"a\": 01}", 6, "JSON parse error, invalid number '01'");
    check_error_at("[\"ab\\q\"]", 5,
                   "JSON parse error, invalid escape sequence in string");
    check_error_at("{\"a\":", 5, "JSON parse error, premature EOI");
    check_error_at("{} x", 3, "Expecting at most one JSON value");
    check_error_at("[[[", 3, "JSON parse error, premature EOI");
}

/* One level too deep is refused where its opening bracket is. */
static void test_nesting_offset(void)
{
    g_autoptr(GString) text = g_string_new(NULL);

    for (int i = 0; i < JSON_MAX_NESTING; i++) {
        g_string_append(text, "{\"a\":");
    }
    g_string_append_c(text, '[');
    check_error_at(text->str, 5 * JSON_MAX_NESTING,
                   "JSON nesting depth limit exceeded");
}

/* Feeds @input and returns the messages as "text" or "!error", '|'-joined. */
static char *stream(const char *input, size_t len, size_t max_len)
{
    JsonStreamer *s = json_streamer_new(max_len);
    GString *out = g_string_new(NULL);
    JsonNode *node;
    Error *err = NULL;

    /* byte by byte, so that framing never depends on read boundaries */
    for (size_t i = 0; i < len; i++) {
        json_streamer_feed(s, input + i, 1);
    }
    while (json_streamer_next(s, &node, &err)) {
        if (out->len) {
            g_string_append_c(out, '|');
        }
        if (node) {
            json_write(out, node, 0);
            json_node_unref(node);
        } else {
            g_string_append_printf(out, "!%s", error_get_pretty(err));
            error_free(err);
            err = NULL;
        }
    }
    json_streamer_free(s);
    return g_string_free(out, FALSE);
}

static void check_stream(const char *input, const char *expect)
{
    g_autofree char *out = stream(input, strlen(input), 4096);

    g_assert_cmpstr(out, ==, expect);
}

static void test_streamer(void)
{
    check_stream("{\"a\":1}{\"b\":2}\n", "{\"a\": 1}|{\"b\": 2}");
    check_stream("{\"a\":\n\"}{\"}\n", "{\"a\": \"}{\"}");
    check_stream("{'a':'\\''}", "{\"a\": \"'\"}");
    check_stream("1 \"x\" [2]\n", "1|\"x\"|[2]");
    check_stream("true{}", "true|{}");
    check_stream("{bad\n}\n",
                 "!JSON parse error, key is not a string in object");
    check_stream("]\n", "!JSON parse error, expecting value");
    /* an incomplete message stays pending */
    check_stream("{\"a\":[1,2", "");
    /* 0xff drops what came before it */
    check_stream("{\"a\":\xff{\"b\":1}", "{\"b\": 1}");
    /* a string still open at the end of the line ends the message */
    check_stream("{\"a\":\"abc\n{\"b\":1}",
                 "!JSON parse error, control character 0x0a in string|"
                 "{\"b\": 1}");
}

static void test_streamer_limits(void)
{
    GString *in = g_string_new("{\"a\":\"");
    g_autofree char *out = NULL;
    g_autofree char *deep_out = NULL;
    GString *deep = g_string_new(NULL);

    for (int i = 0; i < 10000; i++) {
        g_string_append_c(in, 'x');
    }
    g_string_append(in, "\"}{\"b\":1}");
    out = stream(in->str, in->len, 4096);
    /* one error for the long message, then the next one is fine */
    g_assert_cmpstr(out, ==,
                    "!JSON message longer than 4096 bytes|{\"b\": 1}");

    for (int i = 0; i < 5000; i++) {
        g_string_append_c(deep, '[');
    }
    for (int i = 0; i < 5000; i++) {
        g_string_append_c(deep, ']');
    }
    g_string_append(deep, "[3]");
    deep_out = stream(deep->str, deep->len, 1 << 20);
    g_assert_cmpstr(deep_out, ==,
                    "!JSON nesting depth limit exceeded|[3]");
    g_string_free(in, TRUE);
    g_string_free(deep, TRUE);
}

/*
 * Issue 14: the depth of a message past the nesting limit was counted
 * for as long as the client kept opening brackets (a signed int, past
 * 2^31 of them undefined).  Now a message is followed only to a bounded
 * depth (a million brackets, JSON_STREAM_MAX_DEPTH in json-streamer.c):
 * there it ends as one error, and the brackets after it start afresh.
 */
static void test_streamer_depth_bound(void)
{
    size_t n = 1024 * JSON_MAX_NESTING + JSON_MAX_NESTING / 2;
    g_autofree char *in = g_strnfill(n, '[');
    g_autofree char *out = stream(in, n, 1 << 20);

    g_assert_cmpstr(out, ==, "!JSON nesting depth limit exceeded");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/json/values", test_values);
    g_test_add_func("/json/strings", test_strings);
    g_test_add_func("/json/errors", test_errors);
    g_test_add_func("/json/nesting", test_nesting);
    g_test_add_func("/json/pretty", test_pretty);
    g_test_add_func("/json/numbers", test_numbers);
    g_test_add_func("/json/write-escapes", test_write_escapes);
    g_test_add_func("/json/key-order", test_key_order);
    g_test_add_func("/json/key-order-ties", test_key_order_ties);
    g_test_add_func("/json/writer-stream", test_writer_stream);
    g_test_add_func("/json/error-offset", test_error_offset);
    g_test_add_func("/json/nesting-offset", test_nesting_offset);
    g_test_add_func("/json/streamer", test_streamer);
    g_test_add_func("/json/streamer-limits", test_streamer_limits);
    g_test_add_func("/json/streamer-depth-bound", test_streamer_depth_bound);
    return g_test_run();
}
