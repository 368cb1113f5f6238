/*
 * NBD file names: QEMU's URIs (nbd://, nbd+tcp://, nbd+unix://) and its
 * legacy "nbd:" syntax, turned into the driver's server.* and export
 * options.  Pure string work, so that the unit test covers every form.
 */
#include "util/osdep.h"
#include "util/cutils.h"
#include "block/nbd-client.h"

static void nbd_uri_put_export(const char *path, QDict *options)
{
    /* The path's leading '/' separates it from the authority only. */
    if (path[0] == '/') {
        path++;
    }
    if (path[0]) {
        qdict_put_str(options, NBD_OPT_KEY_EXPORT, path);
    }
}

/* The socket=PATH of an nbd+unix URI: its only query parameter. */
static bool nbd_uri_put_socket(const char *filename, const char *query,
                               QDict *options, Error **errp)
{
    g_autoptr(GHashTable) params = NULL;
    const char *path;

    params = query ? g_uri_parse_params(query, -1, "&", G_URI_PARAMS_NONE,
                                        NULL) : NULL;
    path = params ? g_hash_table_lookup(params, "socket") : NULL;
    if (!path || !path[0] || g_hash_table_size(params) != 1) {
        error_setg(errp, "NBD URI '%s' needs exactly one query parameter, "
                   "socket=PATH", filename);
        return false;
    }
    qdict_put_str(options, NBD_OPT_KEY_SERVER_TYPE, "unix");
    qdict_put_str(options, NBD_OPT_KEY_SERVER_PATH, path);
    return true;
}

static void nbd_uri_parse(const char *filename, QDict *options,
                          Error **errp)
{
    g_autoptr(GUri) uri = NULL;
    const char *scheme, *host;
    bool is_unix;

    uri = g_uri_parse(filename, G_URI_FLAGS_NON_DNS, NULL);
    if (!uri) {
        error_setg(errp, "'%s' is not a valid NBD URI", filename);
        return;
    }
    scheme = g_uri_get_scheme(uri);
    is_unix = !strcmp(scheme, "nbd+unix");
    if (!is_unix && strcmp(scheme, "nbd") && strcmp(scheme, "nbd+tcp")) {
        error_setg(errp, "NBD URI '%s' has the unknown scheme '%s' (nbd, "
                   "nbd+tcp or nbd+unix)", filename, scheme);
        return;
    }
    if (g_uri_get_user(uri) || g_uri_get_fragment(uri)) {
        error_setg(errp, "NBD URI '%s' may not have a user or a fragment",
                   filename);
        return;
    }
    host = g_uri_get_host(uri);
    if (is_unix) {
        if ((host && host[0]) || g_uri_get_port(uri) != -1) {
            error_setg(errp, "NBD URI '%s' names a host, but nbd+unix "
                       "connects to a socket (nbd+unix:///EXPORT?socket="
                       "PATH)", filename);
            return;
        }
        if (!nbd_uri_put_socket(filename, g_uri_get_query(uri), options,
                                errp)) {
            return;
        }
    } else {
        if (!host || !host[0] || g_uri_get_query(uri)) {
            error_setg(errp, "NBD URI '%s' needs a host and no query "
                       "(nbd://HOST[:PORT]/EXPORT)", filename);
            return;
        }
        qdict_put_str(options, NBD_OPT_KEY_SERVER_TYPE, "inet");
        qdict_put_str(options, NBD_OPT_KEY_SERVER_HOST, host);
        /*
         * The default port, given or not, is no option, as in QEMU: the
         * node's file name then leaves it out, where a port given as an
         * option is always shown.
         */
        if (g_uri_get_port(uri) != -1 &&
            g_uri_get_port(uri) != atoi(NBD_DEFAULT_PORT)) {
            g_autofree char *port = g_strdup_printf("%d",
                                                    g_uri_get_port(uri));
            qdict_put_str(options, NBD_OPT_KEY_SERVER_PORT, port);
        }
    }
    nbd_uri_put_export(g_uri_get_path(uri), options);
}

/* nbd:unix:PATH[:exportname=X] and nbd:HOST:PORT[:exportname=X]. */
static void nbd_legacy_parse(const char *filename, QDict *options,
                             Error **errp)
{
    g_autofree char *addr = g_strdup(filename + strlen("nbd:"));
    char *export = strstr(addr, ":exportname=");
    g_autofree char *host = NULL;
    const char *path, *colon;

    if (export) {
        *export = '\0';
        qdict_put_str(options, NBD_OPT_KEY_EXPORT,
                      export + strlen(":exportname="));
    }
    if (strstart(addr, "unix:", &path)) {
        if (!path[0]) {
            error_setg(errp, "NBD file name '%s' has no socket path",
                       filename);
            return;
        }
        qdict_put_str(options, NBD_OPT_KEY_SERVER_TYPE, "unix");
        qdict_put_str(options, NBD_OPT_KEY_SERVER_PATH, path);
        return;
    }
    /* The port follows the last colon, so that [::1]:10809 works. */
    colon = strrchr(addr, ':');
    if (!colon || colon == addr || !colon[1]) {
        error_setg(errp, "NBD file name '%s' is neither nbd:unix:PATH nor "
                   "nbd:HOST:PORT", filename);
        return;
    }
    qdict_put_str(options, NBD_OPT_KEY_SERVER_TYPE, "inet");
    if (addr[0] == '[' && colon[-1] == ']') {
        host = g_strndup(addr + 1, colon - addr - 2);
    } else {
        host = g_strndup(addr, colon - addr);
    }
    qdict_put_str(options, NBD_OPT_KEY_SERVER_HOST, host);
    qdict_put_str(options, NBD_OPT_KEY_SERVER_PORT, colon + 1);
}

void nbd_client_parse_filename(const char *filename, QDict *options,
                               Error **errp)
{
    if (strstr(filename, "://")) {
        nbd_uri_parse(filename, options, errp);
    } else if (strstart(filename, "nbd:", NULL)) {
        nbd_legacy_parse(filename, options, errp);
    } else {
        error_setg(errp, "'%s' is not an NBD file name (nbd://HOST[:PORT]/"
                   "EXPORT, nbd+unix:///EXPORT?socket=PATH, nbd:unix:PATH, "
                   "nbd:HOST:PORT)", filename);
    }
}
