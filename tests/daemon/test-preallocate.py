#!/usr/bin/env python3
"""The preallocate filter in the daemon, as QEMU's: a qcow2 image over
preallocate over its file grows its file by prealloc-size at the first
write past the end (rounded up to prealloc-align), while the node's own
length stays the end of the data; the preallocation is given back when
the node is reopened read-only, and when it is deleted; a blockdev-reopen
takes new sizes; the image checks clean after each step."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic, nbd_uri, qemu_io             # noqa: E402

t = qsd.Tests('test-preallocate')
MiB = 1 << 20


def nodes(filename, **prealloc):
    filt = {'driver': 'preallocate', 'node-name': 'filter',
            'file': {'driver': 'file', 'node-name': 'file',
                     'filename': filename}}
    filt.update(prealloc)
    return {'driver': 'qcow2', 'node-name': 'disk', 'file': filt}


def image_checks_clean(name):
    rc, out, err = t.run([t.img_bin, 'check', t.path(name)])
    return rc == 0 and 'No errors' in out, out + err


def test_grow_and_give_back():
    t.create_image('disk.qcow2', size='10M')
    path = t.path('disk.qcow2')
    small = os.path.getsize(path)
    d, c = t.start([nodes(path)], export='disk')
    uri = nbd_uri(t.path('nbd.sock'), 'disk')
    rc, out = qemu_io(t, uri, 'write -P 0x5a 0 1M', 'flush')
    t.equal('a write through the filter', rc, 0)
    size = os.path.getsize(path)
    t.check('grows the file by about prealloc-size (128 MiB)',
            128 * MiB < size <= 130 * MiB and size % MiB == 0, size)
    info = {n['node-name']: n for n in
            c.cmd('query-named-block-nodes')['return']}
    t.check('the filter reports the end of the data, not of the file',
            info['filter']['image']['virtual-size'] < 2 * MiB,
            info['filter']['image'])
    rc, out = qemu_io(t, uri, 'write -P 0x5b 2M 1M')
    t.equal('a write inside the preallocation leaves the file as it is',
            os.path.getsize(path), size)
    # a writable export would refuse a read-only node; qemu-io has gone,
    # but the server may not have seen its connection end yet (a safe
    # block-export-del refuses while it is there)
    t.check('the export goes once the client has', qsd.wait_for(
        lambda: c.cmd('block-export-del', {'id': 'e0'}) == {'return': {}},
        timeout=10))
    c.event('BLOCK_EXPORT_DELETED', timeout=10)
    r = c.cmd('blockdev-reopen', {'options': [
        dict(nodes(path), **{'read-only': True})]})
    t.equal('reopen read-only', r, {'return': {}})
    t.check('gives the preallocation back',
            os.path.getsize(path) < 5 * MiB, os.path.getsize(path))
    r = c.cmd('blockdev-reopen', {'options': [
        nodes(path, **{'prealloc-size': 20 * MiB,
                       'prealloc-align': 5 * MiB})]})
    t.equal('reopen read-write with new sizes', r, {'return': {}})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e0', 'node-name': 'disk',
                              'name': 'disk', 'writable': True})
    rc, out = qemu_io(t, uri, 'write -P 0x5c 4M 1M')
    t.equal('then a write past the end preallocates to them',
            os.path.getsize(path), 25 * MiB)
    c.ok('block-export-del', {'id': 'e0'})
    c.event('BLOCK_EXPORT_DELETED', timeout=10)
    t.equal('blockdev-del', c.cmd('blockdev-del', {'node-name': 'disk'}),
            {'return': {}})
    after = os.path.getsize(path)
    t.check('gives it back too', small < after < 8 * MiB, after)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    t.check('the image checks clean', *image_checks_clean('disk.qcow2'))
    rc, out = qemu_io(t, path, 'read -P 0x5a 0 1M', 'read -P 0x5b 2M 1M',
                      'read -P 0x5c 4M 1M', fmt='qcow2')
    t.equal('and holds what was written', rc, 0)


def test_bad_align():
    t.create_image('bad.qcow2', size='10M')
    d, c = t.start([])
    r = c.cmd('blockdev-add', nodes(t.path('bad.qcow2'),
                                   **{'prealloc-align': 100}))
    t.equal('prealloc-align not a multiple of the request alignment',
            error_of(r), generic('prealloc-align parameter of preallocate '
                                 'filter is not aligned to 512'))
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


test_grow_and_give_back()
test_bad_align()
t.finish()
