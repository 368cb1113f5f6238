#!/usr/bin/env python3
"""What a persistent bitmap costs a guest that writes and flushes in turn
(a database, a writethrough disk), now that qcow2 stores its bitmaps at a
flush (a checkpoint) and marks them in use again only before a write sets
a new bit (block/qcow2-bitmap.c, invariant 4).

Times qblock-img bench, one 4 KiB write then a flush per cycle (-d 1
--flush-interval=1), N cycles (default 500, at most 512) 64 KiB apart in
the first 32 MiB, on copies of a 64 MiB qcow2 image whose clusters are
all allocated, in DIR (default ${TMPDIR:-/var/tmp}), after an untimed
run of the same in the other 32 MiB:
  no bitmap:      the image as it is;
  rewrite:        with a persistent bitmap whose granules the same run set
                  already (the run is made once untimed): no bitmap I/O;
  new granules:   with an empty persistent bitmap: each cycle marks the
                  bitmap in use (a directory write and a flush) before the
                  write, and its flush stores the bitmap (new data cluster,
                  table, directory, header, three flushes);
  qemu-img (new): QEMU 7.2's qemu-img bench on the last case, for
                  reference: QEMU keeps the bitmap in use while the image
                  is open, so it pays nothing per cycle and loses the
                  bitmap in any crash.
ROUNDS rounds (default 3), the cases alternating within each (each
first in turn), fresh copies every round; as root each run is pinned to
CPU 1 at real-time priority (chrt -f 5).  Prints microseconds per write+flush cycle, the
median over the rounds, and the load average; never fails on them.
    tests/perf/bench-bitmap-flush.py [N [DIR [ROUNDS]]]
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
build = os.environ.get('QBLOCK_BUILD', os.path.join(here, '..', '..',
                                                    'build'))
QB_IMG = os.path.join(build, 'qblock-img')
n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
d = sys.argv[2] if len(sys.argv) > 2 else os.environ.get('TMPDIR',
                                                          '/var/tmp')
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
prefix = ['chrt', '-f', '5', 'taskset', '-c', '1'] if os.getuid() == 0 \
    else []
have_qemu = shutil.which('qemu-img') is not None


def run(args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def bench(tool, img, offset=0):
    """Seconds per cycle of N write+flush cycles on @img from @offset."""
    out = subprocess.run(prefix + [tool, 'bench', '-w', '-f', 'qcow2',
                                   '-t', 'writeback', '-d', '1',
                                   '--flush-interval=1', '-c', str(n),
                                   '-s', '4k', '-S', '64k', '-o',
                                   str(offset), img],
                         check=True, capture_output=True, text=True)
    secs = float(re.search(r'Run completed in ([0-9.]+) seconds',
                           out.stdout).group(1))
    return secs / n


work = tempfile.mkdtemp(prefix='qblock-bench-bitmap-', dir=d)
try:
    base = os.path.join(work, 'base.qcow2')
    run([QB_IMG, 'create', '-q', '-f', 'qcow2', base, '64M'])
    run([QB_IMG, 'bench', '-w', '-q', '-c', '1024', '-s', '64k', base])
    cases = ['no bitmap', 'rewrite', 'new granules']
    if have_qemu:
        cases.append('qemu-img (new)')
    times = {c: [] for c in cases}
    for r in range(rounds):
        # each case in turn first: the order's own effect evens out
        for case in cases[r % len(cases):] + cases[:r % len(cases)]:
            img = os.path.join(work, 'case.qcow2')
            shutil.copyfile(base, img)
            # the copy's dirty pages would go with the first timed flush
            fd = os.open(img, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            if case != 'no bitmap':
                run([QB_IMG, 'bitmap', '--add', img, 'b0'])
            tool = 'qemu-img' if case.startswith('qemu') else QB_IMG
            # warm the image (and the tool) on the other half, untimed
            bench(tool, img, 32 << 20)
            if case == 'rewrite':
                bench(QB_IMG, img)
            times[case].append(bench(tool, img) * 1e6)
    for case, ts in times.items():
        print('%-15s %8.0f us median per 4 KiB write+flush (%d rounds of '
              '%d: %s)' % (case, statistics.median(ts), rounds, n,
                           ' '.join('%.0f' % t for t in ts)))
    print('load average %.1f %.1f %.1f' % os.getloadavg())
finally:
    shutil.rmtree(work)
