/*
 * Inflight I/O tracking (VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD): the
 * back-end keeps, in a buffer it shares with the front-end, which of its
 * rings' requests it has popped and not yet pushed back.  The front-end
 * holds the buffer's file descriptor; when the back-end dies and a new
 * one takes its place (QEMU's vhost-user-blk reconnects), the front-end
 * hands the buffer over and the new back-end resubmits those requests,
 * so the guest loses none and none completes twice.  The layout and the
 * procedure are the vhost-user specification's ("Inflight I/O tracking",
 * split virtqueues); the invariants are vhost-user-server.c's, these
 * add:
 *
 * 15. While a ring is tracked (q->track), the entry of each request the
 *     ring pops has inflight = 1 and a counter larger than any before it,
 *     from the pop until its push is published; a push names its head as
 *     last_batch_head before the used ring's idx moves, and clears the
 *     entry and sets used_idx to the new idx after.  So when the process
 *     dies anywhere, an entry that says inflight either was never pushed,
 *     or was the one push whose used idx moved and whose entry was not
 *     cleared yet, which used_idx != the ring's idx tells.  The stores
 *     are ordered (release) against each other and the ring's idx; no
 *     reader runs concurrently (the next back-end reads after this one
 *     is gone).
 * 16. The buffer is the front-end's to write too, so what a new back-end
 *     reads from it is checked like guest memory: a head is below the
 *     ring's size, the resubmitted requests are at most that many, the
 *     last batch is followed for at most as many entries as the region
 *     has, and the buffer is mapped guarded (invariant 7).  The buffer
 *     is replaced or unmapped only while no ring is started.
 */
#include "vhost-user-int.h"

#include <sys/mman.h>

#include "vhost-user-sigbus.h"

/* One descriptor's entry (the specification's DescStateSplit). */
typedef struct VuInflightDesc {
    uint8_t inflight;
    uint8_t padding[5];
    uint16_t next;              /* the next entry of the last batch */
    uint64_t counter;           /* the order the requests were popped in */
} VuInflightDesc;
_Static_assert(sizeof(VuInflightDesc) == 16, "an entry is 16 bytes");

/* One ring's region (the specification's QueueRegionSplit). */
struct VuInflightQueue {
    uint64_t features;
    uint16_t version;           /* 0: new, never used */
    uint16_t desc_num;
    uint16_t last_batch_head;
    uint16_t used_idx;
    VuInflightDesc desc[];
};
_Static_assert(sizeof(VuInflightQueue) == 16, "a region header is 16 bytes");

#define VU_INFLIGHT_VERSION 1
/* Regions start on a cache line: rings in different threads share none. */
#define VU_INFLIGHT_ALIGN 64

/* The buffer as this back-end mapped it. */
struct VuInflightMap {
    uint8_t *host;
    void *mmap_addr;
    size_t mmap_size;
    int guard;                  /* invariant 7 */
    uint16_t num_queues;
    uint16_t queue_size;
};

static size_t vu_inflight_queue_bytes(uint16_t queue_size)
{
    return ROUND_UP(sizeof(VuInflightQueue) +
                    (size_t)queue_size * sizeof(VuInflightDesc),
                    VU_INFLIGHT_ALIGN);
}

void vu_inflight_unmap(VuServer *s)
{
    VuInflightMap *map = s->inflight_map;

    if (!map) {
        return;
    }
    /* invariant 16 */
    for (unsigned int i = 0; i < s->nvqs; i++) {
        assert(!s->vqs[i].started);
    }
    vu_mem_unmap_guarded(map->mmap_addr, map->mmap_size, map->guard);
    g_free(map);
    s->inflight_map = NULL;
}

bool vu_inflight_take_fault(VuServer *s, uint64_t *offset)
{
    return s->inflight_map &&
           vu_sigbus_take_fault(s->inflight_map->guard, offset);
}

/*
 * Checks the buffer's geometry from a GET_INFLIGHT_FD or SET_INFLIGHT_FD
 * and that no ring runs (invariant 16).
 */
static int vu_inflight_check(VuServer *s, const VhostUserInflight *in,
                             Error **errp)
{
    if (!(s->protocol_features &
          (UINT64_C(1) << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD))) {
        error_setg(errp, "the front-end did not negotiate INFLIGHT_SHMFD");
        return -EINVAL;
    }
    if (in->num_queues == 0 || in->num_queues > s->nvqs) {
        error_setg(errp, "%u queues, the device has 1 to %u",
                   in->num_queues, s->nvqs);
        return -EINVAL;
    }
    if (in->queue_size == 0 || in->queue_size > VIRTQUEUE_MAX_SIZE) {
        error_setg(errp, "queues of %u entries, a ring has 1 to %u",
                   in->queue_size, VIRTQUEUE_MAX_SIZE);
        return -EINVAL;
    }
    for (unsigned int i = 0; i < s->nvqs; i++) {
        if (s->vqs[i].started) {
            error_setg(errp, "vring %u is running", i);
            return -EINVAL;
        }
    }
    return 0;
}

/* Maps bytes [@offset, +what @in needs) of @fd as the buffer. */
static int vu_inflight_map(VuServer *s, int fd, uint64_t offset,
                           const VhostUserInflight *in, Error **errp)
{
    VuInflightMap *map = g_new0(VuInflightMap, 1);
    size_t size = in->num_queues * vu_inflight_queue_bytes(in->queue_size);
    int ret;

    ret = vu_mem_map_guarded(s, fd, offset, size, "the inflight buffer",
                             &map->host, &map->mmap_addr, &map->mmap_size,
                             &map->guard, errp);
    if (ret < 0) {
        g_free(map);
        return ret;
    }
    map->num_queues = in->num_queues;
    map->queue_size = in->queue_size;
    vu_inflight_unmap(s);
    s->inflight_map = map;
    return 0;
}

int coroutine_fn vu_get_inflight_fd(VuServer *s, VuMsg *m, VuMsg *reply,
                                    Error **errp)
{
    VhostUserInflight *in = &m->payload.inflight;
    size_t size;
    int fd, ret;

    ret = vu_inflight_check(s, in, errp);
    if (ret < 0) {
        return ret;
    }
    size = in->num_queues * vu_inflight_queue_bytes(in->queue_size);
    fd = memfd_create("qblock-vhost-user-inflight",
                      MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        error_setg_errno(errp, errno, "memfd_create");
        return -errno;
    }
    if (ftruncate(fd, size) < 0) {
        ret = -errno;
        error_setg_errno(errp, errno, "sizing the inflight buffer to %zu "
                         "bytes", size);
        close(fd);
        return ret;
    }
    /* a new memfd reads as zeroes: every region is version 0, unused */
    ret = vu_inflight_map(s, fd, 0, in, errp);
    if (ret < 0) {
        close(fd);
        return ret;
    }
    reply->hdr.size = sizeof(reply->payload.inflight);
    reply->payload.inflight = (VhostUserInflight) {
        .mmap_size = size,
        .mmap_offset = 0,
        .num_queues = in->num_queues,
        .queue_size = in->queue_size,
    };
    /* vu_send_reply() sends it, and closes it: the front-end keeps it */
    reply->fds[0] = fd;
    reply->nfds = 1;
    return 0;
}

int coroutine_fn vu_set_inflight_fd(VuServer *s, VuMsg *m, VuMsg *reply,
                                    Error **errp)
{
    VhostUserInflight *in = &m->payload.inflight;
    size_t need;
    int ret;

    if (m->nfds != 1) {
        error_setg(errp, "%zu file descriptors, expected 1", m->nfds);
        return -EINVAL;
    }
    ret = vu_inflight_check(s, in, errp);
    if (ret < 0) {
        return ret;
    }
    need = in->num_queues * vu_inflight_queue_bytes(in->queue_size);
    if (in->mmap_size < need) {
        error_setg(errp, "a buffer of %" PRIu64 " bytes, %u queues of %u "
                   "entries need %zu", in->mmap_size, in->num_queues,
                   in->queue_size, need);
        return -EINVAL;
    }
    /* the mapping outlives the descriptor, which vu_dispatch() closes */
    return vu_inflight_map(s, m->fds[0], in->mmap_offset, in, errp);
}

/* ---- the rings (in the ring's thread, invariant 11) ---- */

/* An entry @q's region says is in flight, to be resubmitted. */
typedef struct VuResubmit {
    uint64_t counter;
    uint16_t head;
} VuResubmit;

static int vu_resubmit_cmp(const void *a, const void *b)
{
    const VuResubmit *x = a, *y = b;

    return x->counter < y->counter ? -1 : x->counter > y->counter;
}

/*
 * Invariant 15: after a back-end died, clears the entries of its last
 * push if the ring's idx shows it was published.  Invariant 16: at most
 * desc_num entries are followed, each checked.
 */
static void vu_inflight_finish_last_batch(VuInflightQueue *r,
                                          uint16_t used_idx)
{
    uint16_t batch = used_idx - r->used_idx;
    uint16_t head = r->last_batch_head;

    for (unsigned int i = 0; i < batch && i < r->desc_num; i++) {
        if (head >= r->desc_num) {
            break;
        }
        r->desc[head].inflight = 0;
        head = r->desc[head].next;
    }
    __atomic_store_n(&r->used_idx, used_idx, __ATOMIC_RELEASE);
}

int vu_virtq_track_start(VuVirtq *q, Error **errp)
{
    VuInflightMap *map = q->s->inflight_map;
    VuInflightQueue *r;
    uint16_t used_idx;
    unsigned int n = 0;
    int ret;

    g_clear_pointer(&q->resubmit, g_free);
    q->nresubmit = q->next_resubmit = 0;
    q->track = NULL;
    if (!map || q->index >= map->num_queues) {
        return 0;
    }
    if (q->vq.num > map->queue_size) {
        error_setg(errp, "vring %u has %u entries, its inflight region %u",
                   q->index, q->vq.num, map->queue_size);
        return -EINVAL;
    }
    r = (VuInflightQueue *)(map->host +
                            q->index * vu_inflight_queue_bytes(map->queue_size));
    ret = virtqueue_load_used_idx(&q->vq, &used_idx, errp);
    if (ret < 0) {
        return ret;
    }
    q->track_counter = 0;
    if (r->version != VU_INFLIGHT_VERSION || r->desc_num != map->queue_size) {
        /*
         * A new region (or one of another layout): nothing was in flight.
         * Invariant 16: a front-end's garbage is started afresh too.
         */
        memset(r, 0, vu_inflight_queue_bytes(map->queue_size));
        r->desc_num = map->queue_size;
        r->used_idx = used_idx;
        __atomic_store_n(&r->version, VU_INFLIGHT_VERSION, __ATOMIC_RELEASE);
        q->track = r;
        return 0;
    }
    if (r->used_idx != used_idx) {
        vu_inflight_finish_last_batch(r, used_idx);
    }
    q->resubmit = g_new(VuResubmit, q->vq.num);
    for (unsigned int i = 0; i < r->desc_num; i++) {
        if (!r->desc[i].inflight) {
            continue;
        }
        /* invariant 16 */
        if (i >= q->vq.num || n == q->vq.num) {
            error_setg(errp, "vring %u: its inflight region names "
                       "descriptor %u of %u in flight", q->index, i,
                       q->vq.num);
            g_clear_pointer(&q->resubmit, g_free);
            return -EINVAL;
        }
        q->resubmit[n++] = (VuResubmit) { r->desc[i].counter, i };
        q->track_counter = MAX(q->track_counter, r->desc[i].counter + 1);
    }
    qsort(q->resubmit, n, sizeof(q->resubmit[0]), vu_resubmit_cmp);
    q->nresubmit = n;
    if (n) {
        info_report("%s: vring %u: running again the %u requests a back-end "
                    "before this one left in flight", q->s->name, q->index,
                    n);
    }
    /*
     * The front-end set the base to the used idx (it could not ask a dead
     * back-end for it); the requests in flight lie between the two.
     */
    q->vq.used_idx = used_idx;
    q->vq.last_avail_idx = used_idx + n;
    q->vq.signalled_used_valid = false;
    q->track = r;
    return 0;
}

bool vu_virtq_take_resubmit(VuVirtq *q, uint16_t *head)
{
    if (q->next_resubmit == q->nresubmit) {
        if (q->resubmit) {
            g_clear_pointer(&q->resubmit, g_free);
            q->nresubmit = q->next_resubmit = 0;
        }
        return false;
    }
    *head = q->resubmit[q->next_resubmit++].head;
    return true;
}

void vu_inflight_popped(VuVirtq *q, uint16_t head)
{
    VuInflightDesc *d = &q->track->desc[head];

    /* invariant 15: the counter before the flag that makes it count */
    d->counter = q->track_counter++;
    __atomic_store_n(&d->inflight, 1, __ATOMIC_RELEASE);
}

void vu_inflight_pushing(VuVirtq *q, uint16_t head)
{
    VuInflightQueue *r = q->track;

    /* invariant 15: named before the used idx moves */
    r->desc[head].next = r->last_batch_head;
    __atomic_store_n(&r->last_batch_head, head, __ATOMIC_RELEASE);
}

void vu_inflight_pushed(VuVirtq *q, uint16_t head)
{
    VuInflightQueue *r = q->track;

    /* invariant 15: cleared after the used idx moved */
    __atomic_store_n(&r->desc[head].inflight, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&r->used_idx, q->vq.used_idx, __ATOMIC_RELEASE);
}
