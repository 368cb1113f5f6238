/*
 * Nodes and BlockBackends described for the monitor and for qemu-img
 * info (include/block/qapi.h): one ImageInfo, from the drivers' own
 * structures (never from text they printed), so that both agree.
 */
#include "block/qapi.h"

#include "block/block_int.h"
#include "block/dirty-bitmap.h"

static void qapi_add_str(JsonBuilder *b, const char *name, const char *val)
{
    json_builder_set_member_name(b, name);
    json_builder_add_string_value(b, val);
}

static void qapi_add_int(JsonBuilder *b, const char *name, int64_t val)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, val);
}

static void qapi_add_bool(JsonBuilder *b, const char *name, bool val)
{
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, val);
}

static void qapi_add_node(JsonBuilder *b, const char *name, JsonNode *node)
{
    json_builder_set_member_name(b, name);
    json_builder_add_value(b, node);
}

JsonNode *bdrv_get_specific_info(BlockDriverState *bs)
{
    if (!bs->drv || !bs->drv->bdrv_get_specific_info) {
        return NULL;
    }
    return bs->drv->bdrv_get_specific_info(bs);
}

void image_info_free(ImageInfo *info)
{
    if (!info) {
        return;
    }
    g_free(info->filename);
    g_free(info->backing_filename);
    g_free(info->full_backing_filename);
    g_free(info->backing_format);
    g_free(info->snapshots);
    if (info->format_specific) {
        json_node_unref(info->format_specific);
    }
    image_info_free(info->backing_image);
    g_free(info);
}

ImageInfo *bdrv_query_image_info(BlockDriverState *bs, bool flat,
                                 Error **errp)
{
    g_autoptr(ImageInfo) info = g_new0(ImageInfo, 1);
    BlockDriverInfo bdi;

    bdrv_refresh_filename(bs);
    info->virtual_size = bdrv_getlength(bs);
    if (info->virtual_size < 0) {
        error_setg_errno(errp, -info->virtual_size,
                         "Can't get image size '%s'", bs->exact_filename);
        return NULL;
    }
    info->filename = g_strdup(bs->filename);
    info->format = bdrv_get_format_name(bs);
    info->actual_size = bdrv_get_allocated_file_size(bs);
    info->encrypted = bs->encrypted;
    if (bdrv_get_info(bs, &bdi) == 0) {
        info->has_dirty_flag = true;
        info->dirty_flag = bdi.is_dirty;
        info->cluster_size = bdi.cluster_size;
    }
    if (bs->backing_file[0]) {
        info->backing_filename = g_strdup(bs->backing_file);
        info->full_backing_filename =
            bdrv_get_full_backing_filename(bs, bs->backing_file, NULL);
        if (bs->backing_format[0]) {
            info->backing_format = g_strdup(bs->backing_format);
        }
    }
    info->nb_snapshots = bdrv_snapshot_list(bs, &info->snapshots);
    if (info->nb_snapshots < 0) {
        error_setg_errno(errp, -info->nb_snapshots, "Can't list snapshots "
                         "of '%s'", bs->filename);
        return NULL;
    }
    info->format_specific = bdrv_get_specific_info(bs);
    if (!flat && bs->backing) {
        info->backing_image = bdrv_query_image_info(bs->backing->bs, false,
                                                    errp);
        if (!info->backing_image) {
            return NULL;
        }
    }
    return g_steal_pointer(&info);
}

/* SnapshotInfo members, icount only where it is known. */
static void qapi_add_snapshots(JsonBuilder *b, const QEMUSnapshotInfo *tab,
                               int n)
{
    json_builder_set_member_name(b, "snapshots");
    json_builder_begin_array(b);
    for (int i = 0; i < n; i++) {
        const QEMUSnapshotInfo *sn = &tab[i];

        json_builder_begin_object(b);
        qapi_add_str(b, "id", sn->id_str);
        qapi_add_str(b, "name", sn->name);
        qapi_add_int(b, "vm-state-size", sn->vm_state_size);
        qapi_add_int(b, "date-sec", sn->date_sec);
        qapi_add_int(b, "date-nsec", sn->date_nsec);
        qapi_add_int(b, "vm-clock-sec", sn->vm_clock_nsec / 1000000000);
        qapi_add_int(b, "vm-clock-nsec", sn->vm_clock_nsec % 1000000000);
        if (sn->icount != QEMU_SNAPSHOT_NO_ICOUNT) {
            qapi_add_int(b, "icount", sn->icount);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

JsonNode *image_info_to_json(const ImageInfo *info)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    /* QEMU's insertion order: it breaks ties in QEMU's QDict order */
    json_builder_begin_object(b);
    qapi_add_str(b, "filename", info->filename);
    qapi_add_str(b, "format", info->format);
    if (info->has_dirty_flag) {
        qapi_add_bool(b, "dirty-flag", info->dirty_flag);
    }
    if (info->actual_size >= 0) {
        qapi_add_int(b, "actual-size", info->actual_size);
    }
    qapi_add_int(b, "virtual-size", info->virtual_size);
    if (info->cluster_size) {
        qapi_add_int(b, "cluster-size", info->cluster_size);
    }
    if (info->encrypted) {
        qapi_add_bool(b, "encrypted", true);
    }
    if (info->backing_filename) {
        qapi_add_str(b, "backing-filename", info->backing_filename);
        if (info->full_backing_filename) {
            qapi_add_str(b, "full-backing-filename",
                         info->full_backing_filename);
        }
        if (info->backing_format) {
            qapi_add_str(b, "backing-filename-format", info->backing_format);
        }
    }
    if (info->nb_snapshots > 0) {
        qapi_add_snapshots(b, info->snapshots, info->nb_snapshots);
    }
    if (info->format_specific) {
        qapi_add_node(b, "format-specific",
                      json_node_copy(info->format_specific));
    }
    if (info->backing_image) {
        qapi_add_node(b, "backing-image",
                      image_info_to_json(info->backing_image));
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static void image_info_human_node(GString *out, JsonNode *node, int level);

/* One "name: value" or "name:" line and, for composites, what is below. */
static void image_info_human_item(GString *out, const char *label,
                                  JsonNode *value, int level)
{
    bool composite = JSON_NODE_HOLDS_OBJECT(value) ||
                     JSON_NODE_HOLDS_ARRAY(value);

    g_string_append_printf(out, "%*s%s:%c", level * 4, "", label,
                           composite ? '\n' : ' ');
    image_info_human_node(out, value, level + 1);
    if (!composite) {
        g_string_append_c(out, '\n');
    }
}

/*
 * QEMU's rendering: members in QEMU's QDict order (as qemu-img's JSON
 * lists them), keys with '-' read as spaces, "[i]:" list items, strings
 * unquoted and other scalars as in JSON.
 */
static void image_info_human_node(GString *out, JsonNode *node, int level)
{
    if (JSON_NODE_HOLDS_OBJECT(node)) {
        JsonObject *obj = json_node_get_object(node);
        g_autofree const char **order =
            json_object_ordered_members(obj, JSON_WRITE_QDICT_ORDER);

        for (const char **m = order; *m; m++) {
            /* "refcount-bits" reads "refcount bits" */
            g_autofree char *label = g_strdelimit(g_strdup(*m), "-", ' ');

            image_info_human_item(out, label,
                                  json_object_get_member(obj, *m), level);
        }
    } else if (JSON_NODE_HOLDS_ARRAY(node)) {
        JsonArray *arr = json_node_get_array(node);

        for (guint i = 0; i < json_array_get_length(arr); i++) {
            g_autofree char *label = g_strdup_printf("[%u]", i);

            image_info_human_item(out, label,
                                  json_array_get_element(arr, i), level);
        }
    } else if (JSON_NODE_HOLDS_VALUE(node) &&
               json_node_get_value_type(node) == G_TYPE_STRING) {
        g_string_append(out, json_node_get_string(node));
    } else {
        json_write(out, node, 0);
    }
}

char *image_info_specific_human(JsonNode *specific)
{
    g_autoptr(GString) human = g_string_new(NULL);
    JsonObject *obj;

    if (!specific || !JSON_NODE_HOLDS_OBJECT(specific)) {
        return NULL;
    }
    obj = json_node_get_object(specific);
    if (!json_object_has_member(obj, "data")) {
        return NULL;
    }
    image_info_human_node(human, json_object_get_member(obj, "data"), 1);
    /* empty data (rbd's) still prints the heading, as in QEMU */
    return g_strdup(human->str);
}

bool bdrv_users_write_cache(BlockDriverState *bs)
{
    for (GList *l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        if (c->parent_blk && !blk_enable_write_cache(c->parent_blk)) {
            return false;
        }
    }
    return true;
}

static int bdrv_backing_depth(BlockDriverState *bs)
{
    int depth = 0;

    for (bs = bdrv_backing_chain_next(bs); bs;
         bs = bdrv_backing_chain_next(bs)) {
        depth++;
    }
    return depth;
}

static const char *const bdrv_detect_zeroes_names[] = {
    [BLOCKDEV_DETECT_ZEROES_OPTIONS_OFF] = "off",
    [BLOCKDEV_DETECT_ZEROES_OPTIONS_ON] = "on",
    [BLOCKDEV_DETECT_ZEROES_OPTIONS_UNMAP] = "unmap",
};

JsonNode *bdrv_block_device_info(BlockDriverState *bs, bool flat,
                                 Error **errp)
{
    static const char *const throttle[] = {
        "bps", "bps_rd", "bps_wr", "iops", "iops_rd", "iops_wr",
    };
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(ImageInfo) info = bdrv_query_image_info(bs, flat, errp);

    if (!info) {
        return NULL;
    }
    json_builder_begin_object(b);
    qapi_add_str(b, "file", bs->filename);
    qapi_add_str(b, "node-name", bdrv_get_node_name(bs));
    /* a node found corrupt refuses writes: read-only to its users */
    qapi_add_bool(b, "ro", bdrv_is_read_only(bs) || bs->corrupt);
    qapi_add_str(b, "drv", bdrv_get_format_name(bs));
    /* QEMU's: the name of the backing node, not what the image records */
    if (bs->backing) {
        qapi_add_str(b, "backing_file", bs->backing->bs->filename);
    }
    qapi_add_int(b, "backing_file_depth", bdrv_backing_depth(bs));
    qapi_add_bool(b, "encrypted", bs->encrypted);
    qapi_add_str(b, "detect_zeroes",
                 bdrv_detect_zeroes_names[bs->detect_zeroes]);
    for (size_t i = 0; i < ARRAY_SIZE(throttle); i++) {
        qapi_add_int(b, throttle[i], 0);
    }
    qapi_add_node(b, "image", image_info_to_json(info));
    json_builder_set_member_name(b, "cache");
    json_builder_begin_object(b);
    qapi_add_bool(b, "writeback", bdrv_users_write_cache(bs));
    qapi_add_bool(b, "direct", bs->open_flags & BDRV_O_NOCACHE);
    qapi_add_bool(b, "no-flush", bs->open_flags & BDRV_O_NO_FLUSH);
    json_builder_end_object(b);
    qapi_add_int(b, "write_threshold", bdrv_write_threshold_get(bs));
    if (bdrv_dirty_bitmap_first(bs)) {
        qapi_add_node(b, "dirty-bitmaps", bdrv_query_dirty_bitmaps(bs));
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* The counters of BlockDeviceStats, the ones a source has and 0 else. */
typedef struct QapiStatsCounters {
    uint64_t bytes[BLOCK_MAX_IOTYPE];
    uint64_t ops[BLOCK_MAX_IOTYPE];
    uint64_t failed[BLOCK_MAX_IOTYPE];
    uint64_t invalid[BLOCK_MAX_IOTYPE];
    uint64_t time_ns[BLOCK_MAX_IOTYPE];
    uint64_t wr_highest_offset;
    int64_t last_access_time_ns;    /* 0: never, or not kept */
    bool accounted;                 /* failures and invalid requests count */
} QapiStatsCounters;

static JsonNode *qapi_stats_to_json(const QapiStatsCounters *c)
{
    static const struct {
        const char *prefix;
        BlockAcctType type;
    } kinds[] = {
        { "rd", BLOCK_ACCT_READ },
        { "wr", BLOCK_ACCT_WRITE },
        { "flush", BLOCK_ACCT_FLUSH },
        { "unmap", BLOCK_ACCT_UNMAP },
    };
    g_autoptr(JsonBuilder) b = json_builder_new();
    char name[64];

    json_builder_begin_object(b);
    qapi_add_int(b, "rd_bytes", c->bytes[BLOCK_ACCT_READ]);
    qapi_add_int(b, "wr_bytes", c->bytes[BLOCK_ACCT_WRITE]);
    qapi_add_int(b, "unmap_bytes", c->bytes[BLOCK_ACCT_UNMAP]);
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        snprintf(name, sizeof(name), "%s_operations", kinds[i].prefix);
        qapi_add_int(b, name, c->ops[kinds[i].type]);
    }
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        snprintf(name, sizeof(name), "%s_total_time_ns", kinds[i].prefix);
        qapi_add_int(b, name, c->time_ns[kinds[i].type]);
    }
    qapi_add_int(b, "wr_highest_offset", c->wr_highest_offset);
    qapi_add_int(b, "rd_merged", 0);
    qapi_add_int(b, "wr_merged", 0);
    qapi_add_int(b, "unmap_merged", 0);
    if (c->last_access_time_ns) {
        qapi_add_int(b, "idle_time_ns",
                     get_clock_ns() - c->last_access_time_ns);
    }
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        snprintf(name, sizeof(name), "failed_%s_operations", kinds[i].prefix);
        qapi_add_int(b, name, c->failed[kinds[i].type]);
    }
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        snprintf(name, sizeof(name), "invalid_%s_operations",
                 kinds[i].prefix);
        qapi_add_int(b, name, c->invalid[kinds[i].type]);
    }
    qapi_add_bool(b, "account_invalid", c->accounted);
    qapi_add_bool(b, "account_failed", c->accounted);
    json_builder_set_member_name(b, "timed_stats");
    json_builder_begin_array(b);
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *blk_query_stats(BlockBackend *blk)
{
    const BlockAcctStats *s = blk_get_stats(blk);
    QapiStatsCounters c = {
        .wr_highest_offset = s->wr_highest_offset,
        .last_access_time_ns = s->last_access_time_ns,
        .accounted = true,
    };

    for (int t = 0; t < BLOCK_MAX_IOTYPE; t++) {
        c.bytes[t] = s->nr_bytes[t];
        c.ops[t] = s->nr_ops[t];
        c.failed[t] = s->failed_ops[t];
        c.invalid[t] = s->invalid_ops[t];
        c.time_ns[t] = s->total_time_ns[t];
    }
    return qapi_stats_to_json(&c);
}

/* A node's own counters: the requests that reached its driver. */
static JsonNode *bdrv_node_stats(BlockDriverState *bs)
{
    const BdrvNodeStats *s = &bs->stats;
    QapiStatsCounters c = { 0 };

    c.bytes[BLOCK_ACCT_READ] = s->bytes_read;
    c.bytes[BLOCK_ACCT_WRITE] = s->bytes_written;
    c.ops[BLOCK_ACCT_READ] = s->reads;
    c.ops[BLOCK_ACCT_WRITE] = s->writes + s->zero_writes;
    c.ops[BLOCK_ACCT_FLUSH] = s->flushes;
    c.ops[BLOCK_ACCT_UNMAP] = s->discards;
    return qapi_stats_to_json(&c);
}

JsonNode *bdrv_query_node_stats(BlockDriverState *bs)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    if (bs->node_name[0]) {
        qapi_add_str(b, "node-name", bdrv_get_node_name(bs));
    }
    qapi_add_node(b, "stats", bdrv_node_stats(bs));
    if (bs->file) {
        qapi_add_node(b, "parent", bdrv_query_node_stats(bs->file->bs));
    }
    if (bs->backing) {
        qapi_add_node(b, "backing", bdrv_query_node_stats(bs->backing->bs));
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
