/*
 * The properties that the iothread and main-loop objects share (see
 * event-loop-base.h).
 */
#include "util/osdep.h"
#include "util/event-loop-base.h"
#include "util/thread-pool.h"

/*
 * Each property: its member's name, its field in EventLoopParams, its
 * default (poll-max-ns's is the caller's) and whether query-iothreads
 * reports it (QEMU's IOThreadInfo has no thread-pool limits).
 */
static const struct {
    const char *name;
    size_t offset;
    int64_t def;
    bool reported;
} event_loop_props[] = {
    { "poll-max-ns", offsetof(EventLoopParams, poll_max_ns), 0, true },
    { "poll-grow", offsetof(EventLoopParams, poll_grow), 0, true },
    { "poll-shrink", offsetof(EventLoopParams, poll_shrink), 0, true },
    { "aio-max-batch", offsetof(EventLoopParams, aio_max_batch), 0, true },
    { "thread-pool-min", offsetof(EventLoopParams, thread_pool_min), 0,
      false },
    { "thread-pool-max", offsetof(EventLoopParams, thread_pool_max),
      THREAD_POOL_MAX_DEFAULT, false },
};

static int64_t *event_loop_field(EventLoopParams *p, size_t i)
{
    return (int64_t *)((char *)p + event_loop_props[i].offset);
}

static int64_t event_loop_get(const EventLoopParams *p, size_t i)
{
    return *(const int64_t *)((const char *)p + event_loop_props[i].offset);
}

static bool event_loop_check(const char *name, int64_t value, Error **errp)
{
    if (value < 0) {
        error_setg(errp, "%s value must be in range [0, %" PRId64 "]",
                   name, INT64_MAX);
        return false;
    }
    return true;
}

/* What a worker pool can take (thread_pool_set_limits()), as QEMU checks. */
static bool event_loop_check_pool(const EventLoopParams *p, Error **errp)
{
    if (p->thread_pool_min > p->thread_pool_max || !p->thread_pool_max ||
        p->thread_pool_max > INT_MAX) {
        error_setg(errp, "bad thread-pool-min/thread-pool-max values");
        return false;
    }
    return true;
}

bool event_loop_params_parse(EventLoopParams *p, JsonObject *props,
                             int64_t poll_max_ns_default, Error **errp)
{
    for (size_t i = 0; i < G_N_ELEMENTS(event_loop_props); i++) {
        const char *name = event_loop_props[i].name;
        int64_t def = i == 0 ? poll_max_ns_default : event_loop_props[i].def;
        int64_t *field = event_loop_field(p, i);

        *field = json_object_get_int_member_with_default(props, name, def);
        if (!event_loop_check(name, *field, errp)) {
            return false;
        }
    }
    return event_loop_check_pool(p, errp);
}

bool event_loop_params_set(EventLoopParams *p, AioContext *ctx,
                           const char *type_name, const char *name,
                           JsonNode *value, Error **errp)
{
    for (size_t i = 0; i < G_N_ELEMENTS(event_loop_props); i++) {
        EventLoopParams next = *p;
        int64_t v;

        if (strcmp(name, event_loop_props[i].name)) {
            continue;
        }
        if (!JSON_NODE_HOLDS_VALUE(value) ||
            json_node_get_value_type(value) != G_TYPE_INT64) {
            error_setg(errp, "Invalid parameter type for '%s', expected: "
                       "integer", name);
            return false;
        }
        v = json_node_get_int(value);
        if (!event_loop_check(name, v, errp)) {
            return false;
        }
        *event_loop_field(&next, i) = v;
        /*
         * QEMU keeps a value the pool refused, and qom-get shows it;
         * qblock keeps what the pool has.
         */
        if (!event_loop_check_pool(&next, errp)) {
            return false;
        }
        *p = next;
        event_loop_params_apply(p, ctx);
        return true;
    }
    error_setg(errp, "Property '%s.%s' not found", type_name, name);
    return false;
}

JsonNode *event_loop_params_get(const EventLoopParams *p, const char *name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(event_loop_props); i++) {
        if (!strcmp(name, event_loop_props[i].name)) {
            return json_node_init_int(json_node_alloc(),
                                      event_loop_get(p, i));
        }
    }
    return NULL;
}

void event_loop_params_apply(const EventLoopParams *p, AioContext *ctx)
{
    aio_context_set_poll_params(ctx, p->poll_max_ns, p->poll_grow,
                                p->poll_shrink);
    aio_context_set_aio_params(ctx, p->aio_max_batch);
    aio_context_set_thread_pool_params(ctx, p->thread_pool_min,
                                       p->thread_pool_max);
}

void event_loop_params_report(const EventLoopParams *p, JsonObject *info)
{
    for (size_t i = 0; i < G_N_ELEMENTS(event_loop_props); i++) {
        if (event_loop_props[i].reported) {
            json_object_set_int_member(info, event_loop_props[i].name,
                                       event_loop_get(p, i));
        }
    }
}
