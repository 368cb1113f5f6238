/*
 * vvfat with rw: the guest's sectors kept in an overlay over the generated
 * image, and the request path that reads and writes through it.
 *
 * The overlay is an unlinked temporary file as large as the disk (sparse:
 * it holds only what was written or pinned) and a bitmap of the sectors
 * it holds (inv. 5), at most 128 KiB for the largest disk.  QEMU keeps its
 * writes in a temporary qcow2 image for the same reason: the guest may
 * write anything, and the host directory gets only what a consistent file
 * system says (block/vvfat-commit.c), after each write as QEMU does.
 * Writes below the first FAT (the MBR, the rest of the first track, the
 * boot sector) are refused with EPERM, as QEMU refuses them: the geometry
 * the commit parses by must not change under it.
 */
#include <fcntl.h>

#include "block/vvfat.h"

/* the most one bounce buffer holds */
#define VVFAT_BOUNCE            (1u << 20)

int vvfat_overlay_open(BDRVVvfatState *s, Error **errp)
{
    const char *tmpdir = g_getenv("TMPDIR");
    g_autofree char *path = g_strdup_printf("%s/qblock-vvfat.XXXXXX",
                                            tmpdir && tmpdir[0] ? tmpdir
                                                                : "/var/tmp");
    uint64_t sectors = vvfat_disk_bytes(s) / VVFAT_SECTOR;

    s->overlay_fd = mkstemp(path);
    if (s->overlay_fd < 0) {
        error_setg_errno(errp, errno, "Could not create the vvfat overlay "
                         "in %s", path);
        return -errno;
    }
    /* unlinked at once: nothing is left behind, whatever ends the process */
    unlink(path);
    if (ftruncate(s->overlay_fd, vvfat_disk_bytes(s)) < 0) {
        int ret = -errno;

        error_setg_errno(errp, errno, "Could not size the vvfat overlay");
        close(s->overlay_fd);
        s->overlay_fd = -1;
        return ret;
    }
    s->overlay_map = g_malloc0(DIV_ROUND_UP(sectors, 8));
    s->dirty = g_malloc0(DIV_ROUND_UP((uint64_t)s->geo.cluster_count +
                                      VVFAT_FIRST_CLUSTER + 8, 8));
    s->pinned = g_new0(bool, s->n_nodes);
    qemu_co_mutex_init(&s->lock);
    s->rw = true;
    return 0;
}

void vvfat_overlay_close(BDRVVvfatState *s)
{
    if (!s->rw) {
        return;
    }
    if (s->pending) {
        /* QEMU drops them too: its overlay is a temporary file */
        error_report("vvfat: writes never carried to %s are dropped: %s",
                     s->dir, s->pending);
    }
    close(s->overlay_fd);
    g_clear_pointer(&s->overlay_map, g_free);
    g_clear_pointer(&s->dirty, g_free);
    g_clear_pointer(&s->pinned, g_free);
    g_clear_pointer(&s->pending, g_free);
    vvfat_tree_free(s->committed);
    s->committed = NULL;
    s->rw = false;
}

/* pread/pwrite of the whole of @len, EINTR retried: 0 or -errno. */
static int vvfat_overlay_io(BDRVVvfatState *s, bool write, void *buf,
                            size_t len, uint64_t off)
{
    size_t done = 0;

    while (done < len) {
        ssize_t r = write ? pwrite(s->overlay_fd, (uint8_t *)buf + done,
                                   len - done, off + done)
                          : pread(s->overlay_fd, (uint8_t *)buf + done,
                                  len - done, off + done);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            int ret = r < 0 ? -errno : -EIO;

            error_report("vvfat: overlay %s failed: %s",
                         write ? "write" : "read", strerror(-ret));
            return ret;
        }
        done += r;
    }
    return 0;
}

/* The disk at @offset: overlay sectors over the base (inv. 5). */
static int coroutine_fn vvfat_read_rw(BDRVVvfatState *s, uint64_t offset,
                                      uint64_t bytes, QEMUIOVector *qiov,
                                      size_t done)
{
    g_autofree uint8_t *bounce = NULL;

    assert(offset % VVFAT_SECTOR == 0 && bytes % VVFAT_SECTOR == 0);
    while (bytes > 0) {
        uint64_t sector = offset / VVFAT_SECTOR;
        bool in = vvfat_bit(s->overlay_map, sector);
        uint64_t n = VVFAT_SECTOR;
        int ret;

        /* a run of sectors on the same side, one bounce buffer at most */
        while (n < bytes && n < VVFAT_BOUNCE &&
               vvfat_bit(s->overlay_map, sector + n / VVFAT_SECTOR) == in) {
            n += VVFAT_SECTOR;
        }
        if (in) {
            /* inv. 5: the overlay's sectors, never the base's */
            if (!bounce) {
                bounce = g_malloc(VVFAT_BOUNCE);
            }
            ret = vvfat_overlay_io(s, false, bounce, n, offset);
            if (ret == 0) {
                qemu_iovec_from_buf(qiov, done, bounce, n);
            }
        } else {
            ret = vvfat_read_base(s, offset, n, qiov, done);
        }
        if (ret < 0) {
            return ret;
        }
        offset += n;
        bytes -= n;
        done += n;
    }
    return 0;
}

int coroutine_fn vvfat_read_buf(BDRVVvfatState *s, uint64_t off, void *buf,
                                size_t len)
{
    QEMUIOVector qiov;
    int ret;

    qemu_iovec_init_buf(&qiov, buf, len);
    ret = s->rw ? vvfat_read_rw(s, off, len, &qiov, 0)
                : vvfat_read_base(s, off, len, &qiov, 0);
    qemu_iovec_destroy(&qiov);
    return ret;
}

int coroutine_fn vvfat_co_preadv(BlockDriverState *bs, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 BdrvRequestFlags flags)
{
    BDRVVvfatState *s = bs->opaque;
    int ret;

    if (!s->rw) {
        return vvfat_read_base(s, offset, bytes, qiov, 0);
    }
    qemu_co_mutex_lock(&s->lock);
    ret = vvfat_read_rw(s, offset, bytes, qiov, 0);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/* Writes @buf at @offset into the overlay and marks what it covers. */
static int vvfat_overlay_put(BDRVVvfatState *s, uint64_t offset,
                             uint8_t *buf, uint64_t len)
{
    VvfatLayout lay;
    uint64_t data;
    int ret = vvfat_overlay_io(s, true, buf, len, offset);

    if (ret < 0) {
        return ret;
    }
    vvfat_layout(s, &lay);
    data = lay.data_offset;
    for (uint64_t o = offset; o < offset + len; o += VVFAT_SECTOR) {
        vvfat_set_bit(s->overlay_map, o / VVFAT_SECTOR);
        if (o >= data) {
            uint64_t c = (o - data) / lay.cluster_size + VVFAT_FIRST_CLUSTER;

            /* the volume's last clusters may lie past the tree's limit */
            if (c < (uint64_t)s->geo.cluster_count + VVFAT_FIRST_CLUSTER + 8) {
                vvfat_set_bit(s->dirty, c);
            }
        }
    }
    return 0;
}

/*
 * Whether [@offset, +@bytes) touches what the parser takes as fixed: the
 * MBR's track and the boot sector (FAT32: and its copy).  FAT32's FSInfo
 * sectors are hints a guest keeps up to date (Linux's vfat at umount,
 * mtools at each change): they may be written.
 */
static bool vvfat_protected(BDRVVvfatState *s, uint64_t offset,
                            uint64_t bytes)
{
    uint64_t boot = (uint64_t)s->geo.volume_start * VVFAT_SECTOR;
    uint64_t backup = boot + VVFAT32_BACKUP_SECTOR * VVFAT_SECTOR;

    if (offset < boot + VVFAT_SECTOR) {
        return true;
    }
    if (s->geo.fat_type == 32) {
        return offset < backup + VVFAT_SECTOR && offset + bytes > backup;
    }
    return offset < boot + s->geo.reserved_sectors * VVFAT_SECTOR;
}

int coroutine_fn vvfat_co_pwritev(BlockDriverState *bs, int64_t offset,
                                  int64_t bytes, QEMUIOVector *qiov,
                                  BdrvRequestFlags flags)
{
    BDRVVvfatState *s = bs->opaque;
    uint64_t boot = (uint64_t)s->geo.volume_start * VVFAT_SECTOR;
    g_autofree uint8_t *buf = NULL;
    int ret;

    /* inv. 4: the block layer lets no write through to a read-only node */
    assert(s->rw);
    if (vvfat_protected(s, offset, bytes)) {
        if ((uint64_t)offset + bytes > boot) {
            /* QEMU's message; it says nothing of the MBR's track */
            error_report("Tried to write to protected bootsector");
        }
        return -EPERM;
    }
    buf = g_malloc(bytes);
    qemu_iovec_to_buf(qiov, 0, buf, bytes);
    qemu_co_mutex_lock(&s->lock);
    ret = vvfat_overlay_put(s, offset, buf, bytes);
    if (ret == 0) {
        /* QEMU carries a consistent file system after each write */
        vvfat_commit(s);
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/* Copies node @i's clusters that the overlay lacks into it (inv. 6). */
static int coroutine_fn vvfat_pin_node(BDRVVvfatState *s, uint32_t i)
{
    const VvfatNode *node = &s->nodes[i];
    VvfatLayout lay;
    uint64_t data;
    uint32_t spc = s->geo.sectors_per_cluster;
    g_autofree uint8_t *buf = g_malloc(s->geo.cluster_size);

    vvfat_layout(s, &lay);
    data = lay.data_offset;
    for (uint32_t k = 0; k < node->n_clusters; k++) {
        uint64_t off = data + (uint64_t)(node->first_cluster + k -
                                         VVFAT_FIRST_CLUSTER) *
                              s->geo.cluster_size;
        QEMUIOVector qiov;
        int ret;

        qemu_iovec_init_buf(&qiov, buf, s->geo.cluster_size);
        ret = vvfat_read_base(s, off, s->geo.cluster_size, &qiov, 0);
        qemu_iovec_destroy(&qiov);
        for (uint32_t j = 0; ret == 0 && j < spc; j++) {
            uint64_t o = off + j * VVFAT_SECTOR;

            if (!vvfat_bit(s->overlay_map, o / VVFAT_SECTOR)) {
                ret = vvfat_overlay_io(s, true, buf + j * VVFAT_SECTOR,
                                       VVFAT_SECTOR, o);
                if (ret == 0) {
                    vvfat_set_bit(s->overlay_map, o / VVFAT_SECTOR);
                }
            }
        }
        if (ret < 0) {
            return ret;
        }
        /* inv. 6: the whole cluster is the overlay's now */
        for (uint32_t j = 0; j < spc; j++) {
            assert(vvfat_bit(s->overlay_map, off / VVFAT_SECTOR + j));
        }
    }
    s->pinned[i] = true;
    return 0;
}

int coroutine_fn vvfat_pin_path(BDRVVvfatState *s, const char *path)
{
    size_t len = strlen(path);

    for (uint32_t i = 1; i < s->n_nodes; i++) {
        const char *p = s->nodes[i].path;

        if (s->pinned[i] || s->nodes[i].is_dir ||
            strncmp(p, path, len) || (p[len] && p[len] != '/')) {
            continue;
        }
        if (vvfat_pin_node(s, i) < 0) {
            error_report("vvfat: could not keep the guest's view of %s; "
                         "left as it is", p);
            return -EIO;
        }
    }
    return 0;
}
