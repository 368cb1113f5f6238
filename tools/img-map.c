/*
 * qblock-img map: the allocation of an image's guest ranges through its
 * backing chain, as qemu-img map prints it (human or JSON).
 */
#include "qblock-img.h"

#include "qblock/block-node.h"

/* One run of the map: a range whose status is the same throughout. */
typedef struct ImgMapEntry {
    int64_t start;
    int64_t length;
    int64_t offset;
    bool has_offset;
    bool data;
    bool zero;
    bool present;
    int depth;
    /* the node holding the data, NULL if unknown; not owned */
    const char *filename;
} ImgMapEntry;

/*
 * Status of [offset, offset + bytes) in the first layer of the chain that
 * says something about it (data or zeroes); deeper layers count in depth.
 */
static int img_map_block_status(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, ImgMapEntry *e)
{
    BlockDriverState *file = NULL;
    int64_t map = 0;
    int depth = 0;
    int ret;

    for (;;) {
        ret = bdrv_block_status(bs, offset, bytes, &bytes, &map, &file);
        if (ret < 0) {
            return ret;
        }
        if (ret & (BDRV_BLOCK_ZERO | BDRV_BLOCK_DATA)) {
            break;
        }
        /* filters (blkdebug, copy-on-read) on either side are no layer */
        bs = bdrv_backing_chain_next(bs);
        if (!bs) {
            ret = 0;
            break;
        }
        depth++;
    }

    *e = (ImgMapEntry) {
        .start = offset,
        .length = bytes,
        .data = ret & BDRV_BLOCK_DATA,
        .zero = ret & BDRV_BLOCK_ZERO,
        .present = ret & BDRV_BLOCK_ALLOCATED,
        .has_offset = ret & BDRV_BLOCK_OFFSET_VALID,
        .offset = map,
        .depth = depth,
    };
    if (file && e->has_offset) {
        bdrv_refresh_filename(file);
        e->filename = bdrv_get_filename(file);
    }
    return 0;
}

static bool img_map_mergeable(const ImgMapEntry *curr,
                              const ImgMapEntry *next)
{
    if (curr->length == 0) {
        return false;
    }
    if (curr->zero != next->zero || curr->data != next->data ||
        curr->depth != next->depth || curr->present != next->present ||
        !curr->filename != !next->filename ||
        curr->has_offset != next->has_offset) {
        return false;
    }
    if (curr->filename && strcmp(curr->filename, next->filename)) {
        return false;
    }
    if (curr->has_offset && curr->offset + curr->length != next->offset) {
        return false;
    }
    return true;
}

/* The human format shows only where guest data lives; 0 or -1. */
static int img_map_dump_human(const ImgMapEntry *e)
{
    if (e->data && !e->has_offset) {
        error_report("File contains external, encrypted or compressed "
                     "clusters.");
        return -1;
    }
    if (e->data && !e->zero) {
        printf("%#-16" PRIx64 "%#-16" PRIx64 "%#-16" PRIx64 "%s\n",
               e->start, e->length, e->has_offset ? e->offset : 0,
               e->filename ? e->filename : "");
    }
    return 0;
}

/*
 * One object of the JSON array, followed by ",\n" unless it is the @last;
 * returns 0, as img_map_dump_human() does when it succeeds.
 */
static int img_map_dump_json(const ImgMapEntry *e, bool last)
{
    printf("{ \"start\": %" PRId64 ", \"length\": %" PRId64 ", "
           "\"depth\": %d, \"present\": %s, \"zero\": %s, \"data\": %s",
           e->start, e->length, e->depth, e->present ? "true" : "false",
           e->zero ? "true" : "false", e->data ? "true" : "false");
    if (e->has_offset) {
        printf(", \"offset\": %" PRId64, e->offset);
    }
    putchar('}');
    if (!last) {
        puts(",");
    }
    return 0;
}

int img_map(int argc, char **argv)
{
    enum {
        OPTION_START_OFFSET = IMG_OPTION_OWN,
        OPTION_MAX_LENGTH,
    };
    static const struct option long_options[] = {
        { "start-offset", required_argument, NULL, OPTION_START_OFFSET },
        { "max-length", required_argument, NULL, OPTION_MAX_LENGTH },
        { NULL, 0, NULL, 0 }
    };
    ImgCommonOpts co = { 0 };
    int64_t start_offset = 0, max_length = -1, length;
    ImgMapEntry curr = { 0 }, next;
    bool json = false;
    BlockBackend *blk;
    int c, ret = 0;

    while ((c = img_getopt(argc, argv, ":f:hU",
                           IMG_LONG_OBJECT | IMG_LONG_FORMAT | IMG_LONG_OUTPUT |
                           IMG_LONG_IMAGE_OPTS | IMG_LONG_FORCE_SHARE,
                           long_options, &co)) != -1) {
        switch (c) {
        case OPTION_START_OFFSET:
            start_offset = img_cvtnum("start offset", optarg);
            if (start_offset < 0) {
                return 1;
            }
            break;
        case OPTION_MAX_LENGTH:
            max_length = img_cvtnum("max length", optarg);
            if (max_length < 0) {
                return 1;
            }
            break;
        }
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting one image file name");
    }
    if (co.output && !img_parse_output(co.output, &json)) {
        return 1;
    }

    blk = img_open(argv[optind], &co.open);
    if (!blk) {
        return 1;
    }
    if (json) {
        putchar('[');
    } else {
        printf("%-16s%-16s%-16s%s\n", "Offset", "Length", "Mapped to",
               "File");
    }

    length = blk_getlength(blk);
    if (length < 0) {
        error_report("Failed to get size for '%s'", argv[optind]);
        ret = -1;
        goto out;
    }
    if (max_length != -1) {
        length = MIN(start_offset + max_length, length);
    }

    curr.start = start_offset;
    while (curr.start + curr.length < length) {
        int64_t offset = curr.start + curr.length;

        ret = img_map_block_status(blk_bs(blk), offset, length - offset,
                                   &next);
        if (ret < 0) {
            error_report("Could not read file metadata: %s",
                         strerror(-ret));
            goto out;
        }
        if (img_map_mergeable(&curr, &next)) {
            curr.length += next.length;
            continue;
        }
        if (curr.length > 0) {
            ret = json ? img_map_dump_json(&curr, false)
                       : img_map_dump_human(&curr);
            if (ret < 0) {
                goto out;
            }
        }
        curr = next;
    }
    ret = json ? img_map_dump_json(&curr, true) : img_map_dump_human(&curr);
    if (json) {
        puts("]");
    }
out:
    blk_unref(blk);
    return ret < 0;
}
