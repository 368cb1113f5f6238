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

#endif
