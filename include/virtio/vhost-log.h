/*
 * The dirty log of vhost (VHOST_F_LOG_ALL), as the vhost-user
 * specification defines it: while the front-end migrates the guest live,
 * a back-end that writes guest memory behind the front-end's back (the
 * data of a read, a status byte, the used ring) marks each guest page it
 * writes in a bitmap the front-end shares with it, so that the front-end
 * copies the page again.  A write that is not marked reaches the
 * destination as the old page: silent corruption of the migrated guest.
 *
 * The bitmap has one bit per VHOST_LOG_PAGE bytes of guest-physical
 * memory: page n is bit n % 8 of byte n / 8.  The front-end reads and
 * clears it concurrently, so a bit is only ever set, atomically.
 */
#ifndef VIRTIO_VHOST_LOG_H
#define VIRTIO_VHOST_LOG_H

#include "util/osdep.h"

#define VHOST_LOG_PAGE 0x1000

typedef struct VhostLog {
    uint8_t *bitmap;            /* shared with the front-end */
    uint64_t size;              /* bytes */
} VhostLog;

/*
 * Marks the pages of guest-physical range [@addr, @addr + @len).  Returns
 * false if part of the range lies past what the log covers (those pages
 * are not marked: the front-end sized its log for less memory than it
 * gave the back-end).
 */
bool vhost_log_mark(const VhostLog *log, uint64_t addr, uint64_t len);

#endif
