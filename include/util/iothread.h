/*
 * iothread objects (--object iothread,id=..., object-add): a thread that
 * polls an AioContext of its own until the object is deleted.  Exports
 * with iothread=ID move their node tree into that context.
 *
 * Only the main loop thread creates, finds, deletes and acquires
 * iothreads (the user-object registry is the main loop's).
 */
#ifndef QBLOCK_IOTHREAD_H
#define QBLOCK_IOTHREAD_H

#include "util/aio.h"
#include "util/json.h"

typedef struct IOThread IOThread;

/* The iothread @id, or NULL with @errp set (QEMU's message). */
IOThread *iothread_find(const char *id, Error **errp);
/* A reference on the object: object-del is refused while one is held. */
void iothread_ref(IOThread *iothread);
void iothread_unref(IOThread *iothread);

const char *iothread_get_id(const IOThread *iothread);
AioContext *iothread_get_aio_context(const IOThread *iothread);
/* The iothread whose context @ctx is, or NULL (the main loop's). */
IOThread *iothread_by_aio_context(AioContext *ctx);

/*
 * Acquires (releases) the context of every iothread, in creation order:
 * what the storage daemon does around a QMP command or a command-line
 * option, so that whatever it touches stands still (util/aio-wait.c).
 */
void iothread_acquire_all(void);
void iothread_release_all(void);

/* query-iothreads: an array of IOThreadInfo. */
JsonNode *iothread_query_all(void);

#endif
