/*
 * The vhost-user back-end (see vhost-user-server.h): the listener, the
 * connection's message loop and the vrings' setup; guest memory is
 * vhost-user-mem.c's, the dirty log vhost-user-log.c's, inflight tracking
 * vhost-user-inflight.c's (its invariants 15, 16), and the rings' request
 * path vhost-user-vring.c's (its invariants 8 to 10, 12, 13).
 *
 * A connection's coroutine reads one message at a time, checks it,
 * carries it out and replies.  The rings run beside it: a kick eventfd's
 * handler pops requests, and their completions (from the block layer)
 * push them back and signal the call eventfd.
 *
 * A vring goes through these states:
 *
 *   stopped --SET_VRING_KICK--> started --GET_VRING_BASE--> stopped
 *   (NUM, ADDR, BASE may be set)  |  (they may not)
 *                                 +-- popping while enabled and not paused
 *
 * Invariants:
 *  1. Guest memory (s->regions) is unmapped or replaced only when no
 *     request is in flight and no ring's thread touches it: a popped
 *     element holds host pointers into it, and a ring's thread reads and
 *     writes its rings through it.  SET_MEM_TABLE pauses every ring in
 *     its own thread (vu_virtq_pause(): no pops, nothing in flight, the
 *     calls signalled), swaps, and resumes them; the end of a connection
 *     stops them and waits.
 *  2. A started ring has its size, its addresses and a kick fd, and its
 *     rings (translated from the front-end's addresses to guest-physical
 *     ones) lie entirely within one memory region each: checked when it
 *     starts and again after every SET_MEM_TABLE.  Its size, addresses
 *     and base change only while it is stopped (a SET_VRING_ADDR of a
 *     running ring may change only how it logs, invariant 14).
 *  3. A ring is stopped (GET_VRING_BASE) only once its own requests have
 *     completed, so the base it reports is where the front-end resumes
 *     and no completion writes to a ring the front-end has taken back.
 *  4. Every request popped is counted in its ring's inflight until it is
 *     pushed back (or the ring broke on it), in the ring's thread; the
 *     message coroutine waits for the count there (q->drain_co) and is
 *     woken from the loop (aio_co_schedule), never inside a completion.
 *  5. A message's file descriptors are closed after it is handled unless
 *     a handler took them (setting its slot to -1).
 *  7. Guest memory cannot kill the process: a region's file that can be
 *     sealed is sealed against shrinking (F_SEAL_SHRINK) before it is
 *     mapped, and every mapping is guarded against SIGBUS
 *     (vhost-user-sigbus.h) from mmap to munmap; a fault ends the
 *     connection from the loop (s->fault_fd), naming region and offset.
 *  6. At most one front-end is connected; the listener is registered with
 *     the loop exactly while none is, the server is not closing and not
 *     backing off: an accept that failed for lack of descriptors or
 *     memory unregisters it for SOCKET_ACCEPT_BACKOFF_NS (s->backoff,
 *     util/accept-backoff.h), logged once until a connection is accepted
 *     again.
 * 11. A ring's state (VuVirtq below its immutable head) is touched only
 *     in the thread of its context q->ctx: by its kick, poll and bottom
 *     half handlers, and by the message coroutine, which moves there for
 *     the length of a message about that ring (vu_virtq_enter(), by
 *     bottom half; vu_dispatch() for the vring messages) and back to
 *     s->ctx before it touches anything else.  No thread ever acquires
 *     another's context for it (util/iothread.h), and nothing waits
 *     for a ring's thread but this coroutine.  Everything else of the
 *     server is s->ctx's: the connection, guest memory (invariant 1),
 *     the device and its requests (vhost-user-vring.c invariant 12).
 *     This is threading rule 13 of docs/architecture.md.
 * 14. Dirty logging (vhost-user-log.c): while the front-end has set
 *     VHOST_F_LOG_ALL and given a log (SET_LOG_BASE), every write of the
 *     back-end to guest memory is marked in the log before the front-end
 *     can learn of it: a request's device-writable pieces before its push
 *     publishes it, and, for a ring that asked (VHOST_VRING_F_LOG), each
 *     write to its used ring as it is made (virtqueue.c invariant 7).  So
 *     when GET_VRING_BASE replies (invariant 3: nothing in flight), the
 *     log holds every write of the ring.
 *
 * Everything but the rings runs in the thread of s->ctx.
 */
#include "vhost-user-int.h"

#include <sys/eventfd.h>
#include <sys/socket.h>

#include "util/co-socket.h"
#include "util/sockets.h"

/* Protocol features offered (the export needs no others). */
#define VU_PROTOCOL_FEATURES                              \
    ((UINT64_C(1) << VHOST_USER_PROTOCOL_F_MQ) |          \
     (UINT64_C(1) << VHOST_USER_PROTOCOL_F_LOG_SHMFD) |   \
     (UINT64_C(1) << VHOST_USER_PROTOCOL_F_REPLY_ACK) |   \
     (UINT64_C(1) << VHOST_USER_PROTOCOL_F_BACKEND_REQ) | \
     (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIG) |      \
     (UINT64_C(1) << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD) | \
     (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS))

/* The virtio features the server adds to the device's. */
#define VU_SERVER_FEATURES                          \
    ((UINT64_C(1) << VHOST_F_LOG_ALL) |             \
     (UINT64_C(1) << VHOST_USER_F_PROTOCOL_FEATURES))

/* Header flags a request may carry. */
#define VU_REQUEST_FLAGS (VHOST_USER_VERSION_MASK | VHOST_USER_NEED_REPLY_MASK)

static void vu_server_update_accepting(VuServer *s);
static void vu_server_shutdown_done(VuServer *s);

/* ---- reporting ---- */

void vu_report(VuServer *s, Error *err)
{
    error_prepend(&err, "%s: ", s->name);
    error_report_err(err);
}

/* Ends the connection from outside the message coroutine. */
void vu_close_client(VuServer *s, Error *err)
{
    vu_report(s, err);
    co_socket_shutdown(&s->sock);
}

/*
 * The same from a ring's thread (invariant 11): the socket is the
 * server's, so only the kernel's side of it is shut down; the message
 * coroutine's next read ends the connection.  The fd stays open until the
 * rings have stopped (vu_client_end()).
 */
void vu_close_client_from_ring(VuServer *s, Error *err)
{
    vu_report(s, err);
    shutdown(s->sock.fd, SHUT_RDWR);
}

/* ---- rings ---- */

void vu_close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* ---- messages ---- */

static VuVirtq *vu_msg_vring(VuServer *s, uint32_t index, Error **errp)
{
    if (index >= s->nvqs) {
        error_setg(errp, "vring index %" PRIu32 " is out of range (%u "
                   "vrings)", index, s->nvqs);
        return NULL;
    }
    return &s->vqs[index];
}

/* A stopped ring, for the messages that set one up (invariant 2). */
static VuVirtq *vu_msg_stopped_vring(VuServer *s, uint32_t index,
                                     Error **errp)
{
    VuVirtq *q = vu_msg_vring(s, index, errp);

    if (q && q->started) {
        error_setg(errp, "vring %" PRIu32 " is running", index);
        return NULL;
    }
    return q;
}

static void vu_reply_u64(VuMsg *reply, uint64_t val)
{
    reply->hdr.size = sizeof(reply->payload.u64);
    reply->payload.u64 = val;
}

static int coroutine_fn vu_get_features(VuServer *s, VuMsg *m,
                                        VuMsg *reply, Error **errp)
{
    vu_reply_u64(reply, s->ops->get_features(s) | VU_SERVER_FEATURES);
    return 0;
}

static int coroutine_fn vu_set_features(VuServer *s, VuMsg *m, VuMsg *reply,
                                        Error **errp)
{
    uint64_t offered = s->ops->get_features(s) | VU_SERVER_FEATURES;
    uint64_t f = m->payload.u64;

    if (f & ~offered) {
        error_setg(errp, "features %#" PRIx64 " were not offered (offer: %#"
                   PRIx64 ")", f & ~offered, offered);
        return -EINVAL;
    }
    s->features = f;
    s->ops->set_features(s, f & ~VU_SERVER_FEATURES);
    for (unsigned int i = 0; i < s->nvqs; i++) {
        VuVirtq *q = &s->vqs[i];

        /* invariant 11 */
        vu_virtq_enter(q);
        q->vq.indirect = f & (UINT64_C(1) << VIRTIO_RING_F_INDIRECT_DESC);
        q->vq.event_idx = f & (UINT64_C(1) << VIRTIO_RING_F_EVENT_IDX);
        q->vq.signalled_used_valid = false;
        /* without protocol features, rings are enabled from the start */
        q->always_enabled =
            !(f & (UINT64_C(1) << VHOST_USER_F_PROTOCOL_FEATURES));
        /* invariant 14: VHOST_F_LOG_ALL starts and stops dirty logging */
        vu_virtq_update_log(q);
        /* a ring that was waiting for protocol features to be decided */
        vu_virtq_process(q);
        vu_virtq_leave(q);
    }
    return 0;
}

static int coroutine_fn vu_get_protocol_features(VuServer *s, VuMsg *m,
                                                 VuMsg *reply, Error **errp)
{
    vu_reply_u64(reply, VU_PROTOCOL_FEATURES);
    return 0;
}

static int coroutine_fn vu_set_protocol_features(VuServer *s, VuMsg *m,
                                                 VuMsg *reply, Error **errp)
{
    uint64_t f = m->payload.u64;

    if (f & ~VU_PROTOCOL_FEATURES) {
        error_setg(errp, "protocol features %#" PRIx64 " were not offered "
                   "(offer: %#" PRIx64 ")", f & ~VU_PROTOCOL_FEATURES,
                   VU_PROTOCOL_FEATURES);
        return -EINVAL;
    }
    s->protocol_features = f;
    return 0;
}

/* SET_OWNER claims a connection that is already the front-end's. */
static int coroutine_fn vu_set_owner(VuServer *s, VuMsg *m, VuMsg *reply,
                                     Error **errp)
{
    return 0;
}

/*
 * RESET_OWNER is obsolete: the specification recommends that back-ends
 * ignore it, because back-ends that dropped their state on it broke
 * front-ends that went on using the connection.
 */
static int coroutine_fn vu_reset_owner(VuServer *s, VuMsg *m, VuMsg *reply,
                                       Error **errp)
{
    return 0;
}

static int coroutine_fn vu_set_vring_num(VuServer *s, VuMsg *m, VuMsg *reply,
                                         Error **errp)
{
    uint32_t num = m->payload.state.num;
    VuVirtq *q = vu_msg_stopped_vring(s, m->payload.state.index, errp);

    if (!q) {
        return -EINVAL;
    }
    if (num == 0 || num > VIRTQUEUE_MAX_SIZE || !is_power_of_2(num)) {
        error_setg(errp, "vring %u: size %" PRIu32 " is not a power of 2 "
                   "from 1 to %d", q->index, num, VIRTQUEUE_MAX_SIZE);
        return -EINVAL;
    }
    q->vq.num = num;
    q->vq.broken = false;
    return 0;
}

/*
 * Invariant 2: a running ring's rings stay where they are; QEMU sends
 * SET_VRING_ADDR to a running ring with the same addresses to start and
 * stop logging its used ring (invariant 14).
 */
static int coroutine_fn vu_set_vring_addr(VuServer *s, VuMsg *m,
                                          VuMsg *reply, Error **errp)
{
    const VhostUserVringAddr *a = &m->payload.addr;
    VuVirtq *q = vu_msg_vring(s, a->index, errp);

    if (!q) {
        return -EINVAL;
    }
    if (a->flags & ~(1u << VHOST_VRING_F_LOG)) {
        error_setg(errp, "vring %u: flags %#" PRIx32 " are unknown",
                   q->index, a->flags);
        return -EINVAL;
    }
    if (q->started) {
        if (a->desc_user_addr != q->desc_uva ||
            a->avail_user_addr != q->avail_uva ||
            a->used_user_addr != q->used_uva) {
            error_setg(errp, "vring %" PRIu32 " is running: its rings "
                       "cannot move", a->index);
            return -EINVAL;
        }
    } else if (a->desc_user_addr % VRING_DESC_ALIGN ||
        a->avail_user_addr % VRING_AVAIL_ALIGN ||
        a->used_user_addr % VRING_USED_ALIGN) {
        error_setg(errp, "vring %u: the rings at %#" PRIx64 "/%#" PRIx64
                   "/%#" PRIx64 " are not aligned as virtio requires",
                   q->index, a->desc_user_addr, a->avail_user_addr,
                   a->used_user_addr);
        return -EINVAL;
    }
    if (!q->started) {
        q->desc_uva = a->desc_user_addr;
        q->avail_uva = a->avail_user_addr;
        q->used_uva = a->used_user_addr;
        q->has_addr = true;
        q->vq.broken = false;
    }
    q->log_used = a->flags & (1u << VHOST_VRING_F_LOG);
    q->log_guest_addr = a->log_guest_addr;
    vu_virtq_update_log(q);
    return 0;
}

static int coroutine_fn vu_set_vring_base(VuServer *s, VuMsg *m,
                                          VuMsg *reply, Error **errp)
{
    uint32_t base = m->payload.state.num;
    VuVirtq *q = vu_msg_stopped_vring(s, m->payload.state.index, errp);

    if (!q) {
        return -EINVAL;
    }
    if (base > UINT16_MAX) {
        error_setg(errp, "vring %u: base %" PRIu32 " is not a 16-bit index",
                   q->index, base);
        return -EINVAL;
    }
    assert(q->inflight == 0);
    q->vq.last_avail_idx = base;
    q->vq.used_idx = base;
    q->vq.signalled_used_valid = false;
    q->vq.inuse = 0;
    q->vq.broken = false;
    return 0;
}

static int coroutine_fn vu_get_vring_base(VuServer *s, VuMsg *m,
                                          VuMsg *reply, Error **errp)
{
    VuVirtq *q = vu_msg_vring(s, m->payload.state.index, errp);

    if (!q) {
        return -EINVAL;
    }
    /* invariant 3 */
    vu_virtq_stop(q);
    vu_virtq_wait_inflight(q);
    reply->hdr.size = sizeof(reply->payload.state);
    reply->payload.state.index = q->index;
    reply->payload.state.num = q->vq.last_avail_idx;
    return 0;
}

/* The vring and the descriptor of SET_VRING_KICK/CALL/ERR (-1: none). */
static VuVirtq *vu_msg_vring_fd(VuServer *s, VuMsg *m, int *fd, Error **errp)
{
    uint64_t v = m->payload.u64;
    bool nofd = v & VHOST_USER_VRING_NOFD_MASK;
    VuVirtq *q;

    if (v & ~(uint64_t)(VHOST_USER_VRING_IDX_MASK |
                        VHOST_USER_VRING_NOFD_MASK)) {
        error_setg(errp, "payload %#" PRIx64 " sets reserved bits", v);
        return NULL;
    }
    q = vu_msg_vring(s, v & VHOST_USER_VRING_IDX_MASK, errp);
    if (!q) {
        return NULL;
    }
    if (m->nfds != (nofd ? 0 : 1)) {
        error_setg(errp, "vring %u: %zu file descriptors, expected %d",
                   q->index, m->nfds, nofd ? 0 : 1);
        return NULL;
    }
    *fd = -1;
    if (!nofd) {
        *fd = m->fds[0];
        m->fds[0] = -1;
        /* a blocking descriptor must never stall the event loop */
        if (fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK) < 0) {
            error_setg_errno(errp, errno, "vring %u: file descriptor",
                             q->index);
            vu_close_fd(fd);
            return NULL;
        }
    }
    return q;
}

static int coroutine_fn vu_set_vring_kick(VuServer *s, VuMsg *m,
                                          VuMsg *reply, Error **errp)
{
    int fd;
    VuVirtq *q = vu_msg_vring_fd(s, m, &fd, errp);
    int ret;

    if (!q) {
        return -EINVAL;
    }
    if (fd < 0) {
        error_setg(errp, "vring %u: no kick file descriptor (polling the "
                   "rings is not supported)", q->index);
        return -EINVAL;
    }
    if (!aio_fd_can_be_watched(fd)) {
        close(fd);
        error_setg(errp, "vring %u: the kick file descriptor cannot be "
                   "polled (not an eventfd)", q->index);
        return -EINVAL;
    }
    if (!q->vq.num || !q->has_addr) {
        close(fd);
        error_setg(errp, "vring %u: kick file descriptor before its %s",
                   q->index, !q->vq.num ? "size" : "address");
        return -EINVAL;
    }
    if (!q->started) {
        ret = vu_virtq_map_rings(q, errp);
        if (ret < 0) {
            close(fd);
            return ret;
        }
    }
    return vu_virtq_start(q, fd, errp);
}

/* Which of a vring's notifiers a SET_VRING_CALL or SET_VRING_ERR sets. */
typedef enum VuVringNotifier {
    VU_VRING_CALL,              /* q->call_fd: used buffers are ready */
    VU_VRING_ERR,               /* q->err_fd: the ring is broken */
} VuVringNotifier;

/*
 * SET_VRING_CALL and SET_VRING_ERR do the same to different notifiers: the
 * descriptor the message carries (or none) takes the place of the vring's,
 * whose old descriptor is closed.
 */
static int coroutine_fn vu_set_vring_notifier(VuServer *s, VuMsg *m,
                                              VuVringNotifier which,
                                              Error **errp)
{
    int fd;
    VuVirtq *q = vu_msg_vring_fd(s, m, &fd, errp);
    int *slot;

    if (!q) {
        return -EINVAL;
    }
    slot = which == VU_VRING_CALL ? &q->call_fd : &q->err_fd;
    vu_close_fd(slot);
    *slot = fd;
    return 0;
}

static int coroutine_fn vu_set_vring_call(VuServer *s, VuMsg *m,
                                          VuMsg *reply, Error **errp)
{
    return vu_set_vring_notifier(s, m, VU_VRING_CALL, errp);
}

static int coroutine_fn vu_set_vring_err(VuServer *s, VuMsg *m,
                                         VuMsg *reply, Error **errp)
{
    return vu_set_vring_notifier(s, m, VU_VRING_ERR, errp);
}

static int coroutine_fn vu_get_queue_num(VuServer *s, VuMsg *m, VuMsg *reply,
                                         Error **errp)
{
    vu_reply_u64(reply, s->nvqs);
    return 0;
}

static int coroutine_fn vu_set_vring_enable(VuServer *s, VuMsg *m,
                                            VuMsg *reply, Error **errp)
{
    uint32_t enable = m->payload.state.num;
    VuVirtq *q = vu_msg_vring(s, m->payload.state.index, errp);

    if (!q) {
        return -EINVAL;
    }
    if (enable > 1) {
        error_setg(errp, "vring %u: enable value %" PRIu32 ", not 0 or 1",
                   q->index, enable);
        return -EINVAL;
    }
    q->enabled = enable;
    vu_virtq_process(q);
    return 0;
}

/* The channel on which the back-end notifies the front-end. */
static int coroutine_fn vu_set_backend_req_fd(VuServer *s, VuMsg *m,
                                              VuMsg *reply, Error **errp)
{
    if (m->nfds != 1) {
        error_setg(errp, "%zu file descriptors, expected 1", m->nfds);
        return -EINVAL;
    }
    vu_close_fd(&s->backend_fd);
    s->backend_fd = m->fds[0];
    m->fds[0] = -1;
    return 0;
}

/* The config range of GET_CONFIG/SET_CONFIG, checked against the size. */
static int vu_msg_config(VuMsg *m, Error **errp)
{
    const VhostUserConfig *c = &m->payload.config;

    if (m->hdr.size < VHOST_USER_CONFIG_HDR_SIZE) {
        error_setg(errp, "payload of %" PRIu32 " bytes has no config "
                   "header", m->hdr.size);
        return -EINVAL;
    }
    if (c->size > VHOST_USER_MAX_CONFIG_SIZE ||
        c->offset > VHOST_USER_MAX_CONFIG_SIZE - c->size) {
        error_setg(errp, "config range %" PRIu32 "+%" PRIu32 " is beyond "
                   "the %d bytes of config space", c->offset, c->size,
                   VHOST_USER_MAX_CONFIG_SIZE);
        return -EINVAL;
    }
    if (m->hdr.size != VHOST_USER_CONFIG_HDR_SIZE + c->size) {
        error_setg(errp, "payload of %" PRIu32 " bytes for %" PRIu32
                   " bytes of config", m->hdr.size, c->size);
        return -EINVAL;
    }
    return 0;
}

static int coroutine_fn vu_get_config(VuServer *s, VuMsg *m, VuMsg *reply,
                                      Error **errp)
{
    const VhostUserConfig *c = &m->payload.config;
    /* the device's bytes; any the front-end asks beyond them read 0 */
    uint8_t config[VHOST_USER_MAX_CONFIG_SIZE] = { 0 };
    int ret = vu_msg_config(m, errp);

    if (ret < 0) {
        return ret;
    }
    s->ops->get_config(s, config);
    reply->hdr.size = m->hdr.size;
    reply->payload.config.offset = c->offset;
    reply->payload.config.size = c->size;
    reply->payload.config.flags = 0;
    memcpy(reply->payload.config.region, config + c->offset, c->size);
    return 0;
}

static int coroutine_fn vu_set_config(VuServer *s, VuMsg *m, VuMsg *reply,
                                      Error **errp)
{
    const VhostUserConfig *c = &m->payload.config;
    Error *err = NULL;
    int ret = vu_msg_config(m, errp);

    if (ret < 0) {
        return ret;
    }
    if (c->flags != VHOST_SET_CONFIG_TYPE_FRONTEND &&
        c->flags != VHOST_SET_CONFIG_TYPE_MIGRATION) {
        error_setg(errp, "config flags %#" PRIx32 " are unknown", c->flags);
        return -EINVAL;
    }
    if (!s->ops->set_config) {
        error_setg(&err, "the configuration space is read-only");
        ret = -EPERM;
    } else {
        ret = s->ops->set_config(s, c->region, c->offset, c->size, &err);
    }
    if (ret < 0) {
        /* a refusal, not a broken protocol: the connection stays */
        error_prepend(&err, "config write at %" PRIu32 "+%" PRIu32
                      " refused: ", c->offset, c->size);
        vu_report(s, err);
        vu_reply_u64(reply, -ret);
    }
    return 0;
}

/* Any payload size: the handler checks it. */
#define VU_SIZE_ANY UINT32_MAX

/* Where a message about one vring names it (invariant 11). */
typedef enum VuVringArg {
    VU_VRING_NONE,              /* not about one vring */
    VU_VRING_STATE,             /* payload.state.index */
    VU_VRING_ADDR,              /* payload.addr.index */
    VU_VRING_FD,                /* payload.u64's index bits */
} VuVringArg;

typedef struct VuRequestType {
    const char *name;
    int coroutine_fn (*handle)(VuServer *s, VuMsg *m, VuMsg *reply,
                               Error **errp);
    uint32_t size;              /* payload bytes, or VU_SIZE_ANY */
    bool takes_fds;             /* the handler checks their number */
    bool has_reply;             /* the request has a reply of its own */
    VuVringArg vring;           /* handled in that vring's thread */
} VuRequestType;

#define VU_U64 sizeof(uint64_t)
#define VU_STATE sizeof(VhostUserVringState)

/*
 * The requests the back-end carries out; the others (IOTLB, postcopy,
 * status) belong to features it does not
 * offer, so a front-end that sends them breaks the protocol.  SET_LOG_FD
 * (an eventfd to signal after logging) is for the kernel's vhost: no
 * vhost-user front-end sends it, and the log needs no signal.
 */
static const VuRequestType vu_requests[VHOST_USER_MAX_REQUEST] = {
    [VHOST_USER_GET_FEATURES] = {
        "VHOST_USER_GET_FEATURES", vu_get_features, 0, false, true },
    [VHOST_USER_SET_FEATURES] = {
        "VHOST_USER_SET_FEATURES", vu_set_features, VU_U64, false, false },
    [VHOST_USER_SET_OWNER] = {
        "VHOST_USER_SET_OWNER", vu_set_owner, 0, false, false },
    [VHOST_USER_RESET_OWNER] = {
        "VHOST_USER_RESET_OWNER", vu_reset_owner, 0, false, false },
    [VHOST_USER_SET_MEM_TABLE] = {
        "VHOST_USER_SET_MEM_TABLE", vu_set_mem_table, VU_SIZE_ANY, true,
        false },
    [VHOST_USER_SET_LOG_BASE] = {
        "VHOST_USER_SET_LOG_BASE", vu_set_log_base, sizeof(VhostUserLog),
        true, true },
    [VHOST_USER_SET_VRING_NUM] = {
        "VHOST_USER_SET_VRING_NUM", vu_set_vring_num, VU_STATE, false,
        false, VU_VRING_STATE },
    [VHOST_USER_SET_VRING_ADDR] = {
        "VHOST_USER_SET_VRING_ADDR", vu_set_vring_addr,
        sizeof(VhostUserVringAddr), false, false, VU_VRING_ADDR },
    [VHOST_USER_SET_VRING_BASE] = {
        "VHOST_USER_SET_VRING_BASE", vu_set_vring_base, VU_STATE, false,
        false, VU_VRING_STATE },
    [VHOST_USER_GET_VRING_BASE] = {
        "VHOST_USER_GET_VRING_BASE", vu_get_vring_base, VU_STATE, false,
        true, VU_VRING_STATE },
    [VHOST_USER_SET_VRING_KICK] = {
        "VHOST_USER_SET_VRING_KICK", vu_set_vring_kick, VU_U64, true, false,
        VU_VRING_FD },
    [VHOST_USER_SET_VRING_CALL] = {
        "VHOST_USER_SET_VRING_CALL", vu_set_vring_call, VU_U64, true, false,
        VU_VRING_FD },
    [VHOST_USER_SET_VRING_ERR] = {
        "VHOST_USER_SET_VRING_ERR", vu_set_vring_err, VU_U64, true, false,
        VU_VRING_FD },
    [VHOST_USER_GET_PROTOCOL_FEATURES] = {
        "VHOST_USER_GET_PROTOCOL_FEATURES", vu_get_protocol_features, 0,
        false, true },
    [VHOST_USER_SET_PROTOCOL_FEATURES] = {
        "VHOST_USER_SET_PROTOCOL_FEATURES", vu_set_protocol_features,
        VU_U64, false, false },
    [VHOST_USER_GET_QUEUE_NUM] = {
        "VHOST_USER_GET_QUEUE_NUM", vu_get_queue_num, 0, false, true },
    [VHOST_USER_SET_VRING_ENABLE] = {
        "VHOST_USER_SET_VRING_ENABLE", vu_set_vring_enable, VU_STATE, false,
        false, VU_VRING_STATE },
    [VHOST_USER_SET_BACKEND_REQ_FD] = {
        "VHOST_USER_SET_BACKEND_REQ_FD", vu_set_backend_req_fd, 0, true,
        false },
    [VHOST_USER_GET_CONFIG] = {
        "VHOST_USER_GET_CONFIG", vu_get_config, VU_SIZE_ANY, false, true },
    [VHOST_USER_SET_CONFIG] = {
        "VHOST_USER_SET_CONFIG", vu_set_config, VU_SIZE_ANY, false, false },
    [VHOST_USER_GET_INFLIGHT_FD] = {
        "VHOST_USER_GET_INFLIGHT_FD", vu_get_inflight_fd,
        sizeof(VhostUserInflight), false, true },
    [VHOST_USER_SET_INFLIGHT_FD] = {
        "VHOST_USER_SET_INFLIGHT_FD", vu_set_inflight_fd,
        sizeof(VhostUserInflight), true, false },
    [VHOST_USER_GET_MAX_MEM_SLOTS] = {
        "VHOST_USER_GET_MAX_MEM_SLOTS", vu_get_max_mem_slots, 0, false,
        true },
    [VHOST_USER_ADD_MEM_REG] = {
        "VHOST_USER_ADD_MEM_REG", vu_add_mem_reg,
        sizeof(VhostUserMemRegMsg), true, false },
    [VHOST_USER_REM_MEM_REG] = {
        "VHOST_USER_REM_MEM_REG", vu_rem_mem_reg,
        sizeof(VhostUserMemRegMsg), true, false },
};

static void vu_msg_close_fds(VuMsg *m)
{
    for (size_t i = 0; i < m->nfds; i++) {
        vu_close_fd(&m->fds[i]);
    }
    m->nfds = 0;
}

/* Reads a message; -EPIPE (quietly) when the front-end hung up first. */
static int coroutine_fn vu_read_msg(VuServer *s, VuMsg *m, Error **errp)
{
    size_t n;
    int ret;

    ret = co_socket_read_fds(&s->sock, &m->hdr, sizeof(m->hdr), m->fds,
                             VHOST_USER_MAX_FDS, &m->nfds);
    if (ret == -EPIPE || ret == -ESHUTDOWN) {
        return ret;
    }
    if (ret == -EMSGSIZE) {
        error_setg(errp, "a message came with more than the %d file "
                   "descriptors any request takes", VHOST_USER_MAX_FDS);
        return ret;
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "reading a message");
        return ret;
    }
    if ((m->hdr.flags & ~VU_REQUEST_FLAGS) ||
        (m->hdr.flags & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION) {
        error_setg(errp, "request %" PRIu32 " has flags %#" PRIx32
                   " (version %d without REPLY expected)", m->hdr.request,
                   m->hdr.flags, VHOST_USER_VERSION);
        return -EINVAL;
    }
    if (m->hdr.size > VHOST_USER_PAYLOAD_MAX) {
        error_setg(errp, "request %" PRIu32 " has a payload of %" PRIu32
                   " bytes, more than the %zu of any request this back-end "
                   "takes", m->hdr.request, m->hdr.size,
                   VHOST_USER_PAYLOAD_MAX);
        return -EINVAL;
    }
    memset(&m->payload, 0, sizeof(m->payload));
    ret = co_socket_read_fds(&s->sock, &m->payload, m->hdr.size,
                             m->fds + m->nfds, VHOST_USER_MAX_FDS - m->nfds,
                             &n);
    if (ret == -EMSGSIZE) {
        error_setg(errp, "request %" PRIu32 " came with more than %d file "
                   "descriptors", m->hdr.request, VHOST_USER_MAX_FDS);
        return ret;
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "reading the %" PRIu32 "-byte payload "
                         "of request %" PRIu32, m->hdr.size, m->hdr.request);
        return ret;
    }
    m->nfds += n;
    return 0;
}

/* Sends @reply and the descriptors it holds, which it closes. */
static int coroutine_fn vu_send_reply(VuServer *s, const VuMsg *m,
                                      VuMsg *reply, Error **errp)
{
    struct iovec iov[2] = {
        { .iov_base = &reply->hdr, .iov_len = sizeof(reply->hdr) },
        { .iov_base = &reply->payload, .iov_len = reply->hdr.size },
    };
    int ret;

    reply->hdr.request = m->hdr.request;
    reply->hdr.flags = VHOST_USER_VERSION | VHOST_USER_REPLY_MASK;
    ret = co_socket_writev_fds(&s->sock, iov, ARRAY_SIZE(iov), reply->fds,
                               reply->nfds);
    vu_msg_close_fds(reply);
    if (ret < 0 && ret != -EPIPE && ret != -ESHUTDOWN) {
        error_setg_errno(errp, -ret, "sending a reply");
    }
    return ret;
}

/*
 * The vring a message of type @t is about, or NULL (none, or an index out
 * of range, which the handler reports).  The payload's size is checked.
 */
static VuVirtq *vu_dispatch_vring(VuServer *s, const VuRequestType *t,
                                  const VuMsg *m)
{
    uint64_t index;

    switch (t->vring) {
    case VU_VRING_STATE:
        index = m->payload.state.index;
        break;
    case VU_VRING_ADDR:
        index = m->payload.addr.index;
        break;
    case VU_VRING_FD:
        index = m->payload.u64 & VHOST_USER_VRING_IDX_MASK;
        break;
    default:
        return NULL;
    }
    return index < s->nvqs ? &s->vqs[index] : NULL;
}

static int coroutine_fn vu_dispatch(VuServer *s, VuMsg *m, Error **errp)
{
    uint32_t req = m->hdr.request;
    const VuRequestType *t = req < ARRAY_SIZE(vu_requests) ? &vu_requests[req]
                                                            : NULL;
    VuMsg reply = { 0 };
    VuVirtq *q;
    int ret;

    if (!t || !t->handle) {
        error_setg(errp, "request %" PRIu32 " is not supported", req);
        return -ENOTSUP;
    }
    if (t->size != VU_SIZE_ANY && m->hdr.size != t->size) {
        error_setg(errp, "%s with a payload of %" PRIu32 " bytes, not %"
                   PRIu32, t->name, m->hdr.size, t->size);
        return -EINVAL;
    }
    if (!t->takes_fds && m->nfds) {
        error_setg(errp, "%s came with file descriptors (%zu)", t->name,
                   m->nfds);
        return -EINVAL;
    }
    q = vu_dispatch_vring(s, t, m);
    if (q) {
        /* invariant 11: the message is carried out in the ring's thread */
        vu_virtq_enter(q);
    }
    ret = t->handle(s, m, &reply, errp);
    if (q) {
        vu_virtq_leave(q);
    }
    if (ret < 0) {
        vu_msg_close_fds(&reply);
        error_prepend(errp, "%s: ", t->name);
        return ret;
    }
    if (!t->has_reply) {
        if (!(m->hdr.flags & VHOST_USER_NEED_REPLY_MASK) ||
            !(s->protocol_features &
              (UINT64_C(1) << VHOST_USER_PROTOCOL_F_REPLY_ACK))) {
            return 0;
        }
        /* REPLY_ACK: 0 for success, or what the handler refused with */
        reply.hdr.size = sizeof(reply.payload.u64);
    }
    return vu_send_reply(s, m, &reply, errp);
}

/* ---- the connection ---- */

/*
 * The front-end is gone: invariants 1 and 3, each ring in its thread
 * (invariant 11), then a clean slate.
 */
static void coroutine_fn vu_client_end(VuServer *s)
{
    for (unsigned int i = 0; i < s->nvqs; i++) {
        VuVirtq *q = &s->vqs[i];

        vu_virtq_enter(q);
        vu_virtq_stop(q);
        vu_virtq_wait_inflight(q);
        vu_virtq_reset(q);
        vu_virtq_leave(q);
        /*
         * Invariant 11: once back here, the device's thread has no
         * handoff under way; one more visit lets a done_bh it scheduled
         * after its last slot was taken run before the ring is freed.
         */
        vu_virtq_enter(q);
        vu_virtq_leave(q);
    }
    vu_log_unmap(s);
    vu_inflight_unmap(s);
    vu_mem_unmap(s->regions, s->nregions);
    s->nregions = 0;
    s->features = 0;
    s->protocol_features = 0;
    vu_close_fd(&s->backend_fd);
    if (s->ops->reset) {
        s->ops->reset(s);
    }
    co_socket_close(&s->sock);
    s->connected = false;
    if (s->freeing) {
        return;
    }
    vu_server_update_accepting(s);
    if (s->client_changed) {
        s->client_changed(s->opaque, false);
    }
    if (s->closing) {
        vu_server_shutdown_done(s);
    }
}

static void coroutine_fn vu_client_co(void *opaque)
{
    VuServer *s = opaque;

    for (;;) {
        VuMsg m = { .nfds = 0 };
        Error *err = NULL;
        int ret = vu_read_msg(s, &m, &err);

        if (ret == 0) {
            ret = vu_dispatch(s, &m, &err);
        }
        vu_msg_close_fds(&m);
        if (ret < 0) {
            if (err) {
                error_append_hint(&err, "Closing the connection\n");
                vu_report(s, err);
            }
            break;
        }
    }
    vu_client_end(s);
}

/* Invariant 6: the back-off began or ended. */
static void vu_server_backoff_changed(void *opaque)
{
    vu_server_update_accepting(opaque);
}

static void vu_server_accept(void *opaque)
{
    VuServer *s = opaque;
    int fd = socket_accept(s->listen_fd);

    if (accept_backoff_check(&s->backoff, fd, "%s: accepting a connection",
                             s->name)) {
        return;
    }
    if (fd < 0) {
        if (fd != -EAGAIN) {
            error_report("%s: accepting a connection: %s", s->name,
                         strerror(-fd));
        }
        return;
    }
    assert(!s->connected);
    s->connected = true;
    co_socket_init(&s->sock, fd, s->ctx);
    /* messages are rare: they may wait for a busy-poll window to end */
    co_socket_set_poll_rare(&s->sock);
    vu_server_update_accepting(s);
    if (s->client_changed) {
        s->client_changed(s->opaque, true);
    }
    qemu_coroutine_enter(qemu_coroutine_create(vu_client_co, s));
}

/* Invariant 6. */
static void vu_server_update_accepting(VuServer *s)
{
    bool want = !s->connected && !s->closing &&
                !accept_backoff_active(&s->backoff);

    if (want != s->accepting) {
        s->accepting = want;
        /* a connection may wait for a busy-poll window to end */
        aio_set_fd_handler_rare(s->ctx, s->listen_fd,
                                want ? vu_server_accept : NULL, NULL, s);
    }
}

/* ---- the server ---- */

VuServer *vu_server_new(AioContext *ctx, const VuServerConfig *cfg,
                        Error **errp)
{
    g_autoptr(SocketAddress) addr = NULL;
    SocketUnixFile unix_file = { 0 };
    VuServer *s;
    int fd, fault_fd;

    assert(cfg->num_queues >= 1 && cfg->num_queues <= VU_MAX_QUEUES);
    assert(cfg->ops->config_size <= VHOST_USER_MAX_CONFIG_SIZE);
    fault_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fault_fd < 0) {
        error_setg_errno(errp, errno, "%s: eventfd", cfg->name);
        return NULL;
    }
    if (cfg->fd_str) {
        addr = socket_address_new_fd(cfg->fd_str);
        fd = socket_listen(addr, 1, errp);
    } else {
        fd = socket_listen_unix(cfg->path, 1, &unix_file, errp);
    }
    if (fd < 0) {
        close(fault_fd);
        return NULL;
    }
    s = g_new0(VuServer, 1);
    s->ctx = ctx;
    s->name = g_strdup(cfg->name);
    s->path = cfg->fd_str ? NULL : g_strdup(cfg->path);
    s->unix_file = unix_file;
    s->ops = cfg->ops;
    s->opaque = cfg->opaque;
    s->client_changed = cfg->client_changed;
    s->listen_fd = fd;
    s->backend_fd = -1;
    s->mem = (GuestMemory) { .map = vu_mem_map, .opaque = s };
    s->fault_fd = fault_fd;
    /* a fault already stopped the rings; it may wait for a poll window */
    aio_set_fd_handler_rare(ctx, s->fault_fd, vu_mem_faulted, NULL, s);
    accept_backoff_init(&s->backoff, ctx, vu_server_backoff_changed, s);
    s->nvqs = cfg->num_queues;
    s->vqs = g_new0(VuVirtq, s->nvqs);
    for (unsigned int i = 0; i < s->nvqs; i++) {
        vu_virtq_init(s, &s->vqs[i], i,
                      cfg->queue_ctxs ? cfg->queue_ctxs[i] : ctx);
    }
    vu_server_update_accepting(s);
    return s;
}

/* The shutdown is complete: its callback runs from the loop. */
static void vu_server_shutdown_done(VuServer *s)
{
    if (s->shutdown_done) {
        aio_bh_schedule_oneshot(s->ctx, s->shutdown_done, s->shutdown_opaque);
        s->shutdown_done = NULL;
    }
}

void vu_server_shutdown(VuServer *s, void (*done)(void *opaque),
                        void *opaque)
{
    assert(!s->closing);
    s->closing = true;
    s->shutdown_done = done;
    s->shutdown_opaque = opaque;
    vu_server_update_accepting(s);
    close(s->listen_fd);
    s->listen_fd = -1;
    if (s->path) {
        socket_unlink_unix(s->path, &s->unix_file);
    }
    if (s->connected) {
        /* vu_client_end() completes the shutdown */
        co_socket_shutdown(&s->sock);
    } else {
        vu_server_shutdown_done(s);
    }
}

void vu_server_free(VuServer *s)
{
    if (!s) {
        return;
    }
    if (!s->closing) {
        vu_server_shutdown(s, NULL, NULL);
    }
    s->freeing = true;
    AIO_WAIT_WHILE(s->ctx, s->connected);
    accept_backoff_cleanup(&s->backoff);
    aio_set_fd_handler(s->ctx, s->fault_fd, NULL, NULL, NULL);
    close(s->fault_fd);
    for (unsigned int i = 0; i < s->nvqs; i++) {
        vu_virtq_cleanup(&s->vqs[i]);
    }
    g_free(s->vqs);
    g_free(s->name);
    g_free(s->path);
    g_free(s);
}

void *vu_server_opaque(VuServer *s)
{
    return s->opaque;
}

bool vu_server_has_client(VuServer *s)
{
    return s->connected;
}

uint64_t vu_server_features(VuServer *s)
{
    return s->features;
}

void vu_server_config_changed(VuServer *s)
{
    const uint64_t needed =
        (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIG) |
        (UINT64_C(1) << VHOST_USER_PROTOCOL_F_BACKEND_REQ);
    VhostUserHeader hdr = {
        .request = VHOST_USER_BACKEND_CONFIG_CHANGE_MSG,
        .flags = VHOST_USER_VERSION,
    };
    ssize_t n;

    if (!s->connected || s->backend_fd < 0 ||
        (s->protocol_features & needed) != needed) {
        return;
    }
    /*
     * 12 bytes fit any socket buffer that is not full; one that is full
     * belongs to a front-end that does not read it, and waiting for it
     * would stall the loop.
     */
    n = send(s->backend_fd, &hdr, sizeof(hdr), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n != sizeof(hdr)) {
        Error *err = NULL;

        error_setg_errno(&err, n < 0 ? errno : EAGAIN, "sending "
                         "VHOST_USER_BACKEND_CONFIG_CHANGE_MSG");
        vu_report(s, err);
    }
}
