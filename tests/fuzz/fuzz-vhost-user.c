/*
 * fuzz-vhost-user: a hostile vhost-user front-end against the
 * vhost-user-blk export: its messages (with the file descriptors they
 * carry) and the guest memory that holds its vrings and requests.  The
 * export serves a 1 MiB in-memory node with two queues on a unix socket
 * in a private directory; each input is one connection, closed at the
 * end, after which the export must be ready for the next front-end.
 *
 * The input is a script of steps, each chosen by one byte:
 *  0  message: request (1 byte), flags (1 byte, version bits included),
 *     payload length (1 byte) and payload; SET_MEM_TABLE, ADD_MEM_REG,
 *     SET_LOG_BASE and SET_INFLIGHT_FD carry the guest memory's fd,
 *     SET_VRING_KICK/CALL/ERR the eventfd of the queue in the payload's
 *     low bits;
 *  1  set-up: what QEMU sends to start the device (features, protocol
 *     features with dirty logging, inflight tracking and memory slots,
 *     owner, memory
 *     table, the inflight buffer at FUZZ_VU_INFLIGHT of guest memory, so
 *     that memory writes before the set-up fill what a "dead back-end"
 *     left there, queue 0 with the given size),
 *     so that the fuzzer reaches the rings without rediscovering it;
 *  2  guest memory write: offset (2 bytes), length (1 byte), bytes;
 *  3  kick: the queue (1 byte).
 * The event loop runs after each step.  Guest memory is a sealed memfd of
 * FUZZ_VU_MEM_SIZE bytes at guest physical address 0; the set-up maps it
 * at the user address FUZZ_VU_UVA (any value the front-end likes).
 */
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "fuzz-mem.h"

#include "block/block_int.h"
#include "block/vhost-user-blk.h"
#include "block/vhost-user-proto.h"
#include "util/aio.h"

#define FUZZ_VU_MEM_SIZE    (64 * 1024)
#define FUZZ_VU_UVA         UINT64_C(0x7f0000000000)
#define FUZZ_VU_QUEUES      2
/* queue 0 of the set-up: its rings, then request headers and data */
#define FUZZ_VU_DESC        0x0000
#define FUZZ_VU_AVAIL       0x1000
#define FUZZ_VU_USED        0x2000
/* the set-up's inflight buffer: guest memory too, so the script writes it */
#define FUZZ_VU_INFLIGHT    0x8000
/* how often the loop runs after a step before the harness moves on */
#define FUZZ_VU_POLLS       64

typedef struct FuzzVuFE {
    int fd;
    int memfd;
    uint8_t *mem;
    int kick[FUZZ_VU_QUEUES];
    int call[FUZZ_VU_QUEUES];
    int err[FUZZ_VU_QUEUES];
    bool gone;                  /* the export hung up */
} FuzzVuFE;

static char *fuzz_vu_dir;
static char *fuzz_vu_path;
static VhostUserBlkExport *fuzz_vu_exp;

static void fuzz_vu_cleanup(void)
{
    vhost_user_blk_export_free(fuzz_vu_exp);
    rmdir(fuzz_vu_dir);
}

static void fuzz_vu_init(void)
{
    static uint8_t zeroes[1024 * 1024];
    VhostUserBlkExportConfig cfg = {
        .id = "fuzz0",
        .writable = true,
        .num_queues = FUZZ_VU_QUEUES,
        .logical_block_size = 512,
    };
    QDict *opts;
    BlockBackend *blk;

    if (fuzz_vu_exp) {
        return;
    }
    fuzz_mem_register();
    fuzz_mem_set_image(zeroes, sizeof(zeroes));
    fuzz_vu_dir = g_dir_make_tmp("fuzz-vhost-user-XXXXXX", NULL);
    assert(fuzz_vu_dir);
    fuzz_vu_path = g_build_filename(fuzz_vu_dir, "vub.sock", NULL);
    cfg.path = fuzz_vu_path;
    opts = qdict_new();
    qdict_put_str(opts, "driver", "fuzz-mem");
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
    fuzz_vu_exp = vhost_user_blk_export_new(blk, &cfg, &error_abort);
    /* the export holds its own reference */
    blk_unref(blk);
    atexit(fuzz_vu_cleanup);
}

static void fuzz_vu_poll(void)
{
    for (int i = 0; i < FUZZ_VU_POLLS; i++) {
        if (!aio_poll(qemu_get_aio_context(), false)) {
            break;
        }
    }
}

/* Takes the export's replies; notes when it has hung up. */
static void fuzz_vu_drain(FuzzVuFE *fe)
{
    char buf[4096];
    ssize_t n;

    while ((n = recv(fe->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        fe->gone = true;
    }
}

static void fuzz_vu_send(FuzzVuFE *fe, uint32_t req, uint32_t flags,
                         const void *payload, uint32_t size, int fd)
{
    VhostUserHeader hdr = { .request = req, .flags = flags, .size = size };
    struct iovec iov[2] = {
        { .iov_base = &hdr, .iov_len = sizeof(hdr) },
        { .iov_base = (void *)payload, .iov_len = size },
    };
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control = { { 0 } };
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = size ? 2 : 1 };

    if (fe->gone) {
        return;
    }
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
    if (sendmsg(fe->fd, &msg, MSG_NOSIGNAL) < 0) {
        fe->gone = true;
    }
    fuzz_vu_poll();
    fuzz_vu_drain(fe);
}

/* The descriptor a message carries (header comment), or -1. */
static int fuzz_vu_msg_fd(FuzzVuFE *fe, uint32_t req, const uint8_t *payload,
                          uint32_t size)
{
    unsigned q = size ? payload[0] % FUZZ_VU_QUEUES : 0;

    switch (req) {
    case VHOST_USER_SET_MEM_TABLE:
    case VHOST_USER_ADD_MEM_REG:
    case VHOST_USER_SET_LOG_BASE:
    case VHOST_USER_SET_INFLIGHT_FD:
        return fe->memfd;
    case VHOST_USER_SET_VRING_KICK:
        return fe->kick[q];
    case VHOST_USER_SET_VRING_CALL:
        return fe->call[q];
    case VHOST_USER_SET_VRING_ERR:
        return fe->err[q];
    default:
        return -1;
    }
}

static void fuzz_vu_send_u64(FuzzVuFE *fe, uint32_t req, uint64_t v, int fd)
{
    fuzz_vu_send(fe, req, VHOST_USER_VERSION, &v, sizeof(v), fd);
}

/* What QEMU sends to start queue 0 with @num descriptors. */
static void fuzz_vu_setup(FuzzVuFE *fe, uint16_t num)
{
    VhostUserMemory m = {
        .nregions = 1,
        .regions[0] = { 0, FUZZ_VU_MEM_SIZE, FUZZ_VU_UVA, 0 },
    };
    VhostUserVringAddr a = {
        .index = 0,
        .desc_user_addr = FUZZ_VU_UVA + FUZZ_VU_DESC,
        .avail_user_addr = FUZZ_VU_UVA + FUZZ_VU_AVAIL,
        .used_user_addr = FUZZ_VU_UVA + FUZZ_VU_USED,
    };
    VhostUserVringState st = { .index = 0, .num = num };
    /* dirty logging on: a SET_LOG_BASE of the script's logs at once */
    uint64_t features = (UINT64_C(1) << 32) |       /* VERSION_1 */
                        (UINT64_C(1) << VHOST_USER_F_PROTOCOL_FEATURES) |
                        (UINT64_C(1) << VHOST_F_LOG_ALL) |
                        (UINT64_C(1) << 9);         /* FLUSH */
    uint64_t pf = (UINT64_C(1) << VHOST_USER_PROTOCOL_F_MQ) |
                  (UINT64_C(1) << VHOST_USER_PROTOCOL_F_LOG_SHMFD) |
                  (UINT64_C(1) << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
                  (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIG) |
                  (UINT64_C(1) << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD) |
                  (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS);
    VhostUserInflight in = {
        .mmap_size = FUZZ_VU_MEM_SIZE - FUZZ_VU_INFLIGHT,
        .mmap_offset = FUZZ_VU_INFLIGHT,
        .num_queues = 1,
        .queue_size = num,
    };

    fuzz_vu_send(fe, VHOST_USER_GET_FEATURES, VHOST_USER_VERSION, NULL, 0,
                 -1);
    fuzz_vu_send_u64(fe, VHOST_USER_SET_PROTOCOL_FEATURES, pf, -1);
    fuzz_vu_send(fe, VHOST_USER_SET_OWNER, VHOST_USER_VERSION, NULL, 0, -1);
    fuzz_vu_send_u64(fe, VHOST_USER_SET_FEATURES, features, -1);
    fuzz_vu_send(fe, VHOST_USER_SET_MEM_TABLE, VHOST_USER_VERSION, &m,
                 offsetof(VhostUserMemory, regions) + sizeof(m.regions[0]),
                 fe->memfd);
    fuzz_vu_send(fe, VHOST_USER_SET_INFLIGHT_FD, VHOST_USER_VERSION, &in,
                 sizeof(in), fe->memfd);
    fuzz_vu_send(fe, VHOST_USER_SET_VRING_NUM, VHOST_USER_VERSION, &st,
                 sizeof(st), -1);
    fuzz_vu_send(fe, VHOST_USER_SET_VRING_ADDR, VHOST_USER_VERSION, &a,
                 sizeof(a), -1);
    st.num = 0;
    fuzz_vu_send(fe, VHOST_USER_SET_VRING_BASE, VHOST_USER_VERSION, &st,
                 sizeof(st), -1);
    fuzz_vu_send_u64(fe, VHOST_USER_SET_VRING_CALL, 0, fe->call[0]);
    fuzz_vu_send_u64(fe, VHOST_USER_SET_VRING_ERR, 0, fe->err[0]);
    fuzz_vu_send_u64(fe, VHOST_USER_SET_VRING_KICK, 0, fe->kick[0]);
    st.num = 1;
    fuzz_vu_send(fe, VHOST_USER_SET_VRING_ENABLE, VHOST_USER_VERSION, &st,
                 sizeof(st), -1);
}

static void fuzz_vu_kick(FuzzVuFE *fe, unsigned q)
{
    uint64_t one = 1;

    if (write(fe->kick[q % FUZZ_VU_QUEUES], &one, sizeof(one)) < 0) {
        abort();
    }
    fuzz_vu_poll();
    fuzz_vu_drain(fe);
}

static FuzzVuFE *fuzz_vu_connect(void)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    FuzzVuFE *fe = g_new0(FuzzVuFE, 1);

    fe->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_strlcpy(sun.sun_path, fuzz_vu_path, sizeof(sun.sun_path));
    if (fe->fd < 0 ||
        connect(fe->fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        abort();
    }
    /* sealed against shrinking, as a careful front-end's memory is */
    fe->memfd = memfd_create("fuzz-guest-ram", MFD_CLOEXEC |
                             MFD_ALLOW_SEALING);
    if (fe->memfd < 0 || ftruncate(fe->memfd, FUZZ_VU_MEM_SIZE) < 0 ||
        fcntl(fe->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
        abort();
    }
    fe->mem = mmap(NULL, FUZZ_VU_MEM_SIZE, PROT_READ | PROT_WRITE,
                   MAP_SHARED, fe->memfd, 0);
    if (fe->mem == MAP_FAILED) {
        abort();
    }
    for (int i = 0; i < FUZZ_VU_QUEUES; i++) {
        fe->kick[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        fe->call[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        fe->err[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    }
    fuzz_vu_poll();
    return fe;
}

/* Hangs up and waits until the export is ready for the next one. */
static void fuzz_vu_close(FuzzVuFE *fe)
{
    close(fe->fd);
    while (vhost_user_blk_export_has_client(fuzz_vu_exp)) {
        aio_poll(qemu_get_aio_context(), true);
    }
    munmap(fe->mem, FUZZ_VU_MEM_SIZE);
    close(fe->memfd);
    for (int i = 0; i < FUZZ_VU_QUEUES; i++) {
        close(fe->kick[i]);
        close(fe->call[i]);
        close(fe->err[i]);
    }
    g_free(fe);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *end = data + size;
    FuzzVuFE *fe;

    fuzz_vu_init();
    fe = fuzz_vu_connect();
    while (data < end && !fe->gone) {
        uint8_t op = *data++;

        switch (op % 4) {
        case 0: {
            uint32_t req, flags, len;

            if (end - data < 3) {
                data = end;
                break;
            }
            req = data[0];
            flags = data[1];
            len = MIN(data[2], end - data - 3);
            fuzz_vu_send(fe, req, flags, data + 3, len,
                         fuzz_vu_msg_fd(fe, req, data + 3, len));
            data += 3 + len;
            break;
        }
        case 1:
            fuzz_vu_setup(fe, data < end ? 1u << (*data++ % 11) : 16);
            break;
        case 2: {
            uint32_t off, len;

            if (end - data < 3) {
                data = end;
                break;
            }
            off = (data[0] | data[1] << 8) % FUZZ_VU_MEM_SIZE;
            len = MIN(MIN(data[2], end - data - 3), FUZZ_VU_MEM_SIZE - off);
            memcpy(fe->mem + off, data + 3, len);
            data += 3 + len;
            break;
        }
        default:
            fuzz_vu_kick(fe, data < end ? *data++ : 0);
            break;
        }
    }
    fuzz_vu_close(fe);
    return 0;
}
