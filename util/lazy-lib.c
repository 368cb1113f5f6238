/*
 * Shared libraries loaded when first needed (include/util/lazy-lib.h).
 */
#include "util/lazy-lib.h"
#include <gmodule.h>

/*
 * Finds @name in the libraries opened, the last first (a later library
 * may link an earlier one, and dlsym() searches what a library links).
 */
static gpointer lazy_lib_symbol(GModule **modules, size_t n_modules,
                                const char *name)
{
    for (size_t i = n_modules; i-- > 0;) {
        gpointer ptr;

        if (g_module_symbol(modules[i], name, &ptr) && ptr) {
            return ptr;
        }
    }
    return NULL;
}

static bool lazy_lib_open(LazyLib *lib, Error **errp)
{
    size_t n_modules = 0;
    bool ok = true;

    while (lib->sonames[n_modules]) {
        n_modules++;
    }
    g_autofree GModule **modules = g_new0(GModule *, n_modules);
    g_autofree void *table = g_malloc0(lib->table_size);

    for (size_t i = 0; ok && i < n_modules; i++) {
        /* lazy binding: only the functions called are ever bound */
        modules[i] = g_module_open(lib->sonames[i], G_MODULE_BIND_LAZY);
        if (!modules[i]) {
            error_setg(errp, "%s could not be loaded: %s (%s)", lib->what,
                       g_module_error(), lib->install_hint);
            ok = false;
        }
    }
    for (size_t i = 0; ok && i < lib->n_funcs; i++) {
        gpointer ptr = lazy_lib_symbol(modules, n_modules,
                                       lib->funcs[i].name);

        if (!ptr) {
            error_setg(errp, "%s could not be loaded: %s has no function %s "
                       "(older than this qblock needs?)", lib->what,
                       lib->sonames[n_modules - 1], lib->funcs[i].name);
            ok = false;
            break;
        }
        assert(lib->funcs[i].offset + sizeof(gpointer) <= lib->table_size);
        memcpy((char *)table + lib->funcs[i].offset, &ptr, sizeof(ptr));
    }
    for (size_t i = 0; i < n_modules && modules[i]; i++) {
        if (ok) {
            /* never closed: a library's threads and caches live as long
             * as the program does */
            g_module_make_resident(modules[i]);
        } else {
            g_module_close(modules[i]);
        }
    }
    if (ok) {
        /* all at once (invariant 1) */
        memcpy(lib->table, table, lib->table_size);
    }
    return ok;
}

bool lazy_lib_load(LazyLib *lib, Error **errp)
{
    bool ok;

    g_mutex_lock(&lib->lock);
    ok = lib->loaded || lazy_lib_open(lib, errp);
    lib->loaded = ok;
    g_mutex_unlock(&lib->lock);
    return ok;
}
