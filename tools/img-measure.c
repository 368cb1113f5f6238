/*
 * qblock-img measure: how big a new image of a format would be, for a
 * given size or for the content of an existing image (qemu-img measure).
 */
#include "qblock-img.h"

#include "qblock/block-driver.h"

static void img_measure_print(const BlockMeasureInfo *info, bool json)
{
    if (json) {
        g_autoptr(JsonBuilder) b = json_builder_new();

        json_builder_begin_object(b);
        img_json_add_int(b, "required", info->required, false);
        img_json_add_int(b, "fully-allocated", info->fully_allocated, false);
        if (info->has_bitmaps) {
            img_json_add_int(b, "bitmaps", info->bitmaps, false);
        }
        img_json_print_object(b);
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
                                      const ToolSnapshotArg *sn)
{
    BlockBackend *blk = img_open(filename, o);

    if (blk && tool_snapshot_arg_load(blk, sn) < 0) {
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

    *plist = qemu_opts_append(NULL, bdrv_driver_create_opts(drv));
    if (bdrv_driver_create_opts(proto)) {
        *plist = qemu_opts_append(*plist, bdrv_driver_create_opts(proto));
    }
    opts = options ? qemu_opts_parse(*plist, options, &err)
                   : qemu_opts_create(*plist);
    if (!opts) {
        error_report_err(err);
        error_report("Invalid options for file format '%s'",
                     bdrv_driver_name(drv));
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
        OPTION_SIZE = IMG_OPTION_OWN,
    };
    static const struct option long_options[] = {
        { "size", required_argument, NULL, OPTION_SIZE },
        { NULL, 0, NULL, 0 }
    };
    ImgCommonOpts co = { 0 };
    const char *out_fmt = "raw";
    const char *filename = NULL;
    g_autofree char *options = NULL;
    ToolSnapshotArg sn = { 0 };
    QemuOpts *opts = NULL;
    QemuOptsList *list = NULL;
    BlockBackend *blk = NULL;
    BlockMeasureInfo info = { 0 };
    const BlockDriver *drv;
    Error *err = NULL;
    int64_t size = -1;
    bool json = false;
    int c, ret = 1;

    while ((c = img_getopt(argc, argv, ":hf:O:o:l:U",
                           IMG_LONG_OBJECT | IMG_LONG_IMAGE_OPTS |
                           IMG_LONG_OUTPUT |
                           IMG_LONG_FORCE_SHARE,
                           long_options, &co)) != -1) {
        switch (c) {
        case 'O':
            out_fmt = optarg;
            break;
        case 'o':
            options = img_accumulate_options(options, optarg);
            break;
        case 'l':
            if (!tool_snapshot_arg_parse(&sn, optarg)) {
                error_report("Failed in parsing snapshot param '%s'",
                             optarg);
                goto out;
            }
            break;
        case OPTION_SIZE:
            size = img_cvtnum("image size", optarg);
            if (size < 0) {
                goto out;
            }
            break;
        }
    }
    if (co.output && !img_parse_output(co.output, &json)) {
        goto out;
    }
    if (argc - optind > 1) {
        error_report("At most one filename argument is allowed.");
        goto out;
    }
    if (argc - optind == 1) {
        filename = argv[optind];
    }
    if (!filename &&
        (co.open.image_opts || co.open.fmt || sn.id_or_name || sn.opts)) {
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
        blk = img_measure_open(filename, &co.open, &sn);
        if (!blk) {
            goto out;
        }
    }
    drv = img_find_format(out_fmt);
    if (!drv) {
        goto out;
    }
    if (!bdrv_driver_create_opts(drv)) {
        error_report("Format driver '%s' does not support image creation",
                     bdrv_driver_name(drv));
        goto out;
    }
    opts = img_measure_opts(drv, options, size, &list);
    if (!opts) {
        goto out;
    }
    if (bdrv_measure(drv, opts, blk ? blk_bs(blk) : NULL, &info, &err) < 0) {
        error_report_err(err);
        goto out;
    }
    img_measure_print(&info, json);
    ret = 0;

out:
    qemu_opts_del(opts);
    qemu_opts_free(list);
    tool_snapshot_arg_free(&sn);
    blk_unref(blk);
    return ret;
}
