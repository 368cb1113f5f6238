/*
 * GnuTLS, loaded when the first TLS object (tls-creds-*,
 * tls-cipher-suites) is created rather than linked (util/lazy-lib.c).
 *
 * Linked, GnuTLS and what it links (p11-kit, libtasn1, libidn2, its
 * constructor reading the system's priority configuration) cost every
 * start of every program about 160 page faults and 4 ms
 * (docs/performance.md), whether it uses TLS or not.
 *
 * Every function of GnuTLS that crypto/ calls is listed here and called
 * through qtls_lib, e.g. qtls_lib.gnutls_handshake(...); a function
 * missing from the list fails to link, since the programs do not link
 * the library.  gnutls_free is a variable, not a function (gnutls.h):
 * its entry points at it, so it is called as (*qtls_lib.gnutls_free)(p).
 */
#ifndef QBLOCK_CRYPTO_TLS_LIB_H
#define QBLOCK_CRYPTO_TLS_LIB_H

#include "util/error.h"
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#define QTLS_LIB_FUNCS(F) \
    F(gnutls_anon_allocate_client_credentials) \
    F(gnutls_anon_allocate_server_credentials) \
    F(gnutls_anon_free_client_credentials) \
    F(gnutls_anon_free_server_credentials) \
    F(gnutls_anon_set_server_dh_params) \
    F(gnutls_anon_set_server_known_dh_params) F(gnutls_bye) \
    F(gnutls_certificate_allocate_credentials) \
    F(gnutls_certificate_free_credentials) F(gnutls_certificate_get_peers) \
    F(gnutls_certificate_server_set_request) \
    F(gnutls_certificate_set_x509_crl_file) \
    F(gnutls_certificate_set_x509_key_file2) \
    F(gnutls_certificate_set_x509_trust_file) \
    F(gnutls_certificate_verify_peers2) F(gnutls_cipher_suite_info) \
    F(gnutls_credentials_set) F(gnutls_deinit) F(gnutls_dh_params_deinit) \
    F(gnutls_dh_params_import_pkcs3) F(gnutls_dh_params_init) \
    F(gnutls_free) F(gnutls_handshake) F(gnutls_init) \
    F(gnutls_priority_deinit) F(gnutls_priority_get_cipher_suite_index) \
    F(gnutls_priority_init) F(gnutls_priority_set_direct) \
    F(gnutls_psk_allocate_client_credentials) \
    F(gnutls_psk_allocate_server_credentials) \
    F(gnutls_psk_free_client_credentials) \
    F(gnutls_psk_free_server_credentials) \
    F(gnutls_psk_server_get_username) F(gnutls_psk_set_client_credentials) \
    F(gnutls_psk_set_server_credentials_file) \
    F(gnutls_record_get_direction) F(gnutls_record_recv) \
    F(gnutls_record_send) F(gnutls_strerror) F(gnutls_transport_set_ptr) \
    F(gnutls_transport_set_push_function) \
    F(gnutls_x509_crt_check_hostname) F(gnutls_x509_crt_deinit) \
    F(gnutls_x509_crt_get_activation_time) \
    F(gnutls_x509_crt_get_basic_constraints) F(gnutls_x509_crt_get_dn) \
    F(gnutls_x509_crt_get_expiration_time) \
    F(gnutls_x509_crt_get_key_purpose_oid) \
    F(gnutls_x509_crt_get_key_usage) F(gnutls_x509_crt_import) \
    F(gnutls_x509_crt_init) F(gnutls_x509_crt_list_import2) \
    F(gnutls_x509_crt_list_verify)

typedef struct QTLSLib {
#define QTLS_LIB_POINTER(fn) __typeof__(fn) *fn;
    QTLS_LIB_FUNCS(QTLS_LIB_POINTER)
#undef QTLS_LIB_POINTER
} QTLSLib;

/* Valid once qtls_lib_load() has succeeded (as each TLS object is made). */
extern QTLSLib qtls_lib;

/*
 * Loads GnuTLS and resolves qtls_lib, the first time; true once that has
 * succeeded, else false with @errp saying what is missing.
 */
bool qtls_lib_load(Error **errp);

#endif
