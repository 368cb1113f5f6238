/*
 * Monitor events: a list of listeners and the delivery to them.
 */
#include "util/qapi-event.h"

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

void qapi_event_emit(const char *event, QDict *data)
{
    for (guint i = 0; qapi_event_sinks && i < qapi_event_sinks->len; i++) {
        QapiEventSink *sink = &g_array_index(qapi_event_sinks,
                                             QapiEventSink, i);

        sink->fn(event, data, sink->opaque);
    }
    qdict_unref(data);
}
