/*
 * The NBD handshake, server side: the fixed newstyle greeting, then
 * options until the client picks an export (NBD_OPT_GO or
 * NBD_OPT_EXPORT_NAME) or leaves.
 *
 * Each option's payload is read whole into a buffer (at most
 * NBD_MAX_OPTION_SIZE bytes) before it is parsed, so a malformed option
 * costs a reply, never a read past its end or a lost position in the
 * stream.  A client that cannot be answered (bad magic, unknown client
 * flags, an option too long to buffer, an unknown NBD_OPT_EXPORT_NAME,
 * which has no error reply) is disconnected.  The handshake timer of
 * nbd-server.c bounds how long all of this may take.
 *
 * A server with TLS credentials answers every option but
 * NBD_OPT_STARTTLS and NBD_OPT_ABORT with NBD_REP_ERR_TLS_REQD until the
 * client has started TLS (NBD_OPT_EXPORT_NAME, which has no error reply,
 * disconnects), as the protocol's TLS section and QEMU have it; after
 * STARTTLS the socket's reads and writes are TLS records
 * (util/co-socket-tls.c).
 */
#include "util/osdep.h"
#include "block/block_int.h"
#include "util/co-socket-tls.h"
#include "nbd-int.h"

/* The option being answered and its payload. */
typedef struct NBDNegotiation {
    NBDClient *client;
    bool no_zeroes;             /* NBD_FLAG_C_NO_ZEROES */
    uint32_t opt;
    uint8_t *data;
    uint32_t len;
    uint32_t pos;               /* parse position in data */
} NBDNegotiation;

/* What an option handler asks for next. */
enum {
    NBD_NEG_CONTINUE = 0,       /* read the next option */
    NBD_NEG_TRANSMIT = 1,       /* an export was chosen */
};

/* ---- parsing the option payload ---- */

static bool nbd_neg_get(NBDNegotiation *n, void *out, uint32_t size)
{
    if (n->len - n->pos < size) {
        return false;
    }
    memcpy(out, n->data + n->pos, size);
    n->pos += size;
    return true;
}

static bool nbd_neg_get_u16(NBDNegotiation *n, uint16_t *v)
{
    if (!nbd_neg_get(n, v, sizeof(*v))) {
        return false;
    }
    *v = GUINT16_FROM_BE(*v);
    return true;
}

static bool nbd_neg_get_u32(NBDNegotiation *n, uint32_t *v)
{
    if (!nbd_neg_get(n, v, sizeof(*v))) {
        return false;
    }
    *v = GUINT32_FROM_BE(*v);
    return true;
}

/*
 * A string of @size bytes as a NUL-terminated copy (caller frees), or
 * NULL if the payload is shorter or the string holds a NUL byte.
 */
static char *nbd_neg_get_string(NBDNegotiation *n, uint32_t size)
{
    char *s;

    if (n->len - n->pos < size || memchr(n->data + n->pos, 0, size)) {
        return NULL;
    }
    s = g_strndup((const char *)n->data + n->pos, size);
    n->pos += size;
    return s;
}

/* A u32 length then that many bytes, bounded by NBD_MAX_STRING_SIZE. */
static char *nbd_neg_get_lstring(NBDNegotiation *n)
{
    uint32_t size;

    if (!nbd_neg_get_u32(n, &size) || size > NBD_MAX_STRING_SIZE) {
        return NULL;
    }
    return nbd_neg_get_string(n, size);
}

/* ---- replies ---- */

static int coroutine_fn nbd_neg_send_rep(NBDNegotiation *n, uint32_t type,
                                         const void *data, uint32_t len)
{
    NBDOptionReply rep = {
        .magic = GUINT64_TO_BE(NBD_REP_MAGIC),
        .option = GUINT32_TO_BE(n->opt),
        .type = GUINT32_TO_BE(type),
        .length = GUINT32_TO_BE(len),
    };
    struct iovec iov[2] = {
        { .iov_base = &rep, .iov_len = sizeof(rep) },
        { .iov_base = (void *)data, .iov_len = len },
    };

    return co_socket_writev_all(&n->client->sock, iov, 2);
}

static int coroutine_fn nbd_neg_send_ack(NBDNegotiation *n)
{
    return nbd_neg_send_rep(n, NBD_REP_ACK, NULL, 0);
}

/* An error reply whose data is the message, for the client to show. */
static int coroutine_fn QEMU_PRINTF(3, 4)
nbd_neg_send_err(NBDNegotiation *n, uint32_t type, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    assert(type & NBD_REP_FLAG_ERROR);
    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return nbd_neg_send_rep(n, type, msg, strlen(msg));
}

/* Sends a reply whose data is a u16 info type then @len bytes. */
static int coroutine_fn nbd_neg_send_info(NBDNegotiation *n, uint16_t info,
                                          const void *data, uint32_t len)
{
    g_autofree uint8_t *buf = g_malloc(sizeof(info) + len);
    uint16_t be_info = GUINT16_TO_BE(info);

    memcpy(buf, &be_info, sizeof(be_info));
    memcpy(buf + sizeof(be_info), data, len);
    return nbd_neg_send_rep(n, NBD_REP_INFO, buf, sizeof(info) + len);
}

/* ---- exports ---- */

uint16_t nbd_client_export_flags(NBDClient *client, NBDExport *exp)
{
    uint16_t flags = exp->flags;

    /* DF only means something to a client that gets structured reads */
    if (client->structured_reply) {
        flags |= NBD_FLAG_SEND_DF;
    }
    return flags;
}

/*
 * The export named @name, which the client holds a reference to until
 * the option is answered (invariant 6 of nbd-server.c), or NULL.
 */
static NBDExport *nbd_neg_find_export(NBDNegotiation *n, const char *name)
{
    NBDExport *exp = nbd_export_find(n->client->server, name);

    assert(!n->client->opt_exp);
    if (exp) {
        nbd_export_ref(exp);
        n->client->opt_exp = exp;
    }
    return exp;
}

/* Drops the reference nbd_neg_find_export() took, if it took one. */
static void nbd_neg_release_export(NBDNegotiation *n)
{
    NBDExport *exp = n->client->opt_exp;

    if (exp) {
        n->client->opt_exp = NULL;
        nbd_export_unref(exp);
    }
}

/*
 * Transmission begins on @exp (invariant 3 of nbd-server.c: a ref), found
 * by nbd_neg_find_export() and maybe removed while the replies waited on
 * the socket (invariant 6): then the client is closed already.
 */
static int nbd_neg_choose_export(NBDNegotiation *n, NBDExport *exp,
                                 Error **errp)
{
    NBDClient *client = n->client;

    assert(client->opt_exp == exp);
    if (exp->removed) {
        error_setg(errp, "export '%s' was removed during the handshake",
                   exp->name);
        return -ESHUTDOWN;
    }
    nbd_export_ref(exp);
    client->exp = exp;
    /* contexts selected for another export do not carry over */
    if (client->contexts.exp != exp) {
        client->contexts = (NBDMetaContexts) { 0 };
    }
    return NBD_NEG_TRANSMIT;
}

/* ---- options ---- */

/*
 * NBD_OPT_EXPORT_NAME: the old way in.  It has no error reply, so an
 * unknown export ends the connection.
 */
static int coroutine_fn nbd_neg_export_name(NBDNegotiation *n, Error **errp)
{
    g_autofree char *name = NULL;
    NBDExport *exp;
    struct QEMU_PACKED {
        uint64_t size;
        uint16_t flags;
        uint8_t zeroes[NBD_EXPORT_NAME_PADDING];
    } reply = { 0 };
    int ret;

    if (n->len > NBD_MAX_STRING_SIZE) {
        error_setg(errp, "export name of %" PRIu32 " bytes is too long",
                   n->len);
        return -EINVAL;
    }
    name = nbd_neg_get_string(n, n->len);
    exp = name ? nbd_neg_find_export(n, name) : NULL;
    if (!exp) {
        error_setg(errp, "export '%s' not present", name ? name : "");
        return -EINVAL;
    }
    n->client->size = nbd_export_size(exp);
    reply.size = GUINT64_TO_BE(n->client->size);
    reply.flags = GUINT16_TO_BE(nbd_client_export_flags(n->client, exp));
    ret = co_socket_write_all(&n->client->sock, &reply,
                              n->no_zeroes ? 10 : sizeof(reply));
    if (ret < 0) {
        return ret;
    }
    return nbd_neg_choose_export(n, exp, errp);
}

static int coroutine_fn nbd_neg_send_block_size(NBDNegotiation *n,
                                                NBDExport *exp,
                                                bool requested)
{
    BlockDriverState *bs = blk_bs(exp->blk);
    uint32_t align = MAX(bs->bl.request_alignment, 1);
    uint32_t sizes[3];

    /*
     * The real minimum only where the client will obey it: it asked, or
     * it merely looks (INFO).  A client that ignores block sizes may send
     * any alignment, which the block layer handles (read-modify-write).
     */
    sizes[0] = GUINT32_TO_BE(requested || n->opt == NBD_OPT_INFO ? align
                                                                 : 1);
    sizes[1] = GUINT32_TO_BE(MAX(align, 4096));
    sizes[2] = GUINT32_TO_BE(NBD_MAX_PAYLOAD_SIZE);
    return nbd_neg_send_info(n, NBD_INFO_BLOCK_SIZE, sizes, sizeof(sizes));
}

/* NBD_OPT_INFO and NBD_OPT_GO. */
static int coroutine_fn nbd_neg_info(NBDNegotiation *n, Error **errp)
{
    g_autofree char *name = NULL;
    bool want_name = false, want_desc = false, want_block_size = false;
    struct QEMU_PACKED {
        uint64_t size;
        uint16_t flags;
    } export_info;
    uint16_t nreq;
    NBDExport *exp;
    int ret;

    name = nbd_neg_get_lstring(n);
    if (!name || !nbd_neg_get_u16(n, &nreq) ||
        n->len - n->pos != nreq * sizeof(uint16_t)) {
        return nbd_neg_send_err(n, NBD_REP_ERR_INVALID,
                                "malformed %s request", nbd_opt_name(n->opt));
    }
    for (unsigned int i = 0; i < nreq; i++) {
        uint16_t req = 0;

        nbd_neg_get_u16(n, &req);
        want_name |= req == NBD_INFO_NAME;
        want_desc |= req == NBD_INFO_DESCRIPTION;
        want_block_size |= req == NBD_INFO_BLOCK_SIZE;
    }
    exp = nbd_neg_find_export(n, name);
    if (!exp) {
        return nbd_neg_send_err(n, NBD_REP_ERR_UNKNOWN,
                                "export '%s' not present", name);
    }

    if (want_name) {
        ret = nbd_neg_send_info(n, NBD_INFO_NAME, exp->name,
                                strlen(exp->name));
        if (ret < 0) {
            return ret;
        }
    }
    if (want_desc && exp->description) {
        ret = nbd_neg_send_info(n, NBD_INFO_DESCRIPTION, exp->description,
                                strlen(exp->description));
        if (ret < 0) {
            return ret;
        }
    }
    ret = nbd_neg_send_block_size(n, exp, want_block_size);
    if (ret < 0) {
        return ret;
    }
    n->client->size = nbd_export_size(exp);
    export_info.size = GUINT64_TO_BE(n->client->size);
    export_info.flags = GUINT16_TO_BE(nbd_client_export_flags(n->client,
                                                              exp));
    ret = nbd_neg_send_info(n, NBD_INFO_EXPORT, &export_info,
                            sizeof(export_info));
    if (ret < 0) {
        return ret;
    }
    ret = nbd_neg_send_ack(n);
    if (ret < 0) {
        return ret;
    }
    if (n->opt == NBD_OPT_GO) {
        return nbd_neg_choose_export(n, exp, errp);
    }
    return NBD_NEG_CONTINUE;
}

/*
 * NBD_OPT_LIST.  The replies are built before the first is sent: a write
 * may wait for as long as the client does not read, and the export list
 * may change meanwhile (invariant 6 of nbd-server.c).
 */
static int coroutine_fn nbd_neg_list(NBDNegotiation *n)
{
    g_autoptr(GPtrArray) replies = g_ptr_array_new_with_free_func(
                                       (GDestroyNotify)g_byte_array_unref);
    int ret;

    if (n->len != 0) {
        return nbd_neg_send_err(n, NBD_REP_ERR_INVALID,
                                "NBD_OPT_LIST takes no data");
    }
    for (GList *l = n->client->server->exports.head; l; l = l->next) {
        NBDExport *exp = l->data;
        uint32_t be_len = GUINT32_TO_BE(strlen(exp->name));
        GByteArray *buf = g_byte_array_new();

        g_byte_array_append(buf, (const guint8 *)&be_len, 4);
        g_byte_array_append(buf, (const guint8 *)exp->name,
                            strlen(exp->name));
        if (exp->description) {
            g_byte_array_append(buf, (const guint8 *)exp->description,
                                strlen(exp->description));
        }
        g_ptr_array_add(replies, buf);
    }
    for (guint i = 0; i < replies->len; i++) {
        GByteArray *buf = replies->pdata[i];

        ret = nbd_neg_send_rep(n, NBD_REP_SERVER, buf->data, buf->len);
        if (ret < 0) {
            return ret;
        }
    }
    return nbd_neg_send_ack(n);
}

static int coroutine_fn nbd_neg_structured_reply(NBDNegotiation *n)
{
    if (n->len != 0) {
        return nbd_neg_send_err(n, NBD_REP_ERR_INVALID,
                                "NBD_OPT_STRUCTURED_REPLY takes no data");
    }
    if (n->client->structured_reply) {
        return nbd_neg_send_err(n, NBD_REP_ERR_INVALID,
                                "structured reply already negotiated");
    }
    n->client->structured_reply = true;
    return nbd_neg_send_ack(n);
}

/*
 * Adds the contexts of @exp that @query names to @sel: a full name, or a
 * namespace ("base:", "qemu:") for all of its contexts.
 */
static void nbd_neg_match_query(NBDExport *exp, const char *query,
                                NBDMetaContexts *sel)
{
    if (!strcmp(query, NBD_META_NS_BASE ":") ||
        !strcmp(query, NBD_META_BASE_ALLOCATION)) {
        sel->base_allocation = true;
    }
    if (exp->allocation_depth &&
        (!strcmp(query, NBD_META_NS_QEMU ":") ||
         !strcmp(query, NBD_META_QEMU_ALLOC_DEPTH))) {
        sel->allocation_depth = true;
    }
    nbd_meta_bitmaps_match(exp, query, &sel->bitmaps);
}

static int coroutine_fn nbd_neg_send_context(NBDNegotiation *n, uint32_t id,
                                             const char *name)
{
    size_t len = strlen(name);
    g_autofree uint8_t *buf = g_malloc(4 + len);
    uint32_t be_id = GUINT32_TO_BE(id);

    memcpy(buf, &be_id, 4);
    memcpy(buf + 4, name, len);
    return nbd_neg_send_rep(n, NBD_REP_META_CONTEXT, buf, 4 + len);
}

/* NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT. */
static int coroutine_fn nbd_neg_meta_context(NBDNegotiation *n)
{
    NBDClient *client = n->client;
    bool set = n->opt == NBD_OPT_SET_META_CONTEXT;
    g_autofree char *name = NULL;
    NBDMetaContexts sel = { 0 };
    uint32_t nqueries;
    NBDExport *exp;
    int ret;

    if (set) {
        /* a failed SET leaves nothing selected */
        client->contexts = (NBDMetaContexts) { 0 };
    }
    if (!client->structured_reply) {
        return nbd_neg_send_err(n, NBD_REP_ERR_INVALID,
                                "%s needs structured replies, negotiate "
                                "NBD_OPT_STRUCTURED_REPLY first",
                                nbd_opt_name(n->opt));
    }
    name = nbd_neg_get_lstring(n);
    if (!name || !nbd_neg_get_u32(n, &nqueries)) {
        return nbd_neg_send_err(n, NBD_REP_ERR_INVALID,
                                "malformed %s request", nbd_opt_name(n->opt));
    }
    exp = nbd_neg_find_export(n, name);
    if (!exp) {
        return nbd_neg_send_err(n, NBD_REP_ERR_UNKNOWN,
                                "export '%s' not present", name);
    }
    if (nqueries == 0 && !set) {
        /* listing without a query lists everything */
        sel.base_allocation = true;
        sel.allocation_depth = exp->allocation_depth;
        nbd_meta_bitmaps_match(exp, NBD_META_QEMU_DIRTY_BITMAP,
                               &sel.bitmaps);
    }
    for (uint32_t i = 0; i < nqueries; i++) {
        g_autofree char *query = nbd_neg_get_lstring(n);

        if (!query) {
            return nbd_neg_send_err(n, NBD_REP_ERR_INVALID,
                                    "malformed query %" PRIu32 " of %s", i,
                                    nbd_opt_name(n->opt));
        }
        nbd_neg_match_query(exp, query, &sel);
    }
    if (n->pos != n->len) {
        return nbd_neg_send_err(n, NBD_REP_ERR_INVALID,
                                "%s has %" PRIu32 " bytes of trailing data",
                                nbd_opt_name(n->opt), n->len - n->pos);
    }

    if (sel.base_allocation) {
        ret = nbd_neg_send_context(n, NBD_META_ID_BASE_ALLOCATION,
                                   NBD_META_BASE_ALLOCATION);
        if (ret < 0) {
            return ret;
        }
    }
    if (sel.allocation_depth) {
        ret = nbd_neg_send_context(n, NBD_META_ID_ALLOCATION_DEPTH,
                                   NBD_META_QEMU_ALLOC_DEPTH);
        if (ret < 0) {
            return ret;
        }
    }
    for (int i = 0; i < exp->nr_bitmaps; i++) {
        if (sel.bitmaps & (1ULL << i)) {
            ret = nbd_neg_send_context(n, NBD_META_ID_DIRTY_BITMAP_BASE + i,
                                       exp->bitmap_contexts[i]);
            if (ret < 0) {
                return ret;
            }
        }
    }
    if (set && !exp->removed) {
        /* invariant 7 of nbd-server.c: only a listed export */
        sel.exp = exp;
        client->contexts = sel;
    }
    return nbd_neg_send_ack(n);
}

/* NBD_OPT_STARTTLS: the ACK, then the TLS handshake on the socket. */
static int coroutine_fn nbd_neg_starttls(NBDNegotiation *n, Error **errp)
{
    NBDClient *client = n->client;
    QCryptoTLSCreds *creds = client->server->cfg.tls_creds;
    int ret;

    if (!creds) {
        /* QEMU's reply, which its client shows */
        return nbd_neg_send_err(n, NBD_REP_ERR_POLICY, "TLS not configured");
    }
    if (client->tls) {
        return nbd_neg_send_err(n, NBD_REP_ERR_INVALID,
                                "TLS already enabled");
    }
    if (n->len) {
        return nbd_neg_send_err(n, NBD_REP_ERR_INVALID,
                                "NBD_OPT_STARTTLS with %" PRIu32 " bytes of "
                                "data", n->len);
    }
    ret = nbd_neg_send_ack(n);
    if (ret < 0) {
        return ret;
    }
    client->tls = qcrypto_tls_session_new(creds, NULL, client->sock.fd,
                                          errp);
    if (!client->tls) {
        return -EINVAL;
    }
    if (client->server->cfg.tls_authz) {
        qcrypto_tls_session_set_authz(client->tls,
                                      client->server->cfg.tls_authz);
    }
    ret = co_socket_tls_handshake(&client->sock, client->tls, errp);
    if (ret < 0) {
        /*
         * Hang up before the close, as QEMU does: the client, whose first
         * option may be unread here, then sees the session end, not a
         * reset.
         */
        co_socket_shutdown(&client->sock);
        return ret;
    }
    return NBD_NEG_CONTINUE;
}

/* Answers the option in @n; NBD_NEG_* or -errno to close. */
static int coroutine_fn nbd_neg_option(NBDNegotiation *n, Error **errp)
{
    if (n->client->server->cfg.tls_creds && !n->client->tls &&
        n->opt != NBD_OPT_STARTTLS && n->opt != NBD_OPT_ABORT) {
        if (n->opt == NBD_OPT_EXPORT_NAME) {
            error_setg(errp, "Option 0x%" PRIx32 " not permitted before TLS",
                       n->opt);
            return -EINVAL;
        }
        /* QEMU's words */
        return nbd_neg_send_err(n, NBD_REP_ERR_TLS_REQD,
                                "Option 0x%" PRIx32 " not permitted before "
                                "TLS", n->opt);
    }
    switch (n->opt) {
    case NBD_OPT_EXPORT_NAME:
        return nbd_neg_export_name(n, errp);
    case NBD_OPT_ABORT:
        /* the client is leaving: the ACK is a courtesy it may not read */
        nbd_neg_send_ack(n);
        return -ECONNABORTED;
    case NBD_OPT_LIST:
        return nbd_neg_list(n);
    case NBD_OPT_INFO:
    case NBD_OPT_GO:
        return nbd_neg_info(n, errp);
    case NBD_OPT_STRUCTURED_REPLY:
        return nbd_neg_structured_reply(n);
    case NBD_OPT_LIST_META_CONTEXT:
    case NBD_OPT_SET_META_CONTEXT:
        return nbd_neg_meta_context(n);
    case NBD_OPT_STARTTLS:
        return nbd_neg_starttls(n, errp);
    default:
        return nbd_neg_send_err(n, NBD_REP_ERR_UNSUP,
                                "unsupported option %" PRIu32 " (%s)",
                                n->opt, nbd_opt_name(n->opt));
    }
}

/*
 * A failed read: the client left (no message) or broke the protocol.
 * The words are QEMU's, which scripts (iotest 233) compare.
 */
static int nbd_neg_read_error(NBDNegotiation *n, int ret, const char *what,
                              Error **errp)
{
    if (ret == -EPIPE) {
        error_setg(errp, "Failed to read %s: Unexpected end-of-file before "
                   "all data were read", what);
    } else if (ret != -ESHUTDOWN) {
        error_setg(errp, "Failed to read %s: %s%s", what,
                   n->client->tls ? "Cannot read from TLS channel: " : "",
                   strerror(-ret));
    }
    return ret;
}

/* Reads and answers one option. */
static int coroutine_fn nbd_neg_next_option(NBDNegotiation *n, Error **errp)
{
    NBDOption hdr;
    int ret;

    ret = co_socket_read_all(&n->client->sock, &hdr, sizeof(hdr));
    if (ret == -EPIPE) {
        return ret;     /* the client left between options */
    }
    if (ret < 0) {
        return nbd_neg_read_error(n, ret, "opts magic", errp);
    }
    if (GUINT64_FROM_BE(hdr.magic) != NBD_OPTS_MAGIC) {
        error_setg(errp, "bad option magic 0x%016" PRIx64,
                   GUINT64_FROM_BE(hdr.magic));
        return -EINVAL;
    }
    n->opt = GUINT32_FROM_BE(hdr.option);
    n->len = GUINT32_FROM_BE(hdr.length);
    n->pos = 0;
    if (n->len > NBD_MAX_OPTION_SIZE) {
        /* too long to buffer, and skipping it would let a client make
         * the server read gigabytes: tell it why, then hang up */
        nbd_neg_send_err(n, NBD_REP_ERR_TOO_BIG,
                         "option length %" PRIu32 " exceeds the limit of %u",
                         n->len, (unsigned int)NBD_MAX_OPTION_SIZE);
        error_setg(errp, "%s with %" PRIu32 " bytes of data exceeds the "
                   "limit of %u", nbd_opt_name(n->opt), n->len,
                   (unsigned int)NBD_MAX_OPTION_SIZE);
        return -EINVAL;
    }
    n->data = g_malloc(n->len);
    ret = co_socket_read_all(&n->client->sock, n->data, n->len);
    if (ret < 0) {
        ret = nbd_neg_read_error(n, ret, "option data", errp);
    } else {
        ret = nbd_neg_option(n, errp);
        nbd_neg_release_export(n);
    }
    g_free(n->data);
    n->data = NULL;
    return ret;
}

int coroutine_fn nbd_negotiate(NBDClient *client, Error **errp)
{
    NBDNegotiation n = { .client = client };
    NBDNewstyleGreeting greeting = {
        .magic = GUINT64_TO_BE(NBD_INIT_MAGIC),
        .opts_magic = GUINT64_TO_BE(NBD_OPTS_MAGIC),
        .flags = GUINT16_TO_BE(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES),
    };
    uint32_t cflags;
    int ret;

    ret = co_socket_write_all(&client->sock, &greeting, sizeof(greeting));
    if (ret < 0) {
        return ret;
    }
    ret = co_socket_read_all(&client->sock, &cflags, sizeof(cflags));
    if (ret < 0) {
        return nbd_neg_read_error(&n, ret, "client flags", errp);
    }
    cflags = GUINT32_FROM_BE(cflags);
    if (cflags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
        error_setg(errp, "unknown client flags 0x%" PRIx32,
                   cflags & ~(NBD_FLAG_C_FIXED_NEWSTYLE |
                              NBD_FLAG_C_NO_ZEROES));
        return -EINVAL;
    }
    if (!(cflags & NBD_FLAG_C_FIXED_NEWSTYLE)) {
        /* without it the client could not take an error reply */
        error_setg(errp, "client does not support fixed newstyle "
                   "negotiation");
        return -EINVAL;
    }
    n.no_zeroes = cflags & NBD_FLAG_C_NO_ZEROES;

    do {
        ret = nbd_neg_next_option(&n, errp);
    } while (ret == NBD_NEG_CONTINUE);
    return ret == NBD_NEG_TRANSMIT ? 0 : ret;
}
