/*
 * fuzz-nbd-server: bytes from an NBD client, through a socketpair, into
 * the NBD server: the newstyle handshake (options, export lookup, meta
 * contexts, structured replies) and then transmission (requests, payloads,
 * block status), against two exports of a 1 MiB in-memory node: "" (the
 * default export: writable, with qemu:allocation-depth) and "ro".
 *
 * Each input is one connection that sends the input, half-closes, and
 * reads until the server hangs up; the server and its exports live for
 * the whole run, as in qblock-nbd and the storage daemon.
 */
#include <sys/socket.h>

#include "fuzz-mem.h"
#include "fuzz-pump.h"

#include "block/block_int.h"
#include "block/nbd.h"

/* Big enough for requests that straddle clusters, small to reset. */
#define FUZZ_NBD_DISK_SIZE  (1024 * 1024)

static NBDServer *fuzz_nbd_server;

static void fuzz_nbd_init(void)
{
    static uint8_t zeroes[FUZZ_NBD_DISK_SIZE];
    NBDServerConfig scfg = { 0 };
    NBDExportConfig rw = { .name = "", .writable = true,
                           .allocation_depth = true,
                           .description = "fuzz" };
    NBDExportConfig ro = { .name = "ro" };
    QDict *opts;
    BlockBackend *blk;

    if (fuzz_nbd_server) {
        return;
    }
    opts = qdict_new();
    fuzz_mem_register();
    fuzz_mem_set_image(zeroes, sizeof(zeroes));
    qdict_put_str(opts, "driver", "fuzz-mem");
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
    fuzz_nbd_server = nbd_server_new(qemu_get_aio_context(), &scfg);
    if (!nbd_export_new(fuzz_nbd_server, blk, &rw, &error_abort) ||
        !nbd_export_new(fuzz_nbd_server, blk, &ro, &error_abort)) {
        abort();
    }
    /* the exports hold their own references */
    blk_unref(blk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];

    fuzz_nbd_init();
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        abort();
    }
    nbd_server_add_client(fuzz_nbd_server, sv[0]);
    fuzz_pump(sv[1], data, size);
    /* the server frees a client from the loop after it hung up */
    while (nbd_server_client_count(fuzz_nbd_server) > 0) {
        aio_poll(qemu_get_aio_context(), true);
    }
    return 0;
}
