/*
 * The thread-context object type (--object thread-context, object-add):
 * a thread created with the object, sleeping until the object is
 * deleted, whose CPU affinity is set from a list of CPUs or of NUMA
 * nodes.  QEMU creates threads from such a context (memory
 * preallocation) so that they inherit its affinity; nothing in qblock
 * does, so the object holds the affinity and shows it (qom-get).
 */
#ifndef QBLOCK_THREAD_CONTEXT_H
#define QBLOCK_THREAD_CONTEXT_H

#include "util/osdep.h"
#include "util/error.h"

/* The most CPUs a list may name: the kernel's own limit (NR_CPUS) is 8192 */
#define THREAD_CONTEXT_MAX_CPUS 65536

/*
 * The CPUs of a list as sysfs writes them (a NUMA node's cpulist:
 * "0-3,8,10-11", empty for none, a newline allowed at the end), added to
 * @cpus (a GArray of unsigned, in the list's order).  False with @errp
 * set, naming the text, if it is no such list or names a CPU at or
 * beyond THREAD_CONTEXT_MAX_CPUS.
 */
bool thread_context_parse_cpulist(const char *text, GArray *cpus,
                                  Error **errp);

#endif
