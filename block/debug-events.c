/*
 * Names of the blkdebug events, from the single list in debug-events.h so
 * that the enum and its names cannot drift apart.
 */
#include "util/osdep.h"
#include "block/debug-events.h"
#include "util/cutils.h"

static const char *const blkdebug_event_names[BLKDBG__MAX] = {
#define BLKDBG_NAME_ITEM(sym, name) [BLKDBG_##sym] = name,
    BLKDBG_EVENT_LIST(BLKDBG_NAME_ITEM)
#undef BLKDBG_NAME_ITEM
};

const char *blkdebug_event_name(BlkdebugEvent event)
{
    if ((unsigned)event >= BLKDBG__MAX) {
        return NULL;
    }
    return blkdebug_event_names[event];
}

int blkdebug_event_lookup(const char *name)
{
    return qemu_name_index(blkdebug_event_names, BLKDBG__MAX, name);
}
