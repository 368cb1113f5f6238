/*
 * The client side of the NBD handshake (fixed newstyle), on a blocking
 * socket, before the driver hands the socket to the event loop.
 *
 * Order of options, each answered before the next is sent:
 *   NBD_OPT_STARTTLS           with tls-creds: then the TLS handshake,
 *                              and every later byte in its records
 *   NBD_OPT_STRUCTURED_REPLY   chunked reads with holes and error offsets
 *   NBD_OPT_SET_META_CONTEXT   base:allocation (or x-dirty-bitmap's
 *                              context), for block status (only with
 *                              structured replies)
 *   NBD_OPT_GO                 size, flags, block sizes; ends the handshake
 *   NBD_OPT_EXPORT_NAME        only if the server answers NBD_OPT_GO with
 *                              NBD_REP_ERR_UNSUP (servers older than it)
 *
 * A server that is newstyle but not fixed newstyle gets
 * NBD_OPT_EXPORT_NAME at once: it may hang up on any other option.
 * A server whose greeting is oldstyle takes no options: its one export,
 * size and flags come with the greeting.
 *
 * Every length the server sends is checked before it is used: an option
 * reply longer than NBD_CLIENT_MAX_REPLY is refused, never allocated.
 *
 * The whole handshake runs against one deadline: before each read or
 * write of the blocking socket, SO_RCVTIMEO/SO_SNDTIMEO are set to the
 * time left, so a server that goes silent (or trickles a byte at a time)
 * ends it with -ETIMEDOUT instead of holding the caller for ever.
 */
#include "util/osdep.h"
#include "nbd-handshake-int.h"
#include "crypto/tls-session.h"
#include <sys/socket.h>

/*
 * Bounds the next blocking read (@opt SO_RCVTIMEO) or write (SO_SNDTIMEO)
 * by the time left; -1 with ETIMEDOUT when none is.  A read or write
 * whose time runs out fails with EAGAIN, which nbd_hs_io() turns into
 * ETIMEDOUT.
 */
static int nbd_hs_arm(NBDHs *hs, int opt)
{
    int64_t left;
    struct timeval tv;

    if (!hs->deadline) {
        return 0;
    }
    left = hs->deadline - g_get_monotonic_time();
    if (left <= 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    tv.tv_sec = left / G_USEC_PER_SEC;
    tv.tv_usec = left % G_USEC_PER_SEC;
    return setsockopt(hs->fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}

/* One read or write of the socket or the session, -1 with errno. */
static ssize_t nbd_hs_io(NBDHs *hs, void *rbuf, const void *wbuf, size_t len)
{
    ssize_t n;

    if (nbd_hs_arm(hs, rbuf ? SO_RCVTIMEO : SO_SNDTIMEO) < 0) {
        return -1;
    }
    if (!hs->tls) {
        n = rbuf ? read(hs->fd, rbuf, len)
                 : send(hs->fd, wbuf, len, MSG_NOSIGNAL);
        /*
         * On a blocking socket EAGAIN means nbd_hs_arm()'s timeout ran
         * out, i.e. the deadline passed.  On a non-blocking one (the fuzz
         * harness hands one over) it means nothing to read now, which
         * stays an error: retrying would spin until the deadline.
         */
        if (n < 0 && errno == EAGAIN && hs->deadline &&
            !(fcntl(hs->fd, F_GETFL) & O_NONBLOCK)) {
            errno = ETIMEDOUT;
        }
        return n;
    }
    n = rbuf ? qcrypto_tls_session_read(hs->tls, rbuf, len)
             : qcrypto_tls_session_write(hs->tls, wbuf, len);
    if (n < 0) {
        errno = n == -EAGAIN ? EINTR : -n;
        return -1;
    }
    return n;
}

/*
 * The largest option reply read: two strings (NBD_MAX_STRING_SIZE each:
 * NBD_REP_SERVER's name and description) with a header of a few bytes.
 * Anything longer is a hostile or broken server.
 */
#define NBD_CLIENT_MAX_REPLY    (2 * NBD_MAX_STRING_SIZE + 64)

/*
 * Reads @len bytes of @what (QEMU's names: "option reply", "export
 * length"); a failure reads as QEMU's, since scripts and iotests 083 and
 * 233 compare them.
 */
int nbd_hs_read(NBDHs *hs, void *buf, size_t len, const char *what,
                Error **errp)
{
    uint8_t *p = buf;

    while (len) {
        ssize_t n = nbd_hs_io(hs, p, NULL, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == ETIMEDOUT) {
            error_setg(errp, "Failed to read %s: the server sent nothing "
                       "more before the handshake's time limit", what);
            return -ETIMEDOUT;
        }
        if (n == 0) {
            error_setg(errp, "Failed to read %s: Unexpected end-of-file "
                       "before all data were read", what);
            return -EPIPE;
        }
        if (n < 0) {
            int err = errno;

            error_setg(errp, "Failed to read %s: %s: %s", what,
                       hs->tls ? "Cannot read from TLS channel"
                               : "Unable to read from socket",
                       strerror(err));
            return -err;
        }
        p += n;
        len -= n;
    }
    return 0;
}

static int nbd_hs_write(NBDHs *hs, const void *buf, size_t len,
                        const char *what, Error **errp)
{
    const uint8_t *p = buf;

    while (len) {
        ssize_t n = nbd_hs_io(hs, NULL, p, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == ETIMEDOUT) {
            error_setg(errp, "Failed to send %s to the NBD server: it took "
                       "nothing more before the handshake's time limit",
                       what);
            return -ETIMEDOUT;
        }
        if (n < 0) {
            error_setg_errno(errp, errno, "Failed to send %s to the NBD "
                             "server", what);
            return -errno;
        }
        p += n;
        len -= n;
    }
    return 0;
}

int nbd_hs_send_option(NBDHs *hs, uint32_t opt, const void *data,
                       uint32_t len, Error **errp)
{
    NBDOption hdr = {
        .magic = GUINT64_TO_BE(NBD_OPTS_MAGIC),
        .option = GUINT32_TO_BE(opt),
        .length = GUINT32_TO_BE(len),
    };
    int ret;

    ret = nbd_hs_write(hs, &hdr, sizeof(hdr), nbd_opt_name(opt), errp);
    if (ret == 0 && len) {
        ret = nbd_hs_write(hs, data, len, nbd_opt_name(opt), errp);
    }
    return ret;
}

/*
 * Reads one reply to @opt; its payload (at most NBD_CLIENT_MAX_REPLY
 * bytes) goes to *@payload, which the caller frees.
 */
int nbd_hs_read_reply(NBDHs *hs, uint32_t opt, NBDOptionReply *rep,
                      uint8_t **payload, Error **errp)
{
    int ret;

    *payload = NULL;
    ret = nbd_hs_read(hs, rep, sizeof(*rep), "option reply", errp);
    if (ret < 0) {
        return ret;
    }
    rep->magic = GUINT64_FROM_BE(rep->magic);
    rep->option = GUINT32_FROM_BE(rep->option);
    rep->type = GUINT32_FROM_BE(rep->type);
    rep->length = GUINT32_FROM_BE(rep->length);
    if (rep->magic != NBD_REP_MAGIC) {
        error_setg(errp, "NBD server sent an option reply with the bad "
                   "magic 0x%" PRIx64, rep->magic);
        return -EPROTO;
    }
    if (rep->option != opt) {
        error_setg(errp, "NBD server answered %s with a reply to %s",
                   nbd_opt_name(opt), nbd_opt_name(rep->option));
        return -EPROTO;
    }
    if (rep->length > NBD_CLIENT_MAX_REPLY) {
        error_setg(errp, "NBD server sent a reply of %" PRIu32 " bytes to "
                   "%s (at most %d)", rep->length, nbd_opt_name(opt),
                   NBD_CLIENT_MAX_REPLY);
        return -EPROTO;
    }
    *payload = g_malloc(rep->length + 1);
    ret = nbd_hs_read(hs, *payload, rep->length, "option reply", errp);
    if (ret < 0) {
        g_free(*payload);
        *payload = NULL;
        return ret;
    }
    /* Error replies carry a message that is not NUL-terminated. */
    (*payload)[rep->length] = '\0';
    return 0;
}

/* QEMU's short names of options, which its messages (and ours) show. */
static const char *nbd_hs_opt_short_name(uint32_t opt)
{
    switch (opt) {
    case NBD_OPT_EXPORT_NAME:
        return "export name";
    case NBD_OPT_ABORT:
        return "abort";
    case NBD_OPT_LIST:
        return "list";
    case NBD_OPT_STARTTLS:
        return "starttls";
    case NBD_OPT_INFO:
        return "info";
    case NBD_OPT_GO:
        return "go";
    case NBD_OPT_STRUCTURED_REPLY:
        return "structured reply";
    case NBD_OPT_LIST_META_CONTEXT:
        return "list meta context";
    case NBD_OPT_SET_META_CONTEXT:
        return "set meta context";
    default:
        return "<unknown>";
    }
}

/*
 * An error reply to @opt: QEMU's message for its type, the server's own
 * text on a line of its own (scripts compare these, iotest 233 too).
 */
int nbd_hs_reply_error(const NBDOptionReply *rep, const uint8_t *msg,
                       const char *export_name, Error **errp)
{
    g_autofree char *what = g_strdup_printf("option %" PRIu32 " (%s)",
                                            rep->option,
                                            nbd_hs_opt_short_name(rep->option));
    g_autofree char *head = NULL;
    int ret = -EINVAL;

    switch (rep->type) {
    case NBD_REP_ERR_UNKNOWN:
        /* the server's text names the export; without one, we do */
        error_setg(errp, "Requested export not available\nserver reported: "
                   "%s", rep->length ? (const char *)msg : export_name);
        return -ENOENT;
    case NBD_REP_ERR_POLICY:
        head = g_strdup_printf("Denied by server for %s", what);
        ret = -EACCES;
        break;
    case NBD_REP_ERR_INVALID:
        head = g_strdup_printf("Invalid parameters for %s", what);
        break;
    case NBD_REP_ERR_PLATFORM:
    case NBD_REP_ERR_UNSUP:
        head = g_strdup_printf("Server lacks support for %s", what);
        ret = -ENOTSUP;
        break;
    case NBD_REP_ERR_TLS_REQD:
        head = g_strdup_printf("TLS negotiation required before %s\n"
                               "Did you forget a valid tls-creds?", what);
        ret = -EACCES;
        break;
    case NBD_REP_ERR_SHUTDOWN:
        head = g_strdup_printf("Server shutting down before %s", what);
        ret = -ESHUTDOWN;
        break;
    case NBD_REP_ERR_BLOCK_SIZE_REQD:
        head = g_strdup_printf("Server requires INFO_BLOCK_SIZE for %s",
                               what);
        break;
    case NBD_REP_ERR_TOO_BIG:
        head = g_strdup_printf("Server considers %s too large", what);
        break;
    default:
        head = g_strdup_printf("Unknown error code %s when asking for %s",
                               nbd_rep_name(rep->type), what);
        break;
    }
    if (rep->length) {
        error_setg(errp, "%s\nserver reported: %s", head, (const char *)msg);
    } else {
        error_setg(errp, "%s", head);
    }
    return ret;
}

int nbd_hs_structured_reply(NBDHs *hs, NBDExportInfo *info, Error **errp)
{
    NBDOptionReply rep;
    g_autofree uint8_t *payload = NULL;
    int ret;

    ret = nbd_hs_send_option(hs, NBD_OPT_STRUCTURED_REPLY, NULL, 0, errp);
    if (ret == 0) {
        ret = nbd_hs_read_reply(hs, NBD_OPT_STRUCTURED_REPLY, &rep, &payload,
                                errp);
    }
    if (ret < 0) {
        return ret;
    }
    /* A refusal is no failure: replies are then all simple. */
    info->structured_reply = rep.type == NBD_REP_ACK;
    return 0;
}

/* Option data that starts with an export name: u32 length, name. */
void nbd_hs_put_name(GByteArray *buf, const char *name)
{
    uint32_t len = GUINT32_TO_BE(strlen(name));

    g_byte_array_append(buf, (const uint8_t *)&len, sizeof(len));
    g_byte_array_append(buf, (const uint8_t *)name, strlen(name));
}

static int nbd_hs_meta_context(NBDHs *hs, const char *export_name,
                               const char *context, NBDExportInfo *info,
                               Error **errp)
{
    g_autoptr(GByteArray) buf = g_byte_array_new();
    uint32_t nqueries = GUINT32_TO_BE(1);

    nbd_hs_put_name(buf, export_name);
    g_byte_array_append(buf, (const uint8_t *)&nqueries, sizeof(nqueries));
    nbd_hs_put_name(buf, context);
    if (nbd_hs_send_option(hs, NBD_OPT_SET_META_CONTEXT, buf->data,
                           buf->len, errp) < 0) {
        return -EIO;
    }
    for (;;) {
        NBDOptionReply rep;
        g_autofree uint8_t *payload = NULL;
        uint32_t id;

        if (nbd_hs_read_reply(hs, NBD_OPT_SET_META_CONTEXT, &rep, &payload,
                              errp) < 0) {
            return -EIO;
        }
        if (rep.type != NBD_REP_META_CONTEXT) {
            /* ACK ends the list; an error means no contexts, not failure */
            return 0;
        }
        if (rep.length < sizeof(id)) {
            error_setg(errp, "NBD server sent a meta context reply of %"
                       PRIu32 " bytes (at least 4)", rep.length);
            return -EPROTO;
        }
        memcpy(&id, payload, sizeof(id));
        if (!strcmp((char *)payload + sizeof(id), context)) {
            info->have_context = true;
            info->context_id = GUINT32_FROM_BE(id);
        }
    }
}

/* Takes in one NBD_REP_INFO of NBD_OPT_GO or (nbd-list.c) NBD_OPT_INFO. */
int nbd_hs_go_info(const uint8_t *p, uint32_t len, NBDExportInfo *info,
                   bool *have_export, Error **errp)
{
    uint16_t type;

    if (len < sizeof(type)) {
        error_setg(errp, "NBD server sent an empty NBD_REP_INFO");
        return -EPROTO;
    }
    memcpy(&type, p, sizeof(type));
    type = GUINT16_FROM_BE(type);
    if (type == NBD_INFO_EXPORT) {
        NBDInfoExport ie;

        if (len != sizeof(ie)) {
            error_setg(errp, "NBD server sent NBD_INFO_EXPORT of %" PRIu32
                       " bytes (expected %zu)", len, sizeof(ie));
            return -EPROTO;
        }
        memcpy(&ie, p, sizeof(ie));
        info->size = GUINT64_FROM_BE(ie.size);
        info->flags = GUINT16_FROM_BE(ie.flags);
        *have_export = true;
    } else if (type == NBD_INFO_BLOCK_SIZE) {
        NBDInfoBlockSize bs;

        if (len != sizeof(bs)) {
            error_setg(errp, "NBD server sent NBD_INFO_BLOCK_SIZE of %"
                       PRIu32 " bytes (expected %zu)", len, sizeof(bs));
            return -EPROTO;
        }
        memcpy(&bs, p, sizeof(bs));
        info->min_block = GUINT32_FROM_BE(bs.minimum);
        info->opt_block = GUINT32_FROM_BE(bs.preferred);
        info->max_block = GUINT32_FROM_BE(bs.maximum);
        if (!is_power_of_2(info->min_block) || info->min_block > 65536 ||
            !is_power_of_2(info->opt_block) ||
            info->opt_block < info->min_block ||
            info->max_block < info->min_block) {
            error_setg(errp, "NBD server sent impossible block sizes: "
                       "minimum %" PRIu32 ", preferred %" PRIu32
                       ", maximum %" PRIu32, info->min_block,
                       info->opt_block, info->max_block);
            return -EPROTO;
        }
    }
    /* Other information (name, description) is not needed. */
    return 0;
}

/*
 * NBD_OPT_GO.  Returns 1 if the server does not know the option (the
 * caller falls back to NBD_OPT_EXPORT_NAME), 0 when transmission starts.
 */
static int nbd_hs_go(NBDHs *hs, const char *export_name, NBDExportInfo *info,
                     Error **errp)
{
    g_autoptr(GByteArray) buf = g_byte_array_new();
    uint16_t nreq = GUINT16_TO_BE(1), req = GUINT16_TO_BE(NBD_INFO_BLOCK_SIZE);
    bool have_export = false;

    nbd_hs_put_name(buf, export_name);
    g_byte_array_append(buf, (const uint8_t *)&nreq, sizeof(nreq));
    g_byte_array_append(buf, (const uint8_t *)&req, sizeof(req));
    if (nbd_hs_send_option(hs, NBD_OPT_GO, buf->data, buf->len, errp) < 0) {
        return -EIO;
    }
    for (;;) {
        NBDOptionReply rep;
        g_autofree uint8_t *payload = NULL;
        int ret;

        ret = nbd_hs_read_reply(hs, NBD_OPT_GO, &rep, &payload, errp);
        if (ret < 0) {
            return ret;
        }
        if (rep.type == NBD_REP_ERR_UNSUP) {
            return 1;
        }
        if (rep.type & NBD_REP_FLAG_ERROR) {
            return nbd_hs_reply_error(&rep, payload, export_name, errp);
        }
        if (rep.type == NBD_REP_ACK) {
            if (!have_export) {
                error_setg(errp, "NBD server ended NBD_OPT_GO without "
                           "sending the export's size (NBD_INFO_EXPORT)");
                return -EPROTO;
            }
            return 0;
        }
        if (rep.type == NBD_REP_INFO) {
            ret = nbd_hs_go_info(payload, rep.length, info, &have_export,
                                 errp);
            if (ret < 0) {
                return ret;
            }
        }
    }
}

/* The old way into transmission: no way to learn of a missing export. */
static int nbd_hs_export_name(NBDHs *hs, const char *export_name,
                              uint16_t hs_flags, NBDExportInfo *info,
                              Error **errp)
{
    uint8_t reply[sizeof(uint64_t) + sizeof(uint16_t)];
    uint8_t padding[NBD_EXPORT_NAME_PADDING];
    uint64_t size;
    uint16_t flags;
    int ret;

    ret = nbd_hs_send_option(hs, NBD_OPT_EXPORT_NAME, export_name,
                             strlen(export_name), errp);
    if (ret == 0) {
        ret = nbd_hs_read(hs, reply, sizeof(reply), "export length",
                          errp);
    }
    if (ret == 0 && !(hs_flags & NBD_FLAG_NO_ZEROES)) {
        ret = nbd_hs_read(hs, padding, sizeof(padding), "reserved block",
                          errp);
    }
    if (ret < 0) {
        return ret;
    }
    memcpy(&size, reply, sizeof(size));
    memcpy(&flags, reply + sizeof(size), sizeof(flags));
    info->size = GUINT64_FROM_BE(size);
    info->flags = GUINT16_FROM_BE(flags);
    /* Transmission began without meta contexts being set. */
    info->have_context = false;
    return 0;
}

/* The oldstyle greeting's tail: size and flags, nothing to negotiate. */
static int nbd_hs_oldstyle(NBDHs *hs, const char *export_name,
                           NBDExportInfo *info, Error **errp)
{
    NBDOldstyleGreeting old;
    int ret;

    if (export_name[0]) {
        error_setg(errp, "NBD server speaks the oldstyle handshake, which "
                   "has no export names (export '%s' asked for)",
                   export_name);
        return -EINVAL;
    }
    ret = nbd_hs_read(hs, &old, sizeof(old), "export length", errp);
    if (ret < 0) {
        return ret;
    }
    info->size = GUINT64_FROM_BE(old.size);
    info->flags = GUINT32_FROM_BE(old.flags) & 0xffff;
    return 0;
}

static int nbd_hs_negotiate(NBDHs *hs, const char *export_name,
                            const char *context, const NBDClientTLS *tls,
                            NBDExportInfo *info, Error **errp);

/*
 * NBD_OPT_STARTTLS, then the TLS handshake on the socket: from then on
 * hs reads and writes TLS records.
 */
int nbd_hs_starttls(NBDHs *hs, const NBDClientTLS *tls, Error **errp)
{
    NBDOptionReply rep;
    g_autofree uint8_t *payload = NULL;
    int ret;

    ret = nbd_hs_send_option(hs, NBD_OPT_STARTTLS, NULL, 0, errp);
    if (ret == 0) {
        ret = nbd_hs_read_reply(hs, NBD_OPT_STARTTLS, &rep, &payload, errp);
    }
    if (ret < 0) {
        return ret;
    }
    if (rep.type != NBD_REP_ACK) {
        return nbd_hs_reply_error(&rep, payload, "", errp);
    }
    hs->tls = qcrypto_tls_session_new(tls->creds, tls->hostname, hs->fd,
                                      errp);
    if (!hs->tls) {
        return -EINVAL;
    }
    do {
        if (nbd_hs_arm(hs, SO_RCVTIMEO) < 0 ||
            nbd_hs_arm(hs, SO_SNDTIMEO) < 0) {
            error_setg_errno(errp, errno, "TLS handshake with the NBD "
                             "server did not end in time");
            return -errno;
        }
        ret = qcrypto_tls_session_handshake(hs->tls, errp);
    } while (ret == -EAGAIN);
    return ret;
}

int nbd_client_handshake(int fd, const char *export_name, const char *context,
                         const NBDClientTLS *tls, QCryptoTLSSession **sess,
                         NBDExportInfo *info, int64_t deadline, Error **errp)
{
    NBDHs hs = { .fd = fd, .deadline = deadline };
    int ret = nbd_hs_negotiate(&hs, export_name, context, tls, info, errp);

    if (deadline) {
        /* the socket's later users set their own limits, if any */
        static const struct timeval none;

        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
    }
    if (ret < 0) {
        qcrypto_tls_session_free(hs.tls);
        hs.tls = NULL;
    }
    *sess = hs.tls;
    return ret;
}
int nbd_hs_greeting(NBDHs *hs, uint16_t *hs_flags, Error **errp)
{
    uint64_t magics[2];
    uint32_t client_flags;
    int ret;

    ret = nbd_hs_read(hs, magics, sizeof(magics), "initial magic", errp);
    if (ret < 0) {
        return ret;
    }
    if (GUINT64_FROM_BE(magics[0]) != NBD_INIT_MAGIC) {
        error_setg(errp, "NBD server sent the bad magic 0x%" PRIx64
                   " (not an NBD server?)", GUINT64_FROM_BE(magics[0]));
        return -EPROTO;
    }
    if (GUINT64_FROM_BE(magics[1]) == NBD_OLDSTYLE_MAGIC) {
        return 1;
    }
    if (GUINT64_FROM_BE(magics[1]) != NBD_OPTS_MAGIC) {
        error_setg(errp, "NBD server sent the bad greeting magic 0x%" PRIx64,
                   GUINT64_FROM_BE(magics[1]));
        return -EPROTO;
    }
    ret = nbd_hs_read(hs, hs_flags, sizeof(*hs_flags), "initial magic",
                      errp);
    if (ret < 0) {
        return ret;
    }
    *hs_flags = GUINT16_FROM_BE(*hs_flags);
    client_flags = 0;
    if (*hs_flags & NBD_FLAG_FIXED_NEWSTYLE) {
        client_flags |= NBD_FLAG_C_FIXED_NEWSTYLE;
    }
    if (*hs_flags & NBD_FLAG_NO_ZEROES) {
        client_flags |= NBD_FLAG_C_NO_ZEROES;
    }
    client_flags = GUINT32_TO_BE(client_flags);
    return nbd_hs_write(hs, &client_flags, sizeof(client_flags),
                        "the client flags", errp);
}

static int nbd_hs_negotiate(NBDHs *hs, const char *export_name,
                            const char *context, const NBDClientTLS *tls,
                            NBDExportInfo *info, Error **errp)
{
    uint16_t hs_flags;
    int ret;

    memset(info, 0, sizeof(*info));
    ret = nbd_hs_greeting(hs, &hs_flags, errp);
    if (ret == 1) {
        if (tls->creds) {
            error_setg(errp, "NBD server speaks the oldstyle handshake, "
                       "which has no TLS");
            return -ENOTSUP;
        }
        return nbd_hs_oldstyle(hs, export_name, info, errp);
    }
    if (ret == 0 && !(hs_flags & NBD_FLAG_FIXED_NEWSTYLE)) {
        if (tls->creds) {
            error_setg(errp, "NBD server is not fixed newstyle, which TLS "
                       "needs");
            return -ENOTSUP;
        }
        /* Any option but this one may make such a server hang up. */
        return nbd_hs_export_name(hs, export_name, hs_flags, info, errp);
    }
    if (ret == 0 && tls->creds) {
        ret = nbd_hs_starttls(hs, tls, errp);
    }
    if (ret == 0) {
        ret = nbd_hs_structured_reply(hs, info, errp);
    }
    if (ret == 0 && info->structured_reply) {
        ret = nbd_hs_meta_context(hs, export_name, context, info, errp);
    }
    if (ret == 0) {
        ret = nbd_hs_go(hs, export_name, info, errp);
    }
    if (ret == 1) {
        ret = nbd_hs_export_name(hs, export_name, hs_flags, info, errp);
    }
    return ret;
}
