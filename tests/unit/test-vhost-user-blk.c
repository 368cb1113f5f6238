/*
 * block/export/vhost-user-blk.c and vhost-user-server.c, driven from the
 * outside as QEMU drives them: a vhost-user front-end on the export's
 * unix socket, sharing a memfd as guest memory, setting up vrings with
 * eventfds and submitting virtio-blk requests as a guest driver would.
 *
 * What it covers: feature and protocol-feature negotiation, the config
 * space (capacity, block size, queues, and the writeback field matching
 * the BlockBackend's real cache mode from the first GET_CONFIG), I/O on
 * one and on several queues, writeback toggled by SET_CONFIG with the
 * flushes counted in the BlockBackend's statistics, a driver without
 * FLUSH, GET_VRING_BASE and reconnecting, a read-only export, a guest's
 * broken ring (the error eventfd), and malformed messages: each closes
 * the connection with the reason it is named for (the log is captured
 * and compared), and the export serves the next front-end; guest memory
 * shrunk under a request (sealed against, or survived as SIGBUS).
 *
 * One thread: the front-end sends on a blocking socket and then runs the
 * export's event loop until the reply (or the used ring) shows up.
 */

#include "test-mem-driver.h"
#include "block/vhost-user-blk.h"
#include "block/vhost-user-proto.h"
#include "virtio/vhost-log.h"
#include "virtio/virtio-blk-wire.h"
#include "virtio/virtio-ring.h"
#include "qblock/block-backend.h"
#include "util/sockets.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#define MEM_SIZE        (4 * MiB)
#define GPA_BASE        UINT64_C(0x40000000)
#define QUEUE_SIZE      128
/* per queue: descriptor table, available ring, used ring */
#define RING_AREA(q)    ((q) * 64 * KiB)
#define DESC_OFF(q)     (RING_AREA(q))
#define AVAIL_OFF(q)    (RING_AREA(q) + 16 * KiB)
#define USED_OFF(q)     (RING_AREA(q) + 32 * KiB)
/* request slots: header and status, then up to 64 KiB of data */
#define SLOT_OFF(slot)  (1 * MiB + (slot) * 72 * KiB)
#define SLOT_DATA       (4 * KiB)
#define MAX_QUEUES      4

typedef struct TestFE {
    int fd;
    int memfd;
    uint8_t *mem;
    unsigned int nq;
    int kick[MAX_QUEUES];
    int call[MAX_QUEUES];
    int err[MAX_QUEUES];
    uint16_t avail_idx[MAX_QUEUES];
    uint16_t used_idx[MAX_QUEUES];
} TestFE;

static AioContext *ctx;
static char *sock_path;
/* memfd_create() flags of the next front-end's guest memory, beyond
 * MFD_CLOEXEC: without MFD_ALLOW_SEALING it cannot be sealed */
static unsigned int fe_memfd_flags;
static BlockBackend *blk;
static VhostUserBlkExport *exp;
static int connects, disconnects;
/* the next start_export() puts blkdebug (for break points) on top */
static bool export_blkdebug;
/* the size the next fe_setup_vring() gives the rings */
static uint16_t queue_size = QUEUE_SIZE;

/* ---- the export ---- */

static void client_changed(void *opaque, bool connected)
{
    if (connected) {
        connects++;
    } else {
        disconnects++;
    }
}

static void start_export(bool writable, bool wce, uint16_t nq, uint32_t lbs)
{
    VhostUserBlkExportConfig cfg = {
        .id = "vub0",
        .path = sock_path,
        .writable = writable,
        .num_queues = nq,
        .logical_block_size = lbs,
        .client_changed = client_changed,
    };
    QDict *opts = qdict_new();

    test_mem_cfg_reset(1);
    test_mem_cfg.has_zero = true;
    test_mem_cfg.has_discard = true;
    if (export_blkdebug) {
        qdict_put_str(opts, "driver", "blkdebug");
        qdict_put_str(opts, "image.driver", "test-mem");
        export_blkdebug = false;
    } else {
        qdict_put_str(opts, "driver", "test-mem");
    }
    blk = blk_new_open(NULL, NULL, opts, writable ? BDRV_O_RDWR : 0,
                       &error_abort);
    blk_set_enable_write_cache(blk, wce);
    exp = vhost_user_blk_export_new(blk, &cfg, &error_abort);
    connects = disconnects = 0;
}

static void stop_export(void)
{
    vhost_user_blk_export_free(exp);
    blk_unref(blk);
    exp = NULL;
    blk = NULL;
    g_assert_false(g_file_test(sock_path, G_FILE_TEST_EXISTS));
}

static uint64_t flushes(void)
{
    return blk_get_stats(blk)->nr_ops[BLOCK_ACCT_FLUSH];
}

static uint64_t writes(void)
{
    return blk_get_stats(blk)->nr_ops[BLOCK_ACCT_WRITE];
}

/* ---- the socket ---- */

static bool fd_readable(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };

    return poll(&p, 1, 0) > 0;
}

/* Runs the export's loop until @fd has something to read. */
static void poll_until_readable(int fd)
{
    while (!fd_readable(fd)) {
        aio_poll(ctx, true);
    }
}

static void fe_send_raw(TestFE *fe, uint32_t req, uint32_t flags,
                        const void *payload, uint32_t size,
                        const int *fds, int nfds, uint32_t wire_size)
{
    VhostUserHeader hdr = { .request = req, .flags = flags,
                            .size = wire_size };
    struct iovec iov[2] = {
        { .iov_base = &hdr, .iov_len = sizeof(hdr) },
        { .iov_base = (void *)payload, .iov_len = size },
    };
    union {
        char buf[CMSG_SPACE(16 * sizeof(int))];
        struct cmsghdr align;
    } control = { { 0 } };
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = size ? 2 : 1 };

    if (nfds) {
        struct cmsghdr *c;

        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    g_assert_cmpint(sendmsg(fe->fd, &msg, MSG_NOSIGNAL), ==,
                    sizeof(hdr) + size);
}

static void fe_send(TestFE *fe, uint32_t req, uint32_t flags,
                    const void *payload, uint32_t size, const int *fds,
                    int nfds)
{
    fe_send_raw(fe, req, VHOST_USER_VERSION | flags, payload, size, fds,
                nfds, size);
}

static void read_full(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n;

        poll_until_readable(fd);
        n = recv(fd, p, len, 0);
        g_assert_cmpint(n, >, 0);
        p += n;
        len -= n;
    }
}

/* Receives the reply to @req, which must carry @size bytes. */
static void fe_recv(TestFE *fe, uint32_t req, void *payload, uint32_t size)
{
    VhostUserHeader hdr;

    read_full(fe->fd, &hdr, sizeof(hdr));
    g_assert_cmpuint(hdr.request, ==, req);
    g_assert_cmphex(hdr.flags, ==, VHOST_USER_VERSION |
                                   VHOST_USER_REPLY_MASK);
    g_assert_cmpuint(hdr.size, ==, size);
    read_full(fe->fd, payload, size);
}

static uint64_t fe_get_u64(TestFE *fe, uint32_t req)
{
    uint64_t v;

    fe_send(fe, req, 0, NULL, 0, NULL, 0);
    fe_recv(fe, req, &v, sizeof(v));
    return v;
}

/* Sends @req asking for REPLY_ACK; returns the ack (0: success). */
static uint64_t fe_set(TestFE *fe, uint32_t req, const void *payload,
                       uint32_t size, const int *fds, int nfds)
{
    uint64_t ack;

    fe_send(fe, req, VHOST_USER_NEED_REPLY_MASK, payload, size, fds, nfds);
    fe_recv(fe, req, &ack, sizeof(ack));
    return ack;
}

static uint64_t fe_set_u64(TestFE *fe, uint32_t req, uint64_t v)
{
    return fe_set(fe, req, &v, sizeof(v), NULL, 0);
}

static uint64_t fe_set_state(TestFE *fe, uint32_t req, uint32_t index,
                             uint32_t num)
{
    VhostUserVringState st = { .index = index, .num = num };

    return fe_set(fe, req, &st, sizeof(st), NULL, 0);
}

/* Runs the loop until the export hangs up on @fe. */
static void fe_expect_closed(TestFE *fe)
{
    char buf[512];
    ssize_t n;

    do {
        poll_until_readable(fe->fd);
        n = recv(fe->fd, buf, sizeof(buf), 0);
    } while (n > 0);
    /* a reset when the export left part of our message unread */
    g_assert_true(n == 0 || errno == ECONNRESET);
}

static TestFE *fe_connect(void)
{
    g_autoptr(SocketAddress) addr = socket_address_new_unix(sock_path);
    TestFE *fe = g_new0(TestFE, 1);

    fe->fd = socket_connect(addr, &error_abort);
    g_assert_cmpint(fe->fd, >=, 0);
    fe->memfd = memfd_create("test-guest-ram", MFD_CLOEXEC | fe_memfd_flags);
    g_assert_cmpint(fe->memfd, >=, 0);
    g_assert_cmpint(ftruncate(fe->memfd, MEM_SIZE), ==, 0);
    fe->mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                   fe->memfd, 0);
    g_assert_true(fe->mem != MAP_FAILED);
    for (int i = 0; i < MAX_QUEUES; i++) {
        fe->kick[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        fe->call[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        fe->err[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    }
    return fe;
}

/* Hangs up and waits until the export has cleaned up after us. */
static void fe_close(TestFE *fe)
{
    int before = disconnects;

    close(fe->fd);
    while (vhost_user_blk_export_has_client(exp) && disconnects == before) {
        aio_poll(ctx, true);
    }
    munmap(fe->mem, MEM_SIZE);
    close(fe->memfd);
    for (int i = 0; i < MAX_QUEUES; i++) {
        close(fe->kick[i]);
        close(fe->call[i]);
        close(fe->err[i]);
    }
    g_free(fe);
}

static uint64_t fe_uva(TestFE *fe, size_t off)
{
    return (uintptr_t)fe->mem + off;
}

static uint64_t fe_gpa(TestFE *fe, size_t off)
{
    return GPA_BASE + off;
}

/* All of the memfd as one region. */
static VhostUserMemory good_mem(TestFE *fe)
{
    return (VhostUserMemory) {
        .nregions = 1,
        .regions[0] = { GPA_BASE, MEM_SIZE, fe_uva(fe, 0), 0 },
    };
}

static uint64_t fe_set_mem_table(TestFE *fe)
{
    VhostUserMemory m = good_mem(fe);

    return fe_set(fe, VHOST_USER_SET_MEM_TABLE, &m,
                  offsetof(VhostUserMemory, regions) + sizeof(m.regions[0]),
                  &fe->memfd, 1);
}

static uint64_t fe_set_vring_fd(TestFE *fe, uint32_t req, unsigned int q,
                                int fd)
{
    uint64_t v = q;

    return fe_set(fe, req, &v, sizeof(v), &fd, 1);
}

/* fe_negotiate() gives guest memory as two halves, by ADD_MEM_REG. */
static bool fe_mem_by_slots;

/* Half @half (0 or 1) of guest memory as one region. */
static VhostUserMemRegMsg fe_half(TestFE *fe, unsigned int half)
{
    size_t off = half * (MEM_SIZE / 2);

    return (VhostUserMemRegMsg) {
        .region = { GPA_BASE + off, MEM_SIZE / 2, fe_uva(fe, off), off },
    };
}

/* ADD_MEM_REG or REM_MEM_REG of half @half; returns the ack. */
static uint64_t fe_mem_reg(TestFE *fe, uint32_t req, unsigned int half)
{
    VhostUserMemRegMsg r = fe_half(fe, half);

    return fe_set(fe, req, &r, sizeof(r), &fe->memfd, 1);
}

/* Features, protocol features and memory, as QEMU sends them. */
static uint64_t fe_negotiate(TestFE *fe, uint64_t drop_features)
{
    uint64_t f = fe_get_u64(fe, VHOST_USER_GET_FEATURES);
    uint64_t pf;

    g_assert_true(f & (UINT64_C(1) << VHOST_USER_F_PROTOCOL_FEATURES));
    pf = fe_get_u64(fe, VHOST_USER_GET_PROTOCOL_FEATURES);
    g_assert_cmphex(pf, ==,
                    (UINT64_C(1) << VHOST_USER_PROTOCOL_F_MQ) |
                    (UINT64_C(1) << VHOST_USER_PROTOCOL_F_LOG_SHMFD) |
                    (UINT64_C(1) << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
                    (UINT64_C(1) << VHOST_USER_PROTOCOL_F_BACKEND_REQ) |
                    (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIG) |
                    (UINT64_C(1) << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD) |
                    (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS));
    fe_send(fe, VHOST_USER_SET_PROTOCOL_FEATURES, 0, &pf, sizeof(pf),
            NULL, 0);
    g_assert_cmpuint(fe_set(fe, VHOST_USER_SET_OWNER, NULL, 0, NULL, 0), ==,
                     0);
    f &= ~drop_features;
    g_assert_cmpuint(fe_set_u64(fe, VHOST_USER_SET_FEATURES, f), ==, 0);
    if (fe_mem_by_slots) {
        /* as QEMU with CONFIGURE_MEM_SLOTS: region by region */
        g_assert_cmpuint(fe_get_u64(fe, VHOST_USER_GET_MAX_MEM_SLOTS), ==,
                         32);
        g_assert_cmpuint(fe_mem_reg(fe, VHOST_USER_ADD_MEM_REG, 0), ==, 0);
        g_assert_cmpuint(fe_mem_reg(fe, VHOST_USER_ADD_MEM_REG, 1), ==, 0);
    } else {
        g_assert_cmpuint(fe_set_mem_table(fe), ==, 0);
    }
    return f;
}

/* Sets vring @q up from @base, its rings in guest memory as they are. */
static void fe_resume_vring(TestFE *fe, unsigned int q, uint16_t base)
{
    VhostUserVringAddr a = {
        .index = q,
        .desc_user_addr = fe_uva(fe, DESC_OFF(q)),
        .avail_user_addr = fe_uva(fe, AVAIL_OFF(q)),
        .used_user_addr = fe_uva(fe, USED_OFF(q)),
    };

    g_assert_cmpuint(fe_set_state(fe, VHOST_USER_SET_VRING_NUM, q,
                                  queue_size), ==, 0);
    g_assert_cmpuint(fe_set_state(fe, VHOST_USER_SET_VRING_BASE, q, base),
                     ==, 0);
    g_assert_cmpuint(fe_set(fe, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a),
                            NULL, 0), ==, 0);
    g_assert_cmpuint(fe_set_vring_fd(fe, VHOST_USER_SET_VRING_CALL, q,
                                     fe->call[q]), ==, 0);
    g_assert_cmpuint(fe_set_vring_fd(fe, VHOST_USER_SET_VRING_ERR, q,
                                     fe->err[q]), ==, 0);
    g_assert_cmpuint(fe_set_vring_fd(fe, VHOST_USER_SET_VRING_KICK, q,
                                     fe->kick[q]), ==, 0);
    g_assert_cmpuint(fe_set_state(fe, VHOST_USER_SET_VRING_ENABLE, q, 1),
                     ==, 0);
}

static void fe_setup_vring(TestFE *fe, unsigned int q, uint16_t base)
{
    uint16_t le_base = GUINT16_TO_LE(base);

    /* the driver's rings stand where the ring is resumed */
    memcpy(fe->mem + AVAIL_OFF(q) + VRING_AVAIL_OFF_IDX, &le_base, 2);
    memcpy(fe->mem + USED_OFF(q) + VRING_USED_OFF_IDX, &le_base, 2);
    fe->avail_idx[q] = fe->used_idx[q] = base;
    fe_resume_vring(fe, q, base);
}

static TestFE *fe_start(unsigned int nq, uint64_t drop_features)
{
    TestFE *fe = fe_connect();

    fe->nq = nq;
    fe_negotiate(fe, drop_features);
    for (unsigned int q = 0; q < nq; q++) {
        fe_setup_vring(fe, q, 0);
    }
    return fe;
}

static void fe_get_config(TestFE *fe, VirtIOBlkConfig *c)
{
    VhostUserConfig req = { .offset = 0, .size = sizeof(*c) };
    VhostUserConfig reply;

    fe_send(fe, VHOST_USER_GET_CONFIG, 0, &req,
            VHOST_USER_CONFIG_HDR_SIZE + sizeof(*c), NULL, 0);
    fe_recv(fe, VHOST_USER_GET_CONFIG, &reply,
            VHOST_USER_CONFIG_HDR_SIZE + sizeof(*c));
    g_assert_cmpuint(reply.offset, ==, 0);
    g_assert_cmpuint(reply.size, ==, sizeof(*c));
    memcpy(c, reply.region, sizeof(*c));
}

/* What QEMU sends when the guest writes the writeback field. */
static uint64_t fe_set_wce(TestFE *fe, uint8_t wce)
{
    VhostUserConfig c = {
        .offset = offsetof(VirtIOBlkConfig, writeback),
        .size = 1,
        .flags = VHOST_SET_CONFIG_TYPE_FRONTEND,
        .region[0] = wce,
    };

    return fe_set(fe, VHOST_USER_SET_CONFIG, &c,
                  VHOST_USER_CONFIG_HDR_SIZE + 1, NULL, 0);
}

/* ---- the driver side of the rings ---- */

static void fe_desc(TestFE *fe, unsigned int q, uint16_t i, uint64_t addr,
                    uint32_t len, uint16_t flags, uint16_t next)
{
    VRingDesc d = {
        .addr = GUINT64_TO_LE(addr),
        .len = GUINT32_TO_LE(len),
        .flags = GUINT16_TO_LE(flags),
        .next = GUINT16_TO_LE(next),
    };

    memcpy(fe->mem + DESC_OFF(q) + i * sizeof(d), &d, sizeof(d));
}

static uint8_t *fe_slot_data(TestFE *fe, unsigned int slot)
{
    return fe->mem + SLOT_OFF(slot) + SLOT_DATA;
}

static uint8_t fe_slot_status(TestFE *fe, unsigned int slot)
{
    return fe->mem[SLOT_OFF(slot) + 16];
}

/*
 * Builds a request in @slot's memory and descriptors 3*slot.. of queue
 * @q: header, @len bytes of data (device-writable if @data_in), status.
 */
static uint16_t fe_blk_req(TestFE *fe, unsigned int q, unsigned int slot,
                           uint32_t type, uint64_t sector, uint32_t len,
                           bool data_in)
{
    VirtIOBlkOutHdr hdr = {
        .type = GUINT32_TO_LE(type),
        .sector = GUINT64_TO_LE(sector),
    };
    uint16_t head = slot * 3;
    size_t off = SLOT_OFF(slot);

    g_assert_cmpuint(head + 2, <, QUEUE_SIZE);
    memcpy(fe->mem + off, &hdr, sizeof(hdr));
    fe->mem[off + 16] = 0xff;
    if (len) {
        fe_desc(fe, q, head, fe_gpa(fe, off), sizeof(hdr), VRING_DESC_F_NEXT,
                head + 1);
        fe_desc(fe, q, head + 1, fe_gpa(fe, off + SLOT_DATA), len,
                VRING_DESC_F_NEXT | (data_in ? VRING_DESC_F_WRITE : 0),
                head + 2);
    } else {
        fe_desc(fe, q, head, fe_gpa(fe, off), sizeof(hdr), VRING_DESC_F_NEXT,
                head + 2);
    }
    fe_desc(fe, q, head + 2, fe_gpa(fe, off + 16), 1, VRING_DESC_F_WRITE, 0);
    return head;
}

static void fe_kick(TestFE *fe, unsigned int q)
{
    uint64_t one = 1;

    g_assert_cmpint(write(fe->kick[q], &one, sizeof(one)), ==, sizeof(one));
}

/* Makes @head available (without kicking). */
static void fe_make_available(TestFE *fe, unsigned int q, uint16_t head)
{
    uint16_t *ring = (uint16_t *)(fe->mem + AVAIL_OFF(q) +
                                  VRING_AVAIL_OFF_RING);
    uint16_t *idx = (uint16_t *)(fe->mem + AVAIL_OFF(q) +
                                 VRING_AVAIL_OFF_IDX);

    ring[fe->avail_idx[q] % queue_size] = GUINT16_TO_LE(head);
    fe->avail_idx[q]++;
    __atomic_store_n(idx, GUINT16_TO_LE(fe->avail_idx[q]), __ATOMIC_RELEASE);
}

static uint16_t fe_used_idx(TestFE *fe, unsigned int q)
{
    uint16_t *idx = (uint16_t *)(fe->mem + USED_OFF(q) + VRING_USED_OFF_IDX);

    return GUINT16_FROM_LE(__atomic_load_n(idx, __ATOMIC_ACQUIRE));
}

/* Runs the loop until @n more requests of @q are used; returns the last. */
static VRingUsedElem fe_wait_used(TestFE *fe, unsigned int q, unsigned int n)
{
    VRingUsedElem u;

    fe->used_idx[q] += n;
    while (fe_used_idx(fe, q) != fe->used_idx[q]) {
        aio_poll(ctx, true);
    }
    memcpy(&u, fe->mem + USED_OFF(q) + VRING_USED_OFF_RING +
           sizeof(u) * ((uint16_t)(fe->used_idx[q] - 1) % queue_size),
           sizeof(u));
    return u;
}

static uint64_t eventfd_take(int fd)
{
    uint64_t v = 0;

    if (read(fd, &v, sizeof(v)) != sizeof(v)) {
        return 0;
    }
    return v;
}

/* One request, submitted and waited for; returns its status byte. */
static uint8_t fe_do_req(TestFE *fe, unsigned int q, unsigned int slot,
                         uint32_t type, uint64_t sector, uint32_t len,
                         bool data_in)
{
    uint16_t head = fe_blk_req(fe, q, slot, type, sector, len, data_in);
    VRingUsedElem u;

    fe_make_available(fe, q, head);
    fe_kick(fe, q);
    u = fe_wait_used(fe, q, 1);
    g_assert_cmpuint(u.id, ==, head);
    g_assert_cmpuint(u.len, ==, (data_in ? len : 0) + 1);
    return fe_slot_status(fe, slot);
}

static uint8_t fe_write(TestFE *fe, unsigned int q, uint64_t sector,
                        uint32_t len, uint8_t pattern)
{
    memset(fe_slot_data(fe, 0), pattern, len);
    return fe_do_req(fe, q, 0, VIRTIO_BLK_T_OUT, sector, len, false);
}

/*
 * A request of @npieces data pieces of 512 bytes in @slot's memory,
 * described from descriptor @head on: the header split 8 + 8, the data
 * piece by piece, and for a read the status byte in the last data
 * descriptor (513 bytes).  More pieces than a ring slot holds
 * (VU_SLOT_SG, 34) make the export use an array of the request's own.
 */
static uint16_t fe_scattered_req(TestFE *fe, unsigned int slot,
                                 uint16_t head, uint32_t type,
                                 uint64_t sector, unsigned int npieces)
{
    bool in = type == VIRTIO_BLK_T_IN;
    VirtIOBlkOutHdr hdr = {
        .type = GUINT32_TO_LE(type),
        .sector = GUINT64_TO_LE(sector),
    };
    size_t off = SLOT_OFF(slot);
    uint16_t d = head;

    memcpy(fe->mem + off, &hdr, sizeof(hdr));
    fe_desc(fe, 0, d, fe_gpa(fe, off), 8, VRING_DESC_F_NEXT, d + 1);
    d++;
    fe_desc(fe, 0, d, fe_gpa(fe, off + 8), 8, VRING_DESC_F_NEXT, d + 1);
    d++;
    for (unsigned int i = 0; i < npieces; i++, d++) {
        bool last = i + 1 == npieces;
        uint32_t len = 512 + (in && last);

        fe_desc(fe, 0, d, fe_gpa(fe, off + SLOT_DATA + 512 * i), len,
                (in ? VRING_DESC_F_WRITE : 0) |
                (last && in ? 0 : VRING_DESC_F_NEXT), d + 1);
    }
    if (!in) {
        fe_desc(fe, 0, d, fe_gpa(fe, off + 16), 1, VRING_DESC_F_WRITE, 0);
    }
    return head;
}

/* ---- what the export reports on stderr ---- */

static int stderr_saved = -1;
static FILE *stderr_file;

static void stderr_capture_begin(void)
{
    fflush(stderr);
    stderr_file = tmpfile();
    g_assert_nonnull(stderr_file);
    stderr_saved = dup(STDERR_FILENO);
    g_assert_cmpint(dup2(fileno(stderr_file), STDERR_FILENO), >=, 0);
}

/* Stops capturing; returns what was written (caller frees), echoed. */
static char *stderr_capture_end(void)
{
    GString *text = g_string_new(NULL);
    char buf[1024];
    size_t n;

    fflush(stderr);
    dup2(stderr_saved, STDERR_FILENO);
    close(stderr_saved);
    rewind(stderr_file);
    while ((n = fread(buf, 1, sizeof(buf), stderr_file)) > 0) {
        g_string_append_len(text, buf, n);
    }
    fclose(stderr_file);
    fputs(text->str, stderr);
    return g_string_free(text, false);
}

/* ---- tests ---- */

static void test_negotiation(void)
{
    TestFE *fe;
    VirtIOBlkConfig c;
    uint64_t f;

    start_export(true, true, 3, 4096);
    fe = fe_connect();
    f = fe_get_u64(fe, VHOST_USER_GET_FEATURES);
    for (int bit = 0; bit < 64; bit++) {
        bool want = bit == VIRTIO_F_VERSION_1 ||
                    bit == VIRTIO_RING_F_INDIRECT_DESC ||
                    bit == VIRTIO_RING_F_EVENT_IDX ||
                    bit == VHOST_F_LOG_ALL ||
                    bit == VHOST_USER_F_PROTOCOL_FEATURES ||
                    bit == VIRTIO_BLK_F_SEG_MAX ||
                    bit == VIRTIO_BLK_F_BLK_SIZE ||
                    bit == VIRTIO_BLK_F_TOPOLOGY ||
                    bit == VIRTIO_BLK_F_FLUSH ||
                    bit == VIRTIO_BLK_F_CONFIG_WCE ||
                    bit == VIRTIO_BLK_F_MQ ||
                    bit == VIRTIO_BLK_F_DISCARD ||
                    bit == VIRTIO_BLK_F_WRITE_ZEROES;

        g_assert_cmpint(!!(f & (UINT64_C(1) << bit)), ==, want);
    }
    fe_negotiate(fe, 0);
    g_assert_cmpuint(fe_get_u64(fe, VHOST_USER_GET_QUEUE_NUM), ==, 3);
    fe_get_config(fe, &c);
    g_assert_cmpuint(GUINT64_FROM_LE(c.capacity), ==, MiB / 512);
    g_assert_cmpuint(GUINT32_FROM_LE(c.blk_size), ==, 4096);
    g_assert_cmpuint(GUINT16_FROM_LE(c.num_queues), ==, 3);
    g_assert_cmpuint(GUINT32_FROM_LE(c.seg_max), ==, VIRTQUEUE_MAX_SIZE - 2);
    g_assert_cmpuint(GUINT32_FROM_LE(c.discard_sector_alignment), ==, 8);
    g_assert_cmpuint(c.writeback, ==, 1);

    /* a config read past the device's 60 bytes gets zeroes, not an error */
    {
        VhostUserConfig req = { .offset = 56, .size = 16 };
        VhostUserConfig reply;

        fe_send(fe, VHOST_USER_GET_CONFIG, 0, &req,
                VHOST_USER_CONFIG_HDR_SIZE + 16, NULL, 0);
        fe_recv(fe, VHOST_USER_GET_CONFIG, &reply,
                VHOST_USER_CONFIG_HDR_SIZE + 16);
        g_assert_cmpuint(reply.region[0], ==, 1);   /* may_unmap */
        for (int i = 4; i < 16; i++) {
            g_assert_cmpuint(reply.region[i], ==, 0);
        }
    }
    g_assert_cmpint(connects, ==, 1);
    fe_close(fe);
    g_assert_cmpint(disconnects, ==, 1);
    stop_export();
}

/*
 * The writeback field is the real cache mode from the very first
 * GET_CONFIG, before any negotiation (QEMU reads it once, at connect).
 */
static void test_first_config_matches_cache(void)
{
    for (int wce = 0; wce <= 1; wce++) {
        TestFE *fe;
        VirtIOBlkConfig c;

        start_export(true, wce, 1, 512);
        fe = fe_connect();
        fe_get_config(fe, &c);
        g_assert_cmpuint(c.writeback, ==, wce);
        g_assert_cmpint(blk_enable_write_cache(blk), ==, wce);
        fe_close(fe);
        stop_export();
    }
}

static void test_io(void)
{
    TestFE *fe;
    uint8_t buf[8192];
    uint64_t w0;

    start_export(true, true, 1, 512);
    fe = fe_start(1, 0);

    w0 = writes();
    g_assert_cmpuint(fe_write(fe, 0, 8, 8192, 0xa5), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(writes() - w0, ==, 1);
    g_assert_cmpint(blk_pread(blk, 4096, sizeof(buf), buf, 0), ==, 0);
    for (size_t i = 0; i < sizeof(buf); i++) {
        g_assert_cmphex(buf[i], ==, 0xa5);
    }
    memset(fe_slot_data(fe, 1), 0, 8192);
    g_assert_cmpuint(fe_do_req(fe, 0, 1, VIRTIO_BLK_T_IN, 8, 8192, true), ==,
                     VIRTIO_BLK_S_OK);
    g_assert_cmpmem(fe_slot_data(fe, 1), 8192, buf, sizeof(buf));
    /* the driver asked for an interrupt: the call eventfd was signalled */
    g_assert_cmpuint(eventfd_take(fe->call[0]), >=, 1);

    /* GET_ID: the export id */
    g_assert_cmpuint(fe_do_req(fe, 0, 2, VIRTIO_BLK_T_GET_ID, 0, 20, true),
                     ==, VIRTIO_BLK_S_OK);
    g_assert_cmpmem(fe_slot_data(fe, 2), 5, "vub0", 5);

    /* past the end: IOERR, nothing reaches the image */
    w0 = writes();
    g_assert_cmpuint(fe_write(fe, 0, MiB / 512 - 1, 1024, 0x11), ==,
                     VIRTIO_BLK_S_IOERR);
    g_assert_cmpuint(writes() - w0, ==, 0);
    g_assert_cmpuint(fe_do_req(fe, 0, 0, 99, 0, 0, false), ==,
                     VIRTIO_BLK_S_UNSUPP);

    /* write zeroes and discard: one segment each */
    {
        VirtIOBlkDiscardWriteZeroes seg = {
            .sector = GUINT64_TO_LE(8),
            .num_sectors = GUINT32_TO_LE(8),
        };

        memcpy(fe_slot_data(fe, 3), &seg, sizeof(seg));
        g_assert_cmpuint(fe_do_req(fe, 0, 3, VIRTIO_BLK_T_WRITE_ZEROES, 0,
                                   sizeof(seg), false), ==, VIRTIO_BLK_S_OK);
        g_assert_cmpint(blk_pread(blk, 4096, 4096, buf, 0), ==, 0);
        g_assert_cmphex(buf[0], ==, 0);
        g_assert_cmphex(buf[4095], ==, 0);
        g_assert_cmphex(buf[4096], ==, 0xa5);
        g_assert_cmpuint(fe_do_req(fe, 0, 3, VIRTIO_BLK_T_DISCARD, 0,
                                   sizeof(seg), false), ==, VIRTIO_BLK_S_OK);
    }

    /* several requests made available under one kick */
    for (unsigned int slot = 0; slot < 8; slot++) {
        memset(fe_slot_data(fe, slot), 0x30 + slot, 4096);
        fe_make_available(fe, 0, fe_blk_req(fe, 0, slot, VIRTIO_BLK_T_OUT,
                                            slot * 8, 4096, false));
    }
    fe_kick(fe, 0);
    fe_wait_used(fe, 0, 8);
    for (unsigned int slot = 0; slot < 8; slot++) {
        g_assert_cmpuint(fe_slot_status(fe, slot), ==, VIRTIO_BLK_S_OK);
        g_assert_cmpint(blk_pread(blk, slot * 4096, 4096, buf, 0), ==, 0);
        g_assert_cmphex(buf[0], ==, 0x30 + slot);
        g_assert_cmphex(buf[4095], ==, 0x30 + slot);
    }
    fe_close(fe);
    stop_export();
}

/* The guest's writeback field drives the BlockBackend's write cache. */
static void test_wce_toggle(void)
{
    TestFE *fe;
    VirtIOBlkConfig c;
    uint64_t f0;

    start_export(true, true, 1, 512);
    fe = fe_start(1, 0);

    /* write back: writes are not flushed, a FLUSH request is */
    f0 = flushes();
    for (int i = 0; i < 4; i++) {
        g_assert_cmpuint(fe_write(fe, 0, i * 8, 4096, 0x10 + i), ==,
                         VIRTIO_BLK_S_OK);
    }
    g_assert_cmpuint(flushes() - f0, ==, 0);
    g_assert_cmpuint(fe_do_req(fe, 0, 0, VIRTIO_BLK_T_FLUSH, 0, 0, false),
                     ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(flushes() - f0, ==, 1);

    /* write through: each write is flushed before it completes */
    g_assert_cmpuint(fe_set_wce(fe, 0), ==, 0);
    g_assert_false(blk_enable_write_cache(blk));
    fe_get_config(fe, &c);
    g_assert_cmpuint(c.writeback, ==, 0);
    f0 = flushes();
    for (int i = 0; i < 5; i++) {
        g_assert_cmpuint(fe_write(fe, 0, i * 8, 4096, 0x20 + i), ==,
                         VIRTIO_BLK_S_OK);
        g_assert_cmpuint(flushes() - f0, ==, i + 1);
    }

    /* what reached the driver: the write, then its flush */
    test_log_reset();
    g_assert_cmpuint(fe_write(fe, 0, 16, 4096, 0x2f), ==, VIRTIO_BLK_S_OK);
    test_log_assert("write 8192 4096; mem.flush_to_disk");

    /* and back */
    g_assert_cmpuint(fe_set_wce(fe, 1), ==, 0);
    g_assert_true(blk_enable_write_cache(blk));
    fe_get_config(fe, &c);
    g_assert_cmpuint(c.writeback, ==, 1);
    f0 = flushes();
    for (int i = 0; i < 3; i++) {
        g_assert_cmpuint(fe_write(fe, 0, i * 8, 4096, 0x30 + i), ==,
                         VIRTIO_BLK_S_OK);
    }
    g_assert_cmpuint(flushes() - f0, ==, 0);

    /* only the writeback byte is writable: the refusal is acked, the
     * connection stays, nothing changes */
    {
        VhostUserConfig bad = { .offset = 0, .size = 8 };

        g_assert_cmpuint(fe_set(fe, VHOST_USER_SET_CONFIG, &bad,
                                VHOST_USER_CONFIG_HDR_SIZE + 8, NULL, 0),
                         !=, 0);
    }
    g_assert_true(blk_enable_write_cache(blk));

    /* a front-end that goes away leaves the mode the guest chose */
    g_assert_cmpuint(fe_set_wce(fe, 0), ==, 0);
    fe_close(fe);
    g_assert_false(blk_enable_write_cache(blk));
    fe = fe_connect();
    fe_get_config(fe, &c);
    g_assert_cmpuint(c.writeback, ==, 0);
    fe_close(fe);
    stop_export();
}

/* Without CONFIG_WCE the field is read-only; without FLUSH, writethrough. */
static void test_wce_not_negotiated(void)
{
    TestFE *fe;
    VirtIOBlkConfig c;
    uint64_t f0;

    start_export(true, true, 1, 512);
    fe = fe_start(1, UINT64_C(1) << VIRTIO_BLK_F_CONFIG_WCE);
    g_assert_cmpuint(fe_set_wce(fe, 0), !=, 0);
    g_assert_true(blk_enable_write_cache(blk));
    fe_close(fe);

    fe = fe_start(1, UINT64_C(1) << VIRTIO_BLK_F_FLUSH);
    g_assert_false(blk_enable_write_cache(blk));
    f0 = flushes();
    g_assert_cmpuint(fe_write(fe, 0, 0, 4096, 0x42), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(flushes() - f0, ==, 1);
    /* the field shows the mode kept for drivers that can flush */
    fe_get_config(fe, &c);
    g_assert_cmpuint(c.writeback, ==, 1);
    g_assert_cmpuint(fe_set_wce(fe, 0), !=, 0);
    fe_close(fe);
    g_assert_true(blk_enable_write_cache(blk));
    stop_export();
}

static void test_multiqueue(void)
{
    TestFE *fe;
    uint8_t buf[4096];

    start_export(true, true, 3, 512);
    fe = fe_start(3, 0);
    for (unsigned int q = 0; q < 3; q++) {
        memset(fe_slot_data(fe, q + 4), 0x60 + q, 4096);
        g_assert_cmpuint(fe_do_req(fe, q, q + 4, VIRTIO_BLK_T_OUT, 64 + q * 8,
                                   4096, false), ==, VIRTIO_BLK_S_OK);
    }
    for (unsigned int q = 0; q < 3; q++) {
        g_assert_cmpint(blk_pread(blk, (64 + q * 8) * 512, 4096, buf, 0), ==,
                        0);
        g_assert_cmphex(buf[100], ==, 0x60 + q);
        g_assert_cmpuint(fe_used_idx(fe, q), ==, 1);
    }
    /* a vring index past num-queues breaks the protocol */
    fe_send(fe, VHOST_USER_SET_VRING_NUM, 0,
            &(VhostUserVringState){ .index = 3, .num = 128 },
            sizeof(VhostUserVringState), NULL, 0);
    fe_expect_closed(fe);
    fe_close(fe);
    stop_export();
}

/* GET_VRING_BASE stops a ring; a front-end may come back and resume. */
static void test_vring_base_and_reconnect(void)
{
    TestFE *fe;
    VhostUserVringState st = { .index = 0 };
    uint8_t buf[512];

    start_export(true, true, 1, 512);
    fe = fe_start(1, 0);
    for (int i = 0; i < 5; i++) {
        g_assert_cmpuint(fe_write(fe, 0, i, 512, 0x70 + i), ==,
                         VIRTIO_BLK_S_OK);
    }
    fe_send(fe, VHOST_USER_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0);
    fe_recv(fe, VHOST_USER_GET_VRING_BASE, &st, sizeof(st));
    g_assert_cmpuint(st.index, ==, 0);
    g_assert_cmpuint(st.num, ==, 5);
    /* a stopped ring pops nothing, whatever the driver does */
    fe_make_available(fe, 0, fe_blk_req(fe, 0, 0, VIRTIO_BLK_T_OUT, 9, 512,
                                        false));
    fe_kick(fe, 0);
    while (aio_poll(ctx, false)) {
        continue;
    }
    g_assert_cmpuint(fe_used_idx(fe, 0), ==, 5);
    fe_close(fe);

    /* a new connection, resuming at the base, as QEMU does */
    fe = fe_connect();
    fe_negotiate(fe, 0);
    fe_setup_vring(fe, 0, 5);
    g_assert_cmpuint(fe_write(fe, 0, 9, 512, 0x7f), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpint(blk_pread(blk, 9 * 512, 512, buf, 0), ==, 0);
    g_assert_cmphex(buf[0], ==, 0x7f);
    g_assert_cmpint(connects, ==, 2);
    fe_close(fe);
    g_assert_cmpint(disconnects, ==, 2);
    stop_export();
}

/* GET_VRING_BASE waits for the ring's requests in flight (invariant 3). */
static void test_vring_base_waits(void)
{
    TestFE *fe;
    VhostUserVringState st = { .index = 0 };

    export_blkdebug = true;
    start_export(true, true, 1, 512);
    fe = fe_start(1, 0);
    g_assert_cmpint(bdrv_debug_breakpoint(blk_bs(blk), "pwritev", "held"),
                    ==, 0);
    fe_make_available(fe, 0, fe_blk_req(fe, 0, 0, VIRTIO_BLK_T_OUT, 0, 512,
                                        false));
    fe_kick(fe, 0);
    while (!bdrv_debug_is_suspended(blk_bs(blk), "held")) {
        aio_poll(ctx, true);
    }
    fe_send(fe, VHOST_USER_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0);
    for (int i = 0; i < 20; i++) {
        aio_poll(ctx, false);
    }
    /* no reply while the write is held */
    g_assert_false(fd_readable(fe->fd));
    g_assert_cmpint(bdrv_debug_resume(blk_bs(blk), "held"), ==, 0);
    fe_recv(fe, VHOST_USER_GET_VRING_BASE, &st, sizeof(st));
    g_assert_cmpuint(st.num, ==, 1);
    g_assert_cmpuint(fe_used_idx(fe, 0), ==, 1);
    g_assert_cmpuint(fe_slot_status(fe, 0), ==, VIRTIO_BLK_S_OK);
    fe_close(fe);
    stop_export();
}

/*
 * Guest memory stays mapped while a request is in flight (invariant 1):
 * SET_MEM_TABLE waits for it, and so does the end of a connection.
 */
static void test_memory_held(void)
{
    TestFE *fe;
    uint16_t head;

    export_blkdebug = true;
    start_export(true, true, 1, 512);
    fe = fe_start(1, 0);
    g_assert_cmpint(bdrv_debug_breakpoint(blk_bs(blk), "pwritev", "held"),
                    ==, 0);
    head = fe_blk_req(fe, 0, 0, VIRTIO_BLK_T_OUT, 0, 512, false);
    fe_make_available(fe, 0, head);
    fe_kick(fe, 0);
    while (!bdrv_debug_is_suspended(blk_bs(blk), "held")) {
        aio_poll(ctx, true);
    }
    {
        VhostUserMemory m = good_mem(fe);

        fe_send(fe, VHOST_USER_SET_MEM_TABLE, VHOST_USER_NEED_REPLY_MASK, &m,
                offsetof(VhostUserMemory, regions) + sizeof(m.regions[0]),
                &fe->memfd, 1);
    }
    for (int i = 0; i < 20; i++) {
        aio_poll(ctx, false);
    }
    g_assert_false(fd_readable(fe->fd));
    g_assert_cmpint(bdrv_debug_resume(blk_bs(blk), "held"), ==, 0);
    {
        uint64_t ack;

        fe_recv(fe, VHOST_USER_SET_MEM_TABLE, &ack, sizeof(ack));
        g_assert_cmpuint(ack, ==, 0);
    }
    fe_wait_used(fe, 0, 1);
    g_assert_cmpuint(fe_slot_status(fe, 0), ==, VIRTIO_BLK_S_OK);
    /* rings and requests go on in the new mapping */
    g_assert_cmpuint(fe_write(fe, 0, 1, 512, 0x44), ==, VIRTIO_BLK_S_OK);

    /* a front-end that hangs up with a request held */
    g_assert_cmpint(bdrv_debug_breakpoint(blk_bs(blk), "pwritev", "held"),
                    ==, 0);
    fe_make_available(fe, 0, fe_blk_req(fe, 0, 1, VIRTIO_BLK_T_OUT, 2, 512,
                                        false));
    fe_kick(fe, 0);
    while (!bdrv_debug_is_suspended(blk_bs(blk), "held")) {
        aio_poll(ctx, true);
    }
    close(fe->fd);
    fe->fd = -1;
    for (int i = 0; i < 20; i++) {
        aio_poll(ctx, false);
    }
    g_assert_true(vhost_user_blk_export_has_client(exp));
    g_assert_cmpint(disconnects, ==, 0);
    g_assert_cmpint(bdrv_debug_resume(blk_bs(blk), "held"), ==, 0);
    while (disconnects == 0) {
        aio_poll(ctx, true);
    }
    /* the completion reached guest memory before it was unmapped */
    g_assert_cmpuint(fe_slot_status(fe, 1), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(fe_used_idx(fe, 0), ==, 3);
    fe_close(fe);
    stop_export();
}

static void test_read_only(void)
{
    TestFE *fe;
    uint64_t f, w0;

    start_export(false, true, 1, 512);
    fe = fe_connect();
    f = fe_get_u64(fe, VHOST_USER_GET_FEATURES);
    g_assert_true(f & (UINT64_C(1) << VIRTIO_BLK_F_RO));
    g_assert_false(f & (UINT64_C(1) << VIRTIO_BLK_F_DISCARD));
    fe_close(fe);
    fe = fe_start(1, 0);
    w0 = writes();
    g_assert_cmpuint(fe_write(fe, 0, 0, 512, 0x99), ==, VIRTIO_BLK_S_IOERR);
    g_assert_cmpuint(writes(), ==, w0);
    g_assert_cmpuint(fe_do_req(fe, 0, 1, VIRTIO_BLK_T_IN, 0, 512, true), ==,
                     VIRTIO_BLK_S_OK);
    fe_close(fe);
    stop_export();
}

/* A guest's bad ring breaks that ring only, and says so on the err fd. */
static void test_broken_ring(void)
{
    TestFE *fe;
    uint16_t head;

    start_export(true, true, 1, 512);
    fe = fe_start(1, 0);
    head = fe_blk_req(fe, 0, 0, VIRTIO_BLK_T_IN, 0, 512, true);
    /* the data buffer lies past the end of guest memory */
    fe_desc(fe, 0, head + 1, GPA_BASE + MEM_SIZE - 256, 512,
            VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, head + 2);
    fe_make_available(fe, 0, head);
    fe_kick(fe, 0);
    while (!fd_readable(fe->err[0])) {
        aio_poll(ctx, true);
    }
    g_assert_cmpuint(eventfd_take(fe->err[0]), ==, 1);
    g_assert_cmpuint(fe_used_idx(fe, 0), ==, 0);
    /* the connection lives on; a new ring setup repairs the ring */
    g_assert_true(fe_get_u64(fe, VHOST_USER_GET_FEATURES) != 0);
    {
        VhostUserVringState st = { .index = 0 };

        fe_send(fe, VHOST_USER_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0);
        fe_recv(fe, VHOST_USER_GET_VRING_BASE, &st, sizeof(st));
    }
    fe_setup_vring(fe, 0, 0);
    g_assert_cmpuint(fe_write(fe, 0, 0, 512, 0x12), ==, VIRTIO_BLK_S_OK);
    fe_close(fe);
    stop_export();
}

/*
 * A driver that offers a request while the device holds as many as the
 * ring has entries (here one, held at a breakpoint) breaks the ring with
 * an error; the export has no request slot for it and must not need one.
 */
/* With EVENT_IDX: the requests the device has popped (its avail_event). */
static uint16_t fe_avail_event(TestFE *fe, unsigned int q)
{
    uint16_t *event = (uint16_t *)(fe->mem + USED_OFF(q) +
                                   VRING_USED_OFF_AVAIL_EVENT(queue_size));

    return GUINT16_FROM_LE(__atomic_load_n(event, __ATOMIC_ACQUIRE));
}

/* With EVENT_IDX: asks for a call once the device uses past @idx. */
static void fe_set_used_event(TestFE *fe, unsigned int q, uint16_t idx)
{
    uint16_t *event = (uint16_t *)(fe->mem + AVAIL_OFF(q) +
                                   VRING_AVAIL_OFF_USED_EVENT(queue_size));

    __atomic_store_n(event, GUINT16_TO_LE(idx), __ATOMIC_SEQ_CST);
}

/*
 * A deep queue on an idle ring reaches the device a few requests at a
 * time (vhost-user-vring.c invariant 13: this device completes each
 * burst before the next pass, so the ring is idle again at each), not
 * all in one loop iteration, and a completion is signalled as it is
 * pushed, within the iteration that pushed it, for a driver that asked
 * for a call (invariant 9).
 */
static void test_deep_queue_bursts(void)
{
    const unsigned int n = 24;
    /* per loop iteration (aio_poll) that popped any */
    unsigned int most_in_one_pass = 0, passes = 0;
    uint16_t used = 0;
    TestFE *fe;

    start_export(true, true, 1, 512);
    fe = fe_start(1, 0);
    for (unsigned int i = 0; i < n; i++) {
        fe_make_available(fe, 0, fe_blk_req(fe, 0, i, VIRTIO_BLK_T_IN, i,
                                            512, true));
    }
    fe_kick(fe, 0);
    while (used != n) {
        uint16_t popped = fe_avail_event(fe, 0);

        aio_poll(ctx, true);
        if (fe_avail_event(fe, 0) != popped) {
            passes++;
            most_in_one_pass = MAX(most_in_one_pass,
                                   (uint16_t)(fe_avail_event(fe, 0) - popped));
        }
        if (fe_used_idx(fe, 0) != used) {
            g_assert_true(fd_readable(fe->call[0]));
            eventfd_take(fe->call[0]);
            used = fe_used_idx(fe, 0);
            /* as Linux's virtqueue_enable_cb(): call me for the next */
            fe_set_used_event(fe, 0, used);
        }
    }
    /*
     * A burst is 4; an iteration may run two (the kick's, then the
     * process_bh its bottom halves run), where all 24 went in one.
     */
    g_assert_cmpuint(most_in_one_pass, <=, 8);
    g_assert_cmpuint(passes, >=, n / 8);
    for (unsigned int i = 0; i < n; i++) {
        g_assert_cmpuint(fe_slot_status(fe, i), ==, VIRTIO_BLK_S_OK);
    }
    fe->used_idx[0] = used;
    fe_close(fe);
    stop_export();
}

static void test_ring_overcommitted(void)
{
    g_autofree char *log = NULL;
    TestFE *fe;

    export_blkdebug = true;
    start_export(true, true, 1, 512);
    queue_size = 1;
    fe = fe_start(1, 0);
    queue_size = QUEUE_SIZE;
    g_assert_cmpint(bdrv_debug_breakpoint(blk_bs(blk), "pwritev", "held"),
                    ==, 0);
    /* the ring's one descriptor: an indirect table of the request's three
     * (written where queue 1's table would be) */
    fe_blk_req(fe, 1, 0, VIRTIO_BLK_T_OUT, 0, 512, false);
    fe_desc(fe, 0, 0, fe_gpa(fe, DESC_OFF(1)), 3 * sizeof(VRingDesc),
            VRING_DESC_F_INDIRECT, 0);
    fe_make_available(fe, 0, 0);
    fe_kick(fe, 0);
    while (!bdrv_debug_is_suspended(blk_bs(blk), "held")) {
        aio_poll(ctx, true);
    }
    stderr_capture_begin();
    fe_make_available(fe, 0, 0);
    fe_kick(fe, 0);
    while (!fd_readable(fe->err[0])) {
        aio_poll(ctx, true);
    }
    log = stderr_capture_end();
    g_assert_nonnull(strstr(log, "vring 0: virtqueue: 1 requests in flight "
                            "already, as many as the queue has entries"));
    g_assert_cmpint(bdrv_debug_resume(blk_bs(blk), "held"), ==, 0);
    fe_close(fe);
    stop_export();
}

/* ---- malformed messages ---- */

typedef void HostileFn(TestFE *fe);

static void hostile_version(TestFE *fe)
{
    fe_send_raw(fe, VHOST_USER_GET_FEATURES, 2, NULL, 0, NULL, 0, 0);
}

static void hostile_reply_flag(TestFE *fe)
{
    fe_send(fe, VHOST_USER_GET_FEATURES, VHOST_USER_REPLY_MASK, NULL, 0,
            NULL, 0);
}

static void hostile_huge_payload(TestFE *fe)
{
    /* announces 1 GiB and sends nothing more: no allocation, no read */
    fe_send_raw(fe, VHOST_USER_SET_FEATURES, VHOST_USER_VERSION, NULL, 0,
                NULL, 0, 1u << 30);
}

static void hostile_short_u64(TestFE *fe)
{
    uint32_t v = 0;

    fe_send(fe, VHOST_USER_SET_FEATURES, 0, &v, sizeof(v), NULL, 0);
}

static void hostile_unoffered_feature(TestFE *fe)
{
    uint64_t f = UINT64_C(1) << 63;

    fe_send(fe, VHOST_USER_SET_FEATURES, 0, &f, sizeof(f), NULL, 0);
}

static void hostile_unoffered_protocol_feature(TestFE *fe)
{
    uint64_t f = UINT64_C(1) << VHOST_USER_PROTOCOL_F_PAGEFAULT;

    fe_send(fe, VHOST_USER_SET_PROTOCOL_FEATURES, 0, &f, sizeof(f), NULL, 0);
}

static void hostile_unknown_request(TestFE *fe)
{
    fe_send(fe, 200, 0, NULL, 0, NULL, 0);
}

static void hostile_unsupported_request(TestFE *fe)
{
    uint64_t v = 0;

    /* the kernel's log eventfd: no vhost-user front-end sends it */
    fe_send(fe, VHOST_USER_SET_LOG_FD, 0, &v, sizeof(v), NULL, 0);
}

static void hostile_fds_on_get_features(TestFE *fe)
{
    fe_send(fe, VHOST_USER_GET_FEATURES, 0, NULL, 0, &fe->kick[0], 1);
}

static void hostile_too_many_fds(TestFE *fe)
{
    int fds[12];

    for (int i = 0; i < 12; i++) {
        fds[i] = fe->memfd;
    }
    fe_send(fe, VHOST_USER_SET_MEM_TABLE, 0, &(VhostUserMemory){ 0 }, 8,
            fds, 12);
}

static void hostile_truncated(TestFE *fe)
{
    uint8_t half[6] = { VHOST_USER_GET_FEATURES };

    g_assert_cmpint(send(fe->fd, half, sizeof(half), 0), ==, sizeof(half));
    shutdown(fe->fd, SHUT_WR);
}

/* Memory slots and replies negotiated, nothing else. */
static void fe_slots_only(TestFE *fe)
{
    uint64_t pf = (UINT64_C(1) << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
                  (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS);

    fe_send(fe, VHOST_USER_SET_PROTOCOL_FEATURES, 0, &pf, sizeof(pf), NULL,
            0);
}

static void hostile_mem_reg_overlap(TestFE *fe)
{
    VhostUserMemRegMsg r = fe_half(fe, 0);

    fe_slots_only(fe);
    g_assert_cmpuint(fe_mem_reg(fe, VHOST_USER_ADD_MEM_REG, 0), ==, 0);
    r.region.guest_phys_addr += 4096;
    r.region.userspace_addr += 4096;
    r.region.memory_size = 4096;
    fe_send(fe, VHOST_USER_ADD_MEM_REG, 0, &r, sizeof(r), &fe->memfd, 1);
}

static void hostile_mem_reg_too_many(TestFE *fe)
{
    fe_slots_only(fe);
    for (unsigned int i = 0; i <= 32; i++) {
        VhostUserMemRegMsg r = {
            .region = { GPA_BASE + i * 4096, 4096, fe_uva(fe, i * 4096),
                        i * 4096 },
        };

        if (i < 32) {
            g_assert_cmpuint(fe_set(fe, VHOST_USER_ADD_MEM_REG, &r,
                                    sizeof(r), &fe->memfd, 1), ==, 0);
        } else {
            fe_send(fe, VHOST_USER_ADD_MEM_REG, 0, &r, sizeof(r),
                    &fe->memfd, 1);
        }
    }
}

static void hostile_mem_reg_unknown(TestFE *fe)
{
    VhostUserMemRegMsg r = fe_half(fe, 1);

    fe_slots_only(fe);
    g_assert_cmpuint(fe_mem_reg(fe, VHOST_USER_ADD_MEM_REG, 0), ==, 0);
    fe_send(fe, VHOST_USER_REM_MEM_REG, 0, &r, sizeof(r), NULL, 0);
}

static void hostile_mem_reg_not_negotiated(TestFE *fe)
{
    VhostUserMemRegMsg r = fe_half(fe, 0);

    fe_send(fe, VHOST_USER_ADD_MEM_REG, 0, &r, sizeof(r), &fe->memfd, 1);
}

static void hostile_mem_reg_no_fd(TestFE *fe)
{
    VhostUserMemRegMsg r = fe_half(fe, 0);

    fe_slots_only(fe);
    fe_send(fe, VHOST_USER_ADD_MEM_REG, 0, &r, sizeof(r), NULL, 0);
}

/* One region of the memfd, which the case then spoils. */
static void hostile_mem(TestFE *fe, VhostUserMemory *m, unsigned int n,
                        const int *fds, int nfds)
{
    fe_send(fe, VHOST_USER_SET_MEM_TABLE, 0, m,
            offsetof(VhostUserMemory, regions) + n * sizeof(m->regions[0]),
            fds, nfds);
}

static void hostile_mem_no_regions(TestFE *fe)
{
    VhostUserMemory m = good_mem(fe);

    m.nregions = 0;
    hostile_mem(fe, &m, 0, NULL, 0);
}

static void hostile_mem_nine_regions(TestFE *fe)
{
    VhostUserMemory m = good_mem(fe);
    int fds[8];

    for (int i = 0; i < 8; i++) {
        fds[i] = fe->memfd;
    }
    m.nregions = 9;
    hostile_mem(fe, &m, 8, fds, 8);
}

static void hostile_mem_fd_count(TestFE *fe)
{
    VhostUserMemory m = good_mem(fe);

    hostile_mem(fe, &m, 1, NULL, 0);
}

static void hostile_mem_past_file(TestFE *fe)
{
    VhostUserMemory m = good_mem(fe);

    m.regions[0].mmap_offset = 4096;
    hostile_mem(fe, &m, 1, &fe->memfd, 1);
}

static void hostile_mem_wraps(TestFE *fe)
{
    VhostUserMemory m = good_mem(fe);

    m.regions[0].guest_phys_addr = UINT64_MAX - 4095;
    hostile_mem(fe, &m, 1, &fe->memfd, 1);
}

static void hostile_mem_overlap(TestFE *fe)
{
    VhostUserMemory m = good_mem(fe);
    int fds[2] = { fe->memfd, fe->memfd };

    m.nregions = 2;
    m.regions[0].memory_size = MiB;
    m.regions[1] = m.regions[0];
    m.regions[1].userspace_addr += MiB;
    m.regions[1].mmap_offset = MiB;
    m.regions[1].guest_phys_addr += MiB / 2;
    hostile_mem(fe, &m, 2, fds, 2);
}

static void hostile_mem_pipe(TestFE *fe)
{
    VhostUserMemory m = good_mem(fe);
    int p[2];

    g_assert_cmpint(pipe(p), ==, 0);
    hostile_mem(fe, &m, 1, p, 1);
    close(p[0]);
    close(p[1]);
}

static void hostile_mem_size_mismatch(TestFE *fe)
{
    VhostUserMemory m = good_mem(fe);

    fe_send(fe, VHOST_USER_SET_MEM_TABLE, 0, &m, sizeof(m), &fe->memfd, 1);
}

static void hostile_vring_num_not_pow2(TestFE *fe)
{
    fe_send(fe, VHOST_USER_SET_VRING_NUM, 0,
            &(VhostUserVringState){ .index = 0, .num = 100 },
            sizeof(VhostUserVringState), NULL, 0);
}

static void hostile_vring_num_too_big(TestFE *fe)
{
    fe_send(fe, VHOST_USER_SET_VRING_NUM, 0,
            &(VhostUserVringState){ .index = 0, .num = 2048 },
            sizeof(VhostUserVringState), NULL, 0);
}

static void hostile_vring_base(TestFE *fe)
{
    fe_send(fe, VHOST_USER_SET_VRING_BASE, 0,
            &(VhostUserVringState){ .index = 0, .num = 65536 },
            sizeof(VhostUserVringState), NULL, 0);
}

static void hostile_vring_index(TestFE *fe)
{
    fe_send(fe, VHOST_USER_GET_VRING_BASE, 0,
            &(VhostUserVringState){ .index = 7 },
            sizeof(VhostUserVringState), NULL, 0);
}

static void hostile_vring_enable(TestFE *fe)
{
    fe_send(fe, VHOST_USER_SET_VRING_ENABLE, 0,
            &(VhostUserVringState){ .index = 0, .num = 2 },
            sizeof(VhostUserVringState), NULL, 0);
}

static void hostile_vring_addr_align(TestFE *fe)
{
    VhostUserVringAddr a = {
        .desc_user_addr = fe_uva(fe, 8),
        .avail_user_addr = fe_uva(fe, AVAIL_OFF(0)),
        .used_user_addr = fe_uva(fe, USED_OFF(0)),
    };

    fe_send(fe, VHOST_USER_SET_VRING_ADDR, 0, &a, sizeof(a), NULL, 0);
}

static void hostile_vring_addr_flags(TestFE *fe)
{
    VhostUserVringAddr a = {
        .flags = 2,
        .desc_user_addr = fe_uva(fe, DESC_OFF(0)),
        .avail_user_addr = fe_uva(fe, AVAIL_OFF(0)),
        .used_user_addr = fe_uva(fe, USED_OFF(0)),
    };

    fe_send(fe, VHOST_USER_SET_VRING_ADDR, 0, &a, sizeof(a), NULL, 0);
}

/* Rings outside guest memory: refused when the ring starts. */
static void hostile_rings_outside(TestFE *fe)
{
    VhostUserVringAddr a = {
        .desc_user_addr = fe_uva(fe, MEM_SIZE - 1024),
        .avail_user_addr = fe_uva(fe, AVAIL_OFF(0)),
        .used_user_addr = fe_uva(fe, USED_OFF(0)),
    };
    uint64_t v = 0;

    fe_negotiate(fe, 0);
    g_assert_cmpuint(fe_set_state(fe, VHOST_USER_SET_VRING_NUM, 0, 128), ==,
                     0);
    g_assert_cmpuint(fe_set(fe, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a),
                            NULL, 0), ==, 0);
    fe_send(fe, VHOST_USER_SET_VRING_KICK, 0, &v, sizeof(v), &fe->kick[0], 1);
}

static void hostile_kick_before_num(TestFE *fe)
{
    uint64_t v = 0;

    fe_negotiate(fe, 0);
    fe_send(fe, VHOST_USER_SET_VRING_KICK, 0, &v, sizeof(v), &fe->kick[0], 1);
}

static void hostile_kick_nofd(TestFE *fe)
{
    uint64_t v = VHOST_USER_VRING_NOFD_MASK;

    fe_send(fe, VHOST_USER_SET_VRING_KICK, 0, &v, sizeof(v), NULL, 0);
}

static void hostile_kick_reserved_bits(TestFE *fe)
{
    uint64_t v = 1u << 9;

    fe_send(fe, VHOST_USER_SET_VRING_KICK, 0, &v, sizeof(v), &fe->kick[0], 1);
}

static void hostile_kick_regular_file(TestFE *fe)
{
    uint64_t v = 0;

    fe_negotiate(fe, 0);
    g_assert_cmpuint(fe_set_state(fe, VHOST_USER_SET_VRING_NUM, 0, 128), ==,
                     0);
    fe_send(fe, VHOST_USER_SET_VRING_KICK, 0, &v, sizeof(v), &fe->memfd, 1);
}

/* A pipe whose writer is gone reads end-of-file forever. */
static void hostile_kick_eof(TestFE *fe)
{
    VhostUserVringAddr a = {
        .desc_user_addr = fe_uva(fe, DESC_OFF(0)),
        .avail_user_addr = fe_uva(fe, AVAIL_OFF(0)),
        .used_user_addr = fe_uva(fe, USED_OFF(0)),
    };
    uint64_t v = 0;
    int p[2];

    fe_negotiate(fe, 0);
    g_assert_cmpuint(fe_set_state(fe, VHOST_USER_SET_VRING_NUM, 0, 128), ==,
                     0);
    g_assert_cmpuint(fe_set(fe, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a),
                            NULL, 0), ==, 0);
    g_assert_cmpint(pipe(p), ==, 0);
    close(p[1]);
    fe_send(fe, VHOST_USER_SET_VRING_KICK, 0, &v, sizeof(v), &p[0], 1);
    close(p[0]);
}

static void hostile_running_ring_moves(TestFE *fe)
{
    VhostUserVringAddr a = {
        .desc_user_addr = fe_uva(fe, DESC_OFF(1)),
        .avail_user_addr = fe_uva(fe, AVAIL_OFF(0)),
        .used_user_addr = fe_uva(fe, USED_OFF(0)),
    };

    fe->nq = 1;
    fe_negotiate(fe, 0);
    fe_setup_vring(fe, 0, 0);
    fe_send(fe, VHOST_USER_SET_VRING_ADDR, 0, &a, sizeof(a), NULL, 0);
}

/* A dirty log file of @size bytes. */
static int log_memfd(size_t size)
{
    int fd = memfd_create("test-vhost-log", MFD_CLOEXEC);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    return fd;
}

static void fe_send_log_base(TestFE *fe, uint64_t offset, uint64_t size,
                             int fd)
{
    VhostUserLog l = { .mmap_size = size, .mmap_offset = offset };

    fe_send(fe, VHOST_USER_SET_LOG_BASE, 0, &l, sizeof(l), &fd, fd >= 0);
}

static void hostile_log_without_shmfd(TestFE *fe)
{
    int fd = log_memfd(8192);

    fe_send_log_base(fe, 0, 8192, fd);
    close(fd);
}

static void hostile_log_no_fd(TestFE *fe)
{
    fe_negotiate(fe, 0);
    fe_send_log_base(fe, 0, 8192, -1);
}

static void hostile_log_empty(TestFE *fe)
{
    int fd = log_memfd(8192);

    fe_negotiate(fe, 0);
    fe_send_log_base(fe, 0, 0, fd);
    close(fd);
}

static void hostile_log_past_file(TestFE *fe)
{
    int fd = log_memfd(8192);

    fe_negotiate(fe, 0);
    fe_send_log_base(fe, 4096, 8192, fd);
    close(fd);
}

static void hostile_log_wraps(TestFE *fe)
{
    int fd = log_memfd(8192);

    fe_negotiate(fe, 0);
    fe_send_log_base(fe, UINT64_MAX - 4095, 8192, fd);
    close(fd);
}

static void hostile_log_pipe(TestFE *fe)
{
    int p[2];

    g_assert_cmpint(pipe(p), ==, 0);
    fe_negotiate(fe, 0);
    fe_send_log_base(fe, 0, 8192, p[0]);
    close(p[0]);
    close(p[1]);
}

static void hostile_running_ring_num(TestFE *fe)
{
    fe->nq = 1;
    fe_negotiate(fe, 0);
    fe_setup_vring(fe, 0, 0);
    fe_send(fe, VHOST_USER_SET_VRING_NUM, 0,
            &(VhostUserVringState){ .index = 0, .num = 64 },
            sizeof(VhostUserVringState), NULL, 0);
}

static void hostile_config_range(TestFE *fe)
{
    VhostUserConfig c = { .offset = 250, .size = 8 };

    fe_send(fe, VHOST_USER_GET_CONFIG, 0, &c, VHOST_USER_CONFIG_HDR_SIZE + 8,
            NULL, 0);
}

static void hostile_config_size(TestFE *fe)
{
    VhostUserConfig c = { .offset = 0, .size = 60 };

    fe_send(fe, VHOST_USER_GET_CONFIG, 0, &c, VHOST_USER_CONFIG_HDR_SIZE + 8,
            NULL, 0);
}

static void hostile_config_flags(TestFE *fe)
{
    VhostUserConfig c = { .offset = 32, .size = 1, .flags = 7 };

    fe_send(fe, VHOST_USER_SET_CONFIG, 0, &c, VHOST_USER_CONFIG_HDR_SIZE + 1,
            NULL, 0);
}

static const struct {
    const char *name;
    HostileFn *fn;
    /*
     * What the export logs, which shows that the check the case is named
     * for fired (and not an earlier one); NULL: nothing at all.
     */
    const char *reason;
} hostile_cases[] = {
    { "version", hostile_version,
      "request 1 has flags 0x2 (version 1 without REPLY expected)" },
    { "reply-flag", hostile_reply_flag,
      "request 1 has flags 0x5 (version 1 without REPLY expected)" },
    { "huge-payload", hostile_huge_payload,
      "request 2 has a payload of 1073741824 bytes, more than" },
    { "short-u64", hostile_short_u64,
      "VHOST_USER_SET_FEATURES with a payload of 4 bytes, not 8" },
    { "unoffered-feature", hostile_unoffered_feature,
      "VHOST_USER_SET_FEATURES: features 0x8000000000000000 were not offered" },
    { "unoffered-protocol-feature", hostile_unoffered_protocol_feature,
      "VHOST_USER_SET_PROTOCOL_FEATURES: protocol features 0x100 were "
      "not offered" },
    { "unknown-request", hostile_unknown_request,
      "request 200 is not supported" },
    { "unsupported-request", hostile_unsupported_request,
      "request 7 is not supported" },
    { "fds-on-get-features", hostile_fds_on_get_features,
      "VHOST_USER_GET_FEATURES came with file descriptors (1)" },
    { "too-many-fds", hostile_too_many_fds,
      "a message came with more than the 8 file descriptors" },
    /* a message cut short by a hang-up is not an error: nothing */
    { "truncated", hostile_truncated, NULL },
    { "mem-no-regions", hostile_mem_no_regions,
      "VHOST_USER_SET_MEM_TABLE: 0 memory regions, not 1 to 8" },
    { "mem-nine-regions", hostile_mem_nine_regions,
      "VHOST_USER_SET_MEM_TABLE: 9 memory regions, not 1 to 8" },
    { "mem-fd-count", hostile_mem_fd_count,
      "1 memory regions came with 0 file descriptors" },
    { "mem-past-file", hostile_mem_past_file,
      "memory region 0: bytes 0x1000+0x400000 are past the end of "
      "its 4194304-byte file" },
    { "mem-wraps", hostile_mem_wraps, "wraps around" },
    { "mem-overlap", hostile_mem_overlap, "memory regions 0 and 1 overlap" },
    { "mem-reg-overlap", hostile_mem_reg_overlap,
      "VHOST_USER_ADD_MEM_REG: memory regions 0 and 1 overlap" },
    { "mem-reg-too-many", hostile_mem_reg_too_many,
      "VHOST_USER_ADD_MEM_REG: all 32 memory slots are in use" },
    { "mem-reg-unknown", hostile_mem_reg_unknown,
      "VHOST_USER_REM_MEM_REG: no memory region at guest 0x40200000" },
    { "mem-reg-not-negotiated", hostile_mem_reg_not_negotiated,
      "VHOST_USER_ADD_MEM_REG: the front-end did not negotiate "
      "CONFIGURE_MEM_SLOTS" },
    { "mem-reg-no-fd", hostile_mem_reg_no_fd,
      "VHOST_USER_ADD_MEM_REG: 0 file descriptors, expected 1" },
    { "mem-pipe", hostile_mem_pipe,
      "memory region 0: the file descriptor is not a regular file" },
    { "mem-size-mismatch", hostile_mem_size_mismatch,
      "VHOST_USER_SET_MEM_TABLE: payload of 264 bytes for 1 regions" },
    { "vring-num-not-pow2", hostile_vring_num_not_pow2,
      "vring 0: size 100 is not a power of 2" },
    { "vring-num-too-big", hostile_vring_num_too_big,
      "vring 0: size 2048 is not a power of 2" },
    { "vring-base", hostile_vring_base,
      "vring 0: base 65536 is not a 16-bit index" },
    { "vring-index", hostile_vring_index,
      "vring index 7 is out of range (1 vrings)" },
    { "vring-enable", hostile_vring_enable,
      "vring 0: enable value 2, not 0 or 1" },
    { "vring-addr-align", hostile_vring_addr_align,
      "are not aligned as virtio requires" },
    { "vring-addr-flags", hostile_vring_addr_flags,
      "vring 0: flags 0x2 are unknown" },
    { "running-ring-moves", hostile_running_ring_moves,
      "VHOST_USER_SET_VRING_ADDR: vring 0 is running: its rings cannot "
      "move" },
    { "log-without-shmfd", hostile_log_without_shmfd,
      "VHOST_USER_SET_LOG_BASE: without LOG_SHMFD negotiated" },
    { "log-no-fd", hostile_log_no_fd,
      "VHOST_USER_SET_LOG_BASE: 0 file descriptors, expected 1" },
    { "log-empty", hostile_log_empty,
      "VHOST_USER_SET_LOG_BASE: the log is empty" },
    { "log-past-file", hostile_log_past_file,
      "the dirty log: bytes 0x1000+0x2000 are past the end of its "
      "8192-byte file" },
    { "log-wraps", hostile_log_wraps, "the dirty log: bytes "
      "0xfffffffffffff000+0x2000 wrap around" },
    { "log-pipe", hostile_log_pipe, "the dirty log: the file descriptor is "
      "not a regular file" },
    { "rings-outside", hostile_rings_outside,
      "(128 entries) are not within guest memory" },
    { "kick-before-num", hostile_kick_before_num,
      "vring 0: kick file descriptor before its size" },
    { "kick-nofd", hostile_kick_nofd,
      "no kick file descriptor (polling the rings is not supported)" },
    { "kick-reserved-bits", hostile_kick_reserved_bits,
      "payload 0x200 sets reserved bits" },
    { "kick-regular-file", hostile_kick_regular_file,
      "the kick file descriptor cannot be polled (not an eventfd)" },
    { "kick-eof", hostile_kick_eof,
      "reading its kick file descriptor failed: end of file" },
    { "running-ring-num", hostile_running_ring_num,
      "VHOST_USER_SET_VRING_NUM: vring 0 is running" },
    { "config-range", hostile_config_range,
      "config range 250+8 is beyond the 256 bytes of config space" },
    { "config-size", hostile_config_size,
      "payload of 20 bytes for 60 bytes of config" },
    { "config-flags", hostile_config_flags, "config flags 0x7 are unknown" },
};

/*
 * Each malformed message ends its connection, and the export goes on:
 * the next front-end negotiates and does I/O.
 */
/* ---- inflight tracking (vhost-user-inflight.c) ---- */

/* The specification's layout, as a front-end sees the buffer. */
typedef struct TestInflightDesc {
    uint8_t inflight;
    uint8_t padding[5];
    uint16_t next;
    uint64_t counter;
} TestInflightDesc;

typedef struct TestInflightQueue {
    uint64_t features;
    uint16_t version;
    uint16_t desc_num;
    uint16_t last_batch_head;
    uint16_t used_idx;
    TestInflightDesc desc[QUEUE_SIZE];
} TestInflightQueue;

/* GET_INFLIGHT_FD for one queue; returns the buffer's fd, its size. */
static int fe_get_inflight(TestFE *fe, uint64_t *size)
{
    VhostUserInflight in = { .num_queues = 1, .queue_size = QUEUE_SIZE };
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

    fe_send(fe, VHOST_USER_GET_INFLIGHT_FD, 0, &in, sizeof(in), NULL, 0);
    poll_until_readable(fe->fd);
    /* the descriptor comes with the header's first byte */
    g_assert_cmpint(recvmsg(fe->fd, &msg, MSG_WAITALL), ==, sizeof(hdr));
    g_assert_cmpuint(hdr.request, ==, VHOST_USER_GET_INFLIGHT_FD);
    g_assert_cmpuint(hdr.size, ==, sizeof(in));
    c = CMSG_FIRSTHDR(&msg);
    g_assert_nonnull(c);
    g_assert_cmpint(c->cmsg_type, ==, SCM_RIGHTS);
    memcpy(&fd, CMSG_DATA(c), sizeof(fd));
    read_full(fe->fd, &in, sizeof(in));
    g_assert_cmpuint(in.num_queues, ==, 1);
    g_assert_cmpuint(in.queue_size, ==, QUEUE_SIZE);
    g_assert_cmpuint(in.mmap_offset, ==, 0);
    g_assert_cmpuint(in.mmap_size, >=, sizeof(TestInflightQueue));
    *size = in.mmap_size;
    return fd;
}

static uint64_t fe_set_inflight(TestFE *fe, int fd, uint64_t size)
{
    VhostUserInflight in = {
        .mmap_size = size, .num_queues = 1, .queue_size = QUEUE_SIZE,
    };

    return fe_set(fe, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &fd, 1);
}

/* Holds the next write at blkdebug's break point @tag. */
static void fe_write_held(TestFE *fe, unsigned int slot, uint64_t sector,
                          uint8_t pattern, const char *tag)
{
    g_assert_cmpint(bdrv_debug_breakpoint(blk_bs(blk), "pwritev", tag), ==,
                    0);
    memset(fe_slot_data(fe, slot), pattern, 512);
    fe_make_available(fe, 0, fe_blk_req(fe, 0, slot, VIRTIO_BLK_T_OUT,
                                        sector, 512, false));
    fe_kick(fe, 0);
    while (!bdrv_debug_is_suspended(blk_bs(blk), tag)) {
        aio_poll(ctx, true);
    }
}

static uint8_t sector_byte(uint64_t sector)
{
    uint8_t buf[512];

    g_assert_cmpint(blk_pread(blk, sector * 512, 512, buf, 0), ==, 0);
    return buf[0];
}

/*
 * Invariant 15: a back-end that dies with requests in flight leaves them
 * in the buffer, and one that takes its place over the same buffer and
 * guest memory runs them again, and only them.  The death is staged:
 * the buffer and guest memory are copied while two writes are held at
 * break points and a third has just been pushed, and the copy of the
 * buffer is set as if the process died between that push's used idx and
 * clearing its entry.  The new connection gets the copies, as QEMU's
 * reconnect would, with the held writes' data changed, so that running
 * them again shows.
 */
static void test_inflight_resubmit(void)
{
    TestFE *fe;
    TestInflightQueue *r, dead;
    uint8_t *mem_at_death;
    uint64_t size;
    int fd;

    export_blkdebug = true;
    start_export(true, true, 1, 512);
    fe = fe_connect();
    fe_negotiate(fe, 0);
    fd = fe_get_inflight(fe, &size);
    r = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    g_assert_true(r != MAP_FAILED);
    g_assert_cmpuint(r->version, ==, 0);
    fe_setup_vring(fe, 0, 0);
    g_assert_cmpuint(r->version, ==, 1);
    g_assert_cmpuint(r->desc_num, ==, QUEUE_SIZE);

    /* two writes done: nothing in flight, used_idx follows the ring */
    g_assert_cmpuint(fe_write(fe, 0, 1, 512, 0x11), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(fe_write(fe, 0, 2, 512, 0x22), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(r->used_idx, ==, 2);
    g_assert_cmpuint(r->desc[0].inflight, ==, 0);
    g_assert_cmpuint(r->desc[0].counter, ==, 1);
    g_assert_cmpuint(r->last_batch_head, ==, 0);

    /* A (head 3) and B (head 6) held, in flight; C (head 9) done */
    fe_write_held(fe, 1, 10, 0xa1, "held-a");
    fe_write_held(fe, 2, 11, 0xb1, "held-b");
    g_assert_cmpuint(r->desc[3].inflight, ==, 1);
    g_assert_cmpuint(r->desc[6].inflight, ==, 1);
    g_assert_cmpuint(r->desc[3].counter, <, r->desc[6].counter);
    memset(fe_slot_data(fe, 3), 0xc1, 512);
    g_assert_cmpuint(fe_do_req(fe, 0, 3, VIRTIO_BLK_T_OUT, 12, 512, false),
                     ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(r->used_idx, ==, 3);
    g_assert_cmpuint(r->desc[9].inflight, ==, 0);

    /* the death: C's push published, its entry not cleared yet */
    dead = *r;
    dead.desc[9].inflight = 1;
    dead.last_batch_head = 9;
    dead.used_idx = 2;
    mem_at_death = g_memdup2(fe->mem, MEM_SIZE);
    g_assert_cmpint(bdrv_debug_resume(blk_bs(blk), "held-a"), ==, 0);
    g_assert_cmpint(bdrv_debug_resume(blk_bs(blk), "held-b"), ==, 0);
    fe_wait_used(fe, 0, 2);
    fe_close(fe);

    /* the new back-end's connection, over what the dead one left */
    *r = dead;
    fe = fe_connect();
    memcpy(fe->mem, mem_at_death, MEM_SIZE);
    memset(fe_slot_data(fe, 1), 0xa2, 512);
    memset(fe_slot_data(fe, 2), 0xb2, 512);
    memset(fe_slot_data(fe, 3), 0xc2, 512);
    fe->avail_idx[0] = 5;
    fe->used_idx[0] = 3;
    fe_negotiate(fe, 0);
    g_assert_cmpuint(fe_set_inflight(fe, fd, size), ==, 0);
    /* QEMU resumes at the used idx: it could not ask the dead back-end */
    fe_resume_vring(fe, 0, 3);
    fe_wait_used(fe, 0, 2);
    g_assert_cmpuint(sector_byte(10), ==, 0xa2);
    g_assert_cmpuint(sector_byte(11), ==, 0xb2);
    /* C completed before the death: not run again */
    g_assert_cmpuint(sector_byte(12), ==, 0xc1);
    g_assert_cmpuint(fe_slot_status(fe, 1), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(fe_slot_status(fe, 2), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(r->used_idx, ==, 5);
    for (int i = 0; i < QUEUE_SIZE; i++) {
        g_assert_cmpuint(r->desc[i].inflight, ==, 0);
    }
    /* the ring goes on after the resubmitted requests, at avail 5 */
    g_assert_cmpuint(fe_write(fe, 0, 13, 512, 0x33), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(sector_byte(13), ==, 0x33);
    g_assert_cmpuint(r->used_idx, ==, 6);
    fe_close(fe);
    g_free(mem_at_death);
    munmap(r, size);
    close(fd);
    stop_export();
}

/*
 * Invariant 16: a buffer whose region names a descriptor past the ring
 * ends the connection with a message; a buffer too small for its queues
 * is refused.
 */
static void test_inflight_hostile(void)
{
    TestFE *fe;
    TestInflightQueue *r;
    uint64_t size;
    char *log;
    int fd;

    start_export(true, true, 1, 512);
    fe = fe_connect();
    fe_negotiate(fe, 0);
    fd = fe_get_inflight(fe, &size);
    stderr_capture_begin();
    fe_send(fe, VHOST_USER_SET_INFLIGHT_FD, 0,
            &(VhostUserInflight) { .mmap_size = 64, .num_queues = 1,
                                   .queue_size = QUEUE_SIZE },
            sizeof(VhostUserInflight), &fd, 1);
    fe_expect_closed(fe);
    fe_close(fe);
    log = stderr_capture_end();
    g_assert_nonnull(strstr(log, "a buffer of 64 bytes"));
    g_free(log);

    r = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    g_assert_true(r != MAP_FAILED);
    r->version = 1;
    r->desc_num = QUEUE_SIZE;
    queue_size = 64;
    r->desc[100].inflight = 1;
    fe = fe_connect();
    fe_negotiate(fe, 0);
    g_assert_cmpuint(fe_set_inflight(fe, fd, size), ==, 0);
    stderr_capture_begin();
    g_assert_cmpuint(fe_set_state(fe, VHOST_USER_SET_VRING_NUM, 0, 64), ==,
                     0);
    g_assert_cmpuint(fe_set(fe, VHOST_USER_SET_VRING_ADDR,
                            &(VhostUserVringAddr) {
                                .desc_user_addr = fe_uva(fe, DESC_OFF(0)),
                                .avail_user_addr = fe_uva(fe, AVAIL_OFF(0)),
                                .used_user_addr = fe_uva(fe, USED_OFF(0)),
                            }, sizeof(VhostUserVringAddr), NULL, 0), ==, 0);
    fe_send(fe, VHOST_USER_SET_VRING_KICK, 0, &(uint64_t){ 0 }, 8,
            &fe->kick[0], 1);
    fe_expect_closed(fe);
    fe_close(fe);
    log = stderr_capture_end();
    queue_size = QUEUE_SIZE;
    g_assert_nonnull(strstr(log, "inflight region names descriptor 100 "
                                 "of 64"));
    g_free(log);
    munmap(r, size);
    close(fd);
    stop_export();
}

/*
 * CONFIGURE_MEM_SLOTS: memory given region by region (ADD_MEM_REG), a
 * request whose buffers lie in the second one, the second removed
 * (REM_MEM_REG) while the rings in the first go on, and added again.
 */
static void test_mem_slots(void)
{
    TestFE *fe;
    uint8_t buf[512];

    start_export(true, true, 1, 512);
    fe_mem_by_slots = true;
    fe = fe_start(1, 0);
    fe_mem_by_slots = false;
    g_assert_cmpuint(fe_write(fe, 0, 0, 512, 0x61), ==, VIRTIO_BLK_S_OK);
    /* slot 30's header and data are in the second half */
    g_assert_cmpuint(SLOT_OFF(30), >, MEM_SIZE / 2);
    memset(fe_slot_data(fe, 30), 0x62, 512);
    g_assert_cmpuint(fe_do_req(fe, 0, 30, VIRTIO_BLK_T_OUT, 1, 512, false),
                     ==, VIRTIO_BLK_S_OK);
    g_assert_cmpint(blk_pread(blk, 512, 512, buf, 0), ==, 0);
    g_assert_cmphex(buf[0], ==, 0x62);

    g_assert_cmpuint(fe_mem_reg(fe, VHOST_USER_REM_MEM_REG, 1), ==, 0);
    g_assert_cmpuint(fe_write(fe, 0, 2, 512, 0x63), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(fe_mem_reg(fe, VHOST_USER_ADD_MEM_REG, 1), ==, 0);
    memset(fe_slot_data(fe, 30), 0x64, 512);
    g_assert_cmpuint(fe_do_req(fe, 0, 30, VIRTIO_BLK_T_OUT, 3, 512, false),
                     ==, VIRTIO_BLK_S_OK);
    g_assert_cmpint(blk_pread(blk, 3 * 512, 512, buf, 0), ==, 0);
    g_assert_cmphex(buf[0], ==, 0x64);
    fe_close(fe);
    stop_export();
}

/* Removing the region that holds a running ring ends the connection. */
static void test_mem_slots_remove_rings(void)
{
    TestFE *fe;
    char *log;

    start_export(true, true, 1, 512);
    fe_mem_by_slots = true;
    fe = fe_start(1, 0);
    fe_mem_by_slots = false;
    stderr_capture_begin();
    fe_send(fe, VHOST_USER_REM_MEM_REG, 0,
            &(VhostUserMemRegMsg) { .region = fe_half(fe, 0).region },
            sizeof(VhostUserMemRegMsg), &fe->memfd, 1);
    fe_expect_closed(fe);
    fe_close(fe);
    log = stderr_capture_end();
    g_assert_nonnull(strstr(log, "are not within guest memory"));
    g_free(log);
    stop_export();
}

static void test_hostile(void)
{
    start_export(true, true, 1, 512);
    for (size_t i = 0; i < ARRAY_SIZE(hostile_cases); i++) {
        TestFE *fe = fe_connect();
        char *log;

        if (g_test_verbose()) {
            g_test_message("hostile case %s", hostile_cases[i].name);
        }
        stderr_capture_begin();
        hostile_cases[i].fn(fe);
        fe_expect_closed(fe);
        fe_close(fe);
        log = stderr_capture_end();
        if (hostile_cases[i].reason) {
            if (!strstr(log, hostile_cases[i].reason)) {
                g_test_message("hostile case %s logged: %s",
                               hostile_cases[i].name, log);
            }
            g_assert_nonnull(strstr(log, hostile_cases[i].reason));
        } else {
            g_assert_cmpstr(log, ==, "");
        }
        g_free(log);
        g_assert_false(vhost_user_blk_export_has_client(exp));
    }
    g_assert_cmpint(disconnects, ==, ARRAY_SIZE(hostile_cases));
    {
        TestFE *fe = fe_start(1, 0);

        g_assert_cmpuint(fe_write(fe, 0, 0, 512, 0x5a), ==,
                         VIRTIO_BLK_S_OK);
        fe_close(fe);
    }
    stop_export();
}

/*
 * Issue 14, finding 3: a front-end shrinks its guest memory file after
 * SET_MEM_TABLE.  Memory that can be sealed is sealed against it; memory
 * that cannot ends the connection with SIGBUS named as the reason, and
 * the process (every export, the monitor) lives on.
 */
static void test_memory_shrinks(void)
{
    g_autofree char *log = NULL;
    TestFE *fe;
    uint16_t head;

    start_export(true, true, 1, 512);
    fe_memfd_flags = MFD_ALLOW_SEALING;
    fe = fe_start(1, 0);
    fe_memfd_flags = 0;
    g_assert_cmpint(fcntl(fe->memfd, F_GET_SEALS) & F_SEAL_SHRINK, !=, 0);
    g_assert_cmpint(ftruncate(fe->memfd, MEM_SIZE / 2), ==, -1);
    g_assert_cmpint(errno, ==, EPERM);
    g_assert_cmpuint(fe_write(fe, 0, 0, 512, 0x11), ==, VIRTIO_BLK_S_OK);
    fe_close(fe);

    /* a request made available, the memory shrunk under it, a kick */
    fe = fe_start(1, 0);
    g_assert_cmpuint(fe_write(fe, 0, 0, 512, 0x22), ==, VIRTIO_BLK_S_OK);
    memset(fe_slot_data(fe, 0), 0x33, 512);
    head = fe_blk_req(fe, 0, 0, VIRTIO_BLK_T_OUT, 8, 512, false);
    fe_make_available(fe, 0, head);
    g_assert_cmpint(ftruncate(fe->memfd, 0), ==, 0);
    stderr_capture_begin();
    fe_kick(fe, 0);
    fe_expect_closed(fe);
    log = stderr_capture_end();
    g_assert_nonnull(strstr(log, "memory region 0: SIGBUS at offset 0x"));
    g_assert_nonnull(strstr(log, "the front-end shrank the file behind "
                             "guest memory"));
    fe_close(fe);

    fe = fe_start(1, 0);
    g_assert_cmpuint(fe_write(fe, 0, 0, 512, 0x44), ==, VIRTIO_BLK_S_OK);
    fe_close(fe);
    stop_export();
}

/* ---- dirty logging (vhost-user-log.c) ---- */

/* A log that covers all of guest memory, as QEMU sizes it. */
#define LOG_SIZE ((GPA_BASE + MEM_SIZE) / VHOST_LOG_PAGE / 8)

static unsigned int log_marked(const uint8_t *log, size_t size)
{
    unsigned int n = 0;

    for (size_t i = 0; i < size; i++) {
        n += __builtin_popcount(log[i]);
    }
    return n;
}

static bool log_page_marked(const uint8_t *log, uint64_t gpa)
{
    uint64_t page = gpa / VHOST_LOG_PAGE;

    return log[page / 8] & (1u << (page % 8));
}

static void fe_set_log_base(TestFE *fe, int fd, uint64_t size)
{
    uint64_t v = 1;

    fe_send_log_base(fe, 0, size, fd);
    /* the reply says the back-end logs into the new log */
    fe_recv(fe, VHOST_USER_SET_LOG_BASE, &v, sizeof(v));
    g_assert_cmpuint(v, ==, 0);
}

/* QEMU's SET_VRING_ADDR to a running ring, to start or stop its log. */
static void fe_log_used_ring(TestFE *fe, unsigned int q, bool on)
{
    VhostUserVringAddr a = {
        .index = q,
        .flags = on ? 1u << VHOST_VRING_F_LOG : 0,
        .desc_user_addr = fe_uva(fe, DESC_OFF(q)),
        .avail_user_addr = fe_uva(fe, AVAIL_OFF(q)),
        .used_user_addr = fe_uva(fe, USED_OFF(q)),
        .log_guest_addr = fe_gpa(fe, USED_OFF(q)),
    };

    g_assert_cmpuint(fe_set(fe, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a),
                            NULL, 0), ==, 0);
}

/* A read of @len bytes into slot 1's data, which must succeed. */
static void fe_read_slot1(TestFE *fe, uint32_t len)
{
    g_assert_cmpuint(fe_do_req(fe, 0, 1, VIRTIO_BLK_T_IN, 0, len, true),
                     ==, VIRTIO_BLK_S_OK);
}

/*
 * What QEMU does to migrate a guest live: a log, VHOST_F_LOG_ALL, and
 * VHOST_VRING_F_LOG on each running ring.  Every page the export writes
 * is marked (a read's data, every status byte, the used ring), no page
 * it only reads, and nothing once logging stops.
 */
static void test_dirty_log(void)
{
    const uint64_t log_all = UINT64_C(1) << VHOST_F_LOG_ALL;
    int logfd = log_memfd(LOG_SIZE);
    uint8_t *log = mmap(NULL, LOG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                        logfd, 0);
    uint64_t read_data = GPA_BASE + SLOT_OFF(1) + SLOT_DATA;
    uint64_t used = GPA_BASE + USED_OFF(0);
    g_autofree char *err = NULL;
    TestFE *fe;
    uint64_t f;

    g_assert_true(log != MAP_FAILED);
    start_export(true, true, 1, 512);
    fe = fe_connect();
    fe->nq = 1;
    f = fe_negotiate(fe, log_all);
    fe_setup_vring(fe, 0, 0);
    g_assert_cmpuint(fe_write(fe, 0, 0, 8192, 0x5a), ==, VIRTIO_BLK_S_OK);

    /* a log, but VHOST_F_LOG_ALL is not set: nothing is marked */
    fe_set_log_base(fe, logfd, LOG_SIZE);
    fe_read_slot1(fe, 8192);
    g_assert_cmpuint(log_marked(log, LOG_SIZE), ==, 0);

    /* a read marks its two data pages, its status byte's, the used ring */
    g_assert_cmpuint(fe_set_u64(fe, VHOST_USER_SET_FEATURES, f | log_all),
                     ==, 0);
    fe_log_used_ring(fe, 0, true);
    memset(fe_slot_data(fe, 1), 0, 8192);
    fe_read_slot1(fe, 8192);
    g_assert_cmpuint(fe_slot_data(fe, 1)[8191], ==, 0x5a);
    g_assert_true(log_page_marked(log, read_data));
    g_assert_true(log_page_marked(log, read_data + 4096));
    g_assert_true(log_page_marked(log, GPA_BASE + SLOT_OFF(1) + 16));
    g_assert_true(log_page_marked(log, used));
    g_assert_cmpuint(log_marked(log, LOG_SIZE), ==, 4);

    /* a write: the device writes its status byte, not the data */
    memset(log, 0, LOG_SIZE);
    g_assert_cmpuint(fe_write(fe, 0, 0, 8192, 0x77), ==, VIRTIO_BLK_S_OK);
    g_assert_true(log_page_marked(log, GPA_BASE + SLOT_OFF(0) + 16));
    g_assert_true(log_page_marked(log, used));
    g_assert_cmpuint(log_marked(log, LOG_SIZE), ==, 2);

    /* a ring without VHOST_VRING_F_LOG: its data, not its used ring */
    fe_log_used_ring(fe, 0, false);
    memset(log, 0, LOG_SIZE);
    fe_read_slot1(fe, 8192);
    g_assert_false(log_page_marked(log, used));
    g_assert_cmpuint(log_marked(log, LOG_SIZE), ==, 3);

    /* the migration is over: VHOST_F_LOG_ALL cleared, nothing marked */
    g_assert_cmpuint(fe_set_u64(fe, VHOST_USER_SET_FEATURES, f), ==, 0);
    memset(log, 0, LOG_SIZE);
    fe_read_slot1(fe, 8192);
    g_assert_cmpuint(log_marked(log, LOG_SIZE), ==, 0);

    /*
     * A new, smaller log that does not reach guest memory: the request
     * completes, the log past its end is left alone, and the export says
     * once what a migration would miss.
     */
    g_assert_cmpuint(fe_set_u64(fe, VHOST_USER_SET_FEATURES, f | log_all),
                     ==, 0);
    fe_log_used_ring(fe, 0, true);
    fe_set_log_base(fe, logfd, 4096);
    memset(log, 0, LOG_SIZE);
    stderr_capture_begin();
    fe_read_slot1(fe, 8192);
    fe_read_slot1(fe, 8192);
    err = stderr_capture_end();
    g_assert_nonnull(strstr(err, "vring 0: the 4096-byte dirty log does not "
                                 "cover guest address 0x"));
    g_assert_null(strstr(strstr(err, "dirty log") + 1, "dirty log"));
    g_assert_cmpuint(log_marked(log, LOG_SIZE), ==, 0);
    fe_close(fe);
    stop_export();
    munmap(log, LOG_SIZE);
    close(logfd);
}

/*
 * A front-end shrinks its log file under a logging ring: a sealable one
 * was sealed; one that cannot be ends the connection with SIGBUS named,
 * and the export serves the next front-end.
 */
static void test_dirty_log_shrinks(void)
{
    const uint64_t log_all = UINT64_C(1) << VHOST_F_LOG_ALL;
    g_autofree char *err = NULL;
    TestFE *fe;
    int logfd;

    start_export(true, true, 1, 512);
    fe = fe_start(1, 0);
    logfd = memfd_create("test-vhost-log", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    g_assert_cmpint(ftruncate(logfd, LOG_SIZE), ==, 0);
    fe_set_log_base(fe, logfd, LOG_SIZE);
    g_assert_cmpint(ftruncate(logfd, 0), ==, -1);
    g_assert_cmpint(errno, ==, EPERM);
    close(logfd);
    fe_close(fe);

    fe = fe_start(1, 0);
    logfd = log_memfd(LOG_SIZE);
    fe_set_log_base(fe, logfd, LOG_SIZE);
    g_assert_cmpuint(fe_set_u64(fe, VHOST_USER_SET_FEATURES,
                                fe_get_u64(fe, VHOST_USER_GET_FEATURES) |
                                log_all), ==, 0);
    g_assert_cmpint(ftruncate(logfd, 0), ==, 0);
    stderr_capture_begin();
    fe_blk_req(fe, 0, 1, VIRTIO_BLK_T_IN, 0, 4096, true);
    fe_make_available(fe, 0, 3);
    fe_kick(fe, 0);
    fe_expect_closed(fe);
    err = stderr_capture_end();
    g_assert_nonnull(strstr(err, "the dirty log: SIGBUS at offset 0x"));
    close(logfd);
    fe_close(fe);

    fe = fe_start(1, 0);
    g_assert_cmpuint(fe_write(fe, 0, 0, 512, 0x44), ==, VIRTIO_BLK_S_OK);
    fe_close(fe);
    stop_export();
}

/* Freeing the export hangs up on the front-end and removes the socket. */
static void test_free_with_client(void)
{
    TestFE *fe;
    Error *err = NULL;
    VhostUserBlkExportConfig cfg = {
        .id = "bad", .path = sock_path, .writable = true,
        .num_queues = 1, .logical_block_size = 1000,
    };

    start_export(true, true, 1, 512);
    g_assert_null(vhost_user_blk_export_new(blk, &cfg, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "vhost-user-blk export 'bad': logical-block-size 1000 "
                    "is not a power of 2 from 512 to 65536");
    g_clear_pointer(&err, error_free);
    cfg.logical_block_size = 512;
    cfg.num_queues = 0;
    g_assert_null(vhost_user_blk_export_new(blk, &cfg, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "vhost-user-blk export 'bad': num-queues 0 is not from "
                    "1 to 256");
    g_clear_pointer(&err, error_free);

    fe = fe_start(1, 0);
    g_assert_cmpuint(fe_write(fe, 0, 0, 512, 0x01), ==, VIRTIO_BLK_S_OK);
    vhost_user_blk_export_free(exp);
    exp = NULL;
    fe_expect_closed(fe);
    g_assert_false(g_file_test(sock_path, G_FILE_TEST_EXISTS));
    close(fe->fd);
    munmap(fe->mem, MEM_SIZE);
    close(fe->memfd);
    for (int i = 0; i < MAX_QUEUES; i++) {
        close(fe->kick[i]);
        close(fe->call[i]);
        close(fe->err[i]);
    }
    g_free(fe);
    blk_unref(blk);
    blk = NULL;
}

static void shutdown_done(void *opaque)
{
    (*(int *)opaque)++;
}

/*
 * An asynchronous shutdown: no new front-end, the connected one is hung
 * up on, and the callback comes once its connection is cleaned up.
 */
static void test_shutdown(void)
{
    TestFE *fe;
    int done = 0;

    start_export(true, true, 1, 512);
    fe = fe_start(1, 0);
    g_assert_cmpuint(fe_write(fe, 0, 0, 512, 0x02), ==, VIRTIO_BLK_S_OK);
    vhost_user_blk_export_shutdown(exp, shutdown_done, &done);
    g_assert_false(g_file_test(sock_path, G_FILE_TEST_EXISTS));
    g_assert_cmpint(done, ==, 0);
    fe_expect_closed(fe);
    while (!done) {
        aio_poll(ctx, true);
    }
    g_assert_cmpint(disconnects, ==, 1);
    g_assert_false(vhost_user_blk_export_has_client(exp));
    fe_close(fe);
    stop_export();

    /* without a front-end, the callback still comes from the loop */
    start_export(true, true, 1, 512);
    vhost_user_blk_export_shutdown(exp, shutdown_done, &done);
    g_assert_cmpint(done, ==, 1);
    while (done == 1) {
        aio_poll(ctx, true);
    }
    stop_export();
}

/*
 * Chains the export's request slots do not hold (more pieces than
 * VU_SLOT_SG), a header in two pieces and a status byte that shares a
 * piece with data: the bytes reach the image and come back right.
 */
static void test_scattered_chains(void)
{
    const unsigned int npieces = 40;
    const size_t len = npieces * 512;
    uint8_t *data, *status;
    g_autofree uint8_t *buf = g_malloc(len);
    TestFE *fe;
    VRingUsedElem u;

    start_export(true, true, 1, 512);
    fe = fe_start(1, 0);
    data = fe->mem + SLOT_OFF(10) + SLOT_DATA;
    for (size_t i = 0; i < len; i++) {
        data[i] = i / 512 * 3 + i % 7;
    }
    fe->mem[SLOT_OFF(10) + 16] = 0xff;
    fe_make_available(fe, 0, fe_scattered_req(fe, 10, 40, VIRTIO_BLK_T_OUT,
                                              16, npieces));
    fe_kick(fe, 0);
    u = fe_wait_used(fe, 0, 1);
    g_assert_cmpuint(u.id, ==, 40);
    g_assert_cmpuint(u.len, ==, 1);
    g_assert_cmpuint(fe->mem[SLOT_OFF(10) + 16], ==, VIRTIO_BLK_S_OK);
    g_assert_cmpint(blk_pread(blk, 16 * 512, len, buf, 0), ==, 0);
    g_assert_cmpmem(buf, len, data, len);

    /* read it back into slot 11: the status is byte 512 of the last piece */
    data = fe->mem + SLOT_OFF(11) + SLOT_DATA;
    memset(data, 0, len + 1);
    status = data + len;
    *status = 0xff;
    fe_make_available(fe, 0, fe_scattered_req(fe, 11, 40 + npieces + 3,
                                              VIRTIO_BLK_T_IN, 16, npieces));
    fe_kick(fe, 0);
    u = fe_wait_used(fe, 0, 1);
    g_assert_cmpuint(u.id, ==, 40 + npieces + 3);
    g_assert_cmpuint(u.len, ==, len + 1);
    g_assert_cmpuint(*status, ==, VIRTIO_BLK_S_OK);
    g_assert_cmpmem(data, len, buf, len);

    fe_close(fe);
    stop_export();
}

/*
 * The export's socket file is removed at shutdown only while it is the
 * export's: a newer server that replaced it keeps its own.
 */
static void test_socket_replaced(void)
{
    g_autoptr(SocketAddress) addr = socket_address_new_unix(sock_path);
    int newer;

    start_export(true, true, 1, 512);
    g_assert_cmpint(unlink(sock_path), ==, 0);
    newer = socket_listen(addr, 1, &error_abort);
    vhost_user_blk_export_free(exp);
    blk_unref(blk);
    exp = NULL;
    blk = NULL;
    g_assert_true(g_file_test(sock_path, G_FILE_TEST_EXISTS));
    close(newer);
    unlink(sock_path);
}

int main(int argc, char **argv)
{
    g_autofree char *dir = NULL;
    int ret;

    g_test_init(&argc, &argv, NULL);
    test_drivers_register();
    ctx = qemu_get_aio_context();
    dir = g_dir_make_tmp("test-vhost-user-blk-XXXXXX", NULL);
    g_assert_nonnull(dir);
    sock_path = g_build_filename(dir, "vub.sock", NULL);
    /* a hang is a failure: the loop blocks while waiting for the export */
    alarm(120);

    g_test_add_func("/vhost-user-blk/negotiation", test_negotiation);
    g_test_add_func("/vhost-user-blk/first-config-matches-cache",
                    test_first_config_matches_cache);
    g_test_add_func("/vhost-user-blk/io", test_io);
    g_test_add_func("/vhost-user-blk/scattered-chains",
                    test_scattered_chains);
    g_test_add_func("/vhost-user-blk/wce-toggle", test_wce_toggle);
    g_test_add_func("/vhost-user-blk/wce-not-negotiated",
                    test_wce_not_negotiated);
    g_test_add_func("/vhost-user-blk/multiqueue", test_multiqueue);
    g_test_add_func("/vhost-user-blk/vring-base-and-reconnect",
                    test_vring_base_and_reconnect);
    g_test_add_func("/vhost-user-blk/vring-base-waits",
                    test_vring_base_waits);
    g_test_add_func("/vhost-user-blk/memory-held", test_memory_held);
    g_test_add_func("/vhost-user-blk/read-only", test_read_only);
    g_test_add_func("/vhost-user-blk/broken-ring", test_broken_ring);
    g_test_add_func("/vhost-user-blk/deep-queue-bursts",
                    test_deep_queue_bursts);
    g_test_add_func("/vhost-user-blk/ring-overcommitted",
                    test_ring_overcommitted);
    g_test_add_func("/vhost-user-blk/hostile", test_hostile);
    g_test_add_func("/vhost-user-blk/mem-slots", test_mem_slots);
    g_test_add_func("/vhost-user-blk/mem-slots-remove-rings",
                    test_mem_slots_remove_rings);
    g_test_add_func("/vhost-user-blk/inflight-resubmit",
                    test_inflight_resubmit);
    g_test_add_func("/vhost-user-blk/inflight-hostile",
                    test_inflight_hostile);
    g_test_add_func("/vhost-user-blk/memory-shrinks", test_memory_shrinks);
    g_test_add_func("/vhost-user-blk/dirty-log", test_dirty_log);
    g_test_add_func("/vhost-user-blk/dirty-log-shrinks",
                    test_dirty_log_shrinks);
    g_test_add_func("/vhost-user-blk/free-with-client",
                    test_free_with_client);
    g_test_add_func("/vhost-user-blk/shutdown", test_shutdown);
    g_test_add_func("/vhost-user-blk/socket-replaced", test_socket_replaced);
    ret = g_test_run();
    rmdir(dir);
    g_free(sock_path);
    return ret;
}
