#!/usr/bin/python3
"""Requests that the command-line NBD clients cannot make, through libnbd
(Debian's python3-libnbd), for tests/interop/nbd-clients.sh.

    nbd-client.py ACTION URI

Actions:
  write         one 64 KiB write at offset 0
  write-fua     the same with NBD_CMD_FLAG_FUA
  write-flush   a 64 KiB write, then NBD_CMD_FLUSH
  zero-fua      a 64 KiB NBD_CMD_WRITE_ZEROES with FUA
  trim-fua      a 64 KiB NBD_CMD_TRIM with FUA
  read-only     write, zero and trim must each fail with EPERM
  in-flight     64 writes of distinct patterns issued before any reply is
                read, then 64 reads in flight at once; checks every byte
  fast-zero     a write-zeroes with NBD_CMD_FLAG_FAST_ZERO must succeed or
                fail with ENOTSUP, nothing else
Exits 0 on success, 1 with a message otherwise.
"""
import errno
import sys

import nbd

action, uri = sys.argv[1], sys.argv[2]
h = nbd.NBD()
h.connect_uri(uri)
block = 64 * 1024


def errno_name(e):
    """libnbd gives the errno of a failed command as a name or a number."""
    return errno.errorcode.get(e.errno, e.errno)


def expect_errno(what, fn, want):
    try:
        fn()
    except nbd.Error as e:
        if errno_name(e) != errno.errorcode[want]:
            sys.exit('%s failed with %s, expected %s' %
                     (what, errno_name(e), errno.errorcode[want]))
        return
    sys.exit('%s succeeded on a read-only export' % what)


if action == 'write':
    h.pwrite(b'\x11' * block, 0)
elif action == 'write-fua':
    h.pwrite(b'\x22' * block, 0, nbd.CMD_FLAG_FUA)
elif action == 'write-flush':
    h.pwrite(b'\x33' * block, 0)
    h.flush()
elif action == 'zero-fua':
    h.zero(block, 0, nbd.CMD_FLAG_FUA)
elif action == 'trim-fua':
    h.trim(block, 0, nbd.CMD_FLAG_FUA)
elif action == 'read-only':
    assert h.is_read_only(), 'export is not read-only'
    # send the writes anyway: the server is what must refuse them
    h.set_strict_mode(0)
    expect_errno('write', lambda: h.pwrite(b'x' * 512, 0), errno.EPERM)
    expect_errno('zero', lambda: h.zero(512, 0), errno.EPERM)
    expect_errno('trim', lambda: h.trim(512, 0), errno.EPERM)
    assert len(h.pread(512, 0)) == 512
elif action == 'in-flight':
    n = 64
    bufs = [nbd.Buffer.from_bytearray(bytearray([i + 1]) * block)
            for i in range(n)]
    cookies = [h.aio_pwrite(bufs[i], i * block) for i in range(n)]
    most = h.aio_in_flight()
    while h.aio_in_flight() > 0:
        h.poll(-1)
    for c in cookies:
        h.aio_command_completed(c)
    reads = [nbd.Buffer(block) for _ in range(n)]
    cookies = [h.aio_pread(reads[i], i * block) for i in range(n)]
    while h.aio_in_flight() > 0:
        h.poll(-1)
    for i, c in enumerate(cookies):
        h.aio_command_completed(c)
        if reads[i].to_bytearray() != bytearray([i + 1]) * block:
            sys.exit('block %d read back wrong' % i)
    if most < 2:
        sys.exit('requests were not in flight together (%d)' % most)
elif action == 'fast-zero':
    try:
        h.zero(block, 0, nbd.CMD_FLAG_FAST_ZERO)
    except nbd.Error as e:
        if errno_name(e) != 'ENOTSUP':
            sys.exit('fast zero failed with %s' % errno_name(e))
else:
    sys.exit('unknown action ' + action)
h.shutdown()
