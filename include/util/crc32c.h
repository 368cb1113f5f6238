/*
 * CRC-32C (Castagnoli), the checksum of VHDX's headers, region tables and
 * log entries.  Neither GLib nor the libraries qblock links provide it.
 */
#ifndef UTIL_CRC32C_H
#define UTIL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Continues the CRC-32C @crc (0 to start) over @len bytes at @data; the
 * result is the finished checksum, fit to be passed back to go on.
 */
uint32_t crc32c(uint32_t crc, const void *data, size_t len);

#endif
