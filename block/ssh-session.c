/*
 * ssh: connecting to the server and opening the remote file.
 *
 * In QEMU's order, so that each failure gives QEMU's message: the TCP
 * connection (util/qemu-sockets.c: "Failed to connect to 'HOST:PORT'"),
 * the SSH session on that socket with ~/.ssh/config applied, the host
 * key checked (known_hosts by default, a hash, or not at all), public key
 * authentication (ssh-agent, then the default identities), SFTP, the file
 * and its attributes.  Every call here blocks; see ssh.c for who calls
 * them where.
 */
#include "block/ssh.h"
#include "util/cutils.h"
#include "util/sockets.h"

/* SFTP extension for fsync(2) on the server: OpenSSH 6.3 and later */
#define QSSH_FSYNC_EXT "fsync@openssh.com"

/* Which libssh layer's error codes a message ends with. */
typedef enum QsshErrorLayer {
    QSSH_ERROR_SESSION,         /* the session's code */
    QSSH_ERROR_SFTP,            /* the session's and the SFTP channel's */
} QsshErrorLayer;

/*
 * The body of both error helpers below, so that the message is formatted
 * and worded in one place: @fmt's text, then libssh's reason and the codes
 * of @layer, each only if that layer is up (an SFTP error before SFTP
 * opened reads as a session error, one before the session as bare text).
 */
static void G_GNUC_PRINTF(4, 0) qssh_verror(Error **errp, SSHConn *c,
                                             QsshErrorLayer layer,
                                             const char *fmt, va_list ap)
{
    g_autofree char *what = g_strdup_vprintf(fmt, ap);

    if (!c->session) {
        error_setg(errp, "%s", what);
    } else if (layer == QSSH_ERROR_SESSION || !c->sftp) {
        error_setg(errp, "%s: %s (libssh error code: %d)", what,
                   qssh_lib.ssh_get_error(c->session),
                   qssh_lib.ssh_get_error_code(c->session));
    } else {
        error_setg(errp, "%s: %s (libssh error code: %d, sftp error code: "
                   "%d)", what, qssh_lib.ssh_get_error(c->session),
                   qssh_lib.ssh_get_error_code(c->session),
                   qssh_lib.sftp_get_error(c->sftp));
    }
}

void qssh_session_error(Error **errp, SSHConn *c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    qssh_verror(errp, c, QSSH_ERROR_SESSION, fmt, ap);
    va_end(ap);
}

void qssh_sftp_error(Error **errp, SSHConn *c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    qssh_verror(errp, c, QSSH_ERROR_SFTP, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------------- */
/* Host key */

/*
 * Whether @want (hex digits, any case, colons between bytes or not)
 * spells exactly the @len bytes of @hash.
 */
static bool qssh_hash_matches(const unsigned char *hash, size_t len,
                              const char *want)
{
    for (size_t i = 0; i < len; i++) {
        int hi, lo;

        while (*want == ':') {
            want++;
        }
        hi = g_ascii_xdigit_value(want[0]);
        lo = hi < 0 ? -1 : g_ascii_xdigit_value(want[1]);
        if (lo < 0 || hash[i] != (hi << 4 | lo)) {
            return false;
        }
        want += 2;
    }
    return *want == '\0';
}

static int qssh_check_hash(SSHConn *c, QSSHHashType type, const char *want,
                           Error **errp)
{
    static const struct {
        enum ssh_publickey_hash_type type;
        const char *name;
    } types[] = {
        [QSSH_HASH_MD5] = { SSH_PUBLICKEY_HASH_MD5, "md5" },
        [QSSH_HASH_SHA1] = { SSH_PUBLICKEY_HASH_SHA1, "sha1" },
        [QSSH_HASH_SHA256] = { SSH_PUBLICKEY_HASH_SHA256, "sha256" },
    };
    g_autofree char *hex = NULL;
    ssh_key key = NULL;
    unsigned char *hash = NULL;
    enum ssh_keytypes_e key_type;
    size_t len = 0;
    int r;

    if (qssh_lib.ssh_get_server_publickey(c->session, &key) != SSH_OK) {
        qssh_session_error(errp, c, "failed to read remote host key");
        return -EINVAL;
    }
    key_type = qssh_lib.ssh_key_type(key);
    r = qssh_lib.ssh_get_publickey_hash(key, types[type].type, &hash, &len);
    qssh_lib.ssh_key_free(key);
    if (r != 0) {
        qssh_session_error(errp, c, "failed reading the hash of the server "
                           "SSH key");
        return -EINVAL;
    }
    if (qssh_hash_matches(hash, len, want)) {
        qssh_lib.ssh_clean_pubkey_hash(&hash);
        return 0;
    }
    hex = g_malloc(len * 2 + 1);
    for (size_t i = 0; i < len; i++) {
        snprintf(hex + 2 * i, 3, "%02x", hash[i]);
    }
    hex[len * 2] = '\0';
    qssh_lib.ssh_clean_pubkey_hash(&hash);
    /* QEMU's words, which name the key that the server has */
    error_setg(errp, "remote host %s key fingerprint '%s:%s' does not match "
               "host_key_check '%s:%s'",
               qssh_lib.ssh_key_type_to_char(key_type),
               types[type].name, hex, types[type].name, want);
    return -EPERM;
}

/* "ssh-ed25519 key with fingerprint SHA256:..." of the server's key */
static char *qssh_describe_key(SSHConn *c)
{
    ssh_key key = NULL;
    unsigned char *hash = NULL;
    size_t len = 0;
    char *fingerprint, *desc;
    enum ssh_keytypes_e type;

    if (qssh_lib.ssh_get_server_publickey(c->session, &key) != SSH_OK) {
        return NULL;
    }
    type = qssh_lib.ssh_key_type(key);
    if (qssh_lib.ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256,
                                        &hash, &len) != 0) {
        qssh_lib.ssh_key_free(key);
        return NULL;
    }
    qssh_lib.ssh_key_free(key);
    fingerprint = qssh_lib.ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256,
                                                    hash, len);
    qssh_lib.ssh_clean_pubkey_hash(&hash);
    if (!fingerprint) {
        return NULL;
    }
    desc = g_strdup_printf("%s key with fingerprint %s",
                           qssh_lib.ssh_key_type_to_char(type), fingerprint);
    qssh_lib.ssh_string_free_char(fingerprint);
    return desc;
}

static int qssh_check_known_hosts(SSHConn *c, Error **errp)
{
    g_autofree char *key = NULL;

    switch (qssh_lib.ssh_session_is_known_server(c->session)) {
    case SSH_KNOWN_HOSTS_OK:
        return 0;
    case SSH_KNOWN_HOSTS_CHANGED:
        key = qssh_describe_key(c);
        if (key) {
            error_setg(errp, "host key (%s) does not match the one in "
                       "known_hosts; this may be a possible attack", key);
        } else {
            error_setg(errp, "host key does not match the one in "
                       "known_hosts; this may be a possible attack");
        }
        return -EINVAL;
    case SSH_KNOWN_HOSTS_OTHER:
        error_setg(errp, "host key for this server not found, another type "
                   "exists");
        return -EINVAL;
    case SSH_KNOWN_HOSTS_UNKNOWN:
        error_setg(errp, "no host key was found in known_hosts");
        return -EINVAL;
    case SSH_KNOWN_HOSTS_NOT_FOUND:
        error_setg(errp, "known_hosts file not found");
        return -EINVAL;
    case SSH_KNOWN_HOSTS_ERROR:
        qssh_session_error(errp, c, "error while checking the host");
        return -EINVAL;
    }
    error_setg(errp, "error while checking for known server");
    return -EINVAL;
}

static int qssh_check_host_key(SSHConn *c, const SSHConnectOpts *o,
                               Error **errp)
{
    switch (o->key_mode) {
    case QSSH_HOST_KEY_NONE:
        return 0;
    case QSSH_HOST_KEY_HASH:
        return qssh_check_hash(c, o->hash_type, o->hash, errp);
    case QSSH_HOST_KEY_KNOWN_HOSTS:
        return qssh_check_known_hosts(c, errp);
    }
    g_assert_not_reached();
}

/* ---------------------------------------------------------------------- */
/* Authentication */

/*
 * "none" first (a server may let anyone in), then every public key
 * libssh finds: ssh-agent's, then ~/.ssh/id_*.  No password: nothing may
 * prompt in a daemon.
 */
static int qssh_authenticate(SSHConn *c, Error **errp)
{
    int r = qssh_lib.ssh_userauth_none(c->session, NULL);

    if (r == SSH_AUTH_SUCCESS) {
        return 0;
    }
    if (r == SSH_AUTH_ERROR) {
        qssh_session_error(errp, c, "failed to authenticate using none "
                           "authentication");
        return -EPERM;
    }
    if (qssh_lib.ssh_userauth_list(c->session, NULL) &
        SSH_AUTH_METHOD_PUBLICKEY) {
        r = qssh_lib.ssh_userauth_publickey_auto(c->session, NULL, NULL);
        if (r == SSH_AUTH_SUCCESS) {
            return 0;
        }
        if (r == SSH_AUTH_ERROR) {
            qssh_session_error(errp, c, "failed to authenticate using "
                               "publickey authentication");
            return -EINVAL;
        }
    }
    error_setg(errp, "failed to authenticate using publickey authentication "
               "and the identities held by your ssh-agent");
    return -EPERM;
}

/* ---------------------------------------------------------------------- */
/* Connecting */

/* The session on c->fd, with its options. */
static int qssh_session_setup(SSHConn *c, const SSHConnectOpts *o,
                              Error **errp)
{
    unsigned int port = 0;
    uint64_t num;
    struct servent *se;

    c->session = qssh_lib.ssh_new();
    if (!c->session) {
        error_setg(errp, "failed to initialize libssh session");
        return -EINVAL;
    }
    if (qssh_lib.ssh_options_set(c->session, SSH_OPTIONS_FD, &c->fd) < 0) {
        qssh_session_error(errp, c, "failed to set the socket");
        return -EINVAL;
    }
    /* host and port name the server in known_hosts ("[host]:port") */
    if (qemu_strtou64(o->port, NULL, 10, &num) == 0) {
        port = num <= UINT16_MAX ? num : 0;
    } else if ((se = getservbyname(o->port, "tcp"))) {
        port = ntohs(se->s_port);
    }
    if (qssh_lib.ssh_options_set(c->session, SSH_OPTIONS_HOST, o->host) < 0 ||
        (port && qssh_lib.ssh_options_set(c->session, SSH_OPTIONS_PORT,
                                          &port) < 0) ||
        qssh_lib.ssh_options_set(c->session, SSH_OPTIONS_USER, o->user) < 0) {
        qssh_session_error(errp, c, "failed to set the session's options");
        return -EINVAL;
    }
    if (qssh_lib.ssh_options_parse_config(c->session, NULL) < 0) {
        qssh_session_error(errp, c, "failed to read ~/.ssh/config");
        return -EINVAL;
    }
    return 0;
}

/* SFTP, the file and its attributes. */
static int qssh_open_file(SSHConn *c, const char *path, int flags, int mode,
                          Error **errp)
{
    sftp_attributes attrs;

    c->sftp = qssh_lib.sftp_new(c->session);
    if (!c->sftp) {
        qssh_session_error(errp, c, "failed to initialize sftp handle");
        return -EINVAL;
    }
    if (qssh_lib.sftp_init(c->sftp) < 0) {
        qssh_sftp_error(errp, c, "failed to initialize sftp handle");
        return -EINVAL;
    }
    c->file = qssh_lib.sftp_open(c->sftp, path, flags, mode);
    if (!c->file) {
        qssh_sftp_error(errp, c, "failed to open remote file '%s'", path);
        return -EINVAL;
    }
    attrs = qssh_lib.sftp_fstat(c->file);
    if (!attrs) {
        qssh_sftp_error(errp, c, "failed to read file attributes");
        return -EINVAL;
    }
    c->size = attrs->size;
    c->regular = attrs->type == SSH_FILEXFER_TYPE_REGULAR;
    qssh_lib.sftp_attributes_free(attrs);
    c->has_fsync = qssh_lib.sftp_extension_supported(c->sftp, QSSH_FSYNC_EXT,
                                                     "1");
    return 0;
}

int qssh_connect(const SSHConnectOpts *o, int flags, int mode, SSHConn *c,
                 Error **errp)
{
    g_autoptr(SocketAddress) addr = socket_address_new_inet(o->host,
                                                            o->port);
    int ret;

    if (!qssh_lib_load(errp)) {
        return -ENOTSUP;
    }
    memset(c, 0, sizeof(*c));
    c->fd = socket_connect(addr, errp);
    if (c->fd < 0) {
        return c->fd;
    }
    ret = qssh_session_setup(c, o, errp);
    if (ret == 0 && qssh_lib.ssh_connect(c->session) != SSH_OK) {
        qssh_session_error(errp, c, "failed to establish SSH session");
        ret = -EINVAL;
    }
    if (ret == 0) {
        ret = qssh_check_host_key(c, o, errp);
    }
    if (ret == 0) {
        ret = qssh_authenticate(c, errp);
    }
    if (ret == 0) {
        ret = qssh_open_file(c, o->path, flags, mode, errp);
    }
    if (ret < 0) {
        qssh_disconnect(c);
    }
    return ret;
}

void qssh_disconnect(SSHConn *c)
{
    if (c->file) {
        qssh_lib.sftp_close(c->file);
    }
    if (c->sftp) {
        qssh_lib.sftp_free(c->sftp);
    }
    if (c->session) {
        if (qssh_lib.ssh_is_connected(c->session)) {
            qssh_lib.ssh_disconnect(c->session);
        }
        qssh_lib.ssh_free(c->session);
    }
    if (c->fd >= 0) {
        close(c->fd);
    }
    memset(c, 0, sizeof(*c));
    c->fd = -1;
}

int qssh_grow(SSHConn *c, uint64_t size)
{
    static const char zero;

    assert(size > 0);
    if (qssh_lib.sftp_seek64(c->file, size - 1) < 0 ||
        qssh_lib.sftp_write(c->file, &zero, 1) != 1) {
        return -EIO;
    }
    return 0;
}
