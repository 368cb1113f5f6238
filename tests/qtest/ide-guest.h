/*
 * A guest driver for the IDE channel of hw/ide, in the way Linux's libata
 * drives a PIIX channel: it programs the task file, starts commands, takes
 * the interrupt, and moves data by PIO or with the bus master.
 */
#ifndef IDE_GUEST_H
#define IDE_GUEST_H

#include "libqguest.h"
#include "hw/ide.h"
#include "hw/ata.h"

typedef struct IDEGuest {
    QGuest *g;
    IDEBus *bus;
    uint64_t prdt;          /* guest address of the PRD table */
    uint64_t buf;           /* guest address of the DMA data buffer */
    uint64_t buf_size;
} IDEGuest;

/*
 * A channel with @blk as unit 0, and 16 MiB of guest RAM; the machine
 * (ig->g->savevm) has the channel as device "ide-bus" 0 and @blk as drive
 * "ide0-hd0".
 */
IDEGuest *ide_guest_new(BlockBackend *blk);
void ide_guest_free(IDEGuest *ig);

/* Runs the loop until the selected drive is not BSY; returns Status. */
uint8_t ide_guest_wait_not_busy(IDEGuest *ig);
/*
 * Writes the task file for @lba/@count (LBA48 form when @lba48: high
 * bytes first), then the command.  Does not wait.
 */
void ide_guest_taskfile(IDEGuest *ig, uint8_t cmd, uint64_t lba,
                        uint32_t count, bool lba48);
/*
 * A non-data command (or one that fails before any data): issues it,
 * waits for the interrupt, reads Status (which clears it) and returns it.
 */
uint8_t ide_guest_nodata(IDEGuest *ig, uint8_t cmd, uint8_t feature,
                         uint8_t nsector);
/* IDENTIFY DEVICE into @id; returns Status at the end. */
uint8_t ide_guest_identify(IDEGuest *ig, uint16_t id[ATA_ID_WORDS]);
/*
 * A PIO data command moving @count sectors to/from @buf in blocks of
 * @block sectors (1, or the SET MULTIPLE value); returns the final Status.
 * *irqs (may be NULL) counts the interrupts taken.
 */
uint8_t ide_guest_pio(IDEGuest *ig, uint8_t cmd, uint64_t lba,
                      uint32_t count, uint32_t block, void *buf,
                      unsigned *irqs);
/*
 * A DMA command over the guest buffer ig->buf, split into PRDs of
 * @prd_bytes (a multiple of 2; 0: 64 KiB); @buf is copied in before a
 * write and out after a read.  Returns the final Status; *bm_status (may
 * be NULL) gets the bus-master status before the driver stops it.
 */
uint8_t ide_guest_dma(IDEGuest *ig, uint8_t cmd, uint64_t lba,
                      uint32_t count, uint32_t prd_bytes, void *buf,
                      uint8_t *bm_status);
/* Issues a DMA command and starts the bus master without waiting. */
void ide_guest_dma_start(IDEGuest *ig, uint8_t cmd, uint64_t lba,
                         uint32_t count, uint32_t prd_bytes);
/* Finishes what ide_guest_dma_start began; returns Status. */
uint8_t ide_guest_dma_finish(IDEGuest *ig, uint8_t *bm_status);
bool ide_guest_is_write_cmd(uint8_t cmd);

#endif
