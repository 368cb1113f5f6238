/*
 * Scatter/gather vectors: plain iovec arrays and QEMUIOVector.
 *
 * Invariants of a QEMUIOVector:
 *  1. size is the sum of iov[0..niov).iov_len.
 *  2. nalloc == -1 means the array is not ours (local_iov or an external
 *     array): it is never grown, reset or freed.
 *  3. Otherwise niov <= nalloc and iov was allocated here.
 */
#include "util/iov.h"

size_t iov_size(const struct iovec *iov, unsigned int iov_cnt)
{
    size_t len = 0;

    for (unsigned int i = 0; i < iov_cnt; i++) {
        len += iov[i].iov_len;
    }
    return len;
}

/*
 * Calls @fn on each piece of bytes [@offset, @offset + @bytes) of the
 * vector, with the position of that piece within the range; returns the
 * number of bytes visited (less than @bytes if the vector is shorter).
 */
typedef void IovPieceFn(void *base, size_t len, size_t done, void *opaque);

static size_t iov_for_each_piece(const struct iovec *iov,
                                 unsigned int iov_cnt, size_t offset,
                                 size_t bytes, IovPieceFn *fn, void *opaque)
{
    size_t done = 0;

    for (unsigned int i = 0; i < iov_cnt && done < bytes; i++) {
        size_t len;

        if (offset >= iov[i].iov_len) {
            offset -= iov[i].iov_len;
            continue;
        }
        len = MIN(iov[i].iov_len - offset, bytes - done);
        fn((char *)iov[i].iov_base + offset, len, done, opaque);
        done += len;
        offset = 0;
    }
    return done;
}

static void iov_piece_from_buf(void *base, size_t len, size_t done,
                               void *opaque)
{
    memcpy(base, (const char *)opaque + done, len);
}

static void iov_piece_to_buf(void *base, size_t len, size_t done,
                             void *opaque)
{
    memcpy((char *)opaque + done, base, len);
}

static void iov_piece_memset(void *base, size_t len, size_t done,
                             void *opaque)
{
    memset(base, *(const int *)opaque, len);
}

size_t iov_from_buf(const struct iovec *iov, unsigned int iov_cnt,
                    size_t offset, const void *buf, size_t bytes)
{
    return iov_for_each_piece(iov, iov_cnt, offset, bytes,
                              iov_piece_from_buf, (void *)buf);
}

size_t iov_to_buf(const struct iovec *iov, unsigned int iov_cnt,
                  size_t offset, void *buf, size_t bytes)
{
    return iov_for_each_piece(iov, iov_cnt, offset, bytes,
                              iov_piece_to_buf, buf);
}

size_t iov_memset(const struct iovec *iov, unsigned int iov_cnt,
                  size_t offset, int fillc, size_t bytes)
{
    return iov_for_each_piece(iov, iov_cnt, offset, bytes,
                              iov_piece_memset, &fillc);
}

void qemu_iovec_init(QEMUIOVector *qiov, int alloc_hint)
{
    if (alloc_hint < 1) {
        alloc_hint = 1;
    }
    qiov->iov = g_new(struct iovec, alloc_hint);
    qiov->niov = 0;
    qiov->nalloc = alloc_hint;
    qiov->size = 0;
}

void qemu_iovec_init_buf(QEMUIOVector *qiov, void *buf, size_t len)
{
    qiov->local_iov.iov_base = buf;
    qiov->local_iov.iov_len = len;
    qiov->iov = &qiov->local_iov;
    qiov->niov = 1;
    qiov->nalloc = -1;
    qiov->size = len;
}

void qemu_iovec_init_external(QEMUIOVector *qiov, struct iovec *iov,
                              int niov)
{
    qiov->iov = iov;
    qiov->niov = niov;
    qiov->nalloc = -1;
    qiov->size = iov_size(iov, niov);
}

void qemu_iovec_init_slice(QEMUIOVector *qiov, QEMUIOVector *source,
                           size_t offset, size_t len)
{
    int i = 0;

    assert(offset + len <= source->size);
    if (len == 0) {
        qemu_iovec_init_buf(qiov, NULL, 0);
        return;
    }
    /* len > 0: the element holding @offset exists */
    while (offset >= source->iov[i].iov_len) {
        offset -= source->iov[i].iov_len;
        i++;
    }
    if (offset + len <= source->iov[i].iov_len) {
        /*
         * Within one element (a request piece of a one-buffer request,
         * most of them): no array to allocate on every request.
         */
        qemu_iovec_init_buf(qiov, (uint8_t *)source->iov[i].iov_base + offset,
                            len);
        return;
    }
    qemu_iovec_init(qiov, source->niov - i);
    qemu_iovec_concat(qiov, source, iov_size(source->iov, i) + offset, len);
}

void qemu_iovec_add(QEMUIOVector *qiov, void *base, size_t len)
{
    assert(qiov->nalloc != -1);

    if (qiov->niov == qiov->nalloc) {
        qiov->nalloc = 2 * qiov->nalloc + 1;
        qiov->iov = g_renew(struct iovec, qiov->iov, qiov->nalloc);
    }
    qiov->iov[qiov->niov].iov_base = base;
    qiov->iov[qiov->niov].iov_len = len;
    qiov->size += len;
    qiov->niov++;
}

void qemu_iovec_concat(QEMUIOVector *dst, QEMUIOVector *src,
                       size_t soffset, size_t sbytes)
{
    size_t done = 0;

    assert(soffset + sbytes <= src->size);
    for (int i = 0; i < src->niov && done < sbytes; i++) {
        size_t len;

        if (soffset >= src->iov[i].iov_len) {
            soffset -= src->iov[i].iov_len;
            continue;
        }
        len = MIN(src->iov[i].iov_len - soffset, sbytes - done);
        qemu_iovec_add(dst, (char *)src->iov[i].iov_base + soffset, len);
        done += len;
        soffset = 0;
    }
}

void qemu_iovec_destroy(QEMUIOVector *qiov)
{
    if (qiov->nalloc != -1) {
        g_free(qiov->iov);
    }
    memset(qiov, 0, sizeof(*qiov));
}

void qemu_iovec_reset(QEMUIOVector *qiov)
{
    assert(qiov->nalloc != -1);
    qiov->niov = 0;
    qiov->size = 0;
}

size_t qemu_iovec_to_buf(QEMUIOVector *qiov, size_t offset,
                         void *buf, size_t bytes)
{
    return iov_to_buf(qiov->iov, qiov->niov, offset, buf, bytes);
}

size_t qemu_iovec_from_buf(QEMUIOVector *qiov, size_t offset,
                           const void *buf, size_t bytes)
{
    return iov_from_buf(qiov->iov, qiov->niov, offset, buf, bytes);
}

size_t qemu_iovec_memset(QEMUIOVector *qiov, size_t offset,
                         int fillc, size_t bytes)
{
    return iov_memset(qiov->iov, qiov->niov, offset, fillc, bytes);
}

bool qemu_iovec_is_aligned(QEMUIOVector *qiov, size_t mem_align,
                           size_t len_align)
{
    for (int i = 0; i < qiov->niov; i++) {
        const struct iovec *iov = &qiov->iov[i];

        if (iov->iov_len &&
            ((uintptr_t)iov->iov_base % mem_align ||
             iov->iov_len % len_align)) {
            return false;
        }
    }
    return true;
}

bool qemu_iovec_is_zero(QEMUIOVector *qiov, size_t offset, size_t bytes)
{
    assert(offset + bytes <= qiov->size);
    for (int i = 0; i < qiov->niov && bytes; i++) {
        size_t len;

        if (offset >= qiov->iov[i].iov_len) {
            offset -= qiov->iov[i].iov_len;
            continue;
        }
        len = MIN(qiov->iov[i].iov_len - offset, bytes);
        if (!buffer_is_zero((char *)qiov->iov[i].iov_base + offset, len)) {
            return false;
        }
        bytes -= len;
        offset = 0;
    }
    return true;
}

ssize_t qemu_iovec_compare(QEMUIOVector *a, QEMUIOVector *b)
{
    int ia = 0, ib = 0;
    size_t oa = 0, ob = 0, pos = 0;

    assert(a->size == b->size);
    /* Walk both vectors in step; their element boundaries differ. */
    while (pos < a->size) {
        const unsigned char *pa, *pb;
        size_t len;

        while (oa == a->iov[ia].iov_len) {
            ia++;
            oa = 0;
        }
        while (ob == b->iov[ib].iov_len) {
            ib++;
            ob = 0;
        }
        pa = (const unsigned char *)a->iov[ia].iov_base + oa;
        pb = (const unsigned char *)b->iov[ib].iov_base + ob;
        len = MIN(a->iov[ia].iov_len - oa, b->iov[ib].iov_len - ob);
        if (memcmp(pa, pb, len)) {
            for (size_t i = 0; i < len; i++) {
                if (pa[i] != pb[i]) {
                    return pos + i;
                }
            }
        }
        pos += len;
        oa += len;
        ob += len;
    }
    return -1;
}
