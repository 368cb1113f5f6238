/*
 * The daemon's side of block exports: --export and the QMP commands
 * block-export-add, block-export-del and query-block-exports, over the
 * export layer of include/block/export.h.
 */
#ifndef QBLOCK_SD_BLOCK_EXPORT_H
#define QBLOCK_SD_BLOCK_EXPORT_H

#include "util/error.h"

/* --export: @arg is keyval BlockExportOptions, the type implied first. */
int block_export_add_cmdline(const char *arg, Error **errp);
void block_export_register_commands(void);

#endif
