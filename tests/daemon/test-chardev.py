#!/usr/bin/env python3
"""The character device commands, as qemu-storage-daemon's: chardev-add
of each kind (ringbuf, memory, null, file, socket), query-chardev,
query-chardev-backends, ring buffers (what a full ring keeps, utf8 and
base64), chardev-change, chardev-remove and chardev-send-break, with
QEMU's errors; --chardev null, file and ringbuf on the command line, and
a monitor on a null or file device.  Where qblock differs on purpose
(a monitor on a ring buffer, a ring of 0 bytes, a server that would wait
for its first client, a failed chardev-change) the case says so and runs
against qblock only."""
import os
import re
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402

t = qsd.Tests('test-chardev')
QBLOCK = t.daemon_bin.endswith('qblock-storage-daemon')


def backend(kind, **data):
    return {'type': kind, 'data': data}


def add(c, cid, kind, **data):
    return c.cmd('chardev-add', {'id': cid, 'backend': backend(kind,
                                                                **data)})


def devices(c):
    """query-chardev as {label: (filename, frontend-open)}: the order is
    QEMU's hash order there, creation order here."""
    return {d['label']: (d['filename'], d['frontend-open'])
            for d in c.ok('query-chardev')}


def test_add_and_query(c, qmp_path):
    monitor = [k for k, v in devices(c).items() if v[1]]
    t.equal('query-chardev: the monitor\'s socket, in use', len(monitor), 1)
    t.equal('and connected (this client)', devices(c)[monitor[0]][0],
            'unix:%s,server=on' % qmp_path)
    t.equal('chardev-add ringbuf', add(c, 'r0', 'ringbuf', size=16),
            {'return': {}})
    t.equal('chardev-add memory (default size)', add(c, 'm1', 'memory'),
            {'return': {}})
    t.equal('chardev-add null', add(c, 'n0', 'null'), {'return': {}})
    out = t.path('out.txt')
    t.equal('chardev-add file', add(c, 'f0', 'file', out=out),
            {'return': {}})
    t.check('the file is created', os.path.exists(out))
    sock = t.path('s0.sock')
    t.equal('chardev-add socket (a server, not waiting)',
            add(c, 's0', 'socket', addr={'type': 'unix',
                                         'data': {'path': sock}},
                server=True, wait=False), {'return': {}})
    d = devices(c)
    t.equal('query-chardev: what each is, in QEMU\'s words',
            {k: v for k, v in d.items() if k not in monitor},
            {'r0': ('ringbuf', False), 'm1': ('memory', False),
             'n0': ('null', False), 'f0': ('file', False),
             's0': ('disconnected:unix:%s,server=on' % sock, False)})
    names = {b['name'] for b in c.ok('query-chardev-backends')}
    t.check('query-chardev-backends lists what can be added',
            {'null', 'ringbuf', 'memory', 'stdio', 'socket',
             'file'} <= names, names)
    for r, want in [
        (add(c, 'r0', 'null'), "Chardev with id 'r0' already exists"),
        (add(c, 'r2', 'ringbuf', size=15),
         "Failed to add chardev 'r2': size of ringbuf chardev must be "
         "power of two"),
        (add(c, 'r3', 'ringbuf', size=-4),
         "Failed to add chardev 'r3': size of ringbuf chardev must be "
         "power of two"),
        (add(c, 'f1', 'file', out='/nonexistent/dir/x'),
         "Failed to add chardev 'f1': Could not open '/nonexistent/dir/x': "
         "No such file or directory"),
        (add(c, 'c0', 'socket', addr={'type': 'unix', 'data': {
            'path': t.path('nobody.sock')}}, server=False),
         "Failed to add chardev 'c0': Failed to connect to '%s': No such "
         "file or directory" % t.path('nobody.sock')),
        (add(c, 'd0', 'socket', addr={'type': 'fd', 'data': {'str': '0'}},
             wait=False),
         "Failed to add chardev 'd0': only QEMU supports file descriptor "
         "passing")]:
        t.equal('refused: %s' % want, error_of(r), generic(want))
    if QBLOCK:
        # QEMU takes 0 (and its ring of 0 bytes writes outside itself)
        t.equal('a ring of 0 bytes is refused', error_of(
            add(c, 'r4', 'ringbuf', size=0)), generic(
            "Failed to add chardev 'r4': size of ringbuf chardev must be "
            "power of two"))
        t.equal('a ring is bounded', error_of(
            add(c, 'r5', 'ringbuf', size=1 << 30)), generic(
            "Failed to add chardev 'r5': size of ringbuf chardev must be "
            "at most 64 MiB"))
        # QEMU's monitor stops until a client connects, for ever if none
        t.equal('a server that would wait is refused', error_of(
            add(c, 's1', 'socket', addr={'type': 'unix', 'data': {
                'path': t.path('s1.sock')}}, wait=True)), generic(
            "chardev 's1': wait=true would stop the monitor until a "
            "client connects; use wait=false"))
    cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cl.connect(sock)
    cl.close()
    t.check('the socket server accepts', True)


def test_ringbuf(c):
    ok = {'return': {}}
    t.equal('ringbuf-write', c.cmd('ringbuf-write', {
        'device': 'r0', 'data': 'hello world, this is long'}), ok)
    t.equal('a full ring keeps the newest 16 bytes',
            c.ok('ringbuf-read', {'device': 'r0', 'size': 100}),
            'ld, this is long')
    t.equal('and is empty after reading them',
            c.ok('ringbuf-read', {'device': 'r0', 'size': 100}), '')
    c.ok('ringbuf-write', {'device': 'r0', 'data': 'aGVsbG8=',
                           'format': 'base64'})
    t.equal('base64 in, base64 out, at most size bytes',
            c.ok('ringbuf-read', {'device': 'r0', 'size': 3,
                                  'format': 'base64'}), 'aGVs')
    t.equal('the rest, as UTF-8',
            c.ok('ringbuf-read', {'device': 'r0', 'size': 3}), 'lo')
    c.ok('ringbuf-write', {'device': 'r0', 'data': '//79',
                           'format': 'base64'})
    t.equal('bytes that are not UTF-8 read as U+FFFD',
            c.ok('ringbuf-read', {'device': 'r0', 'size': 8}),
            '\ufffd\ufffd\ufffd')
    c.ok('ringbuf-write', {'device': 'r0', 'data': 'caf\u00e9'})
    t.equal('UTF-8 round trip',
            c.ok('ringbuf-read', {'device': 'r0', 'size': 8}), 'caf\u00e9')
    c.ok('ringbuf-write', {'device': 'r0', 'data': 'a\u0000b'})
    t.equal('U+0000 is stored as modified UTF-8 (C0 80), as QEMU does',
            c.ok('ringbuf-read', {'device': 'r0', 'size': 8,
                                  'format': 'base64'}), 'YcCAYg==')
    c.ok('ringbuf-write', {'device': 'r0', 'data': 'YcCAYgBj',
                           'format': 'base64'})
    t.equal('and read back as \\u0000; a NUL byte ends the string',
            c.ok('ringbuf-read', {'device': 'r0', 'size': 8}), 'a\u0000b')
    for args, want in [
        ({'device': 'r0', 'size': 0}, 'size must be greater than zero'),
        ({'device': 'n0', 'size': 1}, 'n0 is not a ringbuf device'),
        ({'device': 'zz', 'size': 1}, "Device 'zz' not found")]:
        t.equal('ringbuf-read refused: %s' % want,
                error_of(c.cmd('ringbuf-read', args)), generic(want))
    t.equal('ringbuf-write of bad base64', error_of(c.cmd(
        'ringbuf-write', {'device': 'r0', 'data': '!!!',
                          'format': 'base64'})),
        generic('Base64 data contains invalid characters'))


def test_change_remove(c, monitor_id):
    ok = {'return': {}}
    t.equal('chardev-send-break', c.cmd('chardev-send-break',
                                        {'id': 'r0'}), ok)
    t.equal('chardev-send-break of nothing', error_of(
        c.cmd('chardev-send-break', {'id': 'zz'})),
        generic("Chardev 'zz' not found"))
    t.equal('chardev-remove of the monitor\'s device', error_of(
        c.cmd('chardev-remove', {'id': monitor_id})),
        generic("Chardev '%s' is busy" % monitor_id))
    t.equal('chardev-remove of nothing', error_of(
        c.cmd('chardev-remove', {'id': 'zz'})),
        generic("Chardev 'zz' not found"))
    t.equal('chardev-remove', c.cmd('chardev-remove', {'id': 'm1'}), ok)
    t.check('it is gone', 'm1' not in devices(c))
    t.equal('chardev-remove of a socket server',
            c.cmd('chardev-remove', {'id': 's0'}), ok)
    if QBLOCK:
        t.check('its socket file is removed',
                not os.path.exists(t.path('s0.sock')))
    t.equal('chardev-change', c.cmd('chardev-change', {
        'id': 'r0', 'backend': backend('null')}), ok)
    t.equal('the device is another', devices(c)['r0'], ('null', False))
    t.equal('chardev-change of the monitor\'s device', error_of(
        c.cmd('chardev-change', {'id': monitor_id,
                                 'backend': backend('null')})),
        generic('Chardev user does not support chardev hotswap'))
    t.equal('chardev-change of nothing', error_of(
        c.cmd('chardev-change', {'id': 'zz',
                                 'backend': backend('null')})),
        generic("Chardev 'zz' does not exist"))
    if QBLOCK:
        # QEMU removes the old device when the new one fails
        r = c.cmd('chardev-change', {'id': 'n0', 'backend': backend(
            'ringbuf', size=3)})
        t.equal('a failed chardev-change', error_of(r), generic(
            'size of ringbuf chardev must be power of two'))
        t.equal('leaves the old device', devices(c).get('n0'),
                ('null', False))


def test_qmp():
    d = t.daemon([])
    c = d.qmp()
    monitor_id = 'qmp0'
    test_add_and_query(c, d.qmp_path)
    test_ringbuf(c)
    test_change_remove(c, monitor_id)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_cmdline():
    out = t.path('mon.txt')
    d = t.daemon(['--chardev', 'file,id=f,path=%s' % out,
                  '--monitor', 'f', '--chardev',
                  'socket,id=t,host=127.0.0.1,port=0,server=on,wait=off',
                  '--monitor', 't', '--chardev', 'null,id=n',
                  '--monitor', 'n', '--chardev', 'memory,id=r,size=4k'])
    c = d.qmp()
    t.equal('chardev-add of a TCP server on port 0', add(
        c, 't0', 'socket', addr={'type': 'inet', 'data': {
            'host': '127.0.0.1', 'port': '0'}}, wait=False), {'return': {}})
    where = devices(c)['t0'][0]
    t.check('query-chardev names the port it got',
            where.startswith('disconnected:tcp:127.0.0.1:') and
            where.endswith(',server=on') and not where.endswith(':0,'
                                                                'server=on'),
            where)
    c.ok('chardev-remove', {'id': 't0'})
    tcp = devices(c)['t'][0]
    port = int(re.search(r'127\.0\.0\.1:(\d+),', tcp).group(1))
    cl = socket.create_connection(('127.0.0.1', port))
    cl.settimeout(qsd.TIMEOUT)
    t.check('a TCP monitor greets', b'"QMP"' in cl.recv(4096))
    t.equal('query-chardev names its client', devices(c)['t'][0],
            'tcp:127.0.0.1:%d,server=on <-> 127.0.0.1:%d' %
            (port, cl.getsockname()[1]))
    cl.close()
    if QBLOCK:
        t.check('and says when it has gone', qsd.wait_for(
            lambda: devices(c)['t'][0].startswith('disconnected:')))
    t.check('a monitor on a file device writes its greeting there',
            qsd.wait_for(lambda: os.path.exists(out) and
                         b'"QMP"' in open(out, 'rb').read()))
    c.ok('ringbuf-write', {'device': 'r', 'data': 'x' * 5000})
    t.equal('--chardev memory,size=4k holds 4 KiB',
            len(c.ok('ringbuf-read', {'device': 'r', 'size': 10000})),
            4096)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    d = t.daemon(['--chardev', 'ringbuf,id=r,size=3'], qmp=False)
    t.equal('--chardev ringbuf,size=3: refused', d.wait(), 1)
    t.check('with QEMU\'s message',
            'size of ringbuf chardev must be power of two' in d.stderr,
            d.stderr)
    if QBLOCK:
        d = t.daemon(['--chardev', 'ringbuf,id=r', '--monitor', 'r'],
                     qmp=False)
        t.equal('a monitor on a ring buffer is refused (QEMU runs one)',
                d.wait(), 1)
        t.check('saying why', "a ringbuf device cannot carry a monitor" in
                d.stderr, d.stderr)


test_qmp()
test_cmdline()
t.finish()
