/*
 * What the vhost-user server's files share (vhost-user-server.c: the
 * listener, the connection and its messages; vhost-user-mem.c: guest
 * memory; vhost-user-log.c: the dirty log; vhost-user-inflight.c: the
 * requests in flight, tracked for a back-end that restarts;
 * vhost-user-vring.c: the rings' request path and the handoff between a
 * ring's thread and the device's).  The invariants are vhost-user-server.c's.
 */
#ifndef QBLOCK_VHOST_USER_INT_H
#define QBLOCK_VHOST_USER_INT_H

#include "vhost-user-server.h"
#include "block/vhost-user-proto.h"
#include "util/accept-backoff.h"
#include "util/co-socket.h"
#include "util/sockets.h"

/*
 * Buffer pieces a request slot holds without allocating: the header, 32
 * data pieces (128 KiB in 4 KiB guest pages, more than Linux's usual
 * request) and the status byte.  A longer chain gets an array of its own
 * (virtqueue_pop_into()).
 */
#define VU_SLOT_SG 34

/*
 * One ring entry's request storage: the element, its pieces and the
 * device's per-request state (VuDeviceOps.req_size bytes, at dev).
 */
typedef struct VuReqSlot {
    VirtQueueElement elem;
    /*
     * The free list while the slot is free; the handoff list it is on
     * while it travels between the ring's thread and the device's
     * (invariant 12).
     */
    struct VuReqSlot *next_free;
    /* handed back to the ring's thread: bytes written, or why it failed */
    uint32_t used_len;
    Error *err;
    struct iovec sg[VU_SLOT_SG];
    max_align_t dev[];
} VuReqSlot;

/*
 * Guest memory regions held at once (GET_MAX_MEM_SLOTS), added one by
 * one with CONFIGURE_MEM_SLOTS; SET_MEM_TABLE gives at most
 * VHOST_MEMORY_BASELINE_NREGIONS.  As libvhost-user's: QEMU offers a
 * vhost-user device no more memory slots than its back-end has.
 */
#define VU_MAX_MEM_SLOTS 32

typedef struct VuMemRegion {
    uint64_t gpa;               /* guest-physical start */
    uint64_t size;
    uint64_t uva;               /* start in the front-end's address space */
    void *mmap_addr;            /* the mapping, from a page boundary */
    size_t mmap_size;
    uint8_t *host;              /* where gpa is mapped */
    int guard;                  /* invariant 7: vu_sigbus_guard() slot */
} VuMemRegion;

/* vhost-user-inflight.c: a ring's region of the inflight buffer, and it */
typedef struct VuInflightQueue VuInflightQueue;
typedef struct VuInflightMap VuInflightMap;
typedef struct VuResubmit VuResubmit;

/* The dirty log as the back-end mapped it (vhost-user-log.c). */
typedef struct VuLogMap {
    VhostLog log;
    void *mmap_addr;
    size_t mmap_size;
    int guard;                  /* invariant 7: vu_sigbus_guard() slot */
} VuLogMap;

struct VuVirtq {
    /* --- set by vu_virtq_init, immutable --- */
    VuServer *s;
    unsigned int index;
    /*
     * Invariant 11: the context whose thread runs the ring (pops, pushes,
     * kicks, calls); remote when it is not s->ctx, where the device's
     * requests run.
     */
    AioContext *ctx;
    bool remote;

    /* --- everything below: the ring's thread only (invariant 11) --- */
    VirtQueue vq;               /* size, guest-physical rings, indexes */
    /* --- set by the front-end (invariant 2) --- */
    bool has_addr;
    uint64_t desc_uva;
    uint64_t avail_uva;
    uint64_t used_uva;
    int kick_fd;                /* -1: none */
    int call_fd;
    int err_fd;
    bool enabled;               /* SET_VRING_ENABLE */
    /* no VHOST_USER_F_PROTOCOL_FEATURES: enabled from the start */
    bool always_enabled;
    bool started;
    bool paused;                /* SET_MEM_TABLE waits: no pops (inv. 1) */
    /*
     * --- dirty logging (vhost-user-log.c, invariant 14): the log the
     * ring marks the device's writes in (NULL: not logging), and where
     * it logs its used ring when the front-end asked (VHOST_VRING_F_LOG)
     */
    const VhostLog *data_log;
    bool log_used;
    uint64_t log_guest_addr;
    bool log_overflow_reported;
    /*
     * --- inflight tracking (vhost-user-inflight.c, invariants 15, 16):
     * the ring's region (NULL: untracked), the next pop's counter, and
     * the requests a dead back-end left, popped again first ---
     */
    VuInflightQueue *track;
    uint64_t track_counter;
    VuResubmit *resubmit;
    unsigned int nresubmit;
    unsigned int next_resubmit;
    /* --- requests popped and not completed (invariant 4) --- */
    unsigned int inflight;
    Coroutine *drain_co;        /* the message coroutine, waiting for it */
    /* --- vhost-user-vring.c: request slots and the call batch --- */
    uint8_t *slots;             /* vq.num slots of slot_size bytes */
    unsigned int nslots;
    size_t slot_size;
    VuReqSlot *free_slots;
    QEMUBH *process_bh;         /* invariant 13: the rest of a pop pass */

    /*
     * --- invariant 12, a remote ring only: requests popped for the
     * device (to_node, run by submit_bh in s->ctx) and handed back
     * (to_ring, run by done_bh in ctx); atomic LIFO stacks ---
     */
    VuReqSlot *to_node;
    QEMUBH *submit_bh;
    VuReqSlot *to_ring;
    QEMUBH *done_bh;
};

struct VuServer {
    /* --- set by vu_server_new, immutable --- */
    AioContext *ctx;
    char *name;
    /*
     * The socket's path (NULL on an inherited socket, whose file is its
     * starter's), removed at shutdown only while it names the socket
     * bound (unix_file): a newer server that replaced it keeps its own.
     */
    char *path;
    SocketUnixFile unix_file;
    const VuDeviceOps *ops;
    void *opaque;
    void (*client_changed)(void *opaque, bool connected);
    int listen_fd;
    unsigned int nvqs;
    VuVirtq *vqs;
    GuestMemory mem;            /* over regions[] */
    int fault_fd;               /* invariant 7: an eventfd */

    /* --- the server --- */
    bool accepting;             /* invariant 6 */
    AcceptBackoff backoff;      /* invariant 6 */
    bool closing;               /* shut down: the listener is closed */
    bool freeing;               /* vu_server_free() has begun */
    void (*shutdown_done)(void *opaque);
    void *shutdown_opaque;

    /* --- the connection, reset at its end --- */
    bool connected;
    CoSocket sock;
    uint64_t features;          /* SET_FEATURES */
    uint64_t protocol_features; /* SET_PROTOCOL_FEATURES */
    int backend_fd;             /* SET_BACKEND_REQ_FD; -1: none */
    VuMemRegion regions[VU_MAX_MEM_SLOTS];
    unsigned int nregions;
    VuLogMap *log;              /* SET_LOG_BASE; NULL: none */
    VuInflightMap *inflight_map; /* GET/SET_INFLIGHT_FD; NULL: none */
};

/* A message and the file descriptors it came with (invariant 5). */
typedef struct VuMsg {
    VhostUserHeader hdr;
    VhostUserPayload payload;
    int fds[VHOST_USER_MAX_FDS];
    size_t nfds;
} VuMsg;


/* vhost-user-server.c */
void vu_report(VuServer *s, Error *err);
/* Ends the connection from outside the message coroutine. */
void vu_close_client(VuServer *s, Error *err);
/* The same from a ring's thread (invariant 11). */
void vu_close_client_from_ring(VuServer *s, Error *err);
void vu_close_fd(int *fd);

/* vhost-user-mem.c: guest memory (invariants 1 and 7) */
/* GuestMemory's map over the regions (util/guest-memory.h). */
void *vu_mem_map(void *opaque, uint64_t addr, uint64_t *len);
int coroutine_fn vu_set_mem_table(VuServer *s, VuMsg *m, VuMsg *reply,
                                  Error **errp);
int coroutine_fn vu_get_max_mem_slots(VuServer *s, VuMsg *m, VuMsg *reply,
                                      Error **errp);
int coroutine_fn vu_add_mem_reg(VuServer *s, VuMsg *m, VuMsg *reply,
                                Error **errp);
int coroutine_fn vu_rem_mem_reg(VuServer *s, VuMsg *m, VuMsg *reply,
                                Error **errp);
void vu_mem_unmap(VuMemRegion *regions, unsigned int n);
/* Invariant 7: s->fault_fd's handler, a guarded mapping faulted. */
void vu_mem_faulted(void *opaque);
/* Invariant 2: the rings of @q, guest-physically, within regions. */
int vu_virtq_map_rings(VuVirtq *q, Error **errp);
/* Invariant 7: seals @fd against shrinking where it can be sealed. */
void vu_mem_seal(int fd);
/*
 * Invariant 7: maps bytes [@offset, +@size) of the shared file @fd, which
 * must be a regular file that long, guarded against SIGBUS.  Sets
 * *@host to the first byte and *@mmap_addr, *@mmap_size, *@guard to
 * what vu_mem_unmap_guarded() takes.  @what names it in errors.
 */
int vu_mem_map_guarded(VuServer *s, int fd, uint64_t offset, uint64_t size,
                       const char *what, uint8_t **host, void **mmap_addr,
                       size_t *mmap_size, int *guard, Error **errp);
void vu_mem_unmap_guarded(void *mmap_addr, size_t mmap_size, int guard);
/*
 * Where host range [@host, +@len) is guest-physically: false if it is not
 * within one memory region.  In any thread that may touch guest memory
 * (invariant 1).
 */
bool vu_mem_host_to_gpa(VuServer *s, const void *host, uint64_t len,
                        uint64_t *gpa);

/* vhost-user-log.c: the dirty log (invariant 14) */
int coroutine_fn vu_set_log_base(VuServer *s, VuMsg *m, VuMsg *reply,
                                 Error **errp);
/* Sets @q's logging from the server's state; in @q's thread. */
void vu_virtq_update_log(VuVirtq *q);
/* Invariant 14: marks what the device wrote of @elem; in @q's thread. */
void vu_virtq_log_elem(VuVirtq *q, const VirtQueueElement *elem);
/* The end of a connection: no ring logs any more. */
void vu_log_unmap(VuServer *s);
/* Invariant 7: whether the log's mapping faulted, and where. */
bool vu_log_take_fault(VuServer *s, uint64_t *offset);

/* vhost-user-inflight.c: inflight tracking (invariants 15 and 16) */
int coroutine_fn vu_get_inflight_fd(VuServer *s, VuMsg *m, VuMsg *reply,
                                    Error **errp);
int coroutine_fn vu_set_inflight_fd(VuServer *s, VuMsg *m, VuMsg *reply,
                                    Error **errp);
/* The end of a connection, its rings stopped: the buffer goes. */
void vu_inflight_unmap(VuServer *s);
/* Invariant 7: whether the buffer's mapping faulted, and where. */
bool vu_inflight_take_fault(VuServer *s, uint64_t *offset);
/*
 * A ring starts (its rings mapped, in its thread): tracked if the buffer
 * has a region for it, and what a dead back-end left in flight there is
 * to be popped again first (vu_virtq_take_resubmit()), the ring's
 * indexes set past it.
 */
int vu_virtq_track_start(VuVirtq *q, Error **errp);
/* The next head to pop again; false when there is none (left). */
bool vu_virtq_take_resubmit(VuVirtq *q, uint16_t *head);
/* Invariant 15, for a tracked ring: a pop, a push begun, a push done. */
void vu_inflight_popped(VuVirtq *q, uint16_t head);
void vu_inflight_pushing(VuVirtq *q, uint16_t head);
void vu_inflight_pushed(VuVirtq *q, uint16_t head);

/* vhost-user-vring.c */
/* @ctx: the ring's thread's context (invariant 11). */
void vu_virtq_init(VuServer *s, VuVirtq *q, unsigned int index,
                   AioContext *ctx);
void vu_virtq_cleanup(VuVirtq *q);
/*
 * Invariant 11: the message coroutine moves to the ring's thread before
 * it touches the ring, and back to s->ctx before it touches anything
 * else (the socket above all).  No-ops for a ring in s->ctx.
 */
void coroutine_fn vu_virtq_enter(VuVirtq *q);
void coroutine_fn vu_virtq_leave(VuVirtq *q);
/* Whether the ring may pop: started, enabled, not paused, not broken. */
bool vu_virtq_runs(VuVirtq *q);
/* Pops what the ring has, if it runs. */
void vu_virtq_process(VuVirtq *q);
/*
 * Starts @q (its rings mapped) with @kick_fd, which it owns from now:
 * request slots for its size, its inflight tracking, the kick handler,
 * and a first look.  Fails (closing @kick_fd) if the inflight buffer
 * does not fit the ring.
 */
int vu_virtq_start(VuVirtq *q, int kick_fd, Error **errp);
/* Stops popping; requests in flight go on (invariant 3 waits for them). */
void vu_virtq_stop(VuVirtq *q);
/* Back to the state of a new connection; nothing may be in flight. */
void vu_virtq_reset(VuVirtq *q);
/*
 * Invariant 4: waits until @q has nothing in flight.  In @q's thread
 * (vu_virtq_enter()).
 */
void coroutine_fn vu_virtq_wait_inflight(VuVirtq *q);
/*
 * Invariant 1: stops popping, waits for what is in flight and signals
 * what was pushed, so that the ring's thread no longer touches guest
 * memory.  In @q's thread.
 */
void coroutine_fn vu_virtq_pause(VuVirtq *q);
/* Pops again, kicks on (invariant 10), and looks.  In @q's thread. */
void vu_virtq_resume(VuVirtq *q);

#endif
