/*
 * What the secret object types share (crypto/secret.c, `secret`, and
 * crypto/secret-keyring.c, `secret_keyring`): the loaded secret, and the
 * steps 2-3 of secret.c's header comment (decryption with keyid=,
 * base64) applied to the bytes each type reads its own way.
 */
#ifndef QBLOCK_CRYPTO_SECRET_INT_H
#define QBLOCK_CRYPTO_SECRET_INT_H

#include "crypto/secret.h"
#include "util/json.h"

typedef struct CryptoSecret {
    uint8_t *data;              /* followed by a NUL that len omits */
    size_t len;
    /*
     * What qom-get shows: the properties it was created with but data=,
     * QEMU's values of those not given, and loaded (always true)
     */
    JsonObject *props;
} CryptoSecret;

/*
 * The secret of @input (@len bytes, NUL after them, taken over: freed
 * here, zeroed, on every path) after props' format=, keyid= and iv=; NULL
 * with QEMU's message if they fail.
 */
void *crypto_secret_new(JsonObject *props, uint8_t *input, size_t len,
                        Error **errp);
/* A UserObjectType's destroy: zeroes the secret (secret.c invariant 1). */
void crypto_secret_destroy(void *state);
/*
 * A UserObjectType's get_property: the properties QEMU shows, as QEMU
 * shows them ("" for a string not given), but never the data.  A type
 * with a string of its own sets its default in props after
 * crypto_secret_new().
 */
JsonNode *crypto_secret_get_property(void *state, const char *name);
/* qom-list's order of a secret's common properties, as QEMU's */
#define CRYPTO_SECRET_QOM_LIST_COMMON "iv", "keyid", "loaded", "format"

#endif
