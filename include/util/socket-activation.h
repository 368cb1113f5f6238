/*
 * systemd's socket activation protocol (sd_listen_fds(3)): a service
 * manager binds and listens on a program's sockets before starting it and
 * hands them over as descriptors 3, 4, ...; LISTEN_PID names the process
 * they are for and LISTEN_FDS counts them.
 */
#ifndef QBLOCK_SOCKET_ACTIVATION_H
#define QBLOCK_SOCKET_ACTIVATION_H

#include "util/osdep.h"
#include "util/error.h"

#define SOCKET_ACTIVATION_FIRST_FD 3

/*
 * How many sockets this process was handed: 0 if none (the variables
 * are missing, are not numbers, or name another process, which passed
 * them on by mistake).  Otherwise the variables are removed, so that no
 * child takes the sockets for its own, and the descriptors made
 * close-on-exec; -EBADF with QEMU's "Socket activation failed: invalid
 * file descriptor fd = N: ..." if one of them is not open.
 */
int socket_activation_check(Error **errp);

#endif
