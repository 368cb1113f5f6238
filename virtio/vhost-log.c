/*
 * The vhost dirty log (see include/virtio/vhost-log.h).
 */
#include "virtio/vhost-log.h"

bool vhost_log_mark(const VhostLog *log, uint64_t addr, uint64_t len)
{
    uint64_t first, last;
    bool covered = true;

    if (len == 0) {
        return true;
    }
    first = addr / VHOST_LOG_PAGE;
    /* a range that would wrap ends at the top of the address space */
    last = (len - 1 > UINT64_MAX - addr ? UINT64_MAX : addr + len - 1) /
           VHOST_LOG_PAGE;
    if (last / 8 >= log->size) {
        covered = false;
        if (first / 8 >= log->size) {
            return false;
        }
        last = log->size * 8 - 1;
    }
    for (uint64_t page = first; page <= last; page++) {
        /*
         * The front-end reads and clears bits concurrently; release: the
         * write being logged is visible before its mark.
         */
        __atomic_fetch_or(&log->bitmap[page / 8], 1u << (page % 8),
                          __ATOMIC_RELEASE);
    }
    return covered;
}
