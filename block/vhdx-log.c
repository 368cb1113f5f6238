/*
 * vhdx: the log's scan.  A VHDX header that names a non-zero log GUID
 * says metadata updates may sit in the log, not yet in place; they are
 * in place only once the log is replayed.  qblock reads VHDX images only
 * (block/vhdx.c inv. 1), so like QEMU on a read-only open it refuses an
 * image whose log holds a valid entry of that GUID, and opens one whose
 * log holds none (a log GUID left behind with nothing to replay).
 *
 * An entry is valid when its header ("loge", the header's log GUID, a
 * length in whole 4 KiB sectors that fits the log, room for its
 * descriptors) checks and the CRC-32C over the whole entry, read
 * circularly from the log's start, matches.  The scan is bounded: at
 * most VHDX_LOG_SCAN_BUDGET times the log's length is checksummed, so a
 * log of hostile lengths costs time linear in its size.
 */
#include "block/vhdx.h"
#include "util/crc32c.h"

#define VHDX_LOG_SECTOR         4096
#define VHDX_LOG_DESCRIPTOR     32
#define VHDX_LOG_SCAN_BUDGET    16
#define VHDX_LOG_CHUNK          (64 * 1024)

static bool vhdx_guid_is_zero(const uint8_t *guid)
{
    static const uint8_t zero[16];

    return !memcmp(guid, zero, 16);
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

int vhdx_log_is_dirty(BlockDriverState *bs, BDRVVhdxState *s, Error **errp)
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
        descriptor_bytes = sizeof(h) +
                           (uint64_t)h.descriptor_count * VHDX_LOG_DESCRIPTOR;
        if (memcmp(h.signature, VHDX_LOG_SIGNATURE, 4) ||
            memcmp(h.log_guid, s->header.log_guid, 16) ||
            h.entry_length < VHDX_LOG_SECTOR ||
            h.entry_length % VHDX_LOG_SECTOR ||
            h.entry_length > s->header.log_length ||
            descriptor_bytes > h.entry_length) {
            continue;
        }
        if (budget < h.entry_length) {
            error_setg(errp, "VHDX log holds too many corrupt entries to "
                       "scan");
            return -EINVAL;
        }
        budget -= h.entry_length;
        ret = vhdx_log_entry_crc(bs, s, pos, h.entry_length, sector, &crc);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not read the VHDX log");
            return ret;
        }
        if (crc == GUINT32_FROM_LE(h.checksum)) {
            return 1;
        }
    }
    return 0;
}
