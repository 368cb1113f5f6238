/*
 * qblock-img dd: copies an image as dd(1) would (if=, of=, bs=, count=,
 * skip=), creating the output with the size the copy needs, as qemu-img
 * dd does.
 */
#include "qblock-img.h"

#include "qblock/block-driver.h"

/* The operands of dd, in the units qemu-img uses. */
typedef struct ImgDdArgs {
    const char *in_filename;
    const char *out_filename;
    int64_t bsz;
    int64_t count;
    int64_t skip;
    bool has_count;
    bool has_skip;
} ImgDdArgs;

static int img_dd_operand(ImgDdArgs *dd, const char *arg)
{
    g_autofree char *name = g_strdup(arg);
    char *value = strchr(name, '=');

    if (!value) {
        error_report("unrecognized operand %s", arg);
        return -1;
    }
    *value++ = '\0';
    if (!strcmp(name, "bs")) {
        dd->bsz = img_cvtnum_full("bs", value, 1, INT_MAX);
        return dd->bsz < 0 ? -1 : 0;
    }
    if (!strcmp(name, "count")) {
        dd->count = img_cvtnum("count", value);
        dd->has_count = true;
        return dd->count < 0 ? -1 : 0;
    }
    if (!strcmp(name, "skip")) {
        dd->skip = img_cvtnum("skip", value);
        dd->has_skip = true;
        return dd->skip < 0 ? -1 : 0;
    }
    if (!strcmp(name, "if")) {
        dd->in_filename = arg + (value - name);
        return 0;
    }
    if (!strcmp(name, "of")) {
        dd->out_filename = arg + (value - name);
        return 0;
    }
    error_report("unrecognized operand %s", name);
    return -1;
}

/* Creates the output image of dd with @size bytes. */
static int img_dd_create_output(const char *out_fmt, const char *filename,
                                int64_t size)
{
    const BlockDriver *drv = bdrv_find_format(out_fmt);
    QemuOptsList *list;
    QemuOpts *opts;
    Error *err = NULL;
    int ret;

    if (!drv) {
        error_report("Unknown file format");
        return -EINVAL;
    }
    list = img_create_opts_list(drv, filename, &err);
    if (!list) {
        error_report_err(err);
        return -EINVAL;
    }
    opts = qemu_opts_create(list);
    qemu_opt_set_number(opts, "size", size, &error_abort);
    ret = bdrv_create(drv, filename, opts, &err);
    if (ret < 0) {
        error_report("%s: error while creating output image: %s", filename,
                     error_get_pretty(err));
        error_free(err);
    }
    qemu_opts_del(opts);
    qemu_opts_free(list);
    return ret;
}

int img_dd(int argc, char **argv)
{
    ImgDdArgs dd = { .bsz = 512 };
    ImgCommonOpts co = { 0 };   /* of the input: -f, -U, --image-opts */
    ImgOpenOptions out_o = { .fmt = "raw", .flags = BDRV_O_RDWR };
    BlockBackend *blk_in = NULL, *blk_out = NULL;
    g_autofree uint8_t *buf = NULL;
    int64_t size, in_pos, out_pos;
    bool skip_too_far;
    int c, ret = -1;

    while ((c = img_getopt(argc, argv, ":hf:O:U",
                           IMG_LONG_OBJECT | IMG_LONG_IMAGE_OPTS |
                           IMG_LONG_FORCE_SHARE,
                           NULL, &co)) != -1) {
        switch (c) {
        case 'O':
            out_o.fmt = optarg;
            break;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (img_dd_operand(&dd, argv[i]) < 0) {
            return 1;
        }
    }
    if (!dd.in_filename || !dd.out_filename) {
        error_report("Must specify both input and output files");
        return 1;
    }

    blk_in = img_open(dd.in_filename, &co.open);
    if (!blk_in) {
        return 1;
    }
    size = blk_getlength(blk_in);
    if (size < 0) {
        error_report("Failed to get size for '%s'", dd.in_filename);
        goto out;
    }
    if (dd.has_count && dd.count <= INT64_MAX / dd.bsz &&
        dd.count * dd.bsz < size) {
        size = dd.count * dd.bsz;
    }
    /* Like dd(1), skipping past the end gives an empty output. */
    skip_too_far = dd.has_skip && (dd.skip > INT64_MAX / dd.bsz ||
                                   size < dd.skip * dd.bsz);
    if (img_dd_create_output(out_o.fmt, dd.out_filename,
                             skip_too_far ? 0 : size - dd.skip * dd.bsz) < 0) {
        goto out;
    }
    blk_out = img_open(dd.out_filename, &out_o);
    if (!blk_out) {
        goto out;
    }
    if (skip_too_far) {
        error_report("%s: cannot skip to specified offset", dd.in_filename);
        in_pos = size;
    } else {
        in_pos = dd.skip * dd.bsz;
    }

    buf = g_malloc(dd.bsz);
    ret = 0;
    for (out_pos = 0; in_pos < size; ) {
        int64_t bytes = MIN(dd.bsz, size - in_pos);

        ret = blk_pread(blk_in, in_pos, bytes, buf, 0);
        if (ret < 0) {
            error_report("error while reading from input image file: %s",
                         strerror(-ret));
            goto out;
        }
        in_pos += bytes;
        ret = blk_pwrite(blk_out, out_pos, bytes, buf, 0);
        if (ret < 0) {
            error_report("error while writing to output image file: %s",
                         strerror(-ret));
            goto out;
        }
        out_pos += bytes;
    }
    ret = 0;
out:
    blk_unref(blk_out);
    blk_unref(blk_in);
    return ret < 0 ? 1 : 0;
}
