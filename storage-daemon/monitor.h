/*
 * QMP monitors (--monitor): every connection that a monitor's character
 * device gets is a QMP session of its own, with the greeting, the
 * capabilities negotiation, its requests and its replies; events go to
 * every session that has finished negotiating.
 */
#ifndef QBLOCK_MONITOR_H
#define QBLOCK_MONITOR_H

#include "util/json.h"

/*
 * Registers the monitor's own commands (qmp_capabilities, query-version)
 * and starts listening for events.  Once, before monitor_add().
 */
void monitor_init(void);
/*
 * Adds a monitor from @opts, a MonitorOptions object checked against the
 * schema.  Errors in QEMU's words: chardev "x" not found, "Device 'x' is
 * in use", "Only QMP is supported".
 */
int monitor_add(JsonObject *opts, Error **errp);
/*
 * Requests still queued are not run (after quit); what was already
 * replied is still sent.
 */
void monitor_stop_dispatch(void);
/*
 * The reply to the request that runs now is kept until monitor_cleanup():
 * quit's, which QEMU's daemon sends once shutdown is over (its events
 * before it, the images closed and their locks released).
 */
void monitor_defer_reply(void);
/*
 * Holds (releases) every session as while a command runs (invariant 1
 * of monitor.c): for what the command line creates at start-up, whose
 * nested polls must not run a request on a node half open.
 */
void monitor_hold(void);
void monitor_release(void);
/*
 * Sends what each session still has to send, a deferred reply last
 * (waiting at most a second in all for slow readers), then closes every
 * session.
 */
void monitor_cleanup(void);

/* What the greeting and query-version report (a VersionInfo). */
JsonNode *qmp_version_info(void);

#endif
