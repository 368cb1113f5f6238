/*
 * File names: the backing file an image names (recorded, resolved and
 * looked up along the chain), "json:{...}" file names (parsed at open, and
 * built by bdrv_refresh_filename() for a node that no plain file name can
 * describe), and the exact file names that stand for a node alone.
 *
 * All of this runs in the main loop thread outside coroutine context.
 */
#include "block/block_int.h"
#include "block-internal.h"
#include "util/cutils.h"

/* ---- backing files ---- */

int bdrv_change_backing_file(BlockDriverState *bs, const char *backing_file,
                             const char *backing_fmt, bool require)
{
    int ret;

    if (!bs->drv) {
        return -ENOMEDIUM;
    }
    if ((backing_fmt && !backing_file) ||
        (require && backing_file && !backing_fmt)) {
        return -EINVAL;
    }
    if (!bs->drv->bdrv_change_backing_file) {
        return -ENOTSUP;
    }
    ret = bs->drv->bdrv_change_backing_file(bs, backing_file, backing_fmt);
    if (ret == 0) {
        pstrcpy(bs->backing_file, sizeof(bs->backing_file),
                backing_file ? backing_file : "");
        pstrcpy(bs->backing_format, sizeof(bs->backing_format),
                backing_fmt ? backing_fmt : "");
        pstrcpy(bs->auto_backing_file, sizeof(bs->auto_backing_file),
                backing_file ? backing_file : "");
    }
    return ret;
}

/*
 * Whether @name, as a user gives it for the backing file of @overlay,
 * names @backing: either exactly the name @overlay records, or the same
 * file once @name is taken relative to @overlay's directory, as the
 * recorded name is.  A relative @name is never taken relative to the
 * current directory (QEMU's rule: backing names are relative to the
 * image that holds them).
 */
static bool bdrv_backing_name_matches(BlockDriverState *overlay,
                                      BlockDriverState *backing,
                                      const char *name)
{
    g_autofree char *given = NULL;
    g_autofree char *recorded = NULL;
    g_autofree char *given_real = NULL;
    g_autofree char *recorded_real = NULL;

    if (overlay->backing_file[0] && !strcmp(overlay->backing_file, name)) {
        return true;
    }
    given = bdrv_get_full_backing_filename(overlay, name, NULL);
    recorded = overlay->backing_file[0] ?
               bdrv_get_full_backing_filename(overlay, overlay->backing_file,
                                              NULL) :
               g_strdup(backing->filename);
    if (!given || !recorded) {
        return false;
    }
    given_real = realpath(given, NULL);
    recorded_real = realpath(recorded, NULL);
    return given_real && recorded_real && !strcmp(given_real, recorded_real);
}

BlockDriverState *bdrv_find_backing_image(BlockDriverState *bs,
                                          const char *filename)
{
    for (BlockDriverState *b = bs; b->backing; b = b->backing->bs) {
        if (bdrv_backing_name_matches(b, b->backing->bs, filename)) {
            return b->backing->bs;
        }
    }
    return NULL;
}

/* ---- json: file names ---- */

QDict *bdrv_parse_json_filename(const char *filename, Error **errp)
{
    Error *local_err = NULL;
    QDict *json = qdict_from_json(filename + strlen("json:"), &local_err);

    if (!json) {
        /* as QEMU: broken syntax is explained, a valid non-object is not */
        if (strcmp(error_get_pretty(local_err), "Invalid JSON object given")) {
            error_prepend(&local_err, "Could not parse the JSON options: ");
        }
        error_propagate(errp, local_err);
    }
    return json;
}

static bool bdrv_is_strong_option(const BlockDriver *drv, const char *key)
{
    if (!strcmp(key, "driver") || !strcmp(key, "filename") ||
        !drv->strong_runtime_opts) {
        return true;
    }
    for (const char *const *o = drv->strong_runtime_opts; *o; o++) {
        size_t len = strlen(*o);

        if (len && (*o)[len - 1] == '.' ? !strncmp(key, *o, len)
                                        : !strcmp(key, *o)) {
            return true;
        }
    }
    return false;
}

/* Copies one option keeping its JSON type, so json: prints it as QEMU. */
static void bdrv_copy_option(QDict *dst, const char *key,
                             const QDictEntry *e)
{
    qdict_put_typed(dst, key, qdict_entry_value(e), qdict_entry_type(e));
}

/*
 * Whether the backing node of @bs is not the one its image names, so
 * that a file name must say which it is.  With a backing node, as QEMU
 * decides: its name differs from the one the header gives (a node
 * attached at run time by a snapshot is the header's when the names
 * agree).  Without, the user's options decide, where the image names a
 * backing file at all: "backing": null over an image without one
 * changes nothing, and QEMU keeps the plain name.
 */
static bool bdrv_backing_overridden(BlockDriverState *bs)
{
    if (bs->backing && bs->backing->bs) {
        return strcmp(bs->auto_backing_file, bs->backing->bs->filename);
    }
    return bs->backing_file[0] && bs->explicit_options &&
           (qdict_haskey(bs->explicit_options, "backing") ||
            qdict_has_prefixed_entries(bs->explicit_options, "backing."));
}

/*
 * The options that reopen @bs and its children as they are: the strong
 * options of each node and its driver; *own_opts says whether @bs has
 * strong options besides driver and filename.
 */
static QDict *bdrv_full_open_options(BlockDriverState *bs, bool *own_opts)
{
    QDict *d = qdict_new();
    int list_index = 0;

    *own_opts = false;
    for (const QDictEntry *e = qdict_first(bs->options); e;
         e = qdict_next(bs->options, e)) {
        const char *key = qdict_entry_key(e);

        /* with a backing node, the node says what it is (below); without,
         * "backing": null matters only where it overrides the image's */
        if (!strcmp(key, "backing") &&
            (bs->backing || !bdrv_backing_overridden(bs))) {
            continue;
        }
        if (bdrv_is_strong_option(bs->drv, key)) {
            bdrv_copy_option(d, key, e);
            if (strcmp(key, "driver") && strcmp(key, "filename")) {
                *own_opts = true;
            }
        }
    }
    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;
        QDict *sub;
        bool unused;

        if (c->is_backing && !bdrv_backing_overridden(bs)) {
            continue;
        }
        /*
         * Children that x-blockdev-change can add and remove (quorum's
         * children.N) are a list in QEMU's name, in their order, whatever
         * gaps their indices have.
         */
        g_autofree char *name =
            bs->drv->bdrv_add_child && g_str_has_prefix(c->name, "children.")
            ? g_strdup_printf("children.%d", list_index++)
            : g_strdup(c->name);

        sub = bdrv_full_open_options(c->bs, &unused);
        for (const QDictEntry *e = qdict_first(sub); e;
             e = qdict_next(sub, e)) {
            g_autofree char *key = g_strdup_printf("%s.%s", name,
                                                   qdict_entry_key(e));

            bdrv_copy_option(d, key, e);
        }
        qdict_unref(sub);
    }
    return d;
}

void bdrv_refresh_filename(BlockDriverState *bs)
{
    g_autoptr(QDict) full = NULL;
    bool own_opts;

    if (!bs->drv) {
        return;
    }
    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;

        bdrv_refresh_filename(c->bs);
    }

    full = bdrv_full_open_options(bs, &own_opts);
    if (bs->drv->bdrv_refresh_filename) {
        bs->exact_filename[0] = '\0';
        bs->drv->bdrv_refresh_filename(bs);
    } else if (bs->drv->is_format && !bs->drv->is_filter) {
        BlockDriverState *file = bs->file ? bs->file->bs : NULL;

        /*
         * Opening the file's name probes this format over that protocol:
         * the same node, unless the user changed what it shows.
         */
        bs->exact_filename[0] = '\0';
        if (file && file->exact_filename[0] && !file->drv->is_format &&
            !own_opts && !bdrv_backing_overridden(bs)) {
            pstrcpy(bs->exact_filename, sizeof(bs->exact_filename),
                    file->exact_filename);
        }
    }

    if (bs->exact_filename[0]) {
        pstrcpy(bs->filename, sizeof(bs->filename), bs->exact_filename);
    } else {
        g_autofree char *json = qdict_to_json_filename(full);

        if (strlen(json) >= sizeof(bs->filename)) {
            /* truncated: say so rather than print a broken name */
            memcpy(bs->filename, json, sizeof(bs->filename) - 4);
            strcpy(bs->filename + sizeof(bs->filename) - 4, "...");
        } else {
            strcpy(bs->filename, json);
        }
    }
}

char *bdrv_get_full_backing_filename_from_filename(const char *base,
                                                   const char *backing,
                                                   Error **errp)
{
    const char *slash;

    if (backing[0] == '\0' || backing[0] == '/' ||
        bdrv_path_has_protocol(backing) || !base || !base[0]) {
        return g_strdup(backing);
    }
    if (g_str_has_prefix(base, "json:")) {
        error_setg(errp, "Cannot use relative backing file names for '%s'",
                   base);
        return NULL;
    }
    slash = strrchr(base, '/');
    if (slash) {
        return g_strdup_printf("%.*s%s", (int)(slash - base + 1), base,
                               backing);
    }
    if (bdrv_path_has_protocol(base)) {
        /* "proto:name": the backing file lives under the same protocol */
        return g_strdup_printf("%.*s%s", (int)(strcspn(base, ":") + 1),
                               base, backing);
    }
    return g_strdup(backing);
}

/*
 * As QEMU's bdrv_dirname: a node known by a json: name takes the
 * directory of the nearest node below it, along the file children, that
 * has a plain name (a filter's image, a format's file).
 */
char *bdrv_get_full_backing_filename(BlockDriverState *bs,
                                     const char *backing, Error **errp)
{
    while (g_str_has_prefix(bs->filename, "json:") && bs->file) {
        bs = bs->file->bs;
    }
    return bdrv_get_full_backing_filename_from_filename(bs->filename,
                                                        backing, errp);
}

void bdrv_parse_filename_strip_prefix(const char *filename,
                                      const char *prefix, QDict *options)
{
    if (strstart(filename, prefix, &filename) &&
        bdrv_path_has_protocol(filename)) {
        g_autofree char *path = g_strconcat("./", filename, NULL);

        qdict_put_str(options, "filename", path);
        return;
    }
    qdict_put_str(options, "filename", filename);
}
