/*
 * qblock-io's command table: every command, found by name or by the
 * one-letter alias qemu-io gives the common ones, and "help", which lists
 * them.  The commands themselves live with their help texts
 * in io-rw.c, io-aio.c, io-image.c and io-control.c.
 */
#include "io-cmds.h"

/* Sorted by name: "help" lists them in this order. */
static const QioCmd *const qio_cmds[] = {
    &qio_cmd_abort,
    &qio_cmd_aio_flush,
    &qio_cmd_aio_read,
    &qio_cmd_aio_write,
    &qio_cmd_alloc,
    &qio_cmd_break,
    &qio_cmd_close,
    &qio_cmd_discard,
    &qio_cmd_flush,
    &qio_cmd_help,
    &qio_cmd_info,
    &qio_cmd_length,
    &qio_cmd_map,
    &qio_cmd_open,
    &qio_cmd_quit,
    &qio_cmd_read,
    &qio_cmd_readv,
    &qio_cmd_remove_break,
    &qio_cmd_reopen,
    &qio_cmd_resume,
    &qio_cmd_sigraise,
    &qio_cmd_sleep,
    &qio_cmd_stats,
    &qio_cmd_truncate,
    &qio_cmd_wait_break,
    &qio_cmd_write,
    &qio_cmd_writev,
};

const QioCmd *qio_find_command(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(qio_cmds); i++) {
        if (!strcmp(qio_cmds[i]->name, name) ||
            (qio_cmds[i]->alias && !strcmp(qio_cmds[i]->alias, name))) {
            return qio_cmds[i];
        }
    }
    return NULL;
}

/* "help w" names the command as typed, alias or not, as qemu-io does. */
static void qio_print_synopsis_as(const char *name, const QioCmd *ct)
{
    printf("%s%s%s -- %s\n", name, ct->args ? " " : "",
           ct->args ? ct->args : "", ct->oneline);
}

void qio_print_synopsis(const QioCmd *ct)
{
    qio_print_synopsis_as(ct->name, ct);
}

static int qio_help_f(BlockBackend *blk, int argc, char **argv)
{
    const QioCmd *ct;

    if (argc == 1) {
        for (size_t i = 0; i < ARRAY_SIZE(qio_cmds); i++) {
            qio_print_synopsis(qio_cmds[i]);
        }
        printf("\nUse 'help commandname' for extended help.\n");
        return 0;
    }

    ct = qio_find_command(argv[1]);
    if (!ct) {
        printf("command %s not found\n", argv[1]);
        return -EINVAL;
    }
    qio_print_synopsis_as(argv[1], ct);
    if (ct->help) {
        fputs(ct->help, stdout);
    }
    return 0;
}

const QioCmd qio_cmd_help = {
    .name = "help",
    .alias = "?",
    .func = qio_help_f,
    .argmin = 0,
    .argmax = 1,
    .flags = QIO_CMD_NOFILE_OK,
    .args = "[command]",
    .oneline = "help for one or all commands",
};
