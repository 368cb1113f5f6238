/*
 * The thread-context object (util/thread-context.c): the parser of the
 * CPU lists sysfs gives for a NUMA node, the thread and its affinity as
 * the kernel reports it, and QEMU's messages.  The same is compared with
 * qemu-storage-daemon by tests/interop/qsd-objects.sh.
 */
#include "util/osdep.h"

#include "util/thread-context.h"
#include "util/user-object.h"

/* The CPUs of @text as "0,1,2," (or the error). */
static char *parse(const char *text)
{
    g_autoptr(GArray) cpus = g_array_new(false, false, sizeof(unsigned));
    GString *out = g_string_new(NULL);
    Error *err = NULL;

    if (!thread_context_parse_cpulist(text, cpus, &err)) {
        g_string_append(out, error_get_pretty(err));
        error_free(err);
        return g_string_free(out, false);
    }
    for (guint i = 0; i < cpus->len; i++) {
        g_string_append_printf(out, "%u,", g_array_index(cpus, unsigned, i));
    }
    return g_string_free(out, false);
}

static void assert_parse(const char *text, const char *expect)
{
    g_autofree char *got = parse(text);

    g_assert_cmpstr(got, ==, expect);
}

static void test_cpulist(void)
{
    assert_parse("0-3,8,10-11\n", "0,1,2,3,8,10,11,");
    assert_parse("5", "5,");
    assert_parse("", "");
    assert_parse("\n", "");
    assert_parse("65535", "65535,");
    assert_parse("65536", "CPU list '65536' names CPU 65536, beyond 65535");
    assert_parse("0-65536", "CPU list '0-65536' names CPU 65536, "
                 "beyond 65535");
    assert_parse("0-99999999999999999999999", "CPU list "
                 "'0-99999999999999999999999' names CPU "
                 "18446744073709551615, beyond 65535");
    assert_parse("3-1", "Invalid CPU list '3-1'");
    assert_parse("a", "Invalid CPU list 'a'");
    assert_parse("1,", "Invalid CPU list '1,'");
    assert_parse(",1", "Invalid CPU list ',1'");
    assert_parse("1-", "Invalid CPU list '1-'");
    assert_parse("1--2", "Invalid CPU list '1--2'");
    assert_parse("1 2", "Invalid CPU list '1 2'");
    assert_parse("1\n2", "Invalid CPU list '1\n2'");
}

static char *get_json(const char *id, const char *name)
{
    g_autoptr(JsonNode) node = user_object_get_property(id, name,
                                                        &error_abort);

    return json_to_text(node, 0);
}

/* Cpus_allowed_list of thread @tid of this process, as /proc shows it. */
static char *proc_cpus(long tid)
{
    g_autofree char *path = g_strdup_printf("/proc/self/task/%ld/status",
                                            tid);
    g_autofree char *text = NULL;
    const char *line;

    if (!g_file_get_contents(path, &text, NULL, NULL)) {
        return NULL;
    }
    line = strstr(text, "Cpus_allowed_list:");
    g_assert_nonnull(line);
    line += strlen("Cpus_allowed_list:");
    line += strspn(line, " \t");
    return g_strndup(line, strcspn(line, "\n"));
}

static void test_thread(void)
{
    g_autofree char *tid_text = NULL;
    g_autofree char *cpus = NULL;
    g_autofree char *proc = NULL;
    long tid;

    g_assert_true(user_object_add_cmdline(
        "thread-context,id=tc0,cpu-affinity.0=0", &error_abort));
    tid_text = get_json("tc0", "thread-id");
    tid = atol(tid_text);
    /* a thread of its own, which the kernel pins to CPU 0 */
    g_assert_cmpint(tid, >, 0);
    g_assert_cmpint(tid, !=, getpid());
    cpus = get_json("tc0", "cpu-affinity");
    g_assert_cmpstr(cpus, ==, "[0]");
    proc = proc_cpus(tid);
    g_assert_cmpstr(proc, ==, "0");
    g_assert_true(user_object_del("tc0", &error_abort));
    /* joined: the thread is gone */
    g_free(proc);
    proc = proc_cpus(tid);
    g_assert_null(proc);
}

static void assert_refused(const char *optarg, const char *expect)
{
    Error *err = NULL;

    g_assert_false(user_object_add_cmdline(optarg, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, expect);
    error_free(err);
}

static void test_errors(void)
{
    Error *err = NULL;

    assert_refused("{\"qom-type\": \"thread-context\", \"id\": \"t\", "
                   "\"cpu-affinity\": []}", "CPU list is empty");
    assert_refused("{\"qom-type\": \"thread-context\", \"id\": \"t\", "
                   "\"node-affinity\": []}", "Node list is empty");
    assert_refused("thread-context,id=t,cpu-affinity.0=0,"
                   "node-affinity.0=0",
                   "Mixing CPU and node affinity not supported");
    /* beyond any kernel's NR_CPUS: no CPU of the list exists */
    assert_refused("thread-context,id=t,cpu-affinity.0=65535",
                   "Setting CPU affinity failed: Invalid argument");
    assert_refused("thread-context,id=t,node-affinity.0=65535",
                   "The nodes select no CPUs");
    assert_refused("thread-context,id=t,cpu-affinity.0=65536",
                   "Parameter 'null' expects uint16_t");
    assert_refused("thread-context,id=t,cpu-affinity.0=x",
                   "Parameter 'cpu-affinity.0' expects integer");
    /* thread-id is read, never set */
    g_assert_true(user_object_add_cmdline("thread-context,id=t",
                                          &error_abort));
    g_assert_false(user_object_set_property("t", "thread-id", NULL, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Property 'thread-context.thread-id' is not writable");
    g_clear_pointer(&err, error_free);
    g_assert_null(user_object_get_property("t", "node-affinity", &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Property 'thread-context.node-affinity' is not "
                    "readable");
    g_clear_pointer(&err, error_free);
    g_assert_true(user_object_del("t", &error_abort));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/thread-context/cpulist", test_cpulist);
    g_test_add_func("/thread-context/thread", test_thread);
    g_test_add_func("/thread-context/errors", test_errors);
    return g_test_run();
}
