/*
 * AioContext: the event loop.
 *
 * One AioContext per thread that does I/O.  It dispatches file-descriptor
 * handlers (epoll), bottom halves (callbacks scheduled to run soon, from any
 * thread) and timers, and runs the coroutines scheduled on it.  aio_poll()
 * is the only place where handlers run, so code that is not in a handler
 * never sees one run under it.
 *
 * Thread rules: aio_notify(), qemu_bh_schedule(), aio_bh_schedule_oneshot()
 * and aio_co_schedule() may be called from any thread; everything else only
 * from the thread that owns the context: its home thread, or the thread
 * that acquired it (aio_context_acquire(); docs/architecture.md's
 * threading rules).
 */
#ifndef QBLOCK_AIO_H
#define QBLOCK_AIO_H

#include "util/osdep.h"
#include "util/error.h"
#include "util/coroutine.h"

typedef struct AioContext AioContext;
typedef struct QEMUBH QEMUBH;
typedef struct QEMUTimer QEMUTimer;
typedef struct ThreadPool ThreadPool;

typedef void IOHandler(void *opaque);
typedef void QEMUBHFunc(void *opaque);
typedef void QEMUTimerCB(void *opaque);

AioContext *aio_context_new(Error **errp);
void aio_context_ref(AioContext *ctx);
void aio_context_unref(AioContext *ctx);

/*
 * The main context, created on first use and owned by the thread that first
 * asks for it (the main thread in tools).
 */
AioContext *qemu_get_aio_context(void);
/* The context of the calling thread (its own, or the main one). */
AioContext *qemu_get_current_aio_context(void);
/* Makes @ctx the current context of the calling thread (iothreads). */
void qemu_set_current_aio_context(AioContext *ctx);

/*
 * Registers handlers for @fd (NULL for both removes it).  Handlers are
 * level-triggered: they run from aio_poll() while the fd stays ready.
 */
void aio_set_fd_handler(AioContext *ctx, int fd, IOHandler *io_read,
                        IOHandler *io_write, void *opaque);

/*
 * Busy-polling (adaptive, as QEMU's iothreads).  A context with a poll
 * window (aio_context_set_poll_params(): iothreads, and the main loop
 * where util/main-loop.h says) spends up to that window, before it would
 * sleep in epoll_wait(), calling the poll callbacks of its handlers; the
 * first that finds work ends the window, the handlers that said so run
 * their ready callback, and the sleep is skipped.  The window adapts: it
 * grows when the event came just after it, shrinks when polling wasted it.
 *
 * A handler registered with aio_set_fd_handler() alone has nothing to
 * look at in memory (an NBD client's socket): while a context has one,
 * each round of its window also asks epoll_wait() without waiting, one
 * system call for all such handlers.  aio_set_fd_poll() gives an existing
 * handler poll callbacks, which all run in the context's thread and run
 * no other handler:
 */
typedef bool AioPollFn(void *opaque);
typedef struct AioPollHandlers {
    /*
     * Required.  Whether the source has work, without a system call (a
     * ring's index in shared memory); called often, so it must be cheap.
     */
    AioPollFn *poll;
    /*
     * Required.  Does that work, as the fd's io_read would, without
     * reading the fd (it may stay readable: io_read then finds nothing).
     */
    IOHandler *ready;
    /*
     * Optional.  Polling mode starts: the source may stop its wake-ups
     * (a ring's notifications, an eventfd the kernel signals), since
     * poll sees its work.
     */
    IOHandler *begin;
    /*
     * Optional (required with begin).  Polling mode ends, before the loop
     * sleeps: the wake-ups are back on.  Also called for a handler that
     * never saw begin (added meanwhile), so it must be idempotent.
     * Returns whether work came while they were off (the loop then does
     * not sleep).
     */
    AioPollFn *end;
} AioPollHandlers;
/*
 * @poll_handlers (static, kept by pointer) makes the handler of @fd
 * pollable, NULL makes it not pollable again; &aio_poll_rare says that
 * the fd's events are rare (a control socket) and may wait until a
 * window ends, at most poll-max-ns, so that it costs the window no
 * epoll_wait().  Registering the fd anew after its removal starts without
 * poll callbacks.
 */
extern const AioPollHandlers aio_poll_rare;
void aio_set_fd_poll(AioContext *ctx, int fd,
                     const AioPollHandlers *poll_handlers);

/*
 * aio_set_fd_handler() for an fd of the control plane (a listening
 * socket, a monitor, a signalfd): registered with &aio_poll_rare, so
 * that it costs a poll window nothing.
 */
void aio_set_fd_handler_rare(AioContext *ctx, int fd, IOHandler *io_read,
                             IOHandler *io_write, void *opaque);

/*
 * The context's poll window: at most @max_ns nanoseconds (0: no polling),
 * multiplied by @grow (0: by 2) when an event came just after it,
 * divided by @shrink (0: reset to nothing) when polling wasted it.  May
 * be called from any thread; the context takes the new values at its next
 * aio_poll(), which this wakes.  The values are not negative (the
 * iothread object refuses those).
 */
void aio_context_set_poll_params(AioContext *ctx, int64_t max_ns,
                                 int64_t grow, int64_t shrink);

/*
 * The adaptive rule itself, for aio_poll() and its tests: the window
 * that follows @window_ns when the event that ended a wait came
 * @block_ns after the wait began (polling included).  Within the window:
 * kept.  Later, but within @max_ns: grown (from nothing to
 * AIO_POLL_START_NS), never past @max_ns.  Later than @max_ns, so that no
 * window allowed would have caught it: shrunk.
 */
#define AIO_POLL_START_NS 4096
int64_t aio_poll_window_next(int64_t window_ns, int64_t block_ns,
                             int64_t max_ns, int64_t grow, int64_t shrink);

/* What polling did, for tests and benchmarks (the context's thread). */
typedef struct AioPollStats {
    uint64_t polls;         /* poll windows started */
    uint64_t poll_hits;     /* windows that found work: no sleep */
    uint64_t epoll_waits;   /* epoll_wait() calls, blocking or not */
    int64_t window_ns;      /* the current window */
    int64_t max_ns;         /* poll-max-ns, as last set */
} AioPollStats;
void aio_context_get_poll_stats(AioContext *ctx, AioPollStats *stats);

/*
 * Whether @fd can be given to aio_set_fd_handler(): regular files,
 * directories and devices without poll support cannot, and registering
 * one is a bug.  For descriptors that come from outside (a vhost-user
 * front-end's eventfds).
 */
bool aio_fd_can_be_watched(int fd);

/*
 * Runs one round of the loop: pending bottom halves, expired timers and
 * ready fd handlers.  If @blocking and nothing was ready, waits for
 * something to be.  Returns true if any progress was made.
 */
bool aio_poll(AioContext *ctx, bool blocking);
/* Wakes a thread blocked in aio_poll() on @ctx. */
void aio_notify(AioContext *ctx);

/*
 * Taking over another thread's context (util/aio-wait.c).  An iothread
 * marks its context with aio_context_set_home() while it polls it.
 * aio_context_acquire() parks that thread at a point between two
 * handlers and makes the caller the context's owner until
 * aio_context_release(): it may then touch what lives in the context
 * (nodes, exports) and poll it, as the home thread would.  Recursive;
 * a context without a home (the main one) is simply marked held.
 */
void aio_context_set_home(AioContext *ctx, bool running);
void aio_context_acquire(AioContext *ctx);
void aio_context_release(AioContext *ctx);
/* Whether the calling thread owns @ctx now: its home, or its acquirer. */
bool aio_context_in_thread(AioContext *ctx);

/*
 * One blocking round of AIO_WAIT_WHILE: polls @ctx as its home or its
 * acquirer; waiting on its own home context, the caller lets the
 * contexts it holds run meanwhile (their threads may be what it waits
 * for); another thread's context is acquired for the round.
 */
void aio_wait_poll(AioContext *ctx);

/* Polls @ctx until @cond is false (the cond is re-evaluated each round). */
#define AIO_WAIT_WHILE(ctx, cond)                                       \
    do {                                                                \
        while ((cond)) {                                                \
            aio_wait_poll((ctx));                                       \
        }                                                               \
    } while (0)

/* Bottom halves. */
QEMUBH *aio_bh_new(AioContext *ctx, QEMUBHFunc *cb, void *opaque);
void qemu_bh_schedule(QEMUBH *bh);
void qemu_bh_cancel(QEMUBH *bh);
void qemu_bh_delete(QEMUBH *bh);
/* A bottom half that runs once and frees itself. */
void aio_bh_schedule_oneshot(AioContext *ctx, QEMUBHFunc *cb, void *opaque);

/* Timers. */
typedef enum QEMUClockType {
    QEMU_CLOCK_REALTIME,  /* monotonic */
    QEMU_CLOCK_VIRTUAL,   /* same as realtime: there is no guest clock */
} QEMUClockType;

#define SCALE_MS 1000000
#define SCALE_US 1000
#define SCALE_NS 1

int64_t qemu_clock_get_ns(QEMUClockType type);
QEMUTimer *aio_timer_new(AioContext *ctx, QEMUClockType type, int scale,
                         QEMUTimerCB *cb, void *opaque);
/* Arms @timer to fire at @expire_time (in its scale units). */
void timer_mod(QEMUTimer *timer, int64_t expire_time);
void timer_del(QEMUTimer *timer);
bool timer_pending(QEMUTimer *timer);
void timer_free(QEMUTimer *timer);

/*
 * Coroutine scheduling.  aio_co_schedule() makes @co run from @ctx's loop
 * (any thread may call it).  aio_co_wake() resumes a coroutine that yielded
 * waiting for an event, in its own context: entered directly when the
 * caller is that context's thread outside coroutine context, scheduled
 * otherwise.
 */
void aio_co_schedule(AioContext *ctx, Coroutine *co);
void aio_co_wake(Coroutine *co);
void aio_co_enter(AioContext *ctx, Coroutine *co);
/*
 * Moves the calling coroutine to @new_ctx: it yields, and a bottom half
 * of its current context schedules it there once it has (so the new
 * context's thread never enters it while it still runs here).
 */
void coroutine_fn aio_co_reschedule_self(AioContext *new_ctx);
/*
 * Runs @fn(@opaques[i]) for each i in [0, @n) as coroutines of the
 * caller's context, all at once, and returns when every one has
 * returned: a request sent to several children in parallel.
 */
void coroutine_fn aio_co_run_all(CoroutineEntry *fn, void **opaques, int n);

/* The context's thread pool, created on first use. */
ThreadPool *aio_get_thread_pool(AioContext *ctx);
/*
 * QEMU's aio-max-batch of an iothread or the main loop: 0, or the most
 * requests that the Linux AIO and io_uring queues of @ctx hold before
 * they go to the kernel (block/file-aio-core.c; a node's own
 * aio-max-batch, if smaller, wins).  Set from any thread; a request
 * queued later sees it.
 */
void aio_context_set_aio_params(AioContext *ctx, int64_t max_batch);
int64_t aio_context_get_aio_max_batch(AioContext *ctx);

/*
 * The limits of @ctx's worker pool (QEMU's thread-pool-min and
 * thread-pool-max): workers kept even when idle, and the most there are;
 * 0 <= @min_threads <= @max_threads, @max_threads > 0.  From any thread;
 * the pool takes them at once, or when it is made.
 */
void aio_context_set_thread_pool_params(AioContext *ctx, int min_threads,
                                        int max_threads);

/*
 * EventNotifier: an eventfd that other threads signal to wake a context.
 */
typedef struct EventNotifier {
    int rfd;
    int wfd;
} EventNotifier;

int event_notifier_init(EventNotifier *e, bool active);
void event_notifier_cleanup(EventNotifier *e);
int event_notifier_set(EventNotifier *e);
bool event_notifier_test_and_clear(EventNotifier *e);
int event_notifier_get_fd(const EventNotifier *e);

#endif
