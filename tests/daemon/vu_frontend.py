"""A vhost-user front-end for the daemon tests: just enough of the
protocol (raw messages on the socket) to negotiate, read and write the
configuration space and give the back-end its channel for notifications.
Rings and memory are driven by tests/unit/test-vhost-user-blk.c."""
import socket
import struct

import qsd

GET_FEATURES, SET_FEATURES, SET_OWNER = 1, 2, 3
GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES = 15, 16
GET_QUEUE_NUM, GET_CONFIG, SET_CONFIG = 17, 24, 25
VERSION, REPLY, NEED_REPLY = 0x1, 0x4, 0x8
F_PROTOCOL_FEATURES = 1 << 30
F_LOG_ALL = 1 << 26             # dirty logging, for live migration
BLK_F_FLUSH, BLK_F_CONFIG_WCE, BLK_F_RO = 1 << 9, 1 << 11, 1 << 5
PF_MQ, PF_REPLY_ACK, PF_BACKEND_REQ, PF_CONFIG = 1 << 0, 1 << 3, 1 << 5, 1 << 9
PF_LOG_SHMFD = 1 << 1
PF_INFLIGHT_SHMFD = 1 << 12     # requests in flight tracked for a restart
PF_CONFIGURE_MEM_SLOTS = 1 << 15  # memory regions added one by one
SET_BACKEND_REQ_FD = 21
BACKEND_CONFIG_CHANGE_MSG = 2    # on the backend channel
CAPACITY_OFFSET = 0             # virtio_blk_config.capacity, in sectors
WRITEBACK_OFFSET = 32           # virtio_blk_config.writeback


class FrontEnd:
    """Just enough of a vhost-user front-end for the config space."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(qsd.TIMEOUT)
        self.sock.connect(path)

    def send(self, req, payload=b'', flags=VERSION):
        self.sock.sendall(struct.pack('<III', req, flags, len(payload)) +
                          payload)

    def send_fds(self, req, payload, fds):
        self.sock.sendmsg([struct.pack('<III', req, VERSION | NEED_REPLY,
                                       len(payload)) + payload],
                          [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                            struct.pack('<%di' % len(fds), *fds))])

    def recv_exact(self, n):
        data = b''
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError('the export closed the connection')
            data += chunk
        return data

    def reply(self, req):
        r, flags, size = struct.unpack('<III', self.recv_exact(12))
        if (r, flags) != (req, VERSION | REPLY):
            raise RuntimeError('reply %d/%#x to request %d' % (r, flags, req))
        return self.recv_exact(size)

    def get_u64(self, req):
        self.send(req)
        return struct.unpack('<Q', self.reply(req))[0]

    def set_u64(self, req, val, ack=True):
        self.send(req, struct.pack('<Q', val),
                  VERSION | (NEED_REPLY if ack else 0))
        return struct.unpack('<Q', self.reply(req))[0] if ack else None

    def negotiate(self, want=PF_REPLY_ACK | PF_CONFIG):
        """Takes the protocol features of @want that are offered."""
        features = self.get_u64(GET_FEATURES)
        pf = self.get_u64(GET_PROTOCOL_FEATURES)
        self.set_u64(SET_PROTOCOL_FEATURES, pf & want, ack=False)
        self.send(SET_OWNER, b'', VERSION | NEED_REPLY)
        self.reply(SET_OWNER)
        return features, pf

    def backend_channel(self):
        """Gives the back-end a channel (SET_BACKEND_REQ_FD, acked) and
        returns our end of it, which the back-end notifies on."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.send_fds(SET_BACKEND_REQ_FD, b'', [theirs.fileno()])
        theirs.close()
        ack = struct.unpack('<Q', self.reply(SET_BACKEND_REQ_FD))[0]
        if ack:
            raise RuntimeError('SET_BACKEND_REQ_FD refused: %d' % ack)
        return ours

    def capacity(self):
        """The capacity field of the configuration space, in sectors."""
        self.send(GET_CONFIG, struct.pack('<III', 0, 8, 0) + bytes(8))
        return struct.unpack('<Q', self.reply(GET_CONFIG)[12:20])[0]

    def writeback(self):
        self.send(GET_CONFIG, struct.pack('<III', 0, 60, 0) + bytes(60))
        data = self.reply(GET_CONFIG)
        return data[12 + WRITEBACK_OFFSET]

    def set_writeback(self, wb):
        self.send(SET_CONFIG, struct.pack('<IIIB', WRITEBACK_OFFSET, 1, 0, wb),
                  VERSION | NEED_REPLY)
        return struct.unpack('<Q', self.reply(SET_CONFIG))[0]

    def closed(self):
        try:
            return self.sock.recv(1) == b''
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()
