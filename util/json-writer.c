/*
 * json-glib trees into the JSON text QEMU's monitor writes (see
 * include/util/json.h).  Clients parse it, but people and test logs read
 * it too, so the spacing and escapes follow QEMU's exactly.
 */
#include "util/json.h"

static void json_write_node(GString *out, JsonNode *node,
                            JsonWriteFlags flags, int level);

static void json_write_indent(GString *out, JsonWriteFlags flags, int level)
{
    if (flags & JSON_WRITE_PRETTY) {
        g_string_append_c(out, '\n');
        for (int i = 0; i < level; i++) {
            g_string_append(out, "    ");
        }
    }
}

void json_append_string(GString *out, const char *str)
{
    const char *p = str;

    g_string_append_c(out, '"');
    while (*p) {
        gunichar c = g_utf8_get_char_validated(p, -1);

        if (c == (gunichar)-1 || c == (gunichar)-2) {
            c = 0xFFFD;
            p++;
        } else {
            p = g_utf8_next_char(p);
        }
        switch (c) {
        case '"':
            g_string_append(out, "\\\"");
            break;
        case '\\':
            g_string_append(out, "\\\\");
            break;
        case '\b':
            g_string_append(out, "\\b");
            break;
        case '\f':
            g_string_append(out, "\\f");
            break;
        case '\n':
            g_string_append(out, "\\n");
            break;
        case '\r':
            g_string_append(out, "\\r");
            break;
        case '\t':
            g_string_append(out, "\\t");
            break;
        default:
            if (c < 0x20 || c >= 0x7F) {
                if (c >= 0x10000) {
                    c -= 0x10000;
                    g_string_append_printf(out, "\\u%04X\\u%04X",
                                           0xD800 | (c >> 10),
                                           0xDC00 | (c & 0x3FF));
                } else {
                    g_string_append_printf(out, "\\u%04X", c);
                }
            } else {
                g_string_append_c(out, c);
            }
        }
    }
    g_string_append_c(out, '"');
}

static void json_write_value(GString *out, JsonNode *node)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    switch (json_node_get_value_type(node)) {
    case G_TYPE_INT64:
        g_string_append_printf(out, "%" G_GINT64_FORMAT,
                               json_node_get_int(node));
        break;
    case G_TYPE_DOUBLE:
        g_string_append(out, g_ascii_formatd(buf, sizeof(buf), "%.17g",
                                             json_node_get_double(node)));
        break;
    case G_TYPE_BOOLEAN:
        g_string_append(out, json_node_get_boolean(node) ? "true" : "false");
        break;
    case G_TYPE_STRING:
        json_append_string(out, json_node_get_string(node));
        break;
    default:
        g_assert_not_reached();
    }
}

static void json_write_object(GString *out, JsonObject *obj,
                              JsonWriteFlags flags, int level)
{
    g_autoptr(GList) members = json_object_get_members(obj);
    bool first = true;

    g_string_append_c(out, '{');
    for (GList *l = members; l; l = l->next) {
        if (!first) {
            g_string_append(out, (flags & JSON_WRITE_PRETTY) ? "," : ", ");
        }
        first = false;
        json_write_indent(out, flags, level + 1);
        json_append_string(out, l->data);
        g_string_append(out, ": ");
        json_write_node(out, json_object_get_member(obj, l->data), flags,
                        level + 1);
    }
    /* QEMU breaks the line even in an empty pretty object */
    json_write_indent(out, flags, level);
    g_string_append_c(out, '}');
}

static void json_write_array(GString *out, JsonArray *arr,
                             JsonWriteFlags flags, int level)
{
    guint n = json_array_get_length(arr);

    g_string_append_c(out, '[');
    for (guint i = 0; i < n; i++) {
        if (i) {
            g_string_append(out, (flags & JSON_WRITE_PRETTY) ? "," : ", ");
        }
        json_write_indent(out, flags, level + 1);
        json_write_node(out, json_array_get_element(arr, i), flags,
                        level + 1);
    }
    json_write_indent(out, flags, level);
    g_string_append_c(out, ']');
}

static void json_write_node(GString *out, JsonNode *node,
                            JsonWriteFlags flags, int level)
{
    switch (json_node_get_node_type(node)) {
    case JSON_NODE_OBJECT:
        json_write_object(out, json_node_get_object(node), flags, level);
        break;
    case JSON_NODE_ARRAY:
        json_write_array(out, json_node_get_array(node), flags, level);
        break;
    case JSON_NODE_VALUE:
        json_write_value(out, node);
        break;
    case JSON_NODE_NULL:
        g_string_append(out, "null");
        break;
    }
}

void json_write(GString *out, JsonNode *node, JsonWriteFlags flags)
{
    json_write_node(out, node, flags, 0);
}

char *json_to_text(JsonNode *node, JsonWriteFlags flags)
{
    GString *out = g_string_new(NULL);

    json_write(out, node, flags);
    return g_string_free(out, FALSE);
}
