/*
 * The ciphers nettle runs (see crypto/cipher-int.h): Twofish with a
 * 192-bit key, which libgcrypt lacks and Debian's QEMU (built with
 * nettle) offers.  nettle's Twofish takes 16-, 24- and 32-byte keys; the
 * modes are nettle's generic CBC, CTR and XTS around its block function.
 *
 * Invariants:
 *  1. In XTS mode, each run is one XTS message whose tweak is the last
 *     IV set: the LUKS layer sets the IV before every sector, so the
 *     tweak never has to carry over from one run to the next.
 *  2. In CBC and CTR mode, nettle updates @iv as it goes, so runs after
 *     one setiv chain as libgcrypt's do.
 */
#include "crypto/cipher-int.h"

#include <nettle/cbc.h>
#include <nettle/ctr.h>
#include <nettle/twofish.h>
#include <nettle/xts.h>

typedef struct CryptoCipherNettle {
    CryptoCipherMode mode;
    struct twofish_ctx key;
    struct twofish_ctx tweak_key;       /* XTS only: the key's 2nd half */
    uint8_t iv[TWOFISH_BLOCK_SIZE];
} CryptoCipherNettle;

static void *crypto_cipher_nettle_open(CryptoCipherAlg alg,
                                       CryptoCipherMode mode,
                                       const uint8_t *key, size_t key_len,
                                       Error **errp)
{
    CryptoCipherNettle *c;

    /* cipher.c sends only Twofish here, with the key length checked */
    assert(!strcmp(crypto_cipher_alg_family(alg), "twofish"));
    assert(key_len == crypto_cipher_key_len(alg, mode));
    c = g_new0(CryptoCipherNettle, 1);
    c->mode = mode;
    if (mode == CRYPTO_CIPHER_MODE_XTS) {
        key_len /= 2;
        twofish_set_key(&c->tweak_key, key_len, key + key_len);
    }
    twofish_set_key(&c->key, key_len, key);
    return c;
}

static void crypto_cipher_nettle_close(void *state)
{
    CryptoCipherNettle *c = state;

    explicit_bzero(c, sizeof(*c));
    g_free(c);
}

static int crypto_cipher_nettle_setiv(void *state, const uint8_t *iv,
                                      size_t iv_len, Error **errp)
{
    CryptoCipherNettle *c = state;

    assert(iv_len == sizeof(c->iv));
    memcpy(c->iv, iv, iv_len);
    return 0;
}

static int crypto_cipher_nettle_run(void *state, uint8_t *buf, size_t len,
                                    CryptoCipherDirection dir, Error **errp)
{
    CryptoCipherNettle *c = state;
    bool enc = dir == CRYPTO_CIPHER_ENCRYPT;
    nettle_cipher_func *f = enc ? (nettle_cipher_func *)twofish_encrypt :
                                  (nettle_cipher_func *)twofish_decrypt;

    switch (c->mode) {
    case CRYPTO_CIPHER_MODE_ECB:
        f(&c->key, len, buf, buf);
        break;
    case CRYPTO_CIPHER_MODE_CBC:
        (enc ? cbc_encrypt : cbc_decrypt)(&c->key, f, sizeof(c->iv), c->iv,
                                          len, buf, buf);
        break;
    case CRYPTO_CIPHER_MODE_CTR:
        /* CTR decrypts by encrypting the counter, as it encrypts */
        ctr_crypt(&c->key, (nettle_cipher_func *)twofish_encrypt,
                  sizeof(c->iv), c->iv, len, buf, buf);
        break;
    case CRYPTO_CIPHER_MODE_XTS:
        /* nettle's XTS needs one whole block at least (invariant 1) */
        if (len < sizeof(c->iv)) {
            error_setg(errp, "XTS needs at least %zu bytes, not %zu",
                       sizeof(c->iv), len);
            return -EINVAL;
        }
        if (enc) {
            xts_encrypt_message(&c->key, &c->tweak_key, f, c->iv, len, buf,
                                buf);
        } else {
            xts_decrypt_message(&c->key, &c->tweak_key, f,
                                (nettle_cipher_func *)twofish_encrypt, c->iv,
                                len, buf, buf);
        }
        break;
    default:
        g_assert_not_reached();
    }
    return 0;
}

const CryptoCipherDriver crypto_cipher_nettle = {
    .open  = crypto_cipher_nettle_open,
    .close = crypto_cipher_nettle_close,
    .setiv = crypto_cipher_nettle_setiv,
    .run   = crypto_cipher_nettle_run,
};
