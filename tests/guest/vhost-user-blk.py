#!/usr/bin/python3
"""A real Linux guest on qblock-storage-daemon's vhost-user-blk export.

    vhost-user-blk.py BUILD_DIR GUEST_DIR [SCENARIO...]

QEMU (qemu-system-x86_64, TCG) boots the kernel and initramfs that
build-guest.py made in GUEST_DIR, with a vhost-user-blk-pci disk whose
back-end is the daemon's export of a qcow2 image.  The guest (its /init
is guest-init.sh) writes, flushes and switches /sys/block/vda/cache_type
between "write back" and "write through"; at each of its checkpoints this
script asks the daemon over QMP for the export's write cache
(x-blockdev-set-write-cache without a value) and its statistics
(query-blockstats) and checks:

  - the guest's first view of the cache matches the export's real mode
    (writeback=on by default; writethrough=on in the second scenario);
  - each switch of cache_type flips the export's write cache;
  - while the cache is on, the guest's O_DIRECT writes reach the export
    and nothing flushes them; an fsync is one flush;
  - while it is off, every one of the guest's synchronous writes was
    flushed before it completed: at least one flush per write, although
    the guest itself sends no flush in write-through mode;
  - afterwards (QEMU powered off, the daemon quit) every byte the guest
    wrote is in the image, read back with qblock-io and with QEMU's
    qemu-io, the rest of the disk is still zero, and QEMU's qemu-img
    check finds the image clean.

In the migration scenario QEMU migrates the guest live to a second
QEMU (on a second export of the node) while the guest reads its disk
through the page cache, into pages the migration has copied once: on
the destination the guest reads them back from its page cache, and a
page the export did not mark in the dirty log would read stale (it
does, with logging switched off).

In the hotplug scenario a 128 MiB DIMM is plugged into the running guest
before it writes: QEMU gives the export one more memory region
(ADD_MEM_REG, the rings running), and the guest's steps pass as in the
first scenario.

In the restart scenario the daemon is killed (SIGKILL) while eight of
the guest's writers have requests in flight and started again on the
same socket: QEMU reconnects and hands the new daemon the buffer where
the export tracked its requests in flight, the new daemon runs them
again (and says so), every writer finishes without an error, and the
image holds what they wrote.

Prints one line per scenario and "N passed, N failed, N skipped".
Exit status 0, 1 on a failure, 77 when QEMU is missing.
"""

import hashlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

STEP_TIMEOUT = 120      # seconds for one guest step (TCG on a busy machine)
DISK_SIZE = 64 << 20
PATTERNS = [(0xa1, 0), (0xb2, 1), (0xc3, 2), (0xd4, 3)]   # (byte, MiB)


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def connect_unix(sock, path):
    """Connects @sock to the server at @path.  The path appears when the
    server binds, a moment before it listens: a path not there yet or a
    connection refused in between is tried again, up to STEP_TIMEOUT.
    (QEMU binds its -qmp socket after the chardevs whose sockets
    start_qemu() waits for, later still on a loaded machine.)"""
    deadline = time.time() + STEP_TIMEOUT
    while True:
        try:
            sock.connect(path)
            return
        except (FileNotFoundError, ConnectionRefusedError):
            if time.time() >= deadline:
                raise
            time.sleep(0.05)


class Qmp:
    """A QMP client for the daemon's monitor."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(STEP_TIMEOUT)
        connect_unix(self.sock, path)
        self.f = self.sock.makefile('rwb', buffering=0)
        greeting = json.loads(self.f.readline())
        check('QMP' in greeting, 'QMP greeting: %r' % greeting)
        self.cmd('qmp_capabilities')

    def cmd(self, name, **args):
        msg = {'execute': name}
        if args:
            msg['arguments'] = args
        self.f.write(json.dumps(msg).encode() + b'\n')
        while True:
            line = self.f.readline()
            check(line, 'QMP connection closed during %s' % name)
            reply = json.loads(line)
            if 'event' in reply:
                continue
            check('return' in reply, '%s failed: %r' % (name, reply))
            return reply['return']

    def close(self):
        self.sock.close()


class Scenario:
    def __init__(self, name, build, guest, writethrough, num_queues, lbs,
                 reconnect=False, hotplug=False):
        self.name = name
        self.reconnect = reconnect
        self.hotplug = hotplug
        self.build = build
        self.guest = guest
        self.writethrough = writethrough
        self.num_queues = num_queues
        self.lbs = lbs
        self.work = tempfile.mkdtemp(prefix='qblock-guest-')
        self.img = os.path.join(self.work, 'disk.qcow2')
        self.procs = []
        self.qmp = None
        self.stats = None

    def path(self, name):
        return os.path.join(self.work, name)

    def log(self, msg):
        with open(self.path('test.log'), 'a') as f:
            f.write(msg + '\n')

    # ---- processes ----

    def start_daemon(self, export_opts='', objects=(), extra=(),
                     node='disk0', log_name='daemon.log'):
        """The daemon, its export exp0 of @node; @extra goes between the
        image's nodes and the export."""
        opts = ('type=vhost-user-blk,id=exp0,node-name=%s,'
                'addr.type=unix,addr.path=%s,writable=on,num-queues=%d,'
                'logical-block-size=%d,writethrough=%s'
                % (node, self.path('vub.sock'), self.num_queues, self.lbs,
                   'on' if self.writethrough else 'off')) + export_opts
        argv = [os.path.join(self.build, 'qblock-storage-daemon'),
                '--chardev', 'socket,id=m0,path=%s,server=on,wait=off'
                % self.path('qmp.sock'),
                '--monitor', 'chardev=m0'] + list(objects) + [
                '--blockdev', 'driver=file,filename=%s,node-name=file0'
                % self.img,
                '--blockdev', 'driver=qcow2,file=file0,node-name=disk0'
                ] + list(extra) + ['--export', opts]
        self.log('daemon: ' + ' '.join(argv))
        log = open(self.path(log_name), 'w')
        self.daemon = subprocess.Popen(argv, stdout=log,
                                       stderr=subprocess.STDOUT)
        self.procs.append(self.daemon)
        self.wait_for_file('qmp.sock', self.daemon)
        self.wait_for_file('vub.sock', self.daemon)
        self.qmp = Qmp(self.path('qmp.sock'))

    def start_qemu(self, name='qemu', vub='vub.sock', append='',
                   extra=(), vu_opts=''):
        """Starts QEMU (its files named after @name) on the export at
        @vub; it becomes self.qemu, and its guest's channel self.ctl."""
        ctl = self.path(name + '-ctl.sock')
        # room for a DIMM plugged in while the guest runs
        mem = '256M,slots=2,maxmem=512M' if self.hotplug else '256'
        argv = ['qemu-system-x86_64',
                '-machine', 'q35,accel=tcg', '-cpu', 'max', '-m', mem,
                # Linux uses at most one queue per CPU
                '-smp', str(self.num_queues),
                '-nodefaults', '-no-user-config', '-nographic',
                '-monitor', 'none', '-no-reboot',
                '-serial', 'file:' + self.path(name + '-console.log'),
                '-chardev', 'socket,id=ctl,path=%s,server=on,wait=off'
                % ctl,
                '-serial', 'chardev:ctl',
                '-kernel', os.path.join(self.guest, 'vmlinux'),
                '-initrd', os.path.join(self.guest, 'initramfs.cpio.gz'),
                '-append', 'console=ttyS0 panic=-1 quiet' + append,
                # vhost-user needs guest RAM the daemon can map
                '-object', 'memory-backend-memfd,id=mem,size=256M,share=on',
                '-numa', 'node,memdev=mem',
                '-chardev', 'socket,id=vu0,path=' + self.path(vub) + vu_opts,
                '-device', 'vhost-user-blk-pci,chardev=vu0,num-queues=%d'
                % self.num_queues] + list(extra)
        self.log('%s: %s' % (name, ' '.join(argv)))
        if os.path.exists(ctl):
            os.unlink(ctl)      # left by a killed QEMU
        log = open(self.path(name + '.log'), 'a')
        self.qemu = subprocess.Popen(argv, stdout=log,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.procs.append(self.qemu)
        self.wait_for_file(os.path.basename(ctl), self.qemu)
        self.ctl = socket.socket(socket.AF_UNIX)
        connect_unix(self.ctl, ctl)
        self.ctl_buf = b''

    def wait_for_file(self, name, proc):
        deadline = time.time() + STEP_TIMEOUT
        while not os.path.exists(self.path(name)):
            check(proc.poll() is None, '%s exited with %s before creating %s'
                  % (proc.args[0], proc.returncode, name))
            check(time.time() < deadline, 'no %s after %d s'
                  % (name, STEP_TIMEOUT))
            time.sleep(0.05)

    def wait_exit(self, proc, what):
        try:
            rc = proc.wait(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Failure('%s did not exit' % what)
        check(rc == 0, '%s exited with status %d' % (what, rc))

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    # ---- the guest's control channel ----

    def guest_line(self):
        deadline = time.time() + STEP_TIMEOUT
        while b'\n' not in self.ctl_buf:
            left = deadline - time.time()
            check(left > 0, 'the guest said nothing for %d s' % STEP_TIMEOUT)
            check(self.qemu.poll() is None,
                  'QEMU exited with status %s' % self.qemu.returncode)
            r, _, _ = select.select([self.ctl], [], [], min(left, 1))
            if r:
                data = self.ctl.recv(4096)
                check(data, 'the guest control channel closed')
                self.ctl_buf += data
        line, self.ctl_buf = self.ctl_buf.split(b'\n', 1)
        line = line.decode(errors='replace').strip()
        self.log('guest: ' + line)
        return line

    def next_sync(self, tag):
        while True:
            line = self.guest_line()
            if line.startswith('@@RESULT FAIL'):
                raise Failure('guest: ' + line)
            if line.startswith('@@SYNC '):
                break
        words = line.split()
        check(words[1] == tag, 'guest at %s, expected %s' % (words[1], tag))
        return dict(w.split('=', 1) for w in words[2:] if '=' in w)

    def go(self):
        self.ctl.sendall(b'go\n')

    # ---- the export, seen over QMP ----

    def writeback(self):
        return self.qmp.cmd('x-blockdev-set-write-cache',
                            id='exp0')['writeback']

    def delta(self):
        """The export's statistics since the last call."""
        for entry in self.qmp.cmd('query-blockstats'):
            if entry.get('x-export') == 'exp0':
                s = entry['stats']
                break
        else:
            raise Failure('query-blockstats has no entry for export exp0')
        now = {k: s[k] for k in ('wr_operations', 'flush_operations',
                                 'rd_operations')}
        old = self.stats or {k: 0 for k in now}
        self.stats = now
        d = {k: now[k] - old[k] for k in now}
        self.log('stats: %r, delta %r' % (now, d))
        return d['wr_operations'], d['flush_operations']

    def expect_cached(self, step):
        wr, fl = self.delta()
        check(wr >= 16, '%s: %d writes reached the export, expected 16 or '
              'more' % (step, wr))
        check(fl == 0, '%s: %d flushes in write-back mode with no guest '
              'flush' % (step, fl))

    def expect_flushed(self, step):
        wr, fl = self.delta()
        check(wr >= 16, '%s: %d writes reached the export, expected 16 or '
              'more' % (step, wr))
        check(fl >= 16, '%s: %d flushes for 16 synchronous writes in '
              'write-through mode' % (step, fl))

    def expect_mode(self, step, guest, want_wb):
        wb = self.writeback()
        check(wb == want_wb, '%s: the export\'s writeback is %s, expected %s'
              % (step, wb, want_wb))
        want = 'write_back' if want_wb else 'write_through'
        check(guest.get('cache_type') == want, '%s: the guest reads '
              'cache_type %s, expected %s' % (step, guest.get('cache_type'),
                                              want))

    # ---- the scenario ----

    def run(self):
        subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', self.img,
                        str(DISK_SIZE)], check=True)
        self.start_daemon()
        if self.hotplug:
            self.boot(True, hotplug=True)
        elif self.reconnect:
            # the front-end dies with the guest's writes in flight
            self.boot(not self.writethrough, kill_after='set-wt')
            self.boot(False)
        else:
            self.boot(not self.writethrough)
        self.qmp.cmd('quit')
        self.wait_exit(self.daemon, 'qblock-storage-daemon')
        self.check_image()

    def boot(self, wb, kill_after=None, hotplug=False):
        """One QEMU through the guest's steps; @wb: the mode it finds;
        @hotplug: a DIMM is plugged in before the guest writes."""
        if hotplug:
            self.start_qemu(append=' memhp_default_state=online', extra=[
                '-qmp', 'unix:%s,server=on,wait=off'
                % self.path('qemu-qmp.sock')])
        else:
            self.start_qemu()
        g = self.next_sync('initial')
        if hotplug:
            self.plug_dimm()
        self.expect_mode('initial', g, wb)
        check(g.get('size') == str(DISK_SIZE // 512),
              'the guest sees %s sectors' % g.get('size'))
        check(g.get('serial') == 'exp0', 'serial %s' % g.get('serial'))
        check(g.get('lbs') == str(self.lbs), 'logical block size %s, '
              'expected %d' % (g.get('lbs'), self.lbs))
        check(g.get('queues') == str(self.num_queues), 'the guest uses %s '
              'queues, expected %d' % (g.get('queues'), self.num_queues))
        self.delta()
        self.go()

        self.next_sync('direct-1')
        (self.expect_cached if wb else self.expect_flushed)('direct-1')
        self.go()
        self.next_sync('fsync-1')
        wr, fl = self.delta()
        # a driver in write-through mode has nothing to flush
        check(wr == 0 and (fl >= 1 if wb else fl == 0),
              'fsync-1: %d writes and %d flushes, expected %s' %
              (wr, fl, 'a flush' if wb else 'none'))
        self.go()

        self.expect_mode('set-wt', self.next_sync('set-wt'), False)
        self.delta()
        self.go()
        if kill_after == 'set-wt':
            self.kill_qemu()
            return
        self.next_sync('direct-2')
        self.expect_flushed('direct-2')
        self.go()

        self.expect_mode('set-wb', self.next_sync('set-wb'), True)
        self.delta()
        self.go()
        self.next_sync('direct-3')
        self.expect_cached('direct-3')
        self.go()

        self.next_sync('buffered')
        wr, fl = self.delta()
        check(wr >= 1 and fl >= 1, 'buffered: %d writes and %d flushes'
              % (wr, fl))
        self.go()
        self.guest_passes('readback', 'QEMU')

    def plug_dimm(self):
        """A 128 MiB DIMM of shared memory plugged into the running guest:
        QEMU gives it to the export as one more region (ADD_MEM_REG),
        with the rings running."""
        qmp = Qmp(self.path('qemu-qmp.sock'))
        qmp.cmd('object-add', **{'qom-type': 'memory-backend-memfd',
                                 'id': 'mem1', 'size': 128 << 20,
                                 'share': True})
        qmp.cmd('device_add', driver='pc-dimm', id='dimm1', memdev='mem1')
        devs = qmp.cmd('query-memory-devices')
        self.log('memory devices: %r' % devs)
        check(any(d.get('data', {}).get('id') == 'dimm1' for d in devs),
              'QEMU lists no dimm1 after device_add: %r' % devs)
        qmp.close()

    def guest_passes(self, last, what):
        """The guest's last checkpoint @last, its verdict, its QEMU's
        exit (@what)."""
        self.next_sync(last)
        self.go()
        line = self.guest_line()
        check(line == '@@RESULT PASS', 'guest: ' + line)
        self.wait_exit(self.qemu, what)
        self.ctl.close()

    def kill_qemu(self):
        """SIGKILL once the guest's next writes reach the export."""
        deadline = time.time() + STEP_TIMEOUT
        while self.qmp_writes() == self.stats['wr_operations']:
            check(time.time() < deadline, 'the guest wrote nothing')
            time.sleep(0.01)
        self.qemu.kill()
        self.qemu.wait()
        self.ctl.close()
        # the next QEMU waits in the listen backlog until the export has
        # finished with this one's requests and memory
        self.delta()

    def qmp_writes(self):
        for entry in self.qmp.cmd('query-blockstats'):
            if entry.get('x-export') == 'exp0':
                return entry['stats']['wr_operations']
        raise Failure('query-blockstats has no entry for export exp0')

    def check_image(self):
        reads = ['read -P 0x%02x %dM 1M' % (b, mib) for b, mib in PATTERNS]
        reads.append('read -P 0 4M %dM' % (DISK_SIZE // (1 << 20) - 4))
        self.check_reads(reads)
        self.check_clean()

    def check_reads(self, reads):
        """qblock-io and qemu-io find in the image what @reads (qemu-io
        read -P commands) say."""
        for tool in (os.path.join(self.build, 'qblock-io'), 'qemu-io'):
            argv = [tool, '-r', '-f', 'qcow2']
            for r in reads:
                argv += ['-c', r]
            r = subprocess.run(argv + [self.img], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            self.log('%s:\n%s' % (' '.join(argv), r.stdout))
            check(r.returncode == 0 and 'Pattern verification failed'
                  not in r.stdout and r.stdout.count('read ') == len(reads),
                  '%s: the image does not hold what the guest wrote:\n%s'
                  % (os.path.basename(tool), r.stdout))

    def check_clean(self):
        r = subprocess.run(['qemu-img', 'check', self.img],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        self.log('qemu-img check:\n' + r.stdout)
        check(r.returncode == 0 and 'No errors were found' in r.stdout,
              'qemu-img check:\n' + r.stdout)


class RestartScenario(Scenario):
    """qblock-storage-daemon is killed (SIGKILL) while the guest's writers
    have requests in flight, and started again on the same socket and
    image: QEMU's vhost-user-blk device reconnects (reconnect=1) and hands
    the new daemon the buffer where the export tracked what it had in
    flight (INFLIGHT_SHMFD); the new daemon runs those requests again, so
    every writer finishes without an error and its data is in the image.
    A throttle on the export's node keeps the writers' requests queued in
    the daemon, so that some are in flight when it dies; the new daemon
    says how many it ran again.  The export writes through (each write
    flushed before it completes) into an image whose metadata is
    preallocated, so that what completed before the death is on disk and
    the image stays clean."""

    WRITERS = 8         # as guest-init.sh
    WRITER_MIB = 2

    def __init__(self, name, build, guest):
        super().__init__(name, build, guest, writethrough=True,
                         num_queues=1, lbs=512)

    def start_throttled(self, log_name):
        self.start_daemon(
            objects=['--object', 'throttle-group,id=tg0,x-iops-total=40'],
            extra=['--blockdev', 'driver=throttle,throttle-group=tg0,'
                   'file=disk0,node-name=thr0'],
            node='thr0', log_name=log_name)

    def run(self):
        subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', '-o',
                        'preallocation=metadata', self.img, str(DISK_SIZE)],
                       check=True)
        self.start_throttled('daemon-first.log')
        self.start_qemu(append=' h.mode=restart', vu_opts=',reconnect=1')
        self.next_sync('restart-ready')
        self.stats = {'wr_operations': 0}
        self.go()
        deadline = time.time() + STEP_TIMEOUT
        while self.qmp_writes() < 16:
            check(time.time() < deadline, 'the guest\'s writers wrote '
                  'nothing')
            time.sleep(0.05)
        self.daemon.kill()
        self.daemon.wait()
        self.qmp.close()
        # a killed daemon leaves its sockets' files behind
        for name in ('vub.sock', 'qmp.sock'):
            os.unlink(self.path(name))
        self.start_throttled('daemon.log')
        self.next_sync('written')
        with open(self.path('daemon.log')) as f:
            log = f.read()
        check('running again the' in log, 'the new daemon ran nothing '
              'again (no request was in flight when the first died?):\n'
              + log)
        self.log('the new daemon: ' + log)
        self.go()
        self.guest_passes('readback', 'QEMU')
        self.qmp.cmd('quit')
        self.wait_exit(self.daemon, 'qblock-storage-daemon')
        self.check_written()

    def check_written(self):
        self.check_reads(['read -P 0x%02x %dM %dM'
                          % (0x30 + i, (i - 1) * self.WRITER_MIB,
                             self.WRITER_MIB)
                          for i in range(1, self.WRITERS + 1)])
        self.check_clean()


class MigrationScenario(Scenario):
    """QEMU migrates the guest live to a second QEMU while the export
    writes into guest memory: the guest's reads through the page cache
    land in pages that the migration has already copied once, which only
    the export's dirty log (VHOST_F_LOG_ALL) makes it copy again.  Each
    QEMU has its own export of the one node (shared storage, as a
    migration between hosts has), both in an iothread, so the rings log
    from a thread of their own."""

    READ_MIB = 48       # as guest-init.sh
    WRITE_MIB = 56

    def __init__(self, name, build, guest):
        super().__init__(name, build, guest, writethrough=False,
                         num_queues=1, lbs=512)

    def qmp_wait(self, qmp, what, done, timeout=STEP_TIMEOUT):
        """Polls @what on @qmp until done(reply) says yes."""
        deadline = time.time() + timeout
        while True:
            reply = qmp.cmd(what)
            self.log('%s: %r' % (what, reply))
            if done(reply):
                return reply
            check(time.time() < deadline, '%s: still %r after %d s'
                  % (what, reply, timeout))
            time.sleep(0.1)

    def migration(self, qmp):
        st = qmp.cmd('query-migrate')
        check(st.get('status') not in ('failed', 'cancelled'),
              'the migration failed: %r' % st)
        return st

    def expect_md5(self, tag, want):
        g = self.next_sync(tag)
        check(g.get('md5') == want, '%s: the guest read %s, the disk holds '
              '%s' % (tag, g.get('md5'), want))

    def run(self):
        data = os.urandom(self.READ_MIB << 20)
        raw = self.path('data.raw')
        with open(raw, 'wb') as f:
            f.write(data)
            f.truncate(DISK_SIZE)
        subprocess.run(['qemu-img', 'convert', '-q', '-f', 'raw', '-O',
                        'qcow2', raw, self.img], check=True)
        want = hashlib.md5(data).hexdigest()
        self.start_daemon(',iothread=io0', [
            '--object', 'iothread,id=io0'], [
            '--export', 'type=vhost-user-blk,id=exp1,node-name=disk0,'
            'addr.type=unix,addr.path=%s,writable=on,iothread=io0'
            % self.path('vub-dst.sock')])
        self.wait_for_file('vub-dst.sock', self.daemon)
        mig = 'unix:' + self.path('mig.sock')

        # init_on_alloc=0: Debian's kernel zeroes each page it allocates,
        # which dirties a page cache page by the CPU before the export
        # writes it, so that the migration copies it again anyway
        append = ' h.mode=migrate init_on_alloc=0'
        self.start_qemu('src', append=append, extra=[
            '-qmp', 'unix:%s,server=on,wait=off' % self.path('src-qmp.sock')])
        src_qemu, src_ctl = self.qemu, self.ctl
        src = Qmp(self.path('src-qmp.sock'))
        self.next_sync('migrate-ready')
        src_buf = self.ctl_buf
        self.start_qemu('dst', vub='vub-dst.sock', append=append,
                        extra=['-qmp', 'unix:%s,server=on,wait=off'
                               % self.path('dst-qmp.sock'),
                               '-incoming', mig])
        dst_qemu, dst_ctl = self.qemu, self.ctl
        dst = Qmp(self.path('dst-qmp.sock'))
        self.qemu, self.ctl, self.ctl_buf = src_qemu, src_ctl, src_buf

        # a quarter of what the guest's writer dirties under TCG (some
        # 35 MB/s here, half that on a busy host), with a downtime of
        # 1 ms: no convergence until the writer stops
        src.cmd('migrate-set-parameters', **{'max-bandwidth': 8 << 20,
                                             'downtime-limit': 1})
        src.cmd('migrate', uri=mig)
        # the first pass over guest memory is over when it syncs again
        self.qmp_wait(src, 'query-migrate', lambda st: self.migration(src)
                      .get('ram', {}).get('dirty-sync-count', 0) >= 2)
        self.go()
        self.expect_md5('read-during', want)
        st = self.migration(src)
        check(st.get('status') == 'active', 'the migration was over before '
              'the guest read its disk, which tests nothing: %r' % st)
        self.log('after the reads: %r' % st)
        self.go()
        self.next_sync('quiet')
        src.cmd('migrate-set-parameters', **{'max-bandwidth': 1 << 30,
                                             'downtime-limit': 2000})
        st = self.qmp_wait(src, 'query-migrate', lambda st: self.migration(
            src).get('status') == 'completed')
        self.log('migrated: %r' % st)
        self.qmp_wait(dst, 'query-status', lambda r: r['status'] == 'running')
        self.qemu, self.ctl, self.ctl_buf = dst_qemu, dst_ctl, b''
        src.cmd('quit')
        self.wait_exit(src_qemu, 'the source QEMU')
        src_ctl.close()

        self.go()
        self.expect_md5('cached-after', want)
        self.go()
        self.expect_md5('reread-after', want)
        self.go()
        self.guest_passes('written', 'the destination QEMU')
        self.qmp.cmd('quit')
        self.wait_exit(self.daemon, 'qblock-storage-daemon')
        self.check_migrated_image(data)

    def check_migrated_image(self, data):
        out = self.path('after.raw')
        subprocess.run(['qemu-img', 'convert', '-q', '-f', 'qcow2', '-O',
                        'raw', self.img, out], check=True)
        with open(out, 'rb') as f:
            check(f.read(len(data)) == data, 'the image lost the data the '
                  'guest read')
            f.seek(self.WRITE_MIB << 20)
            check(f.read(1 << 20) == b'\xe5' * (1 << 20), 'the guest\'s '
                  'write after the migration is not in the image')
        self.check_clean()


def main():
    if len(sys.argv) < 3:
        print('usage: vhost-user-blk.py BUILD_DIR GUEST_DIR [SCENARIO...]',
              file=sys.stderr)
        return 2
    build, guest = sys.argv[1:3]
    only = sys.argv[3:]
    for prog in ('qemu-system-x86_64', 'qemu-img', 'qemu-io'):
        if not shutil.which(prog):
            print('guest: skipped: %s is not installed (qemu-system-x86, '
                  'qemu-utils)' % prog)
            print('0 passed, 0 failed, 1 skipped')
            return 77
    scenarios = [
        # the default: the export caches writes, and says so
        ('writeback', dict(writethrough=False, num_queues=1, lbs=512)),
        # writethrough=on, two queues, 4 KiB blocks
        ('writethrough', dict(writethrough=True, num_queues=2, lbs=4096)),
        # a DIMM plugged in while the guest runs: one more memory region
        ('hotplug', dict(writethrough=False, num_queues=1, lbs=512,
                         hotplug=True)),
        # a QEMU killed during writes, then another on the same export,
        # which finds the write cache the first guest chose
        ('reconnect', dict(writethrough=False, num_queues=1, lbs=512,
                           reconnect=True)),
        # QEMU migrates the guest live while the export writes into its
        # memory (dirty logging)
        ('migration', None),
        # the daemon is killed with the guest's writes in flight and
        # started again: QEMU reconnects, the new daemon runs them again
        ('restart', 'restart'),
    ]
    unknown = set(only) - {name for name, _ in scenarios}
    if unknown:
        print('vhost-user-blk.py: no scenario %s' % ', '.join(sorted(unknown)),
              file=sys.stderr)
        return 2
    passed = failed = 0
    for name, kw in scenarios:
        if only and name not in only:
            continue
        if kw is None:
            s = MigrationScenario(name, build, guest)
        elif kw == 'restart':
            s = RestartScenario(name, build, guest)
        else:
            s = Scenario(name, build, guest, **kw)
        t0 = time.time()
        try:
            s.run()
        except (Failure, OSError, subprocess.SubprocessError,
                json.JSONDecodeError) as e:
            s.cleanup()
            failed += 1
            print('FAIL %s (%.1f s): %s' % (name, time.time() - t0, e))
            for log in ('test.log', 'qemu-console.log', 'qemu.log',
                        'daemon-first.log',
                        'src-console.log', 'src.log', 'dst-console.log',
                        'dst.log', 'daemon.log'):
                p = s.path(log)
                if os.path.exists(p):
                    print('--- %s ---' % log)
                    with open(p, errors='replace') as f:
                        print(''.join(f.readlines()[-40:]), end='')
            print('(work directory kept: %s)' % s.work)
            continue
        s.cleanup()
        passed += 1
        print('ok   %s (%.1f s)' % (name, time.time() - t0))
        shutil.rmtree(s.work)
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
