/*
 * CoMutex, CoQueue and CoRwlock.
 *
 * A lock, and the coroutines that use it, belong to one AioContext: its
 * fields are only touched from that context's thread, so no atomics are
 * needed.
 *
 * Waiters park a CoWaitRecord on their own stack, linked into the lock's
 * GQueue by a GList node that also lives on that stack: waiting costs no
 * allocation.  The record is unlinked by whoever wakes the waiter, before
 * the wake-up, so it is never touched after the waiter resumes.
 *
 * Invariants:
 *  1. Lock hand-over is direct: the releaser makes the first waiter the
 *     owner (CoMutex holder, CoRwlock reader count or writer flag) before
 *     waking it, so nobody can barge in between.
 *  2. Wake-ups go through aio_co_wake(): a waker in coroutine context
 *     schedules the waiter instead of running it on its own stack
 *     (invariant 3 of coroutine.h).
 *  3. CoRwlock waiters are served in arrival order, except that a reader
 *     upgrading to writer goes to the head of the queue.  So a waiting
 *     writer blocks later readers, and no writer runs between an upgrading
 *     reader's read and write sections unless another reader upgrades too.
 */
#include "util/osdep.h"
#include "util/aio.h"

struct CoWaitRecord {
    Coroutine *co;
    bool writer;        /* CoRwlock only */
    GList link;         /* link.data == this record */
};

static void co_wait_record_init(CoWaitRecord *rec, bool writer)
{
    rec->co = qemu_coroutine_self();
    rec->writer = writer;
    rec->link = (GList) { .data = rec };
    assert(rec->co);
}

static CoWaitRecord *co_wait_pop(GQueue *queue)
{
    GList *link = g_queue_pop_head_link(queue);

    return link ? link->data : NULL;
}

static CoWaitRecord *co_wait_peek(GQueue *queue)
{
    GList *link = g_queue_peek_head_link(queue);

    return link ? link->data : NULL;
}

/* CoMutex */

void qemu_co_mutex_init(CoMutex *mutex)
{
    mutex->locked = false;
    mutex->holder = NULL;
    g_queue_init(&mutex->waiters);
}

void coroutine_fn qemu_co_mutex_lock(CoMutex *mutex)
{
    Coroutine *self = qemu_coroutine_self();
    CoWaitRecord rec;

    assert(self);
    if (!mutex->locked) {
        mutex->locked = true;
        mutex->holder = self;
        return;
    }
    assert(mutex->holder != self);
    co_wait_record_init(&rec, false);
    g_queue_push_tail_link(&mutex->waiters, &rec.link);
    qemu_coroutine_yield();
    /* Invariant 1: the unlocker made us the holder. */
    assert(mutex->locked && mutex->holder == self);
}

void coroutine_fn qemu_co_mutex_unlock(CoMutex *mutex)
{
    CoWaitRecord *rec;

    assert(mutex->locked);
    assert(mutex->holder == qemu_coroutine_self());
    rec = co_wait_pop(&mutex->waiters);
    if (!rec) {
        mutex->locked = false;
        mutex->holder = NULL;
        return;
    }
    mutex->holder = rec->co;
    aio_co_wake(rec->co);
}

void qemu_co_mutex_assert_locked(CoMutex *mutex)
{
    assert(mutex->locked);
    assert(mutex->holder == qemu_coroutine_self());
}

/* CoQueue */

void qemu_co_queue_init(CoQueue *queue)
{
    g_queue_init(&queue->entries);
}

void coroutine_fn qemu_co_queue_wait(CoQueue *queue, CoMutex *lock)
{
    CoWaitRecord rec;

    co_wait_record_init(&rec, false);
    g_queue_push_tail_link(&queue->entries, &rec.link);
    if (lock) {
        qemu_co_mutex_unlock(lock);
    }
    qemu_coroutine_yield();
    if (lock) {
        qemu_co_mutex_lock(lock);
    }
}

bool qemu_co_queue_next(CoQueue *queue)
{
    CoWaitRecord *rec = co_wait_pop(&queue->entries);

    if (!rec) {
        return false;
    }
    aio_co_wake(rec->co);
    return true;
}

void qemu_co_queue_restart_all(CoQueue *queue)
{
    while (qemu_co_queue_next(queue)) {
        continue;
    }
}

bool qemu_co_enter_next(CoQueue *queue)
{
    assert(!qemu_in_coroutine());
    /* Outside coroutine context aio_co_wake() enters it right away. */
    return qemu_co_queue_next(queue);
}

bool qemu_co_queue_empty(CoQueue *queue)
{
    return g_queue_is_empty(&queue->entries);
}

/* CoRwlock */

void qemu_co_rwlock_init(CoRwlock *lock)
{
    lock->readers = 0;
    lock->writer = false;
    g_queue_init(&lock->waiters);
}

/* Hands the lock to the waiters at the head that can have it now. */
static void co_rwlock_wake_waiters(CoRwlock *lock)
{
    CoWaitRecord *rec;

    while ((rec = co_wait_peek(&lock->waiters)) && !lock->writer) {
        if (rec->writer) {
            if (lock->readers > 0) {
                return;
            }
            lock->writer = true;
        } else {
            lock->readers++;
        }
        g_queue_pop_head_link(&lock->waiters);
        aio_co_wake(rec->co);
    }
}

/* How a coroutine waits for a CoRwlock; 0 is a reader at the tail. */
typedef enum CoRwlockWaitFlags {
    CO_RWLOCK_WAIT_WRITER = 1 << 0,  /* wants the lock for itself */
    CO_RWLOCK_WAIT_AT_HEAD = 1 << 1, /* before every waiter (an upgrade) */
} CoRwlockWaitFlags;

static void coroutine_fn co_rwlock_wait(CoRwlock *lock,
                                        CoRwlockWaitFlags flags)
{
    CoWaitRecord rec;

    co_wait_record_init(&rec, flags & CO_RWLOCK_WAIT_WRITER);
    if (flags & CO_RWLOCK_WAIT_AT_HEAD) {
        g_queue_push_head_link(&lock->waiters, &rec.link);
    } else {
        g_queue_push_tail_link(&lock->waiters, &rec.link);
    }
    qemu_coroutine_yield();
}

void coroutine_fn qemu_co_rwlock_rdlock(CoRwlock *lock)
{
    /* Invariant 3: queue behind any waiter, a writer above all. */
    if (!lock->writer && g_queue_is_empty(&lock->waiters)) {
        lock->readers++;
        return;
    }
    co_rwlock_wait(lock, 0);
    assert(!lock->writer && lock->readers > 0);
}

void coroutine_fn qemu_co_rwlock_wrlock(CoRwlock *lock)
{
    if (!lock->writer && lock->readers == 0 &&
        g_queue_is_empty(&lock->waiters)) {
        lock->writer = true;
        return;
    }
    co_rwlock_wait(lock, CO_RWLOCK_WAIT_WRITER);
    assert(lock->writer && lock->readers == 0);
}

void coroutine_fn qemu_co_rwlock_unlock(CoRwlock *lock)
{
    if (lock->writer) {
        lock->writer = false;
    } else {
        assert(lock->readers > 0);
        lock->readers--;
    }
    co_rwlock_wake_waiters(lock);
}

void coroutine_fn qemu_co_rwlock_upgrade(CoRwlock *lock)
{
    assert(!lock->writer && lock->readers > 0);
    if (lock->readers == 1) {
        lock->readers = 0;
        lock->writer = true;
        return;
    }
    /* Invariant 3: wait at the head until the other readers are gone. */
    lock->readers--;
    co_rwlock_wait(lock, CO_RWLOCK_WAIT_WRITER | CO_RWLOCK_WAIT_AT_HEAD);
    assert(lock->writer && lock->readers == 0);
}

void coroutine_fn qemu_co_rwlock_downgrade(CoRwlock *lock)
{
    assert(lock->writer && lock->readers == 0);
    lock->writer = false;
    lock->readers = 1;
    /* Readers queued at the head may share the lock with us now. */
    co_rwlock_wake_waiters(lock);
}
