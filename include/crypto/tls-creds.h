/*
 * TLS credentials: the tls-creds-x509 and tls-creds-psk object types
 * (--object, object-add), loaded with GnuTLS from a directory of files
 * named as QEMU names them:
 *
 *   tls-creds-x509  ca-cert.pem, ca-crl.pem (optional), server-cert.pem
 *                   and server-key.pem (endpoint=server), client-cert.pem
 *                   and client-key.pem (endpoint=client, optional)
 *   tls-creds-psk   keys.psk: lines of USERNAME:HEXKEY
 *
 * A user (an NBD server, the NBD client) takes the credentials by id
 * with qcrypto_tls_creds_get(), which holds a reference (object-del is
 * refused meanwhile), and gives them back with qcrypto_tls_creds_put().
 */
#ifndef QBLOCK_CRYPTO_TLS_CREDS_H
#define QBLOCK_CRYPTO_TLS_CREDS_H

#include "util/osdep.h"
#include "util/error.h"

typedef struct QCryptoTLSCreds QCryptoTLSCreds;

typedef enum QCryptoTLSCredsEndpoint {
    QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT,
    QCRYPTO_TLS_CREDS_ENDPOINT_SERVER,
} QCryptoTLSCredsEndpoint;

/*
 * The credentials object @id (either type), which must be for @endpoint;
 * NULL with @errp set (QEMU's messages) otherwise.
 */
QCryptoTLSCreds *qcrypto_tls_creds_get(const char *id,
                                       QCryptoTLSCredsEndpoint endpoint,
                                       Error **errp);
void qcrypto_tls_creds_put(QCryptoTLSCreds *creds);

const char *qcrypto_tls_creds_id(const QCryptoTLSCreds *creds);

#endif
