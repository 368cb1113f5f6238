/*
 * qblock-img info: what an image and its backing chain are (format,
 * sizes, backing file, snapshots, format-specific data), human or JSON.
 */
#include "qblock-img.h"

#include "block/block_int.h"
#include "block/snapshot.h"

/* What `info` reports about one image of a chain. */
typedef struct ImgImageInfo {
    char *filename;
    const char *format;
    int64_t virtual_size;
    int64_t actual_size;        /* -1: unavailable */
    bool has_bdi;               /* bdrv_get_info() succeeded */
    BlockDriverInfo bdi;
    char *backing_filename;     /* NULL: no backing file */
    char *full_backing_filename;
    char *backing_format;       /* NULL: not recorded */
    JsonNode *format_specific;  /* NULL: the driver has nothing to say */
    char *format_specific_human;
    QEMUSnapshotInfo *snapshots;
    int nb_snapshots;
} ImgImageInfo;

static void img_image_info_free(ImgImageInfo *info)
{
    g_free(info->filename);
    g_free(info->backing_filename);
    g_free(info->full_backing_filename);
    g_free(info->backing_format);
    if (info->format_specific) {
        json_node_unref(info->format_specific);
    }
    g_free(info->format_specific_human);
    g_free(info->snapshots);
    g_free(info);
}

static void img_query_specific(BlockDriverState *bs, ImgImageInfo *info)
{
    g_autoptr(GString) json = g_string_new(NULL);
    g_autoptr(GString) human = g_string_new(NULL);

    if (!bs->drv->bdrv_get_specific_info) {
        return;
    }
    bs->drv->bdrv_get_specific_info(bs, json, human);
    if (json->len) {
        info->format_specific = json_from_string(json->str, NULL);
    }
    info->format_specific_human = img_format_specific_human(bs);
}

static ImgImageInfo *img_query_image_info(BlockDriverState *bs, Error **errp)
{
    ImgImageInfo *info = g_new0(ImgImageInfo, 1);

    bdrv_refresh_filename(bs);
    info->virtual_size = bdrv_getlength(bs);
    if (info->virtual_size < 0) {
        error_setg_errno(errp, -info->virtual_size,
                         "Can't get image size '%s'", bs->exact_filename);
        g_free(info);
        return NULL;
    }
    info->filename = g_strdup(bs->filename);
    info->format = bdrv_get_format_name(bs);
    info->actual_size = bdrv_get_allocated_file_size(bs);
    info->has_bdi = bdrv_get_info(bs, &info->bdi) == 0;
    if (bs->backing_file[0]) {
        info->backing_filename = g_strdup(bs->backing_file);
        info->full_backing_filename =
            bdrv_get_full_backing_filename_from_filename(bs->filename,
                                                         bs->backing_file,
                                                         NULL);
        if (bs->backing_format[0]) {
            info->backing_format = g_strdup(bs->backing_format);
        }
    }
    info->nb_snapshots = bdrv_snapshot_list(bs, &info->snapshots);
    if (info->nb_snapshots < 0) {
        error_setg_errno(errp, -info->nb_snapshots, "Can't list snapshots "
                         "of '%s'", bs->filename);
        img_image_info_free(info);
        return NULL;
    }
    img_query_specific(bs, info);
    return info;
}

static void img_dump_human_info(const ImgImageInfo *info)
{
    g_autofree char *size = size_to_str(info->virtual_size);
    g_autofree char *dsize = info->actual_size >= 0 ?
                             size_to_str(info->actual_size) :
                             g_strdup("unavailable");

    printf("image: %s\n"
           "file format: %s\n"
           "virtual size: %s (%" PRId64 " bytes)\n"
           "disk size: %s\n",
           info->filename, info->format, size, info->virtual_size, dsize);
    if (info->has_bdi && info->bdi.cluster_size) {
        printf("cluster_size: %d\n", info->bdi.cluster_size);
    }
    if (info->has_bdi && info->bdi.is_dirty) {
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
    if (info->format_specific_human) {
        printf("Format specific information:\n%s",
               info->format_specific_human);
    }
}

/* info's "snapshots": QEMU's SnapshotInfo members, icount if known. */
static void img_snapshots_to_json(JsonBuilder *b,
                                  const QEMUSnapshotInfo *tab, int n)
{
    json_builder_begin_array(b);
    for (int i = 0; i < n; i++) {
        const QEMUSnapshotInfo *sn = &tab[i];

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_string_value(b, sn->id_str);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, sn->name);
        json_builder_set_member_name(b, "vm-state-size");
        json_builder_add_int_value(b, sn->vm_state_size);
        json_builder_set_member_name(b, "date-sec");
        json_builder_add_int_value(b, sn->date_sec);
        json_builder_set_member_name(b, "date-nsec");
        json_builder_add_int_value(b, sn->date_nsec);
        json_builder_set_member_name(b, "vm-clock-sec");
        json_builder_add_int_value(b, sn->vm_clock_nsec / 1000000000);
        json_builder_set_member_name(b, "vm-clock-nsec");
        json_builder_add_int_value(b, sn->vm_clock_nsec % 1000000000);
        if (sn->icount != QEMU_SNAPSHOT_NO_ICOUNT) {
            json_builder_set_member_name(b, "icount");
            json_builder_add_int_value(b, sn->icount);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

static JsonNode *img_info_to_json(const ImgImageInfo *info)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    /* Members in QEMU's insertion order, which breaks bucket ties. */
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "filename");
    json_builder_add_string_value(b, info->filename);
    json_builder_set_member_name(b, "format");
    json_builder_add_string_value(b, info->format);
    if (info->has_bdi) {
        json_builder_set_member_name(b, "dirty-flag");
        json_builder_add_boolean_value(b, info->bdi.is_dirty);
    }
    if (info->actual_size >= 0) {
        json_builder_set_member_name(b, "actual-size");
        json_builder_add_int_value(b, info->actual_size);
    }
    json_builder_set_member_name(b, "virtual-size");
    json_builder_add_int_value(b, info->virtual_size);
    if (info->has_bdi && info->bdi.cluster_size) {
        json_builder_set_member_name(b, "cluster-size");
        json_builder_add_int_value(b, info->bdi.cluster_size);
    }
    if (info->backing_filename) {
        json_builder_set_member_name(b, "backing-filename");
        json_builder_add_string_value(b, info->backing_filename);
        if (info->full_backing_filename) {
            json_builder_set_member_name(b, "full-backing-filename");
            json_builder_add_string_value(b, info->full_backing_filename);
        }
        if (info->backing_format) {
            json_builder_set_member_name(b, "backing-filename-format");
            json_builder_add_string_value(b, info->backing_format);
        }
    }
    if (info->nb_snapshots > 0) {
        json_builder_set_member_name(b, "snapshots");
        img_snapshots_to_json(b, info->snapshots, info->nb_snapshots);
    }
    if (info->format_specific) {
        json_builder_set_member_name(b, "format-specific");
        json_builder_add_value(b, json_node_copy(info->format_specific));
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
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
        ImgImageInfo *info;
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
        info = img_query_image_info(blk_bs(blk), &err);
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
    g_list_free_full(list, (GDestroyNotify)img_image_info_free);
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
                           IMG_LONG_FORMAT | IMG_LONG_OUTPUT |
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
                json_builder_add_value(b, img_info_to_json(l->data));
            }
            json_builder_end_array(b);
            root = json_builder_get_root(b);
        } else {
            root = img_info_to_json(list->data);
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
    g_list_free_full(list, (GDestroyNotify)img_image_info_free);
    return 0;
}
