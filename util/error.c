/*
 * Error objects and the reporting functions every tool prints through.
 *
 * An Error carries a class, the message a person reads and an optional
 * hint (extra lines printed after the message).  Two sentinel pointers
 * change what setting an error means: &error_abort turns it into a
 * crash with the message (a programming error), &error_fatal prints it
 * and exits with status 1.
 *
 * Every line printed starts with the program name, as QEMU's tools do.
 * Each report is formatted completely before it is written, so that
 * reports from different threads do not interleave mid-line.
 */
#include "util/error.h"

struct Error {
    ErrorClass err_class;
    char *msg;
    /* NULL until a hint is appended; printed as is after the message */
    GString *hint;
};

/* Only the addresses matter: they are recognised as errp values. */
Error *error_abort;
Error *error_fatal;

static void error_print(const char *prefix, const Error *err)
{
    g_autofree char *line = g_strdup_printf("%s: %s%s\n",
                                            qemu_get_progname(), prefix,
                                            err->msg);

    fputs(line, stderr);
    if (err->hint && err->hint->len) {
        fputs(err->hint->str, stderr);
        if (err->hint->str[err->hint->len - 1] != '\n') {
            fputc('\n', stderr);
        }
    }
}

static void error_handle_sentinel(Error **errp, Error *err)
{
    if (errp == &error_abort) {
        error_print("", err);
        abort();
    }
    if (errp == &error_fatal) {
        error_print("", err);
        exit(1);
    }
}

static void error_setv(Error **errp, ErrorClass err_class, int os_errno,
                       const char *fmt, va_list ap)
{
    Error *err;

    if (!errp) {
        return;
    }
    /* Setting an error twice loses the first: a bug in the caller. */
    assert(*errp == NULL);

    err = g_new0(Error, 1);
    err->err_class = err_class;
    err->msg = g_strdup_vprintf(fmt, ap);
    if (os_errno) {
        char *with_errno = g_strdup_printf("%s: %s", err->msg,
                                           g_strerror(os_errno));
        g_free(err->msg);
        err->msg = with_errno;
    }

    error_handle_sentinel(errp, err);
    *errp = err;
}

void error_setg(Error **errp, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    error_setv(errp, ERROR_CLASS_GENERIC_ERROR, 0, fmt, ap);
    va_end(ap);
}

void error_setg_errno(Error **errp, int os_errno, const char *fmt, ...)
{
    va_list ap;

    /* Callers pass either errno or a negative return value. */
    if (os_errno < 0) {
        os_errno = -os_errno;
    }
    va_start(ap, fmt);
    error_setv(errp, ERROR_CLASS_GENERIC_ERROR, os_errno, fmt, ap);
    va_end(ap);
}

void error_set(Error **errp, ErrorClass err_class, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    error_setv(errp, err_class, 0, fmt, ap);
    va_end(ap);
}

static void error_vprepend(Error *err, const char *fmt, va_list ap)
{
    char *prefix = g_strdup_vprintf(fmt, ap);
    char *msg = g_strconcat(prefix, err->msg, NULL);

    g_free(prefix);
    g_free(err->msg);
    err->msg = msg;
}

void error_prepend(Error **errp, const char *fmt, ...)
{
    va_list ap;

    if (!errp || !*errp) {
        return;
    }
    va_start(ap, fmt);
    error_vprepend(*errp, fmt, ap);
    va_end(ap);
}

void error_append_hint(Error **errp, const char *fmt, ...)
{
    va_list ap;
    Error *err;

    /* The sentinels never hold an error, so there is nothing to add to. */
    if (!errp || !*errp) {
        return;
    }
    err = *errp;
    if (!err->hint) {
        err->hint = g_string_new(NULL);
    }
    va_start(ap, fmt);
    g_string_append_vprintf(err->hint, fmt, ap);
    va_end(ap);
}

void error_propagate(Error **dst_errp, Error *local_err)
{
    if (!local_err) {
        return;
    }
    error_handle_sentinel(dst_errp, local_err);
    if (dst_errp && !*dst_errp) {
        *dst_errp = local_err;
    } else {
        /* The first error wins: it is usually the cause of the others. */
        error_free(local_err);
    }
}

void error_propagate_prepend(Error **dst_errp, Error *local_err,
                             const char *fmt, ...)
{
    va_list ap;

    if (!local_err) {
        return;
    }
    if (dst_errp && !*dst_errp) {
        va_start(ap, fmt);
        error_vprepend(local_err, fmt, ap);
        va_end(ap);
    }
    error_propagate(dst_errp, local_err);
}

const char *error_get_pretty(const Error *err)
{
    return err->msg;
}

const char *error_get_hint(const Error *err)
{
    return err->hint ? err->hint->str : NULL;
}

ErrorClass error_get_class(const Error *err)
{
    return err->err_class;
}

Error *error_copy(const Error *err)
{
    Error *copy = g_new0(Error, 1);

    copy->err_class = err->err_class;
    copy->msg = g_strdup(err->msg);
    if (err->hint) {
        copy->hint = g_string_new(err->hint->str);
    }
    return copy;
}

void error_free(Error *err)
{
    if (!err) {
        return;
    }
    g_free(err->msg);
    if (err->hint) {
        g_string_free(err->hint, TRUE);
    }
    g_free(err);
}

void error_free_or_abort(Error **errp)
{
    assert(errp && *errp);
    error_free(*errp);
    *errp = NULL;
}

void error_report_err(Error *err)
{
    error_print("", err);
    error_free(err);
}

void warn_report_err(Error *err)
{
    error_print("warning: ", err);
    error_free(err);
}

static void report_vprintf(const char *prefix, const char *fmt, va_list ap)
{
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    g_autofree char *line = g_strdup_printf("%s: %s%s\n",
                                            qemu_get_progname(), prefix,
                                            msg);

    fputs(line, stderr);
}

void error_report(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report_vprintf("", fmt, ap);
    va_end(ap);
}

void warn_report(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report_vprintf("warning: ", fmt, ap);
    va_end(ap);
}

void info_report(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report_vprintf("", fmt, ap);
    va_end(ap);
}
