/*
 * What crypto/tls-creds.c and crypto/tls-session.c share: the loaded
 * credentials, immutable once created.
 */
#ifndef QBLOCK_CRYPTO_TLS_CREDS_INT_H
#define QBLOCK_CRYPTO_TLS_CREDS_INT_H

#include "crypto/tls-creds.h"
#include "tls-lib.h"
#include "util/json.h"
#include "util/user-object.h"

typedef enum QCryptoTLSCredsKind {
    QCRYPTO_TLS_CREDS_X509,
    QCRYPTO_TLS_CREDS_PSK,
    QCRYPTO_TLS_CREDS_ANON,     /* no identity: nothing to verify */
} QCryptoTLSCredsKind;

struct QCryptoTLSCreds {
    QCryptoTLSCredsKind kind;
    QCryptoTLSCredsEndpoint endpoint;
    bool verify_peer;
    char *id;
    char *priority;             /* GnuTLS priority string, or NULL */
    char *username;             /* PSK client: whose key */
    bool sanity_check;          /* x509: tls-creds-x509-check.c at load */
    char *passwordid;           /* x509: the secret of the key, or NULL */
    JsonObject *props;          /* as created: what qom-get shows */
    UserObject *obj;            /* set while a user holds a reference */
    gnutls_certificate_credentials_t x509;
    gnutls_psk_server_credentials_t psk_server;
    gnutls_psk_client_credentials_t psk_client;
    gnutls_anon_server_credentials_t anon_server;
    gnutls_anon_client_credentials_t anon_client;
    gnutls_dh_params_t dh_params;   /* anon server: dh-params.pem, or NULL */
};

#endif
