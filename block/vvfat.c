/*
 * vvfat: a host directory shown as a disk holding a FAT file system
 * (QEMU's "virtual FAT" protocol, fat:[floppy:][12:|16:|32:][rw:]DIR);
 * with rw the guest's writes go back to the directory (block/vvfat-write.c,
 * block/vvfat-parse.c, block/vvfat-commit.c).
 *
 * Open walks the tree (block/vvfat-dir.c) and builds every piece of
 * metadata in memory: the master boot record, the boot sector, the FAT
 * and the directory entries, all bounded by what the FAT type can hold.
 * File contents stay on the host: a read of a file's cluster reads the
 * host file then, so opening a large tree costs its directories only.
 * The geometry, boot sector fields and layout are those QEMU 7.2's tools
 * show for the same options (see docs/vvfat.md for what differs).
 * Invariants: block/vvfat.h.
 */
#include <fcntl.h>

#include "block/vvfat.h"
#include "qapi/qapi-opts.h"
#include "util/cutils.h"

#define VVFAT_OPT_DIR           "dir"
#define VVFAT_OPT_FAT_TYPE      "fat-type"
#define VVFAT_OPT_FLOPPY        "floppy"
#define VVFAT_OPT_LABEL         "label"
#define VVFAT_OPT_RW            "rw"

/* the most of a host file one read holds in memory at once */
#define VVFAT_READ_CHUNK        (1u << 20)

/* The fixed root directory's sectors (none with FAT32). */
static uint32_t vvfat_root_sectors(const VvfatGeometry *g)
{
    return g->root_entries * sizeof(VvfatDirent) / VVFAT_SECTOR;
}

/*
 * fat:[floppy:][12:|16:|32:][rw:]DIR: the words may come in any order, as
 * QEMU takes them; what follows the last of them is the directory.
 */
static void vvfat_parse_filename(const char *filename, QDict *options,
                                 Error **errp)
{
    const char *p;
    int64_t fat_type = 0;
    bool floppy = false, rw = false;

    if (!strstart(filename, "fat:", &p)) {
        error_setg(errp, "File name string must start with 'fat:'");
        return;
    }
    for (;;) {
        size_t len = strcspn(p, ":");

        if (p[len] != ':') {
            break;
        }
        if (len == 6 && !strncmp(p, "floppy", 6)) {
            floppy = true;
        } else if (len == 2 && !strncmp(p, "rw", 2)) {
            rw = true;
        } else if (len == 2 && (!strncmp(p, "12", 2) ||
                                !strncmp(p, "16", 2) ||
                                !strncmp(p, "32", 2))) {
            fat_type = atoi(p);
        } else {
            break;
        }
        p += len + 1;
    }
    qdict_put_str(options, VVFAT_OPT_DIR, p);
    qdict_put_int(options, VVFAT_OPT_FAT_TYPE, fat_type);
    qdict_put_bool(options, VVFAT_OPT_FLOPPY, floppy);
    qdict_put_bool(options, VVFAT_OPT_RW, rw);
}

/*
 * QEMU's geometries: a 1.44 or 2.88 MB floppy, or a 504 or 31.5 MiB disk
 * (FAT32: QEMU's 504 MiB one).
 */
static void vvfat_geometry(VvfatGeometry *g, int64_t asked_type)
{
    uint64_t clusters, fat_bytes;
    uint32_t max;

    if (g->floppy) {
        g->fat_type = asked_type ? asked_type : 12;
        g->heads = 2;
        /* only an explicit FAT12 floppy is the 1.44 MB one */
        g->sectors_per_track = asked_type == 12 ? 18 : 36;
        g->cylinders = 80;
        g->volume_start = 0;
    } else {
        g->fat_type = asked_type ? asked_type : 16;
        g->heads = VVFAT_HD_HEADS;
        g->sectors_per_track = VVFAT_HD_SECTORS;
        g->cylinders = g->fat_type == 12 ? 64 : 1024;
        g->volume_start = VVFAT_HD_SECTORS;
    }
    g->volume_sectors = g->cylinders * g->heads * g->sectors_per_track -
                        g->volume_start;
    if (g->fat_type == 32) {
        g->sectors_per_cluster = VVFAT32_SECTORS_PER_CLUSTER;
        g->reserved_sectors = VVFAT32_RESERVED_SECTORS;
        g->root_entries = 0;
        max = VVFAT32_MASK & ~0xfu;
    } else {
        g->sectors_per_cluster = VVFAT_SECTORS_PER_CLUSTER;
        g->reserved_sectors = VVFAT_RESERVED_SECTORS;
        g->root_entries = VVFAT_ROOT_ENTRIES;
        max = g->fat_type == 12 ? 0xff0u : 0xfff0u;
    }
    g->cluster_size = g->sectors_per_cluster * VVFAT_SECTOR;
    /* a FAT with room for every cluster the volume less root could hold */
    clusters = (g->volume_sectors - g->reserved_sectors -
                vvfat_root_sectors(g)) / g->sectors_per_cluster + 2;
    fat_bytes = DIV_ROUND_UP(clusters * g->fat_type, 8);
    g->sectors_per_fat = DIV_ROUND_UP(fat_bytes, VVFAT_SECTOR);
    /*
     * The clusters a tree may fill: QEMU takes the first track off a hard
     * disk's volume once more (4 clusters fewer than the volume holds),
     * and refuses a tree past that, so qblock does too.
     */
    g->cluster_count = (g->volume_sectors - g->volume_start -
                        g->reserved_sectors -
                        VVFAT_NUM_FATS * g->sectors_per_fat -
                        vvfat_root_sectors(g)) / g->sectors_per_cluster;
    /* the cluster numbers the type reserves (0xff0 up) stay unused */
    g->cluster_count = MIN(g->cluster_count, max - VVFAT_FIRST_CLUSTER);
}

static uint32_t vvfat_data_start(const VvfatGeometry *g)
{
    return g->reserved_sectors + VVFAT_NUM_FATS * g->sectors_per_fat +
           vvfat_root_sectors(g);
}

uint64_t vvfat_disk_bytes(const BDRVVvfatState *s)
{
    return ((uint64_t)s->geo.volume_start + s->geo.volume_sectors) *
           VVFAT_SECTOR;
}

/* Where the parts of the volume lie, for the rw parser and overlay. */
void vvfat_layout(const BDRVVvfatState *s, VvfatLayout *lay)
{
    const VvfatGeometry *g = &s->geo;
    uint64_t vol = (uint64_t)g->volume_start * VVFAT_SECTOR;
    uint64_t data_sectors = vvfat_data_start(g);

    lay->fat_type = g->fat_type;
    lay->fat_offset = vol + g->reserved_sectors * VVFAT_SECTOR;
    lay->fat_bytes = g->sectors_per_fat * VVFAT_SECTOR;
    lay->root_offset = lay->fat_offset + VVFAT_NUM_FATS *
                       (uint64_t)lay->fat_bytes;
    lay->root_entries = g->root_entries;
    lay->data_offset = vol + data_sectors * VVFAT_SECTOR;
    /* the clusters the volume holds, a few past the tree's limit */
    lay->clusters = (g->volume_sectors - data_sectors) /
                    g->sectors_per_cluster;
    lay->cluster_size = g->cluster_size;
    lay->root_cluster = g->fat_type == 32 ? VVFAT_FIRST_CLUSTER : 0;
}

/* A CHS address of the MBR: head, sector and cylinder's high bits, low. */
static void vvfat_chs(const VvfatGeometry *g, uint32_t lba, uint8_t *out)
{
    uint32_t cyl = lba / (g->heads * g->sectors_per_track);
    uint32_t head = lba / g->sectors_per_track % g->heads;
    uint32_t sec = lba % g->sectors_per_track + 1;

    if (cyl > 1023) {
        cyl = 1023;
        head = g->heads - 1;
        sec = g->sectors_per_track;
    }
    out[0] = head;
    out[1] = sec | ((cyl >> 8) << 6);
    out[2] = cyl;
}

static void vvfat_build_mbr(BDRVVvfatState *s)
{
    const VvfatGeometry *g = &s->geo;
    uint8_t *e = s->mbr + 0x1be;
    uint32_t last = g->volume_start + g->volume_sectors - 1;

    vvfat_put32(s->mbr + 0x1b8, VVFAT_DISK_SIGNATURE);
    e[0] = 0x80;                                /* bootable */
    vvfat_chs(g, g->volume_start, e + 1);
    /* FAT12, FAT16 over 32M, FAT32 (CHS, as QEMU's) */
    e[4] = g->fat_type == 12 ? 0x01 : g->fat_type == 16 ? 0x06 : 0x0b;
    vvfat_chs(g, last, e + 5);
    vvfat_put32(e + 8, g->volume_start);
    vvfat_put32(e + 12, g->volume_sectors);
    s->mbr[510] = 0x55;
    s->mbr[511] = 0xaa;
}

/*
 * FAT32's FSInfo sector at @f: the free cluster count and the next free
 * cluster, which a FAT32 reader takes as hints.
 */
static void vvfat_build_fsinfo(BDRVVvfatState *s, uint8_t *f)
{
    VvfatLayout lay;

    vvfat_layout(s, &lay);
    vvfat_put32(f, 0x41615252);                 /* "RRaA" */
    vvfat_put32(f + 484, 0x61417272);           /* "rrAa" */
    vvfat_put32(f + 488, lay.clusters + VVFAT_FIRST_CLUSTER -
                         s->next_cluster);
    vvfat_put32(f + 492, s->next_cluster);
    vvfat_put32(f + 508, 0xaa550000);
}

/* The reserved sectors: the boot sector, and FAT32's FSInfo and copies. */
static void vvfat_build_boot(BDRVVvfatState *s)
{
    const VvfatGeometry *g = &s->geo;
    uint8_t *b;
    /* the extended BPB: after FAT32's own fields */
    uint32_t ext = g->fat_type == 32 ? 64 : 36;

    s->reserved = g_malloc0((size_t)g->reserved_sectors * VVFAT_SECTOR);
    b = s->reserved;
    memcpy(b, g->fat_type == 32 ? "\xeb\x58\x90" "MSWIN4.1"
                                : "\xeb\x3e\x90" "MSWIN4.1", 11);
    vvfat_put16(b + 11, VVFAT_SECTOR);
    b[13] = g->sectors_per_cluster;
    vvfat_put16(b + 14, g->reserved_sectors);
    b[16] = VVFAT_NUM_FATS;
    vvfat_put16(b + 17, g->root_entries);
    if (g->volume_sectors < 0x10000) {
        vvfat_put16(b + 19, g->volume_sectors);
    } else {
        vvfat_put32(b + 32, g->volume_sectors);
    }
    b[21] = g->floppy ? 0xf0 : 0xf8;
    vvfat_put16(b + 24, g->sectors_per_track);
    vvfat_put16(b + 26, g->heads);
    vvfat_put32(b + 28, g->volume_start);
    if (g->fat_type == 32) {
        vvfat_put32(b + 36, g->sectors_per_fat);
        vvfat_put32(b + 44, VVFAT_FIRST_CLUSTER);   /* the root's chain */
        vvfat_put16(b + 48, VVFAT32_FSINFO_SECTOR);
        vvfat_put16(b + 50, VVFAT32_BACKUP_SECTOR);
    } else {
        vvfat_put16(b + 22, g->sectors_per_fat);
    }
    b[ext] = g->floppy ? 0x00 : 0x80;           /* BIOS drive number */
    b[ext + 2] = 0x29;                          /* extended BPB */
    vvfat_put32(b + ext + 3, VVFAT_SERIAL);
    memcpy(b + ext + 7, s->label, VVFAT_LABEL_LEN);
    memcpy(b + ext + 18, g->fat_type == 12 ? "FAT12   " :
                         g->fat_type == 16 ? "FAT16   " : "FAT32   ", 8);
    b[510] = 0x55;
    b[511] = 0xaa;
    if (g->fat_type == 32) {
        uint8_t *f = b + VVFAT32_FSINFO_SECTOR * VVFAT_SECTOR;

        vvfat_build_fsinfo(s, f);
        /* the copies: boot sector and FSInfo again from sector 6 */
        memcpy(b + VVFAT32_BACKUP_SECTOR * VVFAT_SECTOR, b, VVFAT_SECTOR);
        memcpy(b + (VVFAT32_BACKUP_SECTOR + 1) * VVFAT_SECTOR, f,
               VVFAT_SECTOR);
    }
}

/* The options, checked with QEMU's messages where QEMU has them. */
static int vvfat_read_opts(BDRVVvfatState *s, QDict *options, char **dir,
                           bool *rw, Error **errp)
{
    QemuOpts *opts;
    int64_t fat_type;
    const char *label;
    int ret = -EINVAL;

    opts = qemu_opts_absorb_qdict(&qapi_opts_vvfat_runtime, options, errp);
    if (!opts) {
        return -EINVAL;
    }
    fat_type = qemu_opt_get_number(opts, VVFAT_OPT_FAT_TYPE, 0);
    s->geo.floppy = qemu_opt_get_bool(opts, VVFAT_OPT_FLOPPY, false);
    label = qemu_opt_get(opts, VVFAT_OPT_LABEL);
    *dir = g_strdup(qemu_opt_get(opts, VVFAT_OPT_DIR));
    *rw = qemu_opt_get_bool(opts, VVFAT_OPT_RW, false);
    if (!*dir) {
        error_setg(errp, "vvfat block driver requires a 'dir' option");
    } else if (fat_type != 0 && fat_type != 12 && fat_type != 16 &&
               fat_type != 32) {
        error_setg(errp, "Valid FAT types are only 12, 16 and 32");
    } else if (fat_type == 32 && s->geo.floppy) {
        error_setg(errp, "vvfat: a floppy cannot hold FAT32's 65525 "
                   "clusters; use a hard disk or fat-type 12 or 16");
        ret = -ENOTSUP;
    } else if (label && strlen(label) > VVFAT_LABEL_LEN) {
        error_setg(errp, "vvfat label cannot be longer than 11 bytes");
    } else {
        /* QEMU pads the label with spaces and keeps its case */
        snprintf(s->label, sizeof(s->label), "%-11s",
                 label ? label : VVFAT_DEFAULT_LABEL);
        vvfat_geometry(&s->geo, fat_type);
        ret = 0;
    }
    qemu_opts_del(opts);
    return ret;
}

static void vvfat_close(BlockDriverState *bs)
{
    BDRVVvfatState *s = bs->opaque;

    vvfat_overlay_close(s);
    vvfat_free_tree(s);
    g_clear_pointer(&s->reserved, g_free);
    g_clear_pointer(&s->dir, g_free);
}

/*
 * The directory the commit builds paths from, without trailing slashes,
 * so that they are the base nodes' paths (g_build_filename drops them).
 */
static char *vvfat_strip_dir(const char *dir)
{
    size_t len = strlen(dir);

    while (len > 1 && dir[len - 1] == '/') {
        len--;
    }
    return len == 1 && dir[0] == '/' ? g_strdup("") : g_strndup(dir, len);
}

static int vvfat_open(BlockDriverState *bs, QDict *options, int flags,
                      Error **errp)
{
    BDRVVvfatState *s = bs->opaque;
    g_autofree char *dir = NULL;
    bool rw = false;
    int ret;

    s->overlay_fd = -1;
    ret = vvfat_read_opts(s, options, &dir, &rw, errp);
    if (ret < 0) {
        return ret;
    }
    /* inv. 4 */
    if (rw && !(flags & BDRV_O_RDWR)) {
        error_setg(errp, "Unable to set VVFAT to 'rw' when drive is "
                   "read-only");
        return -EPERM;
    }
    if (!rw) {
        /* as a read-only format does */
        ret = bdrv_open_read_only(bs, flags, errp);
        if (ret < 0) {
            return ret;
        }
    }
    s->dir = vvfat_strip_dir(dir);
    ret = vvfat_build_tree(s, dir, errp);
    if (ret < 0) {
        vvfat_close(bs);
        return ret;
    }
    if (!s->geo.floppy) {
        vvfat_build_mbr(s);
    }
    vvfat_build_boot(s);
    if (rw) {
        ret = vvfat_overlay_open(s, errp);
        /* the reads behind it block and never yield: fine outside one */
        if (ret == 0) {
            ret = vvfat_commit_init(s, errp);
        }
        if (ret < 0) {
            vvfat_close(bs);
            return ret;
        }
    }
    return 0;
}

/* @n bytes of @src (@len long, zeroes past it) from @off into @qiov. */
static void vvfat_copy(QEMUIOVector *qiov, size_t done, const void *src,
                       uint64_t len, uint64_t off, uint64_t n)
{
    uint64_t have = off < len ? MIN(n, len - off) : 0;

    qemu_iovec_from_buf(qiov, done, (const uint8_t *)src + off, have);
    qemu_iovec_memset(qiov, done + have, 0, n - have);
}

/*
 * A file's bytes [off, off + n) from the host, zeroes past its end, read
 * through a buffer of at most VVFAT_READ_CHUNK bytes.  The reads block
 * the coroutine's thread, as QEMU's vvfat does: the host file is opened
 * and read when the guest reads it (inv. 1 holds no file descriptor).
 */
static int coroutine_fn vvfat_read_file(const VvfatNode *node,
                                        QEMUIOVector *qiov, size_t done,
                                        uint64_t off, uint64_t n)
{
    uint64_t have = off < node->size ? MIN(n, node->size - off) : 0;
    g_autofree uint8_t *buf = NULL;
    uint64_t pos = 0;
    int fd = -1, ret = 0;

    if (have) {
        fd = open(node->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            error_report("vvfat: could not open %s: %s", node->path,
                         strerror(errno));
            return -EIO;
        }
        buf = g_malloc(MIN(have, VVFAT_READ_CHUNK));
    }
    while (pos < have) {
        ssize_t r = pread(fd, buf, MIN(have - pos, VVFAT_READ_CHUNK),
                          off + pos);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            error_report("vvfat: could not read %s: %s", node->path,
                         strerror(errno));
            ret = -EIO;
            break;
        }
        if (r == 0) {
            /* a file that shrank since open reads as zeroes */
            break;
        }
        qemu_iovec_from_buf(qiov, done + pos, buf, r);
        pos += r;
    }
    if (fd >= 0) {
        close(fd);
    }
    qemu_iovec_memset(qiov, done + pos, 0, n - pos);
    return ret;
}

/* Reads from the data area, at most up to the end of one node's run. */
static int coroutine_fn vvfat_read_data(BDRVVvfatState *s, uint64_t off,
                                        uint64_t bytes, QEMUIOVector *qiov,
                                        size_t done, uint64_t *n)
{
    uint32_t csize = s->geo.cluster_size;
    uint32_t cluster = off / csize + VVFAT_FIRST_CLUSTER;
    const VvfatNode *node = vvfat_find_cluster(s, cluster);
    uint64_t in_node, run;

    if (!node) {
        /* free clusters and the tail past the last one read as zeroes */
        *n = MIN(bytes, csize - off % csize);
        qemu_iovec_memset(qiov, done, 0, *n);
        return 0;
    }
    in_node = off - (uint64_t)(node->first_cluster - VVFAT_FIRST_CLUSTER) *
              csize;
    run = (uint64_t)node->n_clusters * csize - in_node;
    *n = MIN(bytes, run);
    if (node->is_dir) {
        /* inv. 3 */
        assert((uint64_t)node->dir_count * sizeof(VvfatDirent) <=
               (uint64_t)node->n_clusters * csize);
        vvfat_copy(qiov, done, s->dirents + node->dir_first,
                   (uint64_t)node->dir_count * sizeof(VvfatDirent),
                   in_node, *n);
        return 0;
    }
    return vvfat_read_file(node, qiov, done, in_node, *n);
}

/* Reads from the volume at @off: boot sector, FATs, root, data. */
static int coroutine_fn vvfat_read_volume(BDRVVvfatState *s, uint64_t off,
                                          uint64_t bytes, QEMUIOVector *qiov,
                                          size_t done, uint64_t *n)
{
    const VvfatGeometry *g = &s->geo;
    uint64_t fat_start = (uint64_t)g->reserved_sectors * VVFAT_SECTOR;
    uint64_t fat_bytes = (uint64_t)g->sectors_per_fat * VVFAT_SECTOR;
    uint64_t root_start = fat_start + VVFAT_NUM_FATS * fat_bytes;
    uint64_t data_start = (uint64_t)vvfat_data_start(g) * VVFAT_SECTOR;

    if (off < fat_start) {
        *n = MIN(bytes, fat_start - off);
        vvfat_copy(qiov, done, s->reserved, fat_start, off, *n);
    } else if (off < root_start) {
        /* both FATs are the one built at open */
        uint64_t in_fat = (off - fat_start) % fat_bytes;

        *n = MIN(bytes, fat_bytes - in_fat);
        vvfat_copy(qiov, done, s->fat, fat_bytes, in_fat, *n);
    } else if (off < data_start) {
        *n = MIN(bytes, data_start - off);
        /* inv. 3: the root's entries fit the root directory */
        assert(s->nodes[0].dir_count <= g->root_entries);
        vvfat_copy(qiov, done, s->dirents + s->nodes[0].dir_first,
                   (uint64_t)s->nodes[0].dir_count * sizeof(VvfatDirent),
                   off - root_start, *n);
    } else {
        return vvfat_read_data(s, off - data_start, bytes, qiov, done, n);
    }
    return 0;
}

int coroutine_fn vvfat_read_base(BDRVVvfatState *s, uint64_t offset,
                                 uint64_t bytes, QEMUIOVector *qiov,
                                 size_t done)
{
    uint64_t volume = (uint64_t)s->geo.volume_start * VVFAT_SECTOR;

    while (bytes > 0) {
        uint64_t n;
        int ret = 0;

        if (offset < volume) {
            /* the MBR, then the rest of the first track: zeroes */
            n = MIN(bytes, volume - offset);
            vvfat_copy(qiov, done, s->mbr, sizeof(s->mbr), offset, n);
        } else {
            ret = vvfat_read_volume(s, offset - volume, bytes, qiov, done,
                                    &n);
        }
        if (ret < 0) {
            return ret;
        }
        assert(n > 0 && n <= bytes);
        offset += n;
        bytes -= n;
        done += n;
    }
    return 0;
}

/* All data, at no offset of a file: QEMU's map shows the same. */
static int coroutine_fn vvfat_co_block_status(BlockDriverState *bs,
                                              bool want_zero, int64_t offset,
                                              int64_t bytes, int64_t *pnum,
                                              int64_t *map,
                                              BlockDriverState **file)
{
    *pnum = bytes;
    return BDRV_BLOCK_DATA;
}

static int64_t vvfat_getlength(BlockDriverState *bs)
{
    return vvfat_disk_bytes(bs->opaque);
}

static void vvfat_refresh_limits(BlockDriverState *bs, Error **errp)
{
    bs->bl.request_alignment = VVFAT_SECTOR;
}

static const char *const vvfat_strong_runtime_opts[] = {
    VVFAT_OPT_DIR,
    VVFAT_OPT_FAT_TYPE,
    VVFAT_OPT_FLOPPY,
    VVFAT_OPT_LABEL,
    VVFAT_OPT_RW,
    NULL
};

static const BlockDriver bdrv_vvfat = {
    .format_name                    = "vvfat",
    .protocol_name                  = "fat",
    .instance_size                  = sizeof(BDRVVvfatState),
    .runtime_opts                   = &qapi_opts_vvfat_runtime,
    .strong_runtime_opts            = vvfat_strong_runtime_opts,
    .bdrv_needs_filename            = false,
    .bdrv_parse_filename            = vvfat_parse_filename,
    .bdrv_open                      = vvfat_open,
    .bdrv_close                     = vvfat_close,
    .bdrv_co_preadv                 = vvfat_co_preadv,
    .bdrv_co_pwritev                = vvfat_co_pwritev,
    .bdrv_co_block_status           = vvfat_co_block_status,
    .bdrv_getlength                 = vvfat_getlength,
    .bdrv_refresh_limits            = vvfat_refresh_limits,
};

block_init(bdrv_register, bdrv_vvfat)
