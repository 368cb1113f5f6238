/*
 * TLS sessions over GnuTLS (see include/crypto/tls-session.h).
 *
 * The peer check after the handshake is QEMU's, with its messages, since
 * scripts and iotest 233 compare them: x509 credentials with verify-peer
 * check the chain against the CA, each certificate's dates, and on the
 * client end the server's name against @hostname; PSK needs no check
 * beyond the handshake itself (a wrong key fails it), and anonymous
 * credentials have nothing to check (verify-peer is a no-op, as QEMU's).
 */
#include "util/osdep.h"

#include <sys/socket.h>

#include "crypto/tls-authz.h"
#include "crypto/tls-session.h"
#include "tls-creds-int.h"

struct QCryptoTLSSession {
    QCryptoTLSCreds *creds;     /* borrowed: the user holds a reference */
    gnutls_session_t s;
    char *hostname;
    char *authz_id;             /* server: who may connect, or NULL */
    bool handshake_done;
};

/*
 * QEMU's priorities: GnuTLS's defaults, and the PSK key exchanges, or
 * anonymous Diffie-Hellman (a qemu-nbd anon server refuses a client that
 * offers only ANON-ECDH: it adds ANON-DH alone).
 */
#define TLS_PRIORITY_DEFAULT    "NORMAL"
#define TLS_PRIORITY_PSK_EXTRA  ":+ECDHE-PSK:+DHE-PSK:+PSK"
#define TLS_PRIORITY_ANON_EXTRA ":+ANON-DH"

/*
 * GnuTLS's own push is a plain send(): a peer that has gone (an NBD
 * server closes at once after NBD_CMD_DISC) would kill the process with
 * SIGPIPE.  Reads keep GnuTLS's recv() on the same descriptor.
 */
static ssize_t tls_session_push(gnutls_transport_ptr_t ptr, const void *buf,
                                size_t len)
{
    return send((int)(intptr_t)ptr, buf, len, MSG_NOSIGNAL);
}

QCryptoTLSSession *qcrypto_tls_session_new(QCryptoTLSCreds *creds,
                                           const char *hostname, int fd,
                                           Error **errp)
{
    bool server = creds->endpoint == QCRYPTO_TLS_CREDS_ENDPOINT_SERVER;
    QCryptoTLSSession *sess = g_new0(QCryptoTLSSession, 1);
    g_autofree char *prio = NULL;
    const char *err_pos = NULL;
    int ret;

    sess->creds = creds;
    sess->hostname = g_strdup(hostname);
    ret = qtls_lib.gnutls_init(&sess->s,
                               server ? GNUTLS_SERVER : GNUTLS_CLIENT);
    if (ret < 0) {
        error_setg(errp, "Cannot initialize TLS session: %s",
                   qtls_lib.gnutls_strerror(ret));
        g_free(sess->hostname);
        g_free(sess);
        return NULL;
    }
    prio = g_strconcat(creds->priority ?: TLS_PRIORITY_DEFAULT,
                       creds->kind == QCRYPTO_TLS_CREDS_PSK ?
                       TLS_PRIORITY_PSK_EXTRA :
                       creds->kind == QCRYPTO_TLS_CREDS_ANON ?
                       TLS_PRIORITY_ANON_EXTRA : "", NULL);
    ret = qtls_lib.gnutls_priority_set_direct(sess->s, prio, &err_pos);
    if (ret < 0) {
        error_setg(errp, "Unable to set TLS session priority %s: %s", prio,
                   qtls_lib.gnutls_strerror(ret));
        goto fail;
    }
    if (creds->kind == QCRYPTO_TLS_CREDS_X509) {
        ret = qtls_lib.gnutls_credentials_set(sess->s, GNUTLS_CRD_CERTIFICATE,
                                              creds->x509);
        if (ret >= 0 && server && creds->verify_peer) {
            qtls_lib.gnutls_certificate_server_set_request(sess->s,
                                                           GNUTLS_CERT_REQUEST);
        }
    } else if (creds->kind == QCRYPTO_TLS_CREDS_ANON) {
        ret = qtls_lib.gnutls_credentials_set(
            sess->s, GNUTLS_CRD_ANON, server ? (void *)creds->anon_server
                                             : (void *)creds->anon_client);
    } else {
        ret = qtls_lib.gnutls_credentials_set(
            sess->s, GNUTLS_CRD_PSK, server ? (void *)creds->psk_server
                                            : (void *)creds->psk_client);
    }
    if (ret < 0) {
        error_setg(errp, "Cannot set session credentials: %s",
                   qtls_lib.gnutls_strerror(ret));
        goto fail;
    }
    qtls_lib.gnutls_transport_set_ptr(sess->s,
                                      (gnutls_transport_ptr_t)(intptr_t)fd);
    qtls_lib.gnutls_transport_set_push_function(sess->s, tls_session_push);
    return sess;

fail:
    qcrypto_tls_session_free(sess);
    return NULL;
}

void qcrypto_tls_session_free(QCryptoTLSSession *sess)
{
    if (sess) {
        qtls_lib.gnutls_deinit(sess->s);
        g_free(sess->hostname);
        g_free(sess->authz_id);
        g_free(sess);
    }
}

void qcrypto_tls_session_set_authz(QCryptoTLSSession *sess,
                                   const char *authz_id)
{
    g_free(sess->authz_id);
    sess->authz_id = g_strdup(authz_id);
}

/* The peer's identity against the authorization object (QEMU's words). */
static int tls_session_check_authz(QCryptoTLSSession *sess,
                                   const char *kind, const char *identity,
                                   Error **errp)
{
    Error *local_err = NULL;

    if (qauthz_is_allowed_by_id(sess->authz_id, identity, &local_err)) {
        return 0;
    }
    if (local_err) {
        error_propagate(errp, local_err);
    } else {
        error_setg(errp, "TLS %s authz check for %s is denied", kind,
                   identity);
    }
    return -EACCES;
}

/* QEMU's reason for a failed chain verification: the last that applies. */
static const char *tls_session_status_reason(unsigned int status)
{
    const char *reason = "The certificate is not trusted";

    if (status & GNUTLS_CERT_SIGNER_NOT_FOUND) {
        reason = "The certificate hasn't got a known issuer";
    }
    if (status & GNUTLS_CERT_REVOKED) {
        reason = "The certificate has been revoked";
    }
    if (status & GNUTLS_CERT_INSECURE_ALGORITHM) {
        reason = "The certificate uses an insecure algorithm";
    }
    return reason;
}

/* The dates of one peer certificate, and the server's name on it. */
static int tls_session_check_cert(QCryptoTLSSession *sess,
                                  const gnutls_datum_t *der, bool first,
                                  Error **errp)
{
    bool client = sess->creds->endpoint == QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT;
    gnutls_x509_crt_t cert;
    time_t now = time(NULL);
    int ret = -EPROTO;

    if (qtls_lib.gnutls_x509_crt_init(&cert) < 0) {
        error_setg(errp, "Cannot initialize certificate");
        return -ENOMEM;
    }
    if (qtls_lib.gnutls_x509_crt_import(cert, der, GNUTLS_X509_FMT_DER) < 0) {
        error_setg(errp, "Cannot import certificate");
    } else if (qtls_lib.gnutls_x509_crt_get_expiration_time(cert) < now) {
        error_setg(errp, "The certificate has expired");
    } else if (qtls_lib.gnutls_x509_crt_get_activation_time(cert) > now) {
        error_setg(errp, "The certificate is not yet activated");
    } else if (first && !client && sess->authz_id) {
        g_autofree char *dn = NULL;
        size_t len = 0;

        /* the first call says how long the name is */
        qtls_lib.gnutls_x509_crt_get_dn(cert, NULL, &len);
        dn = g_malloc0(len + 1);
        if (qtls_lib.gnutls_x509_crt_get_dn(cert, dn, &len) < 0) {
            error_setg(errp, "Cannot get client distinguished name");
        } else {
            ret = tls_session_check_authz(sess, "x509", dn, errp);
        }
    } else if (first && client && !sess->hostname) {
        error_setg(errp, "No hostname for certificate validation");
    } else if (first && client &&
               !qtls_lib.gnutls_x509_crt_check_hostname(cert, sess->hostname)) {
        error_setg(errp, "Certificate does not match the hostname %s",
                   sess->hostname);
    } else {
        ret = 0;
    }
    qtls_lib.gnutls_x509_crt_deinit(cert);
    return ret;
}

static int tls_session_check_peer(QCryptoTLSSession *sess, Error **errp)
{
    const gnutls_datum_t *certs;
    unsigned int status, n;
    int ret;

    if (sess->creds->kind == QCRYPTO_TLS_CREDS_ANON) {
        return 0;   /* QEMU's: no identity, so no authz check either */
    }
    if (sess->creds->kind == QCRYPTO_TLS_CREDS_PSK) {
        const char *user = qtls_lib.gnutls_psk_server_get_username(sess->s);

        if (!sess->authz_id ||
            sess->creds->endpoint != QCRYPTO_TLS_CREDS_ENDPOINT_SERVER) {
            return 0;
        }
        if (!user) {
            error_setg(errp, "No PSK username for authorization");
            return -EACCES;
        }
        return tls_session_check_authz(sess, "PSK", user, errp);
    }
    if (!sess->creds->verify_peer) {
        if (sess->authz_id) {
            /* QEMU's words: there is no identity to authorize */
            error_setg(errp, "TLS x509 authz check requires verify-peer");
            return -EACCES;
        }
        return 0;
    }
    ret = qtls_lib.gnutls_certificate_verify_peers2(sess->s, &status);
    if (ret < 0) {
        error_setg(errp, "Verify failed: %s", qtls_lib.gnutls_strerror(ret));
        return -EPROTO;
    }
    if (status) {
        error_setg(errp, "%s", tls_session_status_reason(status));
        return -EPROTO;
    }
    certs = qtls_lib.gnutls_certificate_get_peers(sess->s, &n);
    if (!certs || !n) {
        error_setg(errp, "No certificate peers");
        return -EPROTO;
    }
    for (unsigned int i = 0; i < n; i++) {
        ret = tls_session_check_cert(sess, &certs[i], i == 0, errp);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

int qcrypto_tls_session_handshake(QCryptoTLSSession *sess, Error **errp)
{
    int ret;

    if (sess->handshake_done) {
        return 0;
    }
    ret = qtls_lib.gnutls_handshake(sess->s);
    if (ret == GNUTLS_E_AGAIN || ret == GNUTLS_E_INTERRUPTED) {
        return -EAGAIN;
    }
    if (ret < 0) {
        error_setg(errp, "TLS handshake failed: %s",
                   qtls_lib.gnutls_strerror(ret));
        return -EPROTO;
    }
    ret = tls_session_check_peer(sess, errp);
    if (ret < 0) {
        return ret;
    }
    sess->handshake_done = true;
    return 0;
}

int qcrypto_tls_session_handshake_sync(QCryptoTLSSession *sess,
                                       Error **errp)
{
    int ret;

    do {
        ret = qcrypto_tls_session_handshake(sess, errp);
    } while (ret == -EAGAIN);
    return ret;
}

bool qcrypto_tls_session_wants_write(QCryptoTLSSession *sess)
{
    return qtls_lib.gnutls_record_get_direction(sess->s) == 1;
}

static ssize_t tls_session_ret(ssize_t ret)
{
    if (ret >= 0) {
        return ret;
    }
    if (ret == GNUTLS_E_AGAIN || ret == GNUTLS_E_INTERRUPTED) {
        return -EAGAIN;
    }
    /* QEMU's errnos, which its messages (and so ours) show */
    if (ret == GNUTLS_E_PREMATURE_TERMINATION) {
        return -ECONNABORTED;
    }
    return -EIO;
}

ssize_t qcrypto_tls_session_read(QCryptoTLSSession *sess, void *buf,
                                 size_t len)
{
    return tls_session_ret(qtls_lib.gnutls_record_recv(sess->s, buf, len));
}

ssize_t qcrypto_tls_session_write(QCryptoTLSSession *sess, const void *buf,
                                  size_t len)
{
    return tls_session_ret(qtls_lib.gnutls_record_send(sess->s, buf, len));
}

void qcrypto_tls_session_bye(QCryptoTLSSession *sess)
{
    /* GNUTLS_SHUT_WR waits for nothing from the peer */
    qtls_lib.gnutls_bye(sess->s, GNUTLS_SHUT_WR);
}
