/*
 * The pr-manager-helper object (util/pr-manager-helper.c) against a
 * helper played by a thread of the test: the handshake (the helper's
 * features answered with none), QEMU's messages when there is no helper
 * or it closes early, and the reconnection once the helper went away.
 * A real qemu-pr-helper is used by tests/interop/qsd-objects.sh.
 */
#include "util/osdep.h"

#include <sys/socket.h>
#include <sys/un.h>

#include "util/user-object.h"

typedef struct FakeHelper {
    int listen_fd;
    uint32_t features;          /* what it sends, host order */
    size_t send_len;            /* how much of it (4: all) */
    int conn;                   /* the last connection, left open */
    uint32_t answer;            /* what the client answered, host order */
    ssize_t answer_len;
} FakeHelper;

static char *sock_path;

/* Accepts one connection and shakes hands as qemu-pr-helper does. */
static gpointer fake_helper_accept(gpointer opaque)
{
    FakeHelper *h = opaque;
    uint32_t be = GUINT32_TO_BE(h->features);

    h->conn = accept(h->listen_fd, NULL, NULL);
    g_assert_cmpint(h->conn, >=, 0);
    g_assert_cmpint(send(h->conn, &be, h->send_len, 0), ==, h->send_len);
    if (h->send_len < sizeof(be)) {
        close(h->conn);         /* half a handshake, then gone */
        h->conn = -1;
        return NULL;
    }
    h->answer_len = recv(h->conn, &be, sizeof(be), MSG_WAITALL);
    h->answer = GUINT32_FROM_BE(be);
    return NULL;
}

static void fake_helper_listen(FakeHelper *h)
{
    struct sockaddr_un un = { .sun_family = AF_UNIX };

    h->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    g_assert_cmpint(h->listen_fd, >=, 0);
    g_strlcpy(un.sun_path, sock_path, sizeof(un.sun_path));
    unlink(sock_path);
    g_assert_cmpint(bind(h->listen_fd, (struct sockaddr *)&un, sizeof(un)),
                    ==, 0);
    g_assert_cmpint(listen(h->listen_fd, 1), ==, 0);
}

static char *add_arg(void)
{
    return g_strdup_printf("pr-manager-helper,id=pr0,path=%s", sock_path);
}

static bool connected(void)
{
    g_autoptr(JsonNode) node = user_object_get_property("pr0", "connected",
                                                        &error_abort);

    return json_node_get_boolean(node);
}

static void test_handshake_and_reconnect(void)
{
    FakeHelper h = { .features = 0x5, .send_len = 4 };
    g_autofree char *arg = add_arg();
    GThread *t;

    fake_helper_listen(&h);
    t = g_thread_new("helper", fake_helper_accept, &h);
    g_assert_true(user_object_add_cmdline(arg, &error_abort));
    g_thread_join(t);
    /* features it does not know: it uses none */
    g_assert_cmpint(h.answer_len, ==, 4);
    g_assert_cmpuint(h.answer, ==, 0);
    g_assert_true(connected());
    /* the helper drops the connection; the next use connects again */
    close(h.conn);
    h.features = 0;
    h.answer = 0xffffffff;
    t = g_thread_new("helper", fake_helper_accept, &h);
    g_assert_true(connected());
    g_thread_join(t);
    g_assert_cmpuint(h.answer, ==, 0);
    /* and while no helper listens, it is not connected */
    close(h.conn);
    close(h.listen_fd);
    unlink(sock_path);
    g_assert_false(connected());
    g_assert_false(connected());
    g_assert_true(user_object_del("pr0", &error_abort));
}

static void assert_refused(const char *expect)
{
    g_autofree char *arg = add_arg();
    Error *err = NULL;

    g_assert_false(user_object_add_cmdline(arg, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, expect);
    error_free(err);
}

static void test_errors(void)
{
    FakeHelper h = { .send_len = 2 };
    g_autofree char *msg = g_strdup_printf("Failed to connect to '%s': "
                                           "No such file or directory",
                                           sock_path);
    GThread *t;

    unlink(sock_path);
    assert_refused(msg);
    fake_helper_listen(&h);
    t = g_thread_new("helper", fake_helper_accept, &h);
    assert_refused("Unexpected end-of-file before all data were read");
    g_thread_join(t);
    close(h.listen_fd);
    unlink(sock_path);
}

int main(int argc, char **argv)
{
    g_autofree char *dir = g_dir_make_tmp("test-pr-helper-XXXXXX", NULL);
    int ret;

    g_test_init(&argc, &argv, NULL);
    sock_path = g_build_filename(dir, "pr.sock", NULL);
    g_test_add_func("/pr-manager-helper/handshake-and-reconnect",
                    test_handshake_and_reconnect);
    g_test_add_func("/pr-manager-helper/errors", test_errors);
    ret = g_test_run();
    unlink(sock_path);
    rmdir(dir);
    g_free(sock_path);
    return ret;
}
