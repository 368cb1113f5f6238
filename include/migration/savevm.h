/*
 * savevm, loadvm and delvm: a machine's device state and guest RAM kept in
 * a qcow2 internal snapshot, next to a snapshot of every disk.
 *
 * A machine owns a SaveState: the registry of what its snapshots hold.
 *  - devices: a VMStateDescription, an instance id (unique per
 *    description), the device, and its reset; saved and loaded in the
 *    order they were registered;
 *  - guest RAM (at most one GuestMemory range): every page that is not
 *    all zeroes;
 *  - drives: the BlockBackends of the machine's disks, each with a name
 *    for messages and for choosing the drive that holds the VM state.
 *
 * Which drives take part, as in QEMU: every drive whose image is writable
 * gets the disk snapshot, so the whole machine goes back in time on
 * loadvm; read-only drives are left alone.  A writable drive whose format
 * has no internal snapshots (raw) makes savevm and loadvm fail before
 * anything changes.  The VM state goes into the snapshot of one drive: the
 * one named by the caller, else the first registered writable drive that
 * can take snapshots; the other drives' snapshots record no VM state.
 *
 * The VM state area holds the device state stream (vmstate.h) of the
 * header, one "ram-page" section per non-zero page of RAM (instance id:
 * the page number), one section per device, and then an 8-byte trailer:
 * "QBVE" and the CRC-32 (zlib's) of every byte before the trailer, so
 * that a corrupt or truncated area is refused before anything is loaded.
 *
 * Call these outside coroutine context, with the guest stopped (in the
 * test harness: between two register accesses of the guest driver).
 */
#ifndef MIGRATION_SAVEVM_H
#define MIGRATION_SAVEVM_H

#include "migration/vmstate.h"
#include "qblock/block-backend.h"
#include "util/guest-memory.h"

typedef struct SaveState SaveState;

/* The guest RAM granularity: pages that are all zeroes are not saved. */
#define SAVEVM_PAGE_SIZE 4096

/* An empty registry; the machine's clock starts at 0 now. */
SaveState *savevm_state_new(void);
/* Drops the drives' references; devices and RAM are the caller's. */
void savevm_state_free(SaveState *s);

/*
 * Registers a device: its state is section @vmsd->name, @instance_id of
 * the stream.  @reset puts the device in its power-on state (before a
 * load, and after a load that failed, so that a device is never left half
 * loaded).  Errors: a (name, instance id) pair registered twice, or the
 * name "ram-page", which is RAM's.
 */
int savevm_register_device(SaveState *s, const VMStateDescription *vmsd,
                           uint32_t instance_id, void *opaque,
                           void (*reset)(void *opaque), Error **errp);
/*
 * Registers guest RAM: guest addresses [0, @size) of @mem, @size a
 * multiple of SAVEVM_PAGE_SIZE.  A reset (before a load, after one that
 * failed) zeroes it.  At most once.
 */
int savevm_register_ram(SaveState *s, const GuestMemory *mem, uint64_t size,
                        Error **errp);
/*
 * Registers a drive (a reference on @blk is taken) under @name, which is
 * unique and not empty.
 */
int savevm_register_drive(SaveState *s, const char *name, BlockBackend *blk,
                          Error **errp);

/*
 * savevm: waits until no drive has a request in flight, saves RAM and the
 * devices (a device that cannot be saved, e.g. with a request still in
 * flight, refuses, and nothing is written), writes the stream into the VM
 * state area of the chosen drive (@vmstate_drive, or NULL for the first
 * that can hold it) and creates snapshot @name (NULL: "vm-YYYYMMDDHHMMSS",
 * as QEMU names it) on every writable drive.  Snapshots that had @name as
 * their ID or tag are deleted once the new ones exist, so a failed savevm
 * never loses the snapshot it was to replace.  When this returns, the
 * snapshots and the VM state are on stable storage.  Returns the bytes of
 * VM state saved (the snapshot's VM SIZE), or -errno with @errp set; a
 * failure on one drive deletes the snapshots already made on the others.
 */
int64_t savevm_save_snapshot(SaveState *s, const char *name,
                             const char *vmstate_drive, Error **errp);
/*
 * loadvm: checks that every writable drive has snapshot @name (by ID,
 * else tag) and that the VM state drive's has VM state, waits for
 * requests in flight, reverts every writable drive to it, reads and
 * checks the stream, resets the devices and RAM and loads every section.
 * A stream that does not fit this machine (an unknown or missing device,
 * a device version it cannot load, a value a device could never hold, a
 * corrupt or truncated area) fails with a message naming the section or
 * the problem, and leaves the devices and RAM reset, with the disks as
 * the snapshot has them.  Nothing changes if the checks before the revert
 * fail (no such snapshot, a disk-only snapshot, an image without
 * snapshots).
 */
int savevm_load_snapshot(SaveState *s, const char *name,
                         const char *vmstate_drive, Error **errp);
/*
 * delvm: deletes every snapshot whose ID or tag is @name from every
 * writable drive that has one; -ENOENT if none has.
 */
int savevm_delete_snapshot(SaveState *s, const char *name, Error **errp);

/*
 * The machine's clock (QEMU's vm clock): nanoseconds the machine has run,
 * recorded in each snapshot (VM CLOCK) and continued from the snapshot's
 * value after a loadvm.
 */
uint64_t savevm_vm_clock_ns(SaveState *s);

#endif
