#!/usr/bin/env python3
"""The daemon's vhost-user-blk export type: --export and block-export-add
with its options, the writeback byte a front-end reads (the export's
writethrough setting) and writes (seen by x-blockdev-set-write-cache),
the operator's write cache change announced to the front-end,
block-export-del refused while a front-end is connected and forced with
mode=hard, a front-end that breaks the protocol, and shutdown with a
front-end connected.  The front-end here speaks raw vhost-user messages;
tests/unit/test-vhost-user-blk.c drives rings and memory, tests/guest/
a real QEMU and Linux guest."""
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402
from vu_frontend import (FrontEnd, BLK_F_FLUSH, BLK_F_CONFIG_WCE,  # noqa
                         BLK_F_RO, F_PROTOCOL_FEATURES, F_LOG_ALL, PF_MQ,
                         PF_REPLY_ACK, PF_BACKEND_REQ, PF_CONFIG,
                         PF_LOG_SHMFD, PF_INFLIGHT_SHMFD, PF_CONFIGURE_MEM_SLOTS,
                         GET_FEATURES, SET_FEATURES, GET_QUEUE_NUM,
                         VERSION, NEED_REPLY)

t = qsd.Tests('test-vhost-user-blk')

def export_cache(c, export_id):
    return c.ok('x-blockdev-set-write-cache', {'id': export_id})['writeback']


def test_cmdline_export():
    img = t.create_image('a.qcow2')
    sock = t.path('vub.sock')
    d = t.daemon(['--blockdev', 'driver=file,filename=%s,node-name=file0'
                  % img,
                  '--blockdev', 'driver=qcow2,file=file0,node-name=disk0',
                  '--export', 'type=vhost-user-blk,id=vub0,node-name=disk0,'
                  'addr.type=unix,addr.path=%s,writable=on,num-queues=4,'
                  'logical-block-size=4096' % sock])
    c = d.qmp()
    t.equal('query-block-exports', c.ok('query-block-exports'),
            [{'id': 'vub0', 'type': 'vhost-user-blk', 'node-name': 'disk0',
              'shutting-down': False}])

    fe = FrontEnd(sock)
    features, pf = fe.negotiate()
    want = BLK_F_FLUSH | BLK_F_CONFIG_WCE | F_PROTOCOL_FEATURES | F_LOG_ALL
    t.check('features offer FLUSH, CONFIG_WCE, protocol features, '
            'dirty logging', features & want == want, hex(features))
    t.check('writable: no RO', not features & BLK_F_RO, hex(features))
    t.equal('protocol features', pf,
            PF_MQ | PF_LOG_SHMFD | PF_REPLY_ACK | PF_BACKEND_REQ | PF_CONFIG |
            PF_INFLIGHT_SHMFD | PF_CONFIGURE_MEM_SLOTS)
    t.equal('num-queues=4', fe.get_u64(GET_QUEUE_NUM), 4)
    t.equal('SET_FEATURES with every feature offered',
            fe.set_u64(SET_FEATURES, features), 0)
    t.equal('the export caches writes, and the config says so',
            (fe.writeback(), export_cache(c, 'vub0')), (1, True))
    t.equal('SET_CONFIG writeback=0 is acked', fe.set_writeback(0), 0)
    t.equal('... and switches the export to writethrough',
            (fe.writeback(), export_cache(c, 'vub0')), (0, False))
    t.equal('SET_CONFIG writeback=1', fe.set_writeback(1), 0)
    t.equal('... back to writeback', export_cache(c, 'vub0'), True)

    r = c.cmd('block-export-del', {'id': 'vub0'})
    t.equal('a safe block-export-del is refused while a front-end is '
            'connected', error_of(r), generic("export 'vub0' still in use"))
    r = c.cmd('block-export-del', {'id': 'vub0', 'mode': 'hard'})
    t.equal('block-export-del mode=hard', r, {'return': {}})
    t.check('hard removal hangs up on the front-end', fe.closed())
    t.check('BLOCK_EXPORT_DELETED', c.event('BLOCK_EXPORT_DELETED') and True)
    t.check('the socket is removed', not os.path.exists(sock))
    t.equal('no export left', c.ok('query-block-exports'), [])
    fe.close()
    c.ok('quit')
    t.equal('the daemon exits 0', d.wait(), 0)


def test_qmp_export_and_shutdown():
    img = t.create_image('b.qcow2')
    sock = t.path('vub-b.sock')
    d = t.daemon(['--blockdev', 'driver=file,filename=%s,node-name=file0'
                  % img,
                  '--blockdev', 'driver=qcow2,file=file0,node-name=disk0'])
    c = d.qmp()
    r = c.cmd('block-export-add', {
        'type': 'vhost-user-blk', 'id': 'vub1', 'node-name': 'disk0',
        'addr': {'type': 'unix', 'path': sock}, 'writethrough': True})
    t.equal('block-export-add vhost-user-blk writethrough', r, {'return': {}})
    fe = FrontEnd(sock)
    features, _ = fe.negotiate()
    t.check('read-only by default: RO', features & BLK_F_RO, hex(features))
    t.equal('writethrough=on: the first GET_CONFIG says writethrough',
            (fe.writeback(), export_cache(c, 'vub1')), (0, False))

    # a front-end that breaks the protocol is hung up on; the export stays
    fe.send(GET_FEATURES, b'', 0x2)
    t.check('a bad message ends the connection', fe.closed())
    fe.close()
    fe = FrontEnd(sock)
    fe.negotiate()
    t.equal('the next front-end is served', fe.writeback(), 0)

    # shutdown with a front-end connected
    d.proc.send_signal(15)
    t.equal('SIGTERM with a front-end connected: exit 0', d.wait(), 0)
    t.check('the front-end was hung up on', fe.closed())
    t.check('the daemon said why it closed the first connection',
            "vhost-user-blk export 'vub1'" in d.stderr and
            'has flags 0x2' in d.stderr, d.stderr)
    t.check('the socket is removed', not os.path.exists(sock))
    fe.close()
    if qsd.have('qemu-img'):
        rc, out, err = t.run(['qemu-img', 'check', img])
        t.check('the image checks clean with qemu-img', rc == 0, out + err)
    else:
        t.skip('qemu-img check', 'qemu-img is not installed')


SET_MEM_TABLE, SET_VRING_NUM, SET_VRING_ADDR = 5, 8, 9
SET_VRING_BASE, SET_VRING_KICK, SET_VRING_CALL = 10, 12, 13
SET_VRING_ENABLE = 18


def test_memory_shrinks():
    """Issue 14, finding 3: a front-end shrinks its guest memory (a memfd
    that cannot be sealed) after SET_MEM_TABLE and kicks a queue.  The
    daemon ends that connection with the reason, and lives on: another
    export (NBD) and the monitor keep working."""
    img = t.create_image('shrink.qcow2')
    vub = t.path('shrink-vub.sock')
    nbd = t.path('shrink-nbd.sock')
    d = t.daemon(['--blockdev', 'driver=file,filename=%s,node-name=f0' % img,
                  '--blockdev', 'driver=qcow2,file=f0,node-name=disk0',
                  '--export', 'type=vhost-user-blk,id=vub0,node-name=disk0,'
                  'addr.type=unix,addr.path=%s,writable=on' % vub,
                  '--nbd-server', 'addr.type=unix,addr.path=%s' % nbd,
                  '--export', 'type=nbd,id=nbd0,node-name=disk0'])
    # a reply means the command line is done: the exports listen
    c = d.qmp()
    size, uva, gpa = 1 << 20, 0x7f0000000000, 0
    mem = os.memfd_create('guest-ram', os.MFD_CLOEXEC)
    os.ftruncate(mem, size)
    kick, call = os.eventfd(0), os.eventfd(0)
    fe = FrontEnd(vub)
    fe.negotiate()
    fe.set_u64(SET_FEATURES, 1 << 32)           # VIRTIO_F_VERSION_1
    fe.send_fds(SET_MEM_TABLE, struct.pack('<II', 1, 0) +
                struct.pack('<QQQQ', gpa, size, uva, 0), [mem])
    fe.reply(SET_MEM_TABLE)
    fe.send(SET_VRING_NUM, struct.pack('<II', 0, 128), VERSION | NEED_REPLY)
    fe.reply(SET_VRING_NUM)
    fe.send(SET_VRING_BASE, struct.pack('<II', 0, 0), VERSION | NEED_REPLY)
    fe.reply(SET_VRING_BASE)
    fe.send(SET_VRING_ADDR, struct.pack('<IIQQQQ', 0, 0, uva, uva + 0x4000,
                                        uva + 0x2000, 0),
            VERSION | NEED_REPLY)
    fe.reply(SET_VRING_ADDR)
    for req, fd in ((SET_VRING_CALL, call), (SET_VRING_KICK, kick)):
        fe.send_fds(req, struct.pack('<Q', 0), [fd])
        fe.reply(req)
    fe.send(SET_VRING_ENABLE, struct.pack('<II', 0, 1), VERSION | NEED_REPLY)
    fe.reply(SET_VRING_ENABLE)
    os.ftruncate(mem, 0)
    os.eventfd_write(kick, 1)
    t.check('the shrunk front-end\'s connection ends',
            qsd.wait_for(fe.closed))
    rc, out, err = t.run(['qemu-io', '-r', '-f', 'raw', '-c', 'read 0 64k',
                          qsd.nbd_uri(nbd, 'disk0')])
    t.check('its NBD export is still served', rc == 0 and
            'read 65536/65536' in out, out + err)
    if not t.check('the daemon lives on', d.alive(), d.wait()):
        return
    t.equal('and the monitor answers',
            sorted(e['id'] for e in c.ok('query-block-exports')),
            ['nbd0', 'vub0'])
    fe.close()
    for fd in (mem, kick, call):
        os.close(fd)
    c.cmd('quit')
    t.equal('the daemon exits 0', d.wait(), 0)
    t.check('it logged why it ended the connection',
            "vhost-user-blk export 'vub0': memory region 0: SIGBUS at "
            'offset' in d.stderr and 'the front-end shrank the file behind '
            'guest memory' in d.stderr, d.stderr)


def test_write_cache_announced():
    """x-blockdev-set-write-cache on the export: the front-end is sent a
    config-change notification and reads the new writeback byte; while
    a driver that cannot flush is connected the setting is kept aside
    (the writes stay writethrough) and still shown and announced."""
    img = t.create_image('wc.qcow2', size='16M')
    path = t.path('wc.sock')
    d = t.daemon(['--blockdev', 'driver=file,filename=%s,node-name=f0' %
                  img, '--blockdev', 'driver=qcow2,file=f0,node-name=n0',
                  '--export', 'type=vhost-user-blk,id=v0,node-name=n0,'
                  'writable=on,addr.type=unix,addr.path=%s' % path])
    c = d.qmp()
    fe = FrontEnd(path)
    features, _ = fe.negotiate(PF_REPLY_ACK | PF_CONFIG | PF_BACKEND_REQ)
    chan = fe.backend_channel()
    chan.settimeout(qsd.TIMEOUT)
    t.equal('writeback to begin with', fe.writeback(), 1)
    r = c.ok('x-blockdev-set-write-cache', {'id': 'v0', 'writeback': False})
    t.equal('the operator turns the cache off', r, {'writeback': False})
    msg = chan.recv(12)
    t.equal('the front-end is told (CONFIG_CHANGE_MSG)',
            struct.unpack('<III', msg) if len(msg) == 12 else msg,
            (2, VERSION, 0))
    t.equal('and reads writethrough', fe.writeback(), 0)
    c.ok('x-blockdev-set-write-cache', {'id': 'v0', 'writeback': True})
    t.check('told again', len(chan.recv(12)) == 12)
    t.equal('and reads writeback', fe.writeback(), 1)
    # a driver without VIRTIO_BLK_F_FLUSH cannot flush: writethrough
    fe.set_u64(SET_FEATURES, features & ~BLK_F_FLUSH & ~BLK_F_CONFIG_WCE,
               ack=False)
    t.equal('a driver that cannot flush gets writethrough',
            export_cache(c, 'v0'), False)
    r = c.ok('x-blockdev-set-write-cache', {'id': 'v0', 'writeback': True})
    t.equal('the operator\'s writeback is kept aside meanwhile', r,
            {'writeback': False})
    t.check('and announced', len(chan.recv(12)) == 12)
    t.equal('the field shows the mode kept aside', fe.writeback(), 1)
    fe.close()
    chan.close()
    t.check('the next driver gets it', qsd.wait_for(
        lambda: export_cache(c, 'v0') is True))
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


test_cmdline_export()
test_qmp_export_and_shutdown()
test_write_cache_announced()
test_memory_shrinks()
t.finish()
