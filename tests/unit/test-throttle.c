/*
 * util/throttle.c's bucket arithmetic (waits, leaks, bursts, iops-size,
 * QEMU's checks) and block/throttle.c over null-co: requests queue behind
 * the limits, and a drain lets every queued request go at once.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"
#include "util/throttle.h"
#include "util/user-object.h"

#define MS 1000000LL
#define SECOND 1000000000LL

static ThrottleState state_with(ThrottleBucketType type, double avg,
                                double max, uint64_t burst_length)
{
    ThrottleConfig cfg;
    ThrottleState ts;

    throttle_config_init(&cfg);
    cfg.buckets[type].avg = avg;
    cfg.buckets[type].max = max;
    cfg.buckets[type].burst_length = burst_length;
    throttle_state_set_config(&ts, &cfg, 0);
    return ts;
}

/* A tenth of a second's worth goes at once; beyond it, one op waits 1/avg. */
static void test_average(void)
{
    ThrottleState ts = state_with(THROTTLE_OPS_TOTAL, 10, 0, 1);

    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_READ, 0), ==, 0);
    throttle_state_account(&ts, THROTTLE_READ, 512);
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_READ, 0), ==, 0);
    throttle_state_account(&ts, THROTTLE_WRITE, 512);
    /* level 2, allowance 1: one op over, at 10 a second */
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_READ, 0), ==,
                    100 * MS);
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_WRITE, 0), ==,
                    100 * MS);
    /* 50 ms leak half an op */
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_READ, 50 * MS), ==,
                    50 * MS);
    /* a clock reading from before leaks nothing (invariant 4) */
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_READ, 10 * MS), ==,
                    50 * MS);
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_READ, SECOND), ==,
                    0);
}

/* A read limit holds reads only; bytes count in the bps buckets. */
static void test_direction_and_bytes(void)
{
    ThrottleState ts = state_with(THROTTLE_BPS_READ, 1000, 0, 1);

    throttle_state_account(&ts, THROTTLE_READ, 300);
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_READ, 0), ==,
                    200 * MS);
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_WRITE, 0), ==, 0);
    throttle_state_account(&ts, THROTTLE_WRITE, 100000);
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_READ, 0), ==,
                    200 * MS);
}

/* A burst of max * burst_length, itself held to max per second. */
static void test_burst(void)
{
    ThrottleState ts = state_with(THROTTLE_OPS_WRITE, 10, 100, 2);

    for (int i = 0; i < 10; i++) {
        throttle_state_account(&ts, THROTTLE_WRITE, 512);
    }
    /* burst level 10 = its allowance of max/10 */
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_WRITE, 0), ==, 0);
    throttle_state_account(&ts, THROTTLE_WRITE, 512);
    /* one op over the burst allowance, at max a second */
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_WRITE, 0), ==,
                    10 * MS);
    /* 200 ops in 2 s at max: then the average rules */
    for (int i = 0; i < 189; i++) {
        throttle_state_account(&ts, THROTTLE_WRITE, 512);
    }
    /* level 200 = allowance; burst level 200, its allowance leaks at 100/s */
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_WRITE, 0), ==,
                    1900 * MS);
    throttle_state_account(&ts, THROTTLE_WRITE, 512);
    /* at 2 s: level 201 - 20 leaked = 181 < 200; burst 201 - 200 = 1 */
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_WRITE, 2 * SECOND),
                    ==, 0);
}

/* With iops-size, a request larger than it counts as several ops. */
static void test_op_size(void)
{
    ThrottleConfig cfg;
    ThrottleState ts;

    throttle_config_init(&cfg);
    cfg.buckets[THROTTLE_OPS_TOTAL].avg = 10;
    cfg.op_size = 4096;
    throttle_state_set_config(&ts, &cfg, 0);
    throttle_state_account(&ts, THROTTLE_READ, 16384);
    /* 4 ops, allowance 1 */
    g_assert_cmpint(throttle_state_wait_ns(&ts, THROTTLE_READ, 0), ==,
                    300 * MS);
}

static void assert_check_fails(ThrottleConfig *cfg, const char *msg)
{
    Error *err = NULL;

    g_assert_false(throttle_config_check(cfg, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, msg);
    error_free(err);
    throttle_config_init(cfg);
}

static void test_config_check(void)
{
    ThrottleConfig cfg;

    throttle_config_init(&cfg);
    g_assert_true(throttle_config_check(&cfg, NULL));
    g_assert_false(throttle_config_enabled(&cfg));
    cfg.buckets[THROTTLE_BPS_TOTAL].avg = 1;
    cfg.buckets[THROTTLE_BPS_WRITE].avg = 1;
    assert_check_fails(&cfg, "bps/iops/max total values and read/write "
                       "values cannot be used at the same time");
    cfg.buckets[THROTTLE_OPS_TOTAL].max = 5;
    cfg.buckets[THROTTLE_OPS_READ].max = 5;
    assert_check_fails(&cfg, "bps/iops/max total values and read/write "
                       "values cannot be used at the same time");
    cfg.op_size = 512;
    cfg.buckets[THROTTLE_BPS_TOTAL].avg = 1;
    assert_check_fails(&cfg, "iops size requires an iops value to be set");
    cfg.buckets[THROTTLE_OPS_READ].avg = -1;
    assert_check_fails(&cfg, "bps/iops/max values must be within "
                       "[0, 1000000000000000]");
    cfg.buckets[THROTTLE_OPS_READ].burst_length = 0;
    assert_check_fails(&cfg, "the burst length cannot be 0");
    cfg.buckets[THROTTLE_OPS_READ].burst_length = 2;
    assert_check_fails(&cfg, "burst length set without burst rate");
    cfg.buckets[THROTTLE_OPS_READ].avg = 1;
    cfg.buckets[THROTTLE_OPS_READ].max = 1000000;
    cfg.buckets[THROTTLE_OPS_READ].burst_length = 1000000001;
    assert_check_fails(&cfg, "burst length too high for this burst rate");
    cfg.buckets[THROTTLE_OPS_READ].max = 10;
    assert_check_fails(&cfg, "bps_max/iops_max require corresponding "
                       "bps/iops values");
    cfg.buckets[THROTTLE_OPS_READ].avg = 10;
    cfg.buckets[THROTTLE_OPS_READ].max = 5;
    assert_check_fails(&cfg, "bps_max/iops_max cannot be lower than "
                       "bps/iops");
    cfg.buckets[THROTTLE_OPS_READ].avg = 10;
    cfg.buckets[THROTTLE_OPS_READ].max = 20;
    cfg.buckets[THROTTLE_OPS_READ].burst_length = 3;
    g_assert_true(throttle_config_check(&cfg, NULL));
    g_assert_true(throttle_config_enabled(&cfg));
}

static void read_done(void *opaque, int ret)
{
    int *done = opaque;

    g_assert_cmpint(ret, ==, 0);
    (*done)++;
}

/*
 * 10 reads at 2 a second would take about 4.5 s; they start together,
 * most queue, and blk_drain lets them all go (throttle.c invariant 3).
 */
static void test_drain_lifts_limits(void)
{
    static uint8_t buf[10][512];
    QEMUIOVector qiov[10];
    BlockBackend *blk;
    int done = 0;
    int64_t start, end;

    g_assert_true(user_object_add_cmdline(
        "throttle-group,id=tg-drain,x-iops-total=2", &error_abort));
    blk = blk_new_open(NULL, NULL,
                       keyval_parse("driver=throttle,throttle-group=tg-drain,"
                                    "file.driver=null-co", NULL,
                                    &error_abort),
                       0, &error_abort);
    for (int i = 0; i < 10; i++) {
        qemu_iovec_init_buf(&qiov[i], buf[i], sizeof(buf[i]));
        blk_aio_preadv(blk, i * 512, &qiov[i], 0, read_done, &done);
    }
    start = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    while (qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - start < 200 * MS) {
        aio_poll(qemu_get_aio_context(), false);
    }
    /* the allowance (a fifth of an op) lets one go, maybe two */
    g_assert_cmpint(done, >=, 1);
    g_assert_cmpint(done, <=, 2);
    blk_drain(blk);
    end = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    g_assert_cmpint(done, ==, 10);
    g_assert_cmpint(end - start, <, 3 * SECOND);
    blk_unref(blk);
    g_assert_true(user_object_del("tg-drain", &error_abort));
}

/* While a node uses the group, the group cannot go (invariant 4). */
static void test_group_in_use(void)
{
    BlockBackend *blk;
    Error *err = NULL;

    g_assert_true(user_object_add_cmdline(
        "throttle-group,id=tg-use,x-bps-total=1000000", &error_abort));
    blk = blk_new_open(NULL, NULL,
                       keyval_parse("driver=throttle,throttle-group=tg-use,"
                                    "file.driver=null-co", NULL,
                                    &error_abort),
                       0, &error_abort);
    g_assert_false(user_object_del("tg-use", &err));
    g_assert_nonnull(err);
    error_free(err);
    blk_unref(blk);
    g_assert_true(user_object_del("tg-use", &error_abort));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    g_test_add_func("/throttle/average", test_average);
    g_test_add_func("/throttle/direction-and-bytes",
                    test_direction_and_bytes);
    g_test_add_func("/throttle/burst", test_burst);
    g_test_add_func("/throttle/op-size", test_op_size);
    g_test_add_func("/throttle/config-check", test_config_check);
    g_test_add_func("/throttle/drain-lifts-limits", test_drain_lifts_limits);
    g_test_add_func("/throttle/group-in-use", test_group_in_use);
    return g_test_run();
}
