/*
 * Leaky-bucket I/O limits (see include/util/throttle.h for the
 * invariants cited below).  QEMU-exact arithmetic, hence our own code.
 */
#include "util/throttle.h"

#define NS_PER_SECOND 1000000000.0

/* The buckets a request of each direction fills, by bytes and by ops. */
static const ThrottleBucketType throttle_bytes_buckets[][2] = {
    [THROTTLE_READ] = { THROTTLE_BPS_TOTAL, THROTTLE_BPS_READ },
    [THROTTLE_WRITE] = { THROTTLE_BPS_TOTAL, THROTTLE_BPS_WRITE },
};
static const ThrottleBucketType throttle_ops_buckets[][2] = {
    [THROTTLE_READ] = { THROTTLE_OPS_TOTAL, THROTTLE_OPS_READ },
    [THROTTLE_WRITE] = { THROTTLE_OPS_TOTAL, THROTTLE_OPS_WRITE },
};

void throttle_config_init(ThrottleConfig *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    for (int i = 0; i < THROTTLE_BUCKETS; i++) {
        cfg->buckets[i].burst_length = 1;
    }
}

/* A total limit and a read or write limit of the same kind (avg or max). */
static bool throttle_total_conflicts(const ThrottleConfig *cfg,
                                     ThrottleBucketType total)
{
    const ThrottleBucket *b = cfg->buckets;

    return (b[total].avg && (b[total + 1].avg || b[total + 2].avg)) ||
           (b[total].max && (b[total + 1].max || b[total + 2].max));
}

bool throttle_config_check(const ThrottleConfig *cfg, Error **errp)
{
    const ThrottleBucket *b = cfg->buckets;

    if (throttle_total_conflicts(cfg, THROTTLE_BPS_TOTAL) ||
        throttle_total_conflicts(cfg, THROTTLE_OPS_TOTAL)) {
        error_setg(errp, "bps/iops/max total values and read/write values "
                   "cannot be used at the same time");
        return false;
    }
    if (cfg->op_size && !b[THROTTLE_OPS_TOTAL].avg &&
        !b[THROTTLE_OPS_READ].avg && !b[THROTTLE_OPS_WRITE].avg) {
        error_setg(errp, "iops size requires an iops value to be set");
        return false;
    }
    for (int i = 0; i < THROTTLE_BUCKETS; i++) {
        const ThrottleBucket *bkt = &b[i];

        if (bkt->avg < 0 || bkt->max < 0 ||
            bkt->avg > THROTTLE_VALUE_MAX || bkt->max > THROTTLE_VALUE_MAX) {
            error_setg(errp, "bps/iops/max values must be within [0, %lld]",
                       THROTTLE_VALUE_MAX);
            return false;
        }
        if (!bkt->burst_length) {
            error_setg(errp, "the burst length cannot be 0");
            return false;
        }
        if (bkt->burst_length > 1 && !bkt->max) {
            error_setg(errp, "burst length set without burst rate");
            return false;
        }
        if (bkt->max && bkt->burst_length > THROTTLE_VALUE_MAX / bkt->max) {
            error_setg(errp, "burst length too high for this burst rate");
            return false;
        }
        if (bkt->max && !bkt->avg) {
            error_setg(errp, "bps_max/iops_max require corresponding"
                       " bps/iops values");
            return false;
        }
        if (bkt->max && bkt->max < bkt->avg) {
            error_setg(errp, "bps_max/iops_max cannot be lower than bps/iops");
            return false;
        }
    }
    return true;
}

bool throttle_config_enabled(const ThrottleConfig *cfg)
{
    for (int i = 0; i < THROTTLE_BUCKETS; i++) {
        if (cfg->buckets[i].avg > 0) {
            return true;
        }
    }
    return false;
}

void throttle_state_set_config(ThrottleState *ts, const ThrottleConfig *cfg,
                               int64_t now)
{
    assert(throttle_config_check(cfg, NULL));  /* invariant 3 */
    ts->cfg = *cfg;
    for (int i = 0; i < THROTTLE_BUCKETS; i++) {
        ts->cfg.buckets[i].level = 0;
        ts->cfg.buckets[i].burst_level = 0;
    }
    ts->previous_leak = now;
}

static void throttle_bucket_leak(ThrottleBucket *bkt, int64_t delta_ns)
{
    double leak = bkt->avg * delta_ns / NS_PER_SECOND;

    bkt->level = MAX(bkt->level - leak, 0);         /* invariant 1 */
    /* a burst longer than a second is held to max per second */
    if (bkt->burst_length > 1) {
        leak = bkt->max * delta_ns / NS_PER_SECOND;
        bkt->burst_level = MAX(bkt->burst_level - leak, 0);
    }
}

/* Nanoseconds until @extra units have leaked at @rate units a second. */
static int64_t throttle_leak_time(double rate, double extra)
{
    return extra * NS_PER_SECOND / rate;
}

static int64_t throttle_bucket_wait(const ThrottleBucket *bkt)
{
    double allowance, burst_allowance, extra;

    if (!bkt->avg) {
        return 0;                                   /* invariant 2 */
    }
    if (!bkt->max) {
        /*
         * No burst rate: a tenth of a second's worth may still go at
         * once, or every other request would wait for the one before.
         */
        allowance = bkt->avg / 10;
        burst_allowance = 0;
    } else {
        /* a burst may last burst_length seconds at max before avg rules */
        allowance = bkt->max * bkt->burst_length;
        burst_allowance = bkt->max / 10;
    }
    extra = bkt->level - allowance;
    if (extra > 0) {
        return throttle_leak_time(bkt->avg, extra);
    }
    if (bkt->burst_length > 1) {
        assert(bkt->max > 0);                       /* invariant 3 */
        extra = bkt->burst_level - burst_allowance;
        if (extra > 0) {
            return throttle_leak_time(bkt->max, extra);
        }
    }
    return 0;
}

int64_t throttle_state_wait_ns(ThrottleState *ts, ThrottleDirection dir,
                               int64_t now)
{
    int64_t delta = now - ts->previous_leak;
    int64_t wait = 0;

    if (delta > 0) {                                /* invariant 4 */
        ts->previous_leak = now;
        for (int i = 0; i < THROTTLE_BUCKETS; i++) {
            throttle_bucket_leak(&ts->cfg.buckets[i], delta);
        }
    }
    for (int i = 0; i < 2; i++) {
        wait = MAX(wait, throttle_bucket_wait(
                   &ts->cfg.buckets[throttle_bytes_buckets[dir][i]]));
        wait = MAX(wait, throttle_bucket_wait(
                   &ts->cfg.buckets[throttle_ops_buckets[dir][i]]));
    }
    return wait;
}

static void throttle_bucket_fill(ThrottleBucket *bkt, double units)
{
    bkt->level += units;
    if (bkt->burst_length > 1) {
        bkt->burst_level += units;
    }
}

void throttle_state_account(ThrottleState *ts, ThrottleDirection dir,
                            uint64_t bytes)
{
    double ops = 1.0;

    /* with iops-size, a larger request counts as several operations */
    if (ts->cfg.op_size && bytes > ts->cfg.op_size) {
        ops = (double)bytes / ts->cfg.op_size;
    }
    for (int i = 0; i < 2; i++) {
        throttle_bucket_fill(&ts->cfg.buckets[throttle_bytes_buckets[dir][i]],
                             bytes);
        throttle_bucket_fill(&ts->cfg.buckets[throttle_ops_buckets[dir][i]],
                             ops);
    }
}
