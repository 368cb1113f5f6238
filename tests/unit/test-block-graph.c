/*
 * The node graph of block/block.c with two in-memory test drivers: a
 * format ("test-fmt", with a file child and an optional backing file named
 * in its "header") over a protocol ("test-proto").  Covers the driver
 * registry, options and node names, refcounting, permissions and reopen.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"
#include "util/cutils.h"

/* ---- test-proto: a node of fixed size that reads as zeroes ---- */

typedef struct TestProtoState {
    uint64_t size;
} TestProtoState;

static int proto_closes;
static int proto_check_perm_calls;
static int proto_abort_calls;
/* when set, the node of that file name refuses every permission update */
static const char *proto_fail_name;

static const QemuOptDesc test_proto_desc[] = {
    { "filename", QEMU_OPT_STRING, "name", NULL, NULL },
    { "size", QEMU_OPT_SIZE, "size", "1M", NULL },
    { NULL, 0, NULL, NULL, NULL },
};
static const QemuOptsList test_proto_opts = { "test-proto", test_proto_desc };

static int test_proto_open(BlockDriverState *bs, QDict *options, int flags,
                           Error **errp)
{
    TestProtoState *s = bs->opaque;
    QemuOpts *opts = qemu_opts_absorb_qdict(&test_proto_opts, options, errp);

    if (!opts) {
        return -EINVAL;
    }
    s->size = qemu_opt_get_size(opts, "size", MiB);
    qemu_opts_del(opts);
    return 0;
}

static void test_proto_close(BlockDriverState *bs)
{
    proto_closes++;
}

static int64_t test_proto_getlength(BlockDriverState *bs)
{
    TestProtoState *s = bs->opaque;

    return s->size;
}

static int coroutine_fn test_proto_preadv(BlockDriverState *bs,
                                          int64_t offset, int64_t bytes,
                                          QEMUIOVector *qiov,
                                          BdrvRequestFlags flags)
{
    qemu_iovec_memset(qiov, 0, 0, bytes);
    return 0;
}

static int test_proto_check_perm(BlockDriverState *bs, uint64_t perm,
                                 uint64_t shared, Error **errp)
{
    proto_check_perm_calls++;
    if (proto_fail_name && !strcmp(bs->filename, proto_fail_name)) {
        error_setg(errp, "test-proto refuses the permission");
        return -EPERM;
    }
    return 0;
}

static void test_proto_abort_perm_update(BlockDriverState *bs)
{
    proto_abort_calls++;
}

static int test_proto_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    return 0;
}

static BlockDriver bdrv_test_proto = {
    .format_name            = "test-proto",
    .protocol_name          = "test-proto",
    .instance_size          = sizeof(TestProtoState),
    .bdrv_needs_filename    = true,
    .runtime_opts           = &test_proto_opts,
    .bdrv_open              = test_proto_open,
    .bdrv_close             = test_proto_close,
    .bdrv_getlength         = test_proto_getlength,
    .bdrv_co_preadv         = test_proto_preadv,
    .bdrv_check_perm        = test_proto_check_perm,
    .bdrv_abort_perm_update = test_proto_abort_perm_update,
    .bdrv_reopen_prepare    = test_proto_reopen_prepare,
};

/* ---- test-filter: "test-filter:IMAGE", a filter over a test-proto ---- */

static void test_filter_parse_filename(const char *filename, QDict *options,
                                       Error **errp)
{
    strstart(filename, "test-filter:", &filename);
    qdict_put_str(options, "image.driver", "test-proto");
    qdict_put_str(options, "image.filename", filename);
}

static int test_filter_open(BlockDriverState *bs, QDict *options, int flags,
                            Error **errp)
{
    return bdrv_open_child(NULL, options, "image", bs, 0, errp)
           ? 0 : -EINVAL;
}

static int64_t test_filter_getlength(BlockDriverState *bs)
{
    return bdrv_getlength(bs->file->bs);
}

/* Its own syntax names the image only: anything more needs json:. */
static void test_filter_refresh_filename(BlockDriverState *bs)
{
    BlockDriverState *image = bs->file->bs;

    if (qdict_size(bs->options) == 1 && image->exact_filename[0]) {
        g_autofree char *name = g_strconcat("test-filter:",
                                            image->exact_filename, NULL);

        pstrcpy(bs->exact_filename, sizeof(bs->exact_filename), name);
    }
}

static BlockDriver bdrv_test_filter = {
    .format_name            = "test-filter",
    .protocol_name          = "test-filter",
    .is_filter              = true,
    .bdrv_parse_filename    = test_filter_parse_filename,
    .bdrv_open              = test_filter_open,
    .bdrv_getlength         = test_filter_getlength,
    .bdrv_refresh_filename  = test_filter_refresh_filename,
};

/* ---- test-fmt: a format with a "mode" option it can change on reopen ---- */

typedef struct TestFmtState {
    char *mode;
    char *staged_mode;
} TestFmtState;

static int fmt_commits;
static int fmt_aborts;

static const QemuOptDesc test_fmt_desc[] = {
    { "mode", QEMU_OPT_STRING, "a setting reopen may change", NULL, NULL },
    { "header-backing", QEMU_OPT_STRING,
      "the backing file the image header names", NULL, NULL },
    { NULL, 0, NULL, NULL, NULL },
};
static const QemuOptsList test_fmt_opts = { "test-fmt", test_fmt_desc };
static const char *const test_fmt_strong_opts[] = { NULL };

static int test_fmt_open(BlockDriverState *bs, QDict *options, int flags,
                         Error **errp)
{
    TestFmtState *s = bs->opaque;
    QemuOpts *opts = qemu_opts_absorb_qdict(&test_fmt_opts, options, errp);
    const char *backing;

    if (!opts) {
        return -EINVAL;
    }
    s->mode = g_strdup(qemu_opt_get(opts, "mode"));
    backing = qemu_opt_get(opts, "header-backing");
    if (backing) {
        pstrcpy(bs->backing_file, sizeof(bs->backing_file), backing);
        pstrcpy(bs->backing_format, sizeof(bs->backing_format), "test-fmt");
    }
    qemu_opts_del(opts);

    if (!bdrv_open_child(NULL, options, "file", bs, 0, errp)) {
        g_free(s->mode);
        return -EINVAL;
    }
    return 0;
}

static void test_fmt_close(BlockDriverState *bs)
{
    TestFmtState *s = bs->opaque;

    g_free(s->mode);
}

static int64_t test_fmt_getlength(BlockDriverState *bs)
{
    return bdrv_getlength(bs->file->bs);
}

static int test_fmt_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    TestFmtState *s = state->bs->opaque;
    QemuOpts *opts = qemu_opts_absorb_qdict(&test_fmt_opts, state->options,
                                            errp);

    if (!opts) {
        return -EINVAL;
    }
    s->staged_mode = g_strdup(qemu_opt_get(opts, "mode"));
    qemu_opts_del(opts);
    return 0;
}

static void test_fmt_reopen_commit(BDRVReopenState *state)
{
    TestFmtState *s = state->bs->opaque;

    fmt_commits++;
    g_free(s->mode);
    s->mode = s->staged_mode;
    s->staged_mode = NULL;
}

static void test_fmt_reopen_abort(BDRVReopenState *state)
{
    TestFmtState *s = state->bs->opaque;

    fmt_aborts++;
    g_clear_pointer(&s->staged_mode, g_free);
}

static BlockDriver bdrv_test_fmt = {
    .format_name            = "test-fmt",
    .instance_size          = sizeof(TestFmtState),
    .is_format              = true,
    .supports_backing       = true,
    .runtime_opts           = &test_fmt_opts,
    .strong_runtime_opts    = test_fmt_strong_opts,
    .bdrv_open              = test_fmt_open,
    .bdrv_close             = test_fmt_close,
    .bdrv_getlength         = test_fmt_getlength,
    .bdrv_reopen_prepare    = test_fmt_reopen_prepare,
    .bdrv_reopen_commit     = test_fmt_reopen_commit,
    .bdrv_reopen_abort      = test_fmt_reopen_abort,
};

/* ---- helpers ---- */

static BlockBackend *attach_blk(BlockDriverState *bs, uint64_t perm,
                                uint64_t shared, Error **errp);

static BlockDriverState *open_fmt(const char *name, const char *extra,
                                  int flags, Error **errp)
{
    g_autofree char *opts = g_strdup_printf(
        "driver=test-fmt,file.driver=test-proto,file.filename=%s%s%s",
        name, extra ? "," : "", extra ? extra : "");

    return bdrv_open(NULL, NULL, keyval_parse(opts, NULL, &error_abort),
                     flags, errp);
}

/* Checks the message and clears the error for the next call. */
static void assert_error(Error **errp, const char *expected)
{
    g_assert_nonnull(*errp);
    g_assert_cmpstr(error_get_pretty(*errp), ==, expected);
    error_free(*errp);
    *errp = NULL;
}

static int64_t node_count(void)
{
    int64_t n = 0;

    for (BlockDriverState *bs = bdrv_next_node(NULL); bs;
         bs = bdrv_next_node(bs)) {
        n++;
    }
    return n;
}

/* ---- registry ---- */

static void collect_name(void *opaque, const char *name)
{
    g_ptr_array_add(opaque, g_strdup(name));
}

static void test_registry(void)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    Error *err = NULL;

    g_assert(bdrv_find_format("test-fmt") == &bdrv_test_fmt);
    g_assert_null(bdrv_find_format("no-such-format"));
    g_assert(bdrv_find_protocol("test-proto:x", true, &error_abort) ==
             &bdrv_test_proto);
    /* a colon after a slash is part of a path, not a protocol */
    g_assert(bdrv_find_protocol("/tmp/a:b", true, &error_abort) ==
             bdrv_find_format("file"));
    g_assert(bdrv_find_protocol("test-proto:x", false, &error_abort) ==
             bdrv_find_format("file"));
    g_assert_null(bdrv_find_protocol("nope:x", true, &err));
    assert_error(&err, "Unknown protocol 'nope'");

    bdrv_iterate_format(collect_name, names);
    g_assert_cmpuint(names->len, >=, 2);
    for (guint i = 1; i < names->len; i++) {
        g_assert_cmpint(strcmp(names->pdata[i - 1], names->pdata[i]), <, 0);
    }
}

/* ---- options and node names ---- */

static void test_node_names(void)
{
    int64_t before = node_count();
    BlockDriverState *bs, *other;
    Error *err = NULL;

    bs = open_fmt("a", "node-name=top,file.node-name=proto", 0,
                  &error_abort);
    g_assert_cmpstr(bdrv_get_node_name(bs), ==, "top");
    g_assert(bdrv_find_node("top") == bs);
    g_assert(bdrv_find_node("proto") == bs->file->bs);
    g_assert_cmpint(node_count(), ==, before + 2);

    g_assert_null(open_fmt("b", "node-name=top", 0, &err));
    assert_error(&err, "Duplicate nodes with node-name='top'");
    g_assert_null(open_fmt("b", "node-name=1top", 0, &err));
    assert_error(&err, "Invalid node-name: '1top'");
    g_assert_cmpint(node_count(), ==, before + 2);

    /* unnamed nodes get a generated name no user could choose */
    other = open_fmt("c", NULL, 0, &error_abort);
    g_assert(g_str_has_prefix(bdrv_get_node_name(other), "#block"));
    g_assert(g_str_has_prefix(bdrv_get_node_name(other->file->bs),
                              "#block"));
    g_assert_cmpstr(bdrv_get_node_name(other), !=,
                    bdrv_get_node_name(other->file->bs));

    bdrv_unref(other);
    bdrv_unref(bs);
    g_assert_null(bdrv_find_node("top"));
    g_assert_cmpint(node_count(), ==, before);
}

static void test_unknown_options(void)
{
    Error *err = NULL;

    g_assert_null(open_fmt("a", "foo=1", 0, &err));
    assert_error(&err, "Block format 'test-fmt' does not support the option "
                 "'foo'");
    g_assert_null(open_fmt("a", "file.bar=1", 0, &err));
    assert_error(&err, "Block protocol 'test-proto' doesn't support the "
                 "option 'bar'");
    g_assert_null(bdrv_open(NULL, NULL,
                            keyval_parse("driver=nope", NULL, &error_abort),
                            0, &err));
    assert_error(&err, "Unknown driver 'nope'");
    g_assert_null(bdrv_open(NULL, NULL,
                            keyval_parse("driver=test-fmt", NULL,
                                         &error_abort), 0, &err));
    assert_error(&err, "A block device must be specified for \"file\"");
    g_assert_null(bdrv_open(NULL, NULL,
                            keyval_parse("driver=test-proto", NULL,
                                         &error_abort), 0, &err));
    assert_error(&err, "The 'test-proto' block driver requires a file name");
    g_assert_null(open_fmt("a", "discard=sometimes", 0, &err));
    g_assert_nonnull(err);
    error_free(err);
    err = NULL;
    g_assert_null(open_fmt("a", "force-share=on", BDRV_O_RDWR, &err));
    assert_error(&err, "force-share=on can only be used with read-only "
                 "images");
}

static void test_common_options_to_flags(void)
{
    BlockDriverState *bs;

    bs = open_fmt("a", "cache.direct=on,cache.no-flush=on,read-only=on",
                  BDRV_O_RDWR, &error_abort);
    g_assert(bs->open_flags & BDRV_O_NOCACHE);
    g_assert(bs->open_flags & BDRV_O_NO_FLUSH);
    g_assert_false(bs->open_flags & BDRV_O_RDWR);
    g_assert_true(bdrv_is_read_only(bs));
    /* the file child inherits the cache mode and writability */
    g_assert(bs->file->bs->open_flags & BDRV_O_NOCACHE);
    g_assert_true(bdrv_is_read_only(bs->file->bs));
    g_assert(bs->file->bs->open_flags & BDRV_O_PROTOCOL);
    /* the node keeps its own options only */
    g_assert_cmpstr(qdict_get_try_str(bs->options, "driver"), ==,
                    "test-fmt");
    g_assert_false(qdict_haskey(bs->options, "file.filename"));
    g_assert_false(qdict_haskey(bs->options, "cache.direct"));
    bdrv_unref(bs);
}

/* ---- json: filenames ---- */

static void test_json_filename(void)
{
    BlockDriverState *bs;
    Error *err = NULL;

    bs = bdrv_open("json:{\"driver\": \"test-fmt\", \"file\": "
                   "{\"driver\": \"test-proto\", \"filename\": \"img\"}}",
                   NULL, NULL, 0, &error_abort);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "test-fmt");
    g_assert_cmpstr(bdrv_get_format_name(bs->file->bs), ==, "test-proto");
    /* the format over a plain protocol is named by the protocol's name */
    g_assert_cmpstr(bs->filename, ==, "img");
    g_assert_cmpstr(bs->exact_filename, ==, "img");
    bdrv_unref(bs);

    /* explicit options win over the json: ones */
    bs = bdrv_open("json:{\"driver\": \"test-fmt\", \"file\": "
                   "{\"driver\": \"test-proto\", \"filename\": \"img\"}}",
                   NULL, keyval_parse("file.size=4k", NULL, &error_abort),
                   0, &error_abort);
    g_assert_cmpint(bdrv_getlength(bs), ==, 4096);
    bdrv_unref(bs);

    g_assert_null(bdrv_open("json:{\"driver\": \"test-fmt\",", NULL, NULL,
                            0, &err));
    assert_error(&err, "Could not parse the JSON options: JSON parse error, "
                 "premature EOI");
    g_assert_null(bdrv_open("json:{\"driver\": \"test-fmt\", \"file\": "
                            "{\"driver\": \"test-proto\", \"filename\": "
                            "\"img\"}, \"foo\": 1}", NULL, NULL, 0, &err));
    assert_error(&err, "Block format 'test-fmt' does not support the option "
                 "'foo'");
}

static void test_json_filename_strong_options(void)
{
    BlockDriverState *bs;

    /* a protocol opened from a file name is named by it, whatever else */
    bs = open_fmt("img", "file.size=4k", 0, &error_abort);
    g_assert_cmpstr(bs->file->bs->exact_filename, ==, "img");
    g_assert_cmpstr(bs->filename, ==, "img");
    bdrv_unref(bs);

    /* test-fmt declares no strong option: "mode" keeps the plain name */
    bs = open_fmt("img", "mode=fast", 0, &error_abort);
    g_assert_cmpstr(bs->filename, ==, "img");
    bdrv_unref(bs);
}

static void test_filename_through_filter(void)
{
    BlockDriverState *bs;
    BlockBackend *blk;

    bs = bdrv_open("test-filter:img", NULL,
                   keyval_parse("driver=test-fmt", NULL, &error_abort),
                   BDRV_O_RDWR, &error_abort);
    g_assert_cmpstr(bdrv_get_format_name(bs->file->bs), ==, "test-filter");
    g_assert_cmpstr(bs->file->bs->filename, ==, "test-filter:img");
    g_assert_cmpstr(bs->filename, ==, "test-filter:img");

    /* the filter passes its parents' permissions on unchanged */
    blk = attach_blk(bs, BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE,
                     BLK_PERM_CONSISTENT_READ, &error_abort);
    g_assert_cmpuint(bs->file->bs->file->perm, ==, bs->file->perm);
    g_assert_cmpuint(bs->file->bs->file->shared_perm, ==,
                     BLK_PERM_CONSISTENT_READ);
    blk_unref(blk);
    bdrv_unref(bs);
}

/* ---- references ---- */

static void test_refcount(void)
{
    BlockDriverState *bs, *file;
    int closes = proto_closes;

    bs = open_fmt("a", NULL, 0, &error_abort);
    file = bs->file->bs;
    g_assert_cmpint(bs->refcnt, ==, 1);
    g_assert_cmpint(file->refcnt, ==, 1);
    g_assert(g_list_find(file->parents, bs->file));

    bdrv_ref(bs);
    bdrv_unref(bs);
    g_assert_cmpint(proto_closes, ==, closes);

    /* a second user of the file node keeps it alive after its parent */
    bdrv_ref(file);
    bdrv_unref(bs);
    g_assert_cmpint(proto_closes, ==, closes);
    g_assert_null(file->parents);
    bdrv_unref(file);
    g_assert_cmpint(proto_closes, ==, closes + 1);
}

static void test_open_by_reference(void)
{
    BlockDriverState *proto, *bs;
    Error *err = NULL;

    proto = bdrv_open("test-proto:img", NULL,
                      keyval_parse("node-name=shared", NULL, &error_abort),
                      BDRV_O_PROTOCOL, &error_abort);
    g_assert_cmpstr(bdrv_get_format_name(proto), ==, "test-proto");
    g_assert_cmpstr(proto->filename, ==, "img");

    bs = bdrv_open(NULL, NULL,
                   keyval_parse("driver=test-fmt,file=shared", NULL,
                                &error_abort), 0, &error_abort);
    g_assert(bs->file->bs == proto);
    g_assert_cmpint(proto->refcnt, ==, 2);

    g_assert_null(bdrv_open(NULL, NULL,
                            keyval_parse("driver=test-fmt,file=nowhere",
                                         NULL, &error_abort), 0, &err));
    assert_error(&err, "Cannot find device='nowhere' nor "
                 "node-name='nowhere'");

    bdrv_unref(bs);
    g_assert_cmpint(proto->refcnt, ==, 1);
    bdrv_unref(proto);
}

/* ---- backing files ---- */

static void test_backing_file(void)
{
    BlockDriverState *bs;
    Error *err = NULL;
    char *full;

    /* the header names "base" next to the image in dir/ */
    bs = open_fmt("dir/top", "header-backing=base,"
                  "backing.file.driver=test-proto", 0, &error_abort);
    g_assert_nonnull(bs->backing);
    g_assert_cmpstr(bs->auto_backing_file, ==, "dir/base");
    g_assert_cmpstr(bs->backing->bs->file->bs->filename, ==, "dir/base");
    g_assert_true(bdrv_is_read_only(bs->backing->bs));
    g_assert(bdrv_backing_chain_next(bs) == bs->backing->bs);
    g_assert(bdrv_filter_or_cow_bs(bs) == bs->backing->bs);
    bdrv_unref(bs);

    bs = open_fmt("dir/top", "header-backing=base", BDRV_O_NO_BACKING,
                  &error_abort);
    g_assert_null(bs->backing);
    bdrv_unref(bs);

    /* an image whose header names itself */
    g_assert_null(open_fmt("dir/top", "header-backing=top,"
                           "backing.file.driver=test-proto", 0, &err));
    assert_error(&err, "Could not open backing file: Backing file 'dir/top' "
                 "creates an infinite loop");

    full = bdrv_get_full_backing_filename_from_filename("/a/b/img", "base",
                                                        &error_abort);
    g_assert_cmpstr(full, ==, "/a/b/base");
    g_free(full);
    full = bdrv_get_full_backing_filename_from_filename("/a/b/img", "/c/base",
                                                        &error_abort);
    g_assert_cmpstr(full, ==, "/c/base");
    g_free(full);
    g_assert_null(bdrv_get_full_backing_filename_from_filename(
                      "json:{}", "base", &err));
    assert_error(&err, "Cannot use relative backing file names for "
                 "'json:{}'");
}

/* ---- permissions ---- */

static BlockBackend *attach_blk(BlockDriverState *bs, uint64_t perm,
                                uint64_t shared, Error **errp)
{
    BlockBackend *blk = blk_new(qemu_get_aio_context(), perm, shared);

    if (blk_insert_bs(blk, bs, errp) < 0) {
        blk_unref(blk);
        return NULL;
    }
    return blk;
}

static void test_perm_two_writers(void)
{
    const uint64_t rw = BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE;
    const uint64_t share_ro = BLK_PERM_CONSISTENT_READ |
                              BLK_PERM_WRITE_UNCHANGED;
    BlockDriverState *bs;
    BlockBackend *a, *b;
    Error *err = NULL;
    uint64_t perm, shared;

    bs = open_fmt("a", "node-name=img", BDRV_O_RDWR, &error_abort);
    a = attach_blk(bs, rw, share_ro, &error_abort);
    g_assert_cmpuint(bs->perm, ==, rw);
    g_assert_cmpuint(bs->shared_perm, ==, share_ro);
    /* a writable format needs write and resize on its file */
    g_assert_cmpuint(bs->file->perm, ==, rw | BLK_PERM_RESIZE);
    g_assert_cmpuint(bs->file->shared_perm, ==, share_ro);

    g_assert_null(attach_blk(bs, rw, share_ro, &err));
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "Permission conflict on node 'img': "
                            "permissions 'write' are both required by"));
    error_free(err);
    err = NULL;
    g_assert_cmpuint(bs->perm, ==, rw);
    g_assert_cmpuint(g_list_length(bs->parents), ==, 1);

    /* a reader that lets others write may join, another writer may not */
    b = attach_blk(bs, BLK_PERM_CONSISTENT_READ, BLK_PERM_ALL,
                   &error_abort);
    g_assert_cmpint(blk_set_perm(b, rw, BLK_PERM_ALL, &err), <, 0);
    g_assert_nonnull(err);
    error_free(err);
    err = NULL;
    blk_get_perm(b, &perm, &shared);
    g_assert_cmpuint(perm, ==, BLK_PERM_CONSISTENT_READ);

    blk_unref(b);
    /* when the writer shares write, a second writer is fine */
    g_assert_cmpint(blk_set_perm(a, rw, BLK_PERM_ALL, &error_abort), ==, 0);
    b = attach_blk(bs, rw, BLK_PERM_ALL, &error_abort);
    blk_unref(b);
    blk_unref(a);
    g_assert_cmpuint(bs->perm, ==, 0);
    g_assert_cmpuint(bs->shared_perm, ==, BLK_PERM_ALL);
    bdrv_unref(bs);
}

static void test_perm_check_fails_whole_update(void)
{
    const uint64_t rw = BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE;
    BlockDriverState *bs, *base_file;
    BlockBackend *blk;
    Error *err = NULL;
    uint64_t perm, shared, file_perm, base_perm;
    int checks, aborts;

    /* top -> file "a", top -> backing -> file "base" */
    bs = open_fmt("a", "header-backing=base,backing.file.driver=test-proto",
                  BDRV_O_RDWR, &error_abort);
    base_file = bs->backing->bs->file->bs;
    blk = attach_blk(bs, BLK_PERM_CONSISTENT_READ, BLK_PERM_ALL,
                     &error_abort);
    file_perm = bs->file->bs->perm;
    base_perm = base_file->perm;

    /*
     * "a" (think: a lock someone else holds) refuses; "base" is checked
     * before it and must see its check taken back.
     */
    proto_fail_name = "a";
    checks = proto_check_perm_calls;
    aborts = proto_abort_calls;
    g_assert_cmpint(blk_set_perm(blk, rw, BLK_PERM_CONSISTENT_READ, &err),
                    <, 0);
    assert_error(&err, "test-proto refuses the permission");
    proto_fail_name = NULL;
    g_assert_cmpint(proto_check_perm_calls, ==, checks + 2);
    g_assert_cmpint(proto_abort_calls, ==, aborts + 1);

    g_assert_cmpuint(bs->perm, ==, BLK_PERM_CONSISTENT_READ);
    g_assert_cmpuint(bs->shared_perm, ==, BLK_PERM_ALL);
    g_assert_cmpuint(bs->file->bs->perm, ==, file_perm);
    g_assert_cmpuint(base_file->perm, ==, base_perm);
    /* a format never lets others write or resize the file under it */
    g_assert_cmpuint(bs->file->shared_perm, ==,
                     BLK_PERM_ALL & ~(BLK_PERM_WRITE | BLK_PERM_RESIZE));
    blk_get_perm(blk, &perm, &shared);
    g_assert_cmpuint(perm, ==, BLK_PERM_CONSISTENT_READ);
    g_assert_cmpuint(shared, ==, BLK_PERM_ALL);

    blk_unref(blk);
    bdrv_unref(bs);
}

static void test_perm_read_only(void)
{
    BlockDriverState *bs;
    BlockBackend *blk;
    Error *err = NULL;

    bs = open_fmt("a", NULL, 0, &error_abort);
    /* a read-only format asks no write of its file */
    g_assert_false(bs->file->perm & BLK_PERM_WRITE);
    g_assert_null(attach_blk(bs, BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE,
                             BLK_PERM_ALL, &err));
    assert_error(&err, "Block node is read-only");
    g_assert_null(bs->parents);
    bdrv_unref(bs);

    /* a writable format over a read-only file cannot be opened */
    g_assert_null(open_fmt("a", "file.read-only=on", BDRV_O_RDWR, &err));
    assert_error(&err, "Block node is read-only");

    /* force-share: a read-only node lets everyone do anything */
    bs = open_fmt("a", "force-share=on", 0, &error_abort);
    blk = attach_blk(bs, BLK_PERM_CONSISTENT_READ, 0, &error_abort);
    g_assert_cmpuint(bs->shared_perm, ==, BLK_PERM_ALL);
    blk_unref(blk);
    bdrv_unref(bs);
}

/* ---- reopen ---- */

static void test_reopen_read_only(void)
{
    const uint64_t rw = BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE;
    BlockDriverState *bs;
    BlockBackend *blk;
    Error *err = NULL;
    int commits = fmt_commits;

    bs = open_fmt("a", "node-name=img", BDRV_O_RDWR, &error_abort);
    blk = attach_blk(bs, rw, BLK_PERM_ALL, &error_abort);

    /* a writer is attached: nothing may change */
    g_assert_cmpint(bdrv_reopen_set_read_only(bs, true, &err), <, 0);
    assert_error(&err, "Read-only block node 'img' cannot support "
                 "read-write users");
    g_assert_false(bdrv_is_read_only(bs));
    g_assert_false(bdrv_is_read_only(bs->file->bs));
    g_assert(bs->file->perm & BLK_PERM_WRITE);
    g_assert_cmpint(fmt_commits, ==, commits);

    /* without the writer the node and its file go read-only */
    g_assert_cmpint(blk_set_perm(blk, BLK_PERM_CONSISTENT_READ, BLK_PERM_ALL,
                                 &error_abort), ==, 0);
    g_assert_cmpint(bdrv_reopen_set_read_only(bs, true, &error_abort), ==, 0);
    g_assert_true(bdrv_is_read_only(bs));
    g_assert_true(bdrv_is_read_only(bs->file->bs));
    g_assert_false(bs->file->perm & BLK_PERM_WRITE);
    g_assert_cmpint(fmt_commits, ==, commits + 1);

    g_assert_cmpint(blk_set_perm(blk, rw, BLK_PERM_ALL, &err), <, 0);
    assert_error(&err, "Block node is read-only");

    g_assert_cmpint(bdrv_reopen_set_read_only(bs, false, &error_abort), ==,
                    0);
    g_assert_false(bdrv_is_read_only(bs->file->bs));
    g_assert(bs->file->perm & BLK_PERM_WRITE);
    g_assert_cmpint(blk_set_perm(blk, rw, BLK_PERM_ALL, &error_abort), ==, 0);

    blk_unref(blk);
    bdrv_unref(bs);
}

static void test_reopen_options(void)
{
    BlockDriverState *bs;
    TestFmtState *s;
    Error *err = NULL;
    int aborts = fmt_aborts;

    bs = open_fmt("a", "mode=slow", BDRV_O_RDWR, &error_abort);
    s = bs->opaque;

    g_assert_cmpint(bdrv_reopen(bs, keyval_parse("mode=fast", NULL,
                                                 &error_abort),
                                bs->open_flags, &error_abort), ==, 0);
    g_assert_cmpstr(s->mode, ==, "fast");
    g_assert_cmpstr(qdict_get_try_str(bs->options, "mode"), ==, "fast");

    /* one bad change undoes the good one next to it */
    g_assert_cmpint(bdrv_reopen(bs, keyval_parse("mode=slow,foo=1", NULL,
                                                 &error_abort),
                                bs->open_flags, &err), <, 0);
    assert_error(&err, "Cannot change the option 'foo'");
    g_assert_cmpstr(s->mode, ==, "fast");
    g_assert_cmpint(fmt_aborts, ==, aborts + 1);

    g_assert_cmpint(bdrv_reopen(bs, keyval_parse("file.size=4k", NULL,
                                                 &error_abort),
                                bs->open_flags, &err), <, 0);
    assert_error(&err, "Cannot change the option 'size'");
    g_assert_cmpint(bdrv_reopen(bs, keyval_parse("driver=test-proto", NULL,
                                                 &error_abort),
                                bs->open_flags, &err), <, 0);
    assert_error(&err, "Cannot change the option 'driver'");

    /* cache options are flags of the node and its file */
    g_assert_cmpint(bdrv_reopen(bs, keyval_parse("cache.direct=on", NULL,
                                                 &error_abort),
                                bs->open_flags, &error_abort), ==, 0);
    g_assert(bs->open_flags & BDRV_O_NOCACHE);
    g_assert(bs->file->bs->open_flags & BDRV_O_NOCACHE);
    g_assert_cmpstr(s->mode, ==, "fast");
    bdrv_unref(bs);
}

/* blockdev-reopen's exact options, as the daemon passes them */
static int reopen_many(BlockDriverState *bs, const char *opts, Error **errp)
{
    QDict *options = keyval_parse(opts, NULL, &error_abort);

    return bdrv_reopen_many(&bs, &options, 1, errp);
}

/*
 * bdrv_reopen_many (block-reopen.c): "file" pointed at another node in
 * the transaction; a refused permission or a cycle moves nothing, the
 * node left behind goes when its last reference does.
 */
static void test_reopen_many_file(void)
{
    BlockDriverState *bs, *pb, *pc;
    Error *err = NULL;
    int closes;

    bs = open_fmt("a", "node-name=img", BDRV_O_RDWR, &error_abort);
    pb = bdrv_open(NULL, NULL, keyval_parse("driver=test-proto,filename=b,"
                                            "node-name=pb", NULL,
                                            &error_abort),
                   BDRV_O_RDWR, &error_abort);
    pc = bdrv_open(NULL, NULL, keyval_parse("driver=test-proto,filename=c,"
                                            "node-name=pc", NULL,
                                            &error_abort),
                   BDRV_O_RDWR, &error_abort);
    g_assert(bs->file->bs->inherits_from == bs);

    closes = proto_closes;
    g_assert_cmpint(reopen_many(bs, "driver=test-fmt,node-name=img,file=pb",
                                &error_abort), ==, 0);
    g_assert(bs->file->bs == pb);
    /* the file node it opened itself had no other reference */
    g_assert_cmpint(proto_closes, ==, closes + 1);
    g_assert_cmpint(bdrv_get_refcnt(pb), ==, 2);
    g_assert(pb->perm & BLK_PERM_WRITE);

    proto_fail_name = "c";
    g_assert_cmpint(reopen_many(bs, "driver=test-fmt,node-name=img,file=pc",
                                &err), <, 0);
    assert_error(&err, "test-proto refuses the permission");
    proto_fail_name = NULL;
    g_assert(bs->file->bs == pb);
    g_assert_cmpint(bdrv_get_refcnt(pc), ==, 1);
    g_assert_null(pc->parents);
    g_assert_cmpuint(pc->perm, ==, 0);

    g_assert_cmpint(reopen_many(bs, "driver=test-fmt,node-name=img,file=img",
                                &err), <, 0);
    assert_error(&err, "Making 'img' a file child of 'img' would create a "
                 "cycle");
    g_assert_cmpint(reopen_many(bs, "driver=test-fmt,node-name=img,"
                                "file=pb,read-only=on", &error_abort), ==, 0);
    g_assert_true(bdrv_is_read_only(bs));
    /* a node given by reference is not reopened with its parent */
    g_assert_false(bdrv_is_read_only(pb));
    g_assert_false(bs->file->perm & BLK_PERM_WRITE);

    bdrv_unref(bs);
    g_assert_cmpint(bdrv_get_refcnt(pb), ==, 1);
    bdrv_unref(pb);
    bdrv_unref(pc);
}

/* ---- queries ---- */

/*
 * bdrv_append (block-graph.c): a BlockBackend and a parent node of the
 * base move to the overlay, which keeps the base as its backing node; a
 * refused permission update changes nothing; bdrv_replace_node moves
 * them back.
 */
/*
 * The op blockers of a backing node (block-op-blockers.c): the backing
 * link forbids all but the jobs that read or write into a backing node;
 * a job forbids everything, and the newest job names itself.
 */
static void test_append_op_blockers(BlockDriverState *base)
{
    static const char stream[] = "in use by a stream";
    static const char mirror[] = "in use by a mirror";
    Error *err = NULL;

    g_assert_false(bdrv_op_is_blocked(base, BLOCK_OP_TYPE_STREAM,
                                      &error_abort));
    g_assert_false(bdrv_op_is_blocked(base, BLOCK_OP_TYPE_COMMIT_TARGET,
                                      &error_abort));
    g_assert_true(bdrv_op_is_blocked(base, BLOCK_OP_TYPE_RESIZE, &err));
    assert_error(&err, "Node 'base' is busy: node is used as backing hd "
                 "of 'top'");
    bdrv_op_block_all(base, stream);
    bdrv_op_block_all(base, mirror);
    g_assert_true(bdrv_op_is_blocked(base, BLOCK_OP_TYPE_STREAM, &err));
    assert_error(&err, "Node 'base' is busy: in use by a mirror");
    bdrv_op_unblock_all(base, mirror);
    g_assert_true(bdrv_op_is_blocked(base, BLOCK_OP_TYPE_RESIZE, &err));
    assert_error(&err, "Node 'base' is busy: in use by a stream");
    bdrv_op_unblock_all(base, stream);
    g_assert_true(bdrv_op_blockers_empty(base));
    g_assert_false(bdrv_op_is_blocked(base, BLOCK_OP_TYPE_BACKUP_SOURCE,
                                      &error_abort));
}

static void test_append(void)
{
    const uint64_t rw = BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE;
    BlockDriverState *base, *top;
    BlockBackend *blk;
    Error *err = NULL;

    base = open_fmt("base", "node-name=base", BDRV_O_RDWR, &error_abort);
    blk = attach_blk(base, rw, BLK_PERM_ALL, &error_abort);
    top = open_fmt("top", "node-name=top,header-backing=base",
                   BDRV_O_RDWR | BDRV_O_NO_BACKING, &error_abort);
    g_assert_cmpstr(top->auto_backing_file, ==, "base");

    /* a refusal below the overlay leaves the graph as it was */
    proto_fail_name = "top";
    g_assert_cmpint(bdrv_append(top, base, &err), <, 0);
    g_assert_nonnull(err);
    g_clear_pointer(&err, error_free);
    proto_fail_name = NULL;
    g_assert(blk_bs(blk) == base);
    g_assert_null(top->backing);
    g_assert_cmpuint(base->perm, ==, rw);
    g_assert_cmpint(bdrv_get_refcnt(base), ==, 2);

    g_assert_cmpint(bdrv_append(top, base, &error_abort), ==, 0);
    g_assert(blk_bs(blk) == top);
    g_assert(top->backing->bs == base);
    g_assert_cmpuint(g_list_length(base->parents), ==, 1);
    /* the user's writes go to the overlay; the base is only read */
    g_assert_cmpuint(top->perm, ==, rw);
    g_assert_cmpuint(base->perm, ==, BLK_PERM_CONSISTENT_READ);
    g_assert_cmpint(bdrv_get_refcnt(top), ==, 2);
    g_assert_cmpint(bdrv_get_refcnt(base), ==, 2);
    /* the header names the backing node it got: the name stays plain */
    bdrv_refresh_filename(top);
    g_assert_cmpstr(top->filename, ==, "top");
    g_assert_true(bdrv_backing_busy(base, &err));
    assert_error(&err, "Node 'base' is busy: node is used as backing hd "
                 "of 'top'");
    test_append_op_blockers(base);
    g_assert_false(bdrv_is_root_node(base));
    g_assert_true(bdrv_is_root_node(top));

    g_assert_cmpint(bdrv_replace_node(top, base, &error_abort), ==, 0);
    g_assert(blk_bs(blk) == base);
    g_assert_cmpuint(base->perm, ==, rw);
    g_assert_cmpint(bdrv_set_backing_hd(top, NULL, &error_abort), ==, 0);
    g_assert_null(top->backing);
    g_assert_cmpint(bdrv_get_refcnt(top), ==, 1);
    g_assert_cmpint(bdrv_get_refcnt(base), ==, 2);
    bdrv_unref(top);
    blk_unref(blk);
    bdrv_unref(base);
}

static void test_queries(void)
{
    BlockDriverState *bs;
    BlockDriverInfo bdi;
    BdrvCheckResult res;
    void *buf;

    bs = open_fmt("a", "file.size=1000", 0, &error_abort);
    /* lengths are reported in whole sectors */
    g_assert_cmpint(bdrv_getlength(bs), ==, 1024);
    g_assert_cmpint(bdrv_get_info(bs, &bdi), ==, -ENOTSUP);
    g_assert_cmpint(bdrv_check(bs, &res, 0), ==, -ENOTSUP);
    g_assert_cmpint(bdrv_get_allocated_file_size(bs), ==, -ENOTSUP);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "test-fmt");
    g_assert(bdrv_get_aio_context(bs) == qemu_get_aio_context());
    g_assert_cmpuint(bdrv_opt_mem_align(bs), >=, 512);
    buf = qemu_blockalign(bs, 4096);
    g_assert_cmpuint((uintptr_t)buf % bdrv_opt_mem_align(bs), ==, 0);
    qemu_vfree(buf);
    g_assert_cmpint(bdrv_debug_resume(bs, "tag"), ==, -ENOTSUP);
    g_assert_false(bdrv_debug_is_suspended(bs, "tag"));
    bdrv_unref(bs);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_register(&bdrv_test_proto);
    bdrv_register(&bdrv_test_fmt);
    bdrv_register(&bdrv_test_filter);
    bdrv_init();

    g_test_add_func("/block-graph/registry", test_registry);
    g_test_add_func("/block-graph/node-names", test_node_names);
    g_test_add_func("/block-graph/unknown-options", test_unknown_options);
    g_test_add_func("/block-graph/common-options",
                    test_common_options_to_flags);
    g_test_add_func("/block-graph/json-filename", test_json_filename);
    g_test_add_func("/block-graph/json-filename-strong-options",
                    test_json_filename_strong_options);
    g_test_add_func("/block-graph/filename-through-filter",
                    test_filename_through_filter);
    g_test_add_func("/block-graph/refcount", test_refcount);
    g_test_add_func("/block-graph/reference", test_open_by_reference);
    g_test_add_func("/block-graph/backing", test_backing_file);
    g_test_add_func("/block-graph/perm/two-writers", test_perm_two_writers);
    g_test_add_func("/block-graph/perm/check-fails",
                    test_perm_check_fails_whole_update);
    g_test_add_func("/block-graph/perm/read-only", test_perm_read_only);
    g_test_add_func("/block-graph/reopen/read-only", test_reopen_read_only);
    g_test_add_func("/block-graph/reopen/options", test_reopen_options);
    g_test_add_func("/block-graph/reopen/many-file", test_reopen_many_file);
    g_test_add_func("/block-graph/queries", test_queries);
    g_test_add_func("/block-graph/append", test_append);
    return g_test_run();
}
