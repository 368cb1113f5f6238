/*
 * qed: when the need-check flag goes off (block/qed.h's invariants 4 and
 * 5).  An allocating write sets the flag; as in QEMU, a timer clears it
 * 5 seconds after the last allocating write, so that an image a
 * long-running server has stopped writing needs no check after a crash.
 * A drained section begins by clearing it at once when the timer was
 * pending, since the timer must not fire while the node is drained; close
 * and a switch to read-only clear it too.
 */
#include "block/qed.h"

/* QEMU's delay, in nanoseconds: 5 s after the last allocating write */
#define QED_NEED_CHECK_DELAY_NS (5 * 1000 * 1000 * 1000LL)

/* The data and tables on stable storage, then the flag off (inv. 4). */
static int qed_clear_need_check(BlockDriverState *bs)
{
    BDRVQedState *s = bs->opaque;
    int ret;

    if (!(bs->open_flags & BDRV_O_RDWR) ||
        !(s->header.features & QED_F_NEED_CHECK)) {
        return 0;
    }
    ret = bdrv_flush(bs->file->bs);
    if (ret < 0) {
        return ret;
    }
    s->header.features &= ~(uint64_t)QED_F_NEED_CHECK;
    ret = qed_write_header(bs);
    if (ret < 0) {
        return ret;
    }
    return bdrv_flush(bs->file->bs);
}

/* A clean stop (close, going read-only); nothing may be in flight. */
void qed_mark_clean(BlockDriverState *bs)
{
    qed_need_check_timer_free(bs);
    qed_clear_need_check(bs);
}

/*
 * The timer's work, under s->lock so that no allocation is in flight
 * (inv. 4); counted in flight by whoever entered it (inv. 5).  A failure
 * leaves the flag set: the next open checks the image, as after a crash.
 */
static void coroutine_fn qed_need_check_co(void *opaque)
{
    BlockDriverState *bs = opaque;
    BDRVQedState *s = bs->opaque;

    qemu_co_mutex_lock(&s->lock);
    qed_clear_need_check(bs);
    qemu_co_mutex_unlock(&s->lock);
    bdrv_dec_in_flight(bs);
}

static void qed_need_check_start(BlockDriverState *bs)
{
    bdrv_inc_in_flight(bs);
    aio_co_enter(bdrv_get_aio_context(bs),
                 qemu_coroutine_create(qed_need_check_co, bs));
}

static void qed_need_check_timer_cb(void *opaque)
{
    qed_need_check_start(opaque);
}

static void qed_need_check_timer_new(BlockDriverState *bs, AioContext *ctx)
{
    BDRVQedState *s = bs->opaque;

    s->need_check_timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                                        qed_need_check_timer_cb, bs);
}

void qed_need_check_timer_free(BlockDriverState *bs)
{
    BDRVQedState *s = bs->opaque;

    if (s->need_check_timer) {
        timer_del(s->need_check_timer);
        timer_free(s->need_check_timer);
        s->need_check_timer = NULL;
    }
}

/*
 * After an allocating write: the delay starts again (inv. 5).  The timer
 * is made by the first write after open or after going read-write.
 */
void qed_need_check_timer_arm(BlockDriverState *bs)
{
    BDRVQedState *s = bs->opaque;

    if (s->drained == 0 && (bs->open_flags & BDRV_O_RDWR) &&
        (s->header.features & QED_F_NEED_CHECK)) {
        if (!s->need_check_timer) {
            qed_need_check_timer_new(bs, bdrv_get_aio_context(bs));
        }
        timer_mod(s->need_check_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                  QED_NEED_CHECK_DELAY_NS);
    }
}

/* The timer is the only thing bound to the node's context (drained). */
int qed_change_aio_context(BlockDriverState *bs, AioContext *new_ctx,
                           Error **errp)
{
    BDRVQedState *s = bs->opaque;
    bool pending;

    if (!s->need_check_timer) {
        return 0;
    }
    pending = timer_pending(s->need_check_timer);
    qed_need_check_timer_free(bs);
    qed_need_check_timer_new(bs, new_ctx);
    if (pending) {
        timer_mod(s->need_check_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                  QED_NEED_CHECK_DELAY_NS);
    }
    return 0;
}

/* inv. 5: no timer fires in a drained section; a pending one runs now. */
void qed_drained_begin(BlockDriverState *bs)
{
    BDRVQedState *s = bs->opaque;

    if (s->drained++ == 0 && s->need_check_timer &&
        timer_pending(s->need_check_timer)) {
        timer_del(s->need_check_timer);
        qed_need_check_start(bs);
    }
}

/* An allocation that ended inside the section starts the delay now. */
void qed_drained_end(BlockDriverState *bs)
{
    BDRVQedState *s = bs->opaque;

    assert(s->drained > 0);
    if (--s->drained == 0) {
        qed_need_check_timer_arm(bs);
    }
}
