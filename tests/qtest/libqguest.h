/*
 * The guest side of the qtest harnesses: guest RAM, an interrupt line that
 * records what the device does with it, images and BlockBackends, and a
 * loop that runs the event loop until a condition holds.
 *
 * Guest RAM is two host allocations, [0, size/2) and [size/2, size), so
 * that DMA across the boundary exercises devices' handling of ranges that
 * map in pieces; addresses at or past the end are not RAM.
 *
 * A QGuest is also the machine: its SaveState (migration/savevm.h) holds
 * the RAM, and the device harnesses register their device and drive in it
 * when they create them, so that qguest_hmp("savevm NAME") snapshots the
 * whole machine into its qcow2 images and "loadvm NAME" brings it back.
 */
#ifndef LIBQGUEST_H
#define LIBQGUEST_H

#include "block/block_int.h"
#include "qblock/block-backend.h"
#include "util/guest-memory.h"
#include "hw/irq.h"
#include "migration/savevm.h"

typedef struct QGuest {
    uint8_t *ram[2];
    uint64_t ram_size;
    uint64_t alloc_next;        /* bump allocator over RAM */
    GuestMemory mem;
    IRQLine irq;
    int irq_level;
    unsigned irq_raised;        /* rising edges seen */
    SaveState *savevm;          /* RAM, devices and drives of the machine */
} QGuest;

QGuest *qguest_new(uint64_t ram_size);
void qguest_free(QGuest *g);
/* Allocates @size bytes of guest RAM aligned to @align; never freed. */
uint64_t qguest_alloc(QGuest *g, uint64_t size, uint64_t align);
void qguest_memwrite(QGuest *g, uint64_t addr, const void *buf, size_t len);
void qguest_memread(QGuest *g, uint64_t addr, void *buf, size_t len);
void qguest_memset(QGuest *g, uint64_t addr, int c, size_t len);
void qguest_writew(QGuest *g, uint64_t addr, uint16_t val);
void qguest_writel(QGuest *g, uint64_t addr, uint32_t val);
void qguest_writeq(QGuest *g, uint64_t addr, uint64_t val);
uint16_t qguest_readw(QGuest *g, uint64_t addr);
uint32_t qguest_readl(QGuest *g, uint64_t addr);

/*
 * A monitor command on the machine, with QEMU's HMP names:
 *   savevm [NAME]   snapshot the disks, the devices and RAM
 *   loadvm NAME     go back to snapshot NAME (by ID, else tag)
 *   delvm NAME      delete snapshot NAME from every drive
 * Returns NULL on success, else the error message (g_free it).
 */
char *qguest_hmp(QGuest *g, const char *cmdline);

/*
 * Runs the event loop until @cond(@opaque) is true; fails the test after
 * 20 seconds, which no request of these tests comes near.
 */
void qguest_wait(bool (*cond)(void *opaque), void *opaque);
/* Runs the event loop until the interrupt line is high. */
void qguest_wait_irq(QGuest *g);
/* Runs the event loop until nothing is left to do. */
void qguest_settle(void);

/* A temporary image of @size bytes: "raw" (sparse) or "qcow2". */
char *qguest_image_new(const char *fmt, int64_t size);
/*
 * Opens @path as @fmt read-write under cache mode @mode ("writeback",
 * "writethrough", ...).  @extra (may be NULL) adds options, e.g. a filter
 * between the format and the file: {"file.driver": "blkcrash", ...}.
 */
BlockBackend *qguest_blk_open(const char *path, const char *fmt,
                              const char *mode, QDict *extra);
/* The node whose flushes reach the disk: the protocol node at the bottom. */
BlockDriverState *qguest_file_node(BlockBackend *blk);
uint64_t qguest_file_flushes(BlockBackend *blk);
/* Fills @buf with a pattern that differs for every sector and @seed. */
void qguest_pattern(void *buf, size_t len, uint64_t start_sector,
                    uint32_t seed);

#endif
