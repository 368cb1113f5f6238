/*
 * The client side of the socket harnesses (see fuzz-pump.h).
 */
#include "fuzz-pump.h"

#include <fcntl.h>
#include <sys/socket.h>

#include "util/aio.h"

/* Takes what the server sent; false once it has hung up. */
static bool fuzz_pump_drain(int fd)
{
    char buf[65536];

    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);

        if (n > 0) {
            continue;
        }
        /* ECONNRESET: the server closed with our bytes still unread */
        return n < 0 && (errno == EAGAIN || errno == EINTR);
    }
}

void fuzz_pump(int fd, const uint8_t *data, size_t size)
{
    AioContext *ctx = qemu_get_aio_context();
    size_t sent = 0;
    bool shut = false;

    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        while (sent < size) {
            ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);

            if (n <= 0) {
                /* full (EAGAIN), or the server is gone (EPIPE) */
                break;
            }
            sent += n;
        }
        if (sent == size && !shut) {
            shutdown(fd, SHUT_WR);
            shut = true;
        }
        if (!fuzz_pump_drain(fd)) {
            break;
        }
        aio_poll(ctx, true);
    }
    close(fd);
}
