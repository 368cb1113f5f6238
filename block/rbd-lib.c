/*
 * librados and librbd, loaded when the first rbd image is opened or
 * created rather than when a program starts.
 *
 * Linked into the programs, the two libraries and what they pull in
 * (libceph-common, libstdc++, boost) cost every start of every tool
 * about 40 M instructions of symbol binding and C++ constructors
 * (docs/performance.md), whether it opens an rbd image or not.  QEMU
 * avoids that with a block-rbd module; here the driver stays in the
 * program and only Ceph's libraries are loaded on demand
 * (g_module_open()), their functions resolved into qrbd_lib once.
 *
 * Invariant: qrbd_lib's pointers are all set or all NULL; they are set
 * once, under qrbd_lib_lock, and never cleared, so a caller that saw
 * qrbd_lib_load() succeed may use them from any thread.
 */
#include "block/rbd.h"
#include <gmodule.h>

/*
 * The sonames of Debian's librados2 and librbd1, whose ABIs have kept
 * them for years; the development symlinks (librbd.so) are only in the
 * -dev packages, which a user need not have.
 */
#define QRBD_LIBRADOS "librados.so.2"
#define QRBD_LIBRBD   "librbd.so.1"

QRBDLib qrbd_lib;
G_LOCK_DEFINE_STATIC(qrbd_lib_lock);
static bool qrbd_lib_loaded;

/* Resolves @name of @lib (@soname, for the message) into *@ptr. */
static bool qrbd_lib_symbol(GModule *lib, const char *soname,
                            const char *name, gpointer *ptr, Error **errp)
{
    if (!g_module_symbol(lib, name, ptr) || !*ptr) {
        error_setg(errp, "rbd support could not be loaded: %s has no "
                   "function %s (a librbd older than qblock needs?)",
                   soname, name);
        return false;
    }
    return true;
}

static bool qrbd_lib_open(Error **errp)
{
    QRBDLib lib;
    GModule *rados, *rbd;
    bool ok = true;

    /* lazy binding: only the functions used are ever bound */
    rados = g_module_open(QRBD_LIBRADOS, G_MODULE_BIND_LAZY);
    rbd = rados ? g_module_open(QRBD_LIBRBD, G_MODULE_BIND_LAZY) : NULL;
    if (!rbd) {
        error_setg(errp, "rbd support could not be loaded: %s (install "
                   "Debian's librbd1 and librados2)", g_module_error());
        if (rados) {
            g_module_close(rados);
        }
        return false;
    }
#define QRBD_LIB_RESOLVE_RADOS(fn) \
    ok = ok && qrbd_lib_symbol(rados, QRBD_LIBRADOS, #fn, \
                               (gpointer *)&lib.fn, errp);
#define QRBD_LIB_RESOLVE_RBD(fn) \
    ok = ok && qrbd_lib_symbol(rbd, QRBD_LIBRBD, #fn, \
                               (gpointer *)&lib.fn, errp);
    QRBD_LIB_RADOS_FUNCS(QRBD_LIB_RESOLVE_RADOS)
    QRBD_LIB_RBD_FUNCS(QRBD_LIB_RESOLVE_RBD)
#undef QRBD_LIB_RESOLVE_RADOS
#undef QRBD_LIB_RESOLVE_RBD
    if (!ok) {
        g_module_close(rbd);
        g_module_close(rados);
        return false;
    }
    /* never closed: librados's threads and caches live as long as we do */
    g_module_make_resident(rados);
    g_module_make_resident(rbd);
    qrbd_lib = lib;
    return true;
}

bool qrbd_lib_load(Error **errp)
{
    bool ok;

    G_LOCK(qrbd_lib_lock);
    ok = qrbd_lib_loaded || qrbd_lib_open(errp);
    qrbd_lib_loaded = ok;
    G_UNLOCK(qrbd_lib_lock);
    return ok;
}
