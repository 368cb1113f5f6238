/*
 * The file protocol driver: POSIX regular files.  Block and character
 * devices have their own drivers (host_device, host_cdrom in
 * block/file-host-device.c) built on this code through block/file-posix.h.
 *
 * Data moves through one of three backends chosen at open time: a thread
 * pool doing preadv/pwritev (aio=threads, the default), Linux AIO
 * (aio=native, only with O_DIRECT) or io_uring (aio=io_uring).  Everything
 * that may block and has no asynchronous form (fdatasync, fallocate,
 * ftruncate) runs in the thread pool, so the event loop never waits on the
 * disk; through the page cache, small transfers are first tried in place
 * where the kernel need not wait for the disk (raw_try_in_place()).
 *
 * Invariants:
 *  1. The file is never opened with O_DSYNC or O_SYNC: in writethrough
 *     mode the generic layer flushes after each write.  O_DIRECT is used
 *     exactly when BDRV_O_NOCACHE is set; requests then honour
 *     s->request_alignment and s->buf_align (misaligned buffers are
 *     bounced here).
 *  2. A read that ends beyond the end of the file returns zeroes for the
 *     part after it; every other short transfer is completed by retrying.
 *  3. Image locking follows QEMU, so that qblock and QEMU processes see
 *     each other: open file description (OFD) read locks on byte
 *     RAW_LOCK_PERM_BASE + i for each permission bit i the node uses and on
 *     byte RAW_LOCK_SHARED_BASE + i for each bit it does not share.  A
 *     conflict is a write lock that cannot be placed (F_OFD_GETLK) on the
 *     opposite byte.  s->locked_perm/s->locked_unshared describe the
 *     committed state; between check_perm and set_perm/abort the fd holds
 *     the union of the committed and the proposed state.
 *  4. After fdatasync fails once, the page cache may have dropped data that
 *     never reached the disk: every later flush fails with the same error.
 *  5. The length of a regular file is cached (s->cached_length, -1 when
 *     unknown) because the generic layer asks for it on every request.
 *     Every operation of this node that may move the end of file drops the
 *     cache when it completes; other processes are kept from resizing the
 *     file by the RESIZE permission, as in QEMU, which caches it too.
 *
 * All state is used from the node's AioContext thread only; worker
 * functions run in the thread pool and touch nothing but their argument.
 */
#include "block/block_int.h"
#include "block/file-posix.h"
#include "block/file-posix-aio.h"
#include "block/file-posix-resize.h"
#include "qapi/qapi-opts.h"
#include "util/cutils.h"
#include "util/thread-pool.h"

#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* The byte ranges QEMU locks; changing them breaks interoperability. */
#define RAW_LOCK_PERM_BASE      100
#define RAW_LOCK_SHARED_BASE    200
#define RAW_LOCK_NBITS          4   /* CONSISTENT_READ .. RESIZE */

/*
 * Largest request passed down at once: Linux transfers at most 2 GiB - 4 KiB
 * per call, and a power of two is aligned to any request alignment.
 */
#define RAW_MAX_TRANSFER        (1 * GiB)
/* O_DIRECT alignment when the kernel cannot tell (safe for any disk). */
#define RAW_DEFAULT_DIO_ALIGN   4096

typedef enum RawLocking {
    RAW_LOCKING_AUTO,
    RAW_LOCKING_ON,
    RAW_LOCKING_OFF,
} RawLocking;

typedef struct BDRVRawState {
    /* --- set at open; changed only by reopen commit --- */
    int fd;
    int open_flags;             /* O_* flags of fd */
    char *filename;
    RawFileType type;           /* which driver opened it */
    bool is_blk;                /* a block device, not a regular file */
    BlockdevAioOptions aio;
    unsigned aio_max_batch;
    /* aio=native's or aio=io_uring's instance for the node's context */
    FileAioState *aio_backend;
    bool use_lock;
    /* O_DIRECT needs */
    uint32_t request_alignment;
    size_t buf_align;
    uint32_t discard_granularity;

    /* --- event-loop thread --- */
    /* committed lock state (invariant 3) */
    uint64_t locked_perm;
    uint64_t locked_unshared;
    /* cleared once the kernel says the operation is not supported */
    bool has_zero_range;
    bool has_punch_hole;
    /* invariant 4: 0 or the -errno of the first failed fdatasync */
    int flush_error;
    /* invariant 5 */
    int64_t cached_length;
    /* RWF_NOWAIT works for reads/writes (cleared on EOPNOTSUPP) */
    bool nowait_ok[2];
    /* writes still to go to a worker after a slow in-place one */
    unsigned in_place_backoff;
    /* x-in-place-writes: writes may be made in place at all */
    bool in_place_writes;
} BDRVRawState;

static_assert(sizeof(BDRVRawState) <= RAW_STATE_SIZE,
              "RAW_STATE_SIZE (block/file-posix.h) is too small");

/* What bdrv_reopen_prepare staged for commit. */
typedef struct RawReopenState {
    int fd;
    int open_flags;
    uint32_t request_alignment;
    size_t buf_align;
} RawReopenState;

/* --- Opening the file ---------------------------------------------------- */

static void raw_parse_filename(const char *filename, QDict *options,
                               Error **errp)
{
    bdrv_parse_filename_strip_prefix(filename, "file:", options);
}

static int raw_open_flags(int bdrv_flags, RawFileType type)
{
    /* A CD-ROM drive without a disc opens only without waiting for one. */
    int flags = O_CLOEXEC | (type == RAW_FILE_TYPE_CDROM ? O_NONBLOCK : 0);

    flags |= (bdrv_flags & BDRV_O_RDWR) ? O_RDWR : O_RDONLY;
    if (bdrv_flags & BDRV_O_NOCACHE) {
        flags |= O_DIRECT;
    }
    return flags;
}

/*
 * Finds the O_DIRECT alignment of @fd: the kernel's answer (statx) if it
 * has one, the logical block size for block devices, else a safe default.
 */
static void raw_probe_alignment(int fd, int open_flags, bool is_blk,
                                uint32_t *request_alignment,
                                size_t *buf_align)
{
    struct statx stx;
    int sector_size;

    if (!(open_flags & O_DIRECT)) {
        *request_alignment = 1;
        *buf_align = 1;
        return;
    }
    *request_alignment = RAW_DEFAULT_DIO_ALIGN;
    *buf_align = qemu_real_host_page_size();
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
        (stx.stx_mask & STATX_DIOALIGN) &&
        is_power_of_2(stx.stx_dio_offset_align) &&
        is_power_of_2(stx.stx_dio_mem_align)) {
        *request_alignment = stx.stx_dio_offset_align;
        *buf_align = stx.stx_dio_mem_align;
    } else if (is_blk && ioctl(fd, BLKSSZGET, &sector_size) == 0 &&
               sector_size > 0 && is_power_of_2(sector_size)) {
        *request_alignment = sector_size;
        *buf_align = sector_size;
    }
}

/* A block device's discard granularity from sysfs, 0 if unknown. */
static uint32_t raw_probe_discard_granularity(dev_t rdev)
{
    static const char *const paths[] = {
        "/sys/dev/block/%u:%u/queue/discard_granularity",
        /* partitions keep the queue attributes in their parent */
        "/sys/dev/block/%u:%u/../queue/discard_granularity",
    };

    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        g_autofree char *path = g_strdup_printf(paths[i], major(rdev),
                                                minor(rdev));
        g_autofree char *text = NULL;
        uint64_t value;

        if (g_file_get_contents(path, &text, NULL, NULL) &&
            qemu_strtou64(g_strchomp(text), NULL, 10, &value) == 0 &&
            value <= UINT32_MAX && is_power_of_2(value)) {
            return value;
        }
    }
    return 0;
}

/* True if the kernel has OFD locks and @fd's file system honours them. */
static bool raw_ofd_lock_usable(int fd)
{
    struct flock fl = {
        .l_whence = SEEK_SET,
        .l_start = RAW_LOCK_PERM_BASE,
        .l_len = 1,
        .l_type = F_WRLCK,
    };

    return fcntl(fd, F_OFD_GETLK, &fl) == 0;
}

static BlockdevAioOptions raw_aio_from_flags(int flags)
{
    if (flags & BDRV_O_NATIVE_AIO) {
        return BLOCKDEV_AIO_OPTIONS_NATIVE;
    }
    if (flags & BDRV_O_IO_URING) {
        return BLOCKDEV_AIO_OPTIONS_IO_URING;
    }
    return BLOCKDEV_AIO_OPTIONS_THREADS;
}

static int raw_check_aio_mode(BlockdevAioOptions aio, int flags,
                              Error **errp)
{
    if (aio == BLOCKDEV_AIO_OPTIONS_NATIVE && !(flags & BDRV_O_NOCACHE)) {
        error_setg(errp, "aio=native was specified, but it requires "
                   "cache.direct=on, which was not specified.");
        return -EINVAL;
    }
    return 0;
}

/*
 * The instance for @ctx of the backend that aio= names, which open and a
 * move to another context both take: aio is fixed for the node's lifetime
 * (raw_reopen_check_options()), so one slot, s->aio_backend, holds it.
 * NULL without an error for aio=threads, which needs none.
 */
static FileAioState *raw_aio_backend_get(BDRVRawState *s, AioContext *ctx,
                                         Error **errp)
{
    switch (s->aio) {
    case BLOCKDEV_AIO_OPTIONS_NATIVE:
        return laio_get(ctx, errp);
    case BLOCKDEV_AIO_OPTIONS_IO_URING:
        return luring_get(ctx, errp);
    case BLOCKDEV_AIO_OPTIONS_THREADS:
        break;
    }
    return NULL;
}

static int raw_init_aio(BlockDriverState *bs, Error **errp)
{
    BDRVRawState *s = bs->opaque;

    if (s->aio == BLOCKDEV_AIO_OPTIONS_THREADS) {
        return 0;
    }
    s->aio_backend = raw_aio_backend_get(s, bdrv_get_aio_context(bs), errp);
    if (!s->aio_backend) {
        error_prepend(errp, s->aio == BLOCKDEV_AIO_OPTIONS_NATIVE
                            ? "Unable to use native AIO: "
                            : "Unable to use io_uring: ");
        return -EINVAL;
    }
    return 0;
}

/* Opens @filename; with auto-read-only, falls back to read-only access. */
static int raw_open_fd(BlockDriverState *bs, const char *filename, int flags,
                       int *open_flags, Error **errp)
{
    BDRVRawState *s = bs->opaque;
    int fd;

    *open_flags = raw_open_flags(flags, s->type);
    fd = open(filename, *open_flags);
    if (fd < 0 && (flags & BDRV_O_RDWR) && (flags & BDRV_O_AUTO_RDONLY) &&
        (errno == EACCES || errno == EROFS || errno == EPERM)) {
        *open_flags = raw_open_flags(flags & ~BDRV_O_RDWR, s->type);
        fd = open(filename, *open_flags);
        if (fd >= 0) {
            bs->read_only = true;
            bs->open_flags &= ~BDRV_O_RDWR;
        }
    }
    if (fd < 0) {
        int err = errno;

        error_setg_errno(errp, err, "Could not open '%s'", filename);
        return -err;
    }
    return fd;
}

static int raw_apply_options(BDRVRawState *s, QemuOpts *opts, int flags,
                             Error **errp)
{
    RawLocking locking = qemu_opt_get_enum(opts, "locking");

    s->aio = qemu_opt_has(opts, "aio") ? qemu_opt_get_enum(opts, "aio")
                                       : raw_aio_from_flags(flags);
    s->aio_max_batch = MIN(qemu_opt_get_number(opts, "aio-max-batch", 0),
                           UINT_MAX);
    s->in_place_writes = qemu_opt_get_bool(opts, "x-in-place-writes", false);
    s->use_lock = false;
    if (locking != RAW_LOCKING_OFF) {
        s->use_lock = raw_ofd_lock_usable(s->fd);
        if (!s->use_lock && locking == RAW_LOCKING_ON) {
            int err = errno;

            error_setg_errno(errp, err, "Cannot lock '%s' (locking=on)",
                             s->filename);
            return -err;
        }
    }
    return raw_check_aio_mode(s->aio, flags, errp);
}

/* QEMU's refusal of a file of the wrong kind for the driver. */
static int raw_check_file_type(BlockDriverState *bs, const char *filename,
                               mode_t mode, RawFileType type, Error **errp)
{
    if (type == RAW_FILE_TYPE_FILE && !S_ISREG(mode)) {
        error_setg(errp, "'%s' driver requires '%s' to be a regular file",
                   bs->drv->format_name, filename);
        return -EINVAL;
    }
    if (type != RAW_FILE_TYPE_FILE && !S_ISBLK(mode) && !S_ISCHR(mode)) {
        error_setg(errp, "'%s' driver requires '%s' to be either a "
                   "character or block device", bs->drv->format_name,
                   filename);
        return -EINVAL;
    }
    return 0;
}

int raw_open_common(BlockDriverState *bs, QDict *options, int flags,
                    RawFileType type, Error **errp)
{
    BDRVRawState *s = bs->opaque;
    QemuOpts *opts;
    const char *filename;
    struct stat st;
    int ret;

    s->fd = -1;
    s->type = type;
    opts = qemu_opts_absorb_qdict(bs->drv->runtime_opts, options, errp);
    if (!opts) {
        return -EINVAL;
    }
    filename = qemu_opt_get(opts, "filename");
    if (!filename) {
        error_setg(errp, "The 'file' block driver requires a file name");
        ret = -EINVAL;
        goto out;
    }
    s->filename = g_strdup(filename);

    ret = raw_open_fd(bs, filename, flags, &s->open_flags, errp);
    if (ret < 0) {
        goto out;
    }
    s->fd = ret;
    if (fstat(s->fd, &st) < 0) {
        ret = -errno;
        error_setg_errno(errp, -ret, "Could not stat '%s'", filename);
        goto out;
    }
    ret = raw_check_file_type(bs, filename, st.st_mode, type, errp);
    if (ret < 0) {
        goto out;
    }
    s->is_blk = S_ISBLK(st.st_mode);

    ret = raw_apply_options(s, opts, flags, errp);
    if (ret < 0) {
        goto out;
    }
    ret = raw_init_aio(bs, errp);
    if (ret < 0) {
        goto out;
    }
    raw_probe_alignment(s->fd, s->open_flags, s->is_blk,
                        &s->request_alignment, &s->buf_align);
    if (s->is_blk) {
        s->discard_granularity = raw_probe_discard_granularity(st.st_rdev);
    }
    s->cached_length = -1;
    s->has_zero_range = true;
    s->has_punch_hole = true;
    s->nowait_ok[0] = s->nowait_ok[1] = true;
    s->in_place_backoff = 0;
    s->locked_perm = 0;
    s->locked_unshared = 0;

    bs->supported_zero_flags = BDRV_REQ_MAY_UNMAP | BDRV_REQ_NO_FALLBACK;
    /* Growing a regular file always reads back as zeroes. */
    bs->supported_truncate_flags = type == RAW_FILE_TYPE_FILE
                                   ? BDRV_REQ_ZERO_WRITE : 0;
    ret = 0;

out:
    if (ret < 0 && s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    if (ret < 0) {
        g_free(s->filename);
        s->filename = NULL;
    }
    qemu_opts_del(opts);
    return ret;
}

static int raw_open(BlockDriverState *bs, QDict *options, int flags,
                    Error **errp)
{
    return raw_open_common(bs, options, flags, RAW_FILE_TYPE_FILE, errp);
}

int raw_get_fd(BlockDriverState *bs)
{
    BDRVRawState *s = bs->opaque;

    return s->fd;
}

/*
 * The node's AIO ring (io_uring) or context (Linux AIO) is its
 * AioContext's: the one of the new context is taken first, so that a
 * failure leaves the node as it was.
 */
int raw_change_aio_context(BlockDriverState *bs, AioContext *new_ctx,
                           Error **errp)
{
    BDRVRawState *s = bs->opaque;
    FileAioState *fresh;

    if (!s->aio_backend) {
        return 0;   /* aio=threads: the pool of the current context */
    }
    fresh = raw_aio_backend_get(s, new_ctx, errp);
    if (!fresh) {
        error_prepend(errp, "Cannot move node '%s' to the iothread: ",
                      bs->node_name);
        return -EINVAL;
    }
    file_aio_put(s->aio_backend);
    s->aio_backend = fresh;
    return 0;
}

void raw_close(BlockDriverState *bs)
{
    BDRVRawState *s = bs->opaque;

    if (s->aio_backend) {
        file_aio_put(s->aio_backend);
        s->aio_backend = NULL;
    }
    if (s->fd >= 0) {
        /* Closing the open file description drops its locks too. */
        close(s->fd);
        s->fd = -1;
    }
    g_free(s->filename);
    s->filename = NULL;
}

void raw_refresh_limits(BlockDriverState *bs, Error **errp)
{
    BDRVRawState *s = bs->opaque;

    bs->bl.request_alignment = s->request_alignment;
    bs->bl.min_mem_alignment = s->buf_align;
    bs->bl.opt_mem_alignment = MAX(s->buf_align,
                                   qemu_real_host_page_size());
    bs->bl.max_transfer = RAW_MAX_TRANSFER;
    bs->bl.max_iov = IOV_MAX;
    bs->bl.pdiscard_alignment = s->discard_granularity;
}

/* --- Image locking (invariant 3) ----------------------------------------- */

static int raw_lock_byte(int fd, int64_t byte, short type)
{
    struct flock fl = {
        .l_whence = SEEK_SET,
        .l_start = byte,
        .l_len = 1,
        .l_type = type,
    };

    return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

/* 0 if a write lock could be placed on @byte, -EAGAIN if someone holds it. */
static int raw_test_byte(int fd, int64_t byte)
{
    struct flock fl = {
        .l_whence = SEEK_SET,
        .l_start = byte,
        .l_len = 1,
        .l_type = F_WRLCK,
    };

    if (fcntl(fd, F_OFD_GETLK, &fl) < 0) {
        return -errno;
    }
    return fl.l_type == F_UNLCK ? 0 : -EAGAIN;
}

/* Makes @fd hold exactly the lock bytes for @perm and @unshared. */
static int raw_apply_lock_bytes(int fd, uint64_t perm, uint64_t unshared,
                                Error **errp)
{
    for (int i = 0; i < RAW_LOCK_NBITS; i++) {
        uint64_t bit = UINT64_C(1) << i;
        int bytes[2] = { RAW_LOCK_PERM_BASE + i, RAW_LOCK_SHARED_BASE + i };
        bool want[2] = { perm & bit, unshared & bit };

        for (int j = 0; j < 2; j++) {
            int ret = raw_lock_byte(fd, bytes[j],
                                    want[j] ? F_RDLCK : F_UNLCK);

            if (ret < 0) {
                error_setg_errno(errp, -ret, "Failed to %s byte %d",
                                 want[j] ? "lock" : "unlock", bytes[j]);
                return ret;
            }
        }
    }
    return 0;
}

/*
 * Fails if another user unshares what we use or uses what we unshare.
 * Every permission we use is tested before any we unshare, so that the
 * error names the same lock as QEMU's does when both conflict.
 */
static int raw_check_lock_bytes(int fd, uint64_t perm, uint64_t shared,
                                Error **errp)
{
    int ret;

    for (int i = 0; i < RAW_LOCK_NBITS; i++) {
        uint64_t bit = UINT64_C(1) << i;

        if ((perm & bit) &&
            (ret = raw_test_byte(fd, RAW_LOCK_SHARED_BASE + i)) < 0) {
            error_setg(errp, "Failed to get \"%s\" lock",
                       bdrv_perm_name(bit));
            return ret;
        }
    }
    for (int i = 0; i < RAW_LOCK_NBITS; i++) {
        uint64_t bit = UINT64_C(1) << i;

        if (!(shared & bit) &&
            (ret = raw_test_byte(fd, RAW_LOCK_PERM_BASE + i)) < 0) {
            error_setg(errp, "Failed to get shared \"%s\" lock",
                       bdrv_perm_name(bit));
            return ret;
        }
    }
    return 0;
}

int raw_check_perm(BlockDriverState *bs, uint64_t perm,
                   uint64_t shared, Error **errp)
{
    BDRVRawState *s = bs->opaque;
    uint64_t unshared = ~shared & BLK_PERM_ALL;
    Error *local_err = NULL;
    int ret;

    if (!s->use_lock) {
        return 0;
    }
    /* Hold the union, so that nobody slips in before set_perm. */
    ret = raw_apply_lock_bytes(s->fd, s->locked_perm | perm,
                               s->locked_unshared | unshared, &local_err);
    if (ret == 0) {
        ret = raw_check_lock_bytes(s->fd, perm, shared, &local_err);
    }
    if (ret < 0) {
        raw_apply_lock_bytes(s->fd, s->locked_perm, s->locked_unshared,
                             NULL);
        error_append_hint(&local_err,
                          "Is another process using the image [%s]?\n",
                          s->filename);
        error_propagate(errp, local_err);
    }
    return ret;
}

void raw_set_perm(BlockDriverState *bs, uint64_t perm,
                  uint64_t shared)
{
    BDRVRawState *s = bs->opaque;

    if (!s->use_lock) {
        return;
    }
    /* Only unlocking is left to do, and unlocking cannot conflict. */
    raw_apply_lock_bytes(s->fd, perm, ~shared & BLK_PERM_ALL, NULL);
    s->locked_perm = perm;
    s->locked_unshared = ~shared & BLK_PERM_ALL;
}

void raw_abort_perm_update(BlockDriverState *bs)
{
    BDRVRawState *s = bs->opaque;

    if (s->use_lock) {
        raw_apply_lock_bytes(s->fd, s->locked_perm, s->locked_unshared,
                             NULL);
    }
}

/* --- Reopen -------------------------------------------------------------- */

/* Refuses changes to options that are fixed for the node's lifetime. */
static int raw_reopen_check_options(BDRVRawState *s, QemuOpts *opts,
                                    int flags, Error **errp)
{
    const char *filename = qemu_opt_get(opts, "filename");
    BlockdevAioOptions aio = qemu_opt_has(opts, "aio")
                             ? qemu_opt_get_enum(opts, "aio")
                             : raw_aio_from_flags(flags);

    if (filename && strcmp(filename, s->filename)) {
        error_setg(errp, "Cannot change the option 'filename'");
        return -EINVAL;
    }
    if (aio != s->aio) {
        error_setg(errp, "Cannot change the option 'aio'");
        return -EINVAL;
    }
    if (qemu_opt_has(opts, "locking") &&
        (qemu_opt_get_enum(opts, "locking") == RAW_LOCKING_OFF) ==
        s->use_lock) {
        error_setg(errp, "Cannot change the option 'locking'");
        return -EINVAL;
    }
    return raw_check_aio_mode(aio, flags, errp);
}

/* Opens the same file again (even if renamed meanwhile) with new flags. */
static int raw_reopen_fd(BDRVRawState *s, int open_flags, Error **errp)
{
    g_autofree char *self = g_strdup_printf("/proc/self/fd/%d", s->fd);
    int fd = open(self, open_flags);

    if (fd < 0 && errno == ENOENT) {
        fd = open(s->filename, open_flags);
    }
    if (fd < 0) {
        int err = errno;

        error_setg_errno(errp, err, "Could not reopen file");
        return -err;
    }
    return fd;
}

int raw_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    BDRVRawState *s = state->bs->opaque;
    RawReopenState *rs;
    QemuOpts *opts;
    int ret;

    opts = qemu_opts_absorb_qdict(state->bs->drv->runtime_opts,
                                  state->options, errp);
    if (!opts) {
        return -EINVAL;
    }
    ret = raw_reopen_check_options(s, opts, state->flags, errp);
    qemu_opts_del(opts);
    if (ret < 0) {
        return ret;
    }

    rs = g_new0(RawReopenState, 1);
    rs->open_flags = raw_open_flags(state->flags, s->type);
    rs->fd = raw_reopen_fd(s, rs->open_flags, errp);
    if (rs->fd < 0) {
        ret = rs->fd;
        g_free(rs);
        return ret;
    }
    raw_probe_alignment(rs->fd, rs->open_flags, s->is_blk,
                        &rs->request_alignment, &rs->buf_align);
    state->opaque = rs;
    return 0;
}

void raw_reopen_commit(BDRVReopenState *state)
{
    BDRVRawState *s = state->bs->opaque;
    RawReopenState *rs = state->opaque;

    /* The old fd's locks go with it: the new one takes them over first. */
    if (s->use_lock) {
        raw_apply_lock_bytes(rs->fd, s->locked_perm, s->locked_unshared,
                             NULL);
    }
    close(s->fd);
    s->fd = rs->fd;
    s->open_flags = rs->open_flags;
    s->request_alignment = rs->request_alignment;
    s->buf_align = rs->buf_align;
    g_free(rs);
    state->opaque = NULL;
}

void raw_reopen_abort(BDRVReopenState *state)
{
    RawReopenState *rs = state->opaque;

    if (rs) {
        close(rs->fd);
        g_free(rs);
        state->opaque = NULL;
    }
}

/* --- Thread pool work ---------------------------------------------------- */

typedef struct RawWork {
    int fd;
    int64_t offset;
    int64_t bytes;
    QEMUIOVector *qiov;         /* reads and writes */
    size_t done;                /* bytes of qiov already transferred */
    bool is_write;
    int mode;                   /* fallocate mode */
} RawWork;

int coroutine_fn raw_thread_pool_co(BlockDriverState *bs,
                                    ThreadPoolFunc *func, void *arg)
{
    ThreadPool *pool = aio_get_thread_pool(bdrv_get_aio_context(bs));

    return thread_pool_submit_co(pool, func, arg);
}

/* Worker: one complete transfer (invariant 2). */
static int raw_work_rw(void *opaque)
{
    RawWork *w = opaque;
    FileAioIov fi;
    size_t remaining = w->qiov->size - w->done;
    int64_t offset = w->offset + w->done;
    int ret = 0;

    file_aio_iov_init(&fi, w->qiov);
    if (w->done) {
        file_aio_iov_advance(&fi, w->done);
    }
    while (remaining) {
        int niov = MIN(fi.niov, IOV_MAX);
        ssize_t n = w->is_write ? pwritev(w->fd, fi.iov, niov, offset)
                                : preadv(w->fd, fi.iov, niov, offset);

        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            ret = -errno;
            break;
        }
        if (n == 0) {
            if (w->is_write) {
                ret = -ENOSPC;
            } else {
                iov_memset(fi.iov, fi.niov, 0, 0, remaining);
            }
            break;
        }
        remaining -= n;
        offset += n;
        if (remaining) {
            file_aio_iov_advance(&fi, n);
        }
    }
    file_aio_iov_destroy(&fi);
    return ret;
}

static int raw_work_flush(void *opaque)
{
    RawWork *w = opaque;

    return fdatasync(w->fd) < 0 ? -errno : 0;
}

static int raw_work_fallocate(void *opaque)
{
    RawWork *w = opaque;
    int ret;

    do {
        ret = fallocate(w->fd, w->mode, w->offset, w->bytes);
    } while (ret < 0 && errno == EINTR);
    return ret < 0 ? -errno : 0;
}

static int coroutine_fn raw_co_fallocate(BlockDriverState *bs, int mode,
                                         int64_t offset, int64_t bytes)
{
    BDRVRawState *s = bs->opaque;
    RawWork w = {
        .fd = s->fd,
        .mode = mode,
        .offset = offset,
        .bytes = bytes,
    };
    int ret = raw_thread_pool_co(bs, raw_work_fallocate, &w);

    /* EOPNOTSUPP and ENOTSUP are the same on Linux; EINVAL: old kernels */
    return ret == -EOPNOTSUPP || ret == -EINVAL ? -ENOTSUP : ret;
}

/* --- Reads and writes ---------------------------------------------------- */

/* True if @qiov can be used with O_DIRECT as it is. */
static bool raw_qiov_is_aligned(BDRVRawState *s, QEMUIOVector *qiov)
{
    return !(s->open_flags & O_DIRECT) ||
           qemu_iovec_is_aligned(qiov, s->buf_align, s->request_alignment);
}

/*
 * In-place transfers.  Through the page cache, a small transfer the kernel
 * can do without waiting for the disk costs about a microsecond, while the
 * trip to a worker thread and back (the pool's, or io_uring's own for a
 * buffered write it cannot do at once) costs two wake-ups, tens of
 * microseconds.  So:
 *  - every read and write is tried here first with RWF_NOWAIT, which the
 *    kernel completes only if it need not wait (data in the page cache):
 *    for io_uring too, which would do the same at submission but then
 *    deliver the completion through its ring and the event loop;
 *  - where the kernel refuses RWF_NOWAIT for buffered writes (ext4 does),
 *    a small page-aligned write is done here with a plain pwritev, for
 *    aio=threads and aio=io_uring: page-aligned, so the kernel has no page
 *    to read first.  It may still wait (dirty-page throttling, a block
 *    allocation in the file system), so the write is timed, and one slower
 *    than RAW_IN_PLACE_SLOW_NS sends the next RAW_IN_PLACE_BACKOFF writes
 *    to the worker: the event loop waits for the disk at most once in that
 *    many writes.
 * A transfer done in part here is finished by the worker.
 */
#define RAW_IN_PLACE_MAX_BYTES  (128 * KiB)
#define RAW_IN_PLACE_SLOW_NS    (500 * 1000)
#define RAW_IN_PLACE_BACKOFF    1024

static bool raw_write_in_place_ok(BDRVRawState *s, int64_t offset,
                                  QEMUIOVector *qiov)
{
    size_t page = qemu_real_host_page_size();

    if (!s->in_place_writes) {
        return false;
    }
    if (s->in_place_backoff) {
        s->in_place_backoff--;
        return false;
    }
    return qiov->size <= RAW_IN_PLACE_MAX_BYTES &&
           QEMU_IS_ALIGNED(offset, page) && QEMU_IS_ALIGNED(qiov->size, page);
}

/* The bytes RWF_NOWAIT did, or -1 if the kernel refuses it here. */
static ssize_t raw_nowait(BDRVRawState *s, int64_t offset, QEMUIOVector *qiov,
                          bool is_write)
{
    ssize_t n = is_write
        ? pwritev2(s->fd, qiov->iov, qiov->niov, offset, RWF_NOWAIT)
        : preadv2(s->fd, qiov->iov, qiov->niov, offset, RWF_NOWAIT);

    if (n < 0 && errno == EOPNOTSUPP) {
        s->nowait_ok[is_write] = false;
        return -1;
    }
    return MAX(n, 0);
}

/* Returns the bytes done (a worker finishes the rest). */
static size_t raw_try_in_place(BDRVRawState *s, int64_t offset,
                               QEMUIOVector *qiov, bool is_write)
{
    int64_t start;
    ssize_t n;

    if ((s->open_flags & O_DIRECT) || qiov->niov > IOV_MAX) {
        return 0;
    }
    if (s->nowait_ok[is_write]) {
        n = raw_nowait(s, offset, qiov, is_write);
        if (n >= 0) {
            return n;
        }
    }
    /* the kernel refuses RWF_NOWAIT here (raw_nowait() said so) */
    if (!is_write || !raw_write_in_place_ok(s, offset, qiov)) {
        return 0;
    }
    start = get_clock_ns();
    n = pwritev(s->fd, qiov->iov, qiov->niov, offset);
    if (get_clock_ns() - start > RAW_IN_PLACE_SLOW_NS) {
        s->in_place_backoff = RAW_IN_PLACE_BACKOFF;
    }
    return MAX(n, 0);
}

/* io_uring does what raw_try_in_place() left of @w. */
static int coroutine_fn raw_co_submit_rest_io_uring(BDRVRawState *s,
                                                    RawWork *w,
                                                    FileAioType type)
{
    QEMUIOVector rest;
    int ret;

    if (!w->done) {
        return file_aio_co_submit(s->aio_backend, s->fd, w->offset, w->qiov,
                                  type, s->aio_max_batch);
    }
    qemu_iovec_init_slice(&rest, w->qiov, w->done, w->qiov->size - w->done);
    ret = file_aio_co_submit(s->aio_backend, s->fd, w->offset + w->done, &rest,
                             type, s->aio_max_batch);
    qemu_iovec_destroy(&rest);
    return ret;
}

static int coroutine_fn raw_co_rw_direct(BlockDriverState *bs,
                                         int64_t offset, QEMUIOVector *qiov,
                                         FileAioType type)
{
    BDRVRawState *s = bs->opaque;
    RawWork w = {
        .fd = s->fd,
        .offset = offset,
        .qiov = qiov,
        .is_write = type == FILE_AIO_WRITE,
    };

    if (s->aio == BLOCKDEV_AIO_OPTIONS_NATIVE) {
        return file_aio_co_submit(s->aio_backend, s->fd, offset, qiov, type,
                                  s->aio_max_batch);
    }
    w.done = raw_try_in_place(s, offset, qiov, w.is_write);
    if (w.done == qiov->size) {
        return 0;
    }
    if (s->aio == BLOCKDEV_AIO_OPTIONS_IO_URING) {
        return raw_co_submit_rest_io_uring(s, &w, type);
    }
    return raw_thread_pool_co(bs, raw_work_rw, &w);
}

/*
 * Reads or writes through an aligned bounce buffer: for O_DIRECT with a
 * misaligned buffer, or for vectors longer than the kernel accepts at once.
 */
static int coroutine_fn raw_co_rw_bounce(BlockDriverState *bs,
                                         int64_t offset, QEMUIOVector *qiov,
                                         FileAioType type)
{
    BDRVRawState *s = bs->opaque;
    QEMUIOVector bounce_qiov;
    void *buf = qemu_try_memalign(MAX(s->buf_align,
                                      qemu_real_host_page_size()),
                                  qiov->size);
    int ret;

    if (!buf) {
        return -ENOMEM;
    }
    qemu_iovec_init_buf(&bounce_qiov, buf, qiov->size);
    if (type == FILE_AIO_WRITE) {
        qemu_iovec_to_buf(qiov, 0, buf, qiov->size);
    }
    ret = raw_co_rw_direct(bs, offset, &bounce_qiov, type);
    if (ret == 0 && type == FILE_AIO_READ) {
        qemu_iovec_from_buf(qiov, 0, buf, qiov->size);
    }
    qemu_vfree(buf);
    return ret;
}

static int coroutine_fn raw_co_prw(BlockDriverState *bs, int64_t offset,
                                   QEMUIOVector *qiov, FileAioType type)
{
    BDRVRawState *s = bs->opaque;

    if (!raw_qiov_is_aligned(s, qiov) ||
        (qiov->niov > IOV_MAX && s->aio != BLOCKDEV_AIO_OPTIONS_THREADS)) {
        return raw_co_rw_bounce(bs, offset, qiov, type);
    }
    return raw_co_rw_direct(bs, offset, qiov, type);
}

int coroutine_fn raw_co_preadv(BlockDriverState *bs, int64_t offset,
                               int64_t bytes, QEMUIOVector *qiov,
                               BdrvRequestFlags flags)
{
    assert(qiov->size == (size_t)bytes);
    return raw_co_prw(bs, offset, qiov, FILE_AIO_READ);
}

int coroutine_fn raw_co_pwritev(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags)
{
    BDRVRawState *s = bs->opaque;
    int ret;

    assert(qiov->size == (size_t)bytes);
    ret = raw_co_prw(bs, offset, qiov, FILE_AIO_WRITE);
    if (offset + bytes > s->cached_length) {
        s->cached_length = -1;
    }
    return ret;
}

int coroutine_fn raw_co_flush_to_disk(BlockDriverState *bs)
{
    BDRVRawState *s = bs->opaque;
    RawWork w = { .fd = s->fd };
    int ret;

    if (s->flush_error) {
        return s->flush_error;
    }
    if (s->aio == BLOCKDEV_AIO_OPTIONS_IO_URING) {
        ret = file_aio_co_submit(s->aio_backend, s->fd, 0, NULL, FILE_AIO_FLUSH,
                                 s->aio_max_batch);
    } else {
        ret = raw_thread_pool_co(bs, raw_work_flush, &w);
    }
    if (ret < 0) {
        s->flush_error = ret;
    }
    return ret;
}

/* --- Zeroes and discard -------------------------------------------------- */

static int64_t raw_getlength(BlockDriverState *bs);


/* Extends a regular file to @end if it is shorter (the new part is zero). */
static int raw_extend_to(BlockDriverState *bs, int64_t end)
{
    BDRVRawState *s = bs->opaque;
    int64_t len = raw_fd_getlength(s->fd);

    if (len < 0) {
        return len;
    }
    if (s->is_blk || end <= len) {
        return 0;
    }
    return ftruncate(s->fd, end) < 0 ? -errno : 0;
}

/* Deallocates [offset, offset + bytes); reads return zeroes afterwards. */
static int coroutine_fn raw_co_punch_hole(BlockDriverState *bs,
                                          int64_t offset, int64_t bytes)
{
    BDRVRawState *s = bs->opaque;
    int ret;

    if (!s->has_punch_hole) {
        return -ENOTSUP;
    }
    ret = raw_co_fallocate(bs, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                           offset, bytes);
    if (ret == -ENOTSUP) {
        s->has_punch_hole = false;
    }
    return ret;
}

/* Zeroes [offset, offset + bytes) and keeps it allocated. */
static int coroutine_fn raw_co_zero_range(BlockDriverState *bs,
                                          int64_t offset, int64_t bytes)
{
    BDRVRawState *s = bs->opaque;
    int ret;

    if (s->has_zero_range) {
        /* Block devices refuse a size change; files grow as needed. */
        ret = raw_co_fallocate(bs, FALLOC_FL_ZERO_RANGE |
                               (s->is_blk ? FALLOC_FL_KEEP_SIZE : 0),
                               offset, bytes);
        if (ret != -ENOTSUP) {
            return ret;
        }
        s->has_zero_range = false;
    }
    if (s->is_blk) {
        return -ENOTSUP;
    }
    /* Without ZERO_RANGE: punch, then allocate the hole again. */
    ret = raw_co_punch_hole(bs, offset, bytes);
    if (ret < 0) {
        return ret;
    }
    return raw_co_fallocate(bs, 0, offset, bytes);
}

static int coroutine_fn raw_co_do_pwrite_zeroes(BlockDriverState *bs,
                                                int64_t offset, int64_t bytes,
                                                BdrvRequestFlags flags)
{
    BDRVRawState *s = bs->opaque;
    int ret;

    if ((flags & BDRV_REQ_MAY_UNMAP) && (bs->open_flags & BDRV_O_UNMAP)) {
        ret = raw_co_punch_hole(bs, offset, bytes);
        if (ret == 0) {
            /* The hole does not move the end of file; the write must. */
            return raw_extend_to(bs, offset + bytes);
        }
        if (ret != -ENOTSUP) {
            return ret;
        }
    }
    if (!s->is_blk && !s->has_zero_range && offset >= raw_getlength(bs)) {
        /* Entirely beyond the end: growing the file is enough. */
        return raw_extend_to(bs, offset + bytes);
    }
    /*
     * Zeroes written without MAY_UNMAP stay allocated, beyond the end of
     * the file too (ZERO_RANGE grows it), as QEMU's: qcow2 zeroes a new
     * cluster before it writes part of it, and the cluster must not become
     * a hole (fragmentation; the file's allocation is how preallocated
     * metadata is told apart).
     */
    return raw_co_zero_range(bs, offset, bytes);
}

static int coroutine_fn raw_co_pwrite_zeroes(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             BdrvRequestFlags flags)
{
    BDRVRawState *s = bs->opaque;
    int ret = raw_co_do_pwrite_zeroes(bs, offset, bytes, flags);

    if (offset + bytes > s->cached_length) {
        s->cached_length = -1;
    }
    return ret;
}

static int coroutine_fn raw_co_pdiscard(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes)
{
    return raw_co_punch_hole(bs, offset, bytes);
}

/* --- Allocation status --------------------------------------------------- */

/*
 * Finds the data extent or hole at @offset: returns 0 with *data = @offset
 * and *hole = end of the data, or *data = start of the next data (the hole
 * runs until there); -ENXIO when only a hole follows; other -errno when
 * the file system cannot tell.
 */
static int raw_find_allocation(int fd, int64_t offset, int64_t *data,
                               int64_t *hole)
{
    int64_t d = lseek(fd, offset, SEEK_DATA);
    int64_t h;

    if (d < 0) {
        return -errno;
    }
    if (d > offset) {
        *data = d;
        *hole = offset;
        return 0;
    }
    h = lseek(fd, offset, SEEK_HOLE);
    if (h < 0) {
        return -errno;
    }
    if (h <= offset) {
        /* The file changed between the two calls. */
        return -EBUSY;
    }
    *data = offset;
    *hole = h;
    return 0;
}

int coroutine_fn raw_co_block_status(BlockDriverState *bs,
                                     bool want_zero, int64_t offset,
                                     int64_t bytes, int64_t *pnum,
                                     int64_t *map,
                                     BlockDriverState **file)
{
    BDRVRawState *s = bs->opaque;
    uint32_t align = s->request_alignment;
    int64_t data = 0, hole = 0;
    int ret;

    *map = offset;
    *file = bs;
    if (!want_zero) {
        *pnum = bytes;
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
    }
    ret = raw_find_allocation(s->fd, offset, &data, &hole);
    if (ret == -ENXIO) {
        *pnum = bytes;
        return BDRV_BLOCK_ZERO | BDRV_BLOCK_OFFSET_VALID;
    }
    if (ret < 0) {
        /* No information: everything is data. */
        *pnum = bytes;
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
    }
    if (data == offset) {
        /* A data extent that ends inside an aligned block covers it. */
        *pnum = MIN(bytes, QEMU_ALIGN_UP(hole - offset, align));
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
    }
    *pnum = MIN(bytes, QEMU_ALIGN_DOWN(data - offset, align));
    if (*pnum == 0) {
        /* Less than a block of hole before data: report the block as data. */
        *pnum = MIN(bytes, align);
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
    }
    return BDRV_BLOCK_ZERO | BDRV_BLOCK_OFFSET_VALID;
}

/* --- Size ---------------------------------------------------------------- */

static int64_t raw_getlength(BlockDriverState *bs)
{
    BDRVRawState *s = bs->opaque;

    /* A block device may be resized under us: always ask. */
    if (s->is_blk) {
        return raw_fd_getlength(s->fd);
    }
    if (s->cached_length < 0) {
        s->cached_length = raw_fd_getlength(s->fd);
    }
    return s->cached_length;
}

int64_t raw_get_allocated_file_size(BlockDriverState *bs)
{
    BDRVRawState *s = bs->opaque;
    struct stat st;

    if (fstat(s->fd, &st) < 0) {
        return -errno;
    }
    return (int64_t)st.st_blocks * 512;
}

/*
 * A file has no cluster size and no dirty state, but answering (rather
 * than -ENOTSUP) is what makes qemu-img info report "dirty-flag": false
 * for raw images, as QEMU's does.
 */
int raw_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    return 0;
}

static int coroutine_fn raw_co_truncate(BlockDriverState *bs, int64_t offset,
                                        bool exact, PreallocMode prealloc,
                                        BdrvRequestFlags flags, Error **errp)
{
    BDRVRawState *s = bs->opaque;
    RawTruncate t = {
        .fd = s->fd,
        .offset = offset,
        .prealloc = prealloc,
        .errp = errp,
    };

    if (!s->is_blk) {
        /* Regular files always get exactly the size asked for. */
        int ret = raw_thread_pool_co(bs, raw_work_truncate, &t);

        s->cached_length = -1;
        return ret;
    }
    return hdev_check_truncate(raw_getlength(bs), offset, exact, prealloc,
                               errp);
}

/* --- Creation ------------------------------------------------------------ */

/* Best effort: a hint that failed is reported only if it was asked for. */
static void raw_set_extent_size_hint(int fd, uint64_t hint, bool explicit)
{
    struct fsxattr attr;
    int ret = ioctl(fd, FS_IOC_FSGETXATTR, &attr);

    if (ret == 0) {
        attr.fsx_xflags |= FS_XFLAG_EXTSIZE;
        attr.fsx_extsize = hint;
        ret = ioctl(fd, FS_IOC_FSSETXATTR, &attr);
    }
    if (ret < 0 && explicit && hint) {
        warn_report("Failed to set extent size hint: %s", strerror(errno));
    }
}

/* Best effort, as QEMU: only btrfs knows the flag, others ignore it. */
static void raw_set_nocow(int fd)
{
    int attr;

    if (ioctl(fd, FS_IOC_GETFLAGS, &attr) == 0) {
        attr |= FS_NOCOW_FL;
        ioctl(fd, FS_IOC_SETFLAGS, &attr);
    }
}

/*
 * Takes the locks a resize needs and checks nobody else uses the file, so
 * that creating over an image in use fails instead of destroying it.
 */
static int raw_create_lock(int fd, const char *filename, Error **errp)
{
    uint64_t perm = BLK_PERM_WRITE | BLK_PERM_RESIZE;
    uint64_t shared = BLK_PERM_ALL & ~BLK_PERM_RESIZE;
    Error *local_err = NULL;
    int ret;

    if (!raw_ofd_lock_usable(fd)) {
        return 0;
    }
    ret = raw_apply_lock_bytes(fd, perm, ~shared & BLK_PERM_ALL, &local_err);
    if (ret == 0) {
        ret = raw_check_lock_bytes(fd, perm, shared, &local_err);
    }
    if (ret < 0) {
        error_append_hint(&local_err,
                          "Is another process using the image [%s]?\n",
                          filename);
        error_propagate(errp, local_err);
    }
    return ret;
}

static int coroutine_fn raw_co_create_opts(const BlockDriver *drv,
                                           const char *filename,
                                           QemuOpts *opts, Error **errp)
{
    uint64_t size = qemu_opt_get_size(opts, "size", 0);
    int prealloc = qemu_opt_get_enum(opts, "preallocation");
    uint64_t hint = qemu_opt_get_size(opts, "extent_size_hint", 0);
    RawTruncate t = { .prealloc = PREALLOC_MODE_OFF, .errp = errp };
    ThreadPool *pool = aio_get_thread_pool(qemu_get_current_aio_context());
    int ret;

    strstart(filename, "file:", &filename);
    if (size > INT64_MAX) {
        error_setg(errp, "Image size must be less than 8 EiB!");
        return -EINVAL;
    }
    if (hint > UINT32_MAX) {
        error_setg(errp, "Extent size hint is too large");
        return -EINVAL;
    }
    if (prealloc < 0) {
        prealloc = PREALLOC_MODE_OFF;
    }
    /* A file holds whole sectors, as QEMU's images do. */
    size = ROUND_UP(size, BDRV_SECTOR_SIZE);
    if (prealloc == PREALLOC_MODE_METADATA) {
        /* Refused before an existing file is emptied. */
        error_setg(errp, "Unsupported preallocation mode: %s",
                   PreallocMode_str[prealloc]);
        return -ENOTSUP;
    }

    t.fd = open(filename, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (t.fd < 0) {
        ret = -errno;
        error_setg_errno(errp, -ret, "Could not create '%s'", filename);
        return ret;
    }
    ret = raw_create_lock(t.fd, filename, errp);
    if (ret == 0) {
        /* Empty it first: nothing of an older file may survive. */
        t.offset = 0;
        ret = thread_pool_submit_co(pool, raw_work_truncate, &t);
    }
    if (ret == 0) {
        /* Both attributes take effect only on a file without extents. */
        if (qemu_opt_get_bool(opts, "nocow", false)) {
            raw_set_nocow(t.fd);
        }
        raw_set_extent_size_hint(t.fd, hint,
                                 qemu_opt_has(opts, "extent_size_hint"));
        t.offset = size;
        t.prealloc = prealloc;
        ret = thread_pool_submit_co(pool, raw_work_truncate, &t);
    }
    if (close(t.fd) < 0 && ret == 0) {
        ret = -errno;
        error_setg_errno(errp, -ret, "Could not close the new file");
    }
    return ret;
}

/* A creation that failed removes the file (bdrv_delete_format_file()). */
static int raw_delete_file(BlockDriverState *bs, Error **errp)
{
    struct stat st;
    int err;

    if (stat(bs->filename, &st) < 0) {
        err = errno;
        error_setg_errno(errp, err, "Could not stat '%s'", bs->filename);
        return -err;
    }
    if (!S_ISREG(st.st_mode)) {
        error_setg(errp, "'%s' is not a regular file", bs->filename);
        return -ENOTSUP;
    }
    if (unlink(bs->filename) < 0) {
        err = errno;
        error_setg_errno(errp, err, "Could not delete '%s'", bs->filename);
        return -err;
    }
    return 0;
}

/*
 * aio, locking, aio-max-batch and x-in-place-writes change how the node
 * works, not its data.
 */
static const char *const raw_strong_runtime_opts[] = {
    "filename",
    NULL,
};

static const BlockDriver bdrv_file = {
    .format_name                    = "file",
    .protocol_name                  = "file",
    .instance_size                  = sizeof(BDRVRawState),
    .bdrv_needs_filename            = true,
    .runtime_opts                   = &qapi_opts_file_runtime,
    .strong_runtime_opts            = raw_strong_runtime_opts,
    .create_opts                    = &qapi_opts_file_create,
    .bdrv_parse_filename            = raw_parse_filename,
    .bdrv_open                      = raw_open,
    .bdrv_close                     = raw_close,
    .bdrv_change_aio_context        = raw_change_aio_context,
    .bdrv_co_create_opts            = raw_co_create_opts,
    .bdrv_delete_file               = raw_delete_file,
    .bdrv_reopen_prepare            = raw_reopen_prepare,
    .bdrv_reopen_commit             = raw_reopen_commit,
    .bdrv_reopen_abort              = raw_reopen_abort,
    .bdrv_co_preadv                 = raw_co_preadv,
    .bdrv_co_pwritev                = raw_co_pwritev,
    .bdrv_co_pwrite_zeroes          = raw_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = raw_co_pdiscard,
    .bdrv_co_flush_to_disk          = raw_co_flush_to_disk,
    .bdrv_co_block_status           = raw_co_block_status,
    .bdrv_co_truncate               = raw_co_truncate,
    .bdrv_getlength                 = raw_getlength,
    .bdrv_get_allocated_file_size   = raw_get_allocated_file_size,
    .bdrv_get_info                  = raw_get_info,
    .bdrv_refresh_limits            = raw_refresh_limits,
    .bdrv_check_perm                = raw_check_perm,
    .bdrv_set_perm                  = raw_set_perm,
    .bdrv_abort_perm_update         = raw_abort_perm_update,
};

block_init(bdrv_register, bdrv_file)
