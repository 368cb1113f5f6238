/*
 * Zero detection for buffers of any length and alignment.
 *
 * This is on the hot path of detect-zeroes and of qemu-img convert, which
 * test every cluster they copy, so it reads 128 bytes per step with
 * 32-byte vector ORs and tests the accumulator once per step: a non-zero
 * buffer usually fails within its first step, a zero one is read at
 * memory speed.  On x86-64 the vector loop is also built for AVX2 and the
 * variant is chosen once at load time (GCC target_clones, an ifunc).
 */
#include "util/iov.h"

#define ZERO_VEC_BYTES 32
typedef uint64_t ZeroVec __attribute__((vector_size(ZERO_VEC_BYTES)));

/* Lengths below this are not worth the vector set-up. */
#define BUFFER_ZERO_SMALL 64

/* By pointer: passing a 32-byte vector by value changes the ABI. */
static inline bool zero_vec_is_zero(const ZeroVec *v)
{
    return !((*v)[0] | (*v)[1] | (*v)[2] | (*v)[3]);
}

static bool buffer_zero_small(const unsigned char *p, size_t len)
{
    uint64_t acc = 0, word;

    for (; len >= sizeof(word); p += sizeof(word), len -= sizeof(word)) {
        memcpy(&word, p, sizeof(word));
        acc |= word;
    }
    while (len--) {
        acc |= *p++;
    }
    return !acc;
}

/* @len >= BUFFER_ZERO_SMALL, so head and tail each hold a full vector. */
#if defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static bool buffer_zero_vec(const unsigned char *p, size_t len)
{
    const unsigned char *end = p + len;
    const ZeroVec *v, *vend;
    ZeroVec acc, tail;

    /* Unaligned first and last vectors; the loop covers what is between. */
    memcpy(&acc, p, sizeof(acc));
    memcpy(&tail, end - sizeof(tail), sizeof(tail));
    acc |= tail;

    v = (const ZeroVec *)QEMU_ALIGN_UP((uintptr_t)p, ZERO_VEC_BYTES);
    vend = (const ZeroVec *)QEMU_ALIGN_DOWN((uintptr_t)end, ZERO_VEC_BYTES);
    for (; v + 4 <= vend; v += 4) {
        if (!zero_vec_is_zero(&acc)) {
            return false;
        }
        acc = v[0] | v[1] | v[2] | v[3];
    }
    for (; v < vend; v++) {
        acc |= *v;
    }
    return zero_vec_is_zero(&acc);
}

bool buffer_is_zero(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint64_t head, tail;

    if (len < BUFFER_ZERO_SMALL) {
        return buffer_zero_small(buf, len);
    }
    /*
     * Data is rarely zero at both ends: convert tests every 512-byte
     * sector it copies, and for data this answers in a few instructions
     * instead of the vector function's call and set-up (a third of the
     * user-space instructions of a convert from an NBD export).  A zero
     * buffer pays two loads more.
     */
    memcpy(&head, p, sizeof(head));
    memcpy(&tail, p + len - sizeof(tail), sizeof(tail));
    if (head | tail) {
        return false;
    }
    return buffer_zero_vec(buf, len);
}
