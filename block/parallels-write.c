/*
 * parallels writing and check: the inuse flag, cluster allocation at the
 * end of the data (the request's bytes, the rest of the cluster from the
 * backing file or zeroes, then the table entry) and check's walk of the
 * table, with QEMU's messages.  The invariants are parallels.h's.
 */
#include "block/parallels.h"

/* The part of a cluster a fill copies at a time from the backing file. */
#define PARALLELS_FILL_CHUNK    (1u << 20)

static int parallels_write_header(BlockDriverState *bs)
{
    BDRVParallelsState *s = bs->opaque;
    int ret;

    ret = bdrv_pwrite(bs->file, 0, sizeof(s->header), &s->header, 0);
    if (ret < 0) {
        return ret;
    }
    return bdrv_flush(bs->file->bs);
}

/* inv. 2: set before the node writes anything. */
int parallels_mark_inuse(BlockDriverState *bs, Error **errp)
{
    BDRVParallelsState *s = bs->opaque;
    int ret;

    if (s->inuse_marked) {
        return 0;
    }
    s->header.inuse = GUINT32_TO_LE(PARALLELS_INUSE_MAGIC);
    ret = parallels_write_header(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not mark the image in use");
        return ret;
    }
    s->inuse_marked = true;
    return 0;
}

/* inv. 2: cleared once the node has stopped writing. */
int parallels_clear_inuse(BlockDriverState *bs)
{
    BDRVParallelsState *s = bs->opaque;
    int ret;

    if (!s->inuse_marked) {
        return 0;
    }
    ret = bdrv_flush(bs->file->bs);
    if (ret == 0) {
        s->header.inuse = 0;
        ret = parallels_write_header(bs);
    }
    if (ret < 0) {
        error_report("parallels: could not mark the image closed: %s",
                     strerror(-ret));
        return ret;
    }
    s->inuse_marked = false;
    s->found_inuse = false;
    return 0;
}

/*
 * Fills @bytes of a new cluster at file offset @host with what the disk
 * held at @offset before it had the cluster: the backing file's data, or
 * zeroes.
 */
static int coroutine_fn parallels_fill(BlockDriverState *bs, int64_t offset,
                                       int64_t host, int64_t bytes)
{
    g_autofree uint8_t *buf = NULL;

    if (!bs->backing) {
        return bdrv_co_pwrite_zeroes(bs->file, host, bytes, 0);
    }
    buf = g_try_malloc(MIN(bytes, PARALLELS_FILL_CHUNK));
    if (!buf) {
        return -ENOMEM;
    }
    while (bytes > 0) {
        int64_t n = MIN(bytes, PARALLELS_FILL_CHUNK);
        QEMUIOVector qiov;
        int ret;

        qemu_iovec_init_buf(&qiov, buf, n);
        ret = bdrv_co_read_backing(bs, offset, n, &qiov, 0);
        if (ret == 0) {
            ret = bdrv_co_pwritev(bs->file, host, n, &qiov, 0);
        }
        if (ret < 0) {
            return ret;
        }
        offset += n;
        host += n;
        bytes -= n;
    }
    return 0;
}

/*
 * Writes @n bytes of @qiov from @done at @offset, inside cluster @index
 * that had no entry when the request looked: allocates it at data_end
 * unless a request before this one did (inv. 4).
 */
static int coroutine_fn parallels_write_new(BlockDriverState *bs,
                                            uint32_t index, int64_t offset,
                                            int64_t n, QEMUIOVector *qiov,
                                            size_t done)
{
    BDRVParallelsState *s = bs->opaque;
    uint64_t unit = s->off_multiplier * PARALLELS_SECTOR;
    int64_t start = (int64_t)index * s->cluster_size;
    int64_t head = offset - start;
    int64_t tail = s->cluster_size - head - n;
    uint64_t host = s->data_end;
    uint32_t entry;
    int ret;

    /* inv. 4: data_end is past the table and on the entry unit */
    assert(host >= s->bat_end && host % unit == 0);
    if (host / unit > UINT32_MAX ||
        host > INT64_MAX - s->cluster_size) {
        error_report("parallels: the image is full: a new cluster at %"
                     PRIu64 " cannot be named by a table entry", host);
        return -ENOSPC;
    }
    ret = head ? parallels_fill(bs, start, host, head) : 0;
    if (ret == 0) {
        ret = bdrv_co_pwritev_part(bs->file, host + head, n, qiov, done, 0);
    }
    if (ret == 0 && tail) {
        ret = parallels_fill(bs, offset + n, host + head + n, tail);
    }
    if (ret < 0) {
        return ret;
    }
    s->data_end = host + s->cluster_size;
    entry = GUINT32_TO_LE(host / unit);
    ret = bdrv_pwrite(bs->file, PARALLELS_HEADER_SIZE +
                      (int64_t)index * sizeof(uint32_t), sizeof(entry),
                      &entry, 0);
    if (ret == 0) {
        s->bat[index] = entry;
    }
    return ret;
}

/* One piece of a write: what of the request lies in one cluster. */
static int64_t coroutine_fn parallels_write_piece(BlockDriverState *bs,
                                                  int64_t offset,
                                                  int64_t bytes,
                                                  QEMUIOVector *qiov,
                                                  size_t done, void *opaque)
{
    BDRVParallelsState *s = bs->opaque;
    uint64_t index = (uint64_t)offset / s->cluster_size;
    int64_t at;
    int64_t n = parallels_map(s, offset, bytes, &at);
    int ret;

    if (index >= s->bat_entries) {
        error_report("parallels: cluster %" PRIu64 " of the disk has no "
                     "entry in the %" PRIu32 "-entry allocation table",
                     index, s->bat_entries);
        return -EIO;
    }
    if (at < 0) {
        qemu_co_mutex_lock(&s->lock);
        /* another request may have allocated it meanwhile */
        parallels_map(s, offset, bytes, &at);
        ret = at < 0 ? parallels_write_new(bs, index, offset, n, qiov,
                                           done) : 0;
        qemu_co_mutex_unlock(&s->lock);
        if (ret < 0) {
            return ret;
        }
    }
    if (at >= 0) {
        /* inv. 3 */
        if ((uint64_t)at - offset % s->cluster_size < s->bat_end ||
            (uint64_t)at > INT64_MAX - s->cluster_size) {
            error_report("parallels: the entry of cluster %" PRIu64
                         " puts it over the header and table or past "
                         "the largest file offset: not written", index);
            return -EIO;
        }
        ret = bdrv_co_pwritev_part(bs->file, at, n, qiov, done, 0);
        if (ret < 0) {
            return ret;
        }
    }
    return n;
}

int coroutine_fn parallels_co_pwritev(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      BdrvRequestFlags flags)
{
    return bdrv_co_each_piece(bs, offset, bytes, qiov, parallels_write_piece,
                              NULL);
}

/*
 * One entry of check's walk: whether cluster @index's entry (at file
 * offset @at, not 0) must go, with QEMU's message where QEMU has one.
 */
static bool parallels_check_entry(BDRVParallelsState *s, uint32_t index,
                                  uint64_t at, int64_t file_len,
                                  BdrvCheckMode fix)
{
    const char *what = fix & BDRV_FIX_ERRORS ? "Repairing" : "ERROR";

    if (at >= (uint64_t)file_len) {
        fprintf(stderr, "%s cluster %" PRIu32 " is outside image\n", what,
                index);
        return true;
    }
    /* inv. 3; QEMU has no such check (it would write over its table) */
    if (at < s->bat_end) {
        fprintf(stderr, "%s cluster %" PRIu32 " overlaps the header or the "
                "allocation table\n", what, index);
        return true;
    }
    return false;
}

/*
 * As QEMU's check: an image not closed, entries outside the file, and
 * file space past the last cluster (a leak); -r repairs each.
 */
int coroutine_fn parallels_co_check(BlockDriverState *bs,
                                    BdrvCheckResult *result,
                                    BdrvCheckMode fix)
{
    BDRVParallelsState *s = bs->opaque;
    int64_t file_len = bdrv_getlength(bs->file->bs);
    uint64_t end = s->data_off ? s->data_off
                               : ROUND_UP(s->bat_end, PARALLELS_SECTOR);
    uint64_t prev = 0;
    bool bat_changed = false;
    int ret;

    if (file_len < 0) {
        result->check_errors++;
        return file_len;
    }
    if (s->found_inuse) {
        fprintf(stderr, "%s image was not closed correctly\n",
                fix & BDRV_FIX_ERRORS ? "Repairing" : "ERROR");
        result->corruptions++;
        if (fix & BDRV_FIX_ERRORS) {
            /* the close clears it (inv. 2) */
            result->corruptions_fixed++;
            s->found_inuse = false;
        }
    }
    result->bfi.total_clusters = s->bat_entries;
    for (uint32_t i = 0; i < s->bat_entries; i++) {
        uint64_t at = parallels_entry_offset(s, i);

        if (!at) {
            prev = 0;
            continue;
        }
        if (parallels_check_entry(s, i, at, file_len, fix)) {
            result->corruptions++;
            if (fix & BDRV_FIX_ERRORS) {
                s->bat[i] = 0;
                bat_changed = true;
                result->corruptions_fixed++;
                prev = 0;
                continue;
            }
        }
        result->bfi.allocated_clusters++;
        if (prev && prev + s->cluster_size != at) {
            result->bfi.fragmented_clusters++;
        }
        prev = at;
        end = MAX(end, MIN(at, (uint64_t)INT64_MAX - s->cluster_size) +
                       s->cluster_size);
    }
    if (bat_changed) {
        ret = bdrv_pwrite(bs->file, PARALLELS_HEADER_SIZE,
                          (int64_t)s->bat_entries * sizeof(uint32_t),
                          s->bat, 0);
        if (ret < 0) {
            result->check_errors++;
            return ret;
        }
    }
    result->image_end_offset = end;
    if ((uint64_t)file_len > end) {
        int64_t leaked = file_len - end;
        int clusters = DIV_ROUND_UP(leaked, s->cluster_size);

        fprintf(stderr, "%s space leaked at the end of the image %" PRId64
                "\n", fix & BDRV_FIX_LEAKS ? "Repairing" : "ERROR", leaked);
        result->leaks += clusters;
        if (fix & BDRV_FIX_LEAKS) {
            ret = bdrv_co_truncate(bs->file, end, true, PREALLOC_MODE_OFF, 0,
                                   NULL);
            if (ret < 0) {
                result->check_errors++;
                return ret;
            }
            result->leaks_fixed += clusters;
        }
    }
    parallels_find_data_end(s);
    return 0;
}
