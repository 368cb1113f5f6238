/*
 * qcow2 metadata overlap checks.
 *
 * Before qcow2 writes to its file, qcow2_pre_write_overlap_check() asks
 * whether the target range overlaps a metadata structure that the write is
 * not meant to update.  A hit means the metadata is already inconsistent
 * (two structures claim one cluster): the write is refused with EIO, the
 * image is marked corrupt and nothing more is damaged.
 *
 * Which structures are checked is s->overlap_check, a mask of QCOW2_OL_*
 * set from a template (none, constant, cached, all) and per-structure
 * overrides; see qcow2_overlap_read_options().
 *
 * Cost.  The structures that are sets of clusters, which can be many
 * (active L2 tables, refcount blocks, the L1 tables of snapshots and their
 * L2 tables), live in one index, a hash table from host cluster index to
 * four reference counts (one per set).  The clusters of the structures
 * with a single range each (the header, the active L1 table, the refcount
 * table, the snapshot table, the bitmap directory) carry a mark in the
 * same index.  So a write within one cluster that the index does not hold
 * overlaps nothing, and the inline check in qcow2.h decides that with one
 * hash probe, whatever the size of the image or the number of snapshots:
 * about 25 instructions.  Only writes to indexed clusters (metadata
 * updates, and hits) and writes across clusters take the full check here,
 * which compares the single ranges byte by byte and looks up each cluster
 * (or makes one pass over the index when that is smaller).
 * QEMU instead walks the L1 and refcount tables, and for "all" reads every
 * snapshot's L1 table from disk, on every write.
 *
 * Invariants, cited as "qcow2-overlap.c inv. N":
 *  1. For the active sets (active L2, refcount block) a cluster's count is
 *     the number of active L1 / refcount table entries that point at it
 *     with a cluster-aligned offset (ol_table_offset_is_valid):
 *     each change of such an entry goes through qcow2_overlap_l2_changed()
 *     or qcow2_overlap_refblock_changed(), and wholesale replacements
 *     through qcow2_overlap_rebuild_active().
 *  2. The inactive sets are rebuilt from the snapshot table whenever it
 *     changes (qcow2_overlap_snapshots_changed()); inactive L2 tables are
 *     read only when that check is enabled, and then kept.
 *  3. A count that reached its maximum never goes down again: when unsure,
 *     the index believes a structure is there (a false alarm is reported as
 *     corruption of an image that is corrupt already; a miss would let a
 *     write destroy metadata).
 *  4. Every cluster that a single-range structure touches carries
 *     OL_SINGLE_MARK, whatever is checked: s->overlap_marked records the
 *     ranges the marks come from, and qcow2_overlap_singles_changed(),
 *     called wherever one of those fields is assigned, brings the marks
 *     up to date.  The full check asserts that they are.
 */
#include "block/qcow2.h"

#include "util/cutils.h"
#include "util/qemu-option.h"

/* The sets of the index, in the order of their counts in a value. */
enum {
    OL_SET_ACTIVE_L2,
    OL_SET_REFCOUNT_BLOCK,
    OL_SET_INACTIVE_L1,
    OL_SET_INACTIVE_L2,
    OL_SETS,
};

#define OL_COUNT_BITS 15
#define OL_COUNT_MAX  ((1ULL << OL_COUNT_BITS) - 1)
/* above the four counts: a single-range structure is here
 * (qcow2-overlap.c inv. 4) */
#define OL_SINGLE_MARK (1ULL << 63)
_Static_assert(OL_SETS * OL_COUNT_BITS < 63, "the mark is above the counts");

static const int ol_set_type[OL_SETS] = {
    [OL_SET_ACTIVE_L2]      = QCOW2_OL_ACTIVE_L2,
    [OL_SET_REFCOUNT_BLOCK] = QCOW2_OL_REFCOUNT_BLOCK,
    [OL_SET_INACTIVE_L1]    = QCOW2_OL_INACTIVE_L1,
    [OL_SET_INACTIVE_L2]    = QCOW2_OL_INACTIVE_L2,
};

/*
 * Option names (after "overlap-check.") and message names, in QEMU's
 * order: when a write overlaps several structures, the first is named.
 */
static const struct {
    int type;
    const char *option;
    const char *name;
} ol_structures[] = {
    { QCOW2_OL_MAIN_HEADER,      "main-header",      "qcow2_header" },
    { QCOW2_OL_ACTIVE_L1,        "active-l1",        "active L1 table" },
    { QCOW2_OL_ACTIVE_L2,        "active-l2",        "active L2 table" },
    { QCOW2_OL_REFCOUNT_TABLE,   "refcount-table",   "refcount table" },
    { QCOW2_OL_REFCOUNT_BLOCK,   "refcount-block",   "refcount block" },
    { QCOW2_OL_SNAPSHOT_TABLE,   "snapshot-table",   "snapshot table" },
    { QCOW2_OL_INACTIVE_L1,      "inactive-l1",      "inactive L1 table" },
    { QCOW2_OL_INACTIVE_L2,      "inactive-l2",      "inactive L2 table" },
    { QCOW2_OL_BITMAP_DIRECTORY, "bitmap-directory", "bitmap directory" },
};

static const struct {
    const char *name;
    int mask;
} ol_templates[] = {
    { "none",     QCOW2_OL_NONE },
    { "constant", QCOW2_OL_CONSTANT },
    { "cached",   QCOW2_OL_CACHED },
    { "all",      QCOW2_OL_ALL },
};

const char *qcow2_overlap_name(int type)
{
    for (size_t i = 0; i < G_N_ELEMENTS(ol_structures); i++) {
        if (ol_structures[i].type == type) {
            return ol_structures[i].name;
        }
    }
    g_assert_not_reached();
}

/* ---------------------------------------------------------------------- */
/* Options */

static int ol_template_mask(const char *name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(ol_templates); i++) {
        if (!strcmp(ol_templates[i].name, name)) {
            return ol_templates[i].mask;
        }
    }
    return -1;
}

int qcow2_overlap_read_options(QemuOpts *opts, int *mask, Error **errp)
{
    const char *short_form = qemu_opt_has(opts, "overlap-check")
                             ? qemu_opt_get(opts, "overlap-check") : NULL;
    const char *tmpl = qemu_opt_has(opts, "overlap-check.template")
                       ? qemu_opt_get(opts, "overlap-check.template") : NULL;
    int m;

    if (short_form && tmpl && strcmp(short_form, tmpl)) {
        error_setg(errp, "Conflicting values for qcow2 options "
                   "'overlap-check' ('%s') and 'overlap-check.template' "
                   "('%s')", short_form, tmpl);
        return -EINVAL;
    }
    tmpl = tmpl ? tmpl : short_form ? short_form : "cached";
    m = ol_template_mask(tmpl);
    if (m < 0) {
        error_setg(errp, "Unsupported value '%s' for qcow2 option "
                   "'overlap-check'. Allowed are any of the following: "
                   "none, constant, cached, all", tmpl);
        return -EINVAL;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(ol_structures); i++) {
        g_autofree char *key = g_strdup_printf("overlap-check.%s",
                                               ol_structures[i].option);

        if (qemu_opt_has(opts, key)) {
            if (qemu_opt_get_bool(opts, key, false)) {
                m |= ol_structures[i].type;
            } else {
                m &= ~ol_structures[i].type;
            }
        }
    }
    *mask = m;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The index */

/*
 * An open-addressing hash table (Qcow2OverlapIndex, qcow2.h) from host
 * cluster index to four packed counts and a mark, with linear probing and
 * backward-shift deletion.  It is written here instead of using
 * GHashTable because a lookup is on the path of every guest write: it is
 * inlined and costs a multiplication and, in the usual case, one probe of
 * an empty slot.  A slot whose value is 0 is empty (an indexed cluster
 * always has a count or the mark).
 */

/* Small enough to cost nothing per image; grows when half full. */
#define OL_INDEX_MIN_BITS 6

static inline uint64_t ol_count(uint64_t value, int set)
{
    return (value >> (set * OL_COUNT_BITS)) & OL_COUNT_MAX;
}

static Qcow2OverlapIndex *ol_index_new(int bits)
{
    Qcow2OverlapIndex *ix = g_new0(Qcow2OverlapIndex, 1);

    ix->slots = g_new0(Qcow2OverlapSlot, 1ULL << bits);
    ix->mask = (1ULL << bits) - 1;
    ix->shift = 64 - bits;
    return ix;
}

static void ol_index_free(Qcow2OverlapIndex *ix)
{
    g_free(ix->slots);
    g_free(ix);
}

static inline uint64_t ol_index_get(const Qcow2OverlapIndex *ix,
                                    uint64_t cluster)
{
    return ix->slots[qcow2_overlap_find(ix, cluster)].counts;
}

/* Empties slot @i, moving up the entries that probed past it. */
static void ol_index_delete_slot(Qcow2OverlapIndex *ix, uint64_t i)
{
    uint64_t j = i;

    for (;;) {
        uint64_t home;

        j = (j + 1) & ix->mask;
        if (!ix->slots[j].counts) {
            break;
        }
        home = qcow2_overlap_hash(ix, ix->slots[j].cluster);
        /* the entry at j may fill the hole at i unless home is in (i, j] */
        if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
            ix->slots[i] = ix->slots[j];
            i = j;
        }
    }
    ix->slots[i].counts = 0;
    ix->used--;
}

static void ol_index_set(Qcow2OverlapIndex *ix, uint64_t cluster,
                         uint64_t counts);

static void ol_index_grow(Qcow2OverlapIndex *ix)
{
    Qcow2OverlapIndex *bigger = ol_index_new(64 - ix->shift + 1);

    for (uint64_t i = 0; i <= ix->mask; i++) {
        if (ix->slots[i].counts) {
            ol_index_set(bigger, ix->slots[i].cluster, ix->slots[i].counts);
        }
    }
    g_free(ix->slots);
    *ix = *bigger;
    g_free(bigger);
}

/* Sets the counts of @cluster (0 removes it). */
static void ol_index_set(Qcow2OverlapIndex *ix, uint64_t cluster,
                         uint64_t counts)
{
    uint64_t i = qcow2_overlap_find(ix, cluster);

    if (ix->slots[i].counts) {
        if (counts) {
            ix->slots[i].counts = counts;
        } else {
            ol_index_delete_slot(ix, i);
        }
        return;
    }
    if (!counts) {
        return;
    }
    ix->slots[i] = (Qcow2OverlapSlot) { .cluster = cluster, .counts = counts };
    ix->used++;
    if (ix->used * 2 > ix->mask + 1) {
        ol_index_grow(ix);
    }
}

/*
 * Before qcow2_overlap_init() (and after close) there is no index:
 * updates are dropped and checks find nothing.
 */
static void ol_index_add(BDRVQcow2State *s, int set, uint64_t cluster)
{
    uint64_t v;

    if (!s->overlap_index) {
        return;
    }
    v = ol_index_get(s->overlap_index, cluster);
    if (ol_count(v, set) < OL_COUNT_MAX) {
        v += 1ULL << (set * OL_COUNT_BITS);
    }
    ol_index_set(s->overlap_index, cluster, v);
}

static void ol_index_remove(BDRVQcow2State *s, int set, uint64_t cluster)
{
    uint64_t v, n;

    if (!s->overlap_index) {
        return;
    }
    v = ol_index_get(s->overlap_index, cluster);
    n = ol_count(v, set);
    /* qcow2-overlap.c inv. 3: a saturated count stays */
    if (n == 0 || n == OL_COUNT_MAX) {
        return;
    }
    ol_index_set(s->overlap_index, cluster,
                 v - (1ULL << (set * OL_COUNT_BITS)));
}

/*
 * Drops every count of @set (the others stay): a new table is built, as
 * big as the old one.  The entries go in in the old table's slot order,
 * which is the order of their hashes; in a smaller table each run of
 * consecutive entries would share one home slot and every insertion
 * would probe the whole run, quadratic in the entries (a hostile image
 * with a 25 MB L1 table of 512-byte clusters took seconds to open).
 */
static void ol_index_clear_set(BDRVQcow2State *s, int set)
{
    Qcow2OverlapIndex *old = s->overlap_index;
    uint64_t keep = ~(OL_COUNT_MAX << (set * OL_COUNT_BITS));

    if (!old) {
        return;
    }
    s->overlap_index = ol_index_new(64 - old->shift);
    for (uint64_t i = 0; i <= old->mask; i++) {
        if (old->slots[i].counts & keep) {
            ol_index_set(s->overlap_index, old->slots[i].cluster,
                         old->slots[i].counts & keep);
        }
    }
    ol_index_free(old);
}

uint64_t qcow2_overlap_index_size(BDRVQcow2State *s)
{
    return s->overlap_index ? s->overlap_index->used : 0;
}

/*
 * Whether an active L1 or refcount table entry's offset names a table
 * that qcow2 could load: an unaligned one does not (the caches refuse it
 * and mark the image corrupt), so no table is ever read or written there
 * and there is nothing to protect.  Indexed, such an entry pointing into
 * the header cluster (QEMU's iotest 060) would refuse every header write,
 * the corrupt bit's and check -r's repair included.
 */
static bool ol_table_offset_is_valid(BDRVQcow2State *s, uint64_t off)
{
    return off && !offset_into_cluster(s, off);
}

/* A table entry that pointed at @old_off now points at @new_off (0: none). */
static void ol_index_replace(BDRVQcow2State *s, int set, uint64_t old_off,
                             uint64_t new_off)
{
    if (old_off == new_off) {
        return;
    }
    if (ol_table_offset_is_valid(s, new_off)) {
        ol_index_add(s, set, new_off >> s->cluster_bits);
    }
    if (ol_table_offset_is_valid(s, old_off)) {
        ol_index_remove(s, set, old_off >> s->cluster_bits);
    }
}

void qcow2_overlap_l2_changed(BDRVQcow2State *s, uint64_t old_l1_entry,
                              uint64_t new_l1_entry)
{
    ol_index_replace(s, OL_SET_ACTIVE_L2, old_l1_entry & L1E_OFFSET_MASK,
                     new_l1_entry & L1E_OFFSET_MASK);
}

void qcow2_overlap_refblock_changed(BDRVQcow2State *s, uint64_t old_entry,
                                    uint64_t new_entry)
{
    ol_index_replace(s, OL_SET_REFCOUNT_BLOCK, old_entry & REFT_OFFSET_MASK,
                     new_entry & REFT_OFFSET_MASK);
}

void qcow2_overlap_rebuild_active(BDRVQcow2State *s)
{
    ol_index_clear_set(s, OL_SET_ACTIVE_L2);
    ol_index_clear_set(s, OL_SET_REFCOUNT_BLOCK);
    for (int i = 0; i < s->l1_size; i++) {
        qcow2_overlap_l2_changed(s, 0, s->l1_table[i]);
    }
    for (uint32_t i = 0; i < s->refcount_table_size; i++) {
        qcow2_overlap_refblock_changed(s, 0, s->refcount_table[i]);
    }
}

/* ---------------------------------------------------------------------- */
/* The structures with a single range each: marks (qcow2-overlap.c inv. 4) */

/* Their ranges now, in the order of s->overlap_marked. */
static void ol_single_ranges(BDRVQcow2State *s,
                             Qcow2OverlapRange r[QCOW2_OL_SINGLE_RANGES])
{
    r[0] = (Qcow2OverlapRange) { 0, s->cluster_size };
    r[1] = (Qcow2OverlapRange) { s->l1_table_offset,
                                 (uint64_t)s->l1_size * sizeof(uint64_t) };
    r[2] = (Qcow2OverlapRange) { s->refcount_table_offset,
                                 (uint64_t)s->refcount_table_size *
                                 sizeof(uint64_t) };
    /* marked even without snapshots: the check decides by nb_snapshots */
    r[3] = (Qcow2OverlapRange) { s->snapshots_offset, s->snapshots_size };
    r[4] = (Qcow2OverlapRange) { s->bitmap_directory_offset,
                                 s->bitmap_directory_size };
}

static void ol_mark_range(BDRVQcow2State *s, Qcow2OverlapRange r, bool mark)
{
    Qcow2OverlapIndex *ix = s->overlap_index;
    uint64_t first = r.offset >> s->cluster_bits;
    uint64_t end = (r.offset + r.size + s->cluster_size - 1) >>
                   s->cluster_bits;

    if (!r.size) {
        return;
    }
    for (uint64_t c = first; c < end; c++) {
        uint64_t v = ol_index_get(ix, c);

        ol_index_set(ix, c, mark ? v | OL_SINGLE_MARK : v & ~OL_SINGLE_MARK);
    }
}

void qcow2_overlap_singles_changed(BDRVQcow2State *s)
{
    Qcow2OverlapRange now[QCOW2_OL_SINGLE_RANGES];

    if (!s->overlap_index) {
        return;
    }
    ol_single_ranges(s, now);
    /* all marks go, then all come back: two ranges may share a cluster */
    for (int i = 0; i < QCOW2_OL_SINGLE_RANGES; i++) {
        ol_mark_range(s, s->overlap_marked[i], false);
    }
    for (int i = 0; i < QCOW2_OL_SINGLE_RANGES; i++) {
        ol_mark_range(s, now[i], true);
        s->overlap_marked[i] = now[i];
    }
}

static bool ol_marks_are_current(BDRVQcow2State *s)
{
    Qcow2OverlapRange now[QCOW2_OL_SINGLE_RANGES];

    ol_single_ranges(s, now);
    return !memcmp(now, s->overlap_marked, sizeof(now));
}

/* ---------------------------------------------------------------------- */
/* Snapshots: their L1 tables, and the L2 tables these point to */

/* Calls @fn for each snapshot's L1 table; stops at the first error. */
static int ol_for_each_snapshot_l1(BlockDriverState *bs,
                                   int (*fn)(BlockDriverState *bs,
                                             uint64_t l1_offset,
                                             uint32_t l1_size))
{
    BDRVQcow2State *s = bs->opaque;

    for (uint32_t i = 0; i < s->nb_snapshots; i++) {
        int ret = fn(bs, s->snapshots[i].l1_table_offset,
                     s->snapshots[i].l1_size);

        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

/*
 * A snapshot's L1 table larger than any qcow2 writes is not indexed: it is
 * not a structure qcow2 could have made, and using the snapshot fails
 * anyway (the snapshot code refuses it), while indexing it could cost
 * gigabytes.  An unaligned one is indexed over the clusters it spans.
 */
static bool ol_snapshot_l1_is_sane(uint32_t l1_size)
{
    return (uint64_t)l1_size * sizeof(uint64_t) <= QCOW_MAX_L1_SIZE;
}

/* Clusters [first, end) of an inactive L1 table, for sorting. */
typedef struct OlClusterRun {
    uint64_t first;
    uint64_t end;
} OlClusterRun;

static gint ol_cluster_run_cmp(gconstpointer a, gconstpointer b)
{
    const OlClusterRun *x = a, *y = b;

    return x->first < y->first ? -1 : x->first > y->first;
}

/*
 * Indexes the clusters of every snapshot's L1 table, each cluster once,
 * and only those inside the file.  The snapshot table alone says where
 * the tables are and how long: 65536 entries could name 32 MiB each at
 * offsets of their own, 2^32 clusters of 512 bytes to index (gigabytes
 * and minutes for an image of a few kilobytes, in every open).  A table
 * beyond the end of the file has no refcount and is no structure a
 * write could destroy; the same clusters named by many snapshots are
 * indexed once.  The index then grows with the file, not with what the
 * table says.
 */
static void ol_add_inactive_l1_all(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t file_len = bdrv_getlength(bs->file->bs);
    uint64_t limit = file_len < 0 ? UINT64_MAX >> s->cluster_bits :
                     DIV_ROUND_UP((uint64_t)file_len, s->cluster_size);
    g_autoptr(GArray) runs = g_array_new(false, false, sizeof(OlClusterRun));
    uint64_t first = 0, end = 0;

    for (uint32_t i = 0; i < s->nb_snapshots; i++) {
        uint64_t offset = s->snapshots[i].l1_table_offset;
        uint64_t size = (uint64_t)s->snapshots[i].l1_size * sizeof(uint64_t);
        OlClusterRun r;

        if (!ol_snapshot_l1_is_sane(s->snapshots[i].l1_size) || !size) {
            continue;
        }
        r.first = offset >> s->cluster_bits;
        r.end = offset > UINT64_MAX - size ? limit :
                DIV_ROUND_UP(offset + size, s->cluster_size);
        r.end = MIN(r.end, limit);
        if (r.first < r.end) {
            g_array_append_val(runs, r);
        }
    }
    g_array_sort(runs, ol_cluster_run_cmp);
    for (guint i = 0; i <= runs->len; i++) {
        OlClusterRun *r = i < runs->len ?
                          &g_array_index(runs, OlClusterRun, i) : NULL;

        if (r && r->first <= end && i > 0) {
            end = MAX(end, r->end);
            continue;
        }
        for (uint64_t c = first; c < end; c++) {
            ol_index_add(s, OL_SET_INACTIVE_L1, c);
        }
        if (r) {
            first = r->first;
            end = r->end;
        }
    }
}

static int ol_add_inactive_l2(BlockDriverState *bs, uint64_t l1_offset,
                              uint32_t l1_size)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint64_t *l1 = NULL;
    int ret;

    /* A table the snapshot code would refuse names no L2 table that can
     * be trusted, so no write can be shown safe: as QEMU does, such
     * writes fail with the snapshot code's errno (EFBIG, EINVAL). */
    if (!ol_snapshot_l1_is_sane(l1_size)) {
        return -EFBIG;
    }
    if (!l1_size) {
        return 0;
    }
    if (l1_offset & (s->cluster_size - 1) ||
        l1_offset > INT64_MAX - (uint64_t)l1_size * sizeof(uint64_t)) {
        return -EINVAL;
    }
    l1 = g_try_new(uint64_t, l1_size);
    if (!l1) {
        return -ENOMEM;
    }
    ret = bdrv_pread(bs->file, l1_offset, l1_size * sizeof(uint64_t), l1, 0);
    if (ret < 0) {
        /* a table that cannot be read names no L2 table we could know */
        return 0;
    }
    for (uint32_t i = 0; i < l1_size; i++) {
        uint64_t l2 = GUINT64_FROM_BE(l1[i]) & L1E_OFFSET_MASK;

        if (l2) {
            ol_index_add(s, OL_SET_INACTIVE_L2, l2 >> s->cluster_bits);
        }
    }
    return 0;
}

/* Reads the inactive L2 tables' locations, once (qcow2-overlap.c inv. 2). */
static int ol_load_inactive_l2(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    if (s->overlap_inactive_l2_loaded) {
        return 0;
    }
    ret = ol_for_each_snapshot_l1(bs, ol_add_inactive_l2);
    if (ret < 0) {
        ol_index_clear_set(s, OL_SET_INACTIVE_L2);
        return ret;
    }
    s->overlap_inactive_l2_loaded = true;
    return 0;
}

int qcow2_overlap_snapshots_changed(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    ol_index_clear_set(s, OL_SET_INACTIVE_L1);
    ol_index_clear_set(s, OL_SET_INACTIVE_L2);
    s->overlap_inactive_l2_loaded = false;
    ol_add_inactive_l1_all(bs);
    if (s->overlap_check & QCOW2_OL_INACTIVE_L2) {
        /* a table that cannot be loaded fails the writes it would have
         * to clear (ol_check() loads again), not the open or the change
         * of the snapshot table */
        ol_load_inactive_l2(bs);
    }
    return 0;
}

int qcow2_overlap_init(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    s->overlap_index = ol_index_new(OL_INDEX_MIN_BITS);
    memset(s->overlap_marked, 0, sizeof(s->overlap_marked));
    qcow2_overlap_singles_changed(s);
    qcow2_overlap_rebuild_active(s);
    ret = qcow2_overlap_snapshots_changed(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not index the snapshots' "
                         "metadata");
    }
    return ret;
}

void qcow2_overlap_close(BDRVQcow2State *s)
{
    if (s->overlap_index) {
        ol_index_free(s->overlap_index);
        s->overlap_index = NULL;
    }
    s->overlap_inactive_l2_loaded = false;
}

void qcow2_overlap_begin_shared_l2_writes(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    assert(!s->overlap_shared_l2_writes);
    s->overlap_shared_l2_writes = true;
}

void qcow2_overlap_end_shared_l2_writes(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    /* a failure leaves tables dirty: they are checked when written later */
    qcow2_cache_write(bs, s->l2_table_cache);
    s->overlap_shared_l2_writes = false;
}

int qcow2_overlap_l2_cache_ign(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    return QCOW2_OL_ACTIVE_L2 |
           (s->overlap_shared_l2_writes ? QCOW2_OL_INACTIVE_L2 : 0);
}

/* ---------------------------------------------------------------------- */
/* The check */

/* [a, a_end) and [b, b + b_size); @a_end > a. */
static inline bool ol_ranges_overlap(uint64_t a, uint64_t a_end, uint64_t b,
                                     uint64_t b_size)
{
    return b_size && a < b + b_size && b < a_end;
}

/* The structures with one range each that @chk selects and the range hits. */
static inline int ol_check_single_ranges(BDRVQcow2State *s, int chk,
                                         uint64_t offset, uint64_t end)
{
    int hits = 0;

    if ((chk & QCOW2_OL_MAIN_HEADER) && offset < (uint64_t)s->cluster_size) {
        hits |= QCOW2_OL_MAIN_HEADER;
    }
    if ((chk & QCOW2_OL_ACTIVE_L1) &&
        ol_ranges_overlap(offset, end, s->l1_table_offset,
                          (uint64_t)s->l1_size * sizeof(uint64_t))) {
        hits |= QCOW2_OL_ACTIVE_L1;
    }
    if ((chk & QCOW2_OL_REFCOUNT_TABLE) &&
        ol_ranges_overlap(offset, end, s->refcount_table_offset,
                          (uint64_t)s->refcount_table_size *
                          sizeof(uint64_t))) {
        hits |= QCOW2_OL_REFCOUNT_TABLE;
    }
    if ((chk & QCOW2_OL_SNAPSHOT_TABLE) && s->nb_snapshots &&
        ol_ranges_overlap(offset, end, s->snapshots_offset,
                          s->snapshots_size)) {
        hits |= QCOW2_OL_SNAPSHOT_TABLE;
    }
    if ((chk & QCOW2_OL_BITMAP_DIRECTORY) &&
        ol_ranges_overlap(offset, end, s->bitmap_directory_offset,
                          s->bitmap_directory_size)) {
        hits |= QCOW2_OL_BITMAP_DIRECTORY;
    }
    return hits;
}

int qcow2_overlap_in_header(BDRVQcow2State *s)
{
    return ol_check_single_ranges(s, QCOW2_OL_CONSTANT & ~QCOW2_OL_MAIN_HEADER,
                                  0, s->cluster_size);
}

#define OL_LANE(set) (OL_COUNT_MAX << ((set) * OL_COUNT_BITS))

/* The counts of the sets that @chk selects, as a mask over packed counts. */
static inline uint64_t ol_wanted_counts(int chk)
{
    uint64_t want = 0;

    for (int set = 0; set < OL_SETS; set++) {
        if (chk & ol_set_type[set]) {
            want |= OL_LANE(set);
        }
    }
    return want;
}

/* The sets' structures in the clusters [first, end) that @chk selects. */
static inline int ol_check_index(BDRVQcow2State *s, int chk,
                                 uint64_t first, uint64_t end)
{
    const Qcow2OverlapIndex *ix = s->overlap_index;
    uint64_t want, found = 0;
    int hits = 0;

    if (!ix->used) {
        return 0;
    }
    want = ol_wanted_counts(chk);
    if (!want) {
        return 0;
    }
    if (end - first <= ix->used) {
        s->overlap_lookups += end - first;
        for (uint64_t c = first; c < end; c++) {
            found |= ol_index_get(ix, c);
        }
    } else {
        /* a write larger than the index: one pass over the index */
        s->overlap_lookups += ix->used;
        for (uint64_t i = 0; i <= ix->mask; i++) {
            uint64_t c = ix->slots[i].cluster;

            if (ix->slots[i].counts && c >= first && c < end) {
                found |= ix->slots[i].counts;
            }
        }
    }
    found &= want;
    if (!found) {
        return 0;
    }
    for (int set = 0; set < OL_SETS; set++) {
        if (ol_count(found, set)) {
            hits |= ol_set_type[set];
        }
    }
    return hits;
}

/* qcow2_check_metadata_overlap(), and the write path's full check. */
static int ol_check(BlockDriverState *bs, int ign, int64_t offset,
                    int64_t size)
{
    BDRVQcow2State *s = bs->opaque;
    int chk = s->overlap_check & ~ign;
    uint64_t end = (uint64_t)offset + size;
    int hits, ret;

    if (!chk || size <= 0 || !s->overlap_index) {
        return 0;
    }
    hits = ol_check_single_ranges(s, chk, offset, end);
    if ((chk & QCOW2_OL_INACTIVE_L2) && !s->overlap_inactive_l2_loaded) {
        ret = ol_load_inactive_l2(bs);
        if (ret < 0) {
            return ret;
        }
    }
    hits |= ol_check_index(s, chk, (uint64_t)offset >> s->cluster_bits,
                           (end + s->cluster_size - 1) >> s->cluster_bits);
    /* the first structure in QEMU's order is the one named */
    return hits & -hits;
}

int qcow2_check_metadata_overlap(BlockDriverState *bs, int ign,
                                 int64_t offset, int64_t size)
{
    return ol_check(bs, ign, offset, size);
}

int coroutine_fn qcow2_pre_write_overlap_check_slow(BlockDriverState *bs,
                                                    int ign, int64_t offset,
                                                    int64_t size)
{
    int ret;

    /* qcow2.h inv. 4 and 7: the full check runs under the lock */
    qemu_co_mutex_assert_locked(&((BDRVQcow2State *)bs->opaque)->lock);
    /* qcow2-overlap.c inv. 4, or the inline check may have missed a
     * structure */
    assert(!((BDRVQcow2State *)bs->opaque)->overlap_index ||
           ol_marks_are_current(bs->opaque));
    ret = ol_check(bs, ign, offset, size);

    if (ret <= 0) {
        return ret;
    }
    qcow2_signal_corruption(bs, true, offset, size,
                            "Preventing invalid write on metadata (overlaps "
                            "with %s)", qcow2_overlap_name(ret));
    return -EIO;
}
