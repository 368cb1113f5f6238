/*
 * hw/virtio/virtqueue.c against a hostile driver that the transports do
 * not filter: a ring over one buffer of "guest memory", written as a
 * driver would (or should not).  The vhost-user export and the device
 * models reach the same code; tests/unit/test-vhost-user-blk.c and
 * tests/qtest drive it through them.
 */
#include "util/osdep.h"
#include "virtio/virtqueue.h"

#define RAM_SIZE    (64 * KiB)
#define NUM         8
#define DESC        0x0000
#define AVAIL       0x1000
#define USED        0x2000
#define DATA        0x3000

static uint8_t ram[RAM_SIZE];

static void *ram_map(void *opaque, uint64_t addr, uint64_t *len)
{
    if (addr >= RAM_SIZE) {
        return NULL;
    }
    *len = MIN(*len, RAM_SIZE - addr);
    return ram + addr;
}

static const GuestMemory mem = { .map = ram_map };

static void ring_init(VirtQueue *vq)
{
    memset(ram, 0, sizeof(ram));
    virtqueue_init(vq, &mem);
    vq->num = NUM;
    vq->desc = DESC;
    vq->avail = AVAIL;
    vq->used = USED;
    vq->ready = true;
    /* one readable descriptor that every request uses */
    *(VRingDesc *)(ram + DESC) = (VRingDesc) {
        .addr = GUINT64_TO_LE(DATA),
        .len = GUINT32_TO_LE(512),
    };
}

/* The driver makes descriptor 0 available @n more times. */
static void ring_add(uint16_t *avail_idx, unsigned int n)
{
    for (unsigned int i = 0; i < n; i++) {
        uint16_t *slot = (uint16_t *)(ram + AVAIL + VRING_AVAIL_OFF_RING) +
                         *avail_idx % NUM;

        *slot = 0;
        (*avail_idx)++;
    }
    *(uint16_t *)(ram + AVAIL + VRING_AVAIL_OFF_IDX) =
        GUINT16_TO_LE(*avail_idx);
}

/*
 * Issue 14: the driver makes entries available again while the device
 * still holds the ones it popped.  Each pop is within the "avail idx at
 * most num ahead" rule, but the device would hold more requests than the
 * used ring has entries: the pop past num breaks the queue instead.
 */
static void test_more_than_queue_size(void)
{
    VirtQueueElement *elems[NUM + 1] = { 0 };
    VirtQueue vq;
    uint16_t avail_idx = 0;
    Error *err = NULL;

    ring_init(&vq);
    ring_add(&avail_idx, NUM);
    for (int i = 0; i < NUM; i++) {
        g_assert_cmpint(virtqueue_pop(&vq, &elems[i], &error_abort), ==, 1);
    }
    g_assert_cmpint(virtqueue_pop(&vq, &elems[NUM], &error_abort), ==, 0);
    /* nothing pushed, and the driver offers one more */
    ring_add(&avail_idx, 1);
    g_assert_cmpint(virtqueue_pop(&vq, &elems[NUM], &err), ==, -EIO);
    g_assert_null(elems[NUM]);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "virtqueue: 8 requests in flight already, as many as "
                    "the queue has entries");
    error_free(err);
    g_assert_true(vq.broken);
    for (int i = 0; i < NUM; i++) {
        virtqueue_element_free(elems[i]);
    }

    /* once one is pushed, the next pop is fine */
    ring_init(&vq);
    avail_idx = 0;
    ring_add(&avail_idx, NUM);
    for (int i = 0; i < NUM; i++) {
        g_assert_cmpint(virtqueue_pop(&vq, &elems[i], &error_abort), ==, 1);
    }
    g_assert_cmpint(virtqueue_push(&vq, elems[0], 0, &error_abort), ==, 0);
    virtqueue_element_free(elems[0]);
    ring_add(&avail_idx, 1);
    g_assert_cmpint(virtqueue_pop(&vq, &elems[0], &error_abort), ==, 1);
    for (int i = 0; i < NUM; i++) {
        virtqueue_element_free(elems[i]);
    }
}

/*
 * A chain of @n descriptors from descriptor 0: the first @n_out
 * device-readable, 512 bytes each at DATA + 512 * i.
 */
static void ring_chain(unsigned int n, unsigned int n_out)
{
    for (unsigned int i = 0; i < n; i++) {
        *(VRingDesc *)(ram + DESC + i * sizeof(VRingDesc)) = (VRingDesc) {
            .addr = GUINT64_TO_LE(DATA + 512 * i),
            .len = GUINT32_TO_LE(512),
            .flags = GUINT16_TO_LE((i + 1 < n ? VRING_DESC_F_NEXT : 0) |
                                   (i >= n_out ? VRING_DESC_F_WRITE : 0)),
            .next = GUINT16_TO_LE(i + 1),
        };
    }
}

/*
 * virtqueue_pop_into() pops into the caller's storage, and a chain
 * longer than it into an array of its own, with the same pieces.
 */
static void test_pop_into(void)
{
    struct iovec sg[4];
    VirtQueueElement elem;
    VirtQueue vq;
    uint16_t avail_idx = 0;

    for (unsigned int n = 3; n <= NUM; n += NUM - 3) {
        ring_init(&vq);
        ring_chain(n, 2);
        ring_add(&avail_idx, 1);
        avail_idx = 0;
        g_assert_cmpint(virtqueue_pop_into(&vq, &elem, sg, G_N_ELEMENTS(sg),
                                           &error_abort), ==, 1);
        g_assert_cmpuint(elem.out_num, ==, 2);
        g_assert_cmpuint(elem.in_num, ==, n - 2);
        /* in storage of its own exactly when the chain does not fit */
        g_assert_true((elem.heap_sg != NULL) == (n > G_N_ELEMENTS(sg)));
        g_assert_true(elem.out_sg == (elem.heap_sg ? elem.heap_sg : sg));
        g_assert_true(elem.in_sg == elem.out_sg + 2);
        for (unsigned int i = 0; i < n; i++) {
            g_assert_true(elem.out_sg[i].iov_base == ram + DATA + 512 * i);
            g_assert_cmpuint(elem.out_sg[i].iov_len, ==, 512);
        }
        g_assert_cmpint(virtqueue_push(&vq, &elem, 0, &error_abort), ==, 0);
        virtqueue_element_release(&elem);
        g_assert_null(elem.heap_sg);
    }
}

static uint16_t ram16(uint64_t addr)
{
    return GUINT16_FROM_LE(*(uint16_t *)(ram + addr));
}

/*
 * A device that polls the ring: virtqueue_avail_pending() sees what the
 * driver made available, and with notifications off the driver is asked
 * for no kicks (VRING_USED_F_NO_NOTIFY, or an avail event that pops no
 * longer advance with EVENT_IDX) until they are back on.
 */
static void test_polling(void)
{
    VirtQueueElement *elem;
    VirtQueue vq;
    uint16_t avail_idx = 0;
    uint64_t flags = USED + VRING_USED_OFF_FLAGS;
    uint64_t avail_event = USED + VRING_USED_OFF_AVAIL_EVENT(NUM);

    ring_init(&vq);
    g_assert_false(virtqueue_avail_pending(&vq));
    ring_add(&avail_idx, 1);
    g_assert_true(virtqueue_avail_pending(&vq));
    virtqueue_set_notification(&vq, false);
    g_assert_cmpuint(ram16(flags), ==, VRING_USED_F_NO_NOTIFY);
    g_assert_cmpint(virtqueue_pop(&vq, &elem, &error_abort), ==, 1);
    g_assert_false(virtqueue_avail_pending(&vq));
    virtqueue_push(&vq, elem, 0, &error_abort);
    virtqueue_element_free(elem);
    virtqueue_set_notification(&vq, true);
    g_assert_cmpuint(ram16(flags), ==, 0);

    /* EVENT_IDX: the avail event stays behind while notifications are off */
    ring_init(&vq);
    vq.event_idx = true;
    avail_idx = 0;
    virtqueue_set_notification(&vq, false);
    ring_add(&avail_idx, 2);
    for (int i = 0; i < 2; i++) {
        g_assert_cmpint(virtqueue_pop(&vq, &elem, &error_abort), ==, 1);
        virtqueue_push(&vq, elem, 0, &error_abort);
        virtqueue_element_free(elem);
    }
    g_assert_cmpuint(ram16(avail_event), ==, 0);
    g_assert_cmpuint(ram16(flags), ==, 0);
    /* back on: the driver's next request is past the avail event */
    virtqueue_set_notification(&vq, true);
    g_assert_cmpuint(ram16(avail_event), ==, 2);
    ring_add(&avail_idx, 1);
    g_assert_cmpint(virtqueue_pop(&vq, &elem, &error_abort), ==, 1);
    g_assert_cmpuint(ram16(avail_event), ==, 3);
    virtqueue_push(&vq, elem, 0, &error_abort);
    virtqueue_element_free(elem);

    /* a broken queue has nothing pending for a poller */
    ring_add(&avail_idx, 1);
    vq.broken = true;
    g_assert_false(virtqueue_avail_pending(&vq));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtqueue/more-than-queue-size",
                    test_more_than_queue_size);
    g_test_add_func("/virtqueue/pop-into", test_pop_into);
    g_test_add_func("/virtqueue/polling", test_polling);
    return g_test_run();
}
