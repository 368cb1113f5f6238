/*
 * Throttle groups (see include/block/throttle-groups.h for the invariants
 * cited below): the throttle-group object, its limits as QEMU's
 * properties, and the round-robin scheduling of its members' requests,
 * after QEMU's.
 */
#include "block/throttle-groups.h"
#include "util/user-object.h"

#define THROTTLE_GROUP_TYPE "throttle-group"

struct ThrottleGroup {
    char *id;
    GMutex lock;                /* guards what follows and the members' */
    ThrottleState ts;
    GList *members;             /* ThrottleGroupMember *, in join order */
    ThrottleGroupMember *tokens[THROTTLE_DIRECTIONS];   /* invariant 1 */
    bool any_timer_armed[THROTTLE_DIRECTIONS];          /* invariant 1 */
};

/* Which part of a bucket (or of the configuration) a property sets. */
typedef enum ThrottleField {
    THROTTLE_FIELD_AVG,
    THROTTLE_FIELD_MAX,
    THROTTLE_FIELD_LENGTH,
    THROTTLE_FIELD_OP_SIZE,
} ThrottleField;

/* QEMU's ThrottleLimits, and the x- properties of the same names. */
static const struct ThrottleProperty {
    const char *name;
    ThrottleBucketType bucket;
    ThrottleField field;
} throttle_properties[] = {
    { "iops-total", THROTTLE_OPS_TOTAL, THROTTLE_FIELD_AVG },
    { "iops-total-max", THROTTLE_OPS_TOTAL, THROTTLE_FIELD_MAX },
    { "iops-total-max-length", THROTTLE_OPS_TOTAL, THROTTLE_FIELD_LENGTH },
    { "iops-read", THROTTLE_OPS_READ, THROTTLE_FIELD_AVG },
    { "iops-read-max", THROTTLE_OPS_READ, THROTTLE_FIELD_MAX },
    { "iops-read-max-length", THROTTLE_OPS_READ, THROTTLE_FIELD_LENGTH },
    { "iops-write", THROTTLE_OPS_WRITE, THROTTLE_FIELD_AVG },
    { "iops-write-max", THROTTLE_OPS_WRITE, THROTTLE_FIELD_MAX },
    { "iops-write-max-length", THROTTLE_OPS_WRITE, THROTTLE_FIELD_LENGTH },
    { "bps-total", THROTTLE_BPS_TOTAL, THROTTLE_FIELD_AVG },
    { "bps-total-max", THROTTLE_BPS_TOTAL, THROTTLE_FIELD_MAX },
    { "bps-total-max-length", THROTTLE_BPS_TOTAL, THROTTLE_FIELD_LENGTH },
    { "bps-read", THROTTLE_BPS_READ, THROTTLE_FIELD_AVG },
    { "bps-read-max", THROTTLE_BPS_READ, THROTTLE_FIELD_MAX },
    { "bps-read-max-length", THROTTLE_BPS_READ, THROTTLE_FIELD_LENGTH },
    { "bps-write", THROTTLE_BPS_WRITE, THROTTLE_FIELD_AVG },
    { "bps-write-max", THROTTLE_BPS_WRITE, THROTTLE_FIELD_MAX },
    { "bps-write-max-length", THROTTLE_BPS_WRITE, THROTTLE_FIELD_LENGTH },
    { "iops-size", 0, THROTTLE_FIELD_OP_SIZE },
};

/* Sets the field of @cfg that @prop names to @value, checked as QEMU's. */
static bool throttle_property_apply(const struct ThrottleProperty *prop,
                                    const char *shown_name, int64_t value,
                                    ThrottleConfig *cfg, Error **errp)
{
    ThrottleBucket *bkt = &cfg->buckets[prop->bucket];

    switch (prop->field) {
    case THROTTLE_FIELD_AVG:
        bkt->avg = value;
        break;
    case THROTTLE_FIELD_MAX:
        bkt->max = value;
        break;
    case THROTTLE_FIELD_LENGTH:
        if (value < 0 || value > UINT_MAX) {
            /* QEMU's words, its missing space in the x- form included */
            error_setg(errp, "%s value must be in %s [0, %u]", shown_name,
                       g_str_has_prefix(shown_name, "x-") ? "therange" :
                       "the range", UINT_MAX);
            return false;
        }
        bkt->burst_length = value;
        break;
    case THROTTLE_FIELD_OP_SIZE:
        cfg->op_size = value;
        break;
    }
    return true;
}

/* The members of @limits (a ThrottleLimits) onto @cfg. */
static bool throttle_limits_apply(JsonObject *limits, ThrottleConfig *cfg,
                                  Error **errp)
{
    for (size_t i = 0; i < G_N_ELEMENTS(throttle_properties); i++) {
        const struct ThrottleProperty *prop = &throttle_properties[i];

        if (json_object_has_member(limits, prop->name) &&
            !throttle_property_apply(prop, prop->name,
                                     json_object_get_int_member(limits,
                                                                prop->name),
                                     cfg, errp)) {
            return false;
        }
    }
    return throttle_config_check(cfg, errp);
}

/* The x- properties of @props, then its limits, onto @cfg. */
static bool throttle_props_apply(JsonObject *props, ThrottleConfig *cfg,
                                 Error **errp)
{
    for (size_t i = 0; i < G_N_ELEMENTS(throttle_properties); i++) {
        const struct ThrottleProperty *prop = &throttle_properties[i];
        g_autofree char *name = g_strdup_printf("x-%s", prop->name);
        int64_t value;

        if (!json_object_has_member(props, name)) {
            continue;
        }
        value = json_object_get_int_member(props, name);
        if (value < 0) {
            error_setg(errp, "Property values cannot be negative");
            return false;
        }
        if (!throttle_property_apply(prop, name, value, cfg, errp)) {
            return false;
        }
    }
    if (json_object_has_member(props, "limits")) {
        return throttle_limits_apply(json_object_get_object_member(props,
                                                                   "limits"),
                                     cfg, errp);
    }
    return throttle_config_check(cfg, errp);
}

static void *throttle_group_create(const char *id, JsonObject *props,
                                   Error **errp)
{
    ThrottleConfig cfg;
    ThrottleGroup *tg;

    throttle_config_init(&cfg);
    if (!throttle_props_apply(props, &cfg, errp)) {
        return NULL;
    }
    tg = g_new0(ThrottleGroup, 1);
    tg->id = g_strdup(id);
    g_mutex_init(&tg->lock);
    throttle_state_set_config(&tg->ts, &cfg,
                              qemu_clock_get_ns(QEMU_CLOCK_REALTIME));
    return tg;
}

static void throttle_group_destroy(void *state)
{
    ThrottleGroup *tg = state;

    assert(!tg->members);                   /* invariant 4 */
    g_mutex_clear(&tg->lock);
    g_free(tg->id);
    g_free(tg);
}

/*
 * qom-set: "limits" changes the limits it names, at once; the levels
 * start empty and requests already waiting keep their timers, as in
 * QEMU.  The x- properties are for creation only.
 */
static bool throttle_group_set_property(void *state, const char *name,
                                        JsonNode *value, Error **errp)
{
    ThrottleGroup *tg = state;
    ThrottleConfig cfg;

    if (g_str_has_prefix(name, "x-")) {
        for (size_t i = 0; i < G_N_ELEMENTS(throttle_properties); i++) {
            if (!strcmp(name + 2, throttle_properties[i].name)) {
                error_setg(errp, "Property cannot be set after "
                           "initialization");
                return false;
            }
        }
    }
    if (strcmp(name, "limits")) {
        error_setg(errp, "Property '%s.%s' not found", THROTTLE_GROUP_TYPE,
                   name);
        return false;
    }
    if (!JSON_NODE_HOLDS_OBJECT(value)) {
        error_setg(errp, "Invalid parameter type for 'limits', expected: "
                   "object");
        return false;
    }
    g_mutex_lock(&tg->lock);
    cfg = tg->ts.cfg;
    g_mutex_unlock(&tg->lock);
    if (!throttle_limits_apply(json_node_get_object(value), &cfg, errp)) {
        return false;
    }
    g_mutex_lock(&tg->lock);
    throttle_state_set_config(&tg->ts, &cfg,
                              qemu_clock_get_ns(QEMU_CLOCK_REALTIME));
    g_mutex_unlock(&tg->lock);
    return true;
}

/* The value of @prop in @cfg. */
static int64_t throttle_property_value(const struct ThrottleProperty *prop,
                                       const ThrottleConfig *cfg)
{
    const ThrottleBucket *bkt = &cfg->buckets[prop->bucket];

    switch (prop->field) {
    case THROTTLE_FIELD_AVG:
        return bkt->avg;
    case THROTTLE_FIELD_MAX:
        return bkt->max;
    case THROTTLE_FIELD_LENGTH:
        return bkt->burst_length;
    case THROTTLE_FIELD_OP_SIZE:
        return cfg->op_size;
    }
    g_assert_not_reached();
}

/* qom-get: "limits" (every limit, as QEMU shows it) or an x- property. */
static JsonNode *throttle_group_get_property(void *state, const char *name)
{
    ThrottleGroup *tg = state;
    g_autoptr(JsonObject) limits = json_object_new();
    ThrottleConfig cfg;

    g_mutex_lock(&tg->lock);
    cfg = tg->ts.cfg;
    g_mutex_unlock(&tg->lock);
    for (size_t i = 0; i < G_N_ELEMENTS(throttle_properties); i++) {
        const struct ThrottleProperty *prop = &throttle_properties[i];

        if (g_str_has_prefix(name, "x-") && !strcmp(name + 2, prop->name)) {
            return json_node_init_int(json_node_alloc(),
                                      throttle_property_value(prop, &cfg));
        }
        json_object_set_int_member(limits, prop->name,
                                   throttle_property_value(prop, &cfg));
    }
    if (strcmp(name, "limits")) {
        return NULL;
    }
    return json_node_init_object(json_node_alloc(), limits);
}

/* qom-list's order, as QEMU's (the order of its hash table, observed) */
static const char *const throttle_group_qom_list[] = {
    "x-bps-write-max-length", "x-iops-total-max-length", "x-iops-size",
    "limits", "x-bps-total", "x-iops-read-max-length", "x-bps-write",
    "x-iops-write-max-length", "x-bps-read-max", "x-iops-read-max",
    "x-bps-total-max", "x-bps-read-max-length", "x-iops-read", "x-bps-read",
    "x-bps-write-max", "x-iops-total-max", "x-iops-total", "x-iops-write",
    "x-bps-total-max-length", "x-iops-write-max", NULL,
};

static const UserObjectType throttle_group_type = {
    .name = THROTTLE_GROUP_TYPE,
    .qom_list_order = throttle_group_qom_list,
    .create = throttle_group_create,
    .destroy = throttle_group_destroy,
    .set_property = throttle_group_set_property,
    .get_property = throttle_group_get_property,
};

user_object_type_init(throttle_group_type)

/* The member after @m, round-robin. */
static ThrottleGroupMember *throttle_group_next_member(ThrottleGroupMember *m)
{
    GList *l = g_list_find(m->group->members, m);

    return l->next ? l->next->data : m->group->members->data;
}

static bool throttle_member_limits_disabled(ThrottleGroupMember *m)
{
    return __atomic_load_n(&m->limits_disabled, __ATOMIC_RELAXED) > 0;
}

/*
 * Whose turn it is after @m's request in direction @dir: the next member
 * round-robin from the current token that has requests queued, else @m.
 * A drained member with queued requests goes first (invariant 3).
 */
static ThrottleGroupMember *throttle_group_next_token(ThrottleGroupMember *m,
                                                      ThrottleDirection dir)
{
    ThrottleGroup *tg = m->group;
    ThrottleGroupMember *start, *token;

    if (throttle_member_limits_disabled(m) && m->pending[dir]) {
        return m;
    }
    start = token = tg->tokens[dir];
    token = throttle_group_next_member(token);
    while (token != start && !token->pending[dir]) {
        token = throttle_group_next_member(token);
    }
    if (token == start && !token->pending[dir]) {
        token = m;
    }
    assert(token == m || token->pending[dir]);
    return token;
}

/* Arms @m's timer of @dir for @when (invariant 2); group lock held. */
static void throttle_member_arm(ThrottleGroupMember *m, ThrottleDirection dir,
                                int64_t when)
{
    if (m->ctx == qemu_get_current_aio_context()) {
        m->kick[dir] = false;
        timer_mod(m->timers[dir], when);
        return;
    }
    m->kick[dir] = true;
    m->kick_at[dir] = when;
    qemu_bh_schedule(m->kick_bh);
}

/*
 * Whether a request of @m in @dir must wait; if it must and no timer of
 * the group is armed for @dir, arms @m's and makes @m the token
 * (invariant 1).  Group lock held.
 */
static bool throttle_group_schedule_timer(ThrottleGroupMember *m,
                                          ThrottleDirection dir)
{
    ThrottleGroup *tg = m->group;
    int64_t now, wait;

    if (throttle_member_limits_disabled(m)) {
        return false;                       /* invariant 3 */
    }
    if (tg->any_timer_armed[dir]) {
        return true;
    }
    now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    wait = throttle_state_wait_ns(&tg->ts, dir, now);
    if (!wait) {
        return false;
    }
    tg->tokens[dir] = m;
    tg->any_timer_armed[dir] = true;
    throttle_member_arm(m, dir, now + wait);
    return true;
}

/* Wakes @m's first request queued in @dir; false if there was none. */
static bool throttle_member_release_one(ThrottleGroupMember *m,
                                        ThrottleDirection dir)
{
    return qemu_co_queue_next(&m->queued[dir]);
}

/*
 * After a request of @m in @dir started: lets the next member's queued
 * request go, now or when its timer fires.  Group lock held.
 */
static void throttle_group_schedule_next(ThrottleGroupMember *m,
                                         ThrottleDirection dir)
{
    ThrottleGroup *tg = m->group;
    ThrottleGroupMember *token = throttle_group_next_token(m, dir);

    if (!token->pending[dir] || throttle_group_schedule_timer(token, dir)) {
        return;
    }
    /* it may go now: @m's own queue first, or the token's at once */
    if (qemu_in_coroutine() && m->ctx == qemu_get_current_aio_context() &&
        throttle_member_release_one(m, dir)) {
        token = m;
    } else {
        tg->any_timer_armed[dir] = true;
        throttle_member_arm(token, dir,
                            qemu_clock_get_ns(QEMU_CLOCK_REALTIME));
    }
    tg->tokens[dir] = token;
}

void coroutine_fn throttle_group_co_intercept(ThrottleGroupMember *m,
                                              int64_t bytes,
                                              ThrottleDirection dir)
{
    ThrottleGroup *tg = m->group;
    bool must_wait;

    g_mutex_lock(&tg->lock);
    must_wait = throttle_group_schedule_timer(m, dir);
    /* a timer is set, or others of this member wait before it: queue */
    if (must_wait || m->pending[dir]) {
        m->pending[dir]++;
        g_mutex_unlock(&tg->lock);
        qemu_co_queue_wait(&m->queued[dir], NULL);
        g_mutex_lock(&tg->lock);
        m->pending[dir]--;
    }
    throttle_state_account(&tg->ts, dir, bytes);
    throttle_group_schedule_next(m, dir);
    g_mutex_unlock(&tg->lock);
}

/*
 * @m's turn in @dir has come (its timer fired, or a drain lets it go):
 * its first queued request runs, or, with none queued, the next member's
 * turn is scheduled.
 */
static void throttle_member_turn(ThrottleGroupMember *m,
                                 ThrottleDirection dir)
{
    if (!throttle_member_release_one(m, dir)) {
        g_mutex_lock(&m->group->lock);
        throttle_group_schedule_next(m, dir);
        g_mutex_unlock(&m->group->lock);
    }
}

static void throttle_member_timer_fired(ThrottleGroupMember *m,
                                        ThrottleDirection dir)
{
    g_mutex_lock(&m->group->lock);
    m->group->any_timer_armed[dir] = false;
    g_mutex_unlock(&m->group->lock);
    throttle_member_turn(m, dir);
}

static void throttle_member_read_timer_cb(void *opaque)
{
    throttle_member_timer_fired(opaque, THROTTLE_READ);
}

static void throttle_member_write_timer_cb(void *opaque)
{
    throttle_member_timer_fired(opaque, THROTTLE_WRITE);
}

/* Invariant 2: what other threads asked of @m's timers. */
static void throttle_member_kick_bh(void *opaque)
{
    ThrottleGroupMember *m = opaque;

    g_mutex_lock(&m->group->lock);
    for (int dir = 0; dir < THROTTLE_DIRECTIONS; dir++) {
        if (m->kick[dir]) {
            m->kick[dir] = false;
            timer_mod(m->timers[dir], m->kick_at[dir]);
        }
    }
    g_mutex_unlock(&m->group->lock);
}

static void throttle_member_attach(ThrottleGroupMember *m, AioContext *ctx)
{
    m->ctx = ctx;
    m->timers[THROTTLE_READ] =
        aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                      throttle_member_read_timer_cb, m);
    m->timers[THROTTLE_WRITE] =
        aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                      throttle_member_write_timer_cb, m);
    m->kick_bh = aio_bh_new(ctx, throttle_member_kick_bh, m);
}

/*
 * Invariant 5: @m is drained, so a timer of it that is armed only holds
 * the group's turn; the turn passes on before the timers go.  Group lock
 * held.
 */
static void throttle_member_detach(ThrottleGroupMember *m)
{
    ThrottleGroup *tg = m->group;

    for (int dir = 0; dir < THROTTLE_DIRECTIONS; dir++) {
        assert(!m->pending[dir]);
        if (timer_pending(m->timers[dir]) || m->kick[dir]) {
            m->kick[dir] = false;
            tg->any_timer_armed[dir] = false;
            throttle_group_schedule_next(m, dir);
        }
        timer_free(m->timers[dir]);
        m->timers[dir] = NULL;
    }
    qemu_bh_delete(m->kick_bh);
    m->kick_bh = NULL;
}

bool throttle_group_exists(const char *group_id)
{
    return user_object_find(group_id, THROTTLE_GROUP_TYPE);
}

bool throttle_group_register(ThrottleGroupMember *m, const char *group_id,
                             AioContext *ctx, Error **errp)
{
    UserObject *obj = user_object_find(group_id, THROTTLE_GROUP_TYPE);
    ThrottleGroup *tg;

    if (!obj) {
        error_setg(errp, "Throttle group '%s' does not exist", group_id);
        return false;
    }
    user_object_ref(obj);                   /* invariant 4 */
    tg = user_object_get_state(obj);
    memset(m, 0, sizeof(*m));
    m->group = tg;
    m->obj = obj;
    for (int dir = 0; dir < THROTTLE_DIRECTIONS; dir++) {
        qemu_co_queue_init(&m->queued[dir]);
    }
    throttle_member_attach(m, ctx);
    g_mutex_lock(&tg->lock);
    tg->members = g_list_append(tg->members, m);
    for (int dir = 0; dir < THROTTLE_DIRECTIONS; dir++) {
        if (!tg->tokens[dir]) {
            tg->tokens[dir] = m;
        }
    }
    g_mutex_unlock(&tg->lock);
    return true;
}

void throttle_group_unregister(ThrottleGroupMember *m)
{
    ThrottleGroup *tg = m->group;

    g_mutex_lock(&tg->lock);
    throttle_member_detach(m);
    for (int dir = 0; dir < THROTTLE_DIRECTIONS; dir++) {
        assert(qemu_co_queue_empty(&m->queued[dir]));  /* invariant 5 */
        if (tg->tokens[dir] == m) {
            ThrottleGroupMember *next = throttle_group_next_member(m);

            tg->tokens[dir] = next == m ? NULL : next;
        }
    }
    tg->members = g_list_remove(tg->members, m);
    g_mutex_unlock(&tg->lock);
    user_object_unref(m->obj);
    m->obj = NULL;
    m->group = NULL;
}

const char *throttle_group_get_id(const ThrottleGroupMember *m)
{
    return m->group->id;
}

void throttle_group_disable_limits(ThrottleGroupMember *m)
{
    if (__atomic_fetch_add(&m->limits_disabled, 1, __ATOMIC_SEQ_CST)) {
        return;
    }
    /* invariant 3: what waits goes now, a pending timer fires at once */
    for (int dir = 0; dir < THROTTLE_DIRECTIONS; dir++) {
        bool armed;

        g_mutex_lock(&m->group->lock);
        armed = timer_pending(m->timers[dir]) || m->kick[dir];
        if (armed) {
            timer_del(m->timers[dir]);
            m->kick[dir] = false;
            m->group->any_timer_armed[dir] = false;
        }
        g_mutex_unlock(&m->group->lock);
        throttle_member_turn(m, dir);
    }
}

void throttle_group_enable_limits(ThrottleGroupMember *m)
{
    int old = __atomic_load_n(&m->limits_disabled, __ATOMIC_SEQ_CST);

    /*
     * A section that began before the member's node joined the graph
     * ends without having begun for it: the count stays at 0 then.
     */
    while (old > 0 &&
           !__atomic_compare_exchange_n(&m->limits_disabled, &old, old - 1,
                                        false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
    }
}

void throttle_group_change_aio_context(ThrottleGroupMember *m,
                                       AioContext *new_ctx)
{
    g_mutex_lock(&m->group->lock);
    throttle_member_detach(m);
    throttle_member_attach(m, new_ctx);
    g_mutex_unlock(&m->group->lock);
}
