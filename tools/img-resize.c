/*
 * qblock-img resize: changes the virtual size of an image (grow, or
 * shrink with --shrink), with qemu-img's size syntax (+N, -N, N) and
 * preallocation modes.
 */
#include "qblock-img.h"

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

int img_resize(int argc, char **argv)
{
    enum {
        OPTION_PREALLOCATION = IMG_OPTION_OWN,
        OPTION_SHRINK,
    };
    static const struct option long_options[] = {
        { "preallocation", required_argument, NULL, OPTION_PREALLOCATION },
        { "shrink", no_argument, NULL, OPTION_SHRINK },
        { NULL, 0, NULL, 0 }
    };
    ImgCommonOpts co = { .open = { .flags = BDRV_O_RDWR | BDRV_O_RESIZE } };
    PreallocMode prealloc = PREALLOC_MODE_OFF;
    bool shrink = false;
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

    while ((c = img_getopt(argc, argv, ":f:hq",
                           IMG_LONG_OBJECT | IMG_LONG_IMAGE_OPTS,
                           long_options, &co)) != -1) {
        switch (c) {
        case OPTION_PREALLOCATION:
            ret = qemu_name_index(PreallocMode_str, PREALLOC_MODE__MAX,
                                  optarg);
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

    blk = img_open(filename, &co.open);
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
    } else if (!co.quiet) {
        printf("Image resized.\n");
    }
out:
    blk_unref(blk);
    return ret < 0 ? 1 : 0;
}
