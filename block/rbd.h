/*
 * rbd: what the rbd driver's files share.
 *
 *   rbd.c           open, close, the data path, resize, info, the table
 *   rbd-create.c    image creation (qemu-img create, convert -O raw)
 *   rbd-snapshot.c  the image's snapshots (qemu-img snapshot, info)
 *   rbd-encrypt.c   librbd's LUKS: formatting and loading the key
 *   rbd-connect.c   the options that say where the cluster is and who we
 *                   are, and connecting to it (librados) and to a pool
 *   rbd-filename.c  QEMU's legacy file name rbd:pool/image@snap:key=value
 *   rbd-lib.c       loading librados and librbd when first needed
 *   rbd-alloc-cache.c  the objects block status found allocated
 *
 * Functions are prefixed qrbd_: librbd owns rbd_ (rbd_open, rbd_close).
 *
 * Built only when the headers of librbd and librados are found
 * (block/meson.build); without them block/rbd-missing.c registers a
 * driver that says so.  The libraries themselves are loaded at run time.
 */
#ifndef QBLOCK_BLOCK_RBD_H
#define QBLOCK_BLOCK_RBD_H

#include "block/block_int.h"
#include <rados/librados.h>
#include <rbd/librbd.h>

/*
 * The option that carries the key=value pairs of a legacy file name that
 * are passed to librados as they are (rados_conf_set): a JSON array of
 * strings, key then value.  QEMU names it so, with the '=' that keeps it
 * out of every user's way; json: file names that QEMU wrote carry it.
 */
#define RBD_OPT_KEYVALUE_PAIRS "=keyvalue-pairs"

/*
 * QEMU's deprecated name of key-secret: a creation option, and an open
 * option outside the QAPI schema (the legacy -drive and --image-opts of
 * the tools take it; blockdev-add does not).  Either way it is the id of
 * the secret that holds the user's cephx key.
 */
#define RBD_OPT_PASSWORD_SECRET "password-secret"

/*
 * librados and librbd are loaded at the first open or create of an rbd
 * image, not linked (rbd-lib.c): every function of theirs that the
 * driver calls is listed here and called through qrbd_lib, e.g.
 * qrbd_lib.rbd_open(...).  A function missing from these lists fails to
 * link, since the programs do not link the libraries.
 */
#define QRBD_LIB_RADOS_FUNCS(F) \
    F(rados_conf_read_file) F(rados_conf_set) F(rados_connect) \
    F(rados_create) F(rados_ioctx_create) F(rados_ioctx_destroy) \
    F(rados_ioctx_set_namespace) F(rados_shutdown)
#define QRBD_LIB_RBD_FUNCS(F) \
    F(rbd_aio_create_completion) F(rbd_aio_discard) F(rbd_aio_flush) \
    F(rbd_aio_get_return_value) F(rbd_aio_readv) F(rbd_aio_release) \
    F(rbd_aio_write_zeroes) F(rbd_aio_writev) F(rbd_close) F(rbd_create4) \
    F(rbd_diff_iterate2) F(rbd_encryption_format) F(rbd_encryption_load) \
    F(rbd_get_features) F(rbd_get_flags) F(rbd_get_size) \
    F(rbd_image_options_create) F(rbd_image_options_destroy) \
    F(rbd_image_options_set_uint64) F(rbd_namespace_exists) F(rbd_open) \
    F(rbd_open_read_only) F(rbd_remove) F(rbd_resize) F(rbd_snap_create) \
    F(rbd_snap_list) F(rbd_snap_list_end) F(rbd_snap_remove) \
    F(rbd_snap_rollback) F(rbd_stat)

typedef struct QRBDLib {
#define QRBD_LIB_POINTER(fn) __typeof__(fn) *fn;
    QRBD_LIB_RADOS_FUNCS(QRBD_LIB_POINTER)
    QRBD_LIB_RBD_FUNCS(QRBD_LIB_POINTER)
#undef QRBD_LIB_POINTER
} QRBDLib;

/* Valid once qrbd_lib_load() has succeeded (in qrbd_connect()). */
extern QRBDLib qrbd_lib;

/*
 * Loads the libraries and resolves qrbd_lib, the first time; true once
 * that has succeeded, else false with @errp saying what is missing.
 */
bool qrbd_lib_load(Error **errp);

/* Where the cluster is and how to log in (rbd-connect.c). */
typedef struct RBDConnectOpts {
    char *pool;
    char *namespace;            /* "" for the pool's default namespace */
    char *image;
    char *snapshot;             /* NULL: the image's head */
    char *conf;                 /* NULL: librados's default search */
    char *user;                 /* NULL: librados's default, "admin" */
    char *key;                  /* the cephx key itself, or NULL */
    char *mon_host;             /* from server.N.host/port, or NULL */
    char *auth_client_required; /* "cephx;none", or NULL */
    char **keyvalue;            /* key, value, ...; NULL-terminated */
    char *encrypt_format;       /* librbd LUKS to load at open, or NULL */
    char *encrypt_key_secret;   /* the secret holding its passphrase */
} RBDConnectOpts;

/*
 * The objects known to be allocated (rbd-alloc-cache.c, whose header has
 * the invariants): the node's offsets in chunks of the object size.
 */
typedef struct RBDAllocCache {
    uint64_t chunk;             /* the object size */
    uint64_t mask;              /* slots - 1; slots is a power of two */
    uint64_t *slots;            /* an object's index + 1, or 0 */
    uint64_t generation;        /* moved on by every forget */
} RBDAllocCache;

/* A table for an image of @size bytes in objects of @chunk bytes. */
void qrbd_alloc_cache_init(RBDAllocCache *c, uint64_t chunk, uint64_t size);
void qrbd_alloc_cache_destroy(RBDAllocCache *c);
/*
 * How many bytes from @offset (at most @bytes) lie in objects known to be
 * allocated: 0 when the object at @offset is not known.
 */
uint64_t qrbd_alloc_cache_lookup(const RBDAllocCache *c, uint64_t offset,
                                 uint64_t bytes);
/* Read before a walk of the object map; given back to the fill. */
uint64_t qrbd_alloc_cache_generation(const RBDAllocCache *c);
/*
 * librbd reported [@offset, +@bytes) as existing, in a walk that began at
 * @generation: remembers the objects it covers whole, unless a forget
 * came meanwhile.
 */
void qrbd_alloc_cache_fill(RBDAllocCache *c, uint64_t generation,
                           uint64_t offset, uint64_t bytes);
/* [@offset, +@bytes) may hold holes now (a discard, a zeroing). */
void qrbd_alloc_cache_forget(RBDAllocCache *c, uint64_t offset,
                             uint64_t bytes);
/* Anything may be a hole now (a resize, a snapshot rollback). */
void qrbd_alloc_cache_forget_all(RBDAllocCache *c);

typedef struct BDRVRBDState BDRVRBDState;
typedef struct RBDAioRequest RBDAioRequest;

struct RBDAioRequest {
    BDRVRBDState *s;
    Coroutine *co;
    rbd_completion_t c;
    int64_t ret;                /* librbd's return value, once done */
    bool done;
    RBDAioRequest *next;        /* on s->done */
};

/* The node's state; the invariants are in rbd.c's header. */
struct BDRVRBDState {
    /* --- set at open, immutable until close --- */
    rados_t cluster;
    rados_ioctx_t io_ctx;
    rbd_image_t image;
    RBDConnectOpts opts;
    uint64_t object_size;
    AioContext *ctx;
    EventNotifier notifier;

    /* --- under done_lock: librbd's threads and the reaper (inv. 2) --- */
    GMutex done_lock;
    RBDAioRequest *done;

    /* --- atomic: librbd's callbacks between queueing and leaving (inv. 2) --- */
    gint callbacks_running;

    /* --- event-loop thread only --- */
    unsigned in_flight;         /* invariant 3 */
    RBDAllocCache alloc;        /* allocated objects, from block status */
};

/*
 * Fills @o from the node's options, removing what it takes from @options
 * (the rbd-runtime group, server.N.*, auth-client-required.N and the
 * legacy key=value pairs).  @for_create: the image need not exist yet and
 * a snapshot is refused.  false with @errp set on a bad option.
 */
bool qrbd_connect_opts_parse(QDict *options, RBDConnectOpts *o,
                             bool for_create, Error **errp);
void qrbd_connect_opts_free(RBDConnectOpts *o);

/*
 * Connects to the cluster and opens @o's pool and namespace.  The rados
 * calls block (up to librados's timeouts); callers are open and create,
 * which the tools and the monitor run outside the data path.  0 or -errno
 * with @errp set in QEMU's words ("error connecting: ...").
 */
int qrbd_connect(const RBDConnectOpts *o, bool cache, rados_t *cluster,
                 rados_ioctx_t *io_ctx, Error **errp);
void qrbd_disconnect(rados_t cluster, rados_ioctx_t io_ctx);

/* bdrv_parse_filename: the legacy rbd: syntax into options (rbd-filename.c) */
void qrbd_parse_filename(const char *filename, QDict *options, Error **errp);

/* bdrv_co_create_opts, bdrv_co_create_on_node (rbd-create.c) */
int coroutine_fn qrbd_co_create_opts(const BlockDriver *drv,
                                     const char *filename, QemuOpts *opts,
                                     Error **errp);
int coroutine_fn qrbd_co_create_on_node(const BlockDriver *drv,
                                        const BdrvCreateTarget *tgt,
                                        QemuOpts *opts, Error **errp);

/*
 * librbd's LUKS (rbd-encrypt.c).  load: at open, @format "luks" or
 * "luks2", the passphrase in secret @secret_id.  create: formats the new
 * image @name as the creation options encrypt.* say and grows it so that
 * the decrypted view holds @size bytes.  0 or -errno with @errp set.
 */
int qrbd_encryption_load(rbd_image_t image, const char *format,
                         const char *secret_id, Error **errp);
int qrbd_encryption_create(rados_ioctx_t io_ctx, const char *name,
                           QemuOpts *opts, uint64_t size, Error **errp);

/* Internal snapshots: RBD's own, by name (rbd-snapshot.c) */
int qrbd_snapshot_create(BlockDriverState *bs, QEMUSnapshotInfo *sn_info);
int qrbd_snapshot_goto(BlockDriverState *bs, const char *snapshot_id);
int qrbd_snapshot_delete(BlockDriverState *bs, const char *snapshot_id,
                         const char *name, Error **errp);
int qrbd_snapshot_list(BlockDriverState *bs, QEMUSnapshotInfo **psn_info);

#endif
