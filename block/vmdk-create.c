/*
 * vmdk: creating images, laid out as qemu-img 7.2 lays them out, so that
 * an image qblock-img creates (or converts to) is the one qemu-img would
 * write, but for the descriptor's random CID.
 *
 * A hosted sparse extent is, in sectors: the header (0), room for the
 * descriptor (1-20; blank in an extent of a descriptor file), the
 * redundant grain directory (21) and its grain tables, the grain
 * directory and its tables, all tables of 512 entries (4 sectors), all
 * present and empty; grains of 128 sectors (64 KiB) start at the next
 * grain boundary.  Version 1; 2 with zeroed grains; 3, compressed with
 * markers, for streamOptimized (QEMU's: no footer, the directory where a
 * sparse extent has it).  A flat extent is a file of the extent's size.
 * The descriptor's geometry: 63 sectors a track, 16 heads for IDE (255
 * otherwise), as many cylinders as fit.
 */
#include "block/vmdk.h"
#include "qapi/qapi-opts.h"
#include "qblock/block-backend.h"
#include "qblock/block-node.h"

#define VMDK_CREATE_GRAIN       128             /* sectors */
#define VMDK_CREATE_GTES        512
#define VMDK_CREATE_DESC_SECTOR 1
#define VMDK_CREATE_DESC_SIZE   20              /* sectors */
/* twoGbMaxExtent*: 2 GiB an extent */
#define VMDK_CREATE_2GB_SECTORS (UINT64_C(2) << 30 >> 9)

typedef enum VmdkSubformat {
    VMDK_MONOLITHIC_SPARSE,
    VMDK_MONOLITHIC_FLAT,
    VMDK_TWOGB_SPARSE,
    VMDK_TWOGB_FLAT,
    VMDK_STREAM_OPTIMIZED,
} VmdkSubformat;

static const char *const vmdk_subformat_names[] = {
    [VMDK_MONOLITHIC_SPARSE] = "monolithicSparse",
    [VMDK_MONOLITHIC_FLAT] = "monolithicFlat",
    [VMDK_TWOGB_SPARSE] = "twoGbMaxExtentSparse",
    [VMDK_TWOGB_FLAT] = "twoGbMaxExtentFlat",
    [VMDK_STREAM_OPTIMIZED] = "streamOptimized",
};

typedef struct VmdkCreate {
    /* blockdev-create: the nodes to write on; NULL: files made by name */
    const BdrvCreateTarget *tgt;
    const char *filename;
    uint64_t sectors;
    VmdkSubformat subformat;
    const char *adapter;
    const char *hwversion;
    const char *toolsversion;
    bool zeroed_grain;
    const char *backing_file;
    uint32_t parent_cid;
    /* every file opened so far (made by name: removed if creation fails) */
    BlockBackend *files[VMDK_MAX_EXTENTS + 1];
    unsigned int nfiles;
} VmdkCreate;

static bool vmdk_create_sparse_subformat(VmdkSubformat f)
{
    return f != VMDK_MONOLITHIC_FLAT && f != VMDK_TWOGB_FLAT;
}

static int vmdk_create_parse(VmdkCreate *c, QemuOpts *opts, Error **errp)
{
    const char *sub = qemu_opt_get(opts, "subformat");
    const char *fmt = qemu_opt_get(opts, "backing_fmt");
    static const char *const adapters[] = {
        "ide", "lsilogic", "buslogic", "legacyESX", NULL,
    };
    bool compat6 = qemu_opt_get_bool(opts, "compat6", false);
    const char *hw = qemu_opt_get(opts, "hwversion");

    c->sectors = DIV_ROUND_UP(qemu_opt_get_size(opts, "size", 0),
                              VMDK_SECTOR);
    c->adapter = qemu_opt_get(opts, "adapter_type");
    if (!c->adapter) {
        c->adapter = "ide";
    } else if (!g_strv_contains(adapters, c->adapter)) {
        error_setg(errp, "Unknown adapter type: '%s'", c->adapter);
        return -EINVAL;
    }
    c->subformat = VMDK_MONOLITHIC_SPARSE;
    if (sub) {
        for (c->subformat = 0;
             c->subformat < G_N_ELEMENTS(vmdk_subformat_names) &&
             strcmp(sub, vmdk_subformat_names[c->subformat]);
             c->subformat++) {
            /* looking */
        }
        if (c->subformat == G_N_ELEMENTS(vmdk_subformat_names)) {
            error_setg(errp, "Unknown subformat: '%s'", sub);
            return -EINVAL;
        }
    }
    if (hw && !strcmp(hw, "undefined")) {
        hw = NULL;
    }
    if (compat6 && hw) {
        error_setg(errp, "compat6 cannot be enabled with hwversion set");
        return -EINVAL;
    }
    c->hwversion = hw ? hw : compat6 ? "6" : "4";
    c->toolsversion = qemu_opt_get(opts, "toolsversion");
    if (!c->toolsversion) {
        c->toolsversion = "2147483647";
    }
    c->zeroed_grain = qemu_opt_get_bool(opts, "zeroed_grain", false);
    c->backing_file = qemu_opt_get(opts, "backing_file");
    if (c->backing_file && fmt && strcmp(fmt, "vmdk")) {
        error_setg(errp, "backing_file must be a vmdk image");
        return -EINVAL;
    }
    if (!vmdk_create_sparse_subformat(c->subformat) && c->backing_file) {
        error_setg(errp, "Flat image can't have backing file");
        return -ENOTSUP;
    }
    if (!vmdk_create_sparse_subformat(c->subformat) && c->zeroed_grain) {
        error_setg(errp, "Flat image can't enable zeroed grain");
        return -ENOTSUP;
    }
    c->parent_cid = UINT32_MAX;
    return 0;
}

/* The backing file's CID, which the new descriptor names as its parent. */
static int vmdk_create_parent_cid(VmdkCreate *c, Error **errp)
{
    g_autofree char *path = NULL;
    BlockBackend *blk;
    BlockDriverState *bs;

    if (!c->backing_file) {
        return 0;
    }
    path = bdrv_get_full_backing_filename_from_filename(c->filename,
                                                        c->backing_file,
                                                        errp);
    if (!path) {
        return -EINVAL;
    }
    /* probed, as QEMU does: the message names what the file is */
    blk = blk_new_open(path, NULL, NULL, BDRV_O_NO_BACKING, errp);
    if (!blk) {
        return -EINVAL;
    }
    bs = blk_bs(blk);
    if (strcmp(bs->drv->format_name, "vmdk")) {
        error_setg(errp, "Invalid backing file format: %s. Must be vmdk",
                   bs->drv->format_name);
        blk_unref(blk);
        return -EINVAL;
    }
    c->parent_cid = ((BDRVVmdkState *)bs->opaque)->cid;
    blk_unref(blk);
    return 0;
}

/* A file beside the descriptor: its name in the descriptor, its path. */
static char *vmdk_create_extent_name(const VmdkCreate *c, const char *tag,
                                     unsigned int n)
{
    g_autofree char *base = g_path_get_basename(c->filename);
    const char *dot = strrchr(base, '.');
    g_autofree char *prefix = g_strndup(base, dot ? dot - base
                                                  : (ptrdiff_t)strlen(base));
    g_autofree char *number = n ? g_strdup_printf("%03u", n) : g_strdup("");

    return g_strdup_printf("%s-%s%s%s", prefix, tag, number, dot ? dot : "");
}

/*
 * The next file of the image: the descriptor (or monolithic extent) first,
 * then the extents, named @name beside it; on nodes, the next node, whose
 * own file name the descriptor then gives (*@name replaced).
 */
static BlockBackend *vmdk_create_file(VmdkCreate *c, const BlockDriver *drv,
                                      char **name, QemuOpts *opts,
                                      Error **errp)
{
    g_autofree char *dir = g_path_get_dirname(c->filename);
    g_autofree char *path = c->nfiles ? g_build_filename(dir, *name, NULL)
                                      : g_strdup(c->filename);
    BlockDriverState *node = c->tgt ? c->tgt->file : NULL;
    BlockBackend *blk;

    if (c->tgt && c->nfiles) {
        /* QEMU's message numbers the extents from 0 */
        if (c->nfiles > c->tgt->n_extents) {
            error_setg(errp, "Extent [%u] not specified", c->nfiles - 1);
            return NULL;
        }
        node = c->tgt->extents[c->nfiles - 1];
        g_free(*name);
        *name = g_path_get_basename(bdrv_get_filename(node));
    }
    blk = node ? bdrv_create_format_on_node(node, errp)
               : bdrv_create_format_file(drv, path, opts, errp);
    if (blk) {
        assert(c->nfiles < G_N_ELEMENTS(c->files));
        c->files[c->nfiles++] = blk;
    }
    return blk;
}

static char *vmdk_create_descriptor(const VmdkCreate *c, uint32_t cid,
                                    const char *extents)
{
    unsigned int heads = strcmp(c->adapter, "ide") ? 255 : 16;
    g_autofree char *hint = c->backing_file ?
        g_strdup_printf("parentFileNameHint=\"%s\"", c->backing_file) :
        g_strdup("");

    return g_strdup_printf(
        "# Disk DescriptorFile\n"
        "version=1\n"
        "CID=%" PRIx32 "\n"
        "parentCID=%" PRIx32 "\n"
        "createType=\"%s\"\n"
        "%s\n"
        "# Extent description\n"
        "%s\n"
        "# The Disk Data Base\n"
        "#DDB\n"
        "\n"
        "ddb.virtualHWVersion = \"%s\"\n"
        "ddb.geometry.cylinders = \"%" PRIu64 "\"\n"
        "ddb.geometry.heads = \"%u\"\n"
        "ddb.geometry.sectors = \"63\"\n"
        "ddb.adapterType = \"%s\"\n"
        "ddb.toolsVersion = \"%s\"\n",
        cid, c->parent_cid, vmdk_subformat_names[c->subformat], hint,
        extents, c->hwversion, c->sectors / (heads * 63), heads, c->adapter,
        c->toolsversion);
}

/* Writes a hosted sparse extent of @sectors (with @desc, if any) to @blk. */
static int vmdk_create_sparse(const VmdkCreate *c, BlockBackend *blk,
                              uint64_t sectors, const char *desc,
                              Error **errp)
{
    bool stream = c->subformat == VMDK_STREAM_OPTIMIZED;
    uint64_t grains = DIV_ROUND_UP(sectors, VMDK_CREATE_GRAIN);
    uint64_t gd_entries = DIV_ROUND_UP(grains, VMDK_CREATE_GTES);
    uint64_t gd_sectors = DIV_ROUND_UP(gd_entries * sizeof(uint32_t),
                                       VMDK_SECTOR);
    uint64_t gt_sectors = VMDK_CREATE_GTES * sizeof(uint32_t) / VMDK_SECTOR;
    uint64_t rgd = VMDK_CREATE_DESC_SECTOR + VMDK_CREATE_DESC_SIZE;
    uint64_t gd = rgd + gd_sectors + gd_entries * gt_sectors;
    uint64_t overhead = ROUND_UP(gd + gd_sectors + gd_entries * gt_sectors,
                                 VMDK_CREATE_GRAIN);
    g_autofree uint32_t *dir = g_new0(uint32_t, gd_sectors * VMDK_SECTOR /
                                                sizeof(uint32_t));
    char desc_area[VMDK_CREATE_DESC_SIZE * VMDK_SECTOR] = "";
    VMDK4Header h = {
        .magic = GUINT32_TO_LE(VMDK4_MAGIC),
        .version = GUINT32_TO_LE(stream ? 3 : c->zeroed_grain ? 2 : 1),
        .flags = GUINT32_TO_LE(VMDK4_FLAG_NL_DETECT | VMDK4_FLAG_RGD |
                               (c->zeroed_grain ? VMDK4_FLAG_ZEROED_GRAIN
                                                : 0) |
                               (stream ? VMDK4_FLAG_COMPRESS |
                                         VMDK4_FLAG_MARKER : 0)),
        .capacity = GUINT64_TO_LE(sectors),
        .grain_size = GUINT64_TO_LE(VMDK_CREATE_GRAIN),
        .desc_offset = GUINT64_TO_LE(VMDK_CREATE_DESC_SECTOR),
        .desc_size = GUINT64_TO_LE(VMDK_CREATE_DESC_SIZE),
        .num_gtes_per_gt = GUINT32_TO_LE(VMDK_CREATE_GTES),
        .rgd_offset = GUINT64_TO_LE(rgd),
        .gd_offset = GUINT64_TO_LE(gd),
        .grain_offset = GUINT64_TO_LE(overhead),
        .check_bytes = { '\n', ' ', '\r', '\n' },
        .compress_algorithm = GUINT16_TO_LE(stream ? VMDK4_COMPRESS_DEFLATE
                                                   : 0),
    };
    int ret;

    /* 32-bit table entries: the tables and first grain within 2 TiB */
    if (overhead > UINT32_MAX) {
        error_setg(errp, "A sparse extent of %" PRIu64 " sectors is too "
                   "large for VMDK", sectors);
        return -EFBIG;
    }
    if (desc && strlen(desc) > sizeof(desc_area)) {
        error_setg(errp, "The descriptor (%zu bytes) does not fit in %zu",
                   strlen(desc), sizeof(desc_area));
        return -EINVAL;
    }
    /* a node given to blockdev-create may hold data: its tables must not */
    ret = blk_truncate(blk, 0, false, PREALLOC_MODE_OFF, 0, errp);
    if (ret == 0) {
        ret = blk_truncate(blk, overhead * VMDK_SECTOR, false,
                           PREALLOC_MODE_OFF, 0, errp);
    }
    if (ret < 0) {
        return ret;
    }
    ret = blk_pwrite(blk, 0, sizeof(h), &h, 0);
    if (ret == 0 && desc) {
        memcpy(desc_area, desc, strlen(desc));
        ret = blk_pwrite(blk, VMDK_CREATE_DESC_SECTOR * VMDK_SECTOR,
                         sizeof(desc_area), desc_area, 0);
    }
    /* each directory lists its own tables, which follow it */
    for (int copy = 0; ret == 0 && copy < 2; copy++) {
        uint64_t at = copy ? gd : rgd;

        for (uint64_t i = 0; i < gd_entries; i++) {
            dir[i] = GUINT32_TO_LE(at + gd_sectors + i * gt_sectors);
        }
        ret = blk_pwrite(blk, at * VMDK_SECTOR, gd_sectors * VMDK_SECTOR,
                         dir, 0);
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the VMDK header");
    }
    return ret < 0 ? ret : 0;
}

/* The files of a descriptor file's extents, and their lines in it. */
static int vmdk_create_extents(VmdkCreate *c, const BlockDriver *drv,
                               QemuOpts *opts, GString *lines, Error **errp)
{
    bool sparse = vmdk_create_sparse_subformat(c->subformat);
    bool twogb = c->subformat != VMDK_MONOLITHIC_FLAT;
    uint64_t per_extent = twogb ? VMDK_CREATE_2GB_SECTORS : c->sectors;
    uint64_t done = 0;

    for (unsigned int n = 1; n == 1 || done < c->sectors; n++) {
        uint64_t sectors = MIN(per_extent, c->sectors - done);
        g_autofree char *name =
            vmdk_create_extent_name(c, !twogb ? "flat" : sparse ? "s" : "f",
                                    twogb ? n : 0);
        BlockBackend *blk;
        int ret;

        if (n > VMDK_MAX_EXTENTS) {
            error_setg(errp, "More than %d extents", VMDK_MAX_EXTENTS);
            return -EFBIG;
        }
        blk = vmdk_create_file(c, drv, &name, opts, errp);
        if (!blk) {
            return -EIO;
        }
        g_string_append_printf(lines, "RW %" PRIu64 " %s \"%s\"%s\n",
                               sectors, sparse ? "SPARSE" : "FLAT", name,
                               sparse ? "" : " 0");
        ret = sparse ? vmdk_create_sparse(c, blk, sectors, NULL, errp)
                     : blk_truncate(blk, sectors * VMDK_SECTOR, false,
                                    PREALLOC_MODE_OFF, 0, errp);
        if (ret < 0) {
            return ret;
        }
        done += sectors;
    }
    return 0;
}

static int vmdk_create_image(VmdkCreate *c, const BlockDriver *drv,
                             QemuOpts *opts, Error **errp)
{
    bool monolithic = c->subformat == VMDK_MONOLITHIC_SPARSE ||
                      c->subformat == VMDK_STREAM_OPTIMIZED;
    g_autoptr(GString) lines = g_string_new("");
    g_autofree char *desc = NULL;
    BlockBackend *desc_blk;
    int ret;

    desc_blk = vmdk_create_file(c, drv, NULL, opts, errp);
    if (!desc_blk) {
        return -EIO;
    }
    ret = vmdk_create_parent_cid(c, errp);
    if (ret < 0) {
        return ret;
    }
    if (monolithic) {
        g_autofree char *name = g_path_get_basename(c->filename);

        g_string_append_printf(lines, "RW %" PRIu64 " SPARSE \"%s\"\n",
                               c->sectors, name);
    } else {
        ret = vmdk_create_extents(c, drv, opts, lines, errp);
        if (ret < 0) {
            return ret;
        }
    }
    desc = vmdk_create_descriptor(c, g_random_int(), lines->str);
    if (monolithic) {
        return vmdk_create_sparse(c, desc_blk, c->sectors, desc, errp);
    }
    ret = blk_pwrite(desc_blk, 0, strlen(desc), desc, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the descriptor");
        return ret;
    }
    /* a node given to blockdev-create may have been longer */
    return blk_truncate(desc_blk, strlen(desc), false, PREALLOC_MODE_OFF, 0,
                        errp);
}

/* Creates the image that @c describes, with @c's files; frees @c. */
static int vmdk_create_run(VmdkCreate *c, const BlockDriver *drv,
                           QemuOpts *opts, Error **errp)
{
    int ret = vmdk_create_parse(c, opts, errp);

    if (ret == 0) {
        ret = vmdk_create_image(c, drv, opts, errp);
    }
    for (unsigned int i = 0; i < c->nfiles; i++) {
        /* a node given to blockdev-create is the user's: never removed */
        if (ret < 0 && !c->tgt) {
            bdrv_delete_format_file(c->files[i]);
        }
        blk_unref(c->files[i]);
    }
    return ret;
}

int coroutine_fn vmdk_co_create_opts(const BlockDriver *drv,
                                     const char *filename, QemuOpts *opts,
                                     Error **errp)
{
    VmdkCreate c = { .filename = filename };

    return vmdk_create_run(&c, drv, opts, errp);
}

int coroutine_fn vmdk_co_create_on_node(const BlockDriver *drv,
                                        const BdrvCreateTarget *tgt,
                                        QemuOpts *opts, Error **errp)
{
    VmdkCreate c = {
        .tgt = tgt,
        .filename = bdrv_get_filename(tgt->file),
    };

    /* qemu-img create rounds the size up; QMP takes it exactly */
    if (qemu_opt_get_size(opts, "size", 0) % VMDK_SECTOR) {
        error_setg(errp, "Image size must be a multiple of 512 bytes");
        return -EINVAL;
    }
    return vmdk_create_run(&c, drv, opts, errp);
}
