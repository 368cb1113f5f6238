/*
 * blockdev-reopen (blockdev-reopen.c): QEMU 7.2's command, its arguments
 * and messages, over the block layer's reopen transaction
 * (block/block-reopen.c).
 */
#ifndef QBLOCK_BLOCKDEV_REOPEN_H
#define QBLOCK_BLOCKDEV_REOPEN_H

/* Registers blockdev-reopen. */
void blockdev_reopen_register_commands(void);

#endif
