/*
 * String and number helpers: sizes with suffixes, strict integers, the
 * human size formats of qemu-img and qemu-io, booleans and small string
 * utilities.
 *
 * The parsers never depend on the locale: option values and JSON are
 * written with '.' as the decimal separator whatever LC_NUMERIC says.
 */
#include "util/cutils.h"

#include <math.h>

static const char *const size_units_iec[] = {
    "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB",
};

/* Multiplier of a size suffix letter, or 0 if @c is not a suffix. */
static uint64_t strtosz_suffix_mul(char c)
{
    switch (c) {
    case 'b': case 'B':
        return 1;
    case 'k': case 'K':
        return KiB;
    case 'm': case 'M':
        return MiB;
    case 'g': case 'G':
        return GiB;
    case 't': case 'T':
        return TiB;
    case 'p': case 'P':
        return PiB;
    case 'e': case 'E':
        return EiB;
    default:
        return 0;
    }
}

/*
 * Common body of qemu_strtosz*(): @default_mul applies to a number
 * without suffix.  A fraction is rounded to the nearest byte ("1.5k" is
 * 1536); in bytes only a zero fraction is a size ("1024.0" is, "1.5" is
 * not), as in QEMU.
 */
static int do_strtosz(const char *nptr, const char **end,
                      uint64_t default_mul, uint64_t *result)
{
    const char *p = nptr;
    const char *digits;
    char *endptr;
    uint64_t val, mul, frac_bytes = 0;
    double fraction = 0;
    bool has_fraction = false, hex = false;

    if (end) {
        *end = nptr;
    }
    if (!nptr) {
        return -EINVAL;
    }
    while (g_ascii_isspace(*p)) {
        p++;
    }
    if (*p == '-') {
        if (!g_ascii_isdigit(p[1])) {
            return -EINVAL;
        }
        if (end) {
            *end = p;
        }
        return -ERANGE;
    }
    if (*p == '+') {
        p++;
    }
    digits = p;
    if (!g_ascii_isdigit(*digits)) {
        return -EINVAL;
    }
    if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
        hex = true;
        if (!g_ascii_isxdigit(digits[2])) {
            return -EINVAL;
        }
    }
    errno = 0;
    /* A leading zero means decimal, not octal: "010" is ten bytes. */
    val = g_ascii_strtoull(digits, &endptr, hex ? 16 : 10);
    if (errno == ERANGE) {
        if (end) {
            *end = endptr;
        }
        return -ERANGE;
    }
    p = endptr;

    if (*p == '.' && !hex) {
        const char *frac_start = p;

        p++;
        while (g_ascii_isdigit(*p)) {
            p++;
        }
        /* Parse "0.xyz" so that the integer part cannot lose precision. */
        g_autofree char *frac_text = g_strconcat("0", frac_start, NULL);
        frac_text[p - frac_start + 1] = '\0';
        fraction = g_ascii_strtod(frac_text, NULL);
        has_fraction = true;
    }

    mul = strtosz_suffix_mul(*p);
    if (mul) {
        /* Sizes in hexadecimal are byte counts; "0x10M" is ambiguous. */
        if (hex) {
            return -EINVAL;
        }
        p++;
    } else {
        mul = default_mul;
    }
    if (has_fraction && mul == 1 && fraction != 0) {
        return -EINVAL;
    }
    if (!end && *p) {
        return -EINVAL;
    }

    if (has_fraction) {
        frac_bytes = (uint64_t)floor(fraction * (double)mul + 0.5);
    }
    if (val > (UINT64_MAX - frac_bytes) / mul) {
        if (end) {
            *end = p;
        }
        return -ERANGE;
    }
    if (end) {
        *end = p;
    }
    *result = val * mul + frac_bytes;
    return 0;
}

int qemu_strtosz(const char *nptr, const char **end, uint64_t *result)
{
    return do_strtosz(nptr, end, 1, result);
}

int qemu_strtosz_MiB(const char *nptr, const char **end, uint64_t *result)
{
    return do_strtosz(nptr, end, MiB, result);
}

/*
 * Checks what strtol-like parsing left: with @end the caller takes the
 * rest, without it anything after the number is an error.
 */
static int check_strtox_end(const char *nptr, const char *ep,
                            const char **end, int ret)
{
    if (ep == nptr) {
        if (end) {
            *end = nptr;
        }
        return -EINVAL;
    }
    if (end) {
        *end = ep;
        return ret;
    }
    return *ep ? -EINVAL : ret;
}

/* True if there is no string at all; the caller's *@end is then NULL. */
static bool strtox_no_input(const char *nptr, const char **end)
{
    if (nptr) {
        return false;
    }
    if (end) {
        *end = NULL;
    }
    return true;
}

int qemu_strtoi64(const char *nptr, const char **end, int base,
                  int64_t *result)
{
    char *ep;
    long long val;

    if (strtox_no_input(nptr, end)) {
        return -EINVAL;
    }
    errno = 0;
    val = strtoll(nptr, &ep, base);
    if (ep == nptr) {
        *result = 0;
    } else {
        *result = val;
    }
    return check_strtox_end(nptr, ep, end, errno == ERANGE ? -ERANGE : 0);
}

int qemu_strtou64(const char *nptr, const char **end, int base,
                  uint64_t *result)
{
    const char *p = nptr;
    char *ep;
    unsigned long long val;
    int ret = 0;

    if (strtox_no_input(nptr, end)) {
        return -EINVAL;
    }
    errno = 0;
    val = strtoull(nptr, &ep, base);
    if (errno == ERANGE) {
        ret = -ERANGE;
    }
    /*
     * strtoull() silently negates "-1" into UINT64_MAX; an unsigned
     * value written with a minus sign is out of range instead.
     */
    while (g_ascii_isspace(*p)) {
        p++;
    }
    if (ep != nptr && *p == '-' && val != 0) {
        val = 0;
        ret = -ERANGE;
    }
    *result = ep == nptr ? 0 : val;
    return check_strtox_end(nptr, ep, end, ret);
}

int qemu_strtoi(const char *nptr, const char **end, int base, int *result)
{
    int64_t val;
    int ret = qemu_strtoi64(nptr, end, base, &val);

    if (val > INT_MAX) {
        *result = INT_MAX;
        return ret == -EINVAL ? ret : -ERANGE;
    }
    if (val < INT_MIN) {
        *result = INT_MIN;
        return ret == -EINVAL ? ret : -ERANGE;
    }
    *result = val;
    return ret;
}

/*
 * The unit is the largest one in which the value is at least 1000/1024
 * (so 1000 KiB is already shown as 0.977 MiB), and the number has three
 * significant digits, as qemu-img info prints it.  Like QEMU, values in
 * [999.5, 1000) of a unit print as "1e+03".
 */
char *size_to_str(uint64_t val)
{
    unsigned unit = 0;
    uint64_t base = 1;

    while (unit + 1 < ARRAY_SIZE(size_units_iec) && val >= 1000 * base) {
        base <<= 10;
        unit++;
    }
    return g_strdup_printf("%0.3g %s", (double)val / (double)base,
                           size_units_iec[unit]);
}

char *size_to_str_io(double value)
{
    static const char *const units[] = {
        "bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB",
    };
    unsigned unit = 0;
    double scaled = value;
    g_autofree char *text = NULL;
    char *zeros;

    while (unit + 1 < ARRAY_SIZE(units) && scaled >= 1024.0) {
        scaled /= 1024.0;
        unit++;
    }
    /* Bytes keep six decimals: qemu-io prints byte rates that way. */
    text = g_strdup_printf(unit ? "%.3f" : "%f", scaled);
    zeros = strstr(text, ".000");
    if (zeros) {
        *zeros = '\0';
    }
    return g_strdup_printf("%s %s", text, units[unit]);
}

bool qapi_bool_parse(const char *name, const char *value, bool *obj,
                     Error **errp)
{
    if (!strcmp(value, "on") || !strcmp(value, "yes") ||
        !strcmp(value, "true")) {
        *obj = true;
        return true;
    }
    if (!strcmp(value, "off") || !strcmp(value, "no") ||
        !strcmp(value, "false")) {
        *obj = false;
        return true;
    }
    error_setg(errp, "Parameter '%s' expects 'on' or 'off'", name);
    return false;
}

void pstrcpy(char *buf, int buf_size, const char *str)
{
    int len;

    if (buf_size <= 0) {
        return;
    }
    len = strnlen(str, buf_size - 1);
    memcpy(buf, str, len);
    buf[len] = '\0';
}

int strstart(const char *str, const char *val, const char **ptr)
{
    size_t len = strlen(val);

    if (strncmp(str, val, len)) {
        return 0;
    }
    if (ptr) {
        *ptr = str + len;
    }
    return 1;
}

bool id_wellformed(const char *id)
{
    if (!g_ascii_isalpha(id[0])) {
        return false;
    }
    for (const char *p = id + 1; *p; p++) {
        if (!g_ascii_isalnum(*p) && !strchr("-._", *p)) {
            return false;
        }
    }
    return true;
}

int qemu_name_index(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (names[i] && !strcmp(names[i], name)) {
            return i;
        }
    }
    return -1;
}
