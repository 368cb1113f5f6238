/*
 * Stream sockets: addresses, listening and connecting (TCP and unix), and
 * sockets the process inherited, named by number (fd addresses): one to
 * listen on, or a connection.
 *
 * Sockets are created close-on-exec.  Listening sockets are non-blocking
 * (the event loop accepts from them); connected client sockets are
 * blocking, for tools that talk to a server step by step, except those
 * of socket_connect_start() (a connect that must not block).  Error
 * messages are QEMU's, since scripts written for QEMU's tools match them.
 */
#ifndef QBLOCK_SOCKETS_H
#define QBLOCK_SOCKETS_H

#include "util/osdep.h"
#include "util/error.h"

typedef enum SocketAddressType {
    SOCKET_ADDRESS_TYPE_INET,
    SOCKET_ADDRESS_TYPE_UNIX,
    /* a socket the process inherited, by number */
    SOCKET_ADDRESS_TYPE_FD,
} SocketAddressType;

typedef struct SocketAddress {
    SocketAddressType type;
    char *host;                 /* inet: name or numeric address */
    char *port;                 /* inet: number or service name */
    char *path;                 /* unix */
    char *str;                  /* fd: the descriptor's number */
} SocketAddress;

SocketAddress *socket_address_new_inet(const char *host, const char *port);
SocketAddress *socket_address_new_unix(const char *path);
SocketAddress *socket_address_new_fd(const char *str);
void socket_address_free(SocketAddress *addr);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SocketAddress, socket_address_free)
/* "host:port", the path or "fd:N", for messages (caller frees). */
char *socket_address_to_string(const SocketAddress *addr);

/*
 * Creates a socket listening on @addr with room for @backlog pending
 * connections.  TCP binds the first address @addr resolves to that can be
 * bound (as QEMU does); unix replaces a stale socket at the path, but
 * never a file of another kind, and makes the path appear only once the
 * socket listens (a client that waits for the path is never refused).
 * An fd address is a socket the process inherited (bound by whoever
 * started it, listening or not): it must be one, and is made to listen;
 * the caller owns it from then on, as any listening socket.
 * Returns the fd or -errno.
 */
int socket_listen(const SocketAddress *addr, int backlog, Error **errp);

/*
 * While a monitor command runs, QEMU takes an fd address's string as the
 * name of a descriptor the monitor was handed (getfd), never as a number:
 * a command may not pick up any descriptor of the process by guessing its
 * number.  The storage daemon sets this around each command; it has no
 * named descriptors (nor has qemu-storage-daemon), so such an address
 * then fails, with qemu-storage-daemon's "only QEMU supports file
 * descriptor passing".
 */
void socket_set_fd_names_only(bool on);

/*
 * What a listening unix socket's file was when it was bound, so that it
 * is removed only while the path still names it: a newer listener's
 * socket at the same path (another process that replaced it as stale)
 * survives the older one's close.
 */
typedef struct SocketUnixFile {
    dev_t dev;
    ino_t ino;
} SocketUnixFile;

/*
 * socket_listen() on the unix socket @path, recording in @file (NULL:
 * not needed) what the path names once bound.
 */
int socket_listen_unix(const char *path, int backlog, SocketUnixFile *file,
                       Error **errp);
/* Removes @path if it still names the socket recorded in @file. */
void socket_unlink_unix(const char *path, const SocketUnixFile *file);

/*
 * Connects to @addr (blocking).  An fd address is a connection the
 * process inherited, taken as it is (blocking from then on, its caller's).
 * Returns the fd or -errno.
 */
int socket_connect(const SocketAddress *addr, Error **errp);

/*
 * A connection made without blocking, for callers that must bound or
 * abandon it: a TCP connect() to a host that drops the SYNs (down, behind
 * a firewall, a listener whose backlog is full) waits for the kernel's
 * retries, about two minutes, and a unix one to a server whose backlog is
 * full waits until that server accepts.
 *
 * socket_connect_start() and socket_connect_continue() return the
 * connected fd (non-blocking, close-on-exec, TCP_NODELAY on TCP), or:
 *   -EINPROGRESS   wait until @c->fd is writable (poll, the event loop),
 *                  then call socket_connect_continue();
 *   -EAGAIN        the unix server's backlog is full: nothing to wait on,
 *                  call socket_connect_continue() after a pause;
 *   another -errno with @errp set (QEMU's message); @c is then done.
 * The addresses @addr resolves to are tried in turn, as socket_connect()
 * does; an fd address is refused (there is nothing to connect).
 * socket_connect_abort() ends an attempt still under way (any number of
 * times; harmless on one that ended).
 */
struct addrinfo;

typedef struct SocketConnect {
    char *name;                 /* "host:port" or the path, for messages */
    int fd;                     /* connecting; -1 when none */
    int last_err;               /* errno of the last address that failed */
    struct addrinfo *res;       /* inet: what the name resolved to */
    struct addrinfo *next;      /* inet: the address to try after fd's */
    char *path;                 /* unix */
} SocketConnect;

int socket_connect_start(SocketConnect *c, const SocketAddress *addr,
                         Error **errp);
int socket_connect_continue(SocketConnect *c, Error **errp);
void socket_connect_abort(SocketConnect *c);

/*
 * socket_connect() that gives up at @deadline (g_get_monotonic_time()):
 * then it fails with -ETIMEDOUT and QEMU's "Failed to connect to 'X':
 * Connection timed out".  Returns a blocking fd, as socket_connect().
 */
int socket_connect_deadline(const SocketAddress *addr, int64_t deadline,
                            Error **errp);

/* Accepts a connection from @listen_fd: non-blocking, close-on-exec, with
 * TCP_NODELAY on TCP.  Returns the fd or -errno (-EAGAIN when none). */
int socket_accept(int listen_fd);

/*
 * How long a listener stops watching its socket after accept() failed
 * for lack of descriptors or memory (socket_accept_must_back_off()).  The
 * connection stays in the backlog, so a listener left registered with
 * the level-triggered loop would be woken again at once: 100% CPU and a
 * log line per wake-up.  100 ms costs a waiting client little and the
 * loop nothing; the listener logs once per such episode.
 */
#define SOCKET_ACCEPT_BACKOFF_NS    (100 * SCALE_MS)

/* True if socket_accept()'s -errno @err means "out of descriptors or
 * memory": the listener must back off rather than retry at once. */
static inline bool socket_accept_must_back_off(int err)
{
    return err == -EMFILE || err == -ENFILE || err == -ENOBUFS ||
           err == -ENOMEM;
}

#endif
