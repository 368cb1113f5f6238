/*
 * The device side of a split virtqueue (see include/virtio/virtqueue.h).
 *
 * Invariants:
 *  1. The driver's avail idx is read once per pop and trusted only if it
 *     is at most num entries ahead of last_avail_idx; a head index read
 *     from the ring is checked against num before it is used.  At most
 *     num elements are popped and not pushed (inuse): the used ring has
 *     room for no more.
 *  2. A chain is followed for at most num descriptors (an indirect table
 *     for at most its own length, itself at most VIRTQUEUE_MAX_SIZE), so
 *     a cycle ends as an error, not a hang.  Indirect tables do not nest,
 *     and an indirect descriptor is never chained (the spec forbids both).
 *  3. Device-readable descriptors all come before device-writable ones.
 *  4. Each buffer is mapped with guest_memory_map_sg(), so every byte of
 *     an element lies in guest RAM; an element holds at most
 *     VIRTQUEUE_MAX_SG pieces in all, in the popper's array or, past its
 *     room, in one of VIRTQUEUE_MAX_SG allocated for the element
 *     (heap_sg), never in both.
 *  5. Once broken, a queue pops and pushes nothing until reset.
 *  6. A used entry is written before the used idx that publishes it
 *     (release); the avail ring entry is read after the avail idx that
 *     published it (acquire); with EVENT_IDX, avail_event is written
 *     before the avail idx is read again (a full fence).
 *  7. With a dirty log (vq->log), every write to the used ring is marked
 *     in it after the write and before anything that publishes it to
 *     the front-end (the call, a reply): virtqueue_used_store16() and
 *     virtqueue_push() are the only writers of the used ring.
 */

#include "virtio/virtqueue.h"

void virtqueue_init(VirtQueue *vq, const GuestMemory *mem)
{
    memset(vq, 0, sizeof(*vq));
    vq->mem = mem;
}

void virtqueue_reset(VirtQueue *vq)
{
    virtqueue_init(vq, vq->mem);
}

static int G_GNUC_PRINTF(3, 4) virtqueue_fail(VirtQueue *vq, Error **errp,
                                              const char *fmt, ...)
{
    va_list ap;
    g_autofree char *msg = NULL;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    vq->broken = true;
    error_setg(errp, "virtqueue: %s", msg);
    return -EIO;
}

/* A 16-bit ring field, read with acquire semantics (invariant 6). */
static bool virtqueue_load16(VirtQueue *vq, uint64_t addr, uint16_t *val)
{
    uint64_t len = 2;
    uint16_t *p = vq->mem->map(vq->mem->opaque, addr, &len);

    if (!p || len < 2 || (uintptr_t)p % 2) {
        return false;
    }
    *val = GUINT16_FROM_LE(__atomic_load_n(p, __ATOMIC_ACQUIRE));
    return true;
}

static bool virtqueue_store16(VirtQueue *vq, uint64_t addr, uint16_t val)
{
    uint64_t len = 2;
    uint16_t *p = vq->mem->map(vq->mem->opaque, addr, &len);

    if (!p || len < 2 || (uintptr_t)p % 2) {
        return false;
    }
    __atomic_store_n(p, GUINT16_TO_LE(val), __ATOMIC_RELEASE);
    return true;
}

/* Invariant 7: marks bytes [@off, +@len) of the used ring in the log. */
static void virtqueue_log_used(VirtQueue *vq, uint64_t off, uint64_t len)
{
    if (vq->log && !vhost_log_mark(vq->log, vq->used_log + off, len)) {
        vq->log_overflow = true;
    }
}

/* A 16-bit field of the used ring, at @off (invariants 6 and 7). */
static bool virtqueue_used_store16(VirtQueue *vq, uint64_t off,
                                   uint16_t val)
{
    if (!virtqueue_store16(vq, vq->used + off, val)) {
        return false;
    }
    virtqueue_log_used(vq, off, sizeof(val));
    return true;
}

static int virtqueue_check_layout(VirtQueue *vq, Error **errp)
{
    if (!vq->ready) {
        return virtqueue_fail(vq, errp, "used before it is ready");
    }
    if (vq->desc % VRING_DESC_ALIGN || vq->avail % VRING_AVAIL_ALIGN ||
        vq->used % VRING_USED_ALIGN) {
        return virtqueue_fail(vq, errp, "rings at %#" PRIx64 "/%#" PRIx64
                              "/%#" PRIx64 " are not aligned as the spec "
                              "requires", vq->desc, vq->avail, vq->used);
    }
    return 0;
}

typedef struct VirtQueueChain {
    struct iovec *sg;           /* the popper's array, or heap */
    unsigned int cap;
    unsigned int n;             /* pieces so far */
    unsigned int out_num;       /* of which device-readable */
    bool heap;
} VirtQueueChain;

/* Invariant 4: a chain longer than the popper's room moves to the heap. */
static bool virtqueue_chain_grow(VirtQueueChain *c)
{
    struct iovec *sg;

    if (c->heap) {
        return false;
    }
    sg = g_new(struct iovec, VIRTQUEUE_MAX_SG);
    memcpy(sg, c->sg, c->n * sizeof(*sg));
    c->sg = sg;
    c->cap = VIRTQUEUE_MAX_SG;
    c->heap = true;
    return true;
}

/* Maps one buffer into the chain (invariants 3 and 4). */
static int virtqueue_add_buffer(VirtQueue *vq, VirtQueueChain *c,
                                const VRingDesc *d, Error **errp)
{
    bool is_write = d->flags & VRING_DESC_F_WRITE;
    unsigned int n = c->n;
    int ret;

    if (!is_write && c->n > c->out_num) {
        return virtqueue_fail(vq, errp, "a device-readable descriptor "
                              "follows a device-writable one");
    }
    do {
        c->n = n;
        ret = guest_memory_map_sg(vq->mem, d->addr, d->len, c->sg, &c->n,
                                  c->cap);
    } while (ret == -E2BIG && virtqueue_chain_grow(c));
    if (ret == -E2BIG) {
        return virtqueue_fail(vq, errp, "a chain needs more than %d buffer "
                              "pieces", VIRTQUEUE_MAX_SG);
    }
    if (ret < 0) {
        return virtqueue_fail(vq, errp, "buffer %#" PRIx64 "+%" PRIu32
                              " is not in guest memory", d->addr, d->len);
    }
    if (!is_write) {
        c->out_num = c->n;
    }
    return 0;
}

static int virtqueue_read_desc(VirtQueue *vq, uint64_t table, uint32_t i,
                               VRingDesc *d, Error **errp)
{
    if (guest_memory_read(vq->mem, table + (uint64_t)i * sizeof(*d), d,
                          sizeof(*d)) < 0) {
        return virtqueue_fail(vq, errp, "descriptor %" PRIu32 " of table "
                              "%#" PRIx64 " is not in guest memory", i,
                              table);
    }
    d->addr = GUINT64_FROM_LE(d->addr);
    d->len = GUINT32_FROM_LE(d->len);
    d->flags = GUINT16_FROM_LE(d->flags);
    d->next = GUINT16_FROM_LE(d->next);
    return 0;
}

/* Follows the chain of an indirect table (invariant 2). */
static int virtqueue_walk_indirect(VirtQueue *vq, VirtQueueChain *c,
                                   const VRingDesc *ind, Error **errp)
{
    uint32_t max = ind->len / sizeof(VRingDesc);
    uint32_t i = 0;

    if (!vq->indirect) {
        return virtqueue_fail(vq, errp, "indirect descriptor without "
                              "VIRTIO_RING_F_INDIRECT_DESC");
    }
    if (ind->len == 0 || ind->len % sizeof(VRingDesc) ||
        max > VIRTQUEUE_MAX_SIZE) {
        return virtqueue_fail(vq, errp, "indirect table of %" PRIu32
                              " bytes", ind->len);
    }
    for (uint32_t steps = 0; ; steps++) {
        VRingDesc d;
        int ret;

        if (steps == max) {
            return virtqueue_fail(vq, errp, "indirect chain longer than its "
                                  "table (%" PRIu32 " entries)", max);
        }
        ret = virtqueue_read_desc(vq, ind->addr, i, &d, errp);
        if (ret < 0) {
            return ret;
        }
        if (d.flags & VRING_DESC_F_INDIRECT) {
            return virtqueue_fail(vq, errp, "nested indirect table");
        }
        ret = virtqueue_add_buffer(vq, c, &d, errp);
        if (ret < 0) {
            return ret;
        }
        if (!(d.flags & VRING_DESC_F_NEXT)) {
            return 0;
        }
        if (d.next >= max) {
            return virtqueue_fail(vq, errp, "indirect descriptor %" PRIu32
                                  " points at %u of %" PRIu32, i, d.next,
                                  max);
        }
        i = d.next;
    }
}

/* Follows the chain from @head in the queue's table (invariant 2). */
static int virtqueue_walk(VirtQueue *vq, VirtQueueChain *c, uint16_t head,
                          Error **errp)
{
    uint16_t i = head;

    for (unsigned int steps = 0; ; steps++) {
        VRingDesc d;
        int ret;

        if (steps == vq->num) {
            return virtqueue_fail(vq, errp, "chain from %u is longer than the"
                                  " queue (%u entries): a loop", head,
                                  vq->num);
        }
        ret = virtqueue_read_desc(vq, vq->desc, i, &d, errp);
        if (ret < 0) {
            return ret;
        }
        if (d.flags & VRING_DESC_F_INDIRECT) {
            if (d.flags & VRING_DESC_F_NEXT || steps > 0) {
                return virtqueue_fail(vq, errp, "indirect descriptor %u is "
                                      "part of a chain", i);
            }
            return virtqueue_walk_indirect(vq, c, &d, errp);
        }
        ret = virtqueue_add_buffer(vq, c, &d, errp);
        if (ret < 0) {
            return ret;
        }
        if (!(d.flags & VRING_DESC_F_NEXT)) {
            return 0;
        }
        if (d.next >= vq->num) {
            return virtqueue_fail(vq, errp, "descriptor %u points at %u of %u",
                                  i, d.next, vq->num);
        }
        i = d.next;
    }
}

/* Maps the chain at @head (checked) into @elem, as the pops do. */
static int virtqueue_map_head(VirtQueue *vq, VirtQueueElement *elem,
                              struct iovec *sg, unsigned int sg_cap,
                              uint16_t head, Error **errp)
{
    VirtQueueChain c = { .sg = sg, .cap = sg_cap };
    int ret;

    if (head >= vq->num) {
        return virtqueue_fail(vq, errp, "available ring names descriptor %u "
                              "of %u", head, vq->num);
    }
    ret = virtqueue_walk(vq, &c, head, errp);
    if (ret < 0) {
        if (c.heap) {
            g_free(c.sg);
        }
        return ret;
    }
    *elem = (VirtQueueElement) {
        .head = head,
        .out_num = c.out_num,
        .in_num = c.n - c.out_num,
        .out_sg = c.sg,
        .in_sg = c.sg + c.out_num,
        .heap_sg = c.heap ? c.sg : NULL,
    };
    return 1;
}

/* What every pop checks first: an empty @elem, a queue that can pop. */
static int virtqueue_pop_begin(VirtQueue *vq, VirtQueueElement *elem,
                               Error **errp)
{
    *elem = (VirtQueueElement) { 0 };
    if (vq->broken) {
        return -EIO;
    }
    return virtqueue_check_layout(vq, errp);
}

int virtqueue_pop_head(VirtQueue *vq, uint16_t head, VirtQueueElement *elem,
                       struct iovec *sg, unsigned int sg_cap, Error **errp)
{
    int ret = virtqueue_pop_begin(vq, elem, errp);

    if (ret < 0) {
        return ret;
    }
    if (vq->inuse >= vq->num) {
        return virtqueue_fail(vq, errp, "%u requests in flight already, as "
                              "many as the queue has entries", vq->inuse);
    }
    ret = virtqueue_map_head(vq, elem, sg, sg_cap, head, errp);
    if (ret > 0) {
        vq->inuse++;
    }
    return ret;
}

int virtqueue_load_used_idx(VirtQueue *vq, uint16_t *idx, Error **errp)
{
    int ret = virtqueue_check_layout(vq, errp);

    if (ret < 0) {
        return ret;
    }
    if (!virtqueue_load16(vq, vq->used + VRING_USED_OFF_IDX, idx)) {
        return virtqueue_fail(vq, errp, "used ring at %#" PRIx64
                              " is not in guest memory", vq->used);
    }
    return 0;
}

int virtqueue_pop_into(VirtQueue *vq, VirtQueueElement *elem,
                       struct iovec *sg, unsigned int sg_cap, Error **errp)
{
    uint16_t avail_idx, head;
    uint64_t slot;
    int ret = virtqueue_pop_begin(vq, elem, errp);

    if (ret < 0) {
        return ret;
    }
    if (!virtqueue_load16(vq, vq->avail + VRING_AVAIL_OFF_IDX, &avail_idx)) {
        return virtqueue_fail(vq, errp, "available ring at %#" PRIx64
                              " is not in guest memory", vq->avail);
    }
    if ((uint16_t)(avail_idx - vq->last_avail_idx) > vq->num) {
        return virtqueue_fail(vq, errp, "available index %u is more than "
                              "%u entries ahead of %u", avail_idx, vq->num,
                              vq->last_avail_idx);
    }
    if (avail_idx == vq->last_avail_idx) {
        return 0;
    }
    if (vq->inuse >= vq->num) {
        /* the driver made entries available that the device still holds:
         * their pushes would overrun the used ring */
        return virtqueue_fail(vq, errp, "%u requests in flight already, as "
                              "many as the queue has entries", vq->inuse);
    }
    slot = vq->avail + VRING_AVAIL_OFF_RING +
           2 * (vq->last_avail_idx % vq->num);
    if (!virtqueue_load16(vq, slot, &head)) {
        return virtqueue_fail(vq, errp, "available ring entry at %#" PRIx64
                              " is not in guest memory", slot);
    }
    ret = virtqueue_map_head(vq, elem, sg, sg_cap, head, errp);
    if (ret < 0) {
        return ret;
    }
    vq->last_avail_idx++;
    vq->inuse++;
    if (vq->event_idx && !vq->no_notify) {
        /* ask to be notified when the driver goes past this one */
        virtqueue_used_store16(vq, VRING_USED_OFF_AVAIL_EVENT(vq->num),
                               vq->last_avail_idx);
        /*
         * The next pop's read of the avail idx must not pass this store:
         * a driver running concurrently (vhost-user) reads avail_event
         * after publishing its idx, and if each side saw the other's old
         * value, the driver would not kick and the device would not see
         * the new request.
         */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
    return 1;
}

void virtqueue_element_release(VirtQueueElement *elem)
{
    g_free(elem->heap_sg);
    elem->heap_sg = NULL;
}

/*
 * The allocating pop of the device models: the element and room for a
 * request's usual pieces (header, data, status) in one allocation.
 */
#define VIRTQUEUE_ELEMENT_SG 8

typedef struct VirtQueueElementBox {
    VirtQueueElement elem;
    struct iovec sg[VIRTQUEUE_ELEMENT_SG];
} VirtQueueElementBox;

int virtqueue_pop(VirtQueue *vq, VirtQueueElement **elem, Error **errp)
{
    VirtQueueElementBox *box = g_new(VirtQueueElementBox, 1);
    int ret = virtqueue_pop_into(vq, &box->elem, box->sg,
                                 VIRTQUEUE_ELEMENT_SG, errp);

    if (ret <= 0) {
        g_free(box);
        *elem = NULL;
        return ret;
    }
    *elem = &box->elem;
    return ret;
}

int virtqueue_push(VirtQueue *vq, const VirtQueueElement *elem,
                   uint32_t len, Error **errp)
{
    VRingUsedElem u = {
        .id = GUINT32_TO_LE(elem->head),
        .len = GUINT32_TO_LE(len),
    };
    uint64_t slot;

    assert(vq->inuse > 0);
    vq->inuse--;
    if (vq->broken) {
        return -EIO;
    }
    slot = VRING_USED_OFF_RING + sizeof(u) * (vq->used_idx % vq->num);
    if (guest_memory_write(vq->mem, vq->used + slot, &u, sizeof(u)) < 0) {
        goto fail;
    }
    /* invariant 7 */
    virtqueue_log_used(vq, slot, sizeof(u));
    if (!virtqueue_used_store16(vq, VRING_USED_OFF_IDX, vq->used_idx + 1)) {
        goto fail;
    }
    vq->used_idx++;
    return 0;

fail:
    return virtqueue_fail(vq, errp, "used ring at %#" PRIx64 " is not in "
                          "guest memory", vq->used);
}

bool virtqueue_avail_pending(VirtQueue *vq)
{
    uint16_t avail_idx;

    if (vq->broken || !vq->num) {
        return false;
    }
    /* invariant 6: acquire, as a pop reads it */
    return virtqueue_load16(vq, vq->avail + VRING_AVAIL_OFF_IDX,
                            &avail_idx) &&
           avail_idx != vq->last_avail_idx;
}

void virtqueue_set_notification(VirtQueue *vq, bool enable)
{
    vq->no_notify = !enable;
    if (vq->broken || !vq->num) {
        return;
    }
    if (vq->event_idx) {
        if (enable) {
            virtqueue_used_store16(vq, VRING_USED_OFF_AVAIL_EVENT(vq->num),
                                   vq->last_avail_idx);
        }
    } else {
        /* the device owns the used ring's flags: NO_NOTIFY is all of them */
        virtqueue_used_store16(vq, VRING_USED_OFF_FLAGS,
                               enable ? 0 : VRING_USED_F_NO_NOTIFY);
    }
    if (enable) {
        /* invariant 6: the driver reads it after publishing its idx */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
}

bool virtqueue_should_notify(VirtQueue *vq)
{
    uint16_t old = vq->signalled_used;
    bool valid = vq->signalled_used_valid;
    uint16_t event, flags;

    if (vq->broken) {
        return false;
    }
    /* the used idx store must be visible before the driver's field is read */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!vq->event_idx) {
        if (!virtqueue_load16(vq, vq->avail + VRING_AVAIL_OFF_FLAGS,
                              &flags)) {
            return true;
        }
        return !(flags & VRING_AVAIL_F_NO_INTERRUPT);
    }
    vq->signalled_used = vq->used_idx;
    vq->signalled_used_valid = true;
    if (!valid || !virtqueue_load16(vq, vq->avail +
                                    VRING_AVAIL_OFF_USED_EVENT(vq->num),
                                    &event)) {
        return true;
    }
    return vring_need_event(event, vq->used_idx, old);
}

void virtqueue_element_free(VirtQueueElement *elem)
{
    if (elem) {
        virtqueue_element_release(elem);
        g_free(container_of(elem, VirtQueueElementBox, elem));
    }
}
