/*
 * The options shared by qblock-img, qblock-io and qblock-nbd
 * (tool-opts.h).
 */
#include "tool-opts.h"

#include "util/error.h"
#include "util/user-object.h"

bool tool_object_option(const char *arg)
{
    Error *err = NULL;

    if (!user_object_add_cmdline(arg, &err)) {
        error_report_err(err);
        return false;
    }
    return true;
}

void tool_trace_option(const char *arg)
{
    warn_report("tracing is not supported, ignoring -T %s", arg);
}

QDict *tool_image_options(const char *name, bool image_opts, const char *fmt,
                          Error **errp)
{
    QDict *options;

    if (image_opts) {
        return keyval_parse_flat(name, "file", errp);
    }
    options = qdict_new();
    if (fmt) {
        qdict_put_str(options, "driver", fmt);
    }
    return options;
}
