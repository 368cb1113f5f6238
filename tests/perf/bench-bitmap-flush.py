#!/usr/bin/env python3
"""What storing persistent bitmaps on every flush would cost a guest that
writes and flushes in turn (a database, a writethrough disk): once a
flush left the bitmaps clean on disk, the first write after it must mark
them in use again, durably, before its data may land (qcow2-bitmap.c's
invariant 1), so each write-and-flush cycle would gain a write of the
bitmap directory and a flush of its own, ahead of the guest's write.

This times, on a file in DIR (default ${TMPDIR:-/var/tmp}), N cycles
(default 500) of each, alternating in rounds of 50:
  today:    pwrite 4 KiB of data, fdatasync
  per-flush: pwrite 512 bytes at the directory's place, fdatasync,
             pwrite 4 KiB of data, fdatasync
It leaves out the store itself at each flush (the bitmap's changed data
clusters, a new directory, the header), which would come on top.
Prints microseconds per cycle, median and mean; never fails on them.
    tests/perf/bench-bitmap-flush.py [N [DIR]]
"""
import os
import random
import statistics
import sys
import tempfile
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
d = sys.argv[2] if len(sys.argv) > 2 else os.environ.get('TMPDIR',
                                                          '/var/tmp')
DIRECTORY = 0x30000          # where a small image keeps its directory
DATA = 64 << 20              # the data area: 64 MiB after 1 MiB
fd, path = tempfile.mkstemp(prefix='qblock-bench-bitmap-', dir=d)
try:
    os.ftruncate(fd, (1 << 20) + DATA)
    block = os.urandom(4096)
    entry = os.urandom(512)
    for off in range(0, (1 << 20) + DATA, 1 << 20):     # allocate it all
        os.pwrite(fd, b'\0' * (1 << 20), off)
    os.fsync(fd)
    times = {'today': [], 'per-flush': []}
    rnd = random.Random(1)
    while len(times['today']) < n:
        for kind in times:
            for _ in range(50):
                off = (1 << 20) + rnd.randrange(DATA // 4096) * 4096
                t0 = time.perf_counter()
                if kind == 'per-flush':
                    os.pwrite(fd, entry, DIRECTORY)
                    os.fdatasync(fd)
                os.pwrite(fd, block, off)
                os.fdatasync(fd)
                times[kind].append((time.perf_counter() - t0) * 1e6)
    for kind, ts in times.items():
        print('%-9s %8.0f us median %8.0f us mean per write+flush '
              '(%d cycles, load %.1f)' % (kind, statistics.median(ts),
                                          statistics.mean(ts), len(ts),
                                          os.getloadavg()[0]))
finally:
    os.close(fd)
    os.unlink(path)
