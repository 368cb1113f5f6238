/*
 * libssh, loaded at the first connection rather than when a program
 * starts (util/lazy-lib.c).
 *
 * Linked, libssh and what it links (OpenSSL's libcrypto, the Kerberos
 * libraries) cost every start of every tool about 200 page faults and
 * 4 ms (docs/performance.md), whether it opens an ssh:// image or not.
 */
#include "block/ssh.h"
#include "util/lazy-lib.h"

QSSHLib qssh_lib;

static const LazyLibFunc qssh_lib_funcs[] = {
#define QSSH_LIB_ENTRY(fn) LAZY_LIB_FUNC(QSSHLib, fn)
    QSSH_LIB_FUNCS(QSSH_LIB_ENTRY)
#undef QSSH_LIB_ENTRY
};

/* Debian's libssh-4 (and libssh-gcrypt-4) soname */
static const char *const qssh_lib_sonames[] = { "libssh.so.4", NULL };

static LazyLib qssh_lazy_lib = {
    .what = "ssh support",
    .install_hint = "install Debian's libssh-4",
    .sonames = qssh_lib_sonames,
    LAZY_LIB_TABLE(qssh_lib, qssh_lib_funcs),
};

bool qssh_lib_load(Error **errp)
{
    static gsize initialised;

    if (!lazy_lib_load(&qssh_lazy_lib, errp)) {
        return false;
    }
    /* libssh's global state, once per process (it counts its users) */
    if (g_once_init_enter(&initialised)) {
        qssh_lib.ssh_init();
        g_once_init_leave(&initialised, 1);
    }
    return true;
}
