/*
 * The QMP schema as C tables, and the checking of input against it.
 *
 * scripts/qapi-gen.py --qmp turns the command, event and type definitions
 * of the qapi/ schema files into the tables declared here (qapi-qmp.c,
 * generated at build time).  The monitor checks the arguments of every
 * command against them before the command runs, the storage daemon checks
 * its keyval options (--export, --nbd-server, --chardev, --monitor)
 * against them, and every event sent is checked against its declaration;
 * so what docs/qmp-reference.md says is what the code accepts.
 *
 * A value that passed qapi_check_input() has exactly the members and JSON
 * types its schema type declares: handlers read it without checking again.
 */
#ifndef QBLOCK_QAPI_SCHEMA_H
#define QBLOCK_QAPI_SCHEMA_H

#include "util/json.h"
#include "util/qdict.h"

typedef enum QapiKind {
    QAPI_KIND_STR,
    QAPI_KIND_INT,      /* a JSON integer within [min, max] */
    QAPI_KIND_SIZE,     /* the same; keyval input also takes k/M/G suffixes */
    QAPI_KIND_BOOL,
    QAPI_KIND_NUMBER,   /* any JSON number */
    QAPI_KIND_ANY,      /* any JSON value, unchecked */
    QAPI_KIND_ENUM,     /* a string, one of values */
    QAPI_KIND_STRUCT,
    QAPI_KIND_UNION,    /* a struct whose discriminator picks more members */
} QapiKind;

typedef struct QapiType QapiType;

typedef struct QapiMember {
    const char *name;           /* NULL ends a member table */
    const QapiType *type;
    bool optional;
    bool list;                  /* a JSON array of @type */
    /*
     * Declared but never set (QEMU's deprecated "loaded" of secrets and
     * TLS credentials): its type is checked, then the user of the
     * schema refuses it
     */
    bool read_only;
} QapiMember;

typedef struct QapiVariant {
    const char *value;          /* discriminator value; NULL ends the table */
    const QapiType *type;       /* the struct whose members it adds */
} QapiVariant;

struct QapiType {
    const char *name;
    QapiKind kind;
    /* QAPI_KIND_INT, QAPI_KIND_SIZE: the range, and its name in messages */
    int64_t min;
    int64_t max;
    const char *range_name;
    /* QAPI_KIND_ENUM: NULL-terminated */
    const char *const *values;
    /* QAPI_KIND_STRUCT: the members; QAPI_KIND_UNION: the base members */
    const QapiMember *members;
    /* QAPI_KIND_STRUCT: members not declared are allowed (and unchecked) */
    bool open;
    /* QAPI_KIND_UNION: an enum member of the base, and its variants */
    const char *discriminator;
    const QapiVariant *variants;
};

typedef struct QapiCommand {
    const char *name;           /* NULL ends qapi_commands */
    const QapiType *args;       /* a struct or union */
    const QapiType *ret;        /* what it returns; NULL: an empty object */
    bool ret_list;              /* a JSON array of @ret */
} QapiCommand;

typedef struct QapiEvent {
    const char *name;           /* NULL ends qapi_events */
    const QapiType *data;       /* a struct */
} QapiEvent;

/* Generated: every command and event of the schema, in schema order. */
extern const QapiCommand qapi_commands[];
extern const QapiEvent qapi_events[];

const QapiCommand *qapi_find_command(const char *name);

/*
 * query-qmp-schema: the commands, events and every type they use as
 * QEMU's SchemaInfo list (util/qapi-introspect.c).  The names of the
 * schema's own types are masked as numbers, as QEMU masks them, so that
 * clients look at structure, not names.  Only the commands for which
 * @has_command says true are listed (those implemented).
 */
JsonNode *qapi_introspect(bool (*has_command)(const char *name));
const QapiEvent *qapi_find_event(const char *name);

typedef enum QapiInputMode {
    /* QMP: the JSON types must be the schema's */
    QAPI_INPUT_JSON,
    /*
     * Keyval options from the command line: scalars are strings, which
     * are converted in place to the schema's types ("on" to true, "4k"
     * to 4096 for a size, "8" to 8).
     */
    QAPI_INPUT_KEYVAL,
} QapiInputMode;

/*
 * Checks @value (an object, for a struct or union) against @type.  Errors
 * are QEMU's and name the member by its path from the top ("addr.path",
 * "enable[0]"): "Parameter 'x' is missing", "Parameter 'x' is
 * unexpected", "Invalid parameter type for 'x', expected: string",
 * "Parameter 'x' does not accept value 'y'", "Parameter 'x' expects
 * uint32_t"; in keyval mode "Parameter 'x' expects 'on' or 'off'",
 * "Parameter 'x' expects integer".
 */
bool qapi_check_input(const QapiType *type, JsonNode *value,
                      QapiInputMode mode, Error **errp);

/*
 * Turns a keyval dict (keyval_parse) into a JSON object of @type: dotted
 * keys become nested objects, indexes become arrays, and scalars take
 * their schema types.  Returns NULL with an error as qapi_check_input().
 */
JsonNode *qapi_input_from_keyval(const QapiType *type, const QDict *qdict,
                                 Error **errp);

#endif
