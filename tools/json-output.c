/*
 * JSON output as QEMU's tools print it (qemu-img --output=json, the human
 * "Format specific information" lines), shared by qblock-img and
 * qblock-io.
 */
#include "json-output.h"

#include "util/json.h"

/*
 * QEMU prints a dictionary in the order of its hash buckets: the hash is
 * the one of tdb (seeded with the key's length), reduced modulo the 512
 * buckets; inside a bucket the newest key comes first.  Reproducing it is
 * what makes `--output=json` byte-identical.
 */
#define IMG_QDICT_BUCKETS 512

static unsigned int img_qdict_bucket(const char *key)
{
    uint32_t value = 0x238F13AF * (uint32_t)strlen(key);

    for (unsigned int i = 0; key[i]; i++) {
        value += (uint32_t)(unsigned char)key[i] << (i * 5 % 24);
    }
    return (1103515243 * value + 12345) % IMG_QDICT_BUCKETS;
}

typedef struct ImgJsonMember {
    const char *name;
    unsigned int bucket;
    unsigned int index;
} ImgJsonMember;

static int img_json_member_cmp(const void *a, const void *b)
{
    const ImgJsonMember *ma = a, *mb = b;

    if (ma->bucket != mb->bucket) {
        return ma->bucket < mb->bucket ? -1 : 1;
    }
    return ma->index > mb->index ? -1 : 1;
}

static void img_json_indent(GString *out, int level)
{
    g_string_append_c(out, '\n');
    for (int i = 0; i < level; i++) {
        g_string_append(out, "    ");
    }
}


/* The members of @obj in QEMU's order; *n receives their number. */
static ImgJsonMember *img_json_sorted_members(JsonObject *obj, guint *n)
{
    GList *names = json_object_get_members(obj);
    ImgJsonMember *members;
    unsigned int i = 0;

    *n = g_list_length(names);
    members = g_new(ImgJsonMember, *n ? *n : 1);
    for (GList *l = names; l; l = l->next, i++) {
        members[i].name = l->data;
        members[i].bucket = img_qdict_bucket(l->data);
        members[i].index = i;
    }
    g_list_free(names);
    qsort(members, *n, sizeof(*members), img_json_member_cmp);
    return members;
}

static void img_json_append_object(GString *out, JsonObject *obj, int level)
{
    guint n;
    g_autofree ImgJsonMember *members = img_json_sorted_members(obj, &n);

    g_string_append_c(out, '{');
    for (guint i = 0; i < n; i++) {
        if (i) {
            g_string_append_c(out, ',');
        }
        img_json_indent(out, level + 1);
        json_append_string(out, members[i].name);
        g_string_append(out, ": ");
        img_json_append(out, json_object_get_member(obj, members[i].name),
                        level + 1);
    }
    img_json_indent(out, level);
    g_string_append_c(out, '}');
}

static void img_json_append_array(GString *out, JsonArray *arr, int level)
{
    guint n = json_array_get_length(arr);

    g_string_append_c(out, '[');
    for (guint i = 0; i < n; i++) {
        if (i) {
            g_string_append_c(out, ',');
        }
        img_json_indent(out, level + 1);
        img_json_append(out, json_array_get_element(arr, i), level + 1);
    }
    img_json_indent(out, level);
    g_string_append_c(out, ']');
}

void img_json_append(GString *out, JsonNode *node, int level)
{
    switch (json_node_get_node_type(node)) {
    case JSON_NODE_OBJECT:
        img_json_append_object(out, json_node_get_object(node), level);
        return;
    case JSON_NODE_ARRAY:
        img_json_append_array(out, json_node_get_array(node), level);
        return;
    case JSON_NODE_NULL:
        g_string_append(out, "null");
        return;
    case JSON_NODE_VALUE:
        break;
    }
    switch (json_node_get_value_type(node)) {
    case G_TYPE_BOOLEAN:
        g_string_append(out, json_node_get_boolean(node) ? "true" : "false");
        break;
    case G_TYPE_INT64:
        g_string_append_printf(out, "%" PRId64, json_node_get_int(node));
        break;
    case G_TYPE_DOUBLE:
        g_string_append_printf(out, "%.17g", json_node_get_double(node));
        break;
    default:
        json_append_string(out, json_node_get_string(node));
        break;
    }
}

void img_json_print(JsonNode *node)
{
    g_autoptr(GString) out = g_string_new(NULL);

    img_json_append(out, node, 0);
    printf("%s\n", out->str);
}

static bool img_json_is_composite(JsonNode *node)
{
    return JSON_NODE_HOLDS_OBJECT(node) || JSON_NODE_HOLDS_ARRAY(node);
}

/* One "name: value" or "name:" line and, for composites, what is below. */
static void img_json_human_item(GString *out, const char *label,
                                JsonNode *value, int level)
{
    bool composite = img_json_is_composite(value);

    g_string_append_printf(out, "%*s%s:%c", level * 4, "", label,
                           composite ? '\n' : ' ');
    img_json_append_human(out, value, level + 1);
    if (!composite) {
        g_string_append_c(out, '\n');
    }
}

void img_json_append_human(GString *out, JsonNode *node, int level)
{
    if (JSON_NODE_HOLDS_OBJECT(node)) {
        JsonObject *obj = json_node_get_object(node);
        guint n;
        g_autofree ImgJsonMember *members = img_json_sorted_members(obj, &n);

        for (guint i = 0; i < n; i++) {
            /* "refcount-bits" reads "refcount bits" */
            g_autofree char *label = g_strdelimit(g_strdup(members[i].name),
                                                  "-", ' ');

            img_json_human_item(out, label,
                                json_object_get_member(obj, members[i].name),
                                level);
        }
    } else if (JSON_NODE_HOLDS_ARRAY(node)) {
        JsonArray *arr = json_node_get_array(node);

        for (guint i = 0; i < json_array_get_length(arr); i++) {
            g_autofree char *label = g_strdup_printf("[%u]", i);

            img_json_human_item(out, label, json_array_get_element(arr, i),
                                level);
        }
    } else if (JSON_NODE_HOLDS_VALUE(node) &&
               json_node_get_value_type(node) == G_TYPE_STRING) {
        /* strings appear unquoted */
        g_string_append(out, json_node_get_string(node));
    } else {
        img_json_append(out, node, level);
    }
}

char *img_format_specific_human(BlockDriverState *bs)
{
    g_autoptr(GString) json = g_string_new(NULL);
    g_autoptr(GString) human = g_string_new(NULL);
    JsonNode *node = NULL;

    if (!bs->drv || !bs->drv->bdrv_get_specific_info) {
        return NULL;
    }
    bs->drv->bdrv_get_specific_info(bs, json, human);
    if (json->len) {
        node = json_from_string(json->str, NULL);
    }
    /*
     * QEMU renders the human lines from the "data" member, so that both
     * outputs always agree; the driver's own lines serve a driver that has
     * no JSON to give.
     */
    if (node && JSON_NODE_HOLDS_OBJECT(node) &&
        json_object_has_member(json_node_get_object(node), "data")) {
        g_string_truncate(human, 0);
        img_json_append_human(human,
                              json_object_get_member(
                                  json_node_get_object(node), "data"), 1);
    }
    if (node) {
        json_node_unref(node);
    }
    return human->len ? g_strdup(human->str) : NULL;
}
