/*
 * qblock-img: helpers that several sub-commands share.
 *
 * Messages here are qemu-img's, word for word, because scripts match them.
 */
#include "qblock-img.h"

int64_t img_cvtnum_full(const char *name, const char *value, int64_t min,
                        int64_t max)
{
    const char *p = value;
    uint64_t res;
    int err;

    err = qemu_strtosz(value, NULL, &res);
    while (g_ascii_isspace(*p)) {
        p++;
    }
    /* qemu-img counts a negative number as a malformed size, not as one
     * out of range. */
    if (err == -ERANGE && *p == '-') {
        err = -EINVAL;
    }
    if (err < 0 && err != -ERANGE) {
        error_report("Invalid %s specified. You may use "
                     "k, M, G, T, P or E suffixes for", name);
        error_report("kilobytes, megabytes, gigabytes, terabytes, "
                     "petabytes and exabytes.");
        return -1;
    }
    if (err == -ERANGE || res > (uint64_t)max || (int64_t)res < min) {
        error_report("Invalid %s specified. Must be between %" PRId64
                     " and %" PRId64 ".", name, min, max);
        return -1;
    }
    return res;
}

int64_t img_cvtnum(const char *name, const char *value)
{
    return img_cvtnum_full(name, value, 0, INT64_MAX);
}

bool img_parse_output(const char *arg, bool *json)
{
    if (!strcmp(arg, "json")) {
        *json = true;
        return true;
    }
    if (!strcmp(arg, "human")) {
        *json = false;
        return true;
    }
    error_report("--output must be used with human or json as argument.");
    return false;
}

bool img_has_help_option(const char *options)
{
    g_auto(GStrv) parts = g_strsplit(options, ",", -1);

    for (int i = 0; parts[i]; i++) {
        if (!strcmp(parts[i], "help") || !strcmp(parts[i], "?")) {
            return true;
        }
    }
    return false;
}

char *img_accumulate_options(char *options, const char *optarg)
{
    char *merged;

    if (!options) {
        return g_strdup(optarg);
    }
    merged = g_strdup_printf("%s,%s", options, optarg);
    g_free(options);
    return merged;
}

int img_parse_cache(const char *mode, ImgOpenOptions *o)
{
    return bdrv_parse_cache_mode(mode, &o->flags, &o->writethrough);
}

BlockBackend *img_open(const char *name, const ImgOpenOptions *o)
{
    Error *err = NULL;
    QDict *options;
    BlockBackend *blk;
    int flags = o->flags;

    if (o->image_opts) {
        if (o->fmt) {
            error_report("--image-opts and --format are mutually exclusive");
            return NULL;
        }
        options = keyval_parse_flat(name, "file", &err);
        if (!options) {
            error_report_err(err);
            return NULL;
        }
    } else {
        options = qdict_new();
        if (o->fmt) {
            qdict_put_str(options, "driver", o->fmt);
        }
    }
    if (o->force_share) {
        qdict_put_bool(options, BDRV_OPT_FORCE_SHARE, true);
    } else {
        flags |= BDRV_O_NO_SHARE;
    }

    blk = blk_new_open(o->image_opts ? NULL : name, NULL, options, flags,
                       &err);
    if (!blk) {
        error_report("Could not open '%s': %s", name, error_get_pretty(err));
        if (error_get_hint(err)) {
            fputs(error_get_hint(err), stderr);
        }
        error_free(err);
        return NULL;
    }
    blk_set_enable_write_cache(blk, !o->writethrough);
    return blk;
}

void img_progress_init(ImgProgress *p, bool enabled, double min_skip)
{
    p->enabled = enabled;
    p->min_skip = min_skip;
    p->current = 0;
    p->last_print = 0;
}

/*
 * With @max == 0, @delta is the new value in percent; otherwise @delta
 * percent of @max percent is added (qemu-img's convention).
 */
void img_progress_print(ImgProgress *p, double delta, double max)
{
    if (!p->enabled) {
        return;
    }
    if (max == 0) {
        p->current = delta;
    } else {
        p->current += (delta / 100) * max;
    }
    if (p->current > 100) {
        p->current = 100;
    }
    if (p->current > p->last_print + p->min_skip ||
        p->current < p->last_print - p->min_skip ||
        p->current == 0 || p->current == 100) {
        p->last_print = p->current;
        printf("    (%3.2f/100%%)\r", p->current);
        fflush(stdout);
    }
}

void img_progress_end(ImgProgress *p)
{
    if (p->enabled) {
        printf("\n");
        fflush(stdout);
    }
}

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

/* QEMU escapes every character outside printable ASCII as \uXXXX. */
static void img_json_quote(GString *out, const char *str)
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
        img_json_quote(out, members[i].name);
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
        img_json_quote(out, json_node_get_string(node));
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
