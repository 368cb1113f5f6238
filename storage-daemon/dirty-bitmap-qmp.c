/*
 * QMP commands on dirty bitmaps (qapi/dirty-bitmap.json).  Each names a
 * node and a bitmap; the checks and messages are QEMU's and live in
 * block/dirty-bitmap-cmds.c, shared with qblock-img bitmap.  The
 * arguments were checked against the schema before a handler runs,
 * except the sources of merge, which are a string or an object each.
 *
 * Each command is also an action of the transaction command (QEMU's
 * semantics, transaction.h): add, clear, enable, disable and merge act
 * at prepare and are undone by abort (the bitmap released, its bits or
 * state put back); remove takes the bitmap out of its image and hides it
 * (busy) at prepare, releases it at commit, and abort makes it visible
 * again (a persistent one is stored again when its image closes).
 */
#include "dirty-bitmap-qmp.h"
#include "block/block.h"
#include "block/dirty-bitmap.h"
#include "qmp-dispatch.h"
#include "transaction.h"

static void qmp_block_dirty_bitmap_add(JsonObject *args, JsonNode **ret,
                                       Error **errp)
{
    BlockDriverState *bs = bdrv_lookup_node(qmp_arg_str(args, "node"), errp);
    uint32_t granularity = 0;
    BdrvDirtyBitmapAddFlags flags = 0;

    if (!bs) {
        return;
    }
    if (json_object_has_member(args, "granularity")) {
        int64_t g = json_object_get_int_member(args, "granularity");

        /* 0 is no default here: QEMU refuses it */
        granularity = g ? (uint32_t)g : 1;
    }
    if (json_object_get_boolean_member_with_default(args, "persistent",
                                                    false)) {
        flags |= BDRV_BITMAP_ADD_PERSISTENT;
    }
    if (json_object_get_boolean_member_with_default(args, "disabled", false)) {
        flags |= BDRV_BITMAP_ADD_DISABLED;
    }
    bdrv_dirty_bitmap_add(bs, qmp_arg_str(args, "name"), granularity, flags,
                          errp);
}

/* What a command that names one bitmap does to it. */
typedef int DirtyBitmapCmdFn(BlockDriverState *bs, const char *name,
                             Error **errp);

/* enable and disable, in the shape of the other DirtyBitmapCmdFn */
static int dirty_bitmap_qmp_enable(BlockDriverState *bs, const char *name,
                                   Error **errp)
{
    return bdrv_dirty_bitmap_switch_cmd(bs, name, true, errp);
}

static int dirty_bitmap_qmp_disable(BlockDriverState *bs, const char *name,
                                    Error **errp)
{
    return bdrv_dirty_bitmap_switch_cmd(bs, name, false, errp);
}

/*
 * The commands that name one bitmap ("node", "name") and change it, all
 * served by dirty_bitmap_qmp_change(): they differ only in the change.
 */
typedef struct DirtyBitmapQmpCommand {
    const char *name;
    DirtyBitmapCmdFn *fn;
} DirtyBitmapQmpCommand;

static const DirtyBitmapQmpCommand dirty_bitmap_qmp_commands[] = {
    { "block-dirty-bitmap-remove",  bdrv_dirty_bitmap_remove },
    { "block-dirty-bitmap-clear",   bdrv_dirty_bitmap_clear_cmd },
    { "block-dirty-bitmap-enable",  dirty_bitmap_qmp_enable },
    { "block-dirty-bitmap-disable", dirty_bitmap_qmp_disable },
};

/* @opaque: the DirtyBitmapQmpCommand of the command. */
static void dirty_bitmap_qmp_change(JsonObject *args, const void *opaque,
                                    JsonNode **ret, Error **errp)
{
    const DirtyBitmapQmpCommand *cmd = opaque;
    BlockDriverState *bs = bdrv_lookup_node(qmp_arg_str(args, "node"), errp);

    if (bs) {
        cmd->fn(bs, qmp_arg_str(args, "name"), errp);
    }
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
            BlockDriverState *other =
                bdrv_lookup_node(json_node_get_string(node), errp);

            return other ? bdrv_dirty_bitmap_lookup(
                               other, json_node_get_string(name), errp)
                         : NULL;
        }
    }
    error_setg(errp, "Invalid parameter type for 'bitmaps', expected: "
               "BlockDirtyBitmapOrStr");
    return NULL;
}

/* merge; with @backup, the target's old bits go there.  Its target. */
static BdrvDirtyBitmap *dirty_bitmap_qmp_merge(JsonObject *args,
                                               HBitmap **backup,
                                               Error **errp)
{
    BlockDriverState *bs = bdrv_lookup_node(qmp_arg_str(args, "node"), errp);
    JsonArray *list = json_object_get_array_member(args, "bitmaps");
    guint n = json_array_get_length(list);
    g_autofree BdrvDirtyBitmap **srcs = g_new0(BdrvDirtyBitmap *, n + 1);
    BdrvDirtyBitmap *target;

    if (!bs) {
        return NULL;
    }
    /* the target first, as QEMU: its errors win */
    target = bdrv_dirty_bitmap_lookup(bs, qmp_arg_str(args, "target"), errp);
    if (!target) {
        return NULL;
    }
    for (guint i = 0; i < n; i++) {
        srcs[i] = dirty_bitmap_qmp_source(bs, json_array_get_element(list, i),
                                          errp);
        if (!srcs[i]) {
            return NULL;
        }
    }
    if (bdrv_dirty_bitmap_merge_cmd(bs, qmp_arg_str(args, "target"), srcs, n,
                                    backup, errp) < 0) {
        return NULL;
    }
    return target;
}

static void qmp_block_dirty_bitmap_merge(JsonObject *args, JsonNode **ret,
                                         Error **errp)
{
    dirty_bitmap_qmp_merge(args, NULL, errp);
}

static void qmp_x_debug_block_dirty_bitmap_sha256(JsonObject *args,
                                                  JsonNode **ret,
                                                  Error **errp)
{
    BlockDriverState *bs = bdrv_lookup_node(qmp_arg_str(args, "node"), errp);
    BdrvDirtyBitmap *bm = bs ? bdrv_dirty_bitmap_lookup(
                                   bs, qmp_arg_str(args, "name"), errp) : NULL;
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

/* ---- the transaction actions ---- */

typedef struct DirtyBitmapAction {
    BdrvDirtyBitmap *bitmap;    /* NULL until prepare found or made it */
    HBitmap *backup;            /* clear, merge: the old bits */
    bool was_enabled;           /* enable, disable: the old state */
} DirtyBitmapAction;

/*
 * The format's stored copy of @bitmap is marked in use before an abort
 * changes the bitmap back (dirty-bitmap.h: a flush between prepare and
 * abort may have stored the changed one).  An abort cannot fail: a
 * failure is reported, and the stored copy may then lag behind.
 */
static void dirty_bitmap_abort_before_change(BdrvDirtyBitmap *bitmap)
{
    Error *err = NULL;

    if (bdrv_dirty_bitmap_before_change(
            bdrv_dirty_bitmap_bs(bitmap),
            bdrv_dirty_bitmap_get_persistence(bitmap), &err) < 0) {
        warn_report_err(err);
    }
}

/* The bitmap @data names, checked for @flags (QEMU's messages). */
static BdrvDirtyBitmap *dirty_bitmap_action_lookup(JsonObject *data,
                                                   BdrvDirtyBitmapFlags flags,
                                                   Error **errp)
{
    BlockDriverState *bs = bdrv_lookup_node(qmp_arg_str(data, "node"), errp);

    return bs ? bdrv_dirty_bitmap_lookup_checked(bs, qmp_arg_str(data, "name"),
                                                 flags, errp) : NULL;
}

/*
 * Prepare of the actions that change a bitmap's bits or state in place
 * (clear, enable, disable): st->bitmap is the bitmap @data names, and its
 * image has been told of the change; on failure st->bitmap is NULL, so
 * abort has nothing to undo.
 */
static int dirty_bitmap_prepare_change(DirtyBitmapAction *st,
                                       JsonObject *data,
                                       BdrvDirtyBitmapFlags flags,
                                       Error **errp)
{
    st->bitmap = dirty_bitmap_action_lookup(data, flags, errp);
    if (!st->bitmap) {
        return -EINVAL;
    }
    if (bdrv_dirty_bitmap_before_change(
            bdrv_dirty_bitmap_bs(st->bitmap),
            bdrv_dirty_bitmap_get_persistence(st->bitmap), errp) < 0) {
        st->bitmap = NULL;
        return -EIO;
    }
    return 0;
}

static int dirty_bitmap_add_prepare(TransactionAction *action,
                                    JsonObject *data, Error **errp)
{
    DirtyBitmapAction *st = action->opaque;
    Error *err = NULL;

    qmp_block_dirty_bitmap_add(data, NULL, &err);
    if (err) {
        error_propagate(errp, err);
        return -EINVAL;
    }
    st->bitmap = bdrv_find_dirty_bitmap(
        bdrv_find_node(qmp_arg_str(data, "node")), qmp_arg_str(data, "name"));
    return 0;
}

static void dirty_bitmap_add_abort(TransactionAction *action)
{
    DirtyBitmapAction *st = action->opaque;

    /* a new bitmap reaches its image only when the image closes */
    if (st->bitmap) {
        bdrv_release_dirty_bitmap(st->bitmap);
    }
}

const TransactionActionDriver transaction_action_block_dirty_bitmap_add = {
    .type           = "block-dirty-bitmap-add",
    .instance_size  = sizeof(DirtyBitmapAction),
    .prepare        = dirty_bitmap_add_prepare,
    .abort          = dirty_bitmap_add_abort,
};

static int dirty_bitmap_remove_prepare(TransactionAction *action,
                                       JsonObject *data, Error **errp)
{
    DirtyBitmapAction *st = action->opaque;
    BdrvDirtyBitmap *bm = dirty_bitmap_action_lookup(
                              data, BDRV_BITMAP_BUSY | BDRV_BITMAP_RO, errp);

    if (!bm) {
        return -EINVAL;
    }
    if (bdrv_dirty_bitmap_remove_persistent(bm, errp) < 0) {
        return -EIO;
    }
    /* hidden from every other user until commit or abort */
    bdrv_dirty_bitmap_set_busy(bm, true);
    st->bitmap = bm;
    return 0;
}

static void dirty_bitmap_remove_commit(TransactionAction *action)
{
    DirtyBitmapAction *st = action->opaque;

    bdrv_dirty_bitmap_set_busy(st->bitmap, false);
    bdrv_release_dirty_bitmap(st->bitmap);
    st->bitmap = NULL;
}

static void dirty_bitmap_remove_abort(TransactionAction *action)
{
    DirtyBitmapAction *st = action->opaque;

    if (st->bitmap) {
        bdrv_dirty_bitmap_set_busy(st->bitmap, false);
    }
}

const TransactionActionDriver transaction_action_block_dirty_bitmap_remove = {
    .type           = "block-dirty-bitmap-remove",
    .instance_size  = sizeof(DirtyBitmapAction),
    .prepare        = dirty_bitmap_remove_prepare,
    .commit         = dirty_bitmap_remove_commit,
    .abort          = dirty_bitmap_remove_abort,
};

static int dirty_bitmap_clear_prepare(TransactionAction *action,
                                      JsonObject *data, Error **errp)
{
    DirtyBitmapAction *st = action->opaque;
    int ret = dirty_bitmap_prepare_change(st, data, BDRV_BITMAP_DEFAULT, errp);

    if (ret < 0) {
        return ret;
    }
    bdrv_clear_dirty_bitmap(st->bitmap, &st->backup);
    return 0;
}

/* clear and merge: the old bits come back */
static void dirty_bitmap_restore_abort(TransactionAction *action)
{
    DirtyBitmapAction *st = action->opaque;

    if (st->backup) {
        dirty_bitmap_abort_before_change(st->bitmap);
        bdrv_restore_dirty_bitmap(st->bitmap, st->backup);
        st->backup = NULL;
    }
}

static void dirty_bitmap_backup_clean(TransactionAction *action)
{
    DirtyBitmapAction *st = action->opaque;

    if (st->backup) {
        hbitmap_free(st->backup);
    }
}

const TransactionActionDriver transaction_action_block_dirty_bitmap_clear = {
    .type           = "block-dirty-bitmap-clear",
    .instance_size  = sizeof(DirtyBitmapAction),
    .prepare        = dirty_bitmap_clear_prepare,
    .abort          = dirty_bitmap_restore_abort,
    .clean          = dirty_bitmap_backup_clean,
};

static int dirty_bitmap_merge_prepare(TransactionAction *action,
                                      JsonObject *data, Error **errp)
{
    DirtyBitmapAction *st = action->opaque;

    st->bitmap = dirty_bitmap_qmp_merge(data, &st->backup, errp);
    return st->bitmap ? 0 : -EINVAL;
}

const TransactionActionDriver transaction_action_block_dirty_bitmap_merge = {
    .type           = "block-dirty-bitmap-merge",
    .instance_size  = sizeof(DirtyBitmapAction),
    .prepare        = dirty_bitmap_merge_prepare,
    .abort          = dirty_bitmap_restore_abort,
    .clean          = dirty_bitmap_backup_clean,
};

/*
 * The prepare of enable and of disable; which of the two the action is
 * says what it makes of the bitmap.
 */
static int dirty_bitmap_switch_prepare(TransactionAction *action,
                                       JsonObject *data, Error **errp)
{
    DirtyBitmapAction *st = action->opaque;
    bool enable = action->drv == &transaction_action_block_dirty_bitmap_enable;
    int ret = dirty_bitmap_prepare_change(st, data, BDRV_BITMAP_ALLOW_RO,
                                          errp);

    if (ret < 0) {
        return ret;
    }
    st->was_enabled = bdrv_dirty_bitmap_enabled(st->bitmap);
    bdrv_dirty_bitmap_switch(st->bitmap, enable);
    return 0;
}

static void dirty_bitmap_switch_abort(TransactionAction *action)
{
    DirtyBitmapAction *st = action->opaque;

    if (st->bitmap) {
        dirty_bitmap_abort_before_change(st->bitmap);
        bdrv_dirty_bitmap_switch(st->bitmap, st->was_enabled);
    }
}

const TransactionActionDriver transaction_action_block_dirty_bitmap_enable = {
    .type           = "block-dirty-bitmap-enable",
    .instance_size  = sizeof(DirtyBitmapAction),
    .prepare        = dirty_bitmap_switch_prepare,
    .abort          = dirty_bitmap_switch_abort,
};

const TransactionActionDriver
    transaction_action_block_dirty_bitmap_disable = {
    .type           = "block-dirty-bitmap-disable",
    .instance_size  = sizeof(DirtyBitmapAction),
    .prepare        = dirty_bitmap_switch_prepare,
    .abort          = dirty_bitmap_switch_abort,
};

void dirty_bitmap_register_commands(void)
{
    qmp_register_command("block-dirty-bitmap-add",
                         qmp_block_dirty_bitmap_add);
    for (size_t i = 0; i < G_N_ELEMENTS(dirty_bitmap_qmp_commands); i++) {
        qmp_register_command_data(dirty_bitmap_qmp_commands[i].name,
                                  dirty_bitmap_qmp_change,
                                  &dirty_bitmap_qmp_commands[i]);
    }
    qmp_register_command("block-dirty-bitmap-merge",
                         qmp_block_dirty_bitmap_merge);
    qmp_register_command("x-debug-block-dirty-bitmap-sha256",
                         qmp_x_debug_block_dirty_bitmap_sha256);
}
