/*
 * block/blkdebug.c: injected errors (per event, I/O type, sector, state,
 * once or repeated), the state machine, config files and inline rules,
 * break points, and the alignment limits that make the generic layer do
 * read-modify-write.
 *
 * Events reach blkdebug as in QEMU: raw emits read_aio/write_aio on its
 * file child; the others (flush_to_disk, l2_load, ...) are emitted by the
 * test itself with bdrv_debug_event(), standing in for a format driver.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

#define FILE_SIZE   (64 * KiB)

static char *test_dir;

/* raw -> blkdebug (with @rules) -> null-co */
static BlockBackend *open_raw_over_blkdebug(const char *rules, int flags)
{
    g_autofree char *text = g_strdup_printf(
        "driver=raw,file.driver=blkdebug,file.image.driver=null-co,"
        "file.image.size=1M,file.image.read-zeroes=on%s%s",
        rules ? "," : "", rules ? rules : "");

    return blk_new_open(NULL, NULL, keyval_parse(text, NULL, &error_abort),
                        flags, &error_abort);
}

/* blkdebug (with @rules) -> null-co, so that no driver emits events */
static BlockBackend *open_blkdebug(const char *rules, int flags)
{
    g_autofree char *text = g_strdup_printf(
        "driver=blkdebug,image.driver=null-co,image.size=1M,"
        "image.read-zeroes=on%s%s", rules ? "," : "", rules ? rules : "");

    return blk_new_open(NULL, NULL, keyval_parse(text, NULL, &error_abort),
                        flags, &error_abort);
}

static BlockDriverState *blkdebug_node(BlockBackend *blk)
{
    BlockDriverState *bs = blk_bs(blk);

    if (strcmp(bdrv_get_format_name(bs), "blkdebug")) {
        bs = bs->file->bs;
    }
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "blkdebug");
    return bs;
}

static int rd(BlockBackend *blk, int64_t offset, int64_t bytes)
{
    g_autofree uint8_t *buf = g_malloc(bytes);

    return blk_pread(blk, offset, bytes, buf, 0);
}

static int wr(BlockBackend *blk, int64_t offset, int64_t bytes)
{
    g_autofree uint8_t *buf = g_malloc0(bytes);

    return blk_pwrite(blk, offset, bytes, buf, 0);
}

static void assert_open_error(const char *filename, const char *options,
                              const char *expected)
{
    QDict *opts = options ? keyval_parse(options, NULL, &error_abort) : NULL;
    Error *err = NULL;

    g_assert_null(blk_new_open(filename, NULL, opts, 0, &err));
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==, expected);
    error_free(err);
}

static char *write_config(const char *name, const char *text)
{
    char *path = g_build_filename(test_dir, name, NULL);

    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    return path;
}

/* ---- inject-error ---- */

static void test_read_aio_repeats(void)
{
    BlockBackend *blk =
        open_raw_over_blkdebug("file.inject-error.0.event=read_aio",
                               BDRV_O_RDWR);

    g_assert_cmpint(rd(blk, 0, 512), ==, -EIO);
    g_assert_cmpint(rd(blk, 0, 512), ==, -EIO);
    /* once armed, a rule without iotype fails every kind of request */
    g_assert_cmpint(wr(blk, 4096, 512), ==, -EIO);
    blk_unref(blk);
}

static void test_write_aio_iotype_errno(void)
{
    BlockBackend *blk = open_raw_over_blkdebug(
        "file.inject-error.0.event=write_aio,"
        "file.inject-error.0.iotype=write,file.inject-error.0.errno=28",
        BDRV_O_RDWR);

    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    g_assert_cmpint(wr(blk, 4096, 512), ==, -ENOSPC);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    g_assert_cmpint(wr(blk, 4096, 512), ==, -ENOSPC);
    blk_unref(blk);
}

static void test_once(void)
{
    BlockBackend *blk = open_raw_over_blkdebug(
        "file.inject-error.0.event=read_aio,file.inject-error.0.once=on",
        0);

    g_assert_cmpint(rd(blk, 0, 512), ==, -EIO);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    blk_unref(blk);
}

static void test_immediately(void)
{
    BlockBackend *blk = open_raw_over_blkdebug(
        "file.inject-error.0.event=read_aio,"
        "file.inject-error.0.immediately=on,file.inject-error.0.errno=22",
        0);

    g_assert_cmpint(rd(blk, 0, 512), ==, -EINVAL);
    blk_unref(blk);
}

static void test_flush_to_disk(void)
{
    BlockBackend *blk = open_raw_over_blkdebug(
        "file.inject-error.0.event=flush_to_disk,"
        "file.inject-error.0.iotype=flush",
        BDRV_O_RDWR);

    /* something to flush, or the generic layer skips the flush */
    g_assert_cmpint(wr(blk, 0, 512), ==, 0);
    bdrv_debug_event(blkdebug_node(blk), BLKDBG_FLUSH_TO_DISK);
    g_assert_cmpint(blk_flush(blk), ==, -EIO);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    blk_unref(blk);
}

static void test_sector(void)
{
    BlockBackend *blk = open_raw_over_blkdebug(
        "file.inject-error.0.event=read_aio,file.inject-error.0.sector=8",
        BDRV_O_RDWR);

    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    g_assert_cmpint(rd(blk, 4096, 512), ==, -EIO);
    g_assert_cmpint(rd(blk, 0, 8192), ==, -EIO);
    g_assert_cmpint(rd(blk, 4608, 512), ==, 0);
    g_assert_cmpint(rd(blk, 3584, 512), ==, 0);
    /* a flush has no sectors: a sector rule never fails it */
    g_assert_cmpint(wr(blk, 0, 512), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    blk_unref(blk);
}

static void test_new_event_disarms(void)
{
    BlockBackend *blk = open_blkdebug(
        "inject-error.0.event=l2_load,inject-error.0.iotype=read,"
        "inject-error.1.event=l1_update,inject-error.1.iotype=write,"
        "inject-error.1.errno=28", BDRV_O_RDWR);
    BlockDriverState *bs = blkdebug_node(blk);

    /* no driver above emits events: nothing is armed yet */
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    g_assert_cmpint(wr(blk, 0, 512), ==, 0);

    bdrv_debug_event(bs, BLKDBG_L2_LOAD);
    g_assert_cmpint(rd(blk, 0, 512), ==, -EIO);
    g_assert_cmpint(wr(blk, 0, 512), ==, 0);

    /* arming the l1_update rule drops the l2_load one */
    bdrv_debug_event(bs, BLKDBG_L1_UPDATE);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    g_assert_cmpint(wr(blk, 0, 512), ==, -ENOSPC);

    /* an event without inject rules leaves the armed ones alone */
    bdrv_debug_event(bs, BLKDBG_REFTABLE_LOAD);
    g_assert_cmpint(wr(blk, 0, 512), ==, -ENOSPC);
    blk_unref(blk);
}

static void test_block_status_iotype(void)
{
    BlockBackend *blk;
    BlockDriverState *bs, *file;
    int64_t pnum, map;

    /* block status fails only when the rule names it */
    blk = open_blkdebug("inject-error.0.event=l2_load", 0);
    bs = blkdebug_node(blk);
    bdrv_debug_event(bs, BLKDBG_L2_LOAD);
    g_assert_cmpint(bdrv_block_status(bs, 0, 4096, &pnum, &map, &file), >=,
                    0);
    g_assert_cmpint(rd(blk, 0, 512), ==, -EIO);
    blk_unref(blk);

    blk = open_blkdebug("inject-error.0.event=l2_load,"
                        "inject-error.0.iotype=block-status", 0);
    bs = blkdebug_node(blk);
    bdrv_debug_event(bs, BLKDBG_L2_LOAD);
    g_assert_cmpint(bdrv_block_status(bs, 0, 4096, &pnum, &map, &file), ==,
                    -EIO);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    blk_unref(blk);
}

/* ---- set-state ---- */

static void test_state_machine(void)
{
    BlockBackend *blk = open_raw_over_blkdebug(
        "file.inject-error.0.event=read_aio,file.inject-error.0.state=2,"
        "file.set-state.0.event=write_aio,file.set-state.0.state=1,"
        "file.set-state.0.new_state=2",
        BDRV_O_RDWR);

    /* state 1: the read_aio rule is not armed */
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    /* write_aio moves to state 2, after its own rules were looked at */
    g_assert_cmpint(wr(blk, 0, 512), ==, 0);
    g_assert_cmpint(rd(blk, 0, 512), ==, -EIO);
    blk_unref(blk);
}

static void test_state_cycle(void)
{
    BlockBackend *blk = open_blkdebug(
        "inject-error.0.event=l2_load,inject-error.0.state=2,"
        "inject-error.0.once=on,"
        "set-state.0.event=l1_update,set-state.0.state=1,"
        "set-state.0.new_state=2,"
        "set-state.1.event=l1_update,set-state.1.state=2,"
        "set-state.1.new_state=1", 0);
    BlockDriverState *bs = blkdebug_node(blk);

    bdrv_debug_event(bs, BLKDBG_L2_LOAD);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    bdrv_debug_event(bs, BLKDBG_L1_UPDATE);     /* 1 -> 2 */
    bdrv_debug_event(bs, BLKDBG_L2_LOAD);
    g_assert_cmpint(rd(blk, 0, 512), ==, -EIO);
    bdrv_debug_event(bs, BLKDBG_L1_UPDATE);     /* 2 -> 1 */
    bdrv_debug_event(bs, BLKDBG_L2_LOAD);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    blk_unref(blk);
}

/* ---- config file and filenames ---- */

static void test_config_file(void)
{
    g_autofree char *conf = write_config("rules.conf",
        "# QEMU's syntax\n"
        "[inject-error]\n"
        "event = \"read_aio\"\n"
        "errno = \"28\"\n"
        "once = \"on\"\n"
        "state = \"2\"\n"
        "\n"
        "[set-state]\n"
        "  event = \"write_aio\"\n"
        "  new_state = \"2\"\n");
    g_autofree char *filename = g_strdup_printf("blkdebug:%s:null-co://",
                                                conf);
    QDict *opts = qdict_new();
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "raw");
    blk = blk_new_open(filename, NULL, opts, BDRV_O_RDWR, &error_abort);
    g_assert_cmpstr(bdrv_get_format_name(blk_bs(blk)->file->bs), ==,
                    "blkdebug");
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    g_assert_cmpint(wr(blk, 0, 512), ==, 0);
    g_assert_cmpint(rd(blk, 0, 512), ==, -ENOSPC);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    blk_unref(blk);
}

static void test_config_and_inline(void)
{
    g_autofree char *conf = write_config("write.conf",
        "[inject-error]\n"
        "event = \"write_aio\"\n"
        "iotype = \"write\"\n"
        "errno = \"28\"\n");
    g_autofree char *rules = g_strdup_printf(
        "file.config=%s,file.inject-error.0.event=read_aio,"
        "file.inject-error.0.iotype=read", conf);
    BlockBackend *blk = open_raw_over_blkdebug(rules, BDRV_O_RDWR);

    g_assert_cmpint(rd(blk, 0, 512), ==, -EIO);
    g_assert_cmpint(wr(blk, 0, 512), ==, -ENOSPC);
    blk_unref(blk);
}

static void test_empty_config_filename(void)
{
    QDict *opts = qdict_new();
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "raw");
    blk = blk_new_open("blkdebug::null-co://", NULL, opts, BDRV_O_RDWR,
                       &error_abort);
    g_assert_cmpint(rd(blk, 0, 512), ==, 0);
    g_assert_cmpint(wr(blk, 0, 512), ==, 0);
    blk_unref(blk);
}

static void test_filename(void)
{
    g_autofree char *conf = write_config("empty.conf", "");
    g_autofree char *filename = g_strdup_printf("blkdebug:%s:null-co://",
                                                conf);
    QDict *opts = qdict_new();
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "raw");
    blk = blk_new_open(filename, NULL, opts, 0, &error_abort);
    g_assert_cmpstr(blkdebug_node(blk)->filename, ==, filename);
    blk_unref(blk);

    /* inline rules cannot be said in that syntax */
    blk = open_raw_over_blkdebug("file.inject-error.0.event=read_aio", 0);
    g_assert_true(g_str_has_prefix(blkdebug_node(blk)->filename, "json:"));
    blk_unref(blk);
}

static void test_config_errors(void)
{
    struct {
        const char *text;
        const char *error;
    } cases[] = {
        { "[foo]\n", "There is no option group 'foo'" },
        { "event = \"read_aio\"\n", "no group defined" },
        { "[inject-error]\n   \n", "parse error" },
        { "[inject-error]\ngarbage\n", "Invalid parameter 'garbage'" },
        /* QEMU's parser reads an unquoted value as empty */
        { "[inject-error]\nevent = read_aio\n", "invalid parameter value: " },
        { "[inject-error]\nerrno = \"5\"\n", "Missing event name for rule" },
        { "[inject-error]\nevent = \"nope\"\n",
          "invalid parameter value: nope" },
        { "[set-state]\nevent = \"read_aio\"\nnew_state = \"x\"\n",
          "Parameter 'new_state' expects a number" },
    };
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        g_autofree char *conf = write_config("bad.conf", cases[i].text);
        g_autofree char *filename =
            g_strdup_printf("blkdebug:%s:null-co://", conf);

        assert_open_error(filename, "driver=raw", cases[i].error);
    }
    assert_open_error("blkdebug:/nonexistent/x.conf:null-co://",
                      "driver=raw",
                      "Could not read blkdebug config file: No such file or "
                      "directory");
    assert_open_error("blkdebug:image.raw", NULL,
                      "blkdebug requires both config file and image path");
}

static void test_inline_errors(void)
{
    const char *base = "driver=blkdebug,image.driver=null-co,";
    struct {
        const char *rules;
        const char *error;
    } cases[] = {
        { "inject-error.0.event=nope", "invalid parameter value: nope" },
        { "inject-error.0.event=read_aio,inject-error.0.iotype=bogus",
          "invalid parameter value: bogus" },
        { "inject-error.0.errno=5", "Missing event name for rule" },
        { "inject-error.0.event=read_aio,inject-error.0.bogus=1",
          "[inject-error] section doesn't support the option 'bogus'" },
        { "set-state.0.event=read_aio,set-state.0.new_state=x",
          "Parameter 'new_state' expects a number" },
    };
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        g_autofree char *opts = g_strconcat(base, cases[i].rules, NULL);

        assert_open_error(NULL, opts, cases[i].error);
    }
}

/* ---- break points ---- */

typedef struct ReadCo {
    BlockBackend *blk;
    bool done;
    int ret;
} ReadCo;

static void coroutine_fn read_co_entry(void *opaque)
{
    ReadCo *rc = opaque;
    uint8_t buf[512];
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, buf, sizeof(buf));
    rc->ret = blk_co_preadv(rc->blk, 0, sizeof(buf), &qiov, 0);
    rc->done = true;
}

static void start_read(BlockBackend *blk, ReadCo *rc)
{
    *rc = (ReadCo) { .blk = blk };
    qemu_coroutine_enter(qemu_coroutine_create(read_co_entry, rc));
}

static void wait_read(ReadCo *rc)
{
    while (!rc->done) {
        aio_poll(blk_get_aio_context(rc->blk), true);
    }
    g_assert_cmpint(rc->ret, ==, 0);
}

static void break_resume_body(void)
{
    BlockBackend *blk = open_raw_over_blkdebug(NULL, 0);
    BlockDriverState *bs = blk_bs(blk);
    ReadCo rc;
    int i;

    g_assert_cmpint(bdrv_debug_breakpoint(bs, "read_aio", "A"), ==, 0);
    g_assert_false(bdrv_debug_is_suspended(bs, "A"));
    start_read(blk, &rc);
    g_assert_true(bdrv_debug_is_suspended(bs, "A"));
    for (i = 0; i < 10; i++) {
        aio_poll(blk_get_aio_context(blk), false);
    }
    g_assert_false(rc.done);

    g_assert_cmpint(bdrv_debug_resume(bs, "B"), ==, -ENOENT);
    g_assert_cmpint(bdrv_debug_resume(bs, "A"), ==, 0);
    wait_read(&rc);
    g_assert_false(bdrv_debug_is_suspended(bs, "A"));

    /* a break point is used up by the request that hits it */
    start_read(blk, &rc);
    wait_read(&rc);
    g_assert_cmpint(bdrv_debug_resume(bs, "A"), ==, -ENOENT);
    blk_unref(blk);
}

static void test_break_resume(void)
{
    if (g_test_subprocess()) {
        break_resume_body();
        return;
    }
    /* the lines qemu-io users wait for, as QEMU prints them */
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_passed();
    g_test_trap_assert_stdout("blkdebug: Suspended request 'A'\n"
                              "blkdebug: Resuming request 'A'\n");
}

static void remove_break_body(void)
{
    BlockBackend *blk = open_raw_over_blkdebug(NULL, 0);
    BlockDriverState *bs = blk_bs(blk);
    ReadCo rc;

    g_assert_cmpint(bdrv_debug_breakpoint(bs, "nope", "A"), ==, -ENOENT);
    g_assert_cmpint(bdrv_debug_remove_breakpoint(bs, "A"), ==, -ENOENT);

    /* removed before it is hit: nothing is suspended */
    g_assert_cmpint(bdrv_debug_breakpoint(bs, "read_aio", "A"), ==, 0);
    g_assert_cmpint(bdrv_debug_remove_breakpoint(bs, "A"), ==, 0);
    start_read(blk, &rc);
    g_assert_false(bdrv_debug_is_suspended(bs, "A"));
    wait_read(&rc);

    /* removed after it was hit: the request goes on, and as in QEMU the
     * removal reports that there was no break point left */
    g_assert_cmpint(bdrv_debug_breakpoint(bs, "read_aio", "B"), ==, 0);
    start_read(blk, &rc);
    g_assert_true(bdrv_debug_is_suspended(bs, "B"));
    g_assert_cmpint(bdrv_debug_remove_breakpoint(bs, "B"), ==, -ENOENT);
    wait_read(&rc);
    g_assert_false(bdrv_debug_is_suspended(bs, "B"));
    blk_unref(blk);
}

static void test_remove_break(void)
{
    if (g_test_subprocess()) {
        remove_break_body();
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_passed();
    g_test_trap_assert_stdout("blkdebug: Suspended request 'B'\n"
                              "blkdebug: Resuming request 'B'\n");
}

/* ---- limits ---- */

static char *make_file(const char *name)
{
    char *path = g_build_filename(test_dir, name, NULL);
    g_autofree uint8_t *buf = g_malloc(FILE_SIZE);
    int i;

    for (i = 0; i < FILE_SIZE; i++) {
        buf[i] = i * 7 + 1;
    }
    g_assert_true(g_file_set_contents(path, (char *)buf, FILE_SIZE, NULL));
    return path;
}

static BlockBackend *open_blkdebug_file(const char *path, const char *limits)
{
    g_autofree char *text = g_strdup_printf(
        "driver=blkdebug,image.driver=file,image.filename=%s,%s",
        path, limits);

    return blk_new_open(NULL, NULL, keyval_parse(text, NULL, &error_abort),
                        BDRV_O_RDWR, &error_abort);
}

static void test_align_forces_rmw(void)
{
    g_autofree char *path = make_file("align.img");
    g_autofree uint8_t *expect = NULL, *got = NULL;
    BlockBackend *blk = open_blkdebug_file(path, "align=4096");
    BlockDriverState *file = blk_bs(blk)->file->bs;
    uint8_t w[512];
    uint64_t reads, written;
    gsize len;

    g_assert_cmpuint(blk_bs(blk)->bl.request_alignment, ==, 4096);
    g_assert_true(g_file_get_contents(path, (char **)&expect, &len, NULL));
    memset(w, 0xee, sizeof(w));
    memcpy(expect + 1024, w, sizeof(w));

    reads = file->stats.reads;
    written = file->stats.bytes_written;
    /* blkdebug asserts that what reaches it is aligned */
    g_assert_cmpint(blk_pwrite(blk, 1024, sizeof(w), w, 0), ==, 0);
    g_assert_cmpuint(file->stats.reads, >, reads);
    g_assert_cmpuint(file->stats.bytes_written - written, ==, 4096);
    g_assert_cmpint(rd(blk, 100, 1000), ==, 0);
    blk_unref(blk);

    g_assert_true(g_file_get_contents(path, (char **)&got, &len, NULL));
    g_assert_cmpmem(got, len, expect, FILE_SIZE);
}

static void test_max_transfer_splits(void)
{
    g_autofree char *path = make_file("split.img");
    BlockBackend *blk = open_blkdebug_file(path, "max-transfer=4096");
    BlockDriverState *file = blk_bs(blk)->file->bs;
    uint64_t reads = file->stats.reads;

    g_assert_cmpuint(blk_bs(blk)->bl.max_transfer, ==, 4096);
    g_assert_cmpint(rd(blk, 0, 16384), ==, 0);
    g_assert_cmpuint(file->stats.reads - reads, ==, 4);
    blk_unref(blk);
}

static void test_limit_errors(void)
{
    const char *base = "driver=blkdebug,image.driver=null-co,";
    struct {
        const char *limits;
        const char *error;
    } cases[] = {
        { "align=3", "Cannot meet constraints with align 3" },
        { "align=4096,max-transfer=512",
          "Cannot meet constraints with max-transfer 512" },
        { "align=4096,opt-write-zero=512",
          "Cannot meet constraints with opt-write-zero 512" },
        { "opt-write-zero=1024,max-write-zero=1536",
          "Cannot meet constraints with max-write-zero 1536" },
        { "align=4096,opt-discard=512",
          "Cannot meet constraints with opt-discard 512" },
        { "opt-discard=1024,max-discard=1536",
          "Cannot meet constraints with max-discard 1536" },
    };
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        g_autofree char *opts = g_strconcat(base, cases[i].limits, NULL);

        assert_open_error(NULL, opts, cases[i].error);
    }
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    test_dir = g_dir_make_tmp("test-blkdebug-XXXXXX", NULL);
    g_assert_nonnull(test_dir);

    g_test_add_func("/blkdebug/inject/read-aio-repeats",
                    test_read_aio_repeats);
    g_test_add_func("/blkdebug/inject/write-aio-iotype-errno",
                    test_write_aio_iotype_errno);
    g_test_add_func("/blkdebug/inject/once", test_once);
    g_test_add_func("/blkdebug/inject/immediately", test_immediately);
    g_test_add_func("/blkdebug/inject/flush-to-disk", test_flush_to_disk);
    g_test_add_func("/blkdebug/inject/sector", test_sector);
    g_test_add_func("/blkdebug/inject/new-event-disarms",
                    test_new_event_disarms);
    g_test_add_func("/blkdebug/inject/block-status-iotype",
                    test_block_status_iotype);
    g_test_add_func("/blkdebug/state/machine", test_state_machine);
    g_test_add_func("/blkdebug/state/cycle", test_state_cycle);
    g_test_add_func("/blkdebug/config/file", test_config_file);
    g_test_add_func("/blkdebug/config/file-and-inline",
                    test_config_and_inline);
    g_test_add_func("/blkdebug/config/empty", test_empty_config_filename);
    g_test_add_func("/blkdebug/config/filename", test_filename);
    g_test_add_func("/blkdebug/config/errors", test_config_errors);
    g_test_add_func("/blkdebug/config/inline-errors", test_inline_errors);
    g_test_add_func("/blkdebug/break/resume", test_break_resume);
    g_test_add_func("/blkdebug/break/remove", test_remove_break);
    g_test_add_func("/blkdebug/limits/align-rmw", test_align_forces_rmw);
    g_test_add_func("/blkdebug/limits/max-transfer",
                    test_max_transfer_splits);
    g_test_add_func("/blkdebug/limits/errors", test_limit_errors);
    ret = g_test_run();

    {
        g_autoptr(GDir) dir = g_dir_open(test_dir, 0, NULL);
        const char *name;

        while (dir && (name = g_dir_read_name(dir))) {
            g_autofree char *p = g_build_filename(test_dir, name, NULL);
            unlink(p);
        }
    }
    rmdir(test_dir);
    return ret;
}
