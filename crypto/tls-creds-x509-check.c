/*
 * The sanity check of x509 credentials (tls-creds-x509's sanity-check,
 * on by default), so that a certificate no peer would accept is refused
 * when the object is created, naming the file and the fault, instead of
 * failing each handshake later.
 *
 * The rules and messages are QEMU 7.2's, as observed by running its
 * qemu-storage-daemon on certificates made to break one rule each (our
 * own code, hence not GnuTLS's verification messages):
 *  - the endpoint's own certificate: within its validity period; not a
 *    CA; a critical key usage that allows digital signature; a critical
 *    key purpose that allows its end (TLS server or client);
 *  - each certificate of ca-cert.pem: within its validity period; basic
 *    constraints present and showing a CA; a critical key usage that
 *    allows certificate signing;
 *  - the own certificate verifies against the CA list.
 * A non-critical key usage or purpose is not enforced, nor is the CRL
 * (QEMU's neither).
 */
#include "util/osdep.h"

#include "tls-lib.h"

#include "tls-creds-x509-check.h"

static bool tls_check_times(gnutls_x509_crt_t cert, const char *what,
                            const char *path, Error **errp)
{
    time_t now = time(NULL);

    if (qtls_lib.gnutls_x509_crt_get_expiration_time(cert) < now) {
        error_setg(errp, "The %s certificate %s has expired", what, path);
        return false;
    }
    if (qtls_lib.gnutls_x509_crt_get_activation_time(cert) > now) {
        error_setg(errp, "The %s certificate %s is not yet active", what,
                   path);
        return false;
    }
    return true;
}

/* The key usage bits, or all of them where there is no critical one. */
static unsigned int tls_critical_key_usage(gnutls_x509_crt_t cert)
{
    unsigned int usage = 0, critical = 0;

    if (qtls_lib.gnutls_x509_crt_get_key_usage(cert, &usage,
                                               &critical) < 0 || !critical) {
        return ~0u;
    }
    return usage;
}

/*
 * Whether the key purposes allow @oid: there are none, none is critical,
 * or one of them is @oid.
 */
static bool tls_purpose_allows(gnutls_x509_crt_t cert, const char *oid)
{
    bool any_critical = false;

    for (unsigned int i = 0;; i++) {
        char buf[256];
        size_t size = sizeof(buf);
        unsigned int critical = 0;
        int ret = qtls_lib.gnutls_x509_crt_get_key_purpose_oid(cert, i, buf,
                                                               &size,
                                                               &critical);

        if (ret < 0) {
            /* the end of the list, or an OID too long to be @oid */
            if (ret != GNUTLS_E_SHORT_MEMORY_BUFFER) {
                return !any_critical;
            }
            continue;
        }
        if (!strcmp(buf, oid)) {
            return true;
        }
        any_critical |= critical != 0;
    }
}

static bool tls_check_own_cert(gnutls_x509_crt_t cert, bool server,
                               const char *path, Error **errp)
{
    const char *end = server ? "server" : "client";
    unsigned int critical = 0, ca = 0;
    int pathlen = -1;

    if (!tls_check_times(cert, end, path, errp)) {
        return false;
    }
    if (qtls_lib.gnutls_x509_crt_get_basic_constraints(cert, &critical, &ca,
                                                       &pathlen) >= 0 && ca) {
        error_setg(errp, "The certificate %s basic constraints show a CA, "
                   "but we need one for a %s", path, end);
        return false;
    }
    if (!(tls_critical_key_usage(cert) & GNUTLS_KEY_DIGITAL_SIGNATURE)) {
        error_setg(errp, "Certificate %s usage does not permit digital "
                   "signature", path);
        return false;
    }
    if (!tls_purpose_allows(cert, server ? GNUTLS_KP_TLS_WWW_SERVER
                                         : GNUTLS_KP_TLS_WWW_CLIENT)) {
        error_setg(errp, "Certificate %s purpose does not allow use with a "
                   "TLS %s", path, end);
        return false;
    }
    return true;
}

static bool tls_check_ca_cert(gnutls_x509_crt_t cert, const char *path,
                              Error **errp)
{
    unsigned int critical = 0, ca = 0;
    int pathlen = -1;

    if (!tls_check_times(cert, "CA", path, errp)) {
        return false;
    }
    if (qtls_lib.gnutls_x509_crt_get_basic_constraints(cert, &critical, &ca,
                                                       &pathlen) < 0) {
        error_setg(errp, "The certificate %s is missing basic constraints "
                   "for a CA", path);
        return false;
    }
    if (!ca) {
        error_setg(errp, "The certificate %s basic constraints do not show "
                   "a CA", path);
        return false;
    }
    if (!(tls_critical_key_usage(cert) & GNUTLS_KEY_KEY_CERT_SIGN)) {
        error_setg(errp, "Certificate %s usage does not permit certificate "
                   "signing", path);
        return false;
    }
    return true;
}

/* Why a verification failed, for the bits of @status that say it. */
static const char *tls_verify_reason(unsigned int status)
{
    if (status & GNUTLS_CERT_SIGNER_NOT_FOUND) {
        return "The certificate hasn't got a known issuer";  /* QEMU's */
    }
    if (status & GNUTLS_CERT_REVOKED) {
        return "The certificate has been revoked";
    }
    if (status & GNUTLS_CERT_SIGNER_NOT_CA) {
        return "The certificate's issuer is not a CA";
    }
    if (status & GNUTLS_CERT_INSECURE_ALGORITHM) {
        return "The certificate uses an insecure algorithm";
    }
    return "The certificate is not trusted";
}

/* Reads the PEM file @path into @data (g_free() it), or sets @errp. */
static bool tls_read_pem(const char *path, gnutls_datum_t *data,
                         Error **errp)
{
    g_autoptr(GError) gerr = NULL;
    gchar *contents;
    gsize len;

    if (!g_file_get_contents(path, &contents, &len, &gerr)) {
        error_setg(errp, "Cannot read %s: %s", path, gerr->message);
        return false;
    }
    data->data = (unsigned char *)contents;
    data->size = len;
    return true;
}

int tls_creds_x509_sanity_check(bool server, const char *ca_path,
                                const char *cert_path, Error **errp)
{
    gnutls_x509_crt_t cert = NULL;
    gnutls_x509_crt_t *cas = NULL;
    unsigned int ncas = 0;
    gnutls_datum_t data;
    int ret = -EINVAL;

    if (cert_path) {
        if (!tls_read_pem(cert_path, &data, errp)) {
            return -EINVAL;
        }
        ret = qtls_lib.gnutls_x509_crt_init(&cert);
        if (ret >= 0) {
            ret = qtls_lib.gnutls_x509_crt_import(cert, &data,
                                                  GNUTLS_X509_FMT_PEM);
        }
        g_free(data.data);
        if (ret < 0) {
            error_setg(errp, "Unable to import %s certificate %s: %s",
                       server ? "server" : "client", cert_path,
                       qtls_lib.gnutls_strerror(ret));
            ret = -EINVAL;
            goto out;
        }
        ret = -EINVAL;
        if (!tls_check_own_cert(cert, server, cert_path, errp)) {
            goto out;
        }
    }
    if (ca_path) {
        if (!tls_read_pem(ca_path, &data, errp)) {
            goto out;
        }
        if (qtls_lib.gnutls_x509_crt_list_import2(&cas, &ncas, &data,
                                                  GNUTLS_X509_FMT_PEM, 0) < 0) {
            g_free(data.data);
            error_setg(errp, "Unable to import CA certificate list %s",
                       ca_path);
            goto out;
        }
        g_free(data.data);
        for (unsigned int i = 0; i < ncas; i++) {
            if (!tls_check_ca_cert(cas[i], ca_path, errp)) {
                goto out;
            }
        }
    }
    if (cert && ncas) {
        unsigned int status = 0;

        if (qtls_lib.gnutls_x509_crt_list_verify(&cert, 1, cas, ncas, NULL,
                                                 0, 0, &status) < 0 ||
            status) {
            error_setg(errp, "Our own certificate %s failed validation "
                       "against %s: %s", cert_path, ca_path,
                       tls_verify_reason(status));
            goto out;
        }
    }
    ret = 0;
out:
    if (cert) {
        qtls_lib.gnutls_x509_crt_deinit(cert);
    }
    for (unsigned int i = 0; i < ncas; i++) {
        qtls_lib.gnutls_x509_crt_deinit(cas[i]);
    }
    (*qtls_lib.gnutls_free)(cas);
    return ret;
}
