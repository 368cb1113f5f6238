/*
 * The expectations of a crash test and the checks of an image after a
 * power cut (see crash-model.h for the invariants).
 */
#include "crash-model.h"
#include <sys/wait.h>

#include "block/qapi.h"

static void crash_sector_free(gpointer p)
{
    CrashSector *l = p;

    g_array_free(l->seeds, true);
    g_free(l);
}

void crash_model_init(CrashModel *m, int64_t len)
{
    m->sectors = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL,
                                       crash_sector_free);
    m->len_completed = m->len_durable = len;
}

void crash_model_destroy(CrashModel *m)
{
    g_hash_table_destroy(m->sectors);
}

/*
 * A header that names the sector and the version, then one byte repeated:
 * no two versions of any two sectors are alike, and a cluster of them
 * compresses well (the compressed-write case needs that).
 */
void crash_pattern(uint8_t *buf, size_t len, int64_t lba, uint32_t seed)
{
    for (size_t done = 0; done < len; done += CRASH_SECTOR, lba++) {
        uint8_t *s = buf + done;

        if (!seed) {
            memset(s, 0, CRASH_SECTOR);
            continue;
        }
        memset(s, 0x80 | (seed & 0x7f), CRASH_SECTOR);
        memcpy(s, &lba, sizeof(lba));
        memcpy(s + sizeof(lba), &seed, sizeof(seed));
    }
}

static CrashSector *crash_model_sector(CrashModel *m, int64_t lba)
{
    CrashSector *l = g_hash_table_lookup(m->sectors, &lba);

    if (!l) {
        l = g_new0(CrashSector, 1);
        l->lba = lba;
        l->seeds = g_array_new(false, false, sizeof(uint32_t));
        l->completed = l->durable = -1;
        g_hash_table_insert(m->sectors, &l->lba, l);
    }
    return l;
}

void crash_model_log(CrashModel *m, int64_t offset, int64_t bytes,
                     uint32_t seed)
{
    g_assert_true(QEMU_IS_ALIGNED(offset | bytes, CRASH_SECTOR));
    for (int64_t lba = offset / CRASH_SECTOR;
         lba < (offset + bytes) / CRASH_SECTOR; lba++) {
        g_array_append_val(crash_model_sector(m, lba)->seeds, seed);
    }
}

void crash_model_completed(CrashModel *m, int64_t offset, int64_t bytes)
{
    for (int64_t lba = offset / CRASH_SECTOR;
         lba < (offset + bytes) / CRASH_SECTOR; lba++) {
        CrashSector *l = crash_model_sector(m, lba);

        l->completed = l->seeds->len - 1;
    }
}

void crash_model_flushed(CrashModel *m)
{
    GHashTableIter it;
    gpointer value;

    g_hash_table_iter_init(&it, m->sectors);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        CrashSector *l = value;

        l->durable = l->completed;
    }
    m->len_durable = m->len_completed;
}

void crash_model_may_shrink(CrashModel *m, int64_t len)
{
    GHashTableIter it;
    gpointer value;

    m->shrinking = true;
    g_hash_table_iter_init(&it, m->sectors);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        CrashSector *l = value;

        l->may_vanish |= l->lba * CRASH_SECTOR >= len;
    }
}

/* Runs @argv; its exit code (-1 if it did not exit), output in *@out. */
static int crash_spawn(const char *const *argv, char **out)
{
    g_autofree char *sout = NULL, *serr = NULL;
    GError *gerr = NULL;
    int status;

    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL,
                      NULL, &sout, &serr, &status, &gerr)) {
        *out = g_strdup_printf("cannot run %s: %s", argv[0], gerr->message);
        g_error_free(gerr);
        return -1;
    }
    *out = g_strconcat(sout, serr, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool crash_have_qemu_img(void)
{
    g_autofree char *path = g_find_program_in_path("qemu-img");

    return path != NULL;
}

const char *crash_qblock_img(void)
{
    static char *path;

    if (!path) {
        g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
        g_autofree char *dir = g_path_get_dirname(exe);

        /* the program is BUILD/tests/crash/test-qcow2-crash */
        path = g_build_filename(dir, "..", "..", "qblock-img", NULL);
    }
    return path;
}

/* A sector's allowed versions: the durable one or any later (inv. 2). */
static char *crash_check_sector(CrashSector *l, const uint8_t *data)
{
    uint8_t expect[CRASH_SECTOR];

    for (int v = l->seeds->len - 1; v >= MAX(l->durable, 0); v--) {
        crash_pattern(expect, CRASH_SECTOR, l->lba,
                      g_array_index(l->seeds, uint32_t, v));
        if (!memcmp(expect, data, CRASH_SECTOR)) {
            return NULL;
        }
    }
    if (l->durable < 0 || l->may_vanish) {
        /* never durably written, or being cut off: it may read as zeroes */
        if (buffer_is_zero(data, CRASH_SECTOR)) {
            return NULL;
        }
    }
    return g_strdup_printf("sector %" PRId64 " holds %s; it must hold "
                           "version %d or later of the %u written",
                           l->lba,
                           buffer_is_zero(data, CRASH_SECTOR) ? "zeroes" :
                           "other data", l->durable, l->seeds->len);
}

static gint crash_sector_cmp_lba(gconstpointer a, gconstpointer b)
{
    const CrashSector *x = *(CrashSector *const *)a;
    const CrashSector *y = *(CrashSector *const *)b;

    return x->lba < y->lba ? -1 : x->lba > y->lba;
}

/* The sectors of @m in the order of their LBAs. */
static GPtrArray *crash_model_by_lba(CrashModel *m)
{
    GPtrArray *sectors = g_ptr_array_sized_new(g_hash_table_size(m->sectors));
    GHashTableIter it;
    gpointer value;

    g_hash_table_iter_init(&it, m->sectors);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        g_ptr_array_add(sectors, value);
    }
    g_ptr_array_sort(sectors, crash_sector_cmp_lba);
    return sectors;
}

/* At most this many consecutive sectors are read at once. */
#define CRASH_READ_SECTORS 256

/* qblock's view of the image: it opens, and the data is as @m allows. */
static char *crash_check_data(const char *path, CrashModel *m)
{
    QDict *opts = qdict_new();
    Error *err = NULL;
    BlockBackend *blk;
    g_autoptr(ImageInfo) info = NULL;
    g_autoptr(GPtrArray) sectors = NULL;
    g_autofree uint8_t *data = g_malloc(CRASH_READ_SECTORS * CRASH_SECTOR);
    int64_t len;
    char *failure = NULL;

    qdict_put_str(opts, "driver", "qcow2");
    blk = blk_new_open(path, NULL, opts, 0, &err);
    if (!blk) {
        failure = g_strdup_printf("qblock cannot open the image: %s",
                                  error_get_pretty(err));
        error_free(err);
        return failure;
    }
    /*
     * What qblock-img info shows, computed in this process (a third of a
     * run's time went to starting qblock-img for it)
     */
    info = bdrv_query_image_info(blk_bs(blk), true, &err);
    if (!info) {
        failure = g_strdup_printf("qblock cannot read the image's info: %s",
                                  error_get_pretty(err));
        error_free(err);
        blk_unref(blk);
        return failure;
    }
    len = blk_getlength(blk);
    if (!m) {
        blk_unref(blk);
        return NULL;
    }
    if (len < m->len_durable && !m->shrinking) {
        failure = g_strdup_printf("the disk is %" PRId64 " bytes, a flush "
                                  "made it %" PRId64, len, m->len_durable);
    }
    sectors = crash_model_by_lba(m);
    for (guint i = 0, end; !failure && i < sectors->len; i = end) {
        CrashSector *l = g_ptr_array_index(sectors, i);

        end = i + 1;
        if (l->lba * CRASH_SECTOR >= len) {
            if (!l->may_vanish) {
                failure = g_strdup_printf("sector %" PRId64 " is past the "
                                          "end of the disk (%" PRId64 ")",
                                          l->lba, len);
            }
            continue;
        }
        /* the sectors that follow it on the disk are read with it */
        while (end < sectors->len && end - i < CRASH_READ_SECTORS) {
            CrashSector *next = g_ptr_array_index(sectors, end);

            if (next->lba != l->lba + (end - i) ||
                next->lba * CRASH_SECTOR >= len) {
                break;
            }
            end++;
        }
        if (blk_pread(blk, l->lba * CRASH_SECTOR, (end - i) * CRASH_SECTOR,
                      data, 0)) {
            failure = g_strdup_printf("sectors %" PRId64 " to %" PRId64
                                      " cannot be read", l->lba,
                                      l->lba + (end - i) - 1);
            break;
        }
        for (guint k = i; !failure && k < end; k++) {
            failure = crash_check_sector(g_ptr_array_index(sectors, k),
                                         data + (k - i) * CRASH_SECTOR);
        }
    }
    blk_unref(blk);
    return failure;
}

/*
 * True if every error qemu-img check reported in @out is an OFLAG_COPIED
 * one: their count is the "N errors were found" that it sums up.
 */
static bool crash_only_copied(const char *out)
{
    const char *sum = strstr(out, " errors were found on the image");
    const char *p = out;
    int copied = 0;

    while ((p = strstr(p, "ERROR OFLAG_COPIED "))) {
        copied++;
        p++;
    }
    if (!sum) {
        return false;
    }
    while (sum > out && g_ascii_isdigit(sum[-1])) {
        sum--;
    }
    return copied > 0 && atoi(sum) == copied;
}

static uint64_t crash_be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;

    for (int i = 0; i < bytes; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

/* What qemu-img said of one image; CRASH_NOT_ASKED: not run yet. */
#define CRASH_NOT_ASKED INT_MIN
typedef struct CrashQemuSaid {
    int check_rc;
    char *check_out;
    int info_rc;
    char *info_out;
} CrashQemuSaid;

/*
 * What qemu-img said, by the SHA-256 of the image file.  Many cuts leave
 * the bytes an earlier cut left (the cuts between two flushes lose the
 * same writes: test-qcow2-crash checks 1,703 images, 277 of them
 * distinct), and what qemu-img check and info say of an image that names
 * no other file is a function of its bytes, so it is asked once per
 * distinct image.  An image with a backing or an external data file is
 * always asked again (those files change under commit and rebase).  The
 * other checks (the corrupt bit, every sector's data read through
 * qblock) run for every cut.
 */
static GHashTable *crash_qemu_said;

static CrashQemuSaid *crash_qemu_said_new(void)
{
    CrashQemuSaid *q = g_new0(CrashQemuSaid, 1);

    q->check_rc = q->info_rc = CRASH_NOT_ASKED;
    return q;
}

static void crash_qemu_said_free(CrashQemuSaid *q)
{
    g_free(q->check_out);
    g_free(q->info_out);
    g_free(q);
}

/*
 * The record for the bytes of the image at @path: a kept one (*kept
 * true), or a fresh one that the caller frees.
 */
static CrashQemuSaid *crash_qemu_said_for(const char *path, bool *kept)
{
    g_autofree uint8_t *data = NULL;
    GError *gerr = NULL;
    gsize len;
    char *sum;
    CrashQemuSaid *q;

    g_file_get_contents(path, (char **)&data, &len, &gerr);
    g_assert_no_error(gerr);
    /* bytes 8-15: the backing file name's offset; incompatible bit 2: an
     * external data file (version 3) */
    *kept = len >= 104 && crash_be(data + 8, 8) == 0 &&
            (crash_be(data + 4, 4) < 3 || !(crash_be(data + 72, 8) & 4));
    if (!*kept) {
        return crash_qemu_said_new();
    }
    if (!crash_qemu_said) {
        crash_qemu_said = g_hash_table_new(g_str_hash, g_str_equal);
    }
    sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, data, len);
    q = g_hash_table_lookup(crash_qemu_said, sum);
    if (q) {
        g_free(sum);
        return q;
    }
    q = crash_qemu_said_new();
    g_hash_table_insert(crash_qemu_said, sum, q);
    return q;
}

/* Why qemu-img's checks of the image fail, or NULL; sets @v's counts. */
static char *crash_qemu_failure(const char *path, CrashQemuSaid *q,
                                CrashAllow allow, CrashVerdict *v)
{
    const char *check[] = { "qemu-img", "check", "-f", "qcow2", path, NULL };
    const char *qinfo[] = { "qemu-img", "info", "-f", "qcow2", path, NULL };
    int rc;

    /* qemu-img check: 0 clean, 3 leaks only, 2 corruption, 1 failed */
    if (q->check_rc == CRASH_NOT_ASKED) {
        q->check_rc = crash_spawn(check, &q->check_out);
    }
    rc = q->check_rc;
    v->leaked = rc == 3 ||
                (rc == 2 && strstr(q->check_out, " leaked clusters were "));
    v->copied = rc == 2 && (allow & CRASH_ALLOW_COPIED) &&
                crash_only_copied(q->check_out);
    if (v->leaked && !(allow & CRASH_ALLOW_LEAKS)) {
        return g_strdup_printf("qemu-img check found leaks:\n%s",
                               q->check_out);
    }
    if (rc != 0 && rc != 3 && !v->copied) {
        return g_strdup_printf("qemu-img check exited %d:\n%s", rc,
                               q->check_out);
    }
    if (q->info_rc == CRASH_NOT_ASKED) {
        q->info_rc = crash_spawn(qinfo, &q->info_out);
    }
    if (q->info_rc != 0) {
        return g_strdup_printf("qemu-img info failed:\n%s", q->info_out);
    }
    return NULL;
}

CrashVerdict crash_verify(const char *path, CrashModel *m, CrashAllow allow)
{
    CrashVerdict v = { 0 };
    bool kept;
    CrashQemuSaid *q = crash_qemu_said_for(path, &kept);
    CrashHeader h;

    v.failure = crash_qemu_failure(path, q, allow, &v);
    if (!kept) {
        crash_qemu_said_free(q);
    }
    if (v.failure) {
        return v;
    }
    crash_read_header(path, &h);
    /* bit 1: corrupt; set only when a driver saw inconsistent metadata */
    if (h.incompatible_features & 2) {
        v.failure = g_strdup("the image's corrupt bit is set");
        return v;
    }
    v.failure = crash_check_data(path, m);
    return v;
}

char *crash_tmp_path(const char *what)
{
    g_autofree char *tmpl = g_strdup_printf("qblock-crash-%s-XXXXXX", what);
    GError *gerr = NULL;
    char *path = NULL;
    int fd = g_file_open_tmp(tmpl, &path, &gerr);

    g_assert_no_error(gerr);
    close(fd);
    return path;
}

char *crash_copy_file(const char *src)
{
    g_autofree char *data = NULL;
    GError *gerr = NULL;
    char *dst = crash_tmp_path("run");
    gsize len;

    g_file_get_contents(src, &data, &len, &gerr);
    g_assert_no_error(gerr);
    g_file_set_contents(dst, data, len, &gerr);
    g_assert_no_error(gerr);
    return dst;
}

/* Counts the nonzero 64-bit big-endian entries of a table in the file. */
static int crash_count_entries(int fd, uint64_t offset, uint64_t entries)
{
    g_autofree uint8_t *t = g_malloc0(entries * 8);
    int used = 0;

    g_assert_cmpint(pread(fd, t, entries * 8, offset), ==, entries * 8);
    for (uint64_t i = 0; i < entries; i++) {
        used += crash_be(t + i * 8, 8) != 0;
    }
    return used;
}

/* Offsets from the qcow2 specification (docs/interop/qcow2.txt). */
void crash_read_header(const char *path, CrashHeader *h)
{
    uint8_t b[104] = { 0 };
    int fd = open(path, O_RDONLY);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, b, sizeof(b), 0), >=, 72);
    h->version = crash_be(b + 4, 4);
    h->cluster_bits = crash_be(b + 20, 4);
    h->size = crash_be(b + 24, 8);
    h->l1_size = crash_be(b + 36, 4);
    h->l1_table_offset = crash_be(b + 40, 8);
    h->refcount_table_offset = crash_be(b + 48, 8);
    h->refcount_table_clusters = crash_be(b + 56, 4);
    h->nb_snapshots = crash_be(b + 60, 4);
    h->incompatible_features = h->version >= 3 ? crash_be(b + 72, 8) : 0;
    h->refcount_order = h->version >= 3 ? crash_be(b + 96, 4) : 4;
    h->l1_used = crash_count_entries(fd, h->l1_table_offset, h->l1_size);
    h->reftable_used = crash_count_entries(fd, h->refcount_table_offset,
                                           (uint64_t)h->refcount_table_clusters
                                           << h->cluster_bits >> 3);
    close(fd);
}
