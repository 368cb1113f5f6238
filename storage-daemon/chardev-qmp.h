/*
 * The storage daemon's character device commands (qapi/char.json).
 */
#ifndef QBLOCK_SD_CHARDEV_QMP_H
#define QBLOCK_SD_CHARDEV_QMP_H

void chardev_register_commands(void);

#endif
