/*
 * The pieces of LUKS (crypto/): PBKDF2 against RFC 6070's vectors, the
 * anti-forensic splitter, sector IVs, ciphers against known answers, and
 * a volume created, unlocked and used through an in-memory header store,
 * with its hostile-header checks.
 */
#include "util/osdep.h"

#include "crypto/afsplit.h"
#include "crypto/cipher.h"
#include "crypto/ivgen.h"
#include "crypto/luks.h"
#include "crypto/pbkdf.h"
#include "util/user-object.h"

static void test_pbkdf2_rfc6070(void)
{
    static const uint8_t expect1[20] = {
        0x0c, 0x60, 0xc8, 0x0f, 0x96, 0x1f, 0x0e, 0x71, 0xf3, 0xa9,
        0xb5, 0x24, 0xaf, 0x60, 0x12, 0x06, 0x2f, 0xe0, 0x37, 0xa6,
    };
    static const uint8_t expect4096[20] = {
        0x4b, 0x00, 0x79, 0x01, 0xb7, 0x65, 0x48, 0x9a, 0xbe, 0xad,
        0x49, 0xd9, 0x26, 0xf7, 0x21, 0xd0, 0x65, 0xa4, 0x29, 0xc1,
    };
    uint8_t out[20];

    g_assert_cmpint(crypto_pbkdf2(CRYPTO_HASH_SHA1, (const uint8_t *)
                                  "password", 8, (const uint8_t *)"salt", 4,
                                  1, out, 20, &error_abort), ==, 0);
    g_assert_cmpmem(out, 20, expect1, 20);
    g_assert_cmpint(crypto_pbkdf2(CRYPTO_HASH_SHA1, (const uint8_t *)
                                  "password", 8, (const uint8_t *)"salt", 4,
                                  4096, out, 20, &error_abort), ==, 0);
    g_assert_cmpmem(out, 20, expect4096, 20);
}

static void test_pbkdf2_calibration(void)
{
    /* never 0, and more time buys more iterations */
    uint64_t short_run = crypto_pbkdf2_count_iters(CRYPTO_HASH_SHA256, 32,
                                                   1);
    uint64_t long_run = crypto_pbkdf2_count_iters(CRYPTO_HASH_SHA256, 32,
                                                  100);

    g_assert_cmpuint(short_run, >=, 1);
    g_assert_cmpuint(long_run, >, short_run);
}

static void test_afsplit(void)
{
    uint8_t key[64], back[64];
    g_autofree uint8_t *split = g_malloc(64 * 4000);

    for (int i = 0; i < 64; i++) {
        key[i] = i * 3;
    }
    crypto_afsplit_encode(CRYPTO_HASH_SHA256, 64, 4000, key, split);
    crypto_afsplit_decode(CRYPTO_HASH_SHA256, 64, 4000, split, back);
    g_assert_cmpmem(key, 64, back, 64);
    /* any damage destroys the key */
    split[12345] ^= 1;
    crypto_afsplit_decode(CRYPTO_HASH_SHA256, 64, 4000, split, back);
    g_assert_true(memcmp(key, back, 64) != 0);
}

static void test_ivgen(void)
{
    static const uint8_t key[32] = { 1 };
    uint8_t iv[16], expect[16] = { 0 };
    CryptoIvgen *ivgen;

    ivgen = crypto_ivgen_new(CRYPTO_IVGEN_PLAIN, CRYPTO_CIPHER_AES_256,
                             CRYPTO_HASH_SHA256, key, 32, &error_abort);
    crypto_ivgen_calculate(ivgen, 0x1122334455ULL, iv, 16, &error_abort);
    expect[0] = 0x55, expect[1] = 0x44, expect[2] = 0x33, expect[3] = 0x22;
    g_assert_cmpmem(iv, 16, expect, 16);    /* 32 bits only */
    crypto_ivgen_free(ivgen);

    ivgen = crypto_ivgen_new(CRYPTO_IVGEN_PLAIN64, CRYPTO_CIPHER_AES_256,
                             CRYPTO_HASH_SHA256, key, 32, &error_abort);
    crypto_ivgen_calculate(ivgen, 0x1122334455ULL, iv, 16, &error_abort);
    expect[4] = 0x11;
    g_assert_cmpmem(iv, 16, expect, 16);
    crypto_ivgen_free(ivgen);

    ivgen = crypto_ivgen_new(CRYPTO_IVGEN_ESSIV, CRYPTO_CIPHER_AES_128,
                             CRYPTO_HASH_SHA256, key, 16, &error_abort);
    crypto_ivgen_calculate(ivgen, 0x1122334455ULL, iv, 16, &error_abort);
    g_assert_true(memcmp(iv, expect, 16) != 0);
    crypto_ivgen_free(ivgen);
}

/* FIPS-197 C.3: AES-256 of 00112233..ff under 00..1f */
static void test_cipher_aes256(void)
{
    static const uint8_t expect[16] = {
        0x8e, 0xa2, 0xb7, 0xca, 0x51, 0x67, 0x45, 0xbf,
        0xea, 0xfc, 0x49, 0x90, 0x4b, 0x49, 0x60, 0x89,
    };
    uint8_t key[32], buf[16], plain[16];
    CryptoCipher *c;

    for (int i = 0; i < 32; i++) {
        key[i] = i;
    }
    for (int i = 0; i < 16; i++) {
        plain[i] = buf[i] = i * 0x11;
    }
    c = crypto_cipher_new(CRYPTO_CIPHER_AES_256, CRYPTO_CIPHER_MODE_ECB, key,
                          32, &error_abort);
    crypto_cipher_encrypt(c, buf, 16, &error_abort);
    g_assert_cmpmem(buf, 16, expect, 16);
    crypto_cipher_decrypt(c, buf, 16, &error_abort);
    g_assert_cmpmem(buf, 16, plain, 16);
    crypto_cipher_free(c);
    g_assert_false(crypto_cipher_supports(CRYPTO_CIPHER_CAST5_128,
                                          CRYPTO_CIPHER_MODE_XTS, NULL));
}

/* An in-memory header store. */
typedef struct MemStore {
    GByteArray *data;
    int writes;
} MemStore;

static int mem_read(void *opaque, uint64_t offset, void *buf, size_t len,
                    Error **errp)
{
    MemStore *m = opaque;

    memset(buf, 0, len);
    if (offset < m->data->len) {
        memcpy(buf, m->data->data + offset, MIN(len, m->data->len - offset));
    }
    return 0;
}

static int mem_write(void *opaque, uint64_t offset, const void *buf,
                     size_t len, Error **errp)
{
    MemStore *m = opaque;

    if (offset + len > m->data->len) {
        g_byte_array_set_size(m->data, offset + len);
    }
    memcpy(m->data->data + offset, buf, len);
    m->writes++;
    return 0;
}

static int mem_init(void *opaque, uint64_t len, Error **errp)
{
    MemStore *m = opaque;

    g_byte_array_set_size(m->data, len);
    memset(m->data->data, 0, len);
    return 0;
}

static void test_volume(void)
{
    MemStore m = { g_byte_array_new(), 0 };
    CryptoLuksIO io = { mem_read, mem_write, mem_init, &m };
    CryptoLuksCreateOptions opts;
    CryptoLuks *luks;
    uint8_t buf[1024], plain[1024];
    Error *err = NULL;

    g_assert_true(user_object_add_cmdline("secret,id=pw,data=hunter2",
                                          &error_abort));
    g_assert_true(user_object_add_cmdline("secret,id=bad,data=hunter3",
                                          &error_abort));
    crypto_luks_create_options_default(&opts);
    opts.key_secret = "pw";
    opts.iter_time_ms = 1;
    luks = crypto_luks_create(&opts, &io, &error_abort);
    g_assert_cmpuint(crypto_luks_payload_offset(luks), ==, 4040 * 512);
    g_assert_cmpuint(m.data->len, ==, 4040 * 512);
    for (int i = 0; i < 1024; i++) {
        plain[i] = buf[i] = i;
    }
    crypto_luks_encrypt(luks, 4096, buf, 1024, &error_abort);
    g_assert_true(memcmp(buf, plain, 1024) != 0);
    crypto_luks_free(luks);

    luks = crypto_luks_open("pw", &io, 0, &error_abort);
    crypto_luks_decrypt(luks, 4096, buf, 1024, &error_abort);
    g_assert_cmpmem(buf, 1024, plain, 1024);
    crypto_luks_free(luks);

    /* invariant 1: failures write nothing */
    m.writes = 0;
    g_assert_null(crypto_luks_open("bad", &io, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Invalid password, cannot unlock any keyslot");
    error_free(err);
    err = NULL;
    m.data->data[0] = 'X';
    g_assert_null(crypto_luks_open("pw", &io, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Volume is not in LUKS format");
    error_free(err);
    g_assert_cmpint(m.writes, ==, 0);
    user_object_del_all();
    g_byte_array_unref(m.data);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/pbkdf2/rfc6070", test_pbkdf2_rfc6070);
    g_test_add_func("/crypto/pbkdf2/calibration", test_pbkdf2_calibration);
    g_test_add_func("/crypto/afsplit", test_afsplit);
    g_test_add_func("/crypto/ivgen", test_ivgen);
    g_test_add_func("/crypto/cipher/aes256", test_cipher_aes256);
    g_test_add_func("/crypto/luks/volume", test_volume);
    return g_test_run();
}
