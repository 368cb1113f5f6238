/*
 * QMP commands: the registry of their implementations and the execution
 * of one request, from the parsed JSON message to the response object.
 *
 * Every command is declared in the schema (qapi/); an implementation is
 * registered under the schema's name and runs only after its arguments
 * passed qapi_check_input(), so it reads them without checking their
 * types again.  A command of the schema without an implementation is
 * unknown to clients (CommandNotFound), as QEMU treats commands that are
 * compiled out.
 *
 * Commands run synchronously in the main loop thread and may poll the
 * event loop (opening an image does I/O); the monitor makes sure no
 * other request starts meanwhile.
 */
#ifndef QBLOCK_QMP_DISPATCH_H
#define QBLOCK_QMP_DISPATCH_H

#include "util/qapi-schema.h"

/*
 * An implementation.  @args is the "arguments" object (empty when the
 * request had none), checked against the schema.  On success it may set
 * *@ret to the return value (taken over); an empty object is returned
 * otherwise.  On failure it sets @errp, whose class and text the client
 * gets.
 */
typedef void QmpCommandFunc(JsonObject *args, JsonNode **ret, Error **errp);

/*
 * The string argument @name of @args, or NULL where the request has none
 * (the schema checked its type; a required one is always there).
 */
static inline const char *qmp_arg_str(JsonObject *args, const char *name)
{
    return json_object_get_string_member_with_default(args, name, NULL);
}

/*
 * An implementation that serves several commands, which differ only in
 * data: @opaque is what its command was registered with (a row of the
 * table of those commands), the rest as for QmpCommandFunc.
 */
typedef void QmpCommandDataFunc(JsonObject *args, const void *opaque,
                                JsonNode **ret, Error **errp);

/* Registers @fn for the schema's command @name (once per name). */
void qmp_register_command(const char *name, QmpCommandFunc *fn);
/* The same for @fn, which gets @opaque (not copied: it must stay). */
void qmp_register_command_data(const char *name, QmpCommandDataFunc *fn,
                               const void *opaque);
/* Registers query-commands, which lists the registry. */
void qmp_register_dispatch_commands(void);

typedef enum QmpDispatchMode {
    /* before qmp_capabilities: only it may run */
    QMP_DISPATCH_NEGOTIATION,
    /* after it: everything else, and qmp_capabilities is refused */
    QMP_DISPATCH_COMMANDS,
    /*
     * The same, with the oob capability enabled: a request may name its
     * command with exec-oob instead of execute, and is refused, since no
     * command of the daemon runs out of band (nor of qemu-storage-daemon's)
     */
    QMP_DISPATCH_COMMANDS_OOB,
} QmpDispatchMode;

/*
 * Runs @request, a parsed message (or NULL when it could not be parsed:
 * then @parse_err, which this takes over, is the reply).  Returns the
 * response object: {"return": ...} or {"error": {"class", "desc"}}, with
 * the request's "id" copied in.
 */
JsonNode *qmp_dispatch(JsonNode *request, Error *parse_err,
                       QmpDispatchMode mode);

/* The response to a request that failed with @err (taken over). */
JsonNode *qmp_error_response(Error *err, JsonNode *id);

#endif
