/*
 * Scatter/gather I/O vectors.
 *
 * QEMUIOVector describes a request's buffer as a list of iovecs plus the
 * total size.  Vectors made with qemu_iovec_init_buf() use the embedded
 * local_iov and must not be grown.
 */
#ifndef QBLOCK_IOV_H
#define QBLOCK_IOV_H

#include "util/osdep.h"

size_t iov_size(const struct iovec *iov, unsigned int iov_cnt);
size_t iov_from_buf(const struct iovec *iov, unsigned int iov_cnt,
                    size_t offset, const void *buf, size_t bytes);
size_t iov_to_buf(const struct iovec *iov, unsigned int iov_cnt,
                  size_t offset, void *buf, size_t bytes);
size_t iov_memset(const struct iovec *iov, unsigned int iov_cnt,
                  size_t offset, int fillc, size_t bytes);

typedef struct QEMUIOVector {
    struct iovec *iov;
    int niov;
    /* -1 for a vector built on local_iov or an external array */
    int nalloc;
    size_t size;
    struct iovec local_iov;
} QEMUIOVector;

void qemu_iovec_init(QEMUIOVector *qiov, int alloc_hint);
/* A vector of one element that points at @buf; nothing to destroy. */
void qemu_iovec_init_buf(QEMUIOVector *qiov, void *buf, size_t len);
/* Wraps an existing iovec array (not copied, not freed). */
void qemu_iovec_init_external(QEMUIOVector *qiov, struct iovec *iov,
                              int niov);
/*
 * Makes @qiov describe bytes [@offset, @offset + @len) of @source.
 * Destroy it with qemu_iovec_destroy().  A slice within one element of
 * @source is built on local_iov, allocating nothing: never grow a slice.
 */
void qemu_iovec_init_slice(QEMUIOVector *qiov, QEMUIOVector *source,
                           size_t offset, size_t len);
void qemu_iovec_add(QEMUIOVector *qiov, void *base, size_t len);
/* Appends bytes [soffset, soffset + sbytes) of @src to @dst. */
void qemu_iovec_concat(QEMUIOVector *dst, QEMUIOVector *src,
                       size_t soffset, size_t sbytes);
void qemu_iovec_destroy(QEMUIOVector *qiov);
void qemu_iovec_reset(QEMUIOVector *qiov);
size_t qemu_iovec_to_buf(QEMUIOVector *qiov, size_t offset,
                         void *buf, size_t bytes);
size_t qemu_iovec_from_buf(QEMUIOVector *qiov, size_t offset,
                           const void *buf, size_t bytes);
size_t qemu_iovec_memset(QEMUIOVector *qiov, size_t offset,
                         int fillc, size_t bytes);
/*
 * True if every non-empty piece of @qiov starts at a multiple of
 * @mem_align and is a multiple of @len_align long: what O_DIRECT asks.
 * Empty pieces are ignored, as the kernel ignores them.
 */
bool qemu_iovec_is_aligned(QEMUIOVector *qiov, size_t mem_align,
                           size_t len_align);
/* True if bytes [offset, offset + bytes) are all zero. */
bool qemu_iovec_is_zero(QEMUIOVector *qiov, size_t offset, size_t bytes);
/*
 * Compares @a and @b; returns -1 if equal, else the offset of the first
 * differing byte.
 */
ssize_t qemu_iovec_compare(QEMUIOVector *a, QEMUIOVector *b);

/* True if @buf (any length, any alignment) is all zero bytes; fast. */
bool buffer_is_zero(const void *buf, size_t len);

#endif
