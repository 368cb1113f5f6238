/*
 * The one JSON writer (see include/util/json.h): json-glib trees, or a
 * stream of calls, into the JSON text QEMU writes.  Clients parse it, but
 * people, scripts and test logs compare it byte for byte, so the spacing,
 * the escapes, the number formats and the order of members follow QEMU's
 * exactly; json-glib's own generator differs in all four, hence our own
 * code.
 *
 * Invariants:
 *  1. w->need_comma is true exactly when the innermost open object or
 *     array already holds an item (the next one is preceded by a comma).
 *  2. w->level is the number of objects and arrays open, and never
 *     negative: every end matches a start.
 */
#include "util/json.h"

struct JsonWriter {
    GString *out;
    JsonWriteFlags flags;
    int level;
    bool need_comma;
};

JsonWriter *json_writer_new(GString *out, JsonWriteFlags flags)
{
    JsonWriter *w = g_new0(JsonWriter, 1);

    w->out = out;
    w->flags = flags;
    return w;
}

void json_writer_free(JsonWriter *w)
{
    /* invariant 2: a document left open is a caller's bug */
    assert(w->level == 0);
    g_free(w);
}

static void json_writer_newline(JsonWriter *w)
{
    if (w->flags & JSON_WRITE_PRETTY) {
        g_string_append_c(w->out, '\n');
        for (int i = 0; i < w->level; i++) {
            g_string_append(w->out, "    ");
        }
    }
}

/* What comes before an item: separator, line break, member name. */
static void json_writer_item(JsonWriter *w, const char *name)
{
    if (w->need_comma) {
        g_string_append(w->out,
                        (w->flags & JSON_WRITE_PRETTY) ? "," : ", ");
    }
    if (w->level) {
        json_writer_newline(w);
    }
    if (name) {
        json_append_string(w->out, name);
        g_string_append(w->out, ": ");
    }
    w->need_comma = true;
}

static void json_writer_start(JsonWriter *w, const char *name, char open)
{
    json_writer_item(w, name);
    g_string_append_c(w->out, open);
    w->level++;
    w->need_comma = false;
}

static void json_writer_end(JsonWriter *w, char close)
{
    assert(w->level > 0);       /* invariant 2 */
    w->level--;
    /* QEMU breaks the line even in an empty pretty object or array */
    json_writer_newline(w);
    g_string_append_c(w->out, close);
    w->need_comma = true;
}

void json_writer_start_object(JsonWriter *w, const char *name)
{
    json_writer_start(w, name, '{');
}

void json_writer_end_object(JsonWriter *w)
{
    json_writer_end(w, '}');
}

void json_writer_start_array(JsonWriter *w, const char *name)
{
    json_writer_start(w, name, '[');
}

void json_writer_end_array(JsonWriter *w)
{
    json_writer_end(w, ']');
}

void json_writer_str(JsonWriter *w, const char *name, const char *value)
{
    json_writer_item(w, name);
    json_append_string(w->out, value);
}

void json_writer_literal(JsonWriter *w, const char *name, const char *text)
{
    json_writer_item(w, name);
    g_string_append(w->out, text);
}

void json_writer_int64(JsonWriter *w, const char *name, int64_t value)
{
    json_writer_item(w, name);
    g_string_append_printf(w->out, "%" PRId64, value);
}

void json_writer_double(JsonWriter *w, const char *name, double value)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    json_writer_item(w, name);
    g_string_append(w->out, g_ascii_formatd(buf, sizeof(buf), "%.17g",
                                            value));
}

/*
 * The characters with a two-character escape; every other control
 * character, DEL and everything beyond ASCII is written as \uXXXX (a
 * UTF-16 surrogate pair above the BMP), as QEMU writes them.
 */
static const char *const json_short_escapes[] = {
    ['"'] = "\\\"",
    ['\\'] = "\\\\",
    ['\b'] = "\\b",
    ['\f'] = "\\f",
    ['\n'] = "\\n",
    ['\r'] = "\\r",
    ['\t'] = "\\t",
};

int json_short_escape_decode(char letter)
{
    for (size_t c = 0; c < ARRAY_SIZE(json_short_escapes); c++) {
        if (json_short_escapes[c] && json_short_escapes[c][1] == letter) {
            return c;
        }
    }
    return -1;
}

void json_append_string(GString *out, const char *str)
{
    const char *p = str;

    g_string_append_c(out, '"');
    while (*p) {
        gunichar c = g_utf8_get_char_validated(p, -1);

        if ((guchar)p[0] == 0xC0 && (guchar)p[1] == 0x80) {
            /* U+0000 as the parser stores it (modified UTF-8), as QEMU */
            c = 0;
            p += 2;
        } else if (c == (gunichar)-1 || c == (gunichar)-2) {
            c = 0xFFFD;
            p++;
        } else {
            p = g_utf8_next_char(p);
        }
        if (c != 0 && c < ARRAY_SIZE(json_short_escapes) &&
            json_short_escapes[c]) {
            g_string_append(out, json_short_escapes[c]);
        } else if (c >= 0x10000) {
            c -= 0x10000;
            g_string_append_printf(out, "\\u%04X\\u%04X",
                                   0xD800 | (c >> 10), 0xDC00 | (c & 0x3FF));
        } else if (c < 0x20 || c >= 0x7F) {
            g_string_append_printf(out, "\\u%04X", c);
        } else {
            g_string_append_c(out, c);
        }
    }
    g_string_append_c(out, '"');
}

/*
 * QEMU's QDict iterates its 512 hash buckets in order, the newest key
 * first inside a bucket; the hash is tdb's, seeded with the key's length.
 * qemu-img prints its dictionaries in that order, so reproducing it is
 * what makes `--output=json` byte-identical.
 */
#define JSON_QDICT_BUCKETS 512

unsigned int json_qdict_bucket(const char *key)
{
    uint32_t value = 0x238F13AF * (uint32_t)strlen(key);

    for (unsigned int i = 0; key[i]; i++) {
        value += (uint32_t)(unsigned char)key[i] << (i * 5 % 24);
    }
    return (1103515243 * value + 12345) % JSON_QDICT_BUCKETS;
}

typedef struct JsonOrderedMember {
    const char *name;
    unsigned int bucket;
    unsigned int index;         /* insertion order */
} JsonOrderedMember;

static int json_ordered_member_cmp(const void *a, const void *b)
{
    const JsonOrderedMember *ma = a, *mb = b;

    if (ma->bucket != mb->bucket) {
        return ma->bucket < mb->bucket ? -1 : 1;
    }
    return ma->index > mb->index ? -1 : 1;
}

const char **json_object_ordered_members(JsonObject *obj,
                                         JsonWriteFlags flags)
{
    GList *names = json_object_get_members(obj);
    guint n = g_list_length(names);
    g_autofree JsonOrderedMember *members = g_new(JsonOrderedMember, n + 1);
    const char **order = g_new(const char *, n + 1);
    unsigned int i = 0;

    for (GList *l = names; l; l = l->next, i++) {
        members[i] = (JsonOrderedMember) {
            .name = l->data,
            .bucket = (flags & JSON_WRITE_QDICT_ORDER) ?
                      json_qdict_bucket(l->data) : 0,
            .index = i,
        };
    }
    g_list_free(names);
    if (flags & JSON_WRITE_QDICT_ORDER) {
        qsort(members, n, sizeof(*members), json_ordered_member_cmp);
    }
    for (i = 0; i < n; i++) {
        order[i] = members[i].name;
    }
    order[n] = NULL;
    return order;
}

void json_writer_node(JsonWriter *w, const char *name, JsonNode *node)
{
    switch (json_node_get_node_type(node)) {
    case JSON_NODE_OBJECT: {
        JsonObject *obj = json_node_get_object(node);
        g_autofree const char **order =
            json_object_ordered_members(obj, w->flags);

        json_writer_start_object(w, name);
        for (const char **m = order; *m; m++) {
            json_writer_node(w, *m, json_object_get_member(obj, *m));
        }
        json_writer_end_object(w);
        return;
    }
    case JSON_NODE_ARRAY: {
        JsonArray *arr = json_node_get_array(node);

        json_writer_start_array(w, name);
        for (guint i = 0; i < json_array_get_length(arr); i++) {
            json_writer_node(w, NULL, json_array_get_element(arr, i));
        }
        json_writer_end_array(w);
        return;
    }
    case JSON_NODE_NULL:
        json_writer_literal(w, name, "null");
        return;
    case JSON_NODE_VALUE:
        break;
    }
    switch (json_node_get_value_type(node)) {
    case G_TYPE_INT64:
        json_writer_int64(w, name, json_node_get_int(node));
        break;
    case G_TYPE_DOUBLE:
        json_writer_double(w, name, json_node_get_double(node));
        break;
    case G_TYPE_BOOLEAN:
        json_writer_literal(w, name,
                            json_node_get_boolean(node) ? "true" : "false");
        break;
    case G_TYPE_STRING:
        json_writer_str(w, name, json_node_get_string(node));
        break;
    default:
        g_assert_not_reached();
    }
}

void json_write(GString *out, JsonNode *node, JsonWriteFlags flags)
{
    JsonWriter *w = json_writer_new(out, flags);

    json_writer_node(w, NULL, node);
    json_writer_free(w);
}

char *json_to_text(JsonNode *node, JsonWriteFlags flags)
{
    GString *out = g_string_new(NULL);

    json_write(out, node, flags);
    return g_string_free(out, FALSE);
}
