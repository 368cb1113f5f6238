/*
 * QMP monitor sessions (see monitor.h).
 *
 * A session reads its client's bytes into a JsonStreamer, runs each
 * complete request through qmp_dispatch() and queues the reply; events
 * are queued behind the replies.  Output is written from the main loop
 * as the client takes it.
 *
 * Invariants:
 *  1. While a command runs (monitor_busy > 0), no session has an fd
 *     handler: a command that polls the event loop (opening an image)
 *     never sees another request start, from its own client or another.
 *     Output queued meanwhile (events) waits until the command is done.
 *  2. A session reads only while its queued output is below
 *     MONITOR_OUTPUT_PAUSE, so a client that sends requests without
 *     reading replies stops being read instead of filling memory; one
 *     whose queue still passes MONITOR_OUTPUT_MAX (events it does not
 *     read) is disconnected.
 *  3. A session is freed only from its own fd handlers, from the
 *     dispatch loop that runs its requests, from its reap bottom half, or
 *     at cleanup; never while one of its requests runs.  A session that
 *     dies outside its own handlers (dropped for events it does not
 *     read, which is when it has no handler left to run) schedules the
 *     bottom half, so that its descriptor and memory go too.
 */
#include "monitor.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "config-host.h"
#include "chardev.h"
#include "qmp-dispatch.h"
#include "util/aio.h"
#include "util/qapi-event.h"
#include "util/sockets.h"

/* Bytes read per read(2); the streamer takes them all at once. */
#define MONITOR_READ_CHUNK      (64 * KiB)
/*
 * Longest request kept.  QEMU allows 64 MiB; no QMP request needs a
 * fraction of 1 MiB (a blockdev-add with every option is a few KiB), and
 * the bound is what one hostile client can make the daemon hold.
 */
#define MONITOR_MAX_REQUEST     (1 * MiB)
#define MONITOR_OUTPUT_PAUSE    (1 * MiB)
#define MONITOR_OUTPUT_MAX      (16 * MiB)
/* How long cleanup waits for clients to take their last replies. */
#define MONITOR_FLUSH_TIMEOUT_MS 1000

/* The interface version reported, that of the QEMU whose QMP we speak. */
#define MONITOR_QEMU_MAJOR 7
#define MONITOR_QEMU_MINOR 2
#define MONITOR_QEMU_MICRO 0

typedef struct Monitor {
    Chardev *chr;               /* a monitor's device cannot be removed */
    bool pretty;
} Monitor;

typedef struct MonitorSession {
    Monitor *mon;
    int in_fd;
    int out_fd;
    bool in_pollable;
    bool out_pollable;
    JsonStreamer *streamer;
    GString *outbuf;
    QmpDispatchMode mode;
    /* input ended: close once the output is written */
    bool in_eof;
    /* writing failed, or the client is dropped: close now */
    bool dead;
    /* monitor_defer_reply(): sent at cleanup, after everything else */
    JsonNode *deferred_reply;
    /* for input epoll cannot watch (a file on stdin): read from a BH */
    QEMUBH *input_bh;
    QEMUBH *reap_bh;            /* invariant 3 */
    GList link;
} MonitorSession;

static GQueue monitor_sessions = G_QUEUE_INIT;
static GPtrArray *monitors;
static int monitor_busy;
static bool monitor_dispatch_stopped;
static bool monitor_reply_deferred;
/* the session whose request runs, for qmp_capabilities */
static MonitorSession *monitor_cur_session;

static void monitor_session_update(MonitorSession *s);

static AioContext *monitor_ctx(void)
{
    return qemu_get_aio_context();
}

/* Writes what it can without blocking (or all of it, if not pollable). */
static void monitor_session_flush(MonitorSession *s)
{
    size_t done = 0;

    while (!s->dead && done < s->outbuf->len) {
        ssize_t n = s->out_fd == s->in_fd ?
                    send(s->out_fd, s->outbuf->str + done,
                         s->outbuf->len - done, MSG_NOSIGNAL) :
                    write(s->out_fd, s->outbuf->str + done,
                          s->outbuf->len - done);

        if (n > 0) {
            done += n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN && s->out_pollable) {
            break;
        } else {
            /* the client is gone (or its socket broken): drop the rest */
            s->dead = true;
        }
    }
    if (s->dead) {
        g_string_truncate(s->outbuf, 0);
    } else {
        g_string_erase(s->outbuf, 0, done);
    }
}

/*
 * Queues @node as one line.  QEMU ends every line it writes to a monitor
 * with "\r\n" (and so every line of a pretty reply); clients expect it.
 */
static void monitor_session_send(MonitorSession *s, JsonNode *node)
{
    g_autofree char *text = NULL;

    if (s->dead) {
        return;
    }
    /* QEMU's members come in its QDict's order: clients compare text */
    text = json_to_text(node, JSON_WRITE_QDICT_ORDER |
                              (s->mon->pretty ? JSON_WRITE_PRETTY : 0));
    for (const char *p = text; *p; p++) {
        if (*p == '\n') {
            g_string_append_c(s->outbuf, '\r');
        }
        g_string_append_c(s->outbuf, *p);
    }
    g_string_append(s->outbuf, "\r\n");
    if (!s->out_pollable) {
        monitor_session_flush(s);
    } else if (s->outbuf->len > MONITOR_OUTPUT_MAX) {
        warn_report("QMP client of fd %d does not read its output: "
                    "disconnecting it", s->out_fd);
        s->dead = true;
        g_string_truncate(s->outbuf, 0);
    }
    monitor_session_update(s);
}

static void monitor_session_free(MonitorSession *s)
{
    AioContext *ctx = monitor_ctx();

    if (s->in_pollable) {
        aio_set_fd_handler(ctx, s->in_fd, NULL, NULL, NULL);
    }
    if (s->out_fd != s->in_fd && s->out_pollable) {
        aio_set_fd_handler(ctx, s->out_fd, NULL, NULL, NULL);
    }
    if (s->input_bh) {
        qemu_bh_delete(s->input_bh);
    }
    qemu_bh_delete(s->reap_bh);
    /* stdin and stdout stay open, for the messages the daemon may print */
    if (s->in_fd > STDERR_FILENO) {
        close(s->in_fd);
    }
    if (s->out_fd != s->in_fd && s->out_fd > STDERR_FILENO) {
        close(s->out_fd);
    }
    g_queue_unlink(&monitor_sessions, &s->link);
    if (s->deferred_reply) {
        json_node_unref(s->deferred_reply);
    }
    json_streamer_free(s->streamer);
    g_string_free(s->outbuf, TRUE);
    chardev_connection_ended(s->mon->chr);
    g_free(s);
}

/* Frees @s if it is done (invariant 3: callers own @s at this point). */
static bool monitor_session_check_done(MonitorSession *s)
{
    if (s->dead || (s->in_eof && !s->outbuf->len && !s->deferred_reply)) {
        monitor_session_free(s);
        return true;
    }
    return false;
}

static void monitor_session_process(MonitorSession *s)
{
    JsonNode *request;
    Error *err = NULL;

    while (!s->dead && !monitor_dispatch_stopped &&
           json_streamer_next(s->streamer, &request, &err)) {
        JsonNode *reply;

        /* invariant 1 */
        monitor_busy++;
        for (GList *l = monitor_sessions.head; l; l = l->next) {
            monitor_session_update(l->data);
        }
        monitor_cur_session = s;
        /* fd addresses name a monitor's descriptors here, as in QEMU */
        socket_set_fd_names_only(true);
        reply = qmp_dispatch(request, err, s->mode);
        socket_set_fd_names_only(false);
        monitor_cur_session = NULL;
        err = NULL;
        monitor_busy--;
        if (monitor_reply_deferred) {
            monitor_reply_deferred = false;
            s->deferred_reply = reply;
        } else {
            monitor_session_send(s, reply);
            json_node_unref(reply);
        }
        if (request) {
            json_node_unref(request);
        }
    }
    for (GList *l = monitor_sessions.head; l; l = l->next) {
        monitor_session_update(l->data);
    }
}

/* Reads once; returns false at the end of the input. */
static bool monitor_session_read_chunk(MonitorSession *s)
{
    char buf[MONITOR_READ_CHUNK];
    ssize_t n = read(s->in_fd, buf, sizeof(buf));

    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return true;
    }
    if (n <= 0) {
        /* a read error ends the input like EOF: nothing more can come */
        s->in_eof = true;
        return false;
    }
    json_streamer_feed(s->streamer, buf, n);
    return true;
}

static void monitor_session_read(void *opaque)
{
    MonitorSession *s = opaque;

    monitor_session_read_chunk(s);
    monitor_session_process(s);
    monitor_session_update(s);
    monitor_session_check_done(s);
}

static void monitor_session_write(void *opaque)
{
    MonitorSession *s = opaque;

    monitor_session_flush(s);
    monitor_session_update(s);
    monitor_session_check_done(s);
}

/* Invariant 3: a dead session whose request is not running goes. */
static void monitor_session_reap_bh(void *opaque)
{
    MonitorSession *s = opaque;

    if (s != monitor_cur_session) {
        monitor_session_check_done(s);
    }
}

/* Input that epoll cannot watch is always "ready": read it from a BH. */
static void monitor_session_input_bh(void *opaque)
{
    monitor_session_read(opaque);
}

static void monitor_session_update(MonitorSession *s)
{
    AioContext *ctx = monitor_ctx();
    bool reading = !monitor_busy && !s->in_eof && !s->dead &&
                   !monitor_dispatch_stopped &&
                   s->outbuf->len < MONITOR_OUTPUT_PAUSE;
    bool writing = !monitor_busy && !s->dead && s->outbuf->len &&
                   s->out_pollable;
    IOHandler *rd = reading ? monitor_session_read : NULL;
    IOHandler *wr = writing ? monitor_session_write : NULL;

    if (s->dead) {
        /* invariant 3: no handler of its own will run again */
        qemu_bh_schedule(s->reap_bh);
    }
    if (!s->in_pollable) {
        if (reading) {
            qemu_bh_schedule(s->input_bh);
        } else {
            qemu_bh_cancel(s->input_bh);
        }
    } else if (s->in_fd == s->out_fd) {
        aio_set_fd_handler_rare(ctx, s->in_fd, rd, wr, s);
        return;
    } else {
        aio_set_fd_handler_rare(ctx, s->in_fd, rd, NULL, s);
    }
    if (s->out_pollable) {
        aio_set_fd_handler_rare(ctx, s->out_fd, NULL, wr, s);
    }
}

static void monitor_connect(void *opaque, int in_fd, int out_fd)
{
    MonitorSession *s = g_new0(MonitorSession, 1);
    g_autoptr(JsonObject) qmp = json_object_new();
    g_autoptr(JsonObject) greeting = json_object_new();
    g_autoptr(JsonNode) node = NULL;
    JsonArray *capabilities = json_array_new();

    s->mon = opaque;
    s->in_fd = in_fd;
    s->out_fd = out_fd;
    s->in_pollable = chardev_fd_is_pollable(in_fd);
    s->out_pollable = out_fd == in_fd ? s->in_pollable :
                      chardev_fd_is_pollable(out_fd);
    if (!s->in_pollable) {
        s->input_bh = aio_bh_new(monitor_ctx(), monitor_session_input_bh, s);
    }
    s->reap_bh = aio_bh_new(monitor_ctx(), monitor_session_reap_bh, s);
    s->streamer = json_streamer_new(MONITOR_MAX_REQUEST);
    s->outbuf = g_string_new(NULL);
    s->mode = QMP_DISPATCH_NEGOTIATION;
    s->link.data = s;
    g_queue_push_tail_link(&monitor_sessions, &s->link);

    /*
     * oob is offered, as qemu-storage-daemon offers it: a client may
     * enable it, and then learns that no command runs out of band
     */
    json_object_set_member(qmp, "version", qmp_version_info());
    json_object_set_array_member(qmp, "capabilities", capabilities);
    json_array_add_string_element(capabilities, "oob");
    json_object_set_object_member(greeting, "QMP", json_object_ref(qmp));
    node = json_node_init_object(json_node_alloc(), greeting);
    monitor_session_send(s, node);
}

int monitor_add(JsonObject *opts, Error **errp)
{
    const char *mode = json_object_get_string_member_with_default(
                           opts, "mode", "control");
    Chardev *chr = chardev_find(json_object_get_string_member(opts,
                                                              "chardev"),
                                errp);
    Monitor *mon;

    if (!chr) {
        return -ENOENT;
    }
    if (strcmp(mode, "control")) {
        error_setg(errp, "Only QMP is supported");
        return -EINVAL;
    }
    mon = g_new0(Monitor, 1);
    mon->chr = chr;
    mon->pretty = json_object_get_boolean_member_with_default(opts, "pretty",
                                                              false);
    if (chardev_attach(chr, monitor_connect, mon, errp) < 0) {
        g_free(mon);
        return -EBUSY;
    }
    if (!monitors) {
        monitors = g_ptr_array_new_with_free_func(g_free);
    }
    g_ptr_array_add(monitors, mon);
    return 0;
}

JsonNode *qmp_version_info(void)
{
    g_autoptr(JsonObject) info = json_object_new();
    JsonObject *triple = json_object_new();

    json_object_set_int_member(triple, "major", MONITOR_QEMU_MAJOR);
    json_object_set_int_member(triple, "minor", MONITOR_QEMU_MINOR);
    json_object_set_int_member(triple, "micro", MONITOR_QEMU_MICRO);
    json_object_set_object_member(info, "qemu", triple);
    json_object_set_string_member(info, "package",
                                  "qblock " QBLOCK_VERSION);
    return json_node_init_object(json_node_alloc(), info);
}

static void qmp_query_version(JsonObject *args, JsonNode **ret,
                              Error **errp)
{
    *ret = qmp_version_info();
}

static void qmp_qmp_capabilities(JsonObject *args, JsonNode **ret,
                                 Error **errp)
{
    JsonArray *enable = json_object_has_member(args, "enable") ?
                        json_object_get_array_member(args, "enable") : NULL;

    /* the schema admits only oob, which the greeting offers */
    monitor_cur_session->mode = enable && json_array_get_length(enable) ?
                                QMP_DISPATCH_COMMANDS_OOB :
                                QMP_DISPATCH_COMMANDS;
}

/* Sends an event to every session past negotiation (qapi-event.h). */
static void monitor_event(const char *event, QDict *data, void *opaque)
{
    const QapiEvent *decl = qapi_find_event(event);
    g_autoptr(JsonObject) msg = json_object_new();
    JsonObject *ts = json_object_new();
    g_autoptr(JsonNode) node = NULL;
    JsonNode *jdata = qdict_to_json_node(data);
    Error *err = NULL;
    struct timeval tv;

    /* a mismatch is a bug of the emitter; the event still goes out */
    if (!decl) {
        warn_report("event %s is not declared in the schema", event);
    } else if (!qapi_check_input(decl->data, jdata, QAPI_INPUT_JSON, &err)) {
        warn_report("event %s does not match the schema: %s", event,
                    error_get_pretty(err));
        error_free(err);
    }
    gettimeofday(&tv, NULL);
    json_object_set_int_member(ts, "seconds", tv.tv_sec);
    json_object_set_int_member(ts, "microseconds", tv.tv_usec);
    json_object_set_object_member(msg, "timestamp", ts);
    json_object_set_string_member(msg, "event", event);
    if (json_object_get_size(json_node_get_object(jdata))) {
        json_object_set_member(msg, "data", jdata);
    } else {
        json_node_unref(jdata);
    }
    node = json_node_init_object(json_node_alloc(), msg);
    for (GList *l = monitor_sessions.head; l; l = l->next) {
        MonitorSession *s = l->data;

        if (s->mode != QMP_DISPATCH_NEGOTIATION) {
            monitor_session_send(s, node);
        }
    }
}

void monitor_init(void)
{
    qmp_register_command("qmp_capabilities", qmp_qmp_capabilities);
    qmp_register_command("query-version", qmp_query_version);
    qapi_event_add_listener(monitor_event, NULL);
}

static void monitor_update_all(void)
{
    for (GList *l = monitor_sessions.head; l; l = l->next) {
        monitor_session_update(l->data);
    }
}

void monitor_hold(void)
{
    monitor_busy++;
    monitor_update_all();
}

void monitor_release(void)
{
    assert(monitor_busy > 0);
    monitor_busy--;
    monitor_update_all();
}

void monitor_stop_dispatch(void)
{
    monitor_dispatch_stopped = true;
}

void monitor_defer_reply(void)
{
    assert(monitor_cur_session);
    monitor_reply_deferred = true;
}

/* Waits until some session with output can write, or @timeout_ms. */
static void monitor_wait_writable(int timeout_ms)
{
    g_autoptr(GArray) fds = g_array_new(false, false, sizeof(struct pollfd));

    for (GList *l = monitor_sessions.head; l; l = l->next) {
        MonitorSession *s = l->data;
        struct pollfd pfd = { .fd = s->out_fd, .events = POLLOUT };

        if (s->outbuf->len && s->out_pollable) {
            g_array_append_val(fds, pfd);
        }
    }
    if (fds->len) {
        poll((struct pollfd *)fds->data, fds->len, timeout_ms);
    }
}

void monitor_cleanup(void)
{
    int64_t deadline = get_clock_ns() +
                       MONITOR_FLUSH_TIMEOUT_MS * (int64_t)SCALE_MS;
    bool pending;

    qapi_event_remove_listener(monitor_event, NULL);
    monitor_dispatch_stopped = true;
    for (GList *l = monitor_sessions.head; l; l = l->next) {
        MonitorSession *s = l->data;

        if (s->deferred_reply) {
            monitor_session_send(s, s->deferred_reply);
            g_clear_pointer(&s->deferred_reply, json_node_unref);
        }
    }
    do {
        int64_t left_ms = (deadline - get_clock_ns()) / SCALE_MS;

        pending = false;
        for (GList *l = monitor_sessions.head; l; l = l->next) {
            MonitorSession *s = l->data;

            monitor_session_flush(s);
            pending |= s->outbuf->len > 0;
        }
        if (!pending || left_ms <= 0) {
            break;
        }
        monitor_wait_writable(left_ms);
    } while (true);
    while (monitor_sessions.head) {
        monitor_session_free(monitor_sessions.head->data);
    }
    if (monitors) {
        g_ptr_array_unref(monitors);
        monitors = NULL;
    }
}
