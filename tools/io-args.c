/*
 * qblock-io: parsing of command arguments (numbers with size suffixes,
 * offset and length pairs, pattern bytes, sector alignment) with
 * qemu-io's complaints; see io-cmds.h.
 */
#include "io-cmds.h"

/*
 * Parses a byte count or offset: a size with an optional suffix.  Sizes
 * are never negative, so "-1" is not a number here (-EINVAL), as qemu-io
 * has it; values beyond INT64_MAX are -ERANGE.
 */
static int64_t qio_cvtnum(const char *s)
{
    uint64_t value;
    int ret;

    if (strchr(s, '-')) {
        return -EINVAL;
    }
    ret = qemu_strtosz(s, NULL, &value);
    if (ret < 0) {
        return ret;
    }
    if (value > INT64_MAX) {
        return -ERANGE;
    }
    return value;
}

/* The complaint qemu-io prints about @arg, given qio_cvtnum()'s @rc. */
static void qio_print_cvtnum_err(int64_t rc, const char *arg)
{
    switch (rc) {
    case -EINVAL:
        printf("Parsing error: non-numeric argument,"
               " or extraneous/unrecognized suffix -- %s\n", arg);
        break;
    case -ERANGE:
        printf("Parsing error: argument too large -- %s\n", arg);
        break;
    default:
        printf("Parsing error: %s\n", arg);
        break;
    }
}

int qio_parse_pattern(const char *arg)
{
    char *end;
    long pattern;

    errno = 0;
    pattern = strtol(arg, &end, 0);
    if (errno || pattern < 0 || pattern > UCHAR_MAX || *end != '\0') {
        printf("%s is not a valid pattern byte\n", arg);
        return -1;
    }
    return pattern;
}

bool qio_check_sector_aligned(int64_t offset, int64_t count)
{
    if (!QEMU_IS_ALIGNED(offset, BDRV_SECTOR_SIZE)) {
        printf("%" PRId64 " is not a sector-aligned value for 'offset'\n",
               offset);
        return false;
    }
    if (!QEMU_IS_ALIGNED(count, BDRV_SECTOR_SIZE)) {
        printf("%" PRId64 " is not a sector-aligned value for 'count'\n",
               count);
        return false;
    }
    return true;
}

int qio_usage_error(const char *name)
{
    qio_print_synopsis(qio_find_command(name));
    return -EINVAL;
}

int qio_parse_number(const char *arg, int64_t *value)
{
    int64_t n = qio_cvtnum(arg);

    if (n < 0) {
        qio_print_cvtnum_err(n, arg);
        return n;
    }
    *value = n;
    return 0;
}

int qio_parse_offset_len(char **argv, QioLengthLimit limit, int64_t *offset,
                         int64_t *bytes)
{
    int ret = qio_parse_number(argv[0], offset);

    if (ret < 0) {
        return ret;
    }
    ret = qio_parse_number(argv[1], bytes);
    if (ret < 0) {
        return ret;
    }
    if (limit != QIO_LENGTH_ANY && *bytes > QIO_MAX_REQUEST_BYTES) {
        printf("length cannot exceed %" PRId64 "%s, given %s\n",
               QIO_MAX_REQUEST_BYTES,
               limit == QIO_LENGTH_REQUEST_UNLESS_N ? " without -n" : "",
               argv[1]);
        return -EINVAL;
    }
    return 0;
}
