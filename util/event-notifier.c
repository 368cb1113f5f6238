/*
 * EventNotifier on a Linux eventfd: one non-blocking fd serves as both
 * ends (rfd == wfd).  Setting it twice before it is cleared wakes the
 * reader once.
 */
#include "util/osdep.h"
#include "util/aio.h"

#include <sys/eventfd.h>

int event_notifier_init(EventNotifier *e, bool active)
{
    int fd = eventfd(active ? 1 : 0, EFD_NONBLOCK | EFD_CLOEXEC);

    if (fd < 0) {
        e->rfd = e->wfd = -1;
        return -errno;
    }
    e->rfd = e->wfd = fd;
    return 0;
}

void event_notifier_cleanup(EventNotifier *e)
{
    if (e->rfd < 0) {
        return;
    }
    if (e->wfd != e->rfd) {
        close(e->wfd);
    }
    close(e->rfd);
    e->rfd = e->wfd = -1;
}

int event_notifier_set(EventNotifier *e)
{
    static const uint64_t value = 1;
    ssize_t ret;

    do {
        ret = write(e->wfd, &value, sizeof(value));
    } while (ret < 0 && errno == EINTR);
    /* EAGAIN: the counter is saturated, so the reader will wake anyway. */
    if (ret < 0 && errno != EAGAIN) {
        return -errno;
    }
    return 0;
}

bool event_notifier_test_and_clear(EventNotifier *e)
{
    uint64_t value;
    ssize_t ret;

    do {
        ret = read(e->rfd, &value, sizeof(value));
    } while (ret < 0 && errno == EINTR);
    return ret == sizeof(value) && value > 0;
}

int event_notifier_get_fd(const EventNotifier *e)
{
    return e->rfd;
}
