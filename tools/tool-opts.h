/*
 * Command-line options that qblock-img, qblock-io and qblock-nbd take
 * alike, handled once so that the tools cannot drift apart where QEMU's
 * own tools agree.
 */
#ifndef QBLOCK_TOOL_OPTS_H
#define QBLOCK_TOOL_OPTS_H

#include "util/osdep.h"
#include "util/qdict.h"

/*
 * --object OBJECTDEF: creates the object at once, as QEMU's tools do,
 * since later options and the image opened after them may name it
 * ("--object help" lists the types and exits).  False after reporting
 * why the object could not be created; the caller exits.
 */
bool tool_object_option(const char *arg);

/*
 * -T/--trace of qemu-io and qemu-nbd: qblock has no trace events, so the
 * option is accepted with a warning and does nothing.
 */
void tool_trace_option(const char *arg);

/*
 * The options that open the image @name of the command line, as
 * qemu-img and qemu-nbd read it: with --image-opts (@image_opts) @name
 * is itself "key=value,..." in QemuOpts syntax, a bare first value naming
 * the file; otherwise the options only name the format @fmt, if given.
 * NULL with @errp set if @name does not parse.
 */
QDict *tool_image_options(const char *name, bool image_opts, const char *fmt,
                          Error **errp);

#endif
