/*
 * The NBD client's listing of a server's exports (include/block/nbd-list.h)
 * on the handshake primitives of nbd-handshake-int.h.
 *
 * Order of options, each answered before the next is sent:
 *   NBD_OPT_STARTTLS           with tls-creds, as for the driver
 *   NBD_OPT_STRUCTURED_REPLY   a server lists meta contexts only then
 *   NBD_OPT_LIST               one NBD_REP_SERVER per export
 *   per export:
 *     NBD_OPT_INFO             size, flags, block sizes
 *     NBD_OPT_LIST_META_CONTEXT  every context (with structured replies)
 *   NBD_OPT_ABORT              not waited for
 */
#include "util/osdep.h"
#include "block/nbd-list.h"
#include "nbd-handshake-int.h"
#include "nbd-client-int.h"
#include "crypto/tls-session.h"

/* Takes in one reply of the type an option's exchange expects. */
typedef int NBDListReplyFunc(const NBDOptionReply *rep,
                             const uint8_t *payload, void *opaque,
                             Error **errp);

/*
 * Sends option @opt with @len bytes of @data and reads its replies up to
 * the final ACK: each reply of type @type goes to @fn; any other ends the
 * exchange with an error, as does an error of @fn.
 */
static int nbd_list_exchange(NBDHs *hs, uint32_t opt, const GByteArray *data,
                             uint32_t type, NBDListReplyFunc *fn,
                             void *opaque, Error **errp)
{
    int ret = nbd_hs_send_option(hs, opt, data ? data->data : NULL,
                                 data ? data->len : 0, errp);

    while (ret == 0) {
        NBDOptionReply rep;
        g_autofree uint8_t *payload = NULL;

        ret = nbd_hs_read_reply(hs, opt, &rep, &payload, errp);
        if (ret < 0 || rep.type == NBD_REP_ACK) {
            break;
        }
        if (rep.type & NBD_REP_FLAG_ERROR) {
            ret = nbd_hs_reply_error(&rep, payload, "", errp);
        } else if (rep.type != type) {
            error_setg(errp, "NBD server sent %s in reply to %s",
                       nbd_rep_name(rep.type), nbd_opt_name(opt));
            ret = -EPROTO;
        } else {
            ret = fn(&rep, payload, opaque, errp);
        }
    }
    return ret;
}

static void nbd_list_free_export(gpointer p)
{
    NBDExportListing *exp = p;

    g_free(exp->name);
    g_free(exp->description);
    g_ptr_array_unref(exp->contexts);
    g_free(exp);
}

/* NBD_REP_SERVER: u32 name length, name, description; one more export. */
static int nbd_list_server_reply(const NBDOptionReply *rep,
                                 const uint8_t *payload, void *opaque,
                                 Error **errp)
{
    GPtrArray *exports = opaque;
    NBDExportListing *exp;
    uint32_t name_len;

    if (rep->length < sizeof(name_len)) {
        error_setg(errp, "NBD server sent an NBD_REP_SERVER of %" PRIu32
                   " bytes (at least 4)", rep->length);
        return -EPROTO;
    }
    memcpy(&name_len, payload, sizeof(name_len));
    name_len = GUINT32_FROM_BE(name_len);
    if (name_len > rep->length - sizeof(name_len)) {
        error_setg(errp, "NBD server sent an NBD_REP_SERVER whose name of %"
                   PRIu32 " bytes is longer than the reply's %" PRIu32,
                   name_len, rep->length);
        return -EPROTO;
    }
    exp = g_new0(NBDExportListing, 1);
    exp->name = g_strndup((const char *)payload + 4, name_len);
    exp->description = g_strndup((const char *)payload + 4 + name_len,
                                 rep->length - 4 - name_len);
    exp->contexts = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(exports, exp);
    return 0;
}

/* NBD_REP_INFO of NBD_OPT_INFO; what @opaque (a listing) learns. */
static int nbd_list_info_reply(const NBDOptionReply *rep,
                               const uint8_t *payload, void *opaque,
                               Error **errp)
{
    NBDExportListing *exp = opaque;
    bool have_export = false;

    return nbd_hs_go_info(payload, rep->length, &exp->info, &have_export,
                          errp);
}

/* NBD_REP_META_CONTEXT: u32 id, then the context's name. */
static int nbd_list_context_reply(const NBDOptionReply *rep,
                                  const uint8_t *payload, void *opaque,
                                  Error **errp)
{
    NBDExportListing *exp = opaque;

    if (rep->length < sizeof(uint32_t)) {
        error_setg(errp, "NBD server sent a meta context reply of %" PRIu32
                   " bytes (at least 4)", rep->length);
        return -EPROTO;
    }
    g_ptr_array_add(exp->contexts,
                    g_strndup((const char *)payload + 4, rep->length - 4));
    return 0;
}

/* NBD_OPT_INFO asks for block sizes; NBD_OPT_LIST_META_CONTEXT for all. */
static int nbd_list_export(NBDHs *hs, NBDExportListing *exp,
                           bool structured, Error **errp)
{
    g_autoptr(GByteArray) info = g_byte_array_new();
    g_autoptr(GByteArray) contexts = g_byte_array_new();
    uint16_t nreq = GUINT16_TO_BE(1), req = GUINT16_TO_BE(NBD_INFO_BLOCK_SIZE);
    uint32_t nqueries = 0;
    int ret;

    nbd_hs_put_name(info, exp->name);
    g_byte_array_append(info, (const uint8_t *)&nreq, sizeof(nreq));
    g_byte_array_append(info, (const uint8_t *)&req, sizeof(req));
    ret = nbd_list_exchange(hs, NBD_OPT_INFO, info, NBD_REP_INFO,
                            nbd_list_info_reply, exp, errp);
    if (ret < 0 || !structured) {
        return ret;
    }
    nbd_hs_put_name(contexts, exp->name);
    g_byte_array_append(contexts, (const uint8_t *)&nqueries,
                        sizeof(nqueries));
    return nbd_list_exchange(hs, NBD_OPT_LIST_META_CONTEXT, contexts,
                             NBD_REP_META_CONTEXT, nbd_list_context_reply,
                             exp, errp);
}

static int nbd_list_negotiate(NBDHs *hs, const NBDClientTLS *tls,
                              GPtrArray *exports, Error **errp)
{
    NBDExportInfo server = { 0 };
    uint16_t hs_flags;
    int ret;

    ret = nbd_hs_greeting(hs, &hs_flags, errp);
    if (ret == 1 || (ret == 0 && !(hs_flags & NBD_FLAG_FIXED_NEWSTYLE))) {
        error_setg(errp, "NBD server is not fixed newstyle, which listing "
                   "exports needs");
        return -ENOTSUP;
    }
    if (ret == 0 && tls->creds) {
        ret = nbd_hs_starttls(hs, tls, errp);
    }
    if (ret == 0) {
        ret = nbd_hs_structured_reply(hs, &server, errp);
    }
    if (ret == 0) {
        ret = nbd_list_exchange(hs, NBD_OPT_LIST, NULL, NBD_REP_SERVER,
                                nbd_list_server_reply, exports, errp);
    }
    for (guint i = 0; ret == 0 && i < exports->len; i++) {
        ret = nbd_list_export(hs, exports->pdata[i], server.structured_reply,
                              errp);
    }
    return ret;
}

GPtrArray *nbd_client_list(int fd, const NBDClientTLS *tls, Error **errp)
{
    GPtrArray *exports = g_ptr_array_new_with_free_func(nbd_list_free_export);
    /* the driver's bound: a silent server must not hold --list for ever */
    NBDHs hs = {
        .fd = fd,
        .deadline = g_get_monotonic_time() +
                    NBD_CLIENT_HANDSHAKE_TIMEOUT_S * G_USEC_PER_SEC,
    };
    int ret = nbd_list_negotiate(&hs, tls, exports, errp);

    if (ret == 0) {
        /* leave politely; the server's ACK is not worth waiting for */
        nbd_hs_send_option(&hs, NBD_OPT_ABORT, NULL, 0, NULL);
    }
    qcrypto_tls_session_free(hs.tls);
    if (ret < 0) {
        g_ptr_array_unref(exports);
        return NULL;
    }
    return exports;
}
