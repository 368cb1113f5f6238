/*
 * Error objects: setting, prepending, hints, propagation, the abort and
 * fatal sentinels, and the exact lines the report functions print.
 */
#include "util/error.h"

static void test_setg_message_and_class(void)
{
    Error *err = NULL;

    error_setg(&err, "Could not open '%s'", "/tmp/x");
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==, "Could not open '/tmp/x'");
    g_assert_cmpint(error_get_class(err), ==, ERROR_CLASS_GENERIC_ERROR);
    g_assert_null(error_get_hint(err));
    error_free(err);
    err = NULL;

    error_set(&err, ERROR_CLASS_DEVICE_NOT_FOUND, "No node '%s'", "n0");
    g_assert_cmpint(error_get_class(err), ==, ERROR_CLASS_DEVICE_NOT_FOUND);
    g_assert_cmpstr(error_get_pretty(err), ==, "No node 'n0'");
    error_free_or_abort(&err);
    g_assert_null(err);
}

static void test_setg_null_errp(void)
{
    /* The caller does not care: nothing is allocated, nothing printed. */
    error_setg(NULL, "ignored %d", 1);
    error_setg_errno(NULL, EIO, "ignored");
    error_prepend(NULL, "x");
    error_append_hint(NULL, "x");
}

static void test_setg_errno(void)
{
    Error *err = NULL;

    error_setg_errno(&err, ENOENT, "Could not open '%s'", "/nope");
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Could not open '/nope': No such file or directory");
    error_free(err);
    err = NULL;

    /* A negative errno, as functions return it, means the same. */
    error_setg_errno(&err, -EIO, "Write failed");
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Write failed: Input/output error");
    error_free(err);
}

static void test_prepend(void)
{
    Error *err = NULL;

    error_prepend(&err, "nothing to prepend to: ");
    g_assert_null(err);

    error_setg(&err, "Parameter 'aio' does not accept value 'nope'");
    error_prepend(&err, "Could not open '%s': ", "/tmp/x");
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Could not open '/tmp/x': "
                    "Parameter 'aio' does not accept value 'nope'");
    error_free(err);
}

static void test_hint(void)
{
    Error *err = NULL;

    error_append_hint(&err, "no error yet\n");
    g_assert_null(err);

    error_setg(&err, "Parameter 'size' expects a size");
    error_append_hint(&err, "Optional suffix %s\n", "k, M");
    error_append_hint(&err, "second line\n");
    g_assert_cmpstr(error_get_hint(err), ==,
                    "Optional suffix k, M\nsecond line\n");
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Parameter 'size' expects a size");
    error_free(err);
}

static void test_propagate(void)
{
    Error *dst = NULL, *first = NULL, *second = NULL;

    error_propagate(&dst, NULL);
    g_assert_null(dst);

    error_setg(&first, "first");
    error_propagate(&dst, first);
    g_assert_true(dst == first);

    /* The first error is kept; a later one is freed (ASan checks). */
    error_setg(&second, "second");
    error_propagate(&dst, second);
    g_assert_cmpstr(error_get_pretty(dst), ==, "first");
    error_free(dst);

    /* Propagating to NULL frees the error. */
    first = NULL;
    error_setg(&first, "dropped");
    error_propagate(NULL, first);

    dst = NULL;
    first = NULL;
    error_setg(&first, "Permission denied");
    error_propagate_prepend(&dst, first, "Node '%s': ", "disk0");
    g_assert_cmpstr(error_get_pretty(dst), ==,
                    "Node 'disk0': Permission denied");
    error_free(dst);
}

static void test_copy(void)
{
    Error *err = NULL, *copy;

    error_set(&err, ERROR_CLASS_COMMAND_NOT_FOUND, "The command %s was not "
              "found", "foo");
    error_append_hint(&err, "Try 'help'\n");
    copy = error_copy(err);
    error_free(err);
    g_assert_cmpstr(error_get_pretty(copy), ==,
                    "The command foo was not found");
    g_assert_cmpstr(error_get_hint(copy), ==, "Try 'help'\n");
    g_assert_cmpint(error_get_class(copy), ==, ERROR_CLASS_COMMAND_NOT_FOUND);
    error_free(copy);
    error_free(NULL);
}

static void test_report_lines(void)
{
    if (g_test_subprocess()) {
        Error *err = NULL;

        qemu_init_progname("/usr/bin/qemu-img");
        error_report("Could not open '%s'", "/x");
        warn_report("image is %s", "dirty");
        info_report("Leaked cluster %d", 3);
        error_setg(&err, "Parameter 'size' expects a size");
        error_append_hint(&err, "Optional suffix k\nmeans kilo");
        error_report_err(err);
        err = NULL;
        error_setg(&err, "flush failed");
        warn_report_err(err);
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr(
        "qemu-img: Could not open '/x'\n"
        "qemu-img: warning: image is dirty\n"
        "qemu-img: Leaked cluster 3\n"
        "qemu-img: Parameter 'size' expects a size\n"
        "Optional suffix k\nmeans kilo\n"
        "qemu-img: warning: flush failed\n");
}

static void test_error_fatal(void)
{
    if (g_test_subprocess()) {
        qemu_init_progname("qemu-io");
        error_setg(&error_fatal, "Could not open '%s'", "/x");
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("qemu-io: Could not open '/x'\n");
}

static void test_error_fatal_propagate(void)
{
    if (g_test_subprocess()) {
        Error *local = NULL;

        qemu_init_progname("qemu-io");
        error_setg(&local, "bad");
        error_propagate_prepend(&error_fatal, local, "open: ");
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("qemu-io: open: bad\n");
}

static void test_error_abort(void)
{
    if (g_test_subprocess()) {
        qemu_init_progname("qemu-img");
        error_setg(&error_abort, "overlap check failed at %d", 65536);
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDOUT);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("qemu-img: overlap check failed at 65536\n*");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/error/setg", test_setg_message_and_class);
    g_test_add_func("/error/null-errp", test_setg_null_errp);
    g_test_add_func("/error/errno", test_setg_errno);
    g_test_add_func("/error/prepend", test_prepend);
    g_test_add_func("/error/hint", test_hint);
    g_test_add_func("/error/propagate", test_propagate);
    g_test_add_func("/error/copy", test_copy);
    g_test_add_func("/error/report-lines", test_report_lines);
    g_test_add_func("/error/fatal", test_error_fatal);
    g_test_add_func("/error/fatal-propagate", test_error_fatal_propagate);
    g_test_add_func("/error/abort", test_error_abort);
    return g_test_run();
}
