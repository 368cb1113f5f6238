/*
 * qblock-img info, map and check: the sub-commands that describe an image
 * without changing its content (check -r aside).
 */
#include "qblock-img.h"

#include "block/block_int.h"
#include "block/qapi.h"
#include "block/snapshot.h"

static void img_dump_human_info(const ImageInfo *info)
{
    g_autofree char *size = size_to_str(info->virtual_size);
    g_autofree char *dsize = info->actual_size >= 0 ?
                             size_to_str(info->actual_size) :
                             g_strdup("unavailable");
    g_autofree char *specific =
        image_info_specific_human(info->format_specific);

    printf("image: %s\n"
           "file format: %s\n"
           "virtual size: %s (%" PRId64 " bytes)\n"
           "disk size: %s\n",
           info->filename, info->format, size, info->virtual_size, dsize);
    if (info->cluster_size) {
        printf("cluster_size: %d\n", info->cluster_size);
    }
    if (info->dirty_flag) {
        printf("cleanly shut down: no\n");
    }
    if (info->backing_filename) {
        printf("backing file: %s", info->backing_filename);
        if (!info->full_backing_filename) {
            printf(" (cannot determine actual path)");
        } else if (strcmp(info->backing_filename,
                          info->full_backing_filename)) {
            printf(" (actual path: %s)", info->full_backing_filename);
        }
        printf("\n");
        if (info->backing_format) {
            printf("backing file format: %s\n", info->backing_format);
        }
    }
    if (info->nb_snapshots > 0) {
        img_snapshot_print_list(info->snapshots, info->nb_snapshots);
    }
    if (specific) {
        printf("Format specific information:\n%s", specific);
    }
}

/*
 * Opens each image of the chain in turn (without its backing file) and
 * collects its information.  Returns NULL after printing an error.
 */
static GList *img_collect_image_info_list(const char *filename,
                                          const ImgOpenOptions *first,
                                          bool chain)
{
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash,
                                                       g_str_equal,
                                                       g_free, NULL);
    ImgOpenOptions o = *first;
    g_autofree char *name = g_strdup(filename);
    g_autofree char *fmt = g_strdup(first->fmt);
    GList *list = NULL;

    while (name) {
        BlockBackend *blk;
        ImageInfo *info;
        Error *err = NULL;

        if (g_hash_table_contains(seen, name)) {
            error_report("Backing file '%s' creates an infinite loop.",
                         name);
            goto fail;
        }
        g_hash_table_add(seen, g_strdup(name));

        o.fmt = fmt;
        blk = img_open(name, &o);
        if (!blk) {
            goto fail;
        }
        info = bdrv_query_image_info(blk_bs(blk), true, &err);
        blk_unref(blk);
        if (!info) {
            error_report_err(err);
            goto fail;
        }
        list = g_list_append(list, info);

        g_clear_pointer(&name, g_free);
        g_clear_pointer(&fmt, g_free);
        if (chain) {
            if (info->full_backing_filename) {
                name = g_strdup(info->full_backing_filename);
            } else if (info->backing_filename) {
                error_report("Could not determine absolute backing filename,"
                             " but backing filename '%s' present",
                             info->backing_filename);
                goto fail;
            }
            fmt = g_strdup(info->backing_format);
        }
        o.image_opts = false;
    }
    return list;

fail:
    g_list_free_full(list, (GDestroyNotify)image_info_free);
    return NULL;
}

int img_info(int argc, char **argv)
{
    enum {
        OPTION_OUTPUT = 256,
        OPTION_BACKING_CHAIN,
        OPTION_IMAGE_OPTS,
    };
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "format", required_argument, NULL, 'f' },
        { "output", required_argument, NULL, OPTION_OUTPUT },
        { "backing-chain", no_argument, NULL, OPTION_BACKING_CHAIN },
        { "image-opts", no_argument, NULL, OPTION_IMAGE_OPTS },
        { "force-share", no_argument, NULL, 'U' },
        { NULL, 0, NULL, 0 }
    };
    ImgOpenOptions o = { .flags = BDRV_O_NO_BACKING | BDRV_O_NO_IO };
    const char *output = NULL;
    bool chain = false, json = false;
    GList *list;
    int c;

    while ((c = getopt_long(argc, argv, ":f:hU", long_options,
                            NULL)) != -1) {
        switch (c) {
        case ':':
        case '?':
            img_bad_option(c, argv);
        case 'h':
            img_help();
        case 'f':
            o.fmt = optarg;
            break;
        case 'U':
            o.force_share = true;
            break;
        case OPTION_OUTPUT:
            output = optarg;
            break;
        case OPTION_BACKING_CHAIN:
            chain = true;
            break;
        case OPTION_IMAGE_OPTS:
            o.image_opts = true;
            break;
        }
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting one image file name");
    }
    if (output && !img_parse_output(output, &json)) {
        return 1;
    }

    list = img_collect_image_info_list(argv[optind], &o, chain);
    if (!list) {
        return 1;
    }
    if (json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        g_autoptr(JsonNode) root = NULL;

        if (chain) {
            json_builder_begin_array(b);
            for (GList *l = list; l; l = l->next) {
                json_builder_add_value(b, image_info_to_json(l->data));
            }
            json_builder_end_array(b);
            root = json_builder_get_root(b);
        } else {
            root = image_info_to_json(list->data);
        }
        img_json_print(root);
    } else {
        for (GList *l = list; l; l = l->next) {
            if (l != list) {
                printf("\n");
            }
            img_dump_human_info(l->data);
        }
    }
    g_list_free_full(list, (GDestroyNotify)image_info_free);
    return 0;
}

/* One run of the map: a range whose status is the same throughout. */
typedef struct ImgMapEntry {
    int64_t start;
    int64_t length;
    int64_t offset;
    bool has_offset;
    bool data;
    bool zero;
    bool present;
    int depth;
    /* the node holding the data, NULL if unknown; not owned */
    const char *filename;
} ImgMapEntry;

/*
 * Status of [offset, offset + bytes) in the first layer of the chain that
 * says something about it (data or zeroes); deeper layers count in depth.
 */
static int img_map_block_status(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, ImgMapEntry *e)
{
    BlockDriverState *file = NULL;
    int64_t map = 0;
    int depth = 0;
    int ret;

    for (;;) {
        ret = bdrv_block_status(bs, offset, bytes, &bytes, &map, &file);
        if (ret < 0) {
            return ret;
        }
        if (ret & (BDRV_BLOCK_ZERO | BDRV_BLOCK_DATA)) {
            break;
        }
        if (!bs->backing) {
            ret = 0;
            break;
        }
        bs = bs->backing->bs;
        depth++;
    }

    *e = (ImgMapEntry) {
        .start = offset,
        .length = bytes,
        .data = ret & BDRV_BLOCK_DATA,
        .zero = ret & BDRV_BLOCK_ZERO,
        .present = ret & BDRV_BLOCK_ALLOCATED,
        .has_offset = ret & BDRV_BLOCK_OFFSET_VALID,
        .offset = map,
        .depth = depth,
    };
    if (file && e->has_offset) {
        bdrv_refresh_filename(file);
        e->filename = file->filename;
    }
    return 0;
}

static bool img_map_mergeable(const ImgMapEntry *curr,
                              const ImgMapEntry *next)
{
    if (curr->length == 0) {
        return false;
    }
    if (curr->zero != next->zero || curr->data != next->data ||
        curr->depth != next->depth || curr->present != next->present ||
        !curr->filename != !next->filename ||
        curr->has_offset != next->has_offset) {
        return false;
    }
    if (curr->filename && strcmp(curr->filename, next->filename)) {
        return false;
    }
    if (curr->has_offset && curr->offset + curr->length != next->offset) {
        return false;
    }
    return true;
}

static int img_map_dump_entry(bool json, const ImgMapEntry *e, bool last)
{
    if (!json) {
        if (e->data && !e->has_offset) {
            error_report("File contains external, encrypted or compressed "
                         "clusters.");
            return -1;
        }
        /* The human format shows only where guest data lives. */
        if (e->data && !e->zero) {
            printf("%#-16" PRIx64 "%#-16" PRIx64 "%#-16" PRIx64 "%s\n",
                   e->start, e->length, e->has_offset ? e->offset : 0,
                   e->filename ? e->filename : "");
        }
        return 0;
    }
    printf("{ \"start\": %" PRId64 ", \"length\": %" PRId64 ", "
           "\"depth\": %d, \"present\": %s, \"zero\": %s, \"data\": %s",
           e->start, e->length, e->depth, e->present ? "true" : "false",
           e->zero ? "true" : "false", e->data ? "true" : "false");
    if (e->has_offset) {
        printf(", \"offset\": %" PRId64, e->offset);
    }
    putchar('}');
    if (!last) {
        puts(",");
    }
    return 0;
}

int img_map(int argc, char **argv)
{
    enum {
        OPTION_OUTPUT = 256,
        OPTION_IMAGE_OPTS,
        OPTION_START_OFFSET,
        OPTION_MAX_LENGTH,
    };
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "format", required_argument, NULL, 'f' },
        { "output", required_argument, NULL, OPTION_OUTPUT },
        { "image-opts", no_argument, NULL, OPTION_IMAGE_OPTS },
        { "force-share", no_argument, NULL, 'U' },
        { "start-offset", required_argument, NULL, OPTION_START_OFFSET },
        { "max-length", required_argument, NULL, OPTION_MAX_LENGTH },
        { NULL, 0, NULL, 0 }
    };
    ImgOpenOptions o = { 0 };
    const char *output = NULL;
    int64_t start_offset = 0, max_length = -1, length;
    ImgMapEntry curr = { 0 }, next;
    bool json = false;
    BlockBackend *blk;
    int c, ret = 0;

    while ((c = getopt_long(argc, argv, ":f:hU", long_options,
                            NULL)) != -1) {
        switch (c) {
        case ':':
        case '?':
            img_bad_option(c, argv);
        case 'h':
            img_help();
        case 'f':
            o.fmt = optarg;
            break;
        case 'U':
            o.force_share = true;
            break;
        case OPTION_OUTPUT:
            output = optarg;
            break;
        case OPTION_IMAGE_OPTS:
            o.image_opts = true;
            break;
        case OPTION_START_OFFSET:
            start_offset = img_cvtnum("start offset", optarg);
            if (start_offset < 0) {
                return 1;
            }
            break;
        case OPTION_MAX_LENGTH:
            max_length = img_cvtnum("max length", optarg);
            if (max_length < 0) {
                return 1;
            }
            break;
        }
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting one image file name");
    }
    if (output && !img_parse_output(output, &json)) {
        return 1;
    }

    blk = img_open(argv[optind], &o);
    if (!blk) {
        return 1;
    }
    if (json) {
        putchar('[');
    } else {
        printf("%-16s%-16s%-16s%s\n", "Offset", "Length", "Mapped to",
               "File");
    }

    length = blk_getlength(blk);
    if (length < 0) {
        error_report("Failed to get size for '%s'", argv[optind]);
        ret = -1;
        goto out;
    }
    if (max_length != -1) {
        length = MIN(start_offset + max_length, length);
    }

    curr.start = start_offset;
    while (curr.start + curr.length < length) {
        int64_t offset = curr.start + curr.length;

        ret = img_map_block_status(blk_bs(blk), offset, length - offset,
                                   &next);
        if (ret < 0) {
            error_report("Could not read file metadata: %s",
                         strerror(-ret));
            goto out;
        }
        if (img_map_mergeable(&curr, &next)) {
            curr.length += next.length;
            continue;
        }
        if (curr.length > 0) {
            ret = img_map_dump_entry(json, &curr, false);
            if (ret < 0) {
                goto out;
            }
        }
        curr = next;
    }
    ret = img_map_dump_entry(json, &curr, true);
    if (json) {
        puts("]");
    }
out:
    blk_unref(blk);
    return ret < 0;
}

/* The result of one check pass, as qemu-img reports it. */
typedef struct ImgCheck {
    const char *filename;
    const char *format;
    BdrvCheckResult r;
} ImgCheck;

static int img_collect_check(BlockDriverState *bs, ImgCheck *check,
                             const char *filename, BdrvCheckMode fix)
{
    check->filename = filename;
    check->format = bdrv_get_format_name(bs);
    return bdrv_check(bs, &check->r, fix);
}

static void img_dump_human_check(const ImgCheck *check)
{
    const BdrvCheckResult *r = &check->r;

    if (!(r->corruptions || r->leaks || r->check_errors)) {
        printf("No errors were found on the image.\n");
    } else {
        if (r->corruptions) {
            printf("\n%d errors were found on the image.\n"
                   "Data may be corrupted, or further writes to the image "
                   "may corrupt it.\n", r->corruptions);
        }
        if (r->leaks) {
            printf("\n%d leaked clusters were found on the image.\n"
                   "This means waste of disk space, but no harm to data.\n",
                   r->leaks);
        }
        if (r->check_errors) {
            printf("\n%d internal errors have occurred during the check.\n",
                   r->check_errors);
        }
    }
    if (r->bfi.total_clusters && r->bfi.allocated_clusters) {
        printf("%" PRId64 "/%" PRId64 " = %0.2f%% allocated, "
               "%0.2f%% fragmented, %0.2f%% compressed clusters\n",
               r->bfi.allocated_clusters, r->bfi.total_clusters,
               r->bfi.allocated_clusters * 100.0 / r->bfi.total_clusters,
               r->bfi.fragmented_clusters * 100.0 /
               r->bfi.allocated_clusters,
               r->bfi.compressed_clusters * 100.0 /
               r->bfi.allocated_clusters);
    }
    if (r->image_end_offset) {
        printf("Image end offset: %" PRId64 "\n", r->image_end_offset);
    }
}

static void img_json_add_int(JsonBuilder *b, const char *name, int64_t val,
                             bool optional)
{
    if (optional && !val) {
        return;
    }
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, val);
}

static void img_dump_json_check(const ImgCheck *check)
{
    const BdrvCheckResult *r = &check->r;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "filename");
    json_builder_add_string_value(b, check->filename);
    json_builder_set_member_name(b, "format");
    json_builder_add_string_value(b, check->format);
    img_json_add_int(b, "check-errors", r->check_errors, false);
    img_json_add_int(b, "image-end-offset", r->image_end_offset, true);
    img_json_add_int(b, "corruptions", r->corruptions, true);
    img_json_add_int(b, "leaks", r->leaks, true);
    img_json_add_int(b, "corruptions-fixed", r->corruptions_fixed, true);
    img_json_add_int(b, "leaks-fixed", r->leaks_fixed, true);
    img_json_add_int(b, "total-clusters", r->bfi.total_clusters, true);
    img_json_add_int(b, "allocated-clusters", r->bfi.allocated_clusters,
                     true);
    img_json_add_int(b, "fragmented-clusters", r->bfi.fragmented_clusters,
                     true);
    img_json_add_int(b, "compressed-clusters", r->bfi.compressed_clusters,
                     true);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    img_json_print(root);
}

int img_check(int argc, char **argv)
{
    enum {
        OPTION_OUTPUT = 256,
        OPTION_IMAGE_OPTS,
    };
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "format", required_argument, NULL, 'f' },
        { "repair", required_argument, NULL, 'r' },
        { "output", required_argument, NULL, OPTION_OUTPUT },
        { "image-opts", no_argument, NULL, OPTION_IMAGE_OPTS },
        { "force-share", no_argument, NULL, 'U' },
        { NULL, 0, NULL, 0 }
    };
    ImgOpenOptions o = { .flags = BDRV_O_CHECK };
    const char *output = NULL, *cache = IMG_CACHE_DEFAULT, *filename;
    BdrvCheckMode fix = 0;
    bool json = false, quiet = false;
    ImgCheck check = { 0 };
    BlockBackend *blk;
    int c, ret;

    while ((c = getopt_long(argc, argv, ":hf:r:T:qU", long_options,
                            NULL)) != -1) {
        switch (c) {
        case ':':
        case '?':
            img_bad_option(c, argv);
        case 'h':
            img_help();
        case 'f':
            o.fmt = optarg;
            break;
        case 'r':
            o.flags |= BDRV_O_RDWR;
            if (!strcmp(optarg, "leaks")) {
                fix = BDRV_FIX_LEAKS;
            } else if (!strcmp(optarg, "all")) {
                fix = BDRV_FIX_LEAKS | BDRV_FIX_ERRORS;
            } else {
                img_error_exit("Unknown option value for -r "
                               "(expecting 'leaks' or 'all'): %s", optarg);
            }
            break;
        case 'T':
            cache = optarg;
            break;
        case 'q':
            quiet = true;
            break;
        case 'U':
            o.force_share = true;
            break;
        case OPTION_OUTPUT:
            output = optarg;
            break;
        case OPTION_IMAGE_OPTS:
            o.image_opts = true;
            break;
        }
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting one image file name");
    }
    filename = argv[optind];
    if (output && !img_parse_output(output, &json)) {
        return 1;
    }
    if (img_parse_cache(cache, &o) < 0) {
        error_report("Invalid source cache option: %s", cache);
        return 1;
    }

    blk = img_open(filename, &o);
    if (!blk) {
        return 1;
    }
    ret = img_collect_check(blk_bs(blk), &check, filename, fix);
    if (ret == -ENOTSUP) {
        error_report("This image format does not support checks");
        ret = 63;
        goto out;
    }

    if (!ret && (check.r.corruptions_fixed || check.r.leaks_fixed)) {
        int corruptions_fixed = check.r.corruptions_fixed;
        int leaks_fixed = check.r.leaks_fixed;

        if (!json && !quiet) {
            printf("The following inconsistencies were found and "
                   "repaired:\n\n"
                   "    %d leaked clusters\n"
                   "    %d corruptions\n\n"
                   "Double checking the fixed image now...\n",
                   leaks_fixed, corruptions_fixed);
        }
        ret = img_collect_check(blk_bs(blk), &check, filename, 0);
        check.r.corruptions_fixed = corruptions_fixed;
        check.r.leaks_fixed = leaks_fixed;
    }

    if (!ret && !quiet) {
        if (json) {
            img_dump_json_check(&check);
        } else {
            img_dump_human_check(&check);
        }
    }
    if (ret || check.r.check_errors) {
        if (ret) {
            error_report("Check failed: %s", strerror(-ret));
        } else {
            error_report("Check failed");
        }
        ret = 1;
    } else if (check.r.corruptions) {
        ret = 2;
    } else if (check.r.leaks) {
        ret = 3;
    }
out:
    blk_unref(blk);
    return ret;
}
