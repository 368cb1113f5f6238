/*
 * qcow2 against a model: random requests go to a qcow2 image through the
 * whole block layer (BlockBackend, io.c, the qcow2 driver, the file
 * protocol) and to a plain byte array at the same time; every byte of the
 * image is compared with the array and the image is checked (no
 * corruption, no leak) after each round.
 *
 * Requests are data writes at any offset and length, zero writes with and
 * without unmap, discards, compressed cluster writes and reads; between
 * rounds the disk may shrink and grow back.  Several
 * of them run at once (one coroutine each): their byte ranges never
 * overlap, so the model's result does not depend on the order in which
 * they complete, but they often share clusters, which is where the
 * driver's serialisation of allocations and copy-on-write is needed.
 *
 * Every cluster size from 512 B to 2 MiB is run, with refcount widths from
 * 1 to 64 bits, compat 0.10 and 1.1, with and without a (shorter) backing
 * file, with small or sliced L2 caches that force evictions, and with
 * external data files (raw or not).
 *
 * The seed is fixed so that a failure can be replayed; it is printed, and
 * QCOW2_RANDOM_SEED=<n> runs another one (QCOW2_RANDOM_ROUNDS=<n> more
 * rounds per configuration, QCOW2_RANDOM_PARANOID=1 compares the whole
 * image after every batch of requests, to find the one that went wrong).
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"
#include "util/coroutine.h"
#include "util/qdict.h"
#include "util/qemu-option.h"

#define DEFAULT_SEED   20240601u
#define DEFAULT_ROUNDS 3
#define BATCHES_PER_ROUND 10
#define MAX_IN_FLIGHT  8

typedef struct TestConfig {
    int cluster_bits;
    int refcount_bits;
    bool v2;                    /* compat=0.10 */
    bool backing;
    bool lazy_refcounts;
    /* external data file: 0 none, 1 data_file, 2 data_file_raw */
    int data_file;
    /* runtime options: NULL for the default */
    const char *l2_cache_entry_size;
    const char *l2_cache_size;
} TestConfig;

typedef enum OpType {
    OP_WRITE,
    OP_ZERO,
    OP_ZERO_UNMAP,
    OP_DISCARD,
    OP_COMPRESSED,
    OP_READ,
    OP__MAX,
} OpType;

static const char *const op_names[OP__MAX] = {
    [OP_WRITE] = "write", [OP_ZERO] = "write -z",
    [OP_ZERO_UNMAP] = "write -z -u", [OP_DISCARD] = "discard",
    [OP_COMPRESSED] = "write -c", [OP_READ] = "read",
};

typedef struct TestState {
    const TestConfig *cfg;
    GRand *rand;
    char *dir;
    char *path;
    char *backing_path;
    char *data_path;
    BlockBackend *blk;
    int64_t cluster_size;
    int64_t size;
    int64_t backing_size;
    uint8_t *model;             /* what the image must read as */
    uint8_t *backing;           /* the backing file's contents */
    GString *log;               /* the requests of the current round */
} TestState;

typedef struct TestOp {
    TestState *t;
    OpType type;
    int64_t offset;
    int64_t bytes;
    uint8_t *buf;
    int ret;
    bool done;
} TestOp;

static char *test_dir;
static guint32 base_seed = DEFAULT_SEED;
static int rounds = DEFAULT_ROUNDS;
/* QCOW2_RANDOM_PARANOID=1: compare the whole image after every batch */
static bool paranoid;

/* ---------------------------------------------------------------------- */
/* The model */

/* What a range reads as where this image has nothing: the backing file
 * (which is shorter than the image), else zeroes. */
static void model_fill_unallocated(TestState *t, int64_t offset,
                                   int64_t bytes)
{
    int64_t from_backing = 0;

    if (t->cfg->backing && offset < t->backing_size) {
        from_backing = MIN(bytes, t->backing_size - offset);
        memcpy(t->model + offset, t->backing + offset, from_backing);
    }
    memset(t->model + offset + from_backing, 0, bytes - from_backing);
}

/*
 * A discard frees whole clusters only (the image's last cluster counts as
 * whole when the request reaches the end); they read as zeroes.  v2
 * images have no zero flag: there a discard does nothing if a backing
 * file would show through.
 */
static void model_discard(TestState *t, int64_t offset, int64_t bytes)
{
    int64_t cs = t->cluster_size;
    int64_t start = ROUND_UP(offset, cs);
    int64_t end = offset + bytes == t->size ? t->size
                                            : QEMU_ALIGN_DOWN(offset + bytes,
                                                              cs);

    if (end <= start || (t->cfg->v2 && t->cfg->backing)) {
        return;
    }
    memset(t->model + start, 0, end - start);
}

static void model_apply(TestOp *op)
{
    TestState *t = op->t;

    switch (op->type) {
    case OP_WRITE:
    case OP_COMPRESSED:
        memcpy(t->model + op->offset, op->buf, op->bytes);
        break;
    case OP_ZERO:
    case OP_ZERO_UNMAP:
        memset(t->model + op->offset, 0, op->bytes);
        break;
    case OP_DISCARD:
        model_discard(t, op->offset, op->bytes);
        break;
    case OP_READ:
    case OP__MAX:
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* Images */

static int create_image(const char *path, const char *options, Error **errp)
{
    const BlockDriver *drv = bdrv_find_format("qcow2");
    const BlockDriver *proto = bdrv_find_protocol(path, true, errp);
    QemuOptsList *list;
    QemuOpts *opts;
    int ret = -EINVAL;

    g_assert_nonnull(drv);
    g_assert_nonnull(proto);
    list = qemu_opts_append(NULL, drv->create_opts);
    list = qemu_opts_append(list, proto->create_opts);
    opts = qemu_opts_parse(list, options, errp);
    if (opts) {
        ret = bdrv_create(drv, path, opts, errp);
        qemu_opts_del(opts);
    }
    qemu_opts_free(list);
    return ret;
}

static BlockBackend *open_image(TestState *t, int flags)
{
    QDict *opts = qdict_new();
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "qcow2");
    if (t->cfg->l2_cache_entry_size) {
        qdict_put_str(opts, "l2-cache-entry-size",
                      t->cfg->l2_cache_entry_size);
    }
    if (t->cfg->l2_cache_size) {
        qdict_put_str(opts, "l2-cache-size", t->cfg->l2_cache_size);
    }
    blk = blk_new_open(t->path, NULL, opts, flags, &error_abort);
    g_assert_nonnull(blk);
    return blk;
}

/* Random bytes that compress well or not at all, chosen per request. */
static void fill_random(GRand *rand, uint8_t *buf, int64_t bytes)
{
    if (g_rand_boolean(rand)) {
        uint8_t pattern = g_rand_int(rand);

        for (int64_t i = 0; i < bytes; i++) {
            buf[i] = (i & 0x3ff) < 0x200 ? pattern : (uint8_t)(i >> 10);
        }
    } else {
        for (int64_t i = 0; i < bytes; i += 4) {
            guint32 r = g_rand_int(rand);

            memcpy(buf + i, &r, MIN(4, bytes - i));
        }
    }
}

/*
 * The backing file: a qcow2 image with 64 KiB clusters (whatever the
 * overlay uses), three quarters of the overlay's size, partly written.
 */
static void create_backing(TestState *t)
{
    g_autofree char *options = NULL;
    QDict *opts = qdict_new();
    BlockBackend *blk;
    int64_t extent = MAX(t->backing_size / 8, 512);

    options = g_strdup_printf("size=%" PRId64, t->backing_size);
    g_assert_cmpint(create_image(t->backing_path, options, &error_abort),
                    ==, 0);
    qdict_put_str(opts, "driver", "qcow2");
    blk = blk_new_open(t->backing_path, NULL, opts, BDRV_O_RDWR,
                       &error_abort);
    t->backing = g_malloc0(t->backing_size);
    /* every other eighth has data, the rest stays unallocated */
    for (int64_t off = 0; off < t->backing_size; off += 2 * extent) {
        int64_t n = MIN(extent, t->backing_size - off);

        fill_random(t->rand, t->backing + off, n);
        g_assert_cmpint(blk_pwrite(blk, off, n, t->backing + off, 0), ==, 0);
    }
    blk_unref(blk);
}

static void test_state_init(TestState *t, const TestConfig *cfg,
                            guint32 seed)
{
    g_autofree char *options = NULL;
    static int n;
    int64_t nb_clusters;

    memset(t, 0, sizeof(*t));
    t->cfg = cfg;
    t->rand = g_rand_new_with_seed(seed);
    t->log = g_string_new(NULL);
    t->cluster_size = 1 << cfg->cluster_bits;
    /*
     * Enough clusters to span several L2 tables where that is cheap (small
     * clusters), few where a cluster is large; the size is no multiple of
     * the cluster size, so that the last cluster is partial.
     */
    nb_clusters = cfg->cluster_bits <= 12 ? 600 :
                  cfg->cluster_bits <= 16 ? 96 : 20;
    t->size = nb_clusters * t->cluster_size -
              (t->cluster_size > 512 ? t->cluster_size / 2 : 0) + 512;
    t->backing_size = QEMU_ALIGN_DOWN(t->size * 3 / 4, 512);
    t->path = g_strdup_printf("%s/img%d.qcow2", test_dir, n);
    t->backing_path = g_strdup_printf("%s/base%d.qcow2", test_dir, n);
    t->data_path = g_strdup_printf("%s/data%d.raw", test_dir, n);
    n++;

    if (cfg->backing) {
        create_backing(t);
    }
    options = g_strdup_printf("size=%" PRId64 ",cluster_size=%" PRId64
                              ",refcount_bits=%d,compat=%s"
                              ",lazy_refcounts=%s%s%s%s%s%s%s",
                              t->size, t->cluster_size, cfg->refcount_bits,
                              cfg->v2 ? "0.10" : "1.1",
                              cfg->lazy_refcounts ? "on" : "off",
                              cfg->backing ? ",backing_fmt=qcow2" : "",
                              cfg->backing ? ",backing_file=" : "",
                              cfg->backing ? t->backing_path : "",
                              cfg->data_file ? ",data_file=" : "",
                              cfg->data_file ? t->data_path : "",
                              cfg->data_file == 2 ? ",data_file_raw=on" : "");
    g_assert_cmpint(create_image(t->path, options, &error_abort), ==, 0);

    t->model = g_malloc(t->size);
    model_fill_unallocated(t, 0, t->size);
    t->blk = open_image(t, BDRV_O_RDWR | BDRV_O_UNMAP | BDRV_O_RESIZE);
}

static void test_state_destroy(TestState *t)
{
    if (t->blk) {
        blk_unref(t->blk);
    }
    unlink(t->path);
    unlink(t->backing_path);
    unlink(t->data_path);
    g_free(t->path);
    g_free(t->backing_path);
    g_free(t->data_path);
    g_free(t->model);
    g_free(t->backing);
    g_string_free(t->log, true);
    g_rand_free(t->rand);
}

/* ---------------------------------------------------------------------- */
/* Checks */

static void G_GNUC_NORETURN test_fail(TestState *t, const char *fmt, ...)
    G_GNUC_PRINTF(2, 3);

static void test_fail(TestState *t, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAILED: %s\nrequests of this round:\n%s", msg,
            t->log->str);
    g_test_message("FAILED: %s", msg);
    g_assert_not_reached();
}

/* Compares @buf (the image's bytes at @offset) with the model. */
static void compare_with_model(TestState *t, const char *what, int64_t offset,
                               const uint8_t *buf, int64_t bytes)
{
    for (int64_t i = 0; i < bytes; i++) {
        if (buf[i] != t->model[offset + i]) {
            int64_t end = i;

            while (end < bytes && buf[end] != t->model[offset + end]) {
                end++;
            }
            test_fail(t, "%s: byte %" PRId64 " reads 0x%02x, expected 0x%02x"
                      " (%" PRId64 " bytes differ from there)", what,
                      offset + i, buf[i], t->model[offset + i], end - i);
        }
    }
}

static void verify_all(TestState *t, BlockBackend *blk, const char *when)
{
    int64_t chunk = MAX(t->cluster_size, 1 * MiB);
    g_autofree uint8_t *buf = g_malloc(chunk);

    g_assert_cmpint(blk_getlength(blk), ==, t->size);
    for (int64_t off = 0; off < t->size; off += chunk) {
        int64_t n = MIN(chunk, t->size - off);

        g_assert_cmpint(blk_pread(blk, off, n, buf, 0), ==, 0);
        compare_with_model(t, when, off, buf, n);
    }
}

static void check_image(TestState *t, BlockBackend *blk, const char *when)
{
    BdrvCheckResult res = { 0 };
    int ret = bdrv_check(blk_bs(blk), &res, 0);

    if (ret < 0 || res.corruptions || res.leaks || res.check_errors) {
        test_fail(t, "%s: check returned %d: %d corruptions, %d leaks, "
                  "%d check errors", when, ret, res.corruptions, res.leaks,
                  res.check_errors);
    }
}

/* ---------------------------------------------------------------------- */
/* Requests */

static void coroutine_fn test_op_entry(void *opaque)
{
    TestOp *op = opaque;
    BlockBackend *blk = op->t->blk;
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, op->buf, op->bytes);
    switch (op->type) {
    case OP_WRITE:
        op->ret = blk_co_pwritev(blk, op->offset, op->bytes, &qiov, 0);
        break;
    case OP_ZERO:
        op->ret = blk_co_pwrite_zeroes(blk, op->offset, op->bytes, 0);
        break;
    case OP_ZERO_UNMAP:
        op->ret = blk_co_pwrite_zeroes(blk, op->offset, op->bytes,
                                       BDRV_REQ_MAY_UNMAP);
        break;
    case OP_DISCARD:
        op->ret = blk_co_pdiscard(blk, op->offset, op->bytes);
        break;
    case OP_COMPRESSED:
        op->ret = blk_co_pwritev_compressed(blk, op->offset, op->bytes,
                                            &qiov);
        break;
    case OP_READ:
        op->ret = blk_co_preadv(blk, op->offset, op->bytes, &qiov, 0);
        break;
    case OP__MAX:
        g_assert_not_reached();
    }
    op->done = true;
}

/* A random length: mostly below two clusters, sometimes unaligned. */
static int64_t random_length(TestState *t)
{
    int64_t cs = t->cluster_size;

    switch (g_rand_int_range(t->rand, 0, 4)) {
    case 0:
        return g_rand_int_range(t->rand, 1, MIN(cs, 4096) + 1);
    case 1:
        return g_rand_int_range(t->rand, 1, 2 * cs + 1);
    case 2:
        return cs * g_rand_int_range(t->rand, 1, 4);
    default:
        return 512 * g_rand_int_range(t->rand, 1, 3 * cs / 512 + 1);
    }
}

/* A random offset: often at a cluster or sector boundary. */
static int64_t random_offset(TestState *t)
{
    int64_t cs = t->cluster_size;
    int64_t nb_clusters = DIV_ROUND_UP(t->size, cs);
    int64_t cluster = g_rand_int_range(t->rand, 0, nb_clusters);

    switch (g_rand_int_range(t->rand, 0, 3)) {
    case 0:
        return cluster * cs;
    case 1:
        return cluster * cs + 512 * g_rand_int_range(t->rand, 0, cs / 512);
    default:
        return cluster * cs + g_rand_int_range(t->rand, 0, cs);
    }
}

static bool ranges_overlap(int64_t a, int64_t a_len, int64_t b,
                           int64_t b_len)
{
    return a < b + b_len && b < a + a_len;
}

/* Picks a request whose range overlaps none of @ops[0..n). */
static bool random_op(TestState *t, TestOp *ops, int n, TestOp *op)
{
    static const OpType weights[] = {
        OP_WRITE, OP_WRITE, OP_WRITE, OP_WRITE, OP_ZERO, OP_ZERO_UNMAP,
        OP_DISCARD, OP_COMPRESSED, OP_READ, OP_READ,
    };
    int64_t cs = t->cluster_size;

    memset(op, 0, sizeof(*op));
    op->t = t;
    op->type = weights[g_rand_int_range(t->rand, 0, G_N_ELEMENTS(weights))];
    if (op->type == OP_COMPRESSED && t->cfg->data_file) {
        /* compressed clusters live in the image file only */
        op->type = OP_WRITE;
    }
    /* (MIN evaluates its arguments twice: no random numbers inside) */
    if (op->type == OP_COMPRESSED) {
        /* whole clusters; the image's last one may be partial */
        op->offset = QEMU_ALIGN_DOWN(random_offset(t), cs);
        op->bytes = cs * g_rand_int_range(t->rand, 1, 3);
    } else {
        op->offset = random_offset(t);
        op->bytes = random_length(t);
    }
    op->bytes = MIN(op->bytes, t->size - op->offset);
    if (op->offset >= t->size || op->bytes <= 0) {
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (ranges_overlap(op->offset, op->bytes, ops[i].offset,
                           ops[i].bytes)) {
            return false;
        }
    }
    op->buf = g_malloc(op->bytes);
    if (op->type == OP_WRITE || op->type == OP_COMPRESSED) {
        fill_random(t->rand, op->buf, op->bytes);
    }
    return true;
}

/* Runs up to MAX_IN_FLIGHT requests at once, then applies them to the
 * model and checks what the reads returned. */
static void run_batch(TestState *t)
{
    TestOp ops[MAX_IN_FLIGHT];
    int want = g_rand_int_range(t->rand, 1, MAX_IN_FLIGHT + 1);
    int n = 0;

    for (int tries = 0; n < want && tries < 4 * MAX_IN_FLIGHT; tries++) {
        if (random_op(t, ops, n, &ops[n])) {
            g_string_append_printf(t->log, "  %s %" PRId64 " %" PRId64 "%s\n",
                                   op_names[ops[n].type], ops[n].offset,
                                   ops[n].bytes, n ? " (concurrent)" : "");
            n++;
        }
    }
    for (int i = 0; i < n; i++) {
        qemu_coroutine_enter(qemu_coroutine_create(test_op_entry, &ops[i]));
    }
    for (int i = 0; i < n; i++) {
        while (!ops[i].done) {
            aio_poll(qemu_get_aio_context(), true);
        }
    }
    for (int i = 0; i < n; i++) {
        if (ops[i].ret < 0) {
            test_fail(t, "%s %" PRId64 " %" PRId64 " failed: %s",
                      op_names[ops[i].type], ops[i].offset, ops[i].bytes,
                      strerror(-ops[i].ret));
        }
        if (ops[i].type == OP_READ) {
            compare_with_model(t, "concurrent read", ops[i].offset,
                               ops[i].buf, ops[i].bytes);
        }
    }
    for (int i = 0; i < n; i++) {
        model_apply(&ops[i]);
        g_free(ops[i].buf);
    }
}

/*
 * Shrinks the disk to a random size (a multiple of 512, often within a
 * cluster) and grows it back: what lay past the smaller size reads as
 * zeroes afterwards, whatever the backing file holds there.  A v2 image
 * cannot hide a longer backing file, so it is not shrunk below it.
 */
static void shrink_and_grow(TestState *t)
{
    int64_t min = t->size / 2;
    int64_t new_size;

    if (t->cfg->v2 && t->cfg->backing) {
        min = t->backing_size;
    }
    min = ROUND_UP(min, 512);
    new_size = min + 512 * (int64_t)g_rand_int_range(
                   t->rand, 0, (t->size - min) / 512);
    g_string_append_printf(t->log, "  truncate %" PRId64 "\n  truncate %"
                           PRId64 "\n", new_size, t->size);
    if (blk_truncate(t->blk, new_size, false, PREALLOC_MODE_OFF, 0,
                     &error_abort) < 0 ||
        blk_truncate(t->blk, t->size, false, PREALLOC_MODE_OFF, 0,
                     &error_abort) < 0) {
        test_fail(t, "truncate to %" PRId64 " and back failed", new_size);
    }
    memset(t->model + new_size, 0, t->size - new_size);
}

/* ---------------------------------------------------------------------- */
/* The test */

static void test_random(gconstpointer opaque)
{
    const TestConfig *cfg = opaque;
    guint32 seed = base_seed ^ (cfg->cluster_bits * 7919u) ^
                   (cfg->refcount_bits * 104729u) ^ (cfg->v2 << 20) ^
                   (cfg->backing << 21) ^ (cfg->lazy_refcounts << 22) ^
                   ((cfg->l2_cache_size != NULL) << 23) ^
                   ((cfg->l2_cache_entry_size != NULL) << 24) ^
                   (cfg->data_file << 25);
    TestState t;

    g_test_message("seed %u (QCOW2_RANDOM_SEED=%u)", seed, base_seed);
    test_state_init(&t, cfg, seed);
    for (int round = 0; round < rounds; round++) {
        g_autofree char *when = g_strdup_printf("after round %d", round);

        g_string_truncate(t.log, 0);
        for (int b = 0; b < BATCHES_PER_ROUND; b++) {
            run_batch(&t);
            if (paranoid) {
                verify_all(&t, t.blk, when);
            }
        }
        if (g_rand_boolean(t.rand)) {
            shrink_and_grow(&t);
        }
        verify_all(&t, t.blk, when);
        check_image(&t, t.blk, when);
    }

    /* what reached the file, read by a fresh open */
    blk_unref(t.blk);
    t.blk = open_image(&t, 0);
    verify_all(&t, t.blk, "after reopening");
    check_image(&t, t.blk, "after reopening");
    test_state_destroy(&t);
}

static const TestConfig configs[] = {
    /* every cluster size, refcount widths round-robin, v3, no backing */
    { .cluster_bits = 9, .refcount_bits = 16 },
    { .cluster_bits = 10, .refcount_bits = 1 },
    { .cluster_bits = 11, .refcount_bits = 2 },
    { .cluster_bits = 12, .refcount_bits = 4 },
    { .cluster_bits = 13, .refcount_bits = 8 },
    { .cluster_bits = 14, .refcount_bits = 32 },
    { .cluster_bits = 15, .refcount_bits = 64 },
    { .cluster_bits = 16, .refcount_bits = 16 },
    { .cluster_bits = 17, .refcount_bits = 1 },
    { .cluster_bits = 18, .refcount_bits = 8 },
    { .cluster_bits = 19, .refcount_bits = 16 },
    { .cluster_bits = 20, .refcount_bits = 64 },
    { .cluster_bits = 21, .refcount_bits = 16 },
    /* with a backing file */
    { .cluster_bits = 9, .refcount_bits = 64, .backing = true },
    { .cluster_bits = 10, .refcount_bits = 16, .backing = true },
    { .cluster_bits = 11, .refcount_bits = 1, .backing = true },
    { .cluster_bits = 12, .refcount_bits = 16, .backing = true },
    { .cluster_bits = 13, .refcount_bits = 16, .backing = true },
    { .cluster_bits = 14, .refcount_bits = 4, .backing = true },
    { .cluster_bits = 15, .refcount_bits = 16, .backing = true },
    { .cluster_bits = 16, .refcount_bits = 64, .backing = true },
    { .cluster_bits = 17, .refcount_bits = 16, .backing = true },
    { .cluster_bits = 18, .refcount_bits = 16, .backing = true },
    { .cluster_bits = 19, .refcount_bits = 2, .backing = true },
    { .cluster_bits = 20, .refcount_bits = 16, .backing = true },
    { .cluster_bits = 21, .refcount_bits = 1, .backing = true },
    /* compat 0.10: no zero flag */
    { .cluster_bits = 9, .refcount_bits = 16, .v2 = true },
    { .cluster_bits = 12, .refcount_bits = 16, .v2 = true, .backing = true },
    { .cluster_bits = 16, .refcount_bits = 16, .v2 = true, .backing = true },
    { .cluster_bits = 21, .refcount_bits = 16, .v2 = true },
    /* caches that cannot hold everything */
    { .cluster_bits = 12, .refcount_bits = 16, .backing = true,
      .l2_cache_size = "8k" },
    { .cluster_bits = 16, .refcount_bits = 16, .backing = true,
      .l2_cache_entry_size = "4k", .l2_cache_size = "16k" },
    { .cluster_bits = 18, .refcount_bits = 8,
      .l2_cache_entry_size = "512" },
    /* lazy refcounts */
    { .cluster_bits = 16, .refcount_bits = 16, .lazy_refcounts = true },
    { .cluster_bits = 12, .refcount_bits = 2, .lazy_refcounts = true,
      .backing = true },
    /* external data files */
    { .cluster_bits = 16, .refcount_bits = 16, .data_file = 1,
      .backing = true },
    { .cluster_bits = 12, .refcount_bits = 16, .data_file = 2 },
};

int main(int argc, char **argv)
{
    char tmpl[] = "/tmp/test-qcow2-random-XXXXXX";
    const char *env;
    int ret;

    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    env = g_getenv("QCOW2_RANDOM_SEED");
    if (env) {
        base_seed = strtoul(env, NULL, 0);
    }
    paranoid = g_getenv("QCOW2_RANDOM_PARANOID") != NULL;
    env = g_getenv("QCOW2_RANDOM_ROUNDS");
    if (env) {
        rounds = MAX(1, atoi(env));
    }
    test_dir = g_mkdtemp(tmpl);
    g_assert_nonnull(test_dir);

    for (size_t i = 0; i < G_N_ELEMENTS(configs); i++) {
        const TestConfig *c = &configs[i];
        g_autofree char *name = g_strdup_printf(
            "/qcow2-random/%d/refcount%d%s%s%s%s%s%s", 1 << c->cluster_bits,
            c->refcount_bits, c->v2 ? "/v2" : "",
            c->backing ? "/backing" : "",
            c->lazy_refcounts ? "/lazy" : "",
            c->l2_cache_size ? "/small-l2-cache" : "",
            c->l2_cache_entry_size ? "/l2-slices" : "",
            c->data_file == 1 ? "/data-file" :
            c->data_file == 2 ? "/data-file-raw" : "");

        g_test_add_data_func(name, c, test_random);
    }
    ret = g_test_run();
    rmdir(test_dir);
    return ret;
}
