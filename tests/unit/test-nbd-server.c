/*
 * block/export/nbd-server.c: the life of exports and clients as a
 * daemon drives them: export lookup and its errors, a client served over
 * a socketpair, nbd_export_remove() disconnecting the export's clients
 * (also with requests in flight) and calling back once it is freed,
 * nbd_server_free() with clients in the handshake and in transmission,
 * the client_closed callback, and the removal of an export while a
 * handshake reply about it waits for a client that does not read.  The
 * protocol itself is tested from the outside by tests/interop/nbd-*.sh.
 *
 * The client side runs in a thread with blocking sockets; the main
 * thread runs the server's event loop until the thread is done.
 */

#include "test-mem-driver.h"
#include "block/nbd.h"
#include "block/nbd-proto.h"
#include "qblock/block-backend.h"

#include <sys/socket.h>

typedef struct TestClient {
    int fd;
    int reads_in_flight;        /* reads to send before waiting for EOF */
    bool go;                    /* reach transmission */
    bool in_transmission;       /* atomic: set once GO was answered */
    bool saw_eof;               /* the server closed the connection */
    bool done;                  /* atomic */
} TestClient;

static AioContext *ctx;
static int closed_negotiated, closed_not_negotiated, export_done;

static bool read_full(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);

        if (n <= 0) {
            return false;
        }
        p += n;
        len -= n;
    }
    return true;
}

static void send_full(int fd, const void *buf, size_t len)
{
    g_assert_cmpint(send(fd, buf, len, MSG_NOSIGNAL), ==, len);
}

/*
 * Reads until the server hangs up; true if it did.  A server that closes
 * while requests it has not read wait in its socket makes the kernel
 * reset the connection (ECONNRESET on a unix socket) instead of an EOF:
 * a hang-up all the same, whose timing depends on the machine's load.
 */
static bool wait_eof(int fd)
{
    char buf[4096];
    ssize_t n;

    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
        continue;
    }
    return n == 0 || errno == ECONNRESET;
}

static gpointer test_client_thread(gpointer opaque)
{
    TestClient *c = opaque;
    NBDNewstyleGreeting g;
    uint32_t cflags = GUINT32_TO_BE(NBD_FLAG_C_FIXED_NEWSTYLE);

    g_assert_true(read_full(c->fd, &g, sizeof(g)));
    g_assert_cmphex(GUINT64_FROM_BE(g.magic), ==, NBD_INIT_MAGIC);
    if (c->go) {
        struct QEMU_PACKED {
            NBDOption hdr;
            uint32_t name_len;
            uint16_t nreq;
        } go = {
            .hdr = {
                .magic = GUINT64_TO_BE(NBD_OPTS_MAGIC),
                .option = GUINT32_TO_BE(NBD_OPT_GO),
                .length = GUINT32_TO_BE(6),
            },
        };
        NBDOptionReply rep;
        uint8_t data[64];

        send_full(c->fd, &cflags, sizeof(cflags));
        send_full(c->fd, &go, sizeof(go));
        do {
            g_assert_true(read_full(c->fd, &rep, sizeof(rep)));
            g_assert_cmpuint(GUINT32_FROM_BE(rep.length), <=, sizeof(data));
            g_assert_true(read_full(c->fd, data,
                                    GUINT32_FROM_BE(rep.length)));
        } while (GUINT32_FROM_BE(rep.type) == NBD_REP_INFO);
        g_assert_cmpuint(GUINT32_FROM_BE(rep.type), ==, NBD_REP_ACK);
        for (int i = 0; i < c->reads_in_flight; i++) {
            NBDRequestHeader req = {
                .magic = GUINT32_TO_BE(NBD_REQUEST_MAGIC),
                .type = GUINT16_TO_BE(NBD_CMD_READ),
                .cookie = GUINT64_TO_BE(i),
                .length = GUINT32_TO_BE(4096),
            };

            send_full(c->fd, &req, sizeof(req));
        }
        __atomic_store_n(&c->in_transmission, true, __ATOMIC_SEQ_CST);
        /* the main loop may be asleep with nothing else to wake it */
        aio_notify(ctx);
    }
    c->saw_eof = wait_eof(c->fd);
    close(c->fd);
    __atomic_store_n(&c->done, true, __ATOMIC_SEQ_CST);
    aio_notify(ctx);
    return NULL;
}

/* Connects a client thread to @server over a socketpair. */
static GThread *start_client(NBDServer *server, TestClient *c)
{
    int sv[2];

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    c->fd = sv[1];
    nbd_server_add_client(server, sv[0]);
    return g_thread_new("nbd-test-client", test_client_thread, c);
}

static void poll_until(bool *flag)
{
    while (!__atomic_load_n(flag, __ATOMIC_SEQ_CST)) {
        aio_poll(ctx, true);
    }
}

static void client_closed(void *opaque, bool negotiated)
{
    if (negotiated) {
        closed_negotiated++;
    } else {
        closed_not_negotiated++;
    }
}

static void export_removed(void *opaque)
{
    export_done++;
}

static NBDServer *new_server(void)
{
    NBDServerConfig cfg = { .client_closed = client_closed };

    closed_negotiated = closed_not_negotiated = export_done = 0;
    return nbd_server_new(ctx, &cfg);
}

static BlockBackend *open_blk(bool yield)
{
    QDict *opts = qdict_new();
    BlockBackend *blk;

    test_mem_cfg_reset(1);
    test_mem_cfg.yield = yield;
    qdict_put_str(opts, "driver", "test-mem");
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
    g_assert_nonnull(blk);
    return blk;
}

static void test_export_errors(void)
{
    NBDServer *server = new_server();
    BlockBackend *blk = open_blk(false);
    BlockBackend *ro;
    NBDExportConfig cfg = { .name = "a", .writable = true };
    g_autofree char *long_name = g_strnfill(NBD_MAX_STRING_SIZE + 1, 'x');
    Error *err = NULL;
    NBDExport *exp;
    QDict *opts;

    test_log_reset();
    exp = nbd_export_new(server, blk, &cfg, &error_abort);
    /* an export costs no I/O until a client asks for some */
    test_log_assert("");
    g_assert_true(nbd_export_find(server, "a") == exp);
    g_assert_null(nbd_export_find(server, ""));
    g_assert_cmpstr(nbd_export_name(exp), ==, "a");
    g_assert_true(nbd_export_blk(exp) == blk);

    g_assert_null(nbd_export_new(server, blk, &cfg, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "NBD server already has export named 'a'");
    g_clear_pointer(&err, error_free);

    cfg.name = long_name;
    g_assert_null(nbd_export_new(server, blk, &cfg, &err));
    g_assert_nonnull(strstr(error_get_pretty(err), "too long"));
    g_clear_pointer(&err, error_free);

    opts = qdict_new();
    qdict_put_str(opts, "driver", "test-mem");
    ro = blk_new_open(NULL, NULL, opts, 0, &error_abort);
    cfg.name = "ro";
    g_assert_null(nbd_export_new(server, ro, &cfg, &err));
    g_assert_nonnull(strstr(error_get_pretty(err), "read-only"));
    g_clear_pointer(&err, error_free);
    cfg.writable = false;
    g_assert_nonnull(nbd_export_new(server, ro, &cfg, &error_abort));

    nbd_server_free(server);
    blk_unref(ro);
    blk_unref(blk);
}

static void test_remove_disconnects_clients(void)
{
    NBDServer *server = new_server();
    BlockBackend *blk = open_blk(true);
    NBDExportConfig cfg = { .name = "", .writable = true };
    NBDExport *exp = nbd_export_new(server, blk, &cfg, &error_abort);
    TestClient a = { .go = true }, b = { .go = true, .reads_in_flight = 8 };
    GThread *ta = start_client(server, &a);
    GThread *tb = start_client(server, &b);

    poll_until(&a.in_transmission);
    poll_until(&b.in_transmission);
    /* let b's reads reach the driver, where they yield */
    aio_poll(ctx, false);
    g_assert_cmpuint(nbd_export_client_count(exp), ==, 2);

    nbd_export_remove(exp, export_removed, NULL);
    g_assert_null(nbd_export_find(server, ""));
    poll_until(&a.done);
    poll_until(&b.done);
    while (export_done == 0 || nbd_server_client_count(server) > 0) {
        aio_poll(ctx, true);
    }
    g_assert_true(a.saw_eof && b.saw_eof);
    g_assert_cmpint(export_done, ==, 1);
    g_assert_cmpint(closed_negotiated, ==, 2);
    g_thread_join(ta);
    g_thread_join(tb);

    nbd_server_free(server);
    /* the export's reference is gone: ours is the last */
    blk_unref(blk);
}

static void test_server_free_with_clients(void)
{
    NBDServer *server = new_server();
    BlockBackend *blk = open_blk(true);
    NBDExportConfig cfg = { .name = "" };
    TestClient hs = { .go = false }, tx = { .go = true,
                                            .reads_in_flight = 4 };
    GThread *t1, *t2;

    nbd_export_new(server, blk, &cfg, &error_abort);
    t1 = start_client(server, &hs);
    t2 = start_client(server, &tx);
    poll_until(&tx.in_transmission);
    g_assert_cmpuint(nbd_server_client_count(server), ==, 2);

    nbd_server_free(server);
    poll_until(&hs.done);
    poll_until(&tx.done);
    g_assert_true(hs.saw_eof && tx.saw_eof);
    /* nbd_server_free() returns without calling client_closed */
    g_assert_cmpint(closed_negotiated + closed_not_negotiated, ==, 0);
    g_thread_join(t1);
    g_thread_join(t2);
    blk_unref(blk);
}

static void test_client_closed_callback(void)
{
    NBDServer *server = new_server();
    BlockBackend *blk = open_blk(false);
    NBDExportConfig cfg = { .name = "" };
    TestClient quitter = { .go = false };
    GThread *t;
    int sv[2];

    nbd_export_new(server, blk, &cfg, &error_abort);
    /* a client that hangs up during the handshake */
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    nbd_server_add_client(server, sv[0]);
    close(sv[1]);
    while (closed_not_negotiated == 0) {
        aio_poll(ctx, true);
    }
    g_assert_cmpint(closed_negotiated, ==, 0);
    g_assert_cmpuint(nbd_server_client_count(server), ==, 0);

    /* one that waits in the handshake until the server goes */
    t = start_client(server, &quitter);
    g_assert_cmpuint(nbd_server_client_count(server), ==, 1);
    nbd_server_free(server);
    poll_until(&quitter.done);
    g_thread_join(t);
    blk_unref(blk);
}

/*
 * A client in the handshake that asks about an export and does not read
 * the replies, so that the server's writes wait (issue 14, finding 1).
 */
typedef struct FloodClient {
    int fd;
    const char *name;           /* the export asked about */
    bool sent;                  /* atomic: every option is written */
    bool go_read;               /* atomic: the main thread says "read" */
    int infos_named;            /* NBD_INFO_NAME replies naming @name */
    bool bad_reply;             /* a reply that was not well formed */
    bool saw_eof;
    bool done;                  /* atomic */
} FloodClient;

/*
 * Appends an option to @buf.  The flood goes out in one send: many small
 * ones would fill the socket's send buffer with their overhead, and the
 * client would block before the server does.
 */
static void flood_add_option(GByteArray *buf, uint32_t opt,
                             const void *data, uint32_t len)
{
    NBDOption hdr = {
        .magic = GUINT64_TO_BE(NBD_OPTS_MAGIC),
        .option = GUINT32_TO_BE(opt),
        .length = GUINT32_TO_BE(len),
    };

    g_byte_array_append(buf, (const guint8 *)&hdr, sizeof(hdr));
    g_byte_array_append(buf, data, len);
}

static gpointer flood_client_thread(gpointer opaque)
{
    FloodClient *c = opaque;
    uint32_t cflags = GUINT32_TO_BE(NBD_FLAG_C_FIXED_NEWSTYLE);
    size_t name_len = strlen(c->name);
    g_autofree uint8_t *info = g_malloc(4 + name_len + 4);
    uint32_t be_len = GUINT32_TO_BE(name_len);
    uint16_t nreq = GUINT16_TO_BE(1), req = GUINT16_TO_BE(NBD_INFO_NAME);
    g_autoptr(GByteArray) flood = g_byte_array_new();
    NBDNewstyleGreeting g;
    NBDOptionReply rep;

    g_assert_true(read_full(c->fd, &g, sizeof(g)));
    send_full(c->fd, &cflags, sizeof(cflags));
    memcpy(info, &be_len, 4);
    memcpy(info + 4, c->name, name_len);
    memcpy(info + 4 + name_len, &nreq, 2);
    memcpy(info + 6 + name_len, &req, 2);
    /* the reproducer: 5 LIST, 300 INFO, nothing read */
    for (int i = 0; i < 5; i++) {
        flood_add_option(flood, NBD_OPT_LIST, NULL, 0);
    }
    for (int i = 0; i < 300; i++) {
        flood_add_option(flood, NBD_OPT_INFO, info, 4 + name_len + 4);
    }
    send_full(c->fd, flood->data, flood->len);
    __atomic_store_n(&c->sent, true, __ATOMIC_SEQ_CST);
    aio_notify(ctx);
    while (!__atomic_load_n(&c->go_read, __ATOMIC_SEQ_CST)) {
        g_usleep(1000);
    }
    while (read_full(c->fd, &rep, sizeof(rep))) {
        uint32_t len = GUINT32_FROM_BE(rep.length);
        g_autofree uint8_t *data = g_malloc(len + 1);

        if (GUINT64_FROM_BE(rep.magic) != NBD_REP_MAGIC ||
            len > NBD_MAX_STRING_SIZE + 2) {
            c->bad_reply = true;
            break;
        }
        if (!read_full(c->fd, data, len)) {
            break;              /* cut off mid-reply by the disconnect */
        }
        data[len] = 0;
        if (GUINT32_FROM_BE(rep.type) == NBD_REP_INFO &&
            data[0] == 0 && data[1] == NBD_INFO_NAME) {
            if (strcmp((char *)data + 2, c->name)) {
                c->bad_reply = true;
            } else {
                c->infos_named++;
            }
        }
    }
    c->saw_eof = wait_eof(c->fd);
    close(c->fd);
    __atomic_store_n(&c->done, true, __ATOMIC_SEQ_CST);
    aio_notify(ctx);
    return NULL;
}

/* Polls until the server has nothing left to do but wait. */
static void poll_idle(void)
{
    for (int i = 0; i < 1000 && aio_poll(ctx, false); i++) {
        continue;
    }
}

/*
 * Finding 1 of issue 14: an export removed while a handshake client's
 * reply about it waits on the socket.  The client counts as the
 * export's (so a safe removal would refuse), removal disconnects it, and
 * the export is freed only once it is gone; an ASan build proves that
 * nothing touches the export afterwards.
 */
static void test_remove_during_handshake(void)
{
    NBDServer *server = new_server();
    BlockBackend *blk = open_blk(false);
    NBDExportConfig cfg = { .name = "victim" };
    NBDExport *exp = nbd_export_new(server, blk, &cfg, &error_abort);
    FloodClient c = { .name = "victim" };
    GThread *t;
    int sv[2];

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    /*
     * A small send buffer, so that the server's replies fill it however
     * it batches them (one sendmsg per loop iteration sends 300 INFO
     * replies in a few skbs, which the default buffer would all take).
     */
    g_assert_cmpint(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &(int){4096},
                               sizeof(int)), ==, 0);
    c.fd = sv[1];
    nbd_server_add_client(server, sv[0]);
    t = g_thread_new("nbd-flood-client", flood_client_thread, &c);
    poll_until(&c.sent);
    poll_idle();
    /* the server is stuck in a write of a reply about the export */
    g_assert_cmpuint(nbd_server_client_count(server), ==, 1);
    g_assert_cmpuint(nbd_export_client_count(exp), ==, 1);

    nbd_export_remove(exp, export_removed, NULL);
    g_assert_null(nbd_export_find(server, "victim"));
    __atomic_store_n(&c.go_read, true, __ATOMIC_SEQ_CST);
    poll_until(&c.done);
    while (export_done == 0 || nbd_server_client_count(server) > 0) {
        aio_poll(ctx, true);
    }
    g_assert_true(c.saw_eof);
    g_assert_false(c.bad_reply);
    /* it was answered about the export until the disconnect */
    g_assert_cmpint(c.infos_named, >, 0);
    g_assert_cmpint(c.infos_named, <, 300);
    g_assert_cmpint(closed_not_negotiated, ==, 1);
    g_thread_join(t);

    nbd_server_free(server);
    blk_unref(blk);
}

/*
 * A listener's socket file goes with it, unless the path names another
 * socket by then: a newer server that replaced this one's as stale (after
 * this one stopped accepting, before it closed) keeps its own.
 */
static void test_listener_unlink(void)
{
    g_autofree char *dir = g_dir_make_tmp("test-nbd-server-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "nbd.sock", NULL);
    g_autoptr(SocketAddress) addr = socket_address_new_unix(path);
    NBDServer *server;
    int newer;

    server = nbd_server_new(ctx, NULL);
    g_assert_cmpint(nbd_server_listen(server, addr, &error_abort), ==, 0);
    g_assert_true(g_file_test(path, G_FILE_TEST_EXISTS));
    nbd_server_free(server);
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));

    server = nbd_server_new(ctx, NULL);
    g_assert_cmpint(nbd_server_listen(server, addr, &error_abort), ==, 0);
    g_assert_cmpint(unlink(path), ==, 0);
    newer = socket_listen(addr, 1, &error_abort);
    nbd_server_free(server);
    g_assert_true(g_file_test(path, G_FILE_TEST_EXISTS));
    close(newer);
    unlink(path);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    test_drivers_register();
    ctx = qemu_get_aio_context();
    g_test_add_func("/nbd-server/export-errors", test_export_errors);
    g_test_add_func("/nbd-server/remove-disconnects-clients",
                    test_remove_disconnects_clients);
    g_test_add_func("/nbd-server/free-with-clients",
                    test_server_free_with_clients);
    g_test_add_func("/nbd-server/client-closed-callback",
                    test_client_closed_callback);
    g_test_add_func("/nbd-server/remove-during-handshake",
                    test_remove_during_handshake);
    g_test_add_func("/nbd-server/listener-unlink", test_listener_unlink);
    return g_test_run();
}
