/*
 * Image locking of the file driver: two users of one image inside this
 * process (two open file descriptions, as two processes would have), the
 * lock bytes QEMU uses, locking=off, and conflicts with a real qemu-io
 * process in both directions (skipped when qemu-io is not installed).
 */
#include "util/osdep.h"
#include "qblock/block-backend.h"
#include "block/block_int.h"

#include <signal.h>
#include <sys/wait.h>

/* Permission bytes QEMU locks (see block/file-posix.c). */
#define LOCK_PERM_BASE      100
#define LOCK_SHARED_BASE    200

/* What a tool asks for without -U: everything but sharing writes. */
#define WRITER  (BDRV_O_RDWR | BDRV_O_NO_SHARE)
#define READER  (BDRV_O_NO_SHARE)

static char *test_dir;

static char *new_image(const char *name)
{
    char *path = g_build_filename(test_dir, name, NULL);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 1 * MiB), ==, 0);
    close(fd);
    return path;
}

static BlockBackend *open_image(const char *path, int flags,
                                const char *locking, bool force_share,
                                Error **errp)
{
    QDict *opts = qdict_new();

    qdict_put_str(opts, "driver", "file");
    if (locking) {
        qdict_put_str(opts, "locking", locking);
    }
    if (force_share) {
        qdict_put_str(opts, BDRV_OPT_FORCE_SHARE, "on");
    }
    return blk_new_open(path, NULL, opts, flags, errp);
}

/* Asserts that opening fails with QEMU's message and hint. */
static void assert_conflict(const char *path, int flags, const char *msg)
{
    g_autofree char *hint = g_strdup_printf(
        "Is another process using the image [%s]?\n", path);
    Error *err = NULL;

    g_assert_null(open_image(path, flags, NULL, false, &err));
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==, msg);
    g_assert_cmpstr(error_get_hint(err), ==, hint);
    error_free(err);
}

/* True if some open file description holds a lock on @byte of @path. */
static bool byte_locked(const char *path, int byte)
{
    struct flock fl = {
        .l_whence = SEEK_SET,
        .l_start = byte,
        .l_len = 1,
        .l_type = F_WRLCK,
    };
    int fd = open(path, O_RDONLY);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(fcntl(fd, F_OFD_GETLK, &fl), ==, 0);
    close(fd);
    return fl.l_type != F_UNLCK;
}

static void test_writer_writer(void)
{
    g_autofree char *path = new_image("ww");
    BlockBackend *a = open_image(path, WRITER, NULL, false, &error_abort);

    assert_conflict(path, WRITER, "Failed to get \"write\" lock");
    blk_unref(a);
    /* Closing released the locks. */
    a = open_image(path, WRITER, NULL, false, &error_abort);
    blk_unref(a);
    unlink(path);
}

static void test_reader_reader(void)
{
    g_autofree char *path = new_image("rr");
    BlockBackend *a = open_image(path, READER, NULL, false, &error_abort);
    BlockBackend *b = open_image(path, READER, NULL, false, &error_abort);

    blk_unref(b);
    blk_unref(a);
    unlink(path);
}

static void test_reader_writer(void)
{
    g_autofree char *path = new_image("rw");
    BlockBackend *a = open_image(path, READER, NULL, false, &error_abort);

    /* The reader does not share writing. */
    assert_conflict(path, WRITER, "Failed to get \"write\" lock");
    blk_unref(a);

    /* A reader cannot join a writer, unless it shares everything. */
    a = open_image(path, WRITER, NULL, false, &error_abort);
    assert_conflict(path, READER, "Failed to get shared \"write\" lock");
    blk_unref(open_image(path, 0, NULL, true, &error_abort));
    blk_unref(a);
    unlink(path);
}

static void test_locking_off(void)
{
    g_autofree char *path = new_image("off");
    BlockBackend *a = open_image(path, WRITER, NULL, false, &error_abort);
    BlockBackend *b = open_image(path, WRITER, "off", false, &error_abort);
    BlockBackend *c;

    blk_unref(b);
    blk_unref(a);

    /* A node without locking holds no lock either. */
    a = open_image(path, WRITER, "off", false, &error_abort);
    for (int i = 0; i < 4; i++) {
        g_assert_false(byte_locked(path, LOCK_PERM_BASE + i));
        g_assert_false(byte_locked(path, LOCK_SHARED_BASE + i));
    }
    c = open_image(path, WRITER, "on", false, &error_abort);
    blk_unref(c);
    blk_unref(a);
    unlink(path);
}

/* The bytes are the ones QEMU uses, so that both see each other. */
static void test_lock_bytes(void)
{
    g_autofree char *path = new_image("bytes");
    BlockBackend *a = open_image(path, WRITER, NULL, false, &error_abort);

    g_assert_true(byte_locked(path, LOCK_PERM_BASE + 0));   /* read */
    g_assert_true(byte_locked(path, LOCK_PERM_BASE + 1));   /* write */
    g_assert_false(byte_locked(path, LOCK_SHARED_BASE + 0));
    g_assert_true(byte_locked(path, LOCK_SHARED_BASE + 1));
    g_assert_false(byte_locked(path, LOCK_SHARED_BASE + 2)); /* unchanged */
    blk_unref(a);

    /* Without BDRV_O_NO_SHARE (qemu-io) everything is shared. */
    a = open_image(path, BDRV_O_RDWR, NULL, false, &error_abort);
    g_assert_true(byte_locked(path, LOCK_PERM_BASE + 1));
    for (int i = 0; i < 4; i++) {
        g_assert_false(byte_locked(path, LOCK_SHARED_BASE + i));
    }
    blk_unref(a);

    a = open_image(path, READER, NULL, false, &error_abort);
    g_assert_true(byte_locked(path, LOCK_PERM_BASE + 0));
    g_assert_false(byte_locked(path, LOCK_PERM_BASE + 1));
    g_assert_true(byte_locked(path, LOCK_SHARED_BASE + 1));
    blk_unref(a);

    for (int i = 0; i < 4; i++) {
        g_assert_false(byte_locked(path, LOCK_PERM_BASE + i));
        g_assert_false(byte_locked(path, LOCK_SHARED_BASE + i));
    }
    unlink(path);
}

/* Runs a QEMU tool to completion; returns its exit status and stderr. */
static int run_tool(char **argv, char **err_out)
{
    g_autoptr(GError) gerr = NULL;
    int status;

    g_assert_true(g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH |
                               G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                               err_out, &status, &gerr));
    return status;
}

/* A real qemu-io holds a qcow2 image read-write; qblock must see it. */
static void test_qemu_io_holds_image(void)
{
    g_autofree char *qemu_io = g_find_program_in_path("qemu-io");
    g_autofree char *qemu_img = g_find_program_in_path("qemu-img");
    g_autofree char *path = g_build_filename(test_dir, "held.qcow2", NULL);
    g_autofree char *err_text = NULL;
    g_autoptr(GError) gerr = NULL;
    GPid pid;
    int waited;

    if (!qemu_io || !qemu_img) {
        g_test_skip("qemu-io or qemu-img is not installed");
        return;
    }
    {
        char *create[] = { qemu_img, "create", "-q", "-f", "qcow2", path,
                           "1M", NULL };

        g_assert_cmpint(run_tool(create, &err_text), ==, 0);
    }
    {
        char *hold[] = { qemu_io, "-c", "sleep 30000", path, NULL };

        g_assert_true(g_spawn_async(NULL, hold, NULL,
                                    G_SPAWN_DO_NOT_REAP_CHILD |
                                    G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                                    &pid, &gerr));
    }
    /* qcow2 unshares writing on its file: byte 201 shows it is open. */
    for (waited = 0; waited < 10000 && !byte_locked(path, LOCK_SHARED_BASE + 1); waited += 20) {
        g_usleep(20 * 1000);
    }
    g_assert_true(byte_locked(path, LOCK_SHARED_BASE + 1));

    assert_conflict(path, WRITER, "Failed to get \"write\" lock");
    assert_conflict(path, READER, "Failed to get shared \"write\" lock");

    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    g_spawn_close_pid(pid);
    blk_unref(open_image(path, WRITER, NULL, false, &error_abort));
    unlink(path);
}

/* qblock holds an image read-write; a real qemu-io must be refused. */
static void test_qemu_io_refused(void)
{
    g_autofree char *qemu_io = g_find_program_in_path("qemu-io");
    g_autofree char *path = new_image("ours");
    g_autofree char *err_text = NULL;
    g_autofree char *hint = g_strdup_printf(
        "Is another process using the image [%s]?", path);
    char *argv[] = { qemu_io, "-f", "raw", "-c", "read 0 512", path, NULL };
    BlockBackend *a;

    if (!qemu_io) {
        g_test_skip("qemu-io is not installed");
        unlink(path);
        return;
    }
    a = open_image(path, WRITER, NULL, false, &error_abort);
    g_assert_cmpint(run_tool(argv, &err_text), !=, 0);
    g_assert_nonnull(strstr(err_text, "Failed to get \"write\" lock"));
    g_assert_nonnull(strstr(err_text, hint));
    blk_unref(a);

    g_free(err_text);
    err_text = NULL;
    g_assert_cmpint(run_tool(argv, &err_text), ==, 0);
    unlink(path);
}

int main(int argc, char **argv)
{
    g_autofree char *tmpl = g_build_filename(g_get_tmp_dir(),
                                             "qblock-locking-XXXXXX", NULL);
    int ret;

    g_test_init(&argc, &argv, NULL);
    qemu_init_progname(argv[0]);
    bdrv_init();
    test_dir = g_mkdtemp(tmpl);
    g_assert_nonnull(test_dir);

    g_test_add_func("/locking/writer-writer", test_writer_writer);
    g_test_add_func("/locking/reader-reader", test_reader_reader);
    g_test_add_func("/locking/reader-writer", test_reader_writer);
    g_test_add_func("/locking/off", test_locking_off);
    g_test_add_func("/locking/bytes", test_lock_bytes);
    g_test_add_func("/locking/qemu-io-holds-image", test_qemu_io_holds_image);
    g_test_add_func("/locking/qemu-io-refused", test_qemu_io_refused);

    ret = g_test_run();
    rmdir(test_dir);
    return ret;
}
