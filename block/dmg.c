/*
 * dmg: the read-only format driver for Apple disk images (UDIF), as
 * QEMU 7.2 reads them: to convert them or to use them as a read-only disk.
 *
 * The last 512 bytes of the file are the "koly" trailer (big-endian):
 * where the data fork starts, where the XML property list or the resource
 * fork lies, and the disk's size in sectors.  The list's "blkx" array, or
 * the fork's "blkx" resources (images older than Mac OS X 10.2 have only
 * the fork), hold one "mish" block per partition: its
 * first sector, then chunks of sectors each stored one way: zeroes (types
 * 0 and 2), raw bytes (1), zlib (0x80000005) or bzip2 (0x80000006)
 * streams; LZFSE (0x80000007) is refused, as qblock links no LZFSE
 * library.  A chunk's file offset counts from the data fork's start plus
 * its mish block's data offset.
 *
 * Invariants:
 *  1. After open the chunks are immutable, sorted by first sector, do not
 *     overlap, cover the disk without gaps (a gap, or what lies past the
 *     last chunk, is an END chunk that fails a read; a chunk past the
 *     disk is never read); each stored one spans at most
 *     DMG_MAX_CHUNK_SECTORS and at most DMG_MAX_STREAM bytes that lie
 *     within the file: a read's buffers are bounded and every offset it
 *     uses was checked.
 *  2. The cache (cached, chunk_buf) is read and written only under
 *     s->lock.
 *  3. The node is never writable (bdrv_open_read_only_format()).
 */
#include <bzlib.h>
#include <zlib.h>

#include "block/block_int.h"

#define DMG_SECTOR              512
#define DMG_TRAILER_SIZE        512
#define DMG_KOLY_MAGIC          0x6b6f6c79u     /* "koly" */
#define DMG_MISH_MAGIC          0x6d697368u     /* "mish" */
#define DMG_MISH_HEADER         204
#define DMG_CHUNK_ENTRY         40
#define DMG_CHUNK_ZERO          0x00000000u
#define DMG_CHUNK_RAW           0x00000001u
#define DMG_CHUNK_IGNORE        0x00000002u
#define DMG_CHUNK_ZLIB          0x80000005u
#define DMG_CHUNK_BZIP2         0x80000006u
#define DMG_CHUNK_LZFSE         0x80000007u
#define DMG_CHUNK_COMMENT       0x7ffffffeu
#define DMG_CHUNK_END           0xffffffffu
/* QEMU's bounds: 64 MiB a chunk, stored or inflated */
#define DMG_MAX_CHUNK_SECTORS   ((64u << 20) / DMG_SECTOR)
#define DMG_MAX_STREAM          (64u << 20)
/* what a property list or a fork's data may take: qblock refuses more */
#define DMG_MAX_TABLES          (64u << 20)
/* a resource fork's header: data offset, map offset, data and map lengths */
#define DMG_RSRC_HEADER         16

typedef struct DmgChunk {
    uint32_t type;
    uint64_t sector;            /* first sector of the disk */
    uint64_t count;             /* sectors */
    uint64_t offset;            /* in the file, when stored */
    uint64_t length;            /* bytes in the file, when stored */
} DmgChunk;

typedef struct BDRVDmgState {
    GArray *chunks;             /* DmgChunk (inv. 1) */
    uint64_t sectors;
    uint64_t max_stream;
    uint64_t max_sectors;
    CoMutex lock;
    uint8_t *stream;            /* max_stream bytes (inv. 2) */
    uint8_t *chunk_buf;         /* max_sectors * 512 bytes (inv. 2) */
    int64_t cached;             /* the chunk in chunk_buf, or -1 */
} BDRVDmgState;

static int dmg_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    size_t len = filename ? strlen(filename) : 0;

    /* the trailer is at the end, which a probe does not see: QEMU's guess */
    return len > 4 && !strcmp(filename + len - 4, ".dmg") ? 2 : 0;
}

static uint32_t dmg_be32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return GUINT32_FROM_BE(v);
}

static uint64_t dmg_be64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return GUINT64_FROM_BE(v);
}

/* Adds one chunk entry of a mish block (inv. 1 is checked after all). */
static int dmg_add_chunk(BDRVDmgState *s, const uint8_t *e, uint64_t first,
                         uint64_t base, uint64_t file_len, Error **errp)
{
    DmgChunk c = {
        .type = dmg_be32(e),
        .count = dmg_be64(e + 16),
        .length = dmg_be64(e + 32),
    };
    uint64_t rel = dmg_be64(e + 8), off = dmg_be64(e + 24);

    if (c.type == DMG_CHUNK_COMMENT || c.count == 0) {
        return 0;
    }
    if (c.count > DMG_MAX_CHUNK_SECTORS) {
        error_setg(errp, "sector count %" PRIu64 " for chunk %u is larger "
                   "than max (%u)", c.count, s->chunks->len,
                   DMG_MAX_CHUNK_SECTORS);
        return -EINVAL;
    }
    if (__builtin_add_overflow(first, rel, &c.sector) ||
        c.sector > INT64_MAX / DMG_SECTOR - c.count) {
        error_setg(errp, "chunk %u starts past the largest disk offset",
                   s->chunks->len);
        return -EINVAL;
    }
    switch (c.type) {
    case DMG_CHUNK_ZERO:
    case DMG_CHUNK_IGNORE:
        c.length = 0;
        break;
    case DMG_CHUNK_RAW:
    case DMG_CHUNK_ZLIB:
    case DMG_CHUNK_BZIP2:
        if (c.length > DMG_MAX_STREAM) {
            error_setg(errp, "length %" PRIu64 " for chunk %u is larger than "
                       "max (%u)", c.length, s->chunks->len, DMG_MAX_STREAM);
            return -EINVAL;
        }
        if (c.type == DMG_CHUNK_RAW && c.length < c.count * DMG_SECTOR) {
            error_setg(errp, "raw chunk %u holds %" PRIu64 " bytes for %"
                       PRIu64 " sectors", s->chunks->len, c.length, c.count);
            return -EINVAL;
        }
        if (__builtin_add_overflow(base, off, &c.offset) ||
            c.offset > file_len || c.length > file_len - c.offset) {
            error_setg(errp, "chunk %u (%" PRIu64 " bytes at offset %" PRIu64
                       ") lies past the end of the file", s->chunks->len,
                       c.length, off);
            return -EINVAL;
        }
        break;
    case DMG_CHUNK_LZFSE:
        error_setg(errp, "chunk %u is LZFSE-compressed, which qblock cannot "
                   "decompress", s->chunks->len);
        return -ENOTSUP;
    default:
        error_setg(errp, "chunk %u has the unknown type 0x%" PRIx32,
                   s->chunks->len, c.type);
        return -EINVAL;
    }
    g_array_append_val(s->chunks, c);
    return 0;
}

/* One "mish" block of @len bytes; @fork: the data fork's file offset. */
static int dmg_read_mish(BDRVDmgState *s, const uint8_t *m, gsize len,
                         uint64_t fork, uint64_t file_len, Error **errp)
{
    uint64_t first, base;
    uint32_t n;

    if (len < DMG_MISH_HEADER || dmg_be32(m) != DMG_MISH_MAGIC) {
        /* not a block table: QEMU skips it too */
        return 0;
    }
    first = dmg_be64(m + 8);
    if (__builtin_add_overflow(fork, dmg_be64(m + 24), &base)) {
        error_setg(errp, "mish block data offset is past the largest file "
                   "offset");
        return -EINVAL;
    }
    n = dmg_be32(m + 200);
    if (n > (len - DMG_MISH_HEADER) / DMG_CHUNK_ENTRY) {
        error_setg(errp, "mish block of %" G_GSIZE_FORMAT " bytes cannot "
                   "hold its %" PRIu32 " chunks", len, n);
        return -EINVAL;
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = m + DMG_MISH_HEADER + (size_t)i * DMG_CHUNK_ENTRY;
        int ret;

        if (dmg_be32(e) == DMG_CHUNK_END) {
            break;
        }
        ret = dmg_add_chunk(s, e, first, base, file_len, errp);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

/* The base64 <data> items of the list's blkx array, each a mish block. */
static int dmg_read_plist(BDRVDmgState *s, const char *xml, uint64_t fork,
                          uint64_t file_len, Error **errp)
{
    const char *p = strstr(xml, "<key>blkx</key>");
    const char *end;

    if (!p || !(end = strstr(p, "</array>"))) {
        error_setg(errp, "The property list has no blkx array");
        return -EINVAL;
    }
    while ((p = strstr(p, "<data>")) && p < end) {
        const char *close = strstr(p, "</data>");
        g_autofree char *b64 = NULL;
        g_autofree guchar *mish = NULL;
        gsize len;
        int ret;

        if (!close) {
            error_setg(errp, "The property list's <data> is not closed");
            return -EINVAL;
        }
        p += strlen("<data>");
        b64 = g_strndup(p, close - p);
        mish = g_base64_decode(b64, &len);
        ret = dmg_read_mish(s, mish, len, fork, file_len, errp);
        if (ret < 0) {
            return ret;
        }
        p = close;
    }
    return 0;
}

static int dmg_chunk_cmp(gconstpointer a, gconstpointer b)
{
    const DmgChunk *x = a, *y = b;

    return x->sector < y->sector ? -1 : x->sector > y->sector;
}

/*
 * Sorts the chunks, refuses overlaps and fills gaps, up to the trailer's
 * sector count (the disk's size, as in QEMU), with chunks of type END:
 * sectors no chunk holds, which fail a read as in QEMU (inv. 1).
 */
static int dmg_order_chunks(BDRVDmgState *s, uint64_t sectors, Error **errp)
{
    g_autoptr(GArray) sorted = g_array_new(false, false, sizeof(DmgChunk));
    uint64_t at = 0;

    g_array_sort(s->chunks, dmg_chunk_cmp);
    for (guint i = 0; i <= s->chunks->len; i++) {
        /* past the last chunk, zeroes to the end of the disk */
        DmgChunk c = i < s->chunks->len ?
                     g_array_index(s->chunks, DmgChunk, i) :
                     (DmgChunk){ .type = DMG_CHUNK_END,
                                 .sector = MAX(sectors, at) };

        if (c.sector < at) {
            error_setg(errp, "chunk at sector %" PRIu64 " overlaps the one "
                       "before it", c.sector);
            return -EINVAL;
        }
        if (c.sector > at) {
            /* one entry for a gap of any length: it stores nothing */
            DmgChunk gap = { .type = DMG_CHUNK_END, .sector = at,
                             .count = c.sector - at };

            g_array_append_val(sorted, gap);
            at = c.sector;
        }
        if (!c.count) {
            break;
        }
        g_array_append_val(sorted, c);
        at = c.sector + c.count;
        if (c.length) {
            s->max_stream = MAX(s->max_stream, c.length);
            s->max_sectors = MAX(s->max_sectors, c.count);
        }
    }
    s->sectors = sectors;
    g_array_free(s->chunks, true);
    s->chunks = g_steal_pointer(&sorted);
    return 0;
}

static void dmg_close(BlockDriverState *bs)
{
    BDRVDmgState *s = bs->opaque;

    if (s->chunks) {
        g_array_free(g_steal_pointer(&s->chunks), true);
    }
    g_clear_pointer(&s->stream, g_free);
    g_clear_pointer(&s->chunk_buf, g_free);
}

/*
 * Finds the trailer: lengths are whole sectors here (as in QEMU) and a
 * file need not be, so it is the last "koly" of the last two sectors
 * (what lies past the end of the file reads as zeroes).  Returns its file
 * offset.
 */
static int64_t dmg_find_trailer(BlockDriverState *bs, int64_t file_len,
                                uint8_t *koly, Error **errp)
{
    uint8_t tail[2 * DMG_TRAILER_SIZE];
    int64_t start = MAX(file_len - (int64_t)sizeof(tail), 0);
    int64_t len = file_len - start;
    int ret;

    ret = bdrv_pread(bs->file, start, len, tail, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the dmg trailer");
        return ret;
    }
    for (int64_t at = len - DMG_TRAILER_SIZE; at >= 0; at--) {
        if (dmg_be32(tail + at) == DMG_KOLY_MAGIC) {
            memcpy(koly, tail + at, DMG_TRAILER_SIZE);
            return start + at;
        }
    }
    error_setg(errp, "Image not in dmg format (no koly trailer)");
    return -EINVAL;
}

/* The XML property list of @len bytes at file offset @at. */
static int dmg_load_plist(BlockDriverState *bs, uint64_t at, uint64_t len,
                          uint64_t fork, uint64_t file_len, Error **errp)
{
    g_autofree char *xml = NULL;
    int ret;

    if (len > DMG_MAX_TABLES || at > file_len || len > file_len - at) {
        error_setg(errp, "The property list (%" PRIu64 " bytes at offset %"
                   PRIu64 ") lies past the end of the file or is larger "
                   "than %u MiB", len, at, DMG_MAX_TABLES >> 20);
        return -EINVAL;
    }
    xml = g_malloc(len + 1);
    ret = bdrv_pread(bs->file, at, len, xml, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the property list");
        return ret;
    }
    xml[len] = '\0';
    return dmg_read_plist(bs->opaque, xml, fork, file_len, errp);
}

/*
 * The resource fork of @len bytes at file offset @at, a classic Resource
 * Manager file: a header (the offsets and lengths, from the fork's start,
 * of the resource data and of the map), the data (each resource a 4-byte
 * length and its bytes, end to end), and the map (types, ids, names, and
 * each resource's offset in the data).  As QEMU 7.2 does, the data is
 * walked from resource to resource and the map is not read: every
 * resource that is a mish block counts, whatever its type or id (in the
 * images hdiutil writes, only the "blkx" ones are), and the others are
 * skipped as the property list's other <data> are.  Also as in QEMU, a
 * resource with no bytes or one that runs past the data fails the open.
 */
static int dmg_load_rsrc(BlockDriverState *bs, uint64_t at, uint64_t len,
                         uint64_t fork, uint64_t file_len, Error **errp)
{
    uint8_t head[DMG_RSRC_HEADER];
    g_autofree uint8_t *data = NULL;
    uint64_t data_at, data_len;
    int ret;

    if (len < DMG_RSRC_HEADER) {
        error_setg(errp, "The resource fork (%" PRIu64 " bytes) is shorter "
                   "than its %u-byte header", len, DMG_RSRC_HEADER);
        return -EINVAL;
    }
    ret = bdrv_pread(bs->file, at, sizeof(head), head, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the resource fork");
        return ret;
    }
    data_at = dmg_be32(head);
    data_len = dmg_be32(head + 8);
    if (data_at > len || data_len > len - data_at) {
        error_setg(errp, "The resource fork's data (%" PRIu64 " bytes at "
                   "offset %" PRIu64 ") lies past the end of the fork (%"
                   PRIu64 " bytes)", data_len, data_at, len);
        return -EINVAL;
    }
    if (data_len > DMG_MAX_TABLES) {
        error_setg(errp, "The resource fork's data (%" PRIu64 " bytes) is "
                   "larger than %u MiB", data_len, DMG_MAX_TABLES >> 20);
        return -EINVAL;
    }
    data = g_malloc(MAX(data_len, 1));
    ret = bdrv_pread(bs->file, at + data_at, data_len, data, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the resource fork");
        return ret;
    }
    /* each step passes at least 5 bytes: the walk ends */
    for (uint64_t pos = 0, i = 0; pos < data_len; i++) {
        uint32_t n;

        if (data_len - pos < 4) {
            error_setg(errp, "Resource %" PRIu64 " of the resource fork has "
                       "no room for its length (%" PRIu64 " bytes left of "
                       "the data)", i, data_len - pos);
            return -EINVAL;
        }
        n = dmg_be32(data + pos);
        pos += 4;
        if (n == 0 || n > data_len - pos) {
            error_setg(errp, "Resource %" PRIu64 " of the resource fork (%"
                       PRIu32 " bytes at offset %" PRIu64 " of the data) is "
                       "empty or runs past the end of the data (%" PRIu64
                       " bytes)", i, n, pos, data_len);
            return -EINVAL;
        }
        ret = dmg_read_mish(bs->opaque, data + pos, n, fork, file_len, errp);
        if (ret < 0) {
            return ret;
        }
        pos += n;
    }
    return 0;
}

/*
 * Reads the trailer and the tables it names: the resource fork if it has
 * one, else the property list (QEMU's choice: a fork wins, even an empty
 * one).
 */
static int dmg_read_tables(BlockDriverState *bs, Error **errp)
{
    BDRVDmgState *s = bs->opaque;
    int64_t file_len = bdrv_getlength(bs->file->bs);
    uint8_t koly[DMG_TRAILER_SIZE];
    uint64_t fork, rsrc, rsrc_len, plist, plist_len, sectors;
    int64_t koly_at;
    int ret;

    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not get the file's length");
        return file_len;
    }
    if (file_len < DMG_TRAILER_SIZE) {
        error_setg(errp, "The file is too short for a dmg trailer");
        return -EINVAL;
    }
    koly_at = dmg_find_trailer(bs, file_len, koly, errp);
    if (koly_at < 0) {
        return koly_at;
    }
    fork = dmg_be64(koly + 0x18);
    rsrc = dmg_be64(koly + 0x28);
    rsrc_len = dmg_be64(koly + 0x30);
    plist = dmg_be64(koly + 0xd8);
    plist_len = dmg_be64(koly + 0xe0);
    sectors = dmg_be64(koly + 0x1ec);
    if (sectors > INT64_MAX / DMG_SECTOR) {
        error_setg(errp, "The dmg trailer's sector count %" PRIu64 " is "
                   "too large", sectors);
        return -EFBIG;
    }
    s->chunks = g_array_new(false, false, sizeof(DmgChunk));
    if (rsrc_len) {
        /* QEMU too refuses a fork that runs into the trailer */
        if (rsrc > (uint64_t)koly_at || rsrc_len > koly_at - rsrc) {
            error_setg(errp, "The resource fork (%" PRIu64 " bytes at offset "
                       "%" PRIu64 ") runs past the trailer at offset %" PRId64,
                       rsrc_len, rsrc, koly_at);
            return -EINVAL;
        }
        ret = dmg_load_rsrc(bs, rsrc, rsrc_len, fork, file_len, errp);
    } else if (plist_len) {
        ret = dmg_load_plist(bs, plist, plist_len, fork, file_len, errp);
    } else {
        error_setg(errp, "The dmg image has neither a property list nor a "
                   "resource fork");
        ret = -EINVAL;
    }
    return ret < 0 ? ret : dmg_order_chunks(s, sectors, errp);
}

static int dmg_open(BlockDriverState *bs, QDict *options, int flags,
                    Error **errp)
{
    BDRVDmgState *s = bs->opaque;
    int ret;

    /* inv. 3 */
    ret = bdrv_open_read_only_format(bs, options, flags, errp);
    if (ret == 0) {
        ret = dmg_read_tables(bs, errp);
    }
    if (ret == 0) {
        s->stream = g_try_malloc(MAX(s->max_stream, 1));
        s->chunk_buf = g_try_malloc(MAX(s->max_sectors, 1) * DMG_SECTOR);
        if (!s->stream || !s->chunk_buf) {
            error_setg(errp, "Could not allocate the buffers of a chunk");
            ret = -ENOMEM;
        }
    }
    if (ret < 0) {
        dmg_close(bs);
        return ret;
    }
    s->cached = -1;
    qemu_co_mutex_init(&s->lock);
    return 0;
}

/* The index of the chunk holding @sector (inv. 1: one does). */
static guint dmg_find_chunk(const BDRVDmgState *s, uint64_t sector)
{
    guint lo = 0, hi = s->chunks->len;

    while (hi - lo > 1) {
        guint mid = lo + (hi - lo) / 2;

        if (g_array_index(s->chunks, DmgChunk, mid).sector <= sector) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Decompresses chunk @i into s->chunk_buf (inv. 2: under s->lock). */
static int coroutine_fn dmg_load_chunk(BlockDriverState *bs, guint i)
{
    BDRVDmgState *s = bs->opaque;
    const DmgChunk *c = &g_array_index(s->chunks, DmgChunk, i);
    uint64_t want = c->count * DMG_SECTOR;
    int ret;

    if (s->cached == i) {
        return 0;
    }
    s->cached = -1;
    ret = bdrv_pread(bs->file, c->offset, c->length, s->stream, 0);
    if (ret < 0) {
        return ret;
    }
    if (c->type == DMG_CHUNK_ZLIB) {
        uLongf out = want;

        ret = uncompress(s->chunk_buf, &out, s->stream, c->length) == Z_OK &&
              out == want ? 0 : -EIO;
    } else {
        unsigned int out = want;

        ret = BZ2_bzBuffToBuffDecompress((char *)s->chunk_buf, &out,
                                         (char *)s->stream, c->length, 0,
                                         0) == BZ_OK && out == want ? 0 : -EIO;
    }
    if (ret < 0) {
        error_report("dmg: chunk %u (%" PRIu64 " bytes at offset %" PRIu64
                     ") does not decompress to its %" PRIu64 " sectors", i,
                     c->length, c->offset, c->count);
        return ret;
    }
    s->cached = i;
    return 0;
}

/* One piece of a read: what of the request lies in one chunk. */
static int64_t coroutine_fn dmg_read_piece(BlockDriverState *bs,
                                           int64_t offset, int64_t bytes,
                                           QEMUIOVector *qiov, size_t done,
                                           void *opaque)
{
    BDRVDmgState *s = bs->opaque;
    guint i = dmg_find_chunk(s, offset / DMG_SECTOR);
    const DmgChunk *c = &g_array_index(s->chunks, DmgChunk, i);
    uint64_t in_chunk = offset - c->sector * DMG_SECTOR;
    int64_t n = MIN(bytes, (int64_t)(c->count * DMG_SECTOR - in_chunk));
    int ret = 0;

    /* inv. 1: the chunks cover the disk without gaps */
    assert(in_chunk < c->count * DMG_SECTOR);
    switch (c->type) {
    case DMG_CHUNK_RAW:
        ret = bdrv_co_preadv_part(bs->file, c->offset + in_chunk, n,
                                  qiov, done, 0);
        break;
    case DMG_CHUNK_ZLIB:
    case DMG_CHUNK_BZIP2:
        /* inv. 2: only the cache needs the lock, not a raw read */
        qemu_co_mutex_lock(&s->lock);
        ret = dmg_load_chunk(bs, i);
        if (ret == 0) {
            qemu_iovec_from_buf(qiov, done, s->chunk_buf + in_chunk, n);
        }
        qemu_co_mutex_unlock(&s->lock);
        break;
    case DMG_CHUNK_END:
        error_report("dmg: sector %" PRIu64 " lies in no chunk",
                     (uint64_t)offset / DMG_SECTOR);
        ret = -EIO;
        break;
    default:
        qemu_iovec_memset(qiov, done, 0, n);
    }
    return ret < 0 ? ret : n;
}

static int coroutine_fn dmg_co_preadv(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      BdrvRequestFlags flags)
{
    return bdrv_co_each_piece(bs, offset, bytes, qiov, dmg_read_piece, NULL);
}

static int64_t dmg_getlength(BlockDriverState *bs)
{
    BDRVDmgState *s = bs->opaque;

    return s->sectors * DMG_SECTOR;
}

static const BlockDriver bdrv_dmg = {
    .format_name                    = "dmg",
    .instance_size                  = sizeof(BDRVDmgState),
    .is_format                      = true,
    .bdrv_probe                     = dmg_probe,
    .bdrv_open                      = dmg_open,
    .bdrv_close                     = dmg_close,
    .bdrv_co_preadv                 = dmg_co_preadv,
    .bdrv_getlength                 = dmg_getlength,
    .request_alignment              = DMG_SECTOR,
};

block_init(bdrv_register, bdrv_dmg)
