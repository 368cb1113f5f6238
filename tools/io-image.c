/*
 * qblock-io's image commands: open, close, reopen, truncate, length, info,
 * alloc, map and stats.
 */
#include "io-cmds.h"

#include <getopt.h>

#include "io-stats.h"
#include "block/qapi.h"

static int qio_truncate_f(BlockBackend *blk, int argc, char **argv)
{
    PreallocMode prealloc = PREALLOC_MODE_OFF;
    Error *local_err = NULL;
    int64_t offset;
    int c, ret;

    while ((c = getopt(argc, argv, "m:")) != -1) {
        switch (c) {
        case 'm':
            for (prealloc = 0; prealloc < PREALLOC_MODE__MAX; prealloc++) {
                if (!strcmp(optarg, PreallocMode_str[prealloc])) {
                    break;
                }
            }
            if (prealloc == PREALLOC_MODE__MAX) {
                error_report("Invalid preallocation mode '%s'", optarg);
                return -EINVAL;
            }
            break;
        default:
            return qio_usage_error(argv[0]);
        }
    }
    /* qemu-io reads past the arguments here ("truncate -m full") */
    if (optind >= argc) {
        return qio_usage_error(argv[0]);
    }

    ret = qio_parse_number(argv[optind], &offset);
    if (ret < 0) {
        return ret;
    }

    ret = blk_truncate(blk, offset, false, prealloc, 0, &local_err);
    if (ret < 0) {
        error_report_err(local_err);
        return ret;
    }
    return 0;
}

const QioCmd qio_cmd_truncate = {
    .name = "truncate",
    .alias = "t",
    .func = qio_truncate_f,
    .argmin = 1,
    .argmax = 3,
    .perm = BLK_PERM_WRITE | BLK_PERM_RESIZE,
    .args = "[-m prealloc_mode] off",
    .oneline = "truncates the current file at the given offset",
};

static int qio_length_f(BlockBackend *blk, int argc, char **argv)
{
    int64_t size = blk_getlength(blk);
    char s[64];

    if (size < 0) {
        printf("getlength: %s\n", strerror(-size));
        return size;
    }
    qio_cvtstr(size, s, sizeof(s));
    printf("%s\n", s);
    return 0;
}

const QioCmd qio_cmd_length = {
    .name = "length",
    .alias = "l",
    .func = qio_length_f,
    .argmin = 0,
    .argmax = 0,
    .oneline = "gets the length of the current file",
};

static int qio_info_f(BlockBackend *blk, int argc, char **argv)
{
    BlockDriverState *bs = blk_bs(blk);
    BlockDriverInfo bdi = { 0 };
    g_autoptr(JsonNode) specific_info = NULL;
    g_autofree char *specific = NULL;
    char s1[64], s2[64];
    int ret;

    if (bdrv_get_format_name(bs)) {
        printf("format name: %s\n", bdrv_get_format_name(bs));
    }
    /* a protocol node names itself twice, as qemu-io prints it */
    if (bdrv_get_protocol_name(bs)) {
        printf("format name: %s\n", bdrv_get_protocol_name(bs));
    }

    /*
     * A driver without such information (null-co, nbd) fails the command
     * silently, as in qemu-io; raw and file report zeroes.
     */
    ret = bdrv_get_info(bs, &bdi);
    if (ret < 0) {
        return ret;
    }
    qio_cvtstr(bdi.cluster_size, s1, sizeof(s1));
    qio_cvtstr(bdi.vm_state_offset, s2, sizeof(s2));
    printf("cluster size: %s\n", s1);
    printf("vm state offset: %s\n", s2);

    specific_info = bdrv_get_specific_info(bs);
    specific = image_info_specific_human(specific_info);
    if (specific) {
        printf("Format specific information:\n%s", specific);
    }
    return 0;
}

const QioCmd qio_cmd_info = {
    .name = "info",
    .alias = "i",
    .func = qio_info_f,
    .argmin = 0,
    .argmax = 0,
    .oneline = "prints information about the current file",
};

/*
 * The allocation status of the run of bytes at @offset, at the top layer
 * only (as qemu-io's map and alloc look): 1 allocated, 0 not, -errno.
 */
static int qio_is_allocated(BlockBackend *blk, int64_t offset, int64_t bytes,
                            int64_t *pnum)
{
    return bdrv_is_allocated(blk_bs(blk), offset, bytes, pnum);
}

static int qio_alloc_f(BlockBackend *blk, int argc, char **argv)
{
    int64_t offset, count = BDRV_SECTOR_SIZE, length, remaining;
    int64_t sum_alloc = 0, num, pos;
    char s[64];
    int ret;

    ret = qio_parse_number(argv[1], &offset);
    if (ret < 0) {
        return ret;
    }
    if (argc == 3) {
        ret = qio_parse_number(argv[2], &count);
        if (ret < 0) {
            return ret;
        }
    }

    length = blk_getlength(blk);
    if (length < 0) {
        printf("getlength: %s\n", strerror(-length));
        return length;
    }
    /* the range is clipped at the end of the image */
    count = MIN(count, MAX(length - offset, 0));

    remaining = count;
    pos = offset;
    while (remaining > 0) {
        ret = qio_is_allocated(blk, pos, remaining, &num);
        if (ret < 0) {
            printf("is_allocated failed: %s\n", strerror(-ret));
            return ret;
        }
        if (num == 0) {
            break;
        }
        if (ret) {
            sum_alloc += num;
        }
        pos += num;
        remaining -= num;
    }

    qio_cvtstr(offset, s, sizeof(s));
    printf("%" PRId64 "/%" PRId64 " bytes allocated at offset %s\n",
           sum_alloc, count, s);
    return 0;
}

const QioCmd qio_cmd_alloc = {
    .name = "alloc",
    .alias = "a",
    .func = qio_alloc_f,
    .argmin = 1,
    .argmax = 2,
    .args = "offset [count]",
    .oneline = "checks if offset is allocated in the file",
};

static int qio_map_f(BlockBackend *blk, int argc, char **argv)
{
    int64_t offset = 0, length, num;
    char s1[64], s2[64];
    int ret;

    length = blk_getlength(blk);
    if (length < 0) {
        printf("getlength: %s\n", strerror(-length));
        return length;
    }

    while (offset < length) {
        int64_t run, next;
        int allocated;

        ret = qio_is_allocated(blk, offset, length - offset, &num);
        if (ret < 0) {
            /* qemu-io reports this one under its own name, on stderr */
            error_report("Failed to get allocation status: %s",
                         strerror(-ret));
            return ret;
        }
        if (num == 0) {
            break;
        }
        allocated = ret;
        run = num;

        /* merge the following pieces with the same status into one line */
        for (next = offset + run; next < length; next += num) {
            ret = qio_is_allocated(blk, next, length - next, &num);
            if (ret < 0) {
                error_report("Failed to get allocation status: %s",
                             strerror(-ret));
                return ret;
            }
            if (ret != allocated || num == 0) {
                break;
            }
            run += num;
        }

        qio_cvtstr(run, s1, sizeof(s1));
        qio_cvtstr(offset, s2, sizeof(s2));
        printf("%s (0x%" PRIx64 ") bytes %s at offset %s (0x%" PRIx64 ")\n",
               s1, run, allocated ? "    allocated" : "not allocated",
               s2, offset);
        offset += run;
    }
    return 0;
}

const QioCmd qio_cmd_map = {
    .name = "map",
    .func = qio_map_f,
    .argmin = 0,
    .argmax = 0,
    .args = "",
    .oneline = "prints the allocated areas of a file",
};

/* Adds the "key=value,..." options of @str to @opts. */
static bool qio_join_options(QDict *opts, const char *str)
{
    QDict *parsed = qio_parse_options(str);

    if (!parsed) {
        return false;
    }
    qdict_join(opts, parsed, true);
    qdict_unref(parsed);
    return true;
}

static const char qio_help_open[] =
    "\n"
    " opens a new file in the requested mode\n"
    "\n"
    " Example:\n"
    " 'open -n -o driver=raw /tmp/data' - opens raw data file read-write,"
    " uncached\n"
    "\n"
    " Opens a file for subsequent use by all of the other qemu-io commands.\n"
    " -r, -- open file read-only\n"
    " -s, -- use snapshot file\n"
    " -C, -- use copy-on-read\n"
    " -n, -- disable host cache, short for -t none\n"
    " -U, -- force shared permissions\n"
    " -k, -- use kernel AIO implementation (Linux only, prefer use of -i)\n"
    " -i, -- use AIO mode (threads, native or io_uring)\n"
    " -t, -- use the given cache mode for the image\n"
    " -d, -- use the given discard mode for the image\n"
    " -o, -- options to be given to the block driver\n";

static int qio_open_f(BlockBackend *blk, int argc, char **argv)
{
    QioOpenOpts o = QIO_OPEN_OPTS_DEFAULT;
    QDict *opts = qdict_new();
    int c, ret;

    while ((c = getopt(argc, argv, "snCro:ki:t:d:U")) != -1) {
        ret = qio_open_opt(c, optarg, &o);
        if (ret < 0) {
            goto fail;
        }
        if (ret > 0) {
            continue;
        }
        switch (c) {
        case 'o':
            if (!qio_join_options(opts, optarg)) {
                goto fail;
            }
            break;
        default:
            qio_usage_error(argv[0]);
            goto fail;
        }
    }

    /* with --image-opts, the path is an option string as on the command
     * line */
    if (qio_image_opts && optind == argc - 1) {
        if (!qio_join_options(opts, argv[optind])) {
            goto fail;
        }
        optind++;
    }

    if (optind == argc - 1) {
        ret = qio_open(argv[optind], &o, opts);
    } else if (optind == argc) {
        ret = qio_open(NULL, &o, opts);
    } else {
        qio_usage_error(argv[0]);
        goto fail;
    }
    return ret < 0 ? -EINVAL : 0;

fail:
    qdict_unref(opts);
    return -EINVAL;
}

const QioCmd qio_cmd_open = {
    .name = "open",
    .alias = "o",
    .func = qio_open_f,
    .argmin = 1,
    .argmax = -1,
    .flags = QIO_CMD_NOFILE_OK,
    .args = "[-rsCnkU] [-t cache] [-d discard] [-o options] [path]",
    .oneline = "open the file specified by path",
    .help = qio_help_open,
};

static int qio_close_f(BlockBackend *blk, int argc, char **argv)
{
    qio_close();
    return 0;
}

const QioCmd qio_cmd_close = {
    .name = "close",
    .alias = "c",
    .func = qio_close_f,
    .argmin = 0,
    .argmax = 0,
    .oneline = "close the current open file",
};

static const char qio_help_reopen[] =
    "\n"
    " Changes the open options of an already opened image\n"
    "\n"
    " Example:\n"
    " 'reopen -o lazy-refcounts=on' - activates lazy refcount writeback on a"
    " qcow2 image\n"
    "\n"
    " -r, -- Reopen the image read-only\n"
    " -w, -- Reopen the image read-write\n"
    " -c, -- Change the cache mode to the given value\n"
    " -o, -- Changes block driver options (cf. 'open' command)\n"
    "\n";

static int qio_reopen_f(BlockBackend *blk, int argc, char **argv)
{
    BlockDriverState *bs = blk_bs(blk);
    int flags = bdrv_get_open_flags(bs);
    bool writethrough = !blk_enable_write_cache(blk);
    bool has_rw_option = false, has_cache_option = false;
    bool read_only = bdrv_is_read_only(bs);
    uint64_t orig_perm, orig_shared;
    Error *local_err = NULL;
    QDict *opts = qdict_new();
    int c, ret;

    while ((c = getopt(argc, argv, "c:o:rw")) != -1) {
        switch (c) {
        case 'c':
            has_cache_option = true;
            flags &= ~BDRV_O_CACHE_MASK;
            if (bdrv_parse_cache_mode(optarg, &flags, &writethrough) < 0) {
                error_report("Invalid cache option: %s", optarg);
                ret = -EINVAL;
                goto out;
            }
            break;
        case 'o':
            if (!qio_join_options(opts, optarg)) {
                ret = -EINVAL;
                goto out;
            }
            break;
        case 'r':
        case 'w':
            if (has_rw_option) {
                error_report("Only one -r/-w option may be given");
                ret = -EINVAL;
                goto out;
            }
            has_rw_option = true;
            read_only = c == 'r';
            break;
        default:
            ret = qio_usage_error(argv[0]);
            goto out;
        }
    }
    if (optind != argc) {
        ret = qio_usage_error(argv[0]);
        goto out;
    }
    /* the same setting given twice, in two ways, has no winner */
    if (has_rw_option && qdict_haskey(opts, "read-only")) {
        error_report("Cannot set both -r/-w and 'read-only'");
        ret = -EINVAL;
        goto out;
    }
    if (has_cache_option && (qdict_haskey(opts, "cache.direct") ||
                             qdict_haskey(opts, "cache.no-flush"))) {
        error_report("Cannot set both -c and the cache options");
        ret = -EINVAL;
        goto out;
    }

    if (read_only) {
        flags &= ~BDRV_O_RDWR;
    } else {
        flags |= BDRV_O_RDWR;
    }

    /*
     * A read-only node cannot keep a writer: give up the write and resize
     * permissions first (the commands that need them ask again).
     */
    blk_get_perm(blk, &orig_perm, &orig_shared);
    if (read_only && (orig_perm & (BLK_PERM_WRITE | BLK_PERM_RESIZE))) {
        ret = blk_set_perm(blk,
                           orig_perm & ~(BLK_PERM_WRITE | BLK_PERM_RESIZE),
                           orig_shared, &local_err);
        if (ret < 0) {
            error_report_err(local_err);
            goto out;
        }
    }

    /* bdrv_reopen() takes the options over */
    ret = bdrv_reopen(bs, opts, flags, &local_err);
    opts = NULL;
    if (ret < 0) {
        error_report_err(local_err);
        /* back to what the image had; failing again leaves it read-only */
        blk_set_perm(blk, orig_perm, orig_shared, NULL);
        goto out;
    }
    blk_set_enable_write_cache(blk, !writethrough);
    ret = 0;

out:
    qdict_unref(opts);
    return ret;
}

const QioCmd qio_cmd_reopen = {
    .name = "reopen",
    .func = qio_reopen_f,
    .argmin = 0,
    .argmax = -1,
    .args = "[(-r|-w)] [-c cache] [-o options]",
    .oneline = "reopens an image with new options",
    .help = qio_help_reopen,
};

static const char qio_help_stats[] =
    "\n"
    " prints the I/O statistics of the open image (not a qemu-io command)\n"
    "\n"
    " The first line holds the counters of the image's BlockBackend, as\n"
    " query-blockstats names them:\n"
    " backend: rd_bytes=N wr_bytes=N flush_bytes=N unmap_bytes=N\n"
    "   rd_operations=N wr_operations=N flush_operations=N\n"
    "   unmap_operations=N failed_rd_operations=N ...\n"
    "   failed_unmap_operations=N\n"
    "   invalid_rd_operations=N ... invalid_unmap_operations=N\n"
    "   wr_highest_offset=N\n"
    " (all on one line).  Then one line per node of the graph, depth first,\n"
    " starting with the image's top node:\n"
    " node PATH DRIVER NODE-NAME: reads=N writes=N zero_writes=N discards=N\n"
    "   flushes=N bytes_read=N bytes_written=N\n"
    " PATH is 'root' for the top node and the parent's PATH, a dot and the\n"
    " child's role for the others ('root.file', 'root.backing.file').\n"
    " These count the requests that reached each node's driver; 'flushes'\n"
    " counts those that reached its flush to disk.  NODE-NAME is '-' when\n"
    " the node has none.\n"
    "\n"
    " Example:\n"
    " 'stats' after a write in writethrough mode shows flushes=1 on\n"
    " root.file\n"
    "\n";

/* One line per node, depth first; @path names the edges from the top. */
static int qio_stats_f(BlockBackend *blk, int argc, char **argv)
{
    tool_print_io_stats(stdout, blk);
    return 0;
}

const QioCmd qio_cmd_stats = {
    .name = "stats",
    .func = qio_stats_f,
    .argmin = 0,
    .argmax = 0,
    .oneline = "prints I/O statistics of the image and of each node",
    .help = qio_help_stats,
};
