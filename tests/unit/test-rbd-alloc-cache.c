/*
 * The rbd driver's cache of allocated objects (block/rbd-alloc-cache.c),
 * without a cluster: only objects that a reported extent covers whole are
 * remembered, a lookup answers the run of remembered objects from the
 * offset and never more than was asked, a forget drops exactly the
 * objects its range touches (narrow and wider than the table), a fill
 * from a walk that overlapped a forget is dropped, and two objects that
 * share a slot never answer for each other.
 */
#include "util/osdep.h"
#include "block/rbd.h"

#define OBJ (4 * 1024 * 1024ULL)

static void test_fill_and_lookup(void)
{
    RBDAllocCache c;

    qrbd_alloc_cache_init(&c, OBJ, 64 * OBJ);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 0, 4096), ==, 0);

    /* objects 2 and 3 */
    qrbd_alloc_cache_fill(&c, qrbd_alloc_cache_generation(&c), 2 * OBJ,
                          2 * OBJ);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 2 * OBJ + 4096, 4096), ==,
                     4096);
    /* the run goes to the end of object 3, not past what was asked */
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 2 * OBJ + 4096, 10 * OBJ),
                     ==, 2 * OBJ - 4096);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 3 * OBJ, OBJ), ==, OBJ);
    /* the objects around are unknown */
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 2 * OBJ - 1, 2), ==, 0);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 4 * OBJ, 4096), ==, 0);
    qrbd_alloc_cache_destroy(&c);
}

/* An extent that covers objects only in part (an encrypted image). */
static void test_partial_extent(void)
{
    RBDAllocCache c;
    uint64_t gen;

    qrbd_alloc_cache_init(&c, OBJ, 64 * OBJ);
    gen = qrbd_alloc_cache_generation(&c);
    /* half of object 0, all of 1, half of 2 */
    qrbd_alloc_cache_fill(&c, gen, OBJ / 2, 2 * OBJ);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, OBJ / 2, 4096), ==, 0);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, OBJ, OBJ), ==, OBJ);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 2 * OBJ, 4096), ==, 0);
    /* within one object: nothing */
    qrbd_alloc_cache_fill(&c, gen, 5 * OBJ + 4096, OBJ - 4096);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 5 * OBJ + 4096, 4096), ==,
                     0);
    qrbd_alloc_cache_destroy(&c);
}

static void test_forget(void)
{
    RBDAllocCache c;
    uint64_t gen;

    qrbd_alloc_cache_init(&c, OBJ, 64 * OBJ);
    qrbd_alloc_cache_fill(&c, qrbd_alloc_cache_generation(&c), 0, 8 * OBJ);
    /* a discard of 4 KiB in object 3 forgets object 3, nothing else */
    qrbd_alloc_cache_forget(&c, 3 * OBJ + 8192, 4096);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 0, 8 * OBJ), ==, 3 * OBJ);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 3 * OBJ, OBJ), ==, 0);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 4 * OBJ, 8 * OBJ), ==,
                     4 * OBJ);
    /* a range wider than the table (64 slots) walks the slots instead */
    qrbd_alloc_cache_forget(&c, 5 * OBJ, 1000 * OBJ);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 4 * OBJ, 8 * OBJ), ==,
                     OBJ);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 0, 8 * OBJ), ==, 3 * OBJ);

    /* a walk that began before a forget fills nothing */
    gen = qrbd_alloc_cache_generation(&c);
    qrbd_alloc_cache_forget(&c, 40 * OBJ, 4096);
    qrbd_alloc_cache_fill(&c, gen, 10 * OBJ, OBJ);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 10 * OBJ, 4096), ==, 0);
    gen = qrbd_alloc_cache_generation(&c);
    qrbd_alloc_cache_fill(&c, gen, 10 * OBJ, OBJ);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 10 * OBJ, 4096), ==, 4096);

    qrbd_alloc_cache_forget_all(&c);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 0, OBJ), ==, 0);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 10 * OBJ, OBJ), ==, 0);
    qrbd_alloc_cache_destroy(&c);
}

/* An image with more objects than slots: objects share slots. */
static void test_shared_slots(void)
{
    RBDAllocCache c;
    uint64_t slots, objects = 1 << 20;

    /* 4 KiB objects, 4 GiB: many more objects than the table's slots */
    qrbd_alloc_cache_init(&c, 4096, objects * 4096);
    slots = c.mask + 1;
    g_assert_cmpuint(slots, <, objects);
    qrbd_alloc_cache_fill(&c, qrbd_alloc_cache_generation(&c), 7 * 4096,
                          4096);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 7 * 4096, 4096), ==, 4096);
    /* the object that shares its slot is not taken for it */
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, (7 + slots) * 4096, 4096),
                     ==, 0);
    qrbd_alloc_cache_fill(&c, qrbd_alloc_cache_generation(&c),
                          (7 + slots) * 4096, 4096);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 7 * 4096, 4096), ==, 0);

    /* every object allocated: a run is at most the table long */
    qrbd_alloc_cache_fill(&c, qrbd_alloc_cache_generation(&c), 0,
                          objects * 4096);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, (objects - slots) * 4096,
                                             slots * 4096), ==, slots * 4096);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, 0, objects * 4096), ==, 0);
    g_assert_cmpuint(qrbd_alloc_cache_lookup(&c, (objects - slots) * 4096,
                                             objects * 4096), ==,
                     slots * 4096);
    qrbd_alloc_cache_destroy(&c);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/rbd-alloc-cache/fill-lookup", test_fill_and_lookup);
    g_test_add_func("/rbd-alloc-cache/partial-extent", test_partial_extent);
    g_test_add_func("/rbd-alloc-cache/forget", test_forget);
    g_test_add_func("/rbd-alloc-cache/shared-slots", test_shared_slots);
    return g_test_run();
}
