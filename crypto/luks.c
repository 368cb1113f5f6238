/*
 * LUKS1 volumes: create, unlock, encrypt, describe, manage key slots
 * (include/crypto/luks.h states the invariants cited below).
 *
 * A key slot stores the master key split into LUKS_STRIPES stripes
 * (crypto/afsplit.c) and encrypted with the volume's cipher spec under a
 * key derived from the passphrase by PBKDF2; the header keeps a PBKDF2
 * digest of the master key to recognise it once merged.
 */
#include "crypto/luks-int.h"

#include <gcrypt.h>

#include "crypto/afsplit.h"
#include "crypto/init.h"
#include "crypto/pbkdf.h"
#include "crypto/secret.h"

struct CryptoLuks {
    /* immutable after open/create, but for slots changed by amend */
    LuksHeader hdr;             /* host byte order */
    LuksParams p;
    uint8_t *master_key;        /* NULL when opened without I/O */
    /*
     * The id of the secret object the volume was opened with: an amend
     * that adds a slot proves a passphrase again, by default this one
     */
    char *key_secret;
    CryptoIvgen *ivgen;
    bool legacy;                /* qcow2 AES: no header at all */

    /* invariant 3: ciphers keyed with master_key, not in use */
    GMutex pool_lock;
    GPtrArray *pool;
};

void crypto_luks_create_options_default(CryptoLuksCreateOptions *opts)
{
    *opts = (CryptoLuksCreateOptions) {
        .cipher_alg = CRYPTO_CIPHER_AES_256,
        .cipher_mode = CRYPTO_CIPHER_MODE_XTS,
        .ivgen_alg = CRYPTO_IVGEN_PLAIN64,
        .ivgen_hash_alg = CRYPTO_HASH_SHA256,
        .hash_alg = CRYPTO_HASH_SHA256,
        .iter_time_ms = 2000,
    };
}

static bool crypto_luks_parse_enum(const char *name, const char *value,
                                   int (*lookup)(const char *), int *out,
                                   Error **errp)
{
    int v;

    if (!value) {
        return true;
    }
    v = lookup(value);
    if (v < 0) {
        error_setg(errp, "Parameter '%s' does not accept value '%s'", name,
                   value);
        return false;
    }
    *out = v;
    return true;
}

bool crypto_luks_parse_create_options(CryptoLuksCreateOptions *opts,
                                      const char *(*get)(void *opaque,
                                                         const char *name),
                                      void *opaque, Error **errp)
{
    int cipher = opts->cipher_alg, mode = opts->cipher_mode;
    int ivgen = opts->ivgen_alg, ivhash = opts->ivgen_hash_alg;
    int hash = opts->hash_alg;
    const char *iter_time = get(opaque, "iter-time");

    opts->key_secret = get(opaque, "key-secret");
    /* QEMU knows these by name (QCryptoCipherAlgorithm) and refuses them */
    if (g_strv_contains((const char *const[]){ "des", "3des", NULL },
                        get(opaque, "cipher-alg") ?: "")) {
        error_setg(errp, "Algorithm '%s' not supported",
                   get(opaque, "cipher-alg"));
        return false;
    }
    if (!crypto_luks_parse_enum("cipher-alg", get(opaque, "cipher-alg"),
                                crypto_cipher_alg_lookup, &cipher, errp) ||
        !crypto_luks_parse_enum("cipher-mode", get(opaque, "cipher-mode"),
                                crypto_cipher_mode_lookup, &mode, errp) ||
        !crypto_luks_parse_enum("ivgen-alg", get(opaque, "ivgen-alg"),
                                crypto_ivgen_lookup, &ivgen, errp) ||
        !crypto_luks_parse_enum("ivgen-hash-alg",
                                get(opaque, "ivgen-hash-alg"),
                                crypto_hash_lookup, &ivhash, errp) ||
        !crypto_luks_parse_enum("hash-alg", get(opaque, "hash-alg"),
                                crypto_hash_lookup, &hash, errp)) {
        return false;
    }
    if (iter_time) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(iter_time, &end, 10);
        if (errno || *end || end == iter_time || v == 0 ||
            v > UINT32_MAX) {
            error_setg(errp, "Parameter 'iter-time' expects a number of "
                       "milliseconds between 1 and %u, not '%s'",
                       UINT32_MAX, iter_time);
            return false;
        }
        opts->iter_time_ms = v;
    }
    opts->cipher_alg = cipher;
    opts->cipher_mode = mode;
    opts->ivgen_alg = ivgen;
    opts->ivgen_hash_alg = ivhash;
    opts->hash_alg = hash;
    return true;
}

uint64_t crypto_luks_header_len(const CryptoLuksCreateOptions *opts)
{
    uint32_t key_bytes = crypto_cipher_key_len(opts->cipher_alg,
                                               opts->cipher_mode);

    return ((uint64_t)LUKS_ALIGN_SECTORS +
            CRYPTO_LUKS_NUM_SLOTS * (uint64_t)luks_slot_sectors(key_bytes)) *
           CRYPTO_LUKS_SECTOR_SIZE;
}

/*
 * Encrypts or decrypts whole sectors numbered from @sector with @cipher
 * and @ivgen: the one loop of payload and key material alike.
 */
static int crypto_luks_crypt(CryptoCipher *cipher, CryptoIvgen *ivgen,
                             size_t iv_len, uint64_t sector, uint8_t *buf,
                             size_t len, bool encrypt, Error **errp)
{
    uint8_t iv[16];

    assert(len % CRYPTO_LUKS_SECTOR_SIZE == 0 && iv_len <= sizeof(iv));
    for (size_t off = 0; off < len; off += CRYPTO_LUKS_SECTOR_SIZE) {
        int ret = crypto_ivgen_calculate(ivgen, sector++, iv, iv_len, errp);

        if (ret == 0) {
            ret = crypto_cipher_setiv(cipher, iv, iv_len, errp);
        }
        if (ret == 0) {
            ret = (encrypt ? crypto_cipher_encrypt : crypto_cipher_decrypt)
                  (cipher, buf + off, CRYPTO_LUKS_SECTOR_SIZE, errp);
        }
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

/* Key material: the split key, encrypted under the slot's derived key. */
static int crypto_luks_crypt_material(const LuksParams *p, const uint8_t *key,
                                      size_t key_len, uint8_t *buf,
                                      size_t len, bool encrypt, Error **errp)
{
    CryptoCipher *cipher = crypto_cipher_new(p->cipher_alg, p->cipher_mode,
                                             key, key_len, errp);
    CryptoIvgen *ivgen;
    int ret;

    if (!cipher) {
        return -EINVAL;
    }
    ivgen = crypto_ivgen_new(p->ivgen_alg, p->cipher_alg, p->ivgen_hash_alg,
                             key, key_len, errp);
    if (!ivgen) {
        crypto_cipher_free(cipher);
        return -EINVAL;
    }
    ret = crypto_luks_crypt(cipher, ivgen,
                            crypto_cipher_alg_block_len(p->cipher_alg), 0,
                            buf, len, encrypt, errp);
    crypto_ivgen_free(ivgen);
    crypto_cipher_free(cipher);
    return ret;
}

static size_t crypto_luks_material_len(const LuksHeader *hdr)
{
    return ROUND_UP((size_t)hdr->key_bytes * LUKS_STRIPES,
                    CRYPTO_LUKS_SECTOR_SIZE);
}

/* Writes slot @i of @hdr for @passphrase and @master_key (both in memory). */
static int crypto_luks_store_slot(LuksHeader *hdr, const LuksParams *p,
                                  int i, const char *passphrase,
                                  const uint8_t *master_key,
                                  uint64_t iter_time_ms,
                                  const CryptoLuksIO *io, Error **errp)
{
    LuksKeySlot *slot = &hdr->slots[i];
    size_t key_len = hdr->key_bytes;
    size_t material_len = crypto_luks_material_len(hdr);
    uint8_t *material = g_malloc0(material_len);
    uint8_t *slot_key = g_malloc(key_len);
    uint64_t iters = crypto_pbkdf2_count_iters(p->hash_alg, key_len,
                                               iter_time_ms);
    int ret;

    slot->iterations = MIN(MAX(iters, LUKS_MIN_SLOT_ITERATIONS),
                           LUKS_MAX_ITERATIONS);
    gcry_randomize(slot->salt, LUKS_SALT_LEN, GCRY_STRONG_RANDOM);
    ret = crypto_pbkdf2(p->hash_alg, (const uint8_t *)passphrase,
                        strlen(passphrase), slot->salt, LUKS_SALT_LEN,
                        slot->iterations, slot_key, key_len, errp);
    if (ret == 0) {
        crypto_afsplit_encode(p->hash_alg, key_len, LUKS_STRIPES,
                              master_key, material);
        ret = crypto_luks_crypt_material(p, slot_key, key_len, material,
                                         material_len, true, errp);
    }
    if (ret == 0) {
        ret = io->write(io->opaque,
                        (uint64_t)slot->key_offset * CRYPTO_LUKS_SECTOR_SIZE,
                        material, material_len, errp);
    }
    if (ret == 0) {
        slot->active = LUKS_SLOT_ACTIVE;
        slot->stripes = LUKS_STRIPES;
    }
    crypto_secret_free(material, material_len);
    crypto_secret_free(slot_key, key_len);
    return ret;
}

static int crypto_luks_digest(const LuksHeader *hdr, const LuksParams *p,
                              const uint8_t *master_key, uint8_t *digest,
                              Error **errp)
{
    return crypto_pbkdf2(p->hash_alg, master_key, hdr->key_bytes,
                         hdr->mk_digest_salt, LUKS_SALT_LEN,
                         hdr->mk_digest_iterations, digest, LUKS_DIGEST_LEN,
                         errp);
}

/*
 * Tries @passphrase on slot @i: 1 and the master key in @master_key if it
 * opens it, 0 if not, -errno if the slot cannot be read.
 */
static int crypto_luks_try_slot(const LuksHeader *hdr, const LuksParams *p,
                                int i, const char *passphrase,
                                const CryptoLuksIO *io, uint8_t *master_key,
                                Error **errp)
{
    const LuksKeySlot *slot = &hdr->slots[i];
    size_t key_len = hdr->key_bytes;
    size_t material_len = crypto_luks_material_len(hdr);
    uint8_t *material = g_try_malloc(material_len);
    uint8_t *slot_key = g_malloc(key_len);
    uint8_t digest[LUKS_DIGEST_LEN];
    int ret;

    if (!material) {
        g_free(slot_key);
        error_setg(errp, "Cannot allocate %zu bytes for keyslot %d",
                   material_len, i);
        return -ENOMEM;
    }
    ret = io->read(io->opaque,
                   (uint64_t)slot->key_offset * CRYPTO_LUKS_SECTOR_SIZE,
                   material, material_len, errp);
    if (ret == 0) {
        ret = crypto_pbkdf2(p->hash_alg, (const uint8_t *)passphrase,
                            strlen(passphrase), slot->salt, LUKS_SALT_LEN,
                            slot->iterations, slot_key, key_len, errp);
    }
    if (ret == 0) {
        ret = crypto_luks_crypt_material(p, slot_key, key_len, material,
                                         material_len, false, errp);
    }
    if (ret == 0) {
        crypto_afsplit_decode(p->hash_alg, key_len, LUKS_STRIPES, material,
                              master_key);
        ret = crypto_luks_digest(hdr, p, master_key, digest, errp);
    }
    if (ret == 0) {
        ret = !memcmp(digest, hdr->mk_digest, LUKS_DIGEST_LEN);
    }
    crypto_secret_free(material, material_len);
    crypto_secret_free(slot_key, key_len);
    return ret;
}

/* The slot that @passphrase opens from @start, or -1; -errno on errors. */
static int crypto_luks_find_slot(const LuksHeader *hdr, const LuksParams *p,
                                 int start, const char *passphrase,
                                 const CryptoLuksIO *io,
                                 uint8_t *master_key, Error **errp)
{
    for (int i = start; i < CRYPTO_LUKS_NUM_SLOTS; i++) {
        int ret;

        if (hdr->slots[i].active != LUKS_SLOT_ACTIVE) {
            continue;
        }
        ret = crypto_luks_try_slot(hdr, p, i, passphrase, io, master_key,
                                   errp);
        if (ret != 0) {
            return ret < 0 ? ret : i;
        }
    }
    return -1;
}

/* The cipher pool and ivgen of the payload, keyed with the master key. */
static int crypto_luks_setup(CryptoLuks *luks, Error **errp)
{
    luks->ivgen = crypto_ivgen_new(luks->p.ivgen_alg, luks->p.cipher_alg,
                                   luks->p.ivgen_hash_alg, luks->master_key,
                                   luks->hdr.key_bytes, errp);
    return luks->ivgen ? 0 : -EINVAL;
}

static CryptoLuks *crypto_luks_new(void)
{
    CryptoLuks *luks = g_new0(CryptoLuks, 1);

    g_mutex_init(&luks->pool_lock);
    luks->pool = g_ptr_array_new_with_free_func(
                     (GDestroyNotify)crypto_cipher_free);
    return luks;
}

void crypto_luks_free(CryptoLuks *luks)
{
    if (!luks) {
        return;
    }
    g_ptr_array_unref(luks->pool);
    g_mutex_clear(&luks->pool_lock);
    crypto_ivgen_free(luks->ivgen);
    crypto_secret_free(luks->master_key, luks->hdr.key_bytes);
    g_free(luks->key_secret);
    g_free(luks);
}

static char *crypto_luks_passphrase(const char *key_secret, Error **errp)
{
    if (!key_secret) {
        error_setg(errp, "Parameter 'key-secret' is required for cipher");
        return NULL;
    }
    return crypto_secret_lookup_as_utf8(key_secret, errp);
}

CryptoLuks *crypto_luks_open(const char *key_secret, const CryptoLuksIO *io,
                             unsigned flags, Error **errp)
{
    CryptoLuks *luks = crypto_luks_new();
    char *passphrase = NULL;
    int slot;

    if (luks_header_load(io, &luks->hdr, &luks->p, errp) < 0) {
        goto fail;
    }
    if (flags & CRYPTO_LUKS_OPEN_NO_IO) {
        return luks;
    }
    passphrase = crypto_luks_passphrase(key_secret, errp);
    if (!passphrase) {
        goto fail;
    }
    luks->master_key = g_malloc(luks->hdr.key_bytes);
    slot = crypto_luks_find_slot(&luks->hdr, &luks->p, 0, passphrase, io,
                                 luks->master_key, errp);
    if (slot < -1) {
        goto fail;
    }
    if (slot == -1) {
        error_setg(errp, "Invalid password, cannot unlock any keyslot");
        goto fail;
    }
    if (crypto_luks_setup(luks, errp) < 0) {
        goto fail;
    }
    crypto_secret_free_str(passphrase);
    luks->key_secret = g_strdup(key_secret);
    return luks;

fail:
    crypto_secret_free_str(passphrase);
    crypto_luks_free(luks);
    return NULL;
}

CryptoLuks *crypto_luks_new_qcow_aes(const char *key_secret, Error **errp)
{
    /* the AES-128 key: at most 16 bytes of the passphrase */
    enum { QCOW_AES_KEY_LEN = 16 };
    CryptoLuks *luks;
    char *passphrase = crypto_luks_passphrase(key_secret, errp);

    if (!passphrase) {
        return NULL;
    }
    luks = crypto_luks_new();
    luks->legacy = true;
    luks->p = (LuksParams) {
        .cipher_alg = CRYPTO_CIPHER_AES_128,
        .cipher_mode = CRYPTO_CIPHER_MODE_CBC,
        .ivgen_alg = CRYPTO_IVGEN_PLAIN64,
        .hash_alg = CRYPTO_HASH_SHA256,
    };
    luks->hdr.key_bytes = QCOW_AES_KEY_LEN;
    luks->master_key = g_malloc0(QCOW_AES_KEY_LEN);
    memcpy(luks->master_key, passphrase,
           MIN(strlen(passphrase), QCOW_AES_KEY_LEN));
    crypto_secret_free_str(passphrase);
    if (crypto_luks_setup(luks, errp) < 0) {
        crypto_luks_free(luks);
        return NULL;
    }
    return luks;
}

static void crypto_luks_fill_header(LuksHeader *hdr,
                                    const CryptoLuksCreateOptions *opts)
{
    uint32_t slot_sectors;
    g_autofree char *uuid = g_uuid_string_random();
    g_autofree char *mode = NULL;

    memset(hdr, 0, sizeof(*hdr));
    memcpy(hdr->magic, LUKS_MAGIC, LUKS_MAGIC_LEN);
    hdr->version = LUKS_VERSION;
    g_strlcpy(hdr->cipher_name, crypto_cipher_alg_family(opts->cipher_alg),
              LUKS_CIPHER_NAME_LEN);
    mode = opts->ivgen_alg == CRYPTO_IVGEN_ESSIV ?
           g_strdup_printf("%s-essiv:%s",
                           crypto_cipher_mode_name(opts->cipher_mode),
                           crypto_hash_name(opts->ivgen_hash_alg)) :
           g_strdup_printf("%s-%s",
                           crypto_cipher_mode_name(opts->cipher_mode),
                           crypto_ivgen_name(opts->ivgen_alg));
    g_strlcpy(hdr->cipher_mode, mode, LUKS_CIPHER_MODE_LEN);
    g_strlcpy(hdr->hash_spec, crypto_hash_name(opts->hash_alg),
              LUKS_HASH_SPEC_LEN);
    hdr->key_bytes = crypto_cipher_key_len(opts->cipher_alg,
                                           opts->cipher_mode);
    g_strlcpy(hdr->uuid, uuid, LUKS_UUID_LEN);
    slot_sectors = luks_slot_sectors(hdr->key_bytes);
    for (int i = 0; i < CRYPTO_LUKS_NUM_SLOTS; i++) {
        hdr->slots[i].active = LUKS_SLOT_INACTIVE;
        hdr->slots[i].stripes = LUKS_STRIPES;
        hdr->slots[i].key_offset = LUKS_ALIGN_SECTORS + i * slot_sectors;
    }
    hdr->payload_offset = crypto_luks_header_len(opts) /
                          CRYPTO_LUKS_SECTOR_SIZE;
}

CryptoLuks *crypto_luks_create(const CryptoLuksCreateOptions *opts,
                               const CryptoLuksIO *io, Error **errp)
{
    CryptoLuks *luks;
    char *passphrase;
    uint64_t iters;

    if (!crypto_cipher_supports(opts->cipher_alg, opts->cipher_mode, errp)) {
        return NULL;
    }
    passphrase = crypto_luks_passphrase(opts->key_secret, errp);
    if (!passphrase) {
        return NULL;
    }
    luks = crypto_luks_new();
    crypto_luks_fill_header(&luks->hdr, opts);
    luks->p = (LuksParams) {
        .cipher_alg = opts->cipher_alg,
        .cipher_mode = opts->cipher_mode,
        .ivgen_alg = opts->ivgen_alg,
        .ivgen_hash_alg = opts->ivgen_hash_alg,
        .hash_alg = opts->hash_alg,
    };
    crypto_init();
    luks->master_key = g_malloc(luks->hdr.key_bytes);
    gcry_randomize(luks->master_key, luks->hdr.key_bytes,
                   GCRY_VERY_STRONG_RANDOM);
    gcry_randomize(luks->hdr.mk_digest_salt, LUKS_SALT_LEN,
                   GCRY_STRONG_RANDOM);
    /* the digest only recognises the key: an eighth of a slot's work */
    iters = crypto_pbkdf2_count_iters(opts->hash_alg, LUKS_DIGEST_LEN,
                                      opts->iter_time_ms) / 8;
    luks->hdr.mk_digest_iterations = MIN(MAX(iters,
                                             LUKS_MIN_DIGEST_ITERATIONS),
                                         LUKS_MAX_ITERATIONS);
    if (crypto_luks_setup(luks, errp) < 0 ||
        crypto_luks_digest(&luks->hdr, &luks->p, luks->master_key,
                           luks->hdr.mk_digest, errp) < 0 ||
        io->init(io->opaque, crypto_luks_payload_offset(luks), errp) < 0 ||
        crypto_luks_store_slot(&luks->hdr, &luks->p, 0, passphrase,
                               luks->master_key, opts->iter_time_ms, io,
                               errp) < 0 ||
        luks_header_store(io, &luks->hdr, errp) < 0) {
        crypto_secret_free_str(passphrase);
        crypto_luks_free(luks);
        return NULL;
    }
    crypto_secret_free_str(passphrase);
    return luks;
}

uint64_t crypto_luks_payload_offset(const CryptoLuks *luks)
{
    return (uint64_t)luks->hdr.payload_offset * CRYPTO_LUKS_SECTOR_SIZE;
}

static CryptoCipher *crypto_luks_get_cipher(CryptoLuks *luks, Error **errp)
{
    CryptoCipher *cipher = NULL;

    g_mutex_lock(&luks->pool_lock);
    if (luks->pool->len) {
        cipher = g_ptr_array_steal_index_fast(luks->pool,
                                              luks->pool->len - 1);
    }
    g_mutex_unlock(&luks->pool_lock);
    if (!cipher) {
        cipher = crypto_cipher_new(luks->p.cipher_alg, luks->p.cipher_mode,
                                   luks->master_key, luks->hdr.key_bytes,
                                   errp);
    }
    return cipher;
}

static void crypto_luks_put_cipher(CryptoLuks *luks, CryptoCipher *cipher)
{
    g_mutex_lock(&luks->pool_lock);
    g_ptr_array_add(luks->pool, cipher);
    g_mutex_unlock(&luks->pool_lock);
}

static int crypto_luks_payload(CryptoLuks *luks, uint64_t offset,
                               uint8_t *buf, size_t len, bool encrypt,
                               Error **errp)
{
    CryptoCipher *cipher;
    int ret;

    assert(luks->master_key);
    assert(offset % CRYPTO_LUKS_SECTOR_SIZE == 0);
    cipher = crypto_luks_get_cipher(luks, errp);
    if (!cipher) {
        return -EIO;
    }
    ret = crypto_luks_crypt(cipher, luks->ivgen,
                            crypto_cipher_alg_block_len(luks->p.cipher_alg),
                            offset / CRYPTO_LUKS_SECTOR_SIZE, buf, len,
                            encrypt, errp);
    crypto_luks_put_cipher(luks, cipher);
    return ret;
}

int crypto_luks_encrypt(CryptoLuks *luks, uint64_t offset, uint8_t *buf,
                        size_t len, Error **errp)
{
    return crypto_luks_payload(luks, offset, buf, len, true, errp);
}

int crypto_luks_decrypt(CryptoLuks *luks, uint64_t offset, uint8_t *buf,
                        size_t len, Error **errp)
{
    return crypto_luks_payload(luks, offset, buf, len, false, errp);
}

JsonObject *crypto_luks_get_info(const CryptoLuks *luks)
{
    const LuksHeader *hdr = &luks->hdr;
    JsonObject *info;
    JsonArray *slots = json_array_new();
    g_autofree char *uuid = g_strndup(hdr->uuid, LUKS_UUID_LEN);

    assert(!luks->legacy);
    info = json_object_new();
    json_object_set_string_member(info, "ivgen-alg",
                                  crypto_ivgen_name(luks->p.ivgen_alg));
    if (luks->p.ivgen_alg == CRYPTO_IVGEN_ESSIV) {
        json_object_set_string_member(info, "ivgen-hash-alg",
                                      crypto_hash_name(
                                          luks->p.ivgen_hash_alg));
    }
    json_object_set_string_member(info, "hash-alg",
                                  crypto_hash_name(luks->p.hash_alg));
    json_object_set_string_member(info, "cipher-alg",
                                  crypto_cipher_alg_name(luks->p.cipher_alg));
    json_object_set_string_member(info, "uuid", uuid);
    json_object_set_string_member(info, "cipher-mode",
                                  crypto_cipher_mode_name(
                                      luks->p.cipher_mode));
    for (int i = 0; i < CRYPTO_LUKS_NUM_SLOTS; i++) {
        const LuksKeySlot *slot = &hdr->slots[i];
        JsonObject *s = json_object_new();
        bool active = slot->active == LUKS_SLOT_ACTIVE;

        json_object_set_boolean_member(s, "active", active);
        if (active) {
            json_object_set_int_member(s, "iters", slot->iterations);
        }
        json_object_set_int_member(s, "key-offset",
                                   (int64_t)slot->key_offset *
                                   CRYPTO_LUKS_SECTOR_SIZE);
        if (active) {
            json_object_set_int_member(s, "stripes", slot->stripes);
        }
        json_array_add_object_element(slots, s);
    }
    json_object_set_array_member(info, "slots", slots);
    json_object_set_int_member(info, "payload-offset",
                               crypto_luks_payload_offset(luks));
    json_object_set_int_member(info, "master-key-iters",
                               hdr->mk_digest_iterations);
    return info;
}

/* Overwrites slot @i's material with noise and marks it inactive. */
static int crypto_luks_erase_slot(LuksHeader *hdr, int i,
                                  const CryptoLuksIO *io, Error **errp)
{
    LuksKeySlot *slot = &hdr->slots[i];
    size_t material_len = crypto_luks_material_len(hdr);
    g_autofree uint8_t *noise = g_malloc(material_len);
    int ret;

    gcry_randomize(noise, material_len, GCRY_WEAK_RANDOM);
    ret = io->write(io->opaque,
                    (uint64_t)slot->key_offset * CRYPTO_LUKS_SECTOR_SIZE,
                    noise, material_len, errp);
    if (ret == 0) {
        slot->active = LUKS_SLOT_INACTIVE;
        slot->iterations = 0;
        memset(slot->salt, 0, LUKS_SALT_LEN);
    }
    return ret;
}

static int crypto_luks_count_active(const LuksHeader *hdr)
{
    int n = 0;

    for (int i = 0; i < CRYPTO_LUKS_NUM_SLOTS; i++) {
        n += hdr->slots[i].active == LUKS_SLOT_ACTIVE;
    }
    return n;
}

/*
 * Adding a slot first proves that the passphrase of @secret opens one of
 * the slots as they are now, as QEMU does (it reads the master key back
 * that way): a daemon that still holds the key of a passphrase erased
 * since does not hand it out to a new one without the proof.
 */
static int crypto_luks_prove_passphrase(CryptoLuks *luks,
                                        const CryptoLuksIO *io,
                                        const char *secret, Error **errp)
{
    char *passphrase = crypto_luks_passphrase(secret, errp);
    g_autofree uint8_t *key = NULL;
    int slot;

    if (!passphrase) {
        return -EINVAL;
    }
    key = g_malloc(luks->hdr.key_bytes);
    slot = crypto_luks_find_slot(&luks->hdr, &luks->p, 0, passphrase, io,
                                 key, errp);
    crypto_secret_free_str(passphrase);
    explicit_bzero(key, luks->hdr.key_bytes);
    if (slot == -1) {
        error_setg(errp, "Invalid password, cannot unlock any keyslot");
        return -EINVAL;
    }
    return slot < 0 ? -EIO : 0;
}

static int crypto_luks_amend_add(CryptoLuks *luks, const CryptoLuksIO *io,
                                 const CryptoLuksAmendOptions *opts,
                                 bool force, Error **errp)
{
    int slot = opts->keyslot;
    char *passphrase;
    int ret;

    if (!opts->new_secret) {
        error_setg(errp, "'new-secret' is required to activate a keyslot");
        return -EINVAL;
    }
    if (opts->old_secret) {
        error_setg(errp, "'old-secret' must not be given when activating "
                   "keyslots");
        return -EINVAL;
    }
    /* --force overwrites it: the passphrase it had no longer opens */
    if (slot >= 0 && luks->hdr.slots[slot].active == LUKS_SLOT_ACTIVE &&
        !force) {
        error_setg(errp, "Refusing to overwrite active keyslot %i - please "
                   "erase it first", slot);
        return -EINVAL;
    }
    for (int i = 0; slot < 0 && i < CRYPTO_LUKS_NUM_SLOTS; i++) {
        if (luks->hdr.slots[i].active != LUKS_SLOT_ACTIVE) {
            slot = i;
        }
    }
    if (slot < 0) {
        error_setg(errp, "Can't add a keyslot - all keyslots are in use");
        return -ENOSPC;
    }
    ret = crypto_luks_prove_passphrase(luks, io, opts->secret ?
                                       opts->secret : luks->key_secret,
                                       errp);
    if (ret < 0) {
        return ret;
    }
    passphrase = crypto_secret_lookup_as_utf8(opts->new_secret, errp);
    if (!passphrase) {
        return -EINVAL;
    }
    ret = crypto_luks_store_slot(&luks->hdr, &luks->p, slot, passphrase,
                                 luks->master_key, opts->iter_time_ms, io,
                                 errp);
    crypto_secret_free_str(passphrase);
    return ret;
}

static int crypto_luks_amend_erase(CryptoLuks *luks, const CryptoLuksIO *io,
                                   const CryptoLuksAmendOptions *opts,
                                   bool force, Error **errp)
{
    LuksHeader *hdr = &luks->hdr;
    bool erase[CRYPTO_LUKS_NUM_SLOTS] = { false };
    int n = 0;

    if (opts->new_secret) {
        error_setg(errp, "'new-secret' must not be given when erasing "
                   "keyslots");
        return -EINVAL;
    }
    if (opts->keyslot >= 0) {
        if (hdr->slots[opts->keyslot].active != LUKS_SLOT_ACTIVE) {
            if (force) {
                return 0;   /* nothing to erase, as QEMU takes it */
            }
            error_setg(errp, "Given keyslot %i is already erased (inactive) ",
                       opts->keyslot);
            return -EINVAL;
        }
        erase[opts->keyslot] = true;
        n = 1;
    } else if (opts->old_secret) {
        char *passphrase = crypto_secret_lookup_as_utf8(opts->old_secret,
                                                        errp);
        g_autofree uint8_t *key = NULL;

        if (!passphrase) {
            return -EINVAL;
        }
        key = g_malloc(hdr->key_bytes);
        for (int i = 0; i < CRYPTO_LUKS_NUM_SLOTS;) {
            int slot = crypto_luks_find_slot(hdr, &luks->p, i, passphrase,
                                             io, key, errp);

            if (slot < -1) {
                crypto_secret_free_str(passphrase);
                explicit_bzero(key, hdr->key_bytes);
                return -EIO;
            }
            if (slot == -1) {
                break;
            }
            erase[slot] = true;
            n++;
            i = slot + 1;
        }
        crypto_secret_free_str(passphrase);
        explicit_bzero(key, hdr->key_bytes);
        if (!n) {
            error_setg(errp, "No keyslots match given (old) password for "
                       "erase operation");
            return -EINVAL;
        }
    } else {
        error_setg(errp, "To erase keyslot(s), either explicit keyslot "
                   "index or the password currently contained in them must "
                   "be given");
        return -EINVAL;
    }
    if (!force && n == crypto_luks_count_active(hdr)) {
        if (opts->keyslot >= 0) {
            error_setg(errp, "Attempt to erase the only active keyslot %i "
                       "which will erase all the data in the image "
                       "irreversibly - refusing operation", opts->keyslot);
        } else {
            error_setg(errp, "All the active keyslots match the (old) "
                       "password that was given and erasing them will "
                       "erase all the data in the image irreversibly - "
                       "refusing operation");
        }
        return -EINVAL;
    }
    for (int i = 0; i < CRYPTO_LUKS_NUM_SLOTS; i++) {
        int ret = erase[i] ? crypto_luks_erase_slot(hdr, i, io, errp) : 0;

        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

int crypto_luks_amend(CryptoLuks *luks, const CryptoLuksIO *io,
                      const CryptoLuksAmendOptions *opts, bool force,
                      Error **errp)
{
    LuksHeader saved = luks->hdr;
    int ret;

    if (!luks->master_key || luks->legacy) {
        error_setg(errp, "The LUKS volume must be unlocked to change its "
                   "keyslots");
        return -EINVAL;
    }
    if (opts->keyslot >= CRYPTO_LUKS_NUM_SLOTS) {
        error_setg(errp, "Invalid keyslot %d specified, must be between 0 "
                   "and %d", opts->keyslot, CRYPTO_LUKS_NUM_SLOTS - 1);
        return -EINVAL;
    }
    ret = opts->active ? crypto_luks_amend_add(luks, io, opts, force, errp)
                       : crypto_luks_amend_erase(luks, io, opts, force,
                                                 errp);
    if (ret == 0) {
        ret = luks_header_store(io, &luks->hdr, errp);
    }
    if (ret < 0) {
        luks->hdr = saved;
    }
    return ret;
}
