/*
 * An IDE channel with up to two ATA disks and bus-master DMA.
 *
 * The channel is driven through its registers, as a guest driver would:
 * the command block (ide_cmd_read/write, and the 16/32-bit data port),
 * the control block (ide_ctrl_read/write) and the channel's bus-master
 * registers (ide_bmdma_read/write).  A transport maps its I/O ports onto
 * these; the qtest harness calls them directly.  DMA goes to the
 * GuestMemory and interrupts to the IRQLine given at creation.
 *
 * Commands run asynchronously in the BlockBackend's AioContext: a
 * register write starts a request and returns, the device completes it
 * from the event loop and raises its interrupt.
 *
 * The disk's volatile write cache is the BlockBackend's write cache flag
 * (blk_enable_write_cache): the state the drive has at attach time is its
 * default (from the drive's cache mode), SET FEATURES 02h/82h flips it and
 * IDENTIFY words 82/85 report it.
 */
#ifndef HW_IDE_H
#define HW_IDE_H

#include "qblock/block-backend.h"
#include "util/guest-memory.h"
#include "hw/irq.h"
#include "migration/vmstate.h"

typedef struct IDEBus IDEBus;

typedef struct IDEDriveConf {
    BlockBackend *blk;          /* the disk's image; a reference is taken */
    const char *serial;         /* at most 20 characters; NULL: "QB000<n>" */
    const char *model;          /* at most 40; NULL: "QBLOCK HARDDISK" */
} IDEDriveConf;

IDEBus *ide_bus_new(const GuestMemory *mem, const IRQLine *irq);
/*
 * Puts an ATA disk at @unit (0: master, 1: slave).  Errors name the unit
 * and the problem (taken, image too small, string too long).
 */
int ide_bus_attach(IDEBus *bus, unsigned unit, const IDEDriveConf *conf,
                   Error **errp);
/* Waits for requests in flight, then frees the channel. */
void ide_bus_free(IDEBus *bus);
/* Hardware reset: every setting back to its default, incl. write cache. */
void ide_bus_reset(IDEBus *bus);
/* True while a request of the channel is in flight. */
bool ide_bus_busy(IDEBus *bus);

/* Command block registers 1-7 (ATA_REG_*), 8 bits. */
uint8_t ide_cmd_read(IDEBus *bus, unsigned reg);
void ide_cmd_write(IDEBus *bus, unsigned reg, uint8_t val);
/* The data register, 16 or 32 bits at a time (PIO transfers). */
uint16_t ide_data_read16(IDEBus *bus);
void ide_data_write16(IDEBus *bus, uint16_t val);
uint32_t ide_data_read32(IDEBus *bus);
void ide_data_write32(IDEBus *bus, uint32_t val);
/* Alternate Status (read) and Device Control (write). */
uint8_t ide_ctrl_read(IDEBus *bus);
void ide_ctrl_write(IDEBus *bus, uint8_t val);
/* Bus-master registers: @offset BM_REG_*, @size 1, 2 or 4 bytes. */
uint32_t ide_bmdma_read(IDEBus *bus, unsigned offset, unsigned size);
void ide_bmdma_write(IDEBus *bus, unsigned offset, unsigned size,
                     uint32_t val);

/*
 * The channel's device state, with both drives' registers, settings
 * (write cache included) and a PIO transfer in progress.  Saving needs the
 * channel idle of requests (drain its BlockBackends first); a load needs a
 * channel with drives attached at the same units.
 */
extern const VMStateDescription vmstate_ide_bus;

#endif
