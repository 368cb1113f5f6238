/*
 * qblock-io: the data buffers of read and write commands (aligned for the
 * image, deliberately misaligned with -m, filled from a pattern or a
 * file, split into vectors); see io-cmds.h.
 */
#include "io-cmds.h"

uint8_t *qio_alloc(BlockBackend *blk, size_t len, int pattern)
{
    size_t extra = qio_misalign ? QIO_MISALIGN_OFFSET : 0;
    uint8_t *buf = blk_blockalign(blk, len + extra + 1);

    memset(buf, pattern, len + extra);
    return buf + extra;
}

void qio_free(uint8_t *buf)
{
    if (buf) {
        qemu_vfree(buf - (qio_misalign ? QIO_MISALIGN_OFFSET : 0));
    }
}

uint8_t *qio_alloc_from_file(BlockBackend *blk, size_t len,
                             const char *path)
{
    uint8_t *buf, *p;
    size_t got, filled;
    FILE *f = fopen(path, "r");

    if (!f) {
        perror(path);
        return NULL;
    }
    buf = qio_alloc(blk, len, 0);
    got = len ? fread(buf, 1, len, f) : 0;
    if (ferror(f)) {
        perror(path);
        goto fail;
    }
    if (got == 0 && len) {
        fprintf(stderr, "%s: file is empty\n", path);
        goto fail;
    }
    fclose(f);
    for (p = buf + got, filled = got; filled < len; p += got, filled += got) {
        memcpy(p, buf, MIN(got, len - filled));
    }
    return buf;

fail:
    fclose(f);
    qio_free(buf);
    return NULL;
}

uint8_t *qio_create_iovec(BlockBackend *blk, QEMUIOVector *qiov,
                          char **argv, int nr_iov, int pattern)
{
    int64_t *sizes = g_new(int64_t, nr_iov);
    int64_t total = 0;
    uint8_t *buf, *p;

    for (int i = 0; i < nr_iov; i++) {
        int64_t len;

        if (qio_parse_number(argv[i], &len) < 0) {
            goto fail;
        }
        if (len > QIO_MAX_REQUEST_BYTES) {
            printf("Argument '%s' exceeds maximum size %" PRId64 "\n",
                   argv[i], QIO_MAX_REQUEST_BYTES);
            goto fail;
        }
        total += len;
        if (total > QIO_MAX_REQUEST_BYTES) {
            printf("The total number of bytes exceed the maximum size %"
                   PRId64 "\n", QIO_MAX_REQUEST_BYTES);
            goto fail;
        }
        sizes[i] = len;
    }

    qemu_iovec_init(qiov, nr_iov);
    buf = p = qio_alloc(blk, total, pattern);
    for (int i = 0; i < nr_iov; i++) {
        qemu_iovec_add(qiov, p, sizes[i]);
        p += sizes[i];
    }
    g_free(sizes);
    return buf;

fail:
    g_free(sizes);
    return NULL;
}

bool qio_buf_is_pattern(const uint8_t *buf, int64_t len, int pattern)
{
    for (int64_t i = 0; i < len; i++) {
        if (buf[i] != pattern) {
            return false;
        }
    }
    return true;
}

uint8_t *qio_parse_offset_vector(BlockBackend *blk, char **argv, int argc,
                                 int pattern, int64_t *offset,
                                 QEMUIOVector *qiov)
{
    if (qio_parse_number(argv[0], offset) < 0) {
        return NULL;
    }
    return qio_create_iovec(blk, qiov, &argv[1], argc - 1, pattern);
}
