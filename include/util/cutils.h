/*
 * String and number helpers: size parsing with QEMU's suffixes, strict
 * integer parsing, and the human size format the tools print.
 */
#ifndef QBLOCK_CUTILS_H
#define QBLOCK_CUTILS_H

#include "util/osdep.h"
#include "util/error.h"

/*
 * Parses a size with an optional suffix: B, k/K, M, G, T, P, E (powers of
 * 1024), fractions allowed with a suffix ("1.5G").  A bare number is in
 * bytes.  The whole string must be consumed unless @end is non-NULL.
 * Returns 0, -EINVAL (not a size, unknown suffix) or -ERANGE (too large,
 * negative).
 */
int qemu_strtosz(const char *nptr, const char **end, uint64_t *result);
/* Same, but a bare number is in MiB. */
int qemu_strtosz_MiB(const char *nptr, const char **end, uint64_t *result);

/* Strict decimal/hex/octal parsing of the whole string (base 0 = auto). */
int qemu_strtoi64(const char *nptr, const char **end, int base,
                  int64_t *result);
int qemu_strtou64(const char *nptr, const char **end, int base,
                  uint64_t *result);
int qemu_strtoi(const char *nptr, const char **end, int base, int *result);

/*
 * "1 GiB", "4 KiB", "1.5 MiB", "512 B": the human size format of
 * qemu-img info and qemu-io.  Caller frees with g_free().
 */
char *size_to_str(uint64_t val);
/*
 * The format of qemu-io's summary lines, which differs from qemu-img's:
 * three decimals with ".000" dropped ("1.500 MiB", "1 MiB", "1023 KiB"),
 * and "bytes" with six decimals below 1 KiB ("512 bytes",
 * "537.764802 bytes").  Takes a double because rates are fractional.
 * Caller frees with g_free().
 */
char *size_to_str_io(double value);

/*
 * Parses a boolean option value: on/off, yes/no, true/false, 1/0 is not
 * accepted (as QEMU).  Returns false and sets @errp naming @name on error.
 */
bool qapi_bool_parse(const char *name, const char *value, bool *obj,
                     Error **errp);

/* Copies at most @buf_size - 1 characters and always NUL-terminates. */
void pstrcpy(char *buf, int buf_size, const char *str);
/* True if @str starts with @val; *ptr then points after it. */
int strstart(const char *str, const char *val, const char **ptr);
/*
 * QEMU's rule for the ids of objects, jobs and nodes: a letter, then
 * letters, digits, '-', '.' and '_'.
 */
bool id_wellformed(const char *id);
/*
 * The index of @name in @names[0..@n), or -1: an enum's value from its
 * name, for a table of names indexed by the enum (QEMU's
 * qapi_enum_parse()).  NULL entries match nothing.
 */
int qemu_name_index(const char *const *names, size_t n, const char *name);

#endif
