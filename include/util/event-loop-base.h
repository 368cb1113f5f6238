/*
 * The properties that the iothread and main-loop objects share (QEMU's
 * EventLoopBase): the adaptive busy-poll of the loop's AioContext
 * (aio_context_set_poll_params()), the batches of its Linux AIO and
 * io_uring queues (aio_context_set_aio_params()) and the limits of its
 * worker pool (aio_context_set_thread_pool_params()).  Parsed from --object/object-add, changed by qom-set,
 * with QEMU's messages.
 */
#ifndef QBLOCK_EVENT_LOOP_BASE_H
#define QBLOCK_EVENT_LOOP_BASE_H

#include "util/aio.h"
#include "util/json.h"

/* QEMU's iothread default on Linux: busy-poll up to 32 us before sleeping. */
#define EVENT_LOOP_POLL_MAX_NS_DEFAULT 32768

typedef struct EventLoopParams {
    int64_t poll_max_ns;
    int64_t poll_grow;
    int64_t poll_shrink;
    int64_t aio_max_batch;
    int64_t thread_pool_min;
    int64_t thread_pool_max;
} EventLoopParams;

/*
 * Fills @p from an object's @props, with @poll_max_ns_default where
 * poll-max-ns is not given.  Returns false with @errp set for a
 * negative value or limits no pool can take.
 */
bool event_loop_params_parse(EventLoopParams *p, JsonObject *props,
                             int64_t poll_max_ns_default, Error **errp);

/*
 * qom-set of @name on an object of @type_name whose loop is @ctx: sets
 * the field and gives @ctx the new properties, or returns false with
 * @errp set and @p unchanged (an unknown property, not an integer,
 * negative, limits no pool can take).
 */
bool event_loop_params_set(EventLoopParams *p, AioContext *ctx,
                           const char *type_name, const char *name,
                           JsonNode *value, Error **errp);

/* qom-get of @name: its value, or NULL if @name is no property of @p. */
JsonNode *event_loop_params_get(const EventLoopParams *p, const char *name);

/* Gives @ctx the properties of @p (from any thread). */
void event_loop_params_apply(const EventLoopParams *p, AioContext *ctx);

/* Adds to @info the properties that query-iothreads reports. */
void event_loop_params_report(const EventLoopParams *p, JsonObject *info);

#endif
