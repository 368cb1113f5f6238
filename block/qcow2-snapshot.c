/*
 * qcow2 internal snapshots: the snapshot table, and creating, applying,
 * deleting, listing and temporarily loading snapshots.
 *
 * A snapshot is an entry of the snapshot table that names a copy of the
 * L1 table.  The copy shares L2 tables and data clusters with the active
 * L1 table: every L1 table that reaches a cluster (through an L2 table,
 * shared or not) counts one reference to it, as QEMU counts them and as
 * the refcount check recounts them.  A cluster with more than one
 * reference loses OFLAG_COPIED in the active tables (qcow2.h inv. 3),
 * so that the active image copies it before it changes it.
 *
 * The table on disk: entries one after another, each padded to 8 bytes:
 *   0  l1_table_offset (8)     16 date_sec (4), date_nsec (4)
 *   8  l1_size (4)             24 vm_clock_nsec (8)
 *   12 id_str_size (2)         32 vm_state_size (4, 0 if it needs more)
 *   14 name_size (2)           36 extra_data_size (4)
 *   40 extra data: vm_state_size_large (8), disk_size (8), icount (8),
 *      then whatever a newer writer added; then the ID, then the name
 *      (neither NUL-terminated).
 *
 * Invariants, cited as "qcow2-snapshot.c inv. N" (qcow2.h's apply;
 * everything runs under s->lock with the node drained, so no allocation
 * is in flight):
 *  1. s->snapshots mirrors the table at s->snapshots_offset.
 *  2. The table is written only by qcow2_write_snapshots(), always to
 *      fresh clusters; the header switches to it once it is on disk, and
 *      the old table is freed after that.
 *  3. A table entry names an L1 table only once that table and the
 *      reference increments of everything it reaches are on disk
 *      (create); a snapshot leaves the table before its references are
 *      dropped (delete).  A crash between leaves leaked clusters only.
 *  4. goto makes the header's L1 table the snapshot's copy only once the
 *      references that copy adds are on disk; it drops the old table's
 *      references after that.
 *  5. After every operation OFLAG_COPIED in the active tables is right
 *      again (qcow2_snapshot_fix_copied) and caches and files are flushed.
 */
#include "block/qcow2.h"

#include "util/cutils.h"

/* The fixed part of a snapshot table entry. */
typedef struct QEMU_PACKED QCowSnapshotHeader {
    uint64_t l1_table_offset;
    uint32_t l1_size;
    uint16_t id_str_size;
    uint16_t name_size;
    uint32_t date_sec;
    uint32_t date_nsec;
    uint64_t vm_clock_nsec;
    uint32_t vm_state_size;
    uint32_t extra_data_size;
} QCowSnapshotHeader;
_Static_assert(sizeof(QCowSnapshotHeader) == 40, "snapshot entry header");

/* The extra data this driver knows (QEMU 5.0 and later write it all). */
typedef struct QEMU_PACKED QCowSnapshotExtraData {
    uint64_t vm_state_size_large;
    uint64_t disk_size;
    uint64_t icount;
} QCowSnapshotExtraData;
_Static_assert(sizeof(QCowSnapshotExtraData) == 24, "snapshot extra data");

/*
 * A flaw of a snapshot table entry that the table in memory already
 * repairs, and check -r all by rewriting the table: extra data cut to
 * QCOW_MAX_SNAPSHOT_EXTRA_DATA, or (v3) extra data too short to hold the
 * VM state and disk sizes, which v3 requires; or snapshots past the
 * limits (more than QCOW_MAX_SNAPSHOTS, or entries that end past
 * QCOW_MAX_SNAPSHOTS_SIZE), which the table in memory leaves out: only
 * an open for check reads such a table.
 */
typedef enum Qcow2SnapshotFlawKind {
    QCOW2_SNAPSHOT_EXTRA_DROPPED,
    QCOW2_SNAPSHOT_INCOMPLETE,
    QCOW2_SNAPSHOT_TOO_MANY,
    QCOW2_SNAPSHOT_TOO_BIG,
} Qcow2SnapshotFlawKind;

typedef struct Qcow2SnapshotFlaw {
    Qcow2SnapshotFlawKind kind;
    int index;
    /* the extra data size the entry says; for TOO_MANY and TOO_BIG, the
     * number of snapshots left out */
    uint32_t size;
} Qcow2SnapshotFlaw;

static void qcow2_snapshot_add_flaw(BDRVQcow2State *s,
                                    Qcow2SnapshotFlawKind kind, int index,
                                    uint32_t size)
{
    Qcow2SnapshotFlaw f = { .kind = kind, .index = index, .size = size };

    if (!s->snapshot_table_flaws) {
        s->snapshot_table_flaws =
            g_array_new(false, false, sizeof(Qcow2SnapshotFlaw));
    }
    g_array_append_val(s->snapshot_table_flaws, f);
}

/* ---------------------------------------------------------------------- */
/* The table */

void qcow2_free_snapshots(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    for (uint32_t i = 0; s->snapshots && i < s->nb_snapshots; i++) {
        g_free(s->snapshots[i].id_str);
        g_free(s->snapshots[i].name);
        g_free(s->snapshots[i].unknown_extra_data);
    }
    g_clear_pointer(&s->snapshots, g_free);
    if (s->snapshot_table_flaws) {
        g_array_free(s->snapshot_table_flaws, true);
        s->snapshot_table_flaws = NULL;
    }
}

/* Reads @len bytes at *offset into @buf and moves *offset past them. */
static int qcow2_snapshot_pread(BlockDriverState *bs, uint64_t *offset,
                                void *buf, uint64_t len, Error **errp)
{
    int ret = bdrv_pread(bs->file, *offset, len, buf, 0);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to read snapshot table");
        return ret;
    }
    *offset += len;
    return 0;
}

/* Fills @sn from the extra data that the entry has (older writers wrote
 * less of it: the missing fields get the values QEMU gives them). */
static void qcow2_snapshot_apply_extra(BDRVQcow2State *s, QCowSnapshot *sn,
                                       const QCowSnapshotExtraData *extra,
                                       uint32_t extra_size)
{
    if (extra_size >= offsetof(QCowSnapshotExtraData, disk_size)) {
        sn->vm_state_size = GUINT64_FROM_BE(extra->vm_state_size_large);
    }
    sn->disk_size = extra_size >= offsetof(QCowSnapshotExtraData, icount) ?
                    GUINT64_FROM_BE(extra->disk_size) :
                    (uint64_t)s->virtual_size;
    sn->icount = extra_size >= sizeof(*extra) ?
                 GUINT64_FROM_BE(extra->icount) : QEMU_SNAPSHOT_NO_ICOUNT;
}

/*
 * Reads the entry at *offset, rounded up to the 8 bytes an entry starts
 * at, into @sn; *offset moves to its end.  The padding after the last
 * entry is no part of the table, as QEMU reads it (check's sizes agree).
 */
static int qcow2_read_snapshot(BlockDriverState *bs, int index,
                               QCowSnapshot *sn, uint64_t *offset,
                               bool repair, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    QCowSnapshotHeader h;
    QCowSnapshotExtraData extra = { 0 };
    uint32_t extra_size, known;
    uint64_t extra_end;
    int ret;

    *offset = ROUND_UP(*offset, 8);
    ret = qcow2_snapshot_pread(bs, offset, &h, sizeof(h), errp);
    if (ret < 0) {
        return ret;
    }
    sn->l1_table_offset = GUINT64_FROM_BE(h.l1_table_offset);
    sn->l1_size = GUINT32_FROM_BE(h.l1_size);
    sn->vm_state_size = GUINT32_FROM_BE(h.vm_state_size);
    sn->date_sec = GUINT32_FROM_BE(h.date_sec);
    sn->date_nsec = GUINT32_FROM_BE(h.date_nsec);
    sn->vm_clock_nsec = GUINT64_FROM_BE(h.vm_clock_nsec);
    extra_size = GUINT32_FROM_BE(h.extra_data_size);

    known = MIN(extra_size, (uint32_t)sizeof(extra));
    extra_end = *offset + extra_size;
    ret = qcow2_snapshot_pread(bs, offset, &extra, known, errp);
    if (ret < 0) {
        return ret;
    }
    qcow2_snapshot_apply_extra(s, sn, &extra, extra_size);
    if (s->qcow_version >= 3 &&
        extra_size < offsetof(QCowSnapshotExtraData, icount)) {
        /* the sizes it lacks have their defaults now; a rewrite adds them */
        qcow2_snapshot_add_flaw(s, QCOW2_SNAPSHOT_INCOMPLETE, index,
                                extra_size);
    }

    if (extra_size > sizeof(extra)) {
        uint32_t keep = extra_size;

        if (extra_size > QCOW_MAX_SNAPSHOT_EXTRA_DATA) {
            if (!repair) {
                error_setg(errp, "Too much extra metadata in snapshot table "
                           "entry %i", index);
                error_append_hint(errp, "You can force-remove this extra "
                                  "metadata with qemu-img check -r all\n");
                return -EFBIG;
            }
            qcow2_snapshot_add_flaw(s, QCOW2_SNAPSHOT_EXTRA_DROPPED, index,
                                    extra_size);
            keep = QCOW_MAX_SNAPSHOT_EXTRA_DATA;
        }
        sn->unknown_extra_data_size = keep - sizeof(extra);
        sn->unknown_extra_data = g_malloc(sn->unknown_extra_data_size);
        ret = qcow2_snapshot_pread(bs, offset, sn->unknown_extra_data,
                                   sn->unknown_extra_data_size, errp);
        if (ret < 0) {
            return ret;
        }
    }
    *offset = extra_end;

    sn->id_str = g_malloc0(GUINT16_FROM_BE(h.id_str_size) + 1);
    ret = qcow2_snapshot_pread(bs, offset, sn->id_str,
                               GUINT16_FROM_BE(h.id_str_size), errp);
    if (ret < 0) {
        return ret;
    }
    sn->name = g_malloc0(GUINT16_FROM_BE(h.name_size) + 1);
    ret = qcow2_snapshot_pread(bs, offset, sn->name,
                               GUINT16_FROM_BE(h.name_size), errp);
    if (ret < 0) {
        return ret;
    }
    return 0;
}

int qcow2_read_snapshots(BlockDriverState *bs, bool repair, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t offset = s->snapshots_offset;
    /* extra data bytes that the repair cuts from the entries read so far */
    uint64_t cut = 0;
    int ret;

    s->snapshots_size = 0;
    qcow2_overlap_singles_changed(s);
    if (!s->nb_snapshots) {
        return 0;
    }
    if (!s->snapshots_offset) {
        error_setg(errp, "Snapshot table offset invalid");
        return -EINVAL;
    }
    if (s->nb_snapshots > QCOW_MAX_SNAPSHOTS) {
        /* only an open for check gets here (qcow2-header.c) */
        assert(repair);
        qcow2_snapshot_add_flaw(s, QCOW2_SNAPSHOT_TOO_MANY, -1,
                                s->nb_snapshots - QCOW_MAX_SNAPSHOTS);
        s->nb_snapshots = QCOW_MAX_SNAPSHOTS;
    }
    s->snapshots = g_new0(QCowSnapshot, s->nb_snapshots);
    for (uint32_t i = 0; i < s->nb_snapshots; i++) {
        uint64_t start = offset;
        GArray *flaws;

        ret = qcow2_read_snapshot(bs, i, &s->snapshots[i], &offset, repair,
                                  errp);
        if (ret < 0) {
            goto fail;
        }
        /* the read may have made the array */
        flaws = s->snapshot_table_flaws;
        if (flaws && flaws->len) {
            Qcow2SnapshotFlaw *f = &g_array_index(flaws, Qcow2SnapshotFlaw,
                                                  flaws->len - 1);

            if (f->kind == QCOW2_SNAPSHOT_EXTRA_DROPPED && f->index == i) {
                cut += f->size - QCOW_MAX_SNAPSHOT_EXTRA_DATA;
            }
        }
        /*
         * hostile sizes: the table cannot be bigger than QEMU allows; what
         * counts is the table as the repair writes it, without the extra
         * data it cuts (as in QEMU).  The table as it lies on disk, cut
         * data included, must still fit s->snapshots_size (an int): the
         * refcount check counts it and its L1 tables by that size, and a
         * wrapped size hid them, so that check -r all freed what the
         * snapshots it kept still use (QEMU drops such entries too).
         */
        if (offset - s->snapshots_offset - cut > QCOW_MAX_SNAPSHOTS_SIZE ||
            offset - s->snapshots_offset > INT_MAX) {
            if (!repair) {
                error_setg(errp, "Snapshot table is too big");
                error_append_hint(errp, "You can force-remove all %" PRIu32
                                  " overhanging snapshots with qemu-img "
                                  "check -r all\n", s->nb_snapshots - i);
                ret = -EFBIG;
                goto fail;
            }
            /* this one and those after it are left out */
            qcow2_snapshot_add_flaw(s, QCOW2_SNAPSHOT_TOO_BIG, i,
                                    s->nb_snapshots - i);
            g_clear_pointer(&s->snapshots[i].id_str, g_free);
            g_clear_pointer(&s->snapshots[i].name, g_free);
            g_clear_pointer(&s->snapshots[i].unknown_extra_data, g_free);
            /* the table ends with the last entry kept: the rewrite
             * frees that much, what lies past it leaks (check repairs) */
            s->nb_snapshots = i;
            offset = start;
            break;
        }
    }
    s->snapshots_size = offset - s->snapshots_offset;
    qcow2_overlap_singles_changed(s);
    return 0;

fail:
    qcow2_free_snapshots(bs);
    return ret;
}

/*
 * Reports snapshots that the table in memory left out (@f: TOO_MANY or
 * TOO_BIG).  Without -r all that is where check stops, as QEMU's does;
 * with it they are discarded when the table is written, and what only
 * they referenced leaks (the refcount check that follows repairs it).
 */
static int qcow2_check_overhang(const Qcow2SnapshotFlaw *f,
                                BdrvCheckResult *res, BdrvCheckMode fix)
{
    bool too_big = f->kind == QCOW2_SNAPSHOT_TOO_BIG;

    if (fix & BDRV_FIX_ERRORS) {
        fprintf(stderr, "Discarding %" PRIu32 " overhanging snapshots%s\n",
                f->size, too_big ? " (snapshot table is too big)" : "");
        return 0;
    }
    if (too_big) {
        error_report("ERROR failed to read the snapshot table: Snapshot "
                     "table is too big");
    } else {
        error_report("ERROR snapshot table too large");
    }
    fprintf(stderr, "You can force-remove all %" PRIu32 " overhanging "
            "snapshots with qemu-img check -r all\n", f->size);
    res->check_errors++;
    return -EFBIG;
}

static bool qcow2_snapshot_flaw_is_overhang(const Qcow2SnapshotFlaw *f)
{
    return f->kind == QCOW2_SNAPSHOT_TOO_MANY ||
           f->kind == QCOW2_SNAPSHOT_TOO_BIG;
}

/* Corruptions the flaws of the table count for. */
static int64_t qcow2_snapshot_flaws_found(GArray *flaws)
{
    int64_t found = 0;

    for (guint i = 0; i < flaws->len; i++) {
        Qcow2SnapshotFlaw *f = &g_array_index(flaws, Qcow2SnapshotFlaw, i);

        /* each snapshot left out is one corruption, as QEMU counts */
        found += qcow2_snapshot_flaw_is_overhang(f) ? f->size : 1;
    }
    return found;
}

/*
 * check -r all: snapshots left out past the limits are dropped by the
 * header's count alone, as QEMU does: the entries kept are on disk as
 * they were, and the table stays where it is (what lay past it leaks, and
 * the refcount check that follows repairs that).
 */
static int coroutine_fn qcow2_drop_overhang(BlockDriverState *bs,
                                            BdrvCheckResult *res,
                                            GArray *flaws)
{
    BDRVQcow2State *s = bs->opaque;
    uint32_t nb = GUINT32_TO_BE(s->nb_snapshots);
    int64_t dropped = 0;
    int ret;

    for (guint i = flaws->len; i-- > 0;) {
        Qcow2SnapshotFlaw *f = &g_array_index(flaws, Qcow2SnapshotFlaw, i);

        if (qcow2_snapshot_flaw_is_overhang(f)) {
            dropped += f->size;
        }
    }
    if (!dropped) {
        return 0;
    }
    ret = qcow2_header_write(bs, offsetof(QCowHeader, nb_snapshots), &nb,
                             sizeof(nb));
    if (ret < 0) {
        fprintf(stderr, "ERROR failed to update snapshot table: %s\n",
                strerror(-ret));
        res->check_errors++;
        return ret;
    }
    res->corruptions_fixed += dropped;
    for (guint i = flaws->len; i-- > 0;) {
        if (qcow2_snapshot_flaw_is_overhang(
                &g_array_index(flaws, Qcow2SnapshotFlaw, i))) {
            g_array_remove_index(flaws, i);
        }
    }
    return 0;
}

int coroutine_fn qcow2_check_snapshot_table(BlockDriverState *bs,
                                            BdrvCheckResult *res,
                                            BdrvCheckMode fix)
{
    BDRVQcow2State *s = bs->opaque;
    GArray *flaws = s->snapshot_table_flaws;
    int ret;

    if (!flaws || !flaws->len) {
        return 0;
    }
    for (guint i = 0; i < flaws->len; i++) {
        Qcow2SnapshotFlaw *f = &g_array_index(flaws, Qcow2SnapshotFlaw, i);

        if (f->kind == QCOW2_SNAPSHOT_INCOMPLETE) {
            fprintf(stderr, "%s snapshot table entry %i is incomplete\n",
                    fix & BDRV_FIX_ERRORS ? "Repairing" : "ERROR", f->index);
        } else if (f->kind != QCOW2_SNAPSHOT_EXTRA_DROPPED) {
            ret = qcow2_check_overhang(f, res, fix);
            if (ret < 0) {
                return ret;
            }
        } else if (!(fix & BDRV_FIX_ERRORS)) {
            /* only check -r all can open such a table (repair mode) */
            error_report("ERROR failed to read the snapshot table: Too much "
                         "extra metadata in snapshot table entry %i",
                         f->index);
            fprintf(stderr, "You can force-remove this extra metadata with "
                    "qemu-img check -r all\n");
            res->check_errors++;
            return -EFBIG;
        } else {
            fprintf(stderr, "Discarding too much extra metadata in snapshot "
                    "table entry %i (%" PRIu32 " > %u)\n", f->index, f->size,
                    QCOW_MAX_SNAPSHOT_EXTRA_DATA);
        }
    }
    if (!(fix & BDRV_FIX_ERRORS)) {
        res->corruptions += qcow2_snapshot_flaws_found(flaws);
        return 0;
    }
    return qcow2_drop_overhang(bs, res, flaws);
}

int coroutine_fn qcow2_fix_snapshot_table(BlockDriverState *bs,
                                          BdrvCheckResult *res,
                                          BdrvCheckMode fix)
{
    BDRVQcow2State *s = bs->opaque;
    GArray *flaws = s->snapshot_table_flaws;
    int ret;

    if (!flaws || !flaws->len || !(fix & BDRV_FIX_ERRORS)) {
        return 0;
    }
    ret = qcow2_write_snapshots(bs);
    if (ret < 0) {
        fprintf(stderr, "ERROR failed to update snapshot table: %s\n",
                strerror(-ret));
        res->check_errors++;
        return ret;
    }
    res->corruptions_fixed += qcow2_snapshot_flaws_found(flaws);
    g_array_set_size(flaws, 0);
    return 0;
}

/* Bytes the entry of @sn takes in the table, padding included. */
static size_t qcow2_snapshot_entry_size(const QCowSnapshot *sn)
{
    return ROUND_UP(sizeof(QCowSnapshotHeader) +
                    sizeof(QCowSnapshotExtraData) +
                    sn->unknown_extra_data_size + strlen(sn->id_str) +
                    strlen(sn->name), 8);
}

static void qcow2_snapshot_serialise(const QCowSnapshot *sn, uint8_t *buf)
{
    QCowSnapshotHeader h = { 0 };
    QCowSnapshotExtraData extra = { 0 };
    size_t id_len = strlen(sn->id_str), name_len = strlen(sn->name);
    uint8_t *p = buf;

    h.l1_table_offset = GUINT64_TO_BE(sn->l1_table_offset);
    h.l1_size = GUINT32_TO_BE(sn->l1_size);
    h.id_str_size = GUINT16_TO_BE(id_len);
    h.name_size = GUINT16_TO_BE(name_len);
    h.date_sec = GUINT32_TO_BE(sn->date_sec);
    h.date_nsec = GUINT32_TO_BE(sn->date_nsec);
    h.vm_clock_nsec = GUINT64_TO_BE(sn->vm_clock_nsec);
    /* a state too big for the old field reads as none to old readers,
     * rather than as a truncated one */
    if (sn->vm_state_size <= UINT32_MAX) {
        h.vm_state_size = GUINT32_TO_BE(sn->vm_state_size);
    }
    h.extra_data_size = GUINT32_TO_BE(sizeof(extra) +
                                      sn->unknown_extra_data_size);
    extra.vm_state_size_large = GUINT64_TO_BE(sn->vm_state_size);
    extra.disk_size = GUINT64_TO_BE(sn->disk_size);
    extra.icount = GUINT64_TO_BE(sn->icount);

    memcpy(p, &h, sizeof(h));
    p += sizeof(h);
    memcpy(p, &extra, sizeof(extra));
    p += sizeof(extra);
    if (sn->unknown_extra_data_size) {
        memcpy(p, sn->unknown_extra_data, sn->unknown_extra_data_size);
        p += sn->unknown_extra_data_size;
    }
    memcpy(p, sn->id_str, id_len);
    p += id_len;
    memcpy(p, sn->name, name_len);
}

/* The one place where a snapshot table is written (qcow2-snapshot.c
 * inv. 2). */
static int coroutine_fn qcow2_snapshot_table_pwrite(BlockDriverState *bs,
                                                    int64_t offset,
                                                    const void *buf,
                                                    size_t len)
{
    QEMUIOVector qiov;
    int ret;

    /* a new table at a new place: no structure may be there (QEMU's ign) */
    ret = qcow2_pre_write_overlap_check(bs, 0, offset, len);
    if (ret < 0) {
        return ret;
    }
    qemu_iovec_init_buf(&qiov, (void *)buf, len);
    ret = bdrv_co_pwritev(bs->file, offset, len, &qiov, 0);
    if (ret >= 0) {
        ret = bdrv_co_flush(bs->file->bs);
    }
    return ret < 0 ? ret : 0;
}

/*
 * Frees the clusters of a table that qcow2_write_snapshots() replaced, as
 * qcow2_free_clusters() does (its blkdebug event first, its message on a
 * failure).  A damaged table may say it is longer than the clusters it was
 * given (check -r all reads such a table): a cluster without a reference
 * (-EINVAL: the refcount would go below zero) is not the table's and is
 * left alone, rather than failing the whole free, which would leak the
 * clusters that were the table's.
 */
static void coroutine_fn qcow2_snapshot_free_old_table(BlockDriverState *bs,
                                                       int64_t offset,
                                                       int64_t size)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t end = ROUND_UP(offset + size, (int64_t)s->cluster_size);

    BLKDBG_EVENT(bs->file, BLKDBG_CLUSTER_FREE);
    for (offset = QEMU_ALIGN_DOWN(offset, s->cluster_size); offset < end;
         offset += s->cluster_size) {
        int ret = qcow2_update_refcount_range(bs, offset, s->cluster_size, 1,
                                              true, QCOW2_DISCARD_SNAPSHOT);

        if (ret < 0 && ret != -EINVAL && !bs->corrupt) {
            fprintf(stderr, "qcow2_free_clusters failed: %s\n",
                    strerror(-ret));
            return;
        }
    }
}

int coroutine_fn qcow2_write_snapshots(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t old_offset = s->snapshots_offset;
    int old_size = s->snapshots_size;
    g_autofree uint8_t *buf = NULL;
    size_t size = 0, pos = 0;
    int64_t offset = 0;
    int ret;

    for (uint32_t i = 0; i < s->nb_snapshots; i++) {
        size += qcow2_snapshot_entry_size(&s->snapshots[i]);
    }
    if (size > QCOW_MAX_SNAPSHOTS_SIZE) {
        return -EFBIG;
    }
    if (size) {
        buf = g_try_malloc0(size);
        if (!buf) {
            return -ENOMEM;
        }
        for (uint32_t i = 0; i < s->nb_snapshots; i++) {
            qcow2_snapshot_serialise(&s->snapshots[i], buf + pos);
            pos += qcow2_snapshot_entry_size(&s->snapshots[i]);
        }
        offset = qcow2_alloc_clusters(bs, size);
        if (offset < 0) {
            return offset;
        }
        /* the new clusters' refcounts are on disk before the header
         * names them */
        ret = qcow2_flush_caches(bs);
        if (ret == 0) {
            ret = qcow2_snapshot_table_pwrite(bs, offset, buf, size);
        }
        if (ret < 0) {
            goto fail;
        }
    }

    s->snapshots_offset = offset;
    s->snapshots_size = size;
    qcow2_overlap_singles_changed(s);
    ret = qcow2_update_header(bs);
    if (ret < 0) {
        s->snapshots_offset = old_offset;
        s->snapshots_size = old_size;
        qcow2_overlap_singles_changed(s);
        goto fail;
    }
    if (old_size) {
        qcow2_snapshot_free_old_table(bs, old_offset, old_size);
    }
    /* qcow2.h inv. 7; a failure only leaves the old tables indexed */
    qcow2_overlap_snapshots_changed(bs);
    return 0;

fail:
    if (size) {
        qcow2_free_clusters(bs, offset, size, QCOW2_DISCARD_NEVER);
    }
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Lookups and L1 tables */

/*
 * The index of the snapshot with ID @id and name @name; a NULL one
 * matches any.  -1 if there is none (or both are NULL).
 */
static int qcow2_find_snapshot(BDRVQcow2State *s, const char *id,
                               const char *name)
{
    if (!id && !name) {
        return -1;
    }
    for (uint32_t i = 0; i < s->nb_snapshots; i++) {
        if ((!id || !strcmp(s->snapshots[i].id_str, id)) &&
            (!name || !strcmp(s->snapshots[i].name, name))) {
            return i;
        }
    }
    return -1;
}

static int qcow2_find_snapshot_by_id_or_name(BDRVQcow2State *s,
                                             const char *id_or_name)
{
    int i = qcow2_find_snapshot(s, id_or_name, NULL);

    return i >= 0 ? i : qcow2_find_snapshot(s, NULL, id_or_name);
}

/* The next numeric ID: one more than the largest in use (QEMU's rule). */
static char *qcow2_new_snapshot_id(BDRVQcow2State *s)
{
    uint64_t max = 0;

    for (uint32_t i = 0; i < s->nb_snapshots; i++) {
        uint64_t id = strtoull(s->snapshots[i].id_str, NULL, 10);

        max = MAX(max, id);
    }
    return g_strdup_printf("%" PRIu64, max + 1);
}

int qcow2_snapshot_read_l1(BlockDriverState *bs, const QCowSnapshot *sn,
                           uint64_t **l1, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t bytes = (uint64_t)sn->l1_size * sizeof(uint64_t);
    int ret;

    *l1 = NULL;
    if (bytes > QCOW_MAX_L1_SIZE) {
        error_setg(errp, "Snapshot L1 table too large");
        return -EFBIG;
    }
    if (offset_into_cluster(s, sn->l1_table_offset) ||
        sn->l1_table_offset > INT64_MAX - bytes ||
        (bytes && !sn->l1_table_offset)) {
        error_setg(errp, "Snapshot L1 table offset invalid");
        return -EINVAL;
    }
    *l1 = g_try_malloc0(MAX(bytes, sizeof(uint64_t)));
    if (!*l1) {
        error_setg(errp, "Could not allocate the snapshot L1 table");
        return -ENOMEM;
    }
    if (bytes) {
        ret = bdrv_pread(bs->file, sn->l1_table_offset, bytes, *l1, 0);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to read the snapshot L1 "
                             "table");
            g_clear_pointer(l1, g_free);
            return ret;
        }
    }
    for (uint32_t i = 0; i < sn->l1_size; i++) {
        (*l1)[i] = GUINT64_FROM_BE((*l1)[i]);
    }
    return 0;
}

/* Flushes caches, the image file and an external data file
 * (qcow2-snapshot.c inv. 5). */
static int coroutine_fn qcow2_snapshot_flush(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int ret = qcow2_flush_caches(bs);

    if (ret == 0 && s->data_file != bs->file) {
        ret = bdrv_co_flush(s->data_file->bs);
    }
    return ret;
}

/* ---------------------------------------------------------------------- */
/* References */

/*
 * A walk over what an L1 table reaches that adds @addend (+1/-1) to each
 * reference.  With @budget >= 0 it stops after that many updates: undoing
 * a failed walk replays exactly the updates it made, in the same order.
 */
typedef struct Qcow2RefWalk {
    int addend;
    int64_t budget;
    int64_t done;
} Qcow2RefWalk;

/* Stops a walk whose budget is spent (not an error). */
#define QCOW2_REF_WALK_DONE 1

static int coroutine_fn qcow2_ref_walk_update(BlockDriverState *bs,
                                              Qcow2RefWalk *w,
                                              int64_t offset, int64_t length)
{
    int ret;

    if (w->budget >= 0 && w->done >= w->budget) {
        return QCOW2_REF_WALK_DONE;
    }
    if (w->addend > 0) {
        ret = qcow2_ref_used_range(bs, offset, length);
    } else {
        ret = qcow2_update_refcount_range(bs, offset, length, 1, true,
                                          QCOW2_DISCARD_SNAPSHOT);
    }
    if (ret < 0) {
        return ret;
    }
    w->done++;
    return 0;
}

static int coroutine_fn qcow2_ref_walk_entry(BlockDriverState *bs,
                                             QCow2ClusterType type,
                                             uint64_t *entry, void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2RefWalk *w = opaque;
    uint64_t coffset;
    int csize;

    switch (type) {
    case QCOW2_CLUSTER_COMPRESSED:
        qcow2_parse_compressed_l2_entry(s, *entry, &coffset, &csize);
        return qcow2_ref_walk_update(bs, w, coffset, csize);
    case QCOW2_CLUSTER_NORMAL:
    case QCOW2_CLUSTER_ZERO_ALLOC:
        if (s->data_file != bs->file) {
            /* an external data file has no refcounts */
            return 0;
        }
        return qcow2_ref_walk_update(bs, w, *entry & L2E_OFFSET_MASK,
                                     s->cluster_size);
    default:
        return 0;
    }
}

/* The L2 table offset of an L1 entry, or -EIO if the entry is invalid. */
static int64_t qcow2_snapshot_l2_offset(BlockDriverState *bs,
                                        uint64_t l1_entry, int index)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t l2_offset = l1_entry & L1E_OFFSET_MASK;

    if ((l1_entry & L1E_RESERVED_MASK) || offset_into_cluster(s, l2_offset)) {
        qcow2_signal_corruption(bs, true, -1, -1, "L1 entry %#" PRIx64
                                " is invalid (L1 index: %#x)", l1_entry,
                                index);
        return -EIO;
    }
    return l2_offset;
}

static int coroutine_fn qcow2_ref_walk(BlockDriverState *bs,
                                       const uint64_t *l1, uint32_t l1_size,
                                       Qcow2RefWalk *w)
{
    BDRVQcow2State *s = bs->opaque;
    int ret = 0;

    for (uint32_t i = 0; i < l1_size; i++) {
        int64_t l2_offset = qcow2_snapshot_l2_offset(bs, l1[i], i);

        if (l2_offset <= 0) {
            if (l2_offset < 0) {
                return l2_offset;
            }
            continue;
        }
        ret = qcow2_l2_table_map(bs, l2_offset, qcow2_ref_walk_entry, w);
        if (ret == 0) {
            ret = qcow2_ref_walk_update(bs, w, l2_offset, s->cluster_size);
        }
        if (ret != 0) {
            break;
        }
    }
    return ret == QCOW2_REF_WALK_DONE ? 0 : ret;
}

/*
 * Adds @addend to the reference of every L2 table and cluster that @l1
 * reaches.  All or nothing: a failure undoes the updates made.
 */
static int coroutine_fn qcow2_snapshot_adjust_refs(BlockDriverState *bs,
                                                   const uint64_t *l1,
                                                   uint32_t l1_size,
                                                   int addend)
{
    Qcow2RefWalk w = { .addend = addend, .budget = -1 };
    int ret = qcow2_ref_walk(bs, l1, l1_size, &w);

    if (ret < 0 && w.done) {
        Qcow2RefWalk undo = { .addend = -addend, .budget = w.done };

        /* the same clusters in the same order: it cannot run out */
        qcow2_ref_walk(bs, l1, l1_size, &undo);
    }
    return ret;
}

static int coroutine_fn qcow2_copied_entry(BlockDriverState *bs,
                                           QCow2ClusterType type,
                                           uint64_t *entry, void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t refcount = 1;
    int ret;

    if (type != QCOW2_CLUSTER_NORMAL && type != QCOW2_CLUSTER_ZERO_ALLOC) {
        return 0;
    }
    if (s->data_file == bs->file) {
        ret = qcow2_get_refcount(bs, (*entry & L2E_OFFSET_MASK) >>
                                 s->cluster_bits, &refcount);
        if (ret < 0) {
            return ret;
        }
    }
    *entry = refcount == 1 ? *entry | QCOW_OFLAG_COPIED
                           : *entry & ~QCOW_OFLAG_COPIED;
    return 0;
}

/*
 * Sets OFLAG_COPIED in the active L1 and L2 tables exactly where the
 * refcount is 1 (qcow2.h inv. 3), after references changed.  The L2
 * changes reach the disk after the refcounts (cache dependency); the L1
 * table is written after the refcount cache.
 */
static int coroutine_fn qcow2_snapshot_fix_copied(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    bool l1_changed = false;
    int ret;

    ret = qcow2_cache_set_dependency(bs, s->l2_table_cache,
                                     s->refcount_block_cache);
    if (ret < 0) {
        return ret;
    }
    for (int i = 0; i < s->l1_size; i++) {
        int64_t l2_offset = qcow2_snapshot_l2_offset(bs, s->l1_table[i], i);
        uint64_t refcount, entry;

        if (l2_offset <= 0) {
            if (l2_offset < 0) {
                return l2_offset;
            }
            continue;
        }
        ret = qcow2_l2_table_map(bs, l2_offset, qcow2_copied_entry, NULL);
        if (ret < 0) {
            return ret;
        }
        ret = qcow2_get_refcount(bs, l2_offset >> s->cluster_bits,
                                 &refcount);
        if (ret < 0) {
            return ret;
        }
        entry = refcount == 1 ? s->l1_table[i] | QCOW_OFLAG_COPIED
                              : s->l1_table[i] & ~QCOW_OFLAG_COPIED;
        if (entry != s->l1_table[i]) {
            s->l1_table[i] = entry;
            l1_changed = true;
        }
    }
    if (!l1_changed) {
        return 0;
    }
    ret = qcow2_cache_flush(bs, s->refcount_block_cache);
    if (ret < 0) {
        return ret;
    }
    return qcow2_write_l1_table(bs);
}

/* ---------------------------------------------------------------------- */
/* Operations */

static int coroutine_fn qcow2_snapshot_create_locked(BlockDriverState *bs,
                                                     QEMUSnapshotInfo *info)
{
    BDRVQcow2State *s = bs->opaque;
    QCowSnapshot sn = { 0 };
    QCowSnapshot *list;
    g_autofree uint64_t *l1 = NULL;
    int64_t l1_offset = 0;
    int ret;

    /* the data clusters live in another file and have no refcounts */
    if (s->data_file != bs->file) {
        return -ENOTSUP;
    }
    if (s->nb_snapshots >= QCOW_MAX_SNAPSHOTS) {
        return -EFBIG;
    }
    if (info->id_str[0] && qcow2_find_snapshot(s, info->id_str, NULL) >= 0) {
        return -EEXIST;
    }
    assert(!s->cluster_allocs);

    sn.id_str = info->id_str[0] ? g_strdup(info->id_str)
                                : qcow2_new_snapshot_id(s);
    sn.name = g_strdup(info->name);
    sn.disk_size = s->virtual_size;
    sn.vm_state_size = info->vm_state_size;
    sn.date_sec = info->date_sec;
    sn.date_nsec = info->date_nsec;
    sn.vm_clock_nsec = info->vm_clock_nsec;
    sn.icount = info->icount;
    sn.l1_size = s->l1_size;

    /* qcow2-snapshot.c inv. 3: the VM state and everything the L1 table
     * reaches are on disk */
    ret = qcow2_snapshot_flush(bs);
    if (ret < 0) {
        goto fail;
    }
    if (s->l1_size) {
        l1 = g_try_new(uint64_t, s->l1_size);
        if (!l1) {
            ret = -ENOMEM;
            goto fail;
        }
        /* the tables it points to are shared from now on */
        for (int i = 0; i < s->l1_size; i++) {
            l1[i] = s->l1_table[i] & ~QCOW_OFLAG_COPIED;
        }
        l1_offset = qcow2_alloc_clusters(bs, s->l1_size * sizeof(uint64_t));
        if (l1_offset < 0) {
            ret = l1_offset;
            l1_offset = 0;
            goto fail;
        }
        /* a new table at a new place: no structure may be there */
        ret = qcow2_write_table64(bs, 0, l1_offset, l1, s->l1_size);
        if (ret < 0) {
            goto fail;
        }
    }
    sn.l1_table_offset = l1_offset;

    ret = qcow2_snapshot_adjust_refs(bs, s->l1_table, s->l1_size, 1);
    if (ret < 0) {
        goto fail;
    }
    /* from here on a failure leaks clusters and nothing worse */
    ret = qcow2_cache_flush(bs, s->refcount_block_cache);
    if (ret == 0) {
        ret = qcow2_snapshot_fix_copied(bs);
    }
    if (ret == 0) {
        ret = qcow2_snapshot_flush(bs);
    }
    if (ret < 0) {
        goto out_leak;
    }

    list = g_new(QCowSnapshot, s->nb_snapshots + 1);
    if (s->nb_snapshots) {
        memcpy(list, s->snapshots, s->nb_snapshots * sizeof(*list));
    }
    list[s->nb_snapshots] = sn;
    g_free(s->snapshots);
    s->snapshots = list;
    s->nb_snapshots++;
    ret = qcow2_write_snapshots(bs);
    if (ret < 0) {
        s->nb_snapshots--;
        goto out_leak;
    }
    pstrcpy(info->id_str, sizeof(info->id_str), sn.id_str);

    /*
     * The VM state lives on in the snapshot; left in the active image it
     * would only be copied by the next write there, as QEMU says.
     */
    if (sn.vm_state_size) {
        uint64_t bytes = ROUND_UP(sn.vm_state_size,
                                  (uint64_t)s->cluster_size);

        ret = qcow2_cluster_discard(bs, qcow2_vm_state_offset(s), bytes,
                                    false, QCOW2_DISCARD_REQUEST);
        if (ret < 0) {
            return ret;
        }
    }
    return qcow2_snapshot_flush(bs);

out_leak:
    g_free(sn.id_str);
    g_free(sn.name);
    return ret;

fail:
    if (l1_offset) {
        qcow2_free_clusters(bs, l1_offset, s->l1_size * sizeof(uint64_t),
                            QCOW2_DISCARD_NEVER);
    }
    g_free(sn.id_str);
    g_free(sn.name);
    return ret;
}

/* L1 entries needed for a disk of @size bytes. */
static uint64_t qcow2_snapshot_size_to_l1(BDRVQcow2State *s, uint64_t size)
{
    uint64_t span = (uint64_t)s->cluster_size << s->l2_bits;

    return DIV_ROUND_UP(size, span);
}

static int coroutine_fn qcow2_snapshot_goto_locked(BlockDriverState *bs,
                                                   const char *snapshot_id)
{
    BDRVQcow2State *s = bs->opaque;
    Error *local_err = NULL;
    g_autofree uint64_t *sn_l1 = NULL;
    uint64_t *new_l1, *old_l1;
    QCowSnapshot *sn;
    uint64_t need;
    int index, ret;

    if (s->data_file != bs->file) {
        return -ENOTSUP;
    }
    index = qcow2_find_snapshot_by_id_or_name(s, snapshot_id);
    if (index < 0) {
        return -ENOENT;
    }
    sn = &s->snapshots[index];
    ret = qcow2_snapshot_read_l1(bs, sn, &sn_l1, &local_err);
    if (ret < 0) {
        error_report_err(local_err);
        return ret;
    }
    if (sn->disk_size != (uint64_t)s->virtual_size &&
        (s->qcow_version < 3 || sn->disk_size > INT64_MAX ||
         sn->disk_size % BDRV_SECTOR_SIZE)) {
        error_report("Cannot restore the disk size %" PRIu64 " of snapshot "
                     "'%s'", sn->disk_size, sn->id_str);
        return -ENOTSUP;
    }
    assert(!s->cluster_allocs);

    /* the active table must hold the snapshot's and map its whole disk */
    need = MAX(sn->l1_size, qcow2_snapshot_size_to_l1(s, sn->disk_size));
    if (need > (uint64_t)s->l1_size) {
        ret = qcow2_grow_l1_table(bs, need, true);
        if (ret < 0) {
            return ret;
        }
    }
    ret = qcow2_snapshot_flush(bs);
    if (ret < 0) {
        return ret;
    }

    /* qcow2-snapshot.c inv. 4: the snapshot's references first */
    ret = qcow2_snapshot_adjust_refs(bs, sn_l1, sn->l1_size, 1);
    if (ret < 0) {
        return ret;
    }
    ret = qcow2_flush_caches(bs);
    if (ret < 0) {
        return ret;
    }
    new_l1 = g_try_new0(uint64_t, s->l1_size);
    if (!new_l1) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < sn->l1_size; i++) {
        new_l1[i] = sn_l1[i] & ~QCOW_OFLAG_COPIED;
    }
    old_l1 = s->l1_table;
    s->l1_table = new_l1;
    ret = qcow2_write_l1_table(bs);
    if (ret < 0) {
        /* what the file holds is unknown; the snapshot's references
         * stay counted, which at worst leaks */
        s->l1_table = old_l1;
        g_free(new_l1);
        return ret;
    }
    /* qcow2.h inv. 7: the active L2 tables are the snapshot's now */
    qcow2_overlap_rebuild_active(s);

    /* the old disk's clusters are unreachable from the header now */
    s->cache_discards = true;
    ret = qcow2_snapshot_adjust_refs(bs, old_l1, s->l1_size, -1);
    g_free(old_l1);
    if (ret == 0 && sn->disk_size != (uint64_t)s->virtual_size) {
        int64_t old_size = s->virtual_size;

        s->virtual_size = sn->disk_size;
        ret = qcow2_update_header(bs);
        if (ret < 0) {
            s->virtual_size = old_size;
        }
    }
    if (ret == 0) {
        ret = qcow2_snapshot_fix_copied(bs);
    }
    s->cache_discards = false;
    qcow2_process_discards(bs, ret);
    if (ret < 0) {
        return ret;
    }
    return qcow2_snapshot_flush(bs);
}

static int coroutine_fn qcow2_snapshot_delete_locked(BlockDriverState *bs,
                                                     const char *snapshot_id,
                                                     const char *name,
                                                     Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint64_t *sn_l1 = NULL;
    QCowSnapshot sn;
    int index, ret;

    index = qcow2_find_snapshot(s, snapshot_id, name);
    if (index < 0) {
        error_setg(errp, "Can't find the snapshot");
        return -ENOENT;
    }
    sn = s->snapshots[index];
    ret = qcow2_snapshot_read_l1(bs, &sn, &sn_l1, errp);
    if (ret < 0) {
        return ret;
    }
    assert(!s->cluster_allocs);

    /* qcow2-snapshot.c inv. 3: out of the table first */
    memmove(&s->snapshots[index], &s->snapshots[index + 1],
            (s->nb_snapshots - index - 1) * sizeof(sn));
    s->nb_snapshots--;
    ret = qcow2_write_snapshots(bs);
    if (ret < 0) {
        memmove(&s->snapshots[index + 1], &s->snapshots[index],
                (s->nb_snapshots - index) * sizeof(sn));
        s->snapshots[index] = sn;
        s->nb_snapshots++;
        error_setg_errno(errp, -ret, "Failed to remove snapshot from "
                         "snapshot list");
        return ret;
    }
    g_free(sn.id_str);
    g_free(sn.name);
    g_free(sn.unknown_extra_data);

    s->cache_discards = true;
    ret = qcow2_snapshot_adjust_refs(bs, sn_l1, sn.l1_size, -1);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to free the cluster and L1 "
                         "table");
        goto out;
    }
    if (sn.l1_size) {
        qcow2_free_clusters(bs, sn.l1_table_offset,
                            sn.l1_size * sizeof(uint64_t),
                            QCOW2_DISCARD_SNAPSHOT);
    }
    ret = qcow2_snapshot_fix_copied(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to update snapshot status in "
                         "disk");
        goto out;
    }
    ret = qcow2_snapshot_flush(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to flush the image");
    }
out:
    s->cache_discards = false;
    qcow2_process_discards(bs, ret);
    return ret;
}

static int coroutine_fn qcow2_snapshot_load_tmp_locked(BlockDriverState *bs,
                                                       const char *id,
                                                       const char *name,
                                                       Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t *l1;
    int index, ret;

    index = qcow2_find_snapshot(s, id, name);
    if (index < 0) {
        error_setg(errp, "Can't find snapshot");
        return -ENOENT;
    }
    ret = qcow2_snapshot_read_l1(bs, &s->snapshots[index], &l1, errp);
    if (ret < 0) {
        return ret;
    }
    g_free(s->l1_table);
    s->l1_table = l1;
    s->l1_size = s->snapshots[index].l1_size;
    s->l1_table_offset = s->snapshots[index].l1_table_offset;
    qcow2_overlap_singles_changed(s);
    qcow2_overlap_rebuild_active(s);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Driver callbacks: each runs its _locked part in a coroutine */

typedef struct Qcow2SnapshotCall {
    QEMUSnapshotInfo *info;
    const char *id;
    const char *name;
    Error **errp;
    int op;
} Qcow2SnapshotCall;

enum {
    QCOW2_SNAPSHOT_CREATE,
    QCOW2_SNAPSHOT_GOTO,
    QCOW2_SNAPSHOT_DELETE,
    QCOW2_SNAPSHOT_LOAD_TMP,
};

static int coroutine_fn qcow2_snapshot_co(BlockDriverState *bs, void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2SnapshotCall *c = opaque;
    int ret = -EINVAL;

    qemu_co_mutex_lock(&s->lock);
    qcow2_overlap_begin_shared_l2_writes(bs);
    switch (c->op) {
    case QCOW2_SNAPSHOT_CREATE:
        ret = qcow2_snapshot_create_locked(bs, c->info);
        break;
    case QCOW2_SNAPSHOT_GOTO:
        ret = qcow2_snapshot_goto_locked(bs, c->id);
        break;
    case QCOW2_SNAPSHOT_DELETE:
        ret = qcow2_snapshot_delete_locked(bs, c->id, c->name, c->errp);
        break;
    case QCOW2_SNAPSHOT_LOAD_TMP:
        ret = qcow2_snapshot_load_tmp_locked(bs, c->id, c->name, c->errp);
        break;
    }
    qcow2_overlap_end_shared_l2_writes(bs);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/*
 * Runs @c in a coroutine.  Those that write refuse an image marked
 * corrupt (qcow2.h inv. 6), with a message where the caller takes one;
 * loading a snapshot's L1 table for reading does not write.
 */
static int qcow2_snapshot_call(BlockDriverState *bs, Qcow2SnapshotCall *c)
{
    if (bs->corrupt && c->op != QCOW2_SNAPSHOT_LOAD_TMP) {
        error_setg(c->errp, "Image is corrupt");
        return -EIO;
    }
    return bdrv_run_co(bs, qcow2_snapshot_co, c);
}

int qcow2_snapshot_create(BlockDriverState *bs, QEMUSnapshotInfo *sn_info)
{
    Qcow2SnapshotCall c = { .op = QCOW2_SNAPSHOT_CREATE, .info = sn_info };

    return qcow2_snapshot_call(bs, &c);
}

int qcow2_snapshot_goto(BlockDriverState *bs, const char *snapshot_id)
{
    Qcow2SnapshotCall c = { .op = QCOW2_SNAPSHOT_GOTO, .id = snapshot_id };

    return qcow2_snapshot_call(bs, &c);
}

int qcow2_snapshot_delete(BlockDriverState *bs, const char *snapshot_id,
                          const char *name, Error **errp)
{
    Qcow2SnapshotCall c = {
        .op = QCOW2_SNAPSHOT_DELETE, .id = snapshot_id, .name = name,
        .errp = errp,
    };

    return qcow2_snapshot_call(bs, &c);
}

int qcow2_snapshot_load_tmp(BlockDriverState *bs, const char *snapshot_id,
                            const char *name, Error **errp)
{
    Qcow2SnapshotCall c = {
        .op = QCOW2_SNAPSHOT_LOAD_TMP, .id = snapshot_id, .name = name,
        .errp = errp,
    };

    return qcow2_snapshot_call(bs, &c);
}

int qcow2_snapshot_list(BlockDriverState *bs, QEMUSnapshotInfo **psn_tab)
{
    BDRVQcow2State *s = bs->opaque;
    QEMUSnapshotInfo *tab;

    if (!s->nb_snapshots) {
        *psn_tab = NULL;
        return 0;
    }
    tab = g_new0(QEMUSnapshotInfo, s->nb_snapshots);
    for (uint32_t i = 0; i < s->nb_snapshots; i++) {
        const QCowSnapshot *sn = &s->snapshots[i];

        pstrcpy(tab[i].id_str, sizeof(tab[i].id_str), sn->id_str);
        pstrcpy(tab[i].name, sizeof(tab[i].name), sn->name);
        tab[i].vm_state_size = sn->vm_state_size;
        tab[i].date_sec = sn->date_sec;
        tab[i].date_nsec = sn->date_nsec;
        tab[i].vm_clock_nsec = sn->vm_clock_nsec;
        tab[i].icount = sn->icount;
    }
    *psn_tab = tab;
    return s->nb_snapshots;
}
