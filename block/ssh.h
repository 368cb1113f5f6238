/*
 * ssh: what the ssh driver's files share.
 *
 *   ssh.c           open, close, the data path, size, the driver table
 *   ssh-options.c   ssh:// file names and the node's options (QEMU's
 *                   current ones and its older flat spelling)
 *   ssh-session.c   connecting: the TCP socket, the SSH session, the
 *                   host key check, authentication, SFTP, the remote file
 *   ssh-lib.c       loading libssh when first needed
 *
 * Functions are prefixed qssh_: libssh owns ssh_ and sftp_.
 *
 * Built only when libssh is found (block/meson.build); without it
 * block/ssh-missing.c registers a driver that says so.  The library
 * itself is loaded at run time.
 */
#ifndef QBLOCK_BLOCK_SSH_H
#define QBLOCK_BLOCK_SSH_H

#include "block/block_int.h"
#include "util/coroutine.h"
#include <libssh/libssh.h>
#include <libssh/sftp.h>

/*
 * libssh is loaded at the first connection, not linked (ssh-lib.c): with
 * OpenSSL and Kerberos it cost every start of every tool 200 page
 * faults.  Every function of libssh that the driver calls is listed
 * here and called through qssh_lib, e.g. qssh_lib.ssh_connect(...); a
 * function missing from the list fails to link.
 */
#define QSSH_LIB_FUNCS(F) \
    F(sftp_async_read) F(sftp_async_read_begin) F(sftp_attributes_free) \
    F(sftp_close) F(sftp_extension_supported) F(sftp_free) F(sftp_fstat) \
    F(sftp_fsync) F(sftp_get_error) F(sftp_init) F(sftp_new) F(sftp_open) \
    F(sftp_read) F(sftp_seek64) F(sftp_write) F(ssh_clean_pubkey_hash) \
    F(ssh_connect) F(ssh_disconnect) F(ssh_free) F(ssh_get_error) \
    F(ssh_get_error_code) F(ssh_get_fingerprint_hash) \
    F(ssh_get_publickey_hash) F(ssh_get_server_publickey) F(ssh_init) \
    F(ssh_is_connected) F(ssh_key_free) F(ssh_key_type) \
    F(ssh_key_type_to_char) F(ssh_new) F(ssh_options_parse_config) \
    F(ssh_options_set) F(ssh_session_is_known_server) \
    F(ssh_string_free_char) F(ssh_userauth_list) F(ssh_userauth_none) \
    F(ssh_userauth_publickey_auto)

typedef struct QSSHLib {
#define QSSH_LIB_POINTER(fn) __typeof__(fn) *fn;
    QSSH_LIB_FUNCS(QSSH_LIB_POINTER)
#undef QSSH_LIB_POINTER
} QSSHLib;

/* Valid once qssh_lib_load() has succeeded (in qssh_connect()). */
extern QSSHLib qssh_lib;

/*
 * Loads libssh and resolves qssh_lib, and initialises libssh's global
 * state, the first time; true once that has succeeded, else false with
 * @errp saying what is missing.
 */
bool qssh_lib_load(Error **errp);

/* QEMU's default port, which file names made from options always show */
#define QSSH_DEFAULT_PORT "22"

typedef enum QSSHHostKeyMode {
    QSSH_HOST_KEY_NONE,
    QSSH_HOST_KEY_HASH,
    QSSH_HOST_KEY_KNOWN_HOSTS,
} QSSHHostKeyMode;

/* The order of host-key-check.type's values in qapi/ssh.json */
typedef enum QSSHHashType {
    QSSH_HASH_MD5,
    QSSH_HASH_SHA1,
    QSSH_HASH_SHA256,
} QSSHHashType;

/* Where the file is and how to check the server: the parsed options. */
typedef struct SSHConnectOpts {
    char *host;
    char *port;                 /* a number or a service name */
    char *path;
    char *user;                 /* the local user's name if not given */
    QSSHHostKeyMode key_mode;
    QSSHHashType hash_type;     /* key_mode == QSSH_HOST_KEY_HASH */
    char *hash;                 /* key_mode == QSSH_HOST_KEY_HASH */
    char *legacy_key_check;     /* host_key_check as given, or NULL */
} SSHConnectOpts;

/* One SFTP connection to one remote file. */
typedef struct SSHConn {
    int fd;                     /* the TCP socket, ours: libssh never closes
                                 * a socket it was given */
    ssh_session session;
    sftp_session sftp;
    sftp_file file;
    uint64_t size;              /* the file's size when it was opened */
    bool regular;               /* a regular file (not a device, a pipe) */
    bool has_fsync;             /* the server offers fsync@openssh.com */
} SSHConn;

/*
 * bdrv_parse_filename: ssh://[USER@]HOST[:PORT]/PATH[?host_key_check=X]
 * into the options QEMU's driver gets from it (ssh-options.c).
 */
void qssh_parse_filename(const char *filename, QDict *options, Error **errp);

/*
 * Fills @o from the node's options, removing what it takes from
 * @options; QEMU's older flat options (host, port, host_key_check) become
 * the current ones.  false with @errp set on a bad or missing option.
 */
bool qssh_opts_parse(QDict *options, SSHConnectOpts *o, Error **errp);
void qssh_opts_free(SSHConnectOpts *o);

/*
 * Connects to the server as @o says, logs in, starts SFTP and opens the
 * file with open(2)'s @flags (O_RDONLY, O_RDWR, O_CREAT, O_TRUNC) and
 * @mode.  Blocks until done: the callers are open and create, which the
 * tools and the monitor run outside the data path.  0 or -errno with
 * @errp set in QEMU's words; on failure @c holds nothing.
 */
int qssh_connect(const SSHConnectOpts *o, int flags, int mode, SSHConn *c,
                 Error **errp);
void qssh_disconnect(SSHConn *c);

/*
 * Writes one zero byte at @size - 1 (SFTP has no truncate on an open
 * file), so that the file is at least @size bytes long.  Blocking: run in
 * a worker or at create.  0 or -errno.
 */
int qssh_grow(SSHConn *c, uint64_t size);

/*
 * Sets @errp to the message @fmt followed by libssh's (and SFTP's) error
 * and their codes, as QEMU words them: "WHAT: TEXT (libssh error code: N,
 * sftp error code: M)".
 */
void qssh_session_error(Error **errp, SSHConn *c, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
void qssh_sftp_error(Error **errp, SSHConn *c, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

#endif
