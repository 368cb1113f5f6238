/*
 * Coroutine internals shared by the generic code (qemu-coroutine.c), the
 * stack-switching backend (coroutine-ucontext.c) and the event loop
 * (async.c, which schedules coroutines).
 *
 * Thread-local state is reached only through out-of-line getters: a
 * coroutine may yield in one thread and be resumed in another, and the
 * compiler must not reuse a thread-local address computed before a switch.
 */
#ifndef QBLOCK_COROUTINE_INT_H
#define QBLOCK_COROUTINE_INT_H

#include "util/coroutine.h"

typedef enum CoroutineAction {
    COROUTINE_YIELD = 1,
    COROUTINE_TERMINATE = 2,
    COROUTINE_ENTER = 3,
} CoroutineAction;

struct Coroutine {
    CoroutineEntry *entry;
    void *entry_arg;
    /* Whoever entered us last; NULL while yielded or not started. */
    Coroutine *caller;
    /* The AioContext the coroutine runs in (set at each entry). */
    AioContext *ctx;
    /* Entered and not finished yet. */
    bool started;
    /*
     * Name of the function that scheduled us, NULL when not scheduled.
     * Set with a compare-and-swap from any thread, so that scheduling a
     * coroutine twice is caught.
     */
    const char *scheduled;
    /* Link in the per-thread pool of finished coroutines. */
    Coroutine *pool_next;
    /* Link in an AioContext's list of scheduled coroutines. */
    Coroutine *co_scheduled_next;
};

/* Backend: a new coroutine with its own stack, ready to be entered. */
Coroutine *qemu_coroutine_new(void);
void qemu_coroutine_delete(Coroutine *co);
/*
 * Saves the state of @from, runs @to and returns when something switches
 * back to @from; the value is the action the switcher passed.
 */
CoroutineAction qemu_coroutine_switch(Coroutine *from, Coroutine *to,
                                      CoroutineAction action);
/* The running coroutine, or the thread's leader (its own stack). */
Coroutine *qemu_coroutine_current(void);
bool qemu_coroutine_is_leader(Coroutine *co);

/* Enters @co in @ctx; the entry point of every resumption. */
void qemu_aio_coroutine_enter(AioContext *ctx, Coroutine *co);

#endif
