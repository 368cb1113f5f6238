/*
 * Guest memory accessors (see include/util/guest-memory.h).
 *
 * Each helper walks the range piece by piece through map(), so a range
 * that spans RAM regions works and one that touches a hole fails before
 * anything beyond the hole is used.
 */

#include "util/guest-memory.h"

/* Guest ranges are at most this long: it keeps lengths and sums in range. */
#define GUEST_MEMORY_MAX_RANGE (INT64_C(1) << 40)

static bool guest_memory_range_ok(uint64_t addr, uint64_t len)
{
    return len <= GUEST_MEMORY_MAX_RANGE && addr + len >= addr;
}

/* What a walk does with each mapped piece; a negative errno stops it. */
typedef int GuestPieceFn(void *host, uint64_t len, uint64_t done,
                         void *opaque);

static int guest_memory_walk(const GuestMemory *mem, uint64_t addr,
                             uint64_t len, GuestPieceFn *fn, void *opaque)
{
    uint64_t done = 0;
    int ret;

    if (!guest_memory_range_ok(addr, len)) {
        return -EFAULT;
    }
    while (done < len) {
        uint64_t piece = len - done;
        void *host = mem->map(mem->opaque, addr + done, &piece);

        if (!host || piece == 0 || piece > len - done) {
            return -EFAULT;
        }
        ret = fn(host, piece, done, opaque);
        if (ret < 0) {
            return ret;
        }
        done += piece;
    }
    return 0;
}

static int guest_piece_read(void *host, uint64_t len, uint64_t done,
                            void *opaque)
{
    memcpy((uint8_t *)opaque + done, host, len);
    return 0;
}

static int guest_piece_write(void *host, uint64_t len, uint64_t done,
                             void *opaque)
{
    memcpy(host, (const uint8_t *)opaque + done, len);
    return 0;
}

int guest_memory_read(const GuestMemory *mem, uint64_t addr, void *buf,
                      uint64_t len)
{
    /* a failed walk must not leave the caller with stale bytes */
    int ret = guest_memory_walk(mem, addr, len, guest_piece_read, buf);

    if (ret < 0) {
        memset(buf, 0, len);
    }
    return ret;
}

int guest_memory_write(const GuestMemory *mem, uint64_t addr,
                       const void *buf, uint64_t len)
{
    /* check the whole range first: a failed write changes nothing */
    uint64_t done = 0;

    if (!guest_memory_range_ok(addr, len)) {
        return -EFAULT;
    }
    while (done < len) {
        uint64_t piece = len - done;

        if (!mem->map(mem->opaque, addr + done, &piece) || piece == 0 ||
            piece > len - done) {
            return -EFAULT;
        }
        done += piece;
    }
    return guest_memory_walk(mem, addr, len, guest_piece_write, (void *)buf);
}

/* Where guest_memory_map_iov() and guest_memory_map_sg() put pieces. */
typedef struct GuestMapTarget {
    QEMUIOVector *qiov;         /* map_iov: appended to, at most @cap */
    struct iovec *sg;           /* map_sg: filled from *@n, at most @cap */
    unsigned int *n;
    unsigned int cap;
} GuestMapTarget;

static int guest_piece_map(void *host, uint64_t len, uint64_t done,
                           void *opaque)
{
    GuestMapTarget *t = opaque;

    if (t->qiov) {
        if (t->qiov->niov >= (int)t->cap) {
            return -E2BIG;
        }
        qemu_iovec_add(t->qiov, host, len);
        return 0;
    }
    if (*t->n >= t->cap) {
        return -E2BIG;
    }
    t->sg[(*t->n)++] = (struct iovec) { .iov_base = host, .iov_len = len };
    return 0;
}

int guest_memory_map_iov(const GuestMemory *mem, uint64_t addr,
                         uint64_t len, QEMUIOVector *qiov, int max_iov)
{
    GuestMapTarget t = { .qiov = qiov, .cap = max_iov };

    return guest_memory_walk(mem, addr, len, guest_piece_map, &t);
}

int guest_memory_map_sg(const GuestMemory *mem, uint64_t addr, uint64_t len,
                        struct iovec *sg, unsigned int *n, unsigned int cap)
{
    GuestMapTarget t = { .sg = sg, .n = n, .cap = cap };

    return guest_memory_walk(mem, addr, len, guest_piece_map, &t);
}
