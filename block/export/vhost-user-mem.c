/*
 * The vhost-user server's view of guest memory (see vhost-user-int.h):
 * the regions of SET_MEM_TABLE, or of ADD_MEM_REG and REM_MEM_REG one at
 * a time (CONFIGURE_MEM_SLOTS), each a front-end's file mapped shared,
 * checked, sealed where it can be and guarded against SIGBUS
 * (invariants 1 and 7 of vhost-user-server.c), and the translations
 * between guest-physical, front-end and host addresses.
 */
#include "vhost-user-int.h"
#include "vhost-user-sigbus.h"

#include <sys/mman.h>
#include <sys/stat.h>

void *vu_mem_map(void *opaque, uint64_t addr, uint64_t *len)
{
    VuServer *s = opaque;

    for (unsigned int i = 0; i < s->nregions; i++) {
        VuMemRegion *r = &s->regions[i];

        if (addr >= r->gpa && addr - r->gpa < r->size) {
            *len = MIN(*len, r->size - (addr - r->gpa));
            return r->host + (addr - r->gpa);
        }
    }
    return NULL;
}

/* Where [@uva, +@len) of the front-end's space is guest-physically. */
static bool vu_uva_to_gpa(VuServer *s, uint64_t uva, uint64_t len,
                          uint64_t *gpa)
{
    for (unsigned int i = 0; i < s->nregions; i++) {
        VuMemRegion *r = &s->regions[i];

        if (uva >= r->uva && uva - r->uva < r->size &&
            len <= r->size - (uva - r->uva)) {
            *gpa = r->gpa + (uva - r->uva);
            return true;
        }
    }
    return false;
}

bool vu_mem_host_to_gpa(VuServer *s, const void *host, uint64_t len,
                        uint64_t *gpa)
{
    uintptr_t p = (uintptr_t)host;

    for (unsigned int i = 0; i < s->nregions; i++) {
        VuMemRegion *r = &s->regions[i];
        uintptr_t start = (uintptr_t)r->host;

        if (p >= start && p - start < r->size &&
            len <= r->size - (p - start)) {
            *gpa = r->gpa + (p - start);
            return true;
        }
    }
    return false;
}

void vu_mem_unmap_guarded(void *mmap_addr, size_t mmap_size, int guard)
{
    vu_sigbus_unguard(guard);
    munmap(mmap_addr, mmap_size);
}

void vu_mem_unmap(VuMemRegion *regions, unsigned int n)
{
    for (unsigned int i = 0; i < n; i++) {
        vu_mem_unmap_guarded(regions[i].mmap_addr, regions[i].mmap_size,
                             regions[i].guard);
    }
}

/* Invariant 7: a guarded mapping faulted, the front-end shrank a file. */
void vu_mem_faulted(void *opaque)
{
    VuServer *s = opaque;
    uint64_t count, offset;

    if (read(s->fault_fd, &count, sizeof(count)) < 0) {
        return;                 /* EAGAIN: another wake-up took it */
    }
    for (unsigned int i = 0; s->connected && i < s->nregions; i++) {
        if (vu_sigbus_take_fault(s->regions[i].guard, &offset)) {
            Error *err = NULL;

            error_setg(&err, "memory region %u: SIGBUS at offset %#" PRIx64
                       " of its %#zx-byte mapping: the front-end shrank the "
                       "file behind guest memory", i, offset,
                       s->regions[i].mmap_size);
            error_append_hint(&err, "Closing the connection\n");
            vu_close_client(s, err);
            return;
        }
    }
    if (s->connected && vu_log_take_fault(s, &offset)) {
        Error *err = NULL;

        error_setg(&err, "the dirty log: SIGBUS at offset %#" PRIx64 " of "
                   "its %#zx-byte mapping: the front-end shrank the file "
                   "behind it", offset, s->log->mmap_size);
        error_append_hint(&err, "Closing the connection\n");
        vu_close_client(s, err);
        return;
    }
    if (s->connected && vu_inflight_take_fault(s, &offset)) {
        Error *err = NULL;

        error_setg(&err, "the inflight buffer: SIGBUS at offset %#" PRIx64
                   ": the front-end shrank the file behind it", offset);
        error_append_hint(&err, "Closing the connection\n");
        vu_close_client(s, err);
    }
}

/*
 * Invariant 7: seals a file that can be sealed against shrinking, unless
 * it is sealed already.  A file that cannot be (no MFD_ALLOW_SEALING, not
 * a memfd) relies on the SIGBUS guard alone.
 */
void vu_mem_seal(int fd)
{
    int seals = fcntl(fd, F_GET_SEALS);

    if (seals >= 0 && !(seals & (F_SEAL_SHRINK | F_SEAL_SEAL))) {
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
    }
}

static bool vu_ranges_overlap(uint64_t a, uint64_t alen, uint64_t b,
                              uint64_t blen)
{
    return a < b + blen && b < a + alen;
}

/* Checks region @i of a new table against its file and those before it. */
static int vu_mem_region_check(const VhostUserMemoryRegion *regions,
                               unsigned int i, Error **errp)
{
    const VhostUserMemoryRegion *d = &regions[i];
    uint64_t size = d->memory_size;

    if (size == 0) {
        error_setg(errp, "memory region %u is empty", i);
        return -EINVAL;
    }
    if (d->guest_phys_addr > UINT64_MAX - size ||
        d->userspace_addr > UINT64_MAX - size ||
        d->mmap_offset > UINT64_MAX - size || size > SIZE_MAX / 2) {
        error_setg(errp, "memory region %u (guest %#" PRIx64 ", user %#"
                   PRIx64 ", offset %#" PRIx64 ", %#" PRIx64 " bytes) "
                   "wraps around", i, d->guest_phys_addr, d->userspace_addr,
                   d->mmap_offset, size);
        return -EINVAL;
    }
    for (unsigned int j = 0; j < i; j++) {
        const VhostUserMemoryRegion *o = &regions[j];

        if (vu_ranges_overlap(d->guest_phys_addr, size, o->guest_phys_addr,
                              o->memory_size) ||
            vu_ranges_overlap(d->userspace_addr, size, o->userspace_addr,
                              o->memory_size)) {
            error_setg(errp, "memory regions %u and %u overlap", j, i);
            return -EINVAL;
        }
    }
    return 0;
}

int vu_mem_map_guarded(VuServer *s, int fd, uint64_t offset, uint64_t size,
                       const char *what, uint8_t **host, void **mmap_addr,
                       size_t *mmap_size, int *guard, Error **errp)
{
    uint64_t start = QEMU_ALIGN_DOWN(offset, qemu_real_host_page_size());
    struct stat st;
    void *p;

    if (offset > UINT64_MAX - size || size > SIZE_MAX / 2) {
        error_setg(errp, "%s: bytes %#" PRIx64 "+%#" PRIx64 " wrap around",
                   what, offset, size);
        return -EINVAL;
    }
    if (fstat(fd, &st) < 0) {
        error_setg_errno(errp, errno, "%s: fstat", what);
        return -errno;
    }
    /*
     * Only a regular file (a memfd, a file in tmpfs or hugetlbfs) has a
     * size to check the range against; touching a mapping past the end
     * of its file would kill the process with SIGBUS.
     */
    if (!S_ISREG(st.st_mode)) {
        error_setg(errp, "%s: the file descriptor is not a regular file (a "
                   "memfd or a shared memory file)", what);
        return -EINVAL;
    }
    if ((uint64_t)st.st_size < offset + size) {
        error_setg(errp, "%s: bytes %#" PRIx64 "+%#" PRIx64 " are past the "
                   "end of its %" PRId64 "-byte file", what, offset, size,
                   (int64_t)st.st_size);
        return -EINVAL;
    }
    vu_mem_seal(fd);
    *mmap_size = offset - start + size;
    p = mmap(NULL, *mmap_size, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_NORESERVE, fd, start);
    if (p == MAP_FAILED) {
        error_setg_errno(errp, errno, "%s: mmap of %zu bytes", what,
                         *mmap_size);
        return -errno;
    }
    *guard = vu_sigbus_guard(p, *mmap_size, s->fault_fd);
    if (*guard < 0) {
        munmap(p, *mmap_size);
        error_setg(errp, "%s: more than %d guest memory mappings in this "
                   "process", what, VU_SIGBUS_MAX_GUARDS);
        return -ENOSPC;
    }
    *mmap_addr = p;
    *host = (uint8_t *)p + (offset - start);
    return 0;
}

static int vu_mem_region_map(VuServer *s, const VhostUserMemoryRegion *d,
                             unsigned int i, int fd, VuMemRegion *r,
                             Error **errp)
{
    g_autofree char *what = g_strdup_printf("memory region %u", i);
    int ret = vu_mem_map_guarded(s, fd, d->mmap_offset, d->memory_size,
                                 what, &r->host, &r->mmap_addr,
                                 &r->mmap_size, &r->guard, errp);

    if (ret < 0) {
        return ret;
    }
    r->gpa = d->guest_phys_addr;
    r->size = d->memory_size;
    r->uva = d->userspace_addr;
    return 0;
}

/* Invariant 2: the rings of @q, guest-physically, within regions. */
int vu_virtq_map_rings(VuVirtq *q, Error **errp)
{
    VuServer *s = q->s;
    uint16_t num = q->vq.num;

    if (!vu_uva_to_gpa(s, q->desc_uva, (uint64_t)num * sizeof(VRingDesc),
                       &q->vq.desc) ||
        !vu_uva_to_gpa(s, q->avail_uva, VRING_AVAIL_SIZE(num),
                       &q->vq.avail) ||
        !vu_uva_to_gpa(s, q->used_uva, VRING_USED_SIZE(num), &q->vq.used)) {
        error_setg(errp, "vring %u: the rings at %#" PRIx64 "/%#" PRIx64
                   "/%#" PRIx64 " (%u entries) are not within guest memory",
                   q->index, q->desc_uva, q->avail_uva, q->used_uva, num);
        return -EINVAL;
    }
    q->vq.ready = true;
    return 0;
}

/*
 * Invariants 1 and 11: every ring paused in its thread (no pops, nothing
 * in flight), so that the regions can change under none.
 */
static void coroutine_fn vu_mem_change_begin(VuServer *s)
{
    for (unsigned int i = 0; i < s->nvqs; i++) {
        vu_virtq_enter(&s->vqs[i]);
        vu_virtq_pause(&s->vqs[i]);
        vu_virtq_leave(&s->vqs[i]);
    }
}

/*
 * The regions changed: invariant 2 for every started ring, then every
 * ring resumed.  On failure the connection ends with the rings paused.
 */
static int coroutine_fn vu_mem_change_end(VuServer *s, Error **errp)
{
    int ret = 0;

    for (unsigned int i = 0; i < s->nvqs; i++) {
        VuVirtq *q = &s->vqs[i];

        vu_virtq_enter(q);
        if (q->started && ret == 0) {
            ret = vu_virtq_map_rings(q, errp);
        }
        if (ret == 0) {
            vu_virtq_resume(q);
        }
        vu_virtq_leave(q);
    }
    return ret;
}

int coroutine_fn vu_set_mem_table(VuServer *s, VuMsg *m, VuMsg *reply,
                                  Error **errp)
{
    const VhostUserMemory *mem = &m->payload.memory;
    VuMemRegion regions[VHOST_MEMORY_BASELINE_NREGIONS];
    unsigned int n;
    int ret;

    if (m->hdr.size < offsetof(VhostUserMemory, regions)) {
        error_setg(errp, "payload of %" PRIu32 " bytes has no region count",
                   m->hdr.size);
        return -EINVAL;
    }
    n = mem->nregions;
    if (n == 0 || n > VHOST_MEMORY_BASELINE_NREGIONS) {
        error_setg(errp, "%u memory regions, not 1 to %d", n,
                   VHOST_MEMORY_BASELINE_NREGIONS);
        return -EINVAL;
    }
    if (m->hdr.size != offsetof(VhostUserMemory, regions) +
                       n * sizeof(VhostUserMemoryRegion)) {
        error_setg(errp, "payload of %" PRIu32 " bytes for %u regions",
                   m->hdr.size, n);
        return -EINVAL;
    }
    if (m->nfds != n) {
        error_setg(errp, "%u memory regions came with %zu file descriptors",
                   n, m->nfds);
        return -EINVAL;
    }
    for (unsigned int i = 0; i < n; i++) {
        ret = vu_mem_region_check(mem->regions, i, errp);
        if (ret == 0) {
            ret = vu_mem_region_map(s, &mem->regions[i], i, m->fds[i],
                                    &regions[i], errp);
        }
        if (ret < 0) {
            vu_mem_unmap(regions, i);
            return ret;
        }
    }

    vu_mem_change_begin(s);
    vu_mem_unmap(s->regions, s->nregions);
    memcpy(s->regions, regions, n * sizeof(regions[0]));
    s->nregions = n;
    return vu_mem_change_end(s, errp);
}

static bool vu_mem_slots_negotiated(VuServer *s, Error **errp)
{
    if (!(s->protocol_features &
          (UINT64_C(1) << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS))) {
        error_setg(errp, "the front-end did not negotiate "
                   "CONFIGURE_MEM_SLOTS");
        return false;
    }
    return true;
}

int coroutine_fn vu_get_max_mem_slots(VuServer *s, VuMsg *m, VuMsg *reply,
                                      Error **errp)
{
    reply->hdr.size = sizeof(reply->payload.u64);
    reply->payload.u64 = VU_MAX_MEM_SLOTS;
    return 0;
}

/* The region's fields as a message gives them, for the checks. */
static VhostUserMemoryRegion vu_mem_region_desc(const VuMemRegion *r)
{
    return (VhostUserMemoryRegion) {
        .guest_phys_addr = r->gpa,
        .memory_size = r->size,
        .userspace_addr = r->uva,
    };
}

int coroutine_fn vu_add_mem_reg(VuServer *s, VuMsg *m, VuMsg *reply,
                                Error **errp)
{
    VhostUserMemoryRegion table[VU_MAX_MEM_SLOTS];
    unsigned int n = s->nregions;
    VuMemRegion r;
    int ret;

    if (!vu_mem_slots_negotiated(s, errp)) {
        return -EINVAL;
    }
    if (m->nfds != 1) {
        error_setg(errp, "%zu file descriptors, expected 1", m->nfds);
        return -EINVAL;
    }
    if (n == VU_MAX_MEM_SLOTS) {
        error_setg(errp, "all %d memory slots are in use", VU_MAX_MEM_SLOTS);
        return -EINVAL;
    }
    /* checked as the last region of a table of those there are */
    for (unsigned int i = 0; i < n; i++) {
        table[i] = vu_mem_region_desc(&s->regions[i]);
    }
    table[n] = m->payload.mem_reg.region;
    ret = vu_mem_region_check(table, n, errp);
    if (ret == 0) {
        ret = vu_mem_region_map(s, &table[n], n, m->fds[0], &r, errp);
    }
    if (ret < 0) {
        return ret;
    }
    vu_mem_change_begin(s);
    s->regions[n] = r;
    s->nregions = n + 1;
    return vu_mem_change_end(s, errp);
}

int coroutine_fn vu_rem_mem_reg(VuServer *s, VuMsg *m, VuMsg *reply,
                                Error **errp)
{
    const VhostUserMemoryRegion *d = &m->payload.mem_reg.region;
    unsigned int i;

    if (!vu_mem_slots_negotiated(s, errp)) {
        return -EINVAL;
    }
    /* QEMU sends the region's descriptor again; nothing needs it */
    if (m->nfds > 1) {
        error_setg(errp, "%zu file descriptors, expected 0 or 1", m->nfds);
        return -EINVAL;
    }
    for (i = 0; i < s->nregions; i++) {
        VuMemRegion *r = &s->regions[i];

        if (r->gpa == d->guest_phys_addr && r->size == d->memory_size &&
            r->uva == d->userspace_addr) {
            break;
        }
    }
    if (i == s->nregions) {
        error_setg(errp, "no memory region at guest %#" PRIx64 ", user %#"
                   PRIx64 ", of %#" PRIx64 " bytes", d->guest_phys_addr,
                   d->userspace_addr, d->memory_size);
        return -EINVAL;
    }
    vu_mem_change_begin(s);
    vu_mem_unmap(&s->regions[i], 1);
    memmove(&s->regions[i], &s->regions[i + 1],
            (s->nregions - i - 1) * sizeof(s->regions[0]));
    s->nregions--;
    /* a started ring whose rings were there ends the connection */
    return vu_mem_change_end(s, errp);
}
