/*
 * qblock-img amend: changes the options of an existing image (compat
 * level, refcount width, lazy refcounts, size, ...) in place, as
 * qemu-img amend does.
 */
#include "qblock-img.h"

#include "qblock/block-driver.h"
#include "qblock/block-node.h"

static int img_amend_print_help(const char *fmt)
{
    const BlockDriver *drv = img_find_format(fmt);

    if (!drv) {
        return 1;
    }
    if (!bdrv_driver_can_amend(drv)) {
        error_report("Format driver '%s' does not support option amendment",
                     fmt);
        return 1;
    }
    printf("Amend options for '%s':\n", fmt);
    qemu_opts_print_help(bdrv_driver_amend_opts(drv), false);
    return 0;
}

static void img_amend_status(BlockDriverState *bs, int64_t done,
                             int64_t total, void *opaque)
{
    img_progress_print(opaque, 100.0 * done / total, 0);
}

/*
 * Parses -o against the format's amend options; an option only creation
 * knows gets qemu-img's hint.  NULL after printing the error.
 */
static QemuOpts *img_amend_parse(const BlockDriver *drv, const char *options)
{
    Error *err = NULL;
    const QemuOptsList *amend_opts = bdrv_driver_amend_opts(drv);
    const QemuOptsList *create_opts = bdrv_driver_create_opts(drv);
    QemuOpts *opts = qemu_opts_parse(amend_opts, options, &err);
    QemuOptsList *both;
    QemuOpts *create;

    if (opts) {
        return opts;
    }
    both = qemu_opts_append(NULL, amend_opts);
    if (create_opts) {
        both = qemu_opts_append(both, create_opts);
    }
    create = qemu_opts_parse(both, options, NULL);
    if (create) {
        error_append_hint(&err, "This option is only supported for image "
                          "creation\n");
        qemu_opts_del(create);
    }
    qemu_opts_free(both);
    error_report_err(err);
    return NULL;
}

int img_amend(int argc, char **argv)
{
    enum {
        OPTION_FORCE = IMG_OPTION_OWN,
    };
    static const struct option long_options[] = {
        { "force", no_argument, NULL, OPTION_FORCE },
        { NULL, 0, NULL, 0 }
    };
    ImgCommonOpts co = { .open = { .flags = BDRV_O_RDWR } };
    const char *cache = IMG_CACHE_DEFAULT, *filename;
    g_autofree char *options = NULL;
    ImgProgress progress;
    BlockBackend *blk = NULL;
    QemuOpts *opts = NULL;
    BlockDriverState *bs;
    bool show_progress = false, force = false;
    Error *err = NULL;
    int c, ret = 1;

    while ((c = img_getopt(argc, argv, ":ho:f:t:pq",
                           IMG_LONG_OBJECT | IMG_LONG_IMAGE_OPTS,
                           long_options, &co)) != -1) {
        switch (c) {
        case 'o':
            options = img_accumulate_options(options, optarg);
            break;
        case 't':
            cache = optarg;
            break;
        case 'p':
            show_progress = true;
            break;
        case OPTION_FORCE:
            force = true;
            break;
        }
    }
    if (!options) {
        img_error_exit("Must specify options (-o)");
    }
    img_progress_init(&progress, show_progress && !co.quiet, 1.0);
    filename = optind == argc - 1 ? argv[argc - 1] : NULL;
    if (co.open.fmt && img_has_help_option(options)) {
        ret = img_amend_print_help(co.open.fmt);
        goto out;
    }
    if (!filename) {
        error_report("Expecting one image file name");
        goto out;
    }
    if (img_parse_cache(cache, &co.open) < 0) {
        error_report("Invalid cache option: %s", cache);
        goto out;
    }
    blk = img_open(filename, &co.open);
    if (!blk) {
        goto out;
    }
    bs = blk_bs(blk);
    if (img_has_help_option(options)) {
        ret = img_amend_print_help(bdrv_get_format_name(bs));
        goto out;
    }
    if (!bdrv_driver_can_amend(bdrv_get_driver(bs))) {
        error_report("Format driver '%s' does not support option amendment",
                     bdrv_get_format_name(bs));
        goto out;
    }
    opts = img_amend_parse(bdrv_get_driver(bs), options);
    if (!opts) {
        goto out;
    }
    /* 0 and 100 are printed even when the driver reports nothing */
    img_progress_print(&progress, 0, 0);
    ret = bdrv_amend(bs, opts, img_amend_status, &progress, force, &err);
    img_progress_print(&progress, 100, 0);
    if (ret < 0) {
        error_report_err(err);
        ret = 1;
    } else {
        ret = 0;
    }

out:
    img_progress_end(&progress);
    qemu_opts_del(opts);
    blk_unref(blk);
    return ret;
}
