/*
 * virtio-blk request processing (5.2.6) and the device's face that does
 * not depend on the transport (see include/virtio/virtio-blk-req.h): the
 * in-process device and the vhost-user-blk export both pop chains their
 * own way and hand them here.
 *
 * A request's layout: device-readable, the 16-byte header then the
 * request's data (writes, discard/write-zeroes segments); device-writable,
 * the data (reads, GET_ID) then one status byte, the chain's last
 * writable byte.
 *
 * Invariants:
 *  1. Every field of the header and of segments is checked before use:
 *     ranges against the capacity (no overflow), lengths and sectors
 *     against blk_size, segment counts and sizes against the advertised
 *     maximums.  A guest error completes the request with IOERR (bad
 *     range or size) or UNSUPP (unknown type or flag), never reaches the
 *     image.
 *  2. The status byte is written exactly once, just before the completion
 *     callback, which runs exactly once per accepted request.
 *  3. Buffers are only those of the element: host pointers already
 *     checked to lie in guest RAM (virtqueue.c).
 *  4. A request allocates nothing: its vectors are built on the
 *     element's own pieces (the header cut off the front of out_sg, the
 *     status byte off the back of in_sg), its segments are an array of
 *     the request.
 *  5. The completion callback gets the element as it was popped: the cuts
 *     of invariant 4 are undone first, so that the transport sees every
 *     piece the device may have written (the vhost-user export marks
 *     them in a migration's dirty log).
 */

#include "virtio/virtio-blk-req.h"

/* Sectors of one segment: 2 GiB keeps a request within what the block
 * layer takes in one piece. */
#define VIRTIO_BLK_MAX_DWZ_SECTORS (1u << 22)

static void virtio_blk_req_complete(VirtIOBlkReq *req, uint8_t status)
{
    bool allocated = req->allocated;

    *req->status = status;
    /* invariant 5 */
    req->out_cut->iov_base = (uint8_t *)req->out_cut->iov_base -
                             req->out_skip;
    req->out_cut->iov_len += req->out_skip;
    req->status_piece->iov_len++;
    /* @req is the caller's again once cb has run: nothing to destroy, the
     * vectors are external (invariant 4) */
    req->cb(req->h, req->elem, req->in_len + 1, req->opaque);
    if (allocated) {
        g_free(req);
    }
}

static void virtio_blk_rw_cb(void *opaque, int ret)
{
    VirtIOBlkReq *req = opaque;

    if (ret < 0) {
        req->in_len = 0;
    }
    virtio_blk_req_complete(req, ret < 0 ? VIRTIO_BLK_S_IOERR
                                         : VIRTIO_BLK_S_OK);
}

/* Invariant 1: @bytes at @sector fit the disk and its block size. */
static bool virtio_blk_range_ok(VirtIOBlkHandler *h, uint64_t sector,
                                uint64_t bytes)
{
    uint64_t block_sectors = h->blk_size / VIRTIO_BLK_SECTOR_SIZE;
    uint64_t n = bytes / VIRTIO_BLK_SECTOR_SIZE;

    return bytes % h->blk_size == 0 && sector % block_sectors == 0 &&
           sector <= h->sectors && h->sectors - sector >= n;
}

static void virtio_blk_do_rw(VirtIOBlkReq *req, bool is_write)
{
    VirtIOBlkHandler *h = req->h;
    QEMUIOVector *qiov = is_write ? &req->out : &req->in;
    uint64_t sector = GUINT64_FROM_LE(req->hdr.sector);

    if (is_write && h->read_only) {
        virtio_blk_req_complete(req, VIRTIO_BLK_S_IOERR);
        return;
    }
    if (!virtio_blk_range_ok(h, sector, qiov->size)) {
        virtio_blk_req_complete(req, VIRTIO_BLK_S_IOERR);
        return;
    }
    if (is_write) {
        blk_aio_pwritev(h->blk, sector * VIRTIO_BLK_SECTOR_SIZE, qiov, 0,
                        virtio_blk_rw_cb, req);
    } else {
        req->in_len = qiov->size;
        blk_aio_preadv(h->blk, sector * VIRTIO_BLK_SECTOR_SIZE, qiov, 0,
                       virtio_blk_rw_cb, req);
    }
}

static void virtio_blk_do_get_id(VirtIOBlkReq *req)
{
    req->in_len = qemu_iovec_from_buf(&req->in, 0, req->h->serial,
                                      MIN(req->in.size,
                                          VIRTIO_BLK_ID_BYTES));
    virtio_blk_req_complete(req, VIRTIO_BLK_S_OK);
}

/* Runs the segments one after the other; each completion starts the next. */
static void virtio_blk_seg_cb(void *opaque, int ret)
{
    VirtIOBlkReq *req = opaque;
    bool is_discard = GUINT32_FROM_LE(req->hdr.type) ==
                      VIRTIO_BLK_T_DISCARD;
    const VirtIOBlkDiscardWriteZeroes *seg;
    int64_t offset, bytes;

    if (ret < 0 || req->next_seg == req->nsegs) {
        virtio_blk_req_complete(req, ret < 0 ? VIRTIO_BLK_S_IOERR
                                             : VIRTIO_BLK_S_OK);
        return;
    }
    seg = &req->segs[req->next_seg++];
    offset = seg->sector * VIRTIO_BLK_SECTOR_SIZE;
    bytes = (int64_t)seg->num_sectors * VIRTIO_BLK_SECTOR_SIZE;
    if (is_discard) {
        blk_aio_pdiscard(req->h->blk, offset, bytes, virtio_blk_seg_cb, req);
    } else {
        blk_aio_pwrite_zeroes(req->h->blk, offset, bytes,
                              seg->flags & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP
                              ? BDRV_REQ_MAY_UNMAP : 0,
                              virtio_blk_seg_cb, req);
    }
}

/* Reads and checks the segments (invariant 1); returns a status. */
static uint8_t virtio_blk_parse_segs(VirtIOBlkReq *req, bool is_discard)
{
    VirtIOBlkHandler *h = req->h;
    uint32_t max_seg = is_discard ? h->max_discard_seg
                                  : h->max_write_zeroes_seg;
    uint32_t max_sectors = is_discard ? h->max_discard_sectors
                                      : h->max_write_zeroes_sectors;
    uint32_t allowed_flags = is_discard ? 0
                                        : VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP;
    size_t seg_size = sizeof(VirtIOBlkDiscardWriteZeroes);

    if (req->out.size == 0 || req->out.size % seg_size ||
        req->out.size / seg_size > max_seg) {
        return VIRTIO_BLK_S_IOERR;
    }
    req->nsegs = req->out.size / seg_size;
    qemu_iovec_to_buf(&req->out, 0, req->segs, req->out.size);
    for (uint32_t i = 0; i < req->nsegs; i++) {
        VirtIOBlkDiscardWriteZeroes *seg = &req->segs[i];

        seg->sector = GUINT64_FROM_LE(seg->sector);
        seg->num_sectors = GUINT32_FROM_LE(seg->num_sectors);
        seg->flags = GUINT32_FROM_LE(seg->flags);
        if (seg->flags & ~allowed_flags) {
            return VIRTIO_BLK_S_UNSUPP;
        }
        if (seg->num_sectors > max_sectors ||
            !virtio_blk_range_ok(h, seg->sector, (uint64_t)seg->num_sectors *
                                 VIRTIO_BLK_SECTOR_SIZE)) {
            return VIRTIO_BLK_S_IOERR;
        }
    }
    return VIRTIO_BLK_S_OK;
}

static void virtio_blk_do_discard_zeroes(VirtIOBlkReq *req, bool is_discard)
{
    VirtIOBlkHandler *h = req->h;
    uint8_t status;

    if (!(is_discard ? h->discard : h->write_zeroes)) {
        virtio_blk_req_complete(req, VIRTIO_BLK_S_UNSUPP);
        return;
    }
    if (h->read_only) {
        virtio_blk_req_complete(req, VIRTIO_BLK_S_IOERR);
        return;
    }
    status = virtio_blk_parse_segs(req, is_discard);
    if (status != VIRTIO_BLK_S_OK) {
        virtio_blk_req_complete(req, status);
        return;
    }
    virtio_blk_seg_cb(req, 0);
}

/*
 * Invariant 4: @req->out on @elem's readable pieces past the header
 * (already copied out), @req->in on its writable pieces less the status
 * byte, whose place it records.
 */
static void virtio_blk_req_map(VirtIOBlkReq *req, VirtQueueElement *elem)
{
    struct iovec *out = elem->out_sg;
    unsigned int out_num = elem->out_num;
    size_t skip = sizeof(req->hdr);
    unsigned int in_num = elem->in_num;
    struct iovec *last;

    while (skip >= out->iov_len && out_num > 1) {
        skip -= out->iov_len;
        out++;
        out_num--;
    }
    out->iov_base = (uint8_t *)out->iov_base + skip;
    out->iov_len -= skip;
    req->out_cut = out;
    req->out_skip = skip;
    qemu_iovec_init_external(&req->out, out, out_num);

    /* the status is the last byte of the last non-empty writable piece */
    while (elem->in_sg[in_num - 1].iov_len == 0) {
        in_num--;
    }
    last = &elem->in_sg[in_num - 1];
    req->status = (uint8_t *)last->iov_base + last->iov_len - 1;
    last->iov_len--;
    req->status_piece = last;
    /*
     * A status byte in its own descriptor, as Linux sends it, leaves an
     * empty piece: not in @req->in, where it would make an aligned read
     * look misaligned to O_DIRECT (and be copied through a bounce buffer).
     */
    if (!last->iov_len) {
        in_num--;
    }
    qemu_iovec_init_external(&req->in, elem->in_sg, in_num);
}

/* Checks the chain's shape, then runs the request set up in @req. */
static int virtio_blk_req_run(VirtIOBlkReq *req, Error **errp)
{
    VirtQueueElement *elem = req->elem;
    size_t out_size = iov_size(elem->out_sg, elem->out_num);
    size_t in_size = iov_size(elem->in_sg, elem->in_num);

    if (out_size < sizeof(VirtIOBlkOutHdr)) {
        error_setg(errp, "virtio-blk: request %u has a %zu-byte header, "
                   "not %zu", elem->head, out_size, sizeof(VirtIOBlkOutHdr));
        return -EINVAL;
    }
    if (in_size < 1) {
        error_setg(errp, "virtio-blk: request %u has no status byte",
                   elem->head);
        return -EINVAL;
    }
    iov_to_buf(elem->out_sg, elem->out_num, 0, &req->hdr, sizeof(req->hdr));
    virtio_blk_req_map(req, elem);

    switch (GUINT32_FROM_LE(req->hdr.type)) {
    case VIRTIO_BLK_T_IN:
        virtio_blk_do_rw(req, false);
        break;
    case VIRTIO_BLK_T_OUT:
        virtio_blk_do_rw(req, true);
        break;
    case VIRTIO_BLK_T_FLUSH:
        blk_aio_flush(req->h->blk, virtio_blk_rw_cb, req);
        break;
    case VIRTIO_BLK_T_GET_ID:
        virtio_blk_do_get_id(req);
        break;
    case VIRTIO_BLK_T_DISCARD:
        virtio_blk_do_discard_zeroes(req, true);
        break;
    case VIRTIO_BLK_T_WRITE_ZEROES:
        virtio_blk_do_discard_zeroes(req, false);
        break;
    default:
        virtio_blk_req_complete(req, VIRTIO_BLK_S_UNSUPP);
        break;
    }
    return 0;
}

int virtio_blk_handle_request_in(VirtIOBlkHandler *h, VirtIOBlkReq *req,
                                 VirtQueueElement *elem,
                                 VirtIOBlkCompleteFunc *cb, void *opaque,
                                 Error **errp)
{
    *req = (VirtIOBlkReq) {
        .h = h,
        .elem = elem,
        .cb = cb,
        .opaque = opaque,
    };
    return virtio_blk_req_run(req, errp);
}

int virtio_blk_handle_request(VirtIOBlkHandler *h, VirtQueueElement *elem,
                              VirtIOBlkCompleteFunc *cb, void *opaque,
                              Error **errp)
{
    VirtIOBlkReq *req = g_new(VirtIOBlkReq, 1);
    int ret;

    *req = (VirtIOBlkReq) {
        .h = h,
        .elem = elem,
        .cb = cb,
        .opaque = opaque,
        .allocated = true,
    };
    /* on success the request may be done, and freed, already */
    ret = virtio_blk_req_run(req, errp);
    if (ret < 0) {
        g_free(req);
    }
    return ret;
}

bool virtio_blk_block_size_valid(uint64_t blk_size)
{
    return blk_size >= VIRTIO_BLK_SECTOR_SIZE && blk_size <= 64 * KiB &&
           is_power_of_2(blk_size);
}

void virtio_blk_handler_init(VirtIOBlkHandler *h, BlockBackend *blk,
                             int64_t len, uint32_t blk_size, bool read_only,
                             const char *serial)
{
    *h = (VirtIOBlkHandler) {
        .blk = blk,
        .sectors = len / VIRTIO_BLK_SECTOR_SIZE,
        .blk_size = blk_size,
        .read_only = read_only,
        .max_discard_sectors = VIRTIO_BLK_MAX_DWZ_SECTORS,
        .max_discard_seg = VIRTIO_BLK_MAX_DWZ_SEG,
        .max_write_zeroes_sectors = VIRTIO_BLK_MAX_DWZ_SECTORS,
        .max_write_zeroes_seg = VIRTIO_BLK_MAX_DWZ_SEG,
    };
    if (serial) {
        memcpy(h->serial, serial, MIN(strlen(serial), sizeof(h->serial)));
    }
}

void virtio_blk_handler_set_length(VirtIOBlkHandler *h, int64_t len)
{
    h->sectors = len / VIRTIO_BLK_SECTOR_SIZE;
}

uint64_t virtio_blk_handler_features(const VirtIOBlkHandler *h)
{
    uint64_t f = (UINT64_C(1) << VIRTIO_F_VERSION_1) |
                 (UINT64_C(1) << VIRTIO_RING_F_INDIRECT_DESC) |
                 (UINT64_C(1) << VIRTIO_RING_F_EVENT_IDX) |
                 (UINT64_C(1) << VIRTIO_BLK_F_SEG_MAX) |
                 (UINT64_C(1) << VIRTIO_BLK_F_BLK_SIZE) |
                 (UINT64_C(1) << VIRTIO_BLK_F_TOPOLOGY) |
                 (UINT64_C(1) << VIRTIO_BLK_F_FLUSH);

    if (h->read_only) {
        f |= UINT64_C(1) << VIRTIO_BLK_F_RO;
    }
    return f;
}

void virtio_blk_handler_set_features(VirtIOBlkHandler *h, uint64_t features)
{
    h->discard = features & (UINT64_C(1) << VIRTIO_BLK_F_DISCARD);
    h->write_zeroes = features & (UINT64_C(1) << VIRTIO_BLK_F_WRITE_ZEROES);
}

void virtio_blk_handler_get_config(const VirtIOBlkHandler *h,
                                   uint32_t seg_max, uint16_t num_queues,
                                   bool wce, VirtIOBlkConfig *config)
{
    *config = (VirtIOBlkConfig) {
        .capacity = GUINT64_TO_LE(h->sectors),
        .seg_max = GUINT32_TO_LE(seg_max),
        .blk_size = GUINT32_TO_LE(h->blk_size),
        .topology.min_io_size = GUINT16_TO_LE(1),
        .writeback = wce,
        .num_queues = GUINT16_TO_LE(num_queues),
        .max_discard_sectors = GUINT32_TO_LE(h->max_discard_sectors),
        .max_discard_seg = GUINT32_TO_LE(h->max_discard_seg),
        .discard_sector_alignment = GUINT32_TO_LE(h->blk_size /
                                                  VIRTIO_BLK_SECTOR_SIZE),
        .max_write_zeroes_sectors = GUINT32_TO_LE(h->max_write_zeroes_sectors),
        .max_write_zeroes_seg = GUINT32_TO_LE(h->max_write_zeroes_seg),
        .write_zeroes_may_unmap = 1,
    };
}

bool virtio_blk_wce_writable(uint64_t features)
{
    return (features & (UINT64_C(1) << VIRTIO_BLK_F_CONFIG_WCE)) &&
           (features & (UINT64_C(1) << VIRTIO_BLK_F_FLUSH));
}

bool virtio_blk_config_write_has_wce(uint32_t offset, uint32_t len)
{
    uint32_t wb = offsetof(VirtIOBlkConfig, writeback);

    return offset <= wb && len > wb - offset;
}
