/*
 * qblock-img create: makes a new image (format and protocol options,
 * backing file, size taken from the backing file when not given).
 */
#include "qblock-img.h"

#include "qblock/block-driver.h"
#include "qblock/block-node.h"

int img_print_create_help(const char *filename, const char *fmt)
{
    const BlockDriver *drv = img_find_format(fmt);
    QemuOptsList *list;
    Error *err = NULL;

    if (!drv) {
        return 1;
    }
    if (!bdrv_driver_create_opts(drv)) {
        error_report("Format driver '%s' does not support image creation",
                     fmt);
        return 1;
    }
    if (filename) {
        /* the format's options passed the check above: only the
         * protocol's can fail here */
        list = img_create_opts_list(drv, filename, &err);
        if (!list) {
            error_report_err(err);
            return 1;
        }
        printf("Supported options:\n");
    } else {
        list = qemu_opts_append(NULL, bdrv_driver_create_opts(drv));
        printf("Supported %s options:\n", fmt);
    }
    qemu_opts_print_help(list, false);
    if (!filename) {
        printf("\nThe protocol level may support further options.\n"
               "Specify the target filename to include those options.\n");
    }
    qemu_opts_free(list);
    return 0;
}

/* A string option value as qemu-img prints it: commas doubled. */
static void img_create_print_escaped(const char *value)
{
    for (const char *p = value; *p; p++) {
        if (*p == ',') {
            putchar(',');
        }
        putchar(*p);
    }
}

/*
 * The "Formatting" line: every option given, and the defaults of the
 * format's own options (not the protocol's), in table order.  Created
 * as the format itself (-f file), a protocol prints no defaults: QEMU's
 * protocols have none in their create options.
 */
static void img_create_print_opts(const BlockDriver *drv, QemuOptsList *list,
                                  QemuOpts *opts)
{
    const QemuOptsList *fmt_opts = bdrv_driver_create_opts(drv);
    bool print_defaults = !bdrv_driver_is_protocol(drv);
    const char *sep = "";

    for (const QemuOptDesc *desc = list->desc; desc->name; desc++) {
        bool given = qemu_opt_has(opts, desc->name);
        const char *value;

        if (given) {
            value = qemu_opt_get(opts, desc->name);
        } else if (print_defaults &&
                   qemu_opts_find_desc(fmt_opts, desc->name)) {
            value = desc->def_value_str;
        } else {
            value = NULL;
        }
        if (!value) {
            continue;
        }
        printf("%s%s=", sep, desc->name);
        if (desc->type == QEMU_OPT_STRING) {
            img_create_print_escaped(value);
        } else if (given && desc->type == QEMU_OPT_SIZE) {
            printf("%" PRId64, (int64_t)qemu_opt_get_size(opts, desc->name,
                                                          0));
        } else if (given && desc->type == QEMU_OPT_NUMBER) {
            printf("%" PRId64, (int64_t)qemu_opt_get_number(opts, desc->name,
                                                            0));
        } else {
            printf("%s", value);
        }
        sep = " ";
    }
}

/*
 * Sets the backing file options; opens the backing file (unless @unsafe)
 * to check it and to take the image size from it.
 */
static int img_create_backing(const char *filename, QemuOpts *opts,
                              bool unsafe, int64_t *size, Error **errp)
{
    const char *backing_file = qemu_opt_get(opts, "backing_file");
    const char *backing_fmt = qemu_opt_get(opts, "backing_fmt");
    g_autofree char *full = NULL;
    BlockDriverState *bs;
    QDict *options;

    if (!backing_file) {
        return 0;
    }
    if (!strcmp(filename, backing_file)) {
        error_setg(errp, "Error: Trying to create an image with the same "
                   "filename as the backing file");
        return -EINVAL;
    }
    if (backing_file[0] == '\0') {
        error_setg(errp, "Expected backing file name, got empty string");
        return -EINVAL;
    }
    if (unsafe) {
        return 0;
    }

    full = bdrv_get_full_backing_filename_from_filename(filename,
                                                        backing_file, errp);
    if (!full) {
        return -EINVAL;
    }
    options = qdict_new();
    if (backing_fmt) {
        qdict_put_str(options, "driver", backing_fmt);
    }
    qdict_put_bool(options, BDRV_OPT_FORCE_SHARE, true);
    bs = bdrv_open(full, NULL, options, BDRV_O_NO_BACKING | BDRV_O_NO_IO,
                   errp);
    if (!bs) {
        error_append_hint(errp, "Could not open backing image.\n");
        return -EINVAL;
    }
    if (!backing_fmt) {
        error_setg(errp, "Backing file specified without backing format");
        /* qemu-img ends this hint without a newline. */
        error_append_hint(errp, "Detected format of %s.",
                          bdrv_get_format_name(bs));
        bdrv_unref(bs);
        return -EINVAL;
    }
    if (*size == -1) {
        *size = bdrv_getlength(bs);
        if (*size < 0) {
            error_setg_errno(errp, -*size, "Could not get size of '%s'",
                             backing_file);
            bdrv_unref(bs);
            return -EINVAL;
        }
        qemu_opt_set_number(opts, "size", *size, &error_abort);
    }
    bdrv_unref(bs);
    return 0;
}

/*
 * Sets option @name (@what to people) to @value, -b's or -F's, if it was
 * given; false if format @fmt (options @list) has no such option.
 */
static bool img_create_set_backing_opt(QemuOpts *opts, QemuOptsList *list,
                                       const char *name, const char *value,
                                       const char *what, const char *fmt,
                                       Error **errp)
{
    if (!value) {
        return true;
    }
    if (!qemu_opts_find_desc(list, name)) {
        error_setg(errp, "%s not supported for file format '%s'", what, fmt);
        return false;
    }
    qemu_opt_set(opts, name, value, &error_abort);
    return true;
}

/* How to create: -u and -q. */
typedef enum ImgCreateFlags {
    IMG_CREATE_UNSAFE = 1 << 0, /* the backing file need not open */
    IMG_CREATE_QUIET = 1 << 1,  /* no "Formatting ..." line */
} ImgCreateFlags;

/* qemu-img's bdrv_img_create(): everything after the command line. */
static int img_create_image(const char *filename, const char *fmt,
                            const char *base_filename, const char *base_fmt,
                            const char *options, int64_t img_size,
                            ImgCreateFlags flags, Error **errp)
{
    const BlockDriver *drv;
    QemuOptsList *list = NULL;
    QemuOpts *opts = NULL;
    int64_t size;
    int ret = -EINVAL;

    drv = bdrv_find_format(fmt);
    if (!drv) {
        error_setg(errp, "Unknown file format '%s'", fmt);
        return -ENOENT;
    }
    list = img_create_opts_list(drv, filename, errp);
    if (!list) {
        return -ENOTSUP;
    }

    opts = options ? qemu_opts_parse(list, options, errp)
                   : qemu_opts_create(list);
    if (!opts) {
        goto out;
    }
    if (!qemu_opt_has(opts, "size")) {
        if (img_size != -1 &&
            !qemu_opt_set_number(opts, "size", img_size, errp)) {
            goto out;
        }
    } else if (img_size != -1) {
        error_setg(errp, "The image size must be specified only once");
        goto out;
    }
    if (!img_create_set_backing_opt(opts, list, "backing_file",
                                    base_filename, "Backing file", fmt,
                                    errp) ||
        !img_create_set_backing_opt(opts, list, "backing_fmt", base_fmt,
                                    "Backing file format", fmt, errp)) {
        goto out;
    }

    size = qemu_opt_has(opts, "size") ? (int64_t)qemu_opt_get_size(opts,
                                                                   "size", 0)
                                      : -1;
    if (img_create_backing(filename, opts, flags & IMG_CREATE_UNSAFE, &size,
                           errp) < 0) {
        goto out;
    }
    if (size == -1) {
        error_setg(errp, "Image creation needs a size parameter");
        goto out;
    }

    if (!(flags & IMG_CREATE_QUIET)) {
        printf("Formatting '%s', fmt=%s ", filename, fmt);
        img_create_print_opts(drv, list, opts);
        printf("\n");
        fflush(stdout);
    }

    ret = bdrv_create(drv, filename, opts, errp);
    if (ret == -EFBIG) {
        const char *cluster_size_hint =
            qemu_opt_get(opts, "cluster_size") ?
            " (try using a larger cluster size)" : "";

        error_free_or_abort(errp);
        error_setg(errp, "The image size is too large for file format "
                   "'%s'%s", fmt, cluster_size_hint);
    }

out:
    qemu_opts_del(opts);
    qemu_opts_free(list);
    return ret < 0 ? ret : 0;
}

int img_create(int argc, char **argv)
{
    ImgCommonOpts co = { .open = { .fmt = "raw" } };
    const char *base_fmt = NULL, *base_filename = NULL, *filename;
    g_autofree char *options = NULL;
    ImgCreateFlags flags = 0;
    int64_t img_size = -1;
    Error *err = NULL;
    int c;

    while ((c = img_getopt(argc, argv, ":F:b:f:ho:qu", IMG_LONG_OBJECT, NULL,
                           &co)) != -1) {
        switch (c) {
        case 'F':
            base_fmt = optarg;
            break;
        case 'b':
            base_filename = optarg;
            break;
        case 'o':
            options = img_accumulate_options(options, optarg);
            break;
        case 'u':
            flags |= IMG_CREATE_UNSAFE;
            break;
        }
    }

    filename = optind < argc ? argv[optind] : NULL;
    if (options && img_has_help_option(options)) {
        return img_print_create_help(filename, co.open.fmt);
    }
    if (optind >= argc) {
        img_error_exit("Expecting image file name");
    }
    optind++;
    if (optind < argc) {
        img_size = img_cvtnum("image size", argv[optind++]);
        if (img_size < 0) {
            return 1;
        }
    }
    if (optind != argc) {
        img_error_exit("Unexpected argument: %s", argv[optind]);
    }

    if (co.quiet) {
        flags |= IMG_CREATE_QUIET;
    }
    if (img_create_image(filename, co.open.fmt, base_filename, base_fmt,
                         options, img_size, flags, &err) < 0) {
        error_report("%s: %s", filename, error_get_pretty(err));
        if (error_get_hint(err)) {
            fputs(error_get_hint(err), stderr);
        }
        error_free(err);
        return 1;
    }
    return 0;
}
