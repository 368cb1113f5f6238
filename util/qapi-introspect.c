/*
 * query-qmp-schema (include/util/qapi-schema.h): the generated schema
 * tables described as QEMU's SchemaInfo list.
 *
 * Every command and event, and every type they reach through members,
 * variants and lists, is one SchemaInfo: "builtin" (with its JSON type),
 * "enum", "object" (a union: its base members, "tag" and "variants"),
 * "array", "command" (arg-type, ret-type), "event".  As in QEMU the
 * schema's own type names are masked as numbers, given in the order the
 * types are met, and an array of T is named "[T]"; a command without
 * arguments or return value refers to an empty object type.
 */
#include "util/qapi-schema.h"

typedef struct Introspect {
    GHashTable *names;          /* const QapiType * -> masked name */
    GHashTable *arrays;         /* element type name -> "[name]" */
    GQueue pending;             /* const QapiType *, to be described */
    unsigned int next_name;     /* the next masked name */
    JsonArray *out;
} Introspect;

/* QEMU's "q_empty": the arguments or value of what has none. */
static const QapiMember introspect_no_members[] = { { NULL } };
static const QapiType introspect_empty = {
    .name = "q_empty",
    .kind = QAPI_KIND_STRUCT,
    .members = introspect_no_members,
};

static JsonObject *introspect_entry(Introspect *in, const char *name,
                                    const char *meta_type)
{
    JsonObject *o = json_object_new();

    json_object_set_string_member(o, "name", name);
    json_object_set_string_member(o, "meta-type", meta_type);
    json_array_add_object_element(in->out, o);
    return o;
}

/* The JSON type of a builtin, NULL for the schema's own types. */
static const char *introspect_json_type(const QapiType *type)
{
    static const char *const json_types[] = {
        [QAPI_KIND_STR] = "string",
        [QAPI_KIND_INT] = "int",
        [QAPI_KIND_SIZE] = "int",
        [QAPI_KIND_BOOL] = "boolean",
        [QAPI_KIND_NUMBER] = "number",
        [QAPI_KIND_ANY] = "value",
        [QAPI_KIND_ENUM] = NULL,
        [QAPI_KIND_STRUCT] = NULL,
        [QAPI_KIND_UNION] = NULL,
    };

    return json_types[type->kind];
}

/* @type's name in the answer; described once, when first met. */
static const char *introspect_name(Introspect *in, const QapiType *type)
{
    char *name = g_hash_table_lookup(in->names, type);
    const char *json_type = introspect_json_type(type);

    if (name) {
        return name;
    }
    name = json_type ? g_strdup(type->name)
                     : g_strdup_printf("%u", in->next_name++);
    g_hash_table_insert(in->names, (gpointer)type, name);
    if (json_type) {
        json_object_set_string_member(
            introspect_entry(in, name, "builtin"), "json-type", json_type);
    } else {
        g_queue_push_tail(&in->pending, (gpointer)type);
    }
    return name;
}

/* The name of @type, or of an array of it with @list. */
static const char *introspect_ref(Introspect *in, const QapiType *type,
                                  bool list)
{
    const char *element = introspect_name(in, type);
    char *name;

    if (!list) {
        return element;
    }
    name = g_hash_table_lookup(in->arrays, element);
    if (!name) {
        name = g_strdup_printf("[%s]", element);
        g_hash_table_insert(in->arrays, (gpointer)element, name);
        json_object_set_string_member(introspect_entry(in, name, "array"),
                                      "element-type", element);
    }
    return name;
}

static JsonArray *introspect_members(Introspect *in,
                                     const QapiMember *members)
{
    JsonArray *a = json_array_new();

    for (const QapiMember *m = members; m && m->name; m++) {
        JsonObject *o = json_object_new();

        json_object_set_string_member(o, "name", m->name);
        json_object_set_string_member(o, "type",
                                      introspect_ref(in, m->type, m->list));
        if (m->optional) {
            json_object_set_null_member(o, "default");
        }
        json_array_add_object_element(a, o);
    }
    return a;
}

static void introspect_describe(Introspect *in, const QapiType *type)
{
    const char *name = introspect_name(in, type);
    JsonObject *o;

    if (type->kind == QAPI_KIND_ENUM) {
        JsonArray *members = json_array_new();
        JsonArray *values = json_array_new();

        for (const char *const *v = type->values; *v; v++) {
            JsonObject *m = json_object_new();

            json_object_set_string_member(m, "name", *v);
            json_array_add_object_element(members, m);
            json_array_add_string_element(values, *v);
        }
        o = introspect_entry(in, name, "enum");
        json_object_set_array_member(o, "members", members);
        json_object_set_array_member(o, "values", values);
        return;
    }
    o = introspect_entry(in, name, "object");
    json_object_set_array_member(o, "members",
                                 introspect_members(in, type->members));
    if (type->kind == QAPI_KIND_UNION) {
        JsonArray *variants = json_array_new();

        for (const QapiVariant *v = type->variants; v->value; v++) {
            JsonObject *vo = json_object_new();

            json_object_set_string_member(vo, "case", v->value);
            json_object_set_string_member(vo, "type",
                                          introspect_name(in, v->type));
            json_array_add_object_element(variants, vo);
        }
        json_object_set_string_member(o, "tag", type->discriminator);
        json_object_set_array_member(o, "variants", variants);
    }
}

JsonNode *qapi_introspect(bool (*has_command)(const char *name))
{
    Introspect in = {
        .names = g_hash_table_new_full(NULL, NULL, NULL, g_free),
        .arrays = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
                                        g_free),
        .out = json_array_new(),
    };
    const QapiType *type;

    for (const QapiCommand *c = qapi_commands; c->name; c++) {
        JsonObject *o;

        if (!has_command(c->name)) {
            continue;
        }
        o = introspect_entry(&in, c->name, "command");

        json_object_set_string_member(o, "arg-type",
                                      introspect_name(&in, c->args));
        json_object_set_string_member(
            o, "ret-type", introspect_ref(&in, c->ret ? c->ret
                                                      : &introspect_empty,
                                          c->ret_list));
    }
    for (const QapiEvent *e = qapi_events; e->name; e++) {
        json_object_set_string_member(introspect_entry(&in, e->name,
                                                       "event"),
                                      "arg-type",
                                      introspect_name(&in, e->data));
    }
    while ((type = g_queue_pop_head(&in.pending))) {
        introspect_describe(&in, type);
    }
    g_hash_table_destroy(in.arrays);
    g_hash_table_destroy(in.names);
    return json_node_init_array(json_node_alloc(), in.out);
}
