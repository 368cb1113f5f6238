/*
 * savevm, loadvm and delvm (see include/migration/savevm.h for the model,
 * the choice of drives and the layout of the VM state area).
 *
 * Invariants:
 *  1. Nothing is written before every check that needs no write has
 *     passed: savevm refuses a writable drive without snapshots, a missing
 *     VM state drive or a device that cannot be saved before it writes
 *     the VM state; loadvm refuses a missing snapshot, a disk-only one or
 *     an oversized VM state before it reverts a disk.
 *  2. savevm reports success only when the snapshots exist on stable
 *     storage with their VM state: bdrv_snapshot_create() flushes the VM
 *     state (and everything the disk's L1 table reaches) before it writes
 *     the snapshot's L1 copy and table entry, and flushes again at the end
 *     (block/qcow2-snapshot.c, S3).  A crash before that leaves the image
 *     without the new snapshot, never with one whose VM state is missing.
 *  3. A device is loaded only from a stream whose trailer and checksum
 *     match (a corrupt area is refused as a whole), and a load that fails
 *     at any section leaves every device and RAM reset: never half loaded.
 *  4. Requests are quiesced first: no drive has a request in flight when
 *     the devices are saved, reverted under or loaded, and no completion
 *     can write into RAM or a device after its state was loaded.
 */

#include <zlib.h>

#include "migration/savevm.h"
#include "block/snapshot.h"
#include "util/cutils.h"
#include "util/iov.h"

#define SAVEVM_TRAILER_MAGIC "QBVE"
#define SAVEVM_TRAILER_SIZE  8
#define SAVEVM_RAM_SECTION   "ram-page"

typedef struct SaveStateEntry {
    const VMStateDescription *vmsd;
    uint32_t instance_id;
    void *opaque;
    void (*reset)(void *opaque);
    bool loaded;                /* during a load: its section was seen */
} SaveStateEntry;

typedef struct SaveVMDrive {
    char *name;
    BlockBackend *blk;
} SaveVMDrive;

struct SaveState {
    GPtrArray *entries;         /* SaveStateEntry, in registration order */
    GPtrArray *drives;          /* SaveVMDrive, in registration order */
    const GuestMemory *ram;     /* NULL: none registered */
    uint64_t ram_pages;
    /* the vm clock: clock_base at clock_start, running with realtime */
    int64_t clock_start;
    uint64_t clock_base;
};

/* One page of guest RAM as a section. */
typedef struct SaveVMRamPage {
    uint8_t data[SAVEVM_PAGE_SIZE];
} SaveVMRamPage;

static const VMStateDescription vmstate_ram_page = {
    .name = SAVEVM_RAM_SECTION,
    .version_id = 1,
    .minimum_version_id = 1,
    .size = sizeof(SaveVMRamPage),
    .fields = (const VMStateField[]) {
        VMSTATE_BUFFER(data, SaveVMRamPage),
        VMSTATE_END_OF_LIST()
    },
};

/* ---- the registry ---- */

static void savevm_drive_free(gpointer p)
{
    SaveVMDrive *d = p;

    blk_unref(d->blk);
    g_free(d->name);
    g_free(d);
}

SaveState *savevm_state_new(void)
{
    SaveState *s = g_new0(SaveState, 1);

    s->entries = g_ptr_array_new_with_free_func(g_free);
    s->drives = g_ptr_array_new_with_free_func(savevm_drive_free);
    s->clock_start = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    return s;
}

void savevm_state_free(SaveState *s)
{
    if (!s) {
        return;
    }
    g_ptr_array_free(s->entries, true);
    g_ptr_array_free(s->drives, true);
    g_free(s);
}

static SaveStateEntry *savevm_find_entry(SaveState *s, const char *name,
                                         uint32_t instance_id)
{
    for (guint i = 0; i < s->entries->len; i++) {
        SaveStateEntry *e = g_ptr_array_index(s->entries, i);

        if (!strcmp(e->vmsd->name, name) && e->instance_id == instance_id) {
            return e;
        }
    }
    return NULL;
}

int savevm_register_device(SaveState *s, const VMStateDescription *vmsd,
                           uint32_t instance_id, void *opaque,
                           void (*reset)(void *opaque), Error **errp)
{
    SaveStateEntry *e;

    if (!strcmp(vmsd->name, SAVEVM_RAM_SECTION)) {
        error_setg(errp, "Device state name '%s' is reserved for guest RAM",
                   vmsd->name);
        return -EINVAL;
    }
    if (savevm_find_entry(s, vmsd->name, instance_id)) {
        error_setg(errp, "Device state '%s' instance %" PRIu32 " is already "
                   "registered", vmsd->name, instance_id);
        return -EEXIST;
    }
    e = g_new0(SaveStateEntry, 1);
    e->vmsd = vmsd;
    e->instance_id = instance_id;
    e->opaque = opaque;
    e->reset = reset;
    g_ptr_array_add(s->entries, e);
    return 0;
}

int savevm_register_ram(SaveState *s, const GuestMemory *mem, uint64_t size,
                        Error **errp)
{
    if (s->ram) {
        error_setg(errp, "Guest RAM is already registered");
        return -EEXIST;
    }
    /* page numbers are section instance ids (u32) */
    if (size == 0 || size % SAVEVM_PAGE_SIZE ||
        size / SAVEVM_PAGE_SIZE > UINT32_MAX) {
        error_setg(errp, "Guest RAM of %" PRIu64 " bytes is not a whole "
                   "number of %d-byte pages (at most 2^32 of them)", size,
                   SAVEVM_PAGE_SIZE);
        return -EINVAL;
    }
    s->ram = mem;
    s->ram_pages = size / SAVEVM_PAGE_SIZE;
    return 0;
}

static SaveVMDrive *savevm_find_drive(SaveState *s, const char *name)
{
    for (guint i = 0; i < s->drives->len; i++) {
        SaveVMDrive *d = g_ptr_array_index(s->drives, i);

        if (!strcmp(d->name, name)) {
            return d;
        }
    }
    return NULL;
}

int savevm_register_drive(SaveState *s, const char *name, BlockBackend *blk,
                          Error **errp)
{
    SaveVMDrive *d;

    if (!name[0]) {
        error_setg(errp, "A drive needs a name");
        return -EINVAL;
    }
    if (savevm_find_drive(s, name)) {
        error_setg(errp, "Drive '%s' is already registered", name);
        return -EEXIST;
    }
    d = g_new0(SaveVMDrive, 1);
    d->name = g_strdup(name);
    d->blk = blk;
    blk_ref(blk);
    g_ptr_array_add(s->drives, d);
    return 0;
}

uint64_t savevm_vm_clock_ns(SaveState *s)
{
    return s->clock_base +
           (qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) - s->clock_start);
}

static void savevm_set_vm_clock(SaveState *s, uint64_t ns)
{
    s->clock_start = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    s->clock_base = ns;
}

/* ---- drives ---- */

/* Drives that take part in snapshots (the header's rule). */
static bool savevm_drive_writable(SaveVMDrive *d)
{
    BlockDriverState *bs = blk_bs(d->blk);

    return bs && !bdrv_is_read_only(bs);
}

/*
 * The writable drives in turn, the ones a snapshot goes on (invariant 1):
 * the first at or after index *@i, which moves past it; NULL at the end.
 */
static SaveVMDrive *savevm_next_writable(SaveState *s, guint *i)
{
    while (*i < s->drives->len) {
        SaveVMDrive *d = g_ptr_array_index(s->drives, (*i)++);

        if (savevm_drive_writable(d)) {
            return d;
        }
    }
    return NULL;
}

/* Invariant 1: every writable drive can take snapshots. */
static int savevm_check_drives(SaveState *s, Error **errp)
{
    for (guint i = 0; i < s->drives->len; i++) {
        SaveVMDrive *d = g_ptr_array_index(s->drives, i);

        if (savevm_drive_writable(d) && !bdrv_can_snapshot(blk_bs(d->blk))) {
            error_setg(errp, "Drive '%s' is writable but its format '%s' "
                       "does not support snapshots", d->name,
                       bdrv_get_format_name(blk_bs(d->blk)));
            return -ENOTSUP;
        }
    }
    return 0;
}

/* The drive that holds the VM state: @name, or the first that can. */
static SaveVMDrive *savevm_vmstate_drive(SaveState *s, const char *name,
                                         Error **errp)
{
    SaveVMDrive *d;

    if (name) {
        d = savevm_find_drive(s, name);
        if (!d) {
            error_setg(errp, "Drive '%s' does not exist", name);
        } else if (!savevm_drive_writable(d) ||
                   !bdrv_can_snapshot(blk_bs(d->blk))) {
            error_setg(errp, "Drive '%s' cannot hold VM state: it is not a "
                       "writable image with snapshots", name);
            d = NULL;
        }
        return d;
    }
    for (guint i = 0; i < s->drives->len; i++) {
        d = g_ptr_array_index(s->drives, i);
        if (savevm_drive_writable(d) && bdrv_can_snapshot(blk_bs(d->blk))) {
            return d;
        }
    }
    error_setg(errp, "No drive can hold the VM state (a writable image "
               "with snapshots, such as qcow2)");
    return NULL;
}

/*
 * Invariant 4.  A completion may start the next request of a chain (the
 * segments of a virtio-blk discard): such a request waits while its drive
 * is drained and runs when the drain ends, so drain again until a round
 * leaves nothing in flight.  The guest is stopped, so chains are finite.
 */
static void savevm_quiesce(SaveState *s)
{
    bool busy;

    do {
        busy = false;
        for (guint i = 0; i < s->drives->len; i++) {
            blk_drain(((SaveVMDrive *)g_ptr_array_index(s->drives, i))->blk);
        }
        for (guint i = 0; i < s->drives->len; i++) {
            SaveVMDrive *d = g_ptr_array_index(s->drives, i);

            busy |= blk_in_flight(d->blk) > 0;
        }
    } while (busy);
}

/*
 * The snapshot bdrv_snapshot_goto() picks for @name: the one with that
 * ID, else the first with that tag.  -ENOENT if there is none.
 */
static int savevm_find_snapshot(BlockDriverState *bs, const char *name,
                                QEMUSnapshotInfo *sn)
{
    QEMUSnapshotInfo *tab;
    int n = bdrv_snapshot_list(bs, &tab);
    int found = -1;

    if (n < 0) {
        return n;
    }
    for (int i = 0; i < n && found < 0; i++) {
        if (!strcmp(tab[i].id_str, name)) {
            found = i;
        }
    }
    for (int i = 0; i < n && found < 0; i++) {
        if (!strcmp(tab[i].name, name)) {
            found = i;
        }
    }
    if (found >= 0) {
        *sn = tab[found];
    }
    g_free(tab);
    return found >= 0 ? 0 : -ENOENT;
}

/* IDs of the snapshots whose ID or tag is @name (a NULL-terminated list). */
static char **savevm_matching_ids(BlockDriverState *bs, const char *name)
{
    QEMUSnapshotInfo *tab;
    int n = bdrv_snapshot_list(bs, &tab);
    GPtrArray *ids = g_ptr_array_new();

    for (int i = 0; i < n; i++) {
        if (!strcmp(tab[i].id_str, name) || !strcmp(tab[i].name, name)) {
            g_ptr_array_add(ids, g_strdup(tab[i].id_str));
        }
    }
    g_free(tab);
    g_ptr_array_add(ids, NULL);
    return (char **)g_ptr_array_free(ids, false);
}

/* ---- the stream ---- */

/* Every RAM page and device, then the trailer (header comment). */
static int savevm_write_stream(SaveState *s, VMStateBuffer *b, Error **errp)
{
    SaveVMRamPage page;
    uint8_t trailer[SAVEVM_TRAILER_SIZE];
    uint32_t crc;

    vmstate_save_header(b);
    for (uint64_t i = 0; i < s->ram_pages; i++) {
        if (guest_memory_read(s->ram, i * SAVEVM_PAGE_SIZE, page.data,
                              sizeof(page.data)) < 0) {
            error_setg(errp, "Guest RAM page %" PRIu64 " cannot be read", i);
            return -EFAULT;
        }
        if (!buffer_is_zero(page.data, sizeof(page.data))) {
            vmstate_save(b, &vmstate_ram_page, i, &page, &error_abort);
        }
    }
    for (guint i = 0; i < s->entries->len; i++) {
        SaveStateEntry *e = g_ptr_array_index(s->entries, i);
        int ret = vmstate_save(b, e->vmsd, e->instance_id, e->opaque, errp);

        if (ret < 0) {
            error_prepend(errp, "Device '%s' instance %" PRIu32 " cannot be "
                          "saved: ", e->vmsd->name, e->instance_id);
            return ret;
        }
    }
    crc = crc32(0, b->data->data, b->data->len);
    memcpy(trailer, SAVEVM_TRAILER_MAGIC, 4);
    crc = GUINT32_TO_BE(crc);
    memcpy(trailer + 4, &crc, 4);
    g_byte_array_append(b->data, trailer, sizeof(trailer));
    return 0;
}

/* The largest stream this machine can have written (a bound for loads). */
static uint64_t savevm_max_stream_size(SaveState *s)
{
    uint64_t size = VMSTATE_HEADER_SIZE + SAVEVM_TRAILER_SIZE +
                    s->ram_pages * vmstate_section_size(&vmstate_ram_page);

    for (guint i = 0; i < s->entries->len; i++) {
        SaveStateEntry *e = g_ptr_array_index(s->entries, i);

        size += vmstate_section_size(e->vmsd);
    }
    return size;
}

/*
 * Invariant 3: the area as a whole, before any device sees it.  On
 * success the buffer holds the stream without its trailer, positioned
 * after the header.
 */
static int savevm_check_stream(VMStateBuffer *b, Error **errp)
{
    size_t len = b->data->len;
    const uint8_t *trailer;
    uint32_t stored, crc;

    if (len < VMSTATE_HEADER_SIZE + SAVEVM_TRAILER_SIZE) {
        error_setg(errp, "The VM state is %zu bytes, too short for a device "
                   "state stream", len);
        return -EINVAL;
    }
    /* the magic first: QEMU's own VM state is refused as what it is */
    if (vmstate_load_header(b, errp) < 0) {
        return -EINVAL;
    }
    trailer = b->data->data + len - SAVEVM_TRAILER_SIZE;
    if (memcmp(trailer, SAVEVM_TRAILER_MAGIC, 4)) {
        error_setg(errp, "The VM state does not end with a '%s' trailer: it "
                   "is truncated, or was not saved by qblock",
                   SAVEVM_TRAILER_MAGIC);
        return -EINVAL;
    }
    memcpy(&stored, trailer + 4, 4);
    stored = GUINT32_FROM_BE(stored);
    crc = crc32(0, b->data->data, len - SAVEVM_TRAILER_SIZE);
    if (stored != crc) {
        error_setg(errp, "The VM state is corrupt: its checksum is %#010"
                   PRIx32 ", the trailer says %#010" PRIx32, crc, stored);
        return -EINVAL;
    }
    g_byte_array_set_size(b->data, len - SAVEVM_TRAILER_SIZE);
    return 0;
}

/* Power-on state of the devices and RAM (invariant 3). */
static void savevm_reset(SaveState *s)
{
    static const uint8_t zero[SAVEVM_PAGE_SIZE];

    for (uint64_t i = 0; i < s->ram_pages; i++) {
        guest_memory_write(s->ram, i * SAVEVM_PAGE_SIZE, zero, sizeof(zero));
    }
    for (guint i = 0; i < s->entries->len; i++) {
        SaveStateEntry *e = g_ptr_array_index(s->entries, i);

        e->reset(e->opaque);
    }
}

static int savevm_load_ram_page(SaveState *s, VMStateBuffer *b,
                                uint32_t page_nr, bool *seen,
                                Error **errp)
{
    SaveVMRamPage page;
    int ret;

    if (page_nr >= s->ram_pages) {
        error_setg(errp, "RAM page %" PRIu32 " is outside this machine's %"
                   PRIu64 " pages", page_nr, s->ram_pages);
        return -EINVAL;
    }
    if (seen[page_nr]) {
        error_setg(errp, "RAM page %" PRIu32 " appears twice", page_nr);
        return -EINVAL;
    }
    seen[page_nr] = true;
    ret = vmstate_load(b, &vmstate_ram_page, page_nr, &page, errp);
    if (ret == 0 && guest_memory_write(s->ram, (uint64_t)page_nr *
                                       SAVEVM_PAGE_SIZE, page.data,
                                       sizeof(page.data)) < 0) {
        error_setg(errp, "Guest RAM page %" PRIu32 " cannot be written",
                   page_nr);
        ret = -EFAULT;
    }
    return ret;
}

/* One section, into the device it names. */
static int savevm_load_section(SaveState *s, VMStateBuffer *b,
                               bool *ram_seen, Error **errp)
{
    char name[VMSTATE_NAME_MAX + 1];
    uint32_t id;
    SaveStateEntry *e;
    int ret = vmstate_peek_section(b, name, &id, errp);

    if (ret < 0) {
        return ret;
    }
    if (!strcmp(name, SAVEVM_RAM_SECTION) && s->ram) {
        return savevm_load_ram_page(s, b, id, ram_seen, errp);
    }
    e = savevm_find_entry(s, name, id);
    if (!e) {
        error_setg(errp, "Section '%s' instance %" PRIu32 " is not a device "
                   "of this machine", name, id);
        return -EINVAL;
    }
    if (e->loaded) {
        error_setg(errp, "Section '%s' instance %" PRIu32 " appears twice",
                   name, id);
        return -EINVAL;
    }
    e->loaded = true;
    ret = vmstate_load(b, e->vmsd, id, e->opaque, errp);
    if (ret < 0) {
        error_prepend(errp, "Section '%s' instance %" PRIu32 ": ", name, id);
    }
    return ret;
}

/* Every section of a checked stream; the devices were reset before. */
static int savevm_load_stream(SaveState *s, VMStateBuffer *b, Error **errp)
{
    g_autofree bool *ram_seen = g_new0(bool, s->ram_pages + 1);
    int ret = 0;

    for (guint i = 0; i < s->entries->len; i++) {
        ((SaveStateEntry *)g_ptr_array_index(s->entries, i))->loaded = false;
    }
    while (ret == 0 && b->pos < b->data->len) {
        ret = savevm_load_section(s, b, ram_seen, errp);
    }
    if (ret < 0) {
        return ret;
    }
    for (guint i = 0; i < s->entries->len; i++) {
        SaveStateEntry *e = g_ptr_array_index(s->entries, i);

        if (!e->loaded) {
            error_setg(errp, "There is no section for device '%s' instance %"
                       PRIu32, e->vmsd->name, e->instance_id);
            return -EINVAL;
        }
    }
    return 0;
}

/* ---- savevm ---- */

/* Deletes the snapshots @ids[i] made on the first @n writable drives. */
static void savevm_undo_create(SaveState *s, char **ids, guint n)
{
    for (guint i = 0; i < n; i++) {
        SaveVMDrive *d = g_ptr_array_index(s->drives, i);
        Error *err = NULL;

        if (ids[i] && bdrv_snapshot_delete(blk_bs(d->blk), ids[i], NULL,
                                           &err) < 0) {
            error_prepend(&err, "Could not remove the incomplete snapshot %s "
                          "from drive '%s': ", ids[i], d->name);
            warn_report_err(err);
        }
    }
}

/* Creates @sn on every writable drive; the VM state on @vmd's. */
static int savevm_create_all(SaveState *s, const QEMUSnapshotInfo *sn,
                             SaveVMDrive *vmd, uint64_t vm_state_size,
                             Error **errp)
{
    /* per drive: the ID of the snapshot made on it, or NULL */
    char **ids = g_new0(char *, s->drives->len);
    int ret = 0;

    for (guint i = 0; i < s->drives->len && ret == 0; i++) {
        SaveVMDrive *d = g_ptr_array_index(s->drives, i);
        QEMUSnapshotInfo info = *sn;

        if (!savevm_drive_writable(d)) {
            continue;
        }
        info.vm_state_size = d == vmd ? vm_state_size : 0;
        ret = bdrv_snapshot_create(blk_bs(d->blk), &info);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not create snapshot '%s' on "
                             "drive '%s'", sn->name, d->name);
            savevm_undo_create(s, ids, i);
        } else {
            ids[i] = g_strdup(info.id_str);
        }
    }
    for (guint i = 0; i < s->drives->len; i++) {
        g_free(ids[i]);
    }
    g_free(ids);
    return ret;
}

/* Deletes the snapshots listed per drive in @old (savevm's replace). */
static int savevm_delete_old(SaveState *s, char ***old, const char *name,
                             Error **errp)
{
    for (guint i = 0; i < s->drives->len; i++) {
        SaveVMDrive *d = g_ptr_array_index(s->drives, i);

        for (char **id = old[i]; id && *id; id++) {
            int ret = bdrv_snapshot_delete(blk_bs(d->blk), *id, NULL, errp);

            if (ret < 0) {
                error_prepend(errp, "Snapshot '%s' was saved, but the older "
                              "snapshot %s it replaces could not be deleted "
                              "from drive '%s': ", name, *id, d->name);
                return ret;
            }
        }
    }
    return 0;
}

static void savevm_free_old(SaveState *s, char ***old)
{
    for (guint i = 0; i < s->drives->len; i++) {
        g_strfreev(old[i]);
    }
    g_free(old);
}

int64_t savevm_save_snapshot(SaveState *s, const char *name,
                             const char *vmstate_drive, Error **errp)
{
    QEMUSnapshotInfo sn = { .icount = QEMU_SNAPSHOT_NO_ICOUNT };
    int64_t now = g_get_real_time();
    g_autofree char *auto_name = NULL;
    VMStateBuffer b;
    SaveVMDrive *vmd;
    char ***old;
    int64_t ret;

    if (!name) {
        g_autoptr(GDateTime) t = g_date_time_new_now_local();

        auto_name = g_date_time_format(t, "vm-%Y%m%d%H%M%S");
        name = auto_name;
    }
    if (!name[0] || strlen(name) >= sizeof(sn.name)) {
        error_setg(errp, "Snapshot name '%s' must have 1 to %zu characters",
                   name, sizeof(sn.name) - 1);
        return -EINVAL;
    }
    if (savevm_check_drives(s, errp) < 0) {
        return -ENOTSUP;
    }
    vmd = savevm_vmstate_drive(s, vmstate_drive, errp);
    if (!vmd) {
        return -ENOTSUP;
    }

    savevm_quiesce(s);
    vmstate_buffer_init(&b);
    ret = savevm_write_stream(s, &b, errp);
    if (ret < 0) {
        goto out;
    }
    ret = blk_save_vmstate(vmd->blk, b.data->data, 0, b.data->len);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the VM state to drive "
                         "'%s'", vmd->name);
        goto out;
    }

    pstrcpy(sn.name, sizeof(sn.name), name);
    sn.date_sec = now / G_USEC_PER_SEC;
    sn.date_nsec = (now % G_USEC_PER_SEC) * 1000;
    sn.vm_clock_nsec = savevm_vm_clock_ns(s);
    old = g_new0(char **, s->drives->len);
    for (guint i = 0; i < s->drives->len; i++) {
        SaveVMDrive *d = g_ptr_array_index(s->drives, i);

        if (savevm_drive_writable(d)) {
            old[i] = savevm_matching_ids(blk_bs(d->blk), name);
        }
    }
    /* invariant 2: durable when this returns */
    ret = savevm_create_all(s, &sn, vmd, b.data->len, errp);
    if (ret == 0) {
        ret = savevm_delete_old(s, old, name, errp);
    }
    savevm_free_old(s, old);
    if (ret == 0) {
        ret = b.data->len;
    }
out:
    vmstate_buffer_destroy(&b);
    return ret;
}

/* ---- loadvm ---- */

/* Invariant 1: every writable drive has @name; @vmd's is not disk-only. */
static int savevm_check_snapshot(SaveState *s, const char *name,
                                 SaveVMDrive *vmd, QEMUSnapshotInfo *vm_sn,
                                 Error **errp)
{
    SaveVMDrive *d;

    for (guint i = 0; (d = savevm_next_writable(s, &i));) {
        QEMUSnapshotInfo sn;
        int ret = savevm_find_snapshot(blk_bs(d->blk), name, &sn);

        if (ret == -ENOENT) {
            error_setg(errp, "Snapshot '%s' does not exist on drive '%s'",
                       name, d->name);
            return ret;
        }
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not list the snapshots of "
                             "drive '%s'", d->name);
            return ret;
        }
        if (d == vmd) {
            *vm_sn = sn;
        }
    }
    if (vm_sn->vm_state_size == 0) {
        error_setg(errp, "Snapshot '%s' of drive '%s' is a disk-only snapshot "
                   "(it has no VM state); revert to it with 'qblock-img "
                   "snapshot -a'", name, vmd->name);
        return -EINVAL;
    }
    if (vm_sn->vm_state_size > savevm_max_stream_size(s)) {
        error_setg(errp, "The VM state of snapshot '%s' on drive '%s' is %"
                   PRIu64 " bytes, more than the %" PRIu64 " this machine's "
                   "RAM and devices can have", name, vmd->name,
                   vm_sn->vm_state_size, savevm_max_stream_size(s));
        return -EINVAL;
    }
    return 0;
}

/* Reverts every writable drive to its snapshot @name. */
static int savevm_goto_all(SaveState *s, const char *name, Error **errp)
{
    SaveVMDrive *d;

    for (guint i = 0; (d = savevm_next_writable(s, &i));) {
        QEMUSnapshotInfo sn;
        int ret = savevm_find_snapshot(blk_bs(d->blk), name, &sn);

        if (ret == 0) {
            /* by its ID: the very snapshot the checks looked at */
            ret = bdrv_snapshot_goto(blk_bs(d->blk), sn.id_str, errp);
        } else {
            error_setg_errno(errp, -ret, "Snapshot '%s' is gone", name);
        }
        if (ret < 0) {
            error_prepend(errp, "Could not revert drive '%s': ", d->name);
            return ret;
        }
    }
    return 0;
}

int savevm_load_snapshot(SaveState *s, const char *name,
                         const char *vmstate_drive, Error **errp)
{
    QEMUSnapshotInfo vm_sn = { 0 };
    VMStateBuffer b;
    SaveVMDrive *vmd;
    int ret;

    if (savevm_check_drives(s, errp) < 0) {
        return -ENOTSUP;
    }
    vmd = savevm_vmstate_drive(s, vmstate_drive, errp);
    if (!vmd) {
        return -ENOTSUP;
    }
    ret = savevm_check_snapshot(s, name, vmd, &vm_sn, errp);
    if (ret < 0) {
        return ret;
    }

    savevm_quiesce(s);
    ret = savevm_goto_all(s, name, errp);
    if (ret < 0) {
        /* the disks may be partly reverted: no device state fits them */
        savevm_reset(s);
        return ret;
    }
    vmstate_buffer_init(&b);
    g_byte_array_set_size(b.data, vm_sn.vm_state_size);
    ret = blk_load_vmstate(vmd->blk, b.data->data, 0, vm_sn.vm_state_size);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VM state");
    } else {
        ret = savevm_check_stream(&b, errp);
    }
    savevm_reset(s);
    if (ret == 0) {
        ret = savevm_load_stream(s, &b, errp);
        if (ret < 0) {
            savevm_reset(s);
        }
    }
    vmstate_buffer_destroy(&b);
    if (ret < 0) {
        error_prepend(errp, "Could not load the VM state of snapshot '%s' "
                      "from drive '%s' (the devices are reset): ", name,
                      vmd->name);
        return ret;
    }
    savevm_set_vm_clock(s, vm_sn.vm_clock_nsec);
    return 0;
}

/* ---- delvm ---- */

int savevm_delete_snapshot(SaveState *s, const char *name, Error **errp)
{
    bool found = false;

    for (guint i = 0; i < s->drives->len; i++) {
        SaveVMDrive *d = g_ptr_array_index(s->drives, i);
        g_auto(GStrv) ids = NULL;

        if (!savevm_drive_writable(d) || !bdrv_can_snapshot(blk_bs(d->blk))) {
            continue;
        }
        ids = savevm_matching_ids(blk_bs(d->blk), name);
        for (char **id = ids; *id; id++) {
            int ret = bdrv_snapshot_delete(blk_bs(d->blk), *id, NULL, errp);

            if (ret < 0) {
                error_prepend(errp, "Could not delete snapshot %s from drive "
                              "'%s': ", *id, d->name);
                return ret;
            }
            found = true;
        }
    }
    if (!found) {
        error_setg(errp, "Snapshot '%s' does not exist on any drive", name);
        return -ENOENT;
    }
    return 0;
}
