/*
 * qblock-img create and resize: the sub-commands that make an image or
 * change its size.
 */
#include "qblock-img.h"

#include "block/block_int.h"

int img_print_create_help(const char *filename, const char *fmt)
{
    const BlockDriver *drv = bdrv_find_format(fmt);
    QemuOptsList *list;
    Error *err = NULL;

    if (!drv) {
        error_report("Unknown file format '%s'", fmt);
        return 1;
    }
    if (!drv->create_opts) {
        error_report("Format driver '%s' does not support image creation",
                     fmt);
        return 1;
    }
    list = qemu_opts_append(NULL, drv->create_opts);
    if (filename) {
        const BlockDriver *proto = bdrv_find_protocol(filename, true, &err);

        if (!proto) {
            error_report_err(err);
            qemu_opts_free(list);
            return 1;
        }
        if (!proto->create_opts) {
            error_report("Protocol driver '%s' does not support image "
                         "creation", proto->format_name);
            qemu_opts_free(list);
            return 1;
        }
        list = qemu_opts_append(list, proto->create_opts);
        printf("Supported options:\n");
    } else {
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
 * format's own options (not the protocol's), in table order.
 */
static void img_create_print_opts(const BlockDriver *drv, QemuOptsList *list,
                                  QemuOpts *opts)
{
    const char *sep = "";

    for (const QemuOptDesc *desc = list->desc; desc->name; desc++) {
        bool given = qemu_opt_has(opts, desc->name);
        const char *value;

        if (given) {
            value = qemu_opt_get(opts, desc->name);
        } else if (qemu_opts_find_desc(drv->create_opts, desc->name)) {
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
        } else if (given && (desc->type == QEMU_OPT_SIZE ||
                             desc->type == QEMU_OPT_NUMBER)) {
            printf("%" PRId64, (int64_t)qemu_opt_get_size(opts, desc->name,
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

/* qemu-img's bdrv_img_create(): everything after the command line. */
static int img_create_image(const char *filename, const char *fmt,
                            const char *base_filename, const char *base_fmt,
                            const char *options, int64_t img_size,
                            bool unsafe, bool quiet, Error **errp)
{
    const BlockDriver *drv, *proto;
    QemuOptsList *list = NULL;
    QemuOpts *opts = NULL;
    int64_t size;
    int ret = -EINVAL;

    drv = bdrv_find_format(fmt);
    if (!drv) {
        error_setg(errp, "Unknown file format '%s'", fmt);
        return -ENOENT;
    }
    proto = bdrv_find_protocol(filename, true, errp);
    if (!proto) {
        return -ENOENT;
    }
    if (!drv->create_opts) {
        error_setg(errp, "Format driver '%s' does not support image "
                   "creation", drv->format_name);
        return -ENOTSUP;
    }
    if (!proto->create_opts) {
        error_setg(errp, "Protocol driver '%s' does not support image "
                   "creation", proto->format_name);
        return -ENOTSUP;
    }
    list = qemu_opts_append(NULL, drv->create_opts);
    list = qemu_opts_append(list, proto->create_opts);

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
    if (base_filename) {
        if (!qemu_opts_find_desc(list, "backing_file")) {
            error_setg(errp, "Backing file not supported for file format "
                       "'%s'", fmt);
            goto out;
        }
        qemu_opt_set(opts, "backing_file", base_filename, &error_abort);
    }
    if (base_fmt) {
        if (!qemu_opts_find_desc(list, "backing_fmt")) {
            error_setg(errp, "Backing file format not supported for file "
                       "format '%s'", fmt);
            goto out;
        }
        qemu_opt_set(opts, "backing_fmt", base_fmt, &error_abort);
    }

    size = qemu_opt_has(opts, "size") ? (int64_t)qemu_opt_get_size(opts,
                                                                   "size", 0)
                                      : -1;
    if (img_create_backing(filename, opts, unsafe, &size, errp) < 0) {
        goto out;
    }
    if (size == -1) {
        error_setg(errp, "Image creation needs a size parameter");
        goto out;
    }

    if (!quiet) {
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
    if (opts) {
        qemu_opts_del(opts);
    }
    qemu_opts_free(list);
    return ret < 0 ? ret : 0;
}

int img_create(int argc, char **argv)
{
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    const char *fmt = "raw";
    const char *base_fmt = NULL, *base_filename = NULL, *filename;
    g_autofree char *options = NULL;
    bool quiet = false, unsafe = false;
    int64_t img_size = -1;
    Error *err = NULL;
    int c;

    while ((c = getopt_long(argc, argv, ":F:b:f:ho:qu", long_options,
                            NULL)) != -1) {
        switch (c) {
        case ':':
        case '?':
            img_bad_option(c, argv);
        case 'h':
            img_help();
        case 'F':
            base_fmt = optarg;
            break;
        case 'b':
            base_filename = optarg;
            break;
        case 'f':
            fmt = optarg;
            break;
        case 'o':
            options = img_accumulate_options(options, optarg);
            break;
        case 'q':
            quiet = true;
            break;
        case 'u':
            unsafe = true;
            break;
        }
    }

    filename = optind < argc ? argv[optind] : NULL;
    if (options && img_has_help_option(options)) {
        return img_print_create_help(filename, fmt);
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

    if (img_create_image(filename, fmt, base_filename, base_fmt, options,
                         img_size, unsafe, quiet, &err) < 0) {
        error_report("%s: %s", filename, error_get_pretty(err));
        if (error_get_hint(err)) {
            fputs(error_get_hint(err), stderr);
        }
        error_free(err);
        return 1;
    }
    return 0;
}

/* qemu-img parses the size of resize as a QemuOpts size option. */
static bool img_resize_parse_size(const char *text, uint64_t *size)
{
    if (qemu_strtosz(text, NULL, size) < 0) {
        error_report("Parameter 'size' expects a non-negative number "
                     "below 2^64");
        fprintf(stderr, "Optional suffix k, M, G, T, P or E means kilo-, "
                "mega-, giga-, tera-, peta-\nand exabytes, respectively.\n");
        return false;
    }
    return true;
}

static int img_parse_prealloc(const char *text)
{
    for (int i = 0; i < PREALLOC_MODE__MAX; i++) {
        if (!strcmp(text, PreallocMode_str[i])) {
            return i;
        }
    }
    return -1;
}

int img_resize(int argc, char **argv)
{
    enum {
        OPTION_IMAGE_OPTS = 256,
        OPTION_PREALLOCATION,
        OPTION_SHRINK,
    };
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "image-opts", no_argument, NULL, OPTION_IMAGE_OPTS },
        { "preallocation", required_argument, NULL, OPTION_PREALLOCATION },
        { "shrink", no_argument, NULL, OPTION_SHRINK },
        { NULL, 0, NULL, 0 }
    };
    ImgOpenOptions o = { .flags = BDRV_O_RDWR | BDRV_O_RESIZE };
    PreallocMode prealloc = PREALLOC_MODE_OFF;
    bool quiet = false, shrink = false;
    const char *size_text, *filename;
    int64_t current_size, total_size;
    uint64_t n;
    int relative;
    BlockBackend *blk;
    Error *err = NULL;
    int c, ret;

    /* The size is taken off argv first so that "-1G" is not an option. */
    if (argc < 3) {
        img_error_exit("Not enough arguments");
    }
    size_text = argv[--argc];

    while ((c = getopt_long(argc, argv, ":f:hq", long_options,
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
        case 'q':
            quiet = true;
            break;
        case OPTION_IMAGE_OPTS:
            o.image_opts = true;
            break;
        case OPTION_PREALLOCATION:
            ret = img_parse_prealloc(optarg);
            if (ret < 0) {
                error_report("Invalid preallocation mode '%s'", optarg);
                return 1;
            }
            prealloc = ret;
            break;
        case OPTION_SHRINK:
            shrink = true;
            break;
        }
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting image file name and size");
    }
    filename = argv[optind];

    switch (size_text[0]) {
    case '+':
        relative = 1;
        size_text++;
        break;
    case '-':
        relative = -1;
        size_text++;
        break;
    default:
        relative = 0;
        break;
    }
    if (!img_resize_parse_size(size_text, &n)) {
        return 1;
    }

    blk = img_open(filename, &o);
    if (!blk) {
        return 1;
    }
    current_size = blk_getlength(blk);
    if (current_size < 0) {
        error_report("Failed to inquire current image length: %s",
                     strerror(-current_size));
        ret = -1;
        goto out;
    }
    total_size = relative ? current_size + (int64_t)n * relative
                          : (int64_t)n;
    if (total_size <= 0) {
        error_report("New image size must be positive");
        ret = -1;
        goto out;
    }
    if (total_size <= current_size && prealloc != PREALLOC_MODE_OFF) {
        error_report("Preallocation can only be used for growing images");
        ret = -1;
        goto out;
    }
    if (total_size < current_size && !shrink) {
        error_report("Use the --shrink option to perform a shrink "
                     "operation.");
        warn_report("Shrinking an image will delete all data beyond the "
                    "shrunken image's end. Before performing such an "
                    "operation, make sure there is no important data "
                    "there.");
        ret = -1;
        goto out;
    }

    /* exact: reporting success for a size other than the one asked for
     * would mislead. */
    ret = blk_truncate(blk, total_size, true, prealloc, 0, &err);
    if (ret < 0) {
        error_report_err(err);
    } else if (!quiet) {
        printf("Image resized.\n");
    }
out:
    blk_unref(blk);
    return ret < 0 ? 1 : 0;
}
