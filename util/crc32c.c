/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), byte at a time
 * from a 256-entry table built once.  VHDX checksums a few kilobytes per
 * header, table or log entry at open, so the simple table is fast enough
 * and needs no CPU feature test.
 */
#include "util/crc32c.h"

#include <glib.h>

#define CRC32C_POLY 0x82f63b78u

static uint32_t crc32c_table[256];

static gpointer crc32c_build_table(gpointer unused)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;

        for (int bit = 0; bit < 8; bit++) {
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        }
        crc32c_table[i] = c;
    }
    return NULL;
}

uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
    static GOnce once = G_ONCE_INIT;
    const uint8_t *p = data;

    g_once(&once, crc32c_build_table, NULL);
    crc = ~crc;
    while (len--) {
        crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return ~crc;
}
