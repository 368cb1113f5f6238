/*
 * qblock-img rebase: gives an image another backing file.
 *
 * Safe mode (the default) keeps what the guest sees: wherever the image
 * leaves a range to its backing file, the old and the new backing file are
 * compared, and the old content is copied into the image where they
 * differ (sector by sector, as qemu-img does).  When the new backing file
 * is already in the chain, only what the images between them hold needs
 * looking at.  Unsafe mode (-u) only changes the name in the header.
 */
#include "qblock-img.h"

#include "qblock/block-node.h"

/* Bytes compared per step, as qemu-img's buffer. */
#define IMG_REBASE_BUF (2 * MiB)

typedef struct ImgRebase {
    BlockBackend *blk;          /* the image */
    BlockBackend *old_backing;  /* NULL: there was none */
    BlockBackend *new_backing;  /* NULL: -b "" */
    BlockDriverState *prefix;   /* the new backing file, if in the chain */
    int64_t size, old_size, new_size;
    ImgProgress *progress;
    const char *filename;
} ImgRebase;

/*
 * The length of the run of sectors at the start of @a and @b that all
 * differ or all match; true if they differ.
 */
static bool img_rebase_compare(const uint8_t *a, const uint8_t *b,
                               int64_t bytes, int64_t *pnum)
{
    int64_t i = MIN(bytes, BDRV_SECTOR_SIZE);
    bool differ = memcmp(a, b, i) != 0;

    while (i < bytes) {
        int64_t len = MIN(bytes - i, BDRV_SECTOR_SIZE);

        if ((memcmp(a + i, b + i, len) != 0) != differ) {
            break;
        }
        i += len;
    }
    *pnum = i;
    return differ;
}

/* Reads @n bytes at @offset of @blk (of @size bytes; zeroes past it). */
static int img_rebase_read(BlockBackend *blk, int64_t size, int64_t offset,
                           int64_t *n, uint8_t *buf)
{
    if (!blk || offset >= size) {
        memset(buf, 0, *n);
        return 1;
    }
    *n = MIN(*n, size - offset);
    return blk_pread(blk, offset, *n, buf, 0);
}

/* Whether guest range [offset, offset + *n) may need copying. */
static int img_rebase_needs_copy(ImgRebase *r, int64_t offset, int64_t *n)
{
    BlockDriverState *bs = blk_bs(r->blk);
    int64_t pnum;
    int ret;

    ret = bdrv_is_allocated(bs, offset, *n, &pnum);
    *n = pnum;
    if (ret != 0 || !r->prefix) {
        return ret < 0 ? ret : !ret;
    }
    /* with the new backing file in the chain, only what lies above it */
    ret = bdrv_block_status_above(bdrv_backing_bs(bs), r->prefix, offset, *n,
                                  &pnum, NULL, NULL, NULL);
    if (ret < 0) {
        return ret;
    }
    if (pnum == 0) {
        /*
         * Past the end of the old backing file, which is shorter than the
         * overlay: the guest reads zeroes there today, while the new
         * backing file further down may hold data.  Let the comparison
         * decide, over the whole range (a zero-length step would never
         * advance).
         */
        return 1;
    }
    *n = pnum;
    return !!(ret & BDRV_BLOCK_ALLOCATED);
}

static int img_rebase_copy(ImgRebase *r)
{
    g_autofree uint8_t *buf_old = g_malloc(IMG_REBASE_BUF);
    g_autofree uint8_t *buf_new = g_malloc(IMG_REBASE_BUF);
    double step = r->size ? 100.0 / (r->size / MIN(r->size,
                                                   IMG_REBASE_BUF)) : 0;
    int64_t offset, n;
    int ret;

    for (offset = 0; offset < r->size; offset += n) {
        int64_t done = 0;
        int old_zero;

        n = MIN(IMG_REBASE_BUF, r->size - offset);
        ret = img_rebase_needs_copy(r, offset, &n);
        if (ret < 0) {
            error_report("error while reading image metadata: %s",
                         strerror(-ret));
            return ret;
        }
        if (!ret) {
            continue;
        }
        old_zero = img_rebase_read(r->old_backing, r->old_size, offset, &n,
                                   buf_old);
        if (old_zero < 0) {
            error_report("error while reading from old backing file");
            return old_zero;
        }
        ret = img_rebase_read(r->new_backing, r->new_size, offset, &n,
                              buf_new);
        if (ret < 0) {
            error_report("error while reading from new backing file");
            return ret;
        }
        while (done < n) {
            int64_t pnum;

            if (img_rebase_compare(buf_old + done, buf_new + done, n - done,
                                   &pnum)) {
                ret = old_zero ?
                      blk_pwrite_zeroes(r->blk, offset + done, pnum, 0) :
                      blk_pwrite(r->blk, offset + done, pnum, buf_old + done,
                                 0);
                if (ret < 0) {
                    error_report("Error while writing to COW image: %s",
                                 strerror(-ret));
                    return ret;
                }
            }
            done += pnum;
        }
        img_progress_print(r->progress, step, 100);
    }
    return 0;
}

/* A BlockBackend over a node of the open chain (read only). */
static BlockBackend *img_rebase_reuse(BlockDriverState *bs, const char *what,
                                      const char *name)
{
    BlockBackend *blk = blk_new(qemu_get_aio_context(),
                                BLK_PERM_CONSISTENT_READ, BLK_PERM_ALL);
    Error *err = NULL;

    if (blk_insert_bs(blk, bs, &err) < 0) {
        error_report("Could not reuse %s '%s': %s", what, name,
                     error_get_pretty(err));
        error_free(err);
        blk_unref(blk);
        return NULL;
    }
    return blk;
}

/* Opens the new backing file, or takes it from the chain. */
static int img_rebase_open_new(ImgRebase *r, const char *base,
                               const char *base_fmt, int src_flags,
                               bool force_share)
{
    BlockDriverState *bs = blk_bs(r->blk);
    g_autofree char *path = NULL;
    const char *exact;
    Error *err = NULL;
    QDict *options;

    bdrv_refresh_filename(bs);
    exact = bdrv_get_exact_filename(bs);
    path = bdrv_get_full_backing_filename_from_filename(
        exact[0] ? exact : bdrv_get_filename(bs), base, &err);
    if (!path) {
        error_report("Could not resolve backing filename: %s",
                     error_get_pretty(err));
        error_free(err);
        return -EINVAL;
    }
    r->prefix = bdrv_find_backing_image(bs, path);
    if (r->prefix) {
        r->new_backing = img_rebase_reuse(r->prefix, "backing file", base);
        return r->new_backing ? 0 : -EINVAL;
    }
    options = qdict_new();
    if (base_fmt) {
        qdict_put_str(options, "driver", base_fmt);
    }
    if (force_share) {
        qdict_put_bool(options, BDRV_OPT_FORCE_SHARE, true);
    }
    r->new_backing = blk_new_open(path, NULL, options, src_flags, &err);
    if (!r->new_backing) {
        error_report("Could not open new backing file '%s': %s", base,
                     error_get_pretty(err));
        error_free(err);
        return -EINVAL;
    }
    return 0;
}

/* The sizes the copy compares over. */
static int img_rebase_sizes(ImgRebase *r, const char *base)
{
    r->size = blk_getlength(r->blk);
    if (r->size < 0) {
        error_report("Could not get size of '%s': %s", r->filename,
                     strerror(-r->size));
        return r->size;
    }
    if (r->old_backing) {
        r->old_size = blk_getlength(r->old_backing);
        if (r->old_size < 0) {
            error_report("Could not get size of '%s': %s",
                         bdrv_get_filename(blk_bs(r->old_backing)),
                         strerror(-r->old_size));
            return r->old_size;
        }
    }
    if (r->new_backing) {
        r->new_size = blk_getlength(r->new_backing);
        if (r->new_size < 0) {
            error_report("Could not get size of '%s': %s", base,
                         strerror(-r->new_size));
            return r->new_size;
        }
    }
    return 0;
}

static void img_rebase_report_change(int ret, const char *base,
                                     const char *base_fmt)
{
    if (ret == -ENOSPC) {
        error_report("Could not change the backing file to '%s': No space "
                     "left in the file header", base);
    } else if (ret == -EINVAL && base && !base_fmt) {
        error_report("Could not change the backing file to '%s': backing "
                     "format must be specified", base);
    } else if (ret < 0) {
        error_report("Could not change the backing file to '%s': %s", base,
                     strerror(-ret));
    }
}

int img_rebase(int argc, char **argv)
{
    ImgCommonOpts co = { .open = { .flags = BDRV_O_RDWR } };
    ImgOpenOptions src = { 0 };
    const char *cache = IMG_CACHE_DEFAULT, *src_cache = IMG_CACHE_DEFAULT;
    const char *base = NULL, *base_fmt = NULL;
    bool unsafe = false, show_progress = false;
    ImgProgress progress;
    ImgRebase r = { .progress = &progress };
    BlockDriverState *bs, *old;
    int c, ret = -1;

    while ((c = img_getopt(argc, argv, ":hf:F:b:upt:T:qU",
                           IMG_LONG_OBJECT | IMG_LONG_IMAGE_OPTS |
                           IMG_LONG_FORCE_SHARE,
                           NULL, &co)) != -1) {
        switch (c) {
        case 'F':
            base_fmt = optarg;
            break;
        case 'b':
            base = optarg;
            break;
        case 'u':
            unsafe = true;
            break;
        case 'p':
            show_progress = true;
            break;
        case 't':
            cache = optarg;
            break;
        case 'T':
            src_cache = optarg;
            break;
        }
    }
    if (!unsafe && !base) {
        img_error_exit("Must specify backing file (-b) or use unsafe mode "
                       "(-u)");
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting one image file name");
    }
    r.filename = argv[optind];
    img_progress_init(&progress, show_progress && !co.quiet, 2.0);
    img_progress_print(&progress, 0, 100);

    if (unsafe) {
        co.open.flags |= BDRV_O_NO_BACKING;
    }
    if (img_parse_cache(cache, &co.open) < 0) {
        error_report("Invalid cache option: %s", cache);
        goto out;
    }
    if (img_parse_cache(src_cache, &src) < 0) {
        error_report("Invalid source cache option: %s", src_cache);
        goto out;
    }
    r.blk = img_open(r.filename, &co.open);
    if (!r.blk) {
        goto out;
    }
    bs = blk_bs(r.blk);
    if (base_fmt && !bdrv_find_format(base_fmt)) {
        error_report("Invalid format name: '%s'", base_fmt);
        goto out;
    }

    if (!unsafe) {
        old = bdrv_backing_bs(bs);
        if (old) {
            r.old_backing = img_rebase_reuse(old, "old backing file",
                                             bdrv_get_filename(old));
            if (!r.old_backing) {
                goto out;
            }
        }
        if (base[0] && img_rebase_open_new(&r, base, base_fmt, src.flags,
                                           co.open.force_share) < 0) {
            goto out;
        }
        if (img_rebase_sizes(&r, base) < 0 || img_rebase_copy(&r) < 0) {
            goto out;
        }
        /*
         * The copied data and its mapping reach the disk before the header
         * names the new backing file: a crash in between leaves the image
         * on its old backing file, where the copies change nothing seen.
         */
        ret = blk_flush(r.blk);
        if (ret < 0) {
            error_report("Could not flush the image: %s", strerror(-ret));
            goto out;
        }
    }

    /* the image now holds what differs: the switch changes nothing seen */
    ret = base && base[0] ?
          bdrv_change_backing_file(bs, base, base_fmt, true) :
          bdrv_change_backing_file(bs, NULL, NULL, false);
    img_rebase_report_change(ret, base, base_fmt);
    img_progress_print(&progress, 100, 0);

out:
    img_progress_end(&progress);
    blk_unref(r.old_backing);
    blk_unref(r.new_backing);
    blk_unref(r.blk);
    return ret ? 1 : 0;
}
