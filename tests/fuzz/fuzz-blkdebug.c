/*
 * fuzz-blkdebug: a blkdebug config file (blkdebug:FILE:IMAGE, or the
 * "config" option), as qblock-io reads one: parsed, its rules installed
 * on raw -> blkdebug -> null-co, then every event emitted once and a few
 * reads, writes and a flush run through the rules, so that the actions
 * the file sets up (errors, state changes) are taken as well as parsed.
 *
 * blkdebug reads the config from a path, so each input is written to one
 * file in a private directory made at start-up and removed at exit.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

static char *fuzz_blkdebug_dir;
static char *fuzz_blkdebug_path;

static void fuzz_blkdebug_cleanup(void)
{
    unlink(fuzz_blkdebug_path);
    rmdir(fuzz_blkdebug_dir);
}

static void fuzz_blkdebug_init(void)
{
    if (fuzz_blkdebug_dir) {
        return;
    }
    bdrv_init();
    fuzz_blkdebug_dir = g_dir_make_tmp("fuzz-blkdebug-XXXXXX", NULL);
    assert(fuzz_blkdebug_dir);
    fuzz_blkdebug_path = g_build_filename(fuzz_blkdebug_dir, "rules.conf",
                                          NULL);
    atexit(fuzz_blkdebug_cleanup);
}

static void fuzz_blkdebug_run(BlockBackend *blk)
{
    BlockDriverState *dbg = blk_bs(blk)->file->bs;
    uint8_t buf[4096];

    for (int ev = 0; ev < BLKDBG__MAX; ev++) {
        bdrv_debug_event(dbg, ev);
    }
    memset(buf, 0x5a, sizeof(buf));
    blk_pread(blk, 0, sizeof(buf), buf, 0);
    blk_pwrite(blk, 4096, sizeof(buf), buf, 0);
    blk_pread(blk, 512 * 1024, 512, buf, 0);
    blk_pwrite(blk, 0, 512, buf, BDRV_REQ_FUA);
    blk_flush(blk);
    blk_pread(blk, 0, sizeof(buf), buf, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    QDict *opts;
    Error *err = NULL;
    BlockBackend *blk;

    fuzz_blkdebug_init();
    if (!g_file_set_contents(fuzz_blkdebug_path, (const char *)data, size,
                             NULL)) {
        abort();
    }
    opts = qdict_new();
    qdict_put_str(opts, "driver", "raw");
    qdict_put_str(opts, "file.driver", "blkdebug");
    qdict_put_str(opts, "file.config", fuzz_blkdebug_path);
    qdict_put_str(opts, "file.image.driver", "null-co");
    qdict_put_str(opts, "file.image.size", "1M");
    qdict_put_str(opts, "file.image.read-zeroes", "on");
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &err);
    error_free(err);
    if (blk) {
        fuzz_blkdebug_run(blk);
        blk_unref(blk);
    }
    return 0;
}
