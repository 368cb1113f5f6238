/*
 * NBD exports of the export layer (include/block/export.h), type "nbd",
 * and the one NBD server they are served on: what qemu-storage-daemon's
 * --nbd-server, nbd-server-start/-stop and block-export-add type=nbd
 * manage.  qblock-nbd drives the NBD server directly instead.
 */
#ifndef QBLOCK_NBD_EXPORT_H
#define QBLOCK_NBD_EXPORT_H

#include "util/sockets.h"

/*
 * Connections the daemon's NBD server serves at once unless
 * max-connections says otherwise: QEMU's default since 9.1
 * (CVE-2024-7409), as every connection costs a descriptor and buffer
 * memory (up to 64 MiB, see block/export/nbd-int.h).
 */
#define NBD_DEFAULT_MAX_CONNECTIONS 100

/*
 * Starts the server on @addr, serving at most @max_connections clients at
 * once (0: no limit), with TLS required when @tls_creds (the id of a
 * tls-creds-* object, endpoint=server) is not NULL, and each client's
 * identity checked by the authz-simple object @tls_authz if not NULL.
 * Errors: "NBD server already running", the credentials', or the
 * socket's.
 */
int nbd_export_server_start(const SocketAddress *addr,
                            unsigned int max_connections,
                            const char *tls_creds, const char *tls_authz,
                            Error **errp);
bool nbd_export_server_running(void);
/*
 * Removes every NBD export (their clients are disconnected, and
 * BLOCK_EXPORT_DELETED is sent for each) and frees the server.  Errors:
 * "NBD server not running".
 */
int nbd_export_server_stop(Error **errp);

#endif
