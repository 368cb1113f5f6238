/*
 * qed check and repair, as QEMU 7.2's: every table offset and data
 * cluster offset must be valid (inv. 2) and every cluster of the file
 * used at most once; the clusters past the header that nothing uses are
 * leaks (counted, never freed: QEMU does not either).  A repair clears
 * the invalid entries and, when nothing unfixed remains, the need-check
 * flag (inv. 4).  qed_check() also runs on a writable open of an image
 * left with that flag.
 */
#include "block/qed.h"

typedef struct QedCheck {
    BlockDriverState *bs;
    BDRVQedState *s;
    BdrvCheckResult *result;
    bool fix;
    uint64_t nclusters;         /* the file's clusters */
    uint32_t *used;             /* a bit per cluster of the file */
} QedCheck;

static bool qed_check_test_bit(const uint32_t *map, uint64_t n)
{
    return map[n / 32] & (1u << (n % 32));
}

/* Marks @n clusters from @offset used; false if one already was. */
static bool qed_check_use(QedCheck *c, uint64_t offset, uint64_t n)
{
    uint64_t cluster = offset >> c->s->l2_shift;
    unsigned int corruptions = 0;

    /* inv. 2: only checked offsets, all below file_size, come here */
    assert(cluster + n <= c->nclusters);
    for (; n; n--, cluster++) {
        if (qed_check_test_bit(c->used, cluster)) {
            corruptions++;
        }
        c->used[cluster / 32] |= 1u << (cluster % 32);
    }
    c->result->corruptions += corruptions;
    return corruptions == 0;
}

/* Counts what the L2 @table maps; returns the entries found invalid
 * (cleared in @table when fixing). */
static uint32_t qed_check_l2(QedCheck *c, uint64_t *table)
{
    BDRVQedState *s = c->s;
    uint64_t last = 0;
    uint32_t invalid = 0;

    for (uint32_t i = 0; i < s->table_nelems; i++) {
        uint64_t offset = table[i];

        if (offset == 0 || offset == QED_CLUSTER_ZERO) {
            continue;
        }
        c->result->bfi.allocated_clusters++;
        if (last && last + s->header.cluster_size != offset) {
            c->result->bfi.fragmented_clusters++;
        }
        last = offset;
        if (!qed_check_cluster_offset(s, offset)) {
            if (c->fix) {
                table[i] = 0;
                c->result->corruptions_fixed++;
            } else {
                c->result->corruptions++;
            }
            invalid++;
            continue;
        }
        qed_check_use(c, offset, 1);
    }
    return invalid;
}

/* Walks the L1 table and each L2 table once; 0 or the last I/O error. */
static int qed_check_l1(QedCheck *c)
{
    BDRVQedState *s = c->s;
    g_autofree uint64_t *table = NULL;
    uint32_t invalid_l1 = 0;
    int ret, last_error = 0;

    qed_check_use(c, s->header.l1_table_offset, s->header.table_size);
    /* no larger than the L1 table, which lies in the file (inv. 2) */
    table = g_try_new(uint64_t, s->table_nelems);
    if (!table) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < s->table_nelems; i++) {
        uint64_t offset = s->l1[i];

        if (offset == 0) {
            continue;
        }
        if (!qed_check_table_offset(s, offset)) {
            if (c->fix) {
                s->l1[i] = 0;
                c->result->corruptions_fixed++;
            } else {
                c->result->corruptions++;
            }
            invalid_l1++;
            continue;
        }
        if (!qed_check_use(c, offset, s->header.table_size)) {
            continue;   /* a table used twice is not walked again */
        }
        ret = qed_read_table(c->bs, offset, 0, s->table_nelems, table);
        if (ret < 0) {
            c->result->check_errors++;
            last_error = ret;
            continue;
        }
        if (qed_check_l2(c, table) && c->fix) {
            ret = qed_write_table(c->bs, offset, table, 0, s->table_nelems);
            if (ret < 0) {
                c->result->check_errors++;
                last_error = ret;
            }
        }
    }
    if (invalid_l1 && c->fix) {
        ret = qed_write_table(c->bs, s->header.l1_table_offset, s->l1, 0,
                              s->table_nelems);
        if (ret < 0) {
            c->result->check_errors++;
            last_error = ret;
        }
    }
    return last_error;
}

/* Clean once nothing unfixed remains: repairs durable, then the flag off. */
static void qed_check_mark_clean(QedCheck *c)
{
    BDRVQedState *s = c->s;

    if (c->result->corruptions > 0 || c->result->check_errors > 0 ||
        !(s->header.features & QED_F_NEED_CHECK)) {
        return;
    }
    bdrv_flush(c->bs);
    s->header.features &= ~(uint64_t)QED_F_NEED_CHECK;
    qed_write_header(c->bs);
}

/* Called with s->lock held, or at open before any request. */
int qed_check(BlockDriverState *bs, BdrvCheckResult *result, bool fix)
{
    BDRVQedState *s = bs->opaque;
    QedCheck c = {
        .bs = bs,
        .s = s,
        .result = result,
        .fix = fix,
        .nclusters = qed_bytes_to_clusters(s, s->file_size),
    };
    int ret;

    /* a bit per cluster of the file: bounded by its length */
    c.used = g_try_new0(uint32_t, DIV_ROUND_UP(c.nclusters, 32));
    if (c.nclusters && !c.used) {
        return -ENOMEM;
    }
    result->bfi.total_clusters =
        DIV_ROUND_UP(s->header.image_size, s->header.cluster_size);
    ret = qed_check_l1(&c);
    if (ret == 0) {
        /* leaks only count when every table could be read */
        for (uint64_t i = s->header.header_size; i < c.nclusters; i++) {
            if (!qed_check_test_bit(c.used, i)) {
                result->leaks++;
            }
        }
        if (fix) {
            qed_check_mark_clean(&c);
        }
    }
    g_free(c.used);
    return ret;
}

int coroutine_fn qed_co_check(BlockDriverState *bs, BdrvCheckResult *result,
                              BdrvCheckMode fix)
{
    BDRVQedState *s = bs->opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qed_check(bs, result, fix != 0);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}
