/*
 * A TLS session (GnuTLS) over a connected socket's fd, for either end:
 * the handshake, the check of the peer QEMU makes (the certificate chain,
 * its dates, the server's name), and records read and written.
 *
 * The fd may be blocking (the NBD client's handshake runs in a worker
 * thread) or not (util/co-socket-tls.c puts a session under a CoSocket):
 * every call that would block a non-blocking fd returns -EAGAIN, and
 * qcrypto_tls_session_direction() says what to wait for.
 *
 * A session belongs to one thread at a time.
 */
#ifndef QBLOCK_CRYPTO_TLS_SESSION_H
#define QBLOCK_CRYPTO_TLS_SESSION_H

#include "crypto/tls-creds.h"

typedef struct QCryptoTLSSession QCryptoTLSSession;

/*
 * A session with @creds (their endpoint says which end) on @fd.
 * @hostname: the name the server's certificate must carry (client end
 * only; NULL where none is known, which x509 verification refuses).
 */
QCryptoTLSSession *qcrypto_tls_session_new(QCryptoTLSCreds *creds,
                                           const char *hostname, int fd,
                                           Error **errp);
void qcrypto_tls_session_free(QCryptoTLSSession *sess);
/*
 * Server end: after the handshake, let the peer in only if the
 * authorization object @authz_id allows its identity (the client
 * certificate's distinguished name, or its PSK user name).
 */
void qcrypto_tls_session_set_authz(QCryptoTLSSession *sess,
                                   const char *authz_id);

/*
 * One step of the handshake: 0 once it is done and the peer checked,
 * -EAGAIN to call again when the fd is ready, or -EPROTO with @errp set
 * (QEMU's messages: "TLS handshake failed: ...", the certificate's
 * fault).
 */
int qcrypto_tls_session_handshake(QCryptoTLSSession *sess, Error **errp);
/* The handshake to its end on a blocking fd. */
int qcrypto_tls_session_handshake_sync(QCryptoTLSSession *sess,
                                       Error **errp);
/* After -EAGAIN: whether the session waits to write (else to read). */
bool qcrypto_tls_session_wants_write(QCryptoTLSSession *sess);

/*
 * Records: bytes read (0 at a clean end of the stream) or written,
 * -EAGAIN, -ECONNABORTED for a peer that left without closing the
 * session, or -EIO for another fault.
 */
ssize_t qcrypto_tls_session_read(QCryptoTLSSession *sess, void *buf,
                                 size_t len);
ssize_t qcrypto_tls_session_write(QCryptoTLSSession *sess, const void *buf,
                                  size_t len);
/* Tells the peer the session ends (best effort, never blocks long). */
void qcrypto_tls_session_bye(QCryptoTLSSession *sess);

#endif
