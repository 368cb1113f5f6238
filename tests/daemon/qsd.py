"""Helpers for the qblock-storage-daemon tests: start a daemon, talk raw
QMP to it, run real NBD clients against it, and count results.

Every test script imports this, makes a Tests() and ends with
tests.finish(), which prints "NAME: N passed, N failed, N skipped" and
exits 1 if anything failed.
"""
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# A loaded 2-core machine can take seconds to start a process.
TIMEOUT = 30.0


class Tests:
    def __init__(self, name):
        self.name = name
        self.passed = self.failed = self.skipped = 0
        build = sys.argv[1] if len(sys.argv) > 1 else 'build'
        self.build = os.path.abspath(build)
        self.daemon_bin = os.path.join(self.build, 'qblock-storage-daemon')
        self.img_bin = os.path.join(self.build, 'qblock-img')
        self.dir = tempfile.mkdtemp(prefix='qsd-test-')
        self.daemons = []

    def check(self, what, cond, detail=''):
        if cond:
            self.passed += 1
            print('ok %s' % what)
        else:
            self.failed += 1
            print('FAIL %s%s' % (what, ': ' + str(detail) if detail else ''))
        return cond

    def equal(self, what, got, expect):
        return self.check(what, got == expect,
                          'got %r, expected %r' % (got, expect))

    def skip(self, what, why):
        self.skipped += 1
        print('skip %s: %s' % (what, why))

    def path(self, name):
        return os.path.join(self.dir, name)

    def finish(self):
        for d in self.daemons:
            d.kill()
        if not self.failed:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            print('(files kept in %s)' % self.dir)
        print('%s: %d passed, %d failed, %d skipped' %
              (self.name, self.passed, self.failed, self.skipped))
        sys.exit(1 if self.failed else 0)

    def run(self, args, **kw):
        """Runs a program, returning (exit status, stdout, stderr)."""
        p = subprocess.run(args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIMEOUT * 2,
                           cwd=kw.get('cwd', self.dir),
                           input=kw.get('input'))
        return p.returncode, p.stdout.decode(errors='replace'), \
            p.stderr.decode(errors='replace')

    def image_info(self, name):
        """The real qemu-img's info --output=json of NAME (without a
        lock: the daemon may hold the image), or {'error': stderr}."""
        rc, out, err = self.run(['qemu-img', 'info', '-U', '--output=json',
                                 self.path(name)])
        return json.loads(out) if rc == 0 else {'error': err}

    def create_image(self, name, size='64M', fmt='qcow2'):
        path = self.path(name)
        rc, out, err = self.run([self.img_bin, 'create', '-q', '-f', fmt,
                                 path, size])
        if rc:
            raise RuntimeError('qblock-img create failed: ' + err)
        return path

    def daemon(self, args, qmp=True, **kw):
        d = Daemon(self, args, qmp=qmp, **kw)
        self.daemons.append(d)
        return d

    def sh(self, line):
        """Runs a shell command line in the test directory (the real
        qemu-img and qemu-io making images); raises if it fails."""
        subprocess.run(line, shell=True, cwd=self.dir, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def qcow2(self, name, backing=None, fmt_file='file', extra=None):
        """blockdev-add's arguments for qcow2 node @name on NAME.qcow2."""
        opts = {'driver': 'qcow2', 'node-name': name,
                'file': {'driver': fmt_file,
                         'filename': self.path(name + '.qcow2')}}
        if backing is not None:
            opts['backing'] = backing
        if extra:
            opts.update(extra)
        return opts

    def start(self, nodes, export=None):
        """A daemon with the nodes @nodes (blockdev-add arguments) and,
        if @export names one, a writable NBD export 'disk' of it on
        nbd.sock; returns the daemon and its QMP client."""
        d = self.daemon([])
        c = d.qmp()
        for n in nodes:
            c.ok('blockdev-add', n)
        if export:
            c.ok('nbd-server-start', {'addr': {'type': 'unix', 'data': {
                'path': self.path('nbd.sock')}}})
            c.ok('block-export-add', {'type': 'nbd', 'id': 'e0',
                                      'node-name': export, 'name': 'disk',
                                      'writable': True})
        return d, c


def have(program):
    return shutil.which(program) is not None


def nbd_uri(sock, name):
    return 'nbd+unix:///%s?socket=%s' % (name, sock)


def wait_job_status(c, job, status, timeout=60):
    """Waits for JOB_STATUS_CHANGE of @job to @status; False on timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        e = c.event('JOB_STATUS_CHANGE', timeout=end - time.monotonic())
        if e is None:
            return False
        if e['data'] == {'id': job, 'status': status}:
            return True
    return False


def wait_for(cond, timeout=TIMEOUT):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


class Daemon:
    """A qblock-storage-daemon with a QMP socket (unless qmp=False)."""

    def __init__(self, tests, args, qmp=True, stdin=None, nofile=None,
                 stderr_path=None, pass_fds=()):
        """@nofile: RLIMIT_NOFILE of the daemon; @stderr_path: a file for
        its standard error, readable while it runs (self.stderr_path);
        @pass_fds: descriptors the daemon inherits, by the same numbers."""
        self.tests = tests
        self.qmp_path = tests.path('qmp-%d.sock' % len(tests.daemons))
        cmd = [tests.daemon_bin]
        if qmp:
            cmd += ['--chardev', 'socket,id=qmp0,path=%s,server=on,wait=off'
                    % self.qmp_path, '--monitor', 'chardev=qmp0']
        cmd += args
        self.stderr_path = stderr_path
        err = open(stderr_path, 'wb') if stderr_path else subprocess.PIPE
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                            (nofile, nofile))) \
            if nofile else None
        self.proc = subprocess.Popen(cmd, cwd=tests.dir, stdin=stdin,
                                     stdout=subprocess.PIPE, stderr=err,
                                     preexec_fn=limit, pass_fds=pass_fds)
        if stderr_path:
            err.close()
        self.stderr = ''
        if qmp and not wait_for(lambda: os.path.exists(self.qmp_path) or
                                self.proc.poll() is not None):
            raise RuntimeError('daemon did not create its QMP socket')

    def alive(self):
        return self.proc.poll() is None

    def qmp(self, negotiate=True):
        c = QmpClient(self.qmp_path)
        if negotiate:
            c.negotiate()
        return c

    def wait(self, timeout=TIMEOUT):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        if self.stderr_path:
            with open(self.stderr_path, 'rb') as f:
                self.stderr = f.read().decode(errors='replace')
        else:
            self.stderr = self.proc.stderr.read().decode(errors='replace')
        return self.proc.returncode

    def stop(self, sig=signal.SIGTERM):
        if self.alive():
            self.proc.send_signal(sig)
        return self.wait()

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()


class QmpClient:
    """Raw QMP: bytes in, one JSON object per "\\r\\n" line out."""

    def __init__(self, path):
        # a server's socket file appears at bind(), before its listen():
        # a connect in between is refused, more often on a loaded machine
        end = time.monotonic() + TIMEOUT
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(path)
                break
            except ConnectionRefusedError:
                self.sock.close()
                if time.monotonic() >= end:
                    raise
                time.sleep(0.02)
        self.buf = b''
        self.events = []
        self.eof = False
        self.greeting = self.recv()
        if self.greeting is None or 'QMP' not in self.greeting:
            # else the greeting, late, would be taken for the first reply
            raise RuntimeError('%s: no QMP greeting within %d s: %r'
                               % (path, TIMEOUT, self.greeting))

    def send_raw(self, data):
        self.sock.sendall(data)

    def recv_line(self, timeout=TIMEOUT):
        """The next line (without "\\r\\n"), or None at EOF/timeout."""
        end = time.monotonic() + timeout
        while b'\r\n' not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or self.eof:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return None
            except ConnectionResetError:
                data = b''
            if not data:
                self.eof = True
                continue
            self.buf += data
        line, self.buf = self.buf.split(b'\r\n', 1)
        return line

    def recv(self, timeout=TIMEOUT):
        line = self.recv_line(timeout)
        return None if line is None else json.loads(line)

    def reply(self, timeout=TIMEOUT):
        """The next reply; events before it are kept in self.events."""
        while True:
            msg = self.recv(timeout)
            if msg is None or 'event' not in msg:
                return msg
            self.events.append(msg)

    def cmd(self, name, args=None, id=None):
        req = {'execute': name}
        if args is not None:
            req['arguments'] = args
        if id is not None:
            req['id'] = id
        self.send_raw(json.dumps(req).encode() + b'\n')
        return self.reply()

    def ok(self, name, args=None):
        r = self.cmd(name, args)
        if r is None or 'return' not in r:
            raise RuntimeError('%s %r failed: %r' % (name, args, r))
        return r['return']

    def negotiate(self):
        r = self.cmd('qmp_capabilities')
        # qemu-storage-daemon on a loaded machine once sent its greeting
        # a second time (seen in reopen-vs-qsd): it is no reply
        while r is not None and 'QMP' in r:
            r = self.reply()
        if r is None or 'return' not in r:
            raise RuntimeError('qmp_capabilities failed: %r' % (r,))

    def event(self, name, timeout=TIMEOUT):
        """Waits for event @name (kept ones first); None on timeout."""
        end = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e['event'] == name:
                    return self.events.pop(i)
            left = end - time.monotonic()
            if left <= 0:
                return None
            msg = self.recv(left)
            if msg is None:
                return None
            if 'event' in msg:
                self.events.append(msg)

    def events_named(self, name, timeout=1.0):
        """The data of every event @name, kept or arriving, until none
        comes for @timeout seconds."""
        got = []
        while True:
            e = self.event(name, timeout=timeout)
            if e is None:
                return got
            got.append(e['data'])

    def close(self):
        self.sock.close()


def error_of(reply):
    """(class, desc) of an error reply, or None."""
    if not reply or 'error' not in reply:
        return None
    return reply['error']['class'], reply['error']['desc']


def generic(desc):
    return ('GenericError', desc)


def refused(tests, c, command, defaults, cases):
    """Runs @command with @defaults updated by each case's arguments and
    checks that it fails with the case's GenericError message: @cases
    is a list of (arguments, message)."""
    for args, msg in cases:
        tests.equal('refused: %s' % msg,
                    error_of(c.cmd(command, dict(defaults, **args))),
                    generic(msg))


def qemu_io(tests, uri, *cmds, fmt='raw', cache='writeback'):
    """Runs the real qemu-io on an NBD URI (qemu-utils is a test
    dependency); returns (status, output).  qemu-io's own default cache
    mode, writethrough, would send every write with FUA: writeback lets
    the daemon's write cache alone decide when writes are flushed."""
    args = ['qemu-io', '-f', fmt, '-t', cache]
    for c in cmds:
        args += ['-c', c]
    rc, out, err = tests.run(args + [uri])
    return rc, out + err
