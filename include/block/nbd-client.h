/*
 * The NBD client (the "nbd" protocol driver): what its parts share.
 *
 * block/nbd-uri.c turns QEMU's file names into the driver's options,
 * block/nbd-handshake.c negotiates an export on a connected socket, and
 * block/nbd.c is the driver that moves requests over the connection.
 */
#ifndef QBLOCK_NBD_CLIENT_H
#define QBLOCK_NBD_CLIENT_H

#include "util/osdep.h"
#include "util/error.h"
#include "util/qdict.h"
#include "crypto/tls-session.h"

/* The port NBD servers listen on unless told otherwise (IANA). */
#define NBD_DEFAULT_PORT        "10809"

/* Option names of the driver (qapi/nbd.json). */
#define NBD_OPT_KEY_SERVER_TYPE "server.type"
#define NBD_OPT_KEY_SERVER_HOST "server.host"
#define NBD_OPT_KEY_SERVER_PORT "server.port"
#define NBD_OPT_KEY_SERVER_PATH "server.path"
#define NBD_OPT_KEY_EXPORT      "export"
#define NBD_OPT_KEY_TLS_CREDS   "tls-creds"
#define NBD_OPT_KEY_TLS_HOSTNAME "tls-hostname"
#define NBD_OPT_KEY_DIRTY_BITMAP "x-dirty-bitmap"
#define NBD_OPT_KEY_RECONNECT_DELAY "reconnect-delay"
#define NBD_OPT_KEY_OPEN_TIMEOUT "open-timeout"
#define NBD_OPT_KEY_REQUEST_TIMEOUT "x-request-timeout"

/*
 * Fills @options (server.*, export) from @filename, one of
 *   nbd[+tcp]://HOST[:PORT][/EXPORT]
 *   nbd+unix:///[EXPORT]?socket=PATH
 *   nbd:unix:PATH[:exportname=EXPORT]
 *   nbd:HOST:PORT[:exportname=EXPORT]
 * Percent escapes in a URI's export and socket are decoded.  Sets @errp
 * (naming @filename) when it is none of these.
 */
void nbd_client_parse_filename(const char *filename, QDict *options,
                               Error **errp);

/* What the handshake learnt about the export. */
typedef struct NBDExportInfo {
    uint64_t size;
    uint16_t flags;             /* NBD_FLAG_* transmission flags */
    bool structured_reply;      /* NBD_OPT_STRUCTURED_REPLY acknowledged */
    bool have_context;          /* the block status context was selected */
    uint32_t context_id;        /* its id, when have_context */
    /* NBD_INFO_BLOCK_SIZE, or 0 when the server sent none */
    uint32_t min_block;
    uint32_t opt_block;
    uint32_t max_block;
} NBDExportInfo;

/*
 * Negotiates @export_name on the connected, blocking socket @fd (fixed
 * newstyle: structured replies, the meta context @context for block
 * status, NBD_OPT_GO, or NBD_OPT_EXPORT_NAME with servers that know no
 * NBD_OPT_GO; or the oldstyle greeting of servers without options, which
 * serve one unnamed export).  On success the socket is in the
 * transmission phase.  Returns 0 or -errno with @errp naming what the
 * server refused or sent wrong.
 */
/* TLS for the handshake: none when @creds is NULL. */
typedef struct NBDClientTLS {
    QCryptoTLSCreds *creds;     /* endpoint=client */
    const char *hostname;       /* the server's, for its certificate */
} NBDClientTLS;

/*
 * With TLS, NBD_OPT_STARTTLS comes first and everything after it runs in
 * the TLS session, which *@sess gets (NULL without TLS); the caller
 * frees it after the socket.  The handshake must be over by @deadline
 * (g_get_monotonic_time(); 0: no limit), else it fails with -ETIMEDOUT
 * and @errp names the step it was at.
 */
int nbd_client_handshake(int fd, const char *export_name, const char *context,
                         const NBDClientTLS *tls, QCryptoTLSSession **sess,
                         NBDExportInfo *info, int64_t deadline, Error **errp);

#endif
