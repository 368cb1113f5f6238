/*
 * TLS under a CoSocket (see include/util/co-socket-tls.h).  The session
 * reads and writes the non-blocking fd itself; -EAGAIN sends the
 * CoSocket's loops to wait for the fd as they do for recv and sendmsg.
 */
#include "util/osdep.h"
#include "util/co-socket-tls.h"

static ssize_t co_socket_tls_read(void *opaque, void *buf, size_t len)
{
    return qcrypto_tls_session_read(opaque, buf, len);
}

static ssize_t co_socket_tls_write(void *opaque, const void *buf, size_t len)
{
    return qcrypto_tls_session_write(opaque, buf, len);
}

static const CoSocketFilter co_socket_tls_filter = {
    .read = co_socket_tls_read,
    .write = co_socket_tls_write,
};

void co_socket_set_tls(CoSocket *sock, QCryptoTLSSession *sess)
{
    co_socket_set_filter(sock, &co_socket_tls_filter, sess);
}

int coroutine_fn co_socket_tls_handshake(CoSocket *sock,
                                         QCryptoTLSSession *sess,
                                         Error **errp)
{
    int ret;

    while ((ret = qcrypto_tls_session_handshake(sess, errp)) == -EAGAIN) {
        if (sock->shut_down) {
            return -ESHUTDOWN;
        }
        co_socket_wait_fd(sock, qcrypto_tls_session_wants_write(sess) ?
                                CO_SOCKET_WRITE : CO_SOCKET_READ);
    }
    if (ret == 0) {
        co_socket_set_tls(sock, sess);
    }
    return ret;
}
