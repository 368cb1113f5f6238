/*
 * Aligned I/O buffers reused across requests (util/buffer-pool.h).
 *
 * Why: a 64 KiB buffer allocated and freed per request sits at the top of
 * the heap, so glibc hands its pages back to the kernel (brk) when it is
 * freed and the next request faults 16 fresh zeroed pages in again; that
 * kernel work cost more CPU than the request's own AES.  A buffer kept
 * here stays mapped.
 *
 * An idle buffer is linked into its class's free list through its own
 * first bytes, so keeping and taking one allocates nothing.
 *
 * Invariants (under pool->lock):
 *  1. Every idle buffer is exactly its class's size and aligned to
 *     pool->align; idle_bytes is the sum of their sizes and never exceeds
 *     max_idle_bytes.
 *  2. pool->align only grows; a buffer given back with less alignment
 *     than the pool now has is freed, not kept.
 *  3. A class larger than max_idle_bytes is never kept, so its buffers
 *     are allocated at their exact length: what a caller budgets (an NBD
 *     client's 32 MiB request) is what it holds, not twice as much.
 */
#include "util/osdep.h"
#include "util/buffer-pool.h"

#include <pthread.h>

/* The smallest class is a page: smaller buffers would not be aligned. */
#define BUFFER_POOL_MIN_SHIFT 12
#define BUFFER_POOL_CLASSES (64 - BUFFER_POOL_MIN_SHIFT)

typedef struct BufferPoolIdle {
    struct BufferPoolIdle *next;
} BufferPoolIdle;

struct BufferPool {
    /* pthread rather than GLib locks, so that ThreadSanitizer sees it. */
    pthread_mutex_t lock;
    size_t max_idle_bytes;
    size_t idle_bytes;
    size_t align;
    BufferPoolIdle *idle[BUFFER_POOL_CLASSES];
};

static unsigned buffer_pool_class(size_t len)
{
    if (len <= ((size_t)1 << BUFFER_POOL_MIN_SHIFT)) {
        return 0;
    }
    return 64 - __builtin_clzll((unsigned long long)len - 1) -
           BUFFER_POOL_MIN_SHIFT;
}

static size_t buffer_pool_class_size(unsigned cls)
{
    return (size_t)1 << (cls + BUFFER_POOL_MIN_SHIFT);
}

BufferPool *buffer_pool_new(size_t max_idle_bytes)
{
    BufferPool *pool = g_new0(BufferPool, 1);

    pthread_mutex_init(&pool->lock, NULL);
    pool->max_idle_bytes = max_idle_bytes;
    pool->align = qemu_real_host_page_size();
    return pool;
}

/* Lock held. */
static void buffer_pool_drop_idle(BufferPool *pool)
{
    for (unsigned cls = 0; cls < BUFFER_POOL_CLASSES; cls++) {
        while (pool->idle[cls]) {
            BufferPoolIdle *b = pool->idle[cls];

            pool->idle[cls] = b->next;
            pool->idle_bytes -= buffer_pool_class_size(cls);
            qemu_vfree(b);
        }
    }
    assert(pool->idle_bytes == 0);      /* invariant 1 */
}

void buffer_pool_free(BufferPool *pool)
{
    if (!pool) {
        return;
    }
    buffer_pool_drop_idle(pool);
    pthread_mutex_destroy(&pool->lock);
    g_free(pool);
}

void *buffer_pool_try_get(BufferPool *pool, size_t align, size_t len)
{
    unsigned cls;
    BufferPoolIdle *b;

    if (len > SIZE_MAX / 2) {
        return NULL;
    }
    cls = buffer_pool_class(len);
    if (buffer_pool_class_size(cls) > pool->max_idle_bytes) {
        /* invariant 3 */
        return qemu_try_memalign(MAX(align, qemu_real_host_page_size()),
                                 len);
    }
    pthread_mutex_lock(&pool->lock);
    if (align > pool->align) {
        /* invariant 2: what is kept is not aligned enough any more */
        buffer_pool_drop_idle(pool);
        pool->align = align;
    }
    align = pool->align;
    b = pool->idle[cls];
    if (b) {
        pool->idle[cls] = b->next;
        pool->idle_bytes -= buffer_pool_class_size(cls);
    }
    pthread_mutex_unlock(&pool->lock);
    return b ? (void *)b : qemu_try_memalign(align,
                                             buffer_pool_class_size(cls));
}

void buffer_pool_put(BufferPool *pool, void *buf, size_t len)
{
    unsigned cls = buffer_pool_class(len);
    size_t size = buffer_pool_class_size(cls);
    BufferPoolIdle *b = buf;

    if (size > pool->max_idle_bytes) {
        /* invariant 3 */
        qemu_vfree(buf);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    if (((uintptr_t)buf & (pool->align - 1)) == 0 &&
        pool->idle_bytes + size <= pool->max_idle_bytes) {
        /* invariant 1 */
        b->next = pool->idle[cls];
        pool->idle[cls] = b;
        pool->idle_bytes += size;
        b = NULL;
    }
    pthread_mutex_unlock(&pool->lock);
    qemu_vfree(b);
}
