/*
 * Block export commands of the storage daemon (block-export.h).
 */
#include "block-export.h"

#include "block/export.h"
#include "qblock/block-export.h"
#include "qapi-qmp.h"
#include "qmp-dispatch.h"
#include "util/qapi-schema.h"

int block_export_add_cmdline(const char *arg, Error **errp)
{
    g_autoptr(QDict) qdict = keyval_parse(arg, "type", errp);
    g_autoptr(JsonNode) opts = NULL;

    if (!qdict) {
        return -EINVAL;
    }
    opts = qapi_input_from_keyval(&qapi_type_BlockExportOptions, qdict,
                                  errp);
    if (!opts || !blk_exp_add(json_node_get_object(opts), errp)) {
        return -EINVAL;
    }
    return 0;
}

static void qmp_block_export_add(JsonObject *args, JsonNode **ret,
                                 Error **errp)
{
    blk_exp_add(args, errp);
}

static void qmp_block_export_del(JsonObject *args, JsonNode **ret,
                                 Error **errp)
{
    const char *mode = json_object_get_string_member_with_default(
                           args, "mode", "safe");

    blk_exp_del(json_object_get_string_member(args, "id"),
                !strcmp(mode, "hard"), errp);
}

static void qmp_query_block_exports(JsonObject *args, JsonNode **ret,
                                    Error **errp)
{
    g_autoptr(JsonArray) list = json_array_new();
    g_autoptr(GPtrArray) exps = g_ptr_array_new();

    /* newest first, as QEMU lists them */
    for (BlockExport *exp = blk_exp_next(NULL); exp;
         exp = blk_exp_next(exp)) {
        g_ptr_array_insert(exps, 0, exp);
    }
    for (guint i = 0; i < exps->len; i++) {
        BlockExport *exp = exps->pdata[i];
        JsonObject *info = json_object_new();

        json_object_set_string_member(info, "id", exp->id);
        json_object_set_string_member(info, "type", blk_exp_get_type(exp));
        json_object_set_string_member(info, "node-name",
                                      bdrv_get_node_name(blk_bs(exp->blk)));
        json_object_set_boolean_member(info, "shutting-down",
                                       !exp->user_owned);
        json_array_add_object_element(list, info);
    }
    *ret = json_node_init_array(json_node_alloc(), list);
}

void block_export_register_commands(void)
{
    qmp_register_command("block-export-add", qmp_block_export_add);
    qmp_register_command("block-export-del", qmp_block_export_del);
    qmp_register_command("query-block-exports", qmp_query_block_exports);
}
