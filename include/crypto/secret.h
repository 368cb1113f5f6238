/*
 * Secrets: the `secret` user-creatable object (qapi/object.json,
 * SecretProperties) and the lookups that drivers make of them by id
 * (key-secret=ID).
 *
 * A secret's bytes live in its object until it is deleted; every copy
 * handed out is the caller's, who frees it with crypto_secret_free(),
 * which zeroes it first.  Nothing here prints a secret's value: errors
 * name the secret by id only.
 */
#ifndef QBLOCK_CRYPTO_SECRET_H
#define QBLOCK_CRYPTO_SECRET_H

#include "util/osdep.h"
#include "util/error.h"

/*
 * A copy of the bytes of secret @id, followed by a NUL that *@len does
 * not count.  NULL with "No secret with id 'ID'" if there is none.
 */
uint8_t *crypto_secret_lookup(const char *id, size_t *len, Error **errp);

/* The same for a passphrase, which must be valid UTF-8 without NUL. */
char *crypto_secret_lookup_as_utf8(const char *id, Error **errp);

/* Zeroes and frees @len bytes at @data (NULL is allowed). */
void crypto_secret_free(void *data, size_t len);
/* Zeroes and frees a NUL-terminated secret. */
void crypto_secret_free_str(char *str);

#endif
