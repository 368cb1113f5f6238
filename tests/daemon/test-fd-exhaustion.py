#!/usr/bin/env python3
"""The daemon's listeners at the descriptor limit (issue 14, finding 4):
with RLIMIT_NOFILE low and connections opened until accept() fails with
EMFILE, the NBD, vhost-user and QMP listeners back off instead of spinning
on the level-triggered loop (bounded CPU time and log lines over a
second), log once, and accept again once descriptors are freed.

  tests/daemon/test-fd-exhaustion.py BUILD_DIR
"""
import os
import socket
import struct
import time

import qsd

t = qsd.Tests('test-fd-exhaustion')

NOFILE = 64
GET_FEATURES, VERSION, REPLY = 1, 0x1, 0x4


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(qsd.TIMEOUT)
    s.connect(path)
    return s


def cpu_seconds(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    # utime and stime are fields 14 and 15, in clock ticks
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def log_lines(path):
    with open(path, 'rb') as f:
        return f.read().count(b'\n')


def greeted(s, n, timeout):
    """True if @n bytes arrive on @s within @timeout seconds."""
    s.settimeout(timeout)
    buf = b''
    try:
        while len(buf) < n:
            data = s.recv(n - len(buf))
            if not data:
                return False
            buf += data
    except socket.timeout:
        return False
    return True


def test_exhaustion():
    img = t.path('disk.raw')
    with open(img, 'wb') as f:
        f.truncate(1 << 20)
    nbd = t.path('nbd.sock')
    vub = t.path('vub.sock')
    log = t.path('stderr.log')
    d = t.daemon(['--blockdev', 'driver=file,filename=%s,node-name=disk0'
                  % img,
                  '--nbd-server', 'addr.type=unix,addr.path=%s' % nbd,
                  '--export', 'type=nbd,id=n0,node-name=disk0',
                  '--export', 'type=vhost-user-blk,id=v0,node-name=disk0,'
                  'addr.type=unix,addr.path=%s' % vub],
                 nofile=NOFILE, stderr_path=log)
    c = d.qmp()
    # every descriptor the daemon has left goes to an NBD client; the
    # ones past the limit wait in the backlog
    clients = [connect(nbd) for _ in range(NOFILE + 8)]
    time.sleep(0.5)
    late_qmp = connect(d.qmp_path)
    late_vub = connect(vub)
    time.sleep(0.5)
    lines0, cpu0 = log_lines(log), cpu_seconds(d.proc.pid)
    time.sleep(1)
    lines1, cpu1 = log_lines(log), cpu_seconds(d.proc.pid)
    t.check('at the descriptor limit the daemon does not spin (%.2f s of '
            'CPU in 1 s)' % (cpu1 - cpu0), cpu1 - cpu0 < 0.2, cpu1 - cpu0)
    t.check('nor log on every wake-up (%d lines in 1 s)' % (lines1 - lines0),
            lines1 - lines0 <= 3, lines1 - lines0)
    with open(log, 'rb') as f:
        text = f.read().decode(errors='replace')
    for what, needle in (('the NBD listener', 'Failed to accept a '
                          'connection: Too many open files'),
                         ('the QMP listener', "chardev 'qmp0': accepting"),
                         ('the vhost-user listener', 'accepting a connection:'
                          ' Too many open files')):
        t.equal('%s logs the failure once' % what, text.count(needle), 1)
    t.check('daemon alive', d.alive())

    for s in clients[:16]:
        s.close()
    t.check('the waiting QMP client is accepted once descriptors are freed',
            greeted(late_qmp, 1, qsd.TIMEOUT))
    late_vub.settimeout(qsd.TIMEOUT)
    late_vub.sendall(struct.pack('<III', GET_FEATURES, VERSION, 0))
    t.check('and the waiting vhost-user front-end',
            greeted(late_vub, 12 + 8, qsd.TIMEOUT))
    # the last ones connected when no descriptor was left
    waited = clients[-8:]
    t.check('and the NBD clients that waited in the backlog',
            all(greeted(s, 18, qsd.TIMEOUT) for s in waited))
    for s in clients[16:] + [late_qmp, late_vub]:
        s.close()
    c.close()
    c = d.qmp()
    c.cmd('quit')
    t.equal('the daemon exits 0', d.wait(), 0)


test_exhaustion()
t.finish()
