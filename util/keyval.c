/*
 * KEY=VALUE,... option strings (QEMU's keyval syntax) into flat QDicts.
 *
 * Syntax:
 *   params   = [ element { "," element } ] [ "," ]
 *   element  = key "=" value | implied-value   (implied: first element only)
 *   key      = fragment { "." fragment }
 *   fragment = letter { letter | digit | "-" | "_" }    at most 127 bytes
 *            | digit { digit }                          list index, not first
 *   value    = any text; ",," stands for one ","
 *
 * An implied value runs to the first "," (no escaping there), as QEMU
 * reads it.  A repeated key overrides the earlier one.  keyval_parse()
 * then checks the keys as a tree (keyval_parse_flat(), which reads as
 * QemuOpts do, does not): a key cannot be both a value and a prefix
 * ("a=1,a.b=2"), and the members under a prefix are either all list
 * indexes 0..n-1 or all names.  The result stays flat: dotted keys, string
 * values, in the order they were first written.
 */
#include "util/qdict.h"

/* A fragment of 128 bytes or more is refused, as QEMU does. */
#define KEYVAL_FRAGMENT_MAX 127

typedef struct KeyvalParser {
    QDict *qdict;
    /* prefix ("a", "a.b") -> GPtrArray of its distinct member fragments */
    GHashTable *members;
    /* prefixes in the order they first appeared, for stable error order */
    GPtrArray *prefixes;
    /* check the keys as a tree (keyval_parse), or not (keyval_parse_flat) */
    bool tree;
} KeyvalParser;

static bool keyval_fragment_is_index(const char *frag, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (!g_ascii_isdigit(frag[i])) {
            return false;
        }
    }
    return len > 0;
}

static bool keyval_fragment_is_name(const char *frag, size_t len)
{
    if (!len || !g_ascii_isalpha(frag[0])) {
        return false;
    }
    for (size_t i = 1; i < len; i++) {
        if (!g_ascii_isalnum(frag[i]) && frag[i] != '-' && frag[i] != '_') {
            return false;
        }
    }
    return true;
}

static bool keyval_check_key(const char *key, Error **errp)
{
    bool dotted = strchr(key, '.') != NULL;
    const char *frag = key;

    for (;;) {
        size_t len = strcspn(frag, ".");

        if (len > KEYVAL_FRAGMENT_MAX) {
            if (dotted) {
                error_setg(errp, "Parameter fragment '%.*s' is too long",
                           (int)len, frag);
            } else {
                error_setg(errp, "Parameter '%s' is too long", key);
            }
            return false;
        }
        if (!keyval_fragment_is_name(frag, len) &&
            (frag == key || !keyval_fragment_is_index(frag, len))) {
            error_setg(errp, "Invalid parameter '%s'", key);
            return false;
        }
        if (!frag[len]) {
            return true;
        }
        frag += len + 1;
    }
}

static void keyval_add_member(KeyvalParser *kp, const char *prefix,
                              const char *frag, size_t len)
{
    GPtrArray *members = g_hash_table_lookup(kp->members, prefix);

    if (!members) {
        char *key = g_strdup(prefix);

        members = g_ptr_array_new_with_free_func(g_free);
        g_hash_table_insert(kp->members, key, members);
        g_ptr_array_add(kp->prefixes, key);
    }
    for (guint i = 0; i < members->len; i++) {
        const char *m = g_ptr_array_index(members, i);

        if (strlen(m) == len && !strncmp(m, frag, len)) {
            return;
        }
    }
    g_ptr_array_add(members, g_strndup(frag, len));
}

/*
 * Records @key in the tree of prefixes; fails if it, or one of its
 * prefixes, is already used the other way (as a value vs. as a prefix).
 */
static bool keyval_add_key(KeyvalParser *kp, const char *key, Error **errp)
{
    const char *dot;

    if (g_hash_table_contains(kp->members, key)) {
        error_setg(errp, "Parameters '%s.*' used inconsistently", key);
        return false;
    }
    for (dot = strchr(key, '.'); dot; dot = strchr(dot + 1, '.')) {
        g_autofree char *prefix = g_strndup(key, dot - key);
        const char *frag = dot + 1;

        if (qdict_haskey(kp->qdict, prefix)) {
            error_setg(errp, "Parameters '%s.*' used inconsistently", prefix);
            return false;
        }
        keyval_add_member(kp, prefix, frag, strcspn(frag, "."));
    }
    return true;
}

/* Members of a prefix are all names, or list indexes 0..n-1. */
static bool keyval_check_lists(KeyvalParser *kp, Error **errp)
{
    for (guint i = 0; i < kp->prefixes->len; i++) {
        const char *prefix = g_ptr_array_index(kp->prefixes, i);
        GPtrArray *members = g_hash_table_lookup(kp->members, prefix);
        g_autofree bool *seen = NULL;
        guint n_index = 0;

        for (guint j = 0; j < members->len; j++) {
            const char *m = g_ptr_array_index(members, j);

            n_index += keyval_fragment_is_index(m, strlen(m));
        }
        if (!n_index) {
            continue;
        }
        if (n_index != members->len) {
            error_setg(errp, "Parameters '%s.*' used inconsistently", prefix);
            return false;
        }
        seen = g_new0(bool, members->len);
        for (guint j = 0; j < members->len; j++) {
            const char *m = g_ptr_array_index(members, j);
            /* Long digit strings saturate and count as out of range. */
            guint64 index = g_ascii_strtoull(m, NULL, 10);

            if (index < members->len) {
                seen[index] = true;
            }
        }
        for (guint j = 0; j < members->len; j++) {
            if (!seen[j]) {
                error_setg(errp, "Parameter '%s.%u' missing", prefix, j);
                return false;
            }
        }
    }
    return true;
}

/* Reads a value up to the next single ','; returns where parsing goes on. */
static const char *keyval_read_value(const char *s, GString *value)
{
    for (;;) {
        if (*s == ',') {
            if (s[1] != ',') {
                return s;
            }
            s++;
        } else if (!*s) {
            return s;
        }
        g_string_append_c(value, *s++);
    }
}

static bool keyval_parse_element(KeyvalParser *kp, const char **sp,
                                 const char *implied_key, Error **errp)
{
    const char *s = *sp;
    size_t key_len = strcspn(s, "=,");
    g_autofree char *key = NULL;
    g_autoptr(GString) value = g_string_new(NULL);

    if (implied_key && key_len && s[key_len] != '=') {
        size_t len = strcspn(s, ",");

        g_string_append_len(value, s, len);
        key = g_strdup(implied_key);
        s += len;
    } else {
        key = g_strndup(s, key_len);
        if (!keyval_check_key(key, errp)) {
            return false;
        }
        if (s[key_len] != '=') {
            error_setg(errp, "Expected '=' after parameter '%s'", key);
            return false;
        }
        s = keyval_read_value(s + key_len + 1, value);
    }
    if (kp->tree && !keyval_add_key(kp, key, errp)) {
        return false;
    }
    qdict_put_str(kp->qdict, key, value->str);
    *sp = *s == ',' ? s + 1 : s;
    return true;
}

static QDict *keyval_do_parse(const char *params, const char *implied_key,
                              bool tree, Error **errp)
{
    KeyvalParser kp = {
        .qdict = qdict_new(),
        .members = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                         (GDestroyNotify)g_ptr_array_unref),
        .prefixes = g_ptr_array_new(),
        .tree = tree,
    };
    const char *s = params;
    bool ok = true;

    while (ok && *s) {
        ok = keyval_parse_element(&kp, &s, s == params ? implied_key : NULL,
                                  errp);
    }
    if (ok && tree) {
        ok = keyval_check_lists(&kp, errp);
    }
    g_ptr_array_unref(kp.prefixes);
    g_hash_table_destroy(kp.members);
    if (!ok) {
        qdict_unref(kp.qdict);
        return NULL;
    }
    return kp.qdict;
}

QDict *keyval_parse(const char *params, const char *implied_key,
                    Error **errp)
{
    return keyval_do_parse(params, implied_key, true, errp);
}

QDict *keyval_parse_flat(const char *params, const char *implied_key,
                         Error **errp)
{
    return keyval_do_parse(params, implied_key, false, errp);
}
