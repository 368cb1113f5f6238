/*
 * qblock-io: what commands print about their requests (the statistics
 * lines in qemu-io's two formats, hex dumps); see io-cmds.h.
 */
#include "io-cmds.h"

void qio_cvtstr(double value, char *str, size_t size)
{
    static const struct {
        double unit;
        const char *suffix;
    } units[] = {
        { (double)EiB, " EiB" }, { (double)PiB, " PiB" },
        { (double)TiB, " TiB" }, { (double)GiB, " GiB" },
        { (double)MiB, " MiB" }, { (double)KiB, " KiB" },
    };
    const char *suffix = " bytes";
    char *zeroes;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(units); i++) {
        if (value >= units[i].unit) {
            break;
        }
    }
    if (i < ARRAY_SIZE(units)) {
        suffix = units[i].suffix;
        snprintf(str, size, "%.3f", value / units[i].unit);
    } else {
        snprintf(str, size, "%f", value);
    }
    zeroes = strstr(str, ".000");
    if (zeroes) {
        *zeroes = '\0';
    }
    g_strlcat(str, suffix, size);
}

void qio_timestr(int64_t ns, char *str, size_t size, bool terse)
{
    int64_t secs = ns / 1000000000;
    double frac = (double)(ns % 1000000000) / 1e9;

    if (terse || secs) {
        snprintf(str, size, "%u:%02u:%05.2f",
                 (unsigned)(secs / 3600), (unsigned)(secs / 60 % 60),
                 (double)(secs % 60) + frac);
    } else {
        snprintf(str, size, "%05.2f sec", frac);
    }
}

void qio_print_report(const char *op, int64_t elapsed_ns,
                      int64_t offset, int64_t count, int64_t total,
                      int cnt, bool terse)
{
    double secs = (double)elapsed_ns / 1e9;
    char ts[64], s1[64], s2[64];

    qio_timestr(elapsed_ns, ts, sizeof(ts), terse);
    if (terse) {
        printf("%" PRId64 ",%d,%s,%.3f,%.3f\n", total, cnt, ts,
               (double)total / secs, (double)cnt / secs);
        return;
    }
    qio_cvtstr((double)total, s1, sizeof(s1));
    qio_cvtstr((double)total / secs, s2, sizeof(s2));
    printf("%s %" PRId64 "/%" PRId64 " bytes at offset %" PRId64 "\n",
           op, total, count, offset);
    printf("%s, %d ops; %s (%s/sec and %.4f ops/sec)\n",
           s1, cnt, ts, s2, (double)cnt / secs);
}

void qio_dump_buffer(const uint8_t *buf, int64_t offset, int64_t len)
{
    for (int64_t i = 0; i < len; i += 16) {
        int64_t n = MIN(16, len - i);

        printf("%08" PRIx64 ":  ", (uint64_t)(offset + i));
        for (int64_t j = 0; j < n; j++) {
            printf("%02x ", buf[i + j]);
        }
        putchar(' ');
        for (int64_t j = 0; j < n; j++) {
            putchar(g_ascii_isalnum(buf[i + j]) ? buf[i + j] : '.');
        }
        putchar('\n');
    }
}
