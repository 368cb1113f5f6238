/*
 * qblock-io's control commands: quit, abort, sigraise, sleep, and the
 * blkdebug breakpoint commands (break, remove_break, resume, wait_break).
 */
#include "io-cmds.h"

#include <signal.h>

static int qio_quit_f(BlockBackend *blk, int argc, char **argv)
{
    qio_quit_requested = true;
    return 0;
}

const QioCmd qio_cmd_quit = {
    .name = "quit",
    .alias = "q",
    .func = qio_quit_f,
    .argmin = 0,
    .argmax = -1,
    .flags = QIO_CMD_NOFILE_OK,
    .oneline = "exit the program",
};

static int qio_abort_f(BlockBackend *blk, int argc, char **argv)
{
    /*
     * Like qemu-io, output still buffered (stdout not a terminal) is lost
     * as in a real crash; scripts' reference output expects that.
     */
    abort();
}

const QioCmd qio_cmd_abort = {
    .name = "abort",
    .func = qio_abort_f,
    .argmin = 0,
    .argmax = 0,
    .flags = QIO_CMD_NOFILE_OK,
    .oneline = "simulate a program crash using abort(3)",
};

static const char qio_help_sigraise[] =
    "\n"
    " raises the given signal\n"
    "\n"
    " Example:\n"
    " 'sigraise 15' - raises SIGTERM\n"
    "\n"
    " Invokes raise(signal), where \"signal\" is the mandatory integer"
    " argument\n"
    " given to sigraise.\n"
    "\n";

static int qio_sigraise_f(BlockBackend *blk, int argc, char **argv)
{
    int64_t sig;

    if (qio_parse_number(argv[1], &sig) < 0) {
        return -EINVAL;
    }
    if (sig > INT_MAX) {
        printf("signal argument '%s' is too large to be a valid signal\n",
               argv[1]);
        return -EINVAL;
    }
    /* a fatal signal must not swallow the output printed before it */
    fflush(stdout);
    fflush(stderr);
    raise(sig);
    return 0;
}

const QioCmd qio_cmd_sigraise = {
    .name = "sigraise",
    .func = qio_sigraise_f,
    .argmin = 1,
    .argmax = 1,
    .flags = QIO_CMD_NOFILE_OK,
    .args = "signal",
    .oneline = "raises a signal",
    .help = qio_help_sigraise,
};

static void qio_sleep_done(void *opaque)
{
    bool *expired = opaque;

    *expired = true;
}

static int qio_sleep_f(BlockBackend *blk, int argc, char **argv)
{
    AioContext *ctx = qemu_get_aio_context();
    bool expired = false;
    QEMUTimer *timer;
    int64_t ms;

    if (qemu_strtoi64(argv[1], NULL, 0, &ms) < 0 || ms < 0) {
        printf("%s is not a valid number\n", argv[1]);
        return -EINVAL;
    }

    /* requests in flight complete (and report) while we wait */
    timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_MS,
                          qio_sleep_done, &expired);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) / SCALE_MS + ms);
    AIO_WAIT_WHILE(ctx, !expired);
    timer_free(timer);
    return 0;
}

const QioCmd qio_cmd_sleep = {
    .name = "sleep",
    .func = qio_sleep_f,
    .argmin = 1,
    .argmax = 1,
    .flags = QIO_CMD_NOFILE_OK,
    .oneline = "waits for the given value in milliseconds",
};

static int qio_break_f(BlockBackend *blk, int argc, char **argv)
{
    int ret = bdrv_debug_breakpoint(blk_bs(blk), argv[1], argv[2]);

    if (ret < 0) {
        printf("Could not set breakpoint: %s\n", strerror(-ret));
    }
    return ret;
}

const QioCmd qio_cmd_break = {
    .name = "break",
    .func = qio_break_f,
    .argmin = 2,
    .argmax = 2,
    .args = "event tag",
    .oneline = "sets a breakpoint on event and tags the stopped request"
               " as tag",
};

static int qio_remove_break_f(BlockBackend *blk, int argc, char **argv)
{
    int ret = bdrv_debug_remove_breakpoint(blk_bs(blk), argv[1]);

    if (ret < 0) {
        printf("Could not remove breakpoint %s: %s\n", argv[1],
               strerror(-ret));
    }
    return ret;
}

const QioCmd qio_cmd_remove_break = {
    .name = "remove_break",
    .func = qio_remove_break_f,
    .argmin = 1,
    .argmax = 1,
    .args = "tag",
    .oneline = "remove a breakpoint by tag",
};

static int qio_resume_f(BlockBackend *blk, int argc, char **argv)
{
    int ret = bdrv_debug_resume(blk_bs(blk), argv[1]);

    if (ret < 0) {
        printf("Could not resume request: %s\n", strerror(-ret));
    }
    return ret;
}

const QioCmd qio_cmd_resume = {
    .name = "resume",
    .func = qio_resume_f,
    .argmin = 1,
    .argmax = 1,
    .args = "tag",
    .oneline = "resumes the request tagged as tag",
};

static int qio_wait_break_f(BlockBackend *blk, int argc, char **argv)
{
    BlockDriverState *bs = blk_bs(blk);

    /* like qemu-io, waits for ever if no request ever reaches the point */
    while (!bdrv_debug_is_suspended(bs, argv[1])) {
        aio_poll(blk_get_aio_context(blk), true);
    }
    return 0;
}

const QioCmd qio_cmd_wait_break = {
    .name = "wait_break",
    .func = qio_wait_break_f,
    .argmin = 1,
    .argmax = 1,
    .args = "tag",
    .oneline = "waits for the suspension of a request",
};
