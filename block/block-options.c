/*
 * Parsers for the option values every node and every tool shares: cache
 * modes, AIO backends, discard policy, and the names of permissions and
 * preallocation modes as QEMU prints them.
 */
#include "block/block-common.h"

/*
 * The cache modes of DESIGN.md: the write cache flag (writethrough) belongs
 * to the BlockBackend, O_DIRECT and "ignore flushes" belong to the nodes.
 */
typedef struct BdrvCacheMode {
    const char *name;
    int flags;
    bool writethrough;
} BdrvCacheMode;

static const BdrvCacheMode bdrv_cache_modes[] = {
    { "writeback",    0,                   false },
    { "writethrough", 0,                   true  },
    { "none",         BDRV_O_NOCACHE,      false },
    { "off",          BDRV_O_NOCACHE,      false },
    { "directsync",   BDRV_O_NOCACHE,      true  },
    { "unsafe",       BDRV_O_NO_FLUSH,     false },
};

int bdrv_parse_cache_mode(const char *mode, int *flags, bool *writethrough)
{
    for (size_t i = 0; i < ARRAY_SIZE(bdrv_cache_modes); i++) {
        const BdrvCacheMode *m = &bdrv_cache_modes[i];

        if (!strcmp(mode, m->name)) {
            *flags = (*flags & ~BDRV_O_CACHE_MASK) | m->flags;
            *writethrough = m->writethrough;
            return 0;
        }
    }
    return -1;
}

int bdrv_parse_aio(const char *mode, int *flags)
{
    int backend;

    if (!strcmp(mode, "threads")) {
        backend = 0;
    } else if (!strcmp(mode, "native")) {
        backend = BDRV_O_NATIVE_AIO;
    } else if (!strcmp(mode, "io_uring")) {
        backend = BDRV_O_IO_URING;
    } else {
        return -1;
    }
    *flags = (*flags & ~(BDRV_O_NATIVE_AIO | BDRV_O_IO_URING)) | backend;
    return 0;
}

int bdrv_parse_discard_flags(const char *mode, int *flags)
{
    if (!strcmp(mode, "off") || !strcmp(mode, "ignore")) {
        *flags &= ~BDRV_O_UNMAP;
    } else if (!strcmp(mode, "on") || !strcmp(mode, "unmap")) {
        *flags |= BDRV_O_UNMAP;
    } else {
        return -1;
    }
    return 0;
}

static const struct {
    uint64_t perm;
    const char *name;
} bdrv_perm_table[] = {
    { BLK_PERM_CONSISTENT_READ, "consistent read" },
    { BLK_PERM_WRITE,           "write" },
    { BLK_PERM_WRITE_UNCHANGED, "write unchanged" },
    { BLK_PERM_RESIZE,          "resize" },
};

const char *bdrv_perm_name(uint64_t single_perm)
{
    for (size_t i = 0; i < ARRAY_SIZE(bdrv_perm_table); i++) {
        if (bdrv_perm_table[i].perm == single_perm) {
            return bdrv_perm_table[i].name;
        }
    }
    return NULL;
}

char *bdrv_perm_names(uint64_t perm)
{
    GString *result = g_string_new("");

    for (size_t i = 0; i < ARRAY_SIZE(bdrv_perm_table); i++) {
        if (perm & bdrv_perm_table[i].perm) {
            if (result->len) {
                g_string_append(result, ", ");
            }
            g_string_append(result, bdrv_perm_table[i].name);
        }
    }
    return g_string_free(result, false);
}

const char *const PreallocMode_str[] = {
    [PREALLOC_MODE_OFF]      = "off",
    [PREALLOC_MODE_METADATA] = "metadata",
    [PREALLOC_MODE_FALLOC]   = "falloc",
    [PREALLOC_MODE_FULL]     = "full",
    [PREALLOC_MODE__MAX]     = NULL,
};
