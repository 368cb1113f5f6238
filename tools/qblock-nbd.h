/*
 * qblock-nbd: the interface between its server main (qblock-nbd.c) and
 * its list client (nbd-list.c).
 */
#ifndef QBLOCK_NBD_TOOL_H
#define QBLOCK_NBD_TOOL_H

#include "util/sockets.h"
#include "block/nbd-client.h"

/*
 * qemu-nbd --list: connects to the NBD server at @addr, asks it for its
 * exports and their details and prints them as qemu-nbd prints them.
 * Returns 0, or -errno with @errp set.
 */
int qnbd_list_exports(const SocketAddress *addr, const NBDClientTLS *tls,
                      Error **errp);

#endif
