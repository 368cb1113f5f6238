/*
 * The "nbd" export type and the storage daemon's NBD server (see
 * include/block/nbd-export.h).
 *
 * An NBD export of the export layer wraps an NBDExport of the one server.
 * The BlockBackend is the export layer's, so the write cache and the I/O
 * statistics are the export's; the NBD server serves clients from it.
 * With a list of iothreads, connection k runs in the k-th (mod their
 * number), the node in the first (invariant 10 of nbd-server.c).
 */
#include "block/nbd-export.h"

#include "block/export.h"
#include "block/nbd.h"
#include "crypto/tls-creds.h"

/* how long a client may take over its handshake, as QEMU's daemon */
#define NBD_EXPORT_HANDSHAKE_NS \
    (NBD_DEFAULT_HANDSHAKE_MAX_SECS * 1000 * (int64_t)SCALE_MS)

static NBDServer *nbd_export_server;
/* the server's TLS credentials, a reference held while it runs */
static QCryptoTLSCreds *nbd_export_tls_creds;
/* the id of its authorization object, or NULL (the server keeps a pointer) */
static char *nbd_export_tls_authz;

typedef struct NBDBlockExport {
    NBDExport *nbd;
} NBDBlockExport;

int nbd_export_server_start(const SocketAddress *addr,
                            unsigned int max_connections,
                            const char *tls_creds, const char *tls_authz,
                            Error **errp)
{
    NBDServerConfig cfg = {
        .max_connections = max_connections,
        .handshake_max_ns = NBD_EXPORT_HANDSHAKE_NS,
    };
    NBDServer *server;
    int ret;

    if (tls_authz && !tls_creds) {
        error_setg(errp, "tls-authz is not permitted without tls-creds");
        return -EINVAL;
    }
    if (nbd_export_server) {
        error_setg(errp, "NBD server already running");
        return -EBUSY;
    }
    if (tls_creds) {
        cfg.tls_creds = qcrypto_tls_creds_get(
            tls_creds, QCRYPTO_TLS_CREDS_ENDPOINT_SERVER, errp);
        if (!cfg.tls_creds) {
            return -EINVAL;
        }
    }
    g_free(nbd_export_tls_authz);
    nbd_export_tls_authz = g_strdup(tls_authz);
    cfg.tls_authz = nbd_export_tls_authz;
    server = nbd_server_new(qemu_get_aio_context(), &cfg);
    ret = nbd_server_listen(server, addr, errp);
    if (ret < 0) {
        nbd_server_free(server);
        qcrypto_tls_creds_put(cfg.tls_creds);
        return ret;
    }
    nbd_export_server = server;
    nbd_export_tls_creds = cfg.tls_creds;
    return 0;
}

bool nbd_export_server_running(void)
{
    return nbd_export_server != NULL;
}

int nbd_export_server_stop(Error **errp)
{
    if (!nbd_export_server) {
        error_setg(errp, "NBD server not running");
        return -ENOENT;
    }
    blk_exp_close_all_type("nbd");
    nbd_server_free(nbd_export_server);
    nbd_export_server = NULL;
    g_clear_pointer(&nbd_export_tls_creds, qcrypto_tls_creds_put);
    return 0;
}

/*
 * Entry @i of "bitmaps", a BlockDirtyBitmapOrStr: a bitmap name (*@node
 * NULL) or {"node", "name"}.  The schema lets anything through ("any"):
 * checked here, in QEMU's words but for the entry it names ("null").
 */
static bool nbd_block_export_bitmap(JsonNode *entry, int i,
                                    const char **node, const char **name,
                                    Error **errp)
{
    JsonObject *o;
    GList *members;
    const char *missing = NULL;
    bool bad = false;

    if (JSON_NODE_HOLDS_VALUE(entry) &&
        json_node_get_value_type(entry) == G_TYPE_STRING) {
        *name = json_node_get_string(entry);
        return true;
    }
    if (!JSON_NODE_HOLDS_OBJECT(entry)) {
        error_setg(errp, "Invalid parameter type for 'bitmaps[%d]', "
                   "expected: BlockDirtyBitmapOrStr", i);
        return false;
    }
    o = json_node_get_object(entry);
    members = json_object_get_members(o);
    for (GList *m = members; m && !bad; m = m->next) {
        const char *key = m->data;
        JsonNode *v = json_object_get_member(o, key);

        if (strcmp(key, "node") && strcmp(key, "name")) {
            error_setg(errp, "Parameter 'bitmaps[%d].%s' is unexpected", i,
                       key);
            bad = true;
        } else if (!JSON_NODE_HOLDS_VALUE(v) ||
                   json_node_get_value_type(v) != G_TYPE_STRING) {
            error_setg(errp, "Invalid parameter type for 'bitmaps[%d].%s', "
                       "expected: string", i, key);
            bad = true;
        }
    }
    g_list_free(members);
    if (bad) {
        return false;
    }
    if (!json_object_has_member(o, "node")) {
        missing = "node";
    } else if (!json_object_has_member(o, "name")) {
        missing = "name";
    }
    if (missing) {
        error_setg(errp, "Parameter 'bitmaps[%d].%s' is missing", i, missing);
        return false;
    }
    *node = json_object_get_string_member(o, "node");
    *name = json_object_get_string_member(o, "name");
    return true;
}

static int nbd_block_export_create(BlockExport *exp, JsonObject *opts,
                                   Error **errp)
{
    NBDBlockExport *e = exp->opaque;
    JsonArray *bitmaps = json_object_has_member(opts, "bitmaps") ?
                         json_object_get_array_member(opts, "bitmaps") :
                         NULL;
    NBDExportConfig cfg = {
        .name = json_object_get_string_member_with_default(
                    opts, "name",
                    json_object_get_string_member(opts, "node-name")),
        .description = json_object_get_string_member_with_default(
                           opts, "description", NULL),
        .writable = exp->writable,
        .allocation_depth = json_object_get_boolean_member_with_default(
                                opts, "allocation-depth", false),
        /*
         * Every connection to an export uses the one BlockBackend, so a
         * flush on any of them covers the writes of all (see
         * NBDExportConfig): safe to announce, as for qblock-nbd -e N,
         * unless the user says not to.
         */
        .multi_conn = g_strcmp0(json_object_get_string_member_with_default(
                                    opts, "multi-conn", "auto"), "off") != 0,
    };

    g_autofree const char **names = NULL;
    g_autofree const char **nodes = NULL;
    g_autofree AioContext **conn_ctxs = NULL;

    if (!nbd_export_server) {
        error_setg(errp, "NBD server not running");
        return -EINVAL;
    }
    if (bitmaps) {
        cfg.nr_bitmaps = json_array_get_length(bitmaps);
        names = g_new0(const char *, cfg.nr_bitmaps + 1);
        nodes = g_new0(const char *, cfg.nr_bitmaps + 1);
        for (int i = 0; i < cfg.nr_bitmaps; i++) {
            if (!nbd_block_export_bitmap(json_array_get_element(bitmaps, i),
                                         i, &nodes[i], &names[i], errp)) {
                return -EINVAL;
            }
        }
        cfg.bitmaps = names;
        cfg.bitmap_nodes = nodes;
    }
    if (exp->nr_iothreads > 1) {
        /* invariant 10 of nbd-server.c: connection k in iothread k mod n */
        conn_ctxs = blk_exp_spread_contexts(exp, exp->nr_iothreads);
        cfg.conn_ctxs = conn_ctxs;
        cfg.nr_conn_ctxs = exp->nr_iothreads;
    }
    e->nbd = nbd_export_new(nbd_export_server, exp->blk, &cfg, errp);
    return e->nbd ? 0 : -EINVAL;
}

static void nbd_block_export_request_shutdown(BlockExport *exp)
{
    NBDBlockExport *e = exp->opaque;

    /* held until the NBD export's last client is gone (invariant 1) */
    blk_exp_ref(exp);
    nbd_export_remove(e->nbd, blk_exp_unref_cb, exp);
}

static unsigned int nbd_block_export_client_count(BlockExport *exp)
{
    NBDBlockExport *e = exp->opaque;

    return nbd_export_client_count(e->nbd);
}

static const BlockExportDriver nbd_block_export_driver = {
    .type               = "nbd",
    .instance_size      = sizeof(NBDBlockExport),
    .create             = nbd_block_export_create,
    .request_shutdown   = nbd_block_export_request_shutdown,
    .client_count       = nbd_block_export_client_count,
};

block_export_init(nbd_block_export_driver)
