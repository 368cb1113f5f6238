/*
 * The authz-list-file object type: an authz-list (crypto/authz-list.c)
 * whose properties, {"policy": ..., "rules": [...]}, are a JSON file,
 * read when the object is created, and with refresh=on (the default)
 * again whenever the file is written, replaced or removed.
 *
 * QEMU watches the file with inotify from its event loop.  Here the
 * inotify descriptor (non-blocking) is drained when a verdict is asked
 * for: the file is read again before the first check after a change,
 * which is what a client sees of QEMU's too, and no event loop (of the
 * several programs and threads that check) needs to know about it.  The
 * folder is watched, not the file, so that a file replaced by rename (as
 * editors save) is seen.
 *
 * Invariant 1: while the last read of the file failed, list is NULL and
 * every identity is denied (QEMU documents that), until a read succeeds.
 * Invariant 2: lock guards list and the draining of the descriptor: the
 * checks of TLS handshakes may run in several iothreads at once.
 */
#include "util/osdep.h"

#include <sys/inotify.h>

#include "crypto/tls-authz.h"
#include "qapi-qmp.h"
#include "util/qapi-schema.h"
#include "util/user-object.h"

#define AUTHZ_LIST_FILE_TYPE "authz-list-file"
/*
 * A rules file is a few lines; a bigger one is a mistake, not an ACL,
 * and is refused before it is read into memory.
 */
#define AUTHZ_LIST_FILE_MAX  (1024 * 1024)

typedef struct QAuthZListFile {
    QAuthZ parent;
    char *filename;
    char *basename;             /* the name inotify events carry */
    int inotify_fd;             /* -1 without refresh */
    GMutex lock;
    QAuthZ *list;               /* invariants 1, 2 */
} QAuthZListFile;

/* The file's bytes (NUL-terminated), at most AUTHZ_LIST_FILE_MAX. */
static char *authz_list_file_read(const char *filename, size_t *len,
                                  Error **errp)
{
    int fd = open(filename, O_RDONLY | O_CLOEXEC);
    char *buf;
    size_t n = 0;
    ssize_t ret = 0;

    if (fd < 0) {
        error_setg_errno(errp, errno, "Unable to read '%s'", filename);
        return NULL;
    }
    /* one byte more than allowed, to tell a file that is too long */
    buf = g_malloc(AUTHZ_LIST_FILE_MAX + 2);
    while (n <= AUTHZ_LIST_FILE_MAX &&
           (ret = read(fd, buf + n, AUTHZ_LIST_FILE_MAX + 1 - n)) > 0) {
        n += ret;
    }
    if (ret < 0) {
        error_setg_errno(errp, errno, "Unable to read '%s'", filename);
    } else if (n > AUTHZ_LIST_FILE_MAX) {
        error_setg(errp, "Unable to read '%s': larger than %d bytes",
                   filename, AUTHZ_LIST_FILE_MAX);
    }
    close(fd);
    if (ret < 0 || n > AUTHZ_LIST_FILE_MAX) {
        g_free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return g_realloc(buf, n + 1);
}

/* The file's rules, or NULL with an error naming the file. */
static QAuthZ *authz_list_file_load(const char *filename, Error **errp)
{
    g_autofree char *content = NULL;
    g_autoptr(JsonNode) node = NULL;
    Error *local_err = NULL;
    size_t len;

    content = authz_list_file_read(filename, &len, errp);
    if (!content) {
        return NULL;
    }
    node = json_parse_text(content, len, &local_err);
    if (node && !JSON_NODE_HOLDS_OBJECT(node)) {
        error_setg(&local_err, "the rules must be a JSON object");
    }
    if (!local_err) {
        qapi_check_input(&qapi_type_AuthZListProperties, node,
                         QAPI_INPUT_JSON, &local_err);
    }
    if (local_err) {
        error_setg(errp, "Invalid ACL file '%s': %s", filename,
                   error_get_pretty(local_err));
        error_free(local_err);
        return NULL;
    }
    return qauthz_list_new(json_node_get_object(node));
}

/* Whether an event of the watched folder is about the file. */
static bool authz_list_file_drain(QAuthZListFile *authz)
{
    /* room for a few events with names, aligned as inotify(7) asks */
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool changed = false;
    ssize_t len;

    while ((len = read(authz->inotify_fd, buf, sizeof(buf))) > 0) {
        for (char *p = buf; p < buf + len;) {
            const struct inotify_event *ev = (const void *)p;

            if ((ev->len && !strcmp(ev->name, authz->basename)) ||
                (ev->mask & IN_Q_OVERFLOW)) {
                changed = true;
            }
            p += sizeof(*ev) + ev->len;
        }
    }
    return changed;
}

/* Invariant 2: called with the lock held. */
static void authz_list_file_refresh(QAuthZListFile *authz)
{
    Error *local_err = NULL;

    if (authz->inotify_fd < 0 || !authz_list_file_drain(authz)) {
        return;
    }
    if (authz->list) {
        qauthz_list_free(authz->list);
    }
    authz->list = authz_list_file_load(authz->filename, &local_err);
    if (!authz->list) {
        /* invariant 1: the server's log says why everyone is denied */
        error_report_err(local_err);
    }
}

static bool authz_list_file_is_allowed(QAuthZ *parent, const char *identity)
{
    QAuthZListFile *authz = container_of(parent, QAuthZListFile, parent);
    bool allowed = false;

    g_mutex_lock(&authz->lock);
    authz_list_file_refresh(authz);
    if (authz->list) {
        allowed = authz->list->is_allowed(authz->list, identity);
    }
    g_mutex_unlock(&authz->lock);
    return allowed;
}

static void authz_list_file_destroy(void *state)
{
    QAuthZListFile *authz = state;

    if (authz->inotify_fd >= 0) {
        close(authz->inotify_fd);
    }
    if (authz->list) {
        qauthz_list_free(authz->list);
    }
    g_mutex_clear(&authz->lock);
    g_free(authz->filename);
    g_free(authz->basename);
    g_free(authz);
}

/* Watches the file's folder (see the header comment) before reading it. */
static bool authz_list_file_watch(QAuthZListFile *authz, Error **errp)
{
    g_autofree char *dir = g_path_get_dirname(authz->filename);

    authz->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (authz->inotify_fd < 0) {
        error_setg_errno(errp, errno, "Unable to initialize inotify");
        return false;
    }
    if (inotify_add_watch(authz->inotify_fd, dir,
                          IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_TO |
                          IN_MOVED_FROM | IN_CREATE | IN_DELETE) < 0) {
        error_setg_errno(errp, errno, "Unable to watch '%s'", dir);
        return false;
    }
    return true;
}

static void *authz_list_file_create(const char *id, JsonObject *props,
                                    Error **errp)
{
    QAuthZListFile *authz = g_new0(QAuthZListFile, 1);

    authz->parent.is_allowed = authz_list_file_is_allowed;
    authz->filename = g_strdup(json_object_get_string_member(props,
                                                             "filename"));
    authz->basename = g_path_get_basename(authz->filename);
    authz->inotify_fd = -1;
    g_mutex_init(&authz->lock);
    if ((json_object_get_boolean_member_with_default(props, "refresh", true)
         && !authz_list_file_watch(authz, errp)) ||
        !(authz->list = authz_list_file_load(authz->filename, errp))) {
        authz_list_file_destroy(authz);
        return NULL;
    }
    return authz;
}

static const UserObjectType authz_list_file_type = {
    .name = AUTHZ_LIST_FILE_TYPE,
    .create = authz_list_file_create,
    .destroy = authz_list_file_destroy,
};
user_object_type_init(authz_list_file_type)
