/*
 * qblock-img: helpers that several sub-commands share.
 *
 * Messages here are qemu-img's, word for word, because scripts match them.
 */
#include "qblock-img.h"

#include "block/snapshot.h"
#include "qblock/block-driver.h"
#include "tool-opts.h"

int64_t img_cvtnum_full(const char *name, const char *value, int64_t min,
                        int64_t max)
{
    const char *p = value;
    uint64_t res;
    int err;

    err = qemu_strtosz(value, NULL, &res);
    while (g_ascii_isspace(*p)) {
        p++;
    }
    /* qemu-img counts a negative number as a malformed size, not as one
     * out of range. */
    if (err == -ERANGE && *p == '-') {
        err = -EINVAL;
    }
    if (err < 0 && err != -ERANGE) {
        error_report("Invalid %s specified. You may use "
                     "k, M, G, T, P or E suffixes for", name);
        error_report("kilobytes, megabytes, gigabytes, terabytes, "
                     "petabytes and exabytes.");
        return -1;
    }
    if (err == -ERANGE || res > (uint64_t)max || (int64_t)res < min) {
        error_report("Invalid %s specified. Must be between %" PRId64
                     " and %" PRId64 ".", name, min, max);
        return -1;
    }
    return res;
}

int64_t img_cvtnum(const char *name, const char *value)
{
    return img_cvtnum_full(name, value, 0, INT64_MAX);
}

bool img_parse_output(const char *arg, bool *json)
{
    if (!strcmp(arg, "json")) {
        *json = true;
        return true;
    }
    if (!strcmp(arg, "human")) {
        *json = false;
        return true;
    }
    error_report("--output must be used with human or json as argument.");
    return false;
}

void img_json_print(JsonNode *node)
{
    g_autofree char *text = json_to_text(node, JSON_WRITE_PRETTY |
                                               JSON_WRITE_QDICT_ORDER);

    printf("%s\n", text);
}

void img_json_add_int(JsonBuilder *b, const char *name, int64_t val,
                      bool optional)
{
    if (optional && !val) {
        return;
    }
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, val);
}

void img_json_print_object(JsonBuilder *b)
{
    g_autoptr(JsonNode) root = NULL;

    json_builder_end_object(b);
    root = json_builder_get_root(b);
    img_json_print(root);
}

bool img_has_help_option(const char *options)
{
    const char *p = options;

    /* elements are split at single commas: ",," is a comma in a value */
    while (*p) {
        g_autoptr(GString) elem = g_string_new(NULL);

        for (; *p; p++) {
            if (*p == ',') {
                if (p[1] != ',') {
                    p++;
                    break;
                }
                p++;
            }
            g_string_append_c(elem, *p);
        }
        if (!strcmp(elem->str, "help") || !strcmp(elem->str, "?")) {
            return true;
        }
    }
    return false;
}

QemuOptsList *img_create_opts_list(const BlockDriver *drv, const char *filename,
                                   Error **errp)
{
    const BlockDriver *proto = bdrv_find_protocol(filename, true, errp);
    QemuOptsList *list;

    if (!proto) {
        return NULL;
    }
    if (!bdrv_driver_create_opts(drv)) {
        error_setg(errp, "Format driver '%s' does not support image "
                   "creation", bdrv_driver_name(drv));
        return NULL;
    }
    if (!bdrv_driver_create_opts(proto)) {
        error_setg(errp, "Protocol driver '%s' does not support image "
                   "creation", bdrv_driver_name(proto));
        return NULL;
    }
    list = qemu_opts_append(NULL, bdrv_driver_create_opts(drv));
    return qemu_opts_append(list, bdrv_driver_create_opts(proto));
}

/*
 * qemu-img's check of one -o argument: not empty, not starting with a
 * comma (an empty first option, or with ",," a value without a name) and
 * not ending in an unescaped comma (",," is a literal one).
 */
static bool img_option_list_valid(const char *optarg)
{
    size_t len = strlen(optarg), commas = 0;

    while (commas < len && optarg[len - 1 - commas] == ',') {
        commas++;
    }
    return len && optarg[0] != ',' && commas % 2 == 0;
}

char *img_accumulate_options(char *options, const char *optarg)
{
    char *merged;

    if (!img_option_list_valid(optarg)) {
        error_report("Invalid option list: %s", optarg);
        exit(1);
    }
    if (!options) {
        return g_strdup(optarg);
    }
    merged = g_strdup_printf("%s,%s", options, optarg);
    g_free(options);
    return merged;
}

/* The long options img_getopt() may add, and the IMG_LONG_* bit of each. */
static const struct {
    unsigned bit;
    struct option opt;
} img_shared_long[] = {
    { IMG_LONG_FORMAT, { "format", required_argument, NULL, 'f' } },
    { IMG_LONG_OUTPUT,
      { "output", required_argument, NULL, IMG_OPTION_OUTPUT } },
    { IMG_LONG_IMAGE_OPTS,
      { "image-opts", no_argument, NULL, IMG_OPTION_IMAGE_OPTS } },
    { IMG_LONG_FORCE_SHARE, { "force-share", no_argument, NULL, 'U' } },
    { IMG_LONG_OBJECT,
      { "object", required_argument, NULL, IMG_OPTION_OBJECT } },
};

/* No sub-command has this many long options of its own. */
#define IMG_MAX_OWN_LONG 16

int img_getopt(int argc, char **argv, const char *shortopts,
               unsigned shared, const struct option *own, ImgCommonOpts *co)
{
    struct option longopts[1 + ARRAY_SIZE(img_shared_long) +
                           IMG_MAX_OWN_LONG + 1] = {
        { "help", no_argument, NULL, 'h' },
    };
    size_t n = 1;
    int c;

    assert(shortopts[0] == ':');
    for (size_t i = 0; i < ARRAY_SIZE(img_shared_long); i++) {
        if (shared & img_shared_long[i].bit) {
            longopts[n++] = img_shared_long[i].opt;
        }
    }
    for (; own && own->name; own++) {
        assert(n < ARRAY_SIZE(longopts) - 1);
        longopts[n++] = *own;
    }

    for (;;) {
        c = getopt_long(argc, argv, shortopts, longopts, NULL);
        img_handle_exit_option(c, argv);
        switch (c) {
        case 'f':
            co->open.fmt = optarg;
            break;
        case 'U':
            co->open.force_share = true;
            break;
        case 'q':
            co->quiet = true;
            break;
        case IMG_OPTION_OUTPUT:
            co->output = optarg;
            break;
        case IMG_OPTION_IMAGE_OPTS:
            co->open.image_opts = true;
            break;
        case IMG_OPTION_OBJECT:
            if (!tool_object_option(optarg)) {
                exit(1);
            }
            break;
        default:
            return c;
        }
    }
}

const BlockDriver *img_find_format(const char *fmt)
{
    const BlockDriver *drv = bdrv_find_format(fmt);

    if (!drv) {
        error_report("Unknown file format '%s'", fmt);
    }
    return drv;
}

int img_parse_cache(const char *mode, ImgOpenOptions *o)
{
    return bdrv_parse_cache_mode(mode, &o->flags, &o->writethrough);
}

BlockBackend *img_open(const char *name, const ImgOpenOptions *o)
{
    Error *err = NULL;
    QDict *options;
    BlockBackend *blk;
    int flags = o->flags;

    if (o->image_opts && o->fmt) {
        error_report("--image-opts and --format are mutually exclusive");
        return NULL;
    }
    options = tool_image_options(name, o->image_opts, o->fmt, &err);
    if (!options) {
        error_report_err(err);
        return NULL;
    }
    if (o->extra) {
        qdict_join(options, o->extra, true);
    }
    if (o->force_share) {
        qdict_put_bool(options, BDRV_OPT_FORCE_SHARE, true);
    } else {
        flags |= BDRV_O_NO_SHARE;
    }

    blk = blk_new_open(o->image_opts ? NULL : name, NULL, options, flags,
                       &err);
    if (!blk) {
        error_report("Could not open '%s': %s", name, error_get_pretty(err));
        if (error_get_hint(err)) {
            fputs(error_get_hint(err), stderr);
        }
        error_free(err);
        return NULL;
    }
    blk_set_enable_write_cache(blk, !o->writethrough);
    return blk;
}

void img_progress_init(ImgProgress *p, bool enabled, double min_skip)
{
    p->enabled = enabled;
    p->min_skip = min_skip;
    p->current = 0;
    p->last_print = 0;
}

/*
 * With @max == 0, @delta is the new value in percent; otherwise @delta
 * percent of @max percent is added (qemu-img's convention).
 */
void img_progress_print(ImgProgress *p, double delta, double max)
{
    if (!p->enabled) {
        return;
    }
    if (max == 0) {
        p->current = delta;
    } else {
        p->current += (delta / 100) * max;
    }
    if (p->current > 100) {
        p->current = 100;
    }
    if (p->current > p->last_print + p->min_skip ||
        p->current < p->last_print - p->min_skip ||
        p->current == 0 || p->current == 100) {
        p->last_print = p->current;
        printf("    (%3.2f/100%%)\r", p->current);
        fflush(stdout);
    }
}

void img_progress_end(ImgProgress *p)
{
    if (p->enabled) {
        printf("\n");
        fflush(stdout);
    }
}
