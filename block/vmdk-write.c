/*
 * vmdk: writing, as QEMU writes its own VMDK images.
 *
 * A FLAT extent is written in place.  A SPARSE extent's grain is written
 * in place once allocated; a write to a grain never written allocates a
 * whole grain at the end of the extent's file (what the write does not
 * cover is filled from the backing file, or zeroes), then points both
 * grain tables at it (both entries written at once).  A grain table missing
 * from the directory (VMware may leave them out) is allocated the same
 * way.  A stream-optimized (compressed) extent takes each grain once,
 * deflated behind its marker; a second write to it fails as in QEMU
 * ("Could not write to allocated cluster for streamOptimized").  A write
 * of zeroes to whole grains of an image with the zeroed-grain flag marks
 * them zeroed in the tables instead of writing them.
 *
 * Not written: a ZERO extent (a write fails), a stream-optimized extent
 * whose directory lies in a footer (VMware's: open read-write is refused,
 * invariant 3).  As in QEMU, the header's unclean-shutdown byte is left
 * alone and a rewrite of a zeroed grain leaks the grain it had.
 *
 * Order (invariant 4 of block/vmdk.c): a new grain's data is written
 * before any table points at it, so a crash leaves at most a leaked
 * grain, never a table entry that points at garbage.
 */
#include "block/vmdk.h"
#include "qblock/block-node.h"
#include "util/thread-pool.h"

#include <zlib.h>

static int coroutine_fn vmdk_co_pwrite(BdrvChild *child, int64_t offset,
                                       int64_t bytes, const void *buf)
{
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, (void *)buf, bytes);
    return bdrv_co_pwritev(child, offset, bytes, &qiov, 0);
}

int vmdk_check_writable(BDRVVmdkState *s, Error **errp)
{
    for (unsigned int i = 0; i < s->nextents; i++) {
        /* invariant 3 */
        if (s->extents[i].gd_in_footer) {
            error_setg(errp, "A stream-optimized extent with its grain "
                       "directory in a footer can only be opened "
                       "read-only");
            return -EACCES;
        }
    }
    return 0;
}

/*
 * What allocating in @e needs, read at its first allocation since the
 * node became writable: where the file ends, the redundant directory.
 * Invariant 2.
 */
static int coroutine_fn vmdk_alloc_start(VmdkExtent *e)
{
    int64_t len;
    int ret;

    if (e->alloc_ready) {
        return 0;
    }
    len = bdrv_getlength(e->file->bs);
    if (len < 0) {
        return len;
    }
    /* as QEMU: a grain's multiple past the end (grains stay aligned) */
    e->next_sector = ROUND_UP(DIV_ROUND_UP(len, VMDK_SECTOR),
                              e->grain_sectors);
    if (e->rgd_sector && !e->rgd) {
        /* as the directory (invariant 1): what it costs, the file holds */
        if (e->rgd_sector > (uint64_t)len / VMDK_SECTOR ||
            (uint64_t)len - e->rgd_sector * VMDK_SECTOR <
            (uint64_t)e->gd_entries * sizeof(uint32_t)) {
            error_report("vmdk: the redundant grain directory at sector %"
                         PRIu64 " lies past the end of the file",
                         e->rgd_sector);
            return -EINVAL;
        }
        e->rgd = g_new(uint32_t, e->gd_entries);
        ret = vmdk_co_pread(e->file, e->rgd_sector * VMDK_SECTOR,
                            (int64_t)e->gd_entries * sizeof(uint32_t),
                            e->rgd);
        if (ret < 0) {
            g_clear_pointer(&e->rgd, g_free);
            return ret;
        }
        for (uint32_t j = 0; j < e->gd_entries; j++) {
            e->rgd[j] = GUINT32_FROM_LE(e->rgd[j]);
        }
    }
    e->alloc_ready = true;
    return 0;
}

/*
 * As QEMU, and as VMware's specification asks: the first write after open
 * gives the disk's content a new CID, written to the descriptor, so that
 * a delta made on it can tell that its parent changed.
 */
static int coroutine_fn vmdk_update_cid(BlockDriverState *bs)
{
    BDRVVmdkState *s = bs->opaque;
    g_autoptr(GString) desc = NULL;
    const char *line;
    uint64_t bytes;
    int ret = 0;

    qemu_co_mutex_lock(&s->cid_lock);
    if (s->cid_updated || !s->desc) {
        goto out;
    }
    line = g_str_has_prefix(s->desc, "CID=") ? s->desc
                                              : strstr(s->desc, "\nCID=");
    if (!line) {
        /* nothing to update: a descriptor without a CID keeps none */
        s->cid_updated = true;
        goto out;
    }
    line += *line == '\n';
    s->cid = g_random_int();
    desc = g_string_new_len(s->desc, line - s->desc);
    g_string_append_printf(desc, "CID=%" PRIx32, s->cid);
    line += strcspn(line, "\n");
    g_string_append(desc, line);
    /*
     * Whole sectors.  A descriptor file's text ends where the file does:
     * what the old text had beyond the new one is wiped.  An embedded
     * one's ends at a NUL, past which the sectors keep their bytes, as
     * in QEMU (an ESX header's fields share its last sector).
     */
    bytes = ROUND_UP(MAX(desc->len + (s->desc_offset != 0),
                         strlen(s->desc)), VMDK_SECTOR);
    if (s->desc_offset && bytes > s->desc_room) {
        error_report("vmdk: the descriptor with a new CID does not fit");
        ret = -ENOSPC;
        goto out;
    }
    {
        size_t len = desc->len;

        g_string_set_size(desc, bytes);
        memset(desc->str + len, 0, bytes - len);
        if (s->desc_offset) {
            g_autofree char *old = g_malloc(bytes);

            ret = vmdk_co_pread(bs->file, s->desc_offset, bytes, old);
            if (ret < 0) {
                goto out;
            }
            memcpy(old, desc->str, len + 1);
            memcpy(desc->str, old, bytes);
        }
    }
    ret = vmdk_co_pwrite(bs->file, s->desc_offset, bytes, desc->str);
    if (ret == 0) {
        g_free(s->desc);
        s->desc = g_strdup(desc->str);
        s->cid_updated = true;
    }
out:
    qemu_co_mutex_unlock(&s->cid_lock);
    return ret;
}

/*
 * As QEMU: the file of a compressed extent written since open ends a
 * grain's size after the last grain's start (the zeroes at its end are
 * then also the stream's end-of-stream marker).
 */
void vmdk_close_writable(BDRVVmdkState *s)
{
    for (unsigned int i = 0; i < s->nextents; i++) {
        VmdkExtent *e = &s->extents[i];
        uint64_t end = (e->last_grain + e->grain_sectors) * VMDK_SECTOR;
        int64_t len;

        if (!e->last_grain) {
            continue;
        }
        len = bdrv_getlength(e->file->bs);
        if (len >= 0 && (uint64_t)len < end) {
            Error *local_err = NULL;

            if (bdrv_truncate(e->file, end, false, PREALLOC_MODE_OFF, 0,
                              &local_err) < 0) {
                error_report_err(local_err);
            }
        }
        e->last_grain = 0;
    }
    /* a node made writable again looks at its files again */
    for (unsigned int i = 0; i < s->nextents; i++) {
        s->extents[i].alloc_ready = false;
    }
}

/*
 * Whether @sectors at @sector of @e's file stay clear of its header, its
 * embedded descriptor and its grain directories: a table that a hostile
 * image's directory places there, or a grain that its table does, is
 * not written (a write would destroy the metadata every later read
 * depends on).  Grains must also lie past the header's first grain.
 */
static bool vmdk_clear_of_metadata(const VmdkExtent *e, uint64_t sector,
                                   uint64_t sectors)
{
    uint64_t gd_sectors = DIV_ROUND_UP((uint64_t)e->gd_entries *
                                       sizeof(uint32_t), VMDK_SECTOR);
    const uint64_t areas[][2] = {
        { 0, e->header_sectors },
        { e->desc_sector, e->desc_sectors },
        { e->gd_sector, gd_sectors },
        { e->rgd_sector, e->rgd_sector ? gd_sectors : 0 },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(areas); i++) {
        if (areas[i][1] && sector < areas[i][0] + areas[i][1] &&
            areas[i][0] < sector + sectors) {
            return false;
        }
    }
    return true;
}

/* Whether @bytes at @in_gt of the table at @table stay clear of it. */
static bool vmdk_entries_clear(const VmdkExtent *e, uint64_t table,
                               uint64_t in_gt, uint64_t bytes)
{
    uint64_t first = table + in_gt / VMDK_SECTOR;
    uint64_t last = table + (in_gt + bytes - 1) / VMDK_SECTOR;

    return vmdk_clear_of_metadata(e, first, last - first + 1);
}

static int vmdk_check_grain_place(const VmdkExtent *e, uint64_t grain,
                                  uint64_t at)
{
    if (at < e->data_start ||
        !vmdk_clear_of_metadata(e, at, e->grain_sectors)) {
        error_report("vmdk: grain %" PRIu64 " lies at sector %" PRIu64
                     ", in the extent's metadata: not written", grain, at);
        return -EIO;
    }
    return 0;
}

/*
 * @sectors at the end of @e's file, zeroed, at *@at.  Table entries are
 * 32-bit sector numbers: a file cannot grow past 2 TiB.  Invariant 2.
 */
static int coroutine_fn vmdk_alloc(VmdkExtent *e, uint64_t sectors,
                                   uint64_t *at)
{
    int ret = vmdk_alloc_start(e);

    if (ret < 0) {
        return ret;
    }
    if (e->next_sector + sectors > UINT32_MAX) {
        error_report("vmdk: the extent's file is full (its grains must lie "
                     "in its first 2 TiB)");
        return -ENOSPC;
    }
    *at = e->next_sector;
    e->next_sector += sectors;
    return 0;
}

/* Directory entry @gdi of the directory at @dir_sector (*@dir caches it). */
static int coroutine_fn vmdk_alloc_gt(VmdkExtent *e, uint32_t *dir,
                                      uint64_t dir_sector, uint32_t gdi)
{
    uint64_t bytes = QEMU_ALIGN_UP((uint64_t)e->gtes * sizeof(uint32_t),
                                   VMDK_SECTOR);
    g_autofree void *zeroes = g_malloc0(bytes);
    uint32_t le;
    uint64_t at;
    int ret;

    ret = vmdk_alloc(e, bytes / VMDK_SECTOR, &at);
    if (ret < 0) {
        return ret;
    }
    ret = vmdk_co_pwrite(e->file, at * VMDK_SECTOR, bytes, zeroes);
    if (ret < 0) {
        return ret;
    }
    /* invariant 4: the table exists before the directory names it */
    le = GUINT32_TO_LE(at);
    ret = vmdk_co_pwrite(e->file, dir_sector * VMDK_SECTOR +
                         (uint64_t)gdi * sizeof(uint32_t), sizeof(le), &le);
    if (ret < 0) {
        return ret;
    }
    dir[gdi] = at;
    return 0;
}

/* Entries of one table written beside the other's (vmdk_set_gtes()). */
typedef struct VmdkEntriesWrite {
    BdrvChild *file;
    uint64_t offset;
    const uint32_t *entries;
    uint64_t bytes;
    int ret;
    bool done;
    Coroutine *waiter;
} VmdkEntriesWrite;

static void coroutine_fn vmdk_entries_write_co(void *opaque)
{
    VmdkEntriesWrite *w = opaque;

    w->ret = vmdk_co_pwrite(w->file, w->offset, w->bytes, w->entries);
    w->done = true;
    if (w->waiter) {
        aio_co_wake(w->waiter);
    }
}

/*
 * Points @count grains of @e from @grain (in one grain table) at
 * @values[0], @values[1], ... in both tables: the two tables' entries are
 * written at once (each table on its own is consistent with the grains,
 * written before them: invariant 4).  Invariant 2.
 */
static int coroutine_fn vmdk_set_gtes(VmdkExtent *e, uint64_t grain,
                                      uint32_t count, const uint32_t *values)
{
    uint32_t gdi = grain / e->gtes;
    uint64_t in_gt = (grain % e->gtes) * sizeof(uint32_t);
    g_autofree uint32_t *entries = g_new(uint32_t, count);
    VmdkEntriesWrite redundant = {
        .file = e->file,
        .entries = entries,
        .bytes = (uint64_t)count * sizeof(uint32_t),
        .done = true,
    };
    int ret;

    /* invariant 1; one table */
    assert(gdi < e->gd_entries && count >= 1 &&
           grain % e->gtes + count <= e->gtes);
    for (uint32_t i = 0; i < count; i++) {
        entries[i] = GUINT32_TO_LE(values[i]);
    }
    ret = vmdk_alloc_start(e);
    if (ret == 0 && e->rgd && !e->rgd[gdi]) {
        ret = vmdk_alloc_gt(e, e->rgd, e->rgd_sector, gdi);
    }
    if (ret == 0 && !e->gd[gdi]) {
        ret = vmdk_alloc_gt(e, e->gd, e->gd_sector, gdi);
    }
    if (ret < 0) {
        return ret;
    }
    if (!vmdk_entries_clear(e, e->gd[gdi], in_gt, redundant.bytes) ||
        (e->rgd && !vmdk_entries_clear(e, e->rgd[gdi], in_gt,
                                       redundant.bytes))) {
        error_report("vmdk: grain table %" PRIu32 " lies in the extent's "
                     "metadata: not written", gdi);
        return -EIO;
    }
    /* nor past the file's end (QEMU writes there, terabytes away) */
    if (e->gd[gdi] + (in_gt + redundant.bytes - 1) / VMDK_SECTOR >=
        e->next_sector ||
        (e->rgd && e->rgd[gdi] + (in_gt + redundant.bytes - 1) /
         VMDK_SECTOR >= e->next_sector)) {
        error_report("vmdk: grain table %" PRIu32 " lies past the end of "
                     "the file: not written", gdi);
        return -EIO;
    }
    BLKDBG_EVENT(e->file, BLKDBG_L2_UPDATE);
    if (e->rgd) {
        redundant.offset = (uint64_t)e->rgd[gdi] * VMDK_SECTOR + in_gt;
        redundant.done = false;
        qemu_coroutine_enter(qemu_coroutine_create(vmdk_entries_write_co,
                                                   &redundant));
    }
    ret = vmdk_co_pwrite(e->file, (uint64_t)e->gd[gdi] * VMDK_SECTOR + in_gt,
                         redundant.bytes, entries);
    if (!redundant.done) {
        redundant.waiter = qemu_coroutine_self();
        qemu_coroutine_yield();
    }
    if (ret == 0) {
        ret = redundant.ret;
    }
    if (ret < 0) {
        e->gt_index = -1;
        return ret;
    }
    if (e->gt_index == gdi) {
        memcpy(&e->gt[grain % e->gtes], entries, redundant.bytes);
    }
    return 0;
}

/* A grain deflated behind its marker, in a worker thread or not. */
typedef struct VmdkDeflate {
    const uint8_t *src;         /* the bytes of the disk the grain holds */
    uint64_t len;
    uint64_t lba;               /* the grain's first sector in its extent */
    uint8_t *out;               /* vmdk_deflate_room(len) bytes */
    uint64_t out_len;           /* marker and data, zero-padded sectors */
    struct VmdkDeflateBatch *batch;
} VmdkDeflate;

/* Grains deflated at once by the thread pool (vmdk_deflate_run()). */
typedef struct VmdkDeflateBatch {
    unsigned int pending;
    int ret;
    Coroutine *co;
} VmdkDeflateBatch;

static uint64_t vmdk_deflate_room(uint64_t len)
{
    return QEMU_ALIGN_UP(VMDK_MARKER_SIZE + compressBound(len), VMDK_SECTOR);
}

/* Thread-safe: zlib's compress() keeps no state between calls. */
static int vmdk_deflate(void *opaque)
{
    VmdkDeflate *d = opaque;
    uLongf size = compressBound(d->len);
    uint64_t lba = GUINT64_TO_LE(d->lba);
    uint32_t le_size;

    if (compress(d->out + VMDK_MARKER_SIZE, &size, d->src, d->len) != Z_OK) {
        return -EIO;
    }
    le_size = GUINT32_TO_LE(size);
    memcpy(d->out, &lba, sizeof(lba));
    memcpy(d->out + sizeof(lba), &le_size, sizeof(le_size));
    d->out_len = QEMU_ALIGN_UP(VMDK_MARKER_SIZE + size, VMDK_SECTOR);
    memset(d->out + VMDK_MARKER_SIZE + size, 0,
           d->out_len - VMDK_MARKER_SIZE - size);
    return 0;
}

static void vmdk_deflate_done(void *opaque, int ret)
{
    VmdkDeflateBatch *b = ((VmdkDeflate *)opaque)->batch;

    if (ret < 0 && b->ret == 0) {
        b->ret = ret;
    }
    if (--b->pending == 0) {
        aio_co_wake(b->co);
    }
}

/*
 * Appends @grain_buf (the @bytes of the disk the grain at @grain_sector
 * holds) deflated behind its marker, at *@at.  Invariant 2.
 */
static int coroutine_fn vmdk_append_compressed(VmdkExtent *e,
                                               uint64_t grain_sector,
                                               const uint8_t *grain_buf,
                                               uint64_t bytes, uint64_t *at)
{
    g_autofree uint8_t *out = g_malloc(vmdk_deflate_room(bytes));
    VmdkDeflate d = {
        .src = grain_buf, .len = bytes, .lba = grain_sector, .out = out,
    };
    int ret;

    if (vmdk_deflate(&d) < 0) {
        error_report("vmdk: could not deflate a grain");
        return -EIO;
    }
    ret = vmdk_alloc(e, d.out_len / VMDK_SECTOR, at);
    if (ret < 0) {
        return ret;
    }
    BLKDBG_EVENT(e->file, BLKDBG_WRITE_COMPRESSED);
    ret = vmdk_co_pwrite(e->file, *at * VMDK_SECTOR, d.out_len, out);
    if (ret == 0) {
        e->last_grain = *at;
    }
    return ret;
}

/*
 * The @k whole grains of @qiov from @done, for grains @grain on of @e,
 * deflated by the thread pool at once and appended one after the other,
 * as one at a time would append them; their sectors in @values.
 * Invariant 2.
 */
static int coroutine_fn vmdk_deflate_run(BlockDriverState *bs, VmdkExtent *e,
                                         uint64_t grain, uint64_t k,
                                         QEMUIOVector *qiov, size_t done,
                                         uint32_t *values)
{
    uint64_t whole = e->grain_sectors * VMDK_SECTOR;
    uint64_t room = vmdk_deflate_room(whole);
    g_autofree uint8_t *src = g_malloc(k * whole);
    g_autofree uint8_t *out = g_malloc(k * room);
    g_autofree VmdkDeflate *d = g_new0(VmdkDeflate, k);
    VmdkDeflateBatch batch = { .pending = k, .co = qemu_coroutine_self() };
    ThreadPool *pool = aio_get_thread_pool(bdrv_get_aio_context(bs));
    uint64_t pos = 0, at;
    int ret;

    qemu_iovec_to_buf(qiov, done, src, k * whole);
    for (uint64_t i = 0; i < k; i++) {
        d[i] = (VmdkDeflate) {
            .src = src + i * whole,
            .len = whole,
            .lba = (grain + i) * e->grain_sectors,
            .out = out + i * room,
            .batch = &batch,
        };
        thread_pool_submit_aio(pool, vmdk_deflate, &d[i], vmdk_deflate_done,
                               &d[i]);
    }
    /* the completions run in this thread, so only once this yields */
    qemu_coroutine_yield();
    if (batch.ret < 0) {
        error_report("vmdk: could not deflate a grain");
        return batch.ret;
    }
    /* packed: each grain moves down to where the one before it ends */
    for (uint64_t i = 0; i < k; i++) {
        memmove(out + pos, d[i].out, d[i].out_len);
        values[i] = pos / VMDK_SECTOR;
        pos += d[i].out_len;
    }
    ret = vmdk_alloc(e, pos / VMDK_SECTOR, &at);
    if (ret == 0) {
        BLKDBG_EVENT(e->file, BLKDBG_WRITE_COMPRESSED);
        ret = vmdk_co_pwrite(e->file, at * VMDK_SECTOR, pos, out);
    }
    if (ret < 0) {
        return ret;
    }
    for (uint64_t i = 0; i < k; i++) {
        values[i] += at;
    }
    e->last_grain = values[k - 1];
    return 0;
}

/*
 * Writes @bytes of @qiov at @done to the grain that @m says was never
 * written (or was zeroed: @zeroed), allocating it.  Invariant 2.
 */
static int coroutine_fn vmdk_write_new_grain(BlockDriverState *bs,
                                             const VmdkMap *m, uint64_t bytes,
                                             QEMUIOVector *qiov, size_t done,
                                             bool zeroed)
{
    VmdkExtent *e = m->e;
    uint64_t grain_bytes = vmdk_grain_bytes(e, m->grain_sector);
    uint64_t whole = e->grain_sectors * VMDK_SECTOR;
    uint64_t disk_offset = (m->extent_start + m->grain_sector) * VMDK_SECTOR;
    g_autofree uint8_t *buf = NULL;
    uint64_t at;
    uint32_t value;
    int ret;

    /* invariant 1: vmdk_map() keeps a piece inside its grain */
    assert(m->in_grain + bytes <= grain_bytes);
    /* a whole grain of plain data goes to the file as it is (convert's) */
    if (!e->compressed && bytes == whole) {
        ret = vmdk_alloc(e, e->grain_sectors, &at);
        if (ret == 0) {
            BLKDBG_EVENT(e->file, BLKDBG_WRITE_AIO);
            ret = vmdk_co_file_io(e->file, at * VMDK_SECTOR, whole, qiov,
                                  done, true);
        }
        goto written;
    }
    /* else a whole grain in memory, zeroes past the extent's end */
    buf = g_malloc0(whole);
    if (!zeroed && bs->backing && bytes < grain_bytes) {
        QEMUIOVector cow;

        ret = vmdk_check_parent_cid(bs);
        if (ret < 0) {
            return ret;
        }
        BLKDBG_EVENT(e->file, BLKDBG_COW_READ);
        qemu_iovec_init_buf(&cow, buf, grain_bytes);
        ret = bdrv_co_read_backing(bs, disk_offset, grain_bytes, &cow, 0);
        if (ret < 0) {
            return ret;
        }
    }
    qemu_iovec_to_buf(qiov, done, buf + m->in_grain, bytes);
    if (e->compressed) {
        ret = vmdk_append_compressed(e, m->grain_sector, buf, grain_bytes,
                                     &at);
    } else {
        ret = vmdk_alloc(e, e->grain_sectors, &at);
        if (ret == 0) {
            BLKDBG_EVENT(e->file, BLKDBG_WRITE_AIO);
            ret = vmdk_co_pwrite(e->file, at * VMDK_SECTOR, whole, buf);
        }
    }
written:
    if (ret < 0) {
        return ret;
    }
    /* invariant 4: the data is in the file before a table points at it */
    value = at;
    return vmdk_set_gtes(e, m->grain_sector / e->grain_sectors, 1, &value);
}

/*
 * A write of whole grains from @m's, where the first is not allocated:
 * the grains never written that follow it in its table and that the
 * write covers are allocated together, their data written in one
 * request (deflated at once by the thread pool in a compressed extent)
 * and their entries in one per table.  The layout is the same as grain
 * by grain: one after the other at the end of the file.  Returns the
 * bytes written (0: the first grain is allocated by now, the caller
 * writes it in place), < 0 on error.  Invariant 2.
 */
static int64_t coroutine_fn vmdk_write_new_run(BlockDriverState *bs,
                                               const VmdkMap *m,
                                               uint64_t bytes,
                                               QEMUIOVector *qiov,
                                               size_t done)
{
    VmdkExtent *e = m->e;
    uint64_t whole = e->grain_sectors * VMDK_SECTOR;
    uint64_t grain = m->grain_sector / e->grain_sectors;
    /* in the grain's table, covered whole by the write and the extent */
    uint64_t max = MIN(MIN(bytes / whole, e->gtes - grain % e->gtes),
                       e->sectors / e->grain_sectors - grain);
    g_autofree uint32_t *values = NULL;
    uint64_t k, at;
    int64_t ret = 0;

    qemu_co_mutex_lock(&e->lock);
    for (k = 0; k < max; k++) {
        ret = vmdk_grain_locked(e, (grain + k) * e->grain_sectors);
        if (ret != 0) {
            break;
        }
    }
    if (ret < 0 || k == 0) {
        goto out;
    }
    values = g_new(uint32_t, k);
    if (e->compressed) {
        ret = vmdk_deflate_run(bs, e, grain, k, qiov, done, values);
    } else {
        ret = vmdk_alloc(e, k * e->grain_sectors, &at);
        if (ret == 0) {
            BLKDBG_EVENT(e->file, BLKDBG_WRITE_AIO);
            ret = vmdk_co_file_io(e->file, at * VMDK_SECTOR, k * whole, qiov,
                                  done, true);
        }
        for (uint64_t i = 0; ret == 0 && i < k; i++) {
            values[i] = at + i * e->grain_sectors;
        }
    }
    /* invariant 4: the data is in the file before a table points at it */
    if (ret == 0) {
        ret = vmdk_set_gtes(e, grain, k, values);
    }
    if (ret == 0) {
        ret = k * whole;
    }
out:
    qemu_co_mutex_unlock(&e->lock);
    return ret;
}

static int coroutine_fn vmdk_write_sparse(BlockDriverState *bs,
                                          const VmdkMap *m, uint64_t bytes,
                                          QEMUIOVector *qiov, size_t done)
{
    VmdkExtent *e = m->e;
    int64_t at;
    int ret;

    if (m->kind == VMDK_MAP_UNALLOCATED || m->kind == VMDK_MAP_ZERO) {
        /* invariant 2: look again, under the lock, before allocating */
        qemu_co_mutex_lock(&e->lock);
        at = vmdk_grain_locked(e, m->grain_sector);
        if (at == 0 || vmdk_is_zeroed(e, at)) {
            ret = vmdk_write_new_grain(bs, m, bytes, qiov, done,
                                       vmdk_is_zeroed(e, at));
            qemu_co_mutex_unlock(&e->lock);
            return ret;
        }
        qemu_co_mutex_unlock(&e->lock);
        if (at < 0) {
            return at;
        }
    } else {
        at = m->kind == VMDK_MAP_COMPRESSED ? (int64_t)m->offset
                                            : (int64_t)(m->offset -
                                                        m->in_grain) /
                                              VMDK_SECTOR;
    }
    if (e->compressed) {
        error_report("Could not write to allocated cluster for "
                     "streamOptimized");
        return -EIO;
    }
    ret = vmdk_check_grain_place(e, m->grain_sector / e->grain_sectors, at);
    if (ret < 0) {
        return ret;
    }
    BLKDBG_EVENT(e->file, BLKDBG_WRITE_AIO);
    return vmdk_co_file_io(e->file, at * VMDK_SECTOR + m->in_grain, bytes,
                           qiov, done, true);
}

/* One piece of a write: what of the request one map entry covers. */
static int64_t coroutine_fn vmdk_write_piece(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             QEMUIOVector *qiov, size_t done,
                                             void *opaque)
{
    BDRVVmdkState *s = bs->opaque;
    VmdkMap m;
    int64_t n = vmdk_map(s, offset, bytes, &m);
    int ret;

    if (n < 0) {
        return n;
    }
    switch (m.e->type) {
    case VMDK_ZERO:
        error_report("vmdk: sector %" PRId64 " lies in a ZERO extent, "
                     "which cannot be written", offset / VMDK_SECTOR);
        return -EINVAL;
    case VMDK_FLAT:
        BLKDBG_EVENT(m.e->file, BLKDBG_WRITE_AIO);
        ret = vmdk_co_file_io(m.e->file, m.offset, n, qiov, done, true);
        break;
    default:
        if (m.kind == VMDK_MAP_BEYOND_GD) {
            /* as QEMU (EINVAL): no directory entry to allocate under */
            error_report("vmdk: sector %" PRId64 " lies past the last entry "
                         "of the extent's grain directory (%" PRIu32 "), "
                         "which cannot be written", offset / VMDK_SECTOR,
                         m.e->gd_entries);
            return -EINVAL;
        }
        if (m.kind == VMDK_MAP_UNALLOCATED && m.in_grain == 0 &&
            bytes >= (int64_t)(m.e->grain_sectors * VMDK_SECTOR)) {
            int64_t run = vmdk_write_new_run(bs, &m, bytes, qiov, done);

            if (run != 0) {
                ret = run < 0 ? run : 0;
                n = run < 0 ? n : run;
                break;
            }
        }
        ret = vmdk_write_sparse(bs, &m, n, qiov, done);
        break;
    }
    return ret < 0 ? ret : n;
}

int coroutine_fn vmdk_co_pwritev(BlockDriverState *bs, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 BdrvRequestFlags flags)
{
    int ret = vmdk_update_cid(bs);

    if (ret < 0) {
        return ret;
    }
    return bdrv_co_each_piece(bs, offset, bytes, qiov, vmdk_write_piece, NULL);
}

/*
 * convert -c: as in QEMU, the writes any write makes (a stream-optimized
 * extent deflates every grain, a sparse one compresses nothing), and
 * nothing for the empty write that ends the stream (the close pads the
 * file as it would anyway).
 */
int coroutine_fn vmdk_co_pwritev_compressed(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov)
{
    if (bytes == 0) {
        return 0;
    }
    return vmdk_co_pwritev(bs, offset, bytes, qiov, 0);
}

/* One piece of a zero write; @opaque points to the request's flags. */
static int64_t coroutine_fn vmdk_zero_piece(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *unused, size_t done,
                                            void *opaque)
{
    BDRVVmdkState *s = bs->opaque;
    BdrvRequestFlags flags = *(BdrvRequestFlags *)opaque;
    VmdkMap m;
    int64_t n = vmdk_map(s, offset, bytes, &m);
    VmdkExtent *e = m.e;
    int ret;

    if (n < 0) {
        return n;
    }
    if (e->type == VMDK_ZERO) {
        ret = 0;
    } else if (e->type == VMDK_FLAT) {
        ret = bdrv_co_pwrite_zeroes(e->file, m.offset, n,
                                    flags & ~BDRV_REQ_FUA);
    } else if (e->type == VMDK_SPARSE && e->zeroed_grain &&
               m.in_grain == 0 &&
               n == (int64_t)vmdk_grain_bytes(e, m.grain_sector)) {
        uint32_t zeroed = VMDK_GTE_ZEROED;

        qemu_co_mutex_lock(&e->lock);
        ret = vmdk_set_gtes(e, m.grain_sector / e->grain_sectors, 1,
                            &zeroed);
        qemu_co_mutex_unlock(&e->lock);
    } else {
        g_autofree void *zeroes = g_malloc0(n);
        QEMUIOVector qiov;

        qemu_iovec_init_buf(&qiov, zeroes, n);
        ret = vmdk_co_pwritev(bs, offset, n, &qiov, 0);
    }
    return ret < 0 ? ret : n;
}

/*
 * Zeroes: a flat extent's file writes them as it can; whole grains of an
 * image with the zeroed-grain flag are marked zeroed; anything else is
 * written as data, as QEMU does (so a sparse image without the flag
 * allocates what it zeroes).
 */
int coroutine_fn vmdk_co_pwrite_zeroes(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes,
                                       BdrvRequestFlags flags)
{
    int ret = vmdk_update_cid(bs);

    if (ret < 0) {
        return ret;
    }
    return bdrv_co_each_piece(bs, offset, bytes, NULL, vmdk_zero_piece,
                              &flags);
}

/* A flat extent reads as zeroes where its file does; grains start so. */
int vmdk_has_zero_init(BlockDriverState *bs)
{
    BDRVVmdkState *s = bs->opaque;

    for (unsigned int i = 0; i < s->nextents; i++) {
        if (s->extents[i].type == VMDK_FLAT &&
            !bdrv_has_zero_init(s->extents[i].file->bs)) {
            return 0;
        }
    }
    return 1;
}
