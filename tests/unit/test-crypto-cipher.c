/*
 * crypto/cipher.c and its two libraries: Twofish-192 (nettle) against
 * the Twofish paper's known answer, and nettle's modes against
 * libgcrypt's on Twofish-128, which both libraries have, sector by sector
 * with the IV set before each as the LUKS layer does.  The two must agree
 * byte for byte, or an image written by one half of qblock (or by QEMU,
 * whose Debian build uses nettle) would not read in the other.
 */
#include "util/osdep.h"

#include "crypto/cipher-int.h"

static void test_twofish192_known_answer(void)
{
    /* Schneier et al., "Twofish: A 128-Bit Block Cipher", 192-bit vector */
    static const uint8_t key[24] = {
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
        0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10,
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
    };
    static const uint8_t expect[16] = {
        0xcf, 0xd1, 0xd2, 0xe5, 0xa9, 0xbe, 0x9c, 0xdf,
        0x50, 0x1f, 0x13, 0xb8, 0x92, 0xbd, 0x22, 0x48,
    };
    uint8_t buf[16] = { 0 };
    CryptoCipher *c;

    c = crypto_cipher_new(CRYPTO_CIPHER_TWOFISH_192, CRYPTO_CIPHER_MODE_ECB,
                          key, sizeof(key), &error_abort);
    g_assert_cmpint(crypto_cipher_encrypt(c, buf, 16, &error_abort), ==, 0);
    g_assert_cmpmem(buf, 16, expect, 16);
    g_assert_cmpint(crypto_cipher_decrypt(c, buf, 16, &error_abort), ==, 0);
    for (int i = 0; i < 16; i++) {
        g_assert_cmpint(buf[i], ==, 0);
    }
    crypto_cipher_free(c);
}

/* Each mode, both ways, twice: 4 sectors of 512 bytes, IV = sector. */
#define SECTORS 4
#define SECTOR  512

static void cipher_test_sectors(const CryptoCipherDriver *drv, void *st,
                                CryptoCipherMode mode, uint8_t *buf,
                                CryptoCipherDirection dir)
{
    for (int s = 0; s < SECTORS; s++) {
        uint8_t iv[16] = { s + 1, 0x5a };

        if (mode != CRYPTO_CIPHER_MODE_ECB) {
            g_assert_cmpint(drv->setiv(st, iv, 16, &error_abort), ==, 0);
        }
        g_assert_cmpint(drv->run(st, buf + s * SECTOR, SECTOR, dir,
                                 &error_abort), ==, 0);
    }
}

static void test_nettle_modes_match_gcrypt(void)
{
    uint8_t key[64], plain[SECTORS * SECTOR];
    uint8_t by_gcrypt[SECTORS * SECTOR], by_nettle[SECTORS * SECTOR];

    for (size_t i = 0; i < sizeof(key); i++) {
        key[i] = i * 7 + 3;
    }
    for (size_t i = 0; i < sizeof(plain); i++) {
        plain[i] = i * 13 + (i >> 8);
    }
    for (int m = 0; m < CRYPTO_CIPHER_MODE__MAX; m++) {
        size_t key_len = crypto_cipher_key_len(CRYPTO_CIPHER_TWOFISH_128, m);
        void *g = crypto_cipher_gcrypt.open(CRYPTO_CIPHER_TWOFISH_128, m, key,
                                            key_len, &error_abort);
        void *n = crypto_cipher_nettle.open(CRYPTO_CIPHER_TWOFISH_128, m, key,
                                            key_len, &error_abort);

        memcpy(by_gcrypt, plain, sizeof(plain));
        memcpy(by_nettle, plain, sizeof(plain));
        cipher_test_sectors(&crypto_cipher_gcrypt, g, m, by_gcrypt,
                            CRYPTO_CIPHER_ENCRYPT);
        cipher_test_sectors(&crypto_cipher_nettle, n, m, by_nettle,
                            CRYPTO_CIPHER_ENCRYPT);
        g_test_message("mode %s", crypto_cipher_mode_name(m));
        g_assert_cmpmem(by_gcrypt, sizeof(plain), by_nettle, sizeof(plain));
        g_assert_true(memcmp(by_nettle, plain, sizeof(plain)) != 0);
        /* each decrypts what the other encrypted */
        cipher_test_sectors(&crypto_cipher_nettle, n, m, by_gcrypt,
                            CRYPTO_CIPHER_DECRYPT);
        cipher_test_sectors(&crypto_cipher_gcrypt, g, m, by_nettle,
                            CRYPTO_CIPHER_DECRYPT);
        g_assert_cmpmem(by_gcrypt, sizeof(plain), plain, sizeof(plain));
        g_assert_cmpmem(by_nettle, sizeof(plain), plain, sizeof(plain));
        crypto_cipher_gcrypt.close(g);
        crypto_cipher_nettle.close(n);
    }
}

static void test_twofish192_every_mode(void)
{
    uint8_t key[48] = { 1, 2, 3 }, buf[SECTOR], plain[SECTOR];

    memset(plain, 0xa5, sizeof(plain));
    for (int m = 0; m < CRYPTO_CIPHER_MODE__MAX; m++) {
        size_t key_len = crypto_cipher_key_len(CRYPTO_CIPHER_TWOFISH_192, m);
        uint8_t iv[16] = { 9 };
        CryptoCipher *c;

        g_assert_true(crypto_cipher_supports(CRYPTO_CIPHER_TWOFISH_192, m,
                                             &error_abort));
        c = crypto_cipher_new(CRYPTO_CIPHER_TWOFISH_192, m, key, key_len,
                              &error_abort);
        memcpy(buf, plain, sizeof(buf));
        crypto_cipher_setiv(c, iv, m == CRYPTO_CIPHER_MODE_ECB ? 0 : 16,
                            &error_abort);
        crypto_cipher_encrypt(c, buf, sizeof(buf), &error_abort);
        g_assert_true(memcmp(buf, plain, sizeof(buf)) != 0);
        crypto_cipher_setiv(c, iv, m == CRYPTO_CIPHER_MODE_ECB ? 0 : 16,
                            &error_abort);
        crypto_cipher_decrypt(c, buf, sizeof(buf), &error_abort);
        g_assert_cmpmem(buf, sizeof(buf), plain, sizeof(plain));
        crypto_cipher_free(c);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/cipher/twofish-192/known-answer",
                    test_twofish192_known_answer);
    g_test_add_func("/crypto/cipher/twofish-192/every-mode",
                    test_twofish192_every_mode);
    g_test_add_func("/crypto/cipher/nettle-modes-match-gcrypt",
                    test_nettle_modes_match_gcrypt);
    return g_test_run();
}
