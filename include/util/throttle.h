/*
 * I/O limits by leaky buckets: the arithmetic of QEMU's throttling, which
 * throttle-group objects (block/throttle-groups.c) apply to the requests
 * of their members.
 *
 * Each limit is a bucket that a request fills (by its bytes, or by one
 * operation: more than one when iops-size is set and the request is
 * larger) and that leaks at the limit's rate.  A request waits while a
 * bucket it fills holds more than its allowance: a tenth of a second of
 * the rate, or, with a burst rate (max), burst-length seconds at that
 * rate; the burst itself is held to max per second by a second level
 * that leaks at max.  The defaults, the waits and the messages of the
 * checks are QEMU's, so a command line throttles as it does with QEMU;
 * no library has these semantics, hence our own code.
 *
 * Invariants:
 *  1. level and burst_level are never negative: a leak stops at 0.
 *  2. A bucket whose avg is 0 never makes a request wait.
 *  3. A configuration a ThrottleState is set to has passed
 *     throttle_config_check(): every burst_length >= 1, a burst_length
 *     above 1 only with a max, a max only with an avg not above it, and
 *     no total limit together with a read or write limit of its kind.
 *  4. previous_leak only moves forward: a clock reading older than it
 *     leaks nothing.
 *
 * Not thread-safe: the group that owns a ThrottleState locks it.
 */
#ifndef QBLOCK_THROTTLE_H
#define QBLOCK_THROTTLE_H

#include "util/osdep.h"
#include "util/error.h"

/* QEMU's upper bound for every rate and for max * burst_length */
#define THROTTLE_VALUE_MAX 1000000000000000LL

typedef enum ThrottleBucketType {
    THROTTLE_BPS_TOTAL,
    THROTTLE_BPS_READ,
    THROTTLE_BPS_WRITE,
    THROTTLE_OPS_TOTAL,
    THROTTLE_OPS_READ,
    THROTTLE_OPS_WRITE,
    THROTTLE_BUCKETS,
} ThrottleBucketType;

typedef enum ThrottleDirection {
    THROTTLE_READ,
    THROTTLE_WRITE,
    THROTTLE_DIRECTIONS,
} ThrottleDirection;

typedef struct ThrottleBucket {
    double avg;             /* rate: bytes or operations per second */
    double max;             /* burst rate, 0 for none */
    uint64_t burst_length;  /* seconds a burst at max may last */
    double level;           /* invariant 1 */
    double burst_level;     /* invariant 1; used when burst_length > 1 */
} ThrottleBucket;

typedef struct ThrottleConfig {
    ThrottleBucket buckets[THROTTLE_BUCKETS];
    uint64_t op_size;       /* iops-size: bytes one operation counts for */
} ThrottleConfig;

typedef struct ThrottleState {
    ThrottleConfig cfg;     /* invariant 3 */
    int64_t previous_leak;  /* ns, invariant 4 */
} ThrottleState;

/* No limit, every burst_length 1: QEMU's defaults. */
void throttle_config_init(ThrottleConfig *cfg);

/* Invariant 3, with QEMU's messages. */
bool throttle_config_check(const ThrottleConfig *cfg, Error **errp);

/* Whether any limit is set. */
bool throttle_config_enabled(const ThrottleConfig *cfg);

/* The limits of @cfg (checked) from @now on, with empty buckets. */
void throttle_state_set_config(ThrottleState *ts, const ThrottleConfig *cfg,
                               int64_t now);

/*
 * Leaks the buckets up to @now and returns how many nanoseconds a
 * request of direction @dir must wait before it may start: 0 to start
 * now.
 */
int64_t throttle_state_wait_ns(ThrottleState *ts, ThrottleDirection dir,
                               int64_t now);

/* Counts a request of @bytes in direction @dir that starts now. */
void throttle_state_account(ThrottleState *ts, ThrottleDirection dir,
                            uint64_t bytes);

#endif
