/*
 * QemuOpts: option values checked against a generated QemuOptsList.
 *
 * Invariants:
 *  1. Every QemuOpt has a description in opts->list and a value that
 *     passed the check for its type (so the getters cannot fail).
 *  2. A name appears at most once: setting it again replaces the value
 *     in place, keeping the order options were first given in.
 *
 * A value keeps the QType it came with from a QDict (a json: number stays
 * a number when the options are turned back into a dict); values set from
 * text are strings, as in QEMU.
 */
#include "util/qemu-option.h"
#include "util/cutils.h"

typedef struct QemuOpt {
    const QemuOptDesc *desc;
    char *str;
    QType type;
} QemuOpt;

struct QemuOpts {
    const QemuOptsList *list;
    GPtrArray *opts;
};

static void qemu_opt_free(gpointer data)
{
    QemuOpt *opt = data;

    g_free(opt->str);
    g_free(opt);
}

QemuOpts *qemu_opts_create(const QemuOptsList *list)
{
    QemuOpts *opts = g_new0(QemuOpts, 1);

    opts->list = list;
    opts->opts = g_ptr_array_new_with_free_func(qemu_opt_free);
    return opts;
}

void qemu_opts_del(QemuOpts *opts)
{
    if (!opts) {
        return;
    }
    g_ptr_array_unref(opts->opts);
    g_free(opts);
}

const QemuOptDesc *qemu_opts_find_desc(const QemuOptsList *list,
                                       const char *name)
{
    for (const QemuOptDesc *desc = list->desc; desc->name; desc++) {
        if (!strcmp(desc->name, name)) {
            return desc;
        }
    }
    return NULL;
}

static int qemu_opt_find_index(QemuOpts *opts, const char *name)
{
    for (guint i = 0; i < opts->opts->len; i++) {
        QemuOpt *opt = g_ptr_array_index(opts->opts, i);

        if (!strcmp(opt->desc->name, name)) {
            return i;
        }
    }
    return -1;
}

static QemuOpt *qemu_opt_find(QemuOpts *opts, const char *name)
{
    int i = qemu_opt_find_index(opts, name);

    return i < 0 ? NULL : g_ptr_array_index(opts->opts, i);
}

/* How each type is named: in error messages, and in qemu-img's help. */
static const struct {
    const char *name;
    const char *help;
} qemu_opt_type_names[] = {
    [QEMU_OPT_STRING] = { "string", "str" },
    [QEMU_OPT_BOOL] = { "boolean", "bool (on/off)" },
    [QEMU_OPT_NUMBER] = { "number", "num" },
    [QEMU_OPT_SIZE] = { "size", "size" },
    /* qemu-img shows enumerations as strings; the help lists the values. */
    [QEMU_OPT_ENUM] = { "string", "str" },
};

static const char *qemu_opt_type_name(const QemuOptDesc *desc)
{
    assert(desc->type < ARRAY_SIZE(qemu_opt_type_names));
    return qemu_opt_type_names[desc->type].name;
}

static bool parse_option_number(const char *name, const char *value,
                                uint64_t *ret, Error **errp)
{
    const char *p = value;
    int err = qemu_strtou64(value, NULL, 0, ret);

    if (!err) {
        return true;
    }
    while (g_ascii_isspace(*p)) {
        p++;
    }
    /*
     * QEMU 7.2 reads a number option as strtoull() does: "-1" is
     * UINT64_MAX, and the option's own range check (e.g. "Refcount
     * width must be a power of two ...") is what refuses it.  Scripts
     * and QEMU's tests rely on those messages.
     */
    if (err == -ERANGE && *p == '-' &&
        qemu_strtou64(p + 1, NULL, 0, ret) == 0 && p[1] != '-' &&
        !g_ascii_isspace(p[1])) {
        *ret = -*ret;
        return true;
    }
    if (err == -ERANGE) {
        error_setg(errp, "Value '%s' is too large for parameter '%s'",
                   value, name);
    } else {
        error_setg(errp, "Parameter '%s' expects a number", name);
    }
    return false;
}

static bool parse_option_size(const char *name, const char *value,
                              uint64_t *ret, Error **errp)
{
    if (qemu_strtosz(value, NULL, ret) < 0) {
        error_setg(errp, "Parameter '%s' expects a non-negative number "
                   "below 2^64", name);
        error_append_hint(errp, "Optional suffix k, M, G, T, P or E means "
                          "kilo-, mega-, giga-, tera-, peta-\n"
                          "and exabytes, respectively.\n");
        return false;
    }
    return true;
}

static int parse_option_enum(const QemuOptDesc *desc, const char *value)
{
    for (int i = 0; desc->enum_values[i]; i++) {
        if (!strcmp(desc->enum_values[i], value)) {
            return i;
        }
    }
    return -1;
}

/* Checks @value against @desc; the messages are QEMU's where it has one. */
static bool qemu_opt_check(const QemuOptDesc *desc, const char *value,
                           QType type, Error **errp)
{
    uint64_t num;
    bool b;

    if (type == QTYPE_QNULL) {
        error_setg(errp, "Invalid parameter type for '%s', expected: %s",
                   desc->name, qemu_opt_type_name(desc));
        return false;
    }
    switch (desc->type) {
    case QEMU_OPT_STRING:
        return true;
    case QEMU_OPT_BOOL:
        return qapi_bool_parse(desc->name, value, &b, errp);
    case QEMU_OPT_NUMBER:
        return parse_option_number(desc->name, value, &num, errp);
    case QEMU_OPT_SIZE:
        return parse_option_size(desc->name, value, &num, errp);
    case QEMU_OPT_ENUM:
        if (parse_option_enum(desc, value) < 0) {
            /* QEMU says "invalid parameter value: nope" without naming
             * the parameter; ours names both (docs/compatibility.md). */
            error_setg(errp, "Parameter '%s' does not accept value '%s'",
                       desc->name, value);
            return false;
        }
        return true;
    }
    g_assert_not_reached();
}

/* Stores an already checked value, replacing any earlier one in place. */
static void qemu_opt_store(QemuOpts *opts, const QemuOptDesc *desc,
                           const char *value, QType type)
{
    QemuOpt *opt = qemu_opt_find(opts, desc->name);

    if (!opt) {
        opt = g_new0(QemuOpt, 1);
        opt->desc = desc;
        g_ptr_array_add(opts->opts, opt);
    }
    g_free(opt->str);
    opt->str = g_strdup(value);
    opt->type = type;
}

static bool qemu_opt_set_typed(QemuOpts *opts, const char *name,
                               const char *value, QType type, Error **errp)
{
    const QemuOptDesc *desc = qemu_opts_find_desc(opts->list, name);

    if (!desc) {
        error_setg(errp, "Invalid parameter '%s'", name);
        return false;
    }
    if (!qemu_opt_check(desc, value, type, errp)) {
        return false;
    }
    qemu_opt_store(opts, desc, value, type);
    return true;
}

bool qemu_opt_set(QemuOpts *opts, const char *name, const char *value,
                  Error **errp)
{
    return qemu_opt_set_typed(opts, name, value, QTYPE_QSTRING, errp);
}

bool qemu_opt_set_number(QemuOpts *opts, const char *name, uint64_t val,
                         Error **errp)
{
    char text[24];

    snprintf(text, sizeof(text), "%" PRIu64, val);
    return qemu_opt_set_typed(opts, name, text, QTYPE_QNUM, errp);
}

bool qemu_opt_set_bool(QemuOpts *opts, const char *name, bool val,
                       Error **errp)
{
    return qemu_opt_set_typed(opts, name, val ? "on" : "off", QTYPE_QSTRING,
                              errp);
}

bool qemu_opt_unset(QemuOpts *opts, const char *name)
{
    int i = qemu_opt_find_index(opts, name);

    if (i < 0) {
        return false;
    }
    g_ptr_array_remove_index(opts->opts, i);
    return true;
}

QemuOpts *qemu_opts_absorb_qdict(const QemuOptsList *list, QDict *options,
                                 Error **errp)
{
    QemuOpts *opts = qemu_opts_create(list);
    const QDictEntry *e, *next;

    /* Check everything first: on error @options is left as it was. */
    for (e = qdict_first(options); e; e = qdict_next(options, e)) {
        const QemuOptDesc *desc = qemu_opts_find_desc(list,
                                                      qdict_entry_key(e));

        if (desc && !qemu_opt_check(desc, qdict_entry_value(e),
                                    qdict_entry_type(e), errp)) {
            qemu_opts_del(opts);
            return NULL;
        }
    }
    for (e = qdict_first(options); e; e = next) {
        const QemuOptDesc *desc = qemu_opts_find_desc(list,
                                                      qdict_entry_key(e));

        next = qdict_next(options, e);
        if (desc) {
            qemu_opt_store(opts, desc, qdict_entry_value(e),
                           qdict_entry_type(e));
            qdict_del(options, desc->name);
        }
    }
    return opts;
}

/*
 * "a=b,c=d": a name runs to '=' or ','; a value runs to the next single
 * ',' with ",," standing for a comma; a name without '=' means "name=on".
 */
QemuOpts *qemu_opts_parse(const QemuOptsList *list, const char *params,
                          Error **errp)
{
    QemuOpts *opts = qemu_opts_create(list);
    const char *p = params;

    while (*p) {
        size_t name_len = strcspn(p, "=,");
        g_autofree char *name = g_strndup(p, name_len);
        g_autoptr(GString) value = g_string_new(NULL);
        const QemuOptDesc *desc;

        p += name_len;
        if (*p == '=') {
            for (p++; *p; p++) {
                if (*p == ',') {
                    if (p[1] != ',') {
                        break;
                    }
                    p++;
                }
                g_string_append_c(value, *p);
            }
        } else {
            g_string_append(value, "on");
        }
        desc = qemu_opts_find_desc(list, name);
        if (desc && desc->type == QEMU_OPT_ENUM) {
            qemu_opt_store(opts, desc, value->str, QTYPE_QSTRING);
        } else if (!qemu_opt_set(opts, name, value->str, errp)) {
            qemu_opts_del(opts);
            return NULL;
        }
        if (*p == ',') {
            p++;
        }
    }
    return opts;
}

bool qemu_opts_check_enums(QemuOpts *opts, Error **errp)
{
    for (guint i = 0; i < opts->opts->len; i++) {
        QemuOpt *opt = g_ptr_array_index(opts->opts, i);

        if (opt->desc->type == QEMU_OPT_ENUM &&
            !qemu_opt_check(opt->desc, opt->str, opt->type, errp)) {
            return false;
        }
    }
    return true;
}

bool qemu_opt_has(QemuOpts *opts, const char *name)
{
    return qemu_opt_find(opts, name) != NULL;
}

const char *qemu_opt_get(QemuOpts *opts, const char *name)
{
    QemuOpt *opt = qemu_opt_find(opts, name);
    const QemuOptDesc *desc;

    if (opt) {
        return opt->str;
    }
    desc = qemu_opts_find_desc(opts->list, name);
    return desc ? desc->def_value_str : NULL;
}

/*
 * The given value, else the schema default, else @defval; values were
 * checked when set and defaults when the tables were generated, so a
 * parse failure here is a bug.
 */
bool qemu_opt_get_bool(QemuOpts *opts, const char *name, bool defval)
{
    const char *value = qemu_opt_get(opts, name);
    bool ret = defval;

    if (value) {
        qapi_bool_parse(name, value, &ret, &error_abort);
    }
    return ret;
}

/* A parser of one unsigned option type: parse_option_number or _size. */
typedef bool QemuOptU64Parser(const char *name, const char *value,
                              uint64_t *ret, Error **errp);

/* qemu_opt_get_number() and _size(): they differ only in the parser. */
static uint64_t qemu_opt_get_u64(QemuOpts *opts, const char *name,
                                 uint64_t defval, QemuOptU64Parser *parse)
{
    const char *value = qemu_opt_get(opts, name);
    uint64_t ret = defval;

    if (value) {
        parse(name, value, &ret, &error_abort);
    }
    return ret;
}

uint64_t qemu_opt_get_number(QemuOpts *opts, const char *name,
                             uint64_t defval)
{
    return qemu_opt_get_u64(opts, name, defval, parse_option_number);
}

uint64_t qemu_opt_get_size(QemuOpts *opts, const char *name,
                           uint64_t defval)
{
    return qemu_opt_get_u64(opts, name, defval, parse_option_size);
}

int qemu_opt_get_enum(QemuOpts *opts, const char *name)
{
    const QemuOptDesc *desc = qemu_opts_find_desc(opts->list, name);
    const char *value = qemu_opt_get(opts, name);

    if (!desc || desc->type != QEMU_OPT_ENUM || !value) {
        return -1;
    }
    return parse_option_enum(desc, value);
}

char *qemu_opt_get_del(QemuOpts *opts, const char *name)
{
    char *value = g_strdup(qemu_opt_get(opts, name));

    qemu_opt_unset(opts, name);
    return value;
}

QDict *qemu_opts_to_qdict(QemuOpts *opts, QDict *qdict)
{
    if (!qdict) {
        qdict = qdict_new();
    }
    for (guint i = 0; i < opts->opts->len; i++) {
        QemuOpt *opt = g_ptr_array_index(opts->opts, i);

        qdict_put_typed(qdict, opt->desc->name, opt->str, opt->type);
    }
    return qdict;
}

/*
 * The merged table owns one block: the list, then the descriptions.  The
 * strings still belong to the generated tables, which live for ever.
 */
QemuOptsList *qemu_opts_append(QemuOptsList *dst, const QemuOptsList *list)
{
    size_t n_dst = 0, n_list = 0, n = 0;
    QemuOptsList *merged;
    QemuOptDesc *desc;

    while (dst && dst->desc[n_dst].name) {
        n_dst++;
    }
    while (list->desc[n_list].name) {
        n_list++;
    }
    merged = g_malloc0(sizeof(*merged) +
                       (n_dst + n_list + 1) * sizeof(QemuOptDesc));
    desc = (QemuOptDesc *)(merged + 1);
    merged->name = dst ? dst->name : list->name;
    merged->desc = desc;
    for (size_t i = 0; i < n_dst; i++) {
        desc[n++] = dst->desc[i];
    }
    for (size_t i = 0; i < n_list; i++) {
        if (!dst || !qemu_opts_find_desc(dst, list->desc[i].name)) {
            desc[n++] = list->desc[i];
        }
    }
    /* A previous merge result is consumed, as QEMU's callers expect. */
    qemu_opts_free(dst);
    return merged;
}

void qemu_opts_free(QemuOptsList *list)
{
    g_free(list);
}

static const char *qemu_opt_help_type(const QemuOptDesc *desc)
{
    assert(desc->type < ARRAY_SIZE(qemu_opt_type_names));
    return qemu_opt_type_names[desc->type].help;
}

static int qemu_opt_desc_cmp(gconstpointer a, gconstpointer b)
{
    const QemuOptDesc *const *da = a;
    const QemuOptDesc *const *db = b;

    return strcmp((*da)->name, (*db)->name);
}

/* The layout of `qemu-img create -o help`: sorted, "  %-22s - help". */
void qemu_opts_print_help(const QemuOptsList *list, bool print_caption)
{
    g_autoptr(GPtrArray) sorted = g_ptr_array_new();

    for (const QemuOptDesc *desc = list->desc; desc->name; desc++) {
        g_ptr_array_add(sorted, (gpointer)desc);
    }
    g_ptr_array_sort(sorted, qemu_opt_desc_cmp);

    if (print_caption) {
        printf("Supported options:\n");
    }
    for (guint i = 0; i < sorted->len; i++) {
        const QemuOptDesc *desc = g_ptr_array_index(sorted, i);
        g_autofree char *left = g_strdup_printf("%s=<%s>", desc->name,
                                                qemu_opt_help_type(desc));

        if (desc->help) {
            printf("  %-22s - %s\n", left, desc->help);
        } else {
            printf("  %s\n", left);
        }
    }
}
