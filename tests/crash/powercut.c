/*
 * A power-cut injector for tests: preloaded (LD_PRELOAD) into a qblock or
 * a QEMU tool, it plays the volatile write cache of the disk under one
 * file, as block/blkcrash.c does inside the block layer, for the
 * operations that only a tool performs (qemu-img commit, rebase).
 *
 * Every write, fallocate and ftruncate of the file since its last
 * fdatasync/fsync is "in the cache".  It does go to the file, so the
 * process reads it back, but its pre-image is kept.  When the power goes,
 * the file is first rolled back to what the last sync left (the
 * pre-images, newest first), then a subset of the cached changes is
 * replayed in order, as the cut mode says, and the process is killed.
 *
 *   POWERCUT_FILE   the file (any name for it)
 *   POWERCUT_AT     the power goes as this request arrives (1-based,
 *                   counting writes, fallocates, ftruncates and syncs of
 *                   the file), or at exit if that comes first, one past
 *                   the last; unset or 0: never
 *   POWERCUT_MODE   all (every unsynced change is lost, the default),
 *                   random-writes (each one independently survives or
 *                   not), random-sectors (each 512-byte sector of each
 *                   write does)
 *   POWERCUT_SEED   the seed of the random choices
 *   POWERCUT_COUNT  when set, the number of requests is written into this
 *                   file when the process exits normally
 *
 * Invariant: under pc_lock, the file's content equals its content at the
 * last sync with every journal entry applied in order; an entry's
 * pre-image is what its range held just before it.
 */
/* both the plain and the 64-bit names are defined below */
#undef _FILE_OFFSET_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define PC_SECTOR 512

typedef enum PcKind {
    PC_WRITE,
    PC_ZERO,                    /* fallocate: reads as zeroes after */
    PC_TRUNCATE,
} PcKind;

typedef struct PcEntry {
    PcKind kind;
    off_t offset;               /* PC_TRUNCATE: the new size */
    size_t len;
    unsigned char *data;        /* PC_WRITE only */
    off_t old_size;             /* the file's size just before */
    unsigned char *pre;         /* [offset, MIN(offset + len, old_size)) */
    size_t pre_len;
    struct PcEntry *next;
} PcEntry;

static pthread_mutex_t pc_lock = PTHREAD_MUTEX_INITIALIZER;
static char pc_target[PATH_MAX];
static long pc_cut_at;
static long pc_requests;
static int pc_mode;             /* 0 all, 1 random-writes, 2 random-sectors */
static unsigned int pc_seed;
static PcEntry *pc_head, *pc_tail;

/* The real functions, found once (RTLD_NEXT: the C library's). */
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64v2)(int, const struct iovec *, int, off_t,
                                   int);
static ssize_t (*real_pread64)(int, void *, size_t, off_t);
static int (*real_fallocate64)(int, int, off_t, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_fdatasync)(int);
static int (*real_fsync)(int);

__attribute__((constructor))
static void pc_init(void)
{
    const char *file = getenv("POWERCUT_FILE");
    const char *at = getenv("POWERCUT_AT");
    const char *mode = getenv("POWERCUT_MODE");
    const char *seed = getenv("POWERCUT_SEED");

    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_pwritev64 = dlsym(RTLD_NEXT, "pwritev64");
    real_pwritev64v2 = dlsym(RTLD_NEXT, "pwritev64v2");
    real_pread64 = dlsym(RTLD_NEXT, "pread64");
    real_fallocate64 = dlsym(RTLD_NEXT, "fallocate64");
    real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    if (file && !realpath(file, pc_target)) {
        pc_target[0] = '\0';
    }
    pc_cut_at = at ? strtol(at, NULL, 10) : 0;
    pc_mode = !mode || !strcmp(mode, "all") ? 0 :
              !strcmp(mode, "random-writes") ? 1 : 2;
    pc_seed = seed ? strtoul(seed, NULL, 10) : 1;
}


/* True if @fd is open on the target file. */
static int pc_is_target(int fd)
{
    char link[64], path[PATH_MAX];
    ssize_t n;

    if (!pc_target[0]) {
        return 0;
    }
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof(path) - 1);
    if (n < 0) {
        return 0;
    }
    path[n] = '\0';
    return !strcmp(path, pc_target);
}

static off_t pc_size(int fd)
{
    struct stat st;

    return fstat(fd, &st) == 0 ? st.st_size : 0;
}

static void pc_write_all(int fd, const void *buf, size_t len, off_t off)
{
    const unsigned char *p = buf;

    while (len > 0) {
        ssize_t n = real_pwrite64(fd, p, len, off);

        if (n <= 0) {
            abort();
        }
        p += n;
        len -= n;
        off += n;
    }
}

static void pc_zero(int fd, off_t off, size_t len)
{
    static const unsigned char zeroes[PC_SECTOR];

    while (len > 0) {
        size_t n = len < sizeof(zeroes) ? len : sizeof(zeroes);

        pc_write_all(fd, zeroes, n, off);
        off += n;
        len -= n;
    }
}

/* Journals a change of [@off, @off + @len) that is about to be made. */
static void pc_journal(int fd, PcKind kind, off_t off, size_t len,
                       const struct iovec *iov, int cnt)
{
    PcEntry *e = calloc(1, sizeof(*e));
    off_t end = kind == PC_TRUNCATE ? 0 : off + (off_t)len;

    e->kind = kind;
    e->offset = off;
    e->len = len;
    e->old_size = pc_size(fd);
    if (kind == PC_TRUNCATE) {
        /* a shrink loses [off, old_size): keep it */
        end = e->old_size;
    }
    if (end > e->old_size) {
        end = e->old_size;
    }
    if (end > off) {
        e->pre_len = end - off;
        e->pre = malloc(e->pre_len);
        if (real_pread64(fd, e->pre, e->pre_len, off) !=
            (ssize_t)e->pre_len) {
            abort();
        }
    }
    if (kind == PC_WRITE) {
        size_t done = 0;

        e->data = malloc(len);
        for (int i = 0; i < cnt && done < len; i++) {
            size_t n = iov[i].iov_len < len - done ? iov[i].iov_len :
                       len - done;

            memcpy(e->data + done, iov[i].iov_base, n);
            done += n;
        }
    }
    if (pc_tail) {
        pc_tail->next = e;
    } else {
        pc_head = e;
    }
    pc_tail = e;
}

static void pc_journal_clear(void)
{
    while (pc_head) {
        PcEntry *e = pc_head;

        pc_head = e->next;
        free(e->data);
        free(e->pre);
        free(e);
    }
    pc_tail = NULL;
}

/* Rolls @e back (called newest first). */
static void pc_undo(int fd, PcEntry *e)
{
    if (e->kind == PC_TRUNCATE || pc_size(fd) != e->old_size) {
        real_ftruncate64(fd, e->old_size);
    }
    if (e->pre_len) {
        pc_write_all(fd, e->pre, e->pre_len, e->offset);
    }
}

static void pc_redo_range(int fd, PcEntry *e, off_t off, size_t len)
{
    if (e->kind == PC_WRITE) {
        pc_write_all(fd, e->data + (off - e->offset), len, off);
    } else {
        pc_zero(fd, off, len);
    }
}

/* The power goes: roll back to the last sync, replay a subset, die. */
static void pc_cut(int fd)
{
    PcEntry **list;
    int n = 0;

    for (PcEntry *e = pc_head; e; e = e->next) {
        n++;
    }
    list = malloc((n + 1) * sizeof(*list));
    n = 0;
    for (PcEntry *e = pc_head; e; e = e->next) {
        list[n++] = e;
    }
    for (int i = n - 1; i >= 0; i--) {
        pc_undo(fd, list[i]);
    }
    srand(pc_seed);
    for (int i = 0; i < n && pc_mode; i++) {
        PcEntry *e = list[i];

        if (e->kind == PC_TRUNCATE) {
            if (rand() & 1) {
                real_ftruncate64(fd, e->offset);
            }
        } else if (pc_mode == 1) {
            if (rand() & 1) {
                pc_redo_range(fd, e, e->offset, e->len);
            }
        } else {
            for (off_t s = e->offset; s < e->offset + (off_t)e->len;) {
                off_t end = (s / PC_SECTOR + 1) * PC_SECTOR;

                if (end > e->offset + (off_t)e->len) {
                    end = e->offset + e->len;
                }
                if (rand() & 1) {
                    pc_redo_range(fd, e, s, end - s);
                }
                s = end;
            }
        }
    }
    kill(getpid(), SIGKILL);
    abort();
}

/*
 * At exit: the count, and the power cut armed for the request after the
 * last one (the power goes as soon as the tool is done: what it did not
 * sync is lost).
 */
__attribute__((destructor))
static void pc_fini(void)
{
    const char *count = getenv("POWERCUT_COUNT");
    FILE *f;
    int fd;

    if (count && (f = fopen(count, "w"))) {
        fprintf(f, "%ld\n", pc_requests);
        fclose(f);
    }
    if (pc_cut_at && pc_cut_at == pc_requests + 1 &&
        (fd = open(pc_target, O_WRONLY)) >= 0) {
        pc_cut(fd);
    }
}

/*
 * Counts a request to the target; cuts the power if it is the one armed.
 * Returns with pc_lock held if @fd is the target (the caller makes the
 * change and calls pc_leave), else without it and 0.
 */
static int pc_enter(int fd)
{
    if (!pc_is_target(fd)) {
        return 0;
    }
    pthread_mutex_lock(&pc_lock);
    if (++pc_requests == pc_cut_at) {
        pc_cut(fd);
    }
    return 1;
}

static void pc_leave(void)
{
    pthread_mutex_unlock(&pc_lock);
}

static size_t pc_iov_len(const struct iovec *iov, int cnt)
{
    size_t len = 0;

    for (int i = 0; i < cnt; i++) {
        len += iov[i].iov_len;
    }
    return len;
}

static ssize_t pc_pwritev(int fd, const struct iovec *iov, int cnt, off_t off,
                          int flags, int v2)
{
    ssize_t ret;

    if (!pc_enter(fd)) {
        return v2 ? real_pwritev64v2(fd, iov, cnt, off, flags) :
               real_pwritev64(fd, iov, cnt, off);
    }
    pc_journal(fd, PC_WRITE, off, pc_iov_len(iov, cnt), iov, cnt);
    ret = v2 ? real_pwritev64v2(fd, iov, cnt, off, flags) :
          real_pwritev64(fd, iov, cnt, off);
    pc_leave();
    return ret;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    struct iovec iov = { (void *)buf, n };

    return pc_pwritev(fd, &iov, 1, off, 0, 0);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    struct iovec iov = { (void *)buf, n };

    return pc_pwritev(fd, &iov, 1, off, 0, 0);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return pc_pwritev(fd, iov, cnt, off, 0, 0);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return pc_pwritev(fd, iov, cnt, off, 0, 0);
}

ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off,
                 int flags)
{
    return pc_pwritev(fd, iov, cnt, off, flags, 1);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off,
                    int flags)
{
    return pc_pwritev(fd, iov, cnt, off, flags, 1);
}

static int pc_fallocate(int fd, int mode, off_t off, off_t len)
{
    int ret;

    if (!pc_enter(fd)) {
        return real_fallocate64(fd, mode, off, len);
    }
    if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
        pc_journal(fd, PC_ZERO, off, len, NULL, 0);
    } else if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > pc_size(fd)) {
        /* preallocation keeps the data: only the size can change */
        pc_journal(fd, PC_TRUNCATE, off + len, 0, NULL, 0);
    }
    ret = real_fallocate64(fd, mode, off, len);
    pc_leave();
    return ret;
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
    return pc_fallocate(fd, mode, off, len);
}

int fallocate64(int fd, int mode, off_t off, off_t len)
{
    return pc_fallocate(fd, mode, off, len);
}

static int pc_ftruncate(int fd, off_t size)
{
    int ret;

    if (!pc_enter(fd)) {
        return real_ftruncate64(fd, size);
    }
    pc_journal(fd, PC_TRUNCATE, size, 0, NULL, 0);
    ret = real_ftruncate64(fd, size);
    pc_leave();
    return ret;
}

int ftruncate(int fd, off_t size)
{
    return pc_ftruncate(fd, size);
}

int ftruncate64(int fd, off_t size)
{
    return pc_ftruncate(fd, size);
}

/* A sync that returns makes everything before it durable. */
static int pc_sync(int fd, int (*real)(int))
{
    int ret;

    if (!pc_enter(fd)) {
        return real(fd);
    }
    ret = real(fd);
    if (ret == 0) {
        pc_journal_clear();
    }
    pc_leave();
    return ret;
}

int fdatasync(int fd)
{
    return pc_sync(fd, real_fdatasync);
}

int fsync(int fd)
{
    return pc_sync(fd, real_fsync);
}
