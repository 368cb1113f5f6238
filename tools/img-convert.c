/*
 * qblock-img convert: copies the content of one or more images into a new
 * (or, with -n, an existing) image of any format.
 *
 * This file holds the command line and the set-up (sources, target,
 * creation options, snapshot); the copy runs in img-convert-copy.c, whose
 * design and invariants img-convert.h states.
 */
#include "img-convert.h"
#include "block/dirty-bitmap.h"

#include "qblock/block-driver.h"
#include "qblock/block-node.h"
#include "block/snapshot.h"

/* Command-line settings of convert that are not copy state. */
typedef struct ImgConvertArgs {
    const char *fmt;
    const char *out_fmt;
    const char *out_baseimg;
    const char *backing_fmt;
    const char *cache;
    const char *src_cache;
    const char *options;
    bool image_opts;
    bool tgt_image_opts;
    bool skip_create;
    bool force_share;
    bool progress;
    bool target_is_zero;
    bool bitmaps;               /* --bitmaps */
    bool skip_broken_bitmaps;
    ToolSnapshotArg snapshot;   /* -l */
} ImgConvertArgs;

/* Makes the first source show the snapshot -l names (read-only). */
static int img_convert_load_snapshot(ImgConvertState *s,
                                     const ImgConvertArgs *a)
{
    /* as in qemu-img, only the ID-or-name form refuses several sources;
     * snapshot.id/snapshot.name load into the first one */
    if (!a->snapshot.opts && a->snapshot.id_or_name && s->src_num > 1) {
        error_report("No support for concatenating multiple snapshot");
        return -EINVAL;
    }
    return tool_snapshot_arg_load(s->src[0], &a->snapshot);
}

/* Builds the creation options of the target; NULL after an error. */
static QemuOpts *img_convert_create_opts(ImgConvertState *s,
                                         const ImgConvertArgs *a,
                                         const BlockDriver *drv,
                                         const char *out_filename,
                                         QemuOptsList **plist)
{
    Error *err = NULL;
    QemuOpts *opts;

    *plist = img_create_opts_list(drv, out_filename, &err);
    if (!*plist) {
        error_report_err(err);
        return NULL;
    }

    opts = a->options ? qemu_opts_parse(*plist, a->options, &err)
                      : qemu_opts_create(*plist);
    if (!opts) {
        error_report_err(err);
        return NULL;
    }
    qemu_opt_set_number(opts, "size", s->total_sectors * BDRV_SECTOR_SIZE,
                        &error_abort);
    if (a->out_baseimg) {
        if (!qemu_opts_find_desc(*plist, "backing_file")) {
            error_report("Backing file not supported for file format '%s'",
                         a->out_fmt);
            qemu_opts_del(opts);
            return NULL;
        }
        qemu_opt_set(opts, "backing_file", a->out_baseimg, &error_abort);
    }
    if (a->backing_fmt) {
        if (!qemu_opts_find_desc(*plist, "backing_fmt")) {
            error_report("Backing file format not supported for file "
                         "format '%s'", a->out_fmt);
            qemu_opts_del(opts);
            return NULL;
        }
        qemu_opt_set(opts, "backing_fmt", a->backing_fmt, &error_abort);
    }
    return opts;
}

static bool img_convert_check_compression(const BlockDriver *drv, QemuOpts *opts)
{
    const char *prealloc = qemu_opt_get(opts, "preallocation");

    if (!bdrv_driver_can_compress(drv)) {
        error_report("Compression not supported for this file format");
        return false;
    }
    if (qemu_opt_get_bool(opts, "encryption", false) ||
        qemu_opt_get(opts, "encrypt.format")) {
        error_report("Compression and encryption not supported at the same "
                     "time");
        return false;
    }
    if (prealloc && strcmp(prealloc, "off")) {
        error_report("Compression and preallocation not supported at the "
                     "same time");
        return false;
    }
    return true;
}

/* Opens the sources; sums their sizes. */
static int img_convert_open_sources(ImgConvertState *s,
                                    const ImgConvertArgs *a, char **names)
{
    ImgOpenOptions o = {
        .fmt = a->fmt,
        .image_opts = a->image_opts,
        .force_share = a->force_share,
    };

    if (img_parse_cache(a->src_cache, &o) < 0) {
        error_report("Invalid source cache option: %s", a->src_cache);
        return -EINVAL;
    }
    for (int i = 0; i < s->src_num; i++) {
        BlockDriverState *bs;
        BlockDriverInfo bdi;
        int64_t len;

        s->src[i] = img_open(names[i], &o);
        if (!s->src[i]) {
            return -EINVAL;
        }
        len = blk_getlength(s->src[i]);
        if (len < 0) {
            error_report("Could not get size of %s: %s", names[i],
                         strerror(-len));
            return len;
        }
        s->src_bytes[i] = len;
        s->src_sectors[i] = DIV_ROUND_UP(len, BDRV_SECTOR_SIZE);
        bs = blk_bs(s->src[i]);
        s->src_alignment[i] = DIV_ROUND_UP(bdrv_get_request_alignment(bs),
                                           BDRV_SECTOR_SIZE);
        if (!bdrv_get_info(bs, &bdi)) {
            s->src_alignment[i] = MAX(s->src_alignment[i],
                                      bdi.cluster_size / BDRV_SECTOR_SIZE);
        }
        s->total_sectors += s->src_sectors[i];
    }
    return 0;
}

/*
 * The creation options that name a secret (key-secret,
 * encrypt.key-secret): the new image opens with them, as in qemu-img.
 */
static QDict *img_convert_key_secrets(QemuOptsList *list, QemuOpts *opts)
{
    QDict *secrets = qdict_new();

    for (const QemuOptDesc *d = list ? list->desc : NULL; d && d->name;
         d++) {
        if (g_str_has_suffix(d->name, "key-secret") &&
            qemu_opt_get(opts, d->name)) {
            qdict_put_str(secrets, d->name, qemu_opt_get(opts, d->name));
        }
    }
    return secrets;
}

/* Opens the target and sizes the copy to it. */
static int img_convert_open_target(ImgConvertState *s,
                                   const ImgConvertArgs *a,
                                   const char *out_filename,
                                   QemuOptsList *list, QemuOpts *opts)
{
    g_autoptr(QDict) secrets = img_convert_key_secrets(list, opts);
    ImgOpenOptions o = {
        .fmt = a->out_fmt,
        .image_opts = a->skip_create && a->tgt_image_opts,
        .flags = s->min_sparse ? BDRV_O_RDWR | BDRV_O_UNMAP : BDRV_O_RDWR,
        .extra = secrets,
    };
    BlockDriverState *out_bs;
    BlockDriverInfo bdi;
    int64_t pow2_min_sparse;

    if (img_parse_cache(a->cache, &o) < 0) {
        error_report("Invalid cache option: %s", a->cache);
        return -EINVAL;
    }
    /* O_DIRECT may need the target grown to the device's sector size. */
    if (o.flags & BDRV_O_NOCACHE) {
        o.flags |= BDRV_O_RESIZE;
    }
    s->target = img_open(out_filename, &o);
    if (!s->target) {
        return -EINVAL;
    }
    out_bs = blk_bs(s->target);
    if (bdrv_get_info(out_bs, &bdi) == 0 && bdi.needs_compressed_writes) {
        s->compressed = true;
    }
    /* invariant 2 of img-convert.h */
    s->overlap_writes = !s->compressed &&
        (bdrv_driver_is_protocol(bdrv_get_driver(out_bs)) ||
         !strcmp(bdrv_driver_name(bdrv_get_driver(out_bs)), "raw"));
    if (s->compressed &&
        !bdrv_driver_can_compress(bdrv_get_driver(out_bs))) {
        error_report("Compression not supported for this file format");
        return -ENOTSUP;
    }

    s->buf_sectors = MIN(IMG_MAX_BUF_SECTORS,
                         MAX(s->buf_sectors,
                             MAX(bdrv_get_opt_transfer(out_bs) >>
                                 BDRV_SECTOR_BITS,
                                 bdrv_get_pdiscard_alignment(out_bs) >>
                                 BDRV_SECTOR_BITS)));
    /* Writes aligned to the target's requests avoid read-modify-write. */
    pow2_min_sparse = s->min_sparse ? 1 << (63 - clz64(s->min_sparse)) : 0;
    s->alignment = MAX(pow2_min_sparse,
                       DIV_ROUND_UP(bdrv_get_request_alignment(out_bs),
                                    BDRV_SECTOR_SIZE));

    if (a->skip_create) {
        int64_t len = blk_getlength(s->target);

        if (len < 0) {
            error_report("unable to get output image length: %s",
                         strerror(-len));
            return -EINVAL;
        }
        if (DIV_ROUND_UP(len, BDRV_SECTOR_SIZE) < s->total_sectors) {
            error_report("output file is smaller than input file");
            return -EINVAL;
        }
    }

    s->target_backing_sectors = -1;
    if (s->target_has_backing && !a->skip_create &&
        bdrv_backing_bs(out_bs)) {
        int64_t len = bdrv_getlength(bdrv_backing_bs(out_bs));

        /* an unknown length only costs zero writes */
        if (len >= 0) {
            s->target_backing_sectors = DIV_ROUND_UP(len, BDRV_SECTOR_SIZE);
        }
    }

    if (bdrv_get_info(out_bs, &bdi) < 0) {
        if (s->compressed) {
            error_report("could not get block driver info");
            return -EINVAL;
        }
    } else {
        s->cluster_sectors = bdi.cluster_size / BDRV_SECTOR_SIZE;
    }
    if (s->compressed) {
        if (s->cluster_sectors <= 0 || s->cluster_sectors > s->buf_sectors) {
            error_report("invalid cluster size");
            return -EINVAL;
        }
        /* several clusters per request: the driver compresses them in
         * parallel (one worker thread each) */
        s->buf_sectors = MAX(MIN(s->cluster_sectors * IMG_COMPRESS_CLUSTERS,
                                 IMG_MAX_BUF_SECTORS), s->cluster_sectors);
    }
    return 0;
}

/* Before anything is created: every bitmap to copy can be copied. */
static int img_convert_check_bitmaps(BlockDriverState *src, bool skip_broken)
{
    if (!bdrv_supports_persistent_dirty_bitmap(src)) {
        error_report("Source lacks bitmap support");
        return -1;
    }
    for (BdrvDirtyBitmap *bm = bdrv_dirty_bitmap_first(src); bm;
         bm = bdrv_dirty_bitmap_next(bm)) {
        if (!bdrv_dirty_bitmap_get_persistence(bm)) {
            continue;
        }
        if (!skip_broken && bdrv_dirty_bitmap_inconsistent(bm)) {
            error_report("Cannot copy inconsistent bitmap '%s'",
                         bdrv_dirty_bitmap_name(bm));
            fprintf(stderr, "Try --skip-broken-bitmaps, or use 'qemu-img "
                    "bitmap --remove' to delete it\n");
            return -1;
        }
    }
    return 0;
}

/*
 * After the data: each persistent bitmap of @src becomes one of @dst with
 * its name, granularity, state and bits; @dst stores them when it closes.
 */
static int img_convert_copy_bitmaps(BlockDriverState *src,
                                    BlockDriverState *dst, bool skip_broken)
{
    for (BdrvDirtyBitmap *bm = bdrv_dirty_bitmap_first(src); bm;
         bm = bdrv_dirty_bitmap_next(bm)) {
        const char *name = bdrv_dirty_bitmap_name(bm);
        BdrvDirtyBitmapAddFlags flags = BDRV_BITMAP_ADD_PERSISTENT;
        Error *err = NULL;

        if (!bdrv_dirty_bitmap_get_persistence(bm)) {
            continue;
        }
        if (skip_broken && bdrv_dirty_bitmap_inconsistent(bm)) {
            warn_report("Skipping inconsistent bitmap '%s'", name);
            continue;
        }
        if (!bdrv_dirty_bitmap_enabled(bm)) {
            flags |= BDRV_BITMAP_ADD_DISABLED;
        }
        if (!bdrv_dirty_bitmap_add(dst, name,
                                   bdrv_dirty_bitmap_granularity(bm), flags,
                                   &err)) {
            error_report("Failed to create bitmap %s: %s", name,
                         error_get_pretty(err));
            error_free(err);
            return -1;
        }
        if (bdrv_dirty_bitmap_merge_cmd(dst, name, &bm, 1, NULL, &err) < 0) {
            error_report("Failed to populate bitmap %s: %s", name,
                         error_get_pretty(err));
            error_free(err);
            bdrv_dirty_bitmap_remove(dst, name, NULL);
            return -1;
        }
    }
    return 0;
}

static int img_convert_run(ImgConvertState *s, ImgConvertArgs *a,
                           char **names, const char *out_filename)
{
    const BlockDriver *drv = NULL;
    QemuOptsList *list = NULL;
    QemuOpts *opts = NULL;
    const char *out_baseimg = a->out_baseimg;
    Error *err = NULL;
    int ret;

    ret = img_convert_open_sources(s, a, names);
    if (ret < 0) {
        goto out;
    }
    ret = img_convert_load_snapshot(s, a);
    if (ret < 0) {
        goto out;
    }
    if (a->bitmaps) {
        if (s->src_num > 1) {
            error_report("Copying bitmaps only possible with single source");
            ret = -1;
            goto out;
        }
        ret = img_convert_check_bitmaps(blk_bs(s->src[0]),
                                        a->skip_broken_bitmaps);
        if (ret < 0) {
            goto out;
        }
    }

    ret = -EINVAL;
    if (!a->skip_create) {
        drv = img_find_format(a->out_fmt);
        if (!drv) {
            goto out;
        }
        opts = img_convert_create_opts(s, a, drv, out_filename, &list);
        if (!opts) {
            goto out;
        }
        if (qemu_opt_get(opts, "backing_file")) {
            out_baseimg = qemu_opt_get(opts, "backing_file");
        }
    }
    s->target_has_backing = out_baseimg != NULL;
    if (s->src_num > 1 && out_baseimg) {
        error_report("Having a backing file for the target makes no sense "
                     "when concatenating multiple input images");
        goto out;
    }
    if (out_baseimg && opts && !qemu_opt_get(opts, "backing_fmt")) {
        error_report("Use of backing file requires explicit backing format");
        goto out;
    }
    if (s->compressed && drv && !img_convert_check_compression(drv, opts)) {
        goto out;
    }

    if (!a->skip_create) {
        ret = bdrv_create(drv, out_filename, opts, &err);
        if (ret < 0) {
            error_report("%s: error while converting %s: %s", out_filename,
                         a->out_fmt, error_get_pretty(err));
            error_free(err);
            goto out;
        }
        /* A new image without backing file reads as zeroes. */
        s->has_zero_init = s->min_sparse && !s->target_has_backing;
    }
    if (a->target_is_zero) {
        s->has_zero_init = true;
    }

    ret = img_convert_open_target(s, a, out_filename, list, opts);
    if (ret < 0) {
        goto out;
    }
    if (a->bitmaps &&
        !bdrv_supports_persistent_dirty_bitmap(blk_bs(s->target))) {
        error_report("Format driver '%s' does not support bitmaps",
                     bdrv_get_format_name(blk_bs(s->target)));
        ret = -1;
        goto out;
    }
    if (!a->target_is_zero && !bdrv_has_zero_init(blk_bs(s->target))) {
        /* A device keeps its old data: zeroes must be written. */
        s->has_zero_init = false;
    }
    ret = img_convert_do_copy(s);
    if (ret == 0 && a->bitmaps) {
        ret = img_convert_copy_bitmaps(blk_bs(s->src[0]), blk_bs(s->target),
                                       a->skip_broken_bitmaps);
    }

out:
    qemu_opts_del(opts);
    qemu_opts_free(list);
    return ret;
}

int img_convert(int argc, char **argv)
{
    enum {
        OPTION_TARGET_IMAGE_OPTS = IMG_OPTION_OWN,
        OPTION_SALVAGE,
        OPTION_TARGET_IS_ZERO,
        OPTION_BITMAPS,
        OPTION_SKIP_BROKEN_BITMAPS,
    };
    static const struct option long_options[] = {
        { "target-image-opts", no_argument, NULL, OPTION_TARGET_IMAGE_OPTS },
        { "salvage", no_argument, NULL, OPTION_SALVAGE },
        { "target-is-zero", no_argument, NULL, OPTION_TARGET_IS_ZERO },
        { "bitmaps", no_argument, NULL, OPTION_BITMAPS },
        { "skip-broken-bitmaps", no_argument, NULL,
          OPTION_SKIP_BROKEN_BITMAPS },
        { NULL, 0, NULL, 0 }
    };
    ImgConvertArgs a = {
        .cache = IMG_CACHE_CONVERT_DEFAULT,
        .src_cache = IMG_CACHE_DEFAULT,
    };
    ImgConvertState s = {
        .min_sparse = IMG_MIN_SPARSE_DEFAULT,
        .buf_sectors = IMG_IO_BUF_SECTORS,
        .wr_in_order = true,
        .num_coroutines = 8,
        .cluster_sectors = 0,
    };
    ImgCommonOpts co = { 0 };   /* of the sources */
    g_autofree char *options = NULL;
    const char *out_filename;
    int64_t sval;
    bool copy_range = false, explicit_sparse = false;
    int c, ret;

    while ((c = img_getopt(argc, argv, ":hf:O:B:CcF:o:l:S:pt:T:qnm:WU",
                           IMG_LONG_OBJECT | IMG_LONG_IMAGE_OPTS,
                           long_options, &co)) != -1) {
        switch (c) {
        case 'O':
            a.out_fmt = optarg;
            break;
        case 'B':
            a.out_baseimg = optarg;
            break;
        case 'C':
            copy_range = true;
            break;
        case 'c':
            s.compressed = true;
            break;
        case 'F':
            a.backing_fmt = optarg;
            break;
        case 'o':
            options = img_accumulate_options(options, optarg);
            break;
        case 'l':
            if (!tool_snapshot_arg_parse(&a.snapshot, optarg)) {
                error_report("Failed in parsing snapshot param '%s'",
                             optarg);
                return 1;
            }
            break;
        case 'S':
            sval = img_cvtnum("buffer size for sparse output", optarg);
            if (sval < 0) {
                return 1;
            }
            if (!QEMU_IS_ALIGNED(sval, BDRV_SECTOR_SIZE) ||
                sval / BDRV_SECTOR_SIZE > IMG_MAX_BUF_SECTORS) {
                error_report("Invalid buffer size for sparse output "
                             "specified. Valid sizes are multiples of %llu "
                             "up to %llu. Select 0 to disable sparse "
                             "detection (fully allocates output).",
                             BDRV_SECTOR_SIZE,
                             IMG_MAX_BUF_SECTORS * BDRV_SECTOR_SIZE);
                return 1;
            }
            s.min_sparse = sval / BDRV_SECTOR_SIZE;
            explicit_sparse = true;
            break;
        case 'p':
            a.progress = true;
            break;
        case 't':
            a.cache = optarg;
            break;
        case 'T':
            a.src_cache = optarg;
            break;
        case 'n':
            a.skip_create = true;
            break;
        case 'm':
            if (qemu_strtoi(optarg, NULL, 0, &s.num_coroutines) ||
                s.num_coroutines < 1 ||
                s.num_coroutines > IMG_MAX_COROUTINES) {
                error_report("Invalid number of coroutines. Allowed number "
                             "of coroutines is between 1 and %d",
                             IMG_MAX_COROUTINES);
                return 1;
            }
            break;
        case 'W':
            s.wr_in_order = false;
            break;
        case OPTION_TARGET_IMAGE_OPTS:
            a.tgt_image_opts = true;
            break;
        case OPTION_SALVAGE:
            s.salvage = true;
            break;
        case OPTION_BITMAPS:
            a.bitmaps = true;
            break;
        case OPTION_SKIP_BROKEN_BITMAPS:
            a.skip_broken_bitmaps = true;
            break;
        case OPTION_TARGET_IS_ZERO:
            a.target_is_zero = true;
            break;
        }
    }

    a.fmt = co.open.fmt;
    a.image_opts = co.open.image_opts;
    a.force_share = co.open.force_share;
    s.quiet = co.quiet;
    a.options = options;
    if (!a.out_fmt && !a.tgt_image_opts) {
        a.out_fmt = "raw";
    }
    if (a.tgt_image_opts && !a.skip_create) {
        error_report("--target-image-opts requires use of -n flag");
        return 1;
    }
    if (a.skip_create && a.options) {
        error_report("-o has no effect when skipping image creation");
        return 1;
    }
    if (a.target_is_zero && !a.skip_create) {
        error_report("--target-is-zero requires use of -n flag");
        return 1;
    }

    if (a.skip_broken_bitmaps && !a.bitmaps) {
        error_report("Use of --skip-broken-bitmaps requires --bitmaps");
        return 1;
    }
    /*
     * -C (copy offloading) is accepted with qemu-img's conditions; the
     * copy itself is done by reads and writes, which gives the same image
     */
    if (copy_range && s.compressed) {
        error_report("Cannot enable copy offloading when -c is used");
        return 1;
    }
    if (copy_range && explicit_sparse) {
        error_report("Cannot enable copy offloading when -S is used");
        return 1;
    }
    if (copy_range && s.salvage) {
        error_report("Cannot use copy offloading in salvaging mode");
        return 1;
    }

    s.src_num = argc - optind - 1;
    out_filename = s.src_num >= 1 ? argv[argc - 1] : NULL;
    if (a.options && img_has_help_option(a.options)) {
        if (!a.out_fmt) {
            error_report("Option help requires a format be specified");
            return 1;
        }
        return img_print_create_help(out_filename, a.out_fmt);
    }
    if (s.src_num < 1) {
        error_report("Must specify image file name");
        return 1;
    }

    img_progress_init(&s.progress, a.progress && !s.quiet, 1.0);
    img_progress_print(&s.progress, 0, 100);

    s.src = g_new0(BlockBackend *, s.src_num);
    s.src_sectors = g_new0(int64_t, s.src_num);
    s.src_bytes = g_new0(int64_t, s.src_num);
    s.src_alignment = g_new0(int, s.src_num);

    ret = img_convert_run(&s, &a, argv + optind, out_filename);

    if (!ret) {
        img_progress_print(&s.progress, 100, 0);
    }
    img_progress_end(&s.progress);
    blk_unref(s.target);
    for (int i = 0; i < s.src_num; i++) {
        blk_unref(s.src[i]);
    }
    g_free(s.src);
    g_free(s.src_sectors);
    g_free(s.src_bytes);
    g_free(s.src_alignment);
    tool_snapshot_arg_free(&a.snapshot);
    return ret ? 1 : 0;
}
