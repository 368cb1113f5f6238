/*
 * vvfat with rw: a consistent FAT tree, as the guest left it, carried to
 * the host directory (block/vvfat.h, inv. 6-8).
 *
 * After each write the disk is parsed (block/vvfat-parse.c).  When the
 * tree is consistent it is compared with the tree the host directory had
 * at the last commit: an entry is the same file or directory in both when
 * it starts at the same cluster (an empty file, which has none, when it
 * has the same name in the same directory), so that a rename or a move
 * is a rename on the host and not a copy.  A host name that is no UTF-8
 * is shown by its 8.3 name alone: the tree at open keeps the host's name
 * beside it (host_name), and so does every later tree while the entry
 * stays where it is.  The differences are applied in an order that
 * never needs a name that is still taken:
 *   1. every entry that moved or was renamed goes, deepest first, into a
 *      temporary directory of DIR (its contents with it);
 *   2. what was deleted is removed, deepest first;
 *   3. in the new tree's order (parents first) each moved entry goes from
 *      the temporary directory to its new place, new directories are
 *      made, and new or changed files are written;
 *   4. the temporary directory is removed;
 *   5. the modification times and read-only attributes the guest set are
 *      given to the host's files and directories (last: steps 3 and 4
 *      change the times of the directories they write in).
 * A new file, or one whose clusters changed but at the end, is written
 * whole to a temporary name in its directory and renamed over the old
 * one (a crash leaves the old file or the new one); a file whose chain
 * stayed the same, or only grew or shrank at its end, gets in place the
 * clusters the guest wrote and those past its old end, then its size.
 * Every path is DIR and names the parser checked (inv. 7: no '/', no "."
 * or ".."), and no change goes through a symbolic link below DIR.  A
 * change that fails is reported with its path and reason and the others
 * still go on: nothing is removed or replaced that the new tree does not
 * say to.
 *
 * Times and attributes: a FAT entry's modification date and time are the
 * host's mtime (local time, as the disk was built), set when the entry is
 * new or the guest changed them; its access date (a day alone, which
 * Linux's vfat changes on reads) and creation time (Linux has no way to
 * set a file's birth time) are not carried.  The read-only attribute of a
 * file, when the guest sets or clears it, takes away or gives back the
 * host file's write permission; a directory's is not carried (Windows
 * and Linux's vfat do not take it as write protection either).  Hidden,
 * system and archive have no host equivalent and are left alone.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "block/vvfat.h"

typedef struct VvfatCommit {
    BDRVVvfatState *s;
    VvfatTree *old;
    VvfatTree *new;
    char *tmpdir;               /* step 1's directory, NULL until needed */
    int errors;
} VvfatCommit;

/*
 * The process's umask, without changing it (umask(2) would, for a moment,
 * for every thread): Linux says it in /proc/self/status.  022 otherwise.
 */
static mode_t vvfat_umask(void)
{
    g_autofree char *status = NULL;
    const char *line;
    unsigned int mask;

    if (g_file_get_contents("/proc/self/status", &status, NULL, NULL) &&
        (line = strstr(status, "\nUmask:")) &&
        sscanf(line, "\nUmask: %o", &mask) == 1) {
        return mask & 0777;
    }
    return 022;
}

static int vvfat_read_cb(void *opaque, uint64_t off, void *buf, size_t len)
{
    return vvfat_read_buf(opaque, off, buf, len);
}

static int coroutine_fn vvfat_parse_disk(BDRVVvfatState *s, VvfatTree **t,
                                         char **why)
{
    VvfatLayout lay;

    vvfat_layout(s, &lay);
    return vvfat_parse_tree(&lay, vvfat_read_cb, s, t, why);
}

/*
 * The host names the base showed otherwise (a name that is no UTF-8 has
 * its 8.3 name alone).  The parser meets the entries in the order the
 * tree walk made the nodes (breadth first, in readdir's order, neither
 * counting labels, dots or deleted entries): entry i is node i, which is
 * checked before any name is taken.
 */
static void vvfat_host_names(BDRVVvfatState *s, VvfatTree *t)
{
    if (t->n != s->n_nodes) {
        return;
    }
    for (uint32_t i = 1; i < t->n; i++) {
        const VvfatNode *n = &s->nodes[i];

        if (n->is_dir != t->e[i].is_dir || n->parent != t->e[i].parent ||
            n->first_cluster != t->e[i].cluster) {
            return;
        }
    }
    for (uint32_t i = 1; i < t->n; i++) {
        g_autofree char *base = g_path_get_basename(s->nodes[i].path);

        if (strcmp(base, t->e[i].name)) {
            t->e[i].host_name = g_steal_pointer(&base);
        }
    }
}

int coroutine_fn vvfat_commit_init(BDRVVvfatState *s, Error **errp)
{
    g_autofree char *why = NULL;
    int ret = vvfat_parse_disk(s, &s->committed, &why);

    if (ret < 0) {
        error_setg(errp, "vvfat: the tree of %s cannot be written back: %s",
                   s->dir, why);
        return ret;
    }
    vvfat_host_names(s, s->committed);
    s->umask = vvfat_umask();
    return 0;
}

static void vvfat_host_error(VvfatCommit *c, const char *what,
                             const char *path, int err)
{
    error_report("vvfat: could not %s %s: %s", what, path, strerror(err));
    c->errors++;
}

/*
 * True when every directory between DIR and @path's last part is a real
 * directory: no change may follow a symbolic link out of DIR.
 */
static bool vvfat_path_safe(VvfatCommit *c, const char *path)
{
    size_t root = strlen(c->s->dir);
    g_autofree char *p = g_strdup(path);
    struct stat st;

    assert(!strncmp(path, c->s->dir, root) && path[root] == '/');
    for (char *slash = strchr(p + root + 1, '/'); slash;
         slash = strchr(slash + 1, '/')) {
        *slash = 0;
        if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
            error_report("vvfat: %s is no directory of %s (a symbolic "
                         "link?): %s left alone", p, c->s->dir, path);
            c->errors++;
            return false;
        }
        *slash = '/';
    }
    return true;
}

/*
 * Where old entry @o lies on the host now (g_free it): up its parents to
 * the root or to one moved into the temporary directory.  Iterative: a
 * guest may nest directories as deep as it has clusters, and this runs on
 * a coroutine's stack.
 */
static char *vvfat_old_loc(VvfatCommit *c, uint32_t o)
{
    GPtrArray *parts = g_ptr_array_new();
    GString *path;

    while (o != 0 && !c->old->e[o].placed) {
        /* inv. 7: the parent has a lower index, the walk ends */
        assert(c->old->e[o].parent < o);
        g_ptr_array_add(parts, c->old->e[o].host_name ?
                               c->old->e[o].host_name : c->old->e[o].name);
        o = c->old->e[o].parent;
    }
    path = o == 0 ? g_string_new(c->s->dir)
                  : g_string_new(NULL);
    if (o != 0) {
        g_string_printf(path, "%s/%u", c->tmpdir, o);
    }
    for (guint k = parts->len; k > 0; k--) {
        g_string_append_c(path, '/');
        g_string_append(path, g_ptr_array_index(parts, k - 1));
    }
    g_ptr_array_free(parts, true);
    return g_string_free(path, false);
}

static bool vvfat_same_chain(VvfatCommit *c, const VvfatEntry *a,
                             const VvfatEntry *b)
{
    return a->n_chain == b->n_chain &&
           !memcmp(c->old->chains + a->chain, c->new->chains + b->chain,
                   a->n_chain * sizeof(uint32_t));
}

/* Whether one's chain starts with all of the other's. */
static bool vvfat_chain_prefix(VvfatCommit *c, const VvfatEntry *a,
                               const VvfatEntry *b)
{
    return !memcmp(c->old->chains + a->chain, c->new->chains + b->chain,
                   MIN(a->n_chain, b->n_chain) * sizeof(uint32_t));
}

/* Pairs the entries of the two trees, marks what moved. */
static void vvfat_match(VvfatCommit *c)
{
    g_autoptr(GHashTable) by_cluster = g_hash_table_new(NULL, NULL);
    g_autoptr(GHashTable) by_path = g_hash_table_new_full(g_str_hash,
                                                          g_str_equal,
                                                          g_free, NULL);
    VvfatTree *old = c->old, *new = c->new;

    for (uint32_t o = 1; o < old->n; o++) {
        old->e[o].match = -1;
        old->e[o].placed = false;
        if (old->e[o].cluster) {
            g_hash_table_insert(by_cluster,
                                GUINT_TO_POINTER(old->e[o].cluster),
                                GUINT_TO_POINTER(o));
        } else {
            /* its directory and its name on the disk, host names apart */
            g_hash_table_insert(by_path, g_strdup_printf("%u/%s",
                                old->e[o].parent, old->e[o].name),
                                GUINT_TO_POINTER(o));
        }
    }
    old->e[0].match = new->e[0].match = 0;
    for (uint32_t i = 1; i < new->n; i++) {
        VvfatEntry *e = &new->e[i];
        gpointer o;

        e->match = -1;
        if (e->cluster) {
            o = g_hash_table_lookup(by_cluster, GUINT_TO_POINTER(e->cluster));
        } else {
            /* a parent has a lower index: its match is known (inv. 7) */
            g_autofree char *key = g_strdup_printf("%d/%s",
                                                   new->e[e->parent].match,
                                                   e->name);

            o = g_hash_table_lookup(by_path, key);
        }
        if (o && old->e[GPOINTER_TO_UINT(o)].is_dir == e->is_dir) {
            VvfatEntry *oe = &old->e[GPOINTER_TO_UINT(o)];

            e->match = GPOINTER_TO_UINT(o);
            oe->match = i;
            /* a parent has a lower index: its match is known (inv. 7) */
            e->moved = new->e[e->parent].match != (int32_t)oe->parent ||
                       strcmp(e->name, oe->name);
            if (!e->moved) {
                /* still where the host has it, under the host's name */
                e->host_name = g_strdup(oe->host_name);
            }
        }
    }
}

/*
 * Marks the new tree's directory that held old entry @o as changed on
 * the host: an entry left it (step 5 gives it the guest's time again).
 */
static void vvfat_touch_old_parent(VvfatCommit *c, uint32_t o)
{
    int32_t m = c->old->e[c->old->e[o].parent].match;

    if (m >= 0) {
        c->new->e[m].touched = true;
    }
}

/* Step 1: each moved entry, deepest first, into the temporary directory. */
static void coroutine_fn vvfat_move_out(VvfatCommit *c)
{
    for (uint32_t o = c->old->n - 1; o > 0; o--) {
        VvfatEntry *e = &c->old->e[o];
        g_autofree char *src = NULL, *dst = NULL;

        if (e->match < 0 || !c->new->e[e->match].moved) {
            continue;
        }
        if (!c->tmpdir) {
            c->tmpdir = g_strdup_printf("%s/.qblock-vvfat-XXXXXX", c->s->dir);
            if (!mkdtemp(c->tmpdir)) {
                vvfat_host_error(c, "make", c->tmpdir, errno);
                g_clear_pointer(&c->tmpdir, g_free);
                return;
            }
        }
        src = vvfat_old_loc(c, o);
        dst = g_strdup_printf("%s/%u", c->tmpdir, o);
        if (!vvfat_path_safe(c, src) || vvfat_pin_path(c->s, src) < 0) {
            continue;
        }
        if (rename(src, dst) < 0) {
            vvfat_host_error(c, "move", src, errno);
            continue;
        }
        e->placed = true;
        vvfat_touch_old_parent(c, o);
    }
}

/*
 * Whether host file @path, entry @oe of the last commit, is one the guest
 * may not rewrite or remove: a regular file whose owner has no write
 * permission, while the disk showed it writable (the disk shows no host
 * file read-only, as QEMU's: one whose attribute the guest set itself,
 * and whose permission a commit took away, stays the guest's to write,
 * which its writes in any order need).  By the mode bits rather than
 * access(2), so that a daemon running as root keeps a file its owner
 * marked read-only too: replacing it through a temporary name, or
 * unlink(2), which asks only the directory's permission, would otherwise
 * undo what its mode says.
 */
static bool vvfat_host_readonly(const VvfatEntry *oe, const char *path)
{
    struct stat st;

    return !(oe->attr & VVFAT_ATTR_READONLY) && lstat(path, &st) == 0 &&
           S_ISREG(st.st_mode) && !(st.st_mode & S_IWUSR);
}

/* Step 2: what the new tree lacks, deepest first. */
static void coroutine_fn vvfat_remove(VvfatCommit *c)
{
    for (uint32_t o = c->old->n - 1; o > 0; o--) {
        VvfatEntry *e = &c->old->e[o];
        g_autofree char *path = NULL;

        if (e->match >= 0) {
            continue;
        }
        path = vvfat_old_loc(c, o);
        if (!vvfat_path_safe(c, path) || vvfat_pin_path(c->s, path) < 0) {
            continue;
        }
        if (!e->is_dir && vvfat_host_readonly(e, path)) {
            vvfat_host_error(c, "remove", path, EACCES);
            continue;
        }
        if ((e->is_dir ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT) {
            vvfat_host_error(c, "remove", path, errno);
        } else {
            vvfat_touch_old_parent(c, o);
        }
    }
}

/*
 * Writes file @i to @fd, cluster by cluster: all of it without
 * @only_dirty, else the clusters from index @from on and those before
 * that @only_dirty marks.
 */
static int coroutine_fn vvfat_write_file(VvfatCommit *c, uint32_t i, int fd,
                                         const uint8_t *only_dirty,
                                         uint32_t from)
{
    const VvfatEntry *e = &c->new->e[i];
    g_autofree uint8_t *buf = NULL;
    VvfatLayout lay;

    vvfat_layout(c->s, &lay);
    buf = g_malloc(lay.cluster_size);
    for (uint32_t k = 0; k < e->n_chain; k++) {
        uint32_t cl = c->new->chains[e->chain + k];
        uint64_t pos = (uint64_t)k * lay.cluster_size;
        size_t len = MIN(lay.cluster_size, e->size - pos);
        int ret;

        if (only_dirty && k < from && !vvfat_bit(only_dirty, cl)) {
            continue;
        }
        ret = vvfat_read_buf(c->s, lay.data_offset + (uint64_t)
                             (cl - VVFAT_FIRST_CLUSTER) * lay.cluster_size,
                             buf, lay.cluster_size);
        if (ret < 0) {
            return ret;
        }
        for (size_t done = 0; done < len;) {
            ssize_t r = pwrite(fd, buf + done, len - done, pos + done);

            if (r < 0 && errno != EINTR) {
                return -errno;
            }
            done += MAX(r, 0);
        }
    }
    return 0;
}

/*
 * A new or changed file @i at @path: in place when its clusters are
 * those it had (only what the guest wrote), else whole through a
 * temporary name renamed over it.
 */
static void coroutine_fn vvfat_put_file(VvfatCommit *c, uint32_t i,
                                        const char *path)
{
    const VvfatEntry *e = &c->new->e[i];
    const VvfatEntry *oe = e->match >= 0 ? &c->old->e[e->match] : NULL;
    g_autofree char *tmp = NULL, *dir = NULL;
    struct stat st;
    int fd, ret;

    if (vvfat_pin_path(c->s, path) < 0) {
        return;
    }
    if (oe && vvfat_host_readonly(oe, path)) {
        vvfat_host_error(c, "write", path, EACCES);
        return;
    }
    if (oe && vvfat_chain_prefix(c, oe, e)) {
        /*
         * The same clusters, some added or dropped at the end: in place,
         * so that a guest appending to a file costs what it appends, not
         * the whole file again at each commit.  From the old last
         * cluster on when the size changed: what lies past the old end
         * is the guest's now.
         */
        uint32_t from = oe->size == e->size ? e->n_chain
                                            : MAX(oe->n_chain, 1) - 1;

        /* O_NOFOLLOW: a symbolic link is replaced below, not written */
        fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            ret = vvfat_write_file(c, i, fd, c->s->dirty, from);
            if (ret == 0 && oe->size != e->size &&
                ftruncate(fd, e->size) < 0) {
                ret = -errno;
            }
            close(fd);
            if (ret < 0) {
                vvfat_host_error(c, "write", path, -ret);
            }
            return;
        }
    }
    if (!oe && lstat(path, &st) == 0) {
        /* not in the tree of the last commit: not the guest's to replace */
        vvfat_host_error(c, "create", path, EEXIST);
        return;
    }
    /* the temporary name is in the same directory: rename is atomic */
    dir = vvfat_tree_path(c->new, e->parent, c->s->dir);
    tmp = g_strdup_printf("%s/.qblock-vvfat-XXXXXX", dir);
    fd = mkstemp(tmp);
    if (fd < 0) {
        vvfat_host_error(c, "create a temporary file for", path, errno);
        return;
    }
    /* a new file as open(2) would make it, a changed one as it was */
    fchmod(fd, oe && stat(path, &st) == 0 ? st.st_mode & 07777
                                          : 0666 & ~c->s->umask);
    ret = vvfat_write_file(c, i, fd, NULL, 0);
    if (ret == 0 && fdatasync(fd) < 0) {
        ret = -errno;
    }
    close(fd);
    if (ret == 0 && rename(tmp, path) < 0) {
        ret = -errno;
    }
    if (ret < 0) {
        unlink(tmp);
        vvfat_host_error(c, "write", path, -ret);
    }
}

/* Whether matched file @i's contents may differ from the host's. */
static bool vvfat_changed(VvfatCommit *c, uint32_t i)
{
    const VvfatEntry *e = &c->new->e[i];
    const VvfatEntry *oe = &c->old->e[e->match];

    if (oe->size != e->size || !vvfat_same_chain(c, oe, e)) {
        return true;
    }
    for (uint32_t k = 0; k < e->n_chain; k++) {
        if (vvfat_bit(c->s->dirty, c->new->chains[e->chain + k])) {
            return true;
        }
    }
    return false;
}

/* Step 3: the new tree, parents first. */
static void coroutine_fn vvfat_place(VvfatCommit *c)
{
    for (uint32_t i = 1; i < c->new->n; i++) {
        VvfatEntry *e = &c->new->e[i];
        g_autofree char *path = vvfat_tree_path(c->new, i, c->s->dir);

        /* left: step 5 gives it no time or attribute either */
        e->left = true;
        if (!vvfat_path_safe(c, path)) {
            continue;
        }
        if (e->match >= 0 && e->moved) {
            g_autofree char *src = vvfat_old_loc(c, e->match);

            if (!c->old->e[e->match].placed) {
                continue;       /* step 1 failed and said why */
            }
            /* never over something of the host's */
            if (renameat2(AT_FDCWD, src, AT_FDCWD, path,
                          RENAME_NOREPLACE) < 0) {
                error_report("vvfat: could not move to %s: %s; it is left "
                             "as %s", path, strerror(errno), src);
                c->errors++;
                continue;
            }
        }
        e->left = false;
        if (e->match < 0 || e->moved) {
            /* an entry came into its directory */
            c->new->e[e->parent].touched = true;
        }
        if (e->match < 0 && e->is_dir) {
            if (mkdir(path, 0777) < 0) {
                vvfat_host_error(c, "make directory", path, errno);
            }
        } else if (!e->is_dir && (e->match < 0 || vvfat_changed(c, i))) {
            /* written, maybe through a temporary name in its directory */
            e->touched = true;
            c->new->e[e->parent].touched = true;
            if (e->size == 0 && e->match < 0) {
                int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                              0666);

                if (fd < 0) {
                    vvfat_host_error(c, "create", path, errno);
                } else {
                    close(fd);
                }
            } else {
                vvfat_put_file(c, i, path);
            }
        }
    }
}

/*
 * FAT's date and time (local time, two-second steps) in *@ts; false for
 * no date (0) or one no calendar has, which are not carried.
 */
static bool vvfat_fat_timespec(uint16_t date, uint16_t time,
                               struct timespec *ts)
{
    struct tm tm = {
        .tm_year = (date >> 9) + 80,
        .tm_mon = ((date >> 5) & 15) - 1,
        .tm_mday = date & 31,
        .tm_hour = time >> 11,
        .tm_min = (time >> 5) & 63,
        .tm_sec = (time & 31) * 2,
        .tm_isdst = -1,         /* as localtime_r gave it at open */
    };
    time_t t;

    if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 ||
        tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 59) {
        return false;
    }
    t = mktime(&tm);
    if (t == (time_t)-1) {
        return false;
    }
    ts->tv_sec = t;
    ts->tv_nsec = 0;
    return true;
}

/*
 * The read-only attribute @ro to host file @path: no write permission
 * at all, or the owner's back and the group's and others' where they may
 * read and the umask lets them (0444 gives 0644 with umask 022, 0400
 * gives 0600).  Never through a symbolic link: a file the disk showed
 * through one keeps its mode, and that is said.
 */
static void vvfat_set_readonly(VvfatCommit *c, const char *path, bool ro)
{
    struct stat st;
    mode_t mode;

    if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT) {  /* else step 3 failed and said why */
            vvfat_host_error(c, "set the read-only attribute of", path,
                             errno);
        }
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        vvfat_host_error(c, "set the read-only attribute of", path,
                         S_ISLNK(st.st_mode) ? ELOOP : EINVAL);
        return;
    }
    mode = st.st_mode & 07777;
    if (ro) {
        mode &= ~(mode_t)0222;
    } else {
        mode |= S_IWUSR | (((mode & 0044) >> 1) & ~c->s->umask);
    }
    if (mode != (st.st_mode & 07777) &&
        fchmodat(AT_FDCWD, path, mode, AT_SYMLINK_NOFOLLOW) < 0) {
        vvfat_host_error(c, "set the read-only attribute of", path, errno);
    }
}

/*
 * Step 5: the times and read-only attributes the guest changed, and the
 * guest's time again on what the commit changed (a file it wrote, a
 * directory an entry came into or left), so that after each commit the
 * host's mtime of all that the guest changed is the guest's.
 */
static void vvfat_set_attrs(VvfatCommit *c)
{
    for (uint32_t i = 1; i < c->new->n; i++) {
        const VvfatEntry *e = &c->new->e[i];
        const VvfatEntry *oe = e->match >= 0 ? &c->old->e[e->match] : NULL;
        bool ro = !e->is_dir && (e->attr & VVFAT_ATTR_READONLY);
        bool was_ro = oe && !oe->is_dir &&
                      (oe->attr & VVFAT_ATTR_READONLY);
        bool new_time = !oe || e->touched || oe->mdate != e->mdate ||
                        oe->mtime != e->mtime;
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT } };
        g_autofree char *path = NULL;

        if (e->left || (ro == was_ro && !new_time)) {
            continue;
        }
        path = vvfat_tree_path(c->new, i, c->s->dir);
        if (!vvfat_path_safe(c, path)) {
            continue;
        }
        if (ro != was_ro) {
            vvfat_set_readonly(c, path, ro);
        }
        /* the link itself, never its target */
        if (new_time && vvfat_fat_timespec(e->mdate, e->mtime, &ts[1]) &&
            utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) < 0 &&
            errno != ENOENT) {
            vvfat_host_error(c, "set the modification time of", path, errno);
        }
    }
}

int coroutine_fn vvfat_commit(BDRVVvfatState *s)
{
    VvfatCommit c = { .s = s, .old = s->committed };
    uint64_t dirty_bytes = DIV_ROUND_UP((uint64_t)s->geo.cluster_count +
                                        VVFAT_FIRST_CLUSTER + 8, 8);
    char *why = NULL;
    int ret;

    /* inv. 8: the host's tree, known since open */
    assert(s->rw && s->committed);
    ret = vvfat_parse_disk(s, &c.new, &why);
    if (ret < 0) {
        /* the guest may be half way through: wait for its next write */
        g_free(s->pending);
        s->pending = why;
        return ret;
    }
    g_clear_pointer(&s->pending, g_free);
    vvfat_match(&c);
    vvfat_move_out(&c);
    vvfat_remove(&c);
    vvfat_place(&c);
    if (c.tmpdir && rmdir(c.tmpdir) < 0) {
        error_report("vvfat: what could not be moved is kept in %s",
                     c.tmpdir);
    }
    g_free(c.tmpdir);
    vvfat_set_attrs(&c);
    /* inv. 8: the host now has this tree, as far as it could be applied */
    memset(s->dirty, 0, dirty_bytes);
    vvfat_tree_free(s->committed);
    s->committed = c.new;
    return c.errors ? -EIO : 0;
}
