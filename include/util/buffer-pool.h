/*
 * A pool of aligned I/O buffers that requests borrow and give back, so
 * that a steady stream of requests allocates nothing: the bounce buffers
 * of encryption, the payload and reply buffers of an export's requests.
 *
 * Buffers come in power-of-two size classes (4 KiB and up); a buffer
 * given back is kept for the next request of its class while the pool
 * holds less than its limit of idle bytes, and freed otherwise.  A
 * buffer larger than that limit is never kept: it is allocated at its
 * exact length and freed when given back.  The
 * functions may be called from any thread.
 */
#ifndef QBLOCK_BUFFER_POOL_H
#define QBLOCK_BUFFER_POOL_H

#include "util/osdep.h"

typedef struct BufferPool BufferPool;

/*
 * A pool that keeps at most @max_idle_bytes of buffers that nobody
 * borrows (0: none, every buffer is freed when given back).
 */
BufferPool *buffer_pool_new(size_t max_idle_bytes);
/* Frees the idle buffers and the pool; every buffer must be back. */
void buffer_pool_free(BufferPool *pool);

/*
 * A buffer of at least @len bytes aligned to @align (a power of two; the
 * host page size at least), or NULL when memory is short.  @len may be 0.  Its content is
 * whatever the last borrower left.
 */
void *buffer_pool_try_get(BufferPool *pool, size_t align, size_t len);
/* Gives back @buf, which buffer_pool_try_get(pool, ..., @len) returned. */
void buffer_pool_put(BufferPool *pool, void *buf, size_t len);

#endif
