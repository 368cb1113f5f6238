/*
 * The one JSON stack: a strict parser into json-glib trees, a streamer
 * that cuts a byte stream into messages, and one writer that prints a
 * tree (or a stream of calls) as QEMU prints JSON.  The monitor, json:
 * filenames (util/qjson.c converts between trees and option QDicts) and
 * the tools' --output=json all use it.
 *
 * json-glib holds the trees (JsonNode, JsonObject, JsonArray) but does not
 * parse or print them, because neither is QEMU-exact: its parser wraps
 * integers above INT64_MAX, accepts comments and hexadecimal numbers,
 * silently keeps the last of two members with the same name and ignores
 * what follows the first document; its generator spaces, escapes and
 * formats numbers differently.  The parser here is strict JSON plus the
 * extension QEMU's has (strings in single quotes), and its messages are
 * QEMU's ("JSON parse error, duplicate key"), the same for the monitor and
 * for json: filenames, as in QEMU.
 *
 * Numbers: an integer that fits in int64 is an int node; a larger one, or
 * a number with a fraction or an exponent, is a double node.  (QEMU keeps
 * integers up to UINT64_MAX exact; json-glib trees have no unsigned
 * 64-bit value, so 18446744073709551615 reads as 1.8446744073709552e+19.)
 * A number too large for a double is refused.  Strings are valid UTF-8
 * without NUL (json-glib strings are C strings, so "\u0000" is refused
 * rather than cut short).
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
 * The same, and on error sets *@err_offset (if not NULL) to the offset in
 * @text where the parser found the fault.  QEMU's messages carry no
 * offset, so callers that show one (and tests) take it from here.
 */
JsonNode *json_parse_text_at(const char *text, size_t len,
                             size_t *err_offset, Error **errp);

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
    /*
     * Object members in the order QEMU's QDict iterates them (its hash
     * buckets), as qemu-img --output=json prints them, instead of the
     * order in which they were added (the monitor's order).
     */
    JSON_WRITE_QDICT_ORDER = 0x2,
} JsonWriteFlags;

/*
 * The hash bucket of @key in QEMU's QDict: members iterate by bucket,
 * the later added first within one (JSON_WRITE_QDICT_ORDER).
 */
unsigned int json_qdict_bucket(const char *key);

/*
 * Appends @node to @out as QEMU writes JSON: ", " and ": " between items,
 * everything outside ASCII printable as \uXXXX escapes (upper case hex),
 * doubles as "%.17g".  Pretty lines end in "\n" without a final one.
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
/*
 * The character that the two-character escape backslash-@letter stands
 * for (\n: newline), from the table json_append_string() writes with, so
 * that the parser reads exactly what the writer writes; -1 if none.
 */
int json_short_escape_decode(char letter);
/*
 * The member names of @obj in the order the writer prints them with
 * @flags, NULL-terminated; the array is the caller's, the names @obj's.
 * For renderings of a tree that must list members as the JSON does.
 */
const char **json_object_ordered_members(JsonObject *obj,
                                         JsonWriteFlags flags);

/*
 * JsonWriter: the same output from a stream of calls, for data that is
 * not a json-glib tree (a QDict's flat keys, say).  @name is the member
 * name inside an object and NULL inside an array or for the document
 * itself.  Starts and ends must pair up before json_writer_free().
 */
typedef struct JsonWriter JsonWriter;

JsonWriter *json_writer_new(GString *out, JsonWriteFlags flags);
void json_writer_free(JsonWriter *w);
void json_writer_start_object(JsonWriter *w, const char *name);
void json_writer_end_object(JsonWriter *w);
void json_writer_start_array(JsonWriter *w, const char *name);
void json_writer_end_array(JsonWriter *w);
void json_writer_str(JsonWriter *w, const char *name, const char *value);
void json_writer_int64(JsonWriter *w, const char *name, int64_t value);
void json_writer_double(JsonWriter *w, const char *name, double value);
/* @text is written as is: a JSON number, true, false or null. */
void json_writer_literal(JsonWriter *w, const char *name, const char *text);
/* @node, members in the order the writer's flags ask for. */
void json_writer_node(JsonWriter *w, const char *name, JsonNode *node);

#endif
