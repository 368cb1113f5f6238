/*
 * The daemon's NBD server: --nbd-server and the QMP commands
 * nbd-server-start, nbd-server-add, nbd-server-remove and
 * nbd-server-stop, over include/block/nbd-export.h.
 */
#ifndef QBLOCK_SD_NBD_H
#define QBLOCK_SD_NBD_H

#include "util/error.h"

/* --nbd-server: @arg is keyval NbdServerOptions. */
int nbd_server_start_cmdline(const char *arg, Error **errp);
void nbd_register_commands(void);

#endif
