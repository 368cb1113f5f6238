/*
 * Throttle groups: the user-creatable object "throttle-group" (QEMU's),
 * whose I/O limits its members share.  A member is one throttle filter
 * node (block/throttle.c); every request of every member counts against
 * the group's one set of buckets (util/throttle.h), and when the limits
 * hold requests back, the members take turns, round-robin, so that a busy
 * member cannot starve a quiet one.
 *
 * Invariants:
 *  1. A group has at most one timer armed per direction
 *     (any_timer_armed): the timer of the member whose turn it is
 *     (tokens[dir]).  The request that timer releases runs without
 *     checking the buckets again; every other request either finds the
 *     buckets below their allowance or queues.
 *  2. A member's timers, kick bottom half and request queues belong to
 *     its AioContext's thread: another thread that wants a member's timer
 *     armed records when and schedules the kick bottom half.
 *  3. While limits_disabled is nonzero (the member or a node below it is
 *     drained) a request does not wait, and queued ones are released, so
 *     that a drain never waits for the limits.
 *  4. A member holds a reference to its group's object from register to
 *     unregister: object-del is refused meanwhile.
 *  5. At unregister and at a change of context the member is drained: no
 *     request of it waits, so none can be lost.
 */
#ifndef QBLOCK_THROTTLE_GROUPS_H
#define QBLOCK_THROTTLE_GROUPS_H

#include "util/aio.h"
#include "util/coroutine.h"
#include "util/throttle.h"

typedef struct ThrottleGroup ThrottleGroup;
typedef struct UserObject UserObject;

typedef struct ThrottleGroupMember {
    ThrottleGroup *group;
    /*
     * invariant 4: the group's object, held by pointer, since at exit the
     * registry lets go of objects before the nodes close
     */
    UserObject *obj;
    AioContext *ctx;
    /* invariant 2: all of these belong to ctx's thread */
    CoQueue queued[THROTTLE_DIRECTIONS];
    QEMUTimer *timers[THROTTLE_DIRECTIONS];
    QEMUBH *kick_bh;
    /* under the group's lock */
    unsigned int pending[THROTTLE_DIRECTIONS];
    bool kick[THROTTLE_DIRECTIONS];
    int64_t kick_at[THROTTLE_DIRECTIONS];
    /* invariant 3; atomic: other members' threads read it */
    int limits_disabled;
} ThrottleGroupMember;

/* Whether a throttle-group object of id @group_id exists. */
bool throttle_group_exists(const char *group_id);

/*
 * Makes @m, in @ctx, a member of the group @group_id.  Fails with QEMU's
 * message if there is no such throttle-group object.
 */
bool throttle_group_register(ThrottleGroupMember *m, const char *group_id,
                             AioContext *ctx, Error **errp);
/* Invariant 5: @m is drained. */
void throttle_group_unregister(ThrottleGroupMember *m);

/* The id of @m's group. */
const char *throttle_group_get_id(const ThrottleGroupMember *m);

/*
 * Waits until the group's limits let a request of @bytes in direction
 * @dir start, and counts it.
 */
void coroutine_fn throttle_group_co_intercept(ThrottleGroupMember *m,
                                              int64_t bytes,
                                              ThrottleDirection dir);

/* Invariant 3: a drained section that concerns @m begins or ends. */
void throttle_group_disable_limits(ThrottleGroupMember *m);
void throttle_group_enable_limits(ThrottleGroupMember *m);

/* Invariant 5: moves @m's timers to @new_ctx; @m is drained. */
void throttle_group_change_aio_context(ThrottleGroupMember *m,
                                       AioContext *new_ctx);

#endif
