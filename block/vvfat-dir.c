/*
 * vvfat: the host directory tree walked into a FAT volume's directory
 * entries, cluster ranges and FAT, once at open (block/vvfat.h, inv. 1-3).
 *
 * The walk is breadth first, in the order readdir gives, as QEMU's is:
 * the root's entries first, then each node in the order it was found gets
 * its clusters (a directory when its own entries are known), so that an
 * image of the same tree lays out like QEMU's.  Every name gets long-name
 * entries before its 8.3 entry, as QEMU writes them.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "block/vvfat.h"

/* The characters an 8.3 name keeps, besides letters and digits. */
static bool vvfat_short_char_ok(unsigned char c)
{
    if (c == 0 || c >= 0x80) {
        return false;
    }
    return g_ascii_isalnum(c) || strchr("!#$%&'()-@^_`{}~", c);
}

/* Copies the kept characters of @src[0, @len) into @dst (at most @max). */
static bool vvfat_short_part(const char *src, size_t len, uint8_t *dst,
                             size_t max)
{
    size_t n = 0;
    bool lossy = false;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = src[i];

        if (!vvfat_short_char_ok(c)) {
            lossy = true;
        } else if (n == max) {
            lossy = true;
        } else {
            dst[n++] = g_ascii_toupper(c);
        }
    }
    return lossy;
}

bool vvfat_short_name(const char *name, uint8_t out[11])
{
    const char *start = name, *first_dot, *last_dot;
    bool lossy = false;

    memset(out, ' ', 11);
    /* a leading dot (a hidden Unix file) is no extension separator */
    while (*start == '.') {
        start++;
        lossy = true;
    }
    first_dot = strchr(start, '.');
    last_dot = strrchr(start, '.');
    if (!first_dot) {
        return vvfat_short_part(start, strlen(start), out, 8) || lossy;
    }
    /* what lies between the first and the last dot is dropped */
    lossy |= first_dot != last_dot;
    lossy |= vvfat_short_part(start, first_dot - start, out, 8);
    lossy |= vvfat_short_part(last_dot + 1, strlen(last_dot + 1), out + 8, 3);
    return lossy;
}

void vvfat_short_name_tail(uint8_t sn[11], unsigned n)
{
    char tail[12];
    int len = snprintf(tail, sizeof(tail), "~%u", n);
    int base = 0;

    assert(len > 1 && len <= 8);
    while (base < 8 && sn[base] != ' ') {
        base++;
    }
    base = MIN(base, 8 - len);
    memcpy(sn + base, tail, len);
}

uint8_t vvfat_lfn_checksum(const uint8_t sn[11])
{
    uint8_t sum = 0;

    for (int i = 0; i < 11; i++) {
        sum = ((sum & 1) << 7) + (sum >> 1) + sn[i];
    }
    return sum;
}

/* FAT date and time of @t, in local time as QEMU writes them. */
static void vvfat_fat_time(time_t t, uint16_t *date, uint16_t *time_out)
{
    struct tm tm;

    localtime_r(&t, &tm);
    *date = GUINT16_TO_LE(((MAX(tm.tm_year - 80, 0) & 0x7f) << 9) |
                          ((tm.tm_mon + 1) << 5) | tm.tm_mday);
    if (time_out) {
        *time_out = GUINT16_TO_LE((tm.tm_hour << 11) | (tm.tm_min << 5) |
                                  (tm.tm_sec / 2));
    }
}

/*
 * Appends a zeroed entry (inv. 3).  The array may move: a pointer into it
 * is good until the next call only.
 */
static VvfatDirent *vvfat_new_dirent(BDRVVvfatState *s)
{
    /* doubled when full: the capacity is a power of two */
    if (!(s->n_dirents & (s->n_dirents + 1))) {
        s->dirents = g_renew(VvfatDirent, s->dirents, s->n_dirents * 2 + 2);
    }
    memset(&s->dirents[s->n_dirents], 0, sizeof(VvfatDirent));
    return &s->dirents[s->n_dirents++];
}

static void vvfat_fill_short(VvfatDirent *e, const uint8_t sn[11],
                             const struct stat *st)
{
    memcpy(e->name, sn, 11);
    e->attributes = S_ISDIR(st->st_mode) ? VVFAT_ATTR_DIR
                                         : VVFAT_ATTR_ARCHIVE;
    vvfat_fat_time(st->st_ctime, &e->cdate, &e->ctime);
    vvfat_fat_time(st->st_atime, &e->adate, NULL);
    vvfat_fat_time(st->st_mtime, &e->mdate, &e->mtime);
    if (!S_ISDIR(st->st_mode)) {
        e->size = GUINT32_TO_LE(st->st_size);
    }
}

/*
 * @name as UTF-16 in @out, its length; -1 where it is no UTF-8: QEMU then
 * says so and gives the entry its 8.3 name alone.
 */
static int vvfat_utf16(const char *name, uint16_t *out)
{
    g_autofree gunichar2 *u = g_utf8_to_utf16(name, -1, NULL, NULL, NULL);
    int n = 0;

    if (!u) {
        error_report("vvfat: invalid UTF-8 name: %s", name);
        return -1;
    }
    for (; u[n] && n < VVFAT_NAME_MAX_UTF16; n++) {
        out[n] = u[n];
    }
    return n;
}

/* Writes the long-name entries of @name, last piece first. */
static void vvfat_add_lfn(BDRVVvfatState *s, const char *name,
                          const uint8_t sn[11])
{
    static const uint8_t pos[VVFAT_LFN_CHARS] = {
        1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30
    };
    uint16_t u[VVFAT_NAME_MAX_UTF16 + 1];
    int len = vvfat_utf16(name, u);
    int pieces = DIV_ROUND_UP(MAX(len, 0), VVFAT_LFN_CHARS);
    uint8_t sum = vvfat_lfn_checksum(sn);

    for (int p = pieces; p >= 1; p--) {
        uint8_t *e = (uint8_t *)vvfat_new_dirent(s);

        e[0] = p | (p == pieces ? VVFAT_LFN_LAST : 0);
        e[11] = VVFAT_ATTR_LFN;
        e[13] = sum;
        for (int i = 0; i < VVFAT_LFN_CHARS; i++) {
            int c = (p - 1) * VVFAT_LFN_CHARS + i;
            /* the name, one NUL if room is left, then 0xffff padding */
            uint16_t v = c < len ? u[c] : c == len ? 0 : 0xffff;

            vvfat_put16(e + pos[i], v);
        }
    }
}

/*
 * The 8.3 names a directory has given out, and per base name the lowest
 * ~N tail that may still be free: the names only accumulate, so every
 * tail below it stays taken, and numbering resumes there instead of at
 * ~1 (a directory of many similar names is linear, not quadratic).
 */
typedef struct VvfatShortNames {
    GHashTable *taken;          /* 11-byte names, NUL-terminated copies */
    GHashTable *next_tail;      /* base name -> GUINT_TO_POINTER(n) */
} VvfatShortNames;

static void vvfat_short_names_init(VvfatShortNames *names)
{
    names->taken = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                         NULL);
    names->next_tail = g_hash_table_new_full(g_str_hash, g_str_equal,
                                             g_free, NULL);
}

static void vvfat_short_names_free(VvfatShortNames *names)
{
    g_hash_table_destroy(names->taken);
    g_hash_table_destroy(names->next_tail);
}

static bool vvfat_short_taken(VvfatShortNames *names, const uint8_t sn[11])
{
    g_autofree char *key = g_strndup((const char *)sn, 11);

    return g_hash_table_contains(names->taken, key);
}

/* @name's 8.3 name, unique in its directory, in @sn; then taken. */
static int vvfat_unique_short(VvfatShortNames *names, const char *name,
                              uint8_t sn[11], Error **errp)
{
    uint8_t base[11];
    bool lossy = vvfat_short_name(name, base);
    char *base_key = g_strndup((const char *)base, 11);
    unsigned n = GPOINTER_TO_UINT(g_hash_table_lookup(names->next_tail,
                                                      base_key));

    memcpy(sn, base, 11);
    if (lossy || vvfat_short_taken(names, sn)) {
        /* ~1 onwards, as QEMU numbers them: the first free one */
        for (n = MAX(n, 1); ; n++) {
            if (n >= 1000000) {
                error_setg(errp, "vvfat: no free short name for '%s'", name);
                g_free(base_key);
                return -ENOSPC;
            }
            memcpy(sn, base, 11);
            vvfat_short_name_tail(sn, n);
            if (!vvfat_short_taken(names, sn)) {
                break;
            }
        }
        g_hash_table_replace(names->next_tail, base_key,
                             GUINT_TO_POINTER(n + 1));
    } else {
        g_free(base_key);
    }
    g_hash_table_add(names->taken, g_strndup((const char *)sn, 11));
    return 0;
}

static void vvfat_capacity_error(BDRVVvfatState *s, Error **errp)
{
    /* QEMU's figure: the volume's bytes in units of 1,024,000 */
    error_setg(errp, "Directory does not fit in FAT%d (capacity %.2f MB)",
               s->geo.fat_type,
               (double)s->geo.volume_sectors * VVFAT_SECTOR / 1024000);
}

/* Takes @count clusters for node @idx from s->next_cluster (inv. 2). */
static int vvfat_take_clusters(BDRVVvfatState *s, uint32_t idx,
                               uint64_t count, Error **errp)
{
    VvfatNode *node = &s->nodes[idx];

    if (count == 0) {
        return 0;
    }
    if (s->next_cluster - VVFAT_FIRST_CLUSTER + count >
        s->geo.cluster_count) {
        vvfat_capacity_error(s, errp);
        return -ENOSPC;
    }
    node->first_cluster = s->next_cluster;
    node->n_clusters = count;
    s->next_cluster += count;
    if (idx) {
        vvfat_dirent_set_cluster(&s->dirents[node->dirent],
                                 node->first_cluster);
    }
    return 0;
}

static uint32_t vvfat_new_node(BDRVVvfatState *s, char *path, bool is_dir,
                               uint32_t parent)
{
    VvfatNode *n;

    if (!(s->n_nodes & (s->n_nodes + 1))) {
        s->nodes = g_renew(VvfatNode, s->nodes, s->n_nodes * 2 + 2);
    }
    n = &s->nodes[s->n_nodes];
    *n = (VvfatNode) { .path = path, .is_dir = is_dir, .parent = parent };
    return s->n_nodes++;
}

/* A "." or ".." entry, with the times of @path when it can be read. */
static VvfatDirent *vvfat_add_dot(BDRVVvfatState *s, const char *path,
                                  const uint8_t name[11])
{
    VvfatDirent *e = vvfat_new_dirent(s);
    struct stat st;

    if (stat(path, &st) == 0) {
        vvfat_fill_short(e, name, &st);
    }
    memcpy(e->name, name, 11);
    e->attributes = VVFAT_ATTR_DIR;
    e->size = 0;
    return e;
}

/* The "." and ".." entries that open a subdirectory. */
static void vvfat_add_dots(BDRVVvfatState *s, uint32_t idx)
{
    static const uint8_t dot[11] = ".          ", dotdot[11] = "..         ";
    g_autofree char *up = g_build_filename(s->nodes[idx].path, "..", NULL);
    VvfatDirent *e;

    /* "." gets its cluster when the directory's are known */
    vvfat_add_dot(s, s->nodes[idx].path, dot);
    e = vvfat_add_dot(s, up, dotdot);
    /* the root is cluster 0 in a ".." entry, FAT32's too */
    vvfat_dirent_set_cluster(e, s->nodes[idx].parent == 0 ? 0 :
                             s->nodes[s->nodes[idx].parent].first_cluster);
}

/* One child of directory @idx: its entries and its node. */
static int vvfat_add_child(BDRVVvfatState *s, uint32_t idx,
                           VvfatShortNames *names, const char *name,
                           const struct stat *st, Error **errp)
{
    uint8_t sn[11];
    uint32_t child, e;
    int ret;

    if (!S_ISDIR(st->st_mode) && st->st_size > INT32_MAX) {
        /* QEMU's two messages: the file, then the directory that failed */
        g_autofree char *path = g_build_filename(s->nodes[idx].path, name,
                                                 NULL);

        error_report("File %s is larger than 2GB", path);
        error_setg(errp, "Could not read directory %s", s->nodes[idx].path);
        return -EFBIG;
    }
    ret = vvfat_unique_short(names, name, sn, errp);
    if (ret < 0) {
        return ret;
    }
    vvfat_add_lfn(s, name, sn);
    e = s->n_dirents;
    vvfat_fill_short(vvfat_new_dirent(s), sn, st);
    child = vvfat_new_node(s, g_build_filename(s->nodes[idx].path, name,
                                               NULL),
                           S_ISDIR(st->st_mode), idx);
    s->nodes[child].dirent = e;
    s->nodes[child].size = S_ISDIR(st->st_mode) ? 0 : st->st_size;
    return 0;
}

/*
 * Reads directory @idx into its entries and child nodes; the entries of
 * the whole tree are bounded by the clusters the FAT type has (inv. 2).
 */
static int vvfat_read_dir(BDRVVvfatState *s, uint32_t idx, Error **errp)
{
    uint64_t max_dirents = s->geo.root_entries + (uint64_t)
        s->geo.cluster_count * (s->geo.cluster_size / sizeof(VvfatDirent));
    DIR *dir = opendir(s->nodes[idx].path);
    VvfatShortNames names;
    struct dirent *de;
    int ret = 0;

    if (!dir) {
        ret = -errno;
        error_setg(errp, "Could not read directory %s", s->nodes[idx].path);
        return ret;
    }
    vvfat_short_names_init(&names);
    s->nodes[idx].dir_first = s->n_dirents;
    if (idx == 0) {
        VvfatDirent *e = vvfat_new_dirent(s);

        memcpy(e->name, s->label, VVFAT_LABEL_LEN);
        e->attributes = VVFAT_ATTR_VOLUME | VVFAT_ATTR_ARCHIVE;
    } else {
        vvfat_add_dots(s, idx);
    }
    while (ret == 0 && (de = readdir(dir))) {
        g_autofree char *path = NULL;
        struct stat st;

        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
            continue;
        }
        path = g_build_filename(s->nodes[idx].path, de->d_name, NULL);
        /* symbolic links are followed; a dangling one is left out */
        if (stat(path, &st) < 0) {
            continue;
        }
        if (s->n_dirents > max_dirents) {
            vvfat_capacity_error(s, errp);
            ret = -ENOSPC;
            break;
        }
        ret = vvfat_add_child(s, idx, &names, de->d_name, &st, errp);
    }
    closedir(dir);
    vvfat_short_names_free(&names);
    s->nodes[idx].dir_count = s->n_dirents - s->nodes[idx].dir_first;
    if (ret == 0 && idx == 0 && s->geo.root_entries &&
        s->nodes[0].dir_count > s->geo.root_entries) {
        /* QEMU's two messages: the cause, then what failed */
        error_report("Too many entries in root directory");
        error_setg(errp, "Could not read directory %s", s->nodes[0].path);
        ret = -ENOSPC;
    }
    return ret;
}

static void vvfat_set_fat(BDRVVvfatState *s, uint32_t cluster, uint32_t v)
{
    if (s->geo.fat_type == 32) {
        vvfat_put32(s->fat + cluster * 4, v);
    } else if (s->geo.fat_type == 16) {
        vvfat_put16(s->fat + cluster * 2, v);
    } else {
        uint8_t *p = s->fat + cluster * 3 / 2;

        if (cluster & 1) {
            p[0] = (p[0] & 0x0f) | (v << 4);
            p[1] = v >> 4;
        } else {
            p[0] = v;
            p[1] = (p[1] & 0xf0) | ((v >> 8) & 0x0f);
        }
    }
}

/* The FAT: two reserved entries, then one chain per node (inv. 2). */
static void vvfat_build_fat(BDRVVvfatState *s, uint8_t media)
{
    uint32_t eoc = s->geo.fat_type == 32 ? VVFAT32_MASK :
                   s->geo.fat_type == 16 ? 0xffff : 0xfff;

    s->fat = g_malloc0((size_t)s->geo.sectors_per_fat * VVFAT_SECTOR);
    s->owner = g_new0(uint32_t, s->geo.cluster_count);
    vvfat_set_fat(s, 0, (eoc & ~0xffu) | media);
    vvfat_set_fat(s, 1, eoc);
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        const VvfatNode *n = &s->nodes[i];

        for (uint32_t k = 0; k < n->n_clusters; k++) {
            uint32_t c = n->first_cluster + k;

            vvfat_set_fat(s, c, k + 1 < n->n_clusters ? c + 1 : eoc);
            s->owner[c - VVFAT_FIRST_CLUSTER] = i + 1;
        }
    }
}

int vvfat_build_tree(BDRVVvfatState *s, const char *dir, Error **errp)
{
    int ret;

    assert(!s->n_nodes && !s->n_dirents);
    vvfat_new_node(s, g_strdup(dir), true, 0);
    s->next_cluster = VVFAT_FIRST_CLUSTER;
    ret = vvfat_read_dir(s, 0, errp);
    if (ret == 0 && !s->geo.root_entries) {
        /* FAT32: the root is a chain, the first (cluster 2) */
        ret = vvfat_take_clusters(s, 0, DIV_ROUND_UP((uint64_t)
                                  s->nodes[0].dir_count * sizeof(VvfatDirent),
                                  s->geo.cluster_size), errp);
    }
    for (uint32_t i = 1; ret == 0 && i < s->n_nodes; i++) {
        uint64_t bytes;

        if (s->nodes[i].is_dir) {
            ret = vvfat_read_dir(s, i, errp);
            if (ret < 0) {
                break;
            }
            /* inv. 3: a directory's entries fill whole clusters */
            bytes = (uint64_t)s->nodes[i].dir_count * sizeof(VvfatDirent);
            ret = vvfat_take_clusters(s, i, DIV_ROUND_UP(bytes,
                                      s->geo.cluster_size), errp);
            /* its "." entry names its own first cluster */
            vvfat_dirent_set_cluster(&s->dirents[s->nodes[i].dir_first],
                                     s->nodes[i].first_cluster);
        } else {
            ret = vvfat_take_clusters(s, i, DIV_ROUND_UP((uint64_t)
                                      s->nodes[i].size, s->geo.cluster_size),
                                      errp);
        }
    }
    if (ret == 0) {
        vvfat_build_fat(s, s->geo.floppy ? 0xf0 : 0xf8);
    }
    return ret;
}

void vvfat_free_tree(BDRVVvfatState *s)
{
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        g_free(s->nodes[i].path);
    }
    g_clear_pointer(&s->nodes, g_free);
    g_clear_pointer(&s->dirents, g_free);
    g_clear_pointer(&s->fat, g_free);
    g_clear_pointer(&s->owner, g_free);
    s->n_nodes = s->n_dirents = 0;
}

const VvfatNode *vvfat_find_cluster(const BDRVVvfatState *s,
                                    uint32_t cluster)
{
    uint32_t owner;

    if (cluster < VVFAT_FIRST_CLUSTER || cluster >= s->next_cluster) {
        return NULL;
    }
    owner = s->owner[cluster - VVFAT_FIRST_CLUSTER];
    /* inv. 2: every cluster below next_cluster has its one owner */
    assert(owner > 0 && owner <= s->n_nodes);
    return &s->nodes[owner - 1];
}
