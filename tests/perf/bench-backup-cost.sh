#!/usr/bin/env bash
# What one MiB of blockdev-backup (sync=full, qcow2 to a new qcow2) costs
# the daemon, qemu-storage-daemon against qblock-storage-daemon: user
# instructions (valgrind --tool=callgrind), system calls (strace -c -f)
# and page faults (GNU time), each measured for a SMALL and a LARGE
# source and divided by the difference, so that start-up (qblock loads
# librbd's libraries, QEMU its modules) cancels out.  Counts barely
# depend on the machine's load, unlike times; the wall time of the large
# backup is printed too, best of $RUNS (default 3), marked as such.
#   tests/perf/bench-backup-cost.sh BUILD_DIR [SMALL_MIB [LARGE_MIB]]
# (defaults 64 and 256).  Prints figures; never fails on them.
set -u
build=${1:?usage: bench-backup-cost.sh BUILD_DIR [SMALL_MIB [LARGE_MIB]]}
small=${2:-64}
large=${3:-256}
runs=${RUNS:-3}
for t in qemu-storage-daemon qemu-img qemu-io valgrind strace; do
    command -v $t >/dev/null || { echo "$t is not installed"; exit 77; }
done
[ -x /usr/bin/time ] || { echo "GNU time (/usr/bin/time) is not installed"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/qblock-bench-backup.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for mib in "$small" "$large"; do
    mkdir "$dir/$mib"
    qemu-img create -q -f qcow2 "$dir/$mib/src.qcow2" "${mib}M"
    qemu-io -f qcow2 -c "write -P 0x5a 0 ${mib}M" "$dir/$mib/src.qcow2" \
        >/dev/null || { echo "could not fill the source" >&2; exit 1; }
done

python3 - "$build" "$dir" "$small" "$large" "$runs" <<'PY'
import json, os, re, socket, subprocess, sys, time

# valgrind makes a start-up of seconds into minutes on a loaded machine:
# a client of its own, with patience


class Qmp:
    def __init__(self, path):
        deadline = time.monotonic() + 600
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise RuntimeError('no QMP socket ' + path)
            time.sleep(0.1)
        while True:
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.settimeout(1200)
            try:
                self.sock.connect(path)
                break
            except ConnectionRefusedError:      # bound, not listening yet
                self.sock.close()
                time.sleep(0.1)
        self.f = self.sock.makefile('r')
        self.events = []
        self.recv()                                 # the greeting
        self.ok('qmp_capabilities')

    def recv(self):
        line = self.f.readline()
        if not line:
            raise RuntimeError('QMP connection closed')
        return json.loads(line)

    def cmd(self, name, args=None):
        msg = {'execute': name}
        if args is not None:
            msg['arguments'] = args
        self.sock.sendall(json.dumps(msg).encode() + b'\n')
        while True:
            r = self.recv()
            if 'event' in r:
                self.events.append(r)
            elif 'QMP' not in r:
                return r

    def ok(self, name, args=None):
        r = self.cmd(name, args)
        if 'return' not in r:
            raise RuntimeError('%s: %r' % (name, r))

    def event(self, name):
        while True:
            for e in self.events:
                if e['event'] == name:
                    return e
            self.events.append(self.recv())

build, d = sys.argv[1], sys.argv[2]
small, large, runs = (int(a) for a in sys.argv[3:6])
daemons = [('qemu-storage-daemon', 'qemu-storage-daemon'),
           ('qblock-storage-daemon',
            os.path.join(os.path.abspath(build), 'qblock-storage-daemon'))]


def backup(binary, mib, prefix):
    """One backup of the MIB source under PREFIX: seconds to completion."""
    w = os.path.join(d, str(mib))
    subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2',
                    os.path.join(w, 'dst.qcow2'), '%dM' % mib], check=True)
    sock = os.path.join(w, 'qmp.sock')
    if os.path.exists(sock):
        os.unlink(sock)
    # wait=on: the daemon sets up its monitor only once the client is
    # there.  With wait=off, qemu-storage-daemon slowed by valgrind was
    # seen to take a client that came between its socket and its monitor
    # and never answer it.
    p = subprocess.Popen(prefix + [binary, '--chardev',
                                   'socket,id=m,path=%s,server=on,wait=on'
                                   % sock, '--monitor', 'chardev=m'],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = Qmp(sock)
    for node in ('src', 'dst'):
        c.ok('blockdev-add', {'driver': 'qcow2', 'node-name': node,
                              'file': {'driver': 'file', 'filename':
                                       os.path.join(w, node + '.qcow2')}})
    t0 = time.monotonic()
    c.ok('blockdev-backup', {'job-id': 'b', 'device': 'src',
                             'target': 'dst', 'sync': 'full'})
    done = c.event('BLOCK_JOB_COMPLETED')
    secs = time.monotonic() - t0
    c.cmd('quit')
    p.wait()
    if 'error' in done.get('data', {}):
        raise RuntimeError('%s: the backup did not complete' % binary)
    return secs


def instructions(binary, mib):
    out = os.path.join(d, 'callgrind.out')
    backup(binary, mib, ['valgrind', '--tool=callgrind', '--log-file=' +
                         os.path.join(d, 'valgrind.log'),
                         '--callgrind-out-file=' + out])
    with open(out) as f:
        return int(re.search(r'^summary: (\d+)', f.read(), re.M).group(1))


def syscalls(binary, mib):
    out = os.path.join(d, 'strace.out')
    backup(binary, mib, ['strace', '-f', '-c', '-o', out])
    counts = {}
    with open(out) as f:
        for line in f:
            m = re.match(r'\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?'
                         r'(\w+)$', line)
            if m and m.group(2) != 'total':
                counts[m.group(2)] = int(m.group(1))
    return counts


def faults(binary, mib):
    out = os.path.join(d, 'time.out')
    backup(binary, mib, ['/usr/bin/time', '-o', out, '-f', 'faults %R'])
    with open(out) as f:
        return int(re.search(r'faults (\d+)', f.read()).group(1))


span = large - small
for name, binary in daemons:
    ins = (instructions(binary, large) - instructions(binary, small)) / span
    sc_l, sc_s = syscalls(binary, large), syscalls(binary, small)
    per = {k: (sc_l.get(k, 0) - sc_s.get(k, 0)) / span
           for k in set(sc_l) | set(sc_s)}
    top = sorted(((v, k) for k, v in per.items() if v >= 0.05),
                 reverse=True)
    flt = (faults(binary, large) - faults(binary, small)) / span
    wall = min(backup(binary, large, []) for _ in range(runs))
    print('%-22s %8.0f instructions/MiB  %5.2f syscalls/MiB (%s)  '
          '%6.1f page faults/MiB  %d MiB in %.2f s best of %d (wall, '
          'load %.1f)' % (name, ins, sum(per.values()),
                          ', '.join('%s %.2f' % (k, v) for v, k in top),
                          flt, large, wall, runs, os.getloadavg()[0]))
PY
