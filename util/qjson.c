/*
 * Option QDicts to and from JSON: json: filenames, --blockdev and
 * blockdev-add arguments in, json: filenames, QMP events and keyval
 * arguments out.  The text is parsed and printed by the one JSON stack
 * (util/json-parser.c, util/json-writer.c); this file only converts
 * between its trees and the flat dotted keys of a QDict.
 *
 * In: {"file": {"filename": "a"}} gives "file.filename", arrays give
 * indexes ("inject-error.0.event").  Scalars keep their type; a number
 * keeps the text the writer prints for it: an integer as such, anything
 * else as "%.17g" of the double, as QEMU prints numbers.
 *
 * Out: the dotted keys nest again, and an object whose members are named
 * 0..n-1 becomes an array.  Numbers and booleans are written from the
 * QDict's text as it is, so that a number set as text (an option's
 * uint64, say) comes out exactly.
 */
#include "util/qdict.h"

#include "util/json.h"

static void qdict_flatten_node(QDict *qdict, GString *key, JsonNode *node);

static void qdict_flatten_object(QDict *qdict, GString *key, JsonObject *obj)
{
    size_t prefix_len = key->len;
    g_autoptr(GList) members = json_object_get_members(obj);

    for (GList *l = members; l; l = l->next) {
        if (prefix_len) {
            g_string_append_c(key, '.');
        }
        g_string_append(key, l->data);
        qdict_flatten_node(qdict, key, json_object_get_member(obj, l->data));
        g_string_truncate(key, prefix_len);
    }
}

static void qdict_flatten_array(QDict *qdict, GString *key, JsonArray *arr)
{
    size_t prefix_len = key->len;

    for (guint i = 0; i < json_array_get_length(arr); i++) {
        g_string_append_printf(key, ".%u", i);
        qdict_flatten_node(qdict, key, json_array_get_element(arr, i));
        g_string_truncate(key, prefix_len);
    }
}

static void qdict_flatten_value(QDict *qdict, const char *key,
                                JsonNode *node)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    switch (json_node_get_value_type(node)) {
    case G_TYPE_STRING:
        qdict_put_typed(qdict, key, json_node_get_string(node),
                        QTYPE_QSTRING);
        break;
    case G_TYPE_INT64:
        qdict_put_int(qdict, key, json_node_get_int(node));
        break;
    case G_TYPE_DOUBLE:
        qdict_put_typed(qdict, key,
                        g_ascii_formatd(buf, sizeof(buf), "%.17g",
                                        json_node_get_double(node)),
                        QTYPE_QNUM);
        break;
    case G_TYPE_BOOLEAN:
        qdict_put_bool(qdict, key, json_node_get_boolean(node));
        break;
    default:
        g_assert_not_reached();
    }
}

static void qdict_flatten_node(QDict *qdict, GString *key, JsonNode *node)
{
    switch (json_node_get_node_type(node)) {
    case JSON_NODE_OBJECT:
        qdict_flatten_object(qdict, key, json_node_get_object(node));
        break;
    case JSON_NODE_ARRAY:
        qdict_flatten_array(qdict, key, json_node_get_array(node));
        break;
    case JSON_NODE_NULL:
        qdict_put_typed(qdict, key->str, NULL, QTYPE_QNULL);
        break;
    case JSON_NODE_VALUE:
        qdict_flatten_value(qdict, key->str, node);
        break;
    }
}

QDict *qdict_from_json_object(JsonObject *obj)
{
    QDict *qdict = qdict_new();
    g_autoptr(GString) key = g_string_new(NULL);

    qdict_flatten_object(qdict, key, obj);
    return qdict;
}

QDict *qdict_from_json(const char *json, Error **errp)
{
    g_autoptr(JsonNode) node = NULL;

    /* QEMU words an empty document its own way */
    if (!json[strspn(json, " \t\n\r")]) {
        error_setg(errp, "Expecting a JSON value");
        return NULL;
    }
    node = json_parse_text(json, strlen(json), errp);
    if (!node) {
        return NULL;
    }
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        error_setg(errp, "Invalid JSON object given");
        return NULL;
    }
    return qdict_from_json_object(json_node_get_object(node));
}

/*
 * The tree the flat keys describe.  A key is a leaf (entry != NULL) or a
 * branch with ordered members.
 */
typedef struct QDictKey {
    char *name;
    const QDictEntry *entry;
    GPtrArray *members;
} QDictKey;

static QDictKey *qdict_key_new(const char *name, size_t len)
{
    QDictKey *k = g_new0(QDictKey, 1);

    k->name = g_strndup(name, len);
    return k;
}

static void qdict_key_free(gpointer data)
{
    QDictKey *k = data;

    if (k->members) {
        g_ptr_array_unref(k->members);
    }
    g_free(k->name);
    g_free(k);
}

static QDictKey *qdict_key_add(QDictKey *parent, const char *name,
                               size_t len)
{
    QDictKey *k = qdict_key_new(name, len);

    if (!parent->members) {
        parent->members = g_ptr_array_new_with_free_func(qdict_key_free);
    }
    g_ptr_array_add(parent->members, k);
    return k;
}

static QDictKey *qdict_key_find(QDictKey *parent, const char *name,
                                size_t len)
{
    for (guint i = 0; parent->members && i < parent->members->len; i++) {
        QDictKey *k = g_ptr_array_index(parent->members, i);

        if (strlen(k->name) == len && !strncmp(k->name, name, len)) {
            return k;
        }
    }
    return NULL;
}

/*
 * Files @entry under its dotted key.  Where a key cannot nest (one of its
 * prefixes already holds a value), the rest of the key stays one member
 * name, so that nothing is lost.
 */
static void qdict_key_insert(QDictKey *root, const QDictEntry *entry)
{
    const char *key = qdict_entry_key(entry);
    QDictKey *k = root;

    for (;;) {
        const char *dot = strchr(key, '.');
        size_t len = dot ? (size_t)(dot - key) : strlen(key);
        QDictKey *child;

        if (!dot) {
            qdict_key_add(k, key, len)->entry = entry;
            return;
        }
        child = qdict_key_find(k, key, len);
        if (child && child->entry) {
            qdict_key_add(k, key, strlen(key))->entry = entry;
            return;
        }
        if (!child) {
            child = qdict_key_add(k, key, len);
        }
        k = child;
        key = dot + 1;
    }
}

/* The key tree of @qdict; the caller frees it with qdict_key_free(). */
static QDictKey *qdict_key_tree(const QDict *qdict)
{
    QDictKey *root = g_new0(QDictKey, 1);

    for (const QDictEntry *e = qdict_first(qdict); e;
         e = qdict_next(qdict, e)) {
        qdict_key_insert(root, e);
    }
    if (!root->members) {
        root->members = g_ptr_array_new_with_free_func(qdict_key_free);
    }
    return root;
}

/*
 * The members of branch @k in the order they are written (caller frees
 * the array): for an array (members named 0..n-1, each once, in any
 * order) in index order, else as they came.  @top: the document itself,
 * always an object even with keys "0", "1".
 */
static QDictKey **qdict_key_members(const QDictKey *k, bool top,
                                    bool *is_array)
{
    guint n = k->members->len;
    QDictKey **order = g_new0(QDictKey *, n + 1);

    *is_array = !top;
    for (guint i = 0; i < n && *is_array; i++) {
        QDictKey *m = g_ptr_array_index(k->members, i);
        const char *s = m->name;
        guint64 index;

        if (!*s || strspn(s, "0123456789") != strlen(s) ||
            (s[0] == '0' && s[1])) {
            *is_array = false;
            break;
        }
        index = g_ascii_strtoull(s, NULL, 10);
        if (index >= n || order[index]) {
            *is_array = false;
            break;
        }
        order[index] = m;
    }
    if (!*is_array) {
        for (guint i = 0; i < n; i++) {
            order[i] = g_ptr_array_index(k->members, i);
        }
    }
    return order;
}

/*
 * Sorts the @n members of an object into QEMU's QDict order: by bucket,
 * the later first within one.
 */
static void qdict_key_sort_qdict_order(QDictKey **order, guint n)
{
    for (guint i = 1; i < n; i++) {
        QDictKey *k = order[i];
        unsigned int bucket = json_qdict_bucket(k->name);
        guint j = i;

        /* stable insertion; "<=" puts a later member before its equals */
        while (j > 0 && bucket <= json_qdict_bucket(order[j - 1]->name)) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
}

static void qdict_key_write(JsonWriter *w, const char *name,
                            const QDictKey *k, bool top)
{
    g_autofree QDictKey **order = NULL;
    bool is_array;

    if (k->entry) {
        const char *value = qdict_entry_value(k->entry);

        switch (qdict_entry_type(k->entry)) {
        case QTYPE_QSTRING:
            json_writer_str(w, name, value);
            break;
        case QTYPE_QNUM:
        case QTYPE_QBOOL:
            json_writer_literal(w, name, value);
            break;
        case QTYPE_QNULL:
            json_writer_literal(w, name, "null");
            break;
        }
        return;
    }
    order = qdict_key_members(k, top, &is_array);
    if (is_array) {
        json_writer_start_array(w, name);
    } else {
        /* QEMU prints each nested dictionary of a json: name so */
        qdict_key_sort_qdict_order(order, k->members->len);
        json_writer_start_object(w, name);
    }
    for (QDictKey **m = order; *m; m++) {
        qdict_key_write(w, is_array ? NULL : (*m)->name, *m, false);
    }
    if (is_array) {
        json_writer_end_array(w);
    } else {
        json_writer_end_object(w);
    }
}

char *qdict_to_json(const QDict *qdict)
{
    QDictKey *root = qdict_key_tree(qdict);
    GString *out = g_string_new(NULL);
    JsonWriter *w = json_writer_new(out, 0);

    qdict_key_write(w, NULL, root, true);
    json_writer_free(w);
    qdict_key_free(root);
    return g_string_free(out, FALSE);
}

char *qdict_to_json_filename(const QDict *qdict)
{
    g_autofree char *json = qdict_to_json(qdict);

    return g_strconcat("json:", json, NULL);
}

/*
 * A number node for a QDict number's text: an integer that fits in int64
 * as such, anything else as a double, as the parser reads the same text.
 */
static JsonNode *qdict_number_node(const char *text)
{
    gint64 v;

    if (strspn(text + (text[0] == '-'), "0123456789") ==
        strlen(text + (text[0] == '-'))) {
        errno = 0;
        v = g_ascii_strtoll(text, NULL, 10);
        if (errno != ERANGE) {
            return json_node_init_int(json_node_alloc(), v);
        }
    }
    return json_node_init_double(json_node_alloc(),
                                 g_ascii_strtod(text, NULL));
}

static JsonNode *qdict_key_node(const QDictKey *k, bool top)
{
    g_autofree QDictKey **order = NULL;
    bool is_array;

    if (k->entry) {
        const char *value = qdict_entry_value(k->entry);

        switch (qdict_entry_type(k->entry)) {
        case QTYPE_QSTRING:
            return json_node_init_string(json_node_alloc(), value);
        case QTYPE_QNUM:
            return qdict_number_node(value);
        case QTYPE_QBOOL:
            return json_node_init_boolean(json_node_alloc(),
                                          !strcmp(value, "true"));
        case QTYPE_QNULL:
            return json_node_init_null(json_node_alloc());
        }
        g_assert_not_reached();
    }
    order = qdict_key_members(k, top, &is_array);
    if (is_array) {
        g_autoptr(JsonArray) arr = json_array_new();

        for (QDictKey **m = order; *m; m++) {
            json_array_add_element(arr, qdict_key_node(*m, false));
        }
        return json_node_init_array(json_node_alloc(), arr);
    } else {
        g_autoptr(JsonObject) obj = json_object_new();

        for (QDictKey **m = order; *m; m++) {
            json_object_set_member(obj, (*m)->name,
                                   qdict_key_node(*m, false));
        }
        return json_node_init_object(json_node_alloc(), obj);
    }
}

JsonNode *qdict_to_json_node(const QDict *qdict)
{
    QDictKey *root = qdict_key_tree(qdict);
    JsonNode *node = qdict_key_node(root, true);

    qdict_key_free(root);
    return node;
}
