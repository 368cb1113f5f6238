/*
 * libgcrypt's initialisation (see include/crypto/init.h).
 */
#include "util/osdep.h"

#include <gcrypt.h>

#include "crypto/init.h"

/* the oldest libgcrypt with the AES-NI XTS code docs/encryption.md measured */
#define CRYPTO_GCRYPT_MIN_VERSION "1.8.0"

static gpointer crypto_init_once(gpointer unused)
{
    if (!gcry_check_version(CRYPTO_GCRYPT_MIN_VERSION)) {
        g_error("libgcrypt %s is older than %s", gcry_check_version(NULL),
                CRYPTO_GCRYPT_MIN_VERSION);
    }
    gcry_control(GCRYCTL_DISABLE_SECMEM, 0);
    gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    return NULL;
}

void crypto_init(void)
{
    static GOnce once = G_ONCE_INIT;

    g_once(&once, crypto_init_once, NULL);
}
