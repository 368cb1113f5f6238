/*
 * QMP commands on dirty bitmaps (qapi/dirty-bitmap.json).  Each names a
 * node and a bitmap; the checks and messages are QEMU's and live in
 * block/dirty-bitmap-cmds.c, shared with qblock-img bitmap.  The
 * arguments were checked against the schema before a handler runs,
 * except the sources of merge, which are a string or an object each.
 */
#include "dirty-bitmap-qmp.h"
#include "block/block.h"
#include "block/dirty-bitmap.h"
#include "qmp-dispatch.h"

/* The node @name, as QEMU looks it up (its message for none). */
static BlockDriverState *dirty_bitmap_qmp_node(const char *name,
                                               Error **errp)
{
    BlockDriverState *bs = bdrv_find_node(name);

    if (!bs) {
        error_setg(errp, "Cannot find device='%s' nor node-name='%s'", name,
                   name);
    }
    return bs;
}

static const char *arg_str(JsonObject *args, const char *name)
{
    return json_object_get_string_member(args, name);
}

static void qmp_block_dirty_bitmap_add(JsonObject *args, JsonNode **ret,
                                       Error **errp)
{
    BlockDriverState *bs = dirty_bitmap_qmp_node(arg_str(args, "node"),
                                                 errp);
    uint32_t granularity = 0;

    if (!bs) {
        return;
    }
    if (json_object_has_member(args, "granularity")) {
        int64_t g = json_object_get_int_member(args, "granularity");

        /* 0 is no default here: QEMU refuses it */
        granularity = g ? (uint32_t)g : 1;
    }
    bdrv_dirty_bitmap_add(bs, arg_str(args, "name"), granularity,
                          json_object_get_boolean_member_with_default(
                              args, "persistent", false),
                          json_object_get_boolean_member_with_default(
                              args, "disabled", false),
                          errp);
}

/* The commands that name one bitmap and change it. */
typedef int DirtyBitmapCmdFn(BlockDriverState *bs, const char *name,
                             Error **errp);

static void dirty_bitmap_qmp_simple(JsonObject *args, DirtyBitmapCmdFn *fn,
                                    Error **errp)
{
    BlockDriverState *bs = dirty_bitmap_qmp_node(arg_str(args, "node"),
                                                 errp);

    if (bs) {
        fn(bs, arg_str(args, "name"), errp);
    }
}

static void qmp_block_dirty_bitmap_remove(JsonObject *args, JsonNode **ret,
                                          Error **errp)
{
    dirty_bitmap_qmp_simple(args, bdrv_dirty_bitmap_remove, errp);
}

static void qmp_block_dirty_bitmap_clear(JsonObject *args, JsonNode **ret,
                                         Error **errp)
{
    dirty_bitmap_qmp_simple(args, bdrv_dirty_bitmap_clear_cmd, errp);
}

static void qmp_block_dirty_bitmap_enable(JsonObject *args, JsonNode **ret,
                                          Error **errp)
{
    dirty_bitmap_qmp_simple(args, bdrv_dirty_bitmap_enable_cmd, errp);
}

static void qmp_block_dirty_bitmap_disable(JsonObject *args, JsonNode **ret,
                                           Error **errp)
{
    dirty_bitmap_qmp_simple(args, bdrv_dirty_bitmap_disable_cmd, errp);
}

/*
 * One source of merge: "name" (a bitmap of @bs) or {"node", "name"}.
 * NULL with QEMU's messages.
 */
static BdrvDirtyBitmap *dirty_bitmap_qmp_source(BlockDriverState *bs,
                                                JsonNode *src, Error **errp)
{
    if (JSON_NODE_HOLDS_VALUE(src) &&
        json_node_get_value_type(src) == G_TYPE_STRING) {
        return bdrv_dirty_bitmap_lookup(bs, json_node_get_string(src),
                                        errp);
    }
    if (JSON_NODE_HOLDS_OBJECT(src)) {
        JsonObject *o = json_node_get_object(src);
        JsonNode *node = json_object_get_member(o, "node");
        JsonNode *name = json_object_get_member(o, "name");

        if (node && name && json_object_get_size(o) == 2 &&
            JSON_NODE_HOLDS_VALUE(node) && JSON_NODE_HOLDS_VALUE(name) &&
            json_node_get_value_type(node) == G_TYPE_STRING &&
            json_node_get_value_type(name) == G_TYPE_STRING) {
            BlockDriverState *other = dirty_bitmap_qmp_node(
                json_node_get_string(node), errp);

            return other ? bdrv_dirty_bitmap_lookup(
                               other, json_node_get_string(name), errp)
                         : NULL;
        }
    }
    error_setg(errp, "Invalid parameter type for 'bitmaps', expected: "
               "BlockDirtyBitmapOrStr");
    return NULL;
}

static void qmp_block_dirty_bitmap_merge(JsonObject *args, JsonNode **ret,
                                         Error **errp)
{
    BlockDriverState *bs = dirty_bitmap_qmp_node(arg_str(args, "node"),
                                                 errp);
    JsonArray *list = json_object_get_array_member(args, "bitmaps");
    guint n = json_array_get_length(list);
    g_autofree BdrvDirtyBitmap **srcs = g_new0(BdrvDirtyBitmap *, n + 1);

    if (!bs) {
        return;
    }
    /* the target first, as QEMU: its errors win */
    if (!bdrv_dirty_bitmap_lookup(bs, arg_str(args, "target"), errp)) {
        return;
    }
    for (guint i = 0; i < n; i++) {
        srcs[i] = dirty_bitmap_qmp_source(bs, json_array_get_element(list, i),
                                          errp);
        if (!srcs[i]) {
            return;
        }
    }
    bdrv_dirty_bitmap_merge_cmd(bs, arg_str(args, "target"), srcs, n, NULL,
                                errp);
}

static void qmp_x_debug_block_dirty_bitmap_sha256(JsonObject *args,
                                                  JsonNode **ret,
                                                  Error **errp)
{
    BlockDriverState *bs = dirty_bitmap_qmp_node(arg_str(args, "node"),
                                                 errp);
    BdrvDirtyBitmap *bm = bs ? bdrv_dirty_bitmap_lookup(
                                   bs, arg_str(args, "name"), errp) : NULL;
    g_autoptr(JsonObject) o = NULL;
    g_autofree char *sum = NULL;

    if (!bm) {
        return;
    }
    sum = bdrv_dirty_bitmap_sha256(bm);
    o = json_object_new();
    json_object_set_string_member(o, "sha256", sum);
    *ret = json_node_init_object(json_node_alloc(), o);
}

void dirty_bitmap_register_commands(void)
{
    qmp_register_command("block-dirty-bitmap-add",
                         qmp_block_dirty_bitmap_add);
    qmp_register_command("block-dirty-bitmap-remove",
                         qmp_block_dirty_bitmap_remove);
    qmp_register_command("block-dirty-bitmap-clear",
                         qmp_block_dirty_bitmap_clear);
    qmp_register_command("block-dirty-bitmap-enable",
                         qmp_block_dirty_bitmap_enable);
    qmp_register_command("block-dirty-bitmap-disable",
                         qmp_block_dirty_bitmap_disable);
    qmp_register_command("block-dirty-bitmap-merge",
                         qmp_block_dirty_bitmap_merge);
    qmp_register_command("x-debug-block-dirty-bitmap-sha256",
                         qmp_x_debug_block_dirty_bitmap_sha256);
}
