/*
 * The daemon's dirty bitmap commands: block-dirty-bitmap-add, -remove,
 * -clear, -enable, -disable, -merge and x-debug-block-dirty-bitmap-sha256,
 * over include/block/dirty-bitmap.h.
 */
#ifndef QBLOCK_SD_DIRTY_BITMAP_QMP_H
#define QBLOCK_SD_DIRTY_BITMAP_QMP_H

void dirty_bitmap_register_commands(void);

#endif
