/*
 * The host_device and host_cdrom protocol drivers: block and character
 * devices (disks, LVM volumes, iSCSI LUNs, loop devices; CD-ROM drives),
 * as QEMU's drivers of the same names.
 *
 * They share the file driver's state, open, request, reopen and locking
 * code (block/file-posix.h) and differ from it where a device is not a
 * file:
 *  - the size is the device's (BLKGETSIZE64; lseek for character devices)
 *    and can never change here: a truncate to another size fails with
 *    "Cannot resize device files" or "Cannot grow device files";
 *  - discard is BLKDISCARD; zeroes are a hole punch (only when unmapping
 *    is allowed), BLKZEROOUT, or fallocate(ZERO_RANGE), whichever the
 *    kernel takes first;
 *  - with O_DIRECT, requests and buffers are aligned to the logical block
 *    size, and the physical block size is the preferred transfer size;
 *  - a new image does not read as zeroes (the device keeps its old data),
 *    so qemu-img convert writes the zeroes explicitly;
 *  - "creating" an image checks the device is large enough and zeroes its
 *    first sector, so that no old format header survives.
 *
 * Invariants:
 *  1. A request never changes the device's size: every fallocate keeps
 *     the size (FALLOC_FL_KEEP_SIZE), and truncate only accepts the
 *     current size (or a smaller one when not exact).
 *  2. With BDRV_REQ_NO_FALLBACK, zeroes are written only by a way that
 *     cannot turn into writing zero buffers in the kernel: a hole punch,
 *     which a block device does only where the disk zeroes by itself.
 *
 * Callbacks run in the node's AioContext thread; workers run in its
 * thread pool and touch nothing but their HdevWork.
 */
#include "block/file-posix.h"
#include "qapi/qapi-opts.h"
#include "util/cutils.h"
#include "qblock/block-backend.h"

#include <linux/cdrom.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

/* What a logical block is when the kernel does not say: a sector. */
#define HDEV_DEFAULT_BLOCK_SIZE BDRV_SECTOR_SIZE

HostDeviceBlockSizes hdev_block_sizes_fixup(uint32_t logical,
                                            uint32_t physical)
{
    HostDeviceBlockSizes sizes = { .logical = logical,
                                   .physical = physical };

    if (!is_power_of_2(sizes.logical) ||
        sizes.logical < HDEV_DEFAULT_BLOCK_SIZE) {
        sizes.logical = HDEV_DEFAULT_BLOCK_SIZE;
    }
    if (!is_power_of_2(sizes.physical) || sizes.physical < sizes.logical) {
        sizes.physical = sizes.logical;
    }
    return sizes;
}

/* The block sizes the device reports (or the defaults). */
static HostDeviceBlockSizes hdev_probe_block_sizes(int fd)
{
    int logical = 0;
    unsigned int physical = 0;

    if (ioctl(fd, BLKSSZGET, &logical) < 0 || logical < 0) {
        logical = 0;
    }
    if (ioctl(fd, BLKPBSZGET, &physical) < 0) {
        physical = 0;
    }
    return hdev_block_sizes_fixup(logical, physical);
}

/* --- Probing and opening ------------------------------------------------- */

/* QEMU's scores: any device is a host_device, unless it is a CD-ROM. */
static int hdev_probe_device(const char *filename)
{
    struct stat st;

    /* leaves the name to host_cdrom, which knows it better */
    if (g_str_has_prefix(filename, "/dev/cdrom")) {
        return 50;
    }
    if (stat(filename, &st) == 0 &&
        (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode))) {
        return 100;
    }
    return 0;
}

/* A CD-ROM drive by name, or a block device that answers CD-ROM ioctls. */
static int cdrom_probe_device(const char *filename)
{
    struct stat st;
    int fd, score = 0;

    if (g_str_has_prefix(filename, "/dev/cd") ||
        g_str_has_prefix(filename, "/dev/acd")) {
        return 100;
    }
    /* Only block devices are opened: every image name comes here. */
    if (stat(filename, &st) < 0 || !S_ISBLK(st.st_mode)) {
        return 0;
    }
    fd = open(filename, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    if (fstat(fd, &st) == 0 && S_ISBLK(st.st_mode) &&
        ioctl(fd, CDROM_DRIVE_STATUS, CDSL_CURRENT) >= 0) {
        score = 100;
    }
    close(fd);
    return score;
}

/* "host_device:/dev/sdb" and "host_cdrom:/dev/sr0" name the device too. */
static void hdev_parse_filename(const char *filename, QDict *options,
                                Error **errp)
{
    bdrv_parse_filename_strip_prefix(filename,
                                     g_str_has_prefix(filename, "host_cdrom:")
                                     ? "host_cdrom:" : "host_device:",
                                     options);
}

static int hdev_open(BlockDriverState *bs, QDict *options, int flags,
                     Error **errp)
{
    return raw_open_common(bs, options, flags, RAW_FILE_TYPE_HOST_DEVICE,
                           errp);
}

static int cdrom_open(BlockDriverState *bs, QDict *options, int flags,
                      Error **errp)
{
    return raw_open_common(bs, options, flags, RAW_FILE_TYPE_CDROM, errp);
}

static void hdev_refresh_limits(BlockDriverState *bs, Error **errp)
{
    int fd = raw_get_fd(bs);
    int fd_flags = fcntl(fd, F_GETFL);
    HostDeviceBlockSizes sizes = hdev_probe_block_sizes(fd);

    raw_refresh_limits(bs, errp);
    /*
     * O_DIRECT on a block device fails for anything not aligned to its
     * logical block size, whatever else the kernel said about the file.
     */
    if (fd_flags >= 0 && (fd_flags & O_DIRECT)) {
        bs->bl.request_alignment = MAX(bs->bl.request_alignment,
                                       sizes.logical);
        bs->bl.min_mem_alignment = MAX(bs->bl.min_mem_alignment,
                                       sizes.logical);
        bs->bl.opt_mem_alignment = MAX(bs->bl.opt_mem_alignment,
                                       sizes.logical);
    }
    /* Smaller writes make the disk read, modify and write a block. */
    bs->bl.opt_transfer = MAX(bs->bl.opt_transfer, sizes.physical);
}

/* --- Size ---------------------------------------------------------------- */

static int64_t hdev_getlength(BlockDriverState *bs)
{
    int fd = raw_get_fd(bs);
    struct stat st;
    uint64_t size;
    off_t end;

    if (fstat(fd, &st) < 0) {
        return -errno;
    }
    /* Never cached: a device can be resized under us (lvextend). */
    if (S_ISBLK(st.st_mode)) {
        return ioctl(fd, BLKGETSIZE64, &size) < 0 ? -errno : (int64_t)size;
    }
    end = lseek(fd, 0, SEEK_END);
    return end < 0 ? -errno : end;
}

/* Invariant 1: only the size the device has is accepted, as QEMU does. */
int hdev_check_truncate(int64_t len, int64_t offset, bool exact,
                        PreallocMode prealloc, Error **errp)
{
    if (prealloc != PREALLOC_MODE_OFF) {
        error_setg(errp, "Preallocation mode '%s' unsupported for this "
                   "non-regular file", PreallocMode_str[prealloc]);
        return -ENOTSUP;
    }
    if (len < 0) {
        error_setg_errno(errp, -len, "Failed to inquire current file length");
        return len;
    }
    if (exact && offset != len) {
        error_setg(errp, "Cannot resize device files");
        return -ENOTSUP;
    }
    if (offset > len) {
        error_setg(errp, "Cannot grow device files");
        return -EINVAL;
    }
    return 0;
}

static int coroutine_fn hdev_co_truncate(BlockDriverState *bs, int64_t offset,
                                         bool exact, PreallocMode prealloc,
                                         BdrvRequestFlags flags, Error **errp)
{
    return hdev_check_truncate(hdev_getlength(bs), offset, exact, prealloc,
                               errp);
}

/* The device keeps whatever was on it before the image was created. */
static int hdev_has_zero_init(BlockDriverState *bs)
{
    return 0;
}

/* --- Zeroes and discard -------------------------------------------------- */

typedef struct HdevWork {
    int fd;
    int64_t offset;
    int64_t bytes;
    BdrvRequestFlags flags;     /* for zeroes: MAY_UNMAP, NO_FALLBACK */
} HdevWork;

/* The kernel's ways of saying "not on this device" become -ENOTSUP. */
static int hdev_errno(int err)
{
    switch (err) {
    case EOPNOTSUPP:
    case ENOTTY:
    case ENODEV:
    case ENOSYS:
        return -ENOTSUP;
    default:
        return -err;
    }
}

static int hdev_fallocate(HdevWork *w, int mode)
{
    int ret;

    /* invariant 1 */
    assert(mode & FALLOC_FL_KEEP_SIZE);
    do {
        ret = fallocate(w->fd, mode, w->offset, w->bytes);
    } while (ret < 0 && errno == EINTR);
    return ret < 0 ? hdev_errno(errno) : 0;
}

/* BLKDISCARD or BLKZEROOUT over the work's range. */
static int hdev_range_ioctl(HdevWork *w, unsigned long request)
{
    uint64_t range[2] = { w->offset, w->bytes };
    int ret;

    do {
        ret = ioctl(w->fd, request, range);
    } while (ret < 0 && errno == EINTR);
    return ret < 0 ? hdev_errno(errno) : 0;
}

/* Worker: zeroes by the first way the kernel takes (one trip to a thread). */
static int hdev_work_zeroes(void *opaque)
{
    HdevWork *w = opaque;
    int ret = -ENOTSUP;

    if (w->flags & BDRV_REQ_MAY_UNMAP) {
        ret = hdev_fallocate(w, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE);
        if (ret != -ENOTSUP) {
            return ret;
        }
    }
    /* invariant 2: both of the following may write zero buffers */
    if (w->flags & BDRV_REQ_NO_FALLBACK) {
        return ret;
    }
    ret = hdev_range_ioctl(w, BLKZEROOUT);
    if (ret != -ENOTSUP) {
        return ret;
    }
    return hdev_fallocate(w, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE);
}

static int hdev_work_discard(void *opaque)
{
    return hdev_range_ioctl(opaque, BLKDISCARD);
}

static int coroutine_fn hdev_co_pwrite_zeroes(BlockDriverState *bs,
                                              int64_t offset, int64_t bytes,
                                              BdrvRequestFlags flags)
{
    HdevWork w = {
        .fd = raw_get_fd(bs),
        .offset = offset,
        .bytes = bytes,
        .flags = flags & BDRV_REQ_NO_FALLBACK,
    };

    /* Unmapping needs discard=unmap, as in the file driver. */
    if ((flags & BDRV_REQ_MAY_UNMAP) && (bs->open_flags & BDRV_O_UNMAP)) {
        w.flags |= BDRV_REQ_MAY_UNMAP;
    }
    return raw_thread_pool_co(bs, hdev_work_zeroes, &w);
}

static int coroutine_fn hdev_co_pdiscard(BlockDriverState *bs, int64_t offset,
                                         int64_t bytes)
{
    HdevWork w = {
        .fd = raw_get_fd(bs),
        .offset = offset,
        .bytes = bytes,
    };

    return raw_thread_pool_co(bs, hdev_work_discard, &w);
}

/* --- Driver tables ------------------------------------------------------- */

/* aio, locking and aio-max-batch change how the node works, not its data. */
static const char *const hdev_strong_runtime_opts[] = {
    "filename",
    NULL,
};

/*
 * The two drivers differ in their name, how they recognise their device
 * and how they open it (a CD-ROM drive may be empty).
 */
#define HDEV_DRIVER(NAME, PROBE, OPEN)                                      \
    {                                                                       \
        .format_name                    = NAME,                             \
        .protocol_name                  = NAME,                             \
        .instance_size                  = RAW_STATE_SIZE,                   \
        .bdrv_needs_filename            = true,                             \
        .runtime_opts                   = &qapi_opts_host_device_runtime,   \
        .strong_runtime_opts            = hdev_strong_runtime_opts,         \
        .create_opts                    = &qapi_opts_host_device_create,    \
        .bdrv_probe_device              = PROBE,                            \
        .bdrv_parse_filename            = hdev_parse_filename,              \
        .bdrv_open                      = OPEN,                             \
        .bdrv_close                     = raw_close,                        \
        .bdrv_change_aio_context        = raw_change_aio_context,           \
        .bdrv_co_create_opts            = bdrv_co_create_opts_simple,       \
        .bdrv_reopen_prepare            = raw_reopen_prepare,               \
        .bdrv_reopen_commit             = raw_reopen_commit,                \
        .bdrv_reopen_abort              = raw_reopen_abort,                 \
        .bdrv_co_preadv                 = raw_co_preadv,                    \
        .bdrv_co_pwritev                = raw_co_pwritev,                   \
        .bdrv_co_pwrite_zeroes          = hdev_co_pwrite_zeroes,            \
        .bdrv_co_pdiscard               = hdev_co_pdiscard,                 \
        .bdrv_co_flush_to_disk          = raw_co_flush_to_disk,             \
        .bdrv_co_block_status           = raw_co_block_status,              \
        .bdrv_co_truncate               = hdev_co_truncate,                 \
        .bdrv_getlength                 = hdev_getlength,                   \
        .bdrv_get_allocated_file_size   = raw_get_allocated_file_size,      \
        .bdrv_has_zero_init             = hdev_has_zero_init,               \
        .bdrv_get_info                  = raw_get_info,                     \
        .bdrv_refresh_limits            = hdev_refresh_limits,              \
        .bdrv_check_perm                = raw_check_perm,                   \
        .bdrv_set_perm                  = raw_set_perm,                     \
        .bdrv_abort_perm_update         = raw_abort_perm_update,            \
    }

static const BlockDriver bdrv_host_device =
    HDEV_DRIVER("host_device", hdev_probe_device, hdev_open);
static const BlockDriver bdrv_host_cdrom =
    HDEV_DRIVER("host_cdrom", cdrom_probe_device, cdrom_open);

/*
 * host_cdrom first: on a CD-ROM drive both probes answer 100, and the
 * first driver registered with the highest score wins, as in QEMU.
 */
static void __attribute__((constructor)) hdev_register(void)
{
    bdrv_register(&bdrv_host_cdrom);
    bdrv_register(&bdrv_host_device);
}
