/*
 * qblock-img info: what an image and its backing chain are (format,
 * sizes, backing file, snapshots, format-specific data), human or JSON.
 */
#include "qblock-img.h"

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
        OPTION_BACKING_CHAIN = IMG_OPTION_OWN,
    };
    static const struct option long_options[] = {
        { "backing-chain", no_argument, NULL, OPTION_BACKING_CHAIN },
        { NULL, 0, NULL, 0 }
    };
    ImgCommonOpts co = {
        .open = { .flags = BDRV_O_NO_BACKING | BDRV_O_NO_IO },
    };
    bool chain = false, json = false;
    GList *list;
    int c;

    while ((c = img_getopt(argc, argv, ":f:hU",
                           IMG_LONG_OBJECT | IMG_LONG_FORMAT | IMG_LONG_OUTPUT |
                           IMG_LONG_IMAGE_OPTS | IMG_LONG_FORCE_SHARE,
                           long_options, &co)) != -1) {
        switch (c) {
        case OPTION_BACKING_CHAIN:
            chain = true;
            break;
        }
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting one image file name");
    }
    if (co.output && !img_parse_output(co.output, &json)) {
        return 1;
    }

    list = img_collect_image_info_list(argv[optind], &co.open,
                                       chain);
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
