#!/usr/bin/env python3
"""qblock-storage-daemon's command line and life cycle: options in order
with QEMU 7.2's error messages (observed with qemu-storage-daemon), clean
shutdown on SIGTERM, SIGINT and quit with every image flushed, closed and
unlocked, --pidfile, --daemonize, the stdio monitor, wait=on, the socket
file of server=on (a stale one replaced, another file refused, a newer
one left at exit), and a monitor that connects out (server=off).

  tests/daemon/test-cli.py BUILD_DIR
"""
import os
import signal
import socket
import subprocess
import time

import qsd
from qsd import generic

t = qsd.Tests('test-cli')
PROG = 'qblock-storage-daemon'


def test_errors():
    img = t.create_image('err.qcow2')
    nbd = t.path('err-nbd.sock')
    blk = 'driver=file,node-name=a,filename=%s' % img
    for args, msg in [
        (['--export', 'type=nbd'],
         "--export type=nbd: Parameter 'id' is missing"),
        (['--export', 'type=nbd,id=e0,node-name=x,writable=maybe'],
         "--export type=nbd,id=e0,node-name=x,writable=maybe: Parameter "
         "'writable' expects 'on' or 'off'"),
        (['--export', 'type=bogus,id=e0,node-name=x'],
         "--export type=bogus,id=e0,node-name=x: Parameter 'type' does not "
         "accept value 'bogus'"),
        (['--export', 'nbd,id=e0,node-name=x,bogus=1'],
         "--export nbd,id=e0,node-name=x,bogus=1: Parameter 'bogus' is "
         "unexpected"),
        (['--nbd-server', 'addr.type=unix'],
         "--nbd-server addr.type=unix: Parameter 'addr.path' is missing"),
        (['--nbd-server', 'addr.type=unix,addr.path=%s,max-connections=-1'
          % nbd],
         "--nbd-server addr.type=unix,addr.path=%s,max-connections=-1: "
         "Parameter 'max-connections' expects uint32_t" % nbd),
        (['--blockdev', 'driver=file,filename=/nonexist'],
         "--blockdev driver=file,filename=/nonexist: 'node-name' must be "
         "specified for the root node"),
        (['--blockdev', blk + ',aio=bad'],
         "--blockdev %s,aio=bad: Parameter 'aio' does not accept value "
         "'bad'" % blk),
        (['--blockdev', '{"driver":"file","node-name":"a","filename":5}'],
         "--blockdev {\"driver\":\"file\",\"node-name\":\"a\","
         "\"filename\":5}: Invalid parameter type for 'filename', "
         "expected: string"),
        (['--blockdev', '{bad'],
         "--blockdev {bad: JSON parse error, key is not a string in object"),
        (['--blockdev', blk, '--export', 'type=nbd,id=e0,node-name=a'],
         "--export type=nbd,id=e0,node-name=a: NBD server not running"),
        (['--blockdev', blk + ',read-only=on', '--nbd-server',
          'addr.type=unix,addr.path=' + nbd, '--export',
          'type=nbd,id=e0,node-name=a,writable=on'],
         "--export type=nbd,id=e0,node-name=a,writable=on: Cannot export "
         "read-only node as writable"),
        (['--blockdev', blk, '--blockdev', blk],
         "--blockdev %s: Duplicate nodes with node-name='a'" % blk),
        (['--nbd-server', 'addr.type=unix,addr.path=' + nbd, '--nbd-server',
          'addr.type=unix,addr.path=' + nbd],
         "--nbd-server addr.type=unix,addr.path=%s: NBD server already "
         "running" % nbd),
        (['--monitor', 'nosuch'],
         '--monitor nosuch: chardev "nosuch" not found'),
        (['--chardev', 'socket,id=m0,path=%s,server=on,wait=off'
          % t.path('e.sock'), '--monitor', 'm0,mode=readline'],
         '--monitor m0,mode=readline: Only QMP is supported'),
        (['--chardev', 'socket,id=m0,path=%s,server=on,wait=off'
          % t.path('e.sock'), '--monitor', 'm0', '--monitor', 'm0'],
         "--monitor m0: Device 'm0' is in use"),
        (['--chardev', 'socket,id=m0,path=%s,server=on,wait=off'
          % t.path('e.sock'), '--monitor', 'chardev=m0,pretty=maybe'],
         "--monitor chardev=m0,pretty=maybe: Parameter 'pretty' expects "
         "'on' or 'off'"),
        (['--chardev', 'bogus,id=x'],
         "--chardev bogus,id=x: Parameter 'backend' does not accept value "
         "'bogus'"),
        (['--chardev', 'socket,path=/tmp/x'],
         "--chardev socket,path=/tmp/x: Parameter 'id' is missing"),
        (['--chardev', 'socket,id=m0,path=%s' % t.path('none.sock')],
         "--chardev socket,id=m0,path=%s: Failed to connect to '%s': No "
         "such file or directory" % (t.path('none.sock'),
                                     t.path('none.sock'))),
        (['--chardev', 'stdio,id=x', '--daemonize'],
         '--chardev stdio,id=x: cannot use stdio with --daemonize'),
        (['--object', 'secret'], "--object secret: Parameter 'id' is "
         "missing"),
        (['--object', 'foo,id=x'], "--object foo,id=x: Parameter 'qom-type' "
         "does not accept value 'foo'"),
        (['--object', 'secret,id=s0'], "--object secret,id=s0: Either 'file' "
         "or 'data' must be provided"),
        (['--object', 'authz-pam,id=a0'],
         "--object authz-pam,id=a0: Object type 'authz-pam' is not "
         "supported by qblock (--object help lists the types it has)"),
        (['--pidfile', '/nonexist/p'],
         "cannot create PID file: Could not create '/nonexist/p': No such "
         "file or directory"),
        (['--bogus'], "unrecognized option '--bogus'"),
        (['-x'], "invalid option -- 'x'"),
        (['extra'], 'extra: Unexpected argument'),
        (['-T', 'foo'], '--trace is not supported by qblock-storage-daemon'),
    ]:
        rc, out, err = t.run([t.daemon_bin] + args)
        t.equal('%s: exit 1 with the message' % ' '.join(args)[:70],
                (rc, err.strip()), (1, '%s: %s' % (PROG, msg)))
    t.check('a failed start removes the sockets it made',
            not os.path.exists(t.path('e.sock')) and not os.path.exists(nbd))
    rc, out, err = t.run(['qemu-img', 'check', img])
    t.check('and leaves its images clean', rc == 0, out + err)


def test_help_version():
    rc, out, err = t.run([t.daemon_bin, '--help'])
    t.check('--help lists every option',
            rc == 0 and all(o in out for o in (
                '--blockdev', '--chardev', '--daemonize', '--export',
                '--monitor', '--nbd-server', '--object', '--pidfile',
                '-V, --version', '-h, --help')), out)
    t.check('--help lists every export type, as QEMU\'s but vduse-blk',
            all('--export [type=]%s,' % e in out
                for e in ('nbd', 'fuse', 'vhost-user-blk')), out)
    rc, out, err = t.run([t.daemon_bin, '-V'])
    t.check('-V names the program and the qemu-storage-daemon it follows',
            rc == 0 and out.startswith(PROG + ' version ') and
            'qemu-storage-daemon 7.2' in out, out)
    rc, out, err = t.run([t.daemon_bin, '--object', 'help'])
    t.check('--object help lists secret', rc == 0 and
            out.startswith('List of user creatable objects:\n') and
            '\n  secret\n' in out, out)
    rc, out, err = t.run([t.daemon_bin, '--object', 'secret,help'])
    t.check('--object secret,help lists its properties', rc == 0 and
            out.startswith('secret options:\n  data=<string>\n'), out)


def check_image(what, img, pattern_cmd=None):
    """The image checks clean and can be opened read-write (unlocked)."""
    rc, out, err = t.run(['qemu-img', 'check', img])
    t.check('%s: qemu-img check is clean' % what, rc == 0 and
            'No errors were found' in out, out + err)
    rc, out, err = t.run(['qemu-io', '-f', 'qcow2', '-c',
                          pattern_cmd or 'read 0 512', img])
    t.check('%s: the image is unlocked and holds the data' % what,
            rc == 0 and 'Pattern verification failed' not in out and
            'lock' not in err, out + err)


def shutdown_daemon(name, img):
    nbd = t.path(name + '-nbd.sock')
    d = t.daemon(['--blockdev', 'driver=file,node-name=f,filename=%s' % img,
                  '--blockdev', 'driver=qcow2,node-name=q,file=f',
                  '--nbd-server', 'addr.type=unix,addr.path=' + nbd,
                  '--export', 'type=nbd,id=e0,node-name=q,writable=on,'
                  'name=disk'])
    return d, nbd


def test_signals():
    for sig, name in ((signal.SIGTERM, 'sigterm'), (signal.SIGINT, 'sigint'),
                      (signal.SIGHUP, 'sighup')):
        img = t.create_image(name + '.qcow2')
        d, nbd = shutdown_daemon(name, img)
        c = d.qmp()
        rc, out = qsd.qemu_io(t, qsd.nbd_uri(nbd, 'disk'),
                              'write -P 0x33 1M 256k')
        t.check('%s: write through NBD' % name, rc == 0, out)
        rc, out, err = t.run(['qemu-img', 'info', img])
        t.check('%s: the image is locked while the daemon runs' % name,
                rc != 0 and 'lock' in err, err)
        status = d.stop(sig)
        t.equal('%s: the daemon exits 0' % name, status, 0)
        ev = c.event('SHUTDOWN', timeout=5)
        t.equal('%s: SHUTDOWN says why' % name, ev and ev['data'],
                {'guest': False, 'reason': 'host-signal'})
        ev = c.event('BLOCK_EXPORT_DELETED', timeout=5)
        t.equal('%s: the export is removed' % name, ev and ev['data'],
                {'id': 'e0'})
        t.check('%s: the monitor connection ends' % name,
                c.recv(timeout=5) is None and c.eof)
        t.check('%s: sockets removed' % name,
                not os.path.exists(nbd) and not os.path.exists(d.qmp_path))
        check_image(name, img, 'read -P 0x33 1M 256k')
        t.equal('%s: nothing on stderr' % name, d.stderr, '')


def test_quit_with_client():
    img = t.create_image('quit.qcow2')
    d, nbd = shutdown_daemon('quit', img)
    # a client connected in the middle of its session when quit comes
    client = subprocess.Popen(['qemu-io', '-f', 'raw', '-t', 'writeback',
                               qsd.nbd_uri(nbd, 'disk')],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    client.stdin.write(b'write -P 0x44 0 64k\n')
    client.stdin.flush()
    time.sleep(1)
    c = d.qmp()
    t.equal('quit with a client connected', c.cmd('quit'), {'return': {}})
    # as with QEMU's daemon, the reply comes once the images are closed:
    # after the events of the shutdown (reply() keeps those before it)
    t.equal('the reply comes after the shutdown\'s events',
            [e['event'] for e in c.events],
            ['SHUTDOWN', 'BLOCK_EXPORT_DELETED'])
    rc, out, err = t.run(['qemu-img', 'info', img])
    t.check('when quit replies, the image is no longer locked', rc == 0,
            err)
    t.equal('the daemon exits 0', d.wait(), 0)
    client.stdin.close()
    client.wait(timeout=qsd.TIMEOUT)
    check_image('after quit', img, 'read -P 0x44 0 64k')


def test_pidfile():
    pidfile = t.path('qsd.pid')
    d = t.daemon(['--pidfile', pidfile])
    qsd.wait_for(lambda: os.path.exists(pidfile) and
                 open(pidfile).read().strip())
    t.equal('--pidfile holds the pid', open(pidfile).read(),
            '%d\n' % d.proc.pid)
    rc, out, err = t.run([t.daemon_bin, '--pidfile', pidfile])
    t.check('a second daemon with the same pid file is refused',
            rc == 1 and 'Cannot lock pid file' in err, err)
    t.equal('the pid file still names the first', open(pidfile).read(),
            '%d\n' % d.proc.pid)
    d.stop()
    t.check('the pid file is removed at exit', not os.path.exists(pidfile))


def test_daemonize():
    pidfile = t.path('daemon.pid')
    qmp = t.path('daemon-qmp.sock')
    img = t.create_image('daemon.qcow2')
    rc, out, err = t.run([t.daemon_bin, '--daemonize', '--pidfile', pidfile,
                          '--chardev', 'socket,id=m,path=%s,server=on,'
                          'wait=off' % qmp, '--monitor', 'm',
                          '--blockdev', 'driver=file,node-name=f,filename=%s'
                          % img])
    t.equal('--daemonize: the parent exits 0 once started', (rc, err),
            (0, ''))
    t.check('by then the pid file and the QMP socket exist',
            os.path.exists(pidfile) and os.path.exists(qmp))
    pid = int(open(pidfile).read())
    t.check('the daemon is another process, in /',
            pid != os.getpid() and os.readlink('/proc/%d/cwd' % pid) == '/')
    c = qsd.QmpClient(qmp)
    c.negotiate()
    nodes = [n['node-name'] for n in c.ok('query-named-block-nodes')]
    t.equal('it serves QMP', nodes, ['f'])
    t.equal('relative paths given later resolve against /',
            qsd.error_of(c.cmd('blockdev-add', {'driver': 'file',
                                                'node-name': 'rel',
                                                'filename': 'nonexist.img'})),
            generic("Could not open 'nonexist.img': No such file or "
                    "directory"))
    os.kill(pid, signal.SIGTERM)
    t.check('SIGTERM ends it', qsd.wait_for(
        lambda: not os.path.exists('/proc/%d' % pid) or
        open('/proc/%d/stat' % pid).read().split()[2] == 'Z'))
    t.check('it removes its pid file and socket',
            qsd.wait_for(lambda: not os.path.exists(pidfile) and
                         not os.path.exists(qmp)))
    rc, out, err = t.run([t.daemon_bin, '--daemonize', '--blockdev',
                          'driver=file,node-name=f,filename=/nonexist'])
    t.check('a failed daemonized start: the parent exits 1 with the reason',
            rc == 1 and "Could not open '/nonexist'" in err, err)


def test_stdio_monitor():
    img = t.create_image('stdio.qcow2')
    script = (b'{"execute":"qmp_capabilities"}\n'
              b'{"execute":"blockdev-add","arguments":{"driver":"file",'
              b'"node-name":"f","filename":"' + img.encode() + b'"}}\n'
              b'{"execute":"query-block-exports","id":1}\n'
              b'{"execute":"quit"}\n')
    rc, out, err = t.run([t.daemon_bin, '--chardev', 'stdio,id=s',
                          '--monitor', 's'], input=script)
    lines = out.split('\r\n')
    t.check('a stdio monitor reads requests from a file on stdin',
            rc == 0 and lines[0].startswith('{"QMP": ') and
            '{"return": [], "id": 1}' in lines, out + err)
    t.check('and ends with SHUTDOWN', '"event": "SHUTDOWN"' in out, out)
    r, w = os.pipe()
    p = subprocess.Popen([t.daemon_bin, '--chardev', 'stdio,id=s',
                          '--monitor', 's,pretty=on'], stdin=r,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(r)
    os.write(w, b'{"execute":"qmp_capabilities"}\n')
    time.sleep(0.5)
    os.write(w, b'{"execute":"quit"}\n')
    os.close(w)
    out, err = p.communicate(timeout=qsd.TIMEOUT)
    t.check('pretty=on over a pipe: indented, CRLF line ends',
            p.returncode == 0 and b'{\r\n    "return": {\r\n    }\r\n}\r\n'
            in out, out + err)


def test_wait_on():
    qmp = t.path('wait.sock')
    pidfile = t.path('wait.pid')
    p = subprocess.Popen([t.daemon_bin, '--chardev',
                          'socket,id=m,path=%s,server=on' % qmp,
                          '--monitor', 'm', '--pidfile', pidfile],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    qsd.wait_for(lambda: os.path.exists(qmp))
    time.sleep(0.3)
    t.check('wait=on: start-up waits for the first client (no pid file)',
            os.path.exists(qmp) and not os.path.exists(pidfile))
    c = qsd.QmpClient(qmp)
    t.check('the client gets the greeting', c.greeting and 'QMP' in c.greeting)
    t.check('and start-up goes on', qsd.wait_for(
        lambda: os.path.exists(pidfile)))
    c.negotiate()
    c.ok('quit')
    out, err = p.communicate(timeout=qsd.TIMEOUT)
    t.check('the wait is announced on stderr',
            b'waiting for connection on: disconnected:unix:%s,server=on'
            % qmp.encode() in err, err)
    p = subprocess.Popen([t.daemon_bin, '--chardev',
                          'socket,id=m,path=%s,server=on' % qmp,
                          '--monitor', 'm'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    qsd.wait_for(lambda: os.path.exists(qmp))
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=qsd.TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
    t.equal('SIGTERM ends the wait (QEMU ignores it there)', p.returncode, 0)
    t.check('and removes the socket', not os.path.exists(qmp))


def test_socket_file():
    path = t.path('file.sock')
    chardev = ['--chardev', 'socket,id=m,path=%s,server=on,wait=off' % path,
               '--monitor', 'm']
    with open(path, 'w') as f:
        f.write('keep me')
    rc, out, err = t.run([t.daemon_bin] + chardev)
    t.check('server=on over a regular file: refused', rc != 0 and
            'Failed to bind socket to %s' % path in err and
            'not a socket' in err, err)
    with open(path) as f:
        t.check('and the file is kept', f.read() == 'keep me')
    os.unlink(path)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()
    d = t.daemon(chardev)
    d.qmp().close()
    c = qsd.QmpClient(path)
    t.check('a stale socket at the path is replaced',
            c.greeting and 'QMP' in c.greeting, c.greeting)
    c.close()
    left = [n for n in os.listdir(t.dir) if n.startswith('file.sock.')]
    t.equal('the socket was renamed into place, nothing left beside it',
            left, [])
    os.unlink(path)
    newer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    newer.bind(path)
    t.equal('the daemon ends on SIGTERM', d.stop(), 0)
    t.check('leaving a newer socket at its path in place',
            os.path.exists(path))
    newer.close()


def test_client_mode():
    path = t.path('listen.sock')
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    p = subprocess.Popen([t.daemon_bin, '--chardev',
                          'socket,id=m,path=%s' % path, '--monitor', 'm'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    srv.settimeout(qsd.TIMEOUT)
    conn, _ = srv.accept()
    conn.settimeout(qsd.TIMEOUT)
    data = b''
    while b'\r\n' not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    t.check('server=off: the daemon connects and greets', data.startswith(
        b'{"QMP": '), data)
    conn.sendall(b'{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n')
    try:
        p.wait(timeout=qsd.TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
    t.equal('and obeys quit', p.returncode, 0)
    conn.close()
    srv.close()


def test_json_blockdev():
    img = t.create_image('json.qcow2')
    d = t.daemon(['--blockdev', '{"driver": "qcow2", "node-name": "q", '
                  '"file": {"driver": "file", "filename": "%s"}, '
                  '"cache": {"direct": false}}' % img])
    c = d.qmp()
    nodes = c.ok('query-named-block-nodes', {'flat': True})
    t.check('--blockdev takes a JSON object',
            [n['drv'] for n in nodes if n['node-name'] == 'q'] == ['qcow2'],
            nodes)
    t.equal('quit', c.cmd('quit'), {'return': {}})
    t.equal('exit 0', d.wait(), 0)


if not qsd.have('qemu-img') or not qsd.have('qemu-io'):
    t.skip('all', 'the real qemu-img and qemu-io (qemu-utils) are missing')
    t.finish()
test_help_version()
test_errors()
test_signals()
test_quit_with_client()
test_pidfile()
test_daemonize()
test_stdio_monitor()
test_wait_on()
test_socket_file()
test_client_mode()
test_json_blockdev()
t.finish()
