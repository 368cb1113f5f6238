#!/usr/bin/env python3
"""block_resize on nodes that exports serve: QEMU's arguments and errors,
the vhost-user-blk export's capacity and config-change notification
(only to a front-end that negotiated F_CONFIG and F_BACKEND_REQ and gave
a channel), the NBD export's size for new and for connected clients, and
resizes while an NBD client writes, with every write read back."""
import os
import select
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402
from vu_frontend import (FrontEnd, PF_REPLY_ACK, PF_CONFIG,  # noqa: E402
                         PF_BACKEND_REQ, BACKEND_CONFIG_CHANGE_MSG, VERSION)

t = qsd.Tests('test-resize')
MiB = 1 << 20
# BDRV_MAX_LENGTH: INT64_MAX rounded down to 1 GiB, as in QEMU
MAX_LENGTH = 9223372035781033984
SYS_PYTHON = '/usr/bin/python3'


def start(img, *exports):
    args = ['--blockdev', 'driver=file,node-name=f0,filename=%s' % img,
            '--blockdev', 'driver=qcow2,node-name=n0,file=f0']
    for e in exports:
        args += ['--export', e]
    return t.daemon(args)


def resize(c, size, node='n0'):
    return c.cmd('block_resize', {'node-name': node, 'size': size})


def test_errors():
    img = t.create_image('err.qcow2')
    d = start(img)
    c = d.qmp()
    cases = [
        ({'device': 'n0', 'size': MiB},
         "Cannot find device='n0' nor node-name=''"),
        ({'node-name': 'zz', 'size': MiB},
         "Cannot find device='' nor node-name='zz'"),
        ({'size': MiB}, "Cannot find device='' nor node-name=''"),
        ({'node-name': 'n0', 'size': -1},
         "Parameter 'size' expects a >0 size"),
        ({'node-name': 'n0', 'size': 1000},
         'The new size must be a multiple of 512'),
        ({'node-name': 'n0', 'size': 2 ** 63 - 1},
         'offset(9223372036854775807) exceeds maximum(%d)' % MAX_LENGTH),
        ({'node-name': 'f0', 'size': MiB},
         "Permission conflict on node 'f0': permissions 'resize' are both "
         "required by an unnamed block device (uses node 'f0' as 'root' "
         "child) and unshared by node 'n0' (uses node 'f0' as 'file' "
         "child)."),
    ]
    for args, desc in cases:
        t.equal('block_resize %r' % args,
                error_of(c.cmd('block_resize', args)), generic(desc))
    t.equal('device and node-name: the node is found by its name',
            c.cmd('block_resize', {'device': 'x', 'node-name': 'n0',
                                   'size': 32 * MiB}), {'return': {}})
    t.equal('to 0 bytes', resize(c, 0), {'return': {}})
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    rc, out, err = t.run(['qemu-img', 'info', '--output=json', img])
    t.check('the image is 0 bytes now', '"virtual-size": 0,' in out, out)


def no_message(sock, timeout=0.5):
    return not select.select([sock], [], [], timeout)[0]


def test_vhost_user_blk():
    img = t.create_image('vub.qcow2')
    path = t.path('vub.sock')
    d = start(img, 'type=vhost-user-blk,id=v0,node-name=n0,writable=on,'
                   'addr.type=unix,addr.path=%s' % path)
    c = d.qmp()
    fe = FrontEnd(path)
    fe.negotiate(PF_REPLY_ACK | PF_CONFIG | PF_BACKEND_REQ)
    chan = fe.backend_channel()
    t.equal('capacity before', fe.capacity(), 64 * MiB // 512)
    t.equal('grow to 128M', resize(c, 128 * MiB), {'return': {}})
    chan.settimeout(qsd.TIMEOUT)
    msg = chan.recv(12)
    t.equal('the front-end gets CONFIG_CHANGE_MSG on its channel',
            struct.unpack('<III', msg) if len(msg) == 12 else msg,
            (BACKEND_CONFIG_CHANGE_MSG, VERSION, 0))
    t.equal('the capacity it reads then', fe.capacity(), 128 * MiB // 512)
    t.equal('shrink to 32M', resize(c, 32 * MiB), {'return': {}})
    t.check('another notification', len(chan.recv(12)) == 12)
    t.equal('the capacity follows', fe.capacity(), 32 * MiB // 512)
    t.check('one message per resize', no_message(chan))
    fe.close()
    chan.close()

    # a front-end that gave a channel but did not negotiate F_CONFIG
    fe = FrontEnd(path)
    fe.negotiate(PF_REPLY_ACK | PF_BACKEND_REQ)
    chan = fe.backend_channel()
    t.equal('grow again', resize(c, 48 * MiB), {'return': {}})
    t.check('no notification without F_CONFIG', no_message(chan))
    fe.close()
    chan.close()

    # one that negotiated F_CONFIG but no channel: nothing to send on
    fe = FrontEnd(path)
    fe.negotiate(PF_REPLY_ACK | PF_CONFIG)
    t.equal('grow without a channel', resize(c, 64 * MiB), {'return': {}})
    t.equal('the capacity is still right', fe.capacity(), 64 * MiB // 512)
    fe.close()
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    rc, out, err = t.run(['qemu-img', 'check', img])
    t.equal('qemu-img check', rc, 0)


# A libnbd client that stays connected and answers "size" and
# "write OFF LEN BYTE" lines, one reply line each.
NBD_HOLDER = r'''
import nbd, sys
h = nbd.NBD()
h.set_strict_mode(0)
h.connect_uri(sys.argv[1])
print("connected", flush=True)
for line in sys.stdin:
    w = line.split()
    try:
        if w[0] == "size":
            print(h.get_size(), flush=True)
        elif w[0] == "write":
            h.pwrite(bytes([int(w[3])]) * int(w[2]), int(w[1]))
            print("ok", flush=True)
    except nbd.Error as e:
        print("error", e.errnum, flush=True)
'''


def nbd_holder(uri):
    if subprocess.run([SYS_PYTHON, '-c', 'import nbd'],
                      stderr=subprocess.DEVNULL).returncode:
        return None
    p = subprocess.Popen([SYS_PYTHON, '-c', NBD_HOLDER, uri],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != 'connected':
        p.kill()
        return None
    return p


def holder_cmd(p, line):
    p.stdin.write(line + '\n')
    p.stdin.flush()
    return p.stdout.readline().strip()


def test_nbd():
    img = t.create_image('nbd.qcow2')
    sock = t.path('nbd.sock')
    uri = qsd.nbd_uri(sock, 'n0')
    d = t.daemon(['--blockdev', 'driver=file,node-name=f0,filename=%s' % img,
                  '--blockdev', 'driver=qcow2,node-name=n0,file=f0',
                  '--nbd-server', 'addr.type=unix,addr.path=%s' % sock,
                  '--export', 'type=nbd,id=e0,node-name=n0,writable=on'])
    c = d.qmp()
    old = nbd_holder(uri)
    if not old:
        t.skip('an NBD client connected across the resize',
               'python3-libnbd (%s -c "import nbd") missing' % SYS_PYTHON)
    t.equal('grow to 128M with the export live', resize(c, 128 * MiB),
            {'return': {}})
    rc, out, err = t.run(['nbdinfo', '--size', uri]) if qsd.have('nbdinfo') \
        else t.run(['qemu-img', 'info', '--output=json', uri])
    t.check('a new client sees 128M', str(128 * MiB) in out, out + err)
    if old:
        t.equal('the connected client keeps the size it negotiated',
                holder_cmd(old, 'size'), str(64 * MiB))
        t.equal('and writes within it',
                holder_cmd(old, 'write %d 4096 7' % (64 * MiB - 4096)), 'ok')
        t.check('a write past it is refused (ENOSPC, as NBD asks)',
                holder_cmd(old, 'write %d 4096 7' % (64 * MiB)).startswith(
                    'error'))
        old.stdin.close()
        old.wait(timeout=qsd.TIMEOUT)
    rc, out = qsd.qemu_io(t, uri, 'write -P 9 127M 1M', 'read -P 9 127M 1M')
    t.check('a new client writes and reads the new area', rc == 0 and
            'Pattern verification failed' not in out, out)
    test_resize_under_writes(c, uri)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    rc, out, err = t.run(['qemu-img', 'check', img])
    t.equal('qemu-img check', rc, 0)


def test_resize_under_writes(c, uri):
    """Grows the node by 1M again and again for as long as qemu-io
    writes 256 patterned 64k blocks through the export, then reads every
    block back."""
    n, block = 256, 64 * 1024
    writes = ['write -P %d %d %d' % (i % 250 + 1, i * block, block)
              for i in range(n)]
    args = ['qemu-io', '-f', 'raw', '-t', 'writeback']
    for w in writes:
        args += ['-c', w]
    writer = subprocess.Popen(args + [uri], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    replies = []
    while writer.poll() is None and len(replies) < 1024:
        replies.append(resize(c, (128 + len(replies) + 1) * MiB))
    out = writer.communicate(timeout=qsd.TIMEOUT * 2)[0]
    t.check('resizes while the writes ran', len(replies) > 1, replies)
    t.equal('each succeeded', replies, [{'return': {}}] * len(replies))
    t.check('every write succeeded', writer.returncode == 0 and
            out.count('wrote %d/%d bytes' % (block, block)) == n,
            out[-2000:])
    reads = ['read -P %d %d %d' % (i % 250 + 1, i * block, block)
             for i in range(n)]
    rc, out = qsd.qemu_io(t, uri, *reads)
    t.check('no write was lost', rc == 0 and
            'Pattern verification failed' not in out and
            out.count('read %d/%d bytes' % (block, block)) == n, out[-2000:])
    rc, out, err = t.run(['qemu-img', 'info', '--output=json', uri])
    t.check('the export has the last size',
            str((128 + len(replies)) * MiB) in out, out)


test_errors()
test_vhost_user_blk()
test_nbd()
t.finish()
