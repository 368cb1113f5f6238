"""The dirty bitmap QMP commands of qblock-storage-daemon:
block-dirty-bitmap-add/remove/clear/enable/disable/merge and
x-debug-block-dirty-bitmap-sha256 with QEMU's errors, bitmaps in
query-named-block-nodes, writes through an NBD export marking them (the
same SHA-256 as the real qemu-storage-daemon computes for the same
writes, when it is installed), an exported bitmap busy and read with
nbdinfo --map, a persistent bitmap kept in its image across a
restart of the daemon, and across a SIGKILL after a flush (the flush's
checkpoint), which a write to a new granule undoes."""
import json
import os
import qsd
from qsd import error_of, generic

t = qsd.Tests('dirty-bitmap')


def start(daemon_bin, img):
    t.daemon_bin = daemon_bin
    d = t.daemon(['--blockdev', 'driver=file,filename=%s,node-name=f0' % img,
                  '--blockdev', 'driver=qcow2,file=f0,node-name=fmt0'])
    t.daemon_bin = os.path.join(t.build, 'qblock-storage-daemon')
    return d


def bitmaps_of(c, node):
    for n in c.ok('query-named-block-nodes', {'flat': True}):
        if n['node-name'] == node:
            return n.get('dirty-bitmaps')
    return None


def test_errors(c):
    for cmd, args, desc in [
        ('block-dirty-bitmap-add', {'node': 'fmt0', 'name': 'b0'},
         'Bitmap already exists: b0'),
        ('block-dirty-bitmap-add', {'node': 'nosuch', 'name': 'x'},
         "Cannot find device='nosuch' nor node-name='nosuch'"),
        ('block-dirty-bitmap-add', {'node': 'fmt0', 'name': ''},
         'Bitmap name cannot be empty'),
        ('block-dirty-bitmap-add', {'node': 'fmt0', 'name': 'g',
                                    'granularity': 100},
         'Granularity must be power of 2 and at least 512'),
        ('block-dirty-bitmap-add', {'node': 'fmt0', 'name': 'g',
                                    'granularity': 0},
         'Granularity must be power of 2 and at least 512'),
        ('block-dirty-bitmap-add', {'node': 'f0', 'name': 'p',
                                    'persistent': True},
         "Can't store persistent bitmaps to f0: Operation not supported"),
        ('block-dirty-bitmap-remove', {'node': 'fmt0', 'name': 'nope'},
         "Dirty bitmap 'nope' not found"),
        ('block-dirty-bitmap-clear', {'node': 'fmt0', 'name': 'nope'},
         "Dirty bitmap 'nope' not found"),
        ('block-dirty-bitmap-enable', {'node': 'fmt0', 'name': 'nope'},
         "Dirty bitmap 'nope' not found"),
        ('block-dirty-bitmap-merge', {'node': 'fmt0', 'target': 'b0',
                                      'bitmaps': ['nope']},
         "Dirty bitmap 'nope' not found"),
        ('block-dirty-bitmap-merge', {'node': 'fmt0', 'target': 'nope',
                                      'bitmaps': ['b0']},
         "Dirty bitmap 'nope' not found"),
        ('block-dirty-bitmap-merge', {'node': 'fmt0', 'target': 'b0',
                                      'bitmaps': [{'node': 'f0',
                                                   'name': 'x'}]},
         "Dirty bitmap 'x' not found"),
        ('block-dirty-bitmap-merge', {'node': 'fmt0', 'target': 'b0',
                                      'bitmaps': [5]},
         "Invalid parameter type for 'bitmaps', expected: "
         "BlockDirtyBitmapOrStr"),
        ('x-debug-block-dirty-bitmap-sha256', {'node': 'fmt0',
                                               'name': 'nope'},
         "Dirty bitmap 'nope' not found"),
    ]:
        t.equal('%s %s' % (cmd, json.dumps(args)[:50]),
                error_of(c.cmd(cmd, args)), generic(desc))


# The scenario run against qblock's daemon and, for the SHA-256 values,
# QEMU's: bitmaps, writes through an NBD export, merges.
def scenario(d, sock):
    c = d.qmp()
    c.ok('block-dirty-bitmap-add', {'node': 'fmt0', 'name': 'b0'})
    c.ok('block-dirty-bitmap-add', {'node': 'fmt0', 'name': 'fine',
                                    'granularity': 4096})
    c.ok('block-dirty-bitmap-add', {'node': 'fmt0', 'name': 'off',
                                    'disabled': True})
    c.ok('block-dirty-bitmap-add', {'node': 'fmt0', 'name': 'keep',
                                    'persistent': True})
    c.ok('nbd-server-start', {'addr': {'type': 'unix',
                                       'data': {'path': sock}}})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e0', 'node-name': 'fmt0',
                              'name': 'disk', 'writable': True})
    rc, out = qsd.qemu_io(t, qsd.nbd_uri(sock, 'disk'), 'write 1M 64k',
                          'write -z 5M 4k', 'discard 9M 1M',
                          'write 20M 512', fmt='raw')
    sums = {}
    for name in ('b0', 'fine', 'off', 'keep'):
        sums[name] = c.ok('x-debug-block-dirty-bitmap-sha256',
                          {'node': 'fmt0', 'name': name})['sha256']
    c.ok('block-dirty-bitmap-merge', {'node': 'fmt0', 'target': 'off',
                                      'bitmaps': ['fine',
                                                  {'node': 'fmt0',
                                                   'name': 'b0'}]})
    sums['merged'] = c.ok('x-debug-block-dirty-bitmap-sha256',
                          {'node': 'fmt0', 'name': 'off'})['sha256']
    c.ok('block-dirty-bitmap-clear', {'node': 'fmt0', 'name': 'fine'})
    sums['cleared'] = c.ok('x-debug-block-dirty-bitmap-sha256',
                           {'node': 'fmt0', 'name': 'fine'})['sha256']
    return c, rc, sums


def test_scenario():
    img = t.create_image('a.qcow2', '64M')
    d = start(os.path.join(t.build, 'qblock-storage-daemon'), img)
    c, rc, sums = scenario(d, t.path('nbd.sock'))
    t.check('qemu-io wrote through the export', rc == 0)
    test_errors(c)
    infos = bitmaps_of(c, 'fmt0')
    t.equal('query-named-block-nodes lists them, newest first',
            [(b.get('name'), b['recording'], b['persistent'], b['busy'],
              b['granularity']) for b in infos],
            [('keep', True, True, False, 65536),
             ('off', False, False, False, 65536),
             ('fine', True, False, False, 4096),
             ('b0', True, False, False, 65536)])
    counts = {b['name']: b['count'] for b in infos}
    # 64k at 1M, 4k at 5M, 512 at 20M: whole 64k granules; the discard
    # did nothing (the node has no discard=unmap), so it marks nothing
    t.equal('count: the granules the writes and zero writes touched',
            counts['b0'], 3 * 65536)
    t.equal('count of the 4k bitmap (cleared)', counts['fine'], 0)
    t.equal('count of the merged disabled bitmap', counts['off'],
            3 * 65536)
    if qsd.have('qemu-storage-daemon'):
        qimg = t.path('q.qcow2')
        t.run(['qemu-img', 'create', '-q', '-f', 'qcow2', qimg, '64M'])
        q = start('qemu-storage-daemon', qimg)
        qc, qrc, qsums = scenario(q, t.path('qnbd.sock'))
        t.equal('the same SHA-256 as qemu-storage-daemon for every bitmap',
                sums, qsums)
        qc.close()
        q.stop()
    else:
        t.skip('SHA-256 against QEMU', 'qemu-storage-daemon is missing')

    # a read-only export of a writable node refuses an enabled bitmap
    t.equal('an enabled bitmap in a read-only export',
            error_of(c.cmd('block-export-add',
                           {'type': 'nbd', 'id': 'e1', 'node-name': 'fmt0',
                            'name': 'bm', 'bitmaps': ['keep']})),
            generic("Enabled bitmap 'keep' incompatible with readonly "
                    "export"))
    # an exported bitmap is busy; the export reads it
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e1', 'node-name': 'fmt0',
                              'name': 'bm', 'bitmaps': ['keep'],
                              'writable': True})
    t.equal('an exported bitmap is busy',
            error_of(c.cmd('block-dirty-bitmap-remove',
                           {'node': 'fmt0', 'name': 'keep'})),
            generic("Bitmap 'keep' is currently in use by another operation"
                    " and cannot be used"))
    t.equal('query shows it busy',
            [b['busy'] for b in bitmaps_of(c, 'fmt0')
             if b['name'] == 'keep'], [True])
    if qsd.have('nbdinfo'):
        rc, out, err = t.run(['nbdinfo', '--map=qemu:dirty-bitmap:keep',
                              qsd.nbd_uri(t.path('nbd.sock'), 'bm')])
        extents = [line.split()[:3] for line in out.splitlines()]
        t.equal('nbdinfo --map of the exported bitmap',
                [e for e in extents if e[2] == '1'],
                [['1048576', '65536', '1'], ['5242880', '65536', '1'],
                 ['20971520', '65536', '1']])
    else:
        t.skip('nbdinfo --map', 'nbdinfo is missing (libnbd-bin)')
    c.ok('block-export-del', {'id': 'e1'})
    qsd.wait_for(lambda: not [b for b in bitmaps_of(c, 'fmt0')
                              if b['busy']])
    t.equal('not busy once the export is gone',
            [b['busy'] for b in bitmaps_of(c, 'fmt0')], [False] * 4)
    c.ok('block-dirty-bitmap-remove', {'node': 'fmt0', 'name': 'b0'})
    c.ok('block-export-del', {'id': 'e0'})
    c.cmd('quit')
    t.equal('the daemon exits 0', d.wait(), 0)

    # the persistent bitmap is in the image, with its bits
    rc, out, err = t.run([t.img_bin, 'info', '--output=json', img])
    bms = json.loads(out)['format-specific']['data'].get('bitmaps')
    t.equal('the persistent bitmap was stored on exit',
            bms, [{'flags': ['auto'], 'name': 'keep',
                   'granularity': 65536}])
    d = start(os.path.join(t.build, 'qblock-storage-daemon'), img)
    c = d.qmp()
    t.equal('and loaded by the next daemon, with the same bits',
            c.ok('x-debug-block-dirty-bitmap-sha256',
                 {'node': 'fmt0', 'name': 'keep'})['sha256'], sums['keep'])
    rc, out, err = t.run([t.img_bin, 'info', '-U', '--output=json', img])
    bms = json.loads(out)['format-specific']['data'].get('bitmaps')
    t.equal('in use on disk while the daemon has it open, until a flush',
            bms and bms[0]['flags'], ['in-use', 'auto'])
    c.ok('block-dirty-bitmap-remove', {'node': 'fmt0', 'name': 'keep'})
    rc, out, err = t.run([t.img_bin, 'info', '-U', '--output=json', img])
    t.check('removing it takes it off the image at once',
            'bitmaps' not in json.loads(out)['format-specific']['data'], out)
    c.cmd('quit')
    d.wait()



def disk_flags(img):
    rc, out, err = t.run([t.img_bin, 'info', '-U', '--output=json', img])
    bms = json.loads(out)['format-specific']['data'].get('bitmaps')
    return bms and bms[0]['flags']


def test_sigkill_after_flush():
    """The daemon killed after a flush: the flush stored the bitmap
    (a checkpoint), so the next daemon loads it consistent and an
    incremental backup can read it; killed after a write to a new
    granule, it is in use (inconsistent), never silently stale."""
    img = t.create_image('k.qcow2', '64M')
    sock = t.path('k.sock')
    t.run([t.img_bin, 'bitmap', '--add', img, 'keep'])
    d = start(os.path.join(t.build, 'qblock-storage-daemon'), img)
    c = d.qmp()
    c.ok('nbd-server-start', {'addr': {'type': 'unix',
                                       'data': {'path': sock}}})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e0', 'node-name': 'fmt0',
                              'name': 'disk', 'writable': True})
    rc, out = qsd.qemu_io(t, qsd.nbd_uri(sock, 'disk'), 'write 1M 64k',
                          'write 5M 4k', 'flush')
    t.check('qemu-io wrote and flushed through the export', rc == 0, out)
    t.equal('after the flush the bitmap is clean on disk', disk_flags(img),
            ['auto'])
    # the client killed, so that no flush follows the writes
    rc, out = qsd.qemu_io(t, qsd.nbd_uri(sock, 'disk'), 'write 1M 4k',
                          'write 5M 64k', 'sigraise 9')
    t.equal('a rewrite of dirty granules leaves it clean', disk_flags(img),
            ['auto'])
    want = c.ok('x-debug-block-dirty-bitmap-sha256',
                {'node': 'fmt0', 'name': 'keep'})['sha256']
    d.kill()
    rc, out, err = t.run(['qemu-img', 'check', img])
    t.check('qemu-img check after SIGKILL', rc == 0, out + err)
    d = start(os.path.join(t.build, 'qblock-storage-daemon'), img)
    c = d.qmp()
    keep = [b for b in bitmaps_of(c, 'fmt0') if b['name'] == 'keep']
    t.equal('the next daemon loads it consistent, recording',
            [(b.get('inconsistent', False), b['recording'], b['count'])
             for b in keep], [(False, True, 2 * 65536)])
    t.equal('with the bits it had when killed',
            c.ok('x-debug-block-dirty-bitmap-sha256',
                 {'node': 'fmt0', 'name': 'keep'})['sha256'], want)
    c.ok('nbd-server-start', {'addr': {'type': 'unix',
                                       'data': {'path': sock}}})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e0', 'node-name': 'fmt0',
                              'name': 'disk', 'writable': True,
                              'bitmaps': ['keep']})
    if qsd.have('nbdinfo'):
        rc, out, err = t.run(['nbdinfo', '--map=qemu:dirty-bitmap:keep',
                              qsd.nbd_uri(sock, 'disk')])
        extents = [line.split()[:3] for line in out.splitlines()]
        t.equal('an incremental backup reads the changed extents',
                [e for e in extents if e[2] == '1'],
                [['1048576', '65536', '1'], ['5242880', '65536', '1']])
    else:
        t.skip('nbdinfo --map after the crash', 'nbdinfo is missing '
               '(libnbd-bin)')
    c.ok('block-export-del', {'id': 'e0'})
    qsd.wait_for(lambda: not [b for b in bitmaps_of(c, 'fmt0')
                              if b['busy']])
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e1', 'node-name': 'fmt0',
                              'name': 'disk', 'writable': True})
    rc, out = qsd.qemu_io(t, qsd.nbd_uri(sock, 'disk'), 'write 9M 4k',
                          'sigraise 9')
    t.equal('a write to a new granule marks it in use first',
            disk_flags(img), ['in-use', 'auto'])
    d.kill()
    d = start(os.path.join(t.build, 'qblock-storage-daemon'), img)
    c = d.qmp()
    t.equal('killed then, the next daemon finds it inconsistent',
            [b.get('inconsistent', False) for b in bitmaps_of(c, 'fmt0')],
            [True])
    c.cmd('quit')
    d.wait()


test_scenario()
test_sigkill_after_flush()
t.finish()
