#!/usr/bin/env bash
# blockdev-mirror and blockdev-backup (sync=full) of a qcow2 image full
# of data to an empty qcow2 image, qemu-storage-daemon against
# qblock-storage-daemon, alternating in the same run: seconds from the
# command to BLOCK_JOB_READY (mirror) or BLOCK_JOB_COMPLETED (backup), and
# MiB/s.
#   tests/perf/bench-jobs.sh BUILD_DIR [SIZE_MIB]   (default 4096: 4 GiB)
# Each daemon runs $RUNS times (default 2), alternating.  The image is on
# ${TMPDIR:-/var/tmp}; the page cache is not dropped (both daemons read a
# warm source).  This script prints figures; it never fails on them.
set -u
build=${1:?usage: bench-jobs.sh BUILD_DIR [SIZE_MIB]}
size_mib=${2:-4096}
runs=${RUNS:-2}
command -v qemu-storage-daemon >/dev/null || {
    echo "qemu-storage-daemon is not installed; nothing to compare against"
    exit 77
}
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/qblock-bench-jobs.XXXXXX")
trap 'rm -rf "$dir"' EXIT
qemu-img create -q -f qcow2 "$dir/src.qcow2" "${size_mib}M"
# qemu-io refuses one request over 2 GiB: fill the source 1 GiB at a time,
# and stop here if that fails (an empty source would time nothing).
fill=()
for ((mib = 0; mib < size_mib; mib += 1024)); do
    len=$((size_mib - mib < 1024 ? size_mib - mib : 1024))
    fill+=(-c "write -P 0x5a ${mib}M ${len}M")
done
qemu-io -f qcow2 "${fill[@]}" "$dir/src.qcow2" >/dev/null ||
    { echo "bench-jobs: could not fill the ${size_mib} MiB source" >&2; exit 1; }

python3 - "$build" "$dir" "$size_mib" "$runs" <<'PY'
import os, subprocess, sys, time
sys.path.insert(0, os.path.join(os.getcwd(), 'tests', 'daemon'))
from qsd import QmpClient, wait_for

build, d, size_mib, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4])
daemons = [('qemu-storage-daemon', 'qemu-storage-daemon'),
           ('qblock-storage-daemon',
            os.path.join(build, 'qblock-storage-daemon'))]
JOBS = {
    'mirror': ('blockdev-mirror', 'BLOCK_JOB_READY'),
    'backup': ('blockdev-backup', 'BLOCK_JOB_COMPLETED'),
}
times = {(job, name): [] for job in JOBS for name, _ in daemons}
for r, job, (name, binary) in ((r, job, dm) for r in range(runs)
                               for job in JOBS for dm in daemons):
        command, done = JOBS[job]
        dst = os.path.join(d, 'dst.qcow2')
        subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', dst,
                        '%dM' % size_mib], check=True)
        sock = os.path.join(d, 'qmp.sock')
        if os.path.exists(sock):
            os.unlink(sock)
        p = subprocess.Popen([binary, '--chardev',
                              'socket,id=m,path=%s,server=on,wait=off'
                              % sock, '--monitor', 'chardev=m'])
        wait_for(lambda: os.path.exists(sock))
        c = QmpClient(sock)
        c.negotiate()
        for node, f in (('src', 'src.qcow2'), ('dst', 'dst.qcow2')):
            c.ok('blockdev-add', {'driver': 'qcow2', 'node-name': node,
                                  'file': {'driver': 'file',
                                           'filename': os.path.join(d, f)}})
        t0 = time.monotonic()
        c.ok(command, {'job-id': 'm', 'device': 'src', 'target': 'dst',
                       'sync': 'full'})
        ready = c.event(done, timeout=600)
        secs = time.monotonic() - t0
        if job == 'mirror':
            c.ok('block-job-cancel', {'device': 'm'})
            c.event('BLOCK_JOB_COMPLETED', timeout=60)
        c.cmd('quit')
        p.wait()
        if ready is None:
            print('%s %s: no %s within 600 s' % (job, name, done))
            continue
        times[(job, name)].append(secs)
        print('run %d %-6s %-22s %6.2f s  %7.1f MiB/s' %
              (r + 1, job, name, secs, size_mib / secs))
for (job, name), ts in times.items():
    if ts:
        best = min(ts)
        print('best  %-6s %-22s %6.2f s  %7.1f MiB/s' %
              (job, name, best, size_mib / best))
PY
