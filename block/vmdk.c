/*
 * vmdk: the format driver for VMware's virtual disks, as VMware's
 * "Virtual Disk Format 1.1" specification describes them and as QEMU and
 * VMware products write them.  This file opens and reads them;
 * block/vmdk-write.c writes them, block/vmdk-create.c creates them.
 *
 * A disk is a text descriptor and one or more extents, in the order of
 * the disk's sectors.  The descriptor is a file of its own
 * (monolithicFlat, twoGbMaxExtentFlat/Sparse, vmfs) or embedded in a
 * monolithic sparse extent (monolithicSparse, streamOptimized).  An
 * extent is FLAT (a range of a plain file), ZERO (reads as zeroes) or
 * SPARSE: a hosted sparse extent, whose 512-byte header ("KDMV") points
 * to a grain directory of 32-bit sector offsets of grain tables, whose
 * 32-bit entries give each grain's sector in the file (0: never written,
 * reads as zeroes; 1: zeroed, with the zeroed-grain flag).  A redundant
 * directory and tables, when the header has them, repeat the primary
 * ones.  A stream-optimized extent (flags: compressed grains and
 * markers) deflates each grain (zlib) behind a 12-byte marker (the
 * grain's first sector, the compressed size); VMware keeps its grain
 * directory at the end, in a footer that repeats the header, QEMU where
 * a sparse extent has it.
 *
 * A snapshot's delta disk names its parent in the descriptor
 * (parentFileNameHint), which becomes the node's backing file: what the
 * delta never wrote reads from there.
 *
 * ESX's sparse extents (VMFSSPARSE, "COWD") are sparse extents of another
 * header and fixed grain tables of 4096 entries (block/vmdk-cowd.c).  As
 * in QEMU, a descriptor file of a create type QEMU does not open (raw
 * device maps among them) is refused, "Unsupported image type"; an
 * extent type it does not know (VMFSRDM, VMFSRAW) is refused too (QEMU
 * skips the line, so the disk shrinks, and crashes if none is left).
 *
 * Invariants:
 *  1. After open the extents are immutable; they cover the disk in order
 *     (end_sector strictly grows, the last one is the disk's size), and
 *     a sparse extent's grain directory has an entry for every grain of
 *     the extent (an ESX one's has the header's count, at most
 *     VMDK_MAX_GD_ENTRIES, and what lies past it is VMDK_MAP_BEYOND_GD),
 *     its grain size is a power of two of at most
 *     VMDK_MAX_GRAIN_SECTORS and a grain table holds at most
 *     VMDK_MAX_GTES (VMDK3_GTES for ESX) entries: every offset computed
 *     from them fits in 64 bits whatever the file's tables say.
 *  2. An extent's tables in memory (the directories gd and rgd, the
 *     cached grain table gt and gt_index) and its allocation point
 *     next_sector change only under its lock, which a reader holds from
 *     the lookup to the copy of the entry it needs, and a writer from the
 *     lookup that finds a grain unallocated to the table entries that
 *     point at the grain it allocated.
 *  3. A node is writable only if every sparse extent keeps its directory
 *     where the header says (not in a footer): open refuses read-write
 *     otherwise, unless auto-read-only lets it fall back.
 *  4. A grain's (or a grain table's) contents are written before the
 *     table entry (or directory entry) that points at it.
 */
#include "block/vmdk.h"
#include "qapi/qapi-opts.h"
#include "util/cutils.h"

#include <zlib.h>

static bool vmdk_is_descriptor(const char *buf, size_t len)
{
    static const char sig[] = "# Disk DescriptorFile";

    return len >= sizeof(sig) - 1 && !memcmp(buf, sig, sizeof(sig) - 1);
}

static int vmdk_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    uint32_t magic;

    if (buf_size < 4) {
        return 0;
    }
    memcpy(&magic, buf, 4);
    magic = GUINT32_FROM_LE(magic);
    if (magic == VMDK4_MAGIC || magic == VMDK3_MAGIC) {
        return 100;
    }
    return vmdk_is_descriptor((const char *)buf, buf_size) ? 100 : 0;
}

/* ---- the descriptor ---- */

/* The value of "@key=..." (quotes stripped), or NULL; caller frees. */
static char *vmdk_desc_value(const char *desc, const char *key)
{
    g_auto(GStrv) lines = g_strsplit(desc, "\n", -1);
    size_t klen = strlen(key);

    for (char **l = lines; *l; l++) {
        char *v = g_strstrip(*l);

        if (strncmp(v, key, klen)) {
            continue;
        }
        v = g_strchug(v + klen);
        if (*v != '=') {
            continue;
        }
        v = g_strstrip(v + 1);
        if (*v == '"') {
            char *end = strchr(v + 1, '"');

            return g_strndup(v + 1, end ? end - v - 1 : strlen(v + 1));
        }
        return g_strdup(v);
    }
    return NULL;
}

/*
 * A descriptor's parent (a snapshot's base): parentCID other than
 * ffffffff names it in parentFileNameHint, which becomes the backing
 * file, resolved against the image's directory as a backing file is.
 */
static int vmdk_desc_parent(BlockDriverState *bs, const char *desc,
                            Error **errp)
{
    BDRVVmdkState *s = bs->opaque;
    g_autofree char *own = vmdk_desc_value(desc, "CID");
    g_autofree char *cid = vmdk_desc_value(desc, "parentCID");
    g_autofree char *hint = NULL;

    s->create_type = vmdk_desc_value(desc, "createType");
    s->cid = own ? strtoul(own, NULL, 16) : 0;
    s->parent_cid = cid ? strtoul(cid, NULL, 16) : UINT32_MAX;
    if (!cid || !g_ascii_strcasecmp(cid, "ffffffff")) {
        return 0;
    }
    hint = vmdk_desc_value(desc, "parentFileNameHint");
    if (!hint || !hint[0]) {
        error_setg(errp, "The descriptor has a parent (parentCID=%s) but "
                   "no parentFileNameHint", cid);
        return -EINVAL;
    }
    if (strlen(hint) >= sizeof(bs->backing_file)) {
        error_setg(errp, "parentFileNameHint is too long");
        return -EINVAL;
    }
    pstrcpy(bs->backing_file, sizeof(bs->backing_file), hint);
    pstrcpy(bs->backing_format, sizeof(bs->backing_format), "vmdk");
    return 0;
}

/* Invariant 1: whether an extent of @sectors may start at @start. */
static bool vmdk_extent_size_ok(uint64_t start, uint64_t sectors,
                                Error **errp)
{
    if (sectors == 0 || sectors > (uint64_t)INT64_MAX / VMDK_SECTOR - start) {
        error_setg(errp, "Invalid extent size %" PRIu64 " (sectors)",
                   sectors);
        return false;
    }
    return true;
}

/*
 * Invariant 1: the last extent, @e, has @sectors (as QEMU: a sparse
 * extent has its header's size, whatever its descriptor line says).
 */
static int vmdk_resize_last_extent(VmdkExtent *e, uint64_t sectors,
                                   Error **errp)
{
    uint64_t start = e->end_sector - e->sectors;

    if (!vmdk_extent_size_ok(start, sectors, errp)) {
        return -EINVAL;
    }
    e->sectors = sectors;
    e->end_sector = start + sectors;
    return 0;
}

/* Invariant 1: appends an extent of @sectors after those there are. */
VmdkExtent *vmdk_add_extent(BDRVVmdkState *s, VmdkExtentType type,
                            const char *type_name, uint64_t sectors,
                            Error **errp)
{
    uint64_t start = s->nextents ? s->extents[s->nextents - 1].end_sector
                                 : 0;
    VmdkExtent *e;

    if (s->nextents == VMDK_MAX_EXTENTS) {
        error_setg(errp, "More than %d extents", VMDK_MAX_EXTENTS);
        return NULL;
    }
    if (!vmdk_extent_size_ok(start, sectors, errp)) {
        return NULL;
    }
    s->extents = g_renew(VmdkExtent, s->extents, s->nextents + 1);
    e = &s->extents[s->nextents++];
    *e = (VmdkExtent) {
        .type = type,
        .type_name = g_strdup(type_name),
        .sectors = sectors,
        .end_sector = start + sectors,
        .header_sectors = 1,
        .gt_index = -1,
    };
    qemu_co_mutex_init(&e->lock);
    return e;
}

/* ---- sparse extents ---- */

int coroutine_fn vmdk_co_file_io(BdrvChild *file, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 size_t done, bool write)
{
    return write ? bdrv_co_pwritev_part(file, offset, bytes, qiov, done, 0)
                 : bdrv_co_preadv_part(file, offset, bytes, qiov, done, 0);
}

int coroutine_fn vmdk_co_pread(BdrvChild *child, int64_t offset,
                               int64_t bytes, void *buf)
{
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, buf, bytes);
    return bdrv_co_preadv(child, offset, bytes, &qiov, 0);
}

/*
 * Invariant 1: the geometry of a sparse extent of @sectors whose header
 * is @h, checked in QEMU's order and with its messages; stricter than
 * QEMU's for grains (a power of two, at most 1 MiB: QEMU takes any size
 * up to 1 GiB, which no tool writes).
 */
static int vmdk_check_geometry(const VMDK4Header *h, uint64_t sectors,
                               Error **errp)
{
    uint64_t grain = GUINT64_FROM_LE(h->grain_size);
    uint32_t gtes = GUINT32_FROM_LE(h->num_gtes_per_gt);

    if (GUINT32_FROM_LE(h->version) > 3) {
        error_setg(errp, "Unsupported VMDK version %" PRIu32,
                   GUINT32_FROM_LE(h->version));
        return -ENOTSUP;
    }
    if (gtes > VMDK_MAX_GTES) {
        error_setg(errp, "L2 table size too big");
        return -EINVAL;
    }
    if (gtes == 0 || grain == 0) {
        error_setg(errp, "L1 entry size is invalid");
        return -EINVAL;
    }
    /* both at most 2^32: their product does not overflow */
    if (grain <= UINT32_MAX &&
        DIV_ROUND_UP(sectors, grain * gtes) > VMDK_MAX_GD_ENTRIES) {
        error_setg(errp, "L1 size too big");
        return -EFBIG;
    }
    if (grain > VMDK_QEMU_MAX_GRAIN_SECTORS) {
        error_setg(errp, "Invalid granularity, image may be corrupt");
        return -EINVAL;
    }
    if (grain > VMDK_MAX_GRAIN_SECTORS || (grain & (grain - 1))) {
        error_setg(errp, "Unsupported granularity of %" PRIu64 " sectors "
                   "(grains of a power of two up to %d sectors are read)",
                   grain, VMDK_MAX_GRAIN_SECTORS);
        return -ENOTSUP;
    }
    return 0;
}

/* Invariant 1: the header's geometry, checked; the GD read. */
static int vmdk_open_sparse(VmdkExtent *e, const VMDK4Header *h,
                            Error **errp)
{
    uint32_t flags = GUINT32_FROM_LE(h->flags);
    uint64_t grain = GUINT64_FROM_LE(h->grain_size);
    uint32_t gtes = GUINT32_FROM_LE(h->num_gtes_per_gt);
    uint64_t gd_offset = GUINT64_FROM_LE(h->gd_offset);
    uint64_t overhead = GUINT64_FROM_LE(h->grain_offset);
    int64_t file_size = bdrv_getlength(e->file->bs);
    uint64_t grains, gd_entries;
    int ret;

    ret = vmdk_check_geometry(h, e->sectors, errp);
    if (ret < 0) {
        return ret;
    }
    if ((flags & VMDK4_FLAG_COMPRESS) &&
        GUINT16_FROM_LE(h->compress_algorithm) != VMDK4_COMPRESS_DEFLATE) {
        error_setg(errp, "Unknown compression algorithm %u",
                   GUINT16_FROM_LE(h->compress_algorithm));
        return -ENOTSUP;
    }
    /* QEMU's check: the metadata before the first grain is all there */
    if (file_size >= 0 && overhead <= (uint64_t)INT64_MAX / VMDK_SECTOR &&
        (uint64_t)file_size < overhead * VMDK_SECTOR) {
        error_setg(errp, "File truncated, expecting at least %" PRIu64
                   " bytes", overhead * VMDK_SECTOR);
        return -EINVAL;
    }
    grains = DIV_ROUND_UP(e->sectors, grain);
    gd_entries = DIV_ROUND_UP(grains, gtes);
    if (gd_offset > (uint64_t)INT64_MAX / VMDK_SECTOR) {
        error_setg(errp, "Grain directory offset %" PRIu64 " (sectors) is "
                   "beyond any file", gd_offset);
        return -EINVAL;
    }
    e->grain_sectors = grain;
    e->gtes = gtes;
    e->gd_sector = gd_offset;
    /* what writes must leave alone (block/vmdk-write.c) */
    e->data_start = MAX(overhead, 1);
    if (GUINT64_FROM_LE(h->desc_size) <= VMDK_MAX_DESCRIPTOR / VMDK_SECTOR &&
        GUINT64_FROM_LE(h->desc_offset) <= UINT32_MAX) {
        e->desc_sector = GUINT64_FROM_LE(h->desc_offset);
        e->desc_sectors = GUINT64_FROM_LE(h->desc_size);
    }
    if (flags & VMDK4_FLAG_RGD) {
        e->rgd_sector = GUINT64_FROM_LE(h->rgd_offset);
    }
    e->compressed = flags & VMDK4_FLAG_COMPRESS;
    e->zeroed_grain = flags & VMDK4_FLAG_ZEROED_GRAIN;
    e->gd_entries = gd_entries;
    return vmdk_read_gd(e, file_size, errp);
}

/*
 * Invariant 1: allocates the grain table cache and reads the directory
 * of @e (e->gd_entries at e->gd_sector, e->gtes set), which the file (of
 * @file_size bytes; < 0: unknown) must hold: what the directory costs in
 * memory, the file holds.
 */
int vmdk_read_gd(VmdkExtent *e, int64_t file_size, Error **errp)
{
    uint64_t bytes = (uint64_t)e->gd_entries * sizeof(uint32_t);
    int ret;

    if (file_size >= 0 &&
        e->gd_sector * VMDK_SECTOR + bytes > (uint64_t)file_size) {
        error_setg(errp, "Grain directory of %" PRIu32 " entries at sector "
                   "%" PRIu64 " lies past the end of the file",
                   e->gd_entries, e->gd_sector);
        return -EINVAL;
    }
    /* an ESX extent's may have no entry: nothing to read */
    e->gd = g_new(uint32_t, MAX(e->gd_entries, 1));
    e->gt = g_new(uint32_t, e->gtes);
    if (bytes == 0) {
        return 0;
    }
    ret = bdrv_pread(e->file, e->gd_sector * VMDK_SECTOR, bytes, e->gd, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the grain directory");
        return ret;
    }
    for (uint32_t i = 0; i < e->gd_entries; i++) {
        e->gd[i] = GUINT32_FROM_LE(e->gd[i]);
    }
    return 0;
}

/*
 * Reads the header of the sparse extent in @file: a hosted one's, or the
 * first bytes of an ESX one's (h->magic says which).  A
 * stream-optimized one has its grain directory in the footer, which
 * repeats the header two sectors before the end of the file.
 */
static int vmdk_read_sparse_header(BdrvChild *file, VMDK4Header *h,
                                   bool *in_footer, Error **errp)
{
    int64_t size;
    int ret;

    ret = bdrv_pread(file, 0, sizeof(*h), h, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VMDK header");
        return ret;
    }
    /* an ESX sparse extent's fields: the caller's (block/vmdk-cowd.c) */
    if (GUINT32_FROM_LE(h->magic) == VMDK3_MAGIC) {
        *in_footer = false;
        return 0;
    }
    if (GUINT32_FROM_LE(h->magic) != VMDK4_MAGIC) {
        /* QEMU's message */
        error_setg(errp, "Image not in VMDK format");
        return -EINVAL;
    }
    *in_footer = GUINT64_FROM_LE(h->gd_offset) == VMDK_GD_AT_END;
    if (!*in_footer) {
        return 0;
    }
    size = bdrv_getlength(file->bs);
    if (size < 0) {
        error_setg_errno(errp, -size, "Could not get the extent's size");
        return size;
    }
    if (size < 3 * VMDK_SECTOR) {
        error_setg(errp, "Stream-optimized extent of %" PRId64 " bytes has "
                   "no footer", size);
        return -EINVAL;
    }
    ret = bdrv_pread(file, size - 2 * VMDK_SECTOR, sizeof(*h), h, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VMDK footer");
        return ret;
    }
    if (GUINT32_FROM_LE(h->magic) != VMDK4_MAGIC ||
        GUINT64_FROM_LE(h->gd_offset) == VMDK_GD_AT_END) {
        error_setg(errp, "Invalid footer of a stream-optimized extent");
        return -EINVAL;
    }
    return 0;
}

/*
 * The file offset of the grain that holds @sector of sparse extent @e (in
 * sectors), or 0 (never written) or VMDK_GTE_ZEROED; < 0 on error.  The
 * caller holds e->lock (invariant 2).
 */
int64_t coroutine_fn vmdk_grain_locked(VmdkExtent *e, uint64_t sector)
{
    uint64_t grain = sector / e->grain_sectors;
    uint64_t gdi = grain / e->gtes;
    uint32_t gte;
    int ret;

    /*
     * invariant 1: every grain of the extent has a GD entry, but for an
     * ESX extent's past its directory, which vmdk_map() stops at
     */
    assert(gdi < e->gd_entries);
    if (e->gd[gdi] == 0) {
        return 0;
    }
    if (e->gt_index != (int64_t)gdi) {
        e->gt_index = -1;
        BLKDBG_EVENT(e->file, BLKDBG_L2_LOAD);
        ret = vmdk_co_pread(e->file, (int64_t)e->gd[gdi] * VMDK_SECTOR,
                            (int64_t)e->gtes * sizeof(uint32_t), e->gt);
        if (ret < 0) {
            return ret;
        }
        e->gt_index = gdi;
    }
    gte = GUINT32_FROM_LE(e->gt[grain % e->gtes]);
    /* in an ESX extent, as in QEMU, a grain at sector 1 */
    if (gte == VMDK_GTE_ZEROED && !e->zeroed_grain && !e->cowd) {
        error_report("vmdk: grain %" PRIu64 " is at sector 1, inside the "
                     "header", grain);
        return -EIO;
    }
    return gte;
}

static int64_t coroutine_fn vmdk_grain(VmdkExtent *e, uint64_t sector)
{
    int64_t ret;

    /* invariant 2 */
    qemu_co_mutex_lock(&e->lock);
    ret = vmdk_grain_locked(e, sector);
    qemu_co_mutex_unlock(&e->lock);
    return ret;
}

uint64_t vmdk_grain_bytes(const VmdkExtent *e, uint64_t grain_sector)
{
    /* invariant 1: the grain starts inside the extent */
    assert(grain_sector < e->sectors);
    return MIN(e->grain_sectors, e->sectors - grain_sector) * VMDK_SECTOR;
}

/*
 * Reads @bytes at @in_grain of the compressed grain at sector @at of @e
 * into @qiov at @done: its marker, then the deflated grain.
 */
static int coroutine_fn vmdk_read_compressed(VmdkExtent *e, uint64_t at,
                                             uint64_t grain_sector,
                                             uint64_t in_grain,
                                             uint64_t bytes,
                                             QEMUIOVector *qiov, size_t done)
{
    size_t grain_bytes = e->grain_sectors * VMDK_SECTOR;
    /* deflate grows incompressible data by a little: twice is plenty */
    size_t max = VMDK_MARKER_SIZE + 2 * grain_bytes;
    /* whole sectors are read */
    g_autofree uint8_t *buf = g_malloc(QEMU_ALIGN_UP(max, VMDK_SECTOR));
    g_autofree uint8_t *grain = g_malloc(grain_bytes);
    uint64_t lba;
    uint32_t size;
    /*
     * One read takes the marker and a grain that deflated to no more
     * than its size, as nearly all do; a longer one needs a second.
     */
    size_t first = QEMU_ALIGN_UP(VMDK_MARKER_SIZE + grain_bytes,
                                 VMDK_SECTOR);
    int64_t file_len = bdrv_getlength(e->file->bs);
    uLongf out = grain_bytes;
    int ret;

    /* not past the end of the file (a protocol may refuse that) */
    if (file_len > (int64_t)(at * VMDK_SECTOR) &&
        (uint64_t)file_len - at * VMDK_SECTOR < first) {
        first = QEMU_ALIGN_UP(file_len - at * VMDK_SECTOR, VMDK_SECTOR);
    }
    BLKDBG_EVENT(e->file, BLKDBG_READ_COMPRESSED);
    ret = vmdk_co_pread(e->file, at * VMDK_SECTOR, first, buf);
    if (ret < 0) {
        return ret;
    }
    memcpy(&lba, buf, 8);
    memcpy(&size, buf + 8, 4);
    lba = GUINT64_FROM_LE(lba);
    size = GUINT32_FROM_LE(size);
    if (size == 0 || size > max - VMDK_MARKER_SIZE) {
        error_report("vmdk: compressed grain at sector %" PRIu64 " has a "
                     "size of %" PRIu32 " bytes", at, size);
        return -EIO;
    }
    if (lba != grain_sector) {
        error_report("vmdk: compressed grain at sector %" PRIu64 " is for "
                     "sector %" PRIu64 ", not %" PRIu64, at, lba,
                     grain_sector);
        return -EIO;
    }
    if (VMDK_MARKER_SIZE + size > first) {
        ret = vmdk_co_pread(e->file, at * VMDK_SECTOR + first,
                            QEMU_ALIGN_UP(VMDK_MARKER_SIZE + size,
                                          VMDK_SECTOR) - first,
                            buf + first);
        if (ret < 0) {
            return ret;
        }
    }
    /*
     * The last grain of an extent that ends inside it holds only what
     * the extent has (QEMU deflates just that); the rest is never read.
     */
    if (uncompress(grain, &out, buf + VMDK_MARKER_SIZE, size) != Z_OK ||
        out < vmdk_grain_bytes(e, grain_sector)) {
        error_report("vmdk: compressed grain at sector %" PRIu64 " does not "
                     "inflate to a grain", at);
        return -EIO;
    }
    /* invariant 1: vmdk_map() keeps a piece inside the grain's extent */
    assert(in_grain + bytes <= out);
    qemu_iovec_from_buf(qiov, done, grain + in_grain, bytes);
    return 0;
}

/* ---- opening ---- */

static int vmdk_open_desc_extents(BlockDriverState *bs, const char *desc,
                                  QDict *options, Error **errp);

/*
 * Reads the descriptor text at @offset of bs->file (@size bytes, at most
 * VMDK_MAX_DESCRIPTOR), and what it says of the image and its parent.
 */
char *vmdk_read_desc(BlockDriverState *bs, uint64_t offset, uint64_t size,
                     Error **errp)
{
    g_autofree char *desc = g_malloc0(size + 1);
    int ret = bdrv_pread(bs->file, offset, size, desc, 0);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the descriptor");
        return NULL;
    }
    if (vmdk_desc_parent(bs, desc, errp) < 0) {
        return NULL;
    }
    /* kept to be written again with a new CID (block/vmdk-write.c) */
    ((BDRVVmdkState *)bs->opaque)->desc = g_strdup(desc);
    ((BDRVVmdkState *)bs->opaque)->desc_offset = offset;
    ((BDRVVmdkState *)bs->opaque)->desc_room = size;
    return g_steal_pointer(&desc);
}

/* A monolithic sparse image: bs->file is the one extent. */
static int vmdk_open_monolithic(BlockDriverState *bs, Error **errp)
{
    BDRVVmdkState *s = bs->opaque;
    VMDK4Header h;
    VmdkExtent *e;
    uint64_t desc_offset, desc_size;
    bool in_footer;
    int ret;

    ret = vmdk_read_sparse_header(bs->file, &h, &in_footer, errp);
    if (ret < 0) {
        return ret;
    }
    if (GUINT32_FROM_LE(h.magic) == VMDK3_MAGIC) {
        VMDK3Header h3;

        memcpy(&h3, &h, sizeof(h3));
        return vmdk_cowd_open_alone(bs, &h3, errp);
    }
    desc_offset = GUINT64_FROM_LE(h.desc_offset);
    desc_size = GUINT64_FROM_LE(h.desc_size);
    if (desc_offset && desc_size) {
        g_autofree char *desc = NULL;

        if (desc_size > VMDK_MAX_DESCRIPTOR / VMDK_SECTOR ||
            desc_offset > (uint64_t)INT64_MAX / VMDK_SECTOR) {
            error_setg(errp, "Embedded descriptor of %" PRIu64 " sectors at "
                       "sector %" PRIu64 " is too large", desc_size,
                       desc_offset);
            return -EFBIG;
        }
        desc = vmdk_read_desc(bs, desc_offset * VMDK_SECTOR,
                              desc_size * VMDK_SECTOR, errp);
        if (!desc) {
            return -EINVAL;
        }
    }
    ret = vmdk_check_geometry(&h, GUINT64_FROM_LE(h.capacity), errp);
    if (ret < 0) {
        return ret;
    }
    e = vmdk_add_extent(s, VMDK_SPARSE, "", GUINT64_FROM_LE(h.capacity),
                        errp);
    if (!e) {
        return -EINVAL;
    }
    e->file = bs->file;
    e->gd_in_footer = in_footer;
    return vmdk_open_sparse(e, &h, errp);
}

/*
 * The create types of a descriptor file that QEMU opens (case counts):
 * the sparse ones that embed their descriptor, VMware's thin and device
 * types and raw device maps (vmfsRaw, vmfsRDM, vmfsRawDeviceMap,
 * vmfsPassthroughRawDeviceMap) it refuses.
 */
static bool vmdk_known_create_type(const char *type)
{
    static const char *const known[] = {
        "monolithicFlat", "twoGbMaxExtentFlat", "twoGbMaxExtentSparse",
        "vmfs", "vmfsSparse", "seSparse",
    };

    for (size_t i = 0; i < G_N_ELEMENTS(known); i++) {
        if (!strcmp(type, known[i])) {
            return true;
        }
    }
    return false;
}

static int vmdk_open_descriptor(BlockDriverState *bs, QDict *options,
                                bool head_is_descriptor, Error **errp)
{
    BDRVVmdkState *s = bs->opaque;
    int64_t size = bdrv_getlength(bs->file->bs);
    g_autofree char *desc = NULL;

    if (size < 0) {
        error_setg_errno(errp, -size, "Could not get the descriptor's size");
        return size;
    }
    if (size > VMDK_MAX_DESCRIPTOR && head_is_descriptor) {
        error_setg(errp, "Descriptor file of %" PRId64 " bytes is larger "
                   "than %d", size, VMDK_MAX_DESCRIPTOR);
        return -EFBIG;
    }
    /* any other file is read as QEMU reads it: its first MiB as text */
    desc = vmdk_read_desc(bs, 0, MIN(size, VMDK_MAX_DESCRIPTOR), errp);
    if (!desc) {
        return -EINVAL;
    }
    if (!s->create_type) {
        /* QEMU's message: the file may be no descriptor at all */
        error_setg(errp, "invalid VMDK image descriptor");
        return -EINVAL;
    }
    if (!vmdk_known_create_type(s->create_type)) {
        error_setg(errp, "Unsupported image type '%s'", s->create_type);
        return -ENOTSUP;
    }
    return vmdk_open_desc_extents(bs, desc, options, errp);
}

/*
 * An extent's file, @name relative to the descriptor's directory.  As in
 * QEMU, a descriptor known only by a json: name (over quorum, say) has no
 * directory.
 */
static char *vmdk_extent_path(BlockDriverState *bs, const char *name,
                              Error **errp)
{
    BlockDriverState *dir = bs->file->bs;
    Error *local_err = NULL;
    char *path = bdrv_get_full_backing_filename(dir, name, &local_err);

    if (path) {
        return path;
    }
    while (g_str_has_prefix(dir->filename, "json:") && dir->file) {
        dir = dir->file->bs;
    }
    error_free(local_err);
    error_setg(errp, "Cannot use relative paths with VMDK descriptor file "
               "'%s': Cannot generate a base directory for %s nodes",
               bs->file->bs->filename,
               dir->drv ? dir->drv->format_name : "unknown");
    return NULL;
}

/* One extent line: ACCESS SECTORS TYPE ["FILE" [OFFSET]]. */
static int vmdk_open_desc_extent(BlockDriverState *bs, const char *line,
                                 QDict *options, Error **errp)
{
    BDRVVmdkState *s = bs->opaque;
    char access[16], type[16], name[1024] = "";
    uint64_t sectors, offset = 0;
    VmdkExtentType t;
    VmdkExtent *e;
    int n = sscanf(line, "%15s %" SCNu64 " %15s \"%1023[^\"]\" %" SCNu64,
                   access, &sectors, type, name, &offset);

    if (n < 3) {
        error_setg(errp, "Invalid extent line: %s", line);
        return -EINVAL;
    }
    if (!strcmp(type, "FLAT") || !strcmp(type, "VMFS")) {
        t = VMDK_FLAT;
    } else if (!strcmp(type, "SPARSE") || !strcmp(type, "VMFSSPARSE")) {
        t = VMDK_SPARSE;
    } else if (!strcmp(type, "ZERO")) {
        t = VMDK_ZERO;
    } else {
        error_setg(errp, "Unsupported extent type '%s'", type);
        return -ENOTSUP;
    }
    if (t != VMDK_ZERO && n < 4) {
        error_setg(errp, "Extent line names no file: %s", line);
        return -EINVAL;
    }
    /* as QEMU: a FLAT extent gives its offset, VMFS and the sparse none */
    if ((!strcmp(type, "FLAT") && n != 5) ||
        ((!strcmp(type, "VMFS") || t == VMDK_SPARSE) && n != 4)) {
        error_setg(errp, "Invalid extent line: %s", line);
        return -EINVAL;
    }
    if (t == VMDK_FLAT && offset > (uint64_t)INT64_MAX / VMDK_SECTOR) {
        error_setg(errp, "Invalid extent offset %" PRIu64, offset);
        return -EINVAL;
    }
    e = vmdk_add_extent(s, t, type, sectors, errp);
    if (!e) {
        return -EINVAL;
    }
    if (t == VMDK_ZERO) {
        return 0;
    }
    e->flat_offset = offset * VMDK_SECTOR;
    {
        g_autofree char *path = vmdk_extent_path(bs, name, errp);
        g_autofree char *key = g_strdup_printf("extents.%u",
                                               s->nextents - 1);

        if (!path) {
            return -EINVAL;
        }
        e->file = bdrv_open_child(path, options, key, bs, 0, errp);
        if (!e->file) {
            return -EINVAL;
        }
        e->own_file = true;
    }
    if (t == VMDK_SPARSE) {
        VMDK4Header h;
        VMDK3Header h3;
        int ret = vmdk_read_sparse_header(e->file, &h, &e->gd_in_footer,
                                          errp);

        if (ret < 0) {
            return ret;
        }
        /* as QEMU: the header's magic, not the line, says which */
        if (GUINT32_FROM_LE(h.magic) == VMDK4_MAGIC) {
            ret = vmdk_resize_last_extent(e, GUINT64_FROM_LE(h.capacity),
                                          errp);
            return ret < 0 ? ret : vmdk_open_sparse(e, &h, errp);
        }
        memcpy(&h3, &h, sizeof(h3));
        ret = vmdk_resize_last_extent(e, GUINT32_FROM_LE(h3.num_sectors),
                                      errp);
        return ret < 0 ? ret : vmdk_cowd_open(e, &h3, errp);
    }
    return 0;
}

static int vmdk_open_desc_extents(BlockDriverState *bs, const char *desc,
                                  QDict *options, Error **errp)
{
    BDRVVmdkState *s = bs->opaque;
    g_auto(GStrv) lines = g_strsplit(desc, "\n", -1);

    for (char **l = lines; *l; l++) {
        char *line = g_strstrip(*l);
        int ret;

        if (!g_str_has_prefix(line, "RW ") &&
            !g_str_has_prefix(line, "RDONLY ") &&
            !g_str_has_prefix(line, "NOACCESS ")) {
            continue;
        }
        ret = vmdk_open_desc_extent(bs, line, options, errp);
        if (ret < 0) {
            return ret;
        }
    }
    if (!s->nextents) {
        error_setg(errp, "The descriptor lists no extent");
        return -EINVAL;
    }
    return 0;
}

static void vmdk_close(BlockDriverState *bs)
{
    BDRVVmdkState *s = bs->opaque;

    vmdk_close_writable(s);

    for (unsigned int i = 0; i < s->nextents; i++) {
        g_free(s->extents[i].type_name);
        g_free(s->extents[i].gd);
        g_free(s->extents[i].rgd);
        g_free(s->extents[i].gt);
    }
    g_clear_pointer(&s->extents, g_free);
    s->nextents = 0;
    g_clear_pointer(&s->create_type, g_free);
    g_clear_pointer(&s->desc, g_free);
}

static int vmdk_open(BlockDriverState *bs, QDict *options, int flags,
                     Error **errp)
{
    BDRVVmdkState *s = bs->opaque;
    char head[64] = "";
    uint32_t magic;
    int64_t size;
    int ret;

    qemu_co_mutex_init(&s->cid_lock);
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    size = bdrv_getlength(bs->file->bs);
    if (size < 0) {
        error_setg_errno(errp, -size, "Could not get the image's size");
        return size;
    }
    ret = bdrv_pread(bs->file, 0, MIN((int64_t)sizeof(head) - 1, size), head,
                     0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VMDK header");
        return ret;
    }
    /* as QEMU: a file without a sparse extent's magic is a descriptor */
    memcpy(&magic, head, sizeof(magic));
    magic = GUINT32_FROM_LE(magic);
    if (magic == VMDK4_MAGIC || magic == VMDK3_MAGIC) {
        ret = vmdk_open_monolithic(bs, errp);
    } else {
        ret = vmdk_open_descriptor(bs, options,
                                   vmdk_is_descriptor(head, strlen(head)),
                                   errp);
    }
    if (ret < 0) {
        vmdk_close(bs);
        return ret;
    }
    s->sectors = s->extents[s->nextents - 1].end_sector;
    if (flags & BDRV_O_RDWR) {
        Error *local_err = NULL;

        /* invariant 3 */
        ret = vmdk_check_writable(s, &local_err);
        if (ret == -EACCES && (flags & BDRV_O_AUTO_RDONLY)) {
            error_free(local_err);
            bs->read_only = true;
            bs->open_flags &= ~BDRV_O_RDWR;
        } else if (ret < 0) {
            error_propagate(errp, local_err);
            vmdk_close(bs);
            return ret;
        }
    }
    return 0;
}

/* ---- reading ---- */

/*
 * As QEMU: a delta is read through to its parent only while the parent
 * has the CID the delta was made on (parentCID); a parent written since
 * (its CID changed) no longer holds what the delta's holes stood for, so
 * such a read (or a write that copies from it) fails with EINVAL.  A
 * parent of another format is not checked.
 */
int vmdk_check_parent_cid(BlockDriverState *bs)
{
    BDRVVmdkState *s = bs->opaque;
    BlockDriverState *parent = bs->backing->bs;
    BDRVVmdkState *ps;

    if (!parent->drv || parent->drv != bs->drv) {
        return 0;
    }
    ps = parent->opaque;
    if (ps->cid == s->parent_cid) {
        return 0;
    }
    if (!s->parent_cid_reported) {
        s->parent_cid_reported = true;
        error_report("vmdk: '%s' was made on a parent of CID %" PRIx32 ", "
                     "but '%s' has CID %" PRIx32 " (it changed since)",
                     bs->filename, s->parent_cid, parent->filename, ps->cid);
    }
    return -EINVAL;
}

/* The extent that holds disk sector @sector (invariant 1). */
static VmdkExtent *vmdk_find_extent(BDRVVmdkState *s, uint64_t sector,
                                    uint64_t *start)
{
    uint64_t begin = 0;

    for (unsigned int i = 0; i < s->nextents; i++) {
        if (sector < s->extents[i].end_sector) {
            *start = begin;
            return &s->extents[i];
        }
        begin = s->extents[i].end_sector;
    }
    g_assert_not_reached();
}

/*
 * Where @bytes at disk offset @offset are, *@m: at most to the end of a
 * grain or of the extent.  Returns the bytes it speaks for, < 0 on error.
 */
int64_t coroutine_fn vmdk_map(BDRVVmdkState *s, int64_t offset,
                              int64_t bytes, VmdkMap *m)
{
    uint64_t start;
    VmdkExtent *e = vmdk_find_extent(s, offset / VMDK_SECTOR, &start);
    uint64_t in_extent = offset - start * VMDK_SECTOR;
    uint64_t end = e->sectors * VMDK_SECTOR - in_extent;
    uint64_t grain_bytes, in_grain;
    int64_t at;

    *m = (VmdkMap) { .e = e, .extent_start = start };
    switch (e->type) {
    case VMDK_ZERO:
        m->kind = VMDK_MAP_ZERO;
        return MIN(bytes, end);
    case VMDK_FLAT:
        m->kind = VMDK_MAP_DATA;
        m->offset = e->flat_offset + in_extent;
        return MIN(bytes, end);
    default:
        break;
    }
    grain_bytes = e->grain_sectors * VMDK_SECTOR;
    /* invariant 1: an ESX extent's directory may end before the extent */
    if (in_extent / grain_bytes / e->gtes >= e->gd_entries) {
        m->kind = VMDK_MAP_BEYOND_GD;
        return MIN(bytes, end);
    }
    in_grain = in_extent % grain_bytes;
    bytes = MIN(MIN(bytes, end), grain_bytes - in_grain);
    m->grain_sector = (in_extent - in_grain) / VMDK_SECTOR;
    m->in_grain = in_grain;
    at = vmdk_grain(e, in_extent / VMDK_SECTOR);
    if (at < 0) {
        return at;
    }
    if (at == 0) {
        m->kind = VMDK_MAP_UNALLOCATED;
    } else if (vmdk_is_zeroed(e, at)) {
        m->kind = VMDK_MAP_ZERO;
    } else if (e->compressed) {
        m->kind = VMDK_MAP_COMPRESSED;
        m->offset = at;
    } else {
        m->kind = VMDK_MAP_DATA;
        /* invariant 1: a 32-bit sector plus a grain fits in 64 bits */
        m->offset = at * VMDK_SECTOR + in_grain;
    }
    return bytes;
}

/* One piece of a read: what of the request one map entry covers. */
static int64_t coroutine_fn vmdk_read_piece(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov, size_t done,
                                            void *opaque)
{
    BDRVVmdkState *s = bs->opaque;
    VmdkMap m;
    int64_t n = vmdk_map(s, offset, bytes, &m);
    int ret = 0;

    if (n < 0) {
        return n;
    }
    switch (m.kind) {
    case VMDK_MAP_BEYOND_GD:
        /* as QEMU: no table, so nothing of the extent's own */
    case VMDK_MAP_UNALLOCATED:
        if (bs->backing) {
            ret = vmdk_check_parent_cid(bs);
            if (ret == 0) {
                ret = bdrv_co_read_backing(bs, offset, n, qiov, done);
            }
            break;
        }
        /* fall through */
    case VMDK_MAP_ZERO:
        qemu_iovec_memset(qiov, done, 0, n);
        break;
    case VMDK_MAP_COMPRESSED:
        ret = vmdk_read_compressed(m.e, m.offset, m.grain_sector,
                                   m.in_grain, n, qiov, done);
        break;
    case VMDK_MAP_DATA:
        BLKDBG_EVENT(m.e->file, BLKDBG_READ_AIO);
        ret = vmdk_co_file_io(m.e->file, m.offset, n, qiov, done, false);
        break;
    }
    return ret < 0 ? ret : n;
}

static int coroutine_fn vmdk_co_preadv(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags)
{
    return bdrv_co_each_piece(bs, offset, bytes, qiov, vmdk_read_piece, NULL);
}

static int coroutine_fn vmdk_co_block_status(BlockDriverState *bs,
                                             bool want_zero, int64_t offset,
                                             int64_t bytes, int64_t *pnum,
                                             int64_t *map,
                                             BlockDriverState **file)
{
    VmdkMap m;
    int64_t n = vmdk_map(bs->opaque, offset, bytes, &m);

    if (n < 0) {
        return n;
    }
    *pnum = n;
    switch (m.kind) {
    case VMDK_MAP_BEYOND_GD:
        /* as QEMU: "Could not read file metadata" */
        return -EIO;
    case VMDK_MAP_UNALLOCATED:
        return 0;
    case VMDK_MAP_ZERO:
        return BDRV_BLOCK_ZERO;
    case VMDK_MAP_COMPRESSED:
        return BDRV_BLOCK_DATA;
    default:
        *map = m.offset;
        *file = m.e->file->bs;
        /* a flat extent's holes are the file's: ask it, as QEMU does */
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID |
               (m.e->type == VMDK_FLAT ? BDRV_BLOCK_RECURSE : 0);
    }
}

/*
 * As QEMU's check: every grain the tables point to (a compressed grain's
 * marker included) starts inside its extent's file; the first that does
 * not is reported and ends the walk.
 */
static int coroutine_fn vmdk_co_check(BlockDriverState *bs,
                                      BdrvCheckResult *result,
                                      BdrvCheckMode fix)
{
    BDRVVmdkState *s = bs->opaque;
    int64_t offset = 0, end = s->sectors * VMDK_SECTOR;

    while (offset < end) {
        VmdkMap m;
        int64_t n = vmdk_map(s, offset, end - offset, &m);
        int64_t file_len;
        uint64_t at;

        if (n < 0) {
            fprintf(stderr, "ERROR: could not read the grain table for "
                    "sector %" PRId64 ": %s\n", offset / VMDK_SECTOR,
                    strerror(-n));
            result->check_errors++;
            return 0;
        }
        if (m.kind == VMDK_MAP_BEYOND_GD) {
            /*
             * QEMU's message, and its failure: "Check failed: Operation
             * not permitted" (its lookup's -1 taken for an errno)
             */
            fprintf(stderr, "ERROR: could not get cluster_offset for "
                    "sector %" PRId64 "\n", offset / VMDK_SECTOR);
            return -EPERM;
        }
        if (m.kind == VMDK_MAP_DATA || m.kind == VMDK_MAP_COMPRESSED) {
            at = m.kind == VMDK_MAP_DATA ? m.offset
                                         : m.offset * VMDK_SECTOR;
            file_len = bdrv_getlength(m.e->file->bs);
            if (file_len >= 0 && at >= (uint64_t)file_len) {
                fprintf(stderr, "ERROR: cluster offset for sector %" PRId64
                        " points after EOF\n", offset / VMDK_SECTOR);
                result->corruptions++;
                return 0;
            }
        }
        offset += n;
    }
    return 0;
}

static int64_t vmdk_getlength(BlockDriverState *bs)
{
    BDRVVmdkState *s = bs->opaque;

    return s->sectors * VMDK_SECTOR;
}

static int vmdk_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    BDRVVmdkState *s = bs->opaque;

    /* as QEMU: the first extent's grain */
    if (s->extents[0].type == VMDK_SPARSE) {
        bdi->cluster_size = s->extents[0].grain_sectors * VMDK_SECTOR;
        bdi->needs_compressed_writes = s->extents[0].compressed;
    }
    return 0;
}

/* QEMU's ImageInfoSpecificVmdk, members in its order. */
static JsonNode *vmdk_get_specific_info(BlockDriverState *bs)
{
    BDRVVmdkState *s = bs->opaque;
    g_autoptr(JsonObject) info = json_object_new();
    JsonObject *data = json_object_new();
    JsonArray *extents = json_array_new();

    json_object_set_int_member(data, "cid", s->cid);
    json_object_set_int_member(data, "parent-cid", s->parent_cid);
    json_object_set_string_member(data, "create-type",
                                  s->create_type ? s->create_type : "");
    for (unsigned int i = 0; i < s->nextents; i++) {
        VmdkExtent *e = &s->extents[i];
        JsonObject *x = json_object_new();

        if (e->compressed) {
            json_object_set_boolean_member(x, "compressed", true);
        }
        json_object_set_int_member(x, "virtual-size",
                                   e->sectors * VMDK_SECTOR);
        if (e->file) {
            json_object_set_string_member(x, "filename",
                                          e->file->bs->filename);
        }
        if (e->type == VMDK_SPARSE) {
            json_object_set_int_member(x, "cluster-size",
                                       e->grain_sectors * VMDK_SECTOR);
        }
        json_object_set_string_member(x, "format", e->type_name);
        json_array_add_object_element(extents, x);
    }
    json_object_set_array_member(data, "extents", extents);
    json_object_set_string_member(info, "type", "vmdk");
    json_object_set_object_member(info, "data", data);
    return json_node_init_object(json_node_alloc(), info);
}

/* Invariant 3 for a node made writable; a node made read-only is closed
 * for writing as at close. */
static int vmdk_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    if (state->flags & BDRV_O_RDWR) {
        return vmdk_check_writable(state->bs->opaque, errp);
    }
    return 0;
}

static void vmdk_reopen_commit(BDRVReopenState *state)
{
    if (!(state->flags & BDRV_O_RDWR)) {
        vmdk_close_writable(state->bs->opaque);
    }
}

static const BlockDriver bdrv_vmdk = {
    .format_name                    = "vmdk",
    .instance_size                  = sizeof(BDRVVmdkState),
    .is_format                      = true,
    .supports_backing               = true,
    .bdrv_probe                     = vmdk_probe,
    .bdrv_open                      = vmdk_open,
    .bdrv_close                     = vmdk_close,
    .bdrv_reopen_prepare            = vmdk_reopen_prepare,
    .bdrv_reopen_commit             = vmdk_reopen_commit,
    .bdrv_co_preadv                 = vmdk_co_preadv,
    .bdrv_co_pwritev                = vmdk_co_pwritev,
    .bdrv_co_pwritev_compressed     = vmdk_co_pwritev_compressed,
    .bdrv_co_pwrite_zeroes          = vmdk_co_pwrite_zeroes,
    .bdrv_has_zero_init             = vmdk_has_zero_init,
    .create_opts                    = &qapi_opts_vmdk_create,
    .bdrv_co_create_opts            = vmdk_co_create_opts,
    .bdrv_co_create_on_node         = vmdk_co_create_on_node,
    .bdrv_co_block_status           = vmdk_co_block_status,
    .bdrv_co_check                  = vmdk_co_check,
    .bdrv_getlength                 = vmdk_getlength,
    .bdrv_get_info                  = vmdk_get_info,
    .bdrv_get_specific_info         = vmdk_get_specific_info,
    .request_alignment              = VMDK_SECTOR,
};

block_init(bdrv_register, bdrv_vmdk)
