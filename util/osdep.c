/*
 * Small platform helpers: aligned buffers, the monotonic clock and the
 * program name used as the prefix of every error message and in the
 * version line.
 */
#include "util/osdep.h"
#include "config-host.h"

#include <time.h>

static char progname[64] = "qblock";

size_t qemu_real_host_page_size(void)
{
    static size_t page_size;

    if (!page_size) {
        long ret = sysconf(_SC_PAGESIZE);
        page_size = ret > 0 ? (size_t)ret : 4096;
    }
    return page_size;
}

void *qemu_try_memalign(size_t align, size_t size)
{
    void *ptr;

    if (align < sizeof(void *)) {
        align = sizeof(void *);
    }
    assert(is_power_of_2(align));
    /* posix_memalign(0) may return NULL; callers expect a valid pointer. */
    if (posix_memalign(&ptr, align, size ? size : 1)) {
        return NULL;
    }
    return ptr;
}

void *qemu_memalign(size_t align, size_t size)
{
    void *ptr = qemu_try_memalign(align, size);

    if (!ptr) {
        fprintf(stderr, "%s: failed to allocate %zu bytes\n", progname, size);
        abort();
    }
    return ptr;
}

void qemu_vfree(void *ptr)
{
    free(ptr);
}

int64_t get_clock_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

void qemu_init_progname(const char *argv0)
{
    const char *base = strrchr(argv0, '/');

    g_strlcpy(progname, base ? base + 1 : argv0, sizeof(progname));
}

const char *qemu_get_progname(void)
{
    return progname;
}

void qemu_print_version(const char *qemu_tool)
{
    printf("%s version %s (qblock, compatible with %s 7.2)\n", progname,
           QBLOCK_VERSION, qemu_tool);
}
