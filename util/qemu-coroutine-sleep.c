/*
 * Coroutine sleep: a timer on the coroutine's context wakes it.
 */
#include "util/osdep.h"
#include "util/aio.h"

static void co_sleep_cb(void *opaque)
{
    aio_co_wake(opaque);
}

void coroutine_fn qemu_co_sleep_ns(int64_t ns)
{
    Coroutine *co = qemu_coroutine_self();
    QEMUTimer *timer;

    assert(co);
    timer = aio_timer_new(qemu_coroutine_get_aio_context(co),
                          QEMU_CLOCK_REALTIME, SCALE_NS, co_sleep_cb, co);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + ns);
    qemu_coroutine_yield();
    timer_free(timer);
}
