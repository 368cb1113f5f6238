/*
 * Hierarchical bitmaps (include/util/hbitmap.h).
 *
 * Invariants:
 *  1. Bit j of level k + 1 is set if and only if word j of level k is
 *     nonzero.  The top level is one word.
 *  2. Bits of level 0 at or past hb->size are clear, so that counts,
 *     searches and serialisation never see them.
 *  3. hb->count is the number of set bits of level 0.
 *
 * Setting or clearing a range touches the words of the range at level 0
 * and, above it, only the words whose lower word changed between zero and
 * nonzero; a search climbs at most every level once and comes down once.
 */
#include "util/hbitmap.h"
#include "util/cutils.h"

/* 64 bits per level: 11 levels cover 2^64 bits. */
#define HB_MAX_LEVELS 11

struct HBitmap {
    uint64_t size;                      /* bits at level 0 */
    uint64_t count;                     /* set bits at level 0 (inv. 3) */
    int nlevels;
    uint64_t nbits[HB_MAX_LEVELS];      /* bits per level */
    uint64_t *words[HB_MAX_LEVELS];
};

static uint64_t hb_nwords(uint64_t nbits)
{
    return MAX(DIV_ROUND_UP(nbits, 64), 1);
}

static inline int hb_popcount(uint64_t word)
{
    return __builtin_popcountll(word);
}

/* The bits of one word from @lo to @hi inclusive (0..63). */
static uint64_t hb_mask(unsigned lo, unsigned hi)
{
    uint64_t upto = hi == 63 ? ~0ULL : (1ULL << (hi + 1)) - 1;

    return upto & ~((1ULL << lo) - 1);
}

HBitmap *hbitmap_alloc(uint64_t size)
{
    HBitmap *hb = g_new0(HBitmap, 1);
    uint64_t nbits = size;

    hb->size = size;
    do {
        assert(hb->nlevels < HB_MAX_LEVELS);
        hb->nbits[hb->nlevels] = nbits;
        hb->words[hb->nlevels] = g_new0(uint64_t, hb_nwords(nbits));
        nbits = hb_nwords(nbits);
        hb->nlevels++;
    } while (hb->nbits[hb->nlevels - 1] > 64);
    return hb;
}

void hbitmap_free(HBitmap *hb)
{
    if (!hb) {
        return;
    }
    for (int k = 0; k < hb->nlevels; k++) {
        g_free(hb->words[k]);
    }
    g_free(hb);
}

HBitmap *hbitmap_copy(const HBitmap *hb)
{
    HBitmap *c = g_memdup2(hb, sizeof(*hb));

    for (int k = 0; k < hb->nlevels; k++) {
        c->words[k] = g_memdup2(hb->words[k],
                                hb_nwords(hb->nbits[k]) * sizeof(uint64_t));
    }
    return c;
}

uint64_t hbitmap_size(const HBitmap *hb)
{
    return hb->size;
}

uint64_t hbitmap_count(const HBitmap *hb)
{
    return hb->count;
}

bool hbitmap_get(const HBitmap *hb, uint64_t bit)
{
    return bit < hb->size && (hb->words[0][bit / 64] >> (bit % 64)) & 1;
}

/* Sets bits [@first, @last] of level @k, then the summary above (inv. 1). */
static void hb_set_level(HBitmap *hb, int k, uint64_t first, uint64_t last)
{
    uint64_t w0 = first / 64, w1 = last / 64;
    uint64_t *words = hb->words[k];
    int64_t new_first = -1, new_last = -1;

    for (uint64_t w = w0; w <= w1; w++) {
        uint64_t old = words[w];
        uint64_t mask = hb_mask(w == w0 ? first % 64 : 0,
                                w == w1 ? last % 64 : 63);

        words[w] = old | mask;
        if (k == 0) {
            hb->count += hb_popcount(words[w]) - hb_popcount(old);
        }
        if (!old) {
            if (new_first < 0) {
                new_first = w;
            }
            new_last = w;
        }
    }
    /* every word of [w0, w1] is nonzero now, so the range may be wider */
    if (new_first >= 0 && k + 1 < hb->nlevels) {
        hb_set_level(hb, k + 1, new_first, new_last);
    }
}

/* Clears bits [@first, @last] of level @k, then the summary above. */
static void hb_reset_level(HBitmap *hb, int k, uint64_t first, uint64_t last)
{
    uint64_t w0 = first / 64, w1 = last / 64;
    uint64_t *words = hb->words[k];
    int64_t zero_first, zero_last;

    for (uint64_t w = w0; w <= w1; w++) {
        uint64_t old = words[w];
        uint64_t mask = hb_mask(w == w0 ? first % 64 : 0,
                                w == w1 ? last % 64 : 63);

        words[w] = old & ~mask;
        if (k == 0) {
            hb->count -= hb_popcount(old) - hb_popcount(words[w]);
        }
    }
    /* the inner words are zero; the edge ones may keep bits outside */
    zero_first = words[w0] ? (int64_t)w0 + 1 : (int64_t)w0;
    zero_last = words[w1] ? (int64_t)w1 - 1 : (int64_t)w1;
    if (zero_first <= zero_last && k + 1 < hb->nlevels) {
        hb_reset_level(hb, k + 1, zero_first, zero_last);
    }
}

/* Clips [@first, @first + @count) to the size; false if empty. */
static bool hb_clip(const HBitmap *hb, uint64_t first, uint64_t *count)
{
    if (first >= hb->size || !*count) {
        return false;
    }
    *count = MIN(*count, hb->size - first);
    return true;
}

void hbitmap_set(HBitmap *hb, uint64_t first, uint64_t count)
{
    uint64_t last;

    if (!hb_clip(hb, first, &count)) {
        return;
    }
    last = first + count - 1;
    /*
     * The request path's common case: a write inside one word whose bits
     * are set already (a rewrite of dirty data) changes nothing above.
     */
    if (first / 64 == last / 64) {
        uint64_t mask = hb_mask(first % 64, last % 64);

        if ((hb->words[0][first / 64] & mask) == mask) {
            return;
        }
    }
    hb_set_level(hb, 0, first, last);
}

void hbitmap_reset(HBitmap *hb, uint64_t first, uint64_t count)
{
    if (hb_clip(hb, first, &count)) {
        hb_reset_level(hb, 0, first, first + count - 1);
    }
}

void hbitmap_reset_all(HBitmap *hb)
{
    for (int k = 0; k < hb->nlevels; k++) {
        memset(hb->words[k], 0, hb_nwords(hb->nbits[k]) * sizeof(uint64_t));
    }
    hb->count = 0;
}

/* The first set bit at level @k at or after @from, or -1. */
static int64_t hb_next_set_level(const HBitmap *hb, int k, uint64_t from)
{
    uint64_t word;
    int64_t up;

    if (from >= hb->nbits[k]) {
        return -1;
    }
    word = hb->words[k][from / 64] & ~((1ULL << (from % 64)) - 1);
    if (word) {
        return (from & ~63ULL) + ctz64(word);
    }
    if (k + 1 == hb->nlevels) {
        return -1;
    }
    /* inv. 1: the next nonzero word of this level is named above */
    up = hb_next_set_level(hb, k + 1, from / 64 + 1);
    if (up < 0) {
        return -1;
    }
    assert(hb->words[k][up]);
    return up * 64 + ctz64(hb->words[k][up]);
}

int64_t hbitmap_next_set(const HBitmap *hb, uint64_t first, uint64_t count)
{
    int64_t bit;

    if (!hb_clip(hb, first, &count)) {
        return -1;
    }
    bit = hb_next_set_level(hb, 0, first);
    return bit >= 0 && (uint64_t)bit < first + count ? bit : -1;
}

int64_t hbitmap_next_clear(const HBitmap *hb, uint64_t first,
                           uint64_t count)
{
    uint64_t end, w;

    if (!hb_clip(hb, first, &count)) {
        return -1;
    }
    end = first + count;
    for (w = first / 64; w * 64 < end; w++) {
        uint64_t word = ~hb->words[0][w];

        if (w == first / 64) {
            word &= ~((1ULL << (first % 64)) - 1);
        }
        if (word) {
            uint64_t bit = w * 64 + ctz64(word);

            return bit < end ? (int64_t)bit : -1;
        }
    }
    return -1;
}

/* Recomputes the summary levels and the count from level 0. */
static void hb_rebuild(HBitmap *hb)
{
    hb->count = 0;
    for (uint64_t w = 0; w < hb_nwords(hb->size); w++) {
        hb->count += hb_popcount(hb->words[0][w]);
    }
    for (int k = 1; k < hb->nlevels; k++) {
        memset(hb->words[k], 0, hb_nwords(hb->nbits[k]) * sizeof(uint64_t));
        for (uint64_t j = 0; j < hb->nbits[k]; j++) {
            if (hb->words[k - 1][j]) {
                hb->words[k][j / 64] |= 1ULL << (j % 64);
            }
        }
    }
}

void hbitmap_truncate(HBitmap *hb, uint64_t size)
{
    HBitmap *n = hbitmap_alloc(size);
    uint64_t keep = MIN(hb_nwords(size), hb_nwords(hb->size));

    memcpy(n->words[0], hb->words[0], keep * sizeof(uint64_t));
    /* inv. 2 for the new last word */
    if (size % 64) {
        n->words[0][size / 64] &= (1ULL << (size % 64)) - 1;
    } else if (size == 0) {
        n->words[0][0] = 0;
    }
    hb_rebuild(n);
    for (int k = 0; k < hb->nlevels; k++) {
        g_free(hb->words[k]);
    }
    *hb = *n;
    g_free(n);
}

void hbitmap_merge(HBitmap *dst, const HBitmap *src)
{
    assert(dst->size == src->size);
    for (uint64_t w = 0; w < hb_nwords(dst->size); w++) {
        dst->words[0][w] |= src->words[0][w];
    }
    hb_rebuild(dst);
}

void hbitmap_serialize(const HBitmap *hb, uint8_t *buf, uint64_t first,
                       uint64_t count)
{
    uint64_t nbytes = DIV_ROUND_UP(count, 8);

    assert(first % 64 == 0);
    for (uint64_t off = 0; off < nbytes; off += 8) {
        uint64_t bit = first + off * 8;
        uint64_t le = GUINT64_TO_LE(bit < hb->size ?
                                    hb->words[0][bit / 64] : 0);

        memcpy(buf + off, &le, MIN(8, nbytes - off));
    }
}

/* Sets the bits @bits in word @w of level 0. */
static void hb_or_word(HBitmap *hb, uint64_t w, uint64_t bits)
{
    uint64_t old = hb->words[0][w];

    hb->words[0][w] = old | bits;
    hb->count += hb_popcount(old | bits) - hb_popcount(old);
    if (!old && bits && hb->nlevels > 1) {
        hb_set_level(hb, 1, w, w);
    }
}

void hbitmap_deserialize(HBitmap *hb, const uint8_t *buf, uint64_t first,
                         uint64_t count)
{
    uint64_t nbytes = DIV_ROUND_UP(count, 8);

    if (!buf) {
        hbitmap_set(hb, first, count);
        return;
    }
    assert(first % 64 == 0);
    for (uint64_t off = 0; off < nbytes; off += 8) {
        uint64_t bit = first + off * 8;
        uint64_t le = 0, word;

        if (bit >= hb->size) {
            break;
        }
        memcpy(&le, buf + off, MIN(8, nbytes - off));
        word = GUINT64_FROM_LE(le);
        if (count - off * 8 < 64) {
            word &= (1ULL << (count - off * 8)) - 1;
        }
        if (hb->size - bit < 64) {
            word &= (1ULL << (hb->size - bit)) - 1;     /* inv. 2 */
        }
        hb_or_word(hb, bit / 64, word);
    }
}

char *hbitmap_sha256(const HBitmap *hb)
{
    GChecksum *sum = g_checksum_new(G_CHECKSUM_SHA256);
    uint64_t n = DIV_ROUND_UP(hb->size, 64);
    char *hex;

    for (uint64_t w = 0; w < n; w++) {
        uint64_t le = GUINT64_TO_LE(hb->words[0][w]);

        g_checksum_update(sum, (const guchar *)&le, sizeof(le));
    }
    hex = g_strdup(g_checksum_get_string(sum));
    g_checksum_free(sum);
    return hex;
}
