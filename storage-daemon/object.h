/*
 * The daemon's side of user-creatable objects: --object and the QMP
 * commands object-add and object-del, over include/util/user-object.h.
 */
#ifndef QBLOCK_SD_OBJECT_H
#define QBLOCK_SD_OBJECT_H

#include "util/error.h"

/* --object: "help" and "TYPE,help" print and exit, as in QEMU. */
int object_add_cmdline(const char *arg, Error **errp);
void object_register_commands(void);

#endif
