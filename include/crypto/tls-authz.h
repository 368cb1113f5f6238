/*
 * Authorization of a TLS peer: the authz-simple (--object
 * authz-simple,id=ID,identity=NAME), authz-list (rules matched in
 * order, crypto/authz-list.c) and authz-list-file (the same rules from a
 * file, crypto/authz-list-file.c) object types, looked up by id when a client
 * finishes its handshake, as QEMU's servers do (--tls-authz ID).
 */
#ifndef QBLOCK_CRYPTO_TLS_AUTHZ_H
#define QBLOCK_CRYPTO_TLS_AUTHZ_H

#include "util/osdep.h"
#include "util/error.h"
#include "util/json.h"

/*
 * Whether the authorization object @authz_id lets @identity in: false
 * without an error when it does not, false with @errp set when there is
 * no such object.
 */
bool qauthz_is_allowed_by_id(const char *authz_id, const char *identity,
                             Error **errp);

/*
 * What the state of every authorization object type begins with: its
 * verdict on an identity.
 */
typedef struct QAuthZ {
    bool (*is_allowed)(struct QAuthZ *authz, const char *identity);
} QAuthZ;

/*
 * An authz-list's verdicts from its properties (policy, rules), which
 * have passed the schema's check (qapi_type_AuthZListProperties).
 */
QAuthZ *qauthz_list_new(JsonObject *props);
void qauthz_list_free(QAuthZ *authz);

#endif
