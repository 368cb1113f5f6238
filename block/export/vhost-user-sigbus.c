/*
 * The SIGBUS guard of vhost-user guest memory (vhost-user-sigbus.h).
 *
 * A front-end may shrink a guest memory file after SET_MEM_TABLE even
 * though the server checked its size then.  Where the front-end offers
 * sealed memory the server seals it against shrinking instead
 * (vhost-user-server.c); this guard covers memory that cannot be sealed
 * (a memfd without MFD_ALLOW_SEALING, a file on tmpfs or hugetlbfs).
 * Guest memory is touched by the ring code, the device's request
 * handler and the block layer (which may copy guest buffers in worker
 * threads), so rather than wrapping every access in sigsetjmp(), the
 * handler makes the faulting access succeed: it maps anonymous memory
 * over the guarded mapping (MAP_FIXED) and returns, the instruction runs
 * again on a zero page, and the connection is ended from the loop.  What
 * the guest loses is memory its front-end destroyed itself.
 *
 * Invariants:
 *  1. A slot is free while its start is 0.  vu_sigbus_guard() fills size
 *     and notify_fd before it publishes start (release), and the handler
 *     reads start (acquire) before the rest, so it never sees half a
 *     slot.  Slots are taken and freed in the server's thread only.
 *  2. A guarded mapping is not unmapped while a request may touch it
 *     (invariant 1 of vhost-user-server.c), so a fault in a worker thread
 *     never races with the slot's release.
 *  3. The handler calls only async-signal-safe functions (mmap and
 *     write are system calls), and a SIGBUS outside every guarded
 *     mapping gets the disposition it had before the guard was
 *     installed: the process dies as it would have without it.
 */
#include "vhost-user-sigbus.h"

#include <signal.h>
#include <sys/mman.h>

typedef struct VuSigbusSlot {
    uintptr_t start;            /* invariant 1: 0 while free */
    size_t size;
    int notify_fd;
    int faulted;                /* set by the handler */
    uintptr_t fault_offset;
} VuSigbusSlot;

static VuSigbusSlot vu_sigbus_slots[VU_SIGBUS_MAX_GUARDS];
static struct sigaction vu_sigbus_old_action;
static bool vu_sigbus_installed;

/* Invariant 3: not ours, so as if there were no handler. */
static void vu_sigbus_not_ours(int sig, siginfo_t *info, void *uc)
{
    if (vu_sigbus_old_action.sa_flags & SA_SIGINFO) {
        vu_sigbus_old_action.sa_sigaction(sig, info, uc);
        return;
    }
    if (vu_sigbus_old_action.sa_handler != SIG_DFL &&
        vu_sigbus_old_action.sa_handler != SIG_IGN) {
        vu_sigbus_old_action.sa_handler(sig);
        return;
    }
    /* the access faults again on return and kills the process; a
     * SIGBUS sent by kill() is raised again */
    sigaction(SIGBUS, &vu_sigbus_old_action, NULL);
    if (info->si_code <= 0) {
        raise(sig);
    }
}

static void vu_sigbus_handler(int sig, siginfo_t *info, void *uc)
{
    uintptr_t addr = (uintptr_t)info->si_addr;

    for (unsigned int i = 0; info->si_code > 0 &&
                             i < VU_SIGBUS_MAX_GUARDS; i++) {
        VuSigbusSlot *slot = &vu_sigbus_slots[i];
        uintptr_t start = __atomic_load_n(&slot->start, __ATOMIC_ACQUIRE);
        uint64_t one = 1;
        void *p;

        if (!start || addr < start || addr - start >= slot->size) {
            continue;
        }
        p = mmap((void *)start, slot->size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                 -1, 0);
        if (p == MAP_FAILED) {
            break;
        }
        slot->fault_offset = addr - start;
        __atomic_store_n(&slot->faulted, 1, __ATOMIC_RELEASE);
        if (write(slot->notify_fd, &one, sizeof(one)) < 0) {
            /* a saturated eventfd has been told already */
        }
        return;
    }
    vu_sigbus_not_ours(sig, info, uc);
}

static void vu_sigbus_install(void)
{
    struct sigaction sa = {
        .sa_sigaction = vu_sigbus_handler,
        .sa_flags = SA_SIGINFO,
    };

    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &vu_sigbus_old_action);
    vu_sigbus_installed = true;
}

int vu_sigbus_guard(void *addr, size_t size, int notify_fd)
{
    if (!vu_sigbus_installed) {
        vu_sigbus_install();
    }
    for (int i = 0; i < VU_SIGBUS_MAX_GUARDS; i++) {
        VuSigbusSlot *slot = &vu_sigbus_slots[i];

        if (slot->start) {
            continue;
        }
        /* invariant 1 */
        slot->size = size;
        slot->notify_fd = notify_fd;
        slot->faulted = 0;
        slot->fault_offset = 0;
        __atomic_store_n(&slot->start, (uintptr_t)addr, __ATOMIC_RELEASE);
        return i;
    }
    return -ENOSPC;
}

void vu_sigbus_unguard(int slot)
{
    assert(slot >= 0 && slot < VU_SIGBUS_MAX_GUARDS);
    __atomic_store_n(&vu_sigbus_slots[slot].start, 0, __ATOMIC_RELEASE);
}

bool vu_sigbus_take_fault(int slot, uint64_t *offset)
{
    VuSigbusSlot *s = &vu_sigbus_slots[slot];

    assert(slot >= 0 && slot < VU_SIGBUS_MAX_GUARDS);
    if (!__atomic_exchange_n(&s->faulted, 0, __ATOMIC_ACQUIRE)) {
        return false;
    }
    *offset = s->fault_offset;
    return true;
}
