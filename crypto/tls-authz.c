/*
 * The authz-simple object type: the one identity a TLS server lets in
 * (QEMU's --tls-authz), and the check a session makes of its peer with
 * any authorization object (authz-list: crypto/authz-list.c).  The
 * identity is an x509 client certificate's distinguished name as GnuTLS
 * writes it (RFC 4514: "CN=client,O=Example,C=GB"), or a PSK user name.
 */
#include "util/osdep.h"

#include "crypto/tls-authz.h"
#include "util/json.h"
#include "util/user-object.h"

#define AUTHZ_SIMPLE_TYPE "authz-simple"

typedef struct QAuthZSimple {
    QAuthZ parent;
    char *identity;
} QAuthZSimple;

static bool authz_simple_is_allowed(QAuthZ *parent, const char *identity)
{
    QAuthZSimple *authz = container_of(parent, QAuthZSimple, parent);

    return !strcmp(authz->identity, identity);
}

static void *authz_simple_create(const char *id, JsonObject *props,
                                 Error **errp)
{
    QAuthZSimple *authz = g_new0(QAuthZSimple, 1);

    authz->parent.is_allowed = authz_simple_is_allowed;
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

/* The object types whose state is a QAuthZ. */
static const char *const qauthz_types[] = {
    AUTHZ_SIMPLE_TYPE, "authz-list", "authz-list-file", NULL,
};

bool qauthz_is_allowed_by_id(const char *authz_id, const char *identity,
                             Error **errp)
{
    for (const char *const *type = qauthz_types; *type; type++) {
        QAuthZ *authz = user_object_find_state(authz_id, *type);

        if (authz) {
            return authz->is_allowed(authz, identity);
        }
    }
    error_setg(errp, "No authorization object with id '%s'", authz_id);
    return false;
}

static const UserObjectType authz_simple_type = {
    .name = AUTHZ_SIMPLE_TYPE,
    .create = authz_simple_create,
    .destroy = authz_simple_destroy,
};
user_object_type_init(authz_simple_type)
