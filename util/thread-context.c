/*
 * The thread-context object type (see include/util/thread-context.h).
 *
 * Properties, as QEMU's: cpu-affinity and node-affinity, lists of CPU
 * and of NUMA node numbers, not both at creation; later, qom-set of
 * either applies it at once.  The affinity is set with
 * sched_setaffinity on the thread, so the kernel's refusal (no CPU of
 * the list online) is QEMU's "Setting CPU affinity failed".  A node's
 * CPUs are read from sysfs (what libnuma reads): a node that does not
 * exist has none.
 *
 * Invariant 1: the thread runs from creation until destroy, which stops
 * and joins it; tid is set before create returns.
 */
#include "util/thread-context.h"

#include <sched.h>
#include <sys/syscall.h>

#include "util/json.h"
#include "util/user-object.h"

#define THREAD_CONTEXT_TYPE "thread-context"
#define THREAD_CONTEXT_NODE_CPULIST "/sys/devices/system/node/node%u/cpulist"

typedef struct ThreadContext {
    GThread *thread;
    pid_t tid;                  /* invariant 1 */

    /* guards stop and tid while the thread starts and stops */
    GMutex lock;
    GCond cond;
    bool stop;
} ThreadContext;

bool thread_context_parse_cpulist(const char *text, GArray *cpus,
                                  Error **errp)
{
    const char *p = text;

    while (*p && *p != '\n') {
        guint64 first, last;
        char *end;

        if (!g_ascii_isdigit(*p)) {
            goto invalid;
        }
        first = last = g_ascii_strtoull(p, &end, 10);
        if (*end == '-') {
            if (!g_ascii_isdigit(end[1])) {
                goto invalid;
            }
            last = g_ascii_strtoull(end + 1, &end, 10);
        }
        if (last < first) {
            goto invalid;
        }
        if (last >= THREAD_CONTEXT_MAX_CPUS) {
            error_setg(errp, "CPU list '%s' names CPU %" G_GUINT64_FORMAT
                       ", beyond %u", text, last,
                       THREAD_CONTEXT_MAX_CPUS - 1);
            return false;
        }
        for (guint64 cpu = first; cpu <= last; cpu++) {
            unsigned c = cpu;

            g_array_append_val(cpus, c);
        }
        p = end;
        if (*p == ',') {
            p++;
            if (!g_ascii_isdigit(*p)) {
                goto invalid;
            }
        }
    }
    if (*p == '\n' && p[1]) {
        goto invalid;
    }
    return true;

invalid:
    error_setg(errp, "Invalid CPU list '%s'", text);
    return false;
}

/* The CPUs of the NUMA nodes @nodes (a JSON array of numbers). */
static bool thread_context_node_cpus(JsonArray *nodes, GArray *cpus,
                                     Error **errp)
{
    for (guint i = 0; i < json_array_get_length(nodes); i++) {
        unsigned node = json_array_get_int_element(nodes, i);
        g_autofree char *path = g_strdup_printf(THREAD_CONTEXT_NODE_CPULIST,
                                                node);
        g_autofree char *text = NULL;

        /* no file: no such node, which selects no CPU (as libnuma) */
        if (g_file_get_contents(path, &text, NULL, NULL) &&
            !thread_context_parse_cpulist(text, cpus, errp)) {
            return false;
        }
    }
    return true;
}

static bool thread_context_set_cpus(ThreadContext *tc, GArray *cpus,
                                    Error **errp)
{
    unsigned max = 0;
    cpu_set_t *set;
    size_t size;
    int ret;

    for (guint i = 0; i < cpus->len; i++) {
        max = MAX(max, g_array_index(cpus, unsigned, i));
    }
    set = CPU_ALLOC(max + 1);
    size = CPU_ALLOC_SIZE(max + 1);
    CPU_ZERO_S(size, set);
    for (guint i = 0; i < cpus->len; i++) {
        CPU_SET_S(g_array_index(cpus, unsigned, i), size, set);
    }
    ret = sched_setaffinity(tc->tid, size, set);
    CPU_FREE(set);
    if (ret < 0) {
        error_setg_errno(errp, errno, "Setting CPU affinity failed");
        return false;
    }
    return true;
}

/* cpu-affinity: @list is a checked JSON array of CPU numbers. */
static bool thread_context_set_cpu_affinity(ThreadContext *tc,
                                            JsonArray *list, Error **errp)
{
    g_autoptr(GArray) cpus = g_array_new(false, false, sizeof(unsigned));

    for (guint i = 0; i < json_array_get_length(list); i++) {
        unsigned cpu = json_array_get_int_element(list, i);

        g_array_append_val(cpus, cpu);
    }
    return thread_context_set_cpus(tc, cpus, errp);
}

static bool thread_context_set_node_affinity(ThreadContext *tc,
                                             JsonArray *list, Error **errp)
{
    g_autoptr(GArray) cpus = g_array_new(false, false, sizeof(unsigned));

    if (!thread_context_node_cpus(list, cpus, errp)) {
        return false;
    }
    if (!cpus->len) {
        error_setg(errp, "The nodes select no CPUs");
        return false;
    }
    return thread_context_set_cpus(tc, cpus, errp);
}

/* QEMU's check of each list as its property is set. */
static bool thread_context_check_list(JsonArray *list, const char *what,
                                      Error **errp)
{
    if (!json_array_get_length(list)) {
        error_setg(errp, "%s list is empty", what);
        return false;
    }
    return true;
}

static gpointer thread_context_run(gpointer opaque)
{
    ThreadContext *tc = opaque;

    g_mutex_lock(&tc->lock);
    tc->tid = syscall(SYS_gettid);
    g_cond_broadcast(&tc->cond);
    while (!tc->stop) {
        g_cond_wait(&tc->cond, &tc->lock);
    }
    g_mutex_unlock(&tc->lock);
    return NULL;
}

static void thread_context_destroy(void *state)
{
    ThreadContext *tc = state;

    g_mutex_lock(&tc->lock);
    tc->stop = true;
    g_cond_broadcast(&tc->cond);
    g_mutex_unlock(&tc->lock);
    g_thread_join(tc->thread);          /* invariant 1 */
    g_mutex_clear(&tc->lock);
    g_cond_clear(&tc->cond);
    g_free(tc);
}

static void *thread_context_create(const char *id, JsonObject *props,
                                   Error **errp)
{
    JsonArray *cpus = json_object_has_member(props, "cpu-affinity") ?
        json_object_get_array_member(props, "cpu-affinity") : NULL;
    JsonArray *nodes = json_object_has_member(props, "node-affinity") ?
        json_object_get_array_member(props, "node-affinity") : NULL;
    ThreadContext *tc;

    /* QEMU's checks, in the order its properties are set */
    if (cpus && !thread_context_check_list(cpus, "CPU", errp)) {
        return NULL;
    }
    if (cpus && nodes) {
        error_setg(errp, "Mixing CPU and node affinity not supported");
        return NULL;
    }
    if (nodes && !thread_context_check_list(nodes, "Node", errp)) {
        return NULL;
    }
    tc = g_new0(ThreadContext, 1);
    g_mutex_init(&tc->lock);
    g_cond_init(&tc->cond);
    /* its name in ps -L (QEMU leaves its threads unnamed by default) */
    tc->thread = g_thread_new(THREAD_CONTEXT_TYPE, thread_context_run, tc);
    g_mutex_lock(&tc->lock);
    while (!tc->tid) {
        g_cond_wait(&tc->cond, &tc->lock);
    }
    g_mutex_unlock(&tc->lock);
    if ((cpus && !thread_context_set_cpu_affinity(tc, cpus, errp)) ||
        (nodes && !thread_context_set_node_affinity(tc, nodes, errp))) {
        thread_context_destroy(tc);
        return NULL;
    }
    return tc;
}

static bool thread_context_set_property(void *state, const char *name,
                                        JsonNode *value, Error **errp)
{
    ThreadContext *tc = state;
    bool cpu = !strcmp(name, "cpu-affinity");
    JsonArray *list;

    if (!user_object_check_property(THREAD_CONTEXT_TYPE, name, value,
                                    errp)) {
        return false;
    }
    list = json_node_get_array(value);
    if (!thread_context_check_list(list, cpu ? "CPU" : "Node", errp)) {
        return false;
    }
    return cpu ? thread_context_set_cpu_affinity(tc, list, errp)
               : thread_context_set_node_affinity(tc, list, errp);
}

/* The thread's affinity now, as a list of CPU numbers. */
static JsonNode *thread_context_get_cpu_affinity(ThreadContext *tc)
{
    g_autoptr(JsonArray) list = json_array_new();

    /* a mask as large as the kernel's (NR_CPUS), found by growing it */
    for (unsigned n = 1024; n <= THREAD_CONTEXT_MAX_CPUS; n *= 2) {
        cpu_set_t *set = CPU_ALLOC(n);
        size_t size = CPU_ALLOC_SIZE(n);

        if (sched_getaffinity(tc->tid, size, set) == 0) {
            for (unsigned cpu = 0; cpu < n; cpu++) {
                if (CPU_ISSET_S(cpu, size, set)) {
                    json_array_add_int_element(list, cpu);
                }
            }
            CPU_FREE(set);
            break;
        }
        CPU_FREE(set);
        if (errno != EINVAL) {
            break;
        }
    }
    return json_node_init_array(json_node_alloc(), list);
}

static JsonNode *thread_context_get_property(void *state, const char *name)
{
    ThreadContext *tc = state;

    if (!strcmp(name, "thread-id")) {
        return json_node_init_int(json_node_alloc(), tc->tid);
    }
    if (!strcmp(name, "cpu-affinity")) {
        return thread_context_get_cpu_affinity(tc);
    }
    return NULL;
}

static const UserObjectReadOnly thread_context_read_only[] = {
    { "thread-id", "int" },
    { NULL },
};

static const char *const thread_context_write_only[] = {
    "node-affinity", NULL,
};

static const UserObjectType thread_context_type = {
    .name = THREAD_CONTEXT_TYPE,
    .create = thread_context_create,
    .destroy = thread_context_destroy,
    .set_property = thread_context_set_property,
    .get_property = thread_context_get_property,
    .read_only = thread_context_read_only,
    .write_only = thread_context_write_only,
};
user_object_type_init(thread_context_type)
