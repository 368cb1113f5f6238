/*
 * Common includes and small macros every qblock source file uses.
 *
 * Platform-specific code lives in util/; this header only gathers the
 * standard headers and the helpers that make the rest read uniformly.
 */
#ifndef QBLOCK_OSDEP_H
#define QBLOCK_OSDEP_H

#define _GNU_SOURCE 1
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>
#include <glib.h>

/*
 * Marks a function that may only be called from coroutine context (it may
 * yield).  Documentation only: the compiler does not check it.
 */
#define coroutine_fn
/* A function that may be called in or out of coroutine context. */
#define coroutine_mixed_fn

#ifndef MIN
#define MIN(a, b) (((a) < (b)) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) (((a) > (b)) ? (a) : (b))
#endif

#define QEMU_ALIGN_DOWN(n, m) ((n) / (m) * (m))
#define QEMU_ALIGN_UP(n, m) QEMU_ALIGN_DOWN((n) + (m) - 1, (m))
#define QEMU_IS_ALIGNED(n, m) (((n) % (m)) == 0)
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))
#define ROUND_UP(n, d) QEMU_ALIGN_UP(n, d)
#define ARRAY_SIZE(x) (sizeof(x) / sizeof((x)[0]))

#ifndef container_of
#define container_of(ptr, type, member) \
    ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/*
 * Reverses the singly linked list @head, linked through its @next member,
 * and evaluates to the new head.  Lock-free queues push at the head; their
 * consumer takes the whole list at once and turns it into arrival order.
 */
#define QEMU_LIST_REVERSED(head, next) ({               \
        typeof(head) qlr_cur = (head);                  \
        typeof(head) qlr_rev = NULL;                    \
        while (qlr_cur) {                               \
            typeof(head) qlr_next = qlr_cur->next;      \
            qlr_cur->next = qlr_rev;                    \
            qlr_rev = qlr_cur;                          \
            qlr_cur = qlr_next;                         \
        }                                               \
        qlr_rev;                                        \
    })

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define QEMU_PRINTF(fmt_idx, arg_idx) \
    __attribute__((format(printf, fmt_idx, arg_idx)))
#define QEMU_NORETURN __attribute__((noreturn))
#define QEMU_PACKED __attribute__((packed))

/* Sizes, so that constants read as what they are. */
#define KiB (INT64_C(1) << 10)
#define MiB (INT64_C(1) << 20)
#define GiB (INT64_C(1) << 30)
#define TiB (INT64_C(1) << 40)
#define PiB (INT64_C(1) << 50)
#define EiB (INT64_C(1) << 60)

#define BDRV_SECTOR_BITS 9
#define BDRV_SECTOR_SIZE (1ULL << BDRV_SECTOR_BITS)

/* Page size of the host, for buffer alignment (O_DIRECT). */
size_t qemu_real_host_page_size(void);

/* Buffers suitable for O_DIRECT I/O: aligned to @align (a power of two). */
void *qemu_memalign(size_t align, size_t size);
void *qemu_try_memalign(size_t align, size_t size);
void qemu_vfree(void *ptr);

/* Monotonic clock, in nanoseconds. */
int64_t get_clock_ns(void);

/* Name under which the program was invoked (basename of argv[0]). */
void qemu_init_progname(const char *argv0);
const char *qemu_get_progname(void);
/*
 * The -V/--version line of qblock-io, qblock-nbd and qblock-storage-daemon:
 * the program's name, qblock's version and the QEMU tool (@qemu_tool) it
 * stands in for.
 */
void qemu_print_version(const char *qemu_tool);

static inline bool is_power_of_2(uint64_t value)
{
    return value && !(value & (value - 1));
}

static inline int ctz64(uint64_t val)
{
    return val ? __builtin_ctzll(val) : 64;
}

static inline int clz64(uint64_t val)
{
    return val ? __builtin_clzll(val) : 64;
}

#endif
