/*
 * Guest memory that can vanish: the front-end owns the files behind the
 * guest memory regions it shares, and a file that it shrinks takes the
 * pages past its new end from every mapping.  Touching them raises
 * SIGBUS, which would kill the whole process: every export and the
 * monitor.  A guarded mapping survives that (vhost-user-sigbus.c).
 *
 * Everything but the signal handler runs in the server's thread.
 */
#ifndef QBLOCK_VHOST_USER_SIGBUS_H
#define QBLOCK_VHOST_USER_SIGBUS_H

#include "util/osdep.h"

/* Mappings guarded at once, over every connection (memory regions, up
 * to VU_MAX_MEM_SLOTS each, dirty logs, inflight buffers); a mapping
 * that finds no slot is refused, with an error that says so. */
#define VU_SIGBUS_MAX_GUARDS 256

/*
 * Guards [@addr, +@size), a shared mapping of a front-end's file.  A
 * SIGBUS inside it, in any thread, replaces the whole mapping with
 * anonymous zero pages (so the access that faulted and every later one
 * complete, reading zeroes and writing nowhere), records where it
 * faulted and writes to @notify_fd, an eventfd the server watches, so
 * that the loop ends the connection.  Returns the guard's slot, or
 * -ENOSPC.  Installs the SIGBUS handler on first use.
 */
int vu_sigbus_guard(void *addr, size_t size, int notify_fd);
/* Ends the guard of @slot, before the mapping is unmapped. */
void vu_sigbus_unguard(int slot);
/*
 * True if the mapping of @slot faulted since the last call, with the
 * faulting offset from its start in @offset.
 */
bool vu_sigbus_take_fault(int slot, uint64_t *offset);

#endif
