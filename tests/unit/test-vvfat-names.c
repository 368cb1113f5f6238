/*
 * vvfat's 8.3 names (block/vvfat-dir.c) as QEMU 7.2 makes them, seen in
 * qemu-img's images: characters an 8.3 name cannot hold dropped, upper
 * case, base to the first dot and extension from the last, a ~N tail when
 * something was lost or the name clashes; the long-name checksum; and a
 * small tree built into entries, where clashes get ~1, ~2 ... in turn and
 * a tree larger than the volume is refused.
 */
#include "block/vvfat.h"

#include <glib/gstdio.h>

/* Checks @name's 8.3 name and whether a tail is due. */
static void check_short(const char *name, const char *want, bool lossy)
{
    uint8_t sn[11];

    g_assert_cmpint(vvfat_short_name(name, sn), ==, lossy);
    g_assert_cmpmem(sn, 11, want, 11);
}

static void test_short_names(void)
{
    check_short("UPPER.TXT", "UPPER   TXT", false);
    /* case alone loses nothing: the long name keeps it */
    check_short("abc.TXT", "ABC     TXT", false);
    check_short("MixedCas", "MIXEDCAS   ", false);
    check_short("abcdefgh", "ABCDEFGH   ", false);
    check_short("trail.", "TRAIL      ", false);
    check_short("ab~1", "AB~1       ", false);
    check_short("a!#$%&.txt", "A!#$%&  TXT", false);
    /* too long, dropped characters, hidden, several dots */
    check_short("abcdefghi.txt", "ABCDEFGHTXT", true);
    check_short("x.TXTX", "X       TXT", true);
    check_short("x+y.dat", "XY      DAT", true);
    check_short("semi;colon", "SEMICOLO   ", true);
    check_short(" lead", "LEAD       ", true);
    check_short(".hidden", "HIDDEN     ", true);
    check_short("ab.cd.ef", "AB      EF ", true);
    check_short("\xc3\x9cmlaut.txt", "MLAUT   TXT", true);
    check_short("+++", "           ", true);
}

static void check_tail(const char *base, unsigned n, const char *want)
{
    uint8_t sn[11];

    memcpy(sn, base, 11);
    vvfat_short_name_tail(sn, n);
    g_assert_cmpmem(sn, 11, want, 11);
}

static void test_tails(void)
{
    check_tail("LONGNAMETXT", 1, "LONGNA~1TXT");
    check_tail("LONGNAMETXT", 10, "LONGN~10TXT");
    check_tail("LONGNAMETXT", 123456, "L~123456TXT");
    /* a short base keeps all of itself */
    check_tail("MLAUT   TXT", 1, "MLAUT~1 TXT");
    check_tail("           ", 1, "~1         ");
}

static void test_checksum(void)
{
    /* seen in QEMU's image: LONGFI~1TXT's long-name entries carry 0xd4 */
    g_assert_cmphex(vvfat_lfn_checksum((const uint8_t *)"LONGFI~1TXT"), ==,
                    0xd4);
    g_assert_cmphex(vvfat_lfn_checksum((const uint8_t *)"A       TXT"), ==,
                    0x5d);
}

/* A floppy's volume over @dir, its tree built; returns the result. */
static int build(BDRVVvfatState *s, const char *dir, Error **errp)
{
    memset(s, 0, sizeof(*s));
    s->geo = (VvfatGeometry) {
        .fat_type = 12, .floppy = true, .sectors_per_fat = 1,
        .volume_sectors = 2880, .cluster_count = 177,
        .sectors_per_cluster = VVFAT_SECTORS_PER_CLUSTER,
        .cluster_size = VVFAT_CLUSTER_SIZE,
        .reserved_sectors = VVFAT_RESERVED_SECTORS,
        .root_entries = VVFAT_ROOT_ENTRIES,
    };
    memcpy(s->label, VVFAT_DEFAULT_LABEL, VVFAT_LABEL_LEN + 1);
    return vvfat_build_tree(s, dir, errp);
}

static bool has_short(BDRVVvfatState *s, const char *want)
{
    for (uint32_t i = 0; i < s->n_dirents; i++) {
        if (s->dirents[i].attributes != VVFAT_ATTR_LFN &&
            !memcmp(s->dirents[i].name, want, 11)) {
            return true;
        }
    }
    return false;
}

static void put(const char *dir, const char *name, size_t size)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autofree char *data = g_malloc0(size + 1);

    g_assert_true(g_file_set_contents(path, data, size, NULL));
}

static const char *const names[] = {
    "longname_one.txt", "longname_two.txt", "longname_three.txt",
    "abc.TXT", "ABC.txt", "big",
};

static void test_tree_clashes(void)
{
    g_autofree char *dir = g_dir_make_tmp("vvfat-XXXXXX", NULL);
    BDRVVvfatState s;
    Error *err = NULL;

    put(dir, "longname_one.txt", 1);
    put(dir, "longname_two.txt", 8192);
    put(dir, "longname_three.txt", 8193);
    put(dir, "abc.TXT", 0);
    put(dir, "ABC.txt", 0);
    g_assert_cmpint(build(&s, dir, &err), ==, 0);
    /* readdir's order decides who gets which number: all three are there */
    g_assert_true(has_short(&s, "LONGNA~1TXT"));
    g_assert_true(has_short(&s, "LONGNA~2TXT"));
    g_assert_true(has_short(&s, "LONGNA~3TXT"));
    /* the first of the two in readdir's order keeps the plain name */
    g_assert_true(has_short(&s, "ABC     TXT"));
    g_assert_true(has_short(&s, "ABC~1   TXT"));
    /*
     * the label, then per name its long-name pieces (13 characters each)
     * and its short entry: 2 + 1 for the long names, 1 + 1 for abc.TXT
     */
    g_assert_cmpuint(s.nodes[0].dir_count, ==, 1 + 3 * 3 + 2 * 2);
    /* 1 + 1 + 2 clusters, the empty files none */
    g_assert_cmpuint(s.next_cluster, ==, VVFAT_FIRST_CLUSTER + 4);
    for (uint32_t i = 1; i < s.n_nodes; i++) {
        const VvfatNode *n = &s.nodes[i];

        for (uint32_t c = 0; c < n->n_clusters; c++) {
            g_assert_true(vvfat_find_cluster(&s, n->first_cluster + c) == n);
        }
    }
    g_assert_null(vvfat_find_cluster(&s, s.next_cluster));
    vvfat_free_tree(&s);

    put(dir, "big", 178 * VVFAT_CLUSTER_SIZE);
    g_assert_cmpint(build(&s, dir, &err), <, 0);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Directory does not fit in FAT12 (capacity 1.44 MB)");
    error_free(err);
    vvfat_free_tree(&s);
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autofree char *path = g_build_filename(dir, names[i], NULL);

        g_assert_cmpint(g_remove(path), ==, 0);
    }
    g_assert_cmpint(g_rmdir(dir), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vvfat/short-names", test_short_names);
    g_test_add_func("/vvfat/tails", test_tails);
    g_test_add_func("/vvfat/lfn-checksum", test_checksum);
    g_test_add_func("/vvfat/tree-clashes", test_tree_clashes);
    return g_test_run();
}
