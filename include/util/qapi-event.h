/*
 * Events for the monitor: a component that has something to report
 * (BLOCK_IMAGE_CORRUPTED from qcow2, an export going away) emits an event
 * by name with its data; whoever listens (the storage daemon's QMP
 * monitor, a test) receives it.  With no listener an event is dropped.
 *
 * Event names and the members of their data are QEMU's, declared in the
 * qapi/ schema.  Listeners run synchronously in the emitting thread, in
 * the order they were added; they must not add or remove listeners.
 */
#ifndef QBLOCK_QAPI_EVENT_H
#define QBLOCK_QAPI_EVENT_H

#include "util/qdict.h"

/* @data is borrowed for the call; take a reference to keep it. */
typedef void QapiEventListener(const char *event, QDict *data, void *opaque);

void qapi_event_add_listener(QapiEventListener *fn, void *opaque);
void qapi_event_remove_listener(QapiEventListener *fn, void *opaque);
/* Delivers @event to every listener, then drops the reference to @data. */
void qapi_event_emit(const char *event, QDict *data);

#endif
