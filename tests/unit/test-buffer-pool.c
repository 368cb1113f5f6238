/*
 * The I/O buffer pool (util/buffer-pool.c): a buffer given back is the
 * one the next request of its size class gets, buffers are aligned as
 * asked, the pool keeps no more idle bytes than its limit, and a request
 * for more alignment than the pool had drops what it kept.
 */
#include "util/buffer-pool.h"

#define KiB_ (1024)

static void test_reuse_by_class(void)
{
    BufferPool *pool = buffer_pool_new(1024 * KiB_);
    size_t page = qemu_real_host_page_size();
    void *a = buffer_pool_try_get(pool, 512, 64 * KiB_);
    void *b;

    g_assert_nonnull(a);
    g_assert_cmpuint((uintptr_t)a % page, ==, 0);
    memset(a, 0x5a, 64 * KiB_);          /* the whole class is usable */
    buffer_pool_put(pool, a, 64 * KiB_);

    /* 40 KiB rounds up to the 64 KiB class: the same buffer comes back */
    b = buffer_pool_try_get(pool, 512, 40 * KiB_);
    g_assert_true(b == a);
    buffer_pool_put(pool, b, 40 * KiB_);

    /* another class does not take it */
    b = buffer_pool_try_get(pool, 512, 4 * KiB_);
    g_assert_true(b != a);
    buffer_pool_put(pool, b, 4 * KiB_);
    /* a small request is a whole page */
    b = buffer_pool_try_get(pool, 1, 1);
    g_assert_nonnull(b);
    memset(b, 0, page);
    buffer_pool_put(pool, b, 1);
    buffer_pool_free(pool);
}

static void test_idle_limit(void)
{
    BufferPool *pool = buffer_pool_new(128 * KiB_);
    void *bufs[4];

    for (int i = 0; i < 4; i++) {
        bufs[i] = buffer_pool_try_get(pool, 4096, 64 * KiB_);
        g_assert_nonnull(bufs[i]);
    }
    for (int i = 0; i < 4; i++) {
        buffer_pool_put(pool, bufs[i], 64 * KiB_);
    }
    /* two fit in 128 KiB; the two given back first were kept */
    g_assert_true(buffer_pool_try_get(pool, 4096, 64 * KiB_) == bufs[1]);
    g_assert_true(buffer_pool_try_get(pool, 4096, 64 * KiB_) == bufs[0]);
    buffer_pool_put(pool, bufs[0], 64 * KiB_);
    buffer_pool_put(pool, bufs[1], 64 * KiB_);
    buffer_pool_free(pool);

    /* a pool without room keeps nothing */
    pool = buffer_pool_new(0);
    bufs[0] = buffer_pool_try_get(pool, 4096, 4 * KiB_);
    buffer_pool_put(pool, bufs[0], 4 * KiB_);
    bufs[1] = buffer_pool_try_get(pool, 4096, 4 * KiB_);
    g_assert_nonnull(bufs[1]);
    buffer_pool_put(pool, bufs[1], 4 * KiB_);
    buffer_pool_free(pool);
}

static void test_alignment_grows(void)
{
    BufferPool *pool = buffer_pool_new(1024 * KiB_);
    size_t big = 64 * KiB_;
    void *a = buffer_pool_try_get(pool, 4096, 8 * KiB_);
    void *b;

    buffer_pool_put(pool, a, 8 * KiB_);
    b = buffer_pool_try_get(pool, big, 8 * KiB_);
    g_assert_nonnull(b);
    g_assert_cmpuint((uintptr_t)b % big, ==, 0);
    buffer_pool_put(pool, b, 8 * KiB_);
    /* later requests asking less still get the larger alignment */
    b = buffer_pool_try_get(pool, 4096, 8 * KiB_);
    g_assert_cmpuint((uintptr_t)b % big, ==, 0);
    buffer_pool_put(pool, b, 8 * KiB_);
    buffer_pool_free(pool);
}

/* Past the idle limit nothing is kept nor rounded up (invariant 3). */
static void test_large_not_kept(void)
{
    BufferPool *pool = buffer_pool_new(64 * KiB_);
    size_t len = 65 * KiB_;
    uint8_t *a = buffer_pool_try_get(pool, 4096, len);

    g_assert_nonnull(a);
    g_assert_cmpuint((uintptr_t)a % 4096, ==, 0);
    memset(a, 0x11, len);
    buffer_pool_put(pool, a, len);
    /* a kept class still works beside it */
    a = buffer_pool_try_get(pool, 4096, 64 * KiB_);
    g_assert_nonnull(a);
    buffer_pool_put(pool, a, 64 * KiB_);
    g_assert_true(buffer_pool_try_get(pool, 4096, 64 * KiB_) == (void *)a);
    buffer_pool_put(pool, a, 64 * KiB_);
    buffer_pool_free(pool);
}

static void test_absurd_length(void)
{
    BufferPool *pool = buffer_pool_new(1024 * KiB_);

    g_assert_null(buffer_pool_try_get(pool, 4096, SIZE_MAX));
    buffer_pool_free(pool);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/buffer-pool/reuse-by-class", test_reuse_by_class);
    g_test_add_func("/buffer-pool/idle-limit", test_idle_limit);
    g_test_add_func("/buffer-pool/alignment-grows", test_alignment_grows);
    g_test_add_func("/buffer-pool/large-not-kept", test_large_not_kept);
    g_test_add_func("/buffer-pool/absurd-length", test_absurd_length);
    return g_test_run();
}
