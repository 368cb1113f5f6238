/*
 * blkdebug: a filter for tests that injects errors, keeps a state machine
 * and suspends requests, all driven by named events (debug-events.h) that
 * format drivers emit on their file child.  Compatible with QEMU's blkdebug:
 * the filename "blkdebug:CONFIG_FILE:IMAGE", the options, the config file
 * syntax and the messages are the ones QEMU's users and tests rely on.
 *
 * Rules (s->rules[event], each list in reverse order of definition):
 *  - inject-error: when its event occurs in its state, the rule is armed
 *    (moved into s->active_rules).  Every later request of a matching I/O
 *    type and sector then fails with -errno; with once=on only the first,
 *    which also deletes the rule.
 *  - set-state: when its event occurs in its state, the state becomes
 *    new_state, after every rule of that event has been looked at.
 *  - break points (qemu-io "break EVENT TAG"): the request that emits the
 *    event is suspended until "resume TAG"; the break point is used up.
 *  - the event "none" occurs once, when the node has been opened: its
 *    inject-error rules are armed and its set-state rules applied before
 *    the first request.
 *
 * Invariants:
 *  1. The state starts at 1; a rule whose state is 0 applies in any state.
 *  2. s->active_rules holds only inject-error rules that are also in
 *     s->rules[]; an event that arms rules first disarms all others.
 *  3. Every entry of s->suspended_reqs lives on the stack of a coroutine
 *     that is yielded in blkdebug_suspend(); only the code that resumes it
 *     removes it from the list.
 *  4. Everything runs in the node's AioContext thread, so no lock guards
 *     the state; rule_check() yields (unless immediately=on) only after it
 *     is done with the lists.
 */
#include "block/block_int.h"
#include "util/cutils.h"
#include "qapi/qapi-opts.h"

typedef enum BlkdebugIOType {
    BLKDEBUG_IO_TYPE_READ,
    BLKDEBUG_IO_TYPE_WRITE,
    BLKDEBUG_IO_TYPE_WRITE_ZEROES,
    BLKDEBUG_IO_TYPE_DISCARD,
    BLKDEBUG_IO_TYPE_FLUSH,
    BLKDEBUG_IO_TYPE_BLOCK_STATUS,
    BLKDEBUG_IO_TYPE__MAX,
} BlkdebugIOType;

static const char *const blkdebug_io_type_names[BLKDEBUG_IO_TYPE__MAX] = {
    [BLKDEBUG_IO_TYPE_READ]         = "read",
    [BLKDEBUG_IO_TYPE_WRITE]        = "write",
    [BLKDEBUG_IO_TYPE_WRITE_ZEROES] = "write-zeroes",
    [BLKDEBUG_IO_TYPE_DISCARD]      = "discard",
    [BLKDEBUG_IO_TYPE_FLUSH]        = "flush",
    [BLKDEBUG_IO_TYPE_BLOCK_STATUS] = "block-status",
};

/* Without iotype, a rule fails every kind of request but block status,
 * which callers rarely expect to fail. */
#define BLKDEBUG_IO_TYPES_DEFAULT                                       \
    ((1u << BLKDEBUG_IO_TYPE_READ) | (1u << BLKDEBUG_IO_TYPE_WRITE) |   \
     (1u << BLKDEBUG_IO_TYPE_WRITE_ZEROES) |                            \
     (1u << BLKDEBUG_IO_TYPE_DISCARD) | (1u << BLKDEBUG_IO_TYPE_FLUSH))

/* Longest line, key and section name of a config file, as QEMU's parser. */
#define BLKDEBUG_CONFIG_LINE_MAX    1024
#define BLKDEBUG_CONFIG_NAME_MAX    64

typedef enum BlkdebugAction {
    ACTION_INJECT_ERROR,
    ACTION_SET_STATE,
    ACTION_SUSPEND,
} BlkdebugAction;

typedef struct BlkdebugRule {
    BlkdebugEvent event;
    BlkdebugAction action;
    /* 0: any state (invariant 1) */
    uint64_t state;
    union {
        struct {
            int error;
            bool once;
            bool immediately;
            /* byte offset of the sector, or -1 for any request */
            int64_t offset;
            unsigned iotype_mask;
        } inject;
        struct {
            uint64_t new_state;
        } set_state;
        struct {
            char *tag;
        } suspend;
    } options;
} BlkdebugRule;

static void blkdebug_debug_event(BlockDriverState *bs, BlkdebugEvent event);

typedef struct BlkdebugSuspendedReq {
    Coroutine *co;
    const char *tag;
} BlkdebugSuspendedReq;

typedef struct BDRVBlkdebugState {
    /* --- set at open, immutable until close --- */
    char *config_file;              /* as given, possibly "" */
    uint64_t align;
    uint64_t max_transfer;
    uint64_t opt_write_zero;
    uint64_t max_write_zero;
    uint64_t opt_discard;
    uint64_t max_discard;

    /* --- AioContext thread only (invariant 4) --- */
    uint64_t state;
    uint64_t new_state;
    GList *rules[BLKDBG__MAX];      /* BlkdebugRule *, owned */
    GList *active_rules;            /* BlkdebugRule *, invariant 2 */
    GList *suspended_reqs;          /* BlkdebugSuspendedReq *, invariant 3 */
} BDRVBlkdebugState;

/* Rule lists, as read from the config file and the options. */
typedef struct BlkdebugRuleOpts {
    GPtrArray *inject_error;        /* QemuOpts * */
    GPtrArray *set_state;           /* QemuOpts * */
} BlkdebugRuleOpts;

static void blkdebug_rule_free(BlkdebugRule *rule)
{
    if (rule->action == ACTION_SUSPEND) {
        g_free(rule->options.suspend.tag);
    }
    g_free(rule);
}

static void blkdebug_remove_rule(BDRVBlkdebugState *s, BlkdebugRule *rule)
{
    s->active_rules = g_list_remove(s->active_rules, rule);
    s->rules[rule->event] = g_list_remove(s->rules[rule->event], rule);
    blkdebug_rule_free(rule);
}

static void blkdebug_free_rules(BDRVBlkdebugState *s)
{
    int i;

    g_list_free(s->active_rules);
    s->active_rules = NULL;
    for (i = 0; i < BLKDBG__MAX; i++) {
        g_list_free_full(s->rules[i], (GDestroyNotify)blkdebug_rule_free);
        s->rules[i] = NULL;
    }
}

static int blkdebug_add_rule(BDRVBlkdebugState *s, BlkdebugAction action,
                             QemuOpts *opts, Error **errp)
{
    const char *event_name = qemu_opt_get(opts, "event");
    const char *iotype_name;
    BlkdebugRule *rule;
    int event, iotype;

    if (!event_name) {
        error_setg(errp, "Missing event name for rule");
        return -EINVAL;
    }
    event = blkdebug_event_lookup(event_name);
    if (event < 0) {
        error_setg(errp, "invalid parameter value: %s", event_name);
        return -EINVAL;
    }

    rule = g_new0(BlkdebugRule, 1);
    rule->event = event;
    rule->action = action;
    rule->state = qemu_opt_get_number(opts, "state", 0);

    if (action == ACTION_SET_STATE) {
        rule->options.set_state.new_state =
            qemu_opt_get_number(opts, "new_state", 0);
    } else {
        rule->options.inject.error = qemu_opt_get_number(opts, "errno", EIO);
        rule->options.inject.once = qemu_opt_get_bool(opts, "once", false);
        rule->options.inject.immediately =
            qemu_opt_get_bool(opts, "immediately", false);
        rule->options.inject.offset = qemu_opt_has(opts, "sector") ?
            (int64_t)(qemu_opt_get_number(opts, "sector", 0) *
                      BDRV_SECTOR_SIZE) : -1;
        rule->options.inject.iotype_mask = BLKDEBUG_IO_TYPES_DEFAULT;
        iotype_name = qemu_opt_get(opts, "iotype");
        if (iotype_name) {
            iotype = qemu_name_index(blkdebug_io_type_names,
                                     BLKDEBUG_IO_TYPE__MAX, iotype_name);
            if (iotype < 0) {
                error_setg(errp, "invalid parameter value: %s", iotype_name);
                g_free(rule);
                return -EINVAL;
            }
            rule->options.inject.iotype_mask = 1u << iotype;
        }
    }
    s->rules[event] = g_list_prepend(s->rules[event], rule);
    return 0;
}

static GPtrArray *blkdebug_section_list(BlkdebugRuleOpts *ro,
                                        const char *group,
                                        const QemuOptsList **list)
{
    if (!strcmp(group, "inject-error")) {
        *list = &qapi_opts_blkdebug_inject_error;
        return ro->inject_error;
    }
    if (!strcmp(group, "set-state")) {
        *list = &qapi_opts_blkdebug_set_state;
        return ro->set_state;
    }
    return NULL;
}

/*
 * Starts a section from a "[group]" or '[group "id"]' line.  As with
 * QEMU's parser, the name runs up to ']' (or the end of the line, newline
 * included, when ']' is missing) and the id is ignored.
 */
static QemuOpts *blkdebug_config_section(BlkdebugRuleOpts *ro,
                                         const char *line, Error **errp)
{
    char group[BLKDEBUG_CONFIG_NAME_MAX];
    char id[BLKDEBUG_CONFIG_NAME_MAX];
    const QemuOptsList *list;
    GPtrArray *sections;
    QemuOpts *opts;

    if (sscanf(line, "[%63s \"%63[^\"]\"]", group, id) != 2 &&
        sscanf(line, "[%63[^]]]", group) != 1) {
        error_setg(errp, "parse error");
        return NULL;
    }
    sections = blkdebug_section_list(ro, group, &list);
    if (!sections) {
        error_setg(errp, "There is no option group '%s'", group);
        return NULL;
    }
    opts = qemu_opts_create(list);
    g_ptr_array_add(sections, opts);
    return opts;
}

/*
 * Reads the config file: '#' comments, empty lines, "[section]" headers
 * and 'key = "value"' lines.  A key whose value is not quoted gets the
 * empty value, which QEMU's parser does too.
 */
static int blkdebug_read_config_file(BlkdebugRuleOpts *ro, const char *path,
                                     Error **errp)
{
    char line[BLKDEBUG_CONFIG_LINE_MAX];
    char key[BLKDEBUG_CONFIG_NAME_MAX];
    char value[BLKDEBUG_CONFIG_LINE_MAX];
    QemuOpts *section = NULL;
    int ret = 0;
    FILE *f;

    f = fopen(path, "r");
    if (!f) {
        ret = -errno;
        error_setg_errno(errp, -ret, "Could not read blkdebug config file");
        return ret;
    }
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '\n' || line[0] == '#') {
            continue;
        }
        if (line[0] == '[') {
            section = blkdebug_config_section(ro, line, errp);
            if (!section) {
                ret = -EINVAL;
                break;
            }
            continue;
        }
        if (sscanf(line, " %63s = \"%1023[^\"]\"", key, value) != 2) {
            if (sscanf(line, " %63s", key) != 1) {
                error_setg(errp, "parse error");
                ret = -EINVAL;
                break;
            }
            value[0] = '\0';
        }
        if (!section) {
            error_setg(errp, "no group defined");
            ret = -EINVAL;
            break;
        }
        if (!qemu_opt_set(section, key, value, errp)) {
            ret = -EINVAL;
            break;
        }
    }
    if (ret == 0 && ferror(f)) {
        error_setg_errno(errp, EIO, "Could not read blkdebug config file");
        ret = -EIO;
    }
    fclose(f);
    return ret;
}

/*
 * Takes the inline rules "@group.N.key" (from a JSON array) or
 * "@group.key" (a single rule) out of @options.
 */
static int blkdebug_read_inline_rules(BlkdebugRuleOpts *ro, QDict *options,
                                      const char *group, Error **errp)
{
    g_autofree char *prefix = g_strdup_printf("%s.", group);
    const QemuOptsList *list;
    GPtrArray *sections = blkdebug_section_list(ro, group, &list);
    QDict *sub = NULL;
    QemuOpts *opts;
    size_t orig_size;
    unsigned i;
    int ret = -EINVAL;

    qdict_extract_subqdict(options, &sub, prefix);
    orig_size = qdict_size(sub);
    if (!orig_size) {
        ret = 0;
        goto out;
    }

    opts = qemu_opts_absorb_qdict(list, sub, errp);
    if (!opts) {
        goto out;
    }
    if (!qdict_size(sub)) {
        g_ptr_array_add(sections, opts);
        ret = 0;
        goto out;
    }
    qemu_opts_del(opts);
    if (qdict_size(sub) < orig_size) {
        error_setg(errp, "Unknown option '%s' for [%s]",
                   qdict_entry_key(qdict_first(sub)), group);
        goto out;
    }

    for (i = 0; ; i++) {
        g_autofree char *index = g_strdup_printf("%u.", i);
        QDict *section;

        if (!qdict_has_prefixed_entries(sub, index)) {
            break;
        }
        qdict_extract_subqdict(sub, &section, index);
        opts = qemu_opts_absorb_qdict(list, section, errp);
        if (opts && qdict_size(section)) {
            error_setg(errp, "[%s] section doesn't support the option '%s'",
                       group, qdict_entry_key(qdict_first(section)));
            qemu_opts_del(opts);
            opts = NULL;
        }
        qdict_unref(section);
        if (!opts) {
            goto out;
        }
        g_ptr_array_add(sections, opts);
    }
    if (qdict_size(sub)) {
        error_setg(errp, "Unused option '%s' for [%s]",
                   qdict_entry_key(qdict_first(sub)), group);
        goto out;
    }
    ret = 0;
out:
    qdict_unref(sub);
    return ret;
}

/* Rules from the config file come first, then the inline ones; all
 * inject-error rules are added before the set-state rules. */
static int blkdebug_read_rules(BDRVBlkdebugState *s, const char *config,
                               QDict *options, Error **errp)
{
    BlkdebugRuleOpts ro = {
        .inject_error = g_ptr_array_new_with_free_func(
            (GDestroyNotify)qemu_opts_del),
        .set_state = g_ptr_array_new_with_free_func(
            (GDestroyNotify)qemu_opts_del),
    };
    unsigned i;
    int ret = 0;

    if (config && *config) {
        ret = blkdebug_read_config_file(&ro, config, errp);
    }
    if (ret == 0) {
        ret = blkdebug_read_inline_rules(&ro, options, "inject-error", errp);
    }
    if (ret == 0) {
        ret = blkdebug_read_inline_rules(&ro, options, "set-state", errp);
    }
    for (i = 0; ret == 0 && i < ro.inject_error->len; i++) {
        ret = blkdebug_add_rule(s, ACTION_INJECT_ERROR,
                                g_ptr_array_index(ro.inject_error, i), errp);
    }
    for (i = 0; ret == 0 && i < ro.set_state->len; i++) {
        ret = blkdebug_add_rule(s, ACTION_SET_STATE,
                                g_ptr_array_index(ro.set_state, i), errp);
    }
    g_ptr_array_free(ro.inject_error, true);
    g_ptr_array_free(ro.set_state, true);
    return ret;
}

static void blkdebug_parse_filename(const char *filename, QDict *options,
                                    Error **errp)
{
    const char *rest, *colon;
    g_autofree char *config = NULL;

    if (!strstart(filename, "blkdebug:", &rest)) {
        /*
         * driver=blkdebug with a plain name (qemu-io "open -o
         * driver=blkdebug,config=... IMAGE"): the rules come from the
         * options and the name is the image, as in QEMU.
         */
        qdict_put_str(options, "x-image", filename);
        return;
    }
    colon = strchr(rest, ':');
    if (!colon) {
        error_setg(errp, "blkdebug requires both config file and image path");
        return;
    }
    config = g_strndup(rest, colon - rest);
    qdict_put_str(options, "config", config);
    if (colon[1]) {
        qdict_put_str(options, "x-image", colon + 1);
    }
}

/* Checks one size option against its constraints; 0 means unset. */
static bool blkdebug_check_limit(const char *name, uint64_t value,
                                 uint64_t multiple_of, Error **errp)
{
    if (value && (value >= INT_MAX || !QEMU_IS_ALIGNED(value, multiple_of))) {
        error_setg(errp, "Cannot meet constraints with %s %" PRIu64,
                   name, value);
        return false;
    }
    return true;
}

static int blkdebug_read_limits(BlockDriverState *bs, QemuOpts *opts,
                                Error **errp)
{
    BDRVBlkdebugState *s = bs->opaque;
    uint64_t align;

    s->align = qemu_opt_get_size(opts, "align", 0);
    if (s->align && (s->align >= INT_MAX || !is_power_of_2(s->align))) {
        error_setg(errp, "Cannot meet constraints with align %" PRIu64,
                   s->align);
        return -EINVAL;
    }
    align = MAX(s->align, bs->file->bs->bl.request_alignment);

    s->max_transfer = qemu_opt_get_size(opts, "max-transfer", 0);
    s->opt_write_zero = qemu_opt_get_size(opts, "opt-write-zero", 0);
    s->max_write_zero = qemu_opt_get_size(opts, "max-write-zero", 0);
    s->opt_discard = qemu_opt_get_size(opts, "opt-discard", 0);
    s->max_discard = qemu_opt_get_size(opts, "max-discard", 0);
    if (!blkdebug_check_limit("max-transfer", s->max_transfer, align, errp) ||
        !blkdebug_check_limit("opt-write-zero", s->opt_write_zero, align,
                              errp) ||
        !blkdebug_check_limit("max-write-zero", s->max_write_zero,
                              MAX(s->opt_write_zero, align), errp) ||
        !blkdebug_check_limit("opt-discard", s->opt_discard, align, errp) ||
        !blkdebug_check_limit("max-discard", s->max_discard,
                              MAX(s->opt_discard, align), errp)) {
        return -EINVAL;
    }
    return 0;
}

static int blkdebug_open(BlockDriverState *bs, QDict *options, int flags,
                         Error **errp)
{
    BDRVBlkdebugState *s = bs->opaque;
    QemuOpts *opts;
    int ret;

    opts = qemu_opts_absorb_qdict(&qapi_opts_blkdebug_runtime, options,
                                  errp);
    if (!opts) {
        return -EINVAL;
    }
    s->state = 1;
    s->config_file = g_strdup(qemu_opt_get(opts, "config"));
    ret = blkdebug_read_rules(s, s->config_file, options, errp);
    if (ret < 0) {
        goto fail;
    }

    bs->file = bdrv_open_child(qemu_opt_get(opts, "x-image"), options,
                               "image", bs, 0, errp);
    if (!bs->file) {
        ret = -EINVAL;
        goto fail;
    }
    ret = blkdebug_read_limits(bs, opts, errp);
    if (ret < 0) {
        goto fail_child;
    }

    bdrv_inherit_file_flags(bs);
    qemu_opts_del(opts);
    /* The rules of event "none" take effect at once, as in QEMU: 251
     * fails reads of given sectors from the first request on. */
    blkdebug_debug_event(bs, BLKDBG_NONE);
    return 0;

fail_child:
    bdrv_unref_child(bs, bs->file);
    bs->file = NULL;
fail:
    blkdebug_free_rules(s);
    g_free(s->config_file);
    s->config_file = NULL;
    qemu_opts_del(opts);
    return ret;
}

static void blkdebug_close(BlockDriverState *bs)
{
    BDRVBlkdebugState *s = bs->opaque;

    /* A suspended request would have kept the drain before close waiting. */
    assert(!s->suspended_reqs);
    blkdebug_free_rules(s);
    g_free(s->config_file);
}

static int blkdebug_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    /* Rules and limits stay as they were opened; nothing to stage. */
    return 0;
}

/*
 * Fails the request with the first armed rule that matches it, if any
 * (invariant 2).  Unless the rule says immediately=on, the failure is
 * reported after a trip through the event loop, as real I/O would be.
 */
static int coroutine_fn rule_check(BlockDriverState *bs, int64_t offset,
                                   int64_t bytes, BlkdebugIOType iotype)
{
    BDRVBlkdebugState *s = bs->opaque;
    BlkdebugRule *rule = NULL;
    bool immediately;
    GList *l;
    int error;

    for (l = s->active_rules; l; l = l->next) {
        BlkdebugRule *r = l->data;
        int64_t inject_offset = r->options.inject.offset;

        if ((inject_offset == -1 ||
             (bytes && inject_offset >= offset &&
              inject_offset < offset + bytes)) &&
            (r->options.inject.iotype_mask & (1u << iotype))) {
            rule = r;
            break;
        }
    }
    if (!rule || !rule->options.inject.error) {
        return 0;
    }

    error = rule->options.inject.error;
    immediately = rule->options.inject.immediately;
    if (rule->options.inject.once) {
        blkdebug_remove_rule(s, rule);
    }
    if (!immediately) {
        aio_co_schedule(qemu_get_current_aio_context(),
                        qemu_coroutine_self());
        qemu_coroutine_yield();
    }
    return -error;
}

/*
 * The generic layer aligns requests to the limits set in
 * blkdebug_refresh_limits(); that is what align= and max-transfer= test,
 * so a violation is a bug in the generic layer, asserted here.
 */
static void blkdebug_check_request(BlockDriverState *bs, int64_t offset,
                                   int64_t bytes)
{
    assert(QEMU_IS_ALIGNED(offset, bs->bl.request_alignment));
    assert(QEMU_IS_ALIGNED(bytes, bs->bl.request_alignment) ||
           offset + bytes == bdrv_getlength(bs));
    if (bs->bl.max_transfer) {
        assert(bytes <= bs->bl.max_transfer);
    }
}

static int coroutine_fn blkdebug_co_preadv(BlockDriverState *bs,
                                           int64_t offset, int64_t bytes,
                                           QEMUIOVector *qiov,
                                           BdrvRequestFlags flags)
{
    int err;

    blkdebug_check_request(bs, offset, bytes);
    err = rule_check(bs, offset, bytes, BLKDEBUG_IO_TYPE_READ);
    if (err) {
        return err;
    }
    return bdrv_co_preadv(bs->file, offset, bytes, qiov, flags);
}

static int coroutine_fn blkdebug_co_pwritev(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov,
                                            BdrvRequestFlags flags)
{
    int err;

    blkdebug_check_request(bs, offset, bytes);
    err = rule_check(bs, offset, bytes, BLKDEBUG_IO_TYPE_WRITE);
    if (err) {
        return err;
    }
    return bdrv_co_pwritev(bs->file, offset, bytes, qiov, flags);
}

static int coroutine_fn blkdebug_co_pwrite_zeroes(BlockDriverState *bs,
                                                  int64_t offset,
                                                  int64_t bytes,
                                                  BdrvRequestFlags flags)
{
    BDRVBlkdebugState *s = bs->opaque;
    int err;

    /* Refusing the unaligned parts makes the generic layer fall back to
     * writing zeroed buffers there, which is what opt-write-zero tests. */
    if (s->opt_write_zero && (!QEMU_IS_ALIGNED(offset, s->opt_write_zero) ||
                              !QEMU_IS_ALIGNED(bytes, s->opt_write_zero))) {
        return -ENOTSUP;
    }
    if (s->max_write_zero) {
        assert(bytes <= s->max_write_zero);
    }
    err = rule_check(bs, offset, bytes, BLKDEBUG_IO_TYPE_WRITE_ZEROES);
    if (err) {
        return err;
    }
    return bdrv_co_pwrite_zeroes(bs->file, offset, bytes, flags);
}

static int coroutine_fn blkdebug_co_pdiscard(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes)
{
    BDRVBlkdebugState *s = bs->opaque;
    int err;

    /*
     * opt-discard is a preference, as in QEMU: the pieces the generic layer
     * cuts off before and after the aligned bulk still reach the image
     * (whose own granularity decides what they free), and only the bulk
     * is checked for alignment.  Dropping them made a 30M discard under
     * opt-discard=15M free no more than the one aligned 15M in it.
     */
    if (s->opt_discard && bytes >= s->opt_discard) {
        assert(QEMU_IS_ALIGNED(offset, s->opt_discard));
        assert(QEMU_IS_ALIGNED(bytes, s->opt_discard));
    }
    if (s->max_discard) {
        assert(bytes <= s->max_discard);
    }
    err = rule_check(bs, offset, bytes, BLKDEBUG_IO_TYPE_DISCARD);
    if (err) {
        return err;
    }
    return bdrv_co_pdiscard(bs->file, offset, bytes);
}

/* The whole flush, so that an injected error stops it before the image. */
static int coroutine_fn blkdebug_co_flush(BlockDriverState *bs)
{
    int err = rule_check(bs, 0, 0, BLKDEBUG_IO_TYPE_FLUSH);

    if (err) {
        return err;
    }
    return bdrv_co_flush(bs->file->bs);
}

static int coroutine_fn blkdebug_co_block_status(BlockDriverState *bs,
                                                 bool want_zero,
                                                 int64_t offset,
                                                 int64_t bytes, int64_t *pnum,
                                                 int64_t *map,
                                                 BlockDriverState **file)
{
    int err = rule_check(bs, offset, bytes, BLKDEBUG_IO_TYPE_BLOCK_STATUS);

    if (err) {
        return err;
    }
    *pnum = bytes;
    *map = offset;
    *file = bs->file->bs;
    return BDRV_BLOCK_RAW | BDRV_BLOCK_OFFSET_VALID;
}

/* What makes two blkdebug nodes over the same image behave differently. */
static const char *const blkdebug_strong_runtime_opts[] = {
    "config",
    "inject-error.",
    "set-state.",
    "align",
    "max-transfer",
    "opt-write-zero",
    "max-write-zero",
    "opt-discard",
    "max-discard",
    NULL
};

/*
 * "blkdebug:CONFIG:IMAGE" says everything only when the rules come from
 * the config file alone and no limit was set; otherwise json: is used.
 */
static void blkdebug_refresh_filename(BlockDriverState *bs)
{
    BDRVBlkdebugState *s = bs->opaque;
    const char *const *o;
    int len;

    if (!bs->file->bs->exact_filename[0]) {
        return;
    }
    for (o = blkdebug_strong_runtime_opts; *o; o++) {
        size_t n = strlen(*o);

        if (!strcmp(*o, "config")) {
            continue;
        }
        if ((*o)[n - 1] == '.' ? qdict_has_prefixed_entries(bs->options, *o)
                               : qdict_haskey(bs->options, *o)) {
            return;
        }
    }
    len = snprintf(bs->exact_filename, sizeof(bs->exact_filename),
                   "blkdebug:%s:%s", s->config_file ? s->config_file : "",
                   bs->file->bs->exact_filename);
    if (len >= sizeof(bs->exact_filename)) {
        /* a truncated name would open something else */
        bs->exact_filename[0] = '\0';
    }
}

static void blkdebug_refresh_limits(BlockDriverState *bs, Error **errp)
{
    BDRVBlkdebugState *s = bs->opaque;

    if (s->align) {
        bs->bl.request_alignment = s->align;
    }
    if (s->max_transfer) {
        bs->bl.max_transfer = s->max_transfer;
    }
    if (s->opt_write_zero) {
        bs->bl.pwrite_zeroes_alignment = s->opt_write_zero;
    }
    if (s->max_write_zero) {
        bs->bl.max_pwrite_zeroes = s->max_write_zero;
    }
    if (s->opt_discard) {
        bs->bl.pdiscard_alignment = s->opt_discard;
    }
    if (s->max_discard) {
        bs->bl.max_pdiscard = s->max_discard;
    }
}

/* Yields until "resume TAG" or the removal of the break point; @tag is
 * freed here (invariant 3). */
static void coroutine_fn blkdebug_suspend(BDRVBlkdebugState *s, char *tag)
{
    BlkdebugSuspendedReq req = {
        .co = qemu_coroutine_self(),
        .tag = tag,
    };

    s->suspended_reqs = g_list_prepend(s->suspended_reqs, &req);
    /* qemu-io users and tests wait for these lines, as with QEMU */
    printf("blkdebug: Suspended request '%s'\n", tag);
    qemu_coroutine_yield();
    printf("blkdebug: Resuming request '%s'\n", tag);
    g_free(tag);
}

static void blkdebug_debug_event(BlockDriverState *bs, BlkdebugEvent event)
{
    BDRVBlkdebugState *s = bs->opaque;
    GList *suspend_tags = NULL;
    bool injected = false;
    GList *l, *next;

    assert((int)event >= 0 && event < BLKDBG__MAX);
    s->new_state = s->state;
    for (l = s->rules[event]; l; l = next) {
        BlkdebugRule *rule = l->data;

        next = l->next;
        if (rule->state && rule->state != s->state) {
            continue;
        }
        switch (rule->action) {
        case ACTION_INJECT_ERROR:
            if (!injected) {
                g_list_free(s->active_rules);
                s->active_rules = NULL;
                injected = true;
            }
            s->active_rules = g_list_prepend(s->active_rules, rule);
            break;
        case ACTION_SET_STATE:
            s->new_state = rule->options.set_state.new_state;
            break;
        case ACTION_SUSPEND:
            /* Only a request (a coroutine) can wait; a break point hit
             * outside one stays armed for the next request. */
            if (qemu_in_coroutine()) {
                suspend_tags = g_list_append(suspend_tags,
                                             rule->options.suspend.tag);
                rule->options.suspend.tag = NULL;
                blkdebug_remove_rule(s, rule);
            }
            break;
        }
    }
    for (l = suspend_tags; l; l = l->next) {
        blkdebug_suspend(s, l->data);
    }
    g_list_free(suspend_tags);
    s->state = s->new_state;
}

static int blkdebug_debug_breakpoint(BlockDriverState *bs, const char *event,
                                     const char *tag)
{
    BDRVBlkdebugState *s = bs->opaque;
    int ev = blkdebug_event_lookup(event);
    BlkdebugRule *rule;

    if (ev < 0) {
        return -ENOENT;
    }
    rule = g_new0(BlkdebugRule, 1);
    rule->event = ev;
    rule->action = ACTION_SUSPEND;
    rule->state = 0;
    rule->options.suspend.tag = g_strdup(tag);
    s->rules[ev] = g_list_prepend(s->rules[ev], rule);
    return 0;
}

/* Resumes the suspended requests with @tag (all of them, or the first). */
static int blkdebug_resume_tag(BDRVBlkdebugState *s, const char *tag,
                               bool all)
{
    GList *l = s->suspended_reqs;
    int ret = -ENOENT;

    while (l) {
        BlkdebugSuspendedReq *req = l->data;
        GList *next = l->next;

        if (!strcmp(req->tag, tag)) {
            s->suspended_reqs = g_list_delete_link(s->suspended_reqs, l);
            aio_co_wake(req->co);
            ret = 0;
            if (!all) {
                break;
            }
            /* the woken request may have changed the list */
            next = s->suspended_reqs;
        }
        l = next;
    }
    return ret;
}

static int blkdebug_debug_resume(BlockDriverState *bs, const char *tag)
{
    return blkdebug_resume_tag(bs->opaque, tag, false);
}

/*
 * Removes the break points with @tag and lets requests suspended on them
 * go on.  As in QEMU, the result says whether a break point was removed,
 * not whether a request was resumed.
 */
static int blkdebug_debug_remove_breakpoint(BlockDriverState *bs,
                                            const char *tag)
{
    BDRVBlkdebugState *s = bs->opaque;
    int ret = -ENOENT;
    GList *l, *next;
    int i;

    for (i = 0; i < BLKDBG__MAX; i++) {
        for (l = s->rules[i]; l; l = next) {
            BlkdebugRule *rule = l->data;

            next = l->next;
            if (rule->action == ACTION_SUSPEND &&
                !strcmp(rule->options.suspend.tag, tag)) {
                blkdebug_remove_rule(s, rule);
                ret = 0;
            }
        }
    }
    blkdebug_resume_tag(s, tag, true);
    return ret;
}

static bool blkdebug_debug_is_suspended(BlockDriverState *bs,
                                        const char *tag)
{
    BDRVBlkdebugState *s = bs->opaque;
    GList *l;

    for (l = s->suspended_reqs; l; l = l->next) {
        BlkdebugSuspendedReq *req = l->data;

        if (!strcmp(req->tag, tag)) {
            return true;
        }
    }
    return false;
}

static const BlockDriver bdrv_blkdebug = {
    .format_name                    = "blkdebug",
    .protocol_name                  = "blkdebug",
    .instance_size                  = sizeof(BDRVBlkdebugState),
    .is_filter                      = true,
    .runtime_opts                   = &qapi_opts_blkdebug_runtime,
    .strong_runtime_opts            = blkdebug_strong_runtime_opts,
    .bdrv_parse_filename            = blkdebug_parse_filename,
    .bdrv_open                      = blkdebug_open,
    .bdrv_close                     = blkdebug_close,
    .bdrv_reopen_prepare            = blkdebug_reopen_prepare,
    .bdrv_co_preadv                 = blkdebug_co_preadv,
    .bdrv_co_pwritev                = blkdebug_co_pwritev,
    .bdrv_co_pwrite_zeroes          = blkdebug_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = blkdebug_co_pdiscard,
    .bdrv_co_flush                  = blkdebug_co_flush,
    .bdrv_co_block_status           = blkdebug_co_block_status,
    .bdrv_co_truncate               = bdrv_filter_co_truncate,
    .bdrv_getlength                 = bdrv_filter_getlength,
    .bdrv_refresh_filename          = blkdebug_refresh_filename,
    .bdrv_refresh_limits            = blkdebug_refresh_limits,
    .bdrv_debug_event               = blkdebug_debug_event,
    .bdrv_debug_breakpoint          = blkdebug_debug_breakpoint,
    .bdrv_debug_remove_breakpoint   = blkdebug_debug_remove_breakpoint,
    .bdrv_debug_resume              = blkdebug_debug_resume,
    .bdrv_debug_is_suspended        = blkdebug_debug_is_suspended,
};

block_init(bdrv_register, bdrv_blkdebug)
