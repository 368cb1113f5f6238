/*
 * Crash consistency of the qcow2 operations that only qblock-img does:
 * commit and rebase.  The tool runs with the power-cut injector
 * (powercut.c) preloaded on the image it writes; the power goes as each
 * of its writes, fallocates, truncates and syncs arrives in turn, and
 * once after it exits, with each cut mode (every unsynced change lost; a
 * random subset of them; a random subset of their sectors).  Then, as in
 * test-qcow2-crash.c, the real qemu-img check finds no corruption
 * (leaks: QEMU's commit and rebase write data clusters into the image,
 * and an allocation counts a cluster before the L2 entry uses it), both
 * tools open every image, and the guest's view is what it must be: a
 * commit or a rebase never changes what the top image shows, wherever it
 * stops.
 *
 * QBLOCK_CRASH_STRIDE=<k> cuts at every k-th request only.
 */
#include "crash-model.h"
#include <sys/wait.h>


static const char *const tool_modes[] = {
    "all", "random-writes", "random-sectors",
};

/* The images of one case, in one temporary folder. */
typedef struct ToolCase {
    char *dir;
    char *top;                  /* the image whose view must not change */
    char *target;               /* the image the tool writes */
    CrashModel view;            /* through @top and its backing chain */
    CrashModel target_alone;    /* @target with its own backing, if any */
    bool check_target_alone;
    /* After a run without a cut: asserts the tool did its job. */
    void (*done)(struct ToolCase *c);
    const char *argv[16];
} ToolCase;

static char *tool_image(const char *dir, const char *name,
                        const char *backing)
{
    const BlockDriver *drv = bdrv_find_format("qcow2");
    QemuOptsList *list = qemu_opts_append(NULL, drv->create_opts);
    char *path = g_build_filename(dir, name, NULL);
    g_autofree char *spec =
        backing ? g_strdup_printf("size=1M,cluster_size=4096,backing_file=%s,"
                                  "backing_fmt=qcow2", backing)
                : g_strdup("size=1M,cluster_size=4096");
    QemuOpts *opts = qemu_opts_parse(list, spec, &error_abort);

    g_assert_cmpint(bdrv_create(drv, path, opts, &error_abort), ==, 0);
    qemu_opts_del(opts);
    qemu_opts_free(list);
    return path;
}

/* Writes version @seed (0: a zero write) into the image @path. */
static void tool_write(const char *path, int64_t offset, int64_t bytes,
                       uint32_t seed)
{
    QDict *opts = qdict_new();
    g_autofree uint8_t *buf = g_malloc(bytes);
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "qcow2");
    blk = blk_new_open(path, NULL, opts, BDRV_O_RDWR, &error_abort);
    crash_pattern(buf, bytes, offset / CRASH_SECTOR, seed);
    g_assert_cmpint(seed ? blk_pwrite(blk, offset, bytes, buf, 0)
                    : blk_pwrite_zeroes(blk, offset, bytes, 0), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    blk_unref(blk);
}

/* Logs a durable version into @m. */
static void tool_log(CrashModel *m, int64_t offset, int64_t bytes,
                     uint32_t seed, bool durable)
{
    crash_model_log(m, offset, bytes, seed);
    if (durable) {
        crash_model_completed(m, offset, bytes);
        crash_model_flushed(m);
    }
}

/* Commit done: base holds top's data, durably. */
static void tool_done_commit(ToolCase *c)
{
    crash_model_completed(&c->target_alone, 16 * KiB, 32 * KiB);
    crash_model_completed(&c->target_alone, 128 * KiB, 32 * KiB);
    crash_model_completed(&c->target_alone, 56 * KiB, 4 * KiB);
    crash_model_flushed(&c->target_alone);
}

/* Rebase done: the overlay's header names the new backing file. */
static void tool_done_rebase(ToolCase *c)
{
    g_autofree char *data = NULL, *name = NULL;
    const uint8_t *h;
    uint64_t offset = 0;
    uint32_t len = 0;

    g_assert_true(g_file_get_contents(c->top, &data, NULL, NULL));
    h = (const uint8_t *)data;
    for (int i = 0; i < 8; i++) {
        offset = offset << 8 | h[8 + i];
    }
    for (int i = 0; i < 4; i++) {
        len = len << 8 | h[16 + i];
    }
    name = g_strndup(data + offset, len);
    g_assert_true(g_str_has_suffix(name, "/new.qcow2"));
}

/*
 * base: version 1 in [0, 64K); top: version 2 in [16K, 48K) and
 * [128K, 160K), zeroes in [56K, 60K).  qblock-img commit copies top into
 * base, which may then hold either version of each sector.
 */
static void tool_setup_commit(ToolCase *c, const char *img)
{
    g_autofree char *base = tool_image(c->dir, "base.qcow2", NULL);

    c->top = tool_image(c->dir, "top.qcow2", base);
    c->target = g_strdup(base);
    tool_write(base, 0, 64 * KiB, 1);
    tool_write(c->top, 16 * KiB, 32 * KiB, 2);
    tool_write(c->top, 128 * KiB, 32 * KiB, 2);
    tool_write(c->top, 56 * KiB, 4 * KiB, 0);
    crash_model_init(&c->view, 1 * MiB);
    crash_model_init(&c->target_alone, 1 * MiB);
    for (int i = 0; i < 2; i++) {
        CrashModel *m = i ? &c->target_alone : &c->view;
        bool top_durable = !i;

        tool_log(m, 0, 64 * KiB, 1, true);
        tool_log(m, 16 * KiB, 32 * KiB, 2, top_durable);
        tool_log(m, 128 * KiB, 32 * KiB, 2, top_durable);
        tool_log(m, 56 * KiB, 4 * KiB, 0, top_durable);
    }
    c->check_target_alone = true;
    c->done = tool_done_commit;
    c->argv[0] = img;
    c->argv[1] = "commit";
    c->argv[2] = "-t";
    c->argv[3] = "writeback";
    c->argv[4] = "-f";
    c->argv[5] = "qcow2";
    c->argv[6] = c->top;
}

/*
 * old: version 1 in [0, 64K); new: version 3 in [16K, 32K) and 4 in
 * [96K, 128K); overlay (on old): version 2 in [0, 8K).  A safe rebase onto
 * new copies into the overlay what new shows differently.
 */
static void tool_setup_rebase(ToolCase *c, const char *img)
{
    g_autofree char *old = tool_image(c->dir, "old.qcow2", NULL);
    g_autofree char *new = tool_image(c->dir, "new.qcow2", NULL);
    static char backing[PATH_MAX];

    c->top = tool_image(c->dir, "overlay.qcow2", old);
    c->target = g_strdup(c->top);
    tool_write(old, 0, 64 * KiB, 1);
    tool_write(new, 16 * KiB, 16 * KiB, 3);
    tool_write(new, 96 * KiB, 32 * KiB, 4);
    tool_write(c->top, 0, 8 * KiB, 2);
    crash_model_init(&c->view, 1 * MiB);
    tool_log(&c->view, 0, 64 * KiB, 1, true);
    tool_log(&c->view, 0, 8 * KiB, 2, true);
    tool_log(&c->view, 96 * KiB, 32 * KiB, 0, true);
    g_strlcpy(backing, new, sizeof(backing));
    c->done = tool_done_rebase;
    c->argv[0] = img;
    c->argv[1] = "rebase";
    c->argv[2] = "-t";
    c->argv[3] = "writeback";
    c->argv[4] = "-f";
    c->argv[5] = "qcow2";
    c->argv[6] = "-F";
    c->argv[7] = "qcow2";
    c->argv[8] = "-b";
    c->argv[9] = backing;
    c->argv[10] = c->top;
}

/*
 * The ASan runtime this program (built like qblock-img) loaded, or NULL:
 * an ASan build needs it first in the preload list.
 */
static char *tool_asan_runtime(void)
{
    g_autofree char *maps = NULL;
    char *lib, *start, *end;

    g_assert_true(g_file_get_contents("/proc/self/maps", &maps, NULL, NULL));
    lib = strstr(maps, "/libasan.so");
    if (!lib) {
        return NULL;
    }
    for (start = lib; start > maps && start[-1] != ' '; start--) {
        continue;
    }
    end = strchr(lib, '\n');
    return g_strndup(start, end ? end - start : (gssize)strlen(start));
}

/* The LD_PRELOAD value that puts the injector into qblock-img. */
static const char *tool_injector(void)
{
    static char *preload;

    if (!preload) {
        g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
        g_autofree char *dir = g_path_get_dirname(exe);
        g_autofree char *lib = g_build_filename(dir, "libpowercut.so", NULL);
        g_autofree char *asan = tool_asan_runtime();

        preload = asan ? g_strdup_printf("%s %s", asan, lib) : g_strdup(lib);
    }
    return preload;
}

/*
 * Runs the tool under the injector; returns its exit status (-1: killed,
 * as by the cut).  With @count, the requests it made are in *@count.
 */
static int tool_run(ToolCase *c, long cut_at, int mode, long *count)
{
    g_autofree char *count_file = g_build_filename(c->dir, "count", NULL);
    g_autofree char *at = g_strdup_printf("%ld", cut_at);
    g_autofree char *seed = g_strdup_printf("%ld", cut_at * 3 + mode);
    g_auto(GStrv) env = g_get_environ();
    g_autofree char *out = NULL, *err = NULL;
    GError *gerr = NULL;
    int status;

    env = g_environ_setenv(env, "LD_PRELOAD", tool_injector(), true);
    env = g_environ_setenv(env, "POWERCUT_FILE", c->target, true);
    env = g_environ_setenv(env, "POWERCUT_AT", at, true);
    env = g_environ_setenv(env, "POWERCUT_MODE", tool_modes[mode], true);
    env = g_environ_setenv(env, "POWERCUT_SEED", seed, true);
    if (count) {
        env = g_environ_setenv(env, "POWERCUT_COUNT", count_file, true);
    }
    g_assert_true(g_spawn_sync(NULL, (char **)c->argv, env, G_SPAWN_DEFAULT,
                               NULL, NULL, &out, &err, &status, &gerr));
    g_assert_no_error(gerr);
    if (count) {
        g_autofree char *text = NULL;

        g_assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status)) {
            g_error("%s %s failed without a cut: %s%s", c->argv[0],
                    c->argv[1], out, err);
        }
        g_assert_true(g_file_get_contents(count_file, &text, NULL, NULL));
        *count = atol(text);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

typedef void (*ToolSetup)(ToolCase *c, const char *img);

static void tool_case_free(ToolCase *c)
{
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", c->dir);

    crash_model_destroy(&c->view);
    if (c->check_target_alone) {
        crash_model_destroy(&c->target_alone);
    }
    g_assert_cmpint(system(cmd), ==, 0);
    g_free(c->dir);
    g_free(c->top);
    g_free(c->target);
}

static void tool_case_new(ToolCase *c, ToolSetup setup)
{
    GError *gerr = NULL;

    memset(c, 0, sizeof(*c));
    c->dir = g_dir_make_tmp("qblock-crash-tool-XXXXXX", &gerr);
    g_assert_no_error(gerr);
    setup(c, crash_qblock_img());
}

/* The verdict on one cut's images; a g_strdup'd failure or NULL. */
static char *tool_verify(ToolCase *c, bool *leaked)
{
    CrashVerdict v = crash_verify(c->top, &c->view, CRASH_ALLOW_LEAKS);

    *leaked = v.leaked;
    if (!v.failure && c->check_target_alone) {
        v = crash_verify(c->target, &c->target_alone,
                         CRASH_ALLOW_LEAKS);
        *leaked |= v.leaked;
    }
    return v.failure;
}

/*
 * The sweep over one tool operation.  @known_bug: the reason the case
 * fails today (a bug in code this test does not own); it is then reported
 * as an expected failure, and a pass is a failure until the mark goes.
 */
static void tool_sweep(const char *name, ToolSetup setup,
                       const char *known_bug)
{
    const char *s = g_getenv("QBLOCK_CRASH_STRIDE");
    int stride = s ? MAX(atoi(s), 1) : 1;
    int runs = 0, leaked_runs = 0, failed = 0;
    g_autoptr(GString) where = g_string_new("");
    ToolCase c;
    long total;
    bool leaked;
    char *failure;

    if (!crash_have_qemu_img()) {
        g_test_skip("qemu-img (Debian's qemu-utils) is not installed: it is "
                    "the oracle of these tests");
        return;
    }
    tool_case_new(&c, setup);
    tool_run(&c, 0, 0, &total);
    /* the injector saw the tool's I/O, or the sweep would prove nothing */
    g_assert_cmpint(total, >, 2);
    c.done(&c);
    failure = tool_verify(&c, &leaked);
    if (failure) {
        g_error("%s without a cut: %s", name, failure);
    }
    tool_case_free(&c);
    for (long n = 1; n <= total + 1; n += stride) {
        for (int mode = 0; mode < (int)ARRAY_SIZE(tool_modes); mode++) {
            tool_case_new(&c, setup);
            tool_run(&c, n, mode, NULL);
            failure = tool_verify(&c, &leaked);
            runs++;
            leaked_runs += leaked;
            if (failure) {
                g_string_append_printf(where, " %ld/%s", n, tool_modes[mode]);
            }
            if (failure && failed++ < 3) {
                g_test_message("%s, cut at request %ld of %ld, mode %s: %s",
                               name, n, total, tool_modes[mode], failure);
            }
            g_free(failure);
            tool_case_free(&c);
        }
    }
    printf("# crash-matrix %s: %ld requests, %ld cut points x %zu modes = "
           "%d runs, %d leaked, %d failed\n", name, total,
           (total + stride) / stride, ARRAY_SIZE(tool_modes), runs,
           leaked_runs, failed);
    if (failed) {
        printf("# %s failed at (request/mode):%s\n", name, where->str);
    }
    if (failed && known_bug) {
        g_test_incomplete(known_bug);
    } else if (failed) {
        g_test_fail();
    } else if (known_bug) {
        g_test_message("%s passes: the known bug is fixed, remove its mark",
                       name);
        g_test_fail();
    }
}

static void test_commit(void)
{
    tool_sweep("commit", tool_setup_commit, NULL);
}

/*
 * A safe rebase flushes what it copied into the overlay (data, L2 tables,
 * refcounts) before the header names the new backing file: a cut before
 * that header write leaves the old chain, which the copies do not change;
 * a cut after it finds the copies on disk.
 */
static void test_rebase(void)
{
    tool_sweep("rebase", tool_setup_rebase, NULL);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    g_test_add_func("/qcow2-crash/commit", test_commit);
    g_test_add_func("/qcow2-crash/rebase", test_rebase);
    return g_test_run();
}
