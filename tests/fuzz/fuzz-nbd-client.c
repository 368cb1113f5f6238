/*
 * fuzz-nbd-client: a hostile NBD server's bytes into the NBD client
 * driver (block/nbd.c, nbd-handshake.c, nbd-client-recv.c,
 * nbd-reconnect.c): the greeting and option replies of the handshake,
 * then simple and structured replies (data, holes, errors, block status)
 * to requests in flight together, and the loss of the connection.
 *
 * Input, one connection each:
 *   byte 0      FUZZ_NBD_CLIENT_* bits: the client's options
 *   bytes 1-2   big-endian length of the handshake part
 *   then        the handshake part: what the server sends until its
 *               answer to NBD_OPT_GO (or NBD_OPT_EXPORT_NAME)
 *   the rest    the transmission part: its replies to the requests
 *
 * The two parts reach the socket at different times because the client
 * reads replies as soon as it is open: replies already queued then would
 * all name requests not yet sent.  So the handshake part is queued before
 * the open, the transmission part once the requests are on the wire, and
 * then the socket is half-closed: the client sees the end of the server's
 * stream, fails what is still in flight and closes.  The handshake reads
 * a blocking socket, and nothing could add bytes while it waits: the
 * socket is handed over non-blocking, so that a handshake part that ends
 * too soon fails the open at once (EAGAIN) instead of hanging.
 *
 * The driver dials its server at open with socket_connect_deadline(),
 * which this harness wraps (-Wl,--wrap=socket_connect_deadline,
 * tests/fuzz/meson.build): the first call of an input gets one end of a
 * socketpair.  A reconnection dials in the event loop, unwrapped, the
 * address given, FUZZ_NBD_CLIENT_NO_PATH: refused.  With
 * FUZZ_NBD_CLIENT_SERVER set to a unix socket path, it dials that instead
 * and ignores the input's stream: make-corpus-nbd-client.sh records real
 * servers' answers that way.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "block/block_int.h"
#include "block/nbd-client.h"
#include "qblock/block-backend.h"
#include "util/sockets.h"

/* Bits of byte 0. */
#define FUZZ_NBD_CLIENT_NAMED       0x01  /* export "fuzz", not the default */
#define FUZZ_NBD_CLIENT_BITMAP      0x02  /* x-dirty-bitmap=qemu:dirty-... */
#define FUZZ_NBD_CLIENT_READ_ONLY   0x04  /* opened read-only: no writes */

/* The input's header: byte 0 and the handshake part's length. */
#define FUZZ_NBD_CLIENT_HDR_LEN     3
/*
 * Each request is a few KiB: the replies to all of them fit the input
 * (-max_len, tests/fuzz/run.sh) and the socket's buffer, which nobody
 * reads on the server side (what the client sends is dropped with the
 * socket).
 */
#define FUZZ_NBD_CLIENT_IO_SIZE     4096
/* Never reached: open's dial is wrapped, a reconnection's refused. */
#define FUZZ_NBD_CLIENT_NO_PATH     "/nonexistent/fuzz-nbd-client.sock"

int __real_socket_connect_deadline(const SocketAddress *addr,
                                   int64_t deadline, Error **errp);
int __wrap_socket_connect_deadline(const SocketAddress *addr,
                                   int64_t deadline, Error **errp);

/* The client's end of this input's socketpair, until the driver dials. */
static atomic_int fuzz_nbd_client_fd = -1;
/* A real server to dial (recording), or NULL. */
static const char *fuzz_nbd_client_server;

int __wrap_socket_connect_deadline(const SocketAddress *addr,
                                   int64_t deadline, Error **errp)
{
    int fd;

    if (fuzz_nbd_client_server) {
        return __real_socket_connect_deadline(addr, deadline, errp);
    }
    /* taken once: a second open of the input gets nothing */
    fd = atomic_exchange(&fuzz_nbd_client_fd, -1);
    if (fd < 0) {
        error_setg(errp, "fuzz-nbd-client: no second connection");
        return -ECONNREFUSED;
    }
    return fd;
}

/* The requests, all in flight at once; each counts itself out. */
typedef struct FuzzNBDClientIO {
    BlockBackend *blk;
    int64_t len;
    bool writable;
    int pending;
} FuzzNBDClientIO;

typedef void coroutine_fn FuzzNBDClientOp(FuzzNBDClientIO *io);

static void coroutine_fn fuzz_nbd_client_read(FuzzNBDClientIO *io,
                                              int64_t offset)
{
    uint8_t buf[FUZZ_NBD_CLIENT_IO_SIZE];
    QEMUIOVector qiov;

    if (offset < io->len) {
        qemu_iovec_init_buf(&qiov, buf,
                            MIN(io->len - offset, (int64_t)sizeof(buf)));
        blk_co_preadv(io->blk, offset, qiov.size, &qiov, 0);
    }
}

static void coroutine_fn fuzz_nbd_client_read_start(FuzzNBDClientIO *io)
{
    fuzz_nbd_client_read(io, 0);
}

/* Straddles the first two 4 KiB blocks: a reply may split it. */
static void coroutine_fn fuzz_nbd_client_read_mid(FuzzNBDClientIO *io)
{
    fuzz_nbd_client_read(io, FUZZ_NBD_CLIENT_IO_SIZE / 2);
}

static void coroutine_fn fuzz_nbd_client_write(FuzzNBDClientIO *io)
{
    uint8_t buf[FUZZ_NBD_CLIENT_IO_SIZE];
    QEMUIOVector qiov;

    if (io->writable) {
        memset(buf, 0xa5, sizeof(buf));
        qemu_iovec_init_buf(&qiov, buf, MIN(io->len, (int64_t)sizeof(buf)));
        blk_co_pwritev(io->blk, 0, qiov.size, &qiov, BDRV_REQ_FUA);
    }
}

static void coroutine_fn fuzz_nbd_client_zeroes(FuzzNBDClientIO *io)
{
    int64_t offset = 2 * FUZZ_NBD_CLIENT_IO_SIZE;

    if (io->writable && offset < io->len) {
        blk_co_pwrite_zeroes(io->blk, offset,
                             MIN(io->len - offset, FUZZ_NBD_CLIENT_IO_SIZE),
                             BDRV_REQ_MAY_UNMAP);
    }
}

static void coroutine_fn fuzz_nbd_client_status(FuzzNBDClientIO *io)
{
    int64_t pnum, map;
    BlockDriverState *file;

    bdrv_co_block_status(blk_bs(io->blk), true, 0, io->len, &pnum, &map,
                         &file);
}

static void coroutine_fn fuzz_nbd_client_flush(FuzzNBDClientIO *io)
{
    if (io->writable) {
        blk_co_flush(io->blk);
    }
}

struct FuzzNBDClientStep {
    FuzzNBDClientOp *op;
    FuzzNBDClientIO *io;
};

static void coroutine_fn fuzz_nbd_client_entry(void *opaque)
{
    const struct FuzzNBDClientStep *step = opaque;

    step->op(step->io);
    step->io->pending--;
}

/* Starts each request; each runs until it waits for its reply. */
static void fuzz_nbd_client_start(FuzzNBDClientIO *io,
                                  struct FuzzNBDClientStep *steps)
{
    static FuzzNBDClientOp *const ops[] = {
        fuzz_nbd_client_read_start,
        fuzz_nbd_client_read_mid,
        fuzz_nbd_client_write,
        fuzz_nbd_client_zeroes,
        fuzz_nbd_client_status,
        fuzz_nbd_client_flush,
    };

    for (size_t i = 0; i < G_N_ELEMENTS(ops); i++) {
        steps[i] = (struct FuzzNBDClientStep){ .op = ops[i], .io = io };
        io->pending++;
        qemu_coroutine_enter(qemu_coroutine_create(fuzz_nbd_client_entry,
                                                   &steps[i]));
    }
}

static BlockBackend *fuzz_nbd_client_open(uint8_t bits)
{
    QDict *opts = qdict_new();
    Error *err = NULL;
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "nbd");
    qdict_put_str(opts, NBD_OPT_KEY_SERVER_TYPE, "unix");
    qdict_put_str(opts, NBD_OPT_KEY_SERVER_PATH,
                  fuzz_nbd_client_server ?: FUZZ_NBD_CLIENT_NO_PATH);
    if (bits & FUZZ_NBD_CLIENT_NAMED) {
        qdict_put_str(opts, NBD_OPT_KEY_EXPORT, "fuzz");
    }
    if (bits & FUZZ_NBD_CLIENT_BITMAP) {
        qdict_put_str(opts, NBD_OPT_KEY_DIRTY_BITMAP,
                      "qemu:dirty-bitmap:fuzz");
    }
    blk = blk_new_open(NULL, NULL, opts,
                       bits & FUZZ_NBD_CLIENT_READ_ONLY ? 0 : BDRV_O_RDWR,
                       &err);
    error_free(err);
    return blk;
}

/* Queues @len bytes for the client (they fit: see IO_SIZE). */
static void fuzz_nbd_client_send(int fd, const uint8_t *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n <= 0) {
            /* the client hung up (EPIPE); nothing else can fail here */
            return;
        }
        data += n;
        len -= n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool initialized;
    struct FuzzNBDClientStep steps[6];
    FuzzNBDClientIO io = { 0 };
    uint8_t bits;
    size_t hs_len;
    int sv[2];

    if (!initialized) {
        bdrv_init();
        fuzz_nbd_client_server = getenv("FUZZ_NBD_CLIENT_SERVER");
        initialized = true;
    }
    if (size < FUZZ_NBD_CLIENT_HDR_LEN) {
        return 0;
    }
    bits = data[0];
    hs_len = MIN((size_t)(data[1] << 8 | data[2]),
                 size - FUZZ_NBD_CLIENT_HDR_LEN);
    data += FUZZ_NBD_CLIENT_HDR_LEN;
    size -= FUZZ_NBD_CLIENT_HDR_LEN;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        abort();
    }
    fuzz_nbd_client_send(sv[1], data, hs_len);
    /* the driver makes it non-blocking after the handshake anyway */
    if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
        abort();
    }
    atomic_store(&fuzz_nbd_client_fd, sv[0]);
    io.blk = fuzz_nbd_client_open(bits);
    /* not dialled: the open failed on its options */
    sv[0] = atomic_exchange(&fuzz_nbd_client_fd, -1);
    if (sv[0] >= 0) {
        close(sv[0]);
    }
    if (io.blk) {
        io.len = blk_getlength(io.blk);
        io.writable = !(bits & FUZZ_NBD_CLIENT_READ_ONLY);
        if (io.len > 0) {
            fuzz_nbd_client_start(&io, steps);
        }
    }
    fuzz_nbd_client_send(sv[1], data + hs_len, size - hs_len);
    shutdown(sv[1], SHUT_WR);
    while (io.pending > 0) {
        aio_poll(qemu_get_aio_context(), true);
    }
    if (io.blk) {
        blk_unref(io.blk);
    }
    close(sv[1]);
    return 0;
}
