/*
 * fuzz-qmp: bytes from a QMP client, through the storage daemon's own
 * monitor: a unix socket chardev (server=on, wait=off) in a private
 * directory, monitor_add() on it, and per input one connection that sends
 * the input, half-closes and reads the replies until the monitor hangs up.
 * That runs the session code (greeting, negotiation mode, framing by the
 * JsonStreamer, its limits and resynchronisation, output queueing) and
 * qmp_dispatch() with the schema's argument checks for every command.
 *
 * The monitor's own commands (qmp_capabilities, query-version),
 * query-commands, query-qmp-schema and the character device commands
 * that touch no host file or socket (ringbuf-write and -read on a ring
 * made at start, query-chardev, chardev-send-break; not chardev-remove,
 * which would take the ring away from the inputs after it) are
 * the real ones.  Every other command of the schema
 * gets a stub that returns {}: its arguments are checked as for the real
 * command, but nothing runs, because blockdev-add, nbd-server-start and
 * the like would open host files or bind sockets at the fuzzer's whim.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include "fuzz-pump.h"

#include "block/block_int.h"
#include "storage-daemon/chardev.h"
#include "storage-daemon/chardev-qmp.h"
#include "storage-daemon/monitor.h"
#include "storage-daemon/qmp-dispatch.h"

static char *fuzz_qmp_dir;
static char *fuzz_qmp_path;

static void fuzz_qmp_stub(JsonObject *args, JsonNode **ret, Error **errp)
{
}

/* The real implementations (header comment); the rest are stubs. */
static bool fuzz_qmp_is_real_chardev(const char *name)
{
    return !strcmp(name, "ringbuf-write") ||
           !strcmp(name, "ringbuf-read") ||
           !strcmp(name, "query-chardev") ||
           !strcmp(name, "query-chardev-backends") ||
           !strcmp(name, "chardev-send-break");
}

static bool fuzz_qmp_is_real(const char *name)
{
    return !strcmp(name, "qmp_capabilities") ||
           !strcmp(name, "query-version") ||
           !strcmp(name, "query-commands") ||
           !strcmp(name, "query-qmp-schema") ||
           fuzz_qmp_is_real_chardev(name);
}

static void fuzz_qmp_cleanup(void)
{
    monitor_cleanup();
    chardev_cleanup();
    rmdir(fuzz_qmp_dir);
}

static void fuzz_qmp_init(void)
{
    g_autoptr(JsonObject) chr = json_object_new();
    g_autoptr(JsonObject) mon = json_object_new();

    if (fuzz_qmp_dir) {
        return;
    }
    bdrv_init();
    qmp_register_dispatch_commands();
    chardev_register_commands(fuzz_qmp_is_real_chardev);
    monitor_init();
    for (const QapiCommand *c = qapi_commands; c->name; c++) {
        if (!fuzz_qmp_is_real(c->name)) {
            qmp_register_command(c->name, fuzz_qmp_stub);
        }
    }
    fuzz_qmp_dir = g_dir_make_tmp("fuzz-qmp-XXXXXX", NULL);
    assert(fuzz_qmp_dir);
    fuzz_qmp_path = g_build_filename(fuzz_qmp_dir, "qmp.sock", NULL);
    json_object_set_string_member(chr, "id", "qmp0");
    json_object_set_string_member(chr, "backend", "socket");
    json_object_set_string_member(chr, "path", fuzz_qmp_path);
    json_object_set_boolean_member(chr, "server", true);
    json_object_set_boolean_member(chr, "wait", false);
    if (!chardev_add(chr, &error_abort)) {
        abort();
    }
    /* a ring for ringbuf-write and -read: "r0", 4 KiB */
    {
        g_autoptr(JsonObject) ring = json_object_new();

        json_object_set_string_member(ring, "id", "r0");
        json_object_set_string_member(ring, "backend", "ringbuf");
        json_object_set_int_member(ring, "size", 4096);
        if (!chardev_add(ring, &error_abort)) {
            abort();
        }
    }
    json_object_set_string_member(mon, "chardev", "qmp0");
    if (monitor_add(mon, &error_abort) < 0) {
        abort();
    }
    atexit(fuzz_qmp_cleanup);
}

static int fuzz_qmp_connect(void)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert(fd >= 0);
    g_strlcpy(sun.sun_path, fuzz_qmp_path, sizeof(sun.sun_path));
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        abort();
    }
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_qmp_init();
    fuzz_pump(fuzz_qmp_connect(), data, size);
    return 0;
}
