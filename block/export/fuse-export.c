/*
 * The "fuse" export type: --export type=fuse,mountpoint=FILE mounts the
 * node over a regular file, through libfuse 3's low-level API, as
 * qemu-storage-daemon's FUSE export does (docs/fuse-export.md).
 *
 * What a file operation does at the edges follows QEMU 7.2's export, as
 * observed from outside (tests/daemon/test-fuse-export.py runs the same
 * script against both): the file's mode (0400, or 0600 when writable,
 * changeable with chmod and chown on a writable export), EACCES for a
 * write or truncate of a read-only export and EROFS for its chmod,
 * ENOTSUP for other attributes, a truncate that may grow the file even
 * without "growable", fallocate at or past the end that grows it and
 * within the file that is not supported, SEEK_DATA and SEEK_HOLE from
 * block status.  Where QEMU 7.2's export is broken qblock does what the
 * call means (docs/fuse-export.md): a write past the end of a growable
 * export grows it (QEMU fails with EINVAL), one that starts past the end
 * of a fixed one fails with ENOSPC (QEMU: EIO), a punched hole reads as
 * zeroes (QEMU discards, which a node may ignore) and one past the end
 * does nothing (QEMU: EIO).
 *
 * Invariants:
 *  1. /dev/fuse is read only in the export's context (exp->ctx), by its
 *     fd handler, one request at a time; a request that does I/O runs
 *     in a coroutine of its own there and replies exactly once (libfuse
 *     frees the request with the reply).
 *  2. A write's data is copied out of the receive buffer before its
 *     coroutine can yield: the next request is read into that buffer.
 *  3. in_flight counts the coroutines not yet replied.  The session is
 *     unmounted and destroyed only in delete, when none is left: from
 *     request_shutdown until then the export holds one reference, which
 *     the last of them drops.
 */
#define FUSE_USE_VERSION 31
#include <fuse_lowlevel.h>

#include "block/block.h"
#include "block/export.h"
#include "util/iov.h"

#include <fcntl.h>
#include <sys/stat.h>

/* QEMU's max_read: the largest read the kernel may ask for at once. */
#define FUSE_EXPORT_MAX_READ        (64 * MiB)
/* How long the kernel may keep the file's attributes (seconds). */
#define FUSE_EXPORT_ATTR_TIMEOUT    1.0
/* Requests read per wake-up of the fd handler, so that one busy export
 * does not keep the rest of its event loop waiting. */
#define FUSE_EXPORT_BATCH           16

typedef struct FuseExport {
    BlockExport *exp;
    struct fuse_session *se;
    struct fuse_buf buf;        /* the receive buffer (invariant 2) */
    char *mountpoint;
    bool growable;
    bool reading;               /* the fd handler is registered */
    bool shutting_down;
    unsigned int in_flight;     /* invariant 3 */
    /* the file's attributes that are the export's own */
    mode_t mode;
    uid_t uid;
    gid_t gid;
    struct timespec created;
} FuseExport;

/* The mountpoints in use, so that one file gets one export (main loop). */
static GHashTable *fuse_mountpoints;

/* ---------------------------------------------------------------------- */
/* Requests in coroutines */

typedef struct FuseRequest {
    FuseExport *f;
    fuse_req_t req;
    int64_t offset;
    int64_t length;
    int mode;                   /* fallocate's, lseek's whence */
    void *data;                 /* a write's copy (invariant 2), aligned */
} FuseRequest;

static void fuse_export_co_start(FuseExport *f, fuse_req_t req,
                                 CoroutineEntry *entry, int64_t offset,
                                 int64_t length, int mode, void *data)
{
    FuseRequest *r = g_new(FuseRequest, 1);

    *r = (FuseRequest) {
        .f = f, .req = req, .offset = offset, .length = length,
        .mode = mode, .data = data,
    };
    f->in_flight++;
    aio_co_enter(f->exp->ctx, qemu_coroutine_create(entry, r));
}

/* After the reply: invariant 3. */
static void fuse_export_co_end(FuseRequest *r)
{
    FuseExport *f = r->f;

    qemu_vfree(r->data);
    g_free(r);
    assert(f->in_flight > 0);
    if (--f->in_flight == 0 && f->shutting_down) {
        blk_exp_unref(f->exp);
    }
}

static void fuse_export_stat(FuseExport *f, struct stat *st)
{
    int64_t length = blk_getlength(f->exp->blk);
    int64_t allocated = bdrv_get_allocated_file_size(blk_bs(f->exp->blk));

    *st = (struct stat) {
        .st_ino = FUSE_ROOT_ID,
        .st_mode = S_IFREG | f->mode,
        .st_nlink = 1,
        .st_uid = f->uid,
        .st_gid = f->gid,
        .st_size = MAX(length, 0),
        .st_blocks = DIV_ROUND_UP(MAX(allocated, 0), 512),
        .st_atim = f->created,
        .st_mtim = f->created,
        .st_ctim = f->created,
    };
}

static void fuse_export_reply_attr(FuseExport *f, fuse_req_t req)
{
    struct stat st;

    fuse_export_stat(f, &st);
    fuse_reply_attr(req, &st, FUSE_EXPORT_ATTR_TIMEOUT);
}

/* Grows or shrinks the node to @length. */
static int coroutine_fn fuse_export_co_truncate(FuseExport *f, int64_t length,
                                                PreallocMode prealloc)
{
    Error *err = NULL;
    int ret = blk_co_truncate(f->exp->blk, length, true, prealloc, 0, &err);

    if (ret == -ENOTSUP && prealloc != PREALLOC_MODE_OFF) {
        /* the node cannot preallocate: a plain truncate still grows it */
        error_free(err);
        err = NULL;
        ret = blk_co_truncate(f->exp->blk, length, true, PREALLOC_MODE_OFF,
                              0, &err);
    }
    error_free(err);
    return ret;
}

static void coroutine_fn fuse_export_co_read(void *opaque)
{
    FuseRequest *r = opaque;
    BlockBackend *blk = r->f->exp->blk;
    int64_t length = blk_getlength(blk);
    QEMUIOVector qiov;
    int ret;

    if (length < 0) {
        fuse_reply_err(r->req, -length);
        goto out;
    }
    if (r->offset >= length) {
        fuse_reply_buf(r->req, NULL, 0);
        goto out;
    }
    r->length = MIN(r->length, length - r->offset);
    r->data = blk_try_blockalign(blk, r->length);
    if (!r->data) {
        fuse_reply_err(r->req, ENOMEM);
        goto out;
    }
    qemu_iovec_init_buf(&qiov, r->data, r->length);
    ret = blk_co_preadv(blk, r->offset, r->length, &qiov, 0);
    if (ret < 0) {
        fuse_reply_err(r->req, -ret);
    } else {
        fuse_reply_buf(r->req, r->data, r->length);
    }
    qemu_vfree(r->data);
    r->data = NULL;
out:
    fuse_export_co_end(r);
}

static void coroutine_fn fuse_export_co_write(void *opaque)
{
    FuseRequest *r = opaque;
    FuseExport *f = r->f;
    int64_t length = blk_getlength(f->exp->blk);
    int64_t end = r->offset + r->length;
    QEMUIOVector qiov;
    int ret = length < 0 ? length : 0;

    if (ret == 0 && end > length) {
        if (f->growable) {
            ret = fuse_export_co_truncate(f, end, PREALLOC_MODE_OFF);
        } else if (r->offset >= length) {
            ret = -ENOSPC;      /* as a disk past its end */
        } else {
            r->length = length - r->offset;    /* a short write */
        }
    }
    if (ret == 0) {
        qemu_iovec_init_buf(&qiov, r->data, r->length);
        ret = blk_co_pwritev(f->exp->blk, r->offset, r->length, &qiov, 0);
    }
    if (ret < 0) {
        fuse_reply_err(r->req, -ret);
    } else {
        fuse_reply_write(r->req, r->length);
    }
    fuse_export_co_end(r);
}

static void coroutine_fn fuse_export_co_flush(void *opaque)
{
    FuseRequest *r = opaque;

    fuse_reply_err(r->req, -blk_co_flush(r->f->exp->blk));
    fuse_export_co_end(r);
}

static void coroutine_fn fuse_export_co_setattr_size(void *opaque)
{
    FuseRequest *r = opaque;
    int ret = fuse_export_co_truncate(r->f, r->offset, PREALLOC_MODE_OFF);

    if (ret < 0) {
        fuse_reply_err(r->req, -ret);
    } else {
        fuse_export_reply_attr(r->f, r->req);
    }
    fuse_export_co_end(r);
}

/* fallocate(2) modes, with QEMU's export's rules (see the top). */
static int coroutine_fn fuse_export_co_do_fallocate(FuseExport *f, int mode,
                                                    int64_t offset,
                                                    int64_t len)
{
    int64_t length = blk_getlength(f->exp->blk);
    int64_t end = offset + len;
    bool keep_size = mode & FALLOC_FL_KEEP_SIZE;
    int ret;

    if (length < 0) {
        return length;
    }
    mode &= ~FALLOC_FL_KEEP_SIZE;
    if (mode == FALLOC_FL_PUNCH_HOLE) {
        /* the kernel sends it with KEEP_SIZE only; past the end: nothing */
        if (offset >= length) {
            return 0;
        }
        return blk_co_pwrite_zeroes(f->exp->blk, offset,
                                    MIN(end, length) - offset,
                                    BDRV_REQ_MAY_UNMAP);
    }
    if (mode == FALLOC_FL_ZERO_RANGE) {
        if (end > length && !keep_size) {
            ret = fuse_export_co_truncate(f, end, PREALLOC_MODE_OFF);
            if (ret < 0) {
                return ret;
            }
            length = end;
        }
        if (offset >= length) {
            return 0;
        }
        return blk_co_pwrite_zeroes(f->exp->blk, offset,
                                    MIN(end, length) - offset, 0);
    }
    if (mode == 0) {
        /* allocating within the file is not supported, at its end grows */
        if (offset < length) {
            return -EOPNOTSUPP;
        }
        if (keep_size) {
            return 0;
        }
        if (offset > length) {
            ret = fuse_export_co_truncate(f, offset, PREALLOC_MODE_OFF);
            if (ret < 0) {
                return ret;
            }
        }
        return fuse_export_co_truncate(f, end, PREALLOC_MODE_FALLOC);
    }
    return -EOPNOTSUPP;
}

static void coroutine_fn fuse_export_co_fallocate(void *opaque)
{
    FuseRequest *r = opaque;

    fuse_reply_err(r->req, -fuse_export_co_do_fallocate(r->f, r->mode,
                                                        r->offset,
                                                        r->length));
    fuse_export_co_end(r);
}

/*
 * SEEK_DATA and SEEK_HOLE from the chain's block status: what reads as
 * zeroes (unallocated, or allocated as zeroes) is a hole.  A hole is
 * found at the very end too (as QEMU's export answers), data past it
 * never (ENXIO).
 */
static int64_t coroutine_fn fuse_export_co_do_lseek(FuseExport *f,
                                                    int64_t offset,
                                                    int whence)
{
    BlockDriverState *bs = blk_bs(f->exp->blk);
    int64_t length = blk_getlength(f->exp->blk);

    if (length < 0) {
        return length;
    }
    if (whence != SEEK_DATA && whence != SEEK_HOLE) {
        return -EINVAL;
    }
    if (offset > length || (offset == length && whence == SEEK_DATA)) {
        return -ENXIO;
    }
    while (offset < length) {
        int64_t pnum;
        int ret = bdrv_co_block_status_above(bs, NULL, true, offset,
                                             length - offset, &pnum, NULL,
                                             NULL, NULL);
        bool data;

        if (ret < 0) {
            return ret;
        }
        data = (ret & BDRV_BLOCK_DATA) && !(ret & BDRV_BLOCK_ZERO);
        if (data == (whence == SEEK_DATA)) {
            return offset;
        }
        assert(pnum > 0);
        offset += pnum;
    }
    return whence == SEEK_HOLE ? length : -ENXIO;
}

static void coroutine_fn fuse_export_co_lseek(void *opaque)
{
    FuseRequest *r = opaque;
    int64_t ret = fuse_export_co_do_lseek(r->f, r->offset, r->mode);

    if (ret < 0) {
        fuse_reply_err(r->req, -ret);
    } else {
        fuse_reply_lseek(r->req, ret);
    }
    fuse_export_co_end(r);
}

/* ---------------------------------------------------------------------- */
/* libfuse's operations (invariant 1: called by fuse_session_process_buf) */

static void fuse_export_op_init(void *userdata, struct fuse_conn_info *conn)
{
    /* every request's data in our own buffer (invariant 2), no splice */
    conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
                    FUSE_CAP_SPLICE_MOVE);
    /* libfuse refuses an init whose max_read differs from the mount's */
    conn->max_read = FUSE_EXPORT_MAX_READ;
}

/* The mount is the file itself: there is nothing to look up in it. */
static void fuse_export_op_lookup(fuse_req_t req, fuse_ino_t parent,
                                  const char *name)
{
    fuse_reply_err(req, ENOENT);
}

static void fuse_export_op_getattr(fuse_req_t req, fuse_ino_t ino,
                                   struct fuse_file_info *fi)
{
    fuse_export_reply_attr(fuse_req_userdata(req), req);
}

static void fuse_export_op_setattr(fuse_req_t req, fuse_ino_t ino,
                                   struct stat *attr, int to_set,
                                   struct fuse_file_info *fi)
{
    FuseExport *f = fuse_req_userdata(req);
    int supported = FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MODE |
                    FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID;

    /* what the kernel adds on its own (ctime, dropping suid) is no ask */
    to_set &= ~FUSE_SET_ATTR_CTIME;
    if (to_set & ~supported) {
        fuse_reply_err(req, ENOTSUP);
        return;
    }
    if (!f->exp->writable) {
        fuse_reply_err(req, to_set & FUSE_SET_ATTR_SIZE ? EACCES : EROFS);
        return;
    }
    if (to_set & FUSE_SET_ATTR_MODE) {
        f->mode = attr->st_mode & 07777;
    }
    if (to_set & FUSE_SET_ATTR_UID) {
        f->uid = attr->st_uid;
    }
    if (to_set & FUSE_SET_ATTR_GID) {
        f->gid = attr->st_gid;
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
        fuse_export_co_start(f, req, fuse_export_co_setattr_size,
                             attr->st_size, 0, 0, NULL);
        return;
    }
    fuse_export_reply_attr(f, req);
}

static void fuse_export_op_open(fuse_req_t req, fuse_ino_t ino,
                                struct fuse_file_info *fi)
{
    FuseExport *f = fuse_req_userdata(req);

    if (!f->exp->writable && (fi->flags & O_ACCMODE) != O_RDONLY) {
        fuse_reply_err(req, EACCES);
        return;
    }
    fuse_reply_open(req, fi);
}

static void fuse_export_op_read(fuse_req_t req, fuse_ino_t ino, size_t size,
                                off_t offset, struct fuse_file_info *fi)
{
    fuse_export_co_start(fuse_req_userdata(req), req, fuse_export_co_read,
                         offset, size, 0, NULL);
}

static void fuse_export_op_write(fuse_req_t req, fuse_ino_t ino,
                                 const char *buf, size_t size, off_t offset,
                                 struct fuse_file_info *fi)
{
    FuseExport *f = fuse_req_userdata(req);
    void *copy;

    if (!f->exp->writable) {
        fuse_reply_err(req, EACCES);
        return;
    }
    /* aligned as the node wants it: an O_DIRECT file needs no bounce */
    copy = blk_try_blockalign(f->exp->blk, size);
    if (!copy && size) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    memcpy(copy, buf, size);    /* invariant 2 */
    fuse_export_co_start(f, req, fuse_export_co_write, offset, size, 0,
                         copy);
}

/* close() and fsync() both flush, so that what was written is stable. */
static void fuse_export_op_flush(fuse_req_t req, fuse_ino_t ino,
                                 struct fuse_file_info *fi)
{
    fuse_export_co_start(fuse_req_userdata(req), req, fuse_export_co_flush,
                         0, 0, 0, NULL);
}

static void fuse_export_op_fsync(fuse_req_t req, fuse_ino_t ino,
                                 int datasync, struct fuse_file_info *fi)
{
    fuse_export_op_flush(req, ino, fi);
}

static void fuse_export_op_fallocate(fuse_req_t req, fuse_ino_t ino,
                                     int mode, off_t offset, off_t length,
                                     struct fuse_file_info *fi)
{
    FuseExport *f = fuse_req_userdata(req);

    if (!f->exp->writable) {
        fuse_reply_err(req, EACCES);
        return;
    }
    fuse_export_co_start(f, req, fuse_export_co_fallocate, offset, length,
                         mode, NULL);
}

static void fuse_export_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off,
                                 int whence, struct fuse_file_info *fi)
{
    fuse_export_co_start(fuse_req_userdata(req), req, fuse_export_co_lseek,
                         off, 0, whence, NULL);
}

static const struct fuse_lowlevel_ops fuse_export_ops = {
    .init       = fuse_export_op_init,
    .lookup     = fuse_export_op_lookup,
    .getattr    = fuse_export_op_getattr,
    .setattr    = fuse_export_op_setattr,
    .open       = fuse_export_op_open,
    .read       = fuse_export_op_read,
    .write      = fuse_export_op_write,
    .flush      = fuse_export_op_flush,
    .fsync      = fuse_export_op_fsync,
    .fallocate  = fuse_export_op_fallocate,
    .lseek      = fuse_export_op_lseek,
};

/* ---------------------------------------------------------------------- */
/* The session */

static void fuse_export_stop_reading(FuseExport *f)
{
    if (f->reading) {
        aio_set_fd_handler(f->exp->ctx, fuse_session_fd(f->se), NULL, NULL,
                           NULL);
        f->reading = false;
    }
}

/* The fd handler: invariant 1. */
static void fuse_export_receive(void *opaque)
{
    FuseExport *f = opaque;

    for (int i = 0; i < FUSE_EXPORT_BATCH; i++) {
        int ret = fuse_session_receive_buf(f->se, &f->buf);

        if (ret == -EAGAIN || ret == -EINTR) {
            return;
        }
        if (ret <= 0) {
            /* unmounted from outside (umount): nothing more will come */
            fuse_export_stop_reading(f);
            return;
        }
        fuse_session_process_buf(f->se, &f->buf);
    }
}

/* Mounts @f's session, with allow_other as @allow_other asks. */
static int fuse_export_mount(FuseExport *f, bool allow_other, Error **errp)
{
    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    g_autofree char *opts = g_strdup_printf(
        "max_read=%" PRId64 ",default_permissions%s", FUSE_EXPORT_MAX_READ,
        allow_other ? ",allow_other" : "");

    if (fuse_opt_add_arg(&args, "qblock-storage-daemon") < 0 ||
        fuse_opt_add_arg(&args, "-o") < 0 ||
        fuse_opt_add_arg(&args, opts) < 0) {
        fuse_opt_free_args(&args);
        error_setg(errp, "Failed to construct FUSE arguments");
        return -ENOMEM;
    }
    f->se = fuse_session_new(&args, &fuse_export_ops,
                             sizeof(fuse_export_ops), f);
    fuse_opt_free_args(&args);
    if (!f->se) {
        error_setg(errp, "Failed to set up FUSE session");
        return -EIO;
    }
    if (fuse_session_mount(f->se, f->mountpoint) < 0) {
        fuse_session_destroy(f->se);
        f->se = NULL;
        error_setg(errp, "Failed to mount FUSE session to export");
        return -EIO;
    }
    return 0;
}

static int fuse_export_create(BlockExport *exp, JsonObject *opts,
                              Error **errp)
{
    FuseExport *f = exp->opaque;
    const char *mountpoint = json_object_get_string_member(opts,
                                                           "mountpoint");
    const char *allow_other = json_object_get_string_member_with_default(
                                  opts, "allow-other", "auto");
    struct stat st;
    int fd, ret;

    if (!fuse_mountpoints) {
        fuse_mountpoints = g_hash_table_new_full(g_str_hash, g_str_equal,
                                                 g_free, NULL);
    }
    if (g_hash_table_contains(fuse_mountpoints, mountpoint)) {
        error_setg(errp, "There already is a FUSE export on '%s'",
                   mountpoint);
        return -EEXIST;
    }
    if (stat(mountpoint, &st) < 0) {
        error_setg_errno(errp, errno, "Failed to stat '%s'", mountpoint);
        return -errno;
    }
    if (!S_ISREG(st.st_mode)) {
        error_setg(errp, "'%s' is not a regular file", mountpoint);
        return -EINVAL;
    }
    if (exp->writable) {
        /* truncate, growable writes and fallocate resize the node */
        uint64_t perm, shared;

        blk_get_perm(exp->blk, &perm, &shared);
        ret = blk_set_perm(exp->blk, perm | BLK_PERM_RESIZE, shared, errp);
        if (ret < 0) {
            return ret;
        }
    }
    *f = (FuseExport) {
        .exp = exp,
        .mountpoint = g_strdup(mountpoint),
        .growable = json_object_get_boolean_member_with_default(
                        opts, "growable", false),
        .mode = exp->writable ? 0600 : 0400,
        .uid = getuid(),
        .gid = getgid(),
    };
    clock_gettime(CLOCK_REALTIME, &f->created);
    f->created.tv_nsec = 0;
    if (!strcmp(allow_other, "off")) {
        ret = fuse_export_mount(f, false, errp);
    } else {
        ret = fuse_export_mount(f, true, !strcmp(allow_other, "on") ? errp
                                                                     : NULL);
        if (ret < 0 && !strcmp(allow_other, "auto")) {
            /* allow_other needs root or user_allow_other in fuse.conf */
            ret = fuse_export_mount(f, false, errp);
        }
    }
    if (ret < 0) {
        g_free(f->mountpoint);
        return ret;
    }
    fd = fuse_session_fd(f->se);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    aio_set_fd_handler(exp->ctx, fd, fuse_export_receive, NULL, f);
    f->reading = true;
    g_hash_table_add(fuse_mountpoints, g_strdup(mountpoint));
    return 0;
}

static void fuse_export_request_shutdown(BlockExport *exp)
{
    FuseExport *f = exp->opaque;
    AioContext *ctx = exp->ctx;
    bool main_loop = ctx == qemu_get_aio_context();

    if (!main_loop) {
        aio_context_acquire(ctx);
    }
    fuse_export_stop_reading(f);
    f->shutting_down = true;
    if (f->in_flight) {
        blk_exp_ref(exp);       /* invariant 3: the last one drops it */
    }
    if (!main_loop) {
        aio_context_release(ctx);
    }
}

/* The node's size changed under the export: the kernel asks again. */
static void fuse_export_resize(BlockExport *exp)
{
    FuseExport *f = exp->opaque;

    if (f->reading) {
        fuse_lowlevel_notify_inval_inode(f->se, FUSE_ROOT_ID, -1, 0);
    }
}

/* There are no clients to count: a mount is nobody's connection. */
static unsigned int fuse_export_client_count(BlockExport *exp)
{
    return 0;
}

static void fuse_export_delete(BlockExport *exp)
{
    FuseExport *f = exp->opaque;

    assert(!f->reading && !f->in_flight);    /* invariant 3 */
    fuse_session_unmount(f->se);
    fuse_session_destroy(f->se);
    free(f->buf.mem);
    g_hash_table_remove(fuse_mountpoints, f->mountpoint);
    g_free(f->mountpoint);
}

static const BlockExportDriver fuse_export_driver = {
    .type               = "fuse",
    .instance_size      = sizeof(FuseExport),
    .create             = fuse_export_create,
    .request_shutdown   = fuse_export_request_shutdown,
    .client_count       = fuse_export_client_count,
    .resize             = fuse_export_resize,
    .delete             = fuse_export_delete,
};

block_export_init(fuse_export_driver)
