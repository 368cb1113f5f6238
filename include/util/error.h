/*
 * Error reporting.
 *
 * A function that can fail takes `Error **errp` as its last parameter,
 * returns a negative errno (or false/NULL) on failure and fills *errp with
 * the message a person will read.  The message names the object and the
 * value concerned (file, option, offset).
 *
 * errp may be NULL (the caller does not care), &error_abort (failure is a
 * programming error: abort with the message) or &error_fatal (print the
 * message and exit(1)).
 */
#ifndef QBLOCK_ERROR_H
#define QBLOCK_ERROR_H

#include "util/osdep.h"

typedef struct Error Error;

/* QMP error classes, as QEMU names them. */
typedef enum ErrorClass {
    ERROR_CLASS_GENERIC_ERROR,
    ERROR_CLASS_COMMAND_NOT_FOUND,
    ERROR_CLASS_DEVICE_NOT_ACTIVE,
    ERROR_CLASS_DEVICE_NOT_FOUND,
    ERROR_CLASS_KVM_MISSING_CAP,
} ErrorClass;

extern Error *error_abort;
extern Error *error_fatal;

void error_setg(Error **errp, const char *fmt, ...) QEMU_PRINTF(2, 3);
/* Appends ": strerror(os_errno)" to the message. */
void error_setg_errno(Error **errp, int os_errno, const char *fmt, ...)
    QEMU_PRINTF(3, 4);
void error_set(Error **errp, ErrorClass err_class, const char *fmt, ...)
    QEMU_PRINTF(3, 4);
/* Prepends text to an existing error's message; no-op if errp is NULL. */
void error_prepend(Error **errp, const char *fmt, ...) QEMU_PRINTF(2, 3);
/* Adds a hint printed on its own line(s) after the message. */
void error_append_hint(Error **errp, const char *fmt, ...) QEMU_PRINTF(2, 3);
/* Moves @local_err into *dst_errp (or frees it if dst_errp is NULL). */
void error_propagate(Error **dst_errp, Error *local_err);
void error_propagate_prepend(Error **dst_errp, Error *local_err,
                             const char *fmt, ...) QEMU_PRINTF(3, 4);

const char *error_get_pretty(const Error *err);
const char *error_get_hint(const Error *err);
ErrorClass error_get_class(const Error *err);
Error *error_copy(const Error *err);
void error_free(Error *err);
void error_free_or_abort(Error **errp);

/* Prints "progname: message" (and the hint) to stderr, then frees @err. */
void error_report_err(Error *err);
void warn_report_err(Error *err);
/* Prints "progname: message" to stderr. */
void error_report(const char *fmt, ...) QEMU_PRINTF(1, 2);
/* Prints "progname: warning: message" to stderr. */
void warn_report(const char *fmt, ...) QEMU_PRINTF(1, 2);
void info_report(const char *fmt, ...) QEMU_PRINTF(1, 2);

#endif
