/*
 * qblock-img commit: writes what an image holds over its backing file
 * into a file deeper in its chain (the immediate backing file, or -b), then
 * empties the image (unless -d, or -b, which implies -d as in qemu-img:
 * the images between are no longer valid, the top one must stay so).
 *
 * The base is reopened read-write; the top image is read through the
 * chain, so ranges that the layers above the base hold are copied,
 * zeroes as zeroes; the base grows to the top's size if it is smaller.
 * The base is flushed before the top is emptied.
 */
#include "qblock-img.h"

#include "qblock/block-node.h"

/* Bytes copied per request. */
#define IMG_COMMIT_BUF (1 * MiB)

typedef struct ImgCommit {
    BlockBackend *top;
    BlockBackend *base;
    BlockDriverState *base_bs;
    ImgProgress *progress;
} ImgCommit;

/*
 * qemu-img runs the copy as a block job and reports any failure of it in
 * these words, whatever the request: scripts (QEMU's iotest 020) match
 * them.
 */
static void img_commit_job_failed(int ret)
{
    error_report("Block job failed: %s", strerror(-ret));
}

/* Copies [offset, offset + bytes) of the top image into the base. */
static int img_commit_range(ImgCommit *c, int64_t offset, int64_t bytes,
                            bool zero, uint8_t *buf)
{
    int ret;

    if (zero) {
        ret = blk_pwrite_zeroes(c->base, offset, bytes, BDRV_REQ_MAY_UNMAP);
        if (ret < 0) {
            img_commit_job_failed(ret);
        }
        return ret;
    }
    while (bytes > 0) {
        int64_t n = MIN(bytes, IMG_COMMIT_BUF);

        ret = blk_pread(c->top, offset, n, buf, 0);
        if (ret < 0) {
            img_commit_job_failed(ret);
            return ret;
        }
        ret = blk_pwrite(c->base, offset, n, buf, 0);
        if (ret < 0) {
            img_commit_job_failed(ret);
            return ret;
        }
        offset += n;
        bytes -= n;
    }
    return 0;
}

static int img_commit_copy(ImgCommit *c)
{
    BlockDriverState *bs = blk_bs(c->top);
    int64_t size = blk_getlength(c->top);
    int64_t base_size = blk_getlength(c->base);
    g_autofree uint8_t *buf = NULL;
    Error *err = NULL;
    int64_t offset, pnum;
    int ret;

    if (size < 0 || base_size < 0) {
        ret = size < 0 ? size : base_size;
        error_report("Could not get the image size: %s", strerror(-ret));
        return ret;
    }
    if (base_size < size &&
        blk_truncate(c->base, size, false, PREALLOC_MODE_OFF, 0, &err) < 0) {
        error_report_err(err);
        return -EINVAL;
    }
    buf = blk_blockalign(c->top, IMG_COMMIT_BUF);
    for (offset = 0; offset < size; offset += pnum) {
        ret = bdrv_block_status_above(bs, c->base_bs, offset, size - offset,
                                      &pnum, NULL, NULL, NULL);
        if (ret < 0) {
            error_report("Could not get the block status at offset %" PRId64
                         ": %s", offset, strerror(-ret));
            return ret;
        }
        if (ret & BDRV_BLOCK_ALLOCATED) {
            ret = img_commit_range(c, offset, pnum, ret & BDRV_BLOCK_ZERO,
                                   buf);
            if (ret < 0) {
                return ret;
            }
        }
        img_progress_print(c->progress, 100.0 * (offset + pnum) / size, 0);
    }
    ret = blk_flush(c->base);
    if (ret < 0) {
        error_report("Could not flush the base image: %s", strerror(-ret));
    }
    return ret;
}

/*
 * The top image reads through the chain, so the base must not change under
 * it, unless its user accepts that: this tool does, as the writer.
 */
static int img_commit_let_base_change(BlockBackend *top, Error **errp)
{
    uint64_t perm, shared;

    blk_get_perm(top, &perm, &shared);
    return blk_set_perm(top, perm, shared | BLK_PERM_WRITE | BLK_PERM_RESIZE,
                        errp);
}

/* The base named by -b, or the immediate backing file; NULL after an
 * error. */
static BlockDriverState *img_commit_find_base(BlockDriverState *bs,
                                              const char *base,
                                              const char *filename)
{
    BlockDriverState *b;

    if (base) {
        b = bdrv_find_backing_image(bs, base);
        if (!b) {
            error_report("Did not find '%s' in the backing chain of '%s'",
                         base, filename);
        }
        return b;
    }
    b = bdrv_backing_bs(bs);
    if (!b) {
        error_report("Image does not have a backing file");
    }
    return b;
}

int img_commit(int argc, char **argv)
{
    ImgCommonOpts co = { .open = { .flags = BDRV_O_RDWR | BDRV_O_UNMAP } };
    const char *cache = IMG_CACHE_DEFAULT, *base = NULL, *filename;
    bool keep = false, show_progress = false;
    ImgProgress progress;
    ImgCommit c = { .progress = &progress };
    Error *err = NULL;
    int ch, ret = -1;

    while ((ch = img_getopt(argc, argv, ":f:ht:b:dpqr:",
                            IMG_LONG_OBJECT | IMG_LONG_IMAGE_OPTS,
                            NULL, &co)) != -1) {
        switch (ch) {
        case 't':
            cache = optarg;
            break;
        case 'b':
            base = optarg;
            /* the images between are invalid afterwards: keep the top */
            keep = true;
            break;
        case 'd':
            keep = true;
            break;
        case 'p':
            show_progress = true;
            break;
        case 'r':
            /* a copy in one process has nobody to share bandwidth with:
             * the limit is checked and not applied */
            if (img_cvtnum("rate limit", optarg) < 0) {
                return 1;
            }
            break;
        }
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting one image file name");
    }
    filename = argv[optind];
    img_progress_init(&progress, show_progress && !co.quiet, 1.0);
    if (img_parse_cache(cache, &co.open) < 0) {
        error_report("Invalid cache option: %s", cache);
        goto out;
    }
    c.top = img_open(filename, &co.open);
    if (!c.top) {
        goto out;
    }
    c.base_bs = img_commit_find_base(blk_bs(c.top), base, filename);
    if (!c.base_bs) {
        goto out;
    }
    img_progress_print(&progress, 0, 100);
    if (img_commit_let_base_change(c.top, &err) < 0 ||
        bdrv_reopen_set_read_only(c.base_bs, false, &err) < 0) {
        error_report_err(err);
        goto out;
    }
    c.base = blk_new(qemu_get_aio_context(),
                     BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE |
                     BLK_PERM_RESIZE, BLK_PERM_ALL);
    if (blk_insert_bs(c.base, c.base_bs, &err) < 0) {
        error_report_err(err);
        goto out;
    }
    blk_set_enable_write_cache(c.base, true);
    ret = img_commit_copy(&c);
    if (ret == 0 && !keep) {
        ret = bdrv_make_empty(blk_bs(c.top), &err);
        if (ret == -ENOTSUP) {
            error_free(err);
            ret = 0;
        } else if (ret < 0) {
            error_report_err(err);
        }
    }
    if (ret == 0) {
        img_progress_print(&progress, 100, 0);
    }

out:
    img_progress_end(&progress);
    blk_unref(c.base);
    blk_unref(c.top);
    if (ret == 0 && !co.quiet) {
        printf("Image committed.\n");
    }
    return ret ? 1 : 0;
}
