/*
 * When the file driver's asynchronous backends (Linux AIO and io_uring)
 * hand queued requests to the kernel: by default as soon as four requests
 * or 128 KiB wait, the rest from the bottom half at the end of the
 * event-loop iteration; with aio-max-batch=N as soon as N requests wait,
 * whatever their size, N being the node's or its context's (an iothread's
 * aio-max-batch), the smaller where both are set (block/file-aio-core.c).  Coroutines issue requests
 * one after another without the loop running in between, as an export's
 * handler does for the requests of one kick; the backend's counters show
 * what went to the kernel at once.  Then the loop completes everything
 * and the data read back is checked.
 *
 * The file lives in the temporary directory, without O_DIRECT: the
 * submission policy does not depend on it.  A backend the kernel refuses
 * is skipped with the reason.
 */
#include "util/osdep.h"
#include "util/aio.h"
#include "util/coroutine.h"
#include "block/file-aio-core.h"

enum { MAX_REQS = 8, FILE_SIZE = MAX_REQS * 64 * 1024 };

typedef struct Backend {
    const char *name;
    FileAioState *(*get)(AioContext *ctx, Error **errp);
} Backend;

static const Backend backends[] = {
    { "native", laio_get },
    { "io_uring", luring_get },
};

typedef struct Read {
    FileAioState *s;
    int fd;
    int64_t offset;
    QEMUIOVector qiov;
    unsigned max_batch;
    int ret;
    unsigned *pending;
} Read;

static void coroutine_fn read_entry(void *opaque)
{
    Read *r = opaque;

    r->ret = file_aio_co_submit(r->s, r->fd, r->offset, &r->qiov,
                                FILE_AIO_READ, r->max_batch);
    (*r->pending)--;
}

typedef struct Case {
    const char *name;
    size_t request_bytes;
    unsigned max_batch;         /* aio-max-batch, 0: the default */
    unsigned ctx_max_batch;     /* the context's, 0: none */
    unsigned requests;
    unsigned expect_at_once;    /* in the kernel before the loop runs */
} Case;

static const Case cases[] = {
    /* four small requests go at once; two wait for the bottom half */
    { "default-4k", 4096, 0, 0, 6, 4 },
    /* 128 KiB go at once: two 64 KiB requests */
    { "default-64k", 64 * 1024, 0, 0, 3, 2 },
    /* a set limit counts requests only */
    { "max-batch-3-4k", 4096, 3, 0, 5, 3 },
    { "max-batch-3-64k", 64 * 1024, 3, 0, 2, 0 },
    /* fewer than the limit: nothing before the bottom half */
    { "default-3x4k", 4096, 0, 0, 3, 0 },
    /* the context's limit, alone, and the smaller of two */
    { "ctx-max-batch-3-4k", 4096, 0, 3, 5, 3 },
    { "ctx-max-batch-6-64k", 64 * 1024, 0, 6, 5, 0 },
    { "max-batch-3-ctx-2", 4096, 3, 2, 5, 4 },
    { "max-batch-2-ctx-3", 4096, 2, 3, 5, 4 },
};

typedef struct Params {
    const Backend *backend;
    const Case *c;
} Params;

static uint8_t pattern_byte(size_t pos)
{
    return (uint8_t)(pos * 7 + pos / 4096);
}

static int make_file(void)
{
    g_autofree char *path = g_build_filename(g_get_tmp_dir(),
                                             "test-file-aio-XXXXXX", NULL);
    g_autofree uint8_t *data = g_malloc(FILE_SIZE);
    int fd = g_mkstemp(path);

    g_assert_cmpint(fd, >=, 0);
    unlink(path);
    for (size_t i = 0; i < FILE_SIZE; i++) {
        data[i] = pattern_byte(i);
    }
    g_assert_cmpint(pwrite(fd, data, FILE_SIZE, 0), ==, FILE_SIZE);
    return fd;
}

static void test_submission(const void *opaque)
{
    const Params *p = opaque;
    const Case *c = p->c;
    AioContext *ctx = qemu_get_aio_context();
    Error *err = NULL;
    FileAioState *s = p->backend->get(ctx, &err);
    Read reads[MAX_REQS];
    unsigned pending = c->requests;
    int fd;

    if (!s) {
        g_test_skip(error_get_pretty(err));
        error_free(err);
        return;
    }
    g_assert_cmpuint(c->requests, <=, MAX_REQS);
    aio_context_set_aio_params(ctx, c->ctx_max_batch);
    fd = make_file();
    for (unsigned i = 0; i < c->requests; i++) {
        reads[i] = (Read) {
            .s = s,
            .fd = fd,
            .offset = (int64_t)i * c->request_bytes,
            .max_batch = c->max_batch,
            .ret = -EINPROGRESS,
            .pending = &pending,
        };
        qemu_iovec_init_buf(&reads[i].qiov, g_malloc0(c->request_bytes),
                            c->request_bytes);
        qemu_coroutine_enter(qemu_coroutine_create(read_entry, &reads[i]));
    }

    /* what went to the kernel from the coroutines themselves */
    g_assert_cmpuint(pending, ==, c->requests);
    g_assert_cmpuint(s->in_flight, ==, c->expect_at_once);
    g_assert_cmpuint(s->pending_count, ==, c->requests - c->expect_at_once);
    g_assert_cmpuint(s->pending_bytes, ==,
                     (c->requests - c->expect_at_once) * c->request_bytes);

    while (pending > 0) {
        aio_poll(ctx, true);
    }
    g_assert_cmpuint(s->in_flight, ==, 0);
    g_assert_cmpuint(s->pending_count, ==, 0);
    g_assert_cmpuint(s->pending_bytes, ==, 0);
    for (unsigned i = 0; i < c->requests; i++) {
        const uint8_t *got = reads[i].qiov.iov[0].iov_base;

        g_assert_cmpint(reads[i].ret, ==, 0);
        for (size_t j = 0; j < c->request_bytes; j++) {
            g_assert_cmpuint(got[j], ==,
                             pattern_byte(reads[i].offset + j));
        }
        g_free(reads[i].qiov.iov[0].iov_base);
        qemu_iovec_destroy(&reads[i].qiov);
    }
    file_aio_put(s);
    close(fd);
    aio_context_set_aio_params(ctx, 0);
}

int main(int argc, char **argv)
{
    Params params[ARRAY_SIZE(backends)][ARRAY_SIZE(cases)];

    g_test_init(&argc, &argv, NULL);
    for (size_t b = 0; b < ARRAY_SIZE(backends); b++) {
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
            g_autofree char *path = g_strdup_printf(
                "/file-aio/submission/%s/%s", backends[b].name,
                cases[i].name);

            params[b][i] = (Params) { &backends[b], &cases[i] };
            g_test_add_data_func(path, &params[b][i], test_submission);
        }
    }
    return g_test_run();
}
