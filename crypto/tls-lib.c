/*
 * GnuTLS, loaded when the first TLS object is created rather than when
 * a program starts (crypto/tls-lib.h, util/lazy-lib.c).
 */
#include "util/osdep.h"
#include "tls-lib.h"
#include "util/lazy-lib.h"

QTLSLib qtls_lib;

static const LazyLibFunc qtls_lib_funcs[] = {
#define QTLS_LIB_ENTRY(fn) LAZY_LIB_FUNC(QTLSLib, fn)
    QTLS_LIB_FUNCS(QTLS_LIB_ENTRY)
#undef QTLS_LIB_ENTRY
};

/* Debian's libgnutls30 */
static const char *const qtls_lib_sonames[] = { "libgnutls.so.30", NULL };

static LazyLib qtls_lazy_lib = {
    .what = "TLS support",
    .install_hint = "install Debian's libgnutls30",
    .sonames = qtls_lib_sonames,
    LAZY_LIB_TABLE(qtls_lib, qtls_lib_funcs),
};

bool qtls_lib_load(Error **errp)
{
    return lazy_lib_load(&qtls_lazy_lib, errp);
}
