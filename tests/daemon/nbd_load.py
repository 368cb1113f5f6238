"""Guest-like load for the daemon tests of operations on live nodes: the
real qemu-io writes patterned blocks through an NBD export while a test
changes the graph under it, and every block is read back afterwards, so
that a write lost (or landed in the wrong image) is seen."""
import subprocess

import qsd

BLOCK = 64 * 1024


def pattern(i):
    return i % 250 + 1


class Writer:
    """qemu-io writing blocks @first..@first+@n-1 (64k each, block i
    filled with pattern(i)) through @uri, in the background."""

    def __init__(self, uri, n=256, first=0):
        self.n, self.first = n, first
        args = ['qemu-io', '-f', 'raw', '-t', 'writeback']
        for i in range(first, first + n):
            args += ['-c', 'write -P %d %d %d' % (pattern(i), i * BLOCK,
                                                  BLOCK)]
        self.proc = subprocess.Popen(args + [uri], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.out = ''

    def running(self):
        return self.proc.poll() is None

    def finish(self):
        """True if every write succeeded."""
        self.out = self.proc.communicate(timeout=qsd.TIMEOUT * 4)[0]
        return self.proc.returncode == 0 and \
            self.out.count('wrote %d/%d bytes' % (BLOCK, BLOCK)) == self.n


def verify(tests, uri, n=256, first=0, fmt='raw'):
    """Reads blocks @first.. back through @uri (or an image file, with
    @fmt); (ok, output)."""
    reads = ['read -P %d %d %d' % (pattern(i), i * BLOCK, BLOCK)
             for i in range(first, first + n)]
    rc, out = qsd.qemu_io(tests, uri, *reads, fmt=fmt)
    ok = rc == 0 and 'Pattern verification failed' not in out and \
        out.count('read %d/%d bytes' % (BLOCK, BLOCK)) == n
    return ok, out[-2000:]


def whole_blocks(data, n=256, first=0):
    """True if each block of @data (a raw image's bytes) is either all
    zeroes or all its pattern: a snapshot taken while the writes ran
    holds each write whole or not at all."""
    for i in range(first, first + n):
        block = data[i * BLOCK:(i + 1) * BLOCK]
        if block.count(0) != BLOCK and \
                block.count(pattern(i)) != BLOCK:
            return False
    return True
