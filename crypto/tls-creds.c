/*
 * The tls-creds-x509, tls-creds-psk and tls-creds-anon object types (see
 * include/crypto/tls-creds.h): GnuTLS credentials loaded once, when the
 * object is created, so that a missing or unreadable file is an error of
 * --object / object-add that names the file, not of a later connection.
 */
#include "util/osdep.h"


#include "crypto/secret.h"
#include "tls-creds-int.h"
#include "tls-creds-x509-check.h"
#include "util/json.h"

#define TLS_CREDS_X509_TYPE "tls-creds-x509"
#define TLS_CREDS_PSK_TYPE  "tls-creds-psk"
#define TLS_CREDS_ANON_TYPE "tls-creds-anon"

/* QEMU's file names in the credentials directory. */
#define TLS_CA_CERT         "ca-cert.pem"
#define TLS_CA_CRL          "ca-crl.pem"
#define TLS_SERVER_CERT     "server-cert.pem"
#define TLS_SERVER_KEY      "server-key.pem"
#define TLS_CLIENT_CERT     "client-cert.pem"
#define TLS_CLIENT_KEY      "client-key.pem"
#define TLS_PSK_FILE        "keys.psk"
#define TLS_DH_PARAMS       "dh-params.pem"
/* QEMU's default PSK user name */
#define TLS_PSK_DEFAULT_USERNAME "qemu"

/*
 * The path of @name in @dir, or NULL if it cannot be read: an error
 * (QEMU's words) when @required, silently otherwise.
 */
static char *tls_creds_path(const char *dir, const char *name,
                            bool required, Error **errp)
{
    char *path = g_build_filename(dir, name, NULL);

    if (access(path, R_OK) < 0) {
        if (required || errno != ENOENT) {
            error_setg_errno(errp, errno, "Unable to access credentials %s",
                             path);
        }
        g_free(path);
        return NULL;
    }
    return path;
}

/*
 * The endpoint's certificate @cert and key @key (NULL: none, a client's
 * option), the key decrypted with the secret passwordid names, if any.
 */
static int tls_creds_load_key_pair(QCryptoTLSCreds *creds, const char *cert,
                                   const char *key, Error **errp)
{
    char *password = NULL;
    int ret;

    if (!cert) {
        return 0;
    }
    if (creds->passwordid) {
        password = crypto_secret_lookup_as_utf8(creds->passwordid, errp);
        if (!password) {
            return -EINVAL;
        }
    }
    ret = qtls_lib.gnutls_certificate_set_x509_key_file2(
        creds->x509, cert, key, GNUTLS_X509_FMT_PEM, password, 0);
    crypto_secret_free_str(password);
    if (ret < 0) {
        error_setg(errp, "Cannot load certificate '%s' & key '%s': %s",
                   cert, key, qtls_lib.gnutls_strerror(ret));
        return -EINVAL;
    }
    return 0;
}

/* A gnutls loader of a PEM file into x509 credentials (CA, CRL). */
typedef int TlsCredsPemLoader(gnutls_certificate_credentials_t x509,
                              const char *path, gnutls_x509_crt_fmt_t type);

/*
 * Loads @path, unless it is NULL (an optional file that is absent), with
 * @load; @what names the file in the error ("CA certificate").
 */
static int tls_creds_load_pem(QCryptoTLSCreds *creds, TlsCredsPemLoader *load,
                              const char *what, const char *path,
                              Error **errp)
{
    int ret;

    if (!path) {
        return 0;
    }
    ret = load(creds->x509, path, GNUTLS_X509_FMT_PEM);
    if (ret < 0) {
        error_setg(errp, "Cannot load %s '%s': %s", what, path,
                   qtls_lib.gnutls_strerror(ret));
        return -EINVAL;
    }
    return 0;
}

static int tls_creds_load_x509(QCryptoTLSCreds *creds, const char *dir,
                               Error **errp)
{
    bool server = creds->endpoint == QCRYPTO_TLS_CREDS_ENDPOINT_SERVER;
    g_autofree char *ca = NULL;
    g_autofree char *crl = NULL;
    g_autofree char *cert = NULL;
    g_autofree char *key = NULL;
    Error *local_err = NULL;
    int ret;

    ret = qtls_lib.gnutls_certificate_allocate_credentials(&creds->x509);
    if (ret < 0) {
        error_setg(errp, "Cannot allocate credentials: %s",
                   qtls_lib.gnutls_strerror(ret));
        return -ENOMEM;
    }
    /* a client checks the server, a server only the clients it verifies */
    ca = tls_creds_path(dir, TLS_CA_CERT, !server || creds->verify_peer,
                        &local_err);
    if (!local_err) {
        crl = tls_creds_path(dir, TLS_CA_CRL, false, &local_err);
    }
    /* a server's certificate is required, a client's is optional */
    if (!local_err) {
        cert = tls_creds_path(dir, server ? TLS_SERVER_CERT : TLS_CLIENT_CERT,
                              server, &local_err);
    }
    if (!local_err && cert) {
        key = tls_creds_path(dir, server ? TLS_SERVER_KEY : TLS_CLIENT_KEY,
                             true, &local_err);
    }
    if (local_err) {
        error_propagate(errp, local_err);
        return -EINVAL;
    }
    if (creds->sanity_check &&
        tls_creds_x509_sanity_check(server, ca, cert, errp) < 0) {
        return -EINVAL;
    }
    if (tls_creds_load_pem(creds,
                           qtls_lib.gnutls_certificate_set_x509_trust_file,
                           "CA certificate", ca, errp) < 0 ||
        tls_creds_load_pem(creds,
                           qtls_lib.gnutls_certificate_set_x509_crl_file,
                           "CRL", crl, errp) < 0) {
        return -EINVAL;
    }
    return tls_creds_load_key_pair(creds, cert, key, errp);
}

/* The client's key: the line "USERNAME:HEXKEY" of keys.psk. */
static int tls_creds_load_psk_client(QCryptoTLSCreds *creds,
                                     const char *path, Error **errp)
{
    g_autofree char *content = NULL;
    g_auto(GStrv) lines = NULL;
    GError *gerr = NULL;
    size_t ulen = strlen(creds->username);
    int ret = -ENOENT;

    if (!g_file_get_contents(path, &content, NULL, &gerr)) {
        error_setg(errp, "Cannot read PSK file %s: %s", path, gerr->message);
        g_error_free(gerr);
        return -EINVAL;
    }
    lines = g_strsplit(content, "\n", -1);
    for (char **l = lines; *l && ret == -ENOENT; l++) {
        gnutls_datum_t key;

        if (strncmp(*l, creds->username, ulen) || (*l)[ulen] != ':') {
            continue;
        }
        key.data = (unsigned char *)*l + ulen + 1;
        key.size = strlen((char *)key.data);
        ret = qtls_lib.gnutls_psk_set_client_credentials(creds->psk_client,
                                                         creds->username, &key,
                                                         GNUTLS_PSK_KEY_HEX);
        if (ret < 0) {
            error_setg(errp, "Cannot set PSK client credentials: %s",
                       qtls_lib.gnutls_strerror(ret));
            ret = -EINVAL;
        }
    }
    explicit_bzero(content, strlen(content));
    if (ret == -ENOENT) {
        error_setg(errp, "Username %s not found in PSK file %s",
                   creds->username, path);
        return -EINVAL;
    }
    return ret;
}

static int tls_creds_load_psk(QCryptoTLSCreds *creds, const char *dir,
                              Error **errp)
{
    g_autofree char *path = tls_creds_path(dir, TLS_PSK_FILE, true, errp);
    int ret;

    if (!path) {
        return -EINVAL;
    }
    if (creds->endpoint == QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT) {
        ret = qtls_lib.gnutls_psk_allocate_client_credentials(
            &creds->psk_client);
        if (ret < 0) {
            error_setg(errp, "Cannot allocate credentials: %s",
                       qtls_lib.gnutls_strerror(ret));
            return -ENOMEM;
        }
        return tls_creds_load_psk_client(creds, path, errp);
    }
    ret = qtls_lib.gnutls_psk_allocate_server_credentials(&creds->psk_server);
    if (ret == 0) {
        ret = qtls_lib.gnutls_psk_set_server_credentials_file(
            creds->psk_server, path);
    }
    if (ret < 0) {
        error_setg(errp, "Cannot set PSK server credentials from %s: %s",
                   path, qtls_lib.gnutls_strerror(ret));
        return -EINVAL;
    }
    return 0;
}

/* A server's PKCS#3 Diffie-Hellman parameters, QEMU's message. */
static int tls_creds_load_dh_params(QCryptoTLSCreds *creds, const char *path,
                                    Error **errp)
{
    g_autofree char *content = NULL;
    GError *gerr = NULL;
    gnutls_datum_t pem;
    gsize len;
    int ret;

    if (!g_file_get_contents(path, &content, &len, &gerr)) {
        error_setg(errp, "Unable to load DH parameters from %s: %s", path,
                   gerr->message);
        g_error_free(gerr);
        return -EINVAL;
    }
    pem.data = (unsigned char *)content;
    pem.size = len;
    ret = qtls_lib.gnutls_dh_params_init(&creds->dh_params);
    if (ret == 0) {
        ret = qtls_lib.gnutls_dh_params_import_pkcs3(creds->dh_params, &pem,
                                                     GNUTLS_X509_FMT_PEM);
    }
    if (ret < 0) {
        error_setg(errp, "Unable to load DH parameters from %s: %s", path,
                   qtls_lib.gnutls_strerror(ret));
        return -EINVAL;
    }
    qtls_lib.gnutls_anon_set_server_dh_params(creds->anon_server,
                                              creds->dh_params);
    return 0;
}

/*
 * A client needs nothing; a server takes DIR/dh-params.pem if it exists.
 * Without it QEMU generates parameters (seconds of CPU); GnuTLS's known
 * RFC 7919 groups are as good and cost nothing.
 */
static int tls_creds_load_anon(QCryptoTLSCreds *creds, const char *dir,
                               Error **errp)
{
    Error *local_err = NULL;
    g_autofree char *path = NULL;
    int ret;

    if (creds->endpoint == QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT) {
        ret = qtls_lib.gnutls_anon_allocate_client_credentials(
            &creds->anon_client);
    } else {
        ret = qtls_lib.gnutls_anon_allocate_server_credentials(
            &creds->anon_server);
    }
    if (ret < 0) {
        error_setg(errp, "Cannot allocate credentials: %s",
                   qtls_lib.gnutls_strerror(ret));
        return -ENOMEM;
    }
    if (creds->endpoint == QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT) {
        return 0;
    }
    path = dir ? tls_creds_path(dir, TLS_DH_PARAMS, false, &local_err)
               : NULL;
    if (local_err) {
        error_propagate(errp, local_err);
        return -EINVAL;
    }
    if (path) {
        return tls_creds_load_dh_params(creds, path, errp);
    }
    ret = qtls_lib.gnutls_anon_set_server_known_dh_params(
        creds->anon_server, GNUTLS_SEC_PARAM_MEDIUM);
    if (ret < 0) {
        error_setg(errp, "Cannot set DH parameters: %s",
                   qtls_lib.gnutls_strerror(ret));
        return -EINVAL;
    }
    return 0;
}

static void tls_creds_destroy(void *state)
{
    QCryptoTLSCreds *creds = state;

    if (creds->x509) {
        qtls_lib.gnutls_certificate_free_credentials(creds->x509);
    }
    if (creds->psk_server) {
        qtls_lib.gnutls_psk_free_server_credentials(creds->psk_server);
    }
    if (creds->psk_client) {
        qtls_lib.gnutls_psk_free_client_credentials(creds->psk_client);
    }
    if (creds->anon_server) {
        qtls_lib.gnutls_anon_free_server_credentials(creds->anon_server);
    }
    if (creds->anon_client) {
        qtls_lib.gnutls_anon_free_client_credentials(creds->anon_client);
    }
    if (creds->dh_params) {
        qtls_lib.gnutls_dh_params_deinit(creds->dh_params);
    }
    g_free(creds->id);
    g_free(creds->priority);
    g_free(creds->username);
    g_free(creds->passwordid);
    if (creds->props) {
        json_object_unref(creds->props);
    }
    g_free(creds);
}

static void *tls_creds_create(const char *id, JsonObject *props,
                              QCryptoTLSCredsKind kind, Error **errp)
{
    QCryptoTLSCreds *creds;
    const char *endpoint = json_object_get_string_member_with_default(
        props, "endpoint", "client");
    const char *dir = json_object_get_string_member_with_default(
        props, "dir", NULL);
    int ret;

    if (!qtls_lib_load(errp)) {
        return NULL;
    }
    creds = g_new0(QCryptoTLSCreds, 1);
    creds->kind = kind;
    creds->id = g_strdup(id);
    creds->props = json_object_ref(props);
    creds->endpoint = strcmp(endpoint, "server") ?
                      QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT :
                      QCRYPTO_TLS_CREDS_ENDPOINT_SERVER;
    creds->verify_peer = json_object_get_boolean_member_with_default(
        props, "verify-peer", true);
    creds->priority = g_strdup(json_object_get_string_member_with_default(
        props, "priority", NULL));
    creds->username = g_strdup(json_object_get_string_member_with_default(
        props, "username", TLS_PSK_DEFAULT_USERNAME));
    creds->sanity_check = json_object_get_boolean_member_with_default(
        props, "sanity-check", true);
    creds->passwordid = g_strdup(json_object_get_string_member_with_default(
        props, "passwordid", NULL));
    if (!dir && kind != QCRYPTO_TLS_CREDS_ANON) {
        error_setg(errp, "%s '%s': the credentials directory (dir) is "
                   "required", kind == QCRYPTO_TLS_CREDS_X509 ?
                   TLS_CREDS_X509_TYPE : TLS_CREDS_PSK_TYPE, id);
        tls_creds_destroy(creds);
        return NULL;
    }
    switch (kind) {
    case QCRYPTO_TLS_CREDS_X509:
        ret = tls_creds_load_x509(creds, dir, errp);
        break;
    case QCRYPTO_TLS_CREDS_PSK:
        ret = tls_creds_load_psk(creds, dir, errp);
        break;
    default:
        ret = tls_creds_load_anon(creds, dir, errp);
        break;
    }
    if (ret < 0) {
        tls_creds_destroy(creds);
        return NULL;
    }
    return creds;
}

static void *tls_creds_x509_create(const char *id, JsonObject *props,
                                   Error **errp)
{
    return tls_creds_create(id, props, QCRYPTO_TLS_CREDS_X509, errp);
}

static void *tls_creds_psk_create(const char *id, JsonObject *props,
                                  Error **errp)
{
    return tls_creds_create(id, props, QCRYPTO_TLS_CREDS_PSK, errp);
}

static void *tls_creds_anon_create(const char *id, JsonObject *props,
                                   Error **errp)
{
    return tls_creds_create(id, props, QCRYPTO_TLS_CREDS_ANON, errp);
}

QCryptoTLSCreds *qcrypto_tls_creds_get(const char *id,
                                       QCryptoTLSCredsEndpoint endpoint,
                                       Error **errp)
{
    UserObject *obj = user_object_find(id, TLS_CREDS_X509_TYPE) ?:
                      user_object_find(id, TLS_CREDS_PSK_TYPE) ?:
                      user_object_find(id, TLS_CREDS_ANON_TYPE);
    QCryptoTLSCreds *creds;

    if (!obj) {
        error_setg(errp, "No TLS credentials with id '%s'", id);
        return NULL;
    }
    creds = user_object_get_state(obj);
    if (creds->endpoint != endpoint) {
        /* QEMU's words */
        error_setg(errp, "Expected TLS credentials for a %s endpoint",
                   endpoint == QCRYPTO_TLS_CREDS_ENDPOINT_SERVER ? "server"
                                                                 : "client");
        return NULL;
    }
    user_object_ref(obj);
    creds->obj = obj;
    return creds;
}

void qcrypto_tls_creds_put(QCryptoTLSCreds *creds)
{
    if (creds) {
        user_object_unref(creds->obj);
    }
}

const char *qcrypto_tls_creds_id(const QCryptoTLSCreds *creds)
{
    return creds->id;
}

/*
 * qom-get: a property as it was given at creation, or what QEMU shows
 * where it was not: "client", on, or an empty string.  (QEMU's qom-set
 * of these changes some of them under a live object; qblock's
 * credentials stay as they were loaded, so it has none.)
 */
static JsonNode *tls_creds_get_property(void *state, const char *name)
{
    static const char *const common[] = {
        "endpoint", "dir", "verify-peer", "priority", NULL,
    };
    static const char *const own[][3] = {
        [QCRYPTO_TLS_CREDS_X509] = { "sanity-check", "passwordid", NULL },
        [QCRYPTO_TLS_CREDS_PSK] = { "username", NULL },
        [QCRYPTO_TLS_CREDS_ANON] = { NULL },
    };
    QCryptoTLSCreds *creds = state;
    JsonNode *given = json_object_get_member(creds->props, name);

    if (!strcmp(name, "loaded")) {
        return json_node_init_boolean(json_node_alloc(), true);
    }
    if (!g_strv_contains(common, name) &&
        !g_strv_contains(own[creds->kind], name)) {
        return NULL;
    }
    if (given) {
        return json_node_copy(given);
    }
    if (!strcmp(name, "verify-peer") || !strcmp(name, "sanity-check")) {
        return json_node_init_boolean(json_node_alloc(), true);
    }
    return json_node_init_string(json_node_alloc(),
                                 strcmp(name, "endpoint") ? "" : "client");
}

/* qom-list's order, as QEMU's: the common properties, the type's own */
#define TLS_CREDS_QOM_LIST_COMMON "endpoint", "dir", "verify-peer", "priority"

static const char *const tls_creds_x509_qom_list[] = {
    TLS_CREDS_QOM_LIST_COMMON, "sanity-check", "passwordid", "loaded", NULL,
};

static const UserObjectType tls_creds_x509_type = {
    .name = TLS_CREDS_X509_TYPE,
    .create = tls_creds_x509_create,
    .destroy = tls_creds_destroy,
    .get_property = tls_creds_get_property,
    .qom_list_order = tls_creds_x509_qom_list,
};
user_object_type_init(tls_creds_x509_type)

static const char *const tls_creds_psk_qom_list[] = {
    TLS_CREDS_QOM_LIST_COMMON, "username", "loaded", NULL,
};

static const UserObjectType tls_creds_psk_type = {
    .name = TLS_CREDS_PSK_TYPE,
    .create = tls_creds_psk_create,
    .destroy = tls_creds_destroy,
    .get_property = tls_creds_get_property,
    .qom_list_order = tls_creds_psk_qom_list,
};
user_object_type_init(tls_creds_psk_type)

static const char *const tls_creds_anon_qom_list[] = {
    TLS_CREDS_QOM_LIST_COMMON, "loaded", NULL,
};

static const UserObjectType tls_creds_anon_type = {
    .name = TLS_CREDS_ANON_TYPE,
    .create = tls_creds_anon_create,
    .destroy = tls_creds_destroy,
    .get_property = tls_creds_get_property,
    .qom_list_order = tls_creds_anon_qom_list,
};
user_object_type_init(tls_creds_anon_type)
