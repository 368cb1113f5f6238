/*
 * The LUKS1 header on disk: reading, checking, writing (crypto/luks-int.h).
 *
 * A header is hostile input: every field that sizes or places something
 * (key length, stripes, slot offsets, payload offset, iteration counts)
 * is checked before anything is allocated or read from it.
 */
#include "crypto/luks-int.h"

uint32_t luks_slot_sectors(uint32_t key_bytes)
{
    uint64_t bytes = (uint64_t)key_bytes * LUKS_STRIPES;
    uint64_t sectors = DIV_ROUND_UP(bytes, CRYPTO_LUKS_SECTOR_SIZE);

    return ROUND_UP(sectors, LUKS_ALIGN_SECTORS);
}

static void luks_header_bswap(LuksHeader *hdr)
{
    hdr->version = GUINT16_FROM_BE(hdr->version);
    hdr->payload_offset = GUINT32_FROM_BE(hdr->payload_offset);
    hdr->key_bytes = GUINT32_FROM_BE(hdr->key_bytes);
    hdr->mk_digest_iterations = GUINT32_FROM_BE(hdr->mk_digest_iterations);
    for (int i = 0; i < CRYPTO_LUKS_NUM_SLOTS; i++) {
        LuksKeySlot *slot = &hdr->slots[i];

        slot->active = GUINT32_FROM_BE(slot->active);
        slot->iterations = GUINT32_FROM_BE(slot->iterations);
        slot->key_offset = GUINT32_FROM_BE(slot->key_offset);
        slot->stripes = GUINT32_FROM_BE(slot->stripes);
    }
}

/* A NUL-terminated copy of a fixed-size text field. */
static char *luks_header_text(const char *field, size_t len)
{
    return g_strndup(field, len);
}

/*
 * @found, what looking up the header's @name returned, or -ENOTSUP after
 * saying which @what ("cipher mode", "hash algorithm") is unknown here.
 */
static int luks_header_known(int found, const char *what, const char *name,
                             Error **errp)
{
    if (found < 0) {
        error_setg(errp, "Unsupported %s '%s' in LUKS header", what, name);
        return -ENOTSUP;
    }
    return found;
}

/* "xts-plain64", "cbc-essiv:sha256": mode, ivgen and its hash. */
static int luks_parse_cipher_mode(const char *text, LuksParams *p,
                                  Error **errp)
{
    g_autofree char *copy = g_strdup(text);
    char *ivgen = strchr(copy, '-');
    char *hash;
    int mode, alg;

    if (!ivgen) {
        error_setg(errp, "Unexpected cipher mode string format '%s'", text);
        return -EINVAL;
    }
    *ivgen++ = '\0';
    mode = luks_header_known(crypto_cipher_mode_lookup(copy), "cipher mode",
                             copy, errp);
    if (mode < 0) {
        return mode;
    }
    p->cipher_mode = mode;
    hash = strchr(ivgen, ':');
    if (hash) {
        *hash++ = '\0';
    }
    alg = luks_header_known(crypto_ivgen_lookup(ivgen), "ivgen algorithm",
                            ivgen, errp);
    if (alg < 0) {
        return alg;
    }
    p->ivgen_alg = alg;
    p->ivgen_hash_alg = CRYPTO_HASH_SHA256;
    if (alg == CRYPTO_IVGEN_ESSIV) {
        int h = luks_header_known(hash ? crypto_hash_lookup(hash) : -1,
                                  "ivgen hash algorithm", hash ? hash : "",
                                  errp);

        if (h < 0) {
            return h;
        }
        p->ivgen_hash_alg = h;
    }
    return 0;
}

static int luks_parse_params(const LuksHeader *hdr, LuksParams *p,
                             Error **errp)
{
    g_autofree char *cipher = luks_header_text(hdr->cipher_name,
                                               LUKS_CIPHER_NAME_LEN);
    g_autofree char *mode = luks_header_text(hdr->cipher_mode,
                                             LUKS_CIPHER_MODE_LEN);
    g_autofree char *hash = luks_header_text(hdr->hash_spec,
                                             LUKS_HASH_SPEC_LEN);
    size_t key_len;
    int alg, h, ret;

    ret = luks_parse_cipher_mode(mode, p, errp);
    if (ret < 0) {
        return ret;
    }
    key_len = hdr->key_bytes;
    if (p->cipher_mode == CRYPTO_CIPHER_MODE_XTS) {
        if (key_len % 2) {
            error_setg(errp, "LUKS key length %zu is odd for xts", key_len);
            return -EINVAL;
        }
        key_len /= 2;
    }
    alg = crypto_cipher_alg_from_family(cipher, key_len);
    if (alg < 0) {
        error_setg(errp, "Algorithm '%s' with key size %zu bytes not "
                   "supported", cipher, key_len);
        return -ENOTSUP;
    }
    p->cipher_alg = alg;
    if (!crypto_cipher_supports(alg, p->cipher_mode, errp)) {
        return -ENOTSUP;
    }
    h = luks_header_known(crypto_hash_lookup(hash), "hash algorithm", hash,
                          errp);
    if (h < 0) {
        return h;
    }
    p->hash_alg = h;
    return 0;
}

static int luks_check_slot(const LuksHeader *hdr, int i, Error **errp)
{
    const LuksKeySlot *slot = &hdr->slots[i];
    uint64_t header_sectors = DIV_ROUND_UP(sizeof(LuksHeader),
                                           CRYPTO_LUKS_SECTOR_SIZE);
    uint64_t end = (uint64_t)slot->key_offset +
                   DIV_ROUND_UP((uint64_t)hdr->key_bytes * slot->stripes,
                                CRYPTO_LUKS_SECTOR_SIZE);

    if (slot->stripes != LUKS_STRIPES) {
        error_setg(errp, "Keyslot %d is corrupted (stripes %" PRIu32
                   " != %d)", i, slot->stripes, LUKS_STRIPES);
        return -EINVAL;
    }
    if (slot->active != LUKS_SLOT_ACTIVE &&
        slot->active != LUKS_SLOT_INACTIVE) {
        error_setg(errp, "Keyslot %d state (active/disable) is corrupted",
                   i);
        return -EINVAL;
    }
    if (slot->active == LUKS_SLOT_ACTIVE && slot->iterations == 0) {
        error_setg(errp, "Keyslot %d iteration count is zero", i);
        return -EINVAL;
    }
    if (slot->active == LUKS_SLOT_ACTIVE &&
        slot->iterations > LUKS_MAX_ITERATIONS) {
        error_setg(errp, "Keyslot %d iteration count %" PRIu32 " is beyond "
                   "reason (at most %u)", i, slot->iterations,
                   LUKS_MAX_ITERATIONS);
        return -EINVAL;
    }
    if (slot->key_offset < header_sectors) {
        error_setg(errp, "Keyslot %d is overlapping with the LUKS header", i);
        return -EINVAL;
    }
    if (end > hdr->payload_offset) {
        error_setg(errp, "Keyslot %d is overlapping with the encrypted "
                   "payload", i);
        return -EINVAL;
    }
    for (int j = i + 1; j < CRYPTO_LUKS_NUM_SLOTS; j++) {
        const LuksKeySlot *other = &hdr->slots[j];
        uint64_t other_end = (uint64_t)other->key_offset +
            DIV_ROUND_UP((uint64_t)hdr->key_bytes * LUKS_STRIPES,
                         CRYPTO_LUKS_SECTOR_SIZE);

        if (slot->key_offset < other_end && other->key_offset < end) {
            error_setg(errp, "Keyslots %d and %d are overlapping in the "
                       "header", i, j);
            return -EINVAL;
        }
    }
    return 0;
}

int luks_header_load(const CryptoLuksIO *io, LuksHeader *hdr,
                     LuksParams *params, Error **errp)
{
    int ret = io->read(io->opaque, 0, hdr, sizeof(*hdr), errp);

    if (ret < 0) {
        return ret;
    }
    if (memcmp(hdr->magic, LUKS_MAGIC, LUKS_MAGIC_LEN)) {
        error_setg(errp, "Volume is not in LUKS format");
        return -EINVAL;
    }
    luks_header_bswap(hdr);
    if (hdr->version != LUKS_VERSION) {
        error_setg(errp, "Unsupported LUKS version %u", hdr->version);
        return -ENOTSUP;
    }
    if (hdr->key_bytes == 0 || hdr->key_bytes > 64) {
        error_setg(errp, "LUKS key length %" PRIu32 " is not between 1 and "
                   "64 bytes", hdr->key_bytes);
        return -EINVAL;
    }
    ret = luks_parse_params(hdr, params, errp);
    if (ret < 0) {
        return ret;
    }
    if (hdr->mk_digest_iterations == 0 ||
        hdr->mk_digest_iterations > LUKS_MAX_ITERATIONS) {
        error_setg(errp, "LUKS master key digest iteration count %" PRIu32
                   " is not between 1 and %u", hdr->mk_digest_iterations,
                   LUKS_MAX_ITERATIONS);
        return -EINVAL;
    }
    if ((uint64_t)hdr->payload_offset * CRYPTO_LUKS_SECTOR_SIZE <
        sizeof(*hdr)) {
        error_setg(errp, "LUKS payload is overlapping with the header");
        return -EINVAL;
    }
    for (int i = 0; i < CRYPTO_LUKS_NUM_SLOTS; i++) {
        ret = luks_check_slot(hdr, i, errp);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

int luks_header_store(const CryptoLuksIO *io, const LuksHeader *hdr,
                      Error **errp)
{
    LuksHeader disk = *hdr;

    /* the swap is its own inverse */
    luks_header_bswap(&disk);
    return io->write(io->opaque, 0, &disk, sizeof(disk), errp);
}
