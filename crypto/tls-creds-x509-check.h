/*
 * The sanity check of x509 credentials (tls-creds-x509-check.c).
 */
#ifndef QBLOCK_CRYPTO_TLS_CREDS_X509_CHECK_H
#define QBLOCK_CRYPTO_TLS_CREDS_X509_CHECK_H

#include "util/error.h"

/*
 * Checks the endpoint's certificate @cert_path (NULL: none) and the CA
 * certificates of @ca_path (NULL: none), both PEM files, as QEMU's
 * sanity-check does for a @server or a client.  0, or -EINVAL with
 * @errp set to what is wrong with which file.
 */
int tls_creds_x509_sanity_check(bool server, const char *ca_path,
                                const char *cert_path, Error **errp);

#endif
