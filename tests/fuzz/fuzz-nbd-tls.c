/*
 * fuzz-nbd-tls: a client's bytes into an NBD server that requires TLS
 * (tls-creds-psk): the options refused before NBD_OPT_STARTTLS, STARTTLS
 * itself, the switch from the plain socket to TLS records (the server's
 * session under its CoSocket, util/co-socket-tls.c), and what follows
 * inside TLS.  The server and its exports are those of fuzz-nbd-server
 * (a writable "" and a read-only "ro", 1 MiB in memory), plus the
 * credentials.
 *
 * Input, one connection each; bit 0 of byte 0 picks the mode:
 *   FUZZ_NBD_TLS_RAW      the rest goes to the server as it is: hostile
 *                         options, STARTTLS, then whatever bytes the
 *                         server's TLS handshake reads (the glue's error
 *                         paths: a client that is not TLS, or that hangs
 *                         up in the handshake)
 *   FUZZ_NBD_TLS_TUNNEL   bytes 1-2 (big-endian) are the length of a
 *                         plain part; the harness sends it, then
 *                         NBD_OPT_STARTTLS, and once the server has
 *                         acknowledged that, it completes a real TLS
 *                         handshake (GnuTLS, the same PSK) and sends the
 *                         rest of the input inside TLS: options and
 *                         requests that the server reads through the
 *                         filter, its replies written through it.
 * A random TLS handshake cannot be replayed from a fixed input, so the
 * tunnel mode is what lets the fuzzer reach the server behind TLS; GnuTLS's
 * own record parser is not the target.
 *
 * The harness never waits for a server that waits for it: wherever the
 * server has stopped making progress and has nothing to send (the plain
 * part ended inside an option, say), it hangs up instead, so a hang that
 * libFuzzer reports is the server's.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include "fuzz-mem.h"
#include "fuzz-pump.h"

#include "block/block_int.h"
#include "block/nbd.h"
#include "block/nbd-proto.h"
#include "crypto/tls-session.h"
#include "util/user-object.h"

#define FUZZ_NBD_TLS_RAW            0
#define FUZZ_NBD_TLS_TUNNEL         1
#define FUZZ_NBD_TLS_DISK_SIZE      (1024 * 1024)
/* Any key will do: both ends read it from the same keys.psk. */
#define FUZZ_NBD_TLS_PSK            "qemu:0123456789abcdef0123456789abcdef\n"
/* The fixed newstyle greeting: NBDMAGIC, IHAVEOPT, 16 bits of flags. */
#define FUZZ_NBD_TLS_GREETING_LEN   18
/* Option replies the harness parses before TLS, payload included. */
#define FUZZ_NBD_TLS_MAX_REPLY      (64 * 1024)

static NBDServer *fuzz_nbd_tls_server;
static QCryptoTLSCreds *fuzz_nbd_tls_client_creds;
static char *fuzz_nbd_tls_dir;

static void fuzz_nbd_tls_cleanup(void)
{
    g_autofree char *psk = g_build_filename(fuzz_nbd_tls_dir, "keys.psk",
                                            NULL);

    unlink(psk);
    rmdir(fuzz_nbd_tls_dir);
}

/* Both ends' credentials, from a keys.psk in a private directory. */
static QCryptoTLSCreds *fuzz_nbd_tls_creds(void)
{
    g_autofree char *psk = NULL;
    g_autofree char *server = NULL;
    g_autofree char *client = NULL;

    fuzz_nbd_tls_dir = g_dir_make_tmp("fuzz-nbd-tls-XXXXXX", NULL);
    if (!fuzz_nbd_tls_dir) {
        abort();
    }
    atexit(fuzz_nbd_tls_cleanup);
    psk = g_build_filename(fuzz_nbd_tls_dir, "keys.psk", NULL);
    if (!g_file_set_contents(psk, FUZZ_NBD_TLS_PSK, -1, NULL)) {
        abort();
    }
    server = g_strdup_printf("tls-creds-psk,id=fuzz-server,endpoint=server,"
                             "dir=%s", fuzz_nbd_tls_dir);
    client = g_strdup_printf("tls-creds-psk,id=fuzz-client,endpoint=client,"
                             "dir=%s", fuzz_nbd_tls_dir);
    user_object_add_cmdline(server, &error_abort);
    user_object_add_cmdline(client, &error_abort);
    fuzz_nbd_tls_client_creds =
        qcrypto_tls_creds_get("fuzz-client", QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT,
                              &error_abort);
    return qcrypto_tls_creds_get("fuzz-server",
                                 QCRYPTO_TLS_CREDS_ENDPOINT_SERVER,
                                 &error_abort);
}

static void fuzz_nbd_tls_init(void)
{
    static uint8_t zeroes[FUZZ_NBD_TLS_DISK_SIZE];
    NBDServerConfig scfg = { 0 };
    NBDExportConfig rw = { .name = "", .writable = true,
                           .allocation_depth = true };
    NBDExportConfig ro = { .name = "ro" };
    QDict *opts;
    BlockBackend *blk;

    if (fuzz_nbd_tls_server) {
        return;
    }
    fuzz_mem_register();
    scfg.tls_creds = fuzz_nbd_tls_creds();
    opts = qdict_new();
    fuzz_mem_set_image(zeroes, sizeof(zeroes));
    qdict_put_str(opts, "driver", "fuzz-mem");
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
    fuzz_nbd_tls_server = nbd_server_new(qemu_get_aio_context(), &scfg);
    if (!nbd_export_new(fuzz_nbd_tls_server, blk, &rw, &error_abort) ||
        !nbd_export_new(fuzz_nbd_tls_server, blk, &ro, &error_abort)) {
        abort();
    }
    /* the exports hold their own references */
    blk_unref(blk);
}

/*
 * Runs the server until @fd has bytes to read (or the end of the
 * stream); false if the server stopped making progress first: it waits
 * for the client.
 */
static bool fuzz_nbd_tls_wait(int fd)
{
    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };

        if (poll(&pfd, 1, 0) > 0) {
            return true;
        }
        if (!aio_poll(qemu_get_aio_context(), false)) {
            return poll(&pfd, 1, 0) > 0;
        }
    }
}

/* Sends what fits now, running the server while the socket is full. */
static bool fuzz_nbd_tls_send(int fd, const uint8_t *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n > 0) {
            data += n;
            len -= n;
        } else if (n < 0 && errno == EAGAIN) {
            if (!aio_poll(qemu_get_aio_context(), false)) {
                return false;
            }
        } else {
            return false;
        }
    }
    return true;
}

/*
 * Reads the server's plain answers up to its reply to NBD_OPT_STARTTLS:
 * true if that is an acknowledgement (the server now expects a TLS
 * handshake), false if it refused, hung up, or waits for more options.
 */
static bool fuzz_nbd_tls_await_starttls(int fd)
{
    g_autoptr(GByteArray) buf = g_byte_array_new();
    size_t pos = FUZZ_NBD_TLS_GREETING_LEN;
    uint8_t chunk[4096];
    ssize_t n;

    for (;;) {
        /* whole replies: magic, option, type, payload length, payload */
        while (buf->len >= pos + 20) {
            uint32_t opt, type, len;

            memcpy(&opt, buf->data + pos + 8, 4);
            memcpy(&type, buf->data + pos + 12, 4);
            memcpy(&len, buf->data + pos + 16, 4);
            len = GUINT32_FROM_BE(len);
            if (len > FUZZ_NBD_TLS_MAX_REPLY) {
                return false;
            }
            if (buf->len < pos + 20 + len) {
                break;
            }
            if (GUINT32_FROM_BE(opt) == NBD_OPT_STARTTLS) {
                return GUINT32_FROM_BE(type) == NBD_REP_ACK;
            }
            pos += 20 + len;
        }
        if (!fuzz_nbd_tls_wait(fd)) {
            return false;
        }
        n = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
        if (n <= 0) {
            return false;
        }
        g_byte_array_append(buf, chunk, n);
    }
}

/* Runs the server until @sess can go on; false if the server waits too. */
static bool fuzz_nbd_tls_session_wait(QCryptoTLSSession *sess, int fd)
{
    if (qcrypto_tls_session_wants_write(sess)) {
        return aio_poll(qemu_get_aio_context(), false);
    }
    return fuzz_nbd_tls_wait(fd);
}

/* The TLS part: a handshake, the bytes, a close_notify; then its replies. */
static void fuzz_nbd_tls_tunnel(int fd, const uint8_t *data, size_t len)
{
    QCryptoTLSSession *sess;
    uint8_t buf[4096];
    ssize_t n;
    int ret;

    sess = qcrypto_tls_session_new(fuzz_nbd_tls_client_creds, NULL, fd,
                                   &error_abort);
    while ((ret = qcrypto_tls_session_handshake(sess, NULL)) == -EAGAIN) {
        if (!fuzz_nbd_tls_session_wait(sess, fd)) {
            break;
        }
    }
    while (ret == 0 && len > 0) {
        n = qcrypto_tls_session_write(sess, data, len);
        if (n > 0) {
            data += n;
            len -= n;
        } else if (n != -EAGAIN || !fuzz_nbd_tls_session_wait(sess, fd)) {
            break;
        }
    }
    if (ret == 0) {
        qcrypto_tls_session_bye(sess);
        shutdown(fd, SHUT_WR);
        do {
            n = qcrypto_tls_session_read(sess, buf, sizeof(buf));
        } while (n > 0 ||
                 (n == -EAGAIN && fuzz_nbd_tls_session_wait(sess, fd)));
    }
    qcrypto_tls_session_free(sess);
}

static void fuzz_nbd_tls_tunnel_input(int fd, const uint8_t *data,
                                      size_t size)
{
    const NBDOption starttls = {
        .magic = GUINT64_TO_BE(NBD_OPTS_MAGIC),
        .option = GUINT32_TO_BE(NBD_OPT_STARTTLS),
    };
    size_t plain_len;

    if (size < 2) {
        close(fd);
        return;
    }
    plain_len = MIN((size_t)(data[0] << 8 | data[1]), size - 2);
    data += 2;
    size -= 2;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (fuzz_nbd_tls_send(fd, data, plain_len) &&
        fuzz_nbd_tls_send(fd, (const uint8_t *)&starttls, sizeof(starttls)) &&
        fuzz_nbd_tls_await_starttls(fd)) {
        fuzz_nbd_tls_tunnel(fd, data + plain_len, size - plain_len);
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];

    if (size < 1) {
        return 0;
    }
    fuzz_nbd_tls_init();
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        abort();
    }
    nbd_server_add_client(fuzz_nbd_tls_server, sv[0]);
    if (data[0] & FUZZ_NBD_TLS_TUNNEL) {
        fuzz_nbd_tls_tunnel_input(sv[1], data + 1, size - 1);
    } else {
        fuzz_pump(sv[1], data + 1, size - 1);
    }
    /* the server frees a client from the loop after it hung up */
    while (nbd_server_client_count(fuzz_nbd_tls_server) > 0) {
        aio_poll(qemu_get_aio_context(), true);
    }
    return 0;
}
