/*
 * Object commands of the storage daemon (object.h).
 */
#include "object.h"

#include "qmp-dispatch.h"
#include "block/block.h"
#include "util/iothread.h"
#include "util/user-object.h"

int object_add_cmdline(const char *arg, Error **errp)
{
    return user_object_add_cmdline(arg, errp) ? 0 : -EINVAL;
}

static void qmp_object_add(JsonObject *args, JsonNode **ret, Error **errp)
{
    user_object_add(args, errp);
}

/*
 * An iothread that nodes were moved into (x-blockdev-set-iothread) holds
 * no reference for them: deleting it would stop the thread their
 * requests run in.  Refused as an object in use, in QEMU's words.
 */
static bool object_iothread_has_nodes(const char *id, Error **errp)
{
    IOThread *t = iothread_find(id, NULL);

    if (!t) {
        return false;
    }
    for (BlockDriverState *bs = bdrv_next_node(NULL); bs;
         bs = bdrv_next_node(bs)) {
        if (bdrv_get_aio_context(bs) == iothread_get_aio_context(t)) {
            error_setg(errp, "object '%s' is in use, can not be deleted",
                       id);
            return true;
        }
    }
    return false;
}

static void qmp_object_del(JsonObject *args, JsonNode **ret, Error **errp)
{
    const char *id = json_object_get_string_member(args, "id");

    if (!object_iothread_has_nodes(id, errp)) {
        user_object_del(id, errp);
    }
}

static void qmp_qom_set(JsonObject *args, JsonNode **ret, Error **errp)
{
    user_object_set_property(json_object_get_string_member(args, "path"),
                             json_object_get_string_member(args, "property"),
                             json_object_get_member(args, "value"), errp);
}

static void qmp_qom_get(JsonObject *args, JsonNode **ret, Error **errp)
{
    *ret = user_object_get_property(
               json_object_get_string_member(args, "path"),
               json_object_get_string_member(args, "property"), errp);
}

static void qmp_qom_list(JsonObject *args, JsonNode **ret, Error **errp)
{
    *ret = user_object_list_properties(
               json_object_get_string_member(args, "path"), errp);
}

static void qmp_qom_list_types(JsonObject *args, JsonNode **ret,
                               Error **errp)
{
    *ret = user_object_list_types(
               qmp_arg_str(args, "implements"),
               json_object_get_boolean_member_with_default(args, "abstract",
                                                           false));
}

static void qmp_qom_list_properties(JsonObject *args, JsonNode **ret,
                                    Error **errp)
{
    *ret = user_object_type_properties(
               json_object_get_string_member(args, "typename"), errp);
}

static void qmp_query_iothreads(JsonObject *args, JsonNode **ret,
                                Error **errp)
{
    *ret = iothread_query_all();
}

void object_register_commands(void)
{
    qmp_register_command("query-iothreads", qmp_query_iothreads);
    qmp_register_command("object-add", qmp_object_add);
    qmp_register_command("object-del", qmp_object_del);
    qmp_register_command("qom-set", qmp_qom_set);
    qmp_register_command("qom-get", qmp_qom_get);
    qmp_register_command("qom-list", qmp_qom_list);
    qmp_register_command("qom-list-types", qmp_qom_list_types);
    qmp_register_command("qom-list-properties", qmp_qom_list_properties);
}
