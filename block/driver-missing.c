/*
 * The callbacks of a driver whose library was not found when qblock was
 * configured (rbd-missing.c, ssh-missing.c).  block/meson.build compiles
 * such a stub instead of the real driver, so that the driver's file names
 * and driver=NAME get an error that names what is missing rather than
 * "Unknown driver".  The stub's table says which driver it stands for
 * (format_name, protocol_name, its options); this file says, for each,
 * what configure did not find and what to install.
 */
#include "block/block_int.h"

static const struct {
    const char *name;
    const char *missing;    /* what was not found, and the remedy */
} bdrv_missing_libraries[] = {
    { "rbd", "librbd and librados were not found when qblock was "
             "configured (install librbd-dev and librados-dev, then "
             "reconfigure)" },
    { "ssh", "libssh was not found when qblock was configured (install "
             "libssh-dev, then reconfigure)" },
};

/* @name: the driver's name, @len bytes of it. */
static void bdrv_missing_error(const char *name, size_t len, Error **errp)
{
    for (size_t i = 0; i < ARRAY_SIZE(bdrv_missing_libraries); i++) {
        const char *n = bdrv_missing_libraries[i].name;

        if (strlen(n) == len && !strncmp(n, name, len)) {
            error_setg(errp, "%s support is not built in: %s", n,
                       bdrv_missing_libraries[i].missing);
            return;
        }
    }
    /* a stub's table names a driver of the list above */
    g_assert_not_reached();
}

/* Only the stub's own protocol prefix ("rbd:", "ssh://") leads here. */
void bdrv_missing_parse_filename(const char *filename, QDict *options,
                                 Error **errp)
{
    bdrv_missing_error(filename, strcspn(filename, ":"), errp);
}

int bdrv_missing_open(BlockDriverState *bs, QDict *options, int flags,
                      Error **errp)
{
    bdrv_missing_error(bs->drv->format_name, strlen(bs->drv->format_name),
                       errp);
    return -ENOTSUP;
}

int coroutine_fn bdrv_missing_co_create_opts(const BlockDriver *drv,
                                             const char *filename,
                                             QemuOpts *opts, Error **errp)
{
    bdrv_missing_error(drv->format_name, strlen(drv->format_name), errp);
    return -ENOTSUP;
}

int64_t bdrv_missing_getlength(BlockDriverState *bs)
{
    return -ENOMEDIUM;
}
