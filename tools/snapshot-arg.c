/*
 * The -l argument shared by qblock-img and qblock-nbd (snapshot-arg.h).
 */
#include "snapshot-arg.h"

#include "block/snapshot.h"
#include "util/error.h"

/* -l snapshot.id=ID,snapshot.name=NAME */
static const QemuOptDesc tool_snapshot_desc[] = {
    { .name = "snapshot.id", .type = QEMU_OPT_STRING,
      .help = "ID of the internal snapshot" },
    { .name = "snapshot.name", .type = QEMU_OPT_STRING,
      .help = "name of the internal snapshot" },
    { NULL }
};

static const QemuOptsList tool_snapshot_opts = {
    .name = "internal-snapshot",
    .desc = tool_snapshot_desc,
};

bool tool_snapshot_arg_parse(ToolSnapshotArg *sn, const char *arg)
{
    Error *err = NULL;

    if (!g_str_has_prefix(arg, "snapshot.")) {
        sn->id_or_name = arg;
        return true;
    }
    qemu_opts_del(sn->opts);
    sn->opts = qemu_opts_parse(&tool_snapshot_opts, arg, &err);
    if (!sn->opts) {
        error_report_err(err);
        return false;
    }
    return true;
}

int tool_snapshot_arg_load(BlockBackend *blk, const ToolSnapshotArg *sn)
{
    Error *err = NULL;

    if (sn->opts) {
        bdrv_snapshot_load_tmp(blk_bs(blk),
                               qemu_opt_get(sn->opts, "snapshot.id"),
                               qemu_opt_get(sn->opts, "snapshot.name"),
                               &err);
    } else if (sn->id_or_name) {
        bdrv_snapshot_load_tmp_by_id_or_name(blk_bs(blk), sn->id_or_name,
                                             &err);
    }
    if (err) {
        error_report("Failed to load snapshot: %s", error_get_pretty(err));
        error_free(err);
        return -EINVAL;
    }
    return 0;
}

bool tool_snapshot_arg_given(const ToolSnapshotArg *sn)
{
    return sn->opts || sn->id_or_name;
}

void tool_snapshot_arg_free(ToolSnapshotArg *sn)
{
    qemu_opts_del(sn->opts);
    sn->opts = NULL;
}
