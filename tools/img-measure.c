/*
 * qblock-img measure: how big a new image of a format would be, for a
 * given size or for the content of an existing image (qemu-img measure).
 */
#include "qblock-img.h"

#include "block/block_int.h"
#include "block/snapshot.h"

/* measure -l snapshot.id=ID,snapshot.name=NAME */
static const QemuOptDesc img_measure_snapshot_desc[] = {
    { .name = "snapshot.id", .type = QEMU_OPT_STRING,
      .help = "ID of the internal snapshot" },
    { .name = "snapshot.name", .type = QEMU_OPT_STRING,
      .help = "name of the internal snapshot" },
    { NULL }
};

static const QemuOptsList img_measure_snapshot_opts = {
    .name = "internal-snapshot",
    .desc = img_measure_snapshot_desc,
};

static void img_measure_print(const BlockMeasureInfo *info, bool json)
{
    if (json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        g_autoptr(JsonNode) root = NULL;

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "required");
        json_builder_add_int_value(b, info->required);
        json_builder_set_member_name(b, "fully-allocated");
        json_builder_add_int_value(b, info->fully_allocated);
        if (info->has_bitmaps) {
            json_builder_set_member_name(b, "bitmaps");
            json_builder_add_int_value(b, info->bitmaps);
        }
        json_builder_end_object(b);
        root = json_builder_get_root(b);
        img_json_print(root);
        return;
    }
    printf("required size: %" PRIu64 "\n", info->required);
    printf("fully allocated size: %" PRIu64 "\n", info->fully_allocated);
    if (info->has_bitmaps) {
        printf("bitmaps size: %" PRIu64 "\n", info->bitmaps);
    }
}

/* Opens the source and shows the snapshot -l names, if any. */
static BlockBackend *img_measure_open(const char *filename,
                                      const ImgOpenOptions *o,
                                      QemuOpts *sn_opts,
                                      const char *snapshot_name)
{
    BlockBackend *blk = img_open(filename, o);
    Error *err = NULL;

    if (!blk) {
        return NULL;
    }
    if (sn_opts) {
        bdrv_snapshot_load_tmp(blk_bs(blk),
                               qemu_opt_get(sn_opts, "snapshot.id"),
                               qemu_opt_get(sn_opts, "snapshot.name"), &err);
    } else if (snapshot_name) {
        bdrv_snapshot_load_tmp_by_id_or_name(blk_bs(blk), snapshot_name,
                                             &err);
    }
    if (err) {
        error_report("Failed to load snapshot: %s", error_get_pretty(err));
        error_free(err);
        blk_unref(blk);
        return NULL;
    }
    return blk;
}

/* Creation options of @drv (and of the file protocol) from -o and --size. */
static QemuOpts *img_measure_opts(const BlockDriver *drv, const char *options,
                                  int64_t size, QemuOptsList **plist)
{
    const BlockDriver *proto = bdrv_find_protocol("", true, &error_abort);
    Error *err = NULL;
    QemuOpts *opts;

    *plist = qemu_opts_append(NULL, drv->create_opts);
    if (proto->create_opts) {
        *plist = qemu_opts_append(*plist, proto->create_opts);
    }
    opts = options ? qemu_opts_parse(*plist, options, &err)
                   : qemu_opts_create(*plist);
    if (!opts) {
        error_report_err(err);
        error_report("Invalid options for file format '%s'",
                     drv->format_name);
        return NULL;
    }
    if (size >= 0) {
        qemu_opt_set_number(opts, "size", size, &error_abort);
    }
    return opts;
}

int img_measure(int argc, char **argv)
{
    enum {
        OPTION_OUTPUT = 256,
        OPTION_SIZE,
        OPTION_IMAGE_OPTS,
    };
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "image-opts", no_argument, NULL, OPTION_IMAGE_OPTS },
        { "output", required_argument, NULL, OPTION_OUTPUT },
        { "size", required_argument, NULL, OPTION_SIZE },
        { "force-share", no_argument, NULL, 'U' },
        { NULL, 0, NULL, 0 }
    };
    ImgOpenOptions o = { 0 };
    const char *out_fmt = "raw", *snapshot_name = NULL;
    const char *filename = NULL, *output = NULL;
    g_autofree char *options = NULL;
    QemuOpts *sn_opts = NULL, *opts = NULL;
    QemuOptsList *list = NULL;
    BlockBackend *blk = NULL;
    BlockMeasureInfo info = { 0 };
    const BlockDriver *drv;
    Error *err = NULL;
    int64_t size = -1;
    bool json = false;
    int c, ret = 1;

    while ((c = getopt_long(argc, argv, ":hf:O:o:l:U", long_options,
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
        case 'O':
            out_fmt = optarg;
            break;
        case 'o':
            options = img_accumulate_options(options, optarg);
            break;
        case 'l':
            if (g_str_has_prefix(optarg, "snapshot.")) {
                if (sn_opts) {
                    qemu_opts_del(sn_opts);
                }
                sn_opts = qemu_opts_parse(&img_measure_snapshot_opts, optarg,
                                          &err);
                if (!sn_opts) {
                    error_report_err(err);
                    error_report("Failed in parsing snapshot param '%s'",
                                 optarg);
                    goto out;
                }
            } else {
                snapshot_name = optarg;
            }
            break;
        case 'U':
            o.force_share = true;
            break;
        case OPTION_OUTPUT:
            output = optarg;
            break;
        case OPTION_SIZE:
            size = img_cvtnum("image size", optarg);
            if (size < 0) {
                goto out;
            }
            break;
        case OPTION_IMAGE_OPTS:
            o.image_opts = true;
            break;
        }
    }
    if (output && !img_parse_output(output, &json)) {
        goto out;
    }
    if (argc - optind > 1) {
        error_report("At most one filename argument is allowed.");
        goto out;
    }
    if (argc - optind == 1) {
        filename = argv[optind];
    }
    if (!filename && (o.image_opts || o.fmt || snapshot_name || sn_opts)) {
        error_report("--image-opts, -f, and -l require a filename "
                     "argument.");
        goto out;
    }
    if (filename && size >= 0) {
        error_report("--size N cannot be used together with a filename.");
        goto out;
    }
    if (!filename && size < 0) {
        error_report("Either --size N or one filename must be specified.");
        goto out;
    }

    if (filename) {
        blk = img_measure_open(filename, &o, sn_opts, snapshot_name);
        if (!blk) {
            goto out;
        }
    }
    drv = bdrv_find_format(out_fmt);
    if (!drv) {
        error_report("Unknown file format '%s'", out_fmt);
        goto out;
    }
    if (!drv->create_opts) {
        error_report("Format driver '%s' does not support image creation",
                     drv->format_name);
        goto out;
    }
    opts = img_measure_opts(drv, options, size, &list);
    if (!opts) {
        goto out;
    }
    if (!drv->bdrv_measure) {
        error_report("Block driver '%s' does not support size measurement",
                     drv->format_name);
        goto out;
    }
    if (drv->bdrv_measure(opts, blk ? blk_bs(blk) : NULL, &info, &err) < 0) {
        error_report_err(err);
        goto out;
    }
    img_measure_print(&info, json);
    ret = 0;

out:
    if (opts) {
        qemu_opts_del(opts);
    }
    qemu_opts_free(list);
    if (sn_opts) {
        qemu_opts_del(sn_opts);
    }
    if (blk) {
        blk_unref(blk);
    }
    return ret;
}
