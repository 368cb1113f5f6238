/*
 * json: filenames: JSON text to a flat QDict and back.
 *
 * The parser is our own rather than json-glib's: json-glib 1.6 wraps
 * integers above INT64_MAX ("size": 18446744073709551615 becomes -1),
 * ignores a second document after the first and accepts comments and
 * hexadecimal numbers, none of which may silently change a disk option.
 * This parser is strict JSON plus the one extension QEMU's has (strings
 * in single quotes), and its messages use QEMU's words.
 *
 * Input is flattened: {"file": {"filename": "a"}} gives "file.filename",
 * arrays give indexes ("inject-error.0.event").  Scalars keep their type;
 * a number keeps a canonical text: integers as such (up to UINT64_MAX),
 * anything else as "%.17g" of the double, as QEMU prints numbers.
 *
 * Output nests the dotted keys again, turns members named 0..n-1 into
 * arrays, and writes the spacing and escapes QEMU's json: filenames use.
 */
#include "util/qdict.h"

#include <math.h>

/* As QEMU: deeper documents are refused rather than risking the stack. */
#define JSON_MAX_NESTING 1024

typedef struct JsonParser {
    const char *p;
    QDict *qdict;
    int depth;
    Error **errp;
} JsonParser;

static bool json_error(JsonParser *jp, const char *fmt, ...) QEMU_PRINTF(2, 3);

static bool json_error(JsonParser *jp, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    error_setg(jp->errp, "JSON parse error, %s", msg);
    return false;
}

static void json_skip_ws(JsonParser *jp)
{
    while (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' ||
           *jp->p == '\r') {
        jp->p++;
    }
}

static bool json_premature_end(JsonParser *jp)
{
    return json_error(jp, "premature EOI");
}

static int json_hex4(const char *s)
{
    int val = 0;

    for (int i = 0; i < 4; i++) {
        int d = g_ascii_xdigit_value(s[i]);

        if (d < 0) {
            return -1;
        }
        val = val * 16 + d;
    }
    return val;
}

/* Reads "\uXXXX" (and its low surrogate) at jp->p, just after the 'u'. */
static bool json_parse_unicode_escape(JsonParser *jp, GString *out)
{
    int cp = json_hex4(jp->p);

    if (cp < 0) {
        return json_error(jp, "invalid escape sequence in string");
    }
    jp->p += 4;
    if (cp >= 0xd800 && cp < 0xdc00 && jp->p[0] == '\\' && jp->p[1] == 'u') {
        int low = json_hex4(jp->p + 2);

        if (low >= 0xdc00 && low < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            jp->p += 6;
        }
    }
    if (cp >= 0xd800 && cp < 0xe000) {
        return json_error(jp, "\\u%04x is not a valid Unicode character",
                          cp);
    }
    if (cp == 0) {
        /* Values are C strings: a NUL would silently cut them short. */
        return json_error(jp, "\\u0000 is not allowed in a string");
    }
    g_string_append_unichar(out, cp);
    return true;
}

static bool json_parse_string(JsonParser *jp, GString *out)
{
    char quote = *jp->p++;

    for (;;) {
        unsigned char c = *jp->p;

        if (!c) {
            return json_premature_end(jp);
        }
        jp->p++;
        if (c == quote) {
            return true;
        }
        if (c < 0x20) {
            return json_error(jp, "control character 0x%02x in string", c);
        }
        if (c != '\\') {
            g_string_append_c(out, c);
            continue;
        }
        c = *jp->p++;
        switch (c) {
        case '"': case '\'': case '\\': case '/':
            g_string_append_c(out, c);
            break;
        case 'b':
            g_string_append_c(out, '\b');
            break;
        case 'f':
            g_string_append_c(out, '\f');
            break;
        case 'n':
            g_string_append_c(out, '\n');
            break;
        case 'r':
            g_string_append_c(out, '\r');
            break;
        case 't':
            g_string_append_c(out, '\t');
            break;
        case 'u':
            if (!json_parse_unicode_escape(jp, out)) {
                return false;
            }
            break;
        case '\0':
            return json_premature_end(jp);
        default:
            return json_error(jp, "invalid escape sequence in string");
        }
    }
}

/* Length of a JSON number at @s per the grammar; 0 if there is none. */
static size_t json_number_len(const char *s)
{
    const char *p = s;

    if (*p == '-') {
        p++;
    }
    if (*p == '0') {
        p++;
    } else if (g_ascii_isdigit(*p)) {
        while (g_ascii_isdigit(*p)) {
            p++;
        }
    } else {
        return 0;
    }
    if (*p == '.') {
        if (!g_ascii_isdigit(p[1])) {
            return 0;
        }
        for (p++; g_ascii_isdigit(*p); p++) {
            continue;
        }
    }
    if (*p == 'e' || *p == 'E') {
        const char *exp = p + 1;

        if (*exp == '+' || *exp == '-') {
            exp++;
        }
        if (!g_ascii_isdigit(*exp)) {
            return 0;
        }
        for (p = exp; g_ascii_isdigit(*p); p++) {
            continue;
        }
    }
    return p - s;
}

/* The canonical text of a number: integers exactly, else "%.17g". */
static bool json_parse_number(JsonParser *jp, char **text)
{
    const char *s = jp->p;
    size_t len = json_number_len(s);
    size_t tok_len = strspn(s, "0123456789+-.eExX");
    g_autofree char *tok = NULL;
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    bool is_int;
    double d;

    /* A number runs into a letter ("0x10", "1k"): not JSON. */
    if (!len || len != tok_len || g_ascii_isalnum(s[len])) {
        tok_len = MAX(tok_len, 1);
        while (g_ascii_isalnum(s[tok_len])) {
            tok_len++;
        }
        return json_error(jp, "invalid number '%.*s'", (int)tok_len, s);
    }
    tok = g_strndup(s, len);
    is_int = !strpbrk(tok, ".eE");
    errno = 0;
    if (is_int && tok[0] == '-') {
        long long v = strtoll(tok, NULL, 10);

        if (errno != ERANGE) {
            *text = g_strdup_printf("%lld", v);
            jp->p += len;
            return true;
        }
    } else if (is_int) {
        unsigned long long v = strtoull(tok, NULL, 10);

        if (errno != ERANGE) {
            *text = g_strdup_printf("%llu", v);
            jp->p += len;
            return true;
        }
    }
    d = g_ascii_strtod(tok, NULL);
    if (!isfinite(d)) {
        return json_error(jp, "number '%s' is out of range", tok);
    }
    *text = g_strdup(g_ascii_formatd(buf, sizeof(buf), "%.17g", d));
    jp->p += len;
    return true;
}

static bool json_parse_value(JsonParser *jp, GString *key);

static bool json_enter(JsonParser *jp)
{
    if (++jp->depth > JSON_MAX_NESTING) {
        return json_error(jp, "nesting deeper than %d levels",
                          JSON_MAX_NESTING);
    }
    jp->p++;
    json_skip_ws(jp);
    return true;
}

/* @key holds the dotted prefix of the object; members extend it. */
static bool json_parse_object(JsonParser *jp, GString *key)
{
    size_t prefix_len = key->len;

    if (!json_enter(jp)) {
        return false;
    }
    if (*jp->p == '}') {
        jp->p++;
        jp->depth--;
        return true;
    }
    for (;;) {
        json_skip_ws(jp);
        if (!*jp->p) {
            return json_premature_end(jp);
        }
        if (*jp->p == '}') {
            /* A trailing comma, which QEMU words this way. */
            return json_error(jp, "expecting value");
        }
        if (*jp->p != '"' && *jp->p != '\'') {
            return json_error(jp, "key is not a string in object");
        }
        if (prefix_len) {
            g_string_append_c(key, '.');
        }
        if (!json_parse_string(jp, key)) {
            return false;
        }
        json_skip_ws(jp);
        if (!*jp->p) {
            return json_premature_end(jp);
        }
        if (*jp->p != ':') {
            return json_error(jp, "missing : in object pair");
        }
        jp->p++;
        if (!json_parse_value(jp, key)) {
            return false;
        }
        g_string_truncate(key, prefix_len);
        json_skip_ws(jp);
        if (*jp->p == '}') {
            jp->p++;
            jp->depth--;
            return true;
        }
        if (!*jp->p) {
            return json_premature_end(jp);
        }
        if (*jp->p != ',') {
            return json_error(jp, "expected separator in dict");
        }
        jp->p++;
    }
}

static bool json_parse_array(JsonParser *jp, GString *key)
{
    size_t prefix_len = key->len;

    if (!json_enter(jp)) {
        return false;
    }
    if (*jp->p == ']') {
        jp->p++;
        jp->depth--;
        return true;
    }
    for (unsigned index = 0;; index++) {
        g_string_append_printf(key, ".%u", index);
        if (!json_parse_value(jp, key)) {
            return false;
        }
        g_string_truncate(key, prefix_len);
        json_skip_ws(jp);
        if (*jp->p == ']') {
            jp->p++;
            jp->depth--;
            return true;
        }
        if (!*jp->p) {
            return json_premature_end(jp);
        }
        if (*jp->p != ',') {
            return json_error(jp, "expected separator in list");
        }
        jp->p++;
    }
}

static bool json_parse_keyword(JsonParser *jp, GString *key)
{
    size_t len = 0;

    while (g_ascii_isalnum(jp->p[len]) || jp->p[len] == '_') {
        len++;
    }
    if (len == 4 && !strncmp(jp->p, "true", 4)) {
        qdict_put_typed(jp->qdict, key->str, "true", QTYPE_QBOOL);
    } else if (len == 5 && !strncmp(jp->p, "false", 5)) {
        qdict_put_typed(jp->qdict, key->str, "false", QTYPE_QBOOL);
    } else if (len == 4 && !strncmp(jp->p, "null", 4)) {
        qdict_put_typed(jp->qdict, key->str, NULL, QTYPE_QNULL);
    } else {
        return json_error(jp, "invalid keyword '%.*s'", (int)len, jp->p);
    }
    jp->p += len;
    return true;
}

/* Parses one value and stores it (or its members) under @key. */
static bool json_parse_value(JsonParser *jp, GString *key)
{
    char c;

    json_skip_ws(jp);
    c = *jp->p;
    if (c == '{') {
        return json_parse_object(jp, key);
    }
    if (c == '[') {
        return json_parse_array(jp, key);
    }
    if (c == '"' || c == '\'') {
        g_autoptr(GString) str = g_string_new(NULL);

        if (!json_parse_string(jp, str)) {
            return false;
        }
        qdict_put_typed(jp->qdict, key->str, str->str, QTYPE_QSTRING);
        return true;
    }
    if (c == '-' || g_ascii_isdigit(c) || c == '.' || c == '+') {
        g_autofree char *text = NULL;

        if (!json_parse_number(jp, &text)) {
            return false;
        }
        qdict_put_typed(jp->qdict, key->str, text, QTYPE_QNUM);
        return true;
    }
    if (g_ascii_isalpha(c)) {
        return json_parse_keyword(jp, key);
    }
    if (!c) {
        return json_premature_end(jp);
    }
    if (c == ',' || c == ']' || c == '}' || c == ':') {
        return json_error(jp, "expecting value");
    }
    return json_error(jp, "stray '%c'", c);
}

QDict *qdict_from_json(const char *json, Error **errp)
{
    JsonParser jp = { .p = json, .qdict = qdict_new(), .errp = errp };
    g_autoptr(GString) key = g_string_new(NULL);

    json_skip_ws(&jp);
    if (!*jp.p) {
        error_setg(errp, "Expecting a JSON value");
        goto fail;
    }
    if (*jp.p != '{') {
        /* Check the syntax first: a broken document says why. */
        if (json_parse_value(&jp, key)) {
            error_setg(errp, "Invalid JSON object given");
        }
        goto fail;
    }
    if (!json_parse_object(&jp, key)) {
        goto fail;
    }
    json_skip_ws(&jp);
    if (*jp.p) {
        error_setg(errp, "Expecting at most one JSON value");
        goto fail;
    }
    return jp.qdict;

fail:
    qdict_unref(jp.qdict);
    return NULL;
}

/*
 * The tree the flat keys describe.  A node is a leaf (entry != NULL) or
 * a branch with ordered members.
 */
typedef struct JsonNode {
    char *name;
    const QDictEntry *entry;
    GPtrArray *members;
} JsonNode;

static JsonNode *json_node_new(const char *name, size_t len)
{
    JsonNode *node = g_new0(JsonNode, 1);

    node->name = g_strndup(name, len);
    return node;
}

static void json_node_free(gpointer data)
{
    JsonNode *node = data;

    if (node->members) {
        g_ptr_array_unref(node->members);
    }
    g_free(node->name);
    g_free(node);
}

static JsonNode *json_node_add(JsonNode *parent, const char *name,
                               size_t len)
{
    JsonNode *node = json_node_new(name, len);

    if (!parent->members) {
        parent->members = g_ptr_array_new_with_free_func(json_node_free);
    }
    g_ptr_array_add(parent->members, node);
    return node;
}

static JsonNode *json_node_find(JsonNode *parent, const char *name,
                                size_t len)
{
    for (guint i = 0; parent->members && i < parent->members->len; i++) {
        JsonNode *node = g_ptr_array_index(parent->members, i);

        if (strlen(node->name) == len && !strncmp(node->name, name, len)) {
            return node;
        }
    }
    return NULL;
}

/*
 * Files @entry under its dotted key.  Where a key cannot nest (one of its
 * prefixes already holds a value), the rest of the key stays one member
 * name, so that nothing is lost.
 */
static void json_tree_insert(JsonNode *root, const QDictEntry *entry)
{
    const char *key = qdict_entry_key(entry);
    JsonNode *node = root;

    for (;;) {
        const char *dot = strchr(key, '.');
        size_t len = dot ? (size_t)(dot - key) : strlen(key);
        JsonNode *child;

        if (!dot) {
            json_node_add(node, key, len)->entry = entry;
            return;
        }
        child = json_node_find(node, key, len);
        if (child && child->entry) {
            json_node_add(node, key, strlen(key))->entry = entry;
            return;
        }
        if (!child) {
            child = json_node_add(node, key, len);
        }
        node = child;
        key = dot + 1;
    }
}

/* Members named 0..n-1 (each once, in any order) make an array. */
static bool json_node_is_array(const JsonNode *node, JsonNode **order)
{
    guint n = node->members->len;

    memset(order, 0, n * sizeof(*order));
    for (guint i = 0; i < n; i++) {
        JsonNode *m = g_ptr_array_index(node->members, i);
        const char *s = m->name;
        guint64 index;

        if (!*s || strspn(s, "0123456789") != strlen(s) ||
            (s[0] == '0' && s[1])) {
            return false;
        }
        index = g_ascii_strtoull(s, NULL, 10);
        if (index >= n || order[index]) {
            return false;
        }
        order[index] = m;
    }
    return true;
}

/* As QEMU: ASCII as is, the rest as \uXXXX, invalid UTF-8 as U+FFFD. */
static void json_append_string(GString *out, const char *s)
{
    const char *end = s + strlen(s);

    g_string_append_c(out, '"');
    while (s < end) {
        unsigned char c = *s;
        gunichar cp;

        switch (c) {
        case '"':
            g_string_append(out, "\\\"");
            s++;
            continue;
        case '\\':
            g_string_append(out, "\\\\");
            s++;
            continue;
        case '\b':
            g_string_append(out, "\\b");
            s++;
            continue;
        case '\f':
            g_string_append(out, "\\f");
            s++;
            continue;
        case '\n':
            g_string_append(out, "\\n");
            s++;
            continue;
        case '\r':
            g_string_append(out, "\\r");
            s++;
            continue;
        case '\t':
            g_string_append(out, "\\t");
            s++;
            continue;
        }
        if (c >= 0x20 && c < 0x7f) {
            g_string_append_c(out, c);
            s++;
            continue;
        }
        cp = g_utf8_get_char_validated(s, end - s);
        if (cp == (gunichar)-1 || cp == (gunichar)-2) {
            cp = 0xfffd;
            s++;
        } else {
            s = g_utf8_next_char(s);
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            g_string_append_printf(out, "\\u%04X\\u%04X",
                                   0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
        } else {
            g_string_append_printf(out, "\\u%04X", cp);
        }
    }
    g_string_append_c(out, '"');
}

/* @top: the document itself, always an object even with keys "0", "1". */
static void json_append_node(GString *out, const JsonNode *node, bool top)
{
    g_autofree JsonNode **order = NULL;
    bool array;

    if (node->entry) {
        const char *value = qdict_entry_value(node->entry);

        switch (qdict_entry_type(node->entry)) {
        case QTYPE_QSTRING:
            json_append_string(out, value);
            break;
        case QTYPE_QNUM:
        case QTYPE_QBOOL:
            g_string_append(out, value);
            break;
        case QTYPE_QNULL:
            g_string_append(out, "null");
            break;
        }
        return;
    }
    order = g_new(JsonNode *, node->members->len);
    array = !top && json_node_is_array(node, order);
    g_string_append_c(out, array ? '[' : '{');
    for (guint i = 0; i < node->members->len; i++) {
        const JsonNode *m = array ? order[i]
                                  : g_ptr_array_index(node->members, i);

        if (i) {
            g_string_append(out, ", ");
        }
        if (!array) {
            json_append_string(out, m->name);
            g_string_append(out, ": ");
        }
        json_append_node(out, m, false);
    }
    g_string_append_c(out, array ? ']' : '}');
}

char *qdict_to_json(const QDict *qdict)
{
    JsonNode root = { 0 };
    GString *out = g_string_new(NULL);

    for (const QDictEntry *e = qdict_first(qdict); e;
         e = qdict_next(qdict, e)) {
        json_tree_insert(&root, e);
    }
    if (!root.members) {
        g_string_append(out, "{}");
    } else {
        json_append_node(out, &root, true);
        g_ptr_array_unref(root.members);
    }
    return g_string_free(out, FALSE);
}

char *qdict_to_json_filename(const QDict *qdict)
{
    g_autofree char *json = qdict_to_json(qdict);

    return g_strconcat("json:", json, NULL);
}
