/*
 * The iothread object type (see iothread.h).
 *
 * The thread polls its context until stopping is set (by a bottom half
 * of destroy, so that the flag is read in the thread that set it) and
 * marks the context as its home meanwhile, so that the main loop can
 * acquire it (util/aio-wait.c).  The properties are QEMU's
 * (event-loop-base.h) and go to the context at creation and at each
 * qom-set, which takes effect at the loop's next round.
 *
 * Invariants:
 *  1. An iothread in iothread_list has a running thread polling ctx; the
 *     thread ends only in iothread_destroy(), which joins it.
 *  2. Nothing else holds ctx's nodes when the object goes: object-del is
 *     refused while an export or a block job holds a reference
 *     (user-object.h invariant 2); an export moves its nodes back when it
 *     goes, a job the nodes no export keeps (block/blockjob.c inv. 5).
 */
#include "util/osdep.h"
#include "util/event-loop-base.h"
#include "util/iothread.h"
#include "util/user-object.h"

#include <sys/syscall.h>

#define IOTHREAD_TYPE "iothread"

struct IOThread {
    char *id;
    AioContext *ctx;
    GThread *thread;
    /* set once the thread runs (under init_lock) */
    GMutex init_lock;
    GCond init_cond;
    bool started;
    int64_t thread_id;          /* the kernel's tid, as QEMU reports */
    bool stopping;              /* the iothread's own thread only */
    EventLoopParams params;
};

/* IOThread *, in creation order (invariant 1) */
static GList *iothread_list;

static gpointer iothread_run(gpointer opaque)
{
    IOThread *t = opaque;

    qemu_set_current_aio_context(t->ctx);
    aio_context_set_home(t->ctx, true);
    g_mutex_lock(&t->init_lock);
    t->thread_id = syscall(SYS_gettid);
    t->started = true;
    g_cond_signal(&t->init_cond);
    g_mutex_unlock(&t->init_lock);

    while (!t->stopping) {
        aio_poll(t->ctx, true);
    }
    aio_context_set_home(t->ctx, false);
    return NULL;
}

static void iothread_stop_bh(void *opaque)
{
    IOThread *t = opaque;

    t->stopping = true;
}

static void *iothread_create(const char *id, JsonObject *props,
                             Error **errp)
{
    IOThread *t = g_new0(IOThread, 1);
    g_autofree char *name = NULL;

    if (!event_loop_params_parse(&t->params, props,
                                 EVENT_LOOP_POLL_MAX_NS_DEFAULT, errp)) {
        g_free(t);
        return NULL;
    }
    t->ctx = aio_context_new(errp);
    if (!t->ctx) {
        g_free(t);
        return NULL;
    }
    event_loop_params_apply(&t->params, t->ctx);
    t->id = g_strdup(id);
    g_mutex_init(&t->init_lock);
    g_cond_init(&t->init_cond);
    /* the thread's name, as QEMU's: "IO <id>" (ps -L shows it) */
    name = g_strdup_printf("IO %s", id);
    t->thread = g_thread_new(name, iothread_run, t);
    g_mutex_lock(&t->init_lock);
    while (!t->started) {
        g_cond_wait(&t->init_cond, &t->init_lock);
    }
    g_mutex_unlock(&t->init_lock);
    iothread_list = g_list_append(iothread_list, t);
    return t;
}

static void iothread_destroy(void *state)
{
    IOThread *t = state;

    iothread_list = g_list_remove(iothread_list, t);
    aio_bh_schedule_oneshot(t->ctx, iothread_stop_bh, t);
    g_thread_join(t->thread);
    aio_context_unref(t->ctx);
    g_mutex_clear(&t->init_lock);
    g_cond_clear(&t->init_cond);
    g_free(t->id);
    g_free(t);
}

IOThread *iothread_find(const char *id, Error **errp)
{
    IOThread *t = user_object_find_state(id, IOTHREAD_TYPE);

    if (!t) {
        error_setg(errp, "iothread \"%s\" not found", id);
    }
    return t;
}

void iothread_ref(IOThread *t)
{
    user_object_ref(user_object_find(t->id, IOTHREAD_TYPE));
}

void iothread_unref(IOThread *t)
{
    user_object_unref(user_object_find(t->id, IOTHREAD_TYPE));
}

const char *iothread_get_id(const IOThread *t)
{
    return t->id;
}

AioContext *iothread_get_aio_context(const IOThread *t)
{
    return t->ctx;
}

IOThread *iothread_by_aio_context(AioContext *ctx)
{
    for (GList *l = iothread_list; l; l = l->next) {
        IOThread *t = l->data;

        if (t->ctx == ctx) {
            return t;
        }
    }
    return NULL;
}

void iothread_acquire_all(void)
{
    for (GList *l = iothread_list; l; l = l->next) {
        IOThread *t = l->data;

        aio_context_acquire(t->ctx);
    }
}

void iothread_release_all(void)
{
    for (GList *l = g_list_last(iothread_list); l; l = l->prev) {
        IOThread *t = l->data;

        aio_context_release(t->ctx);
    }
}

JsonNode *iothread_query_all(void)
{
    g_autoptr(JsonArray) list = json_array_new();

    for (GList *l = iothread_list; l; l = l->next) {
        IOThread *t = l->data;
        JsonObject *info = json_object_new();

        json_object_set_string_member(info, "id", t->id);
        json_object_set_int_member(info, "thread-id", t->thread_id);
        event_loop_params_report(&t->params, info);
        json_array_add_object_element(list, info);
    }
    return json_node_init_array(json_node_alloc(), list);
}

/* qom-set: the poll properties change at once, as in QEMU. */
static bool iothread_set_property(void *state, const char *name,
                                  JsonNode *value, Error **errp)
{
    IOThread *t = state;

    return event_loop_params_set(&t->params, t->ctx, IOTHREAD_TYPE, name,
                                 value, errp);
}

static JsonNode *iothread_get_property(void *state, const char *name)
{
    IOThread *t = state;

    return event_loop_params_get(&t->params, name);
}

static const UserObjectType iothread_type = {
    .name = IOTHREAD_TYPE,
    .create = iothread_create,
    .destroy = iothread_destroy,
    .set_property = iothread_set_property,
    .get_property = iothread_get_property,
};
user_object_type_init(iothread_type)
