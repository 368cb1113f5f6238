/*
 * Input checked against the QMP schema (see include/util/qapi-schema.h).
 *
 * One walk over the value and its schema type serves QMP arguments (JSON
 * types must match) and keyval options (strings are converted in place):
 * so the command line and the monitor accept the same things and say the
 * same things about what they refuse.  Members are visited in declaration
 * order and the first problem is reported, as QEMU's input visitors do.
 */
#include "util/qapi-schema.h"

#include <math.h>

#include "util/cutils.h"

typedef struct QapiWalk {
    QapiInputMode mode;
    Error **errp;
} QapiWalk;

static bool qapi_check_value(QapiWalk *w, const QapiType *type,
                             JsonNode *node, const char *path);

const QapiCommand *qapi_find_command(const char *name)
{
    for (const QapiCommand *c = qapi_commands; c->name; c++) {
        if (!strcmp(c->name, name)) {
            return c;
        }
    }
    return NULL;
}

const QapiEvent *qapi_find_event(const char *name)
{
    for (const QapiEvent *e = qapi_events; e->name; e++) {
        if (!strcmp(e->name, name)) {
            return e;
        }
    }
    return NULL;
}

static char *qapi_member_path(const char *path, const char *member)
{
    return path ? g_strdup_printf("%s.%s", path, member) : g_strdup(member);
}

static bool qapi_type_error(QapiWalk *w, const char *path,
                            const char *expected)
{
    error_setg(w->errp, "Invalid parameter type for '%s', expected: %s",
               path ? path : "(top level)", expected);
    return false;
}

static const char *qapi_node_string(JsonNode *node)
{
    if (JSON_NODE_HOLDS_VALUE(node) &&
        json_node_get_value_type(node) == G_TYPE_STRING) {
        return json_node_get_string(node);
    }
    return NULL;
}

static bool qapi_is_int_node(JsonNode *node)
{
    return JSON_NODE_HOLDS_VALUE(node) &&
           json_node_get_value_type(node) == G_TYPE_INT64;
}

/* Whether @path is a list element's ("cpu-affinity[0]"). */
static bool qapi_is_element(const char *path)
{
    return path && g_str_has_suffix(path, "]");
}

/* @path as QEMU's keyval input names it: "cpu-affinity.0". */
static char *qapi_keyval_path(const char *path)
{
    GString *out = g_string_new(NULL);

    for (const char *p = path; *p; p++) {
        if (*p == '[') {
            g_string_append_c(out, '.');
        } else if (*p != ']') {
            g_string_append_c(out, *p);
        }
    }
    return g_string_free(out, false);
}

/* Keyval: the text of an integer or a size into @node, checked. */
static bool qapi_keyval_int(QapiWalk *w, const QapiType *type,
                            JsonNode *node, const char *path)
{
    const char *text = qapi_node_string(node);
    int64_t v;

    if (!text) {
        return qapi_type_error(w, path, "string");
    }
    if (type->kind == QAPI_KIND_SIZE) {
        uint64_t size;

        if (qemu_strtosz(text, NULL, &size) < 0 || size > INT64_MAX) {
            error_setg(w->errp, "Parameter '%s' expects size", path);
            return false;
        }
        v = size;
    } else if (qemu_strtoi64(text, NULL, 10, &v) < 0) {
        g_autofree char *dotted = qapi_keyval_path(path);

        error_setg(w->errp, "Parameter '%s' expects integer", dotted);
        return false;
    }
    json_node_set_int(node, v);
    return true;
}

static bool qapi_check_int(QapiWalk *w, const QapiType *type,
                           JsonNode *node, const char *path)
{
    int64_t v;

    if (w->mode == QAPI_INPUT_KEYVAL &&
        !qapi_keyval_int(w, type, node, path)) {
        return false;
    }
    if (!qapi_is_int_node(node)) {
        /* QEMU's words for an element of a list of unsigned integers */
        if (qapi_is_element(path) && type->min == 0) {
            error_setg(w->errp, "Parameter '%s' expects uint64", path);
            return false;
        }
        return qapi_type_error(w, path, "integer");
    }
    v = json_node_get_int(node);
    if (v < type->min || v > type->max) {
        /* QEMU's visitors give a list element no name: 'null' */
        error_setg(w->errp, "Parameter '%s' expects %s",
                   qapi_is_element(path) ? "null" : path, type->range_name);
        return false;
    }
    return true;
}

static bool qapi_check_bool(QapiWalk *w, JsonNode *node, const char *path)
{
    if (w->mode == QAPI_INPUT_KEYVAL) {
        const char *text = qapi_node_string(node);
        bool b;

        if (!text) {
            return qapi_type_error(w, path, "string");
        }
        if (!qapi_bool_parse(path, text, &b, w->errp)) {
            return false;
        }
        json_node_set_boolean(node, b);
    }
    if (!JSON_NODE_HOLDS_VALUE(node) ||
        json_node_get_value_type(node) != G_TYPE_BOOLEAN) {
        return qapi_type_error(w, path, "boolean");
    }
    return true;
}

static bool qapi_check_number(QapiWalk *w, JsonNode *node, const char *path)
{
    GType t;

    if (w->mode == QAPI_INPUT_KEYVAL) {
        const char *text = qapi_node_string(node);
        char *end;
        double d;

        if (!text) {
            return qapi_type_error(w, path, "string");
        }
        d = g_ascii_strtod(text, &end);
        if (!*text || *end || !isfinite(d)) {
            error_setg(w->errp, "Parameter '%s' expects number", path);
            return false;
        }
        json_node_set_double(node, d);
    }
    t = JSON_NODE_HOLDS_VALUE(node) ? json_node_get_value_type(node) : 0;
    if (t != G_TYPE_INT64 && t != G_TYPE_DOUBLE) {
        return qapi_type_error(w, path, "number");
    }
    return true;
}

static bool qapi_check_enum(QapiWalk *w, const QapiType *type,
                            JsonNode *node, const char *path)
{
    const char *text = qapi_node_string(node);

    if (!text) {
        return qapi_type_error(w, path, "string");
    }
    for (const char *const *v = type->values; *v; v++) {
        if (!strcmp(*v, text)) {
            return true;
        }
    }
    /*
     * QEMU names the member alone ("adapter-type", not
     * "options.adapter-type"); a list element, which QEMU calls 'null',
     * by its path ("enable[0]").
     */
    if (!g_str_has_suffix(path, "]") && strrchr(path, '.')) {
        path = strrchr(path, '.') + 1;
    }
    error_setg(w->errp, "Parameter '%s' does not accept value '%s'", path,
               text);
    return false;
}

static const QapiMember *qapi_find_member(const QapiMember *members,
                                          const char *name)
{
    for (const QapiMember *m = members; m && m->name; m++) {
        if (!strcmp(m->name, name)) {
            return m;
        }
    }
    return NULL;
}

static bool qapi_check_member(QapiWalk *w, const QapiMember *m,
                              JsonObject *obj, const char *path)
{
    g_autofree char *mpath = qapi_member_path(path, m->name);
    JsonNode *node = json_object_get_member(obj, m->name);
    JsonArray *arr;

    if (!node) {
        if (m->optional) {
            return true;
        }
        error_setg(w->errp, "Parameter '%s' is missing", mpath);
        return false;
    }
    if (!m->list) {
        return qapi_check_value(w, m->type, node, mpath);
    }
    if (!JSON_NODE_HOLDS_ARRAY(node)) {
        return qapi_type_error(w, mpath, "array");
    }
    arr = json_node_get_array(node);
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        g_autofree char *epath = g_strdup_printf("%s[%u]", mpath, i);

        if (!qapi_check_value(w, m->type, json_array_get_element(arr, i),
                              epath)) {
            return false;
        }
    }
    return true;
}

static bool qapi_check_members(QapiWalk *w, const QapiMember *members,
                               JsonObject *obj, const char *path)
{
    for (const QapiMember *m = members; m && m->name; m++) {
        if (!qapi_check_member(w, m, obj, path)) {
            return false;
        }
    }
    return true;
}

/* Members of @obj that neither @a nor @b declares are an error. */
static bool qapi_check_unexpected(QapiWalk *w, const QapiMember *a,
                                  const QapiMember *b, JsonObject *obj,
                                  const char *path)
{
    g_autoptr(GList) names = json_object_get_members(obj);

    for (GList *l = names; l; l = l->next) {
        if (!qapi_find_member(a, l->data) && !qapi_find_member(b, l->data)) {
            g_autofree char *mpath = qapi_member_path(path, l->data);

            error_setg(w->errp, "Parameter '%s' is unexpected", mpath);
            return false;
        }
    }
    return true;
}

static bool qapi_check_object(QapiWalk *w, const QapiType *type,
                              JsonNode *node, const char *path)
{
    const QapiMember *extra = NULL;
    JsonObject *obj;

    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        return qapi_type_error(w, path, "object");
    }
    obj = json_node_get_object(node);
    if (!qapi_check_members(w, type->members, obj, path)) {
        return false;
    }
    if (type->kind == QAPI_KIND_UNION) {
        const char *value = json_object_get_string_member(obj,
                                                          type->discriminator);

        for (const QapiVariant *v = type->variants; v->value; v++) {
            if (!strcmp(v->value, value)) {
                extra = v->type->members;
                break;
            }
        }
        if (!qapi_check_members(w, extra, obj, path)) {
            return false;
        }
    }
    if (type->open) {
        return true;
    }
    return qapi_check_unexpected(w, type->members, extra, obj, path);
}

static bool qapi_check_value(QapiWalk *w, const QapiType *type,
                             JsonNode *node, const char *path)
{
    switch (type->kind) {
    case QAPI_KIND_STR:
        if (!qapi_node_string(node)) {
            return qapi_type_error(w, path, "string");
        }
        return true;
    case QAPI_KIND_INT:
    case QAPI_KIND_SIZE:
        return qapi_check_int(w, type, node, path);
    case QAPI_KIND_BOOL:
        return qapi_check_bool(w, node, path);
    case QAPI_KIND_NUMBER:
        return qapi_check_number(w, node, path);
    case QAPI_KIND_ANY:
        return true;
    case QAPI_KIND_ENUM:
        return qapi_check_enum(w, type, node, path);
    case QAPI_KIND_STRUCT:
    case QAPI_KIND_UNION:
        return qapi_check_object(w, type, node, path);
    }
    g_assert_not_reached();
}

bool qapi_check_input(const QapiType *type, JsonNode *value,
                      QapiInputMode mode, Error **errp)
{
    QapiWalk w = { .mode = mode, .errp = errp };

    return qapi_check_value(&w, type, value, NULL);
}

JsonNode *qapi_input_from_keyval(const QapiType *type, const QDict *qdict,
                                 Error **errp)
{
    JsonNode *node = qdict_to_json_node(qdict);

    if (!qapi_check_input(type, node, QAPI_INPUT_KEYVAL, errp)) {
        json_node_unref(node);
        return NULL;
    }
    return node;
}
