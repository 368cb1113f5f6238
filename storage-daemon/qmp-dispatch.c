/*
 * QMP request execution (see qmp-dispatch.h).  The checks of the request
 * envelope and their messages are QEMU's, in the order QEMU makes them.
 */
#include "qmp-dispatch.h"

#include "util/iothread.h"

/* An implementation: exactly one of @fn and @data_fn is set. */
typedef struct QmpCommand {
    QmpCommandFunc *fn;
    QmpCommandDataFunc *data_fn;
    const void *opaque;         /* what @data_fn gets */
} QmpCommand;

/* command name -> QmpCommand (owned), for the commands implemented */
static GHashTable *qmp_commands;

/* Both kinds of registration: one registry, so one set of checks. */
static void qmp_add_command(const char *name, const QmpCommand *cmd)
{
    /* an implementation without a declaration would escape all checks */
    assert(qapi_find_command(name));
    if (!qmp_commands) {
        qmp_commands = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
                                             g_free);
    }
    assert(!g_hash_table_contains(qmp_commands, name));
    g_hash_table_insert(qmp_commands, (gpointer)name,
                        g_memdup2(cmd, sizeof(*cmd)));
}

void qmp_register_command(const char *name, QmpCommandFunc *fn)
{
    qmp_add_command(name, &(QmpCommand) { .fn = fn });
}

void qmp_register_command_data(const char *name, QmpCommandDataFunc *fn,
                               const void *opaque)
{
    qmp_add_command(name, &(QmpCommand) { .data_fn = fn, .opaque = opaque });
}

static void qmp_command_run(const QmpCommand *cmd, JsonObject *args,
                            JsonNode **ret, Error **errp)
{
    if (cmd->fn) {
        cmd->fn(args, ret, errp);
    } else {
        cmd->data_fn(args, cmd->opaque, ret, errp);
    }
}

static const char *qmp_error_class_name(ErrorClass cls)
{
    switch (cls) {
    case ERROR_CLASS_GENERIC_ERROR:
        return "GenericError";
    case ERROR_CLASS_COMMAND_NOT_FOUND:
        return "CommandNotFound";
    case ERROR_CLASS_DEVICE_NOT_ACTIVE:
        return "DeviceNotActive";
    case ERROR_CLASS_DEVICE_NOT_FOUND:
        return "DeviceNotFound";
    case ERROR_CLASS_KVM_MISSING_CAP:
        return "KVMMissingCap";
    }
    g_assert_not_reached();
}

static JsonNode *qmp_empty_object(void)
{
    g_autoptr(JsonObject) obj = json_object_new();

    return json_node_init_object(json_node_alloc(), obj);
}

static JsonNode *qmp_response(const char *key, JsonNode *value, JsonNode *id)
{
    g_autoptr(JsonObject) obj = json_object_new();

    json_object_set_member(obj, key, value);
    if (id) {
        json_object_set_member(obj, "id", json_node_copy(id));
    }
    return json_node_init_object(json_node_alloc(), obj);
}

JsonNode *qmp_error_response(Error *err, JsonNode *id)
{
    g_autoptr(JsonObject) desc = json_object_new();

    json_object_set_string_member(desc, "class",
                                  qmp_error_class_name(error_get_class(err)));
    json_object_set_string_member(desc, "desc", error_get_pretty(err));
    error_free(err);
    return qmp_response("error",
                        json_node_init_object(json_node_alloc(), desc), id);
}

/*
 * The envelope: an object with "execute" (a string), optionally
 * "arguments" (an object) and "id" (anything), nothing else; with the oob
 * capability, "exec-oob" may stand for "execute" (then *@oob is set).
 * Returns the command name.
 */
static const char *qmp_check_envelope(JsonNode *request,
                                      QmpDispatchMode mode, bool *oob,
                                      Error **errp)
{
    g_autoptr(GList) members = NULL;
    JsonObject *obj;
    JsonNode *execute;

    if (!JSON_NODE_HOLDS_OBJECT(request)) {
        error_setg(errp, "QMP input must be a JSON object");
        return NULL;
    }
    obj = json_node_get_object(request);
    members = json_object_get_members(obj);
    for (GList *l = members; l; l = l->next) {
        const char *name = l->data;
        JsonNode *value = json_object_get_member(obj, name);

        if (!strcmp(name, "execute") ||
            (!strcmp(name, "exec-oob") &&
             mode == QMP_DISPATCH_COMMANDS_OOB)) {
            if (!JSON_NODE_HOLDS_VALUE(value) ||
                json_node_get_value_type(value) != G_TYPE_STRING) {
                error_setg(errp, "QMP input member '%s' must be a string",
                           name);
                return NULL;
            }
        } else if (!strcmp(name, "arguments")) {
            if (!JSON_NODE_HOLDS_OBJECT(value)) {
                error_setg(errp, "QMP input member 'arguments' must be an "
                           "object");
                return NULL;
            }
        } else if (strcmp(name, "id")) {
            /* exec-oob too, unless the oob capability was enabled */
            error_setg(errp, "QMP input member '%s' is unexpected", name);
            return NULL;
        }
    }
    execute = json_object_get_member(obj, "execute");
    if (json_object_has_member(obj, "exec-oob")) {
        if (execute) {
            error_setg(errp, "QMP input member 'execute' clashes with "
                       "'exec-oob'");
            return NULL;
        }
        *oob = true;
        execute = json_object_get_member(obj, "exec-oob");
    }
    if (!execute) {
        error_setg(errp, "QMP input lacks member 'execute'");
        return NULL;
    }
    return json_node_get_string(execute);
}

static const QmpCommand *qmp_find_command(const char *name,
                                          QmpDispatchMode mode, Error **errp)
{
    const QmpCommand *cmd = qmp_commands ?
                            g_hash_table_lookup(qmp_commands, name) : NULL;

    if (mode == QMP_DISPATCH_NEGOTIATION) {
        if (strcmp(name, "qmp_capabilities")) {
            error_set(errp, ERROR_CLASS_COMMAND_NOT_FOUND,
                      "Expecting capabilities negotiation with "
                      "'qmp_capabilities'");
            return NULL;
        }
    } else if (!strcmp(name, "qmp_capabilities")) {
        error_set(errp, ERROR_CLASS_COMMAND_NOT_FOUND,
                  "Capabilities negotiation is already complete, command "
                  "ignored");
        return NULL;
    }
    if (!cmd) {
        error_set(errp, ERROR_CLASS_COMMAND_NOT_FOUND,
                  "The command %s has not been found", name);
    }
    return cmd;
}

/*
 * The object commands add and remove iothreads themselves (a thread being
 * joined cannot be held), and touch no node.
 */
static bool qmp_command_creates_iothreads(const char *name)
{
    return !strcmp(name, "object-add") || !strcmp(name, "object-del") ||
           !strcmp(name, "query-iothreads");
}

JsonNode *qmp_dispatch(JsonNode *request, Error *parse_err,
                       QmpDispatchMode mode)
{
    Error *err = NULL;
    JsonNode *id = NULL;
    JsonNode *args_node;
    JsonNode *ret = NULL;
    g_autoptr(JsonNode) empty = NULL;
    const char *name;
    const QmpCommand *cmd;
    bool oob = false;

    if (!request) {
        return qmp_error_response(parse_err, NULL);
    }
    name = qmp_check_envelope(request, mode, &oob, &err);
    if (JSON_NODE_HOLDS_OBJECT(request)) {
        id = json_object_get_member(json_node_get_object(request), "id");
    }
    if (!name) {
        return qmp_error_response(err, id);
    }
    if (oob) {
        /* QMP_DISPATCH_COMMANDS_OOB: none runs out of band */
        if (qmp_commands && g_hash_table_lookup(qmp_commands, name)) {
            error_setg(&err, "The command %s does not support OOB", name);
        } else {
            error_set(&err, ERROR_CLASS_COMMAND_NOT_FOUND,
                      "The command %s has not been found", name);
        }
        return qmp_error_response(err, id);
    }
    cmd = qmp_find_command(name, mode, &err);
    if (!cmd) {
        return qmp_error_response(err, id);
    }
    args_node = json_object_get_member(json_node_get_object(request),
                                       "arguments");
    if (!args_node) {
        empty = qmp_empty_object();
        args_node = empty;
    }
    if (!qapi_check_input(qapi_find_command(name)->args, args_node,
                          QAPI_INPUT_JSON, &err)) {
        return qmp_error_response(err, id);
    }
    if (qmp_command_creates_iothreads(name)) {
        qmp_command_run(cmd, json_node_get_object(args_node), &ret, &err);
    } else {
        /*
         * A command may touch nodes and exports of any iothread: they
         * stand still while it runs (invariant 9 of
         * docs/architecture.md's threading rules).
         */
        iothread_acquire_all();
        qmp_command_run(cmd, json_node_get_object(args_node), &ret, &err);
        iothread_release_all();
    }
    if (err) {
        if (ret) {
            json_node_unref(ret);
        }
        return qmp_error_response(err, id);
    }
    if (!ret) {
        ret = qmp_empty_object();
    }
    return qmp_response("return", ret, id);
}

static gint qmp_compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void qmp_query_commands(JsonObject *args, JsonNode **ret,
                               Error **errp)
{
    g_autoptr(JsonArray) list = json_array_new();
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    GHashTableIter it;
    gpointer key;

    g_hash_table_iter_init(&it, qmp_commands);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        g_ptr_array_add(names, key);
    }
    g_ptr_array_sort(names, qmp_compare_names);
    for (guint i = 0; i < names->len; i++) {
        JsonObject *info = json_object_new();

        json_object_set_string_member(info, "name",
                                      g_ptr_array_index(names, i));
        json_array_add_object_element(list, info);
    }
    *ret = json_node_init_array(json_node_alloc(), list);
}

static bool qmp_is_registered(const char *name)
{
    return qmp_commands && g_hash_table_contains(qmp_commands, name);
}

static void qmp_query_qmp_schema(JsonObject *args, JsonNode **ret,
                                 Error **errp)
{
    *ret = qapi_introspect(qmp_is_registered);
}

void qmp_register_dispatch_commands(void)
{
    qmp_register_command("query-commands", qmp_query_commands);
    qmp_register_command("query-qmp-schema", qmp_query_qmp_schema);
}
