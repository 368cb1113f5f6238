/*
 * vvfat's FAT tree parser (block/vvfat-parse.c), which decides what of a
 * guest's writes reaches the host with rw: small FAT16 and FAT12 volumes
 * (and a FAT32 one, its root a chain) built here entry by entry, a
 * consistent one read into the expected tree
 * (long names, 8.3 names in lower case, chains, breadth-first order), and
 * each way a tree can be inconsistent or hostile refused with its reason:
 * a chain that loops, two chains that share a cluster, a free or
 * out-of-range cluster in a chain, a size its chain does not hold, names
 * with '/' or "..", a name twice; a read error passed up.  The short
 * entry's attributes and modification time come with each entry (the
 * commit carries them), hidden and system ones refusing nothing.
 */
#include "block/vvfat.h"

#define CLUSTERS        20
#define ROOT_ENTRIES    16

typedef struct Img {
    VvfatLayout lay;
    uint8_t *buf;
    size_t len;
    uint32_t root_next;         /* next free root entry */
    bool fail_reads;
} Img;

static int img_read(void *opaque, uint64_t off, void *buf, size_t len)
{
    Img *img = opaque;

    if (img->fail_reads || off > img->len || len > img->len - off) {
        return -EIO;
    }
    memcpy(buf, img->buf + off, len);
    return 0;
}

static void img_init(Img *img, int fat_type)
{
    img->lay = (VvfatLayout) {
        .fat_type = fat_type, .fat_offset = 0, .fat_bytes = 512,
        .root_offset = 1024, .root_entries = ROOT_ENTRIES,
        .data_offset = 1024 + ROOT_ENTRIES * 32, .clusters = CLUSTERS,
        .cluster_size = VVFAT_CLUSTER_SIZE,
    };
    img->len = img->lay.data_offset + CLUSTERS * VVFAT_CLUSTER_SIZE;
    img->buf = g_malloc0(img->len);
    img->root_next = 0;
    img->fail_reads = false;
}

static void set_fat(Img *img, uint32_t c, uint32_t v)
{
    uint8_t *p;

    if (img->lay.fat_type == 32) {
        vvfat_put32(img->buf + c * 4, v);
        return;
    }
    if (img->lay.fat_type == 16) {
        vvfat_put16(img->buf + c * 2, v);
        return;
    }
    p = img->buf + c * 3 / 2;
    if (c & 1) {
        p[0] = (p[0] & 0x0f) | (v << 4);
        p[1] = v >> 4;
    } else {
        p[0] = v;
        p[1] = (p[1] & 0xf0) | ((v >> 8) & 0x0f);
    }
}

/* A chain of @n clusters from @first, ending with end-of-chain. */
static void chain(Img *img, uint32_t first, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        set_fat(img, first + k, k + 1 < n ? first + k + 1 : 0xffff);
    }
}

/* The entry slot @i of directory cluster @dir (0: the root). */
static uint8_t *slot(Img *img, uint32_t dir, uint32_t i)
{
    uint64_t base = dir ? img->lay.data_offset + (uint64_t)(dir - 2) *
                          VVFAT_CLUSTER_SIZE : img->lay.root_offset;

    return img->buf + base + i * 32;
}

static void put_short(uint8_t *e, const char *sn, uint8_t attr,
                      uint32_t cluster, uint32_t size)
{
    memcpy(e, sn, 11);
    e[11] = attr;
    vvfat_put16(e + 26, cluster);
    vvfat_put32(e + 28, size);
}

/* A one-piece long name (up to 13 ASCII characters) for @sn. */
static void put_lfn(uint8_t *e, const char *name, const char *sn)
{
    static const uint8_t pos[13] = {
        1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30
    };
    size_t len = strlen(name);

    e[0] = 1 | VVFAT_LFN_LAST;
    e[11] = VVFAT_ATTR_LFN;
    e[13] = vvfat_lfn_checksum((const uint8_t *)sn);
    for (size_t i = 0; i < 13; i++) {
        vvfat_put16(e + pos[i], i < len ? (uint8_t)name[i]
                                        : i == len ? 0 : 0xffff);
    }
}

/* Root: label, a.txt (8.3, 100 bytes), "Long Name" (9000), SUB/x. */
static void good_tree(Img *img, int fat_type)
{
    img_init(img, fat_type);
    set_fat(img, 0, 0xfff8);
    set_fat(img, 1, 0xffff);
    put_short(slot(img, 0, 0), "QEMU VVFAT ", VVFAT_ATTR_VOLUME, 0, 0);
    /* read-only, hidden, system: the tree is no less consistent */
    put_short(slot(img, 0, 1), "A       TXT", VVFAT_ATTR_ARCHIVE |
              VVFAT_ATTR_READONLY | 0x02 | 0x04, 2, 100);
    /* 2003-04-05 06:07:08 */
    vvfat_put16(slot(img, 0, 1) + 22, (6 << 11) | (7 << 5) | 4);
    vvfat_put16(slot(img, 0, 1) + 24, (23 << 9) | (4 << 5) | 5);
    chain(img, 2, 1);
    put_short(slot(img, 0, 2), "GONE    TXT", VVFAT_ATTR_ARCHIVE, 9, 1);
    slot(img, 0, 2)[0] = 0xe5;
    put_lfn(slot(img, 0, 3), "Long Name", "LONGNA~1   ");
    put_short(slot(img, 0, 4), "LONGNA~1   ", VVFAT_ATTR_ARCHIVE, 3, 9000);
    chain(img, 3, 2);
    put_short(slot(img, 0, 5), "SUB        ", VVFAT_ATTR_DIR, 5, 0);
    chain(img, 5, 1);
    put_short(slot(img, 5, 0), ".          ", VVFAT_ATTR_DIR, 5, 0);
    put_short(slot(img, 5, 1), "..         ", VVFAT_ATTR_DIR, 0, 0);
    put_short(slot(img, 5, 2), "X          ", VVFAT_ATTR_ARCHIVE, 0, 0);
    img->root_next = 6;
}

static int parse(Img *img, VvfatTree **t, char **why)
{
    return vvfat_parse_tree(&img->lay, img_read, img, t, why);
}

static void check_good(int fat_type)
{
    Img img;
    VvfatTree *t;
    char *why, *path;

    good_tree(&img, fat_type);
    g_assert_cmpint(parse(&img, &t, &why), ==, 0);
    g_assert_null(why);
    g_assert_cmpuint(t->n, ==, 5);
    g_assert_cmpstr(t->e[1].name, ==, "a.txt");
    g_assert_cmpuint(t->e[1].size, ==, 100);
    g_assert_cmpuint(t->e[1].n_chain, ==, 1);
    g_assert_cmphex(t->e[1].attr, ==, 0x27);
    g_assert_cmphex(t->e[1].mtime, ==, (6 << 11) | (7 << 5) | 4);
    g_assert_cmphex(t->e[1].mdate, ==, (23 << 9) | (4 << 5) | 5);
    g_assert_cmphex(t->e[3].attr, ==, VVFAT_ATTR_DIR);
    g_assert_cmpstr(t->e[2].name, ==, "Long Name");
    g_assert_cmpuint(t->e[2].n_chain, ==, 2);
    g_assert_cmpuint(t->chains[t->e[2].chain + 1], ==, 4);
    g_assert_cmpstr(t->e[3].name, ==, "sub");
    g_assert_true(t->e[3].is_dir);
    /* breadth first: the subdirectory's child after the root's */
    g_assert_cmpstr(t->e[4].name, ==, "x");
    g_assert_cmpuint(t->e[4].parent, ==, 3);
    g_assert_cmpuint(t->e[4].cluster, ==, 0);
    path = vvfat_tree_path(t, 4, "/top");
    g_assert_cmpstr(path, ==, "/top/sub/x");
    g_free(path);
    vvfat_tree_free(t);
    g_free(img.buf);
}

static void test_good_fat16(void)
{
    check_good(16);
}

static void test_good_fat12(void)
{
    check_good(12);
}

/* The good tree changed by @change must be refused saying @want. */
static void check_refused(void (*change)(Img *img), const char *want)
{
    Img img;
    VvfatTree *t = (VvfatTree *)&img;
    char *why;

    good_tree(&img, 16);
    change(&img);
    g_assert_cmpint(parse(&img, &t, &why), ==, -EINVAL);
    g_assert_null(t);
    g_assert_nonnull(strstr(why, want));
    g_free(why);
    g_free(img.buf);
}

static void loop(Img *img)
{
    set_fat(img, 4, 3);
}

static void cross_link(Img *img)
{
    put_short(slot(img, 0, img->root_next), "B       TXT",
              VVFAT_ATTR_ARCHIVE, 4, 10);
}

static void free_in_chain(Img *img)
{
    set_fat(img, 3, 0);
}

static void past_the_volume(Img *img)
{
    set_fat(img, 3, CLUSTERS + 2);
}

static void size_past_chain(Img *img)
{
    vvfat_put32(slot(img, 0, 1) + 28, 8193);
}

static void chain_past_size(Img *img)
{
    vvfat_put32(slot(img, 0, 4) + 28, 100);
}

static void slash_name(Img *img)
{
    memcpy(slot(img, 0, 1), "A/B     TXT", 11);
}

static void dotdot_in_root(Img *img)
{
    memcpy(slot(img, 0, 5), "..         ", 11);
}

static void lfn_slash(Img *img)
{
    put_lfn(slot(img, 0, 3), "../evil", "LONGNA~1   ");
}

static void twice(Img *img)
{
    put_short(slot(img, 0, img->root_next), "A       TXT",
              VVFAT_ATTR_ARCHIVE, 0, 0);
}

static void dir_without_cluster(Img *img)
{
    put_short(slot(img, 0, img->root_next), "D          ",
              VVFAT_ATTR_DIR, 0, 0);
}

static void test_refused(void)
{
    check_refused(loop, "a loop or a cross-link");
    check_refused(cross_link, "a loop or a cross-link");
    check_refused(free_in_chain, "cluster 0 is not a data cluster");
    check_refused(past_the_volume, "is not a data cluster");
    check_refused(size_past_chain, "8193 bytes in 1 clusters");
    check_refused(chain_past_size, "100 bytes in 2 clusters");
    check_refused(slash_name, "named 'a/b.txt'");
    check_refused(dotdot_in_root, "named '..'");
    check_refused(lfn_slash, "named '../evil'");
    check_refused(twice, "/a.txt is there twice");
    check_refused(dir_without_cluster, "has no cluster");
}

/* A long name whose checksum is not its 8.3 entry's: the 8.3 name. */
static void test_orphan_lfn(void)
{
    Img img;
    VvfatTree *t;
    char *why;

    good_tree(&img, 16);
    put_lfn(slot(&img, 0, 3), "Long Name", "OTHER      ");
    g_assert_cmpint(parse(&img, &t, &why), ==, 0);
    g_assert_cmpstr(t->e[2].name, ==, "longna~1");
    vvfat_tree_free(t);
    g_free(img.buf);
}

/*
 * FAT32: the root is a chain (clusters 2 then 6, the label and a.txt in
 * the first, SUB in the second), FAT entries' top four bits are not the
 * chain's, an entry's first cluster has a high half.
 */
static void fat32_tree(Img *img)
{
    img_init(img, 32);
    img->lay.root_cluster = 2;
    img->lay.root_entries = 0;
    img->lay.data_offset = 512;
    img->len = img->lay.data_offset + CLUSTERS * VVFAT_CLUSTER_SIZE;
    set_fat(img, 0, 0x0ffffff8);
    set_fat(img, 1, 0xffffffff);
    set_fat(img, 2, 0xf0000006);
    set_fat(img, 6, 0x0fffffff);
    put_short(slot(img, 2, 0), "QEMU VVFAT ", VVFAT_ATTR_VOLUME, 0, 0);
    put_short(slot(img, 2, 1), "A       TXT", VVFAT_ATTR_ARCHIVE, 3, 100);
    set_fat(img, 3, 0xfffffff8);
    /* deleted entries to the end of the first cluster: no end mark */
    for (uint32_t i = 2; i < VVFAT_CLUSTER_SIZE / 32; i++) {
        slot(img, 2, i)[0] = 0xe5;
    }
    put_short(slot(img, 6, 0), "SUB        ", VVFAT_ATTR_DIR, 4, 0);
    set_fat(img, 4, 0x0ffffff8);
    put_short(slot(img, 4, 0), ".          ", VVFAT_ATTR_DIR, 4, 0);
    put_short(slot(img, 4, 1), "..         ", VVFAT_ATTR_DIR, 0, 0);
    put_short(slot(img, 4, 2), "X          ", VVFAT_ATTR_ARCHIVE, 5, 1);
    set_fat(img, 5, 0x0fffffff);
}

static void test_fat32(void)
{
    Img img;
    VvfatTree *t;
    char *why;

    fat32_tree(&img);
    g_assert_cmpint(parse(&img, &t, &why), ==, 0);
    g_assert_cmpuint(t->n, ==, 4);
    g_assert_cmpuint(t->e[0].n_chain, ==, 2);
    g_assert_cmpuint(t->chains[t->e[0].chain + 1], ==, 6);
    g_assert_cmpstr(t->e[1].name, ==, "a.txt");
    g_assert_cmpuint(t->e[1].cluster, ==, 3);
    g_assert_cmpstr(t->e[2].name, ==, "sub");
    g_assert_cmpstr(t->e[3].name, ==, "x");
    g_assert_cmpuint(t->e[3].parent, ==, 2);
    vvfat_tree_free(t);

    /* the high half: cluster 0x10003 is past the volume */
    vvfat_put16(slot(&img, 2, 1) + 20, 1);
    g_assert_cmpint(parse(&img, &t, &why), ==, -EINVAL);
    g_assert_nonnull(strstr(why, "cluster 65539 is not a data cluster"));
    g_free(why);
    vvfat_put16(slot(&img, 2, 1) + 20, 0);

    /* a file on the root's chain, and the root's chain looping */
    put_short(slot(&img, 2, 2), "B       TXT", VVFAT_ATTR_ARCHIVE, 6, 1);
    g_assert_cmpint(parse(&img, &t, &why), ==, -EINVAL);
    g_assert_nonnull(strstr(why, "cluster 6 is in two chains"));
    g_free(why);
    slot(&img, 2, 2)[0] = 0xe5;
    set_fat(&img, 6, 2);
    g_assert_cmpint(parse(&img, &t, &why), ==, -EINVAL);
    g_assert_nonnull(strstr(why, "chain from 2"));
    g_free(why);
    g_free(img.buf);
}

static void test_read_error(void)
{
    Img img;
    VvfatTree *t;
    char *why;

    good_tree(&img, 16);
    img.fail_reads = true;
    g_assert_cmpint(parse(&img, &t, &why), ==, -EIO);
    g_assert_nonnull(strstr(why, "read error"));
    g_free(why);
    g_free(img.buf);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vvfat-parse/good-fat16", test_good_fat16);
    g_test_add_func("/vvfat-parse/good-fat12", test_good_fat12);
    g_test_add_func("/vvfat-parse/refused", test_refused);
    g_test_add_func("/vvfat-parse/fat32", test_fat32);
    g_test_add_func("/vvfat-parse/orphan-lfn", test_orphan_lfn);
    g_test_add_func("/vvfat-parse/read-error", test_read_error);
    return g_test_run();
}
