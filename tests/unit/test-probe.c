/*
 * Opening images by name with the real drivers: format probing (QEMU's
 * warning when it guesses raw, qcow version 1 refused), json: filenames,
 * protocol prefixes, and the errors a user sees for bad names and options.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

static char *test_dir;
static char *raw_path;      /* 1 MiB of 0x5a */
static char *empty_path;    /* 0 bytes */

/* Checks the message and clears the error for the next call. */
static void assert_error(Error **errp, const char *expected)
{
    g_assert_nonnull(*errp);
    g_assert_cmpstr(error_get_pretty(*errp), ==, expected);
    error_free(*errp);
    *errp = NULL;
}

static QDict *opts(const char *text)
{
    return keyval_parse(text, NULL, &error_abort);
}

/* ---- probing ---- */

static void test_probe_raw_warns(void)
{
    BlockDriverState *bs;

    if (g_test_subprocess()) {
        bs = bdrv_open(raw_path, NULL, NULL, BDRV_O_RDWR, &error_abort);
        g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");
        g_assert_true(bs->probed);
        g_assert_cmpstr(bdrv_get_format_name(bs->file->bs), ==, "file");
        g_assert(bs->file->bs->open_flags & BDRV_O_PROTOCOL);
        bdrv_unref(bs);
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_passed();
    g_test_trap_assert_stdout("");
    g_test_trap_assert_stderr(
        "WARNING: Image format was not specified for '*/raw.img' and "
        "probing guessed raw.\n"
        "         Automatically detecting the format is dangerous for raw "
        "images, write operations on block 0 will be restricted.\n"
        "         Specify the 'raw' format explicitly to remove the "
        "restrictions.\n");
}

/*
 * An image in the older qcow format (version 1: magic "QFI\xfb", version
 * 1, the size at byte 24) is probed as qcow, never as qcow2 or raw (where
 * a write could destroy its header); with -f qcow2, QEMU's message, and
 * the file is left as it was.
 */
static void test_probe_qcow_v1(void)
{
    g_autofree char *path = g_build_filename(test_dir, "v1.qcow", NULL);
    static const uint8_t header[48] = {
        'Q', 'F', 'I', 0xfb, 0, 0, 0, 1,
        [24] = 0, 0, 0, 0, 0, 0x10, 0, 0,       /* 1 MiB */
        [32] = 12, 9,                           /* cluster and L2 bits */
    };
    g_autofree char *after = NULL;
    BlockDriverState *bs;
    gsize len;
    Error *err = NULL;

    g_assert_true(g_file_set_contents(path, (const char *)header,
                                      sizeof(header), NULL));
    bs = bdrv_open(path, NULL, NULL, 0, &error_abort);
    g_assert_true(bs->probed);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "qcow");
    g_assert_cmpint(bdrv_getlength(bs), ==, 1 << 20);
    bdrv_unref(bs);
    g_assert_null(bdrv_open(path, NULL, opts("driver=qcow2"), BDRV_O_RDWR,
                            &err));
    assert_error(&err, "Unsupported qcow2 version 1");
    g_assert_true(g_file_get_contents(path, &after, &len, NULL));
    g_assert_cmpmem(after, len, header, sizeof(header));
    unlink(path);
}

static void test_probe_raw_read_only_silent(void)
{
    BlockDriverState *bs;

    if (g_test_subprocess()) {
        /* nothing can be written by mistake: no reason to warn */
        bs = bdrv_open(raw_path, NULL, NULL, 0, &error_abort);
        g_assert_true(bs->probed);
        g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");
        bdrv_unref(bs);
        bs = bdrv_open(empty_path, NULL, NULL, 0, &error_abort);
        g_assert_true(bs->probed);
        g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");
        bdrv_unref(bs);
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr("");
}

static void test_explicit_format_silent(void)
{
    BlockDriverState *bs;

    if (g_test_subprocess()) {
        bs = bdrv_open(raw_path, NULL, opts("driver=raw"), BDRV_O_RDWR,
                       &error_abort);
        g_assert_false(bs->probed);
        g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");
        bdrv_unref(bs);
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr("");
}

static void test_probe_reads_through_protocol(void)
{
    g_autofree char *name = g_strdup_printf("file:%s", raw_path);
    BlockBackend *blk;
    uint8_t buf[512];

    blk = blk_new_open(name, NULL, NULL, 0, &error_abort);
    g_assert_true(blk_bs(blk)->probed);
    g_assert_cmpint(blk_getlength(blk), ==, MiB);
    g_assert_cmpint(blk_pread(blk, 512, sizeof(buf), buf, 0), ==, 0);
    for (size_t i = 0; i < sizeof(buf); i++) {
        g_assert_cmpint(buf[i], ==, 0x5a);
    }
    blk_unref(blk);
}

/* ---- json: filenames ---- */

static void test_json_filename(void)
{
    g_autofree char *json = g_strdup_printf(
        "json:{\"driver\": \"raw\", \"file\": {\"driver\": \"file\", "
        "\"filename\": \"%s\"}}", raw_path);
    BlockDriverState *bs;

    bs = bdrv_open(json, NULL, NULL, 0, &error_abort);
    g_assert_false(bs->probed);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");
    /* as qemu-img info prints it: the plain name opens the same graph */
    g_assert_cmpstr(bs->filename, ==, raw_path);
    g_assert_cmpstr(bs->file->bs->filename, ==, raw_path);
    bdrv_unref(bs);
}

static void test_json_filename_with_strong_option(void)
{
    g_autofree char *json = g_strdup_printf(
        "json:{\"driver\": \"raw\", \"offset\": 512, \"file\": "
        "{\"driver\": \"file\", \"filename\": \"%s\", \"locking\": "
        "\"off\"}}", raw_path);
    BlockDriverState *bs;

    bs = bdrv_open(json, NULL, NULL, 0, &error_abort);
    /* an offset changes what the guest sees: only json: can say so */
    g_assert(g_str_has_prefix(bs->filename, "json:{"));
    g_assert_nonnull(strstr(bs->filename, "\"offset\": 512"));
    g_assert_nonnull(strstr(bs->filename, raw_path));
    /* locking changes how, not what: it is left out */
    g_assert_null(strstr(bs->filename, "locking"));
    g_assert_cmpstr(bs->exact_filename, ==, "");
    bdrv_unref(bs);
}

static void test_json_filename_broken(void)
{
    Error *err = NULL;

    /* one message each, in QEMU's words */
    g_assert_null(bdrv_open("json:{\"driver\": \"raw\",", NULL, NULL, 0,
                            &err));
    assert_error(&err, "Could not parse the JSON options: JSON parse error, "
                 "premature EOI");
    g_assert_null(bdrv_open("json:[1]", NULL, NULL, 0, &err));
    assert_error(&err, "Invalid JSON object given");
}

/* ---- names and errors ---- */

static void test_missing_file(void)
{
    g_autofree char *path = g_build_filename(test_dir, "nonexistent",
                                             NULL);
    g_autofree char *expected = g_strdup_printf(
        "Could not open '%s': No such file or directory", path);
    Error *err = NULL;

    g_assert_null(bdrv_open(path, NULL, NULL, 0, &err));
    assert_error(&err, expected);
    g_assert_null(bdrv_open(path, NULL, opts("driver=raw"), 0, &err));
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==, expected);
    error_free(err);
}

static void test_protocol_prefixes(void)
{
    g_autofree char *colon_path = g_build_filename(test_dir, "a:b", NULL);
    BlockDriverState *bs;
    Error *err = NULL;

    g_assert_null(bdrv_open("nope:/x", NULL, NULL, 0, &err));
    assert_error(&err, "Unknown protocol 'nope'");

    /* "dir/a:b": the colon comes after a slash, so this is a path */
    g_assert_true(g_file_set_contents(colon_path, "", 0, NULL));
    bs = bdrv_open(colon_path, NULL, opts("driver=raw"), 0, &error_abort);
    g_assert_cmpstr(bs->file->bs->filename, ==, colon_path);
    bdrv_unref(bs);
}

static void test_unknown_options(void)
{
    Error *err = NULL;

    g_assert_null(bdrv_open(raw_path, NULL, opts("driver=raw,foo=1"), 0,
                            &err));
    assert_error(&err, "Block format 'raw' does not support the option "
                 "'foo'");
    g_assert_null(bdrv_open(raw_path, NULL, opts("driver=raw,file.foo=1"), 0,
                            &err));
    assert_error(&err, "Block protocol 'file' doesn't support the option "
                 "'foo'");
    g_assert_null(bdrv_open(NULL, NULL, opts("driver=raw"), 0, &err));
    assert_error(&err, "A block device must be specified for \"file\"");
    g_assert_null(bdrv_open(NULL, NULL, opts("driver=raw,file.driver=file"),
                            0, &err));
    assert_error(&err, "The 'file' block driver requires a file name");
}

static void test_read_only_file_refuses_writer(void)
{
    g_autofree char *o = g_strdup_printf(
        "driver=raw,file.filename=%s,file.read-only=on", raw_path);
    Error *err = NULL;

    /* raw asks its file only for what its users ask: a writer. */
    g_assert_null(blk_new_open(NULL, NULL, opts(o), BDRV_O_RDWR, &err));
    assert_error(&err, "Block node is read-only");
}

/* ---- creation ---- */

static void test_create(void)
{
    g_autofree char *path = g_build_filename(test_dir, "new.img", NULL);
    g_autofree char *proto = g_strdup_printf("file:%s", path);
    const BlockDriver *raw = bdrv_find_format("raw");
    QemuOpts *o;
    BlockDriverState *bs;
    Error *err = NULL;

    o = qemu_opts_create(raw->create_opts);
    qemu_opt_set(o, "size", "64k", &error_abort);
    g_assert_cmpint(bdrv_create(raw, path, o, &error_abort), ==, 0);
    qemu_opts_del(o);
    bs = bdrv_open(path, NULL, opts("driver=raw"), 0, &error_abort);
    g_assert_cmpint(bdrv_getlength(bs), ==, 64 * KiB);
    bdrv_unref(bs);

    o = qemu_opts_create(bdrv_find_format("file")->create_opts);
    qemu_opt_set(o, "size", "1M", &error_abort);
    g_assert_cmpint(bdrv_create_file(proto, o, &error_abort), ==, 0);
    qemu_opts_del(o);
    bs = bdrv_open(path, NULL, opts("driver=raw"), 0, &error_abort);
    g_assert_cmpint(bdrv_getlength(bs), ==, MiB);
    bdrv_unref(bs);
    unlink(path);

    g_assert_cmpint(bdrv_create_file("nope:x", NULL, &err), <, 0);
    assert_error(&err, "Unknown protocol 'nope'");
}

int main(int argc, char **argv)
{
    g_autofree char *data = g_malloc(MiB);
    g_autofree char *colon_path = NULL;
    int ret;

    g_test_init(&argc, &argv, NULL);
    bdrv_init();

    test_dir = g_dir_make_tmp("test-probe-XXXXXX", NULL);
    g_assert_nonnull(test_dir);
    raw_path = g_build_filename(test_dir, "raw.img", NULL);
    empty_path = g_build_filename(test_dir, "empty.img", NULL);
    memset(data, 0x5a, MiB);
    g_assert_true(g_file_set_contents(raw_path, data, MiB, NULL));
    g_assert_true(g_file_set_contents(empty_path, "", 0, NULL));

    g_test_add_func("/probe/raw-warns", test_probe_raw_warns);
    g_test_add_func("/probe/qcow-v1", test_probe_qcow_v1);
    g_test_add_func("/probe/raw-read-only-silent",
                    test_probe_raw_read_only_silent);
    g_test_add_func("/probe/explicit-format-silent",
                    test_explicit_format_silent);
    g_test_add_func("/probe/reads-through-protocol",
                    test_probe_reads_through_protocol);
    g_test_add_func("/probe/json-filename", test_json_filename);
    g_test_add_func("/probe/json-filename-strong-option",
                    test_json_filename_with_strong_option);
    g_test_add_func("/probe/json-filename-broken", test_json_filename_broken);
    g_test_add_func("/probe/missing-file", test_missing_file);
    g_test_add_func("/probe/protocol-prefixes", test_protocol_prefixes);
    g_test_add_func("/probe/unknown-options", test_unknown_options);
    g_test_add_func("/probe/read-only-file-refuses-writer",
                    test_read_only_file_refuses_writer);
    g_test_add_func("/probe/create", test_create);
    ret = g_test_run();

    /* every process, subprocesses included, made and removes its own */
    colon_path = g_build_filename(test_dir, "a:b", NULL);
    unlink(colon_path);
    unlink(raw_path);
    unlink(empty_path);
    rmdir(test_dir);
    return ret;
}
