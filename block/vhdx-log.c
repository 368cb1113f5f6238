/*
 * vhdx: the log.  A VHDX header that names a non-zero log GUID says
 * metadata updates may sit in the log, not yet in place; they are in
 * place only once the log is replayed.  As QEMU, a read-only open refuses
 * an image whose log holds a valid entry of that GUID, and opens one
 * whose log holds none (a log GUID left behind with nothing to replay);
 * qemu-img check's read-write open (check -r) replays it.
 *
 * An entry is valid when its header ("loge", the header's log GUID, a
 * length in whole 4 KiB sectors that fits the log, room for its
 * descriptors) checks and the CRC-32C over the whole entry, read
 * circularly from the log's start, matches.  The scan is bounded: at
 * most VHDX_LOG_SCAN_BUDGET times the log's length is checksummed, so a
 * log of hostile lengths costs time linear in its size.
 *
 * Replay: the entries chain, each at the end of the one before (modulo
 * the log's length) with the next sequence number; the active sequence
 * is the chain whose last entry has the highest sequence number, from
 * the entry its tail names when that is in the chain.  Each descriptor
 * of each entry is applied in order: a data descriptor writes its data
 * sector (the descriptor's 8 leading and 4 trailing bytes around the
 * sector's 4084), a zero descriptor writes zeroes.  A replay writes only
 * whole 4 KiB sectors inside the file, outside the header section and
 * the log (block/vhdx.c inv. 3); a descriptor that asks otherwise, or
 * whose sequence numbers disagree with its entry's, stops the replay
 * before anything is written.  Then both headers are rewritten without
 * the log GUID (vhdx_update_headers), after the update of an open's
 * first visible write: QEMU's four header writes.
 *
 * Writing (vhdx_log_write_bat): each BAT update is one entry of one data
 * descriptor, the BAT's 4 KiB sector, under a new log GUID, applied and
 * the GUID cleared at once, as QEMU 7.2 writes it.
 */
#include "block/vhdx.h"
#include "util/crc32c.h"

#define VHDX_LOG_SCAN_BUDGET    16
#define VHDX_LOG_CHUNK          (64 * 1024)

static const uint8_t zero_guid[16];

static bool vhdx_guid_is_zero(const uint8_t *guid)
{
    return !memcmp(guid, zero_guid, 16);
}

/*
 * The CRC-32C of the @length-byte entry at @pos in the log, its checksum
 * field taken as zero; reads wrap at the log's end.  @first is the
 * entry's first sector, already read.
 */
static int vhdx_log_entry_crc(BlockDriverState *bs, BDRVVhdxState *s,
                              uint32_t pos, uint32_t length,
                              uint8_t *first, uint32_t *crc)
{
    g_autofree uint8_t *buf = g_malloc(VHDX_LOG_CHUNK);
    uint32_t done = VHDX_LOG_SECTOR;
    uint8_t saved[4];

    memcpy(saved, first + 4, 4);
    memset(first + 4, 0, 4);
    *crc = crc32c(0, first, VHDX_LOG_SECTOR);
    memcpy(first + 4, saved, 4);
    while (done < length) {
        uint32_t at = (pos + done) % s->header.log_length;
        uint32_t n = MIN(MIN(length - done, (uint32_t)VHDX_LOG_CHUNK),
                         s->header.log_length - at);
        int ret = bdrv_pread(bs->file, s->header.log_offset + at, n, buf, 0);

        if (ret < 0) {
            return ret;
        }
        *crc = crc32c(*crc, buf, n);
        done += n;
    }
    return 0;
}

/* One valid entry of the log, at @pos from its start. */
typedef struct VhdxLogEntry {
    uint32_t pos;
    uint32_t length;
    uint32_t tail;
    uint32_t descriptor_count;
    uint64_t sequence_number;
    int64_t prev;           /* the entry it follows in a chain, or -1 */
} VhdxLogEntry;

/*
 * Whether the entry at @pos is valid: 1 with @e filled, 0 if not, a
 * negative errno (with @errp) on a read error or a spent @budget.
 */
static int vhdx_log_read_entry(BlockDriverState *bs, BDRVVhdxState *s,
                               uint32_t pos, uint8_t *sector,
                               uint64_t *budget, VhdxLogEntry *e,
                               Error **errp)
{
    VhdxLogEntryHeader h;
    uint64_t descriptor_bytes;
    uint32_t crc;
    int ret = bdrv_pread(bs->file, s->header.log_offset + pos,
                         VHDX_LOG_SECTOR, sector, 0);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VHDX log");
        return ret;
    }
    memcpy(&h, sector, sizeof(h));
    h.entry_length = GUINT32_FROM_LE(h.entry_length);
    h.descriptor_count = GUINT32_FROM_LE(h.descriptor_count);
    h.tail = GUINT32_FROM_LE(h.tail);
    descriptor_bytes = sizeof(h) +
                       (uint64_t)h.descriptor_count * VHDX_LOG_DESCRIPTOR;
    if (memcmp(h.signature, VHDX_LOG_SIGNATURE, 4) ||
        memcmp(h.log_guid, s->header.log_guid, 16) ||
        h.entry_length < VHDX_LOG_SECTOR ||
        h.entry_length % VHDX_LOG_SECTOR ||
        h.entry_length > s->header.log_length ||
        descriptor_bytes > h.entry_length) {
        return 0;
    }
    if (*budget < h.entry_length) {
        error_setg(errp, "VHDX log holds too many corrupt entries to scan");
        return -EINVAL;
    }
    *budget -= h.entry_length;
    ret = vhdx_log_entry_crc(bs, s, pos, h.entry_length, sector, &crc);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VHDX log");
        return ret;
    }
    if (crc != GUINT32_FROM_LE(h.checksum)) {
        return 0;
    }
    *e = (VhdxLogEntry){
        .pos = pos,
        .length = h.entry_length,
        .tail = h.tail,
        .descriptor_count = h.descriptor_count,
        .sequence_number = GUINT64_FROM_LE(h.sequence_number),
    };
    return 1;
}

/*
 * The valid entries of the log, in the order of their places (@stop_at_one:
 * only the first); a negative errno with @errp set on a bad log.
 */
static int vhdx_log_scan(BlockDriverState *bs, BDRVVhdxState *s,
                         bool stop_at_one, GArray *entries, Error **errp)
{
    g_autofree uint8_t *sector = g_malloc(VHDX_LOG_SECTOR);
    uint64_t budget;
    int64_t file_len;

    if (vhdx_guid_is_zero(s->header.log_guid)) {
        return 0;
    }
    if (s->header.log_length == 0 ||
        s->header.log_length % VHDX_MIB) {
        error_setg(errp, "VHDX log length %" PRIu32 " is not a non-zero "
                   "multiple of 1 MiB", s->header.log_length);
        return -EINVAL;
    }
    file_len = bdrv_getlength(bs->file->bs);
    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not get the image's size");
        return file_len;
    }
    /* a log past the file's end holds nothing, as QEMU reads it */
    if (s->header.log_offset > (uint64_t)file_len ||
        s->header.log_length > (uint64_t)file_len - s->header.log_offset) {
        return 0;
    }
    budget = (uint64_t)VHDX_LOG_SCAN_BUDGET * s->header.log_length;
    for (uint32_t pos = 0; pos < s->header.log_length;
         pos += VHDX_LOG_SECTOR) {
        VhdxLogEntry e;
        int ret = vhdx_log_read_entry(bs, s, pos, sector, &budget, &e, errp);

        if (ret < 0) {
            return ret;
        }
        if (ret > 0) {
            g_array_append_val(entries, e);
            if (stop_at_one) {
                break;
            }
        }
    }
    return 0;
}

int vhdx_log_is_dirty(BlockDriverState *bs, BDRVVhdxState *s, Error **errp)
{
    g_autoptr(GArray) entries = g_array_new(false, false,
                                            sizeof(VhdxLogEntry));
    int ret = vhdx_log_scan(bs, s, true, entries, errp);

    return ret < 0 ? ret : entries->len > 0;
}

/* The index in @entries of the entry at @pos, or -1. */
static int64_t vhdx_log_find(GArray *entries, uint32_t pos)
{
    guint lo = 0, hi = entries->len;

    /* @entries is sorted by place */
    while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        uint32_t at = g_array_index(entries, VhdxLogEntry, mid).pos;

        if (at == pos) {
            return mid;
        }
        if (at < pos) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return -1;
}

/* The entry after entry @i in its chain, or -1. */
static int64_t vhdx_log_next(BDRVVhdxState *s, GArray *entries, guint i)
{
    VhdxLogEntry *e = &g_array_index(entries, VhdxLogEntry, i);
    int64_t n = vhdx_log_find(entries, (uint32_t)(((uint64_t)e->pos +
                              e->length) % s->header.log_length));

    if (n < 0 || n == i ||
        g_array_index(entries, VhdxLogEntry, n).sequence_number !=
        e->sequence_number + 1) {
        return -1;
    }
    return n;
}

/*
 * Reads @len bytes at @at from the start of entry @e, wrapping at the
 * log's end.
 */
static int vhdx_log_read_in_entry(BlockDriverState *bs, BDRVVhdxState *s,
                                  const VhdxLogEntry *e, uint32_t at,
                                  uint32_t len, void *buf)
{
    uint32_t first = (uint32_t)(((uint64_t)e->pos + at) %
                                s->header.log_length);
    uint32_t n = MIN(len, s->header.log_length - first);
    int ret = bdrv_pread(bs->file, s->header.log_offset + first, n, buf, 0);

    if (ret < 0 || n == len) {
        return ret;
    }
    return bdrv_pread(bs->file, s->header.log_offset, len - n,
                      (uint8_t *)buf + n, 0);
}

/*
 * Walks the descriptors of entry @e.  Without @apply it only checks them
 * (see the comment at the top): -EINVAL with @errp set on the first bad
 * one.  With @apply, after every entry of the sequence passed, it makes
 * their writes.  Descriptors and data sectors are read a 4 KiB sector at
 * a time, so an entry of any size takes two sectors of memory.
 */
static int vhdx_log_entry_walk(BlockDriverState *bs, BDRVVhdxState *s,
                               const VhdxLogEntry *e, int64_t file_len,
                               bool apply, Error **errp)
{
    g_autofree uint8_t *desc_sector = g_malloc(VHDX_LOG_SECTOR);
    g_autofree uint8_t *sector = g_malloc(VHDX_LOG_SECTOR);
    int64_t cached = -1;    /* which sector of the entry desc_sector is */
    uint32_t data_at = ROUND_UP(sizeof(VhdxLogEntryHeader) +
                                e->descriptor_count * VHDX_LOG_DESCRIPTOR,
                                VHDX_LOG_SECTOR);

    for (uint32_t i = 0; i < e->descriptor_count; i++) {
        uint32_t at = sizeof(VhdxLogEntryHeader) + i * VHDX_LOG_DESCRIPTOR;
        uint64_t len, offset, seq, end;
        const uint8_t *d;
        bool is_data;
        int ret;

        /* a descriptor never spans sectors: 4096 is a multiple of 32 */
        if (at / VHDX_LOG_SECTOR != cached) {
            cached = at / VHDX_LOG_SECTOR;
            ret = vhdx_log_read_in_entry(bs, s, e, cached * VHDX_LOG_SECTOR,
                                         VHDX_LOG_SECTOR, desc_sector);
            if (ret < 0) {
                error_setg_errno(errp, -ret, "Could not read the VHDX log");
                return ret;
            }
        }
        d = desc_sector + at % VHDX_LOG_SECTOR;
        memcpy(&offset, d + 16, 8);
        memcpy(&seq, d + 24, 8);
        offset = GUINT64_FROM_LE(offset);
        is_data = !memcmp(d, "desc", 4);
        if (is_data) {
            uint32_t hi, lo;

            len = VHDX_LOG_SECTOR;
            if (data_at > e->length - VHDX_LOG_SECTOR) {
                error_setg(errp, "VHDX log entry %" PRIu64 " has more data "
                           "descriptors than data sectors",
                           e->sequence_number);
                return -EINVAL;
            }
            ret = vhdx_log_read_in_entry(bs, s, e, data_at, VHDX_LOG_SECTOR,
                                         sector);
            data_at += VHDX_LOG_SECTOR;
            if (ret < 0) {
                error_setg_errno(errp, -ret, "Could not read the VHDX log");
                return ret;
            }
            memcpy(&hi, sector + 4, 4);
            memcpy(&lo, sector + VHDX_LOG_SECTOR - 4, 4);
            if (memcmp(sector, "data", 4) ||
                GUINT32_FROM_LE(hi) != (uint32_t)(e->sequence_number >> 32) ||
                GUINT32_FROM_LE(lo) != (uint32_t)e->sequence_number) {
                error_setg(errp, "VHDX log entry %" PRIu64 " has a bad data "
                           "sector", e->sequence_number);
                return -EINVAL;
            }
            /* the sector's first 8 and last 4 bytes are the descriptor's */
            memcpy(sector, d + 8, 8);
            memcpy(sector + VHDX_LOG_SECTOR - 4, d + 4, 4);
        } else if (!memcmp(d, "zero", 4)) {
            memcpy(&len, d + 8, 8);
            len = GUINT64_FROM_LE(len);
        } else {
            error_setg(errp, "VHDX log entry %" PRIu64 " has a descriptor "
                       "of unknown type", e->sequence_number);
            return -EINVAL;
        }
        if (GUINT64_FROM_LE(seq) != e->sequence_number ||
            offset % VHDX_LOG_SECTOR || len % VHDX_LOG_SECTOR ||
            __builtin_add_overflow(offset, len, &end) ||
            end > (uint64_t)file_len || offset < VHDX_HEADER_SECTION_END ||
            (offset < s->header.log_offset + s->header.log_length &&
             end > s->header.log_offset)) {
            error_setg(errp, "VHDX log entry %" PRIu64 " has a descriptor "
                       "that writes %" PRIu64 " bytes at %" PRIu64 ", outside "
                       "the image's structures and blocks, or of another "
                       "sequence", e->sequence_number, len, offset);
            return -EINVAL;
        }
        if (!apply) {
            continue;
        }
        ret = is_data ? bdrv_pwrite(bs->file, offset, len, sector, 0)
                      : bdrv_pwrite_zeroes(bs->file, offset, len, 0);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not replay the VHDX log");
            return ret;
        }
    }
    return 0;
}

int vhdx_log_replay(BlockDriverState *bs, BDRVVhdxState *s, Error **errp)
{
    g_autoptr(GArray) entries = g_array_new(false, false,
                                            sizeof(VhdxLogEntry));
    int64_t head = -1, start, file_len;
    int ret = vhdx_log_scan(bs, s, false, entries, errp);

    if (ret < 0 || entries->len == 0) {
        return ret;
    }
    file_len = bdrv_getlength(bs->file->bs);
    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not get the image's size");
        return file_len;
    }
    /* the head: the last entry of a chain with the highest number */
    for (guint i = 0; i < entries->len; i++) {
        g_array_index(entries, VhdxLogEntry, i).prev = -1;
    }
    for (guint i = 0; i < entries->len; i++) {
        int64_t n = vhdx_log_next(s, entries, i);

        if (n >= 0) {
            g_array_index(entries, VhdxLogEntry, n).prev = i;
        }
    }
    for (guint i = 0; i < entries->len; i++) {
        VhdxLogEntry *e = &g_array_index(entries, VhdxLogEntry, i);

        if (vhdx_log_next(s, entries, i) < 0 &&
            (head < 0 || e->sequence_number >
             g_array_index(entries, VhdxLogEntry, head).sequence_number)) {
            head = i;
        }
    }
    /* a chain is acyclic: its numbers rise; so a head exists */
    assert(head >= 0);
    /* its start: the entry the head's tail names if in the chain, else
     * the chain's first */
    start = head;
    while (g_array_index(entries, VhdxLogEntry, start).pos !=
           g_array_index(entries, VhdxLogEntry, head).tail &&
           g_array_index(entries, VhdxLogEntry, start).prev >= 0) {
        start = g_array_index(entries, VhdxLogEntry, start).prev;
    }
    /* every descriptor of the sequence checked before the first write */
    for (int pass = 0; pass < 2; pass++) {
        /* as QEMU: the replay is the open's first visible write */
        if (pass == 1 && (ret = vhdx_user_visible_write(bs, s)) < 0) {
            error_setg_errno(errp, -ret, "Could not write the VHDX header");
            return ret;
        }
        for (int64_t i = start; ; i = vhdx_log_next(s, entries, i)) {
            /* the chain from start leads to head */
            assert(i >= 0);
            ret = vhdx_log_entry_walk(bs, s,
                                      &g_array_index(entries, VhdxLogEntry,
                                                     i),
                                      file_len, pass == 1, errp);
            if (ret < 0) {
                return ret;
            }
            if (i == head) {
                break;
            }
        }
    }
    ret = bdrv_flush(bs->file->bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not flush the replayed log");
        return ret;
    }
    /* as QEMU: the log GUID cleared, both headers rewritten again */
    ret = vhdx_update_headers(bs, s, VHDX_HEADER_SET_LOG, zero_guid);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the VHDX header");
        return ret;
    }
    s->log_replayed = true;
    /* as QEMU: the next entry at the log's start, numbered after these */
    s->log_write_pos = 0;
    s->log_sequence = g_array_index(entries, VhdxLogEntry,
                                    head).sequence_number + 1;
    return 0;
}

/* Writes the @n-byte entry @buf at @pos of the log, wrapping at its end. */
static int coroutine_fn vhdx_log_put(BlockDriverState *bs, BDRVVhdxState *s,
                                     uint32_t pos, uint8_t *buf, uint32_t n)
{
    for (uint32_t done = 0; done < n; done += VHDX_LOG_SECTOR) {
        uint32_t at = (uint32_t)(((uint64_t)pos + done) %
                                 s->header.log_length);
        QEMUIOVector qiov;
        int ret;

        qemu_iovec_init_buf(&qiov, buf + done, VHDX_LOG_SECTOR);
        ret = bdrv_co_pwritev(bs->file, s->header.log_offset + at,
                              VHDX_LOG_SECTOR, &qiov, 0);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

/*
 * The log entry that writes @sector at @file_offset: the header sector
 * with one data descriptor (the sector's first 8 and last 4 bytes), then
 * the data sector ("data", the sequence number's halves around the
 * sector's other 4084 bytes).
 */
static void vhdx_log_build(BDRVVhdxState *s, const uint8_t *guid,
                           uint32_t pos, uint64_t file_len,
                           const uint8_t *sector, uint64_t file_offset,
                           uint8_t *entry)
{
    VhdxLogEntryHeader h = {
        .signature = "loge",
        .entry_length = GUINT32_TO_LE(2 * VHDX_LOG_SECTOR),
        .tail = GUINT32_TO_LE(pos),
        .sequence_number = GUINT64_TO_LE(s->log_sequence),
        .descriptor_count = GUINT32_TO_LE(1),
        .flushed_file_offset = GUINT64_TO_LE(file_len),
        .last_file_offset = GUINT64_TO_LE(file_len),
    };
    uint8_t *d = entry + sizeof(h), *data = entry + VHDX_LOG_SECTOR;
    uint64_t offset_le = GUINT64_TO_LE(file_offset);
    uint64_t seq_le = GUINT64_TO_LE(s->log_sequence);
    uint32_t hi = GUINT32_TO_LE((uint32_t)(s->log_sequence >> 32));
    uint32_t lo = GUINT32_TO_LE((uint32_t)s->log_sequence);
    uint32_t crc;

    memset(entry, 0, 2 * VHDX_LOG_SECTOR);
    memcpy(h.log_guid, guid, 16);
    memcpy(entry, &h, sizeof(h));
    memcpy(d, "desc", 4);
    memcpy(d + 4, sector + VHDX_LOG_SECTOR - 4, 4);
    memcpy(d + 8, sector, 8);
    memcpy(d + 16, &offset_le, 8);
    memcpy(d + 24, &seq_le, 8);
    memcpy(data, "data", 4);
    memcpy(data + 4, &hi, 4);
    memcpy(data + 8, sector + 8, VHDX_LOG_SECTOR - 12);
    memcpy(data + VHDX_LOG_SECTOR - 4, &lo, 4);
    crc = GUINT32_TO_LE(crc32c(0, entry, 2 * VHDX_LOG_SECTOR));
    memcpy(entry + 4, &crc, 4);
}

int coroutine_fn vhdx_log_write_bat(BlockDriverState *bs, BDRVVhdxState *s,
                                    uint64_t index)
{
    g_autofree uint8_t *sector = g_malloc0(VHDX_LOG_SECTOR);
    g_autofree uint8_t *entry = g_malloc(2 * VHDX_LOG_SECTOR);
    uint64_t in_bat = QEMU_ALIGN_DOWN(index * sizeof(uint64_t),
                                      VHDX_LOG_SECTOR);
    uint64_t file_offset = s->bat_offset + in_bat;
    uint64_t value = GUINT64_TO_LE(s->bat[index]);
    uint8_t guid[16];
    int64_t file_len;
    QEMUIOVector qiov;
    int ret;

    /* the BAT was read whole from the file (inv. 4): so is the entry */
    assert(index < s->bat_loaded);
    if (s->header.log_length < 2 * VHDX_LOG_SECTOR ||
        s->header.log_length % VHDX_LOG_SECTOR) {
        error_report("vhdx: a log of %" PRIu32 " bytes cannot hold an entry",
                     s->header.log_length);
        return -EINVAL;
    }
    /* the data the new entry points to is stable before the log names it */
    ret = bdrv_co_flush(bs);
    if (ret < 0) {
        return ret;
    }
    file_len = bdrv_getlength(bs->file->bs);
    if (file_len < 0) {
        return file_len;
    }
    /* the sector as on disk, past the file's end as zeroes (inv. 4) */
    ret = bdrv_pread(bs->file, file_offset,
                        MIN((uint64_t)VHDX_LOG_SECTOR,
                            (uint64_t)file_len - file_offset), sector, 0);
    if (ret < 0) {
        return ret;
    }
    memcpy(sector + index * sizeof(uint64_t) - in_bat, &value, 8);

    vhdx_random_guid(guid);
    ret = vhdx_update_headers(bs, s, VHDX_HEADER_SET_LOG, guid);
    if (ret < 0) {
        return ret;
    }
    vhdx_log_build(s, guid, s->log_write_pos, file_len, sector, file_offset,
                   entry);
    ret = vhdx_log_put(bs, s, s->log_write_pos, entry,
                       2 * VHDX_LOG_SECTOR);
    if (ret == 0) {
        ret = bdrv_co_flush(bs);
    }
    if (ret < 0) {
        return ret;
    }
    s->log_write_pos = (uint32_t)(((uint64_t)s->log_write_pos +
                                   2 * VHDX_LOG_SECTOR) %
                                  s->header.log_length);
    s->log_sequence++;
    /* the log now replays the update: the sector goes in place */
    qemu_iovec_init_buf(&qiov, sector, VHDX_LOG_SECTOR);
    ret = bdrv_co_pwritev(bs->file, file_offset, VHDX_LOG_SECTOR, &qiov, 0);
    if (ret == 0) {
        ret = bdrv_co_flush(bs);
    }
    if (ret < 0) {
        return ret;
    }
    return vhdx_update_headers(bs, s, VHDX_HEADER_SET_LOG, zero_guid);
}
