/*
 * block/qcow2-refcount.c and block/qcow2-cache.c in isolation: a
 * BDRVQcow2State built by hand over a file node holding a minimal qcow2
 * image (header, one-cluster refcount table, one refcount block).  The
 * file is then read back directly and its refcounts decoded
 * independently, for every refcount width.
 */
#include "block/qcow2.h"
#include "util/qdict.h"

static char *test_dir;

typedef struct TestImage {
    char *path;
    BlockDriverState *file_bs;
    BdrvChild child;
    BlockDriverState bs;
    BDRVQcow2State s;
    /* what the test itself gave refcounts to, by cluster index */
    GHashTable *expected;
} TestImage;

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8) {
        p[i] = v;
    }
}

static uint64_t get_be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;

    for (int i = 0; i < bytes; i++) {
        v = (v << 8) | p[i];
    }
    return v;
}

static uint8_t *read_file(TestImage *t, gsize *len)
{
    gchar *data;

    g_assert_true(g_file_get_contents(t->path, &data, len, NULL));
    return (uint8_t *)data;
}

/* The spec's packing, decoded without the driver's helpers. */
static uint64_t decode_refcount(const uint8_t *block, int order, uint64_t i)
{
    int bits = 1 << order;

    if (bits < 8) {
        return (block[i * bits / 8] >> (i * bits % 8)) & ((1 << bits) - 1);
    }
    return get_be(block + i * (bits / 8), bits / 8);
}

/* Refcount of @cluster as stored in the file (header -> table -> block). */
static uint64_t file_refcount(TestImage *t, const uint8_t *img, gsize len,
                              uint64_t cluster)
{
    BDRVQcow2State *s = &t->s;
    uint64_t rt_offset = get_be(img + 48, 8);
    uint64_t rt_entries = get_be(img + 56, 4) * s->cluster_size / 8;
    uint64_t idx = cluster >> s->refcount_block_bits, block;

    if (idx >= rt_entries) {
        return 0;
    }
    g_assert_cmpuint(rt_offset + idx * 8 + 8, <=, len);
    block = get_be(img + rt_offset + idx * 8, 8);
    if (!block) {
        return 0;
    }
    g_assert_cmpuint(block + s->cluster_size, <=, len);
    return decode_refcount(img + block, s->refcount_order,
                           cluster & (s->refcount_block_size - 1));
}

static void test_image_open(TestImage *t, int cluster_bits, int order)
{
    BDRVQcow2State *s = &t->s;
    int cs = 1 << cluster_bits;
    g_autofree uint8_t *img = g_malloc0(3 * cs);
    QDict *opts = qdict_new();
    static int n;

    memset(t, 0, sizeof(*t));
    t->path = g_strdup_printf("%s/img%d.qcow2", test_dir, n++);

    /* header: refcount table at cluster 1 (1 cluster), block at 2 */
    put_be64(img + 48, cs);
    img[59] = 1;
    put_be64(img + cs, 2 * cs);
    for (int i = 0; i < 3; i++) {
        if (order < 3) {
            img[2 * cs + i * (1 << order) / 8] |= 1 << (i * (1 << order) % 8);
        } else {
            img[2 * cs + (i + 1) * (1 << (order - 3)) - 1] = 1;
        }
    }
    g_assert_true(g_file_set_contents(t->path, (char *)img, 3 * cs, NULL));

    qdict_put_str(opts, "driver", "file");
    qdict_put_str(opts, "filename", t->path);
    t->file_bs = bdrv_open(NULL, NULL, opts, BDRV_O_RDWR | BDRV_O_UNMAP,
                          &error_abort);
    t->child.bs = t->file_bs;
    t->child.name = (char *)"file";
    t->bs.opaque = s;
    t->bs.file = &t->child;

    s->cluster_bits = cluster_bits;
    s->cluster_size = cs;
    s->l2_bits = cluster_bits - 3;
    s->l2_size = 1 << s->l2_bits;
    s->refcount_order = order;
    s->refcount_bits = 1 << order;
    s->refcount_max = order == 6 ? UINT64_MAX : (1ULL << (1 << order)) - 1;
    s->refcount_block_bits = cluster_bits + 3 - order;
    s->refcount_block_size = 1 << s->refcount_block_bits;
    s->refcount_table_offset = cs;
    s->refcount_table_size = cs / 8;
    s->data_file = &t->child;
    s->l2_cache_entry_size = cs;
    s->l2_table_cache = qcow2_cache_create(&t->bs, 4, cs);
    s->refcount_block_cache = qcow2_cache_create(&t->bs, 4, cs);
    g_assert_nonnull(s->l2_table_cache);
    g_assert_nonnull(s->refcount_block_cache);
    g_assert_cmpint(qcow2_cache_set_dependency(&t->bs, s->l2_table_cache,
                                               s->refcount_block_cache),
                    ==, 0);
    g_assert_cmpint(qcow2_refcount_init(&t->bs), ==, 0);
    t->expected = g_hash_table_new(g_direct_hash, g_direct_equal);
}

static void expect_ref(TestImage *t, uint64_t cluster, int delta)
{
    gpointer key = GSIZE_TO_POINTER(cluster);
    gssize v = GPOINTER_TO_SIZE(g_hash_table_lookup(t->expected, key));

    g_hash_table_insert(t->expected, key, GSIZE_TO_POINTER(v + delta));
}

/*
 * Flushes, then checks every cluster of the file: metadata (header,
 * table, blocks) and the test's own allocations have exactly the expected
 * refcount, everything else 0.
 */
static void test_image_verify(TestImage *t)
{
    BDRVQcow2State *s = &t->s;
    g_autoptr(GHashTable) meta = g_hash_table_new(g_direct_hash,
                                                  g_direct_equal);
    g_autofree uint8_t *img = NULL;
    uint64_t rt_offset, rt_clusters, i, nclusters;
    gsize len;

    g_assert_cmpint(qcow2_flush_caches(&t->bs), ==, 0);
    img = read_file(t, &len);
    rt_offset = get_be(img + 48, 8);
    rt_clusters = get_be(img + 56, 4);
    g_assert_cmpuint(rt_offset, ==, s->refcount_table_offset);
    g_assert_cmpuint(rt_clusters * s->cluster_size / 8, ==,
                     s->refcount_table_size);

    g_hash_table_add(meta, GSIZE_TO_POINTER(0));
    for (i = 0; i < rt_clusters; i++) {
        g_hash_table_add(meta, GSIZE_TO_POINTER((rt_offset >>
                                                 s->cluster_bits) + i));
    }
    for (i = 0; i < s->refcount_table_size; i++) {
        uint64_t b = get_be(img + rt_offset + i * 8, 8);

        g_assert_cmpuint(b, ==, s->refcount_table[i]);
        if (b) {
            g_assert_false(g_hash_table_contains(
                meta, GSIZE_TO_POINTER(b >> s->cluster_bits)));
            g_hash_table_add(meta, GSIZE_TO_POINTER(b >> s->cluster_bits));
        }
    }

    nclusters = DIV_ROUND_UP(len, s->cluster_size);
    for (i = 0; i < nclusters + 64; i++) {
        uint64_t want = GPOINTER_TO_SIZE(
            g_hash_table_lookup(t->expected, GSIZE_TO_POINTER(i)));

        if (g_hash_table_contains(meta, GSIZE_TO_POINTER(i))) {
            g_assert_cmpuint(want, ==, 0);
            want = 1;
        }
        if (file_refcount(t, img, len, i) != want) {
            g_error("cluster %" PRIu64 ": refcount %" PRIu64 ", expected %"
                    PRIu64, i, file_refcount(t, img, len, i), want);
        }
    }
}

static void test_image_close(TestImage *t)
{
    qcow2_cache_destroy(t->s.l2_table_cache);
    qcow2_cache_destroy(t->s.refcount_block_cache);
    qcow2_refcount_close(&t->bs);
    bdrv_unref(t->file_bs);
    g_hash_table_destroy(t->expected);
    unlink(t->path);
    g_free(t->path);
}

/* Many single-cluster allocations: new blocks, table growth. */
static void test_alloc_many(gconstpointer data)
{
    int order = GPOINTER_TO_INT(data);
    TestImage t;
    /* order 6 with 512-byte clusters: the one-cluster table covers 4096
     * clusters, so this grows it twice */
    int i, n = order == 6 ? 9000 : 300;

    test_image_open(&t, 9, order);
    for (i = 0; i < n; i++) {
        int64_t off = qcow2_alloc_clusters(&t.bs, 512);

        g_assert_cmpint(off, >, 0);
        g_assert_cmpint(off % 512, ==, 0);
        expect_ref(&t, off >> 9, 1);
    }
    if (order == 6) {
        g_assert_cmpuint(t.s.refcount_table_size, >, 64);
        g_assert_cmpint(t.s.refcount_table_offset, !=, 512);
    }
    test_image_verify(&t);
    test_image_close(&t);
}

/* Multi-cluster runs across refcount block boundaries, then frees. */
static void test_alloc_free_runs(gconstpointer data)
{
    int order = GPOINTER_TO_INT(data);
    TestImage t;
    int64_t offs[40];
    int i, j;

    test_image_open(&t, 9, order);
    for (i = 0; i < 40; i++) {
        offs[i] = qcow2_alloc_clusters(&t.bs, (i % 7 + 1) * 512 - 100);
        g_assert_cmpint(offs[i], >, 0);
        for (j = 0; j <= i % 7; j++) {
            expect_ref(&t, (offs[i] >> 9) + j, 1);
        }
    }
    test_image_verify(&t);

    for (i = 0; i < 40; i += 2) {
        qcow2_free_clusters(&t.bs, offs[i], (i % 7 + 1) * 512,
                            QCOW2_DISCARD_NEVER);
        for (j = 0; j <= i % 7; j++) {
            expect_ref(&t, (offs[i] >> 9) + j, -1);
        }
    }
    test_image_verify(&t);

    /* The lowest freed run is found first again. */
    g_assert_cmpint(qcow2_alloc_clusters(&t.bs, 512), ==, offs[0]);
    expect_ref(&t, offs[0] >> 9, 1);
    test_image_verify(&t);
    test_image_close(&t);
}

/* Refcounts up to refcount_max, then a clear overflow error. */
static void test_overflow(gconstpointer data)
{
    int order = GPOINTER_TO_INT(data);
    TestImage t;
    int64_t off;
    uint64_t rc;

    test_image_open(&t, 12, order);
    off = qcow2_alloc_clusters(&t.bs, 4096);
    g_assert_cmpint(off, >, 0);
    if (order < 6) {
        g_assert_cmpint(qcow2_update_cluster_refcount(
                            &t.bs, off >> 12, t.s.refcount_max - 1, false,
                            QCOW2_DISCARD_NEVER), ==, 0);
    } else {
        g_assert_cmpint(qcow2_update_cluster_refcount(
                            &t.bs, off >> 12, UINT64_MAX - 1, false,
                            QCOW2_DISCARD_NEVER), ==, 0);
    }
    g_assert_cmpint(qcow2_get_refcount(&t.bs, off >> 12, &rc), ==, 0);
    g_assert_cmpuint(rc, ==, t.s.refcount_max);
    g_assert_cmpint(qcow2_update_cluster_refcount(&t.bs, off >> 12, 1, false,
                                                  QCOW2_DISCARD_NEVER),
                    ==, -EINVAL);
    g_assert_cmpint(qcow2_get_refcount(&t.bs, off >> 12, &rc), ==, 0);
    g_assert_cmpuint(rc, ==, t.s.refcount_max);
    /* Below zero is refused as well, and changes nothing. */
    g_assert_cmpint(qcow2_update_cluster_refcount(&t.bs, off >> 12,
                                                  t.s.refcount_max, true,
                                                  QCOW2_DISCARD_NEVER), ==, 0);
    g_assert_cmpint(qcow2_update_cluster_refcount(&t.bs, off >> 12, 1, true,
                                                  QCOW2_DISCARD_NEVER),
                    ==, -EINVAL);
    test_image_verify(&t);
    test_image_close(&t);
}

/* Compressed clusters share host clusters and may span two. */
static void test_alloc_bytes(void)
{
    TestImage t;
    int64_t a, b, c, d;
    uint64_t rc;

    test_image_open(&t, 12, 4);
    a = qcow2_alloc_bytes(&t.bs, 1000);
    b = qcow2_alloc_bytes(&t.bs, 2000);
    g_assert_cmpint(a, >, 0);
    g_assert_cmpint(b, ==, a + 1000);
    g_assert_cmpint(qcow2_get_refcount(&t.bs, a >> 12, &rc), ==, 0);
    g_assert_cmpuint(rc, ==, 2);
    /* 3000 + 2000 > 4096: continues into the next, contiguous cluster */
    c = qcow2_alloc_bytes(&t.bs, 2000);
    g_assert_cmpint(c, ==, a + 3000);
    g_assert_cmpint(qcow2_get_refcount(&t.bs, a >> 12, &rc), ==, 0);
    g_assert_cmpuint(rc, ==, 3);
    g_assert_cmpint(qcow2_get_refcount(&t.bs, (a >> 12) + 1, &rc), ==, 0);
    g_assert_cmpuint(rc, ==, 1);
    /* Exactly filling the second cluster closes it. */
    d = qcow2_alloc_bytes(&t.bs, 8192 - 5000);
    g_assert_cmpint(d, ==, a + 5000);
    g_assert_cmpint(t.s.free_byte_offset, ==, 0);
    expect_ref(&t, a >> 12, 3);
    expect_ref(&t, (a >> 12) + 1, 2);
    test_image_verify(&t);

    /* Freeing every piece frees both clusters. */
    qcow2_free_clusters(&t.bs, a, 1000, QCOW2_DISCARD_NEVER);
    qcow2_free_clusters(&t.bs, b, 2000, QCOW2_DISCARD_NEVER);
    qcow2_free_clusters(&t.bs, c, 2000, QCOW2_DISCARD_NEVER);
    qcow2_free_clusters(&t.bs, d, 8192 - 5000, QCOW2_DISCARD_NEVER);
    expect_ref(&t, a >> 12, -3);
    expect_ref(&t, (a >> 12) + 1, -2);
    test_image_verify(&t);
    test_image_close(&t);
}

/* alloc_clusters_at takes what is free at the offset, no more. */
static void test_alloc_at(void)
{
    TestImage t;
    int64_t n;

    test_image_open(&t, 12, 4);
    n = qcow2_alloc_clusters_at(&t.bs, 10 * 4096, 4);
    g_assert_cmpint(n, ==, 4);
    n = qcow2_alloc_clusters_at(&t.bs, 8 * 4096, 4);
    g_assert_cmpint(n, ==, 2);
    n = qcow2_alloc_clusters_at(&t.bs, 11 * 4096, 2);
    g_assert_cmpint(n, ==, 0);
    for (int i = 8; i < 14; i++) {
        expect_ref(&t, i, 1);
    }
    test_image_verify(&t);
    /* Beyond what the table covers: the table grows, allocation follows */
    n = qcow2_alloc_clusters_at(&t.bs, 4096ULL * 4096 * 8 * 3, 2);
    g_assert_cmpint(n, ==, 2);
    expect_ref(&t, 4096ULL * 8 * 3, 1);
    expect_ref(&t, 4096ULL * 8 * 3 + 1, 1);
    test_image_verify(&t);
    test_image_close(&t);
}

/* Freeing with discard punches holes in the file. */
static void test_discard(void)
{
    TestImage t;
    int64_t off;
    g_autofree uint8_t *ones = g_malloc(8 * 4096);
    g_autofree uint8_t *img = NULL;
    gsize len;

    test_image_open(&t, 12, 4);
    off = qcow2_alloc_clusters(&t.bs, 8 * 4096);
    g_assert_cmpint(off, >, 0);
    memset(ones, 0xaa, 8 * 4096);
    g_assert_cmpint(bdrv_pwrite(&t.child, off, 8 * 4096, ones, 0), >=, 0);
    t.s.discard_passthrough_request = true;
    qcow2_free_clusters(&t.bs, off + 4096, 2 * 4096, QCOW2_DISCARD_REQUEST);
    qcow2_free_clusters(&t.bs, off + 4 * 4096, 4096, QCOW2_DISCARD_OTHER);
    expect_ref(&t, off >> 12, 1);
    expect_ref(&t, (off >> 12) + 3, 1);
    for (int i = 4; i < 8; i++) {
        expect_ref(&t, (off >> 12) + i, 1);
    }
    expect_ref(&t, (off >> 12) + 4, -1);
    test_image_verify(&t);

    img = read_file(&t, &len);
    g_assert_cmpint(img[off], ==, 0xaa);
    g_assert_cmpint(img[off + 4096], ==, 0);
    g_assert_cmpint(img[off + 3 * 4096 - 1], ==, 0);
    g_assert_cmpint(img[off + 3 * 4096], ==, 0xaa);
    /* pass-discard-other is off: data stays */
    g_assert_cmpint(img[off + 4 * 4096], ==, 0xaa);
    test_image_close(&t);
}

/*
 * Clusters of one run freed in any order while discards are batched (a
 * discard or shrink request) become one discard of the whole run: a run
 * punched piece by piece from its middle splits the file's extents first
 * (upstream 250's disk usage).
 */
static void test_discard_merge(void)
{
    static const int order[] = { 2, 4, 0, 5, 1, 3 };
    TestImage t;
    int64_t off;
    g_autofree uint8_t *ones = g_malloc(8 * 4096);
    g_autofree uint8_t *img = NULL;
    gsize len;

    test_image_open(&t, 12, 4);
    off = qcow2_alloc_clusters(&t.bs, 8 * 4096);
    g_assert_cmpint(off, >, 0);
    memset(ones, 0xaa, 8 * 4096);
    g_assert_cmpint(bdrv_pwrite(&t.child, off, 8 * 4096, ones, 0), >=, 0);
    t.s.discard_passthrough_request = true;
    t.s.cache_discards = true;
    for (size_t i = 0; i < G_N_ELEMENTS(order); i++) {
        qcow2_free_clusters(&t.bs, off + (order[i] + 1) * 4096, 4096,
                            QCOW2_DISCARD_REQUEST);
    }
    /* one region, which the holes below show to be the whole run */
    g_assert_cmpuint(g_list_length(t.s.discards), ==, 1);
    t.s.cache_discards = false;
    qcow2_process_discards(&t.bs, 0);
    g_assert_null(t.s.discards);
    expect_ref(&t, off >> 12, 1);
    expect_ref(&t, (off >> 12) + 7, 1);
    test_image_verify(&t);

    img = read_file(&t, &len);
    g_assert_cmpint(img[off + 4096 - 1], ==, 0xaa);
    g_assert_cmpint(img[off + 4096], ==, 0);
    g_assert_cmpint(img[off + 7 * 4096 - 1], ==, 0);
    g_assert_cmpint(img[off + 7 * 4096], ==, 0xaa);
    test_image_close(&t);
}

/* LRU replacement, write-back on eviction, dependency, clean_unused. */
static void test_cache(void)
{
    TestImage t;
    BDRVQcow2State *s = &t.s;
    void *tab[3];
    g_autofree uint8_t *img = NULL;
    gsize len;
    int64_t l2a, l2b, l2c;

    test_image_open(&t, 12, 4);
    qcow2_cache_destroy(s->l2_table_cache);
    s->l2_table_cache = qcow2_cache_create(&t.bs, 2, 4096);
    g_assert_cmpint(qcow2_cache_set_dependency(&t.bs, s->l2_table_cache,
                                               s->refcount_block_cache),
                    ==, 0);
    g_assert_cmpint((uintptr_t)s->l2_table_cache, !=, 0);

    l2a = qcow2_alloc_clusters(&t.bs, 4096);
    l2b = qcow2_alloc_clusters(&t.bs, 4096);
    l2c = qcow2_alloc_clusters(&t.bs, 4096);
    expect_ref(&t, l2a >> 12, 1);
    expect_ref(&t, l2b >> 12, 1);
    expect_ref(&t, l2c >> 12, 1);

    g_assert_cmpint(qcow2_cache_get_empty(&t.bs, s->l2_table_cache, l2a,
                                          &tab[0]), ==, 0);
    g_assert_cmpuint((uintptr_t)tab[0] % 512, ==, 0);
    memset(tab[0], 0x11, 4096);
    qcow2_cache_entry_mark_dirty(s->l2_table_cache, tab[0]);
    g_assert_cmpint(qcow2_cache_get_empty(&t.bs, s->l2_table_cache, l2b,
                                          &tab[1]), ==, 0);
    memset(tab[1], 0x22, 4096);
    qcow2_cache_entry_mark_dirty(s->l2_table_cache, tab[1]);
    /* Both held: no room for a third. */
    g_assert_cmpint(qcow2_cache_get(&t.bs, s->l2_table_cache, l2c,
                                    &tab[2]), ==, -ENOSPC);
    qcow2_cache_put(s->l2_table_cache, &tab[1]);
    qcow2_cache_put(s->l2_table_cache, &tab[0]);
    g_assert_null(tab[0]);

    /* l2b was put first, so it is evicted (and written back) for l2c;
     * writing it needs the refcounts of the three clusters on disk. */
    g_assert_cmpint(qcow2_cache_get(&t.bs, s->l2_table_cache, l2c,
                                    &tab[2]), ==, 0);
    img = read_file(&t, &len);
    g_assert_cmpint(img[l2b], ==, 0x22);
    g_assert_cmpint(img[l2a], ==, 0);
    g_assert_cmpuint(file_refcount(&t, img, len, l2c >> 12), ==, 1);
    g_free(img);
    qcow2_cache_put(s->l2_table_cache, &tab[2]);

    /* A re-read of l2b comes from disk; l2a is still cached and dirty. */
    g_assert_nonnull(qcow2_cache_is_table_offset(s->l2_table_cache, l2a));
    g_assert_cmpint(qcow2_cache_get(&t.bs, s->l2_table_cache, l2b,
                                    &tab[1]), ==, 0);
    g_assert_cmpint(((uint8_t *)tab[1])[4095], ==, 0x22);
    qcow2_cache_put(s->l2_table_cache, &tab[1]);
    g_assert_cmpint(qcow2_cache_write(&t.bs, s->l2_table_cache), ==, 0);
    img = read_file(&t, &len);
    g_assert_cmpint(img[l2a], ==, 0x11);
    g_free(img);
    img = NULL;

    /* Unused since the previous clean: dropped by the second one. */
    qcow2_cache_clean_unused(s->l2_table_cache);
    g_assert_nonnull(qcow2_cache_is_table_offset(s->l2_table_cache, l2b));
    qcow2_cache_clean_unused(s->l2_table_cache);
    g_assert_null(qcow2_cache_is_table_offset(s->l2_table_cache, l2b));

    /* Freeing a cached table's cluster drops it from the cache. */
    g_assert_cmpint(qcow2_cache_get(&t.bs, s->l2_table_cache, l2a,
                                    &tab[0]), ==, 0);
    qcow2_cache_entry_mark_dirty(s->l2_table_cache, tab[0]);
    qcow2_cache_put(s->l2_table_cache, &tab[0]);
    qcow2_free_clusters(&t.bs, l2a, 4096, QCOW2_DISCARD_NEVER);
    expect_ref(&t, l2a >> 12, -1);
    g_assert_null(qcow2_cache_is_table_offset(s->l2_table_cache, l2a));

    g_assert_cmpint(qcow2_cache_empty(&t.bs, s->l2_table_cache), ==, 0);
    g_assert_null(qcow2_cache_is_table_offset(s->l2_table_cache, l2c));
    test_image_verify(&t);
    test_image_close(&t);
}

int main(int argc, char **argv)
{
    char tmpl[] = "/tmp/test-qcow2-refcount-XXXXXX";
    int ret;

    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    test_dir = g_mkdtemp(tmpl);
    g_assert_nonnull(test_dir);

    for (int order = 0; order <= 6; order++) {
        g_autofree char *a = g_strdup_printf("/qcow2-refcount/alloc-many/%d",
                                             1 << order);
        g_autofree char *b = g_strdup_printf("/qcow2-refcount/runs/%d",
                                             1 << order);
        g_autofree char *c = g_strdup_printf("/qcow2-refcount/overflow/%d",
                                             1 << order);

        g_test_add_data_func(a, GINT_TO_POINTER(order), test_alloc_many);
        g_test_add_data_func(b, GINT_TO_POINTER(order), test_alloc_free_runs);
        g_test_add_data_func(c, GINT_TO_POINTER(order), test_overflow);
    }
    g_test_add_func("/qcow2-refcount/alloc-bytes", test_alloc_bytes);
    g_test_add_func("/qcow2-refcount/alloc-at", test_alloc_at);
    g_test_add_func("/qcow2-refcount/discard", test_discard);
    g_test_add_func("/qcow2-refcount/discard-merge", test_discard_merge);
    g_test_add_func("/qcow2-refcount/cache", test_cache);

    ret = g_test_run();
    rmdir(test_dir);
    return ret;
}
