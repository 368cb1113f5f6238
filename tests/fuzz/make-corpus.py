#!/usr/bin/env python3
"""Writes the seed corpora of the protocol and text harnesses.

fuzz-qcow2's images come from make-corpus-qcow2.sh (real qemu-img) and
fuzz-vmstate's stream from make-corpus-vmstate.sh (a real savevm); every
other seed is built here from the protocols' definitions, so that each one
says what it exercises.  Run from anywhere; it rewrites
tests/fuzz/corpus/<harness>/ for the harnesses below.
"""
import os
import struct

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')


def write(harness, name, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    assert len(data) <= 65536, (harness, name, len(data))
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


# ---- fuzz-options: the first byte picks the parser (fuzz-options.c) ----
KEYVAL, IMAGE_OPTS, CREATE, JSON_FILENAME, QMP_VALUE = range(5)


def option(parser, type_index, text):
    return bytes([parser + 5 * type_index]) + text.encode()


def options_seeds():
    write('fuzz-options', 'blockdev-qcow2', option(KEYVAL, 0,
          'driver=qcow2,node-name=disk,file.driver=file,'
          'file.filename=a.qcow2,overlap-check.template=all,'
          'cache.direct=on,discard=unmap'))
    write('fuzz-options', 'export-nbd', option(KEYVAL, 1,
          'nbd,id=e0,node-name=disk,writable=on,name=x'))
    write('fuzz-options', 'nbd-server', option(KEYVAL, 2,
          'addr.type=unix,addr.path=/tmp/s.sock,max-connections=4'))
    write('fuzz-options', 'chardev', option(KEYVAL, 3,
          'socket,id=c0,path=/tmp/q.sock,server=on,wait=off'))
    write('fuzz-options', 'image-opts', option(IMAGE_OPTS, 0,
          'driver=qcow2,file.filename=a.qcow2,l2-cache-size=1M,'
          'overlap-check=none,overlap-check.template=all,,x'))
    write('fuzz-options', 'create', option(CREATE, 0,
          'size=1G,cluster_size=64k,compat=1.1,refcount_bits=16,'
          'lazy_refcounts=on,preallocation=metadata,extended_l2=on'))
    write('fuzz-options', 'json-filename', option(JSON_FILENAME, 0,
          '{"driver": "qcow2", "file": {"driver": "file", "filename": '
          '"a.qcow2"}, "overlap-check": {"template": "all", "main-header": '
          'false}, "cache-size": 1048576, "x": [1, 2.5e3, null, "\\u00e9"]}'))
    write('fuzz-options', 'qmp-value', option(QMP_VALUE, 0,
          '{"driver": "null-co", "node-name": "n", "size": 1048576, '
          '"read-zeroes": true}'))


# ---- fuzz-blkdebug: config files ----
def blkdebug_seeds():
    write('fuzz-blkdebug', 'inject-and-state',
          '[inject-error]\nevent = "read_aio"\nerrno = "5"\n'
          'sector = "0"\nonce = "on"\nstate = "1"\n\n'
          '[set-state]\nevent = "write_aio"\nstate = "1"\n'
          'new_state = "2"\n\n'
          '[inject-error]\nevent = "flush_to_disk"\nerrno = "28"\n'
          'state = "2"\niotype = "flush"\n')
    write('fuzz-blkdebug', 'comments-and-empty',
          '# a comment\n\n[set-state]\nevent = "l2_load"\n'
          'new_state = "3"\n[inject-error]\nevent = "l1_update"\n'
          'immediately = "off"\n')


# ---- fuzz-qmp: a client's byte stream ----
def qmp_seeds():
    write('fuzz-qmp', 'negotiate-and-query',
          '{"execute": "qmp_capabilities"}\n'
          '{"execute": "query-version", "id": 1}\n'
          '{"execute": "query-commands", "id": "x"}\n')
    write('fuzz-qmp', 'blockdev-add-args',
          '{"execute": "qmp_capabilities", "arguments": {"enable": []}}'
          '{"execute": "blockdev-add", "arguments": {"driver": "qcow2", '
          '"node-name": "d", "file": {"driver": "file", '
          '"filename": "x.qcow2"}, "overlap-check": "all"}}'
          '{"execute": "block-export-add", "arguments": {"type": "nbd", '
          '"id": "e", "node-name": "d", "writable": true}}'
          '{"execute": "nbd-server-start", "arguments": {"addr": '
          '{"type": "unix", "data": {"path": "/s"}}}}')
    write('fuzz-qmp', 'ringbuf',
          '{"execute": "qmp_capabilities", "arguments": {"enable": ["oob"]}}'
          '{"execute": "ringbuf-write", "arguments": {"device": "r0", '
          '"data": "a\\u0000b\\u00e9"}}'
          '{"execute": "ringbuf-write", "arguments": {"device": "r0", '
          '"data": "//79YWJj", "format": "base64"}}'
          '{"execute": "ringbuf-read", "arguments": {"device": "r0", '
          '"size": 7}}'
          '{"execute": "ringbuf-read", "arguments": {"device": "r0", '
          '"size": 100, "format": "base64"}}'
          '{"execute": "query-chardev"}'
          '{"exec-oob": "query-chardev"}')
    # 0xff: the byte after which the monitor gets back in step
    write('fuzz-qmp', 'errors-and-resync',
          b'{"execute": "query-version"}\n{"execute": 1}\n'
          b'{"execute": "nosuch", "id": [1]}\n\xff{"broken": \n'
          b'{"exec-oob": "qmp_capabilities"}\n[1, 2]\n"str"\n')


# ---- fuzz-nbd-server: a client's bytes (nbd-proto.h) ----
NBD_OPTS_MAGIC = 0x49484156454f5054
NBD_REQUEST_MAGIC = 0x25609513
FIXED_NEWSTYLE, NO_ZEROES = 1, 2
(OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_STARTTLS, OPT_INFO, OPT_GO,
 OPT_STRUCTURED_REPLY, OPT_LIST_META, OPT_SET_META) = (1, 2, 3, 5, 6, 7, 8,
                                                       9, 10)
(CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_TRIM, CMD_CACHE,
 CMD_WRITE_ZEROES, CMD_BLOCK_STATUS) = range(8)
FLAG_FUA, FLAG_NO_HOLE = 1, 2


def nbd_opt(opt, data=b''):
    return struct.pack('>QII', NBD_OPTS_MAGIC, opt, len(data)) + data


def nbd_str(s):
    return struct.pack('>I', len(s)) + s


def nbd_go(name, infos=()):
    return (nbd_str(name) + struct.pack('>H', len(infos)) +
            b''.join(struct.pack('>H', i) for i in infos))


def nbd_meta(name, queries):
    return (nbd_str(name) + struct.pack('>I', len(queries)) +
            b''.join(nbd_str(q) for q in queries))


def nbd_req(cmd, offset, length, flags=0, cookie=1):
    return struct.pack('>IHHQQI', NBD_REQUEST_MAGIC, flags, cmd, cookie,
                       offset, length)


def nbd_seeds():
    flags = struct.pack('>I', FIXED_NEWSTYLE | NO_ZEROES)
    s = (flags + nbd_opt(OPT_LIST) + nbd_opt(OPT_INFO, nbd_go(b'', (0, 1, 2, 3)))
         + nbd_opt(OPT_STRUCTURED_REPLY)
         + nbd_opt(OPT_LIST_META, nbd_meta(b'', [b'base:', b'qemu:']))
         + nbd_opt(OPT_SET_META, nbd_meta(b'', [b'base:allocation',
                                                b'qemu:allocation-depth']))
         + nbd_opt(OPT_GO, nbd_go(b'', (3,))))
    s += (nbd_req(CMD_READ, 0, 4096) + nbd_req(CMD_WRITE, 4096, 512, FLAG_FUA)
          + b'\xa5' * 512 + nbd_req(CMD_BLOCK_STATUS, 0, 1 << 20)
          + nbd_req(CMD_TRIM, 8192, 4096)
          + nbd_req(CMD_WRITE_ZEROES, 0, 65536, FLAG_NO_HOLE)
          + nbd_req(CMD_FLUSH, 0, 0) + nbd_req(CMD_CACHE, 0, 4096)
          + nbd_req(CMD_READ, (1 << 20) - 512, 1024)
          + nbd_req(CMD_DISC, 0, 0))
    write('fuzz-nbd-server', 'go-structured', s)
    write('fuzz-nbd-server', 'export-name',
          struct.pack('>I', FIXED_NEWSTYLE) + nbd_opt(OPT_EXPORT_NAME)
          + nbd_req(CMD_READ, 0, 512) + nbd_req(CMD_WRITE, 0, 512, FLAG_FUA)
          + b'x' * 512 + nbd_req(CMD_FLUSH, 0, 0) + nbd_req(CMD_DISC, 0, 0))
    write('fuzz-nbd-server', 'go-read-only',
          flags + nbd_opt(OPT_GO, nbd_go(b'ro')) + nbd_req(CMD_WRITE, 0, 512)
          + b'y' * 512 + nbd_req(CMD_READ, 0, 512) + nbd_req(CMD_DISC, 0, 0))
    write('fuzz-nbd-server', 'options-refused',
          flags + nbd_opt(OPT_INFO, nbd_go(b'nosuch')) + nbd_opt(OPT_STARTTLS)
          + nbd_opt(99, b'abc') + nbd_opt(OPT_ABORT))


# ---- fuzz-nbd-tls: byte 0 picks the mode (fuzz-nbd-tls.c) ----
TLS_RAW, TLS_TUNNEL = 0, 1


def tls_client_hello():
    """A real TLS ClientHello (Python's ssl; no PSK suites, so the server
    refuses it: the handshake's failure path)."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = ctx.wrap_bio(incoming, outgoing)
    try:
        conn.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def nbd_tls_seeds():
    flags = struct.pack('>I', FIXED_NEWSTYLE | NO_ZEROES)
    session = (nbd_opt(OPT_STRUCTURED_REPLY)
               + nbd_opt(OPT_SET_META, nbd_meta(b'', [b'base:allocation']))
               + nbd_opt(OPT_GO, nbd_go(b'', (3,)))
               + nbd_req(CMD_READ, 0, 4096)
               + nbd_req(CMD_WRITE, 4096, 512, FLAG_FUA) + b'\xa5' * 512
               + nbd_req(CMD_BLOCK_STATUS, 0, 1 << 20)
               + nbd_req(CMD_FLUSH, 0, 0) + nbd_req(CMD_DISC, 0, 0))

    def tunnel(plain, inside):
        return bytes([TLS_TUNNEL]) + struct.pack('>H', len(plain)) + plain \
            + inside

    # options before STARTTLS are refused (NBD_REP_ERR_TLS_REQD)
    write('fuzz-nbd-tls', 'raw-refused',
          bytes([TLS_RAW]) + flags + nbd_opt(OPT_LIST)
          + nbd_opt(OPT_GO, nbd_go(b'')) + nbd_opt(OPT_STRUCTURED_REPLY)
          + nbd_opt(99, b'abc') + nbd_opt(OPT_ABORT))
    # STARTTLS with a payload, twice, then EXPORT_NAME without TLS
    write('fuzz-nbd-tls', 'raw-starttls-bad',
          bytes([TLS_RAW]) + flags + nbd_opt(OPT_STARTTLS, b'x')
          + nbd_opt(OPT_EXPORT_NAME))
    # STARTTLS, then a ClientHello the server cannot accept
    write('fuzz-nbd-tls', 'raw-client-hello',
          bytes([TLS_RAW]) + flags + nbd_opt(OPT_STARTTLS)
          + tls_client_hello())
    # STARTTLS, then bytes that are no TLS record, then the end
    write('fuzz-nbd-tls', 'raw-not-tls',
          bytes([TLS_RAW]) + flags + nbd_opt(OPT_STARTTLS)
          + nbd_opt(OPT_GO, nbd_go(b'')))
    write('fuzz-nbd-tls', 'tunnel-session', tunnel(flags, session))
    write('fuzz-nbd-tls', 'tunnel-refused-first',
          tunnel(flags + nbd_opt(OPT_INFO, nbd_go(b'ro'))
                 + nbd_opt(OPT_LIST), session))
    # inside TLS: STARTTLS again (refused), EXPORT_NAME of the read-only one
    write('fuzz-nbd-tls', 'tunnel-export-name',
          tunnel(flags, nbd_opt(OPT_STARTTLS) + nbd_opt(OPT_LIST)
                 + nbd_opt(OPT_EXPORT_NAME, b'ro')
                 + nbd_req(CMD_READ, 0, 512) + nbd_req(CMD_WRITE, 0, 512)
                 + b'y' * 512 + nbd_req(CMD_DISC, 0, 0)))


# ---- fuzz-vhost-user: steps of the script in fuzz-vhost-user.c ----
VU_DESC, VU_AVAIL = 0x0000, 0x1000
VRING_NEXT, VRING_WRITE = 1, 2
BLK_IN, BLK_OUT, BLK_FLUSH, BLK_GET_ID, BLK_DISCARD = 0, 1, 4, 8, 11


def vu_msg(req, flags, payload=b''):
    return bytes([0, req, flags, len(payload)]) + payload


def vu_setup(log2_num):
    return bytes([1, log2_num])


def vu_mem(off, data):
    out = b''
    while data:
        chunk = data[:255]
        out += bytes([2, off & 255, off >> 8, len(chunk)]) + chunk
        off += len(chunk)
        data = data[255:]
    return out


def vu_kick(q):
    return bytes([3, q])


def vu_desc(addr, length, flags, nxt):
    return struct.pack('<QIHH', addr, length, flags, nxt)


def vu_blk_req(slot, type_, sector, data_len, to_guest):
    """Request @slot: header, data, status descriptors 3*slot.. 3*slot+2."""
    hdr = 0x4000 + slot * 0x1000
    head = slot * 3
    out = vu_mem(hdr, struct.pack('<IIQ', type_, 0, sector))
    descs = vu_desc(hdr, 16, VRING_NEXT, head + 1)
    if data_len:
        descs += vu_desc(hdr + 0x100, data_len,
                         VRING_NEXT | (VRING_WRITE if to_guest else 0),
                         head + 2)
    descs += vu_desc(hdr + 0x800, 1, VRING_WRITE, 0)
    return out + vu_mem(VU_DESC + head * 16, descs)


def vu_avail(heads):
    return vu_mem(VU_AVAIL, struct.pack('<HH', 0, len(heads)) +
                  b''.join(struct.pack('<H', h) for h in heads))


def vhost_user_seeds():
    write('fuzz-vhost-user', 'read-write-flush',
          vu_setup(4) + vu_blk_req(0, BLK_IN, 0, 512, True)
          + vu_blk_req(1, BLK_OUT, 8, 512, False)
          + vu_blk_req(2, BLK_FLUSH, 0, 0, False) + vu_avail([0, 3, 6])
          + vu_kick(0))
    write('fuzz-vhost-user', 'get-id-discard',
          vu_setup(4) + vu_blk_req(0, BLK_GET_ID, 0, 20, True)
          + vu_blk_req(1, BLK_DISCARD, 0, 16, False)
          + vu_mem(0x5100, struct.pack('<QII', 0, 8, 0)) + vu_avail([0, 3])
          + vu_kick(0))
    write('fuzz-vhost-user', 'config-and-vring-base',
          vu_setup(4)
          + vu_msg(24, 0x09, struct.pack('<III', 0, 60, 0) + bytes(60))
          + vu_msg(25, 0x09, struct.pack('<III', 20, 1, 0) + b'\x00')
          + vu_msg(11, 0x01, struct.pack('<II', 0, 0)))
    # what a dead back-end left in the inflight buffer (set-up puts it at
    # 0x8000 of guest memory): requests 0 and 1 in flight, 1 the older
    inflight = struct.pack('<QHHHH', 0, 1, 16, 0, 0)
    entries = bytearray(16 * 16)
    entries[0:16] = struct.pack('<B5xHQ', 1, 0, 5)
    entries[48:64] = struct.pack('<B5xHQ', 1, 0, 2)
    write('fuzz-vhost-user', 'inflight-resubmit',
          vu_blk_req(0, BLK_OUT, 0, 512, False)
          + vu_blk_req(1, BLK_IN, 8, 512, True) + vu_avail([0, 3])
          + vu_mem(0x8000, inflight + bytes(entries)) + vu_setup(4)
          + vu_kick(0))
    # a second region (the memfd's first half again, higher up) added
    # and removed (ADD_MEM_REG, REM_MEM_REG) with the ring running, then
    # a request
    region = struct.pack('<QQQQQ', 0, 0x100000, 32768, 0x7f0000100000, 0)
    write('fuzz-vhost-user', 'mem-slots',
          vu_setup(4) + vu_msg(37, 0x09, region) + vu_msg(38, 0x09, region)
          + vu_blk_req(0, BLK_OUT, 0, 512, False) + vu_avail([0])
          + vu_kick(0))
    write('fuzz-vhost-user', 'messages',
          vu_msg(1, 1) + vu_msg(15, 1) + vu_msg(16, 1, struct.pack('<Q', 0x209))
          + vu_msg(3, 9) + vu_msg(2, 9, struct.pack('<Q', (1 << 32) | (1 << 30)))
          + vu_msg(17, 1)
          + vu_msg(5, 9, struct.pack('<II', 1, 0)
                   + struct.pack('<QQQQ', 0, 65536, 0x7f0000000000, 0))
          + vu_msg(40, 1) + vu_msg(34, 1))


if __name__ == '__main__':
    options_seeds()
    blkdebug_seeds()
    qmp_seeds()
    nbd_seeds()
    nbd_tls_seeds()
    vhost_user_seeds()
