/*
 * Shared libraries loaded when first needed instead of linked.
 *
 * A library linked into the programs is loaded, relocated and
 * initialised at every start of every tool, whether the command uses it
 * or not: Ceph's libraries cost about 40 M instructions of symbol
 * binding and C++ constructors, libssh (with OpenSSL and Kerberos) and
 * GnuTLS 200 and 160 page faults and about 4 ms each on this project's
 * machines (docs/performance.md).  QEMU avoids that with modules it
 * loads on demand (block-rbd.so); here the code stays in the programs
 * and only the libraries are loaded, through g_module_open(), the first
 * time a driver or object needs them.
 *
 * A user of this lists every function it calls in an X-macro, keeps a
 * table of pointers to them (__typeof__ gives each its prototype) and
 * calls through the table.  The programs are linked without the library
 * (only its headers are used), so a call that bypasses the table fails
 * to link rather than pulling the library back in.
 */
#ifndef QBLOCK_UTIL_LAZY_LIB_H
#define QBLOCK_UTIL_LAZY_LIB_H

#include "util/osdep.h"
#include "util/error.h"

/* One function: its name and where its pointer lives in the table. */
typedef struct LazyLibFunc {
    const char *name;
    size_t offset;
} LazyLibFunc;

/* For the array of LazyLibFunc: LAZY_LIB_FUNC(MyTable, ssh_new) */
#define LAZY_LIB_FUNC(table_type, fn) { #fn, offsetof(table_type, fn) },

/*
 * For a LazyLib's initialiser: the table @tbl and the array of
 * LazyLibFunc @funcs that fills it, their sizes taken from them so that
 * they cannot disagree.
 */
#define LAZY_LIB_TABLE(tbl, funcs_array) \
    .funcs = (funcs_array), .n_funcs = G_N_ELEMENTS(funcs_array), \
    .table = &(tbl), .table_size = sizeof(tbl)

typedef struct LazyLib {
    /* the subject of the error messages: "rbd support" */
    const char *what;
    /* what to install when a library is missing */
    const char *install_hint;
    /* the sonames, NULL-terminated, opened in this order */
    const char *const *sonames;
    const LazyLibFunc *funcs;
    size_t n_funcs;
    /* the table of pointers that funcs fills, and its size */
    void *table;
    size_t table_size;

    /* private: set once under lock, never cleared (invariant 1) */
    GMutex lock;
    bool loaded;
} LazyLib;

/*
 * Loads @lib's libraries and fills its table, the first time; true once
 * that has succeeded, else false with @errp saying what could not be
 * loaded and what to install.
 *
 * Invariant 1: the table's pointers are all set or all NULL; they are
 * set once, under the lock, and never cleared (the libraries stay
 * loaded), so a caller that saw lazy_lib_load() succeed may call them
 * from any thread.
 */
bool lazy_lib_load(LazyLib *lib, Error **errp);

#endif
