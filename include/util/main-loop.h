/*
 * The main loop's event-loop properties: the main-loop object
 * (--object main-loop,id=ID,..., QEMU's type) and the program's defaults
 * for them.
 *
 * QEMU's main loop never busy-polls.  qblock's may: the servers (the
 * storage daemon, qblock-nbd) ask for it (main_loop_poll_by_default()),
 * so that exports served from the main loop poll as they would in an
 * iothread; the main-loop object's poll-max-ns, poll-grow and
 * poll-shrink (qblock's additions to QEMU's type) tune or turn off that
 * polling, in any program.
 */
#ifndef QBLOCK_MAIN_LOOP_H
#define QBLOCK_MAIN_LOOP_H

/*
 * The main loop busy-polls as an iothread does by default
 * (poll-max-ns 32768), until a main-loop object says otherwise and
 * again after it is deleted.  Called once, at startup.
 */
void main_loop_poll_by_default(void);

#endif
