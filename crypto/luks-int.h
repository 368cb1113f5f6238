/*
 * What the files of the LUKS implementation share: the on-disk header
 * (crypto/luks-header.c reads, checks and writes it) and the state of an
 * open volume (crypto/luks.c).
 */
#ifndef QBLOCK_CRYPTO_LUKS_INT_H
#define QBLOCK_CRYPTO_LUKS_INT_H

#include "crypto/luks.h"

#define LUKS_MAGIC "LUKS\xba\xbe"
#define LUKS_MAGIC_LEN 6
#define LUKS_VERSION 1
#define LUKS_CIPHER_NAME_LEN 32
#define LUKS_CIPHER_MODE_LEN 32
#define LUKS_HASH_SPEC_LEN 32
#define LUKS_DIGEST_LEN 20
#define LUKS_SALT_LEN 32
#define LUKS_UUID_LEN 40
/* every splitter has this many stripes; QEMU and cryptsetup refuse others */
#define LUKS_STRIPES 4000
#define LUKS_SLOT_ACTIVE 0x00AC71F3
#define LUKS_SLOT_INACTIVE 0x0000DEAD
/* key material and payload start on 4 KiB boundaries, as QEMU lays them */
#define LUKS_ALIGN_SECTORS 8
/*
 * More PBKDF2 iterations than this would take minutes to test: a header
 * that asks for them is corrupt or hostile, not slow.
 */
#define LUKS_MAX_ITERATIONS (1u << 28)
/* cryptsetup's floors, so that a fast machine never writes a weak slot */
#define LUKS_MIN_SLOT_ITERATIONS 1000
#define LUKS_MIN_DIGEST_ITERATIONS 1000

typedef struct QEMU_PACKED LuksKeySlot {
    uint32_t active;
    uint32_t iterations;
    uint8_t salt[LUKS_SALT_LEN];
    uint32_t key_offset;        /* sectors */
    uint32_t stripes;
} LuksKeySlot;

/* big-endian on disk; host order in memory after luks_header_load() */
typedef struct QEMU_PACKED LuksHeader {
    char magic[LUKS_MAGIC_LEN];
    uint16_t version;
    char cipher_name[LUKS_CIPHER_NAME_LEN];
    char cipher_mode[LUKS_CIPHER_MODE_LEN];
    char hash_spec[LUKS_HASH_SPEC_LEN];
    uint32_t payload_offset;    /* sectors */
    uint32_t key_bytes;
    uint8_t mk_digest[LUKS_DIGEST_LEN];
    uint8_t mk_digest_salt[LUKS_SALT_LEN];
    uint32_t mk_digest_iterations;
    char uuid[LUKS_UUID_LEN];
    LuksKeySlot slots[CRYPTO_LUKS_NUM_SLOTS];
} LuksHeader;

G_STATIC_ASSERT(sizeof(LuksKeySlot) == 48);
G_STATIC_ASSERT(sizeof(LuksHeader) == 592);
G_STATIC_ASSERT(offsetof(LuksHeader, payload_offset) == 104);
G_STATIC_ASSERT(offsetof(LuksHeader, slots) == 208);

/* What the text fields of a header say, in our enums. */
typedef struct LuksParams {
    CryptoCipherAlg cipher_alg;
    CryptoCipherMode cipher_mode;
    CryptoIvgenAlg ivgen_alg;
    CryptoHashAlg ivgen_hash_alg;   /* essiv only */
    CryptoHashAlg hash_alg;
} LuksParams;

/*
 * Reads the header through @io, checks every field (invariant 1: reads
 * only) and converts it to host order.  Errors are QEMU's where QEMU has
 * one, and name the field and value otherwise.
 */
int luks_header_load(const CryptoLuksIO *io, LuksHeader *hdr,
                     LuksParams *params, Error **errp);
/* Writes @hdr (host order) as the first sector of the volume. */
int luks_header_store(const CryptoLuksIO *io, const LuksHeader *hdr,
                      Error **errp);
/* Sectors of key material one slot takes, aligned. */
uint32_t luks_slot_sectors(uint32_t key_bytes);

#endif
