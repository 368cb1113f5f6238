/*
 * vvfat: a FAT12/16/32 file system, as a guest left it, parsed into a tree
 * of files and directories (block/vvfat.h, inv. 7), for the rw commit.
 *
 * The parser trusts nothing it reads: every cluster number is checked
 * against the volume, every cluster may belong to one chain only (which
 * catches loops and cross-links and bounds the work by the volume's
 * clusters), a file's chain must hold its size, and a name must be one a
 * host directory can take without leaving it.  A tree that fails any of
 * these is "not consistent": the guest may be in the middle of an update
 * (a FAT written before the directory entry that uses it), so the caller
 * waits for the next write rather than carry half an update to the host.
 * It reads through a callback so that the unit tests can feed it images
 * of their own (tests/unit/test-vvfat-parse.c).
 */
#include "block/vvfat.h"

#define VVFAT_DELETED           0xe5
#define VVFAT_LFN_SEQ_MASK      0x1f
/*
 * The most files and directories a tree may have: the volume alone would
 * let a guest fill its 504 MiB with empty files' entries (16 million), and
 * the commit holds two trees in memory at once.
 */
#define VVFAT_MAX_ENTRIES       (1u << 20)

typedef struct VvfatParser {
    const VvfatLayout *lay;
    VvfatReadFn read;
    void *opaque;
    uint8_t *fat;
    uint32_t max_cluster;       /* one past the last valid cluster */
    uint8_t *used;              /* a bit per cluster: in some chain */
    VvfatTree *t;
    uint32_t chains_cap;
    uint32_t entries_cap;
    char *why;
} VvfatParser;

static uint32_t vvfat_fat_get(const VvfatParser *p, uint32_t c)
{
    if (p->lay->fat_type == 32) {
        const uint8_t *b = p->fat + c * 4;

        /* the top four bits are reserved: not the chain's */
        return (b[0] | (b[1] << 8) | (b[2] << 16) |
                ((uint32_t)b[3] << 24)) & VVFAT32_MASK;
    } else if (p->lay->fat_type == 16) {
        return p->fat[c * 2] | (p->fat[c * 2 + 1] << 8);
    } else {
        const uint8_t *b = p->fat + c * 3 / 2;
        uint32_t v = b[0] | (b[1] << 8);

        return c & 1 ? v >> 4 : v & 0xfff;
    }
}

static int vvfat_fail(VvfatParser *p, const char *fmt, ...)
    G_GNUC_PRINTF(2, 3);

static int vvfat_fail(VvfatParser *p, const char *fmt, ...)
{
    va_list ap;

    if (!p->why) {
        va_start(ap, fmt);
        p->why = g_strdup_vprintf(fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* Follows the chain from @first into t->chains; sets *@start, *@n. */
static int vvfat_follow(VvfatParser *p, uint32_t first, uint32_t *start,
                        uint32_t *n)
{
    uint32_t eoc = p->lay->fat_type == 32 ? 0x0ffffff8 :
                   p->lay->fat_type == 16 ? 0xfff8 : 0xff8;
    uint32_t c = first;

    *start = p->t->n_chains;
    *n = 0;
    for (;;) {
        uint32_t next;

        if (c < VVFAT_FIRST_CLUSTER || c >= p->max_cluster) {
            return vvfat_fail(p, "cluster %u is not a data cluster "
                              "(chain from %u)", c, first);
        }
        if (vvfat_bit(p->used, c)) {
            return vvfat_fail(p, "cluster %u is in two chains or twice in "
                              "one (a loop or a cross-link, chain from %u)",
                              c, first);
        }
        vvfat_set_bit(p->used, c);
        /* bounded: each cluster enters a chain once */
        if (p->t->n_chains == p->chains_cap) {
            p->chains_cap = p->chains_cap * 2 + 64;
            p->t->chains = g_renew(uint32_t, p->t->chains, p->chains_cap);
        }
        p->t->chains[p->t->n_chains++] = c;
        (*n)++;
        next = vvfat_fat_get(p, c);
        if (next >= eoc) {
            return 0;
        }
        c = next;
    }
}

static VvfatEntry *vvfat_new_entry(VvfatParser *p)
{
    VvfatTree *t = p->t;

    if (t->n == p->entries_cap) {
        p->entries_cap = p->entries_cap * 2 + 16;
        t->e = g_renew(VvfatEntry, t->e, p->entries_cap);
    }
    memset(&t->e[t->n], 0, sizeof(VvfatEntry));
    t->e[t->n].match = -1;
    return &t->e[t->n++];
}

/* A long name being gathered, last piece first. */
typedef struct VvfatLfn {
    uint16_t u[VVFAT_LFN_CHARS * VVFAT_LFN_SEQ_MASK + 1];
    int next;                   /* the sequence number expected, 0: none */
    int pieces;
    uint8_t sum;
} VvfatLfn;

static void vvfat_lfn_piece(VvfatLfn *l, const uint8_t *e)
{
    static const uint8_t pos[VVFAT_LFN_CHARS] = {
        1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30
    };
    int seq = e[0] & VVFAT_LFN_SEQ_MASK;

    if (e[0] & VVFAT_LFN_LAST) {
        l->pieces = seq;
        l->next = seq;
        l->sum = e[13];
    } else if (seq != l->next || e[13] != l->sum) {
        /* an orphan piece: the name falls back to the 8.3 one */
        l->next = 0;
        return;
    }
    if (seq == 0) {
        l->next = 0;
        return;
    }
    for (int i = 0; i < VVFAT_LFN_CHARS; i++) {
        l->u[(seq - 1) * VVFAT_LFN_CHARS + i] = e[pos[i]] |
                                                (e[pos[i] + 1] << 8);
    }
    l->next = seq - 1;
    /* next == 0 now means complete only after piece 1 */
    if (seq == 1) {
        l->next = -1;
    }
}

/* The host name of short entry @e: its long name if whole, else 8.3. */
static char *vvfat_entry_name(VvfatLfn *l, const uint8_t *e)
{
    char buf[13];
    int n = 0, len = 0;

    if (l->next == -1 && l->sum == vvfat_lfn_checksum(e)) {
        int max = l->pieces * VVFAT_LFN_CHARS;

        while (len < max && l->u[len] != 0 && l->u[len] != 0xffff) {
            len++;
        }
        l->next = 0;
        /* NULL for an unpaired surrogate: the caller refuses it */
        return g_utf16_to_utf8(l->u, len, NULL, NULL, NULL);
    }
    l->next = 0;
    /* QEMU gives an 8.3-only name to the host in lower case */
    for (int i = 0; i < 8 && e[i] != ' '; i++) {
        uint8_t c = i == 0 && e[0] == 0x05 ? VVFAT_DELETED : e[i];

        buf[n++] = c < 0x80 ? g_ascii_tolower(c) : '_';
    }
    if (e[8] != ' ') {
        buf[n++] = '.';
        for (int i = 8; i < 11 && e[i] != ' '; i++) {
            buf[n++] = e[i] < 0x80 ? g_ascii_tolower(e[i]) : '_';
        }
    }
    buf[n] = 0;
    return g_strdup(buf);
}

static bool vvfat_name_ok(const char *name)
{
    return name[0] && strcmp(name, ".") && strcmp(name, "..") &&
           !strchr(name, '/') && g_utf8_validate(name, -1, NULL);
}

/* Directory @dir's path for a message, built in *@path when first due. */
static const char *vvfat_where(VvfatParser *p, uint32_t dir, char **path)
{
    if (!*path) {
        *path = vvfat_tree_path(p->t, dir, "");
    }
    return *path;
}

/* Reads the entries of directory entry @dir from @buf (@len bytes). */
static int vvfat_parse_dir(VvfatParser *p, uint32_t dir, const uint8_t *buf,
                           size_t len)
{
    g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);
    g_autofree VvfatLfn *l = g_new0(VvfatLfn, 1);

    for (size_t off = 0; off + sizeof(VvfatDirent) <= len;
         off += sizeof(VvfatDirent)) {
        const uint8_t *e = buf + off;
        uint8_t attr = e[11];
        g_autofree char *path = NULL;
        VvfatEntry *ent;
        char *name;
        int ret;

        if (e[0] == 0) {
            break;
        }
        if (e[0] == VVFAT_DELETED) {
            l->next = 0;
            continue;
        }
        if (attr == VVFAT_ATTR_LFN) {
            vvfat_lfn_piece(l, e);
            continue;
        }
        if ((attr & VVFAT_ATTR_VOLUME) ||
            (dir != 0 && e[0] == '.' &&
             (!memcmp(e, ".          ", 11) ||
              !memcmp(e, "..         ", 11)))) {
            l->next = 0;
            continue;
        }
        name = vvfat_entry_name(l, e);
        if (!name || !vvfat_name_ok(name)) {
            g_autofree char *shown = name ? g_strescape(name, NULL)
                                          : g_strdup("(no UTF-16)");

            g_free(name);
            return vvfat_fail(p, "entry %zu of %s/ is named '%s', which a "
                              "host directory cannot take",
                              off / sizeof(VvfatDirent),
                              vvfat_where(p, dir, &path), shown);
        }
        if (g_hash_table_contains(names, name)) {
            ret = vvfat_fail(p, "%s/%s is there twice",
                             vvfat_where(p, dir, &path), name);
            g_free(name);
            return ret;
        }
        if (p->t->n >= VVFAT_MAX_ENTRIES) {
            g_free(name);
            return vvfat_fail(p, "more than %u files and directories",
                              VVFAT_MAX_ENTRIES);
        }
        ent = vvfat_new_entry(p);
        ent->parent = dir;
        ent->name = name;
        g_hash_table_add(names, name);
        ent->is_dir = attr & VVFAT_ATTR_DIR;
        ent->attr = attr;
        ent->mtime = e[22] | (e[23] << 8);
        ent->mdate = e[24] | (e[25] << 8);
        ent->cluster = e[26] | (e[27] << 8);
        if (p->lay->fat_type == 32) {
            ent->cluster |= (uint32_t)(e[20] | (e[21] << 8)) << 16;
        }
        ent->size = ent->is_dir ? 0 : e[28] | (e[29] << 8) | (e[30] << 16) |
                                      ((uint32_t)e[31] << 24);
        if (ent->is_dir && ent->cluster == 0) {
            return vvfat_fail(p, "directory %s/%s has no cluster",
                              vvfat_where(p, dir, &path), name);
        }
        if (!ent->is_dir && (ent->size == 0) != (ent->cluster == 0)) {
            return vvfat_fail(p, "file %s/%s: size %u, first cluster %u",
                              vvfat_where(p, dir, &path), name, ent->size,
                              ent->cluster);
        }
        if (ent->cluster) {
            uint32_t start, n;

            ret = vvfat_follow(p, ent->cluster, &start, &n);
            if (ret < 0) {
                return ret;
            }
            /* vvfat_follow may move t->e: no pointer is kept across */
            ent = &p->t->e[p->t->n - 1];
            ent->chain = start;
            ent->n_chain = n;
            if (!ent->is_dir &&
                n != DIV_ROUND_UP((uint64_t)ent->size,
                                  p->lay->cluster_size)) {
                return vvfat_fail(p, "file %s/%s: %u bytes in %u clusters",
                                  vvfat_where(p, dir, &path), name,
                                  ent->size, n);
            }
        }
    }
    return 0;
}

/* Reads directory @i's entries (the root's, or its chain's clusters). */
static int vvfat_read_dir_entries(VvfatParser *p, uint32_t i)
{
    const VvfatLayout *lay = p->lay;
    g_autofree uint8_t *buf = NULL;
    size_t len;
    int ret;

    if (i == 0 && !lay->root_cluster) {
        len = (size_t)lay->root_entries * sizeof(VvfatDirent);
        buf = g_malloc(len);
        ret = p->read(p->opaque, lay->root_offset, buf, len);
    } else {
        VvfatEntry *d = &p->t->e[i];

        /* bounded by the volume: each cluster is in one chain (inv. 7) */
        len = (size_t)d->n_chain * lay->cluster_size;
        buf = g_malloc(len);
        ret = 0;
        for (uint32_t k = 0; ret == 0 && k < d->n_chain; k++) {
            uint32_t c = p->t->chains[d->chain + k];

            ret = p->read(p->opaque, lay->data_offset + (uint64_t)
                          (c - VVFAT_FIRST_CLUSTER) * lay->cluster_size,
                          buf + (size_t)k * lay->cluster_size,
                          lay->cluster_size);
        }
    }
    if (ret < 0) {
        return ret;
    }
    return vvfat_parse_dir(p, i, buf, len);
}

int vvfat_parse_tree(const VvfatLayout *lay, VvfatReadFn read, void *opaque,
                     VvfatTree **tree, char **why)
{
    VvfatParser p = { .lay = lay, .read = read, .opaque = opaque };
    uint32_t fat_entries = (uint64_t)lay->fat_bytes * 8 / lay->fat_type;
    int ret;

    p.max_cluster = MIN((uint64_t)lay->clusters + VVFAT_FIRST_CLUSTER,
                        fat_entries);
    p.fat = g_malloc(lay->fat_bytes);
    p.used = g_malloc0(DIV_ROUND_UP(p.max_cluster, 8));
    p.t = g_new0(VvfatTree, 1);
    vvfat_new_entry(&p)->is_dir = true;
    p.t->e[0].name = g_strdup("");
    ret = read(opaque, lay->fat_offset, p.fat, lay->fat_bytes);
    if (ret == 0 && lay->root_cluster) {
        /* FAT32: the root is a chain like any directory's (inv. 7) */
        VvfatEntry *root = &p.t->e[0];

        root->cluster = lay->root_cluster;
        ret = vvfat_follow(&p, lay->root_cluster, &root->chain,
                           &root->n_chain);
    }
    /* breadth first: a directory's children come after it (inv. 7) */
    for (uint32_t i = 0; ret == 0 && i < p.t->n; i++) {
        if (p.t->e[i].is_dir) {
            ret = vvfat_read_dir_entries(&p, i);
        }
    }
    g_free(p.fat);
    g_free(p.used);
    if (ret < 0) {
        vvfat_tree_free(p.t);
        *tree = NULL;
        *why = p.why ? p.why : g_strdup_printf("read error: %s",
                                               strerror(-ret));
        return ret;
    }
    *tree = p.t;
    *why = NULL;
    return 0;
}

void vvfat_tree_free(VvfatTree *t)
{
    if (!t) {
        return;
    }
    for (uint32_t i = 0; i < t->n; i++) {
        g_free(t->e[i].name);
        g_free(t->e[i].host_name);
    }
    g_free(t->e);
    g_free(t->chains);
    g_free(t);
}

char *vvfat_tree_path(const VvfatTree *t, uint32_t i, const char *root)
{
    GPtrArray *parts = g_ptr_array_new();
    GString *path = g_string_new(root);
    char *ret;

    /* inv. 7: a parent has a lower index, so this ends at the root */
    while (i != 0) {
        assert(t->e[i].parent < i);
        g_ptr_array_add(parts, t->e[i].host_name ? t->e[i].host_name
                                                 : t->e[i].name);
        i = t->e[i].parent;
    }
    for (guint k = parts->len; k > 0; k--) {
        g_string_append_c(path, '/');
        g_string_append(path, g_ptr_array_index(parts, k - 1));
    }
    g_ptr_array_free(parts, true);
    ret = g_string_free(path, false);
    return ret;
}
