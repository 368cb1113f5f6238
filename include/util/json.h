/*
 * JSON for the QMP monitor: a strict parser into json-glib trees, a
 * streamer that cuts a byte stream into messages, and a writer that prints
 * a tree as QEMU prints its monitor output.
 *
 * json-glib holds the trees (JsonNode, JsonObject, JsonArray) but does not
 * parse them: its parser wraps integers above INT64_MAX, accepts comments
 * and hexadecimal numbers, silently keeps the last of two members with the
 * same name and ignores what follows the first document (see also
 * util/qjson.c).  The parser here is strict JSON plus the extension QEMU's
 * monitor has (strings in single quotes), and its messages are QEMU's
 * ("JSON parse error, duplicate key").
 *
 * Numbers: an integer that fits in int64 is an int node; a larger one, or
 * a number with a fraction or an exponent, is a double node, as QEMU turns
 * integers beyond uint64 into doubles.  A number too large for a double
 * is refused.  Strings are valid UTF-8 without NUL (json-glib strings are
 * C strings, so "\u0000" is refused rather than cut short).
 */
#ifndef QBLOCK_JSON_H
#define QBLOCK_JSON_H

#include <json-glib/json-glib.h>

#include "util/osdep.h"
#include "util/error.h"

/*
 * Deeper documents are refused (QEMU's limit): the parser recurses once
 * per level, and no monitor message needs more than a handful.
 */
#define JSON_MAX_NESTING 1024

/*
 * Parses exactly one JSON value from @text (@len bytes, NUL not needed).
 * Returns a new tree, or NULL with an error such as
 * "JSON parse error, expecting value".
 */
JsonNode *json_parse_text(const char *text, size_t len, Error **errp);

/*
 * JsonStreamer: the monitor's input framing.  Bytes go in as they come
 * off the socket; a message is complete when the braces and brackets that
 * it opened are closed again (outside strings), or, for a value that is
 * not an object or an array, when whitespace or a delimiter ends it.
 *
 * Memory is bounded: a message longer than @max_len bytes, or nested
 * deeper than JSON_MAX_NESTING, is not kept; it is still followed to its
 * end (to a depth of a million brackets, where it is cut off) and then
 * reported as one error, so that a hostile client costs
 * neither memory nor a flood of error replies.  A 0xFF byte (never valid
 * in UTF-8) discards a partial message, as QEMU's monitor does, so that a
 * client can get back in step after sending garbage; so does a raw control
 * character (a newline) inside a string, which means the string was never
 * closed, and is reported as an error.
 */
typedef struct JsonStreamer JsonStreamer;

JsonStreamer *json_streamer_new(size_t max_len);
void json_streamer_free(JsonStreamer *s);
/* Scans @len bytes; complete messages are queued for json_streamer_next. */
void json_streamer_feed(JsonStreamer *s, const char *buf, size_t len);
/*
 * Takes the oldest complete message.  Returns false if there is none;
 * otherwise true with *@node set to its tree, or *@node NULL and *@errp
 * set if it is not valid JSON or broke a limit.
 */
bool json_streamer_next(JsonStreamer *s, JsonNode **node, Error **errp);

typedef enum JsonWriteFlags {
    /* one member per line, indented by 4, as QEMU's pretty=on monitors */
    JSON_WRITE_PRETTY = 0x1,
} JsonWriteFlags;

/*
 * Appends @node to @out as QEMU's monitor writes JSON: ", " and ": "
 * between items, everything outside ASCII printable as \uXXXX escapes
 * (upper case hex), doubles as "%.17g".  Lines end in "\n".
 */
void json_write(GString *out, JsonNode *node, JsonWriteFlags flags);
/* The same into a new string (caller frees). */
char *json_to_text(JsonNode *node, JsonWriteFlags flags);
/*
 * Appends @str as a JSON string the way QEMU writes one: printable ASCII
 * as is, the usual escapes, everything else as \uXXXX (surrogate pairs
 * above U+FFFF); bytes that are not UTF-8 become U+FFFD.
 */
void json_append_string(GString *out, const char *str);

#endif
