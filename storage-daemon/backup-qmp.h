/*
 * The daemon's blockdev-backup command (and its transaction action,
 * declared in transaction.h), over block/backup.c.
 */
#ifndef QBLOCK_SD_BACKUP_QMP_H
#define QBLOCK_SD_BACKUP_QMP_H

void backup_register_commands(void);

#endif
