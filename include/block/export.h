/*
 * Block exports: a node served to clients outside the process (NBD,
 * vhost-user-blk) under a unique id, through a BlockBackend of its own.
 *
 * The generic part (block/export/export.c) parses the options every export
 * takes, opens the BlockBackend (its write cache is the export's, and so
 * are its I/O statistics), keeps the list of exports and runs their life
 * cycle; an export type (a BlockExportDriver) serves the clients.
 *
 * Life cycle:
 *
 *     blk_exp_add() --> active --blk_exp_request_shutdown()--> shutting
 *                                                               down
 *                                  last reference dropped  -->  deleted
 *
 *  1. An active export holds one reference of its own (user_owned).  A
 *     driver holds more for as long as it needs the export: one per
 *     client, or one from request_shutdown until its clients are gone.
 *  2. Removal (block-export-del, the end of the NBD server, shutdown)
 *     calls request_shutdown once and drops the export's own reference;
 *     the export stays listed, shutting-down, until the driver drops its
 *     last one.
 *  3. When the last reference goes, the driver's delete runs, the export
 *     leaves the list, BLOCK_EXPORT_DELETED {"id"} is sent and the
 *     BlockBackend is released.
 *
 * Everything here runs in the main loop thread; an export's clients run
 * in its BlockBackend's context (BlockExport.ctx), or spread over the
 * contexts of blk_exp_spread_contexts().
 */
#ifndef QBLOCK_EXPORT_H
#define QBLOCK_EXPORT_H

#include "qblock/block-backend.h"
#include "util/json.h"

typedef struct BlockExport BlockExport;

typedef struct BlockExportDriver {
    /* the export type, a value of the schema's BlockExportType ("nbd") */
    const char *type;
    /* bytes of driver state that exp->opaque points to (may be 0) */
    size_t instance_size;
    /*
     * Required.  Starts serving exp->blk.  @opts is the whole
     * BlockExportOptions object, checked against the schema: the members
     * of this type's variant have their declared JSON types, optional
     * ones may be absent.  exp->id, exp->blk (with the permissions that
     * "writable" asks) and exp->writable are set.  Returns 0, or -errno
     * with @errp set; after a failure the export is freed without a call
     * to delete, so create cleans up after itself.
     */
    int (*create)(BlockExport *exp, JsonObject *opts, Error **errp);
    /*
     * Required.  Stops accepting clients and disconnects the ones
     * connected; the references the driver holds for them (invariant 1)
     * go once they are gone, from the event loop, maybe later.  Called
     * exactly once.
     */
    void (*request_shutdown)(BlockExport *exp);
    /*
     * Optional.  The number of clients connected now, which a safe
     * block-export-del refuses to disconnect.  NULL: every reference
     * beyond the export's own is a client.
     */
    unsigned int (*client_count)(BlockExport *exp);
    /*
     * Optional.  The length of exp->blk changed (block_resize): tell the
     * clients what their protocol lets them learn.  Called from the
     * coroutine of the truncate; it must not wait.
     */
    void (*resize)(BlockExport *exp);
    /*
     * Optional.  The operator sets the write cache of exp->blk
     * (x-blockdev-set-write-cache): apply @writeback as the driver's
     * own rules allow and tell the clients what their protocol lets them
     * learn.  NULL: blk_set_enable_write_cache() alone.
     */
    void (*set_write_cache)(BlockExport *exp, bool writeback);
    /* Optional.  Frees the driver state; no reference is left. */
    void (*delete)(BlockExport *exp);
} BlockExportDriver;

struct BlockExport {
    const BlockExportDriver *drv;
    char *id;
    BlockBackend *blk;
    bool writable;
    /* see the invariants above */
    int refcount;
    bool user_owned;
    void *opaque;               /* driver state, drv->instance_size bytes */
    GList link;                 /* entry of the export list */
    /*
     * The iothreads of the "iothread" option (a reference held on each),
     * in order; the export's nodes moved to the first one's context.
     * None (NULL, 0): they are in the main loop's context, or stayed
     * where another user keeps them.  ctx is where the export's driver
     * runs its sockets and requests: the nodes' context.
     */
    struct IOThread **iothreads;
    unsigned int nr_iothreads;
    AioContext *ctx;
};

/* Makes an export type available to blk_exp_add(); once per type. */
void blk_exp_register(const BlockExportDriver *drv);
#define block_export_init(drv)                                          \
    static void __attribute__((constructor)) block_export_init_##drv(void) \
    {                                                                   \
        blk_exp_register(&drv);                                         \
    }
/* True if an export type of that name is registered. */
bool blk_exp_type_available(const char *type);

/*
 * Creates an export from @opts, a BlockExportOptions object checked
 * against the schema (qapi_check_input).  Errors in QEMU's words: "Block
 * export id 'x' is already in use", "Cannot find device='' nor
 * node-name='x'", "Cannot export read-only node as writable", a
 * permission conflict, or the type's own.
 */
BlockExport *blk_exp_add(JsonObject *opts, Error **errp);
BlockExport *blk_exp_find(const char *id);
/* The exports in creation order: NULL starts, NULL ends. */
BlockExport *blk_exp_next(BlockExport *exp);

/*
 * The contexts that the @n queues or connections of @exp run in, a new
 * array (the caller frees it): the k-th is the k-th (mod their number)
 * iothread of its "iothread" list, the first being ctx, the nodes' own;
 * ctx when the export has no iothread.  Code running there that is not
 * ctx hands requests to ctx (threading rule 13 of docs/architecture.md).
 */
AioContext **blk_exp_spread_contexts(BlockExport *exp, unsigned int n);

void blk_exp_ref(BlockExport *exp);
void blk_exp_unref(BlockExport *exp);
/* blk_exp_unref() as a callback: the end of a driver's shutdown. */
void blk_exp_unref_cb(void *exp);
/* Begins removal (invariant 2); does nothing if it has begun already. */
void blk_exp_request_shutdown(BlockExport *exp);

/*
 * block-export-del: removes the export @id.  Unless @hard, refused while
 * clients are connected ("export 'x' still in use").
 */
int blk_exp_del(const char *id, bool hard, Error **errp);

/*
 * Removes every export (of @type, or all if NULL) and polls the event
 * loop until they are all deleted.
 */
void blk_exp_close_all_type(const char *type);
void blk_exp_close_all(void);

#endif
