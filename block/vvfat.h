/*
 * The vvfat driver's shared state: what block/vvfat.c (options, geometry,
 * boot sector, reading) and block/vvfat-dir.c (the host tree walked into
 * directory entries, clusters and a FAT) know of a synthesised FAT disk,
 * and with rw what block/vvfat-write.c (the overlay of the guest's
 * sectors), block/vvfat-parse.c (the guest's FAT tree) and
 * block/vvfat-commit.c (that tree carried to the host) share.
 *
 * The disk is, in order: for a hard disk, a master boot record and the
 * rest of the first track (63 sectors), then the FAT volume: one boot
 * sector, two identical FATs, the root directory (512 entries) and the
 * data area of 8 KiB clusters numbered from 2.  A floppy is the volume
 * alone.  FAT32 (a hard disk only) has 32 reserved sectors (the boot
 * sector, the FSInfo sector at 1, their copies at 6 and 7), 4 KiB
 * clusters, so that the volume has FAT32's 65525 and more, and its root
 * directory is a cluster chain from cluster 2, owned by node 0.  Every
 * cluster in use belongs to one node of the host tree: a directory's
 * clusters hold its entries, a file's its content, read from the host
 * file when the guest reads them.
 *
 * Invariants:
 *  1. After open the generated image (the base) is immutable: the nodes,
 *     the directory entries, the FAT and the boot sector are built once
 *     at open, and a read only looks at them.  With rw, what the guest
 *     writes lies over the base in the overlay (block/vvfat-write.c).
 *  2. The nodes that own clusters come in increasing first_cluster order
 *     and their cluster ranges do not overlap; every cluster from
 *     VVFAT_FIRST_CLUSTER to next_cluster - 1 belongs to exactly one of
 *     them, and next_cluster - VVFAT_FIRST_CLUSTER <= the volume's
 *     cluster count (the tree fits the FAT type, checked at open).
 *  3. A directory node's entries are dirents[dir_first, dir_first +
 *     dir_count); dir_count * 32 fits in its clusters (root but with
 *     FAT32: in the fixed root directory of VVFAT_ROOT_ENTRIES entries).
 *  4. The node is writable only with rw=on (then a read-only open is
 *     refused); without it a read-write open is refused unless
 *     auto-read-only, as QEMU does.  s->rw is set iff the overlay exists.
 *  5. A sector whose bit is set in overlay_map is read from the overlay
 *     file, never from the base; every write sets the bits it wrote.
 *  6. A pinned node's sectors are all in the overlay: once the host file
 *     behind a base node may change (renamed, removed, rewritten, or a
 *     directory above it renamed), its clusters are first copied into
 *     the overlay, so that the base never reads a host path that no
 *     longer holds what the node showed.  An unpinned node's host file
 *     is still at its path (no commit touched it).
 *  7. A parsed tree (VvfatTree, block/vvfat-parse.c) is consistent: entry
 *     0 is the root; every other entry's parent is a directory of lower
 *     index; every chain is within the data clusters, ends with an
 *     end-of-chain mark and shares no cluster with another; a file's
 *     chain holds exactly DIV_ROUND_UP(size, cluster) clusters; names are
 *     UTF-8, not empty, not "." or "..", hold no '/' or NUL, and are
 *     unique in their directory.
 *  8. s->committed is the tree the host directory has (as far as the
 *     commits could apply it): the base's tree at open, then each
 *     consistent tree a commit applied; an entry's path in it (its
 *     host_name where set) is where the host holds it.
 */
#ifndef BLOCK_VVFAT_H
#define BLOCK_VVFAT_H

#include "block/block_int.h"

#define VVFAT_SECTOR            512
#define VVFAT_SECTORS_PER_CLUSTER 16
#define VVFAT_CLUSTER_SIZE      (VVFAT_SECTOR * VVFAT_SECTORS_PER_CLUSTER)
#define VVFAT_FIRST_CLUSTER     2
#define VVFAT_ROOT_ENTRIES      512
#define VVFAT_NUM_FATS          2
#define VVFAT_RESERVED_SECTORS  1
/*
 * FAT32: 4 KiB clusters give QEMU's 504 MiB disk 128760 of them (FAT32
 * needs 65525 and more, 8 KiB would give 64 thousand); the reserved
 * sectors, FSInfo and backup boot sector where every FAT32 formatter
 * puts them.
 */
#define VVFAT32_SECTORS_PER_CLUSTER 8
#define VVFAT32_RESERVED_SECTORS 32
#define VVFAT32_FSINFO_SECTOR   1
#define VVFAT32_BACKUP_SECTOR   6
/* FAT32 entries have 28 bits */
#define VVFAT32_MASK            0x0fffffffu
/* a hard disk's geometry, as QEMU gives it: its volume starts at track 1 */
#define VVFAT_HD_HEADS          16
#define VVFAT_HD_SECTORS        63
#define VVFAT_LABEL_LEN         11
#define VVFAT_DEFAULT_LABEL     "QEMU VVFAT "
/* the volume serial number and the MBR's disk signature QEMU writes */
#define VVFAT_SERIAL            0xfabe1afdu
#define VVFAT_DISK_SIGNATURE    0xbe1afdfau

#define VVFAT_ATTR_READONLY     0x01
#define VVFAT_ATTR_VOLUME       0x08
#define VVFAT_ATTR_DIR          0x10
#define VVFAT_ATTR_ARCHIVE      0x20
#define VVFAT_ATTR_LFN          0x0f
#define VVFAT_LFN_LAST          0x40
#define VVFAT_LFN_CHARS         13
#define VVFAT_NAME_MAX_UTF16    255

/* Little-endian stores into the synthesised sectors. */
static inline void vvfat_put16(uint8_t *p, uint16_t v)
{
    p[0] = v;
    p[1] = v >> 8;
}

static inline void vvfat_put32(uint8_t *p, uint32_t v)
{
    vvfat_put16(p, v);
    vvfat_put16(p + 2, v >> 16);
}

static inline bool vvfat_bit(const uint8_t *map, uint64_t i)
{
    return map[i / 8] & (1u << (i % 8));
}

static inline void vvfat_set_bit(uint8_t *map, uint64_t i)
{
    map[i / 8] |= 1u << (i % 8);
}

/* One 32-byte directory entry: a short (8.3) entry or a long-name piece. */
/* every field is naturally aligned, so the struct needs no packing */
typedef struct VvfatDirent {
    uint8_t name[11];
    uint8_t attributes;
    uint8_t reserved;
    uint8_t ctime_tenth;
    uint16_t ctime;
    uint16_t cdate;
    uint16_t adate;
    uint16_t cluster_high;
    uint16_t mtime;
    uint16_t mdate;
    uint16_t cluster;
    uint32_t size;
} VvfatDirent;
_Static_assert(sizeof(VvfatDirent) == 32, "a directory entry is 32 bytes");

/* An entry's first cluster: its high half is FAT32's (zero below). */
static inline void vvfat_dirent_set_cluster(VvfatDirent *e, uint32_t c)
{
    e->cluster = GUINT16_TO_LE(c & 0xffff);
    e->cluster_high = GUINT16_TO_LE(c >> 16);
}

/* A host file or directory, and the clusters it owns. */
typedef struct VvfatNode {
    char *path;                 /* host path, opened when read */
    bool is_dir;
    uint32_t size;              /* file: bytes shown (host size at open) */
    uint32_t first_cluster;     /* 0: owns no cluster (inv. 2) */
    uint32_t n_clusters;
    uint32_t dirent;            /* index of its short entry (not the root) */
    uint32_t parent;            /* node index of its directory */
    uint32_t dir_first;         /* directory: its entries (inv. 3) */
    uint32_t dir_count;
} VvfatNode;

/* What the FAT type and the disk kind make of the volume. */
typedef struct VvfatGeometry {
    int fat_type;               /* 12, 16 or 32 */
    bool floppy;
    uint32_t heads;
    uint32_t sectors_per_track;
    uint32_t cylinders;
    uint32_t volume_start;      /* sectors before the boot sector */
    uint32_t volume_sectors;
    uint32_t sectors_per_fat;
    uint32_t cluster_count;     /* data clusters a tree may fill */
    uint32_t sectors_per_cluster;
    uint32_t cluster_size;      /* bytes */
    uint32_t reserved_sectors;  /* boot sector on (FAT32: FSInfo, copies) */
    uint32_t root_entries;      /* the fixed root; 0: FAT32's chain */
} VvfatGeometry;

typedef struct BDRVVvfatState {
    VvfatGeometry geo;
    char label[VVFAT_LABEL_LEN + 1];
    VvfatNode *nodes;           /* node 0 is the root (inv. 2) */
    uint32_t n_nodes;
    VvfatDirent *dirents;       /* every directory's entries (inv. 3) */
    uint32_t n_dirents;
    uint32_t next_cluster;      /* first cluster no node owns */
    uint8_t *fat;               /* one FAT, sectors_per_fat sectors */
    uint32_t *owner;            /* per data cluster: node index + 1, 0 */
    uint8_t mbr[VVFAT_SECTOR];
    uint8_t *reserved;          /* the reserved sectors: boot sector on */
    char *dir;                  /* the host directory, as given */

    /*
     * rw only (inv. 4-8): set up at open, then read and changed under
     * s->lock alone (reads, writes and the commit after each write hold
     * it; no other lock is taken inside).
     */
    bool rw;
    CoMutex lock;               /* one request at a time when rw */
    int overlay_fd;             /* unlinked temporary file, disk-sized */
    uint8_t *overlay_map;       /* a bit per sector of the disk (inv. 5) */
    uint8_t *dirty;             /* a bit per cluster written since commit */
    bool *pinned;               /* per node (inv. 6) */
    struct VvfatTree *committed; /* inv. 8 */
    char *pending;              /* why the last parse did not commit */
    mode_t umask;               /* the process's, read at open */
} BDRVVvfatState;

/* One file or directory of a parsed FAT tree (inv. 7). */
typedef struct VvfatEntry {
    uint32_t parent;            /* entry index of its directory */
    char *name;                 /* its name on the disk, UTF-8 */
    /*
     * The host's name where it is not @name, else NULL: a host name that
     * is no UTF-8 is shown by its 8.3 name alone (block/vvfat-dir.c), and
     * the commit must still find the file (inv. 8).  Paths use it.
     */
    char *host_name;
    bool is_dir;
    uint32_t cluster;           /* first cluster, 0: none */
    uint32_t size;
    uint8_t attr;               /* the short entry's attributes */
    uint16_t mdate, mtime;      /* its modification date and time, FAT's */
    uint32_t chain;             /* its clusters: chains[chain, +n_chain) */
    uint32_t n_chain;
    /* scratch of a commit (block/vvfat-commit.c) */
    int32_t match;              /* the same entry in the other tree, -1 */
    bool moved;
    bool placed;                /* old tree: moved into the temp dir */
    bool left;                  /* new tree: step 3 could not place it */
    bool touched;               /* new tree: the commit changed it */
} VvfatEntry;

typedef struct VvfatTree {
    VvfatEntry *e;
    uint32_t n;
    uint32_t *chains;
    uint32_t n_chains;
} VvfatTree;

/* Where a FAT volume's parts lie in an image, for the parser. */
typedef struct VvfatLayout {
    int fat_type;
    uint64_t fat_offset;        /* the first FAT, in bytes from the disk */
    uint32_t fat_bytes;
    uint64_t root_offset;
    uint32_t root_entries;
    uint64_t data_offset;       /* cluster 2 */
    uint32_t clusters;          /* data clusters: 2 .. clusters + 1 */
    uint32_t cluster_size;      /* bytes, at most VVFAT_CLUSTER_SIZE */
    uint32_t root_cluster;      /* FAT32: the root's chain; else 0 */
} VvfatLayout;

/* Reads @len bytes of the disk at @off into @buf: 0 or -errno. */
typedef int (*VvfatReadFn)(void *opaque, uint64_t off, void *buf,
                           size_t len);

/*
 * Parses the FAT file system @lay describes into @tree (inv. 7).  0, or
 * -EINVAL with the reason in *@why (g_free it) when the tree is not
 * consistent, or a read's -errno.
 */
int vvfat_parse_tree(const VvfatLayout *lay, VvfatReadFn read, void *opaque,
                     VvfatTree **tree, char **why);
void vvfat_tree_free(VvfatTree *tree);
/* The path of entry @i under @root (g_free it). */
char *vvfat_tree_path(const VvfatTree *t, uint32_t i, const char *root);

/*
 * Makes the 8.3 name of host name @name in @out (space-padded, base then
 * extension) as QEMU does: invalid characters dropped, upper case, base up
 * to the first dot and extension after the last.  Returns true when the
 * conversion lost something (then a ~N tail is due even without clash).
 */
bool vvfat_short_name(const char *name, uint8_t out[11]);
/* Puts the tail ~@n into @sn after its base, shortening the base to fit. */
void vvfat_short_name_tail(uint8_t sn[11], unsigned n);
uint8_t vvfat_lfn_checksum(const uint8_t sn[11]);

/*
 * Walks @dir into nodes (the root is node 0), directory entries, clusters
 * and the FAT, for the geometry and label already in @s.
 */
int vvfat_build_tree(BDRVVvfatState *s, const char *dir, Error **errp);
void vvfat_free_tree(BDRVVvfatState *s);
/* The node owning @cluster, or NULL for a free cluster (inv. 2). */
const VvfatNode *vvfat_find_cluster(const BDRVVvfatState *s,
                                    uint32_t cluster);

/* The base image (inv. 1) at @offset into @qiov from byte @done. */
int coroutine_fn vvfat_read_base(BDRVVvfatState *s, uint64_t offset,
                                 uint64_t bytes, QEMUIOVector *qiov,
                                 size_t done);
uint64_t vvfat_disk_bytes(const BDRVVvfatState *s);
void vvfat_layout(const BDRVVvfatState *s, VvfatLayout *lay);

/* block/vvfat-write.c: the overlay and the request path with rw; any
 * number of concurrent requests, serialised by s->lock. */
int vvfat_overlay_open(BDRVVvfatState *s, Error **errp);
void vvfat_overlay_close(BDRVVvfatState *s);
int coroutine_fn vvfat_co_preadv(BlockDriverState *bs, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 BdrvRequestFlags flags);
int coroutine_fn vvfat_co_pwritev(BlockDriverState *bs, int64_t offset,
                                  int64_t bytes, QEMUIOVector *qiov,
                                  BdrvRequestFlags flags);
/* The disk (overlay over base) at @off into @buf. */
int coroutine_fn vvfat_read_buf(BDRVVvfatState *s, uint64_t off, void *buf,
                                size_t len);
/* Pins (inv. 6) every node whose host path is @path or lies under it. */
int coroutine_fn vvfat_pin_path(BDRVVvfatState *s, const char *path);

/* block/vvfat-commit.c: a consistent tree carried to the host. */
/* Parses the disk; applies it when consistent (inv. 8). */
int coroutine_fn vvfat_commit(BDRVVvfatState *s);
/* The base's tree as s->committed, at open. */
int coroutine_fn vvfat_commit_init(BDRVVvfatState *s, Error **errp);

#endif
