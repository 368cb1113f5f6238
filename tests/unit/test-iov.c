/*
 * iovec helpers, QEMUIOVector construction (owned, local, external,
 * slices, concatenation), copies at every offset, zero detection and
 * comparison, O_DIRECT alignment, and buffer_is_zero() at every
 * alignment and length.
 */
#include "util/iov.h"

#define TEST_BUF 256

/* Splits @buf into pieces of 1, 2, 3, ... bytes, so boundaries vary. */
static void qiov_from_pieces(QEMUIOVector *qiov, unsigned char *buf,
                             size_t len)
{
    size_t piece = 1;

    qemu_iovec_init(qiov, 1);
    for (size_t off = 0; off < len; off += piece, piece++) {
        qemu_iovec_add(qiov, buf + off, MIN(piece, len - off));
    }
}

static void fill_pattern(unsigned char *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = (unsigned char)(i * 7 + seed);
    }
}

static void test_iov_size_and_copies(void)
{
    unsigned char backing[TEST_BUF], in[TEST_BUF], out[TEST_BUF];
    QEMUIOVector qiov;

    qiov_from_pieces(&qiov, backing, sizeof(backing));
    g_assert_cmpuint(qiov.size, ==, sizeof(backing));
    g_assert_cmpuint(iov_size(qiov.iov, qiov.niov), ==, sizeof(backing));

    fill_pattern(in, sizeof(in), 3);
    for (size_t off = 0; off < TEST_BUF; off += 13) {
        for (size_t len = 0; off + len <= TEST_BUF; len += 17) {
            memset(backing, 0xee, sizeof(backing));
            g_assert_cmpuint(qemu_iovec_from_buf(&qiov, off, in, len), ==,
                             len);
            g_assert_cmpmem(backing + off, len, in, len);
            if (off) {
                g_assert_cmpint(backing[off - 1], ==, 0xee);
            }
            if (off + len < TEST_BUF) {
                g_assert_cmpint(backing[off + len], ==, 0xee);
            }
            memset(out, 0, sizeof(out));
            g_assert_cmpuint(qemu_iovec_to_buf(&qiov, off, out, len), ==,
                             len);
            g_assert_cmpmem(out, len, in, len);
        }
    }

    /* Past the end, copies are cut short and say so. */
    g_assert_cmpuint(qemu_iovec_to_buf(&qiov, TEST_BUF - 10, out, 100), ==,
                     10);
    g_assert_cmpuint(qemu_iovec_from_buf(&qiov, TEST_BUF + 5, in, 1), ==, 0);
    qemu_iovec_destroy(&qiov);
}

static void test_iov_memset(void)
{
    unsigned char backing[TEST_BUF];
    QEMUIOVector qiov;

    memset(backing, 0, sizeof(backing));
    qiov_from_pieces(&qiov, backing, sizeof(backing));
    g_assert_cmpuint(qemu_iovec_memset(&qiov, 10, 0x5a, 100), ==, 100);
    for (size_t i = 0; i < TEST_BUF; i++) {
        g_assert_cmpint(backing[i], ==, i >= 10 && i < 110 ? 0x5a : 0);
    }
    g_assert_cmpuint(iov_memset(qiov.iov, qiov.niov, 250, 1, 100), ==, 6);
    qemu_iovec_destroy(&qiov);
}

static void test_init_buf_and_external(void)
{
    char buf[64];
    struct iovec iov[2] = {
        { .iov_base = buf, .iov_len = 10 },
        { .iov_base = buf + 20, .iov_len = 30 },
    };
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, buf, sizeof(buf));
    g_assert_cmpint(qiov.niov, ==, 1);
    g_assert_cmpint(qiov.nalloc, ==, -1);
    g_assert_true(qiov.iov == &qiov.local_iov);
    g_assert_cmpuint(qiov.size, ==, sizeof(buf));
    /* Destroying a vector that owns nothing is harmless. */
    qemu_iovec_destroy(&qiov);

    qemu_iovec_init_external(&qiov, iov, 2);
    g_assert_cmpuint(qiov.size, ==, 40);
    g_assert_true(qiov.iov == iov);
    qemu_iovec_destroy(&qiov);
    g_assert_true(iov[0].iov_base == buf);
}

static void test_slice_and_concat(void)
{
    unsigned char backing[TEST_BUF], out[TEST_BUF];
    QEMUIOVector src, slice, cat;

    fill_pattern(backing, sizeof(backing), 11);
    qiov_from_pieces(&src, backing, sizeof(backing));

    for (size_t off = 0; off < TEST_BUF; off += 31) {
        for (size_t len = 0; off + len <= TEST_BUF; len += 23) {
            qemu_iovec_init_slice(&slice, &src, off, len);
            g_assert_cmpuint(slice.size, ==, len);
            g_assert_cmpuint(qemu_iovec_to_buf(&slice, 0, out, len), ==, len);
            g_assert_cmpmem(out, len, backing + off, len);
            /* A slice points into the source: no copy was made. */
            if (len) {
                g_assert_true(slice.iov[0].iov_base >= (void *)backing &&
                              slice.iov[0].iov_base <
                              (void *)(backing + TEST_BUF));
            }
            qemu_iovec_destroy(&slice);
        }
    }
    /* the bytes 3..5 are src's element [3, 6): one element, no array */
    qemu_iovec_init_slice(&slice, &src, 3, 3);
    g_assert_cmpint(slice.nalloc, ==, -1);
    g_assert_true(slice.iov[0].iov_base == backing + 3);
    qemu_iovec_destroy(&slice);
    /* a slice of one buffer is one element at every offset */
    qemu_iovec_init_buf(&cat, backing, sizeof(backing));
    qemu_iovec_init_slice(&slice, &cat, 100, 50);
    g_assert_cmpint(slice.nalloc, ==, -1);
    g_assert_cmpint(slice.niov, ==, 1);
    g_assert_true(slice.iov[0].iov_base == backing + 100);
    qemu_iovec_destroy(&slice);

    qemu_iovec_init(&cat, 0);
    qemu_iovec_concat(&cat, &src, 200, 56);
    qemu_iovec_concat(&cat, &src, 0, 10);
    g_assert_cmpuint(cat.size, ==, 66);
    qemu_iovec_to_buf(&cat, 0, out, 66);
    g_assert_cmpmem(out, 56, backing + 200, 56);
    g_assert_cmpmem(out + 56, 10, backing, 10);

    qemu_iovec_reset(&cat);
    g_assert_cmpuint(cat.size, ==, 0);
    g_assert_cmpint(cat.niov, ==, 0);
    qemu_iovec_add(&cat, backing, 5);
    g_assert_cmpuint(cat.size, ==, 5);
    qemu_iovec_destroy(&cat);
    qemu_iovec_destroy(&src);
}

static void test_is_zero(void)
{
    unsigned char backing[TEST_BUF];
    QEMUIOVector qiov;

    memset(backing, 0, sizeof(backing));
    qiov_from_pieces(&qiov, backing, sizeof(backing));
    g_assert_true(qemu_iovec_is_zero(&qiov, 0, TEST_BUF));
    backing[100] = 1;
    g_assert_false(qemu_iovec_is_zero(&qiov, 0, TEST_BUF));
    g_assert_false(qemu_iovec_is_zero(&qiov, 100, 1));
    g_assert_true(qemu_iovec_is_zero(&qiov, 0, 100));
    g_assert_true(qemu_iovec_is_zero(&qiov, 101, TEST_BUF - 101));
    g_assert_true(qemu_iovec_is_zero(&qiov, 50, 0));
    qemu_iovec_destroy(&qiov);
}

static void test_compare(void)
{
    unsigned char a_buf[TEST_BUF], b_buf[TEST_BUF];
    QEMUIOVector a, b;

    fill_pattern(a_buf, sizeof(a_buf), 5);
    memcpy(b_buf, a_buf, sizeof(b_buf));
    /* Different element boundaries on each side. */
    qiov_from_pieces(&a, a_buf, sizeof(a_buf));
    qemu_iovec_init(&b, 2);
    qemu_iovec_add(&b, b_buf, 77);
    qemu_iovec_add(&b, b_buf + 77, TEST_BUF - 77);

    g_assert_cmpint(qemu_iovec_compare(&a, &b), ==, -1);
    for (size_t pos = 0; pos < TEST_BUF; pos += 19) {
        b_buf[pos] ^= 0x80;
        g_assert_cmpint(qemu_iovec_compare(&a, &b), ==, pos);
        b_buf[pos] ^= 0x80;
    }
    b_buf[TEST_BUF - 1] ^= 1;
    b_buf[TEST_BUF - 2] ^= 1;
    g_assert_cmpint(qemu_iovec_compare(&a, &b), ==, TEST_BUF - 2);
    qemu_iovec_destroy(&a);
    qemu_iovec_destroy(&b);
}

static void test_buffer_is_zero(void)
{
    /* Room for every alignment and lengths across the vector sizes. */
    size_t max_len = 1024;
    unsigned char *buf = g_malloc0(max_len + 64);

    for (size_t align = 0; align < 64; align += 3) {
        unsigned char *p = buf + align;

        for (size_t len = 0; len <= max_len;
             len += len < 300 ? 1 : 61) {
            g_assert_true(buffer_is_zero(p, len));
            /* A single byte anywhere, including head and tail, counts. */
            for (size_t pos = 0; pos < len;
                 pos += len < 140 ? 1 : 37) {
                p[pos] = 0x01;
                if (buffer_is_zero(p, len)) {
                    g_error("non-zero byte at %zu missed (align %zu, "
                            "len %zu)", pos, align, len);
                }
                p[pos] = 0;
            }
            if (len) {
                p[len - 1] = 0x80;
                g_assert_false(buffer_is_zero(p, len));
                p[len - 1] = 0;
                /* Bytes just outside the range are not looked at. */
                p[len] = 0xff;
                if (align) {
                    p[-1] = 0xff;
                }
                g_assert_true(buffer_is_zero(p, len));
                p[len] = 0;
                if (align) {
                    p[-1] = 0;
                }
            }
        }
    }
    g_free(buf);
}

/*
 * O_DIRECT's test: each non-empty piece aligned in memory and length; an
 * empty piece anywhere (a virtio status descriptor once its byte is cut
 * off) does not count, as in the kernel.
 */
static void test_is_aligned(void)
{
    uint8_t *buf = qemu_memalign(4096, 3 * 4096);
    struct iovec iov[3] = {
        { .iov_base = buf, .iov_len = 4096 },
        { .iov_base = buf + 4096 + 512, .iov_len = 512 },
        { .iov_base = buf + 2 * 4096 + 16, .iov_len = 0 },
    };
    QEMUIOVector qiov;

    qemu_iovec_init_external(&qiov, iov, 3);
    g_assert_true(qemu_iovec_is_aligned(&qiov, 512, 512));
    g_assert_false(qemu_iovec_is_aligned(&qiov, 4096, 512));
    g_assert_false(qemu_iovec_is_aligned(&qiov, 512, 4096));
    iov[1].iov_base = buf + 4096;
    iov[1].iov_len = 4096;
    g_assert_true(qemu_iovec_is_aligned(&qiov, 4096, 4096));
    /* a misaligned piece that is not empty */
    iov[2].iov_len = 1;
    g_assert_false(qemu_iovec_is_aligned(&qiov, 512, 1));
    iov[2].iov_base = buf + 2 * 4096;
    g_assert_true(qemu_iovec_is_aligned(&qiov, 512, 1));
    /* no pieces at all */
    qemu_iovec_init_external(&qiov, iov, 0);
    g_assert_true(qemu_iovec_is_aligned(&qiov, 4096, 4096));
    qemu_vfree(buf);
}

static void test_buffer_is_zero_large(void)
{
    size_t len = 2 * MiB + 3;
    unsigned char *buf = g_malloc0(len);

    g_assert_true(buffer_is_zero(buf, len));
    buf[MiB + 12345] = 4;
    g_assert_false(buffer_is_zero(buf, len));
    g_assert_true(buffer_is_zero(buf, MiB + 12345));
    g_assert_true(buffer_is_zero(buf + MiB + 12346, len - MiB - 12346));
    g_free(buf);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/iov/size-and-copies", test_iov_size_and_copies);
    g_test_add_func("/iov/memset", test_iov_memset);
    g_test_add_func("/iov/init-buf-external", test_init_buf_and_external);
    g_test_add_func("/iov/slice-concat", test_slice_and_concat);
    g_test_add_func("/iov/is-zero", test_is_zero);
    g_test_add_func("/iov/is-aligned", test_is_aligned);
    g_test_add_func("/iov/compare", test_compare);
    g_test_add_func("/iov/buffer-is-zero", test_buffer_is_zero);
    g_test_add_func("/iov/buffer-is-zero-large", test_buffer_is_zero_large);
    return g_test_run();
}
