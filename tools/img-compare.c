/*
 * qblock-img compare: are two images' contents the same?
 *
 * Exit status as qemu-img: 0 identical, 1 different, 2 an image could not
 * be opened, 3 block status failed, 4 a read failed.  Differences are
 * reported at 512-byte sector granularity, as qemu-img reports them.
 */
#include "qblock-img.h"

/* Bytes compared per step. */
#define IMG_COMPARE_BUF_SIZE (2 * MiB)

/*
 * Offset of the first sector of @buf (of @bytes) that is not all zero,
 * or -1.
 */
static int64_t img_find_nonzero(const uint8_t *buf, int64_t bytes)
{
    for (int64_t i = 0; i < bytes; i += BDRV_SECTOR_SIZE) {
        if (!buffer_is_zero(buf + i, MIN(BDRV_SECTOR_SIZE, bytes - i))) {
            return i;
        }
    }
    return -1;
}

/* Offset of the first sector where @a and @b differ, or -1. */
static int64_t img_find_mismatch(const uint8_t *a, const uint8_t *b,
                                 int64_t bytes)
{
    for (int64_t i = 0; i < bytes; i += BDRV_SECTOR_SIZE) {
        if (memcmp(a + i, b + i, MIN(BDRV_SECTOR_SIZE, bytes - i))) {
            return i;
        }
    }
    return -1;
}

/*
 * Checks that a range allocated in only one image reads as zeroes there
 * (the other image reads zeroes).  Returns 0, or the exit status.
 */
static int img_check_empty_sectors(BlockBackend *blk, int64_t offset,
                                   int64_t bytes, const char *filename,
                                   uint8_t *buf, bool quiet)
{
    int64_t idx;
    int ret;

    ret = blk_pread(blk, offset, bytes, buf, 0);
    if (ret < 0) {
        error_report("Error while reading offset %" PRId64 " of %s: %s",
                     offset, filename, strerror(-ret));
        return 4;
    }
    idx = img_find_nonzero(buf, bytes);
    if (idx >= 0) {
        if (!quiet) {
            printf("Content mismatch at offset %" PRId64 "!\n", offset + idx);
        }
        return 1;
    }
    return 0;
}

typedef struct ImgCompareImage {
    const char *filename;
    BlockBackend *blk;
    int64_t size;
    uint8_t *buf;
} ImgCompareImage;

/* How to compare: -s and -q. */
typedef enum ImgCompareFlags {
    IMG_COMPARE_STRICT = 1 << 0, /* allocation and size must match too */
    IMG_COMPARE_QUIET = 1 << 1,  /* print nothing, only the exit status */
} ImgCompareFlags;

/* Compares one chunk at @offset; returns 0 or the exit status. */
static int img_compare_chunk(ImgCompareImage *img, int64_t offset,
                             int64_t *pchunk, ImgCompareFlags flags)
{
    bool quiet = flags & IMG_COMPARE_QUIET;
    int64_t pnum[2], chunk;
    int status[2];
    bool allocated[2];
    int ret;

    for (int i = 0; i < 2; i++) {
        status[i] = bdrv_block_status_above(blk_bs(img[i].blk), NULL,
                                            offset, img[i].size - offset,
                                            &pnum[i], NULL, NULL, NULL);
        if (status[i] < 0) {
            error_report("Sector allocation test failed for %s",
                         img[i].filename);
            return 3;
        }
        allocated[i] = status[i] & BDRV_BLOCK_ALLOCATED;
    }
    chunk = MIN(pnum[0], pnum[1]);
    *pchunk = chunk;

    if ((flags & IMG_COMPARE_STRICT) && status[0] != status[1]) {
        if (!quiet) {
            printf("Strict mode: Offset %" PRId64
                   " block status mismatch!\n", offset);
        }
        return 1;
    }
    /* Both read as zeroes, or both come from below: nothing to read. */
    if (((status[0] & BDRV_BLOCK_ZERO) && (status[1] & BDRV_BLOCK_ZERO)) ||
        (!allocated[0] && !allocated[1])) {
        return 0;
    }

    chunk = MIN(chunk, IMG_COMPARE_BUF_SIZE);
    *pchunk = chunk;
    if (allocated[0] != allocated[1]) {
        int i = allocated[0] ? 0 : 1;

        return img_check_empty_sectors(img[i].blk, offset, chunk,
                                       img[i].filename, img[0].buf, quiet);
    }
    for (int i = 0; i < 2; i++) {
        ret = blk_pread(img[i].blk, offset, chunk, img[i].buf, 0);
        if (ret < 0) {
            error_report("Error while reading offset %" PRId64 " of %s: %s",
                         offset, img[i].filename, strerror(-ret));
            return 4;
        }
    }
    ret = img_find_mismatch(img[0].buf, img[1].buf, chunk);
    if (ret >= 0) {
        if (!quiet) {
            printf("Content mismatch at offset %" PRId64 "!\n", offset + ret);
        }
        return 1;
    }
    return 0;
}

/* The tail of the larger image must read as zeroes. */
static int img_compare_tail(ImgCompareImage *over, int64_t offset,
                            int64_t end, ImgProgress *progress, bool quiet)
{
    while (offset < end) {
        int64_t chunk;
        int ret;

        ret = bdrv_block_status_above(blk_bs(over->blk), NULL, offset,
                                      end - offset, &chunk, NULL, NULL,
                                      NULL);
        if (ret < 0) {
            error_report("Sector allocation test failed for %s",
                         over->filename);
            return 3;
        }
        if ((ret & BDRV_BLOCK_ALLOCATED) && !(ret & BDRV_BLOCK_ZERO)) {
            chunk = MIN(chunk, IMG_COMPARE_BUF_SIZE);
            ret = img_check_empty_sectors(over->blk, offset, chunk,
                                          over->filename, over->buf, quiet);
            if (ret) {
                return ret;
            }
        }
        offset += chunk;
        img_progress_print(progress, (float)chunk / end * 100, 100);
    }
    return 0;
}

static int img_compare_images(ImgCompareImage *img, ImgCompareFlags flags,
                              ImgProgress *progress)
{
    bool quiet = flags & IMG_COMPARE_QUIET;
    int64_t total_size, progress_base, offset = 0, chunk;
    int ret;

    for (int i = 0; i < 2; i++) {
        img[i].size = blk_getlength(img[i].blk);
        if (img[i].size < 0) {
            error_report("Can't get size of %s: %s", img[i].filename,
                         strerror(-img[i].size));
            return 4;
        }
        img[i].buf = blk_blockalign(img[i].blk, IMG_COMPARE_BUF_SIZE);
    }
    total_size = MIN(img[0].size, img[1].size);
    progress_base = MAX(img[0].size, img[1].size);
    img_progress_print(progress, 0, 100);

    if ((flags & IMG_COMPARE_STRICT) && img[0].size != img[1].size) {
        if (!quiet) {
            printf("Strict mode: Image size mismatch!\n");
        }
        return 1;
    }
    while (offset < total_size) {
        ret = img_compare_chunk(img, offset, &chunk, flags);
        if (ret) {
            return ret;
        }
        offset += chunk;
        img_progress_print(progress, (float)chunk / progress_base * 100,
                           100);
    }
    if (img[0].size != img[1].size) {
        if (!quiet) {
            printf("Warning: Image size mismatch!\n");
        }
        ret = img_compare_tail(&img[img[0].size > img[1].size ? 0 : 1],
                               offset, progress_base, progress, quiet);
        if (ret) {
            return ret;
        }
    }
    if (!quiet) {
        printf("Images are identical.\n");
    }
    return 0;
}

int img_compare(int argc, char **argv)
{
    ImgCommonOpts co = { 0 };   /* -f is the first image's format */
    ImgOpenOptions o[2] = { { 0 }, { 0 } };
    const char *cache = IMG_CACHE_DEFAULT;
    ImgCompareImage img[2] = { { 0 }, { 0 } };
    ImgCompareFlags flags = 0;
    bool progress = false;
    ImgProgress meter;
    int c, ret;

    while ((c = img_getopt(argc, argv, ":hf:F:T:pqsU",
                           IMG_LONG_OBJECT | IMG_LONG_IMAGE_OPTS |
                           IMG_LONG_FORCE_SHARE,
                           NULL, &co)) != -1) {
        switch (c) {
        case 'F':
            o[1].fmt = optarg;
            break;
        case 'T':
            cache = optarg;
            break;
        case 'p':
            progress = true;
            break;
        case 's':
            flags |= IMG_COMPARE_STRICT;
            break;
        }
    }
    if (optind != argc - 2) {
        img_error_exit("Expecting two image file names");
    }
    img[0].filename = argv[optind];
    img[1].filename = argv[optind + 1];

    img_progress_init(&meter, progress && !co.quiet, 2.0);
    ret = 2;
    o[0].fmt = co.open.fmt;
    for (int i = 0; i < 2; i++) {
        o[i].image_opts = co.open.image_opts;
        o[i].force_share = co.open.force_share;
        if (img_parse_cache(cache, &o[i]) < 0) {
            error_report("Invalid source cache option: %s", cache);
            goto out;
        }
    }
    for (int i = 0; i < 2; i++) {
        img[i].blk = img_open(img[i].filename, &o[i]);
        if (!img[i].blk) {
            goto out;
        }
    }
    if (co.quiet) {
        flags |= IMG_COMPARE_QUIET;
    }
    ret = img_compare_images(img, flags, &meter);

out:
    for (int i = 0; i < 2; i++) {
        qemu_vfree(img[i].buf);
        blk_unref(img[i].blk);
    }
    img_progress_end(&meter);
    return ret;
}
