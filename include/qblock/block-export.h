/*
 * What a user of the export layer (the storage daemon's monitor) may read
 * of one export: its id, its type and its BlockBackend.  The export's
 * struct belongs to the export layer and its drivers (block/export.h);
 * these calls are the view a user gets.
 */
#ifndef QBLOCK_BLOCK_EXPORT_H
#define QBLOCK_BLOCK_EXPORT_H

#include "qblock/block-backend.h"

typedef struct BlockExport BlockExport;

/* The export's unique id (block-export-add's "id"). */
const char *blk_exp_get_id(BlockExport *exp);
/* Its type, a value of the schema's BlockExportType ("nbd", ...). */
const char *blk_exp_get_type(BlockExport *exp);
/* The BlockBackend it serves; it lives as long as the export does. */
BlockBackend *blk_exp_get_blk(BlockExport *exp);
/*
 * Sets the write cache of @blk, as the operator asks: through the export
 * that serves it, if one does, so that its clients learn of it (a
 * vhost-user-blk front-end gets a config-change notification).
 */
void blk_exp_set_write_cache(BlockBackend *blk, bool writeback);

#endif
