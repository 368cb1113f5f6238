#!/usr/bin/env python3
"""iothreads: --object iothread and object-add/object-del with QEMU's
properties and messages, query-iothreads (a real thread of the daemon,
named as QEMU names it), exports with iothread= (NBD and vhost-user-blk):
data written by concurrent clients of two exports on two iothreads read
back whole, QMP commands on their nodes while the I/O runs, a block job
on an iothread node, the refusals (an unknown iothread, a node another
user keeps in the main loop, a mirror to a target another export keeps
in the main loop, object-del of an iothread in use), export removal
and daemon shutdown with clients active, NBD multi-conn, qom-set of the
poll properties, the main-loop object (one at most, its poll properties
set and changed), and vhost-user-blk data verified byte for byte through
a busy-polling iothread and a busy-polling main loop while polling is
switched off and on; x-blockdev-set-iothread with QEMU's checks and
messages, moving a node whose NBD export then serves I/O from the
iothread and back."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
import nbd_load                                         # noqa: E402
from qsd import error_of, generic                       # noqa: E402

t = qsd.Tests('test-iothreads')
MiB = 1 << 20


def thread_name(pid, tid):
    try:
        with open('/proc/%d/task/%d/comm' % (pid, tid)) as f:
            return f.read().strip()
    except OSError:
        return None


def test_objects():
    d = t.daemon(['--object', 'iothread,id=io0'])
    c = d.qmp()
    r = c.ok('query-iothreads')
    t.equal('one iothread from the command line, QEMU\'s default poll '
            'values', [{k: v for k, v in i.items() if k != 'thread-id'}
                       for i in r],
            [{'id': 'io0', 'poll-max-ns': 32768, 'poll-grow': 0,
              'poll-shrink': 0, 'aio-max-batch': 0}])
    t.equal('thread-id is a thread of the daemon named "IO io0"',
            thread_name(d.proc.pid, r[0]['thread-id']), 'IO io0')
    t.equal('object-add iothread with poll-max-ns',
            c.cmd('object-add', {'qom-type': 'iothread', 'id': 'io1',
                                 'poll-max-ns': 1000}), {'return': {}})
    t.equal('... listed in creation order with its value',
            [(i['id'], i['poll-max-ns']) for i in c.ok('query-iothreads')],
            [('io0', 32768), ('io1', 1000)])
    t.equal('a negative poll-grow is refused with QEMU\'s message',
            error_of(c.cmd('object-add', {'qom-type': 'iothread',
                                          'id': 'io2', 'poll-grow': -1})),
            generic('poll-grow value must be in range '
                    '[0, 9223372036854775807]'))
    t.equal('a duplicate id is refused',
            error_of(c.cmd('object-add', {'qom-type': 'iothread',
                                          'id': 'io0'}))[0], 'GenericError')
    tid = c.ok('query-iothreads')[1]['thread-id']
    t.equal('object-del of an unused iothread',
            c.cmd('object-del', {'id': 'io1'}), {'return': {}})
    t.check('... its thread is gone',
            qsd.wait_for(lambda: thread_name(d.proc.pid, tid) is None))
    t.equal('... and it is no longer listed',
            [i['id'] for i in c.ok('query-iothreads')], ['io0'])
    t.equal('qom-set changes poll-max-ns at once',
            c.cmd('qom-set', {'path': '/objects/io0',
                              'property': 'poll-max-ns', 'value': 0}),
            {'return': {}})
    t.equal('qom-set by the id alone, as QEMU resolves a partial path',
            c.cmd('qom-set', {'path': 'io0', 'property': 'poll-grow',
                              'value': 4}), {'return': {}})
    t.equal('... query-iothreads shows both',
            [(i['poll-max-ns'], i['poll-grow'])
             for i in c.ok('query-iothreads')], [(0, 4)])
    t.equal('qom-set of an unknown object: QEMU\'s class and message',
            error_of(c.cmd('qom-set', {'path': '/objects/nope',
                                       'property': 'poll-max-ns',
                                       'value': 1})),
            ('DeviceNotFound', "Device '/objects/nope' not found"))
    t.equal('qom-set of an unknown property: QEMU\'s message',
            error_of(c.cmd('qom-set', {'path': 'io0', 'property': 'foo',
                                       'value': 1})),
            generic("Property 'iothread.foo' not found"))
    t.equal('qom-set of a string: QEMU\'s message',
            error_of(c.cmd('qom-set', {'path': 'io0',
                                       'property': 'poll-max-ns',
                                       'value': 'x'})),
            generic("Invalid parameter type for 'poll-max-ns', expected: "
                    "integer"))
    t.equal('qom-set of a negative value: QEMU\'s message',
            error_of(c.cmd('qom-set', {'path': 'io0',
                                       'property': 'poll-shrink',
                                       'value': -1})),
            generic('poll-shrink value must be in range '
                    '[0, 9223372036854775807]'))
    t.equal('... and changes nothing',
            [(i['poll-max-ns'], i['poll-grow'], i['poll-shrink'])
             for i in c.ok('query-iothreads')], [(0, 4, 0)])
    c.close()
    t.equal('the daemon stops its iothreads and exits 0', d.stop(), 0)

    rc, out, err = t.run([t.daemon_bin, '--object',
                          'iothread,id=x,poll-max-ns=-5'])
    t.check('--object iothread with a bad value: exit 1 with the message',
            rc == 1 and 'poll-max-ns value must be in range' in err, err)


def test_main_loop_object():
    d = t.daemon(['--object', 'main-loop,id=ml,poll-max-ns=0'])
    c = d.qmp()
    t.equal('a second main-loop object is refused with QEMU\'s message',
            error_of(c.cmd('object-add', {'qom-type': 'main-loop',
                                          'id': 'ml2'})),
            generic('only one main-loop instance allowed'))
    t.equal('qom-set of the main loop\'s poll-max-ns',
            c.cmd('qom-set', {'path': '/objects/ml',
                              'property': 'poll-max-ns', 'value': 50000}),
            {'return': {}})
    t.equal('qom-set of an unknown property: QEMU\'s message',
            error_of(c.cmd('qom-set', {'path': 'ml', 'property': 'foo',
                                       'value': 1})),
            generic("Property 'main-loop.foo' not found"))
    t.equal('object-del of the main-loop object',
            c.cmd('object-del', {'id': 'ml'}), {'return': {}})
    t.equal('... after which another may be added',
            c.cmd('object-add', {'qom-type': 'main-loop', 'id': 'ml2',
                                 'poll-shrink': 2}), {'return': {}})
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    rc, out, err = t.run([t.daemon_bin, '--object',
                          'main-loop,id=x,poll-grow=-1'])
    t.check('--object main-loop with a bad value: exit 1 with the message',
            rc == 1 and 'poll-grow value must be in range' in err, err)


def start_two(img_a, img_b, extra=()):
    sock = t.path('nbd.sock')
    args = ['--object', 'iothread,id=io0', '--object', 'iothread,id=io1',
            '--blockdev', 'driver=file,node-name=fa,filename=%s,'
            'aio=io_uring,cache.direct=on' % img_a,
            '--blockdev', 'driver=qcow2,node-name=a,file=fa',
            '--blockdev', 'driver=file,node-name=fb,filename=%s' % img_b,
            '--blockdev', 'driver=qcow2,node-name=b,file=fb',
            '--nbd-server', 'addr.type=unix,addr.path=%s' % sock,
            '--export', 'nbd,id=ea,node-name=a,writable=on,iothread=io0',
            '--export', 'nbd,id=eb,node-name=b,writable=on,iothread=io1']
    return t.daemon(args + list(extra),
                    stderr_path=t.path('daemon-two.err')), sock


def test_nbd_concurrent():
    img_a = t.create_image('a.qcow2', '64M')
    img_b = t.create_image('b.qcow2', '64M')
    d, sock = start_two(img_a, img_b)
    c = d.qmp()
    uri_a, uri_b = qsd.nbd_uri(sock, 'a'), qsd.nbd_uri(sock, 'b')
    writers = [nbd_load.Writer(uri_a, n=256), nbd_load.Writer(uri_a, n=128,
                                                              first=256),
               nbd_load.Writer(uri_b, n=256)]
    queries = 0
    resized = False
    while any(w.running() for w in writers):
        nodes = c.ok('query-named-block-nodes')
        c.ok('query-block-exports')
        if not resized:
            resized = c.cmd('block_resize', {'node-name': 'b',
                                             'size': 128 * MiB}) == \
                {'return': {}}
        queries += 1
    t.check('two clients on export a (iothread io0), one on b (io1): '
            'every write succeeded', all(w.finish() for w in writers),
            [w.out[-300:] for w in writers])
    t.check('query commands answered while the I/O ran (%d rounds)'
            % queries, queries > 0 and len(nodes) == 4, nodes)
    t.check('block_resize of a node in an iothread while it is written',
            resized)
    ok, out = nbd_load.verify(t, uri_a, n=384)
    t.check('export a reads every block back', ok, out)
    ok, out = nbd_load.verify(t, uri_b, n=256)
    t.check('export b reads every block back', ok, out)
    rc, out = qsd.qemu_io(t, uri_b, 'read -P 0 %d 65536' % (127 * MiB))
    t.check('... and is 128 MiB long now', rc == 0 and
            'read 65536/65536' in out, out)
    r = c.cmd('blockdev-snapshot-internal-sync',
              {'device': 'a', 'name': 'snap0'})
    t.equal('an internal snapshot of a node in an iothread', r,
            {'return': {}})

    # refusals
    t.equal('an unknown iothread: QEMU\'s message',
            error_of(c.cmd('block-export-add', {
                'type': 'nbd', 'id': 'x', 'node-name': 'fa',
                'iothread': 'nope'})), generic('iothread "nope" not found'))
    c.ok('blockdev-add', {'driver': 'null-co', 'node-name': 'n0'})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'en', 'node-name': 'n0'})
    t.equal('fixed-iothread=on for a node another export keeps in the '
            'main loop: QEMU\'s message',
            error_of(c.cmd('block-export-add', {
                'type': 'nbd', 'id': 'en2', 'node-name': 'n0', 'name': 'n2',
                'iothread': 'io0', 'fixed-iothread': True})),
            generic('Cannot change iothread of active block backend'))
    t.equal('without fixed-iothread the export serves from the main loop, '
            'as QEMU', c.cmd('block-export-add', {
                'type': 'nbd', 'id': 'en2', 'node-name': 'n0', 'name': 'n2',
                'iothread': 'io0'}), {'return': {}})
    t.equal('a block job on a node in an iothread runs there',
            c.cmd('block-stream', {'device': 'a', 'job-id': 'j0'}),
            {'return': {}})
    t.check('... and ends', qsd.wait_job_status(c, 'j0', 'null'))
    r = c.cmd('blockdev-mirror', {'device': 'a', 'target': 'n0',
                                  'sync': 'full', 'job-id': 'j0'})
    t.equal('a mirror to a target an export keeps in the main loop is '
            'refused: QEMU\'s message', error_of(r),
            generic('Cannot change iothread of active block backend'))
    t.equal('the jobs left no filter node in the graph',
            [n['drv'] for n in c.ok('query-named-block-nodes')
             if n['drv'] in ('copy-on-read', 'mirror_top')], [])
    t.equal('object-del of an iothread an export uses is refused',
            error_of(c.cmd('object-del', {'id': 'io0'})),
            generic("object 'io0' is in use, can not be deleted"))

    # removal with a client active
    w = nbd_load.Writer(uri_b, n=2000)
    time.sleep(0.5)
    t.check('a client is writing to export b', w.running())
    t.equal('block-export-del mode=hard while a client writes',
            c.cmd('block-export-del', {'id': 'eb', 'mode': 'hard'}),
            {'return': {}})
    t.check('BLOCK_EXPORT_DELETED', c.event('BLOCK_EXPORT_DELETED') and True)
    w.proc.communicate(timeout=qsd.TIMEOUT * 4)
    t.equal('the iothread of the removed export can go now',
            c.cmd('object-del', {'id': 'io1'}), {'return': {}})
    t.equal('the node is back in the main loop: a block job may use it',
            c.cmd('block-stream', {'device': 'b', 'job-id': 'j1'})
            .get('return'), {})
    c.event('JOB_STATUS_CHANGE')

    # shutdown with a client active on the export in io0
    w = nbd_load.Writer(uri_a, n=2000)
    t.equal('SIGTERM while a client writes: exit 0', d.stop(), 0)
    w.proc.communicate(timeout=qsd.TIMEOUT * 4)
    c.close()
    for img in (img_a, img_b):
        rc, out, err = t.run(['qemu-img', 'check', img])
        t.check('%s checks clean with qemu-img' % os.path.basename(img),
                rc == 0, out + err)


def test_multi_conn():
    if not qsd.have('nbdinfo'):
        t.skip('multi-conn', 'nbdinfo (libnbd-bin) is not installed')
        return
    img = t.create_image('m.qcow2', '1M')
    sock = t.path('m.sock')
    d = t.daemon(['--object', 'iothread,id=io0',
                  '--blockdev', 'driver=file,node-name=f,filename=%s' % img,
                  '--blockdev', 'driver=qcow2,node-name=m,file=f',
                  '--nbd-server', 'addr.type=unix,addr.path=%s' % sock,
                  '--export', 'nbd,id=e1,node-name=m,writable=on,'
                  'iothread=io0',
                  '--export', 'nbd,id=e2,node-name=m,name=off,'
                  'multi-conn=off'])
    d.qmp().close()     # the greeting comes once start-up is done
    for name, want in (('m', 'can_multi_conn: true'),
                       ('off', 'can_multi_conn: false')):
        rc, out, err = t.run(['nbdinfo', qsd.nbd_uri(sock, name)])
        t.check('nbdinfo on %s: %s' % (name, want), want in out, out + err)
    t.equal('the daemon exits 0', d.stop(), 0)


def test_vhost_user_blk():
    bench = os.path.join(t.build, 'tests', 'perf', 'vhost-user-bench')
    if not os.path.exists(bench):
        t.skip('vhost-user-blk on an iothread', '%s is not built' % bench)
        return
    img = t.create_image('v.qcow2', '64M')
    sock = t.path('vub.sock')
    d = t.daemon(['--object', 'iothread,id=io0',
                  '--blockdev', 'driver=file,node-name=f,filename=%s' % img,
                  '--blockdev', 'driver=qcow2,node-name=v,file=f',
                  '--export', 'vhost-user-blk,id=vu,node-name=v,'
                  'writable=on,iothread=io0,addr.type=unix,addr.path=%s'
                  % sock])
    c = d.qmp()
    p = subprocess.Popen([bench, sock, 'randwrite', '4096', '16', '2'],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    queries = 0
    while p.poll() is None:
        c.ok('query-named-block-nodes')
        queries += 1
    out = p.communicate()[0]
    t.check('a vhost-user-blk front-end writes through an export on an '
            'iothread while QMP queries run (%d)' % queries,
            p.returncode == 0 and 'IOPS' in out, out)
    rc, out, err = t.run([bench, sock, 'randread', '4096', '16', '1'])
    t.check('... and reads', rc == 0 and 'IOPS' in out, out + err)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    rc, out, err = t.run(['qemu-img', 'check', img])
    t.check('the image checks clean with qemu-img', rc == 0, out + err)


def test_vhost_user_blk_polling(loop):
    """Data through a busy-polling event loop, an iothread or the main
    loop (the rings polled, their kicks off meanwhile; io_uring
    completions polled), byte for byte, at depth 1 and 32, while qom-set
    turns polling off and on under the I/O."""
    bench = os.path.join(t.build, 'tests', 'perf', 'vhost-user-bench')
    if not os.path.exists(bench):
        t.skip('vhost-user-blk data through a polling %s' % loop,
               '%s is not built' % bench)
        return
    img = t.create_image('p.qcow2', '64M')
    sock = t.path('vup.sock')
    if loop == 'iothread':
        obj, export_opt = 'iothread,id=io0', ',iothread=io0'
    else:
        obj, export_opt = 'main-loop,id=io0', ''
    d = t.daemon(['--object', obj + ',poll-max-ns=200000',
                  '--blockdev', 'driver=file,node-name=f,filename=%s,'
                  'cache.direct=on,aio=io_uring' % img,
                  '--blockdev', 'driver=qcow2,node-name=v,file=f',
                  '--export', 'vhost-user-blk,id=vu,node-name=v,'
                  'writable=on,addr.type=unix,addr.path=%s%s'
                  % (sock, export_opt)])
    c = d.qmp()
    for depth in ('1', '32'):
        rc, out, err = t.run([bench, sock, 'verify', '4096', depth, '1'])
        t.check('depth %s: 4096 blocks written and read back byte for '
                'byte through a polling %s' % (depth, loop),
                rc == 0 and 'VERIFIED 4096' in out, out + err)
    p = subprocess.Popen([bench, sock, 'verify', '4096', '8', '1'],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    flips = 0
    while p.poll() is None:
        c.ok('qom-set', {'path': 'io0', 'property': 'poll-max-ns',
                         'value': 0 if flips % 2 == 0 else 200000})
        flips += 1
    out = p.communicate()[0]
    t.check('... and while qom-set turns polling off and on under the '
            'I/O (%d times)' % flips,
            p.returncode == 0 and 'VERIFIED 4096' in out, out)
    rc, out, err = t.run([bench, sock, 'randwrite', '4096', '32', '1'])
    t.check('... a front-end that kicks only when asked gets served',
            rc == 0 and 'IOPS' in out, out + err)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    rc, out, err = t.run(['qemu-img', 'check', img])
    t.check('the image checks clean with qemu-img', rc == 0, out + err)


def test_set_iothread():
    a = t.create_image('s.qcow2', '1M')
    b = t.create_image('u.qcow2', '1M')
    d, c = t.start([{'driver': 'qcow2', 'node-name': 'q',
                     'file': {'driver': 'file', 'filename': a}},
                    {'driver': 'qcow2', 'node-name': 'r',
                     'file': {'driver': 'file', 'node-name': 'rf',
                              'filename': b}}], export='q')
    c.ok('object-add', {'qom-type': 'iothread', 'id': 'io0'})

    def move(**args):
        r = c.cmd('x-blockdev-set-iothread', args)
        return r.get('return', error_of(r))

    t.equal('an exported node needs force', move(**{'node-name': 'q',
                                                    'iothread': 'io0'}),
            generic('Node q is associated with a BlockBackend and could be '
                    'in use (use force=true to override this check)'))
    t.equal('an unknown node', move(**{'node-name': 'nope',
                                       'iothread': 'io0'}),
            generic("Failed to find node with node-name='nope'"))
    t.equal('an unknown iothread', move(**{'node-name': 'r',
                                           'iothread': 'nope'}),
            generic('Cannot find iothread nope'))
    t.equal('a number for iothread', move(**{'node-name': 'r',
                                             'iothread': 5}),
            generic("Invalid parameter type for 'iothread', expected: "
                    "StrOrNull"))
    t.equal('no iothread', move(**{'node-name': 'r'}),
            generic("Parameter 'iothread' is missing"))
    t.equal('a node below another moves, with it',
            move(**{'node-name': 'rf', 'iothread': 'io0'}), {})
    t.equal('and back to the main loop with null',
            move(**{'node-name': 'r', 'iothread': None}), {})
    # QEMU's NBD export follows; qblock's exports stay where they began
    t.equal('with force, an export refuses to follow',
            move(**{'node-name': 'q', 'iothread': 'io0', 'force': True}),
            generic('Cannot change iothread of active block backend'))
    t.equal('a node moved into an iothread',
            move(**{'node-name': 'r', 'iothread': 'io0'}), {})
    t.equal('holds the iothread: object-del is refused',
            error_of(c.cmd('object-del', {'id': 'io0'})),
            generic("object 'io0' is in use, can not be deleted"))
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e1', 'node-name': 'r',
                              'name': 'r', 'writable': True})
    uri = qsd.nbd_uri(t.path('nbd.sock'), 'r')
    rc, out = qsd.qemu_io(t, uri, 'write -P 7 0 64k', 'read -P 7 0 64k')
    t.equal('an export added then serves it from the iothread', rc, 0)
    c.ok('block-export-del', {'id': 'e1'})
    c.event('BLOCK_EXPORT_DELETED', timeout=10)
    t.equal('it moves back', move(**{'node-name': 'r', 'iothread': None}),
            {})
    t.equal('then the iothread can go',
            c.cmd('object-del', {'id': 'io0'}), {'return': {}})
    c.ok('object-add', {'qom-type': 'iothread', 'id': 'io1'})
    t.equal('a node left in an iothread',
            move(**{'node-name': 'r', 'iothread': 'io1'}), {})
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


test_objects()
test_main_loop_object()
test_set_iothread()
test_nbd_concurrent()
test_multi_conn()
test_vhost_user_blk()
test_vhost_user_blk_polling('iothread')
test_vhost_user_blk_polling('main loop')
t.finish()
