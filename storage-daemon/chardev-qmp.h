/*
 * The storage daemon's character device commands (qapi/char.json).
 */
#ifndef QBLOCK_SD_CHARDEV_QMP_H
#define QBLOCK_SD_CHARDEV_QMP_H

#include <stdbool.h>

/*
 * Registers the commands, or those @wanted (NULL: all) returns true for:
 * fuzz-qmp runs the ones that touch no host file or socket.
 */
void chardev_register_commands(bool (*wanted)(const char *name));

#endif
