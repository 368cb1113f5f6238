/*
 * util/crc32c.c against the published CRC-32C check values: the
 * "123456789" check value of the CRC catalogue, and RFC 3720's (iSCSI)
 * vectors of 32 bytes of zeroes, of ones and counting up; then that a
 * checksum continued piece by piece equals the checksum of the whole.
 */
#include "util/crc32c.h"

#include <glib.h>
#include <string.h>

static void test_check_value(void)
{
    g_assert_cmphex(crc32c(0, "123456789", 9), ==, 0xe3069283);
    g_assert_cmphex(crc32c(0, "", 0), ==, 0);
}

static void test_rfc3720(void)
{
    uint8_t buf[32];

    memset(buf, 0, sizeof(buf));
    g_assert_cmphex(crc32c(0, buf, sizeof(buf)), ==, 0x8a9136aa);
    memset(buf, 0xff, sizeof(buf));
    g_assert_cmphex(crc32c(0, buf, sizeof(buf)), ==, 0x62a8ab43);
    for (int i = 0; i < 32; i++) {
        buf[i] = i;
    }
    g_assert_cmphex(crc32c(0, buf, sizeof(buf)), ==, 0x46dd794e);
    for (int i = 0; i < 32; i++) {
        buf[i] = 31 - i;
    }
    g_assert_cmphex(crc32c(0, buf, sizeof(buf)), ==, 0x113fdb5c);
}

/* VHDX checksums a log entry read in chunks: the pieces must chain. */
static void test_continued(void)
{
    uint8_t buf[4096];
    uint32_t whole;

    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (uint8_t)(i * 131 + 7);
    }
    whole = crc32c(0, buf, sizeof(buf));
    for (size_t cut = 0; cut <= sizeof(buf); cut += 509) {
        g_assert_cmphex(crc32c(crc32c(0, buf, cut), buf + cut,
                               sizeof(buf) - cut), ==, whole);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crc32c/check-value", test_check_value);
    g_test_add_func("/crc32c/rfc3720", test_rfc3720);
    g_test_add_func("/crc32c/continued", test_continued);
    return g_test_run();
}
