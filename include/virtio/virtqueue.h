/*
 * The device side of a split virtqueue: popping descriptor chains that the
 * driver made available, and returning them through the used ring.
 *
 * Everything in guest memory is written by an untrusted driver.  The
 * queue checks every index, length, flag and address before it uses it
 * and, on the first violation, stops: the queue is broken, pop returns an
 * error that names the fault, and the device is to set DEVICE_NEEDS_RESET.
 * It never reads or writes host memory outside guest RAM, never loops
 * forever on a cyclic chain, and never trusts a count it read twice.
 *
 * The same code serves the in-process device models and the vhost-user
 * export, where the driver runs concurrently in another process: ring
 * indexes are read with acquire and published with release semantics,
 * and event-index checks are ordered by a full fence.
 */
#ifndef VIRTIO_VIRTQUEUE_H
#define VIRTIO_VIRTQUEUE_H

#include "util/error.h"
#include "util/guest-memory.h"
#include "virtio/vhost-log.h"
#include "virtio/virtio-ring.h"

/* Most host iovec entries one element may need (UIO_MAXIOV on Linux). */
#define VIRTQUEUE_MAX_SG 1024

typedef struct VirtQueue {
    /* --- set by the driver through the transport, fixed while ready --- */
    uint16_t num;               /* entries, a power of 2 */
    uint64_t desc;              /* descriptor table */
    uint64_t avail;             /* available ring (the "driver area") */
    uint64_t used;              /* used ring (the "device area") */
    bool ready;
    /* negotiated features */
    bool indirect;
    bool event_idx;

    /* --- device state --- */
    uint16_t last_avail_idx;    /* next available entry to pop */
    uint16_t used_idx;          /* next used entry to fill */
    uint16_t signalled_used;    /* used_idx at the last interrupt */
    bool signalled_used_valid;
    unsigned int inuse;         /* popped, not pushed yet */
    bool broken;
    bool no_notify;             /* the device polls: no kicks wanted */

    const GuestMemory *mem;
    /*
     * Dirty logging (vhost-log.h), set by a vhost back-end while its
     * front-end migrates: with a log, every write of the queue to the
     * used ring marks [used_log + offset, +len) in it.  The log's address
     * of the used ring is the front-end's (VHOST_VRING_F_LOG).
     */
    const VhostLog *log;
    uint64_t used_log;
    /* used-ring writes past the log were seen (reported once) */
    bool log_overflow;
} VirtQueue;

/*
 * A popped chain: device-readable (out) and device-writable (in) pieces,
 * one array, out_sg then in_sg.  The array is the storage the popper gave
 * or, for a chain with more pieces than that, heap_sg.
 */
typedef struct VirtQueueElement {
    uint16_t head;
    unsigned int out_num;
    unsigned int in_num;
    struct iovec *out_sg;
    struct iovec *in_sg;
    struct iovec *heap_sg;      /* NULL, or out_sg allocated by the pop */
} VirtQueueElement;

void virtqueue_init(VirtQueue *vq, const GuestMemory *mem);
/* Back to the state after reset: not ready, no addresses, indexes 0. */
void virtqueue_reset(VirtQueue *vq);
/*
 * Pops the next available chain into *elem (free it with
 * virtqueue_element_free, after pushing it).  Returns 1 with an element,
 * 0 if none is available, -EIO if the queue is (now) broken, with @errp
 * saying why the first time.
 */
int virtqueue_pop(VirtQueue *vq, VirtQueueElement **elem, Error **errp);
/*
 * Pops the next available chain into @elem, its pieces into @sg (room for
 * @sg_cap of them; a longer chain gets an array of its own, which
 * virtqueue_element_release() frees).  So a device that keeps elements
 * and arrays per ring entry pops without allocating.  Returns as
 * virtqueue_pop().
 */
int virtqueue_pop_into(VirtQueue *vq, VirtQueueElement *elem,
                       struct iovec *sg, unsigned int sg_cap, Error **errp);
/*
 * Pops the chain at descriptor @head again, as virtqueue_pop_into() would
 * have, without reading the available ring: for a back-end that restarted
 * and resubmits what its predecessor had popped (inflight tracking).  The
 * caller has set last_avail_idx past it.  Returns as virtqueue_pop().
 */
int virtqueue_pop_head(VirtQueue *vq, uint16_t head, VirtQueueElement *elem,
                       struct iovec *sg, unsigned int sg_cap, Error **errp);
/*
 * Reads the used ring's idx, as the driver sees it.  Returns 0, or -EIO
 * (the queue is now broken) with @errp set.
 */
int virtqueue_load_used_idx(VirtQueue *vq, uint16_t *idx, Error **errp);
/* Frees what virtqueue_pop_into() allocated for @elem, if anything. */
void virtqueue_element_release(VirtQueueElement *elem);
/* Returns @elem through the used ring with @len bytes written into it. */
int virtqueue_push(VirtQueue *vq, const VirtQueueElement *elem,
                   uint32_t len, Error **errp);
/* After pushes: whether the driver wants an interrupt (EVENT_IDX or the
 * avail ring's NO_INTERRUPT flag). */
bool virtqueue_should_notify(VirtQueue *vq);
/*
 * Whether the driver has made entries available that were not popped:
 * one read of the avail idx, for a device that busy-polls the ring
 * instead of waiting for a kick.  A ring the driver broke says no (the
 * pop that follows a kick reports it).
 */
bool virtqueue_avail_pending(VirtQueue *vq);
/*
 * Whether the device wants kicks.  Off (a device that polls the ring):
 * VRING_USED_F_NO_NOTIFY, or with EVENT_IDX an avail_event that pops no
 * longer advance.  Back on: the flag cleared or avail_event set to the
 * next entry, ordered before the avail idx is read again, so that the
 * caller's virtqueue_avail_pending() that follows sees what the driver
 * made available without a kick meanwhile.
 */
void virtqueue_set_notification(VirtQueue *vq, bool enable);
/* Frees an element of virtqueue_pop() (never one of virtqueue_pop_into()). */
void virtqueue_element_free(VirtQueueElement *elem);

#endif
