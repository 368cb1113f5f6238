/*
 * qblock-img bench: the I/O benchmark behind `make bench`.
 *
 * The loop is deliberately as lean as qemu-img's, so that the figures
 * measure the block layer and not the tool: a fixed set of `depth`
 * requests, each re-submitted from its own completion callback with
 * blk_aio_preadv/pwritev, and the main AioContext polled until all `count`
 * requests have completed.  Every --flush-interval requests a flush is
 * sent; by default the queue is drained first (--no-drain sends it among
 * the requests in flight).
 *
 * Invariants:
 *  1. in_flight <= depth, and in_flight <= n (requests still to complete).
 *  2. While in_flush, no request is in flight and none is submitted.
 *  3. Slot i's buffer is used by at most one request at a time: a
 *     completion frees its slot before the next submission takes it.
 */
#include "qblock-img.h"

typedef struct ImgBenchSlot {
    struct ImgBench *b;
    QEMUIOVector qiov;
} ImgBenchSlot;

typedef struct ImgBench {
    BlockBackend *blk;
    int64_t image_size;
    int bufsize;
    int step;
    int nrreq;
    /* requests still to complete */
    int n;
    int in_flight;
    bool in_flush;
    int64_t offset;
    bool write;
    int flush_interval;
    bool drain_on_flush;
    uint8_t *buf;
    ImgBenchSlot *slots;
    /* indices of the slots not in use (a stack) */
    int *free_slots;
    int nr_free;
} ImgBench;

static void img_bench_request_cb(void *opaque, int ret);
static void img_bench_flush_cb(void *opaque, int ret);

static void img_bench_undrained_flush_cb(void *opaque, int ret)
{
    if (ret < 0) {
        error_report("Failed flush request: %s", strerror(-ret));
        exit(EXIT_FAILURE);
    }
}

/* Starts requests until depth are in flight or all are started. */
static void img_bench_submit(ImgBench *b)
{
    while (b->n > b->in_flight && b->in_flight < b->nrreq) {
        ImgBenchSlot *slot = &b->slots[b->free_slots[--b->nr_free]];
        BlockAIOCB *acb;

        /* A completion may run before blk_aio_* returns in principle:
         * count the request first. */
        b->in_flight++;
        if (b->write) {
            acb = blk_aio_pwritev(b->blk, b->offset, &slot->qiov, 0,
                                  img_bench_request_cb, slot);
        } else {
            acb = blk_aio_preadv(b->blk, b->offset, &slot->qiov, 0,
                                 img_bench_request_cb, slot);
        }
        if (!acb) {
            error_report("Failed to issue request");
            exit(EXIT_FAILURE);
        }
        /*
         * Wrap at the end of the image as qemu-img bench does: a request
         * that would cross the end fails rather than being moved.  (An
         * empty image makes the first request fail; qemu-img divides by
         * zero there.)
         */
        b->offset += b->step;
        if (b->image_size > 0) {
            b->offset %= b->image_size;
        }
    }
}

/* Completion of the request of @slot, or of a drained flush (NULL). */
static void img_bench_complete(ImgBench *b, ImgBenchSlot *slot, int ret)
{
    if (ret < 0) {
        error_report("Failed request: %s", strerror(-ret));
        exit(EXIT_FAILURE);
    }
    if (!slot) {
        /* invariant 2: the drained flush is done, start again */
        assert(b->in_flight == 0);
        b->in_flush = false;
    } else {
        int remaining = b->n - b->in_flight;

        b->free_slots[b->nr_free++] = slot - b->slots;
        b->n--;
        b->in_flight--;
        if (b->flush_interval && remaining % b->flush_interval == 0) {
            if (!b->in_flight || !b->drain_on_flush) {
                BlockAIOCB *acb;

                if (b->drain_on_flush) {
                    b->in_flush = true;
                    acb = blk_aio_flush(b->blk, img_bench_flush_cb, b);
                } else {
                    acb = blk_aio_flush(b->blk, img_bench_undrained_flush_cb,
                                        b);
                }
                if (!acb) {
                    error_report("Failed to issue flush request");
                    exit(EXIT_FAILURE);
                }
            }
            if (b->drain_on_flush) {
                return;
            }
        }
    }
    img_bench_submit(b);
}

static void img_bench_request_cb(void *opaque, int ret)
{
    ImgBenchSlot *slot = opaque;

    img_bench_complete(slot->b, slot, ret);
}

static void img_bench_flush_cb(void *opaque, int ret)
{
    img_bench_complete(opaque, NULL, ret);
}

static bool img_bench_parse_uint(const char *text, uint64_t max,
                                 uint64_t *res)
{
    return qemu_strtou64(text, NULL, 0, res) == 0 && *res <= max;
}

int img_bench(int argc, char **argv)
{
    enum {
        OPTION_FLUSH_INTERVAL = IMG_OPTION_OWN,
        OPTION_NO_DRAIN,
        OPTION_PATTERN,
    };
    static const struct option long_options[] = {
        { "flush-interval", required_argument, NULL, OPTION_FLUSH_INTERVAL },
        { "pattern", required_argument, NULL, OPTION_PATTERN },
        { "no-drain", no_argument, NULL, OPTION_NO_DRAIN },
        { NULL, 0, NULL, 0 }
    };
    ImgCommonOpts co = { 0 };
    ImgBench b = { .drain_on_flush = true };
    int count = 75000, depth = 64, pattern = 0, flush_interval = 0;
    int64_t offset = 0, image_size, t1, t2;
    int64_t bufsize = 4096, step = 0;
    bool is_write = false;
    BlockBackend *blk;
    uint64_t res;
    int c;

    /* -q changes nothing: qemu-img bench prints its two lines anyway */
    while ((c = img_getopt(argc, argv, ":hc:d:f:ni:o:qs:S:t:wU",
                           IMG_LONG_IMAGE_OPTS | IMG_LONG_FORCE_SHARE,
                           long_options, &co)) != -1) {
        switch (c) {
        case 'c':
            if (!img_bench_parse_uint(optarg, INT_MAX, &res)) {
                error_report("Invalid request count specified");
                return 1;
            }
            count = res;
            break;
        case 'd':
            /* qemu-img hangs with depth 0; refuse it instead. */
            if (!img_bench_parse_uint(optarg, INT_MAX, &res) || res == 0) {
                error_report("Invalid queue depth specified");
                return 1;
            }
            depth = res;
            break;
        case 'n':
            co.open.flags |= BDRV_O_NATIVE_AIO;
            break;
        case 'i':
            if (bdrv_parse_aio(optarg, &co.open.flags) < 0) {
                error_report("Invalid aio option: %s", optarg);
                return 1;
            }
            break;
        case 'o':
            offset = img_cvtnum("offset", optarg);
            if (offset < 0) {
                return 1;
            }
            break;
        case 's':
            bufsize = img_cvtnum_full("buffer size", optarg, 0, INT_MAX);
            if (bufsize < 0) {
                return 1;
            }
            break;
        case 'S':
            step = img_cvtnum_full("step_size", optarg, 0, INT_MAX);
            if (step < 0) {
                return 1;
            }
            break;
        case 't':
            if (img_parse_cache(optarg, &co.open) < 0) {
                error_report("Invalid cache mode");
                return 1;
            }
            break;
        case 'w':
            co.open.flags |= BDRV_O_RDWR;
            is_write = true;
            break;
        case OPTION_PATTERN:
            if (!img_bench_parse_uint(optarg, 0xff, &res)) {
                error_report("Invalid pattern byte specified");
                return 1;
            }
            pattern = res;
            break;
        case OPTION_FLUSH_INTERVAL:
            if (!img_bench_parse_uint(optarg, INT_MAX, &res)) {
                error_report("Invalid flush interval specified");
                return 1;
            }
            flush_interval = res;
            break;
        case OPTION_NO_DRAIN:
            b.drain_on_flush = false;
            break;
        }
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting one image file name");
    }
    if (!is_write && flush_interval) {
        error_report("--flush-interval is only available in write tests");
        return 1;
    }
    if (flush_interval && flush_interval < depth) {
        error_report("Flush interval can't be smaller than depth");
        return 1;
    }

    blk = img_open(argv[argc - 1], &co.open);
    if (!blk) {
        return 1;
    }
    image_size = blk_getlength(blk);
    if (image_size < 0) {
        error_report("Could not get size of %s: %s", argv[argc - 1],
                     strerror(-image_size));
        blk_unref(blk);
        return 1;
    }

    b.blk = blk;
    b.image_size = image_size;
    b.bufsize = bufsize;
    b.step = step ? step : bufsize;
    b.nrreq = depth;
    b.n = count;
    b.offset = offset;
    b.write = is_write;
    b.flush_interval = flush_interval;

    printf("Sending %d %s requests, %d bytes each, %d in parallel "
           "(starting at offset %" PRId64 ", step size %d)\n",
           b.n, b.write ? "write" : "read", b.bufsize, b.nrreq, b.offset,
           b.step);
    if (flush_interval) {
        printf("Sending flush every %d requests\n", flush_interval);
    }
    fflush(stdout);

    b.buf = blk_blockalign(blk, (size_t)b.nrreq * b.bufsize);
    memset(b.buf, pattern, (size_t)b.nrreq * b.bufsize);
    b.slots = g_new(ImgBenchSlot, b.nrreq);
    b.free_slots = g_new(int, b.nrreq);
    for (int i = 0; i < b.nrreq; i++) {
        b.slots[i].b = &b;
        qemu_iovec_init_buf(&b.slots[i].qiov, b.buf + (size_t)i * b.bufsize,
                            b.bufsize);
        b.free_slots[i] = b.nrreq - 1 - i;
    }
    b.nr_free = b.nrreq;

    t1 = get_clock_ns();
    img_bench_submit(&b);
    while (b.n > 0) {
        aio_poll(blk_get_aio_context(blk), true);
    }
    t2 = get_clock_ns();
    printf("Run completed in %3.3f seconds.\n", (t2 - t1) / 1e9);

    qemu_vfree(b.buf);
    g_free(b.slots);
    g_free(b.free_slots);
    blk_unref(blk);
    return 0;
}
