/*
 * Option dictionaries.
 *
 * Every block node is opened from a QDict: a flat, insertion-ordered map
 * from dotted keys ("file.filename", "overlap-check.template",
 * "inject-error.0.event") to string values.  Nested JSON objects and arrays
 * are flattened into dotted keys on input; typed values (numbers, booleans)
 * are kept as their text ("65536", "true") and checked against the option
 * schema when a driver absorbs them (util/qemu-option.h).  Each value
 * remembers the JSON type it came with so that qdict_to_json() round-trips
 * (numbers and booleans unquoted, as QEMU prints json: filenames).
 *
 * QDicts are reference counted; qdict_new() returns one reference.
 */
#ifndef QBLOCK_QDICT_H
#define QBLOCK_QDICT_H

#include <json-glib/json-glib.h>

#include "util/osdep.h"
#include "util/error.h"

typedef struct QDict QDict;
typedef struct QDictEntry QDictEntry;

typedef enum QType {
    QTYPE_QSTRING,
    QTYPE_QNUM,
    QTYPE_QBOOL,
    QTYPE_QNULL,
} QType;

QDict *qdict_new(void);
QDict *qdict_ref(QDict *qdict);
void qdict_unref(QDict *qdict);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QDict, qdict_unref)

/* Sets @key to a copy of @value, replacing any earlier value. */
void qdict_put_str(QDict *qdict, const char *key, const char *value);
void qdict_put_int(QDict *qdict, const char *key, int64_t value);
void qdict_put_bool(QDict *qdict, const char *key, bool value);
/*
 * Sets @key to a copy of @value with an explicit type: the text of a
 * number ("4096", "1.5"), "true"/"false" for a boolean, NULL (and only
 * NULL) for QTYPE_QNULL.  For parsers and copies that keep types.
 */
void qdict_put_typed(QDict *qdict, const char *key, const char *value,
                     QType type);
/* Sets @key only if it is not set yet. */
void qdict_set_default_str(QDict *qdict, const char *key, const char *value);

/* The text of the value, whatever its type; NULL if absent or null. */
const char *qdict_get_try_str(const QDict *qdict, const char *key);
bool qdict_haskey(const QDict *qdict, const char *key);
/* Returns true if the key was present. */
bool qdict_del(QDict *qdict, const char *key);
size_t qdict_size(const QDict *qdict);

/* Iteration in insertion order; do not modify the dict while iterating
 * except through qdict_del() of the current entry's successor-safe idiom
 * (take qdict_next() before deleting). */
const QDictEntry *qdict_first(const QDict *qdict);
const QDictEntry *qdict_next(const QDict *qdict, const QDictEntry *entry);
const char *qdict_entry_key(const QDictEntry *entry);
const char *qdict_entry_value(const QDictEntry *entry);
QType qdict_entry_type(const QDictEntry *entry);

QDict *qdict_clone(const QDict *src);
/* Copies every entry of @src into @dst, overwriting. */
void qdict_join(QDict *dst, const QDict *src, bool overwrite);

/*
 * Moves every "@prefix<rest>" entry of @src into a new dict as "<rest>"
 * (the entries are removed from @src).  @prefix usually ends in '.'.
 */
void qdict_extract_subqdict(QDict *src, QDict **dst, const char *prefix);
/* True if any key of @qdict starts with @prefix. */
bool qdict_has_prefixed_entries(const QDict *qdict, const char *prefix);

/*
 * Parses "key=value,key2=value2" (QEMU keyval syntax).  ",," stands for a
 * literal comma in a value.  If the first element has no '=', it is the
 * value of @implied_key (an error if @implied_key is NULL).  Keys may be
 * dotted.  A repeated key overrides the earlier one.  Errors name the
 * offending element ("Expected '=' after parameter 'foo'", "Invalid
 * parameter ''").
 */
QDict *keyval_parse(const char *params, const char *implied_key,
                    Error **errp);
/*
 * The same syntax read as QEMU's QemuOpts reads option strings (the
 * tools' --image-opts, qemu-io's open -o): keys are not checked as a tree,
 * so "overlap-check=none,overlap-check.template=all" is two options (that
 * the driver may find in conflict) instead of a syntax error.
 */
QDict *keyval_parse_flat(const char *params, const char *implied_key,
                         Error **errp);

/*
 * QDicts to and from JSON (util/qjson.c), over the one JSON parser and
 * writer of util/json.h.
 *
 * qdict_from_json() parses a JSON object (the text after "json:") into a
 * flattened QDict.  Errors name what is wrong in QEMU's words ("JSON parse
 * error, premature EOI", "Invalid JSON object given"); QEMU's callers
 * prefix them with "Could not parse the JSON options: ".
 */
QDict *qdict_from_json(const char *json, Error **errp);
/* The same for an object already parsed (QMP's blockdev-add arguments). */
QDict *qdict_from_json_object(JsonObject *obj);
/* Serialises a flat dict back to a nested JSON object (keys split on '.'). */
char *qdict_to_json(const QDict *qdict);
/* "json:{...}" filename for a dict, as QEMU prints it. */
char *qdict_to_json_filename(const QDict *qdict);
/*
 * The nested object of qdict_to_json() as a tree (a new reference): what
 * the same text would parse into, for the monitor's events and checks.
 */
JsonNode *qdict_to_json_node(const QDict *qdict);

#endif
