/*
 * vhost-user-bench: a vhost-user-blk front-end that runs a fio-like
 * workload against an export's unix socket, to compare servers (qblock's
 * and qemu-storage-daemon's) with the same driver.
 *
 *   vhost-user-bench SOCKET PATTERN BLOCK_SIZE DEPTH SECONDS [QUEUES]
 *
 * PATTERN is randread, randwrite, read or write; or verify, which checks
 * data rather than measuring: each queue writes its own range of the
 * first blocks of the disk (at most 4096 of BLOCK_SIZE per queue) with a
 * stamp that names the block and the run, DEPTH at a time, reads them
 * back the same way and compares every byte, then it prints "VERIFIED N"
 * (the blocks of all queues; SECONDS is not used).  verify-churn does the
 * same while the control path is exercised under the I/O: the front-end
 * sends the memory table again and stops and restarts every queue
 * (GET_VRING_BASE, SET_VRING_BASE, SET_VRING_KICK) in a loop until the
 * queues are done, and prints "CHURNED N" (rounds) too.
 *
 * It negotiates as a Linux guest behind QEMU's vhost-user-blk-pci does
 * (the back-end's features less INDIRECT_DESC, which this driver does not
 * use; EVENT_IDX kept, as QEMU offers it to the guest; protocol features
 * REPLY_ACK, CONFIG and MQ when QUEUES > 1, and INFLIGHT_SHMFD where the
 * back-end offers it, with its buffer asked for and handed back as QEMU's
 * vhost-user-blk does, unless VUB_NO_INFLIGHT=1), shares a memfd as guest
 * memory, sets up QUEUES queues (default 1), each driven by a thread of
 * its own, and keeps DEPTH requests of BLOCK_SIZE bytes available on
 * each: each completion is replaced by a new request at once, and the
 * new ones of a wake-up go out with one kick (skipped where the device's
 * avail_event or VRING_USED_F_NO_NOTIFY says it needs none).  A call
 * wakes the thread as an interrupt runs Linux's virtio-blk handler:
 * calls off, reap, calls on (used_event, or VRING_AVAIL_F_NO_INTERRUPT
 * cleared) and a last look at the used ring before it sleeps again, so a
 * device is asked for one call per sleep.  It prints "IOPS N"
 * (completions of all queues per second over SECONDS) and exits 0, or
 * says what failed and exits 1.  Offsets are block-aligned, random over the disk's capacity,
 * or sequential from 0 wrapping at the end.
 *
 * The driver side follows the split virtqueue of the virtio 1.1 spec;
 * the message layouts are include/block/vhost-user-proto.h's.
 */
#include "util/osdep.h"
#include "block/vhost-user-proto.h"
#include "virtio/virtio-blk-wire.h"
#include "virtio/virtio-ring.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

/* Three descriptors per request (header, data, status): depth <= 85. */
#define QUEUE_SIZE      256
#define GPA_BASE        UINT64_C(0x40000000)
/* a queue's area of guest memory: its rings, then its request slots */
#define DESC_OFF        0
#define AVAIL_OFF       (16 * QUEUE_SIZE)
#define USED_OFF        (AVAIL_OFF + 4096)
/* request slots: header at 0, status at 16, data from 4096 (aligned) */
#define SLOTS_OFF       (64 * KiB)
#define SLOT_DATA       4096
/* queues a run may drive: as many threads, each with its own area */
#define MAX_QUEUES      16

typedef struct Bench Bench;

/* One queue and the thread that drives it; the thread owns all of it. */
typedef struct BenchQueue {
    Bench *b;
    unsigned int index;
    GThread *thread;
    GRand *rand;                /* its own: g_random_* takes a lock */
    size_t area;                /* offset of its area in guest memory */
    int kick;
    int call;
    uint16_t avail_idx;
    uint16_t kicked_idx;        /* avail_idx when a kick was last due */
    uint16_t used_idx;
    bool is_write;
    uint64_t next_block;        /* sequential patterns */
    /* verify: its first block, requests of this phase to make, made */
    uint64_t first_block;
    uint64_t limit;
    uint64_t submitted;
    uint64_t done;              /* completions counted for IOPS */
    uint64_t slot_block[QUEUE_SIZE / 3];
} BenchQueue;

struct Bench {
    int fd;
    int memfd;
    uint8_t *mem;
    size_t mem_size;
    size_t slot_size;
    size_t area_size;
    unsigned int nq;
    unsigned int depth;
    uint32_t bs;
    bool is_write;
    bool random;
    bool verify;
    bool event_idx;             /* VIRTIO_RING_F_EVENT_IDX negotiated */
    bool inflight;              /* INFLIGHT_SHMFD negotiated */
    uint64_t blocks;            /* capacity in BLOCK_SIZE units */
    uint64_t verify_count;      /* blocks each queue verifies */
    uint64_t seed;
    int64_t end;                /* timed patterns: when to stop */
    unsigned int running;       /* atomic: queue threads not finished */
    BenchQueue q[MAX_QUEUES];
};

/* Blocks the verify pattern writes and reads back per queue, at most. */
#define VERIFY_BLOCKS   4096

static void G_GNUC_NORETURN G_GNUC_PRINTF(1, 2) die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, "vhost-user-bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void bench_send(Bench *b, uint32_t req, uint32_t flags,
                       const void *payload, uint32_t size, int fd)
{
    VhostUserHeader hdr = {
        .request = req,
        .flags = VHOST_USER_VERSION | flags,
        .size = size,
    };
    struct iovec iov[2] = {
        { .iov_base = &hdr, .iov_len = sizeof(hdr) },
        { .iov_base = (void *)payload, .iov_len = size },
    };
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control = { { 0 } };
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = size ? 2 : 1 };

    if (fd >= 0) {
        struct cmsghdr *c;

        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof(control.buf);
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    if (sendmsg(b->fd, &msg, MSG_NOSIGNAL) != (ssize_t)(sizeof(hdr) + size)) {
        die("sending message %" PRIu32 ": %s", req, strerror(errno));
    }
}

static void bench_read_full(Bench *b, void *buf, size_t len)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = recv(b->fd, p, len, 0);

        if (n <= 0) {
            die("the back-end closed the connection");
        }
        p += n;
        len -= n;
    }
}

/* The reply to @req: its payload, which must be @size bytes. */
static void bench_recv(Bench *b, uint32_t req, void *payload, uint32_t size)
{
    VhostUserHeader hdr;

    bench_read_full(b, &hdr, sizeof(hdr));
    if (hdr.request != req || hdr.size != size) {
        die("reply to message %" PRIu32 ": got %" PRIu32 " of %" PRIu32
            " bytes", req, hdr.request, hdr.size);
    }
    bench_read_full(b, payload, size);
}

static uint64_t bench_get_u64(Bench *b, uint32_t req)
{
    uint64_t v;

    bench_send(b, req, 0, NULL, 0, -1);
    bench_recv(b, req, &v, sizeof(v));
    return v;
}

/* A message that wants an ack (REPLY_ACK was negotiated). */
static void bench_set(Bench *b, uint32_t req, const void *payload,
                      uint32_t size, int fd)
{
    uint64_t ack;

    bench_send(b, req, VHOST_USER_NEED_REPLY_MASK, payload, size, fd);
    bench_recv(b, req, &ack, sizeof(ack));
    if (ack) {
        die("the back-end refused message %" PRIu32, req);
    }
}

/*
 * QEMU's vhost-user-blk before it starts the rings: the inflight buffer
 * asked for (GET_INFLIGHT_FD, whose reply carries its descriptor) and
 * handed back (SET_INFLIGHT_FD), so that the back-end tracks requests.
 */
static void bench_setup_inflight(Bench *b)
{
    VhostUserInflight in = { .num_queues = b->nq, .queue_size = QUEUE_SIZE };
    VhostUserHeader hdr;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = { .iov_base = &hdr, .iov_len = sizeof(hdr) };
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = control.buf, .msg_controllen = sizeof(control.buf),
    };
    struct cmsghdr *c;
    int fd;

    bench_send(b, VHOST_USER_GET_INFLIGHT_FD, 0, &in, sizeof(in), -1);
    if (recvmsg(b->fd, &msg, MSG_WAITALL) != sizeof(hdr) ||
        hdr.request != VHOST_USER_GET_INFLIGHT_FD ||
        hdr.size != sizeof(in) || !(c = CMSG_FIRSTHDR(&msg)) ||
        c->cmsg_type != SCM_RIGHTS) {
        die("GET_INFLIGHT_FD: no buffer in the reply");
    }
    memcpy(&fd, CMSG_DATA(c), sizeof(fd));
    bench_read_full(b, &in, sizeof(in));
    bench_set(b, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), fd);
    close(fd);
}

static void bench_set_state(Bench *b, uint32_t req, unsigned int index,
                            uint32_t num)
{
    VhostUserVringState st = { .index = index, .num = num };

    bench_set(b, req, &st, sizeof(st), -1);
}

static void bench_connect(Bench *b, const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    if (strlen(path) >= sizeof(sa.sun_path)) {
        die("socket path '%s' is too long", path);
    }
    strcpy(sa.sun_path, path);
    b->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (b->fd < 0 || connect(b->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        die("cannot connect to '%s': %s", path, strerror(errno));
    }
}

static void bench_send_mem_table(Bench *b)
{
    VhostUserMemory m = { .nregions = 1 };

    m.regions[0] = (VhostUserMemoryRegion) {
        .guest_phys_addr = GPA_BASE,
        .memory_size = b->mem_size,
        .userspace_addr = (uintptr_t)b->mem,
    };
    bench_set(b, VHOST_USER_SET_MEM_TABLE, &m,
              offsetof(VhostUserMemory, regions) + sizeof(m.regions[0]),
              b->memfd);
}

static void bench_setup_memory(Bench *b)
{
    b->slot_size = SLOT_DATA + ROUND_UP(b->bs, 4096);
    b->area_size = ROUND_UP(SLOTS_OFF + b->depth * b->slot_size, 64 * KiB);
    b->mem_size = ROUND_UP(b->nq * b->area_size, 2 * MiB);
    b->memfd = memfd_create("vhost-user-bench", MFD_CLOEXEC);
    if (b->memfd < 0 || ftruncate(b->memfd, b->mem_size) < 0) {
        die("cannot create %zu bytes of guest memory: %s", b->mem_size,
            strerror(errno));
    }
    b->mem = mmap(NULL, b->mem_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                  b->memfd, 0);
    if (b->mem == MAP_FAILED) {
        die("cannot map guest memory: %s", strerror(errno));
    }
    bench_send_mem_table(b);
}

static void bench_setup_vring(Bench *b, BenchQueue *q)
{
    uint8_t *area = b->mem + q->area;
    VhostUserVringAddr a = {
        .index = q->index,
        .desc_user_addr = (uintptr_t)area + DESC_OFF,
        .avail_user_addr = (uintptr_t)area + AVAIL_OFF,
        .used_user_addr = (uintptr_t)area + USED_OFF,
    };
    uint64_t idx = q->index;

    q->kick = eventfd(0, EFD_CLOEXEC);
    q->call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (q->kick < 0 || q->call < 0) {
        die("cannot create eventfds: %s", strerror(errno));
    }
    bench_set_state(b, VHOST_USER_SET_VRING_NUM, q->index, QUEUE_SIZE);
    bench_set_state(b, VHOST_USER_SET_VRING_BASE, q->index, 0);
    bench_set(b, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a), -1);
    bench_set(b, VHOST_USER_SET_VRING_CALL, &idx, sizeof(idx), q->call);
    bench_set(b, VHOST_USER_SET_VRING_KICK, &idx, sizeof(idx), q->kick);
    bench_set_state(b, VHOST_USER_SET_VRING_ENABLE, q->index, 1);
}

/*
 * Stops queue @q and starts it again where it stopped, as a front-end
 * does around a migration or a device reset, while its thread goes on.
 */
static void bench_restart_vring(Bench *b, BenchQueue *q)
{
    VhostUserVringState st = { .index = q->index };
    uint64_t idx = q->index;

    bench_send(b, VHOST_USER_GET_VRING_BASE, 0, &st, sizeof(st), -1);
    bench_recv(b, VHOST_USER_GET_VRING_BASE, &st, sizeof(st));
    if (st.index != q->index) {
        die("GET_VRING_BASE of vring %u answered for vring %u", q->index,
            st.index);
    }
    bench_set_state(b, VHOST_USER_SET_VRING_BASE, q->index, st.num);
    bench_set(b, VHOST_USER_SET_VRING_KICK, &idx, sizeof(idx), q->kick);
}

/* Negotiation as QEMU does it; returns the capacity in bytes. */
static uint64_t bench_negotiate(Bench *b)
{
    uint64_t f = bench_get_u64(b, VHOST_USER_GET_FEATURES);
    uint64_t pf, want;
    VhostUserConfig cfg = { .offset = 0, .size = sizeof(VirtIOBlkConfig) };
    uint32_t cfg_size = VHOST_USER_CONFIG_HDR_SIZE + sizeof(VirtIOBlkConfig);
    VirtIOBlkConfig blk;

    if (!(f & (UINT64_C(1) << VHOST_USER_F_PROTOCOL_FEATURES))) {
        die("the back-end offers no protocol features");
    }
    pf = bench_get_u64(b, VHOST_USER_GET_PROTOCOL_FEATURES);
    want = (UINT64_C(1) << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
           (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIG);
    if (b->nq > 1) {
        want |= UINT64_C(1) << VHOST_USER_PROTOCOL_F_MQ;
    }
    if ((pf & want) != want) {
        die("the back-end offers no REPLY_ACK, CONFIG or MQ");
    }
    if (!g_strcmp0(getenv("VUB_NO_INFLIGHT"), "1")) {
        pf &= ~(UINT64_C(1) << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD);
    }
    b->inflight = pf & (UINT64_C(1) << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD);
    pf &= want | (b->inflight ? UINT64_C(1) <<
                                VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD : 0);
    bench_send(b, VHOST_USER_SET_PROTOCOL_FEATURES, 0, &pf, sizeof(pf), -1);
    if (b->nq > 1 && bench_get_u64(b, VHOST_USER_GET_QUEUE_NUM) < b->nq) {
        die("the back-end has fewer than %u queues", b->nq);
    }
    bench_set(b, VHOST_USER_SET_OWNER, NULL, 0, -1);
    /*
     * EVENT_IDX as a Linux guest takes it when QEMU's vhost-user-blk-pci
     * offers it (it passes the back-end's on); no indirect descriptors:
     * each request is a chain of three in the ring itself.
     */
    b->event_idx = f & (UINT64_C(1) << VIRTIO_RING_F_EVENT_IDX);
    f &= ~(UINT64_C(1) << VIRTIO_RING_F_INDIRECT_DESC);
    bench_set(b, VHOST_USER_SET_FEATURES, &f, sizeof(f), -1);
    bench_send(b, VHOST_USER_GET_CONFIG, 0, &cfg, cfg_size, -1);
    bench_recv(b, VHOST_USER_GET_CONFIG, &cfg, cfg_size);
    memcpy(&blk, cfg.region, sizeof(blk));
    return GUINT64_FROM_LE(blk.capacity) * 512;
}

static void bench_desc(BenchQueue *q, uint16_t i, uint64_t off, uint32_t len,
                       uint16_t flags, uint16_t next)
{
    VRingDesc d = {
        .addr = GUINT64_TO_LE(GPA_BASE + off),
        .len = GUINT32_TO_LE(len),
        .flags = GUINT16_TO_LE(flags),
        .next = GUINT16_TO_LE(next),
    };

    memcpy(q->b->mem + q->area + DESC_OFF + i * sizeof(d), &d, sizeof(d));
}

/* The verify pattern's 8-byte word @i of @block. */
static uint64_t bench_stamp(Bench *b, uint64_t block, size_t i)
{
    return (b->seed << 40) ^ (block << 16) ^ i;
}

static void bench_fill(Bench *b, uint8_t *data, uint64_t block)
{
    for (size_t i = 0; i < b->bs / 8; i++) {
        uint64_t w = bench_stamp(b, block, i);

        memcpy(data + i * 8, &w, 8);
    }
}

static void bench_check(BenchQueue *q, const uint8_t *data, uint64_t block)
{
    Bench *b = q->b;

    for (size_t i = 0; i < b->bs / 8; i++) {
        uint64_t w;

        memcpy(&w, data + i * 8, 8);
        if (w != bench_stamp(b, block, i)) {
            die("queue %u: block %" PRIu64 " read back wrong at byte %zu: %#"
                PRIx64 " where %#" PRIx64 " was written", q->index, block,
                i * 8, w, bench_stamp(b, block, i));
        }
    }
}

static size_t bench_slot_off(BenchQueue *q, unsigned int slot)
{
    return q->area + SLOTS_OFF + slot * q->b->slot_size;
}

/* Builds the next request in @slot and makes it available. */
static void bench_submit(BenchQueue *q, unsigned int slot)
{
    Bench *b = q->b;
    size_t off = bench_slot_off(q, slot);
    uint64_t block = b->random ? g_rand_int_range(q->rand, 0, b->blocks) :
                     b->verify ? q->first_block + q->next_block++ :
                                 q->next_block++ % b->blocks;
    VirtIOBlkOutHdr hdr = {
        .type = GUINT32_TO_LE(q->is_write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN),
        .sector = GUINT64_TO_LE(block * b->bs / 512),
    };
    uint16_t head = slot * 3;
    uint8_t *area = b->mem + q->area;
    uint16_t *ring = (uint16_t *)(area + AVAIL_OFF + VRING_AVAIL_OFF_RING);
    uint16_t *idx = (uint16_t *)(area + AVAIL_OFF + VRING_AVAIL_OFF_IDX);

    q->submitted++;
    q->slot_block[slot] = block;
    if (b->verify && q->is_write) {
        bench_fill(b, b->mem + off + SLOT_DATA, block);
    }
    memcpy(b->mem + off, &hdr, sizeof(hdr));
    bench_desc(q, head, off, sizeof(hdr), VRING_DESC_F_NEXT, head + 1);
    bench_desc(q, head + 1, off + SLOT_DATA, b->bs,
               VRING_DESC_F_NEXT | (q->is_write ? 0 : VRING_DESC_F_WRITE),
               head + 2);
    bench_desc(q, head + 2, off + 16, 1, VRING_DESC_F_WRITE, 0);
    ring[q->avail_idx % QUEUE_SIZE] = GUINT16_TO_LE(head);
    q->avail_idx++;
    __atomic_store_n(idx, GUINT16_TO_LE(q->avail_idx), __ATOMIC_RELEASE);
}

/* A 16-bit field of the queue's rings, at @off of its area. */
static uint16_t *bench_ring16(BenchQueue *q, size_t off)
{
    return (uint16_t *)(q->b->mem + q->area + off);
}

/*
 * Kicks for the requests made available since the last kick, unless the
 * device said it needs none, as Linux's virtqueue_kick_prepare(): with
 * EVENT_IDX, only if they went past the device's avail_event; without,
 * unless the device set VRING_USED_F_NO_NOTIFY (it polls).
 */
static void bench_kick(BenchQueue *q)
{
    uint16_t old = q->kicked_idx;
    uint64_t one = 1;
    bool needed;

    q->kicked_idx = q->avail_idx;
    /* the new avail idx is visible before the device's field is read */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (q->b->event_idx) {
        uint16_t *event = bench_ring16(q, USED_OFF +
                                      VRING_USED_OFF_AVAIL_EVENT(QUEUE_SIZE));

        needed = vring_need_event(GUINT16_FROM_LE(__atomic_load_n(
                                      event, __ATOMIC_ACQUIRE)),
                                  q->avail_idx, old);
    } else {
        uint16_t *flags = bench_ring16(q, USED_OFF + VRING_USED_OFF_FLAGS);

        needed = !(GUINT16_FROM_LE(__atomic_load_n(flags, __ATOMIC_ACQUIRE)) &
                   VRING_USED_F_NO_NOTIFY);
    }
    if (needed && write(q->kick, &one, sizeof(one)) != sizeof(one)) {
        die("kick: %s", strerror(errno));
    }
}

static uint16_t bench_used_idx(BenchQueue *q)
{
    uint16_t *idx = bench_ring16(q, USED_OFF + VRING_USED_OFF_IDX);

    return GUINT16_FROM_LE(__atomic_load_n(idx, __ATOMIC_ACQUIRE));
}

/*
 * No calls while the queue's thread is awake and reaping, as Linux's
 * virtqueue_disable_cb() in virtio-blk's interrupt handler: without
 * EVENT_IDX it sets VRING_AVAIL_F_NO_INTERRUPT; with EVENT_IDX it
 * writes nothing, since the device calls once when it passes used_event
 * and not again until the driver moves it.
 */
static void bench_disable_calls(BenchQueue *q)
{
    if (!q->b->event_idx) {
        __atomic_store_n(bench_ring16(q, AVAIL_OFF + VRING_AVAIL_OFF_FLAGS),
                         GUINT16_TO_LE(VRING_AVAIL_F_NO_INTERRUPT),
                         __ATOMIC_RELAXED);
    }
}

/*
 * Calls back on before the thread sleeps, as Linux's
 * virtqueue_enable_cb(): the flag cleared, or used_event set to what
 * the driver has reaped; then a last look at the used ring.  False if
 * the device used more meanwhile (it may not call for those).
 */
static bool bench_enable_calls(BenchQueue *q)
{
    if (q->b->event_idx) {
        __atomic_store_n(bench_ring16(q, AVAIL_OFF +
                                      VRING_AVAIL_OFF_USED_EVENT(QUEUE_SIZE)),
                         GUINT16_TO_LE(q->used_idx), __ATOMIC_RELAXED);
    } else {
        __atomic_store_n(bench_ring16(q, AVAIL_OFF + VRING_AVAIL_OFF_FLAGS),
                         0, __ATOMIC_RELAXED);
    }
    /* the driver's field is visible before the used idx is read again */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return bench_used_idx(q) == q->used_idx;
}

/*
 * Takes every used request; resubmits each (with one kick for all) while
 * @resubmit.  Returns the requests completed.
 */
static unsigned int bench_reap(BenchQueue *q, bool resubmit)
{
    Bench *b = q->b;
    uint16_t end = bench_used_idx(q);
    unsigned int n = 0;

    for (; q->used_idx != end; q->used_idx++) {
        VRingUsedElem u;
        unsigned int slot;
        uint8_t status;

        memcpy(&u, b->mem + q->area + USED_OFF + VRING_USED_OFF_RING +
               sizeof(u) * (q->used_idx % QUEUE_SIZE), sizeof(u));
        slot = GUINT32_FROM_LE(u.id) / 3;
        if (slot >= b->depth) {
            die("queue %u: the device used descriptor %" PRIu32 ", which "
                "heads no request", q->index, GUINT32_FROM_LE(u.id));
        }
        status = b->mem[bench_slot_off(q, slot) + 16];
        if (status != VIRTIO_BLK_S_OK) {
            die("queue %u: request failed with status %u", q->index, status);
        }
        if (b->verify && !q->is_write) {
            bench_check(q, b->mem + bench_slot_off(q, slot) + SLOT_DATA,
                        q->slot_block[slot]);
        }
        n++;
        if (resubmit && q->submitted < q->limit) {
            bench_submit(q, slot);
        }
    }
    if (n && resubmit) {
        bench_kick(q);
    }
    return n;
}

/*
 * What a call wakes: virtio-blk's interrupt handler in a Linux guest
 * (virtblk_done()): calls off, reap, calls on and a last look, again
 * while the last look finds more (until @end, monotonic time).  Returns
 * the requests completed.
 */
static unsigned int bench_reap_calls(BenchQueue *q, bool resubmit,
                                     int64_t end)
{
    unsigned int n = 0;

    do {
        bench_disable_calls(q);
        n += bench_reap(q, resubmit);
    } while (!bench_enable_calls(q) && g_get_monotonic_time() < end);
    return n;
}

static void bench_wait_call(BenchQueue *q)
{
    struct pollfd pfd = { .fd = q->call, .events = POLLIN };
    uint64_t v;

    if (poll(&pfd, 1, 10000) <= 0) {
        die("queue %u: no completion for 10 seconds", q->index);
    }
    if (read(q->call, &v, sizeof(v)) < 0 && errno != EAGAIN) {
        die("call eventfd: %s", strerror(errno));
    }
}

/*
 * One verify phase of @q: its blocks, in order, depth at a time (the
 * reaping checks what reads bring back).
 */
static void bench_verify_phase(BenchQueue *q, bool is_write)
{
    Bench *b = q->b;
    uint64_t done = 0;

    q->is_write = is_write;
    q->next_block = 0;
    q->submitted = 0;
    q->limit = b->verify_count;
    for (unsigned int i = 0; i < b->depth && q->submitted < q->limit; i++) {
        bench_submit(q, i);
    }
    bench_kick(q);
    while (done < q->limit) {
        bench_wait_call(q);
        done += bench_reap_calls(q, true, INT64_MAX);
    }
}

/* Timed patterns: depth requests in flight until b->end. */
static void bench_timed(BenchQueue *q)
{
    Bench *b = q->b;
    unsigned int outstanding = b->depth;

    q->is_write = b->is_write;
    q->limit = UINT64_MAX;
    for (unsigned int i = 0; i < b->depth; i++) {
        bench_submit(q, i);
    }
    bench_kick(q);
    while (g_get_monotonic_time() < b->end) {
        bench_wait_call(q);
        q->done += bench_reap_calls(q, true, b->end);
    }
    outstanding -= bench_reap_calls(q, false, INT64_MAX);
    while (outstanding > 0) {
        bench_wait_call(q);
        outstanding -= bench_reap_calls(q, false, INT64_MAX);
    }
}

static gpointer bench_queue_run(gpointer opaque)
{
    BenchQueue *q = opaque;

    if (q->b->verify) {
        bench_verify_phase(q, true);
        bench_verify_phase(q, false);
    } else {
        bench_timed(q);
    }
    __atomic_fetch_sub(&q->b->running, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char **argv)
{
    Bench b = { 0 };
    bool churn;
    double secs;
    uint64_t done = 0, rounds = 0;
    int64_t start;

    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: vhost-user-bench SOCKET randread|randwrite|"
                "read|write|verify|verify-churn BLOCK_SIZE DEPTH SECONDS "
                "[QUEUES]\n");
        return 1;
    }
    b.is_write = strstr(argv[2], "write") != NULL;
    b.random = g_str_has_prefix(argv[2], "rand");
    churn = !strcmp(argv[2], "verify-churn");
    b.verify = churn || !strcmp(argv[2], "verify");
    b.bs = strtoul(argv[3], NULL, 0);
    b.depth = strtoul(argv[4], NULL, 0);
    secs = strtod(argv[5], NULL);
    b.nq = argc == 7 ? strtoul(argv[6], NULL, 0) : 1;
    if (b.bs == 0 || b.bs % 512 || b.bs > 4 * MiB) {
        die("block size %" PRIu32 " is not a multiple of 512 up to 4 MiB",
            b.bs);
    }
    if (b.depth == 0 || b.depth * 3 > QUEUE_SIZE) {
        die("depth %u is not between 1 and %u", b.depth, QUEUE_SIZE / 3);
    }
    if (b.nq == 0 || b.nq > MAX_QUEUES) {
        die("%u queues, not 1 to %d", b.nq, MAX_QUEUES);
    }
    bench_connect(&b, argv[1]);
    b.blocks = bench_negotiate(&b) / b.bs;
    if (b.blocks < b.nq) {
        die("the disk has fewer blocks of %" PRIu32 " bytes than queues",
            b.bs);
    }
    bench_setup_memory(&b);
    if (b.inflight) {
        bench_setup_inflight(&b);
    }
    for (unsigned int i = 0; i < b.nq; i++) {
        BenchQueue *q = &b.q[i];

        q->b = &b;
        q->index = i;
        q->area = i * b.area_size;
        q->rand = g_rand_new();
        bench_setup_vring(&b, q);
    }
    b.verify_count = MIN(b.blocks / b.nq, VERIFY_BLOCKS);
    b.seed = (uint64_t)g_get_real_time() & 0xffffff;
    b.running = b.nq;
    start = g_get_monotonic_time();
    b.end = start + secs * G_USEC_PER_SEC;
    for (unsigned int i = 0; i < b.nq; i++) {
        b.q[i].first_block = i * b.verify_count;
        b.q[i].thread = g_thread_new("queue", bench_queue_run, &b.q[i]);
    }
    /* only this thread talks on the socket once the queues run */
    while (churn && __atomic_load_n(&b.running, __ATOMIC_SEQ_CST)) {
        bench_send_mem_table(&b);
        for (unsigned int i = 0; i < b.nq; i++) {
            bench_restart_vring(&b, &b.q[i]);
        }
        rounds++;
    }
    for (unsigned int i = 0; i < b.nq; i++) {
        g_thread_join(b.q[i].thread);
        g_rand_free(b.q[i].rand);
        done += b.q[i].done;
    }
    if (b.verify) {
        printf("VERIFIED %" PRIu64 "\n", b.verify_count * b.nq);
        if (churn) {
            printf("CHURNED %" PRIu64 "\n", rounds);
        }
    } else {
        printf("IOPS %.0f\n", done / ((b.end - start) /
                                      (double)G_USEC_PER_SEC));
    }
    close(b.fd);
    return 0;
}
