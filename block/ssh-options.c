/*
 * ssh: file names and options.
 *
 * A file name ssh://[USER@]HOST[:PORT]/PATH[?host_key_check=CHECK]
 * becomes the flat options QEMU's driver makes of it (host, port, path,
 * user, host_key_check); the node's options, in that older spelling or in
 * the current one (server.host, server.port, host-key-check.*), become one
 * SSHConnectOpts.  Pure string work, no libssh call: the unit test covers
 * every form without a server.  Messages are QEMU's, which scripts match.
 */
#include "block/ssh.h"
#include "qapi/qapi-opts.h"
#include "util/cutils.h"

/* The legacy keys that a file name fills in, and may not meet. */
static const char *const qssh_filename_keys[] = {
    "user", "host", "port", "path", "host_key_check", NULL
};

/* The one query parameter of an ssh:// URI. */
static bool qssh_uri_query(const char *query, QDict *options, Error **errp)
{
    g_autoptr(GHashTable) params = NULL;
    GHashTableIter iter;
    gpointer key, value;

    if (!query || !query[0]) {
        return true;
    }
    params = g_uri_parse_params(query, -1, "&", G_URI_PARAMS_NONE, NULL);
    if (!params) {
        error_setg(errp, "could not parse query parameters");
        return false;
    }
    g_hash_table_iter_init(&iter, params);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        if (strcmp(key, "host_key_check")) {
            error_setg(errp, "unsupported parameter '%s' in URI (only "
                       "host_key_check is allowed)", (const char *)key);
            return false;
        }
        qdict_put_str(options, "host_key_check", value);
    }
    return true;
}

void qssh_parse_filename(const char *filename, QDict *options, Error **errp)
{
    g_autoptr(GUri) uri = NULL;
    g_autofree char *port = NULL;
    const char *user, *host, *path;

    for (int i = 0; qssh_filename_keys[i]; i++) {
        if (qdict_haskey(options, qssh_filename_keys[i])) {
            error_setg(errp, "user, host, port, path and host_key_check "
                       "cannot be used at the same time as a file option");
            return;
        }
    }
    uri = g_uri_parse(filename, G_URI_FLAGS_NON_DNS, NULL);
    if (!uri) {
        error_setg(errp, "Invalid URI");
        error_append_hint(errp, "Usage: file=ssh://[user@]host[:port]/path"
                          "[?host_key_check=yes|no|md5:HASH|sha1:HASH|"
                          "sha256:HASH]\n");
        return;
    }
    if (strcmp(g_uri_get_scheme(uri), "ssh")) {
        error_setg(errp, "URI scheme must be 'ssh'");
        return;
    }
    host = g_uri_get_host(uri);
    if (!host || !host[0]) {
        error_setg(errp, "missing hostname in URI");
        return;
    }
    path = g_uri_get_path(uri);
    if (!path || !path[0]) {
        error_setg(errp, "missing remote path in URI");
        return;
    }
    if (!qssh_uri_query(g_uri_get_query(uri), options, errp)) {
        return;
    }
    user = g_uri_get_user(uri);
    if (user && user[0]) {
        qdict_put_str(options, "user", user);
    }
    qdict_put_str(options, "host", host);
    /* the port is always an option, so that the node's name shows it */
    port = g_strdup_printf("%d", g_uri_get_port(uri) > 0 ?
                           g_uri_get_port(uri) : atoi(QSSH_DEFAULT_PORT));
    qdict_put_str(options, "port", port);
    qdict_put_str(options, "path", path);
}

/* host_key_check=no|yes|md5:HASH|sha1:HASH|sha256:HASH */
static bool qssh_legacy_key_check(const char *check, SSHConnectOpts *o,
                                  Error **errp)
{
    static const struct {
        const char *prefix;
        QSSHHashType type;
    } hashes[] = {
        { "md5:", QSSH_HASH_MD5 },
        { "sha1:", QSSH_HASH_SHA1 },
        { "sha256:", QSSH_HASH_SHA256 },
    };
    const char *hash;

    o->legacy_key_check = g_strdup(check);
    if (!strcmp(check, "no")) {
        o->key_mode = QSSH_HOST_KEY_NONE;
        return true;
    }
    if (!strcmp(check, "yes")) {
        o->key_mode = QSSH_HOST_KEY_KNOWN_HOSTS;
        return true;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(hashes); i++) {
        if (strstart(check, hashes[i].prefix, &hash)) {
            o->key_mode = QSSH_HOST_KEY_HASH;
            o->hash_type = hashes[i].type;
            o->hash = g_strdup(hash);
            return true;
        }
    }
    error_setg(errp, "unknown host_key_check setting (%s)", check);
    return false;
}

/* host-key-check.mode, .type and .hash */
static bool qssh_key_check(QemuOpts *opts, SSHConnectOpts *o, Error **errp)
{
    int mode = qemu_opt_get_enum(opts, "host-key-check.mode");
    int type = qemu_opt_get_enum(opts, "host-key-check.type");
    const char *hash = qemu_opt_get(opts, "host-key-check.hash");

    if (mode < 0) {
        if (type >= 0 || hash) {
            error_setg(errp, "Parameter 'host-key-check.mode' is missing");
            return false;
        }
        o->key_mode = QSSH_HOST_KEY_KNOWN_HOSTS;
        return true;
    }
    o->key_mode = mode;
    if (mode != QSSH_HOST_KEY_HASH) {
        if (type >= 0 || hash) {
            error_setg(errp, "host-key-check.type and .hash are for "
                       "host-key-check.mode=hash only");
            return false;
        }
        return true;
    }
    if (type < 0 || !hash) {
        error_setg(errp, "Parameter 'host-key-check.%s' is missing",
                   type < 0 ? "type" : "hash");
        return false;
    }
    o->hash_type = type;
    o->hash = g_strdup(hash);
    return true;
}

/* host and port, the older spelling, or server.host and server.port */
static bool qssh_server(QemuOpts *opts, SSHConnectOpts *o, Error **errp)
{
    const char *host = qemu_opt_get(opts, "host");
    const char *server_host = qemu_opt_get(opts, "server.host");
    const char *server_port = qemu_opt_get(opts, "server.port");

    if (host && (server_host || server_port)) {
        error_setg(errp, "host and port cannot be used at the same time as "
                   "server.host and server.port");
        return false;
    }
    if (qemu_opt_has(opts, "port") && !host) {
        error_setg(errp, "port may not be used without host");
        return false;
    }
    if (host) {
        o->host = g_strdup(host);
        o->port = qemu_opt_has(opts, "port") ?
                  g_strdup_printf("%" PRIu64,
                                  qemu_opt_get_number(opts, "port", 0)) :
                  g_strdup(QSSH_DEFAULT_PORT);
        return true;
    }
    /* QEMU's words: server is an InetSocketAddress, port not optional */
    if (!server_host && !server_port) {
        error_setg(errp, "Parameter 'server' is missing");
        return false;
    }
    if (!server_host || !server_port) {
        error_setg(errp, "Parameter 'server.%s' is missing",
                   server_host ? "port" : "host");
        return false;
    }
    o->host = g_strdup(server_host);
    o->port = g_strdup(server_port);
    return true;
}

bool qssh_opts_parse(QDict *options, SSHConnectOpts *o, Error **errp)
{
    QemuOpts *opts = qemu_opts_absorb_qdict(&qapi_opts_ssh_runtime, options,
                                            errp);
    const char *check;
    bool ok;

    if (!opts) {
        return false;
    }
    ok = qssh_server(opts, o, errp);
    if (ok && !qemu_opt_get(opts, "path")) {
        error_setg(errp, "Parameter 'path' is missing");
        ok = false;
    }
    check = qemu_opt_get(opts, "host_key_check");
    if (ok && check && qemu_opt_get(opts, "host-key-check.mode")) {
        error_setg(errp, "host_key_check cannot be used at the same time as "
                   "host-key-check");
        ok = false;
    }
    if (ok) {
        ok = check ? qssh_legacy_key_check(check, o, errp) :
                     qssh_key_check(opts, o, errp);
    }
    if (ok) {
        o->path = g_strdup(qemu_opt_get(opts, "path"));
        o->user = g_strdup(qemu_opt_get(opts, "user") ?: g_get_user_name());
    }
    qemu_opts_del(opts);
    return ok;
}

void qssh_opts_free(SSHConnectOpts *o)
{
    g_free(o->host);
    g_free(o->port);
    g_free(o->path);
    g_free(o->user);
    g_free(o->hash);
    g_free(o->legacy_key_check);
    memset(o, 0, sizeof(*o));
}
