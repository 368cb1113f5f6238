/*
 * Typed option tables.
 *
 * The tables are generated at build time from the JSON schema in qapi/
 * (scripts/qapi-gen.py): one QemuOptsList per driver for its runtime
 * options and one for its creation options.  A driver absorbs its options
 * from the node's QDict with qemu_opts_absorb_qdict(), which checks every
 * value against its type, fills in defaults and reports errors naming the
 * option.  The same tables print --help text and the option reference in
 * docs/, so that validation, help and documentation cannot drift apart.
 */
#ifndef QBLOCK_QEMU_OPTION_H
#define QBLOCK_QEMU_OPTION_H

#include "util/osdep.h"
#include "util/error.h"
#include "util/qdict.h"

typedef enum QemuOptType {
    QEMU_OPT_STRING,    /* any text */
    QEMU_OPT_BOOL,      /* on/off, true/false, yes/no */
    QEMU_OPT_NUMBER,    /* unsigned 64-bit integer */
    QEMU_OPT_SIZE,      /* size with an optional k/M/G/T/P/E suffix */
    QEMU_OPT_ENUM,      /* one of enum_values */
} QemuOptType;

typedef struct QemuOptDesc {
    const char *name;
    QemuOptType type;
    const char *help;
    /* text of the default value, or NULL if the option has none */
    const char *def_value_str;
    /* NULL-terminated list of allowed values, for QEMU_OPT_ENUM */
    const char *const *enum_values;
} QemuOptDesc;

typedef struct QemuOptsList {
    const char *name;
    /* terminated by an entry whose name is NULL */
    const QemuOptDesc *desc;
} QemuOptsList;

typedef struct QemuOpts QemuOpts;

QemuOpts *qemu_opts_create(const QemuOptsList *list);
void qemu_opts_del(QemuOpts *opts);

/*
 * Moves every entry of @options whose key is described by @list into a new
 * QemuOpts, checking its value.  Unknown keys stay in @options (the caller
 * reports them, or hands them to a child).  On a bad value, returns NULL and
 * sets an error naming the option and the value, e.g.
 * "Parameter 'aio' does not accept value 'nope'" or
 * "Parameter 'size' expects a non-negative number below 2^64".
 */
QemuOpts *qemu_opts_absorb_qdict(const QemuOptsList *list, QDict *options,
                                 Error **errp);
/*
 * Parses "a=b,c=d" (the -o argument of qemu-img create) against @list.
 * Unknown keys are an error ("Invalid parameter 'x'").  Enum values are
 * stored unchecked: qemu-img prints its "Formatting" line with them before
 * bdrv_create() judges them with qemu_opts_check_enums().
 */
QemuOpts *qemu_opts_parse(const QemuOptsList *list, const char *params,
                          Error **errp);
/* Checks every enum value stored by qemu_opts_parse(). */
bool qemu_opts_check_enums(QemuOpts *opts, Error **errp);
/* Sets one option, checking it like qemu_opts_absorb_qdict() does. */
bool qemu_opt_set(QemuOpts *opts, const char *name, const char *value,
                  Error **errp);
bool qemu_opt_set_number(QemuOpts *opts, const char *name, uint64_t val,
                         Error **errp);
bool qemu_opt_set_bool(QemuOpts *opts, const char *name, bool val,
                       Error **errp);
bool qemu_opt_unset(QemuOpts *opts, const char *name);

/* True if the option was given (not just defaulted). */
bool qemu_opt_has(QemuOpts *opts, const char *name);
/* The value as given, else the schema default, else NULL. */
const char *qemu_opt_get(QemuOpts *opts, const char *name);
bool qemu_opt_get_bool(QemuOpts *opts, const char *name, bool defval);
uint64_t qemu_opt_get_number(QemuOpts *opts, const char *name,
                             uint64_t defval);
uint64_t qemu_opt_get_size(QemuOpts *opts, const char *name,
                           uint64_t defval);
/* Index of the value in the enum list (or of the default); -1 if unset. */
int qemu_opt_get_enum(QemuOpts *opts, const char *name);
/* Removes the option and returns its value (caller frees); NULL if unset
 * and without default. */
char *qemu_opt_get_del(QemuOpts *opts, const char *name);

/* Every option that was given, as a QDict (for json: filenames). */
QDict *qemu_opts_to_qdict(QemuOpts *opts, QDict *qdict);

/* Looks a description up by name in a table; NULL if absent. */
const QemuOptDesc *qemu_opts_find_desc(const QemuOptsList *list,
                                       const char *name);
/*
 * Merges @list's descriptions after @dst's (dropping duplicates): how
 * qemu-img create combines a format's and its protocol's options.  @dst is
 * NULL or an earlier result of qemu_opts_append(), which is consumed
 * (`opts = qemu_opts_append(opts, list)`).  The result is freed with
 * qemu_opts_free().
 */
QemuOptsList *qemu_opts_append(QemuOptsList *dst, const QemuOptsList *list);
void qemu_opts_free(QemuOptsList *list);

/*
 * Prints the options sorted by name to stdout, exactly as `qemu-img create
 * -o help` does: "  %-22s - help" with "name=<str|bool (on/off)|num|size>"
 * on the left (enums show as <str>; like QEMU, no defaults), after a
 * "Supported options:" line if @print_caption.
 */
void qemu_opts_print_help(const QemuOptsList *list, bool print_caption);

#endif
