/*
 * qcow2: the L2 table and refcount block caches.
 *
 * A cache holds a fixed number of tables, each table_size bytes (a cluster,
 * or the l2-cache-entry-size slice of an L2 table), in one buffer aligned
 * for O_DIRECT.  Tables are kept big-endian, exactly as on disk.
 *
 * Per entry: offset (0 = slot free), ref (users between get and put),
 * dirty (must be written before the slot is reused) and lru_counter (the
 * cache's clock when the last user put it).  Replacement picks the unused
 * (ref == 0) entry with the lowest lru_counter.
 *
 * Ordering rules for writes, all enforced in qcow2_cache_entry_flush():
 *  - a cache that depends on another (set_dependency; the L2 cache on the
 *    refcount cache, qcow2.h inv. 1) first flushes that other cache
 *    completely, then forgets the dependency;
 *  - a cache marked depends_on_flush first flushes the file, so that a
 *    table does not reach the disk before writes that must precede it.
 *
 * All functions run under s->lock (qcow2.h inv. 4); those that do I/O may
 * yield while holding it.
 */
#include "block/qcow2.h"

typedef struct Qcow2CachedTable {
    int64_t offset;
    uint64_t lru_counter;
    int ref;
    bool dirty;
} Qcow2CachedTable;

struct Qcow2Cache {
    Qcow2CachedTable *entries;
    Qcow2Cache *depends;
    int size;
    unsigned table_size;
    bool depends_on_flush;
    void *table_array;
    /* clock: bumped each time an entry's last user puts it */
    uint64_t lru_counter;
    /* lru_counter at the last clean_unused: older entries are idle */
    uint64_t cache_clean_lru_counter;
};

static void *qcow2_cache_table_addr(Qcow2Cache *c, int i)
{
    return (uint8_t *)c->table_array + (size_t)i * c->table_size;
}

static int qcow2_cache_table_index(Qcow2Cache *c, const void *table)
{
    ptrdiff_t off = (const uint8_t *)table - (const uint8_t *)c->table_array;
    int i = off / c->table_size;

    assert(off >= 0 && off % c->table_size == 0 && i < c->size);
    return i;
}

static bool qcow2_cache_is_l2(BlockDriverState *bs, Qcow2Cache *c)
{
    BDRVQcow2State *s = bs->opaque;

    return c == s->l2_table_cache;
}

Qcow2Cache *qcow2_cache_create(BlockDriverState *bs, int num_tables,
                               unsigned table_size)
{
    Qcow2Cache *c;

    assert(num_tables > 0);
    assert(is_power_of_2(table_size) && table_size >= 512);

    c = g_new0(Qcow2Cache, 1);
    c->size = num_tables;
    c->table_size = table_size;
    c->entries = g_new0(Qcow2CachedTable, num_tables);
    c->table_array = qemu_try_blockalign(bs->file->bs,
                                         (size_t)num_tables * table_size);
    if (!c->table_array) {
        g_free(c->entries);
        g_free(c);
        return NULL;
    }
    return c;
}

int qcow2_cache_destroy(Qcow2Cache *c)
{
    int i;

    for (i = 0; i < c->size; i++) {
        assert(c->entries[i].ref == 0);
    }
    qemu_vfree(c->table_array);
    g_free(c->entries);
    g_free(c);
    return 0;
}

/*
 * Flushes the cache @c depends on, then drops the dependency.  While @c
 * holds nothing dirty, no write of it can come before the other cache's:
 * the dependency is dropped without a flush (which could fail, e.g. on an
 * overlap check, and with it a refcount decrease that only needs the
 * reverse order).
 */
static int qcow2_cache_flush_dependency(BlockDriverState *bs, Qcow2Cache *c)
{
    int ret = 0;

    for (int i = 0; i < c->size; i++) {
        if (c->entries[i].dirty && c->entries[i].offset) {
            ret = qcow2_cache_flush(bs, c->depends);
            break;
        }
    }
    if (ret < 0) {
        return ret;
    }
    c->depends = NULL;
    c->depends_on_flush = false;
    return 0;
}

/* Writes entry @i back if dirty, after what it must follow (see top). */
static int coroutine_fn qcow2_cache_entry_flush(BlockDriverState *bs,
                                                Qcow2Cache *c, int i)
{
    Qcow2CachedTable *e = &c->entries[i];
    int ret;

    if (!e->dirty || !e->offset) {
        return 0;
    }

    if (c->depends) {
        ret = qcow2_cache_flush_dependency(bs, c);
    } else if (c->depends_on_flush) {
        ret = bdrv_flush(bs->file->bs);
        if (ret >= 0) {
            c->depends_on_flush = false;
        }
    } else {
        ret = 0;
    }
    if (ret < 0) {
        return ret;
    }

    if (qcow2_cache_is_l2(bs, c)) {
        BLKDBG_EVENT(bs->file, BLKDBG_L2_UPDATE);
    } else {
        BLKDBG_EVENT(bs->file, BLKDBG_REFBLOCK_UPDATE_PART);
    }
    ret = qcow2_pre_write_overlap_check(bs, qcow2_cache_is_l2(bs, c)
                                            ? qcow2_overlap_l2_cache_ign(bs)
                                            : QCOW2_OL_REFCOUNT_BLOCK,
                                        e->offset, c->table_size);
    if (ret < 0) {
        return ret;
    }
    ret = bdrv_pwrite(bs->file, e->offset, c->table_size,
                      qcow2_cache_table_addr(c, i), 0);
    if (ret < 0) {
        return ret;
    }
    e->dirty = false;
    return 0;
}

int qcow2_cache_write(BlockDriverState *bs, Qcow2Cache *c)
{
    int result = 0;
    int i, ret;

    /* Keep going after an error: write as much as possible. */
    for (i = 0; i < c->size; i++) {
        ret = qcow2_cache_entry_flush(bs, c, i);
        if (ret < 0 && result == 0) {
            result = ret;
        }
    }
    return result;
}

int qcow2_cache_flush(BlockDriverState *bs, Qcow2Cache *c)
{
    int result = qcow2_cache_write(bs, c);
    int ret = bdrv_flush(bs->file->bs);

    return result < 0 ? result : ret;
}

int qcow2_cache_set_dependency(BlockDriverState *bs, Qcow2Cache *c,
                               Qcow2Cache *dependency)
{
    int ret;

    /* Only one level of dependency: resolve the other cache's first. */
    if (dependency->depends) {
        ret = qcow2_cache_flush_dependency(bs, dependency);
        if (ret < 0) {
            return ret;
        }
    }
    if (c->depends && c->depends != dependency) {
        ret = qcow2_cache_flush_dependency(bs, c);
        if (ret < 0) {
            return ret;
        }
    }
    c->depends = dependency;
    return 0;
}

void qcow2_cache_depends_on_flush(Qcow2Cache *c)
{
    c->depends_on_flush = true;
}

int qcow2_cache_empty(BlockDriverState *bs, Qcow2Cache *c)
{
    int ret = qcow2_cache_flush(bs, c);
    int i;

    if (ret < 0) {
        return ret;
    }
    for (i = 0; i < c->size; i++) {
        assert(c->entries[i].ref == 0);
        c->entries[i].offset = 0;
        c->entries[i].lru_counter = 0;
    }
    c->lru_counter = 0;
    c->cache_clean_lru_counter = 0;
    return 0;
}

/* The least recently used entry nobody holds, or -1. */
static int qcow2_cache_find_victim(Qcow2Cache *c)
{
    uint64_t min_lru = UINT64_MAX;
    int i, victim = -1;

    for (i = 0; i < c->size; i++) {
        if (c->entries[i].ref) {
            continue;
        }
        if (!c->entries[i].offset) {
            return i;
        }
        if (c->entries[i].lru_counter < min_lru) {
            min_lru = c->entries[i].lru_counter;
            victim = i;
        }
    }
    return victim;
}

static int coroutine_fn qcow2_cache_do_get(BlockDriverState *bs,
                                           Qcow2Cache *c, uint64_t offset,
                                           void **table, bool read_from_disk)
{
    int i, ret;

    /* no table lies in the header: the allocator refuses cluster 0, and
     * callers treat an entry of 0 as "no table" */
    assert(offset != 0);
    if (!QEMU_IS_ALIGNED(offset, c->table_size)) {
        qcow2_signal_corruption(bs, true, offset, c->table_size,
                                "Cannot get entry from %s cache: offset "
                                "%#" PRIx64 " is unaligned",
                                qcow2_cache_is_l2(bs, c) ? "L2 table"
                                                         : "refcount block",
                                offset);
        return -EIO;
    }

    for (i = 0; i < c->size; i++) {
        if (c->entries[i].offset == (int64_t)offset) {
            goto found;
        }
    }

    i = qcow2_cache_find_victim(c);
    if (i < 0) {
        /* Every table is in use: a caller holds more than it should. */
        return -ENOSPC;
    }
    ret = qcow2_cache_entry_flush(bs, c, i);
    if (ret < 0) {
        return ret;
    }
    /* The slot is unusable until the read below succeeds. */
    c->entries[i].offset = 0;

    if (read_from_disk) {
        /* refblock_load is raised by the refcount lookup itself (see
         * qcow2_alloc_refcount_block), as QEMU raises it */
        if (qcow2_cache_is_l2(bs, c)) {
            BLKDBG_EVENT(bs->file, BLKDBG_L2_LOAD);
        }
        ret = bdrv_pread(bs->file, offset, c->table_size,
                         qcow2_cache_table_addr(c, i), 0);
        if (ret < 0) {
            return ret;
        }
    }
    c->entries[i].offset = offset;
    c->entries[i].dirty = false;

found:
    c->entries[i].ref++;
    *table = qcow2_cache_table_addr(c, i);
    return 0;
}

int qcow2_cache_get(BlockDriverState *bs, Qcow2Cache *c, uint64_t offset,
                    void **table)
{
    return qcow2_cache_do_get(bs, c, offset, table, true);
}

int qcow2_cache_get_empty(BlockDriverState *bs, Qcow2Cache *c,
                          uint64_t offset, void **table)
{
    return qcow2_cache_do_get(bs, c, offset, table, false);
}

void qcow2_cache_put(Qcow2Cache *c, void **table)
{
    int i = qcow2_cache_table_index(c, *table);

    assert(c->entries[i].ref > 0);
    if (--c->entries[i].ref == 0) {
        c->entries[i].lru_counter = ++c->lru_counter;
    }
    *table = NULL;
}

void qcow2_cache_entry_mark_dirty(Qcow2Cache *c, void *table)
{
    int i = qcow2_cache_table_index(c, table);

    assert(c->entries[i].offset != 0);
    c->entries[i].dirty = true;
}

void *qcow2_cache_is_table_offset(Qcow2Cache *c, uint64_t offset)
{
    int i;

    for (i = 0; i < c->size; i++) {
        if (c->entries[i].offset == (int64_t)offset) {
            return qcow2_cache_table_addr(c, i);
        }
    }
    return NULL;
}

void qcow2_cache_discard(Qcow2Cache *c, void *table)
{
    int i = qcow2_cache_table_index(c, table);

    assert(c->entries[i].ref == 0);
    c->entries[i].offset = 0;
    c->entries[i].lru_counter = 0;
    c->entries[i].dirty = false;
}

void qcow2_cache_clean_unused(Qcow2Cache *c)
{
    int i;

    for (i = 0; i < c->size; i++) {
        Qcow2CachedTable *e = &c->entries[i];

        if (e->offset && !e->ref && !e->dirty &&
            e->lru_counter <= c->cache_clean_lru_counter) {
            e->offset = 0;
            e->lru_counter = 0;
        }
    }
    c->cache_clean_lru_counter = c->lru_counter;
}
