/*
 * The blockdev-create job (include/job/create.h).
 *
 * QMP's options become the QemuOpts of the driver's create_opts under
 * qemu-img's names (cluster-size -> cluster_size, version -> compat), so
 * that creation runs the same code, with the same checks and messages,
 * as qemu-img create.  Node references (a format's file and data-file)
 * are resolved when the job runs, as QEMU does (a missing node fails the
 * job, not the command), and held until the job is freed.
 */
#include "job/create.h"

#include "block/block.h"
#include "block/block_int.h"

typedef struct CreateJob {
    Job job;
    const BlockDriver *drv;
    QemuOptsList *opts_list;
    QemuOpts *opts;
    /* the file protocol: the file to create */
    char *filename;
    /* a format: the references to the nodes it is created on, resolved
     * when the job runs (as QEMU does), and the nodes (a reference each);
     * extents: a VMDK's extent files, a JSON array of references */
    JsonNode *file_ref;
    JsonNode *data_file_ref;
    JsonNode *extents_ref;
    /* ssh, rbd: where the new image goes (the options of a node) */
    QDict *location;
    BlockDriverState *file;
    BlockDriverState *data_file;
    GPtrArray *extents;
} CreateJob;

static BlockDriverState *create_job_node_ref(JsonNode *ref, Error **errp);

/* The nodes the image goes on, looked up now. */
static bool create_job_resolve(CreateJob *s, Error **errp)
{
    if (s->file_ref) {
        s->file = create_job_node_ref(s->file_ref, errp);
        if (!s->file) {
            return false;
        }
    }
    if (s->data_file_ref) {
        s->data_file = create_job_node_ref(s->data_file_ref, errp);
        if (!s->data_file) {
            return false;
        }
        /* the image records the data file by its file name */
        if (!qemu_opt_set(s->opts, "data_file",
                          bdrv_get_filename(s->data_file), errp)) {
            return false;
        }
    }
    if (s->extents_ref) {
        JsonArray *refs = json_node_get_array(s->extents_ref);

        for (guint i = 0; i < json_array_get_length(refs); i++) {
            BlockDriverState *bs =
                create_job_node_ref(json_array_get_element(refs, i), errp);

            if (!bs) {
                return false;
            }
            g_ptr_array_add(s->extents, bs);
        }
    }
    return true;
}

static int coroutine_fn create_job_run(Job *job, Error **errp)
{
    CreateJob *s = (CreateJob *)job;
    BdrvCreateTarget tgt = {
        .filename = s->filename,
        .file = s->file,
        .data_file = s->data_file,
    };
    int ret;

    job_progress_set_remaining(job, 1);
    if (s->filename) {
        ret = bdrv_create(s->drv, s->filename, s->opts, errp);
    } else if (create_job_resolve(s, errp)) {
        tgt.file = s->file;
        tgt.data_file = s->data_file;
        tgt.extents = (BlockDriverState *const *)s->extents->pdata;
        tgt.n_extents = s->extents->len;
        tgt.location = s->location;
        ret = s->drv->bdrv_co_create_on_node(s->drv, &tgt, s->opts, errp);
    } else {
        ret = -EINVAL;
    }
    /* done, whatever the result (QEMU reports 1 of 1 after a failure) */
    job_progress_update(job, 1);
    return ret;
}

static void create_job_free(Job *job)
{
    CreateJob *s = (CreateJob *)job;

    if (s->opts) {
        qemu_opts_del(s->opts);
    }
    qemu_opts_free(s->opts_list);
    g_free(s->filename);
    if (s->file_ref) {
        json_node_unref(s->file_ref);
    }
    if (s->data_file_ref) {
        json_node_unref(s->data_file_ref);
    }
    if (s->extents_ref) {
        json_node_unref(s->extents_ref);
    }
    if (s->extents) {
        g_ptr_array_free(s->extents, true);
    }
    if (s->location) {
        qdict_unref(s->location);
    }
    if (s->file) {
        bdrv_unref(s->file);
    }
    if (s->data_file) {
        bdrv_unref(s->data_file);
    }
}

static const JobDriver create_job_driver = {
    .instance_size = sizeof(CreateJob),
    .job_type = "create",
    .run = create_job_run,
    .free = create_job_free,
};

/*
 * A BlockdevRef: the name of a node, or the options of a new one.
 * Returns a new reference.
 */
static BlockDriverState *create_job_node_ref(JsonNode *ref, Error **errp)
{
    BlockDriverState *bs;

    if (JSON_NODE_HOLDS_OBJECT(ref)) {
        QDict *options = qdict_from_json_object(json_node_get_object(ref));

        return bdrv_open(NULL, NULL, options, BDRV_O_RDWR, errp);
    }
    if (!JSON_NODE_HOLDS_VALUE(ref) ||
        json_node_get_value_type(ref) != G_TYPE_STRING) {
        error_setg(errp, "Invalid parameter type for 'file', expected: "
                   "BlockdevRef");
        return NULL;
    }
    bs = bdrv_lookup_node(json_node_get_string(ref), errp);
    if (!bs) {
        return NULL;
    }
    bdrv_ref(bs);
    return bs;
}

/*
 * One QMP member as the create option qemu-img knows it by: the same name
 * where the driver has it (luks' key-secret, qcow2's encrypt.iter-time),
 * else with underscores (cluster-size -> cluster_size).  An object's
 * members are options of its name and a dot (encrypt -> encrypt.format).
 */
static bool create_job_set_opt(QemuOpts *opts, const QemuOptsList *list,
                               const char *member, JsonNode *value,
                               Error **errp)
{
    g_autofree char *name = NULL;
    g_autofree char *text = NULL;

    if (JSON_NODE_HOLDS_OBJECT(value)) {
        JsonObject *object = json_node_get_object(value);
        g_autoptr(GList) members = json_object_get_members(object);

        for (GList *l = members; l; l = l->next) {
            g_autofree char *sub = g_strdup_printf("%s.%s", member,
                                                   (char *)l->data);

            if (!create_job_set_opt(opts, list, sub,
                                    json_object_get_member(object, l->data),
                                    errp)) {
                return false;
            }
        }
        return true;
    }
    if (!strcmp(member, "version")) {
        name = g_strdup("compat");
    } else if (qemu_opts_find_desc(list, member)) {
        name = g_strdup(member);
    } else {
        name = g_strdelimit(g_strdup(member), "-", '_');
    }
    switch (json_node_get_value_type(value)) {
    case G_TYPE_BOOLEAN:
        text = g_strdup(json_node_get_boolean(value) ? "on" : "off");
        break;
    case G_TYPE_INT64:
        text = g_strdup_printf("%" PRId64, json_node_get_int(value));
        break;
    default:
        text = g_strdup(json_node_get_string(value));
        break;
    }
    return qemu_opt_set(opts, name, text, errp);
}

static bool create_job_setup(CreateJob *s, JsonObject *options, Error **errp)
{
    g_autoptr(GList) members = json_object_get_members(options);

    /*
     * A format takes the file protocol's options too, as qemu-img create
     * does (luks: preallocation); the schema has let through only those
     * QEMU's blockdev-create has.
     */
    s->opts_list = qemu_opts_append(NULL, s->drv->create_opts);
    if (!s->drv->protocol_name) {
        s->opts_list = qemu_opts_append(s->opts_list,
                                        bdrv_find_format("file")->create_opts);
    }
    s->opts = qemu_opts_create(s->opts_list);
    for (GList *l = members; l; l = l->next) {
        const char *member = l->data;
        JsonNode *value = json_object_get_member(options, member);

        if (!strcmp(member, "driver")) {
            continue;
        } else if (!strcmp(member, "file")) {
            s->file_ref = json_node_copy(value);
        } else if (!strcmp(member, "data-file")) {
            s->data_file_ref = json_node_copy(value);
        } else if (!strcmp(member, "location") &&
                   JSON_NODE_HOLDS_OBJECT(value)) {
            s->location = qdict_from_json_object(json_node_get_object(value));
        } else if (!strcmp(member, "extents") &&
                   JSON_NODE_HOLDS_ARRAY(value)) {
            s->extents_ref = json_node_copy(value);
        } else if (!strcmp(member, "filename") && !s->drv->protocol_name) {
            continue;
        } else if (!strcmp(member, "filename")) {
            s->filename = g_strdup(json_object_get_string_member(options,
                                                                 member));
        } else if (!create_job_set_opt(s->opts, s->opts_list, member, value,
                                       errp)) {
            return false;
        }
    }
    return true;
}

bool blockdev_create_start(const char *job_id, JsonObject *options,
                           Error **errp)
{
    const char *fmt = json_object_get_string_member(options, "driver");
    const BlockDriver *drv = bdrv_find_format(fmt);
    CreateJob *s;

    if (!drv) {
        error_setg(errp, "Block driver '%s' not found or not supported",
                   fmt);
        return false;
    }
    /*
     * A format creates on nodes, ssh and rbd at a location, the file
     * protocol by file name (not one that only opens what is there, as
     * qemu-img create on a device does).
     */
    if (!drv->create_opts ||
        (!drv->bdrv_co_create_on_node &&
         (!drv->protocol_name || !drv->bdrv_co_create_opts ||
          drv->bdrv_co_create_opts == bdrv_co_create_opts_simple))) {
        error_setg(errp, "Driver does not support blockdev-create");
        return false;
    }
    s = job_create(job_id, &create_job_driver, JOB_MANUAL_DISMISS, errp);
    if (!s) {
        return false;
    }
    s->drv = drv;
    s->extents = g_ptr_array_new_with_free_func((GDestroyNotify)bdrv_unref);
    if (!create_job_setup(s, options, errp)) {
        job_early_fail(&s->job);
        return false;
    }
    job_start(&s->job);
    return true;
}
