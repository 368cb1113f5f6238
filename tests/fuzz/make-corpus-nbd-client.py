#!/usr/bin/env python3
"""Records the seed corpus of fuzz-nbd-client: what real NBD servers send.

Usage: make-corpus-nbd-client.py FUZZ_BUILD [BUILD]

For each server below, the harness itself (FUZZ_BUILD/tests/fuzz/
fuzz-nbd-client, with FUZZ_NBD_CLIENT_SERVER set) opens the export and
sends its requests through a recording proxy on a unix socket; the proxy
keeps what the server sent, split where the client's first request came
(fuzz-nbd-client.c describes the input).  A seed is therefore a real
conversation that the harness replays to its end.  qblock-nbd's sessions
are recorded when BUILD (default: build) has it.  Needs qemu-img,
qemu-nbd and nbdkit; rewrites tests/fuzz/corpus/fuzz-nbd-client/.
"""
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CORPUS = os.path.join(SRC, 'tests', 'fuzz', 'corpus', 'fuzz-nbd-client')
# fuzz-nbd-client.c's bits of byte 0
NAMED, BITMAP, READ_ONLY = 0x01, 0x02, 0x04
REQUEST_MAGIC = struct.pack('>I', 0x25609513)
EXPORT_SIZE = '64K'


class Recorder:
    """A unix socket proxy for one connection that keeps the server's bytes."""

    def __init__(self, path, server_path):
        self.server_path = server_path
        self.lock = threading.Lock()
        self.from_server = bytearray()
        self.split = None
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(1)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def pipe(self, src, dst, from_server):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b''
            if not data:
                break
            with self.lock:
                if from_server:
                    self.from_server += data
                elif self.split is None and data.startswith(REQUEST_MAGIC):
                    # the server sends nothing unasked after its reply to
                    # the last option: all it sent so far is the handshake
                    self.split = len(self.from_server)
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def run(self):
        client, _ = self.listener.accept()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.connect(self.server_path)
        t = threading.Thread(target=self.pipe, args=(server, client, True))
        t.start()
        self.pipe(client, server, False)
        t.join()
        client.close()
        server.close()
        self.listener.close()

    def seed(self, bits):
        self.thread.join(30)
        with self.lock:
            data = bytes(self.from_server)
            split = len(data) if self.split is None else self.split
        return struct.pack('>BH', bits, split) + data


def wait_for(path, proc):
    for _ in range(200):
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            raise SystemExit('make-corpus-nbd-client: server exited: %s'
                             % proc.args)
        time.sleep(0.05)
    raise SystemExit('make-corpus-nbd-client: no socket from %s' % proc.args)


def record(harness, tmp, name, bits, server_argv, sock):
    server = subprocess.Popen(server_argv, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for(sock, server)
        proxy = os.path.join(tmp, 'proxy.sock')
        rec = Recorder(proxy, sock)
        inp = os.path.join(tmp, 'input')
        with open(inp, 'wb') as f:
            f.write(struct.pack('>BH', bits, 0))
        env = dict(os.environ, FUZZ_NBD_CLIENT_SERVER=proxy)
        subprocess.run([harness, inp], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60)
        data = rec.seed(bits)
        os.unlink(proxy)
    finally:
        server.terminate()
        server.wait()
        if os.path.exists(sock):
            os.unlink(sock)
    assert len(data) <= 16384, (name, len(data))
    with open(os.path.join(CORPUS, name), 'wb') as f:
        f.write(data)
    print('%s: %d bytes, handshake %d' % (name, len(data),
                                          struct.unpack('>H', data[1:3])[0]))


def main():
    fuzz_build = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) > 2 else os.path.join(SRC, 'build')
    harness = os.path.join(fuzz_build, 'tests', 'fuzz', 'fuzz-nbd-client')
    qblock_nbd = os.path.join(build, 'qblock-nbd')
    tmp = tempfile.mkdtemp()
    try:
        # data in the first 4 KiB, a hole after: reads get data and holes
        img = os.path.join(tmp, 'disk.qcow2')
        subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', img,
                        EXPORT_SIZE], check=True)
        subprocess.run(['qemu-io', '-f', 'qcow2', '-c', 'write -P 0x5a 0 3k',
                        img], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(['qemu-img', 'bitmap', '--add', img, 'fuzz'],
                       check=True)
        subprocess.run(['qemu-io', '-f', 'qcow2', '-c',
                        'write -P 0x6b 8k 1k', img], check=True,
                       stdout=subprocess.DEVNULL)
        shutil.rmtree(CORPUS, ignore_errors=True)
        os.makedirs(CORPUS)
        sock = os.path.join(tmp, 'server.sock')

        def qemu_nbd(*args):
            return ['qemu-nbd', '-f', 'qcow2', '-k', sock, *args, img]

        record(harness, tmp, 'qemu-nbd-default', 0, qemu_nbd(), sock)
        record(harness, tmp, 'qemu-nbd-bitmap', NAMED | BITMAP,
               qemu_nbd('-x', 'fuzz', '-B', 'fuzz'), sock)
        record(harness, tmp, 'qemu-nbd-read-only', READ_ONLY,
               qemu_nbd('-r'), sock)
        # a client that asks for an export the server lacks
        record(harness, tmp, 'qemu-nbd-no-export', NAMED, qemu_nbd(), sock)
        if os.access(qblock_nbd, os.X_OK):
            record(harness, tmp, 'qblock-nbd-default', 0,
                   [qblock_nbd, '-f', 'qcow2', '-k', sock, img], sock)
            record(harness, tmp, 'qblock-nbd-bitmap', NAMED | BITMAP,
                   [qblock_nbd, '-f', 'qcow2', '-k', sock, '-x', 'fuzz',
                    '-B', 'fuzz', img], sock)
        else:
            print('qblock-nbd not built (%s): its sessions not recorded'
                  % qblock_nbd)

        def nbdkit(*args):
            return ['nbdkit', '-f', '-U', sock, *args]

        # simple replies only, oldstyle, every request failing, and a server
        # that is newstyle but not fixed newstyle (no options but the name)
        record(harness, tmp, 'nbdkit-simple-replies', 0,
               nbdkit('--no-sr', 'memory', EXPORT_SIZE), sock)
        record(harness, tmp, 'nbdkit-oldstyle', 0,
               nbdkit('-o', 'memory', EXPORT_SIZE), sock)
        record(harness, tmp, 'nbdkit-errors', 0,
               nbdkit('--filter=error', 'memory', EXPORT_SIZE,
                      'error-rate=100%', 'error=EIO'), sock)
        record(harness, tmp, 'nbdkit-not-fixed-newstyle', 0,
               nbdkit('--mask-handshake=0', 'memory', EXPORT_SIZE), sock)
    finally:
        shutil.rmtree(tmp)


main()
