/*
 * rbd: QEMU's legacy file name, turned into the node's options.
 *
 *   rbd:POOL[/NAMESPACE]/IMAGE[@SNAPSHOT][:KEY=VALUE[:KEY=VALUE...]]
 *
 * A backslash makes the next character literal (`\:` in a mon_host
 * address, `\@` or `\/` in a name) and is removed.  conf= and id= become
 * the options conf and user; every other pair goes to librados unchanged
 * (rados_conf_set: mon_host=, auth_supported=, key=, keyring=,
 * rados_osd_op_timeout=, ...), in order, through RBD_OPT_KEYVALUE_PAIRS.
 *
 * The image part ends at the first unescaped ':', so an '@' in a value
 * (conf=/etc/ceph@site/ceph.conf) never names a snapshot; QEMU looks for
 * the '@' in the whole rest of the name and would take it for one.
 */
#include "block/rbd.h"

/*
 * Cuts @p at its first @delim that no backslash escapes: returns @p and
 * sets *@rest to what follows the delimiter, or to NULL if there is none.
 */
static char *qrbd_next_tok(char *p, char delim, char **rest)
{
    for (char *end = p; *end; end++) {
        if (*end == '\\' && end[1]) {
            end++;
        } else if (*end == delim) {
            *end = '\0';
            *rest = end + 1;
            return p;
        }
    }
    *rest = NULL;
    return p;
}

/* Removes each escaping backslash, in place, keeping what it escaped. */
static char *qrbd_unescape(char *s)
{
    char *out = s;

    for (const char *in = s; *in; in++) {
        if (*in == '\\' && in[1]) {
            in++;
        }
        *out++ = *in;
    }
    *out = '\0';
    return s;
}

static bool qrbd_parse_pairs(char *p, QDict *options, Error **errp)
{
    g_autoptr(JsonArray) pairs = json_array_new();

    while (p) {
        char *name = qrbd_next_tok(p, '=', &p);
        char *value;

        if (!p) {
            error_setg(errp, "conf option %s has no value", name);
            return false;
        }
        value = qrbd_unescape(qrbd_next_tok(p, ':', &p));
        qrbd_unescape(name);
        if (!strcmp(name, "conf")) {
            qdict_put_str(options, "conf", value);
        } else if (!strcmp(name, "id")) {
            qdict_put_str(options, "user", value);
        } else {
            json_array_add_string_element(pairs, name);
            json_array_add_string_element(pairs, value);
        }
    }
    if (json_array_get_length(pairs)) {
        g_autoptr(JsonNode) node = json_node_new(JSON_NODE_ARRAY);
        g_autofree char *text = NULL;

        json_node_set_array(node, pairs);
        text = json_to_string(node, false);
        qdict_put_str(options, RBD_OPT_KEYVALUE_PAIRS, text);
    }
    return true;
}

void qrbd_parse_filename(const char *filename, QDict *options, Error **errp)
{
    static const char *const keys[] = {
        "pool", "namespace", "image", "snapshot", "conf", "user",
        RBD_OPT_KEYVALUE_PAIRS,
    };
    g_autofree char *buf = NULL;
    char *p, *pool, *spec, *image, *snap, *ns = NULL;

    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
        if (qdict_haskey(options, keys[i])) {
            error_setg(errp, "rbd file name '%s' cannot be combined with "
                       "the option '%s'", filename, keys[i]);
            return;
        }
    }
    if (!g_str_has_prefix(filename, "rbd:")) {
        error_setg(errp, "rbd file name '%s' does not start with 'rbd:'",
                   filename);
        return;
    }
    buf = g_strdup(filename + strlen("rbd:"));
    pool = qrbd_next_tok(buf, '/', &p);
    if (!p || !*pool) {
        error_setg(errp, "Pool name is required");
        return;
    }
    spec = qrbd_next_tok(p, ':', &p);
    image = qrbd_next_tok(spec, '@', &snap);
    if (strchr(image, '/')) {
        char *rest;
        char *first = qrbd_next_tok(image, '/', &rest);

        if (rest) {     /* else every '/' was escaped: part of the name */
            ns = first;
            image = rest;
        }
    }
    if (!*image) {
        error_setg(errp, "rbd file name '%s' names no image (rbd:POOL/IMAGE)",
                   filename);
        return;
    }
    /* in QEMU's order, which json: file names show */
    qdict_put_str(options, "pool", qrbd_unescape(pool));
    if (ns) {
        qdict_put_str(options, "namespace", qrbd_unescape(ns));
    }
    qdict_put_str(options, "image", qrbd_unescape(image));
    if (snap) {
        qdict_put_str(options, "snapshot", qrbd_unescape(snap));
    }
    qrbd_parse_pairs(p, options, errp);
}
