/*
 * qblock-nbd --list: asks the server for its exports through the NBD
 * client's listing (include/block/nbd-list.h) and prints them in
 * qemu-nbd's layout.
 */
#include "util/osdep.h"
#include "util/error.h"
#include "block/nbd-list.h"
#include "qblock-nbd.h"

static void qnbd_print_export(const NBDExportListing *exp)
{
    static const char *const flag_names[] = {
        [1] = "readonly", [2] = "flush", [3] = "fua", [4] = "rotational",
        [5] = "trim", [6] = "zeroes", [7] = "df", [8] = "multi",
        [9] = "resize", [10] = "cache", [11] = "fast-zero",
    };

    printf(" export: '%s'\n", exp->name);
    if (exp->description[0]) {
        printf("  description: %s\n", exp->description);
    }
    printf("  size:  %" PRIu64 "\n", exp->info.size);
    printf("  flags: 0x%x (", exp->info.flags);
    for (unsigned int bit = 0; bit < ARRAY_SIZE(flag_names); bit++) {
        if ((exp->info.flags & (1 << bit)) && flag_names[bit]) {
            printf(" %s", flag_names[bit]);
        }
    }
    printf(" )\n");
    printf("  min block: %" PRIu32 "\n", exp->info.min_block);
    printf("  opt block: %" PRIu32 "\n", exp->info.opt_block);
    printf("  max block: %" PRIu32 "\n", exp->info.max_block);
    printf("  available meta contexts: %u\n", exp->contexts->len);
    for (guint i = 0; i < exp->contexts->len; i++) {
        printf("   %s\n", (const char *)exp->contexts->pdata[i]);
    }
}

int qnbd_list_exports(const SocketAddress *addr, const NBDClientTLS *tls,
                      Error **errp)
{
    g_autoptr(GPtrArray) exports = NULL;
    int fd = socket_connect(addr, errp);

    if (fd < 0) {
        return fd;
    }
    exports = nbd_client_list(fd, tls, errp);
    close(fd);
    if (!exports) {
        return -EIO;
    }
    printf("exports available: %u\n", exports->len);
    for (guint i = 0; i < exports->len; i++) {
        qnbd_print_export(exports->pdata[i]);
    }
    return 0;
}
