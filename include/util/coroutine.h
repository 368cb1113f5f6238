/*
 * Coroutines and the locks that serialise them.
 *
 * Coroutines are stackful (their own stack, switched with ucontext on first
 * entry and sigsetjmp/siglongjmp after), taken from a per-thread pool so
 * that creating one per I/O request is cheap.  A coroutine runs in the
 * thread and AioContext that entered it; it gives the CPU back only at
 * qemu_coroutine_yield() (directly, or inside a lock or an I/O wait).
 *
 * Invariants:
 *  1. A coroutine is entered by at most one caller at a time; entering a
 *     coroutine that is already running is a bug (asserted).
 *  2. When a coroutine finishes, control returns to whoever entered it last
 *     and the coroutine goes back to the pool.
 *  3. Wake-ups done by the lock primitives (CoMutex, CoRwlock, CoQueue) do
 *     not run the woken coroutine inside the waker's stack: the coroutine is
 *     scheduled on its AioContext and runs from there, so that lock
 *     hand-over never recurses.
 *
 * The stacks are announced to AddressSanitizer (fiber switching API) and to
 * valgrind (VALGRIND_STACK_REGISTER), so both work.
 */
#ifndef QBLOCK_COROUTINE_H
#define QBLOCK_COROUTINE_H

#include "util/osdep.h"

typedef struct Coroutine Coroutine;
typedef struct AioContext AioContext;

typedef void coroutine_fn CoroutineEntry(void *opaque);

/* Creates a coroutine; it does not run until qemu_coroutine_enter(). */
Coroutine *qemu_coroutine_create(CoroutineEntry *entry, void *opaque);
/* Runs @co until it yields or terminates. */
void qemu_coroutine_enter(Coroutine *co);
/* Enters @co unless it is currently running (it will see the news). */
void qemu_coroutine_enter_if_inactive(Coroutine *co);
void coroutine_fn qemu_coroutine_yield(void);
/* The running coroutine, or NULL outside coroutine context. */
Coroutine *qemu_coroutine_self(void);
bool qemu_in_coroutine(void);
/* True once @co has been entered and has not finished. */
bool qemu_coroutine_entered(Coroutine *co);
AioContext *qemu_coroutine_get_aio_context(Coroutine *co);

/* Pool size statistics, for tests. */
unsigned int qemu_coroutine_pool_size(void);

/*
 * CoMutex: a mutex for coroutines.  Lock waits by yielding; unlock hands the
 * lock to the first waiter (FIFO, so no waiter starves).
 *
 * A CoMutex, CoQueue or CoRwlock serves the coroutines of one AioContext
 * (it takes no thread lock); hand the object over with its context.
 */
typedef struct CoWaitRecord CoWaitRecord;
typedef struct CoMutex {
    bool locked;
    Coroutine *holder;
    /* waiters in arrival order */
    GQueue waiters;
} CoMutex;

void qemu_co_mutex_init(CoMutex *mutex);
void coroutine_fn qemu_co_mutex_lock(CoMutex *mutex);
void coroutine_fn qemu_co_mutex_unlock(CoMutex *mutex);
/* Debug helper: asserts the running coroutine holds @mutex. */
void qemu_co_mutex_assert_locked(CoMutex *mutex);

/*
 * CoQueue: a wait queue.  qemu_co_queue_wait() releases @lock (if any)
 * while it sleeps and takes it again before returning.
 */
typedef struct CoQueue {
    GQueue entries;
} CoQueue;

void qemu_co_queue_init(CoQueue *queue);
void coroutine_fn qemu_co_queue_wait(CoQueue *queue, CoMutex *lock);
/* Wakes the first waiter; returns false if the queue was empty. */
bool qemu_co_queue_next(CoQueue *queue);
void qemu_co_queue_restart_all(CoQueue *queue);
/* Outside coroutine context: wakes the first waiter by entering it now. */
bool qemu_co_enter_next(CoQueue *queue);
bool qemu_co_queue_empty(CoQueue *queue);

/*
 * CoRwlock: many readers or one writer.  Waiters are served in FIFO order,
 * so a waiting writer blocks later readers (writers do not starve).
 */
typedef struct CoRwlock {
    int readers;       /* number of readers holding the lock */
    bool writer;       /* true while a writer holds it */
    GQueue waiters;    /* CoRwlockWaiter, arrival order */
} CoRwlock;

void qemu_co_rwlock_init(CoRwlock *lock);
void coroutine_fn qemu_co_rwlock_rdlock(CoRwlock *lock);
void coroutine_fn qemu_co_rwlock_wrlock(CoRwlock *lock);
void coroutine_fn qemu_co_rwlock_unlock(CoRwlock *lock);
/* Reader to writer: waits until the caller is the only holder. */
void coroutine_fn qemu_co_rwlock_upgrade(CoRwlock *lock);
void coroutine_fn qemu_co_rwlock_downgrade(CoRwlock *lock);

/* Sleeps for @ns nanoseconds of the realtime clock of the current context. */
void coroutine_fn qemu_co_sleep_ns(int64_t ns);

#endif
