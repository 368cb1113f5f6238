/*
 * TLS under a CoSocket: a crypto/tls-session.h session as the socket's
 * filter, so that everything the socket's users read and write (an NBD
 * server's options and requests, the NBD client's requests) is a TLS
 * record, without those users knowing.
 */
#ifndef QBLOCK_CO_SOCKET_TLS_H
#define QBLOCK_CO_SOCKET_TLS_H

#include "util/co-socket.h"
#include "crypto/tls-session.h"

/*
 * Runs the handshake of @sess (whose fd is @sock's) in the calling
 * coroutine, yielding while the fd is not ready, then makes @sess the
 * filter of @sock.  Returns 0, -ESHUTDOWN if the socket was shut down
 * meanwhile, or -EPROTO with @errp set.
 */
int coroutine_fn co_socket_tls_handshake(CoSocket *sock,
                                         QCryptoTLSSession *sess,
                                         Error **errp);

/* Makes @sess, whose handshake is done, the filter of @sock. */
void co_socket_set_tls(CoSocket *sock, QCryptoTLSSession *sess);

#endif
