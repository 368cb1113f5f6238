/*
 * CoSocket (util/co-socket.c): a reader waits and resumes when data
 * comes; co_socket_shutdown() wakes it; co_socket_move() takes a waiting
 * reader along to another context (invariant 3), so that it resumes
 * there and the old context no longer sees the socket.
 */
#include "util/osdep.h"
#include "util/aio.h"
#include "util/co-socket.h"

#include <sys/socket.h>

typedef struct Reader {
    CoSocket sock;
    char buf[4];
    int ret;
    bool done;
    AioContext *resumed_in;     /* the coroutine's context after the read */
} Reader;

static void coroutine_fn reader_entry(void *opaque)
{
    Reader *r = opaque;

    r->ret = co_socket_read_all(&r->sock, r->buf, sizeof(r->buf));
    r->resumed_in = qemu_coroutine_get_aio_context(qemu_coroutine_self());
    r->done = true;
}

/* A reader on one end of a socket pair in @ctx; returns the other end. */
static int reader_start(Reader *r, AioContext *ctx)
{
    int sv[2];

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
                               sv), ==, 0);
    *r = (Reader) { .ret = 1 };
    co_socket_init(&r->sock, sv[0], ctx);
    aio_co_enter(ctx, qemu_coroutine_create(reader_entry, r));
    while (aio_poll(ctx, false)) {
        continue;
    }
    g_assert_false(r->done);    /* nothing to read: it waits */
    return sv[1];
}

static void poll_until_done(Reader *r, AioContext *ctx)
{
    for (int i = 0; i < 1000 && !r->done; i++) {
        aio_poll(ctx, true);
    }
    g_assert_true(r->done);
}

static void test_read_waits(void)
{
    AioContext *ctx = qemu_get_aio_context();
    Reader r;
    int peer = reader_start(&r, ctx);

    g_assert_cmpint(write(peer, "ab", 2), ==, 2);
    while (aio_poll(ctx, false)) {
        continue;
    }
    g_assert_false(r.done);     /* half of what it reads */
    g_assert_cmpint(write(peer, "cd", 2), ==, 2);
    poll_until_done(&r, ctx);
    g_assert_cmpint(r.ret, ==, 0);
    g_assert_cmpmem(r.buf, 4, "abcd", 4);
    co_socket_close(&r.sock);
    close(peer);
}

static void test_shutdown_wakes(void)
{
    AioContext *ctx = qemu_get_aio_context();
    Reader r;
    int peer = reader_start(&r, ctx);

    co_socket_shutdown(&r.sock);
    poll_until_done(&r, ctx);
    g_assert_cmpint(r.ret, ==, -ESHUTDOWN);
    co_socket_close(&r.sock);
    close(peer);
}

static void test_move_takes_waiter(void)
{
    AioContext *ctx = qemu_get_aio_context();
    AioContext *other = aio_context_new(&error_abort);
    Reader r;
    int peer = reader_start(&r, ctx);

    /* this thread owns both contexts: nothing runs in either meanwhile */
    co_socket_move(&r.sock, other);
    g_assert_cmpint(write(peer, "wxyz", 4), ==, 4);
    while (aio_poll(ctx, false)) {
        continue;
    }
    g_assert_false(r.done);     /* the old context no longer watches it */
    poll_until_done(&r, other);
    g_assert_cmpint(r.ret, ==, 0);
    g_assert_cmpmem(r.buf, 4, "wxyz", 4);
    g_assert_true(r.resumed_in == other);   /* invariant 3 */
    co_socket_close(&r.sock);
    close(peer);
    aio_context_unref(other);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qemu_get_aio_context();
    g_test_add_func("/co-socket/read-waits", test_read_waits);
    g_test_add_func("/co-socket/shutdown-wakes", test_shutdown_wakes);
    g_test_add_func("/co-socket/move-takes-waiter", test_move_takes_waiter);
    return g_test_run();
}
