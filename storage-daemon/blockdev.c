/*
 * Block nodes of the storage daemon and their QMP commands (blockdev.h).
 *
 * The options of a new node reach the block layer as a flat QDict, which
 * checks every option against its driver's table.  Values that come as
 * JSON (blockdev-add, --blockdev '{...}') are first checked for their
 * JSON types against the same tables, as QEMU's QMP does: "filename": 5
 * is refused instead of opening a file named "5".
 */
#include "blockdev.h"

#include "block/block.h"
#include "block/export.h"
#include "block/qapi.h"
#include "qblock/block-driver.h"
#include "qblock/block-export.h"
#include "qblock/block-node.h"
#include "qapi-opts.h"
#include "qapi-qmp.h"
#include "qmp-dispatch.h"
#include "util/qapi-schema.h"

/* BlockDriverState *, each holding a reference, in opening order */
static GPtrArray *monitor_bdrv_states;

/* The option of @drv (or of every node) named @name, or NULL. */
static const QemuOptDesc *blockdev_find_opt(const BlockDriver *drv,
                                            const char *name)
{
    const QemuOptDesc *desc = qemu_opts_find_desc(&qapi_opts_bdrv_common,
                                                  name);

    if (!desc && drv && bdrv_driver_runtime_opts(drv)) {
        desc = qemu_opts_find_desc(bdrv_driver_runtime_opts(drv), name);
    }
    return desc;
}

/* True if some option of @drv is named "@prefix.<something>". */
static bool blockdev_has_opt_group(const BlockDriver *drv, const char *prefix)
{
    const QemuOptsList *lists[] = {
        &qapi_opts_bdrv_common, drv ? bdrv_driver_runtime_opts(drv) : NULL,
    };
    size_t len = strlen(prefix);

    for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
        for (const QemuOptDesc *d = lists[i] ? lists[i]->desc : NULL;
             d && d->name; d++) {
            if (!strncmp(d->name, prefix, len) && d->name[len] == '.') {
                return true;
            }
        }
    }
    return false;
}

static const char *blockdev_json_type_name(QemuOptType type)
{
    switch (type) {
    case QEMU_OPT_BOOL:
        return "boolean";
    case QEMU_OPT_NUMBER:
    case QEMU_OPT_SIZE:
        return "integer";
    case QEMU_OPT_STRING:
    case QEMU_OPT_ENUM:
        break;
    }
    return "string";
}

static bool blockdev_check_scalar(const QemuOptDesc *desc, JsonNode *value,
                                  const char *path, Error **errp)
{
    GType t = JSON_NODE_HOLDS_VALUE(value) ?
              json_node_get_value_type(value) : G_TYPE_INVALID;
    bool ok;

    switch (desc->type) {
    case QEMU_OPT_BOOL:
        ok = t == G_TYPE_BOOLEAN;
        break;
    case QEMU_OPT_NUMBER:
    case QEMU_OPT_SIZE:
        ok = t == G_TYPE_INT64 && json_node_get_int(value) >= 0;
        break;
    default:
        ok = t == G_TYPE_STRING;
    }
    if (!ok) {
        error_setg(errp, "Invalid parameter type for '%s', expected: %s",
                   path, blockdev_json_type_name(desc->type));
    }
    return ok;
}

static bool blockdev_check_node(JsonObject *obj, const char *prefix,
                                Error **errp);

/*
 * The members of @obj, an option group ("cache", "overlap-check") of a
 * node of driver @drv: each is the option "@name.<member>".
 */
static bool blockdev_check_group(const BlockDriver *drv, JsonObject *obj,
                                 const char *name, const char *prefix,
                                 Error **errp)
{
    g_autoptr(GList) members = json_object_get_members(obj);

    for (GList *l = members; l; l = l->next) {
        g_autofree char *opt = g_strdup_printf("%s.%s", name,
                                               (char *)l->data);
        g_autofree char *path = g_strdup_printf("%s%s", prefix, opt);
        JsonNode *value = json_object_get_member(obj, l->data);
        const QemuOptDesc *desc = blockdev_find_opt(drv, opt);

        if (JSON_NODE_HOLDS_OBJECT(value)) {
            if (!blockdev_check_group(drv, json_node_get_object(value), opt,
                                      prefix, errp)) {
                return false;
            }
        } else if (desc && !blockdev_check_scalar(desc, value, path, errp)) {
            return false;
        }
    }
    return true;
}

/*
 * Checks the JSON types of the options of the node @obj describes (and
 * of its children); names unknown to the tables are left for the block
 * layer, which refuses them by name.  @prefix is the node's path
 * ("", "file.").
 */
static bool blockdev_check_node(JsonObject *obj, const char *prefix,
                                Error **errp)
{
    g_autoptr(GList) members = json_object_get_members(obj);
    JsonNode *driver = json_object_get_member(obj, "driver");
    const BlockDriver *drv = NULL;

    if (!driver) {
        error_setg(errp, "Parameter '%sdriver' is missing", prefix);
        return false;
    }
    if (!JSON_NODE_HOLDS_VALUE(driver) ||
        json_node_get_value_type(driver) != G_TYPE_STRING) {
        error_setg(errp, "Invalid parameter type for '%sdriver', expected: "
                   "string", prefix);
        return false;
    }
    drv = bdrv_find_format(json_node_get_string(driver));
    if (!drv) {
        error_setg(errp, "Parameter '%sdriver' does not accept value '%s'",
                   prefix, json_node_get_string(driver));
        return false;
    }
    for (GList *l = members; l; l = l->next) {
        const char *name = l->data;
        JsonNode *value = json_object_get_member(obj, name);
        g_autofree char *path = g_strdup_printf("%s%s", prefix, name);
        const QemuOptDesc *desc;

        if (JSON_NODE_HOLDS_OBJECT(value)) {
            g_autofree char *child_prefix = g_strdup_printf("%s.", path);

            if (blockdev_has_opt_group(drv, name)) {
                if (!blockdev_check_group(drv, json_node_get_object(value),
                                          name, prefix, errp)) {
                    return false;
                }
            } else if (!blockdev_check_node(json_node_get_object(value),
                                            child_prefix, errp)) {
                return false;
            }
            continue;
        }
        desc = blockdev_find_opt(drv, name);
        if (desc && !blockdev_check_scalar(desc, value, path, errp)) {
            return false;
        }
    }
    return true;
}

/* Opens the node that @options (consumed) describe and keeps it. */
static int blockdev_open(QDict *options, Error **errp)
{
    BlockDriverState *bs;

    if (!qdict_get_try_str(options, "node-name")) {
        error_setg(errp, "'node-name' must be specified for the root node");
        qdict_unref(options);
        return -EINVAL;
    }
    bs = bdrv_open(NULL, NULL, options, BDRV_O_RDWR, errp);
    if (!bs) {
        return -EINVAL;
    }
    if (!monitor_bdrv_states) {
        monitor_bdrv_states = g_ptr_array_new();
    }
    g_ptr_array_add(monitor_bdrv_states, bs);
    return 0;
}

QDict *blockdev_options_to_qdict(JsonNode *node, Error **errp)
{
    if (!qapi_check_input(&qapi_type_BlockdevOptions, node, QAPI_INPUT_JSON,
                          errp) ||
        !blockdev_check_node(json_node_get_object(node), "", errp)) {
        return NULL;
    }
    return qdict_from_json_object(json_node_get_object(node));
}

int blockdev_add_cmdline(const char *arg, Error **errp)
{
    QDict *options;

    if (arg[0] == '{') {
        g_autoptr(JsonNode) node = json_parse_text(arg, strlen(arg), errp);

        options = node ? blockdev_options_to_qdict(node, errp) : NULL;
    } else {
        const char *driver;

        options = keyval_parse(arg, "driver", errp);
        driver = options ? qdict_get_try_str(options, "driver") : NULL;
        if (options && !driver) {
            error_setg(errp, "Parameter 'driver' is missing");
            g_clear_pointer(&options, qdict_unref);
        } else if (options && !bdrv_find_format(driver)) {
            error_setg(errp, "Parameter 'driver' does not accept value '%s'",
                       driver);
            g_clear_pointer(&options, qdict_unref);
        }
    }
    if (!options) {
        return -EINVAL;
    }
    return blockdev_open(options, errp);
}

static void qmp_blockdev_add(JsonObject *args, JsonNode **ret, Error **errp)
{
    g_autoptr(JsonNode) node = json_node_init_object(json_node_alloc(),
                                                     args);
    QDict *options = blockdev_options_to_qdict(node, errp);

    if (options) {
        blockdev_open(options, errp);
    }
}

static void qmp_blockdev_del(JsonObject *args, JsonNode **ret, Error **errp)
{
    const char *name = json_object_get_string_member(args, "node-name");
    BlockDriverState *bs = bdrv_find_node(name);
    int ret_flush;

    if (!bs) {
        error_setg(errp, "Failed to find node with node-name='%s'", name);
        return;
    }
    if (bdrv_has_blk(bs)) {
        error_setg(errp, "Node %s is in use", name);
        return;
    }
    if (bdrv_op_is_blocked(bs, BLOCK_OP_TYPE_DRIVE_DEL, errp)) {
        return;
    }
    if (!monitor_bdrv_states ||
        !g_ptr_array_find(monitor_bdrv_states, bs, NULL)) {
        error_setg(errp, "Node %s is not owned by the monitor", name);
        return;
    }
    if (bdrv_get_refcnt(bs) > 1) {
        error_setg(errp, "Block device %s is in use",
                   bdrv_get_device_or_node_name(bs));
        return;
    }
    /* the node closes anyway; a flush error is the client's to know */
    ret_flush = bdrv_flush(bs);
    g_ptr_array_remove(monitor_bdrv_states, bs);
    bdrv_unref(bs);
    if (ret_flush < 0) {
        error_setg_errno(errp, -ret_flush, "Node %s closed, but flushing "
                         "it failed", name);
    }
}

static void qmp_query_named_block_nodes(JsonObject *args, JsonNode **ret,
                                        Error **errp)
{
    bool flat = json_object_get_boolean_member_with_default(args, "flat",
                                                            false);
    g_autoptr(JsonArray) list = json_array_new();

    /* newest first, as QEMU lists them */
    for (BlockDriverState *bs = bdrv_prev_node(NULL); bs;
         bs = bdrv_prev_node(bs)) {
        JsonNode *info = bdrv_block_device_info(bs, flat, errp);

        if (!info) {
            return;
        }
        json_array_add_element(list, info);
    }
    *ret = json_node_init_array(json_node_alloc(), list);
}

/* The BlockBackends with a name: none in the daemon, as in QEMU's. */
static void qmp_query_block(JsonObject *args, JsonNode **ret, Error **errp)
{
    g_autoptr(JsonArray) list = json_array_new();

    for (BlockBackend *blk = blk_next(NULL); blk; blk = blk_next(blk)) {
        g_autoptr(JsonObject) obj = NULL;

        if (!blk_name(blk)[0]) {
            continue;
        }
        obj = json_object_new();
        json_object_set_string_member(obj, "device", blk_name(blk));
        json_object_set_string_member(obj, "type", "unknown");
        json_object_set_boolean_member(obj, "removable", false);
        json_object_set_boolean_member(obj, "locked", false);
        if (blk_bs(blk)) {
            JsonNode *info = bdrv_block_device_info(blk_bs(blk), false,
                                                    errp);

            if (!info) {
                return;
            }
            json_object_set_member(obj, "inserted", info);
        }
        json_array_add_element(list,
                               json_node_init_object(json_node_alloc(), obj));
    }
    *ret = json_node_init_array(json_node_alloc(), list);
}

/* An export's BlockBackend: its own statistics, its root node's below. */
static JsonNode *blockdev_export_stats(BlockExport *exp)
{
    g_autoptr(JsonObject) obj = json_object_new();
    BlockBackend *blk = blk_exp_get_blk(exp);
    BlockDriverState *bs = blk_bs(blk);

    json_object_set_string_member(obj, "device", blk_name(blk));
    json_object_set_string_member(obj, "x-export", blk_exp_get_id(exp));
    json_object_set_string_member(obj, "node-name", bdrv_get_node_name(bs));
    json_object_set_member(obj, "stats", blk_query_stats(blk));
    json_object_set_member(obj, "parent", bdrv_query_node_stats(bs));
    return json_node_init_object(json_node_alloc(), obj);
}

static void qmp_query_blockstats(JsonObject *args, JsonNode **ret,
                                 Error **errp)
{
    g_autoptr(JsonArray) list = json_array_new();

    if (json_object_get_boolean_member_with_default(args, "query-nodes",
                                                    false)) {
        for (BlockDriverState *bs = bdrv_next_node(NULL); bs;
             bs = bdrv_next_node(bs)) {
            json_array_add_element(list, bdrv_query_node_stats(bs));
        }
    } else {
        for (BlockExport *exp = blk_exp_next(NULL); exp;
             exp = blk_exp_next(exp)) {
            json_array_add_element(list, blockdev_export_stats(exp));
        }
    }
    *ret = json_node_init_array(json_node_alloc(), list);
}

/* The BlockBackends x-blockdev-set-write-cache acts on. */
static GPtrArray *blockdev_write_cache_targets(JsonObject *args,
                                               Error **errp)
{
    bool has_id = json_object_has_member(args, "id");
    bool has_node = json_object_has_member(args, "node-name");
    g_autoptr(GPtrArray) blks = g_ptr_array_new();

    if (has_id == has_node) {
        error_setg(errp, "Exactly one of 'id' and 'node-name' must be given");
        return NULL;
    }
    if (has_id) {
        const char *id = json_object_get_string_member(args, "id");
        BlockExport *exp = blk_exp_find(id);

        if (!exp) {
            error_setg(errp, "Export '%s' is not found", id);
            return NULL;
        }
        g_ptr_array_add(blks, blk_exp_get_blk(exp));
    } else {
        const char *name = json_object_get_string_member(args, "node-name");
        BlockDriverState *bs = bdrv_find_node(name);

        if (!bs) {
            error_setg(errp, "Failed to find node with node-name='%s'", name);
            return NULL;
        }
        g_autoptr(GSList) parents = bdrv_get_parent_blks(bs);

        for (GSList *l = parents; l; l = l->next) {
            g_ptr_array_add(blks, l->data);
        }
        if (!blks->len) {
            error_setg(errp, "Node '%s' has no user with a write cache "
                       "(export it first)", name);
            return NULL;
        }
    }
    return g_steal_pointer(&blks);
}

static void qmp_x_blockdev_set_write_cache(JsonObject *args, JsonNode **ret,
                                           Error **errp)
{
    g_autoptr(GPtrArray) blks = blockdev_write_cache_targets(args, errp);
    g_autoptr(JsonObject) info = json_object_new();
    bool writeback = true;

    if (!blks) {
        return;
    }
    for (guint i = 0; i < blks->len; i++) {
        BlockBackend *blk = g_ptr_array_index(blks, i);

        if (json_object_has_member(args, "writeback")) {
            /* an export tells its clients */
            blk_exp_set_write_cache(blk, json_object_get_boolean_member(
                                             args, "writeback"));
        }
        writeback &= blk_enable_write_cache(blk);
    }
    json_object_set_boolean_member(info, "writeback", writeback);
    *ret = json_node_init_object(json_node_alloc(), info);
}

static void qmp_block_set_write_threshold(JsonObject *args, JsonNode **ret,
                                          Error **errp)
{
    const char *name = json_object_get_string_member(args, "node-name");
    BlockDriverState *bs = bdrv_find_node(name);

    if (!bs) {
        error_setg(errp, "Device '%s' not found", name);
        return;
    }
    bdrv_write_threshold_set(bs, json_object_get_int_member(
                                     args, "write-threshold"));
}

static void qmp_x_debug_query_block_graph(JsonObject *args, JsonNode **ret,
                                          Error **errp)
{
    *ret = bdrv_debug_block_graph();
}

void blockdev_register_commands(void)
{
    qmp_register_command("blockdev-add", qmp_blockdev_add);
    qmp_register_command("blockdev-del", qmp_blockdev_del);
    qmp_register_command("query-named-block-nodes",
                         qmp_query_named_block_nodes);
    qmp_register_command("query-blockstats", qmp_query_blockstats);
    qmp_register_command("query-block", qmp_query_block);
    qmp_register_command("x-debug-query-block-graph",
                         qmp_x_debug_query_block_graph);
    qmp_register_command("block-set-write-threshold",
                         qmp_block_set_write_threshold);
    qmp_register_command("x-blockdev-set-write-cache",
                         qmp_x_blockdev_set_write_cache);
}

int blockdev_close_all(void)
{
    int ret = 0;

    while (monitor_bdrv_states && monitor_bdrv_states->len) {
        BlockDriverState *bs = g_ptr_array_steal_index(
                                   monitor_bdrv_states,
                                   monitor_bdrv_states->len - 1);
        int r = bdrv_flush(bs);

        if (r < 0) {
            error_report("Failed to flush node '%s' at shutdown: %s",
                         bdrv_get_node_name(bs), strerror(-r));
            ret = -EIO;
        }
        bdrv_unref(bs);
    }
    return ret;
}
