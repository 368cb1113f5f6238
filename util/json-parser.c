/*
 * The one JSON parser: strict JSON text into json-glib trees, for the
 * monitor, json: filenames and --blockdev (see include/util/json.h).
 *
 * Our own code rather than json-glib's JsonParser, which is not
 * QEMU-exact: it wraps integers above INT64_MAX, accepts comments,
 * hexadecimal numbers, duplicate keys and trailing text, rejects QMP's
 * single-quoted strings, and words its errors its own way.  Error
 * messages here are the ones QEMU sends (observed with QEMU 7.2's monitor
 * and qemu-img's json: filenames, which share one parser there too).
 *
 * A recursive-descent parser over the whole message: the streamer has cut
 * it out already (or the caller holds the whole text), so the text is
 * complete and its length bounded.  The recursion is bounded by
 * JSON_MAX_NESTING.
 */
#include "util/json.h"

#include <math.h>

typedef struct JsonParseState {
    const char *start;
    const char *p;
    const char *end;
    int depth;
    size_t *err_offset;         /* where the first error was found */
    Error **errp;
} JsonParseState;

static JsonNode *json_parse_value(JsonParseState *st);

static JsonNode *json_error(JsonParseState *st, const char *fmt, ...)
    QEMU_PRINTF(2, 3);

static void json_error_offset(JsonParseState *st)
{
    if (st->err_offset) {
        *st->err_offset = st->p - st->start;
    }
}

static JsonNode *json_error(JsonParseState *st, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    json_error_offset(st);
    error_setg(st->errp, "JSON parse error, %s", msg);
    return NULL;
}

static bool json_at_end(JsonParseState *st)
{
    return st->p >= st->end;
}

static void json_skip_ws(JsonParseState *st)
{
    while (!json_at_end(st) && strchr(" \t\n\r", *st->p) && *st->p) {
        st->p++;
    }
}

static int json_hex4(const char *p, const char *end)
{
    int val = 0;

    if (end - p < 4) {
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        int d = g_ascii_xdigit_value(p[i]);

        if (d < 0) {
            return -1;
        }
        val = val * 16 + d;
    }
    return val;
}

/* "\uXXXX" at st->p (just after the 'u'), with its low surrogate. */
static bool json_parse_unicode_escape(JsonParseState *st, GString *out)
{
    int cp = json_hex4(st->p, st->end);

    if (cp < 0) {
        json_error(st, "invalid escape sequence in string");
        return false;
    }
    st->p += 4;
    if (cp >= 0xd800 && cp < 0xdc00 && st->end - st->p >= 6 &&
        st->p[0] == '\\' && st->p[1] == 'u') {
        int low = json_hex4(st->p + 2, st->end);

        if (low >= 0xdc00 && low < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            st->p += 6;
        }
    }
    if (cp >= 0xd800 && cp < 0xe000) {
        json_error(st, "\\u%04x is not a valid Unicode character", cp);
        return false;
    }
    if (cp == 0) {
        /*
         * As QEMU: U+0000 as modified UTF-8 (0xC0 0x80), so that the
         * string stays a C string; the writer turns it back into \u0000.
         */
        g_string_append_len(out, "\xC0\x80", 2);
        return true;
    }
    g_string_append_unichar(out, cp);
    return true;
}

static bool json_parse_escape(JsonParseState *st, GString *out)
{
    char c;
    int decoded;

    if (json_at_end(st)) {
        json_error(st, "premature EOI");
        return false;
    }
    c = *st->p++;
    if (c == 'u') {
        return json_parse_unicode_escape(st, out);
    }
    /* \' (QEMU's single-quoted strings) and \/ are read, never written */
    decoded = c == '\'' || c == '/' ? c : json_short_escape_decode(c);
    if (decoded >= 0) {
        g_string_append_c(out, decoded);
        return true;
    }
    st->p--;    /* the offset of the error names the bad character */
    json_error(st, "invalid escape sequence in string");
    return false;
}

/* A string in double or single quotes (QEMU's extension), at st->p. */
static char *json_parse_string(JsonParseState *st)
{
    g_autoptr(GString) out = g_string_new(NULL);
    char quote = *st->p++;
    const char *start = st->p;

    for (;;) {
        unsigned char c;

        if (json_at_end(st)) {
            json_error(st, "premature EOI");
            return NULL;
        }
        c = *st->p++;
        if (c == quote) {
            break;
        }
        if (c < 0x20) {
            json_error(st, "control character 0x%02x in string", c);
            return NULL;
        }
        if (c == '\\') {
            if (!json_parse_escape(st, out)) {
                return NULL;
            }
        } else {
            g_string_append_c(out, c);
        }
    }
    /*
     * The text must be UTF-8; what escapes make is, but for U+0000 in
     * modified UTF-8 (json_parse_unicode_escape()).
     */
    if (!g_utf8_validate(start, st->p - 1 - start, NULL)) {
        json_error(st, "invalid UTF-8 sequence in string");
        return NULL;
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

static size_t json_digits(const char *p, const char *end)
{
    size_t n = 0;

    while (p + n < end && g_ascii_isdigit(p[n])) {
        n++;
    }
    return n;
}

/*
 * The JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
 * Returns the length of the number at @p, or 0 if it is not one, and
 * whether it has a fraction or an exponent.
 */
static size_t json_number_len(const char *p, const char *end, bool *is_float)
{
    const char *q = p;
    size_t n;

    *is_float = false;
    if (q < end && *q == '-') {
        q++;
    }
    n = json_digits(q, end);
    if (!n || (n > 1 && *q == '0')) {
        return 0;
    }
    q += n;
    if (q < end && *q == '.') {
        n = json_digits(q + 1, end);
        if (!n) {
            return 0;
        }
        q += 1 + n;
        *is_float = true;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        const char *e = q + 1;

        if (e < end && (*e == '+' || *e == '-')) {
            e++;
        }
        n = json_digits(e, end);
        if (!n) {
            return 0;
        }
        q = e + n;
        *is_float = true;
    }
    return q - p;
}

static JsonNode *json_parse_number(JsonParseState *st)
{
    const char *start = st->p;
    size_t run = 0;
    bool is_float;
    size_t len;
    g_autofree char *text = NULL;
    JsonNode *node;

    /* the extent of what looks like a number, for the message */
    while (start + run < st->end && strchr("+-.eE0123456789", start[run]) &&
           start[run]) {
        run++;
    }
    len = json_number_len(start, st->end, &is_float);
    if (!len || len != run) {
        return json_error(st, "invalid number '%.*s'", (int)run, start);
    }
    text = g_strndup(start, len);
    st->p += len;
    node = json_node_alloc();
    if (!is_float) {
        gint64 v;

        errno = 0;
        v = g_ascii_strtoll(text, NULL, 10);
        if (errno != ERANGE) {
            return json_node_init_int(node, v);
        }
    }
    {
        double d = g_ascii_strtod(text, NULL);

        if (isinf(d)) {
            json_node_free(node);
            return json_error(st, "number '%s' is out of range", text);
        }
        return json_node_init_double(node, d);
    }
}

static JsonNode *json_parse_keyword(JsonParseState *st)
{
    const char *start = st->p;
    size_t len = 0;

    while (start + len < st->end && g_ascii_isalnum(start[len])) {
        len++;
    }
    st->p += len;
    if (len == 4 && !strncmp(start, "true", 4)) {
        return json_node_init_boolean(json_node_alloc(), true);
    }
    if (len == 5 && !strncmp(start, "false", 5)) {
        return json_node_init_boolean(json_node_alloc(), false);
    }
    if (len == 4 && !strncmp(start, "null", 4)) {
        return json_node_init_null(json_node_alloc());
    }
    return json_error(st, "invalid keyword '%.*s'", (int)len, start);
}

/*
 * Steps over the bracket that opens an object or array at st->p: true,
 * past @close as well, if @close follows (the object or array is empty).
 */
static bool json_parse_open(JsonParseState *st, char close)
{
    st->p++;
    json_skip_ws(st);
    if (!json_at_end(st) && *st->p == close) {
        st->p++;
        return true;
    }
    return false;
}

/*
 * Takes what follows a member of an object or array (@what, for the
 * message) that @close ends: 1 after a ',' (another member follows), 0
 * after @close, -1 with the error set.
 */
static int json_parse_separator(JsonParseState *st, char close,
                                const char *what)
{
    json_skip_ws(st);
    if (json_at_end(st)) {
        json_error(st, "premature EOI");
        return -1;
    }
    if (*st->p != close && *st->p != ',') {
        json_error(st, "expected separator in %s", what);
        return -1;
    }
    return *st->p++ == ',';
}

static JsonNode *json_parse_object(JsonParseState *st)
{
    g_autoptr(JsonObject) obj = json_object_new();

    if (json_parse_open(st, '}')) {
        return json_node_init_object(json_node_alloc(), obj);
    }
    for (;;) {
        g_autofree char *key = NULL;
        JsonNode *value;
        int more;

        json_skip_ws(st);
        if (json_at_end(st)) {
            return json_error(st, "premature EOI");
        }
        if (*st->p == '}') {
            /* a ',' before the '}' */
            return json_error(st, "expecting value");
        }
        if (*st->p != '"' && *st->p != '\'') {
            return json_error(st, "key is not a string in object");
        }
        key = json_parse_string(st);
        if (!key) {
            return NULL;
        }
        json_skip_ws(st);
        if (json_at_end(st) || *st->p != ':') {
            return json_error(st, "missing : in object pair");
        }
        st->p++;
        value = json_parse_value(st);
        if (!value) {
            return NULL;
        }
        if (json_object_has_member(obj, key)) {
            json_node_unref(value);
            return json_error(st, "duplicate key");
        }
        json_object_set_member(obj, key, value);
        more = json_parse_separator(st, '}', "dict");
        if (more < 0) {
            return NULL;
        }
        if (!more) {
            return json_node_init_object(json_node_alloc(), obj);
        }
    }
}

static JsonNode *json_parse_array(JsonParseState *st)
{
    g_autoptr(JsonArray) arr = json_array_new();

    if (json_parse_open(st, ']')) {
        return json_node_init_array(json_node_alloc(), arr);
    }
    for (;;) {
        JsonNode *value = json_parse_value(st);
        int more;

        if (!value) {
            return NULL;
        }
        json_array_add_element(arr, value);
        more = json_parse_separator(st, ']', "list");
        if (more < 0) {
            return NULL;
        }
        if (!more) {
            return json_node_init_array(json_node_alloc(), arr);
        }
    }
}

static JsonNode *json_parse_value(JsonParseState *st)
{
    JsonNode *node;
    char c;

    json_skip_ws(st);
    if (json_at_end(st)) {
        return json_error(st, "premature EOI");
    }
    c = *st->p;
    switch (c) {
    case '{':
    case '[':
        if (++st->depth > JSON_MAX_NESTING) {
            json_error_offset(st);
            error_setg(st->errp, "JSON nesting depth limit exceeded");
            return NULL;
        }
        node = c == '{' ? json_parse_object(st) : json_parse_array(st);
        st->depth--;
        return node;
    case '"':
    case '\'': {
        char *str = json_parse_string(st);

        if (!str) {
            return NULL;
        }
        node = json_node_alloc();
        json_node_init_string(node, str);
        g_free(str);
        return node;
    }
    case '}':
    case ']':
    case ',':
    case ':':
        return json_error(st, "expecting value");
    }
    if (c == '-' || g_ascii_isdigit(c)) {
        return json_parse_number(st);
    }
    if (g_ascii_isalpha(c)) {
        return json_parse_keyword(st);
    }
    if (g_ascii_isprint(c)) {
        return json_error(st, "stray '%c'", c);
    }
    return json_error(st, "stray byte 0x%02x", (unsigned char)c);
}

JsonNode *json_parse_text_at(const char *text, size_t len,
                             size_t *err_offset, Error **errp)
{
    JsonParseState st = {
        .start = text,
        .p = text,
        .end = text + len,
        .err_offset = err_offset,
        .errp = errp,
    };
    JsonNode *node = json_parse_value(&st);

    if (!node) {
        return NULL;
    }
    json_skip_ws(&st);
    if (!json_at_end(&st)) {
        json_node_unref(node);
        json_error_offset(&st);
        error_setg(errp, "Expecting at most one JSON value");
        return NULL;
    }
    return node;
}

JsonNode *json_parse_text(const char *text, size_t len, Error **errp)
{
    return json_parse_text_at(text, len, NULL, errp);
}
