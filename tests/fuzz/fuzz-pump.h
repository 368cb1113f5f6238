/*
 * The client side of the socket harnesses: sends a fuzzer input to a
 * server that runs in this thread's event loop, then takes its replies
 * until it hangs up.
 */
#ifndef FUZZ_PUMP_H
#define FUZZ_PUMP_H

#include <stddef.h>
#include <stdint.h>

/*
 * Sends @data on @fd (a connected stream socket, made non-blocking here),
 * half-closes it, and runs the main loop while reading and dropping what
 * the server sends, until it hangs up.  Closes @fd.  A server that never
 * hangs up after the end of its input hangs here: libFuzzer's -timeout
 * then reports it, as it should.
 */
void fuzz_pump(int fd, const uint8_t *data, size_t size);

#endif
