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

static bool amend_job_has_desc(const GArray *descs, const char *name)
{
    for (guint i = 0; i < descs->len; i++) {
        if (!strcmp(g_array_index(descs, QemuOptDesc, i).name, name)) {
            return true;
        }
    }
    return false;
}

/*
 * The options, flattened as qemu-img amend's -o names them, absorbed into
 * a table of the driver's amend options and, as strings, the QMP-only
 * names among them (invariant 1: the table is complete first).
 */
static bool amend_job_setup(AmendJob *s, JsonObject *options, Error **errp)
{
    const QemuOptsList *amend_opts = bdrv_driver_amend_opts(s->bs->drv);
    g_autoptr(QDict) flat = qdict_from_json_object(options);
    QemuOptDesc end = { 0 };

    qdict_del(flat, "driver");
    s->descs = g_array_new(false, true, sizeof(QemuOptDesc));
    for (const QemuOptDesc *d = amend_opts->desc; d->name; d++) {
        g_array_append_val(s->descs, *d);
    }
    for (const QDictEntry *e = qdict_first(flat); e;
         e = qdict_next(flat, e)) {
        QemuOptDesc d = {
            /* interned: the table's names live as long as the job */
            .name = g_intern_string(qdict_entry_key(e)),
            .type = QEMU_OPT_STRING,
        };

        if (!amend_job_has_desc(s->descs, d.name)) {
            g_array_append_val(s->descs, d);
        }
    }
    g_array_append_val(s->descs, end);
    s->list = (QemuOptsList) {
        .name = amend_opts->name,
        .desc = (const QemuOptDesc *)s->descs->data,
    };
    s->opts = qemu_opts_absorb_qdict(&s->list, flat, errp);
    return s->opts != NULL;
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
