/*
 * Authorization of a TLS peer: the authz-simple object type (--object
 * authz-simple,id=ID,identity=NAME), looked up by id when a client
 * finishes its handshake, as QEMU's servers do (--tls-authz ID).
 */
#ifndef QBLOCK_CRYPTO_TLS_AUTHZ_H
#define QBLOCK_CRYPTO_TLS_AUTHZ_H

#include "util/osdep.h"
#include "util/error.h"

/*
 * Whether the authorization object @authz_id lets @identity in: false
 * without an error when it does not, false with @errp set when there is
 * no such object.
 */
bool qauthz_is_allowed_by_id(const char *authz_id, const char *identity,
                             Error **errp);

#endif
