/*
 * The host_device and host_cdrom drivers: the block size logic, the
 * refusal of a file that is not a device (QEMU's message, upstream iotest
 * 226), the probing of device names, and a loop device driven through the
 * block layer: size, O_DIRECT alignment, zeroes, discard, no resizing,
 * image creation on it.
 *
 * The loop device case needs root and loop support; it is skipped with
 * the reason otherwise.
 */
#include "util/osdep.h"
#include "qblock/block-backend.h"
#include "block/block_int.h"
#include "block/file-posix.h"
#include "qapi/qapi-opts.h"

#include <linux/fs.h>
#include <linux/loop.h>
#include <sys/ioctl.h>

static char *test_dir;

static char *new_file(const char *name, int64_t size)
{
    char *path = g_build_filename(test_dir, name, NULL);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    close(fd);
    return path;
}

/* What the kernel did not tell is filled in as QEMU does. */
static void test_block_sizes(void)
{
    static const struct {
        uint32_t logical, physical;     /* the ioctls' answers */
        uint32_t want_logical, want_physical;
    } cases[] = {
        { 512, 4096, 512, 4096 },       /* a 512e disk */
        { 4096, 4096, 4096, 4096 },     /* a 4Kn disk */
        { 512, 512, 512, 512 },
        { 0, 0, 512, 512 },             /* both ioctls failed */
        { 0, 4096, 512, 4096 },
        { 4096, 0, 4096, 4096 },
        { 4096, 512, 4096, 4096 },      /* physical below logical */
        { 256, 0, 512, 512 },           /* below a sector */
        { 1000, 3000, 512, 512 },       /* not powers of two */
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        HostDeviceBlockSizes s = hdev_block_sizes_fixup(cases[i].logical,
                                                        cases[i].physical);

        g_assert_cmpuint(s.logical, ==, cases[i].want_logical);
        g_assert_cmpuint(s.physical, ==, cases[i].want_physical);
    }
}

static BlockBackend *open_driver(const char *driver, const char *path,
                                 int flags, Error **errp)
{
    QDict *opts = qdict_new();

    if (driver) {
        qdict_put_str(opts, "driver", driver);
    }
    return blk_new_open(path, NULL, opts, flags | BDRV_O_PROTOCOL, errp);
}

/* A regular file is not a device (226), and a device is not a file. */
static void test_not_a_device(void)
{
    g_autofree char *path = new_file("regular", 64 * KiB);
    static const char *const drivers[] = { "host_device", "host_cdrom" };
    Error *err = NULL;

    for (size_t i = 0; i < ARRAY_SIZE(drivers); i++) {
        g_autofree char *want = g_strdup_printf(
            "'%s' driver requires '%s' to be either a character or block "
            "device", drivers[i], path);

        g_assert_null(open_driver(drivers[i], path, 0, &err));
        g_assert_cmpstr(error_get_pretty(err), ==, want);
        error_free(err);
        err = NULL;
    }
    g_assert_null(open_driver("file", "/dev/null", 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "'file' driver requires '/dev/null' to be a regular "
                    "file");
    error_free(err);
    unlink(path);
}

/* Device names open host_device without a driver or a prefix. */
static void test_probe(void)
{
    g_autofree char *path = new_file("probed", 64 * KiB);
    BlockBackend *blk;

    g_assert_cmpstr(bdrv_find_protocol("/dev/null", true,
                                       &error_abort)->format_name, ==,
                    "host_device");
    g_assert_cmpstr(bdrv_find_protocol(path, true,
                                       &error_abort)->format_name, ==,
                    "file");
    g_assert_cmpstr(bdrv_find_protocol("host_device:/dev/null", true,
                                       &error_abort)->format_name, ==,
                    "host_device");
    g_assert_cmpstr(bdrv_find_protocol("host_cdrom:/dev/null", true,
                                       &error_abort)->format_name, ==,
                    "host_cdrom");

    /* a character device: its size is what lseek says, 0 for /dev/null */
    blk = open_driver(NULL, "/dev/null", BDRV_O_RDWR, &error_abort);
    g_assert_cmpstr(blk_bs(blk)->drv->format_name, ==, "host_device");
    g_assert_cmpint(blk_getlength(blk), ==, 0);
    g_assert_false(bdrv_has_zero_init(blk_bs(blk)));
    blk_unref(blk);
    unlink(path);
}

/*
 * Attaches @backing to a free loop device, detached again automatically
 * when its last user closes it.  Returns the device's fd (the caller keeps
 * it open while it needs the device) and its path, or -1 with the reason.
 */
static int attach_loop_device(const char *backing, char **dev_path,
                              char **why)
{
    struct loop_info64 info = { .lo_flags = LO_FLAGS_AUTOCLEAR };
    int ctl = open("/dev/loop-control", O_RDWR);
    int backing_fd, dev_fd, nr;

    if (ctl < 0) {
        *why = g_strdup_printf("no loop devices: /dev/loop-control: %s",
                               strerror(errno));
        return -1;
    }
    nr = ioctl(ctl, LOOP_CTL_GET_FREE);
    close(ctl);
    *dev_path = g_strdup_printf("/dev/loop%d", nr);
    dev_fd = nr < 0 ? -1 : open(*dev_path, O_RDWR);
    backing_fd = open(backing, O_RDWR);
    if (dev_fd < 0 || ioctl(dev_fd, LOOP_SET_FD, backing_fd) < 0) {
        *why = g_strdup_printf("cannot set up a loop device (needs root): "
                               "%s", strerror(errno));
        close(backing_fd);
        if (dev_fd >= 0) {
            close(dev_fd);
        }
        return -1;
    }
    close(backing_fd);
    if (ioctl(dev_fd, LOOP_SET_STATUS64, &info) < 0) {
        ioctl(dev_fd, LOOP_CLR_FD, 0);
        close(dev_fd);
        *why = g_strdup_printf("cannot set up a loop device: %s",
                               strerror(errno));
        return -1;
    }
    return dev_fd;
}

static void *pattern_buf(size_t len, uint8_t seed)
{
    uint8_t *buf = qemu_memalign(4096, len);

    for (size_t i = 0; i < len; i++) {
        buf[i] = seed + i * 7 + (i >> 9);
    }
    return buf;
}

/* The device is only as large as it is: truncate and create say so. */
static void check_loop_size_errors(BlockBackend *blk, const char *dev)
{
    QemuOpts *opts = qemu_opts_create(&qapi_opts_host_device_create);
    Error *err = NULL;

    g_assert_cmpint(blk_truncate(blk, 16 * MiB, true, PREALLOC_MODE_OFF, 0,
                                 &err), ==, -ENOTSUP);
    g_assert_cmpstr(error_get_pretty(err), ==, "Cannot resize device files");
    error_free(err);
    err = NULL;
    g_assert_cmpint(blk_truncate(blk, 16 * MiB, false, PREALLOC_MODE_OFF, 0,
                                 &err), ==, -EINVAL);
    g_assert_cmpstr(error_get_pretty(err), ==, "Cannot grow device files");
    error_free(err);
    err = NULL;
    g_assert_cmpint(blk_truncate(blk, 4 * MiB, false, PREALLOC_MODE_OFF, 0,
                                 &error_abort), ==, 0);
    g_assert_cmpint(blk_getlength(blk), ==, 8 * MiB);
    g_assert_cmpint(blk_truncate(blk, 8 * MiB, true, PREALLOC_MODE_FALLOC, 0,
                                 &err), ==, -ENOTSUP);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Preallocation mode 'falloc' unsupported for this "
                    "non-regular file");
    error_free(err);
    err = NULL;

    g_assert_true(qemu_opt_set(opts, "size", "16M", &error_abort));
    g_assert_cmpint(bdrv_create_file(dev, opts, &err), <, 0);
    g_assert_cmpstr(error_get_pretty(err), ==, "Cannot grow device files");
    error_free(err);
    qemu_opts_del(opts);
}

/* A block device through probing: data, zeroes, discard, size, create. */
static void test_loop_device(void)
{
    g_autofree char *backing = new_file("backing", 8 * MiB);
    g_autofree char *dev = NULL;
    g_autofree char *why = NULL;
    QemuOpts *opts = qemu_opts_create(&qapi_opts_host_device_create);
    BlockBackend *blk;
    BlockDriverState *bs;
    uint8_t *data, *buf;
    int logical = 0;
    int dev_fd = attach_loop_device(backing, &dev, &why);

    if (dev_fd < 0) {
        g_test_skip(why);
        unlink(backing);
        qemu_opts_del(opts);
        return;
    }
    g_assert_cmpint(ioctl(dev_fd, BLKSSZGET, &logical), ==, 0);
    blk = open_driver(NULL, dev, BDRV_O_RDWR | BDRV_O_RESIZE | BDRV_O_UNMAP |
                      BDRV_O_NOCACHE, &error_abort);
    bs = blk_bs(blk);
    g_assert_cmpstr(bs->drv->format_name, ==, "host_device");
    g_assert_cmpint(blk_getlength(blk), ==, 8 * MiB);
    g_assert_cmpint(bs->bl.request_alignment, >=, logical);
    g_assert_cmpint(bs->bl.min_mem_alignment, >=, logical);
    g_assert_true(is_power_of_2(bs->bl.request_alignment));
    g_assert_false(bdrv_has_zero_init(bs));

    data = pattern_buf(64 * KiB, 6);
    buf = qemu_memalign(4096, 64 * KiB);
    g_assert_cmpint(blk_pwrite(blk, 64 * KiB, 64 * KiB, data, 0), ==, 0);
    g_assert_cmpint(blk_pwrite_zeroes(blk, 64 * KiB, 4096, 0), ==, 0);
    g_assert_cmpint(blk_pwrite_zeroes(blk, 72 * KiB, 4096,
                                      BDRV_REQ_MAY_UNMAP), ==, 0);
    g_assert_cmpint(blk_pread(blk, 64 * KiB, 64 * KiB, buf, 0), ==, 0);
    g_assert_true(buffer_is_zero(buf, 4096));
    g_assert_cmpmem(buf + 4096, 4096, data + 4096, 4096);
    g_assert_true(buffer_is_zero(buf + 8192, 4096));
    g_assert_cmpmem(buf + 12288, 52 * KiB, data + 12288, 52 * KiB);
    /* a loop device over a file discards by punching the file */
    g_assert_cmpint(blk_pdiscard(blk, 64 * KiB, 64 * KiB), ==, 0);
    g_assert_cmpint(blk_pread(blk, 64 * KiB, 64 * KiB, buf, 0), ==, 0);
    g_assert_true(buffer_is_zero(buf, 64 * KiB));
    g_assert_cmpint(blk_flush(blk), ==, 0);
    check_loop_size_errors(blk, dev);

    /* "creating" an image clears the first sector and nothing else */
    g_assert_cmpint(blk_pwrite(blk, 0, 64 * KiB, data, 0), ==, 0);
    blk_unref(blk);
    g_assert_true(qemu_opt_set(opts, "size", "8M", &error_abort));
    g_assert_cmpint(bdrv_create_file(dev, opts, &error_abort), ==, 0);
    g_assert_cmpint(pread(dev_fd, buf, 64 * KiB, 0), ==, 64 * KiB);
    g_assert_true(buffer_is_zero(buf, BDRV_SECTOR_SIZE));
    g_assert_cmpmem(buf + BDRV_SECTOR_SIZE, 64 * KiB - BDRV_SECTOR_SIZE,
                    data + BDRV_SECTOR_SIZE, 64 * KiB - BDRV_SECTOR_SIZE);

    qemu_opts_del(opts);
    close(dev_fd);
    qemu_vfree(buf);
    qemu_vfree(data);
    unlink(backing);
}

int main(int argc, char **argv)
{
    g_autofree char *tmpl = g_build_filename(g_get_tmp_dir(),
                                             "qblock-hdev-XXXXXX", NULL);
    int ret;

    g_test_init(&argc, &argv, NULL);
    qemu_init_progname(argv[0]);
    bdrv_init();
    test_dir = g_mkdtemp(tmpl);
    g_assert_nonnull(test_dir);

    g_test_add_func("/file-host-device/block-sizes", test_block_sizes);
    g_test_add_func("/file-host-device/not-a-device", test_not_a_device);
    g_test_add_func("/file-host-device/probe", test_probe);
    g_test_add_func("/file-host-device/loop-device", test_loop_device);

    ret = g_test_run();
    rmdir(test_dir);
    return ret;
}
