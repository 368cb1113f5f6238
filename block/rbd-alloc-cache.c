/*
 * rbd: the objects that block status has found allocated, remembered so
 * that the next query for them needs no rbd_diff_iterate2.
 *
 * Why: an NBD client's structured READ makes the export ask block status
 * for the range before it reads it (sparse reads: holes go out as hole
 * chunks).  On an RBD image with fast-diff every such query is a walk of
 * the object map (rbd_diff_iterate2), in a worker thread so that the loop
 * never waits for the cluster: per 4 KiB read at depth 1, a librbd call
 * that completes through librbd's own threads and a hand-off each way,
 * about as many context switches as the read itself (docs/performance.md,
 * the rbd section).  An object stays allocated
 * until it is discarded, zeroed with unmap, cut off by a resize or
 * replaced by a snapshot rollback, so "allocated" learnt once holds until
 * this node does one of those.
 *
 * The cache is a direct-mapped table of object indices, a fixed number of
 * slots per node (QRBD_ALLOC_CACHE_MAX_SLOTS at most), so its memory does
 * not grow with the image: a slot holds the index of one object known to
 * be allocated, plus one, or 0.
 *
 * Invariants:
 *  1. Only allocation is remembered, never a hole: a stale entry can only
 *     make a range that reads as zeroes be reported as data, which every
 *     caller must accept anyway (data is the answer of a driver that
 *     knows nothing).  So another client's discard, which this node
 *     cannot see, costs precision, never correctness.
 *  2. An object is entered only when an extent that librbd reported as
 *     existing covers all of it: with an encrypted image the node's
 *     offsets are shifted from the objects' by the LUKS header, and such
 *     a chunk of the node, straddling two objects, is never entered.
 *  3. A fill carries the generation read before its walk began; every
 *     forget (discard, zeroing, resize, rollback; done after the change,
 *     whatever its result) moves the generation on, and a fill whose
 *     walk overlapped a forget is dropped: the walk may have seen the
 *     object before the change.
 *  4. The cache is used in the node's AioContext thread only (the node
 *     cannot move to another context): no lock.
 */
#include "block/rbd.h"

/* Slots for the objects of a 4 MiB-object image of 64 GiB: 128 KiB. */
#define QRBD_ALLOC_CACHE_MAX_SLOTS (16 * 1024)

void qrbd_alloc_cache_init(RBDAllocCache *c, uint64_t chunk,
                           uint64_t size)
{
    uint64_t objects = DIV_ROUND_UP(size, chunk);
    unsigned int slots = 1;

    assert(chunk > 0);
    while (slots < QRBD_ALLOC_CACHE_MAX_SLOTS && slots < objects) {
        slots <<= 1;
    }
    *c = (RBDAllocCache) {
        .chunk = chunk,
        .mask = slots - 1,
        .slots = g_new0(uint64_t, slots),
    };
}

void qrbd_alloc_cache_destroy(RBDAllocCache *c)
{
    g_free(c->slots);
    c->slots = NULL;
}

static bool qrbd_alloc_cache_has(const RBDAllocCache *c, uint64_t idx)
{
    return c->slots[idx & c->mask] == idx + 1;
}

uint64_t qrbd_alloc_cache_lookup(const RBDAllocCache *c, uint64_t offset,
                                 uint64_t bytes)
{
    uint64_t end = offset + bytes;
    uint64_t idx = offset / c->chunk;

    /* a run is at most mask + 1 objects long: direct-mapped slots */
    while (idx * c->chunk < end && qrbd_alloc_cache_has(c, idx)) {
        idx++;
    }
    if (idx * c->chunk <= offset) {
        return 0;
    }
    return MIN(idx * c->chunk, end) - offset;
}

uint64_t qrbd_alloc_cache_generation(const RBDAllocCache *c)
{
    return c->generation;
}

void qrbd_alloc_cache_fill(RBDAllocCache *c, uint64_t generation,
                           uint64_t offset, uint64_t bytes)
{
    /* invariant 2: only the objects that the extent covers whole */
    uint64_t first = DIV_ROUND_UP(offset, c->chunk);
    uint64_t last = (offset + bytes) / c->chunk;     /* exclusive */

    if (generation != c->generation) {
        return;                 /* invariant 3 */
    }
    /* more than a table's worth would only overwrite itself */
    if (last - first > (uint64_t)c->mask + 1) {
        first = last - c->mask - 1;
    }
    for (uint64_t idx = first; idx < last; idx++) {
        c->slots[idx & c->mask] = idx + 1;
    }
}

void qrbd_alloc_cache_forget(RBDAllocCache *c, uint64_t offset,
                             uint64_t bytes)
{
    uint64_t first = offset / c->chunk;
    uint64_t last = DIV_ROUND_UP(offset + bytes, c->chunk);

    c->generation++;            /* invariant 3 */
    if (last - first > (uint64_t)c->mask + 1) {
        /* a range wider than the table: look at each slot once instead */
        for (uint64_t i = 0; i <= c->mask; i++) {
            uint64_t held = c->slots[i];

            if (held && held - 1 >= first && held - 1 < last) {
                c->slots[i] = 0;
            }
        }
        return;
    }
    for (uint64_t idx = first; idx < last; idx++) {
        if (qrbd_alloc_cache_has(c, idx)) {
            c->slots[idx & c->mask] = 0;
        }
    }
}

void qrbd_alloc_cache_forget_all(RBDAllocCache *c)
{
    c->generation++;            /* invariant 3 */
    memset(c->slots, 0, ((size_t)c->mask + 1) * sizeof(c->slots[0]));
}
