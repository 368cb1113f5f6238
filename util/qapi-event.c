/*
 * Monitor events: a list of listeners and the delivery to them.
 */
#include "util/qapi-event.h"
#include "util/aio.h"

typedef struct QapiEventSink {
    QapiEventListener *fn;
    void *opaque;
} QapiEventSink;

/* Only the main loop thread emits events and changes listeners. */
static GArray *qapi_event_sinks;

void qapi_event_add_listener(QapiEventListener *fn, void *opaque)
{
    QapiEventSink sink = { .fn = fn, .opaque = opaque };

    if (!qapi_event_sinks) {
        qapi_event_sinks = g_array_new(false, false, sizeof(QapiEventSink));
    }
    g_array_append_val(qapi_event_sinks, sink);
}

void qapi_event_remove_listener(QapiEventListener *fn, void *opaque)
{
    for (guint i = 0; qapi_event_sinks && i < qapi_event_sinks->len; i++) {
        QapiEventSink *sink = &g_array_index(qapi_event_sinks,
                                             QapiEventSink, i);

        if (sink->fn == fn && sink->opaque == opaque) {
            g_array_remove_index(qapi_event_sinks, i);
            return;
        }
    }
}

typedef struct QapiEventDeferred {
    const char *event;
    QDict *data;
} QapiEventDeferred;

static void qapi_event_emit_bh(void *opaque)
{
    QapiEventDeferred *d = opaque;

    qapi_event_emit(d->event, d->data);
    g_free(d);
}

void qapi_event_emit(const char *event, QDict *data)
{
    if (qemu_get_current_aio_context() != qemu_get_aio_context()) {
        /*
         * An iothread (a node there found corrupt): the listeners are the
         * main loop's.  @event is a string literal of the emitter.
         */
        QapiEventDeferred *d = g_new(QapiEventDeferred, 1);

        d->event = event;
        d->data = data;
        aio_bh_schedule_oneshot(qemu_get_aio_context(), qapi_event_emit_bh,
                                d);
        return;
    }
    for (guint i = 0; qapi_event_sinks && i < qapi_event_sinks->len; i++) {
        QapiEventSink *sink = &g_array_index(qapi_event_sinks,
                                             QapiEventSink, i);

        sink->fn(event, data, sink->opaque);
    }
    qdict_unref(data);
}
