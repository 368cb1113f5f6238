/*
 * The vhost-user server's request path (see vhost-user-int.h): a kick
 * pops the ring's requests into slots kept per ring entry (the first few
 * of an idle ring on their own), their completions push them back, and
 * the call eventfd is signalled as they come, when the driver wants it.
 * The invariants are vhost-user-server.c's; these add:
 *
 *  8. A request allocates nothing: a started ring has one slot per entry
 *     (vq.num, the most it can have in flight, virtqueue.c invariant 1),
 *     each with its element, room for VU_SLOT_SG pieces and the device's
 *     request state; a slot is on free_slots exactly while its request
 *     is not in flight.  Slots change size only with nothing in flight.
 *  9. Every used entry is signalled: each push asks the driver at once
 *     (virtqueue.c's should_notify: EVENT_IDX's used_event, or
 *     VRING_AVAIL_F_NO_INTERRUPT) and signals call_fd if it wants a
 *     call, so nothing is ever left to signal when a ring stops or
 *     pauses.  A driver that reaps as Linux's does (calls off while it
 *     reaps, on again with a last look before it sleeps) gets one call
 *     per sleep, not one per entry, and wakes at the first completion
 *     instead of at the end of the loop iteration.
 * 10. A started ring's kick fd is pollable (util/aio.h): an iothread's
 *     busy-poll reads the avail idx and pops as a kick would, but says
 *     "work" only for what a pop would take (started, enabled, not
 *     paused, a slot free), so a ring it cannot serve never keeps the
 *     loop spinning.  While the loop polls, the ring asks for no kicks
 *     (virtqueue_set_notification()); a ring starts with kicks on, and
 *     they are back on before the loop sleeps (aio-posix.c invariant 7).
 *     A paused ring's poll callbacks touch no guest memory.
 * 12. A remote ring (q->ctx is not s->ctx, the device's) hands its
 *     requests over in batches, never one handoff per request: the
 *     requests one pop loop took go onto q->to_node and one bottom half
 *     of s->ctx (submit_bh) starts them all in the device's thread;
 *     completions (and requests the device refused) go onto q->to_ring
 *     and one bottom half of q->ctx (done_bh) pushes them all, followed
 *     by one call (invariant 9).  A slot on either list belongs to the
 *     thread that takes the list; its link (next_free) is read before
 *     the slot is handed on.  So the device and its BlockBackend only
 *     ever run in s->ctx (threading rule 2 of docs/architecture.md), and
 *     the ring's state only in q->ctx (invariant 11).
 * 13. A pop pass of a ring in the device's thread (not remote) that has
 *     nothing in flight takes at most VU_POP_BURST requests; one that
 *     took that many schedules process_bh, which goes on (or finds
 *     nothing) in the next loop iteration, after the loop has submitted
 *     the first ones (their own io_uring_enter) and pushed what
 *     completed.  So a deep queue whose requests came back together
 *     does not go round again as one batch while the device waits:
 *     device, daemon and driver overlap.  A ring with requests in
 *     flight keeps the device busy anyway and pops all it finds in one
 *     pass (fewer loop iterations and submissions per request).
 *     process_bh pops only while the ring runs (vu_virtq_process).
 */
#include "vhost-user-int.h"

/*
 * Invariant 13: the requests the first pop pass of an idle ring takes.
 * 4 from measurements at depth 32 (docs/performance.md): with every pass
 * cut at 1 or 2, an io_uring_enter per one or two requests lost a tenth
 * of the reads from a disk, at 8 or 16 the batches grew back.  Cutting
 * every pass at 4 served a tenth more reads from one queue than cutting
 * only an idle ring's, but cost a quarter more CPU per request and lost
 * a tenth to a third where the daemon's CPU was the limit (two queues
 * on one iothread).
 */
#define VU_POP_BURST 4

static bool vu_virtq_enabled(VuVirtq *q)
{
    return q->enabled || q->always_enabled;
}

bool vu_virtq_runs(VuVirtq *q)
{
    return q->started && vu_virtq_enabled(q) && !q->paused && !q->vq.broken;
}

void coroutine_fn vu_virtq_enter(VuVirtq *q)
{
    aio_co_reschedule_self(q->ctx);
}

void coroutine_fn vu_virtq_leave(VuVirtq *q)
{
    aio_co_reschedule_self(q->s->ctx);
}

/* Signals an eventfd the front-end gave; a full counter has been told. */
static void vu_virtq_signal(int fd)
{
    uint64_t one = 1;

    if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is saturated, the front-end will look */
        return;
    }
}

static void vu_virtq_process_bh(void *opaque);
static void vu_virtq_submit_bh(void *opaque);
static void vu_virtq_done_bh(void *opaque);

void vu_virtq_init(VuServer *s, VuVirtq *q, unsigned int index,
                   AioContext *ctx)
{
    q->s = s;
    q->index = index;
    q->ctx = ctx;
    q->remote = ctx != s->ctx;
    q->kick_fd = q->call_fd = q->err_fd = -1;
    virtqueue_init(&q->vq, &s->mem);
    q->slot_size = ROUND_UP(sizeof(VuReqSlot) + s->ops->req_size,
                            sizeof(max_align_t));
    q->process_bh = aio_bh_new(ctx, vu_virtq_process_bh, q);
    if (q->remote) {
        q->submit_bh = aio_bh_new(s->ctx, vu_virtq_submit_bh, q);
        q->done_bh = aio_bh_new(ctx, vu_virtq_done_bh, q);
    }
}

/* Invariant 8: nothing in flight. */
static void vu_virtq_free_slots(VuVirtq *q)
{
    assert(q->inflight == 0);
    g_free(q->slots);
    q->slots = NULL;
    q->nslots = 0;
    q->free_slots = NULL;
}

void vu_virtq_cleanup(VuVirtq *q)
{
    vu_virtq_free_slots(q);
    /* invariant 12: nothing in flight, so nothing on the lists */
    assert(!q->to_node && !q->to_ring);
    qemu_bh_delete(q->process_bh);
    if (q->remote) {
        qemu_bh_delete(q->submit_bh);
        qemu_bh_delete(q->done_bh);
    }
}

/* Invariant 8: one slot per entry of a ring of vq.num entries. */
static void vu_virtq_alloc_slots(VuVirtq *q)
{
    if (q->nslots == q->vq.num) {
        return;
    }
    vu_virtq_free_slots(q);
    q->slots = g_malloc(q->slot_size * q->vq.num);
    q->nslots = q->vq.num;
    for (unsigned int i = q->nslots; i-- > 0;) {
        VuReqSlot *slot = (VuReqSlot *)(q->slots + i * q->slot_size);

        slot->next_free = q->free_slots;
        q->free_slots = slot;
    }
}

/* Invariant 12: puts @slot on the LIFO stack *@list (any thread). */
static void vu_slot_push(VuReqSlot **list, VuReqSlot *slot)
{
    VuReqSlot *head = __atomic_load_n(list, __ATOMIC_RELAXED);

    do {
        slot->next_free = head;
    } while (!__atomic_compare_exchange_n(list, &head, slot, true,
                                          __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
}

/* Invariant 12: takes the whole stack *@list, oldest first. */
static VuReqSlot *vu_slot_take_all(VuReqSlot **list)
{
    VuReqSlot *slot = __atomic_exchange_n(list, NULL, __ATOMIC_ACQUIRE);
    VuReqSlot *fifo = NULL;

    while (slot) {
        VuReqSlot *next = slot->next_free;

        slot->next_free = fifo;
        fifo = slot;
        slot = next;
    }
    return fifo;
}

static void vu_virtq_fail_in_ring(VuVirtq *q, VirtQueueElement *elem,
                                  Error *err);
static int vu_virtq_pop(VuVirtq *q, VirtQueueElement **elem);

void vu_virtq_process(VuVirtq *q)
{
    VuServer *s = q->s;
    VirtQueueElement *elem;
    bool handed = false;
    unsigned int popped = 0;
    /* invariant 13: only a ring with nothing in flight is cut */
    unsigned int burst = q->inflight ? UINT_MAX : VU_POP_BURST;

    if (!vu_virtq_runs(q)) {
        return;
    }
    while (vu_virtq_pop(q, &elem) > 0) {
        Error *err = NULL;

        if (!q->remote && ++popped == burst) {
            /* invariant 13: the rest in the next loop iteration */
            qemu_bh_schedule(q->process_bh);
        }
        if (q->remote) {
            vu_slot_push(&q->to_node,
                         container_of(elem, VuReqSlot, elem));
            handed = true;
            continue;
        }
        if (s->ops->handle_request(s, q, elem, &err) < 0) {
            vu_virtq_fail_in_ring(q, elem, err);
            return;
        }
        if (popped == burst) {
            return;
        }
    }
    if (handed) {
        /* invariant 12: one handoff for what this loop popped */
        qemu_bh_schedule(q->submit_bh);
    }
}

/* Invariant 13. */
static void vu_virtq_process_bh(void *opaque)
{
    vu_virtq_process(opaque);
}

/* Invariant 12: in s->ctx, the device runs what a remote ring popped. */
static void vu_virtq_submit_bh(void *opaque)
{
    VuVirtq *q = opaque;
    VuServer *s = q->s;
    VuReqSlot *slot = vu_slot_take_all(&q->to_node);

    while (slot) {
        /* read first: a request that completes at once is handed back */
        VuReqSlot *next = slot->next_free;
        Error *err = NULL;

        if (s->ops->handle_request(s, q, &slot->elem, &err) < 0) {
            slot->err = err;
            vu_slot_push(&q->to_ring, slot);
            qemu_bh_schedule(q->done_bh);
        }
        slot = next;
    }
}

static void vu_virtq_kicked(void *opaque)
{
    VuVirtq *q = opaque;
    uint64_t count;
    ssize_t n = read(q->kick_fd, &count, sizeof(count));

    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n <= 0) {
        Error *err = NULL;

        /* not an eventfd: stop watching it, or the loop would spin */
        aio_set_fd_handler(q->ctx, q->kick_fd, NULL, NULL, NULL);
        error_setg(&err, "vring %u: reading its kick file descriptor "
                   "failed: %s", q->index,
                   n == 0 ? "end of file" : strerror(errno));
        vu_close_client_from_ring(q->s, err);
        return;
    }
    vu_virtq_process(q);
}

/* Invariant 10. */
static bool vu_virtq_poll(void *opaque)
{
    VuVirtq *q = opaque;

    return vu_virtq_runs(q) && q->free_slots &&
           virtqueue_avail_pending(&q->vq);
}

/*
 * The busy-poll saw requests: popped as for a kick, whose eventfd (if
 * the driver wrote it) is read when the loop next sees it.
 */
static void vu_virtq_poll_ready(void *opaque)
{
    vu_virtq_process(opaque);
}

/* Invariant 10: the loop polls, kicks would only wake it needlessly. */
static void vu_virtq_poll_begin(void *opaque)
{
    VuVirtq *q = opaque;

    /* invariant 10: a paused ring's memory may be going */
    if (q->started && !q->paused) {
        virtqueue_set_notification(&q->vq, false);
    }
}

/* Invariant 10: the loop is about to sleep; kicks on, then a last look. */
static bool vu_virtq_poll_end(void *opaque)
{
    VuVirtq *q = opaque;

    if (q->vq.no_notify && !q->paused) {
        virtqueue_set_notification(&q->vq, true);
    }
    return vu_virtq_poll(q);
}

static const AioPollHandlers vu_virtq_poll_handlers = {
    .poll   = vu_virtq_poll,
    .ready  = vu_virtq_poll_ready,
    .begin  = vu_virtq_poll_begin,
    .end    = vu_virtq_poll_end,
};

int vu_virtq_start(VuVirtq *q, int kick_fd, Error **errp)
{
    if (!q->started && vu_virtq_track_start(q, errp) < 0) {
        close(kick_fd);
        return -EINVAL;
    }
    if (q->kick_fd >= 0) {
        aio_set_fd_handler(q->ctx, q->kick_fd, NULL, NULL, NULL);
        vu_close_fd(&q->kick_fd);
    }
    if (!q->started) {
        vu_virtq_alloc_slots(q);
        q->started = true;
    }
    q->kick_fd = kick_fd;
    aio_set_fd_handler(q->ctx, q->kick_fd, vu_virtq_kicked, NULL, q);
    aio_set_fd_poll(q->ctx, q->kick_fd, &vu_virtq_poll_handlers);
    /* invariant 10: kicks on, whatever a poll of the last start left */
    virtqueue_set_notification(&q->vq, true);
    /*
     * the driver may have made requests available before the kick fd, and
     * a back-end before this one may have left some in flight
     */
    vu_virtq_process(q);
    return 0;
}

void vu_virtq_stop(VuVirtq *q)
{
    if (q->kick_fd >= 0) {
        aio_set_fd_handler(q->ctx, q->kick_fd, NULL, NULL, NULL);
        vu_close_fd(&q->kick_fd);
    }
    q->started = false;
    q->vq.ready = false;
}

void vu_virtq_reset(VuVirtq *q)
{
    vu_virtq_stop(q);
    q->track = NULL;
    g_clear_pointer(&q->resubmit, g_free);
    q->nresubmit = q->next_resubmit = 0;
    vu_virtq_free_slots(q);
    vu_close_fd(&q->call_fd);
    vu_close_fd(&q->err_fd);
    virtqueue_reset(&q->vq);
    q->has_addr = false;
    q->desc_uva = q->avail_uva = q->used_uva = 0;
    q->enabled = false;
    q->always_enabled = false;
    q->paused = false;
    q->data_log = NULL;
    q->log_used = false;
    q->log_guest_addr = 0;
    q->log_overflow_reported = false;
}

void coroutine_fn vu_virtq_pause(VuVirtq *q)
{
    q->paused = true;
    /* invariant 9: what was pushed has been signalled */
    vu_virtq_wait_inflight(q);
}

void vu_virtq_resume(VuVirtq *q)
{
    q->paused = false;
    if (q->started) {
        /* invariant 10: a poll window may have been cut short */
        virtqueue_set_notification(&q->vq, true);
    }
    vu_virtq_process(q);
}

/* The guest broke the ring: stop it, tell the front-end. */
static void vu_virtq_broken(VuVirtq *q, Error *err)
{
    q->vq.broken = true;
    if (err) {
        error_prepend(&err, "vring %u: ", q->index);
        vu_report(q->s, err);
    }
    vu_virtq_signal(q->err_fd);
}

unsigned int vu_virtq_index(VuVirtq *q)
{
    return q->index;
}

/*
 * Pops the next available request of @q into *elem.  Returns 1 with an
 * element, which must be completed; 0 if there is none or the queue does
 * not run; -EIO if the ring is (now) broken, which has been reported.
 */
static int vu_virtq_pop(VuVirtq *q, VirtQueueElement **elem)
{
    VuReqSlot *slot = q->free_slots;
    VirtQueueElement none;
    Error *err = NULL;
    uint16_t head;
    int ret;

    *elem = NULL;
    if (!q->started || !vu_virtq_enabled(q) || q->paused) {
        return 0;
    }
    if (slot && vu_virtq_take_resubmit(q, &head)) {
        /* invariant 16: what a dead back-end left, oldest first */
        ret = virtqueue_pop_head(&q->vq, head, &slot->elem, slot->sg,
                                 VU_SLOT_SG, &err);
    } else {
        /*
         * Invariant 8: with no slot free, the ring has vq.num requests in
         * flight, and the pop finds nothing or breaks the ring for a
         * driver that offers more (virtqueue.c invariant 1): it never
         * fills @none.
         */
        ret = virtqueue_pop_into(&q->vq, slot ? &slot->elem : &none,
                                 slot ? slot->sg : NULL,
                                 slot ? VU_SLOT_SG : 0, &err);
    }
    if (ret < 0) {
        vu_virtq_broken(q, err);
        return ret;
    }
    if (ret > 0) {
        assert(slot);
        q->free_slots = slot->next_free;
        q->inflight++;
        *elem = &slot->elem;
        if (q->track) {
            vu_inflight_popped(q, slot->elem.head);
        }
    }
    return ret;
}

void *vu_virtq_req_data(VirtQueueElement *elem)
{
    return container_of(elem, VuReqSlot, elem)->dev;
}

/* Invariants 4 and 8, in the ring's thread. */
static void vu_virtq_request_done(VuVirtq *q, VirtQueueElement *elem)
{
    VuReqSlot *slot = container_of(elem, VuReqSlot, elem);

    virtqueue_element_release(elem);
    slot->next_free = q->free_slots;
    q->free_slots = slot;
    assert(q->inflight > 0);
    q->inflight--;
    if (q->drain_co) {
        Coroutine *co = q->drain_co;

        q->drain_co = NULL;
        aio_co_schedule(q->ctx, co);
    }
}

static void vu_virtq_complete_in_ring(VuVirtq *q, VirtQueueElement *elem,
                                      uint32_t len)
{
    Error *err = NULL;

    if (q->data_log) {
        /* invariant 14: marked before the push publishes it */
        vu_virtq_log_elem(q, elem);
    }
    if (q->track) {
        vu_inflight_pushing(q, elem->head);
    }
    if (virtqueue_push(&q->vq, elem, len, &err) < 0) {
        if (err) {
            vu_virtq_broken(q, err);
        }
    } else {
        if (q->track) {
            vu_inflight_pushed(q, elem->head);
        }
        if (virtqueue_should_notify(&q->vq)) {
            /* invariant 9 */
            vu_virtq_signal(q->call_fd);
        }
    }
    vu_virtq_request_done(q, elem);
}

static void vu_virtq_fail_in_ring(VuVirtq *q, VirtQueueElement *elem,
                                  Error *err)
{
    vu_virtq_broken(q, err);
    vu_virtq_request_done(q, elem);
}

/* Invariants 9 and 12: in the ring's thread, what the device handed back. */
static void vu_virtq_done_bh(void *opaque)
{
    VuVirtq *q = opaque;
    VuReqSlot *slot = vu_slot_take_all(&q->to_ring);

    while (slot) {
        VuReqSlot *next = slot->next_free;

        if (slot->err) {
            vu_virtq_fail_in_ring(q, &slot->elem,
                                  g_steal_pointer(&slot->err));
        } else {
            vu_virtq_complete_in_ring(q, &slot->elem, slot->used_len);
        }
        slot = next;
    }
}

void vu_virtq_complete(VuVirtq *q, VirtQueueElement *elem, uint32_t len)
{
    VuReqSlot *slot;

    if (!q->remote) {
        vu_virtq_complete_in_ring(q, elem, len);
        return;
    }
    /* invariant 12: the device's thread hands it back */
    slot = container_of(elem, VuReqSlot, elem);
    slot->used_len = len;
    slot->err = NULL;
    vu_slot_push(&q->to_ring, slot);
    qemu_bh_schedule(q->done_bh);
}

void coroutine_fn vu_virtq_wait_inflight(VuVirtq *q)
{
    /* invariant 11: in the ring's thread, where the count changes */
    assert(qemu_coroutine_get_aio_context(qemu_coroutine_self()) == q->ctx);
    while (q->inflight) {
        assert(!q->drain_co);
        q->drain_co = qemu_coroutine_self();
        qemu_coroutine_yield();
    }
}
