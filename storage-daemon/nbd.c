/*
 * NBD server commands of the storage daemon (nbd.h).
 */
#include "nbd.h"

#include "block/export.h"
#include "block/nbd-export.h"
#include "qblock/block-export.h"
#include "qapi-qmp.h"
#include "qmp-dispatch.h"
#include "util/qapi-schema.h"

/* A SocketAddress object (flat: type and its members) checked already. */
static SocketAddress *nbd_socket_address(JsonObject *addr)
{
    const char *type = json_object_get_string_member(addr, "type");

    if (!strcmp(type, "unix")) {
        return socket_address_new_unix(
                   json_object_get_string_member(addr, "path"));
    }
    if (!strcmp(type, "fd")) {
        return socket_address_new_fd(json_object_get_string_member(addr,
                                                                   "str"));
    }
    return socket_address_new_inet(json_object_get_string_member(addr, "host"),
                                   json_object_get_string_member(addr, "port"));
}

/* Starts the server from NbdServerOptions or nbd-server-start's args. */
static int nbd_start(JsonObject *opts, JsonObject *addr, Error **errp)
{
    g_autoptr(SocketAddress) saddr = NULL;

    saddr = nbd_socket_address(addr);
    return nbd_export_server_start(
               saddr, json_object_get_int_member_with_default(
                          opts, "max-connections",
                          NBD_DEFAULT_MAX_CONNECTIONS),
               qmp_arg_str(opts, "tls-creds"),
               qmp_arg_str(opts, "tls-authz"),
               errp);
}

int nbd_server_start_cmdline(const char *arg, Error **errp)
{
    g_autoptr(QDict) qdict = keyval_parse(arg, NULL, errp);
    g_autoptr(JsonNode) node = NULL;
    JsonObject *opts;

    if (!qdict) {
        return -EINVAL;
    }
    node = qapi_input_from_keyval(&qapi_type_NbdServerOptions, qdict, errp);
    if (!node) {
        return -EINVAL;
    }
    opts = json_node_get_object(node);
    return nbd_start(opts, json_object_get_object_member(opts, "addr"), errp);
}

static void qmp_nbd_server_start(JsonObject *args, JsonNode **ret,
                                 Error **errp)
{
    /* SocketAddressLegacy: the members are under "data" */
    JsonObject *legacy = json_object_get_object_member(args, "addr");
    JsonObject *data = json_object_get_object_member(legacy, "data");
    g_autoptr(JsonObject) addr = json_object_new();
    g_autoptr(GList) members = json_object_get_members(data);

    json_object_set_string_member(addr, "type",
                                  json_object_get_string_member(legacy,
                                                                "type"));
    for (GList *l = members; l; l = l->next) {
        json_object_set_member(addr, l->data,
                               json_object_dup_member(data, l->data));
    }
    nbd_start(args, addr, errp);
}

static void qmp_nbd_server_add(JsonObject *args, JsonNode **ret,
                               Error **errp)
{
    const char *device = json_object_get_string_member(args, "device");
    const char *name = json_object_get_string_member_with_default(
                           args, "name", device);
    g_autoptr(JsonObject) opts = json_object_new();

    if (!nbd_export_server_running()) {
        error_setg(errp, "NBD server not running");
        return;
    }
    /* the older form of block-export-add: the export id is its name */
    json_object_set_string_member(opts, "type", "nbd");
    json_object_set_string_member(opts, "id", name);
    json_object_set_string_member(opts, "node-name", device);
    json_object_set_string_member(opts, "name", name);
    json_object_set_boolean_member(opts, "writable",
        json_object_get_boolean_member_with_default(args, "writable", false));
    if (json_object_has_member(args, "description")) {
        json_object_set_string_member(opts, "description",
            json_object_get_string_member(args, "description"));
    }
    if (json_object_has_member(args, "bitmap")) {
        JsonArray *bitmaps = json_array_new();

        json_array_add_string_element(bitmaps,
            json_object_get_string_member(args, "bitmap"));
        json_object_set_array_member(opts, "bitmaps", bitmaps);
    }
    blk_exp_add(opts, errp);
}

static void qmp_nbd_server_remove(JsonObject *args, JsonNode **ret,
                                  Error **errp)
{
    const char *name = json_object_get_string_member(args, "name");
    const char *mode = json_object_get_string_member_with_default(
                           args, "mode", "safe");
    BlockExport *exp = blk_exp_find(name);

    if (exp && strcmp(blk_exp_get_type(exp), "nbd")) {
        error_setg(errp, "Export '%s' is not an NBD export", name);
        return;
    }
    blk_exp_del(name, !strcmp(mode, "hard"), errp);
}

static void qmp_nbd_server_stop(JsonObject *args, JsonNode **ret,
                                Error **errp)
{
    nbd_export_server_stop(errp);
}

void nbd_register_commands(void)
{
    qmp_register_command("nbd-server-start", qmp_nbd_server_start);
    qmp_register_command("nbd-server-add", qmp_nbd_server_add);
    qmp_register_command("nbd-server-remove", qmp_nbd_server_remove);
    qmp_register_command("nbd-server-stop", qmp_nbd_server_stop);
}
