/*
 * The authz-simple object type: the one identity a TLS server lets in
 * (QEMU's --tls-authz), and the check a session makes of its peer.  The
 * identity is an x509 client certificate's distinguished name as GnuTLS
 * writes it (RFC 4514: "CN=client,O=Example,C=GB"), or a PSK user name.
 */
#include "util/osdep.h"

#include "crypto/tls-authz.h"
#include "util/json.h"
#include "util/user-object.h"

#define AUTHZ_SIMPLE_TYPE "authz-simple"

typedef struct QAuthZSimple {
    char *identity;
} QAuthZSimple;

static void *authz_simple_create(const char *id, JsonObject *props,
                                 Error **errp)
{
    QAuthZSimple *authz = g_new0(QAuthZSimple, 1);

    authz->identity = g_strdup(json_object_get_string_member(props,
                                                             "identity"));
    return authz;
}

static void authz_simple_destroy(void *state)
{
    QAuthZSimple *authz = state;

    g_free(authz->identity);
    g_free(authz);
}

bool qauthz_is_allowed_by_id(const char *authz_id, const char *identity,
                             Error **errp)
{
    QAuthZSimple *authz = user_object_find_state(authz_id,
                                                 AUTHZ_SIMPLE_TYPE);

    if (!authz) {
        error_setg(errp, "No authorization object with id '%s'", authz_id);
        return false;
    }
    return !strcmp(authz->identity, identity);
}

static const UserObjectType authz_simple_type = {
    .name = AUTHZ_SIMPLE_TYPE,
    .create = authz_simple_create,
    .destroy = authz_simple_destroy,
};
user_object_type_init(authz_simple_type)
