/*
 * vhost-user-bench: a vhost-user-blk front-end that runs a fio-like
 * workload against an export's unix socket, to compare servers (qblock's
 * and qemu-storage-daemon's) with the same driver.
 *
 *   vhost-user-bench SOCKET PATTERN BLOCK_SIZE DEPTH SECONDS
 *
 * PATTERN is randread, randwrite, read or write; or verify, which checks
 * data rather than measuring: it writes the first blocks of the disk (at
 * most 4096 of BLOCK_SIZE) with a stamp that names the block and the run,
 * DEPTH at a time, reads them back the same way and compares every byte,
 * then prints "VERIFIED N" (SECONDS is not used).  It negotiates as QEMU
 * does (features less EVENT_IDX and INDIRECT_DESC, protocol features
 * REPLY_ACK), shares a memfd as guest memory, sets up queue 0 and keeps
 * DEPTH requests of BLOCK_SIZE bytes available: each completion is
 * replaced by a new request at once, and the new ones of a wake-up go
 * out with one kick (skipped while the device asks for none).  It prints
 * "IOPS N" (completions per second over SECONDS) and exits 0, or says
 * what failed and exits 1.  Offsets are block-aligned, random over the
 * disk's capacity, or sequential from 0 wrapping at the end.
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
#define DESC_OFF        0
#define AVAIL_OFF       (16 * QUEUE_SIZE)
#define USED_OFF        (AVAIL_OFF + 4096)
/* request slots: header at 0, status at 16, data from 4096 (aligned) */
#define SLOTS_OFF       (64 * KiB)
#define SLOT_DATA       4096

typedef struct Bench {
    int fd;
    int memfd;
    uint8_t *mem;
    size_t mem_size;
    size_t slot_size;
    int kick;
    int call;
    uint16_t avail_idx;
    uint16_t used_idx;
    uint32_t bs;
    bool is_write;
    bool random;
    uint64_t blocks;            /* capacity in BLOCK_SIZE units */
    uint64_t next_block;        /* sequential patterns */
    /* verify: requests of this phase to make, made so far, the stamp */
    uint64_t limit;
    uint64_t submitted;
    bool verify;
    uint64_t seed;
    uint64_t slot_block[QUEUE_SIZE / 3];
} Bench;

/* Blocks the verify pattern writes and reads back, at most. */
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

static void bench_set_state(Bench *b, uint32_t req, uint32_t num)
{
    VhostUserVringState st = { .index = 0, .num = num };

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

static void bench_setup_memory(Bench *b, unsigned int depth)
{
    VhostUserMemory m = { .nregions = 1 };

    b->slot_size = SLOT_DATA + ROUND_UP(b->bs, 4096);
    b->mem_size = ROUND_UP(SLOTS_OFF + depth * b->slot_size, 2 * MiB);
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
    m.regions[0] = (VhostUserMemoryRegion) {
        .guest_phys_addr = GPA_BASE,
        .memory_size = b->mem_size,
        .userspace_addr = (uintptr_t)b->mem,
    };
    bench_set(b, VHOST_USER_SET_MEM_TABLE, &m,
              offsetof(VhostUserMemory, regions) + sizeof(m.regions[0]),
              b->memfd);
}

static void bench_setup_vring(Bench *b)
{
    VhostUserVringAddr a = {
        .desc_user_addr = (uintptr_t)b->mem + DESC_OFF,
        .avail_user_addr = (uintptr_t)b->mem + AVAIL_OFF,
        .used_user_addr = (uintptr_t)b->mem + USED_OFF,
    };
    uint64_t idx = 0;

    b->kick = eventfd(0, EFD_CLOEXEC);
    b->call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (b->kick < 0 || b->call < 0) {
        die("cannot create eventfds: %s", strerror(errno));
    }
    bench_set_state(b, VHOST_USER_SET_VRING_NUM, QUEUE_SIZE);
    bench_set_state(b, VHOST_USER_SET_VRING_BASE, 0);
    bench_set(b, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a), -1);
    bench_set(b, VHOST_USER_SET_VRING_CALL, &idx, sizeof(idx), b->call);
    bench_set(b, VHOST_USER_SET_VRING_KICK, &idx, sizeof(idx), b->kick);
    bench_set_state(b, VHOST_USER_SET_VRING_ENABLE, 1);
}

/* Negotiation as QEMU does it; returns the capacity in bytes. */
static uint64_t bench_negotiate(Bench *b)
{
    uint64_t f = bench_get_u64(b, VHOST_USER_GET_FEATURES);
    uint64_t pf;
    VhostUserConfig cfg = { .offset = 0, .size = sizeof(VirtIOBlkConfig) };
    uint32_t cfg_size = VHOST_USER_CONFIG_HDR_SIZE + sizeof(VirtIOBlkConfig);
    VirtIOBlkConfig blk;

    if (!(f & (UINT64_C(1) << VHOST_USER_F_PROTOCOL_FEATURES))) {
        die("the back-end offers no protocol features");
    }
    pf = bench_get_u64(b, VHOST_USER_GET_PROTOCOL_FEATURES);
    if (!(pf & (UINT64_C(1) << VHOST_USER_PROTOCOL_F_REPLY_ACK)) ||
        !(pf & (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIG))) {
        die("the back-end offers no REPLY_ACK or no CONFIG");
    }
    pf &= (UINT64_C(1) << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
          (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIG);
    bench_send(b, VHOST_USER_SET_PROTOCOL_FEATURES, 0, &pf, sizeof(pf), -1);
    bench_set(b, VHOST_USER_SET_OWNER, NULL, 0, -1);
    /* no EVENT_IDX: the device then calls after every batch it uses */
    f &= ~((UINT64_C(1) << VIRTIO_RING_F_EVENT_IDX) |
           (UINT64_C(1) << VIRTIO_RING_F_INDIRECT_DESC));
    bench_set(b, VHOST_USER_SET_FEATURES, &f, sizeof(f), -1);
    bench_send(b, VHOST_USER_GET_CONFIG, 0, &cfg, cfg_size, -1);
    bench_recv(b, VHOST_USER_GET_CONFIG, &cfg, cfg_size);
    memcpy(&blk, cfg.region, sizeof(blk));
    return GUINT64_FROM_LE(blk.capacity) * 512;
}

static void bench_desc(Bench *b, uint16_t i, uint64_t off, uint32_t len,
                       uint16_t flags, uint16_t next)
{
    VRingDesc d = {
        .addr = GUINT64_TO_LE(GPA_BASE + off),
        .len = GUINT32_TO_LE(len),
        .flags = GUINT16_TO_LE(flags),
        .next = GUINT16_TO_LE(next),
    };

    memcpy(b->mem + DESC_OFF + i * sizeof(d), &d, sizeof(d));
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

static void bench_check(Bench *b, const uint8_t *data, uint64_t block)
{
    for (size_t i = 0; i < b->bs / 8; i++) {
        uint64_t w;

        memcpy(&w, data + i * 8, 8);
        if (w != bench_stamp(b, block, i)) {
            die("block %" PRIu64 " read back wrong at byte %zu: %#" PRIx64
                " where %#" PRIx64 " was written", block, i * 8, w,
                bench_stamp(b, block, i));
        }
    }
}

/* Builds the next request in @slot and makes it available. */
static void bench_submit(Bench *b, unsigned int slot)
{
    size_t off = SLOTS_OFF + slot * b->slot_size;
    uint64_t block = b->random ? g_random_int_range(0, b->blocks) :
                                 b->next_block++ % b->blocks;
    VirtIOBlkOutHdr hdr = {
        .type = GUINT32_TO_LE(b->is_write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN),
        .sector = GUINT64_TO_LE(block * b->bs / 512),
    };
    uint16_t head = slot * 3;
    uint16_t *ring = (uint16_t *)(b->mem + AVAIL_OFF + VRING_AVAIL_OFF_RING);
    uint16_t *idx = (uint16_t *)(b->mem + AVAIL_OFF + VRING_AVAIL_OFF_IDX);

    b->submitted++;
    b->slot_block[slot] = block;
    if (b->verify && b->is_write) {
        bench_fill(b, b->mem + off + SLOT_DATA, block);
    }
    memcpy(b->mem + off, &hdr, sizeof(hdr));
    bench_desc(b, head, off, sizeof(hdr), VRING_DESC_F_NEXT, head + 1);
    bench_desc(b, head + 1, off + SLOT_DATA, b->bs,
               VRING_DESC_F_NEXT | (b->is_write ? 0 : VRING_DESC_F_WRITE),
               head + 2);
    bench_desc(b, head + 2, off + 16, 1, VRING_DESC_F_WRITE, 0);
    ring[b->avail_idx % QUEUE_SIZE] = GUINT16_TO_LE(head);
    b->avail_idx++;
    __atomic_store_n(idx, GUINT16_TO_LE(b->avail_idx), __ATOMIC_RELEASE);
}

/* Kicks unless the device said it polls (VRING_USED_F_NO_NOTIFY). */
static void bench_kick(Bench *b)
{
    uint16_t *flags = (uint16_t *)(b->mem + USED_OFF + VRING_USED_OFF_FLAGS);
    uint64_t one = 1;

    /* the new avail idx is visible before the flag is read */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (GUINT16_FROM_LE(__atomic_load_n(flags, __ATOMIC_ACQUIRE)) &
        VRING_USED_F_NO_NOTIFY) {
        return;
    }
    if (write(b->kick, &one, sizeof(one)) != sizeof(one)) {
        die("kick: %s", strerror(errno));
    }
}

static uint16_t bench_used_idx(Bench *b)
{
    uint16_t *idx = (uint16_t *)(b->mem + USED_OFF + VRING_USED_OFF_IDX);

    return GUINT16_FROM_LE(__atomic_load_n(idx, __ATOMIC_ACQUIRE));
}

/*
 * Takes every used request; resubmits each (with one kick for all) while
 * @resubmit.  Returns the requests completed.
 */
static unsigned int bench_reap(Bench *b, bool resubmit)
{
    uint16_t end = bench_used_idx(b);
    unsigned int n = 0;

    for (; b->used_idx != end; b->used_idx++) {
        VRingUsedElem u;
        unsigned int slot;

        memcpy(&u, b->mem + USED_OFF + VRING_USED_OFF_RING +
               sizeof(u) * (b->used_idx % QUEUE_SIZE), sizeof(u));
        slot = GUINT32_FROM_LE(u.id) / 3;
        if (b->mem[SLOTS_OFF + slot * b->slot_size + 16] != VIRTIO_BLK_S_OK) {
            die("request failed with status %u",
                b->mem[SLOTS_OFF + slot * b->slot_size + 16]);
        }
        if (b->verify && !b->is_write) {
            bench_check(b, b->mem + SLOTS_OFF + slot * b->slot_size +
                        SLOT_DATA, b->slot_block[slot]);
        }
        n++;
        if (resubmit && b->submitted < b->limit) {
            bench_submit(b, slot);
        }
    }
    if (n && resubmit) {
        bench_kick(b);
    }
    return n;
}

static void bench_wait_call(Bench *b)
{
    struct pollfd pfd = { .fd = b->call, .events = POLLIN };
    uint64_t v;

    if (poll(&pfd, 1, 10000) <= 0) {
        die("no completion for 10 seconds");
    }
    if (read(b->call, &v, sizeof(v)) < 0 && errno != EAGAIN) {
        die("call eventfd: %s", strerror(errno));
    }
}

/*
 * One verify phase: @count requests of the first blocks, in order, @depth
 * at a time (the reaping checks what reads bring back).
 */
static void bench_verify_phase(Bench *b, unsigned int depth, uint64_t count,
                               bool is_write)
{
    uint64_t done = 0;

    b->is_write = is_write;
    b->next_block = 0;
    b->submitted = 0;
    b->limit = count;
    for (unsigned int i = 0; i < depth && b->submitted < count; i++) {
        bench_submit(b, i);
    }
    bench_kick(b);
    while (done < count) {
        unsigned int n = bench_reap(b, true);

        done += n;
        if (!n) {
            bench_wait_call(b);
        }
    }
}

int main(int argc, char **argv)
{
    Bench b = { 0 };
    unsigned int depth;
    double secs;
    uint64_t done = 0;
    unsigned int outstanding;
    int64_t start, end;

    if (argc != 6) {
        fprintf(stderr, "usage: vhost-user-bench SOCKET randread|randwrite|verify|"
                "read|write BLOCK_SIZE DEPTH SECONDS\n");
        return 1;
    }
    b.is_write = strstr(argv[2], "write") != NULL;
    b.random = g_str_has_prefix(argv[2], "rand");
    b.verify = !strcmp(argv[2], "verify");
    b.limit = UINT64_MAX;
    b.bs = strtoul(argv[3], NULL, 0);
    depth = strtoul(argv[4], NULL, 0);
    secs = strtod(argv[5], NULL);
    if (b.bs == 0 || b.bs % 512 || b.bs > 4 * MiB) {
        die("block size %" PRIu32 " is not a multiple of 512 up to 4 MiB",
            b.bs);
    }
    if (depth == 0 || depth * 3 > QUEUE_SIZE) {
        die("depth %u is not between 1 and %u", depth, QUEUE_SIZE / 3);
    }
    bench_connect(&b, argv[1]);
    b.blocks = bench_negotiate(&b) / b.bs;
    if (b.blocks == 0) {
        die("the disk is smaller than one block of %" PRIu32 " bytes", b.bs);
    }
    bench_setup_memory(&b, depth);
    bench_setup_vring(&b);
    if (b.verify) {
        uint64_t count = MIN(b.blocks, VERIFY_BLOCKS);

        b.seed = (uint64_t)g_get_real_time() & 0xffffff;
        bench_verify_phase(&b, depth, count, true);
        bench_verify_phase(&b, depth, count, false);
        printf("VERIFIED %" PRIu64 "\n", count);
        close(b.fd);
        return 0;
    }

    start = g_get_monotonic_time();
    end = start + secs * G_USEC_PER_SEC;
    for (unsigned int i = 0; i < depth; i++) {
        bench_submit(&b, i);
    }
    bench_kick(&b);
    outstanding = depth;
    while (g_get_monotonic_time() < end) {
        bench_wait_call(&b);
        done += bench_reap(&b, true);
    }
    end = g_get_monotonic_time();
    while (outstanding > 0) {
        unsigned int n = bench_reap(&b, false);

        outstanding -= n;
        if (outstanding && !n) {
            bench_wait_call(&b);
        }
    }
    printf("IOPS %.0f\n", done / ((end - start) / (double)G_USEC_PER_SEC));
    close(b.fd);
    return 0;
}
