#!/usr/bin/env python3
"""Sockets the daemon inherits, named by number (addr.type=fd, a
chardev's fd=), as qemu-storage-daemon takes them on its command line:
the NBD server on a unix socket that is bound but not listening yet and
on a TCP socket that listens already, a vhost-user-blk export on an
inherited socket, a monitor on an inherited socket or connection; the
errors in QEMU's words (not a number, not a socket, a datagram socket);
over QMP a number names no descriptor (QEMU's monitor takes only the
names of descriptors handed to it, which its daemon has none of: "only
QEMU supports file descriptor passing")."""
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
import vu_frontend                                      # noqa: E402

t = qsd.Tests('test-fd-addr')


def raw_node(name, path):
    return '--blockdev', 'file,filename=%s,node-name=%s' % (path, name)


def write_pattern(image):
    t.sh('qemu-io -f raw -c "write -P 0x5a 0 64k" %s' % image)


def qmp_over(sock):
    """qmp_capabilities and query-version over a connected socket."""
    sock.settimeout(qsd.TIMEOUT)
    f = sock.makefile('rwb')
    greeting = json.loads(f.readline())
    f.write(b'{"execute": "qmp_capabilities"}\n'
            b'{"execute": "query-version"}\n')
    f.flush()
    replies = [json.loads(f.readline()) for _ in range(2)]
    f.close()
    return 'QMP' in greeting and replies[0] == {'return': {}} and \
        'qemu' in replies[1]['return']


def test_chardev_server():
    """--chardev socket,fd=N,server=on: the monitor listens on an
    inherited socket, unix or TCP."""
    for kind in ('unix', 'tcp'):
        if kind == 'unix':
            path = t.path('mon.sock')
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            where = 'unix:' + path
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(('127.0.0.1', 0))
            path = s.getsockname()
            where = 'tcp:127.0.0.1:%d' % path[1]
        s.listen(1)
        d = t.daemon(['--chardev', 'socket,id=m,fd=%d,server=on' %
                      s.fileno(), '--monitor', 'chardev=m'],
                     qmp=False, pass_fds=(s.fileno(),))
        s.close()
        c = socket.socket(socket.AF_UNIX if kind == 'unix' else
                          socket.AF_INET, socket.SOCK_STREAM)
        c.connect(path)
        t.check('a monitor on an inherited %s socket answers' % kind,
                qmp_over(c))
        c.close()
        t.equal('the daemon exits 0', d.stop(), 0)
        t.check('wait=on named the inherited socket\'s address',
                'waiting for connection on: disconnected:%s,server=on' %
                where in d.stderr, d.stderr)


def test_chardev_connection():
    """--chardev socket,fd=N: the monitor talks over an inherited
    connection (one end of a socket pair)."""
    ours, theirs = socket.socketpair()
    d = t.daemon(['--chardev', 'socket,id=m,fd=%d' % theirs.fileno(),
                  '--monitor', 'chardev=m'], qmp=False,
                 pass_fds=(theirs.fileno(),))
    theirs.close()
    t.check('a monitor on an inherited connection answers', qmp_over(ours))
    ours.close()
    t.equal('the daemon exits 0 when the connection is gone', d.stop(), 0)


def test_chardev_errors():
    image = t.create_image('c.raw', size='1M', fmt='raw')
    with open(image, 'rb') as f:
        cases = [
            ('socket,id=m,fd=3,path=%s,server=on' % t.path('x.sock'),
             "None or one of 'path', 'fd' or 'host' option required."),
            ('socket,id=m,fd=abc,server=on',
             'Unable to parse FD number abc'),
            ('socket,id=m,fd=%d,server=on,wait=off' % f.fileno(),
             "File descriptor '%d' is not a socket" % f.fileno()),
            ('socket,id=m,fd=%d' % f.fileno(),
             "File descriptor '%d' is not a socket" % f.fileno())]
        if t.daemon_bin.endswith('qblock-storage-daemon'):
            # qemu-storage-daemon waits on no socket at all, for ever
            cases.append(('socket,id=m,server=on,wait=off',
                          "A socket needs 'path', 'fd' or 'host'"))
        for arg, want in cases:
            d = t.daemon(['--chardev', arg, '--monitor', 'chardev=m'],
                         qmp=False, pass_fds=(f.fileno(),))
            rc = d.wait()
            t.check('--chardev %s: refused, "%s"' % (arg, want),
                    rc == 1 and want in d.stderr, (rc, d.stderr))


def test_nbd_unix_bound():
    """A unix socket bound by the parent, not listening: the daemon makes
    it listen; the path is the parent's, so the daemon leaves it."""
    image = t.create_image('u.raw', size='1M', fmt='raw')
    write_pattern(image)
    sock_path = t.path('inherited.sock')
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sock_path)
    d = t.daemon([*raw_node('d0', image),
                  '--nbd-server', 'addr.type=fd,addr.str=%d' % s.fileno(),
                  '--export', 'nbd,id=e0,node-name=d0,name=disk,writable=on'],
                 qmp=True, pass_fds=(s.fileno(),))
    s.close()
    d.qmp().close()     # the daemon is up: its QMP socket answers
    rc, out = qsd.qemu_io(t, qsd.nbd_uri(sock_path, 'disk'),
                          'read -P 0x5a 0 64k')
    t.check('NBD over the inherited unix socket: the data reads back',
            rc == 0 and 'read 65536/65536' in out, out)
    t.equal('the daemon exits 0', d.stop(), 0)
    t.check('the socket file, the parent\'s, is left', os.path.exists(
        sock_path))


def test_nbd_tcp_listening():
    """A TCP socket that already listens (socket activation's case)."""
    image = t.create_image('t.raw', size='1M', fmt='raw')
    write_pattern(image)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(('127.0.0.1', 0))
    s.listen(5)
    port = s.getsockname()[1]
    d = t.daemon([*raw_node('d0', image),
                  '--nbd-server', 'addr.type=fd,addr.str=%d' % s.fileno(),
                  '--export', 'nbd,id=e0,node-name=d0,name=disk,writable=on'],
                 pass_fds=(s.fileno(),))
    s.close()
    c = d.qmp()
    rc, out = qsd.qemu_io(t, 'nbd://127.0.0.1:%d/disk' % port,
                          'read -P 0x5a 0 64k')
    t.check('NBD over the inherited TCP socket: the data reads back',
            rc == 0 and 'read 65536/65536' in out, out)
    # the server's socket is the daemon's now: stopping the server closes
    # it, and nothing listens on the port any more
    c.ok('nbd-server-stop')
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.connect(('127.0.0.1', port))
        refused = False
    except ConnectionRefusedError:
        refused = True
    probe.close()
    t.check('nbd-server-stop closes the inherited socket', refused)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_vhost_user_blk():
    image = t.create_image('v.raw', size='1M', fmt='raw')
    sock_path = t.path('vhost.sock')
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sock_path)
    d = t.daemon([*raw_node('d0', image),
                  '--export', 'vhost-user-blk,id=v0,node-name=d0,'
                  'addr.type=fd,addr.str=%d' % s.fileno()],
                 pass_fds=(s.fileno(),))
    s.close()
    d.qmp().close()
    fe = vu_frontend.FrontEnd(sock_path)
    features = fe.get_u64(vu_frontend.GET_FEATURES)
    t.check('vhost-user-blk on the inherited socket: the back-end answers '
            'GET_FEATURES with the protocol feature',
            features & vu_frontend.F_PROTOCOL_FEATURES, hex(features))
    fe.sock.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_errors():
    image = t.create_image('e.raw', size='1M', fmt='raw')
    with open(image, 'rb') as f:
        fd = f.fileno()
        for arg, want in [
                ('addr.type=fd,addr.str=abc',
                 'Unable to parse FD number abc'),
                ('addr.type=fd,addr.str=%d' % fd,
                 "File descriptor '%d' is not a socket" % fd),
                ('addr.type=fd,addr.str=-1',
                 "File descriptor '-1' is not a socket"),
                ('addr.type=fd,addr.str=1000',
                 "File descriptor '1000' is not a socket")]:
            d = t.daemon(['--nbd-server', arg], qmp=False, pass_fds=(fd,))
            rc = d.wait()
            t.check('--nbd-server %s: refused, "%s"' % (arg, want),
                    rc == 1 and want in d.stderr, (rc, d.stderr))
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    d = t.daemon(['--nbd-server', 'addr.type=fd,addr.str=%d' %
                  dgram.fileno()], qmp=False, pass_fds=(dgram.fileno(),))
    rc = d.wait()
    t.check('a datagram socket cannot listen: refused',
            rc == 1 and 'Failed to listen on fd socket: Operation not '
            'supported' in d.stderr, (rc, d.stderr))
    dgram.close()


def test_qmp_names():
    """Over QMP a number is the name of a descriptor the monitor was
    given (getfd), of which the daemon has none: a command may not take a
    descriptor of the daemon's (an image, a client's connection) by
    guessing its number."""
    image = t.create_image('q.raw', size='1M', fmt='raw')
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(t.path('q.sock'))
    d = t.daemon([*raw_node('d0', image)], pass_fds=(s.fileno(),))
    c = d.qmp()
    r = c.cmd('nbd-server-start', {'addr': {'type': 'fd', 'data': {
        'str': str(s.fileno())}}})
    t.equal('nbd-server-start with an fd address', qsd.error_of(r),
            ('GenericError', 'only QEMU supports file descriptor passing'))
    r = c.cmd('block-export-add', {'type': 'vhost-user-blk', 'id': 'v0',
                                   'node-name': 'd0',
                                   'addr': {'type': 'fd',
                                            'str': str(s.fileno())}})
    t.equal('block-export-add vhost-user-blk with an fd address',
            qsd.error_of(r),
            ('GenericError', 'only QEMU supports file descriptor passing'))
    # the command line's numbers still work after a command failed so
    r = c.cmd('nbd-server-start', {'addr': {'type': 'unix', 'data': {
        'path': t.path('after.sock')}}})
    t.equal('a unix address still starts the server', r, {'return': {}})
    c.close()
    s.close()
    t.equal('the daemon exits 0', d.stop(), 0)


test_nbd_unix_bound()
test_nbd_tcp_listening()
test_vhost_user_blk()
test_errors()
test_qmp_names()
test_chardev_server()
test_chardev_connection()
test_chardev_errors()
t.finish()
