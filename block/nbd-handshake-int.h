/*
 * The option exchange of the NBD client's handshake, shared by the two
 * conversations it has with a server on a blocking socket:
 *
 *   nbd-handshake.c    negotiating one export for transmission
 *   nbd-list.c         listing the exports, then aborting
 *
 * Every call reads or writes the socket, or the TLS session once
 * NBD_OPT_STARTTLS has succeeded; every length the server sends is
 * checked before it is used.
 */
#ifndef QBLOCK_NBD_HANDSHAKE_INT_H
#define QBLOCK_NBD_HANDSHAKE_INT_H

#include "block/nbd-client.h"
#include "block/nbd-proto.h"

/* Where the handshake reads and writes: the socket, or TLS once started. */
typedef struct NBDHs {
    int fd;
    QCryptoTLSSession *tls;
    int64_t deadline;           /* g_get_monotonic_time(); 0: none */
} NBDHs;

/*
 * Reads @len bytes of @what (QEMU's names: "option reply", "export
 * length"); a failure reads as QEMU's.
 */
int nbd_hs_read(NBDHs *hs, void *buf, size_t len, const char *what,
                Error **errp);
int nbd_hs_send_option(NBDHs *hs, uint32_t opt, const void *data,
                       uint32_t len, Error **errp);
/*
 * Reads one reply to @opt, its header in host byte order; its payload
 * (NUL-terminated) goes to *@payload, which the caller frees.
 */
int nbd_hs_read_reply(NBDHs *hs, uint32_t opt, NBDOptionReply *rep,
                      uint8_t **payload, Error **errp);
/*
 * An error reply: QEMU's message for its type and the server's text;
 * @export_name stands in for a text the server did not send with
 * NBD_REP_ERR_UNKNOWN.  Returns -errno.
 */
int nbd_hs_reply_error(const NBDOptionReply *rep, const uint8_t *msg,
                       const char *export_name, Error **errp);
/*
 * The greeting: checks the server's magic and flags and answers with the
 * client's flags.  Returns 1 for an oldstyle server (which takes no
 * options: *@hs_flags is not set), 0 with the server's handshake flags
 * in *@hs_flags, or -errno.
 */
int nbd_hs_greeting(NBDHs *hs, uint16_t *hs_flags, Error **errp);
/*
 * NBD_OPT_STARTTLS, then the TLS handshake on the socket: from then on
 * @hs reads and writes TLS records.
 */
int nbd_hs_starttls(NBDHs *hs, const NBDClientTLS *tls, Error **errp);
/* NBD_OPT_STRUCTURED_REPLY: a refusal only leaves replies simple. */
int nbd_hs_structured_reply(NBDHs *hs, NBDExportInfo *info, Error **errp);
/* Appends option data that names an export: u32 length, name. */
void nbd_hs_put_name(GByteArray *buf, const char *name);
/*
 * Takes in one NBD_REP_INFO of NBD_OPT_GO or NBD_OPT_INFO; sets
 * *@have_export once the size and flags came.
 */
int nbd_hs_go_info(const uint8_t *p, uint32_t len, NBDExportInfo *info,
                   bool *have_export, Error **errp);

#endif
