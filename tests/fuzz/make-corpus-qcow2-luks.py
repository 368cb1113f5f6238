#!/usr/bin/env python3
"""Writes luks-aes128-cbc-1k.qcow2, the LUKS-encrypted seed of fuzz-qcow2.

QEMU reserves the key material of all eight key slots in the image, about
500 KiB for the smallest key (16 bytes x 4000 stripes each), over
fuzz-qcow2's longest input (128 KiB, tests/fuzz/run.sh).  Both QEMU and
qblock require 4000 stripes in every slot, active or not, but read the
key material of active slots only, and check the slots' places against
the LUKS header's payload offset, not against the area the qcow2 header
extension gives.  So this script:

  1. has the real qemu-img create a 1 MiB qcow2 (1 KiB clusters and
     8-bit refcounts, so that one refcount block covers it all;
     encrypt.format=luks, aes-128 cbc-plain64, passphrase "fuzz", the
     harness's secret);
  2. re-keys slot 0, the one active slot, and the master key digest with
     1 PBKDF2 iteration each (qemu-img writes at least 1000), so that
     each run of the harness unlocks the image in microseconds: the slot's
     key material is decrypted with the old slot key, the master key
     merged from its stripes and checked against the old digest, then the
     material is encrypted again under the new slot key;
  3. shrinks the LUKS area (the header extension's length) to the header
     and slot 0's key material, drops the clusters past it from the
     refcount block and truncates the file there;
  4. has qemu-io write two clusters of data (the allocation then goes
     where the area's tail was) and qemu-img check the result.

The result opens in qemu-io and qblock-io with the secret, passes
qemu-img check, and is 75 KiB (76,800 bytes).

Usage: make-corpus-qcow2-luks.py [OUT_DIR]   (default: corpus/fuzz-qcow2)
"""
import hashlib
import os
import struct
import subprocess
import sys
import tempfile

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

PASSPHRASE = b"fuzz"            # tests/fuzz/fuzz-qcow2.c's secret
CRYPTO_EXT = 0x0537be77         # qcow2's full disk encryption header ext
SECTOR = 512
STRIPES = 4000
MAX_LEN = 131072                # fuzz-qcow2's -max_len
NAME = "luks-aes128-cbc-1k.qcow2"


def sh(*args):
    # QEMU 7.2 may fail to calibrate PBKDF2 on a loaded machine ("Unable
    # to get accurate CPU usage"): its bug, so try again
    for _ in range(10):
        r = subprocess.run(args, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode == 0:
            return
        if "accurate CPU usage" not in r.stderr:
            break
    sys.exit("%s failed: %s" % (args[0], r.stderr))


def cbc_plain64(key, data, encrypt):
    """AES-CBC sector by sector, the sector number (LE) as IV."""
    out = b""
    for i in range(0, len(data), SECTOR):
        iv = struct.pack("<Q", i // SECTOR) + bytes(8)
        c = Cipher(algorithms.AES(key), modes.CBC(iv))
        op = c.encryptor() if encrypt else c.decryptor()
        out += op.update(data[i:i + SECTOR]) + op.finalize()
    return out


def af_merge(material, key_len):
    """LUKS1's anti-forensic merge with sha256 (keys up to 32 bytes)."""
    d = bytes(key_len)
    for i in range(STRIPES - 1):
        s = material[i * key_len:(i + 1) * key_len]
        d = bytes(a ^ b for a, b in zip(d, s))
        d = hashlib.sha256(struct.pack(">I", 0) + d).digest()[:key_len]
    last = material[(STRIPES - 1) * key_len:STRIPES * key_len]
    return bytes(a ^ b for a, b in zip(d, last))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz-qcow2")
    tmp = tempfile.mkdtemp()
    img = os.path.join(tmp, NAME)
    sec = "secret,id=sec0,data=" + PASSPHRASE.decode()
    sh("qemu-img", "create", "-q", "-f", "qcow2", "--object", sec, "-o",
       "cluster_size=1024,refcount_bits=8,encrypt.format=luks,"
       "encrypt.key-secret=sec0,encrypt.cipher-alg=aes-128,encrypt.cipher-mode=cbc,"
       "encrypt.ivgen-alg=plain64,encrypt.hash-alg=sha256,"
       "encrypt.iter-time=10", img, "1M")
    f = bytearray(open(img, "rb").read())

    # the crypto header extension: where the LUKS area is
    ext = struct.unpack(">I", f[100:104])[0]    # header_length
    area_off = None
    while ext + 8 <= len(f):
        typ, ln = struct.unpack(">II", f[ext:ext + 8])
        if typ == 0:
            break
        if typ == CRYPTO_EXT:
            area_off, _ = struct.unpack(">QQ", f[ext + 8:ext + 24])
            ext_pos = ext + 8
        ext += 8 + (ln + 7) // 8 * 8
    assert area_off, "no crypto header extension"

    h = area_off
    assert f[h:h + 6] == b"LUKS\xba\xbe"
    key_len = struct.unpack(">I", f[h + 108:h + 112])[0]
    assert key_len == 16
    mk_digest = bytes(f[h + 112:h + 132])
    mk_salt = bytes(f[h + 132:h + 164])
    mk_iters = struct.unpack(">I", f[h + 164:h + 168])[0]
    slot = h + 208
    active, iters = struct.unpack(">II", f[slot:slot + 8])
    salt = bytes(f[slot + 8:slot + 40])
    key_off, stripes = struct.unpack(">II", f[slot + 40:slot + 48])
    assert active == 0x00AC71F3 and stripes == STRIPES
    m_off = h + key_off * SECTOR
    m_len = key_len * STRIPES                   # 64000: 125 whole sectors

    # 2. slot 0 and the digest with 1 iteration
    old_key = hashlib.pbkdf2_hmac("sha256", PASSPHRASE, salt, iters, key_len)
    split = cbc_plain64(old_key, bytes(f[m_off:m_off + m_len]), False)
    master = af_merge(split, key_len)
    assert hashlib.pbkdf2_hmac("sha256", master, mk_salt, mk_iters,
                               20) == mk_digest, "wrong passphrase?"
    new_key = hashlib.pbkdf2_hmac("sha256", PASSPHRASE, salt, 1, key_len)
    f[m_off:m_off + m_len] = cbc_plain64(new_key, split, True)
    f[slot + 4:slot + 8] = struct.pack(">I", 1)
    f[h + 112:h + 132] = hashlib.pbkdf2_hmac("sha256", master, mk_salt, 1,
                                             20)
    f[h + 164:h + 168] = struct.pack(">I", 1)

    # 3. the area ends after slot 0's material, at a cluster boundary
    cluster = 1 << struct.unpack(">I", f[20:24])[0]
    area_len = (key_off * SECTOR + m_len + cluster - 1) // cluster * cluster
    end = area_off + area_len
    assert end == len(f) or area_off + area_len < len(f)
    f[ext_pos + 8:ext_pos + 16] = struct.pack(">Q", area_len)
    rt_off = struct.unpack(">Q", f[48:56])[0]
    rb_off = struct.unpack(">Q", f[rt_off:rt_off + 8])[0]
    assert struct.unpack(">I", f[96:100])[0] == 3       # 8-bit refcounts
    for c in range(end // cluster, len(f) // cluster):
        # everything past the area is the area's (qemu-img allocates it
        # last), and one refcount block covers the whole 1 MiB image
        assert c < cluster
        f[rb_off + c] = 0
    del f[end:]
    with open(img, "wb") as o:
        o.write(f)

    # 4. data, allocated past the area, where qemu-io now finds room
    opts = "driver=qcow2,encrypt.key-secret=sec0,file.filename=" + img
    sh("qemu-io", "--object", sec, "--image-opts", "-c",
       "write -P 0x5a 0 1k", "-c", "write -P 0xa5 512k 1k", opts)
    sh("qemu-img", "check", "-q", "--object", sec, "--image-opts", opts)
    f = open(img, "rb").read()
    assert len(f) <= MAX_LEN, "%d bytes" % len(f)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, NAME), "wb") as o:
        o.write(f)
    print("%s: %d bytes" % (NAME, len(f)))


if __name__ == "__main__":
    main()
