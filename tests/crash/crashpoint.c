/*
 * A crash injector for tests: preloaded (LD_PRELOAD) into a qblock or a
 * QEMU tool, it counts the writes that reach one file and kills the
 * process with SIGKILL right after the Nth of them has returned, as a
 * crash at that point would (what the write put into the page cache
 * stays, as it does when a process dies).
 *
 *   CRASHPOINT_FILE   the file whose writes are counted (any name for it)
 *   CRASHPOINT_AT     kill after this write (1-based); unset or 0: never
 *   CRASHPOINT_COUNT  when set, the number of counted writes is written
 *                     into this file when the process exits normally
 *
 * A test first runs the command once with CRASHPOINT_COUNT to learn how
 * many writes it makes, then once per crash point.
 */
/* both the plain and the 64-bit names are defined below */
#undef _FILE_OFFSET_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static char target[PATH_MAX];
static long crash_at;
static long writes;

__attribute__((constructor))
static void crashpoint_init(void)
{
    const char *file = getenv("CRASHPOINT_FILE");
    const char *at = getenv("CRASHPOINT_AT");

    if (file && !realpath(file, target)) {
        target[0] = '\0';
    }
    crash_at = at ? strtol(at, NULL, 10) : 0;
}

__attribute__((destructor))
static void crashpoint_fini(void)
{
    const char *count = getenv("CRASHPOINT_COUNT");
    FILE *f;

    if (count && (f = fopen(count, "w"))) {
        fprintf(f, "%ld\n", __atomic_load_n(&writes, __ATOMIC_SEQ_CST));
        fclose(f);
    }
}

/* True if @fd is open on the target file. */
static int crashpoint_is_target(int fd)
{
    char link[64], path[PATH_MAX];
    ssize_t n;

    if (!target[0]) {
        return 0;
    }
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof(path) - 1);
    if (n < 0) {
        return 0;
    }
    path[n] = '\0';
    return !strcmp(path, target);
}

/* Called after a successful write to @fd. */
static void crashpoint_count(int fd, ssize_t ret)
{
    if (ret <= 0 || !crashpoint_is_target(fd)) {
        return;
    }
    if (__atomic_add_fetch(&writes, 1, __ATOMIC_SEQ_CST) == crash_at) {
        kill(getpid(), SIGKILL);
    }
}

#define REAL(name) \
    static __typeof__(name) *real_##name; \
    if (!real_##name) { \
        real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name); \
    }

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    ssize_t ret;
    REAL(pwrite);

    ret = real_pwrite(fd, buf, n, off);
    crashpoint_count(fd, ret);
    return ret;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    ssize_t ret;
    REAL(pwrite64);

    ret = real_pwrite64(fd, buf, n, off);
    crashpoint_count(fd, ret);
    return ret;
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    ssize_t ret;
    REAL(pwritev);

    ret = real_pwritev(fd, iov, cnt, off);
    crashpoint_count(fd, ret);
    return ret;
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    ssize_t ret;
    REAL(pwritev64);

    ret = real_pwritev64(fd, iov, cnt, off);
    crashpoint_count(fd, ret);
    return ret;
}

ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off,
                 int flags)
{
    ssize_t ret;
    REAL(pwritev2);

    ret = real_pwritev2(fd, iov, cnt, off, flags);
    crashpoint_count(fd, ret);
    return ret;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    ssize_t ret;
    REAL(write);

    ret = real_write(fd, buf, n);
    crashpoint_count(fd, ret);
    return ret;
}
