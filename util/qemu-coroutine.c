/*
 * Coroutines: creation, entry, yield, and the per-thread pool that makes
 * one coroutine per I/O request cheap.
 *
 * Invariants (numbers of include/util/coroutine.h continue here):
 *  4. A pooled coroutine has finished: caller == NULL, started == false,
 *     scheduled == NULL.  Its stack is kept mapped so that reuse costs no
 *     system call.
 *  5. A thread's pool holds at most POOL_MAX_SIZE coroutines; more
 *     finished ones are freed.  The pool is freed when its thread exits.
 */
#include "util/osdep.h"
#include "util/aio.h"
#include "coroutine-int.h"

#include <pthread.h>

/*
 * Enough for the deepest queue a disk is driven with (a few hundred
 * requests in flight) without keeping more than ~256 MiB of address space
 * (few pages of each stack are resident).
 */
#define POOL_MAX_SIZE 256

typedef struct CoroutinePool {
    Coroutine *head;
    unsigned int size;
    bool registered;
} CoroutinePool;

static __thread CoroutinePool pool;
static pthread_key_t pool_key;
static pthread_once_t pool_key_once = PTHREAD_ONCE_INIT;

static __attribute__((noinline)) CoroutinePool *coroutine_get_pool(void)
{
    asm volatile("");
    return &pool;
}

static void coroutine_pool_free(void *opaque)
{
    CoroutinePool *p = opaque;
    Coroutine *co;

    while ((co = p->head)) {
        p->head = co->pool_next;
        qemu_coroutine_delete(co);
    }
    p->size = 0;
}

static void coroutine_pool_key_init(void)
{
    if (pthread_key_create(&pool_key, coroutine_pool_free)) {
        abort();
    }
}

static void coroutine_pool_put(Coroutine *co)
{
    CoroutinePool *p = coroutine_get_pool();

    if (p->size >= POOL_MAX_SIZE) {
        qemu_coroutine_delete(co);
        return;
    }
    if (!p->registered) {
        /* The key's destructor frees the pool when the thread exits. */
        pthread_once(&pool_key_once, coroutine_pool_key_init);
        pthread_setspecific(pool_key, p);
        p->registered = true;
    }
    co->pool_next = p->head;
    p->head = co;
    p->size++;
}

unsigned int qemu_coroutine_pool_size(void)
{
    return coroutine_get_pool()->size;
}

Coroutine *qemu_coroutine_create(CoroutineEntry *entry, void *opaque)
{
    CoroutinePool *p = coroutine_get_pool();
    Coroutine *co = p->head;

    if (co) {
        p->head = co->pool_next;
        p->size--;
    } else {
        co = qemu_coroutine_new();
    }
    co->entry = entry;
    co->entry_arg = opaque;
    co->caller = NULL;
    co->ctx = NULL;
    co->started = false;
    co->scheduled = NULL;
    co->pool_next = NULL;
    co->co_scheduled_next = NULL;
    return co;
}

void qemu_aio_coroutine_enter(AioContext *ctx, Coroutine *co)
{
    Coroutine *self = qemu_coroutine_current();
    const char *scheduled = __atomic_load_n(&co->scheduled, __ATOMIC_ACQUIRE);
    CoroutineAction ret;

    if (scheduled) {
        fprintf(stderr, "%s: coroutine entered while scheduled by %s\n",
                qemu_get_progname(), scheduled);
        abort();
    }
    /* Invariant 1: one caller at a time. */
    if (co->caller) {
        fprintf(stderr, "%s: coroutine re-entered recursively\n",
                qemu_get_progname());
        abort();
    }

    co->caller = self;
    co->started = true;
    /* Other threads read co->ctx in aio_co_wake(). */
    __atomic_store_n(&co->ctx, ctx, __ATOMIC_RELEASE);

    ret = qemu_coroutine_switch(self, co, COROUTINE_ENTER);
    switch (ret) {
    case COROUTINE_YIELD:
        return;
    case COROUTINE_TERMINATE:
        /* Invariant 2: the coroutine goes back to the pool. */
        co->caller = NULL;
        co->started = false;
        coroutine_pool_put(co);
        return;
    default:
        abort();
    }
}

void qemu_coroutine_enter(Coroutine *co)
{
    qemu_aio_coroutine_enter(qemu_get_current_aio_context(), co);
}

void qemu_coroutine_enter_if_inactive(Coroutine *co)
{
    if (!co->caller) {
        qemu_coroutine_enter(co);
    }
}

void coroutine_fn qemu_coroutine_yield(void)
{
    Coroutine *self = qemu_coroutine_current();
    Coroutine *to = self->caller;

    if (!to || qemu_coroutine_is_leader(self)) {
        fprintf(stderr, "%s: coroutine yielding to no one\n",
                qemu_get_progname());
        abort();
    }
    self->caller = NULL;
    qemu_coroutine_switch(self, to, COROUTINE_YIELD);
}

Coroutine *qemu_coroutine_self(void)
{
    Coroutine *co = qemu_coroutine_current();

    return qemu_coroutine_is_leader(co) ? NULL : co;
}

bool qemu_in_coroutine(void)
{
    return qemu_coroutine_self() != NULL;
}

bool qemu_coroutine_entered(Coroutine *co)
{
    return co->started;
}

AioContext *qemu_coroutine_get_aio_context(Coroutine *co)
{
    return __atomic_load_n(&co->ctx, __ATOMIC_ACQUIRE);
}
