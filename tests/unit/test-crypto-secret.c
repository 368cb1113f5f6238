/*
 * User-creatable objects (util/user-object.c) and the secret types
 * (crypto/secret.c, crypto/secret-keyring.c): creation from --object and
 * object-add, lookups, encrypted secrets, the messages QEMU 7.2's
 * qemu-img prints for bad input, and deletion refused while an object is
 * in use.
 */
#include "util/osdep.h"

#include <gcrypt.h>
#include <linux/keyctl.h>
#include <sys/syscall.h>

#include "crypto/init.h"
#include "crypto/secret.h"
#include "util/user-object.h"

static void add_ok(const char *optarg)
{
    Error *err = NULL;

    if (!user_object_add_cmdline(optarg, &err)) {
        g_error("--object %s: %s", optarg, error_get_pretty(err));
    }
}

static void add_fails(const char *optarg, const char *expect)
{
    Error *err = NULL;

    g_assert_false(user_object_add_cmdline(optarg, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, expect);
    error_free(err);
}

static void assert_secret(const char *id, const void *expect, size_t len)
{
    size_t got_len;
    uint8_t *got = crypto_secret_lookup(id, &got_len, &error_abort);

    g_assert_cmpmem(got, got_len, expect, len);
    g_assert_cmpint(got[got_len], ==, 0);
    crypto_secret_free(got, got_len);
}

static void test_secret_data(void)
{
    add_ok("secret,id=plain,data=hunter2");
    assert_secret("plain", "hunter2", 7);
    add_ok("secret,id=b64,data=AAECAw==,format=base64");
    assert_secret("b64", "\0\1\2\3", 4);
    add_ok("secret,id=comma,data=a,,b");
    assert_secret("comma", "a,b", 3);
    g_assert_true(user_object_del("plain", &error_abort));
    g_assert_true(user_object_del("b64", &error_abort));
    g_assert_true(user_object_del("comma", &error_abort));
}

static void test_secret_file(void)
{
    g_autofree char *path = NULL;
    g_autofree char *arg = NULL;
    int fd = g_file_open_tmp("secret-XXXXXX", &path, NULL);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(write(fd, "pass\nword", 9), ==, 9);
    close(fd);
    arg = g_strdup_printf("secret,id=f,file=%s", path);
    add_ok(arg);
    /* the whole file, newline and all, as QEMU reads it */
    assert_secret("f", "pass\nword", 9);
    g_assert_true(user_object_del("f", &error_abort));
    unlink(path);
    g_free(arg);
    arg = g_strdup_printf("secret,id=f,file=%s", path);
    {
        Error *err = NULL;

        g_assert_false(user_object_add_cmdline(arg, &err));
        g_assert_true(g_str_has_prefix(error_get_pretty(err),
                                       "Unable to read "));
        error_free(err);
    }
}

/* AES-256-CBC with PKCS#7 padding, base64: what a user would give. */
static char *encrypt_secret(const uint8_t *key, const uint8_t *iv,
                            const char *plain)
{
    size_t len = strlen(plain);
    size_t padded = (len / 16 + 1) * 16;
    g_autofree uint8_t *buf = g_malloc(padded);
    gcry_cipher_hd_t hd;

    memcpy(buf, plain, len);
    memset(buf + len, padded - len, padded - len);
    crypto_init();
    g_assert_cmpint(gcry_cipher_open(&hd, GCRY_CIPHER_AES256,
                                     GCRY_CIPHER_MODE_CBC, 0), ==, 0);
    g_assert_cmpint(gcry_cipher_setkey(hd, key, 32), ==, 0);
    g_assert_cmpint(gcry_cipher_setiv(hd, iv, 16), ==, 0);
    g_assert_cmpint(gcry_cipher_encrypt(hd, buf, padded, NULL, 0), ==, 0);
    gcry_cipher_close(hd);
    return g_base64_encode(buf, padded);
}

static void test_secret_encrypted(void)
{
    uint8_t key[32], iv[16];
    g_autofree char *key64 = NULL, *iv64 = NULL, *ct = NULL, *arg = NULL;

    for (int i = 0; i < 32; i++) {
        key[i] = i * 7 + 1;
    }
    for (int i = 0; i < 16; i++) {
        iv[i] = 0xf0 - i;
    }
    key64 = g_base64_encode(key, 32);
    iv64 = g_base64_encode(iv, 16);
    ct = encrypt_secret(key, iv, "correct horse battery staple");

    arg = g_strdup_printf("secret,id=master,data=%s,format=base64", key64);
    add_ok(arg);
    g_free(arg);
    arg = g_strdup_printf("secret,id=enc,data=%s,format=base64,keyid=master,"
                          "iv=%s", ct, iv64);
    add_ok(arg);
    assert_secret("enc", "correct horse battery staple", 28);
    g_free(arg);

    arg = g_strdup_printf("secret,id=noiv,data=%s,format=base64,"
                          "keyid=master", ct);
    add_fails(arg, "IV is required to decrypt secret");
    g_free(arg);
    arg = g_strdup_printf("secret,id=shortiv,data=%s,format=base64,"
                          "keyid=master,iv=AAAA", ct);
    add_fails(arg, "IV should be 16 bytes in length not 3");
    g_free(arg);
    /* raw format: the base64 text itself is the ciphertext */
    arg = g_strdup_printf("secret,id=raw,data=%s,keyid=master,iv=%s",
                          ct, iv64);
    add_fails(arg, "Length 44 must be a multiple of block size 16");
    g_free(arg);
    add_ok("secret,id=shortkey,data=short");
    arg = g_strdup_printf("secret,id=k2,data=%s,format=base64,"
                          "keyid=shortkey,iv=%s", ct, iv64);
    add_fails(arg, "Key should be 32 bytes in length");
    add_fails("secret,id=k3,data=a,keyid=nokey", "No secret with id 'nokey'");

    g_assert_true(user_object_del("enc", &error_abort));
    g_assert_true(user_object_del("master", &error_abort));
    g_assert_true(user_object_del("shortkey", &error_abort));
}

static void test_secret_errors(void)
{
    add_fails("secret,id=s", "Either 'file' or 'data' must be provided");
    add_fails("secret,id=s,data=a,file=b",
              "'file' and 'data' are mutually exclusive");
    add_fails("secret,data=a", "Parameter 'id' is missing");
    add_fails("id=s,data=a", "Parameter 'qom-type' is missing");
    add_fails("secret,id=s,data=a,format=bad",
              "Parameter 'format' does not accept value 'bad'");
    add_fails("secret,id=s,data=a!!,format=base64",
              "Base64 data contains invalid characters");
    add_fails("secret,id=s,data=a,bogus=1", "Parameter 'bogus' is unexpected");
    add_fails("foo,id=s", "Parameter 'qom-type' does not accept value 'foo'");
    add_fails("secret,id=1s,data=a", "Parameter 'id' expects an identifier");
    g_assert_null(user_object_find("s", "secret"));
}

/* A "user" key of @len bytes in the user keyring: its serial, or -errno. */
static long add_user_key(const char *name, const void *data, size_t len)
{
    long serial = syscall(SYS_add_key, "user", name, data, len,
                          KEY_SPEC_USER_KEYRING);

    return serial < 0 ? -errno : serial;
}

static void test_secret_keyring(void)
{
    g_autofree char *name = g_strdup_printf("qblock-unit-%d", getpid());
    g_autofree char *arg = NULL;
    long serial = add_user_key(name, "key\0pass", 8);

    if (serial < 0) {
        g_test_skip_printf("the kernel refuses add_key(2) here: %s",
                           strerror(-serial));
        return;
    }
    /* the payload as it is, NUL included; and where lookups find it */
    arg = g_strdup_printf("secret_keyring,id=k0,serial=%ld", serial);
    add_ok(arg);
    assert_secret("k0", "key\0pass", 8);
    g_free(arg);
    arg = g_strdup_printf("secret_keyring,id=k1,serial=%ld,format=base64",
                          serial);
    add_fails(arg, "Base64 data contains embedded NUL characters");
    g_free(arg);
    arg = g_strdup_printf("secret_keyring,id=k1,serial=%ld,keyid=none",
                          serial);
    add_fails(arg, "No secret with id 'none'");
    syscall(SYS_keyctl, KEYCTL_UNLINK, serial, KEY_SPEC_USER_KEYRING);

    /* QEMU's messages; 12345 is all but certain not to be a key */
    add_fails("secret_keyring,id=k1,serial=12345",
              "Unable to read serial key 00003039: Required key not "
              "available");
    add_fails("secret_keyring,id=k1,serial=-1",
              "Unable to read serial key ffffffff: Required key not "
              "available");
    add_fails("secret_keyring,id=k1,serial=0",
              "'serial' should not be equal to 0");
    add_fails("secret_keyring,id=k1,serial=2147483648",
              "Parameter 'serial' expects int32_t");
    add_fails("secret_keyring,id=k1", "Parameter 'serial' is missing");
    add_fails("secret_keyring,id=k1,serial=1,data=x",
              "Parameter 'data' is unexpected");
    g_assert_true(user_object_del("k0", &error_abort));
}

static void test_lookup(void)
{
    Error *err = NULL;
    size_t len;

    g_assert_null(crypto_secret_lookup("none", &len, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, "No secret with id 'none'");
    error_free(err);
    err = NULL;

    add_ok("secret,id=bin,data=//8=,format=base64");
    g_assert_null(crypto_secret_lookup_as_utf8("bin", &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Data from secret bin is not valid UTF-8");
    error_free(err);
    add_ok("secret,id=txt,data=p\xc3\xa4ss");
    {
        char *pass = crypto_secret_lookup_as_utf8("txt", &error_abort);

        g_assert_cmpstr(pass, ==, "p\xc3\xa4ss");
        crypto_secret_free_str(pass);
    }
    user_object_del_all();
    g_assert_null(user_object_find("txt", "secret"));
}

static void test_registry(void)
{
    Error *err = NULL;
    UserObject *obj;

    add_ok("secret,id=s0,data=x");
    add_fails("secret,id=s0,data=y", "An object with id 's0' already exists");
    obj = user_object_find("s0", "secret");
    g_assert_nonnull(obj);
    g_assert_cmpstr(user_object_get_id(obj), ==, "s0");
    g_assert_null(user_object_find("s0", "tls-creds-x509"));

    /* invariant 2: a user's reference blocks deletion */
    user_object_ref(obj);
    g_assert_false(user_object_del("s0", &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "object 's0' is in use, can not be deleted");
    error_free(err);
    err = NULL;
    user_object_unref(obj);
    g_assert_true(user_object_del("s0", &error_abort));
    g_assert_false(user_object_del("s0", &err));
    g_assert_cmpstr(error_get_pretty(err), ==, "object 's0' not found");
    error_free(err);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/secret/data", test_secret_data);
    g_test_add_func("/secret/file", test_secret_file);
    g_test_add_func("/secret/encrypted", test_secret_encrypted);
    g_test_add_func("/secret/errors", test_secret_errors);
    g_test_add_func("/secret/keyring", test_secret_keyring);
    g_test_add_func("/secret/lookup", test_lookup);
    g_test_add_func("/user-object/registry", test_registry);
    return g_test_run();
}
