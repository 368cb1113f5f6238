/*
 * Guest memory as a device model reaches it by DMA.
 *
 * A device never assumes where guest RAM lives: it asks the GuestMemory
 * its transport gave it to translate a guest physical address into a host
 * pointer.  The test harness backs it with one buffer, the vhost-user-blk
 * export with the regions the front-end mmap'ed for it.
 *
 * Contract of map():
 *  - it returns a host pointer to guest address @addr, valid for *len
 *    bytes, and may shrink *len (never grow it) where a RAM region ends;
 *  - it returns NULL when @addr is not guest RAM;
 *  - the mapping stays valid for the lifetime of the device (guest RAM is
 *    never unmapped under a running device), so nothing is "unmapped".
 * Everything a guest passes as an address is untrusted: the helpers below
 * check every byte of a range and report -EFAULT for a hole, an overflow or
 * a range past the end of RAM, never touching memory outside RAM.
 */
#ifndef UTIL_GUEST_MEMORY_H
#define UTIL_GUEST_MEMORY_H

#include "util/iov.h"

typedef struct GuestMemory {
    void *(*map)(void *opaque, uint64_t addr, uint64_t *len);
    void *opaque;
} GuestMemory;

/* Copies @len bytes from guest address @addr; 0 or -EFAULT. */
int guest_memory_read(const GuestMemory *mem, uint64_t addr, void *buf,
                      uint64_t len);
/* Copies @len bytes to guest address @addr; 0 or -EFAULT. */
int guest_memory_write(const GuestMemory *mem, uint64_t addr,
                       const void *buf, uint64_t len);
/*
 * Appends to @qiov the host pieces of guest range [@addr, @addr + @len),
 * at most @max_iov entries in all; 0, -EFAULT (not RAM) or -E2BIG (too
 * many pieces).  On error @qiov may hold part of the range.
 */
int guest_memory_map_iov(const GuestMemory *mem, uint64_t addr,
                         uint64_t len, QEMUIOVector *qiov, int max_iov);
/*
 * The same into a plain array: appends at @sg[*@n], at most @cap entries
 * in all, and advances *@n.  On error *@n may count part of the range.
 */
int guest_memory_map_sg(const GuestMemory *mem, uint64_t addr, uint64_t len,
                        struct iovec *sg, unsigned int *n, unsigned int cap);

#endif
