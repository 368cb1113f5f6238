#!/usr/bin/env python3
"""change-backing-file, as QEMU's: the errors (device not found or not a
root node, image node not found or without a backing node, not in the
device's chain), the new name in the image's header while the open graph
stays (a read-only backing node is reopened writable for it and
read-only again), "" removing the name, and the backing format the image
had kept (QEMU 7.2 writes the image's own format there)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402

t = qsd.Tests('test-change-backing-file')


def header(name):
    """The image's backing file name and format, as qemu-img reads them."""
    rc, out, err = t.run(['qemu-img', 'info', '-U', '--output=json',
                          t.path(name)])
    info = json.loads(out)
    return info.get('backing-filename'), info.get('backing-filename-format')


def node(c, name):
    for n in c.cmd('query-named-block-nodes')['return']:
        if n['node-name'] == name:
            return n
    return None


def change(c, device, image, backing_file):
    return c.cmd('change-backing-file', {'device': device,
                                         'image-node-name': image,
                                         'backing-file': backing_file})


def main():
    t.create_image('base.raw', size='16M', fmt='raw')
    t.sh('qemu-img create -q -f qcow2 -b base.raw -F raw mid.qcow2')
    t.sh('qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 top.qcow2')
    t.create_image('other.qcow2', size='16M')
    chain = {'driver': 'qcow2', 'node-name': 'top',
             'file': {'driver': 'file', 'filename': t.path('top.qcow2')},
             'backing': {'driver': 'qcow2', 'node-name': 'mid',
                         'file': {'driver': 'file',
                                  'filename': t.path('mid.qcow2')},
                         'backing': {'driver': 'raw', 'node-name': 'base',
                                     'file': {'driver': 'file',
                                              'filename':
                                              t.path('base.raw')}}}}
    d, c = t.start([chain, {'driver': 'qcow2', 'node-name': 'other',
                            'file': {'driver': 'file',
                                     'filename': t.path('other.qcow2')}}])
    errors = [
        ('nope', 'mid', "Cannot find device='nope' nor node-name='nope'"),
        ('top', 'nope', "Cannot find device='' nor node-name='nope'"),
        ('top', 'base', 'not allowing backing file change on an image '
                        'without a backing file'),
        ('top', 'other', 'not allowing backing file change on an image '
                         'without a backing file'),
        ('mid', 'mid', 'Need a root block node'),
        ('other', 'top', "'other' and image file are not in the same "
                         "chain"),
    ]
    for device, image, desc in errors:
        t.equal('device %s, image %s' % (device, image),
                error_of(change(c, device, image, 'x')), generic(desc))
    t.equal('mid is read-only before', node(c, 'mid')['ro'], True)
    t.equal('change mid\'s backing file name',
            change(c, 'top', 'mid', t.path('moved.raw')), {'return': {}})
    t.equal('its header names the new file, with the format it had (raw)',
            header('mid.qcow2'), (t.path('moved.raw'), 'raw'))
    t.equal('mid is read-only again', node(c, 'mid')['ro'], True)
    t.equal('the open graph stays: mid still reads base',
            node(c, 'mid')['backing_file'], t.path('base.raw'))
    t.equal('"" removes top\'s backing file name',
            change(c, 'top', 'top', ''), {'return': {}})
    t.equal('top\'s header names none', header('top.qcow2'), (None, None))
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


main()
t.finish()
