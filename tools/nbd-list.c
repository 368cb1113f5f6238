/*
 * qblock-nbd --list: a small blocking NBD client that runs the handshake
 * far enough to list a server's exports, then aborts it.
 *
 * For each export it asks NBD_OPT_INFO (size, transmission flags, block
 * sizes) and NBD_OPT_LIST_META_CONTEXT (every context, no query), after
 * negotiating structured replies, and prints what it learnt in qemu-nbd's
 * layout.  Every length the server sends is checked against what was
 * read, so a hostile server gets an error, not a crash.  With TLS
 * credentials it starts TLS first (NBD_OPT_STARTTLS) and lists in the
 * session.
 */
#include "util/osdep.h"
#include "util/error.h"
#include "block/nbd-proto.h"
#include "crypto/tls-session.h"
#include "qblock-nbd.h"

#include <sys/socket.h>

/* Longest reply data the client reads: names and descriptions fit. */
#define QNBD_MAX_REPLY_SIZE (64 * KiB)

typedef struct QnbdExportInfo {
    char *name;
    char *description;
    uint64_t size;
    uint16_t flags;
    uint32_t min_block, opt_block, max_block;
    GPtrArray *contexts;        /* char * */
} QnbdExportInfo;

/* The connection: the socket, or the TLS session once started on it. */
typedef struct QnbdConn {
    int fd;
    QCryptoTLSSession *tls;
} QnbdConn;

/* One recv() or send(), or its TLS record counterpart; -1 with errno. */
static ssize_t qnbd_io(QnbdConn *c, void *rbuf, const void *wbuf, size_t len)
{
    ssize_t n;

    if (!c->tls) {
        return rbuf ? recv(c->fd, rbuf, len, 0)
                    : send(c->fd, wbuf, len, MSG_NOSIGNAL);
    }
    n = rbuf ? qcrypto_tls_session_read(c->tls, rbuf, len)
             : qcrypto_tls_session_write(c->tls, wbuf, len);
    if (n < 0) {
        errno = n == -EAGAIN ? EINTR : -n;
        return -1;
    }
    return n;
}

typedef struct QnbdReply {
    uint32_t type;
    uint32_t len;
    uint8_t *data;
} QnbdReply;

static int qnbd_read(QnbdConn *c, void *buf, size_t len, const char *what,
                     Error **errp)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = qnbd_io(c, p, NULL, len);

        if (n == 0) {
            error_setg(errp, "Failed to read %s: Unexpected end-of-file "
                       "before all data were read", what);
            return -EPIPE;
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            error_setg_errno(errp, errno, "Failed to read %s", what);
            return -errno;
        }
        p += n;
        len -= n;
    }
    return 0;
}

static int qnbd_write(QnbdConn *c, const void *buf, size_t len, Error **errp)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = qnbd_io(c, NULL, p, len);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            error_setg_errno(errp, errno, "Failed to send a request");
            return -errno;
        }
        p += n;
        len -= n;
    }
    return 0;
}

static int qnbd_send_option(QnbdConn *c, uint32_t opt, const void *data,
                            uint32_t len, Error **errp)
{
    NBDOption hdr = {
        .magic = GUINT64_TO_BE(NBD_OPTS_MAGIC),
        .option = GUINT32_TO_BE(opt),
        .length = GUINT32_TO_BE(len),
    };
    int ret = qnbd_write(c, &hdr, sizeof(hdr), errp);

    return ret < 0 ? ret : qnbd_write(c, data, len, errp);
}

/* Reads one reply to @opt; the caller frees reply->data. */
static int qnbd_read_reply(QnbdConn *c, uint32_t opt, QnbdReply *reply,
                           Error **errp)
{
    NBDOptionReply hdr;
    int ret = qnbd_read(c, &hdr, sizeof(hdr), "option reply", errp);

    if (ret < 0) {
        return ret;
    }
    if (GUINT64_FROM_BE(hdr.magic) != NBD_REP_MAGIC) {
        error_setg(errp, "Unexpected option reply magic 0x%016" PRIx64,
                   GUINT64_FROM_BE(hdr.magic));
        return -EINVAL;
    }
    if (GUINT32_FROM_BE(hdr.option) != opt) {
        error_setg(errp, "Unexpected reply to %s (for option %" PRIu32 ")",
                   nbd_opt_name(opt), GUINT32_FROM_BE(hdr.option));
        return -EINVAL;
    }
    reply->type = GUINT32_FROM_BE(hdr.type);
    reply->len = GUINT32_FROM_BE(hdr.length);
    if (reply->len > QNBD_MAX_REPLY_SIZE) {
        error_setg(errp, "%s reply of %" PRIu32 " bytes is too long",
                   nbd_opt_name(opt), reply->len);
        return -EINVAL;
    }
    reply->data = g_malloc(reply->len + 1);
    reply->data[reply->len] = 0;
    ret = qnbd_read(c, reply->data, reply->len, "option reply data", errp);
    if (ret < 0) {
        g_free(reply->data);
        reply->data = NULL;
    }
    return ret;
}

/* An error reply becomes a message with the server's text. */
static int qnbd_reply_error(uint32_t opt, const QnbdReply *reply,
                            Error **errp)
{
    const char *said = reply->len ? (const char *)reply->data : NULL;

    /* QEMU's words for the refusals of TLS, which scripts compare */
    if (reply->type == NBD_REP_ERR_TLS_REQD) {
        error_setg(errp, "TLS negotiation required before option %" PRIu32
                   " (%s)\nDid you forget a valid tls-creds?%s%s", opt,
                   opt == NBD_OPT_LIST ? "list" : "info",
                   said ? "\nserver reported: " : "", said ?: "");
        return -EACCES;
    }
    if (reply->type == NBD_REP_ERR_POLICY && opt == NBD_OPT_STARTTLS) {
        error_setg(errp, "Denied by server for option 5 (starttls)%s%s",
                   said ? "\nserver reported: " : "", said ?: "");
        return -EACCES;
    }
    if (reply->type & NBD_REP_FLAG_ERROR) {
        error_setg(errp, "Server rejected %s with %s%s%s", nbd_opt_name(opt),
                   nbd_rep_name(reply->type), reply->len ? ": " : "",
                   reply->len ? (const char *)reply->data : "");
        return reply->type == NBD_REP_ERR_UNSUP ? -ENOTSUP : -EINVAL;
    }
    error_setg(errp, "Unexpected reply %s to %s", nbd_rep_name(reply->type),
               nbd_opt_name(opt));
    return -EINVAL;
}

static uint32_t qnbd_be32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, 4);
    return GUINT32_FROM_BE(v);
}

/* NBD_OPT_STARTTLS and the TLS handshake: the rest runs in TLS. */
static int qnbd_starttls(QnbdConn *c, const QnbdListTLS *tls, Error **errp)
{
    QnbdReply reply;
    int ret;

    ret = qnbd_send_option(c, NBD_OPT_STARTTLS, NULL, 0, errp);
    if (ret < 0 ||
        (ret = qnbd_read_reply(c, NBD_OPT_STARTTLS, &reply, errp)) < 0) {
        return ret;
    }
    if (reply.type != NBD_REP_ACK) {
        ret = qnbd_reply_error(NBD_OPT_STARTTLS, &reply, errp);
        g_free(reply.data);
        return ret;
    }
    g_free(reply.data);
    c->tls = qcrypto_tls_session_new(tls->creds, tls->hostname, c->fd, errp);
    if (!c->tls) {
        return -EINVAL;
    }
    return qcrypto_tls_session_handshake_sync(c->tls, errp);
}

static int qnbd_handshake(QnbdConn *c, const QnbdListTLS *tls,
                          bool *structured, Error **errp)
{
    NBDNewstyleGreeting g;
    uint32_t cflags;
    QnbdReply reply;
    int ret;

    ret = qnbd_read(c, &g, sizeof(g), "the server's greeting", errp);
    if (ret < 0) {
        return ret;
    }
    if (GUINT64_FROM_BE(g.magic) != NBD_INIT_MAGIC ||
        GUINT64_FROM_BE(g.opts_magic) != NBD_OPTS_MAGIC) {
        error_setg(errp, "Server is not a newstyle NBD server");
        return -EINVAL;
    }
    if (!(GUINT16_FROM_BE(g.flags) & NBD_FLAG_FIXED_NEWSTYLE)) {
        error_setg(errp, "Server does not support fixed newstyle");
        return -ENOTSUP;
    }
    cflags = NBD_FLAG_C_FIXED_NEWSTYLE;
    if (GUINT16_FROM_BE(g.flags) & NBD_FLAG_NO_ZEROES) {
        cflags |= NBD_FLAG_C_NO_ZEROES;
    }
    cflags = GUINT32_TO_BE(cflags);
    ret = qnbd_write(c, &cflags, sizeof(cflags), errp);
    if (ret == 0 && tls->creds) {
        ret = qnbd_starttls(c, tls, errp);
    }
    if (ret < 0) {
        return ret;
    }

    ret = qnbd_send_option(c, NBD_OPT_STRUCTURED_REPLY, NULL, 0, errp);
    if (ret < 0 ||
        (ret = qnbd_read_reply(c, NBD_OPT_STRUCTURED_REPLY, &reply,
                               errp)) < 0) {
        return ret;
    }
    *structured = reply.type == NBD_REP_ACK;
    g_free(reply.data);
    return 0;
}

/* Takes one reply of the type that an option's exchange expects. */
typedef int QnbdReplyFunc(const QnbdReply *reply, void *opaque,
                          Error **errp);

/*
 * Sends option @opt with @len bytes of @data and reads its replies up to
 * the final ACK: each reply of type @type goes to @fn, any other type is
 * the server's error and ends the exchange, as does an error of @fn.
 */
static int qnbd_option_exchange(QnbdConn *c, uint32_t opt, const void *data,
                                uint32_t len, uint32_t type,
                                QnbdReplyFunc *fn, void *opaque,
                                Error **errp)
{
    int ret = qnbd_send_option(c, opt, data, len, errp);

    while (ret == 0) {
        QnbdReply reply;

        ret = qnbd_read_reply(c, opt, &reply, errp);
        if (ret < 0) {
            break;
        }
        if (reply.type == NBD_REP_ACK) {
            g_free(reply.data);
            break;
        }
        if (reply.type != type) {
            ret = qnbd_reply_error(opt, &reply, errp);
        } else {
            ret = fn(&reply, opaque, errp);
        }
        g_free(reply.data);
    }
    return ret;
}

/* NBD_REP_SERVER: one export, added to the GPtrArray @opaque. */
static int qnbd_list_reply(const QnbdReply *reply, void *opaque,
                           Error **errp)
{
    GPtrArray *exports = opaque;
    QnbdExportInfo *info;
    uint32_t name_len;

    if (reply->len < 4 ||
        (name_len = qnbd_be32(reply->data)) > reply->len - 4) {
        error_setg(errp, "Malformed NBD_REP_SERVER reply");
        return -EINVAL;
    }
    info = g_new0(QnbdExportInfo, 1);
    info->name = g_strndup((char *)reply->data + 4, name_len);
    info->description = g_strndup((char *)reply->data + 4 + name_len,
                                  reply->len - 4 - name_len);
    info->contexts = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(exports, info);
    return 0;
}

static int qnbd_list(QnbdConn *c, GPtrArray *exports, Error **errp)
{
    return qnbd_option_exchange(c, NBD_OPT_LIST, NULL, 0, NBD_REP_SERVER,
                                qnbd_list_reply, exports, errp);
}

/* The start of option data that names an export: u32 length, name. */
static GByteArray *qnbd_name_data(const char *name)
{
    GByteArray *data = g_byte_array_new();
    uint32_t be_len = GUINT32_TO_BE(strlen(name));

    g_byte_array_append(data, (guint8 *)&be_len, 4);
    g_byte_array_append(data, (const guint8 *)name, strlen(name));
    return data;
}

static void qnbd_parse_info(QnbdExportInfo *info, const QnbdReply *reply)
{
    uint16_t type;

    if (reply->len < 2) {
        return;
    }
    memcpy(&type, reply->data, 2);
    type = GUINT16_FROM_BE(type);
    if (type == NBD_INFO_EXPORT && reply->len == 12) {
        uint64_t size;
        uint16_t flags;

        memcpy(&size, reply->data + 2, 8);
        memcpy(&flags, reply->data + 10, 2);
        info->size = GUINT64_FROM_BE(size);
        info->flags = GUINT16_FROM_BE(flags);
    } else if (type == NBD_INFO_BLOCK_SIZE && reply->len == 14) {
        info->min_block = qnbd_be32(reply->data + 2);
        info->opt_block = qnbd_be32(reply->data + 6);
        info->max_block = qnbd_be32(reply->data + 10);
    }
}

/* NBD_REP_INFO: what it tells of the QnbdExportInfo @opaque. */
static int qnbd_info_reply(const QnbdReply *reply, void *opaque,
                           Error **errp)
{
    qnbd_parse_info(opaque, reply);
    return 0;
}

static int qnbd_info(QnbdConn *c, QnbdExportInfo *info, Error **errp)
{
    g_autoptr(GByteArray) data = qnbd_name_data(info->name);
    uint16_t reqs[2] = {
        GUINT16_TO_BE(1), GUINT16_TO_BE(NBD_INFO_BLOCK_SIZE),
    };

    g_byte_array_append(data, (guint8 *)reqs, sizeof(reqs));
    return qnbd_option_exchange(c, NBD_OPT_INFO, data->data, data->len,
                                NBD_REP_INFO, qnbd_info_reply, info, errp);
}

/*
 * NBD_REP_META_CONTEXT: a context name (after its 4-byte ID), added to
 * the QnbdExportInfo @opaque.
 */
static int qnbd_context_reply(const QnbdReply *reply, void *opaque,
                              Error **errp)
{
    QnbdExportInfo *info = opaque;

    if (reply->len > 4) {
        g_ptr_array_add(info->contexts,
                        g_strndup((char *)reply->data + 4, reply->len - 4));
    }
    return 0;
}

static int qnbd_list_contexts(QnbdConn *c, QnbdExportInfo *info, Error **errp)
{
    g_autoptr(GByteArray) data = qnbd_name_data(info->name);
    uint32_t nqueries = 0;

    g_byte_array_append(data, (guint8 *)&nqueries, sizeof(nqueries));
    return qnbd_option_exchange(c, NBD_OPT_LIST_META_CONTEXT, data->data,
                                data->len, NBD_REP_META_CONTEXT,
                                qnbd_context_reply, info, errp);
}

static void qnbd_print_export(const QnbdExportInfo *info)
{
    static const char *const flag_names[] = {
        [1] = "readonly", [2] = "flush", [3] = "fua", [4] = "rotational",
        [5] = "trim", [6] = "zeroes", [7] = "df", [8] = "multi",
        [9] = "resize", [10] = "cache", [11] = "fast-zero",
    };

    printf(" export: '%s'\n", info->name);
    if (info->description[0]) {
        printf("  description: %s\n", info->description);
    }
    printf("  size:  %" PRIu64 "\n", info->size);
    printf("  flags: 0x%x (", info->flags);
    for (unsigned int bit = 0; bit < ARRAY_SIZE(flag_names); bit++) {
        if ((info->flags & (1 << bit)) && flag_names[bit]) {
            printf(" %s", flag_names[bit]);
        }
    }
    printf(" )\n");
    printf("  min block: %" PRIu32 "\n", info->min_block);
    printf("  opt block: %" PRIu32 "\n", info->opt_block);
    printf("  max block: %" PRIu32 "\n", info->max_block);
    printf("  available meta contexts: %u\n", info->contexts->len);
    for (guint i = 0; i < info->contexts->len; i++) {
        printf("   %s\n", (const char *)info->contexts->pdata[i]);
    }
}

static void qnbd_export_info_free(gpointer p)
{
    QnbdExportInfo *info = p;

    g_free(info->name);
    g_free(info->description);
    g_ptr_array_unref(info->contexts);
    g_free(info);
}

int qnbd_list_exports(const SocketAddress *addr, const QnbdListTLS *tls,
                      Error **errp)
{
    g_autoptr(GPtrArray) exports =
        g_ptr_array_new_with_free_func(qnbd_export_info_free);
    bool structured = false;
    QnbdConn conn = { .fd = socket_connect(addr, errp) };
    QnbdConn *c = &conn;
    int ret;

    if (conn.fd < 0) {
        return conn.fd;
    }
    ret = qnbd_handshake(c, tls, &structured, errp);
    if (ret == 0) {
        ret = qnbd_list(c, exports, errp);
    }
    for (guint i = 0; ret == 0 && i < exports->len; i++) {
        ret = qnbd_info(c, exports->pdata[i], errp);
        if (ret == 0 && structured) {
            ret = qnbd_list_contexts(c, exports->pdata[i], errp);
        }
    }
    if (ret == 0) {
        /* leave politely; the server's ACK is not worth waiting for */
        qnbd_send_option(c, NBD_OPT_ABORT, NULL, 0, NULL);
        printf("exports available: %u\n", exports->len);
        for (guint i = 0; i < exports->len; i++) {
            qnbd_print_export(exports->pdata[i]);
        }
    }
    qcrypto_tls_session_free(conn.tls);
    close(conn.fd);
    return ret;
}
