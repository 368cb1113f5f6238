/*
 * ssh: a file on an SSH server as a protocol node, over SFTP (libssh).
 *
 * Open connects, logs in and opens the file (ssh-session.c); the node then
 * owns one SSH session with one SFTP channel.  A libssh session is not
 * thread-safe, and libssh 0.10 (Debian 12's) has no asynchronous SFTP
 * writes (sftp_aio_* came with 0.11), so the simplest design that never
 * stops the event loop is the one used here: every SFTP call of the data
 * path (read, write, fsync, the write that grows the file) runs in a
 * worker of the node's context's thread pool, one request at a time under
 * s->lock.  The coroutine that submitted it waits; the loop runs on.  A
 * server that answers slowly therefore slows this node only.  Requests do
 * not overlap each other, but a read keeps up to 16 SFTP reads on the
 * wire (libssh 0.10 has that for reads only), so a large read, what
 * copies send, costs about one round trip rather than one per 64 KiB.
 *
 * Open, create and close block in the calling thread while they talk to
 * the server, as QEMU's do: the tools and the monitor call them outside
 * the data path.
 *
 * Invariants:
 *  1. s->conn (the session, its SFTP channel and file) is used by at most
 *     one thread at a time: a worker holding s->lock for its request, or
 *     open and close, which run with nothing in flight (close is drained).
 *  2. s->length is the remote file's length as this node made it: its
 *     length at open, then raised by every write that ended past it and
 *     by growing truncates, under s->lock.  getlength answers from it
 *     without touching the session, which a worker may hold at that
 *     moment (invariant 1).  Another writer on the server is not watched
 *     for (nor is it by QEMU's driver); a file that shrank under the
 *     node reads as zeroes past its new end.
 */
#include "block/ssh.h"
#include "qapi/qapi-opts.h"
#include "util/thread-pool.h"

/*
 * Reads are pipelined: SFTP lets a client send many read requests before
 * the first answer comes (libssh 0.10: sftp_async_read_begin() and
 * sftp_async_read()), so a large read has up to QSSH_READ_DEPTH pieces of
 * QSSH_READ_PIECE bytes on the wire at once and costs about one round
 * trip rather than one per piece.  64 KiB is what OpenSSH's sftp-server
 * and most others answer in full; 16 of them (1 MiB) cover a long fat
 * network's round trip without holding much of the server's memory.
 * libssh 0.10 has no such pair for writes.
 */
#define QSSH_READ_PIECE (64 * KiB)
#define QSSH_READ_DEPTH 16

/*
 * The most one SFTP write carries.  OpenSSH's sftp-server drops the
 * connection for a message over 256 KiB, and libssh 0.10 sends a write
 * as one message whatever its size: 128 KiB, as QEMU sends, stays well
 * under that.  The plain reads that complete a short pipelined answer
 * are capped the same way.
 */
#define QSSH_MAX_IO (128 * KiB)

typedef struct BDRVSSHState {
    /* --- set at open, immutable until close --- */
    SSHConnectOpts opts;

    /* --- the node's context only --- */
    bool warned_fsync;          /* the fsync warning, given once */

    /* --- under lock (invariants 1, 2) --- */
    CoMutex lock;
    SSHConn conn;
    uint64_t length;
} BDRVSSHState;

/* ---------------------------------------------------------------------- */
/* Worker side */

typedef enum QSSHOp {
    QSSH_OP_READ,
    QSSH_OP_WRITE,
    QSSH_OP_FLUSH,
    QSSH_OP_GROW,
} QSSHOp;

typedef struct SSHRequest {
    SSHConn *conn;
    QSSHOp op;
    uint64_t offset;            /* read, write; grow: the new length */
    QEMUIOVector *qiov;         /* read, write */
} SSHRequest;

/*
 * Reads @len bytes at the file's position into @buf, one request at a
 * time; what lies past the end of the file reads as zeroes, as a file
 * protocol's reads do.
 */
static int qssh_read_buf(SSHConn *c, char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = qssh_lib.sftp_read(c->file, buf, MIN(len, QSSH_MAX_IO));

        if (n < 0) {
            return -EIO;
        }
        if (n == 0) {
            memset(buf, 0, len);
            return 0;
        }
        buf += n;
        len -= n;
    }
    return 0;
}

/* One read request on the wire: where its answer goes. */
typedef struct SSHReadPiece {
    char *buf;
    uint32_t len;
    uint64_t offset;
    int id;
} SSHReadPiece;

/*
 * Takes the answer to @p: its length (less than asked at the end of the
 * file) or -EIO.  After an answer at the end of the file libssh answers
 * every later call with 0 without taking that call's answer off the wire,
 * where it would wait for the session's life: the seek clears libssh's
 * EOF mark (and its position, which a pipeline does not use).
 */
static int qssh_read_piece_done(SSHConn *c, SSHReadPiece *p)
{
    int n;

    if (qssh_lib.sftp_seek64(c->file, p->offset) < 0) {
        return -EIO;
    }
    n = qssh_lib.sftp_async_read(c->file, p->buf, p->len, p->id);
    if (n == SSH_EOF) {
        return 0;
    }
    return n < 0 ? -EIO : n;
}

/*
 * Reads @qiov at @offset with up to QSSH_READ_DEPTH pieces in flight.
 *
 * A piece answered short (the end of the file, or a server that answers
 * less than asked) is completed by plain reads, but only once nothing is
 * in flight: libssh 0.10 loses the answers to pipelined requests that
 * arrive while a plain read waits for its own.  So after a short answer
 * no piece is sent until those in flight are taken; then the short ones
 * are completed (zeroes past the end of the file), and the pipeline goes
 * on.
 */
static int qssh_read_pipelined(SSHConn *c, uint64_t offset,
                               QEMUIOVector *qiov)
{
    SSHReadPiece ring[QSSH_READ_DEPTH];
    SSHReadPiece shorts[QSSH_READ_DEPTH];
    unsigned head = 0, count = 0, nshort = 0;
    size_t done = 0;
    int ret = 0;

    for (;;) {
        while (ret == 0 && nshort == 0 && count < QSSH_READ_DEPTH &&
               done < qiov->size) {
            SSHReadPiece *p = &ring[(head + count) % QSSH_READ_DEPTH];
            struct iovec *iov;
            size_t skip;
            int i;

            /* the iovec element that holds byte @done, and where in it */
            for (i = 0, skip = done; skip >= qiov->iov[i].iov_len; i++) {
                skip -= qiov->iov[i].iov_len;
            }
            iov = &qiov->iov[i];
            p->buf = (char *)iov->iov_base + skip;
            p->len = MIN(iov->iov_len - skip, QSSH_READ_PIECE);
            p->offset = offset + done;
            if (qssh_lib.sftp_seek64(c->file, p->offset) < 0) {
                ret = -EIO;
                break;
            }
            p->id = qssh_lib.sftp_async_read_begin(c->file, p->len);
            if (p->id < 0) {
                ret = -EIO;
                break;
            }
            done += p->len;
            count++;
        }
        if (count > 0) {
            /*
             * In order, and every one even after a failure: an answer
             * never taken would stay queued in libssh.
             */
            SSHReadPiece *p = &ring[head];
            int n = qssh_read_piece_done(c, p);

            head = (head + 1) % QSSH_READ_DEPTH;
            count--;
            if (n < 0) {
                ret = -EIO;
            } else if (n < p->len) {
                assert(nshort < QSSH_READ_DEPTH);
                shorts[nshort] = *p;
                shorts[nshort].buf += n;
                shorts[nshort].offset += n;
                shorts[nshort].len -= n;
                nshort++;
            }
            continue;
        }
        /* nothing in flight: complete the short pieces */
        for (unsigned i = 0; i < nshort && ret == 0; i++) {
            if (qssh_lib.sftp_seek64(c->file, shorts[i].offset) < 0) {
                ret = -EIO;
                break;
            }
            ret = qssh_read_buf(c, shorts[i].buf, shorts[i].len);
        }
        nshort = 0;
        if (ret < 0 || done == qiov->size) {
            return ret;
        }
    }
}

static int qssh_write_buf(SSHConn *c, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = qssh_lib.sftp_write(c->file, buf, MIN(len, QSSH_MAX_IO));

        if (n <= 0) {
            return -EIO;
        }
        buf += n;
        len -= n;
    }
    return 0;
}

/* A worker thread, holding the session for the node (invariant 1). */
static int qssh_worker(void *opaque)
{
    SSHRequest *req = opaque;
    SSHConn *c = req->conn;
    int ret = 0;

    switch (req->op) {
    case QSSH_OP_FLUSH:
        return qssh_lib.sftp_fsync(c->file) < 0 ? -EIO : 0;
    case QSSH_OP_GROW:
        return qssh_grow(c, req->offset);
    case QSSH_OP_READ:
    case QSSH_OP_WRITE:
        break;
    }
    if (req->op == QSSH_OP_READ) {
        return qssh_read_pipelined(c, req->offset, req->qiov);
    }
    if (qssh_lib.sftp_seek64(c->file, req->offset) < 0) {
        return -EIO;
    }
    for (int i = 0; i < req->qiov->niov && ret == 0; i++) {
        ret = qssh_write_buf(c, req->qiov->iov[i].iov_base,
                             req->qiov->iov[i].iov_len);
    }
    return ret;
}

/* Runs @req in a worker of the node's context; s->lock is held. */
static int coroutine_fn qssh_co_run_locked(BlockDriverState *bs,
                                           SSHRequest *req)
{
    BDRVSSHState *s = bs->opaque;
    ThreadPool *pool = aio_get_thread_pool(bdrv_get_aio_context(bs));
    int ret;

    qemu_co_mutex_assert_locked(&s->lock);      /* invariant 1 */
    req->conn = &s->conn;
    ret = thread_pool_submit_co(pool, qssh_worker, req);
    if (ret == 0 && req->op == QSSH_OP_WRITE &&
        req->offset + req->qiov->size > s->length) {
        s->length = req->offset + req->qiov->size;      /* invariant 2 */
    } else if (ret == 0 && req->op == QSSH_OP_GROW) {
        s->length = req->offset;
    }
    return ret;
}

static int coroutine_fn qssh_co_run(BlockDriverState *bs, SSHRequest *req)
{
    BDRVSSHState *s = bs->opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qssh_co_run_locked(bs, req);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Data path */

static int coroutine_fn qssh_co_preadv(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags)
{
    SSHRequest req = {
        .op = QSSH_OP_READ,
        .offset = offset,
        .qiov = qiov,
    };

    return qssh_co_run(bs, &req);
}

static int coroutine_fn qssh_co_pwritev(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    SSHRequest req = {
        .op = QSSH_OP_WRITE,
        .offset = offset,
        .qiov = qiov,
    };

    return qssh_co_run(bs, &req);
}

/*
 * fsync@openssh.com where the server has it.  Without it nothing can make
 * the server's writes durable: the flush succeeds, as in QEMU, after a
 * warning that says so once per node.
 */
static int coroutine_fn qssh_co_flush(BlockDriverState *bs)
{
    BDRVSSHState *s = bs->opaque;
    SSHRequest req = { .op = QSSH_OP_FLUSH };

    if (!s->conn.has_fsync) {
        if (!s->warned_fsync) {
            s->warned_fsync = true;
            warn_report("ssh server %s does not support fsync (OpenSSH "
                        ">= 6.3 does): flushes cannot make writes durable",
                        s->opts.host);
        }
        return 0;
    }
    return qssh_co_run(bs, &req);
}

/* ---------------------------------------------------------------------- */
/* Size */

static int64_t qssh_getlength(BlockDriverState *bs)
{
    BDRVSSHState *s = bs->opaque;

    /* invariant 2: never the session, which a worker may hold now */
    return s->length > INT64_MAX ? -EFBIG : (int64_t)s->length;
}

/* SFTP cannot shrink an open file; growing writes a zero at the end. */
static int coroutine_fn qssh_co_truncate(BlockDriverState *bs, int64_t offset,
                                         bool exact, PreallocMode prealloc,
                                         BdrvRequestFlags flags, Error **errp)
{
    BDRVSSHState *s = bs->opaque;
    SSHRequest req = { .op = QSSH_OP_GROW, .offset = offset };
    int ret;

    if (prealloc != PREALLOC_MODE_OFF) {
        error_setg(errp, "Unsupported preallocation mode '%s'",
                   PreallocMode_str[prealloc]);
        return -ENOTSUP;
    }
    qemu_co_mutex_lock(&s->lock);
    if (offset < s->length) {
        error_setg(errp, "ssh driver does not support shrinking files");
        ret = -ENOTSUP;
    } else if (offset == s->length) {
        ret = 0;
    } else {
        ret = qssh_co_run_locked(bs, &req);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to grow file");
        }
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

static int qssh_has_zero_init(BlockDriverState *bs)
{
    BDRVSSHState *s = bs->opaque;

    /* a device on the server keeps what it held */
    return s->conn.regular;
}

/* ---------------------------------------------------------------------- */
/* Open, create and close */

static int qssh_open(BlockDriverState *bs, QDict *options, int flags,
                     Error **errp)
{
    BDRVSSHState *s = bs->opaque;
    int ret;

    if (!qssh_opts_parse(options, &s->opts, errp)) {
        qssh_opts_free(&s->opts);
        return -EINVAL;
    }
    /* before connecting, as QEMU: a typo is said without a server's help */
    if (qdict_first(options)) {
        error_setg(errp, "Parameter '%s' is unexpected",
                   qdict_entry_key(qdict_first(options)));
        qssh_opts_free(&s->opts);
        return -EINVAL;
    }
    ret = qssh_connect(&s->opts, (flags & BDRV_O_RDWR) ? O_RDWR : O_RDONLY,
                       0, &s->conn, errp);
    if (ret < 0) {
        /* the node is freed without bdrv_close after a failed open */
        qssh_opts_free(&s->opts);
        return ret;
    }
    s->length = s->conn.size;
    qemu_co_mutex_init(&s->lock);
    return 0;
}

static void qssh_close(BlockDriverState *bs)
{
    BDRVSSHState *s = bs->opaque;

    /* invariant 1: drained, no worker holds the session */
    qssh_disconnect(&s->conn);
    qssh_opts_free(&s->opts);
}

/*
 * The file was opened read-only or read-write for good: a node opened
 * read-only cannot become writable without a new session.
 */
static int qssh_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    BlockDriverState *bs = state->bs;
    BDRVSSHState *s = bs->opaque;

    if ((state->flags & BDRV_O_RDWR) && !(bs->open_flags & BDRV_O_RDWR)) {
        error_setg(errp, "ssh node for '%s' on %s was opened read-only and "
                   "cannot be reopened read-write", s->opts.path,
                   s->opts.host);
        return -EACCES;
    }
    return 0;
}

/*
 * A new file (an old one is truncated, as QEMU does) of the size @opts ask
 * for, where the node options @options say.
 */
static int qssh_create(QDict *options, QemuOpts *opts, Error **errp)
{
    uint64_t size = qemu_opt_get_size(opts, "size", 0);
    SSHConnectOpts o = {0};
    SSHConn c;
    int ret;

    if (!qssh_opts_parse(options, &o, errp)) {
        qssh_opts_free(&o);
        return -EINVAL;
    }
    ret = qssh_connect(&o, O_RDWR | O_CREAT | O_TRUNC, 0644, &c, errp);
    if (ret == 0) {
        if (size > 0) {
            ret = qssh_grow(&c, size);
            if (ret < 0) {
                qssh_sftp_error(errp, &c, "Failed to grow file");
            }
        }
        qssh_disconnect(&c);
    }
    qssh_opts_free(&o);
    return ret;
}

/* qemu-img create: the file ssh://[USER@]HOST[:PORT]/PATH names. */
static int coroutine_fn qssh_co_create_opts(const BlockDriver *drv,
                                            const char *filename,
                                            QemuOpts *opts, Error **errp)
{
    g_autoptr(QDict) options = qdict_new();
    Error *local_err = NULL;

    qssh_parse_filename(filename, options, &local_err);
    if (local_err) {
        error_propagate(errp, local_err);
        return -EINVAL;
    }
    return qssh_create(options, opts, errp);
}

/* blockdev-create: the file QMP's location (BlockdevOptionsSsh) names. */
static int coroutine_fn qssh_co_create_on_node(const BlockDriver *drv,
                                               const BdrvCreateTarget *tgt,
                                               QemuOpts *opts, Error **errp)
{
    /* the parser takes what it knows out of its copy */
    g_autoptr(QDict) options = qdict_clone(tgt->location);

    return qssh_create(options, opts, errp);
}

/* ---------------------------------------------------------------------- */
/* Names */

/*
 * ssh://USER@HOST:PORT/PATH, as QEMU names the node: the user and port
 * even where they were defaults, and host_key_check when it was given in
 * that spelling.
 */
static void qssh_refresh_filename(BlockDriverState *bs)
{
    BDRVSSHState *s = bs->opaque;
    const SSHConnectOpts *o = &s->opts;
    /* an IPv6 address needs brackets before its port */
    bool v6 = strchr(o->host, ':');
    int n;

    n = snprintf(bs->exact_filename, sizeof(bs->exact_filename),
                 "ssh://%s@%s%s%s:%s%s%s%s", o->user, v6 ? "[" : "",
                 o->host, v6 ? "]" : "", o->port, o->path,
                 o->legacy_key_check ? "?host_key_check=" : "",
                 o->legacy_key_check ?: "");
    if (n >= (int)sizeof(bs->exact_filename)) {
        bs->exact_filename[0] = '\0';           /* a json: name then */
    }
}

/* What names a different file; the host key check only how to trust it. */
static const char *const qssh_strong_runtime_opts[] = {
    "host",
    "port",
    "path",
    "user",
    "host_key_check",
    "server.",
    NULL
};

static const BlockDriver bdrv_ssh = {
    .format_name            = "ssh",
    .protocol_name          = "ssh",
    .instance_size          = sizeof(BDRVSSHState),
    .runtime_opts           = &qapi_opts_ssh_runtime,
    .strong_runtime_opts    = qssh_strong_runtime_opts,
    .bdrv_needs_filename    = false,
    .bdrv_parse_filename    = qssh_parse_filename,
    .bdrv_open              = qssh_open,
    .bdrv_close             = qssh_close,
    .bdrv_reopen_prepare    = qssh_reopen_prepare,
    .bdrv_refresh_filename  = qssh_refresh_filename,
    .bdrv_getlength         = qssh_getlength,
    .bdrv_has_zero_init     = qssh_has_zero_init,
    .bdrv_co_truncate       = qssh_co_truncate,
    .create_opts            = &qapi_opts_ssh_create,
    .bdrv_co_create_opts    = qssh_co_create_opts,
    .bdrv_co_create_on_node = qssh_co_create_on_node,
    .bdrv_co_preadv         = qssh_co_preadv,
    .bdrv_co_pwritev        = qssh_co_pwritev,
    .bdrv_co_flush_to_disk  = qssh_co_flush,
};

block_init(bdrv_register, bdrv_ssh)
