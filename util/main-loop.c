/*
 * The main-loop object type and the main loop's default polling (see
 * main-loop.h).
 *
 * Invariants:
 *  1. At most one main-loop object exists (QEMU's rule and message);
 *     while it does, the main context's poll properties are its own,
 *     otherwise the program's defaults (main_loop_defaults).
 */
#include "util/osdep.h"
#include "util/event-loop-base.h"
#include "util/main-loop.h"
#include "util/thread-pool.h"
#include "util/user-object.h"

#define MAIN_LOOP_TYPE "main-loop"

typedef struct MainLoopObject {
    EventLoopParams params;
} MainLoopObject;

/* What the main context has without an object: no polling unless asked. */
static EventLoopParams main_loop_defaults = {
    .thread_pool_max = THREAD_POOL_MAX_DEFAULT,
};
/* Invariant 1: the one object, or NULL */
static MainLoopObject *main_loop_object;

void main_loop_poll_by_default(void)
{
    main_loop_defaults.poll_max_ns = EVENT_LOOP_POLL_MAX_NS_DEFAULT;
    if (!main_loop_object) {
        /* Invariant 1 */
        event_loop_params_apply(&main_loop_defaults, qemu_get_aio_context());
    }
}

static void *main_loop_create(const char *id, JsonObject *props,
                              Error **errp)
{
    MainLoopObject *m;

    if (main_loop_object) {
        /* Invariant 1 */
        error_setg(errp, "only one main-loop instance allowed");
        return NULL;
    }
    m = g_new0(MainLoopObject, 1);
    if (!event_loop_params_parse(&m->params, props,
                                 main_loop_defaults.poll_max_ns, errp)) {
        g_free(m);
        return NULL;
    }
    main_loop_object = m;
    event_loop_params_apply(&m->params, qemu_get_aio_context());
    return m;
}

static void main_loop_destroy(void *state)
{
    MainLoopObject *m = state;

    /* Invariant 1 */
    assert(m == main_loop_object);
    main_loop_object = NULL;
    event_loop_params_apply(&main_loop_defaults, qemu_get_aio_context());
    g_free(m);
}

/* qom-set: as an iothread's, with effect at the main loop's next round. */
static bool main_loop_set_property(void *state, const char *name,
                                   JsonNode *value, Error **errp)
{
    MainLoopObject *m = state;

    return event_loop_params_set(&m->params, qemu_get_aio_context(),
                                 MAIN_LOOP_TYPE, name, value, errp);
}

static JsonNode *main_loop_get_property(void *state, const char *name)
{
    MainLoopObject *m = state;

    return event_loop_params_get(&m->params, name);
}

static const UserObjectType main_loop_type = {
    .name = MAIN_LOOP_TYPE,
    .create = main_loop_create,
    .destroy = main_loop_destroy,
    .set_property = main_loop_set_property,
    .get_property = main_loop_get_property,
};
user_object_type_init(main_loop_type)
