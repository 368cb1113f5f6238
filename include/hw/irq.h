/*
 * An interrupt line from a device model to whatever delivers it (the test
 * harness, a real interrupt controller later).  Lines are level-triggered,
 * as the IDE INTRQ pin and the virtio-mmio interrupt are: the device sets
 * the level whenever its interrupt condition changes, and the receiver
 * sees an interrupt for as long as the level is high.  set() may be called
 * with the level it already has.
 */
#ifndef HW_IRQ_H
#define HW_IRQ_H

#include "util/osdep.h"

typedef struct IRQLine {
    void (*set)(void *opaque, int level);
    void *opaque;
} IRQLine;

static inline void irq_line_set(const IRQLine *irq, int level)
{
    if (irq->set) {
        irq->set(irq->opaque, level);
    }
}

#endif
