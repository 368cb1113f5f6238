/*
 * librados and librbd, loaded when the first rbd image is opened or
 * created rather than when a program starts (util/lazy-lib.c).
 *
 * Linked into the programs, the two libraries and what they pull in
 * (libceph-common, libstdc++, boost) cost every start of every tool
 * about 40 M instructions of symbol binding and C++ constructors
 * (docs/performance.md), whether it opens an rbd image or not.  QEMU
 * avoids that with a block-rbd module; here the driver stays in the
 * program and only Ceph's libraries are loaded on demand, their
 * functions resolved into qrbd_lib once.
 */
#include "block/rbd.h"
#include "util/lazy-lib.h"

QRBDLib qrbd_lib;

static const LazyLibFunc qrbd_lib_funcs[] = {
#define QRBD_LIB_ENTRY(fn) LAZY_LIB_FUNC(QRBDLib, fn)
    QRBD_LIB_RADOS_FUNCS(QRBD_LIB_ENTRY)
    QRBD_LIB_RBD_FUNCS(QRBD_LIB_ENTRY)
#undef QRBD_LIB_ENTRY
};

/*
 * The sonames of Debian's librados2 and librbd1, whose ABIs have kept
 * them for years; the development symlinks (librbd.so) are only in the
 * -dev packages, which a user need not have.
 */
static const char *const qrbd_lib_sonames[] = {
    "librados.so.2", "librbd.so.1", NULL
};

static LazyLib qrbd_lazy_lib = {
    .what = "rbd support",
    .install_hint = "install Debian's librbd1 and librados2",
    .sonames = qrbd_lib_sonames,
    LAZY_LIB_TABLE(qrbd_lib, qrbd_lib_funcs),
};

bool qrbd_lib_load(Error **errp)
{
    return lazy_lib_load(&qrbd_lazy_lib, errp);
}
