/*
 * The x-blockdev-amend job (include/job/amend.h).
 *
 * QMP's options become QemuOpts under the names qemu-img amend -o uses
 * (a nested object's members as "encrypt.state"), so that the job runs
 * the driver's amend code with its checks and messages.  Two names only
 * QMP can give ride along in the same QemuOpts, beyond the driver's
 * amend_opts: the LUKS unlock "secret" (QEMU's default: the secret the
 * image was opened with) and qcow2's "encrypt.format", by which the
 * qcow2 driver knows the request came from QMP and answers with QEMU's
 * words of that path (block/qcow2-amend.c).
 *
 * Invariant 1: the option table (descs) is complete before opts is
 * created and never changes after, since the QemuOpts point into it.
 *
 * The job runs in the node's AioContext (an iothread's, if the node was
 * moved there), where its requests must come from; it holds a reference
 * to the node until it is freed.
 */
#include "job/amend.h"

#include "block/block.h"
#include "block/block_int.h"

typedef struct AmendJob {
    Job job;
    BlockDriverState *bs;
    bool force;
    /* amend_opts and the QMP-only names: invariant 1 */
    GArray *descs;
    QemuOptsList list;
    QemuOpts *opts;
} AmendJob;

static int coroutine_fn amend_job_run(Job *job, Error **errp)
{
    AmendJob *s = (AmendJob *)job;
    int ret;

    job_progress_set_remaining(job, 1);
    ret = bdrv_amend(s->bs, s->opts, NULL, NULL, s->force, errp);
    /* done, whatever the result (QEMU reports 1 of 1 after a failure) */
    job_progress_update(job, 1);
    return ret;
}

static void amend_job_free(Job *job)
{
    AmendJob *s = (AmendJob *)job;

    if (s->opts) {
        qemu_opts_del(s->opts);
    }
    if (s->descs) {
        g_array_free(s->descs, true);
    }
    bdrv_unref(s->bs);
}

static const JobDriver amend_job_driver = {
    .instance_size = sizeof(AmendJob),
    .job_type = "amend",
    .run = amend_job_run,
    .free = amend_job_free,
};

static bool amend_job_has_desc(AmendJob *s, const char *name)
{
    for (guint i = 0; i < s->descs->len; i++) {
        if (!strcmp(g_array_index(s->descs, QemuOptDesc, i).name, name)) {
            return true;
        }
    }
    return false;
}

/*
 * The option table: the driver's amend options and, as strings, the
 * names of @options that only QMP gives (invariant 1: built before
 * qemu_opts_create, never changed after).
 */
static void amend_job_add_descs(AmendJob *s, JsonObject *options,
                                const char *prefix)
{
    g_autoptr(GList) members = json_object_get_members(options);

    for (GList *l = members; l; l = l->next) {
        JsonNode *value = json_object_get_member(options, l->data);
        g_autofree char *name = g_strconcat(prefix, l->data, NULL);

        if (!strcmp(l->data, "driver") && !*prefix) {
            continue;
        }
        if (JSON_NODE_HOLDS_OBJECT(value)) {
            g_autofree char *nested = g_strconcat(name, ".", NULL);

            amend_job_add_descs(s, json_node_get_object(value), nested);
        } else if (!amend_job_has_desc(s, name)) {
            /* the table's life: the job's (its names are interned) */
            QemuOptDesc d = {
                .name = g_intern_string(name),
                .type = QEMU_OPT_STRING,
            };

            g_array_append_val(s->descs, d);
        }
    }
}

/* Each member of @options as the amend option qemu-img knows it by. */
static bool amend_job_set_opts(AmendJob *s, JsonObject *options,
                               const char *prefix, Error **errp)
{
    g_autoptr(GList) members = json_object_get_members(options);

    for (GList *l = members; l; l = l->next) {
        JsonNode *value = json_object_get_member(options, l->data);
        g_autofree char *name = g_strconcat(prefix, l->data, NULL);
        g_autofree char *text = NULL;

        if (!strcmp(l->data, "driver") && !*prefix) {
            continue;
        }
        if (JSON_NODE_HOLDS_OBJECT(value)) {
            g_autofree char *nested = g_strconcat(name, ".", NULL);

            if (!amend_job_set_opts(s, json_node_get_object(value), nested,
                                    errp)) {
                return false;
            }
            continue;
        }
        switch (json_node_get_value_type(value)) {
        case G_TYPE_BOOLEAN:
            text = g_strdup(json_node_get_boolean(value) ? "on" : "off");
            break;
        case G_TYPE_INT64:
            /* a negative keyslot: QEMU's C int, which its check prints */
            text = g_strdup_printf("%" PRIu64,
                                   (uint64_t)json_node_get_int(value));
            break;
        default:
            text = g_strdup(json_node_get_string(value));
            break;
        }
        if (!qemu_opt_set(s->opts, name, text, errp)) {
            return false;
        }
    }
    return true;
}

static bool amend_job_setup(AmendJob *s, JsonObject *options, Error **errp)
{
    const QemuOptsList *amend_opts = bdrv_driver_amend_opts(s->bs->drv);
    QemuOptDesc end = { 0 };

    s->descs = g_array_new(false, true, sizeof(QemuOptDesc));
    for (const QemuOptDesc *d = amend_opts->desc; d->name; d++) {
        g_array_append_val(s->descs, *d);
    }
    amend_job_add_descs(s, options, "");
    g_array_append_val(s->descs, end);
    s->list = (QemuOptsList) {
        .name = amend_opts->name,
        .desc = (const QemuOptDesc *)s->descs->data,
    };
    s->opts = qemu_opts_create(&s->list);
    return amend_job_set_opts(s, options, "", errp);
}

bool blockdev_amend_start(const char *job_id, const char *node_name,
                          JsonObject *options, bool force, Error **errp)
{
    const char *fmt = json_object_get_string_member(options, "driver");
    BlockDriverState *bs = bdrv_find_node(node_name);
    AmendJob *s;

    /* QEMU's checks, in its order */
    if (!bs) {
        error_setg(errp, "Cannot find device='' nor node-name='%s'",
                   node_name);
        return false;
    }
    if (!bs->drv || strcmp(bdrv_driver_name(bs->drv), fmt)) {
        error_setg(errp, "x-blockdev-amend doesn't support changing the "
                   "block driver");
        return false;
    }
    if (!bdrv_driver_can_amend(bs->drv)) {
        error_setg(errp, "Driver does not support x-blockdev-amend");
        return false;
    }
    /* QEMU's job takes write permission on the image first */
    if (bdrv_is_read_only(bs)) {
        error_setg(errp, "Block node is read-only");
        return false;
    }
    s = job_create_in_context(job_id, &amend_job_driver,
                              bdrv_get_aio_context(bs), JOB_MANUAL_DISMISS,
                              errp);
    if (!s) {
        return false;
    }
    bdrv_ref(bs);
    s->bs = bs;
    s->force = force;
    if (!amend_job_setup(s, options, errp)) {
        job_early_fail(&s->job);
        return false;
    }
    job_start(&s->job);
    return true;
}
