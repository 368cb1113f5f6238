/*
 * qblock-img bitmap: adds, removes, clears, enables, disables and merges
 * persistent dirty bitmaps of an image, as qemu-img bitmap does.
 *
 * The operations run in the order the command line gives them, each with
 * the monitor's checks (block/dirty-bitmap-cmds.c); the first that fails
 * stops the rest with "Operation OP on bitmap NAME failed: ...".  The
 * image is opened read-write, and the format stores its bitmaps when it
 * closes.  --merge SRC takes the bitmap SRC of the image itself, or of
 * the image -b names (opened read-only, format -F).
 */
#include "qblock-img.h"
#include "block/dirty-bitmap.h"

typedef enum ImgBitmapOp {
    IMG_BITMAP_ADD,
    IMG_BITMAP_REMOVE,
    IMG_BITMAP_CLEAR,
    IMG_BITMAP_ENABLE,
    IMG_BITMAP_DISABLE,
    IMG_BITMAP_MERGE,
} ImgBitmapOp;

static const char *const img_bitmap_op_names[] = {
    [IMG_BITMAP_ADD] = "add",
    [IMG_BITMAP_REMOVE] = "remove",
    [IMG_BITMAP_CLEAR] = "clear",
    [IMG_BITMAP_ENABLE] = "enable",
    [IMG_BITMAP_DISABLE] = "disable",
    [IMG_BITMAP_MERGE] = "merge",
};

typedef struct ImgBitmapAction {
    ImgBitmapOp op;
    const char *src;        /* --merge's source bitmap */
} ImgBitmapAction;

/* Runs one action on @bitmap of @bs; -1 with @errp set on failure. */
static int img_bitmap_run(BlockDriverState *bs, BlockDriverState *src_bs,
                          const char *bitmap, const ImgBitmapAction *act,
                          uint32_t granularity, Error **errp)
{
    BdrvDirtyBitmap *src;

    switch (act->op) {
    case IMG_BITMAP_ADD:
        return bdrv_dirty_bitmap_add(bs, bitmap, granularity,
                                     BDRV_BITMAP_ADD_PERSISTENT,
                                     errp) ? 0 : -1;
    case IMG_BITMAP_REMOVE:
        return bdrv_dirty_bitmap_remove(bs, bitmap, errp);
    case IMG_BITMAP_CLEAR:
        return bdrv_dirty_bitmap_clear_cmd(bs, bitmap, errp);
    case IMG_BITMAP_ENABLE:
    case IMG_BITMAP_DISABLE:
        return bdrv_dirty_bitmap_switch_cmd(bs, bitmap,
                                            act->op == IMG_BITMAP_ENABLE,
                                            errp);
    case IMG_BITMAP_MERGE:
        src = bdrv_dirty_bitmap_lookup(src_bs, act->src, errp);
        if (!src) {
            return -1;
        }
        return bdrv_dirty_bitmap_merge_cmd(bs, bitmap, &src, 1, NULL, errp);
    }
    g_assert_not_reached();
}

int img_bitmap(int argc, char **argv)
{
    enum {
        OPTION_ADD = IMG_OPTION_OWN,
        OPTION_REMOVE,
        OPTION_CLEAR,
        OPTION_ENABLE,
        OPTION_DISABLE,
        OPTION_MERGE,
    };
    static const struct option long_options[] = {
        { "add", no_argument, NULL, OPTION_ADD },
        { "remove", no_argument, NULL, OPTION_REMOVE },
        { "clear", no_argument, NULL, OPTION_CLEAR },
        { "enable", no_argument, NULL, OPTION_ENABLE },
        { "disable", no_argument, NULL, OPTION_DISABLE },
        { "merge", required_argument, NULL, OPTION_MERGE },
        { "granularity", required_argument, NULL, 'g' },
        { "source-file", required_argument, NULL, 'b' },
        { "source-format", required_argument, NULL, 'F' },
        { NULL, 0, NULL, 0 }
    };
    /* as qemu-img: bitmaps are the image's own, its backing file is
     * neither needed nor locked (merging from the overlay into its base) */
    ImgCommonOpts co = {
        .open = { .flags = BDRV_O_RDWR | BDRV_O_NO_BACKING },
    };
    ImgOpenOptions src_open = { .flags = BDRV_O_NO_BACKING };
    g_autoptr(GArray) acts = g_array_new(false, false,
                                         sizeof(ImgBitmapAction));
    const char *src_filename = NULL, *filename, *bitmap;
    BlockBackend *blk = NULL, *src_blk = NULL;
    BlockDriverState *bs, *src_bs;
    bool add = false, merge = false;
    int64_t granularity = 0;
    int c, ret = 1;

    while ((c = img_getopt(argc, argv, ":b:f:F:g:h",
                           IMG_LONG_OBJECT | IMG_LONG_IMAGE_OPTS,
                           long_options, &co)) != -1) {
        ImgBitmapAction act = { 0 };

        switch (c) {
        case 'b':
            src_filename = optarg;
            continue;
        case 'F':
            src_open.fmt = optarg;
            continue;
        case 'g':
            granularity = img_cvtnum("granularity", optarg);
            if (granularity < 0) {
                return 1;
            }
            continue;
        case OPTION_ADD:
            act.op = IMG_BITMAP_ADD;
            add = true;
            break;
        case OPTION_REMOVE:
            act.op = IMG_BITMAP_REMOVE;
            break;
        case OPTION_CLEAR:
            act.op = IMG_BITMAP_CLEAR;
            break;
        case OPTION_ENABLE:
            act.op = IMG_BITMAP_ENABLE;
            break;
        case OPTION_DISABLE:
            act.op = IMG_BITMAP_DISABLE;
            break;
        case OPTION_MERGE:
            act.op = IMG_BITMAP_MERGE;
            act.src = optarg;
            merge = true;
            break;
        default:
            continue;
        }
        g_array_append_val(acts, act);
    }

    if (!acts->len) {
        error_report("Need at least one of --add, --remove, --clear, "
                     "--enable, --disable, or --merge");
        return 1;
    }
    if (granularity && !add) {
        error_report("granularity only supported with --add");
        return 1;
    }
    if (src_open.fmt && !src_filename) {
        error_report("-F only supported with -b");
        return 1;
    }
    if (src_filename && !merge) {
        error_report("Merge bitmap source file only supported with --merge");
        return 1;
    }
    if (optind != argc - 2) {
        error_report("Expecting filename and bitmap name");
        return 1;
    }
    filename = argv[optind];
    bitmap = argv[optind + 1];

    blk = img_open(filename, &co.open);
    if (!blk) {
        return 1;
    }
    bs = blk_bs(blk);
    src_bs = bs;
    if (src_filename) {
        src_blk = img_open(src_filename, &src_open);
        if (!src_blk) {
            goto out;
        }
        src_bs = blk_bs(src_blk);
    }

    for (guint i = 0; i < acts->len; i++) {
        const ImgBitmapAction *act = &g_array_index(acts, ImgBitmapAction, i);
        Error *err = NULL;

        /* qemu-img hands the value to a 32-bit QMP argument as it is */
        if (img_bitmap_run(bs, src_bs, bitmap, act,
                           granularity ? MAX((uint32_t)granularity, 1) : 0,
                           &err) < 0) {
            error_report("Operation %s on bitmap %s failed: %s",
                         img_bitmap_op_names[act->op], bitmap,
                         error_get_pretty(err));
            error_free(err);
            goto out;
        }
    }
    ret = 0;
out:
    blk_unref(src_blk);
    blk_unref(blk);
    return ret;
}
