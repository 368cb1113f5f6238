/*
 * The registry of user-creatable objects (see include/util/user-object.h
 * for the invariants cited below).
 */
#include "util/user-object.h"
#include "util/cutils.h"

#include "qapi-qmp.h"
#include "util/qapi-schema.h"
#include "util/qdict.h"

struct UserObject {
    char *id;
    const UserObjectType *type;
    void *state;
    int refcnt;                 /* invariant 2 */
};

/* const UserObjectType *, in registration order */
static GPtrArray *user_object_types;
/* const char *: the names user_object_withhold_type() took out */
static GPtrArray *user_object_withheld;
/* UserObject *, in creation order */
static GPtrArray *user_objects;

/*
 * QEMU's other object types: naming them says "qblock lacks this" rather
 * than "no such thing" to someone who copied a QEMU command line.
 */
static const char *const user_object_qemu_types[] = {
    "authz-pam", NULL,
};

/* The struct of ObjectOptions' variant @name: the type's properties. */
static const QapiType *user_object_schema(const char *name)
{
    for (const QapiVariant *v = qapi_type_ObjectOptions.variants; v->value;
         v++) {
        if (!strcmp(v->value, name)) {
            return v->type;
        }
    }
    return NULL;
}

/* The member @name of a type's schema @props, or NULL. */
static const QapiMember *user_object_member(const QapiType *props,
                                            const char *name)
{
    for (const QapiMember *m = props->members; m && m->name; m++) {
        if (!strcmp(m->name, name)) {
            return m;
        }
    }
    return NULL;
}

void user_object_register_type(const UserObjectType *type)
{
    const QapiType *props = user_object_schema(type->name);

    /* a type the schema does not declare could never be created */
    assert(props);
    assert(type->create && type->destroy);
    if (type->qom_list_order) {
        size_t listed = g_strv_length((char **)type->qom_list_order);
        size_t declared = 0;

        /* the order names every member of the schema, once */
        for (const QapiMember *m = props->members; m && m->name; m++) {
            declared++;
            assert(g_strv_contains(type->qom_list_order, m->name));
        }
        assert(listed == declared);
    }
    if (!user_object_types) {
        user_object_types = g_ptr_array_new();
    }
    g_ptr_array_add(user_object_types, (gpointer)type);
}

static const UserObjectType *user_object_find_type(const char *name);

void user_object_withhold_type(const char *name)
{
    const UserObjectType *type = user_object_find_type(name);

    assert(type);
    g_ptr_array_remove(user_object_types, (gpointer)type);
    if (!user_object_withheld) {
        user_object_withheld = g_ptr_array_new();
    }
    g_ptr_array_add(user_object_withheld, (gpointer)type->name);
}

/*
 * The error for a type that is not registered: what QEMU says, or for
 * one of QEMU's that qblock lacks, that it does (with a pointer to
 * --object help where it came from the command line: @cmdline).
 */
static void user_object_missing_type(const char *name, bool cmdline,
                                     Error **errp)
{
    if (user_object_withheld &&
        g_ptr_array_find_with_equal_func(user_object_withheld, name,
                                         g_str_equal, NULL)) {
        /* the schema has it, this program has not (QEMU: no class) */
        error_setg(errp, "invalid object type: %s", name);
    } else if (g_strv_contains(user_object_qemu_types, name)) {
        error_setg(errp, "Object type '%s' is not supported by qblock%s",
                   name, cmdline ? " (--object help lists the types it has)"
                   : "");
    } else {
        error_setg(errp, "Parameter 'qom-type' does not accept value '%s'",
                   name);
    }
}

static const UserObjectType *user_object_find_type(const char *name)
{
    for (guint i = 0; user_object_types && i < user_object_types->len; i++) {
        const UserObjectType *type = g_ptr_array_index(user_object_types, i);

        if (!strcmp(type->name, name)) {
            return type;
        }
    }
    return NULL;
}

static gint user_object_compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void user_object_print_types(void)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new();

    for (guint i = 0; user_object_types && i < user_object_types->len; i++) {
        const UserObjectType *type = g_ptr_array_index(user_object_types, i);

        g_ptr_array_add(names, (gpointer)type->name);
    }
    g_ptr_array_sort(names, user_object_compare_names);
    printf("List of user creatable objects:\n");
    for (guint i = 0; i < names->len; i++) {
        printf("  %s\n", (const char *)g_ptr_array_index(names, i));
    }
}

/* How QEMU's help names a property's type. */
static const char *user_object_kind_name(const QapiType *type)
{
    switch (type->kind) {
    case QAPI_KIND_STR:
        return "string";
    case QAPI_KIND_BOOL:
        return "bool";
    case QAPI_KIND_INT:
        /* QEMU's help shows an int32 property's C type (serial) */
        return !strcmp(type->name, "int32") ? "int32_t" : "int";
    case QAPI_KIND_SIZE:
        return "size";
    case QAPI_KIND_NUMBER:
        return "number";
    default:
        return type->name;
    }
}

static void user_object_print_properties(const char *type_name)
{
    const QapiType *schema = user_object_schema(type_name);
    g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func(g_free);

    for (const QapiMember *m = schema->members; m && m->name; m++) {
        /* QEMU lists only what can be set */
        if (!m->read_only) {
            g_ptr_array_add(lines, g_strdup_printf(
                "%s=<%s>", m->name, user_object_kind_name(m->type)));
        }
    }
    if (!lines->len) {
        printf("There are no options for %s.\n", type_name);
        return;
    }
    g_ptr_array_sort(lines, user_object_compare_names);
    printf("%s options:\n", type_name);
    for (guint i = 0; i < lines->len; i++) {
        printf("  %s\n", (const char *)g_ptr_array_index(lines, i));
    }
}

/*
 * Whether one of @optarg's elements is "help" or "?" (the keyval parser
 * would want a value for it); if so, *@type_name is the type the option
 * names, as the keyval parser would read it (a first element without
 * '=', or "qom-type=TYPE"), or NULL.  ",," is a comma inside a value.
 */
static bool user_object_wants_help(const char *optarg, char **type_name)
{
    g_autofree char *name = NULL;
    bool help = false;

    for (const char *p = optarg; *p;) {
        const char *start = p;
        size_t len;

        while (*p && !(*p == ',' && p[1] != ',')) {
            p += (*p == ',') ? 2 : 1;
        }
        len = p - start;
        if ((len == 4 && !strncmp(start, "help", 4)) ||
            (len == 1 && *start == '?')) {
            help = true;
        } else if (start == optarg && !memchr(start, '=', len)) {
            name = g_strndup(start, len);
        } else if (len > 9 && !strncmp(start, "qom-type=", 9)) {
            g_free(name);
            name = g_strndup(start + 9, len - 9);
        }
        if (*p) {
            p++;
        }
    }
    *type_name = help ? g_steal_pointer(&name) : NULL;
    return help;
}

static UserObject *user_object_lookup(const char *id)
{
    for (guint i = 0; user_objects && i < user_objects->len; i++) {
        UserObject *obj = g_ptr_array_index(user_objects, i);

        if (!strcmp(obj->id, id)) {
            return obj;
        }
    }
    return NULL;
}

/* The type of a command line's qom-type, or an error that says why not. */
static const UserObjectType *user_object_cmdline_type(const QDict *opts,
                                                      Error **errp)
{
    const char *name = qdict_get_try_str(opts, "qom-type");
    const UserObjectType *type;

    if (!name) {
        error_setg(errp, "Parameter 'qom-type' is missing");
        return NULL;
    }
    type = user_object_find_type(name);
    if (!type) {
        user_object_missing_type(name, true, errp);
    }
    return type;
}

bool user_object_add_cmdline(const char *optarg, Error **errp)
{
    g_autofree char *help_type = NULL;
    g_autoptr(QDict) opts = NULL;
    g_autoptr(JsonNode) args = NULL;
    const UserObjectType *type;

    if (!strcmp(optarg, "help") || !strcmp(optarg, "?")) {
        user_object_print_types();
        exit(0);
    }
    if (user_object_wants_help(optarg, &help_type)) {
        /* as QEMU: a type it lacks, or none, gets the list of types */
        if (help_type && user_object_find_type(help_type)) {
            user_object_print_properties(help_type);
        } else {
            user_object_print_types();
        }
        exit(0);
    }
    /* QEMU's JSON form: '{"qom-type": ..., "id": ..., ...}' */
    if (optarg[0] == '{') {
        args = json_parse_text(optarg, strlen(optarg), errp);
        return args &&
               qapi_check_input(&qapi_type_ObjectOptions, args,
                                QAPI_INPUT_JSON, errp) &&
               user_object_add(json_node_get_object(args), errp);
    }
    opts = keyval_parse(optarg, "qom-type", errp);
    if (!opts) {
        return false;
    }
    type = user_object_cmdline_type(opts, errp);
    if (!type) {
        return false;
    }
    args = qapi_input_from_keyval(&qapi_type_ObjectOptions, opts, errp);
    return args && user_object_add(json_node_get_object(args), errp);
}

/*
 * Whether @name is a property of @type that qom-get reads but nothing
 * sets: one of its read_only ones, or a read-only member of its schema.
 */
static bool user_object_is_read_only(const UserObjectType *type,
                                     const char *name)
{
    const QapiMember *m = user_object_member(user_object_schema(type->name),
                                             name);

    for (const UserObjectReadOnly *p = type->read_only; p && p->name; p++) {
        if (!strcmp(p->name, name)) {
            return true;
        }
    }
    return m && m->read_only;
}

bool user_object_add(JsonObject *args, Error **errp)
{
    const char *name = json_object_get_string_member(args, "qom-type");
    const char *id = json_object_get_string_member(args, "id");
    const UserObjectType *type = user_object_find_type(name);
    g_autoptr(JsonObject) props = json_object_new();
    g_autoptr(GList) members = json_object_get_members(args);
    UserObject *obj;
    void *state;

    if (!type) {
        user_object_missing_type(name, false, errp);
        return false;
    }
    if (!id_wellformed(id)) {
        error_setg(errp, "Parameter 'id' expects an identifier");
        error_append_hint(errp, "Identifiers consist of letters, digits, "
                          "'-', '.', '_', starting with a letter.\n");
        return false;
    }
    for (GList *l = members; l; l = l->next) {
        if (!strcmp(l->data, "qom-type") || !strcmp(l->data, "id")) {
            continue;
        }
        /* QEMU sets each property before it looks at the id's use */
        if (user_object_is_read_only(type, l->data)) {
            error_setg(errp, "Property '%s.%s' is not writable", type->name,
                       (const char *)l->data);
            return false;
        }
        json_object_set_member(props, l->data, json_node_copy(
            json_object_get_member(args, l->data)));
    }
    if (user_object_lookup(id)) {
        error_setg(errp, "An object with id '%s' already exists", id);
        return false;
    }
    state = type->create(id, props, errp);
    if (!state) {
        return false;
    }
    obj = g_new0(UserObject, 1);
    obj->id = g_strdup(id);
    obj->type = type;
    obj->state = state;
    obj->refcnt = 1;
    if (!user_objects) {
        user_objects = g_ptr_array_new();
    }
    g_ptr_array_add(user_objects, obj);
    return true;
}

bool user_object_del(const char *id, Error **errp)
{
    UserObject *obj = user_object_lookup(id);

    if (!obj) {
        error_setg(errp, "object '%s' not found", id);
        return false;
    }
    if (obj->refcnt > 1) {
        error_setg(errp, "object '%s' is in use, can not be deleted", id);
        return false;
    }
    if (obj->type->can_delete && !obj->type->can_delete(obj->state, errp)) {
        return false;
    }
    g_ptr_array_remove(user_objects, obj);
    user_object_unref(obj);
    return true;
}

void user_object_del_all(void)
{
    while (user_objects && user_objects->len) {
        UserObject *obj = g_ptr_array_steal_index(user_objects,
                                                  user_objects->len - 1);

        user_object_unref(obj);
    }
}

/* The object at @path ("/objects/ID" or "ID"), or NULL with QEMU's error. */
static UserObject *user_object_at(const char *path, Error **errp)
{
    const char *id = g_str_has_prefix(path, "/objects/")
                     ? path + strlen("/objects/") : path;
    UserObject *obj = user_object_lookup(id);

    if (!obj) {
        error_set(errp, ERROR_CLASS_DEVICE_NOT_FOUND,
                  "Device '%s' not found", path);
    }
    return obj;
}

bool user_object_set_property(const char *path, const char *name,
                              JsonNode *value, Error **errp)
{
    UserObject *obj = user_object_at(path, errp);

    if (!obj) {
        return false;
    }
    if (user_object_is_read_only(obj->type, name)) {
        error_setg(errp, "Property '%s.%s' is not writable", obj->type->name,
                   name);
        return false;
    }
    if (!obj->type->set_property) {
        error_setg(errp, "Property '%s.%s' not found", obj->type->name,
                   name);
        return false;
    }
    return obj->type->set_property(obj->state, name, value, errp);
}

JsonNode *user_object_get_property(const char *path, const char *name,
                                   Error **errp)
{
    UserObject *obj = user_object_at(path, errp);
    JsonNode *value = NULL;

    if (!obj) {
        return NULL;
    }
    if (!strcmp(name, "type")) {
        return json_node_init_string(json_node_alloc(), obj->type->name);
    }
    if (obj->type->write_only &&
        g_strv_contains(obj->type->write_only, name)) {
        error_setg(errp, "Property '%s.%s' is not readable", obj->type->name,
                   name);
        return NULL;
    }
    if (obj->type->get_property) {
        value = obj->type->get_property(obj->state, name);
    }
    if (!value) {
        error_setg(errp, "Property '%s.%s' not found", obj->type->name,
                   name);
    }
    return value;
}

static gint user_object_compare_ids(gconstpointer a, gconstpointer b)
{
    const UserObject *x = *(UserObject *const *)a;
    const UserObject *y = *(UserObject *const *)b;

    return strcmp(x->id, y->id);
}

static void user_object_list_add(JsonArray *list, const char *name,
                                 const char *type)
{
    JsonObject *entry = json_object_new();

    json_object_set_string_member(entry, "name", name);
    json_object_set_string_member(entry, "type", type);
    json_array_add_object_element(list, entry);
}

/* A property's type as QEMU's qom-list names it. */
static const char *user_object_qom_type(const QapiType *type)
{
    switch (type->kind) {
    case QAPI_KIND_STR:
        return "string";
    case QAPI_KIND_INT:
        /* QEMU names an int32 property by its C type here too */
        return !strcmp(type->name, "int32") ? "int32_t" : "int";
    case QAPI_KIND_SIZE:
        return "int";
    case QAPI_KIND_BOOL:
        return "bool";
    default:
        return type->name;
    }
}

/*
 * The properties of @type_name, as qom-list names them: the read-only
 * ones, then those its schema declares, in the type's qom_list_order if
 * it has one.
 */
static void user_object_list_schema(JsonArray *list, const char *type_name)
{
    const QapiType *props = user_object_schema(type_name);
    const UserObjectType *type = user_object_find_type(type_name);

    for (const UserObjectReadOnly *p = type->read_only; p && p->name; p++) {
        user_object_list_add(list, p->name, p->qom_type);
    }
    if (type->qom_list_order) {
        for (const char *const *n = type->qom_list_order; *n; n++) {
            const QapiMember *m = user_object_member(props, *n);

            assert(m);
            user_object_list_add(list, m->name,
                                 user_object_qom_type(m->type));
        }
        return;
    }
    for (const QapiMember *m = props->members; m && m->name; m++) {
        user_object_list_add(list, m->name, user_object_qom_type(m->type));
    }
}

JsonNode *user_object_list_properties(const char *path, Error **errp)
{
    g_autoptr(JsonArray) list = json_array_new();

    user_object_list_add(list, "type", "string");
    if (!strcmp(path, "/objects") || !strcmp(path, "/objects/")) {
        g_autoptr(GPtrArray) sorted = g_ptr_array_new();

        for (guint i = 0; user_objects && i < user_objects->len; i++) {
            g_ptr_array_add(sorted, g_ptr_array_index(user_objects, i));
        }
        /* QEMU lists the children by name */
        g_ptr_array_sort(sorted, user_object_compare_ids);
        for (guint i = 0; i < sorted->len; i++) {
            UserObject *obj = g_ptr_array_index(sorted, i);
            g_autofree char *type = g_strdup_printf("child<%s>",
                                                    obj->type->name);

            user_object_list_add(list, obj->id, type);
        }
    } else {
        UserObject *obj = user_object_at(path, errp);

        if (!obj) {
            return NULL;
        }
        user_object_list_schema(list, obj->type->name);
    }
    return json_node_init_array(json_node_alloc(), list);
}

/*
 * QEMU's parent of each type (its type hierarchy, which qom-list-types
 * shows); the parents are abstract and derive from "object".
 */
static const char *const user_object_parents[][2] = {
    { "authz-list", "authz" },
    { "authz-list-file", "authz" },
    { "authz-simple", "authz" },
    { "iothread", "event-loop-base" },
    { "main-loop", "event-loop-base" },
    { "pr-manager-helper", "pr-manager" },
    { "secret", "secret_common" },
    { "secret_keyring", "secret_common" },
    { "throttle-group", "object" },
    { "tls-cipher-suites", "tls-creds" },
    { "tls-creds-anon", "tls-creds" },
    { "tls-creds-psk", "tls-creds" },
    { "tls-creds-x509", "tls-creds" },
};

static const char *user_object_parent(const char *type_name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(user_object_parents); i++) {
        if (!strcmp(user_object_parents[i][0], type_name)) {
            return user_object_parents[i][1];
        }
    }
    return "object";
}

static void user_object_list_type(JsonArray *list, const char *name,
                                  const char *parent, bool abstract)
{
    JsonObject *entry = json_object_new();

    json_object_set_string_member(entry, "name", name);
    if (abstract) {
        json_object_set_boolean_member(entry, "abstract", true);
    }
    json_object_set_string_member(entry, "parent", parent);
    json_array_add_object_element(list, entry);
}

/*
 * Whether @type_name is or derives from @implements; every type here
 * is user-creatable (QEMU's interface of --object's types).
 */
static bool user_object_implements(const char *type_name,
                                   const char *implements)
{
    return !implements || !strcmp(implements, type_name) ||
           !strcmp(implements, user_object_parent(type_name)) ||
           !strcmp(implements, "object") ||
           !strcmp(implements, "user-creatable");
}

JsonNode *user_object_list_types(const char *implements, bool abstract)
{
    g_autoptr(JsonArray) list = json_array_new();
    g_autoptr(GHashTable) parents = g_hash_table_new(g_str_hash,
                                                     g_str_equal);

    for (guint i = 0; user_object_types && i < user_object_types->len; i++) {
        const UserObjectType *type = g_ptr_array_index(user_object_types, i);
        const char *parent = user_object_parent(type->name);

        if (!user_object_implements(type->name, implements)) {
            continue;
        }
        user_object_list_type(list, type->name, parent, false);
        if (abstract && strcmp(parent, "object") &&
            (!implements || strcmp(implements, type->name)) &&
            g_hash_table_add(parents, (gpointer)parent)) {
            user_object_list_type(list, parent, "object", true);
        }
    }
    return json_node_init_array(json_node_alloc(), list);
}

JsonNode *user_object_type_properties(const char *type_name, Error **errp)
{
    g_autoptr(JsonArray) list = json_array_new();

    if (!user_object_find_type(type_name)) {
        error_set(errp, ERROR_CLASS_DEVICE_NOT_FOUND,
                  "Class '%s' not found", type_name);
        return NULL;
    }
    user_object_list_add(list, "type", "string");
    user_object_list_schema(list, type_name);
    return json_node_init_array(json_node_alloc(), list);
}

bool user_object_check_property(const char *type_name, const char *name,
                                JsonNode *value, Error **errp)
{
    const QapiType *props = user_object_schema(type_name);
    const QapiMember *found = user_object_member(props, name);
    QapiMember member[2] = { { 0 } };
    QapiType one = { .name = props->name, .kind = QAPI_KIND_STRUCT,
                     .members = member };
    g_autoptr(JsonObject) wrap = json_object_new();
    g_autoptr(JsonNode) node = NULL;

    if (!found) {
        error_setg(errp, "Property '%s.%s' not found", type_name, name);
        return false;
    }
    /* a struct of that member alone: object-add's walk and messages */
    member[0] = *found;
    member[0].optional = false;
    json_object_set_member(wrap, name, json_node_copy(value));
    node = json_node_init_object(json_node_alloc(), wrap);
    return qapi_check_input(&one, node, QAPI_INPUT_JSON, errp);
}

UserObject *user_object_find(const char *id, const char *type_name)
{
    UserObject *obj = user_object_lookup(id);

    return obj && !strcmp(obj->type->name, type_name) ? obj : NULL;
}

void *user_object_find_state(const char *id, const char *type_name)
{
    UserObject *obj = user_object_find(id, type_name);

    return obj ? obj->state : NULL;
}

void user_object_ref(UserObject *obj)
{
    obj->refcnt++;
}

void user_object_unref(UserObject *obj)
{
    assert(obj->refcnt > 0);
    if (--obj->refcnt) {
        return;
    }
    obj->type->destroy(obj->state);     /* invariant 3 */
    g_free(obj->id);
    g_free(obj);
}

const char *user_object_get_id(const UserObject *obj)
{
    return obj->id;
}

void *user_object_get_state(const UserObject *obj)
{
    return obj->state;
}
