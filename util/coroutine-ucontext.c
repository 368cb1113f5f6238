/*
 * Coroutine stack switching with ucontext and sigsetjmp/siglongjmp.
 *
 * makecontext()/setcontext() are used once per coroutine, to start it on
 * its own stack; setcontext() restores the signal mask with a system call,
 * so every later switch uses sigsetjmp(env, 0)/siglongjmp(), which touch
 * registers only.  The creator's state is saved with sigsetjmp() rather
 * than swapcontext(): it is only ever resumed by siglongjmp(), and
 * AddressSanitizer warns about every program that calls swapcontext().
 *
 * Each thread has a "leader": a pseudo-coroutine standing for the thread's
 * own stack, so that the generic code can switch back to "not in a
 * coroutine" like to any other coroutine.
 *
 * Invariants:
 *  1. Stacks are STACK_SIZE bytes of mmap'ed memory above one PROT_NONE
 *     guard page, so an overflow faults instead of corrupting memory.
 *  2. Every switch is announced to AddressSanitizer (start before, finish
 *     after) so that it tracks which stack is live; a terminating
 *     coroutine passes no fake-stack slot, which frees its fake stack.
 *  3. Stacks are registered with valgrind for as long as they are mapped.
 */
#include "config-host.h"
#include "util/osdep.h"
#include "coroutine-int.h"

#include <pthread.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

#if defined(CONFIG_ASAN) || defined(__SANITIZE_ADDRESS__)
#define COROUTINE_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#ifdef CONFIG_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

/*
 * 1 MiB: deep enough for the block layer's call chains (qcow2 over file
 * with a few format layers), and only the pages touched become resident.
 */
#define STACK_SIZE (1 * MiB)

typedef struct CoroutineUContext {
    Coroutine base;
    void *stack;            /* lowest usable byte */
    size_t stack_size;
    void *map;              /* guard page + stack, as mmap'ed */
    size_t map_size;
    sigjmp_buf env;
    /* Only used while creating: where to go back after the first switch. */
    sigjmp_buf *creator_env;
    void *creator_fake_stack;
#ifdef CONFIG_VALGRIND_H
    unsigned int valgrind_stack_id;
#endif
#ifdef COROUTINE_ASAN
    void *fake_stack_save;
#endif
} CoroutineUContext;

static __thread CoroutineUContext leader;
static __thread Coroutine *current;

/*
 * Out of line, with an empty asm so the compiler cannot assume the result
 * is the same before and after a switch (the caller may have moved to
 * another thread in between).
 */
static __attribute__((noinline)) CoroutineUContext *coroutine_get_leader(void)
{
    asm volatile("");
    return &leader;
}

static __attribute__((noinline)) Coroutine *coroutine_get_current(void)
{
    asm volatile("");
    return current;
}

static __attribute__((noinline)) void coroutine_set_current(Coroutine *co)
{
    asm volatile("");
    current = co;
}

#ifdef COROUTINE_ASAN
/* ASan must know the leader's stack bounds to switch back to it. */
static void coroutine_leader_init_stack(CoroutineUContext *l)
{
    pthread_attr_t attr;
    void *addr;
    size_t size;

    if (l->stack) {
        return;
    }
    if (pthread_getattr_np(pthread_self(), &attr)) {
        abort();
    }
    pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    l->stack = addr;
    l->stack_size = size;
}
#endif

static void coroutine_start_switch(void **fake_stack_save,
                                   const void *bottom, size_t size)
{
#ifdef COROUTINE_ASAN
    __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#endif
}

static void coroutine_finish_switch(void *fake_stack_save,
                                    const void **bottom_old, size_t *size_old)
{
#ifdef COROUTINE_ASAN
    __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
#endif
}

static void **coroutine_fake_stack_slot(CoroutineUContext *co)
{
#ifdef COROUTINE_ASAN
    return &co->fake_stack_save;
#else
    return NULL;
#endif
}

static void *coroutine_fake_stack(CoroutineUContext *co)
{
#ifdef COROUTINE_ASAN
    return co->fake_stack_save;
#else
    return NULL;
#endif
}

Coroutine *qemu_coroutine_current(void)
{
    Coroutine *co = coroutine_get_current();

    return co ? co : &coroutine_get_leader()->base;
}

bool qemu_coroutine_is_leader(Coroutine *co)
{
    return co == &coroutine_get_leader()->base;
}

/*
 * Runs on the new stack.  The first time (from setcontext) it only saves
 * its state and jumps back to the creator; later entries land after the
 * sigsetjmp and run the entry function, once per use from the pool.
 */
static void coroutine_trampoline(int ptr_lo, int ptr_hi)
{
    uintptr_t ptr = (uintptr_t)(unsigned int)ptr_lo |
                    ((uintptr_t)(unsigned int)ptr_hi << 32);
    CoroutineUContext *self = (CoroutineUContext *)ptr;
    Coroutine *co = &self->base;
    const void *creator_stack = NULL;
    size_t creator_stack_size = 0;

    coroutine_finish_switch(NULL, &creator_stack, &creator_stack_size);
    if (!sigsetjmp(self->env, 0)) {
        coroutine_start_switch(coroutine_fake_stack_slot(self),
                               creator_stack, creator_stack_size);
        siglongjmp(*self->creator_env, 1);
    }
    coroutine_finish_switch(coroutine_fake_stack(self), NULL, NULL);

    for (;;) {
        co->entry(co->entry_arg);
        qemu_coroutine_switch(co, co->caller, COROUTINE_TERMINATE);
    }
}

static void coroutine_map_stack(CoroutineUContext *co)
{
    size_t page = qemu_real_host_page_size();

    co->map_size = STACK_SIZE + page;
    co->map = mmap(NULL, co->map_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (co->map == MAP_FAILED) {
        fprintf(stderr, "%s: cannot map a %zu byte coroutine stack: %s\n",
                qemu_get_progname(), co->map_size, strerror(errno));
        abort();
    }
    if (mprotect(co->map, page, PROT_NONE)) {
        fprintf(stderr, "%s: cannot protect the coroutine stack guard: %s\n",
                qemu_get_progname(), strerror(errno));
        abort();
    }
    co->stack = (char *)co->map + page;
    co->stack_size = STACK_SIZE;
#ifdef CONFIG_VALGRIND_H
    co->valgrind_stack_id =
        VALGRIND_STACK_REGISTER(co->stack, (char *)co->stack + STACK_SIZE);
#endif
}

Coroutine *qemu_coroutine_new(void)
{
    CoroutineUContext *co = g_new0(CoroutineUContext, 1);
    ucontext_t uc;
    sigjmp_buf old_env;
    uintptr_t ptr = (uintptr_t)co;

    coroutine_map_stack(co);
#ifdef COROUTINE_ASAN
    coroutine_leader_init_stack(coroutine_get_leader());
#endif

    if (getcontext(&uc) == -1) {
        abort();
    }
    uc.uc_link = NULL;
    uc.uc_stack.ss_sp = co->stack;
    uc.uc_stack.ss_size = co->stack_size;
    uc.uc_stack.ss_flags = 0;
    makecontext(&uc, (void (*)(void))coroutine_trampoline, 2,
                (int)(uint32_t)ptr, (int)(uint32_t)(ptr >> 32));

    co->creator_env = &old_env;
    if (!sigsetjmp(old_env, 0)) {
        coroutine_start_switch(&co->creator_fake_stack, co->stack,
                               co->stack_size);
        setcontext(&uc);
    } else {
        coroutine_finish_switch(co->creator_fake_stack, NULL, NULL);
    }
    co->creator_env = NULL;
    return &co->base;
}

void qemu_coroutine_delete(Coroutine *co_)
{
    CoroutineUContext *co = container_of(co_, CoroutineUContext, base);

#ifdef CONFIG_VALGRIND_H
    VALGRIND_STACK_DEREGISTER(co->valgrind_stack_id);
#endif
#ifdef COROUTINE_ASAN
    /* Frames left poisoned on this stack must not haunt a later mapping. */
    ASAN_UNPOISON_MEMORY_REGION(co->stack, co->stack_size);
#endif
    munmap(co->map, co->map_size);
    g_free(co);
}

CoroutineAction qemu_coroutine_switch(Coroutine *from_, Coroutine *to_,
                                      CoroutineAction action)
{
    CoroutineUContext *from = container_of(from_, CoroutineUContext, base);
    CoroutineUContext *to = container_of(to_, CoroutineUContext, base);
    int ret;

#ifdef COROUTINE_ASAN
    if (qemu_coroutine_is_leader(to_)) {
        coroutine_leader_init_stack(to);
    }
#endif
    coroutine_set_current(qemu_coroutine_is_leader(to_) ? NULL : to_);

    ret = sigsetjmp(from->env, 0);
    if (ret == 0) {
        coroutine_start_switch(action == COROUTINE_TERMINATE ?
                               NULL : coroutine_fake_stack_slot(from),
                               to->stack, to->stack_size);
        siglongjmp(to->env, action);
    }
    coroutine_finish_switch(coroutine_fake_stack(from), NULL, NULL);
    return ret;
}
