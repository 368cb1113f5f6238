/*
 * Nodes and BlockBackends described for the monitor (include/block/qapi.h).
 */
#include "block/qapi.h"

#include "block/block_int.h"

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

/* The driver's format-specific JSON, as qemu-img info prints it. */
static JsonNode *bdrv_format_specific(BlockDriverState *bs)
{
    g_autoptr(GString) json = g_string_new(NULL);
    g_autoptr(GString) human = g_string_new(NULL);

    if (!bs->drv->bdrv_get_specific_info) {
        return NULL;
    }
    bs->drv->bdrv_get_specific_info(bs, json, human);
    if (!json->len) {
        return NULL;
    }
    return json_parse_text(json->str, json->len, NULL);
}

/* ImageInfo of @bs; NULL with an error if its size cannot be read. */
static JsonNode *bdrv_image_info(BlockDriverState *bs, bool flat,
                                 Error **errp)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    int64_t size = bdrv_getlength(bs);
    int64_t actual = bdrv_get_allocated_file_size(bs);
    BlockDriverInfo bdi;
    bool has_bdi = bdrv_get_info(bs, &bdi) == 0;
    BlockDriverState *backing = bs->backing ? bs->backing->bs : NULL;
    JsonNode *specific;

    if (size < 0) {
        error_setg_errno(errp, -size, "Can't get size of node '%s'",
                         bdrv_get_node_name(bs));
        return NULL;
    }
    json_builder_begin_object(b);
    qapi_add_str(b, "filename", bs->filename);
    qapi_add_str(b, "format", bdrv_get_format_name(bs));
    if (has_bdi) {
        qapi_add_bool(b, "dirty-flag", bdi.is_dirty);
    }
    if (actual >= 0) {
        qapi_add_int(b, "actual-size", actual);
    }
    qapi_add_int(b, "virtual-size", size);
    if (has_bdi && bdi.cluster_size) {
        qapi_add_int(b, "cluster-size", bdi.cluster_size);
    }
    if (bs->backing_file[0]) {
        g_autofree char *full = bdrv_get_full_backing_filename_from_filename(
                                    bs->filename, bs->backing_file, NULL);

        qapi_add_str(b, "backing-filename", bs->backing_file);
        if (full) {
            qapi_add_str(b, "full-backing-filename", full);
        }
        if (bs->backing_format[0]) {
            qapi_add_str(b, "backing-filename-format", bs->backing_format);
        }
    }
    specific = bdrv_format_specific(bs);
    if (specific) {
        qapi_add_node(b, "format-specific", specific);
    }
    if (!flat && backing) {
        JsonNode *bi = bdrv_image_info(backing, false, errp);

        if (!bi) {
            return NULL;
        }
        qapi_add_node(b, "backing-image", bi);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
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
    JsonNode *image;

    bdrv_refresh_filename(bs);
    image = bdrv_image_info(bs, flat, errp);
    if (!image) {
        return NULL;
    }
    json_builder_begin_object(b);
    qapi_add_str(b, "file", bs->filename);
    qapi_add_str(b, "node-name", bdrv_get_node_name(bs));
    /* a node found corrupt refuses writes: read-only to its users */
    qapi_add_bool(b, "ro", bdrv_is_read_only(bs) || bs->corrupt);
    qapi_add_str(b, "drv", bdrv_get_format_name(bs));
    if (bs->backing_file[0]) {
        qapi_add_str(b, "backing_file", bs->backing_file);
    }
    qapi_add_int(b, "backing_file_depth", bdrv_backing_depth(bs));
    qapi_add_bool(b, "encrypted", false);
    qapi_add_str(b, "detect_zeroes",
                 bdrv_detect_zeroes_names[bs->detect_zeroes]);
    for (size_t i = 0; i < ARRAY_SIZE(throttle); i++) {
        qapi_add_int(b, throttle[i], 0);
    }
    qapi_add_node(b, "image", image);
    json_builder_set_member_name(b, "cache");
    json_builder_begin_object(b);
    qapi_add_bool(b, "writeback", bdrv_users_write_cache(bs));
    qapi_add_bool(b, "direct", bs->open_flags & BDRV_O_NOCACHE);
    qapi_add_bool(b, "no-flush", bs->open_flags & BDRV_O_NO_FLUSH);
    json_builder_end_object(b);
    qapi_add_int(b, "write_threshold", 0);
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
