/*
 * rbd: where the cluster is, who we are, and connecting to it.
 *
 * The settings reach librados in this order, each later one overriding
 * the earlier (as in QEMU): the configuration file (conf, or librados's
 * default search), the key=value pairs of a legacy file name, then the
 * explicit options (server.N -> mon_host, auth-client-required.N ->
 * auth_client_required), and last the cache switch the cache mode implies.
 */
#include "block/rbd.h"
#include "qapi/qapi-opts.h"
#include "crypto/secret.h"
#include "util/json.h"

/* ---------------------------------------------------------------------- */
/* Options */

/* RBD_OPT_KEYVALUE_PAIRS: a JSON array of strings, key then value. */
static bool qrbd_parse_keyvalue(const char *text, RBDConnectOpts *o,
                                Error **errp)
{
    g_autoptr(JsonNode) node = json_parse_text(text, strlen(text), errp);
    JsonArray *arr;
    guint n;

    if (!node) {
        return false;
    }
    if (!JSON_NODE_HOLDS_ARRAY(node) ||
        (n = json_array_get_length(arr = json_node_get_array(node))) % 2) {
        error_setg(errp, "%s must be a JSON array of keys and values: %s",
                   RBD_OPT_KEYVALUE_PAIRS, text);
        return false;
    }
    o->keyvalue = g_new0(char *, n + 1);
    for (guint i = 0; i < n; i++) {
        JsonNode *el = json_array_get_element(arr, i);

        if (!JSON_NODE_HOLDS_VALUE(el) ||
            json_node_get_value_type(el) != G_TYPE_STRING) {
            error_setg(errp, "%s must be a JSON array of strings: %s",
                       RBD_OPT_KEYVALUE_PAIRS, text);
            return false;
        }
        o->keyvalue[i] = g_strdup(json_node_get_string(el));
    }
    return true;
}

/* server.N.host/port, N = 0, 1, ... without gaps, into "h:p,h:p". */
static bool qrbd_parse_servers(QDict *options, RBDConnectOpts *o,
                               Error **errp)
{
    g_autoptr(GString) hosts = g_string_new(NULL);

    for (int i = 0;; i++) {
        g_autofree char *hkey = g_strdup_printf("server.%d.host", i);
        g_autofree char *pkey = g_strdup_printf("server.%d.port", i);
        const char *host = qdict_get_try_str(options, hkey);
        const char *port = qdict_get_try_str(options, pkey);

        if (!host && !port) {
            break;
        }
        if (!host || !port) {
            error_setg(errp, "Parameter '%s' is missing", host ? pkey : hkey);
            return false;
        }
        /* an IPv6 address needs brackets before its port */
        g_string_append_printf(hosts, strchr(host, ':') ? "%s[%s]:%s" :
                               "%s%s:%s", hosts->len ? "," : "", host, port);
        qdict_del(options, hkey);
        qdict_del(options, pkey);
    }
    if (qdict_has_prefixed_entries(options, "server.")) {
        error_setg(errp, "server: give the monitors as server.0.host, "
                   "server.0.port, server.1.host, ... (only host and port, "
                   "numbered from 0 without gaps)");
        return false;
    }
    if (hosts->len) {
        o->mon_host = g_strdup(hosts->str);
    }
    return true;
}

/* auth-client-required.N = cephx | none, into "cephx;none". */
static bool qrbd_parse_auth(QDict *options, RBDConnectOpts *o, Error **errp)
{
    g_autoptr(GString) modes = g_string_new(NULL);

    for (int i = 0;; i++) {
        g_autofree char *key = g_strdup_printf("auth-client-required.%d", i);
        const char *mode = qdict_get_try_str(options, key);

        if (!mode) {
            break;
        }
        if (strcmp(mode, "cephx") && strcmp(mode, "none")) {
            error_setg(errp, "Parameter '%s' does not accept value '%s' "
                       "(cephx or none)", key, mode);
            return false;
        }
        g_string_append_printf(modes, "%s%s", modes->len ? ";" : "", mode);
        qdict_del(options, key);
    }
    if (qdict_has_prefixed_entries(options, "auth-client-required")) {
        error_setg(errp, "auth-client-required: give the methods as "
                   "auth-client-required.0, auth-client-required.1, ... "
                   "(cephx or none, numbered from 0 without gaps)");
        return false;
    }
    if (modes->len) {
        o->auth_client_required = g_strdup(modes->str);
    }
    return true;
}

/*
 * The cephx key from secret @id.  As in QEMU, the secret holds the key's
 * bytes (give the key as data=KEY,format=base64), which librados wants
 * base64-encoded again.
 */
static char *qrbd_secret_key(const char *id, Error **errp)
{
    size_t len;
    uint8_t *bytes = crypto_secret_lookup(id, &len, errp);
    char *key;

    if (!bytes) {
        return NULL;
    }
    key = g_base64_encode(bytes, len);
    crypto_secret_free(bytes, len);
    return key;
}

/*
 * The runtime options.  RBD_OPT_PASSWORD_SECRET, outside the schema, is
 * taken first and checked where QEMU checks it: after the options that
 * the schema requires, before any secret is looked up.
 */
static bool qrbd_parse_runtime(QDict *options, RBDConnectOpts *o,
                               bool for_create, Error **errp)
{
    g_autofree char *legacy = g_strdup(qdict_get_try_str(
                                  options, RBD_OPT_PASSWORD_SECRET));
    QemuOpts *opts;
    const char *secret;
    bool ok = false;

    qdict_del(options, RBD_OPT_PASSWORD_SECRET);
    opts = qemu_opts_absorb_qdict(&qapi_opts_rbd_runtime, options, errp);
    if (!opts) {
        return false;
    }
    o->pool = g_strdup(qemu_opt_get(opts, "pool"));
    o->namespace = g_strdup(qemu_opt_get(opts, "namespace"));
    o->image = g_strdup(qemu_opt_get(opts, "image"));
    o->snapshot = g_strdup(qemu_opt_get(opts, "snapshot"));
    o->conf = g_strdup(qemu_opt_get(opts, "conf"));
    o->user = g_strdup(qemu_opt_get(opts, "user"));
    o->encrypt_format = g_strdup(qemu_opt_get(opts, "encrypt.format"));
    o->encrypt_key_secret = g_strdup(qemu_opt_get(opts,
                                                  "encrypt.key-secret"));
    secret = qemu_opt_get(opts, "key-secret");
    if (!o->pool || !o->image) {
        error_setg(errp, "Parameter '%s' is missing",
                   o->pool ? "image" : "pool");
    } else if (legacy && secret) {
        error_setg(errp, "Legacy 'password-secret' clashes with "
                   "'key-secret'");
    } else if ((secret = secret ?: legacy) &&
               !(o->key = qrbd_secret_key(secret, errp))) {
        /* errp says which secret is missing */
    } else if (for_create && o->snapshot) {
        error_setg(errp, "Cannot create an image with a snapshot name "
                   "('@%s'): create the image, then the snapshot with "
                   "'rbd snap create'", o->snapshot);
    } else {
        ok = true;
    }
    qemu_opts_del(opts);
    return ok;
}

bool qrbd_connect_opts_parse(QDict *options, RBDConnectOpts *o,
                             bool for_create, Error **errp)
{
    const char *kv = qdict_get_try_str(options, RBD_OPT_KEYVALUE_PAIRS);

    if (kv && !qrbd_parse_keyvalue(kv, o, errp)) {
        return false;
    }
    qdict_del(options, RBD_OPT_KEYVALUE_PAIRS);
    return qrbd_parse_servers(options, o, errp) &&
           qrbd_parse_auth(options, o, errp) &&
           qrbd_parse_runtime(options, o, for_create, errp);
}

void qrbd_connect_opts_free(RBDConnectOpts *o)
{
    g_free(o->pool);
    g_free(o->namespace);
    g_free(o->image);
    g_free(o->snapshot);
    g_free(o->conf);
    g_free(o->user);
    crypto_secret_free_str(o->key);
    g_free(o->mon_host);
    g_free(o->auth_client_required);
    g_strfreev(o->keyvalue);
    g_free(o->encrypt_format);
    g_free(o->encrypt_key_secret);
    memset(o, 0, sizeof(*o));
}

/* ---------------------------------------------------------------------- */
/* Connecting */

static int qrbd_conf_set(rados_t cluster, const char *key, const char *value,
                         Error **errp)
{
    int ret = qrbd_lib.rados_conf_set(cluster, key, value);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "invalid conf option %s", key);
    }
    return ret;
}

static int qrbd_configure(rados_t cluster, const RBDConnectOpts *o,
                          bool cache, Error **errp)
{
    int ret;

    if (o->conf) {
        ret = qrbd_lib.rados_conf_read_file(cluster, o->conf);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "error reading conf file %s",
                             o->conf);
            return ret;
        }
    } else {
        /* the default search may find nothing: options may say it all */
        qrbd_lib.rados_conf_read_file(cluster, NULL);
    }
    for (char **kv = o->keyvalue; kv && *kv; kv += 2) {
        ret = qrbd_conf_set(cluster, kv[0], kv[1], errp);
        if (ret < 0) {
            return ret;
        }
    }
    if (o->mon_host &&
        (ret = qrbd_conf_set(cluster, "mon_host", o->mon_host, errp)) < 0) {
        return ret;
    }
    if (o->auth_client_required &&
        (ret = qrbd_conf_set(cluster, "auth_client_required",
                             o->auth_client_required, errp)) < 0) {
        return ret;
    }
    if (o->key && (ret = qrbd_conf_set(cluster, "key", o->key, errp)) < 0) {
        return ret;
    }
    /* cache=none and directsync bypass librbd's cache, as in QEMU */
    return qrbd_conf_set(cluster, "rbd_cache", cache ? "true" : "false",
                         errp);
}

static int qrbd_open_namespace(rados_ioctx_t io_ctx, const char *ns,
                               Error **errp)
{
    bool exists = false;
    int ret;

    if (!ns || !*ns) {
        return 0;
    }
    ret = qrbd_lib.rbd_namespace_exists(io_ctx, ns, &exists);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "error checking for the existence of "
                         "namespace '%s'", ns);
        return ret;
    }
    if (!exists) {
        error_setg(errp, "namespace '%s' does not exist", ns);
        return -ENOENT;
    }
    qrbd_lib.rados_ioctx_set_namespace(io_ctx, ns);
    return 0;
}

int qrbd_connect(const RBDConnectOpts *o, bool cache, rados_t *cluster,
                 rados_ioctx_t *io_ctx, Error **errp)
{
    int ret;

    *cluster = NULL;
    *io_ctx = NULL;
    /* every use of librados and librbd comes after a connection */
    if (!qrbd_lib_load(errp)) {
        return -ENOTSUP;
    }
    ret = qrbd_lib.rados_create(cluster, o->user);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "error initializing");
        *cluster = NULL;
        return ret;
    }
    ret = qrbd_configure(*cluster, o, cache, errp);
    if (ret < 0) {
        goto fail;
    }
    ret = qrbd_lib.rados_connect(*cluster);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "error connecting");
        goto fail;
    }
    ret = qrbd_lib.rados_ioctx_create(*cluster, o->pool, io_ctx);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "error opening pool %s", o->pool);
        *io_ctx = NULL;
        goto fail;
    }
    ret = qrbd_open_namespace(*io_ctx, o->namespace, errp);
    if (ret < 0) {
        goto fail;
    }
    return 0;

fail:
    qrbd_disconnect(*cluster, *io_ctx);
    *cluster = NULL;
    *io_ctx = NULL;
    return ret;
}

void qrbd_disconnect(rados_t cluster, rados_ioctx_t io_ctx)
{
    if (io_ctx) {
        qrbd_lib.rados_ioctx_destroy(io_ctx);
    }
    if (cluster) {
        qrbd_lib.rados_shutdown(cluster);
    }
}
