/*
 * The pr-manager-helper object type (--object pr-manager-helper,
 * object-add): a connection to qemu-pr-helper, the privileged program
 * that QEMU's SCSI passthrough devices (scsi-block, scsi-generic) send
 * guest persistent reservation commands to.
 *
 * The protocol (QEMU's docs/interop/pr-helper.rst), big-endian: on
 * connection the helper sends four bytes of features, and the client
 * answers with the four bytes of features it will use; commands follow.
 * qblock has no SCSI passthrough, so it sends no command: the object
 * connects and shakes hands when it is created (a helper that is not
 * there is an error of object-add, in QEMU's words), and, as QEMU does
 * before a command, connects again when the helper has gone away, which
 * qom-get of "connected" (a qblock addition) shows and triggers.
 *
 * Invariant 1: fd is -1 or a connection whose handshake succeeded.
 */
#include "util/osdep.h"

#include <poll.h>
#include <sys/socket.h>

#include "util/json.h"
#include "util/sockets.h"
#include "util/user-object.h"

#define PR_MANAGER_HELPER_TYPE "pr-manager-helper"

/*
 * The features this client knows: none (the protocol defines no
 * feature bit yet), so it always answers 0, as QEMU 7.2 does.
 */
#define PR_HELPER_FEATURES_KNOWN 0

/*
 * How long the helper may take to send its features.  QEMU waits for
 * ever; a helper that accepts and says nothing would then stop the
 * whole daemon, so qblock gives up after this long.
 */
#define PR_HELPER_HANDSHAKE_TIMEOUT_S 10

typedef struct PrManagerHelper {
    char *path;                 /* qom-set changes it for the next connect */
    int fd;                     /* invariant 1 */
} PrManagerHelper;

/* Reads @len bytes, with QEMU's messages for a short read. */
static bool pr_helper_read_all(int fd, void *buf, size_t len, Error **errp)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = recv(fd, (char *)buf + done, len - done, 0);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            error_setg(errp, "No handshake from the persistent reservation "
                       "helper within %d seconds",
                       PR_HELPER_HANDSHAKE_TIMEOUT_S);
            return false;
        }
        if (n < 0) {
            error_setg_errno(errp, errno, "Unable to read from socket");
            return false;
        }
        if (n == 0) {
            error_setg(errp, "Unexpected end-of-file before all data were "
                       "read");
            return false;
        }
        done += n;
    }
    return true;
}

static bool pr_helper_write_all(int fd, const void *buf, size_t len,
                                Error **errp)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = send(fd, (const char *)buf + done, len - done,
                         MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            error_setg_errno(errp, errno, "Unable to write to socket");
            return false;
        }
        done += n;
    }
    return true;
}

/* Connects to s->path and shakes hands; s->fd is set on success. */
static bool pr_helper_connect(PrManagerHelper *s, Error **errp)
{
    g_autoptr(SocketAddress) addr = socket_address_new_unix(s->path);
    struct timeval tv = { .tv_sec = PR_HELPER_HANDSHAKE_TIMEOUT_S };
    uint32_t features;
    int fd;

    assert(s->fd < 0);
    fd = socket_connect(addr, errp);
    if (fd < 0) {
        return false;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (!pr_helper_read_all(fd, &features, sizeof(features), errp)) {
        close(fd);
        return false;
    }
    features = GUINT32_TO_BE(GUINT32_FROM_BE(features) &
                             PR_HELPER_FEATURES_KNOWN);
    if (!pr_helper_write_all(fd, &features, sizeof(features), errp)) {
        close(fd);
        return false;
    }
    s->fd = fd;                 /* invariant 1 */
    return true;
}

/*
 * Whether the connection is still up: the helper speaks only when asked,
 * so a connection with something to read was closed (or broke the
 * protocol) and is dropped.
 */
static bool pr_helper_still_up(PrManagerHelper *s)
{
    struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
    int ret = poll(&pfd, 1, 0);

    if (ret == 0 || (ret < 0 && errno == EINTR)) {
        return true;
    }
    close(s->fd);
    s->fd = -1;
    return false;
}

/* Connected, connecting again first if the helper went away (QEMU's). */
static bool pr_helper_ensure_connected(PrManagerHelper *s)
{
    if (s->fd >= 0 && pr_helper_still_up(s)) {
        return true;
    }
    return pr_helper_connect(s, NULL);
}

static void pr_helper_destroy(void *state)
{
    PrManagerHelper *s = state;

    if (s->fd >= 0) {
        close(s->fd);
    }
    g_free(s->path);
    g_free(s);
}

static void *pr_helper_create(const char *id, JsonObject *props,
                              Error **errp)
{
    PrManagerHelper *s = g_new0(PrManagerHelper, 1);

    s->fd = -1;
    s->path = g_strdup(json_object_get_string_member(props, "path"));
    if (!pr_helper_connect(s, errp)) {
        pr_helper_destroy(s);
        return NULL;
    }
    return s;
}

/* qom-set of path: as QEMU, taken for the next connection. */
static bool pr_helper_set_property(void *state, const char *name,
                                   JsonNode *value, Error **errp)
{
    PrManagerHelper *s = state;

    if (!user_object_check_property(PR_MANAGER_HELPER_TYPE, name, value,
                                    errp)) {
        return false;
    }
    g_free(s->path);
    s->path = g_strdup(json_node_get_string(value));
    return true;
}

static JsonNode *pr_helper_get_property(void *state, const char *name)
{
    PrManagerHelper *s = state;

    if (!strcmp(name, "path")) {
        return json_node_init_string(json_node_alloc(), s->path);
    }
    if (!strcmp(name, "connected")) {
        return json_node_init_boolean(json_node_alloc(),
                                      pr_helper_ensure_connected(s));
    }
    return NULL;
}

static const UserObjectType pr_manager_helper_type = {
    .name = PR_MANAGER_HELPER_TYPE,
    .create = pr_helper_create,
    .destroy = pr_helper_destroy,
    .set_property = pr_helper_set_property,
    .get_property = pr_helper_get_property,
};
user_object_type_init(pr_manager_helper_type)
