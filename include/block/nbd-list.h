/*
 * Listing an NBD server's exports (what qemu-nbd --list shows): the
 * client's NBD_OPT_LIST, then NBD_OPT_INFO and NBD_OPT_LIST_META_CONTEXT
 * for each export, on the same handshake as the driver's
 * (block/nbd-list.c).
 */
#ifndef QBLOCK_NBD_LIST_H
#define QBLOCK_NBD_LIST_H

#include "block/nbd-client.h"

/* One export as the server describes it. */
typedef struct NBDExportListing {
    char *name;
    char *description;          /* "" when the server gave none */
    NBDExportInfo info;         /* size, flags and block sizes */
    /* char *: every meta context (none unless structured replies) */
    GPtrArray *contexts;
} NBDExportListing;

/*
 * Lists the exports of the server on the connected, blocking socket @fd:
 * with @tls->creds, NBD_OPT_STARTTLS first; then each export's details;
 * then NBD_OPT_ABORT, after which the caller closes @fd.  Returns the
 * NBDExportListing array in the server's order (freeing it frees them),
 * or NULL with @errp naming what the server refused or sent wrong.
 */
GPtrArray *nbd_client_list(int fd, const NBDClientTLS *tls, Error **errp);

#endif
