/*
 * The vhost-user server's dirty log (include/virtio/vhost-log.h): what
 * lets QEMU migrate a guest live whose disk this export serves.
 *
 * While the front-end migrates, it gives the back-end a shared bitmap
 * (SET_LOG_BASE, with LOG_SHMFD) and sets VHOST_F_LOG_ALL; the back-end
 * marks every guest page it writes, and the front-end copies marked
 * pages again.  On the last pass it stops the rings (GET_VRING_BASE,
 * which waits for what is in flight, invariant 3), reads the log a last
 * time and switches over, so a write that is not marked by then reaches
 * the destination as the old page.
 *
 * Invariant 14 (vhost-user-server.c) in detail:
 *  - a ring logs while the front-end has set VHOST_F_LOG_ALL and a log
 *    is mapped: q->data_log.  The device-writable pieces of each request
 *    are marked in the ring's thread after the device wrote them and
 *    before its push publishes the request (vu_virtq_log_elem());
 *  - its used ring, at the front-end's log address for it, when the
 *    front-end asked (VHOST_VRING_F_LOG): q->vq.log, marked by the
 *    virtqueue as it writes (virtqueue.c invariant 7);
 *  - both are set in the ring's thread only (invariant 11), by
 *    vu_virtq_update_log(); a new log replaces the old one in every ring
 *    before the old one is unmapped, so no thread marks a log that is
 *    gone.
 */
#include "vhost-user-int.h"
#include "vhost-user-sigbus.h"

static bool vu_logging(VuServer *s)
{
    return s->log && (s->features & (UINT64_C(1) << VHOST_F_LOG_ALL));
}

/*
 * Invariant 14.  Reads the server's state from the ring's thread: the
 * message coroutine, which alone changes it, is here (vu_virtq_enter()).
 */
void vu_virtq_update_log(VuVirtq *q)
{
    VuServer *s = q->s;

    q->data_log = vu_logging(s) ? &s->log->log : NULL;
    q->vq.log = q->data_log && q->log_used ? q->data_log : NULL;
    q->vq.used_log = q->log_guest_addr;
}

/* Once per ring and connection: a front-end whose log is too small. */
static void vu_virtq_log_overflow(VuVirtq *q, uint64_t addr)
{
    Error *err = NULL;

    if (q->log_overflow_reported) {
        return;
    }
    q->log_overflow_reported = true;
    error_setg(&err, "vring %u: the %" PRIu64 "-byte dirty log does not "
               "cover guest address %#" PRIx64 ": a migration may copy that "
               "page without the device's writes", q->index,
               q->data_log->size, addr);
    vu_report(q->s, err);
}

void vu_virtq_log_elem(VuVirtq *q, const VirtQueueElement *elem)
{
    for (unsigned int i = 0; i < elem->in_num; i++) {
        const struct iovec *iov = &elem->in_sg[i];
        uint64_t gpa;
        bool mapped;

        if (!iov->iov_len) {
            continue;
        }
        /*
         * Each piece was mapped from one region (guest_memory_map_sg()),
         * which stays mapped while the request is in flight (invariant
         * 1): it translates back.
         */
        mapped = vu_mem_host_to_gpa(q->s, iov->iov_base, iov->iov_len,
                                    &gpa);
        assert(mapped);
        if (!vhost_log_mark(q->data_log, gpa, iov->iov_len)) {
            vu_virtq_log_overflow(q, gpa + iov->iov_len - 1);
        }
    }
    if (q->vq.log_overflow) {
        vu_virtq_log_overflow(q, q->log_guest_addr);
    }
}

static void vu_log_free(VuLogMap *map)
{
    if (map) {
        vu_mem_unmap_guarded(map->mmap_addr, map->mmap_size, map->guard);
        g_free(map);
    }
}

int coroutine_fn vu_set_log_base(VuServer *s, VuMsg *m, VuMsg *reply,
                                 Error **errp)
{
    const VhostUserLog *l = &m->payload.log;
    VuLogMap *map, *old;
    int ret;

    if (!(s->protocol_features &
          (UINT64_C(1) << VHOST_USER_PROTOCOL_F_LOG_SHMFD))) {
        error_setg(errp, "without LOG_SHMFD negotiated (the back-end can "
                   "only reach a log in shared memory)");
        return -EINVAL;
    }
    if (m->nfds != 1) {
        error_setg(errp, "%zu file descriptors, expected 1", m->nfds);
        return -EINVAL;
    }
    if (l->mmap_size == 0) {
        error_setg(errp, "the log is empty");
        return -EINVAL;
    }
    map = g_new0(VuLogMap, 1);
    ret = vu_mem_map_guarded(s, m->fds[0], l->mmap_offset, l->mmap_size,
                             "the dirty log", &map->log.bitmap,
                             &map->mmap_addr, &map->mmap_size, &map->guard,
                             errp);
    if (ret < 0) {
        g_free(map);
        return ret;
    }
    map->log.size = l->mmap_size;

    /* invariant 14: every ring leaves the old log before it goes */
    old = s->log;
    s->log = map;
    for (unsigned int i = 0; i < s->nvqs; i++) {
        VuVirtq *q = &s->vqs[i];

        vu_virtq_enter(q);
        vu_virtq_update_log(q);
        vu_virtq_leave(q);
    }
    vu_log_free(old);
    /* the front-end waits for this reply before it reads the log */
    reply->hdr.size = sizeof(reply->payload.u64);
    reply->payload.u64 = 0;
    return 0;
}

void vu_log_unmap(VuServer *s)
{
    /* the rings were reset: none logs (invariant 14) */
    for (unsigned int i = 0; i < s->nvqs; i++) {
        assert(!s->vqs[i].data_log);
    }
    vu_log_free(g_steal_pointer(&s->log));
}

bool vu_log_take_fault(VuServer *s, uint64_t *offset)
{
    return s->log && vu_sigbus_take_fault(s->log->guard, offset);
}
