/*
 * Character devices of the storage daemon (see chardev.h).
 *
 * Invariants:
 *  1. A device with a user hands every connection to it at once; one
 *     without keeps them in chr->waiting (fds it still owns).
 *  2. A listening device removes its socket file at cleanup only if the
 *     path still names the socket it bound (same device and inode), so a
 *     newer daemon's socket at the same path survives an older one's exit.
 *     One on an inherited socket (fd=) has no path: whoever bound the
 *     socket owns its file.
 *  3. A listening device's socket is registered with the loop except for
 *     SOCKET_ACCEPT_BACKOFF_NS after an accept that failed for lack of
 *     descriptors or memory (chr->backoff, util/accept-backoff.h), which
 *     is logged once until a connection is accepted again.
 *  4. A ring buffer holds at most ring_size bytes, a power of 2:
 *     ring_prod - ring_cons <= ring_size, the oldest bytes overwritten
 *     first.
 *
 * The sockets themselves are util/qemu-sockets.c's; what is the
 * chardev's own is who gets a connection and when (wait=on).
 */
#include "chardev.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "util/accept-backoff.h"
#include "util/aio.h"
#include "util/sockets.h"

typedef enum ChardevKind {
    CHARDEV_SOCKET_SERVER,
    CHARDEV_SOCKET_CLIENT,
    CHARDEV_STDIO,
    CHARDEV_NULL,
    CHARDEV_FILE,
    CHARDEV_RINGBUF,
} ChardevKind;

#define CHARDEV_RINGBUF_DEFAULT_SIZE (64 * 1024)
/* QEMU's limit is 1 GiB; one QMP command need not cost that much memory */
#define CHARDEV_RINGBUF_MAX_SIZE (64 * 1024 * 1024)

struct Chardev {
    char *id;
    ChardevKind kind;
    const char *backend;        /* its kind's name: "memory" is a ringbuf */
    /* sockets: unix (an absolute path), inet, or an inherited fd */
    SocketAddress *addr;
    char *where;                /* "unix:PATH", "tcp:HOST:PORT": messages */
    int listen_fd;              /* server: -1 once closed */
    SocketUnixFile sock_file;   /* server: what the path named after bind */
    bool wait;                  /* server: wait=on and no client yet */
    AcceptBackoff backoff;      /* server: invariant 3 */
    GArray *waiting;            /* int pairs (in, out) without a user */
    unsigned connections;       /* handed out and not ended (query-chardev) */
    char *peer;                 /* TCP server: the last client, "HOST:PORT" */
    ChardevConnectFunc *connect;
    void *opaque;
    /*
     * ringbuf: invariant 4.  ring_prod and ring_cons count every byte
     * written and read; the bytes in [ring_cons, ring_prod) are
     * ring[i & (ring_size - 1)].
     */
    uint8_t *ring;
    uint64_t ring_size;
    uint64_t ring_prod;
    uint64_t ring_cons;
};

/* Chardev *, in creation order */
static GPtrArray *chardevs;

Chardev *chardev_find(const char *id, Error **errp)
{
    for (guint i = 0; chardevs && i < chardevs->len; i++) {
        Chardev *chr = g_ptr_array_index(chardevs, i);

        if (!strcmp(chr->id, id)) {
            return chr;
        }
    }
    error_setg(errp, "chardev \"%s\" not found", id);
    return NULL;
}

static void chardev_deliver(Chardev *chr, int in_fd, int out_fd)
{
    chr->connections++;
    if (chr->connect) {
        chr->connect(chr->opaque, in_fd, out_fd);
    } else {
        int fds[2] = { in_fd, out_fd };

        g_array_append_vals(chr->waiting, fds, 2);
    }
}

static void chardev_accept(void *opaque);

/* Invariant 3: the backoff began or ended. */
static void chardev_backoff_changed(void *opaque)
{
    Chardev *chr = opaque;
    bool on = !accept_backoff_active(&chr->backoff);

    aio_set_fd_handler_rare(qemu_get_aio_context(), chr->listen_fd,
                            on ? chardev_accept : NULL, NULL, chr);
}

/* "HOST:PORT" of a TCP socket's own (getsockname) or peer's address. */
static char *chardev_sockname(int fd,
                              int (*get)(int, struct sockaddr *, socklen_t *))
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[INET6_ADDRSTRLEN], port[8];

    if (get(fd, (struct sockaddr *)&ss, &len) < 0 ||
        (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
        getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port,
                    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV)) {
        return NULL;
    }
    return g_strdup_printf("%s:%s", host, port);
}

static void chardev_accept(void *opaque)
{
    Chardev *chr = opaque;
    int fd = socket_accept(chr->listen_fd);

    if (accept_backoff_check(&chr->backoff, fd,
                             "chardev '%s': accepting a connection on %s",
                             chr->id, chr->where)) {
        return;
    }
    if (fd < 0) {
        /* EAGAIN: another wake-up took it; anything else is the client's */
        return;
    }
    chr->wait = false;
    g_free(chr->peer);
    chr->peer = chardev_sockname(fd, getpeername);
    chardev_deliver(chr, fd, fd);
}

/* A stale socket at the path is replaced; any other file is not. */
static int chardev_listen(Chardev *chr, Error **errp)
{
    /* several clients may connect at once: give them some backlog */
    int fd = chr->addr->type == SOCKET_ADDRESS_TYPE_UNIX ?
             socket_listen_unix(chr->addr->path, 16, &chr->sock_file, errp) :
             socket_listen(chr->addr, 16, errp);

    if (fd < 0) {
        return fd;
    }
    chr->listen_fd = fd;
    accept_backoff_init(&chr->backoff, qemu_get_aio_context(),
                        chardev_backoff_changed, chr);
    aio_set_fd_handler_rare(qemu_get_aio_context(), fd, chardev_accept, NULL,
                            chr);
    return 0;
}

static int chardev_connect(Chardev *chr, Error **errp)
{
    int fd = socket_connect(chr->addr, errp);

    if (fd < 0) {
        return fd;
    }
    /* the monitor reads it from the event loop */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    chardev_deliver(chr, fd, fd);
    return 0;
}

static void chardev_free(Chardev *chr)
{
    /* stdio's descriptors stay open for the messages at exit */
    for (guint i = 0; chr->kind != CHARDEV_STDIO &&
                      i + 1 < chr->waiting->len; i += 2) {
        int in_fd = g_array_index(chr->waiting, int, i);
        int out_fd = g_array_index(chr->waiting, int, i + 1);

        close(in_fd);
        if (out_fd != in_fd) {
            close(out_fd);
        }
    }
    g_array_unref(chr->waiting);
    g_free(chr->id);
    socket_address_free(chr->addr);
    g_free(chr->where);
    g_free(chr->peer);
    g_free(chr->ring);
    g_free(chr);
}

/*
 * Where a listening device listens, as QEMU names it in "waiting for
 * connection on" (an inherited socket's own address).
 */
static char *chardev_local_name(Chardev *chr)
{
    struct sockaddr_un un;
    socklen_t len = sizeof(un);
    g_autofree char *tcp = NULL;

    if (chr->addr->type == SOCKET_ADDRESS_TYPE_UNIX) {
        return g_strdup_printf("unix:%s", chr->addr->path);
    }
    tcp = chardev_sockname(chr->listen_fd, getsockname);
    if (tcp) {
        return g_strdup_printf("tcp:%s", tcp);
    }
    if (getsockname(chr->listen_fd, (struct sockaddr *)&un, &len) == 0 &&
        un.sun_family == AF_UNIX) {
        return g_strdup_printf("unix:%s", un.sun_path);
    }
    return g_strdup_printf("fd:%s", chr->addr->str);
}

/* stdio, null, file: one connection, there from the start */
static int chardev_open_fds(Chardev *chr, JsonObject *opts, Error **errp)
{
    const char *out = json_object_get_string_member_with_default(
                          opts, "path", "/dev/null");
    const char *in = json_object_get_string_member_with_default(
                         opts, "input-path", "/dev/null");
    bool append = json_object_get_boolean_member_with_default(opts, "append",
                                                              false);
    int in_fd, out_fd;

    if (chr->kind == CHARDEV_STDIO) {
        chardev_deliver(chr, STDIN_FILENO, STDOUT_FILENO);
        return 0;
    }
    out_fd = open(out, O_WRONLY | O_CREAT | O_CLOEXEC |
                  (append ? O_APPEND : O_TRUNC), 0666);
    if (out_fd < 0) {
        int ret = -errno;

        error_setg_errno(errp, -ret, "Could not open '%s'", out);
        return ret;
    }
    in_fd = open(in, O_RDONLY | O_CLOEXEC);
    if (in_fd < 0) {
        int ret = -errno;

        error_setg_errno(errp, errno, "Could not open '%s'", in);
        close(out_fd);
        return ret;
    }
    chardev_deliver(chr, in_fd, out_fd);
    return 0;
}

static int chardev_open_ringbuf(Chardev *chr, JsonObject *opts,
                                Error **errp)
{
    int64_t size = json_object_has_member(opts, "size") ?
                   json_object_get_int_member(opts, "size") :
                   CHARDEV_RINGBUF_DEFAULT_SIZE;

    /*
     * Invariant 4.  QEMU takes 0, and its ring of 0 bytes then writes
     * outside itself; a size is also bounded, as any allocation a
     * client asks for.
     */
    if (size <= 0 || (size & (size - 1))) {
        error_setg(errp, "size of ringbuf chardev must be power of two");
        return -EINVAL;
    }
    if (size > CHARDEV_RINGBUF_MAX_SIZE) {
        error_setg(errp, "size of ringbuf chardev must be at most %d MiB",
                   CHARDEV_RINGBUF_MAX_SIZE >> 20);
        return -EINVAL;
    }
    chr->ring_size = size;
    chr->ring = g_try_malloc(size);
    if (!chr->ring) {
        error_setg(errp, "Could not allocate a ring buffer of %" PRId64
                   " bytes", size);
        return -ENOMEM;
    }
    return 0;
}

static int chardev_open_socket(Chardev *chr, JsonObject *opts, Error **errp)
{
    const char *path = json_object_get_string_member_with_default(
                           opts, "path", NULL);
    const char *host = json_object_get_string_member_with_default(
                           opts, "host", NULL);
    const char *port = json_object_get_string_member_with_default(
                           opts, "port", NULL);
    const char *fd = json_object_get_string_member_with_default(opts, "fd",
                                                                NULL);
    int ret;

    if (!!path + !!fd + !!host > 1) {
        /* QEMU's words */
        error_setg(errp, "None or one of 'path', 'fd' or 'host' option "
                   "required.");
        return -EINVAL;
    }
    if (!path && !fd && !host) {
        /* QEMU waits on no socket at all, for ever */
        error_setg(errp, "A socket needs 'path', 'fd' or 'host'");
        return -EINVAL;
    }
    if (!host != !port) {
        error_setg(errp, "A TCP socket needs 'host' and 'port'");
        return -EINVAL;
    }
    if (path) {
        /* absolute: the daemon may chdir("/") when it daemonizes */
        g_autofree char *cwd = g_get_current_dir();
        g_autofree char *abs = g_canonicalize_filename(path, cwd);

        chr->addr = socket_address_new_unix(abs);
    } else {
        chr->addr = host ? socket_address_new_inet(host, port)
                         : socket_address_new_fd(fd);
    }
    if (!json_object_get_boolean_member_with_default(opts, "server",
                                                     false)) {
        chr->kind = CHARDEV_SOCKET_CLIENT;
        return chardev_connect(chr, errp);
    }
    chr->kind = CHARDEV_SOCKET_SERVER;
    chr->wait = json_object_get_boolean_member_with_default(opts, "wait",
                                                            true);
    ret = chardev_listen(chr, errp);
    if (ret == 0) {
        chr->where = chardev_local_name(chr);
    }
    return ret;
}

/* A device from @opts, not yet in the list (chardev-change swaps it in). */
static Chardev *chardev_new(JsonObject *opts, Error **errp)
{
    static const struct {
        const char *name;
        ChardevKind kind;
    } kinds[] = {
        { "socket", CHARDEV_SOCKET_CLIENT },
        { "stdio", CHARDEV_STDIO },
        { "null", CHARDEV_NULL },
        { "file", CHARDEV_FILE },
        { "ringbuf", CHARDEV_RINGBUF },
        { "memory", CHARDEV_RINGBUF },
    };
    const char *backend = json_object_get_string_member(opts, "backend");
    Chardev *chr = g_new0(Chardev, 1);
    int ret;

    chr->id = g_strdup(json_object_get_string_member(opts, "id"));
    chr->listen_fd = -1;
    chr->waiting = g_array_new(false, false, sizeof(int));
    for (size_t i = 0; i < G_N_ELEMENTS(kinds); i++) {
        if (!strcmp(backend, kinds[i].name)) {
            chr->backend = kinds[i].name;
            chr->kind = kinds[i].kind;
        }
    }
    /* the schema admits no other kind */
    assert(chr->backend);
    if (chr->kind == CHARDEV_STDIO && chardev_stdio_in_use()) {
        /* QEMU's words */
        error_setg(errp, "cannot use stdio by multiple character devices");
        chardev_free(chr);
        return NULL;
    }
    switch (chr->kind) {
    case CHARDEV_SOCKET_CLIENT:
        ret = chardev_open_socket(chr, opts, errp);
        break;
    case CHARDEV_RINGBUF:
        ret = chardev_open_ringbuf(chr, opts, errp);
        break;
    default:
        ret = chardev_open_fds(chr, opts, errp);
        break;
    }
    if (ret < 0) {
        chardev_free(chr);
        return NULL;
    }
    return chr;
}

bool chardev_stdio_in_use(void)
{
    for (guint i = 0; chardevs && i < chardevs->len; i++) {
        Chardev *chr = g_ptr_array_index(chardevs, i);

        if (chr->kind == CHARDEV_STDIO) {
            return true;
        }
    }
    return false;
}

Chardev *chardev_add(JsonObject *opts, Error **errp)
{
    const char *id = json_object_get_string_member(opts, "id");
    Chardev *chr;

    if (chardev_find(id, NULL)) {
        error_setg(errp, "Duplicate chardev id '%s'", id);
        return NULL;
    }
    chr = chardev_new(opts, errp);
    if (!chr) {
        return NULL;
    }
    if (!chardevs) {
        chardevs = g_ptr_array_new();
    }
    g_ptr_array_add(chardevs, chr);
    return chr;
}

int chardev_attach(Chardev *chr, ChardevConnectFunc *fn, void *opaque,
                   Error **errp)
{
    g_autoptr(GArray) waiting = NULL;

    if (chr->connect) {
        error_setg(errp, "Device '%s' is in use", chr->id);
        return -EBUSY;
    }
    if (chr->kind == CHARDEV_RINGBUF) {
        error_setg(errp, "chardev '%s': a %s device cannot carry a monitor",
                   chr->id, chr->backend);
        return -ENOTSUP;
    }
    chr->connect = fn;
    chr->opaque = opaque;
    waiting = chr->waiting;
    chr->waiting = g_array_new(false, false, sizeof(int));
    for (guint i = 0; i + 1 < waiting->len; i += 2) {
        fn(opaque, g_array_index(waiting, int, i),
           g_array_index(waiting, int, i + 1));
    }
    return 0;
}

bool chardev_is_waiting(Chardev *chr)
{
    return chr->kind == CHARDEV_SOCKET_SERVER && chr->wait;
}

char *chardev_describe(Chardev *chr)
{
    return g_strdup_printf("disconnected:%s,server=on", chr->where);
}

bool chardev_fd_is_pollable(int fd)
{
    /* the event loop is what will watch it: ask the event loop */
    return aio_fd_can_be_watched(fd);
}

static void chardev_close(Chardev *chr)
{
    if (chr->listen_fd >= 0) {
        aio_set_fd_handler(qemu_get_aio_context(), chr->listen_fd, NULL,
                           NULL, NULL);
        close(chr->listen_fd);
        chr->listen_fd = -1;
        accept_backoff_cleanup(&chr->backoff);
        /* invariant 2 */
        if (chr->addr->type == SOCKET_ADDRESS_TYPE_UNIX) {
            socket_unlink_unix(chr->addr->path, &chr->sock_file);
        }
    }
    chardev_free(chr);
}

/* ---- at run time: chardev-add, -change, -remove, ringbufs ---- */

int chardev_remove(const char *id, Error **errp)
{
    Chardev *chr = chardev_find(id, NULL);

    if (!chr) {
        error_setg(errp, "Chardev '%s' not found", id);
        return -ENOENT;
    }
    if (chr->connect) {
        error_setg(errp, "Chardev '%s' is busy", id);
        return -EBUSY;
    }
    g_ptr_array_remove(chardevs, chr);
    chardev_close(chr);
    return 0;
}

int chardev_change(JsonObject *opts, Error **errp)
{
    const char *id = json_object_get_string_member(opts, "id");
    Chardev *old = chardev_find(id, NULL);
    Chardev *chr;
    guint index;

    if (!old) {
        error_setg(errp, "Chardev '%s' does not exist", id);
        return -ENOENT;
    }
    if (old->connect) {
        /* QEMU's words: its monitors cannot change devices either */
        error_setg(errp, "Chardev user does not support chardev hotswap");
        return -EBUSY;
    }
    /* the old device stays if the new one cannot be made (QEMU drops it) */
    chr = chardev_new(opts, errp);
    if (!chr) {
        return -EINVAL;
    }
    g_assert(g_ptr_array_find(chardevs, old, &index));
    g_ptr_array_index(chardevs, index) = chr;
    chardev_close(old);
    return 0;
}

void chardev_foreach(void (*fn)(Chardev *chr, void *opaque), void *opaque)
{
    for (guint i = 0; chardevs && i < chardevs->len; i++) {
        fn(g_ptr_array_index(chardevs, i), opaque);
    }
}

const char *chardev_id(Chardev *chr)
{
    return chr->id;
}

char *chardev_filename(Chardev *chr)
{
    switch (chr->kind) {
    case CHARDEV_SOCKET_SERVER:
        if (!chr->connections) {
            return g_strdup_printf("disconnected:%s,server=on", chr->where);
        }
        /* QEMU names its one client; here the last of those connected */
        return chr->peer ? g_strdup_printf("%s,server=on <-> %s", chr->where,
                                           chr->peer)
                         : g_strdup_printf("%s,server=on", chr->where);
    case CHARDEV_SOCKET_CLIENT:
        switch (chr->addr->type) {
        case SOCKET_ADDRESS_TYPE_INET:
            return g_strdup_printf("tcp:%s:%s", chr->addr->host,
                                   chr->addr->port);
        case SOCKET_ADDRESS_TYPE_UNIX:
            return g_strdup_printf("unix:%s", chr->addr->path);
        case SOCKET_ADDRESS_TYPE_FD:
            break;
        }
        return g_strdup_printf("fd:%s", chr->addr->str);
    default:
        /* "stdio", "null", "file", "ringbuf", "memory", as QEMU says */
        return g_strdup(chr->backend);
    }
}

void chardev_connection_ended(Chardev *chr)
{
    assert(chr->connections > 0);
    chr->connections--;
}

bool chardev_has_user(Chardev *chr)
{
    return chr->connect != NULL;
}

/* The ringbuf device @id, or NULL with QEMU's errors. */
static Chardev *chardev_find_ringbuf(const char *id, Error **errp)
{
    Chardev *chr = chardev_find(id, NULL);

    if (!chr) {
        error_setg(errp, "Device '%s' not found", id);
        return NULL;
    }
    if (chr->kind != CHARDEV_RINGBUF) {
        error_setg(errp, "%s is not a ringbuf device", id);
        return NULL;
    }
    return chr;
}

int chardev_ringbuf_write(const char *id, const uint8_t *buf, size_t len,
                          Error **errp)
{
    Chardev *chr = chardev_find_ringbuf(id, errp);

    if (!chr) {
        return -EINVAL;
    }
    /* only the last ring_size bytes can stay */
    if (len > chr->ring_size) {
        chr->ring_prod += len - chr->ring_size;
        buf += len - chr->ring_size;
        len = chr->ring_size;
    }
    while (len) {
        uint64_t at = chr->ring_prod & (chr->ring_size - 1);
        size_t n = MIN(len, chr->ring_size - at);

        memcpy(chr->ring + at, buf, n);
        chr->ring_prod += n;
        buf += n;
        len -= n;
    }
    /* invariant 4: a full ring loses its oldest bytes */
    if (chr->ring_prod - chr->ring_cons > chr->ring_size) {
        chr->ring_cons = chr->ring_prod - chr->ring_size;
    }
    assert(chr->ring_prod - chr->ring_cons <= chr->ring_size);
    return 0;
}

GByteArray *chardev_ringbuf_read(const char *id, int64_t size, Error **errp)
{
    Chardev *chr = chardev_find_ringbuf(id, errp);
    GByteArray *out;

    if (!chr) {
        return NULL;
    }
    if (size <= 0) {
        error_setg(errp, "size must be greater than zero");
        return NULL;
    }
    /* invariant 4: never more than the ring holds */
    size = MIN((uint64_t)size, chr->ring_prod - chr->ring_cons);
    out = g_byte_array_sized_new(size);
    while (size) {
        uint64_t at = chr->ring_cons & (chr->ring_size - 1);
        size_t n = MIN((uint64_t)size, chr->ring_size - at);

        g_byte_array_append(out, chr->ring + at, n);
        chr->ring_cons += n;
        size -= n;
    }
    return out;
}

void chardev_cleanup(void)
{
    if (!chardevs) {
        return;
    }
    for (guint i = 0; i < chardevs->len; i++) {
        chardev_close(g_ptr_array_index(chardevs, i));
    }
    g_ptr_array_unref(chardevs);
    chardevs = NULL;
}
