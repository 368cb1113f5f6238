/*
 * blockdev-reopen: changes the options of several nodes, and the nodes
 * their "file" and "backing" children are, in one transaction
 * (bdrv_reopen_many(), block/block-reopen-opts.c).  Here are the command's
 * arguments: every node's options are checked as blockdev-add checks
 * them before any node is looked up, as QEMU's QMP input visitor checks
 * the whole argument list before the command runs; then each node must
 * be named and exist.
 */
#include "blockdev-reopen.h"

#include "block/block.h"
#include "blockdev.h"
#include "qblock/block-driver.h"
#include "qmp-dispatch.h"

/*
 * Only the formats with backing files have the member "backing" in
 * QEMU's schema: for the others it is an unexpected parameter, refused
 * before any node is looked up.
 */
static bool blockdev_reopen_check_backing(QDict *options, guint i,
                                          Error **errp)
{
    const BlockDriver *drv = bdrv_find_format(qdict_get_try_str(options,
                                                                "driver"));

    if (drv && !bdrv_driver_supports_backing(drv) &&
        (qdict_haskey(options, "backing") ||
         qdict_has_prefixed_entries(options, "backing."))) {
        error_setg(errp, "Parameter 'options[%u].backing' is unexpected", i);
        return false;
    }
    return true;
}

static void qmp_blockdev_reopen(JsonObject *args, JsonNode **ret,
                                Error **errp)
{
    JsonArray *list = json_object_get_array_member(args, "options");
    guint n = json_array_get_length(list);
    g_autofree BlockDriverState **nodes = g_new0(BlockDriverState *, n);
    g_autofree QDict **options = g_new0(QDict *, n);
    guint i;

    for (i = 0; i < n; i++) {
        options[i] = blockdev_options_to_qdict(
                         json_array_get_element(list, i), errp);
        if (!options[i] ||
            !blockdev_reopen_check_backing(options[i], i, errp)) {
            goto fail;
        }
    }
    for (i = 0; i < n; i++) {
        const char *name = qdict_get_try_str(options[i], "node-name");

        if (!name) {
            error_setg(errp, "node-name not specified");
            goto fail;
        }
        nodes[i] = bdrv_find_node(name);
        if (!nodes[i]) {
            error_setg(errp, "Failed to find node with node-name='%s'",
                       name);
            goto fail;
        }
    }
    /* the block layer takes the options over */
    bdrv_reopen_many(nodes, options, n, errp);
    return;

fail:
    for (i = 0; i < n; i++) {
        if (options[i]) {
            qdict_unref(options[i]);
        }
    }
}

void blockdev_reopen_register_commands(void)
{
    qmp_register_command("blockdev-reopen", qmp_blockdev_reopen);
}
