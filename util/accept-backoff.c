/*
 * The back-off of a listening socket (include/util/accept-backoff.h).
 */
#include "util/accept-backoff.h"

#include "util/error.h"
#include "util/sockets.h"

static void accept_backoff_expired(void *opaque)
{
    AcceptBackoff *b = opaque;

    b->active = false;
    b->changed(b->opaque);
}

void accept_backoff_init(AcceptBackoff *b, AioContext *ctx,
                         void (*changed)(void *opaque), void *opaque)
{
    *b = (AcceptBackoff) {
        .timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                               accept_backoff_expired, b),
        .changed = changed,
        .opaque = opaque,
    };
}

void accept_backoff_cleanup(AcceptBackoff *b)
{
    timer_free(b->timer);
    b->timer = NULL;
}

bool accept_backoff_check(AcceptBackoff *b, int fd, const char *fmt, ...)
{
    if (!socket_accept_must_back_off(fd)) {
        if (fd >= 0) {
            b->logged = false;
        }
        return false;
    }
    if (!b->logged) {
        g_autofree char *what = NULL;
        va_list ap;

        va_start(ap, fmt);
        what = g_strdup_vprintf(fmt, ap);
        va_end(ap);
        error_report("%s: %s; retrying every %" PRId64 " ms", what,
                     strerror(-fd),
                     (int64_t)SOCKET_ACCEPT_BACKOFF_NS / SCALE_MS);
        b->logged = true;
    }
    b->active = true;
    b->changed(b->opaque);
    timer_mod(b->timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
              SOCKET_ACCEPT_BACKOFF_NS);
    return true;
}
