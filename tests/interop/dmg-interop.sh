#!/usr/bin/env bash
# Apple disk images (dmg, UDIF) against QEMU 7.2: reading and refusing.
#
#   tests/interop/dmg-interop.sh BUILD_DIR
#
# Images made here (dmg-make.py: zlib, raw, zero, ignore and comment
# chunks over several partitions) and QEMU's own sample give qemu-img's
# info (human and JSON), map and bytes converted to raw; qemu-io's reads
# pass on qblock-io, and a read of sectors no chunk holds fails as it does
# in qemu-io.  bzip2 chunks (which Debian's QEMU reads only with a module
# qemu-block-extra does not ship) are compared with the disk the generator
# wrote.  A read-write open, create and check are refused as by QEMU.
# The same with the tables in a resource fork instead of the property
# list (images before Mac OS X 10.2) or in both: the fork wins and its map
# is not read, as in QEMU.  Hostile tables (LZFSE, an unknown type,
# overlapping chunks, a chunk past the end of the file or longer than 64
# MiB, no trailer, a property list past the file) and hostile forks (past
# the trailer, data past the fork, a resource past the data or empty, a
# mish block that cannot hold its count) are refused at open with a
# message that names them, and the forks QEMU refuses too.
# Prints "ok NAME" / "FAIL NAME", ends with "N passed, N failed, N
# skipped"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: dmg-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
# same and refused
. "$here/vmdk-lib.bash"

make_dmg() { python3 "$here/dmg-make.py" "$@"; }
# QEMU's dmg asks for its bzip2 and LZFSE modules, which Debian does not
# ship, on every open: those lines are not its answer
qemu_quiet() { "$@" 2>&1 | grep -v '^qemu: module block-block-dmg-'; }
squash() {
    sed 's/^qemu-\(img\|io\): //; s/^qblock-\(img\|io\): //;
         s/[0-9.]* [KMG]\?i\?B\/sec and [0-9.]* ops\/sec/X/; s/[0-9.]* sec/X/'
}
same_io() {
    local name=$1 img=$2 q b
    shift 2
    q=$(qemu_quiet "$Q_IO" -r -f dmg "$@" "$img" | squash)
    b=$("$QB_IO" -r -f dmg "$@" "$img" 2>&1 | grep -v '^qblock-io: dmg: ' |
        squash)
    if [ "$q" = "$b" ]; then
        ok "$name"
    else
        fail "$name" "$(diff <(echo "$q") <(echo "$b"))"
    fi
}

# ---- reading, against qemu-img ----
# each: where the tables are (the property list, a resource fork or
# both), then the chunks
for spec in "plist zlib:8 zero:4 raw:3 zlib:2 comment ignore:2" \
            "plist raw:1" "plist zlib:300 zlib:1 zero:2000 raw:17" \
            "plist ignore:5 zlib:64" \
            "rsrc zlib:8 zero:4 raw:3 zlib:2 comment ignore:2" \
            "rsrc raw:1" "rsrc zlib:300 zlib:1 zero:2000" \
            "both zlib:8 zero:4 raw:3 zlib:2"; do
    rm -f t.dmg
    # shellcheck disable=SC2086 # the words are the generator's chunks
    make_dmg --tables=${spec%% *} t.dmg t.raw ${spec#* }
    same "info: $spec" sh -c "$Q_IMG info t.dmg 2>&1 | grep -v '^qemu: module'" -- \
        "$QB_IMG" info t.dmg
    same "info --output=json: $spec" \
        sh -c "$Q_IMG info --output=json t.dmg 2>&1 | grep -v '^qemu: module'" -- \
        "$QB_IMG" info --output=json t.dmg
    same "map: $spec" \
        sh -c "$Q_IMG map --output=json -f dmg t.dmg 2>&1 | grep -v '^qemu: module'" -- \
        "$QB_IMG" map --output=json -f dmg t.dmg
    qemu_quiet "$Q_IMG" convert -f dmg -O raw t.dmg q.raw >/dev/null
    "$QB_IMG" convert -f dmg -O raw t.dmg b.raw
    check "convert: $spec: qemu-img's bytes" cmp -s q.raw b.raw
    check "convert: $spec: the generator's disk" cmp -s b.raw t.raw
    same_io "reads: $spec" t.dmg -c 'read -v 3k 3k' -c 'read -v 7k 2k'
done
make_dmg --tables=rsrc t.dmg t.raw zlib:8 bzip2:5 raw:3
check "bzip2 chunks in a fork: the generator's disk" \
    quiet "$QB_IMG" compare -f dmg -F raw t.dmg t.raw

# poke BASE OFFSET FORMAT VALUE: a field of t.dmg rewritten in place, at
# OFFSET from BASE: koly (the trailer), fork (the resource fork's start)
# or data (the fork's resource data)
poke() {
    python3 - t.dmg "$@" <<'PY'
import struct, sys
path, base, fmt = sys.argv[1], sys.argv[2], '>' + sys.argv[4]
off, value = int(sys.argv[3], 0), int(sys.argv[5], 0)
d = bytearray(open(path, 'rb').read())
koly = len(d) - 512
fork = struct.unpack_from('>Q', d, koly + 0x28)[0]
at = {'koly': koly, 'fork': fork,
      'data': fork + struct.unpack_from('>I', d, fork)[0]}[base]
struct.pack_into(fmt, d, at + off, value)
open(path, 'wb').write(bytes(d))
PY
}
# the fork wins: a property list QEMU would refuse (its blkx key renamed)
# is not read when a fork is there, as in QEMU
make_dmg --tables=both t.dmg t.raw zlib:8 raw:3 zlib:2
python3 - <<'PY'
d = open('t.dmg', 'rb').read()
open('t.dmg', 'wb').write(d.replace(b'<key>blkx</key>', b'<key>blkz</key>'))
PY
same_io "a fork wins over the property list" t.dmg -c 'read -v 0 6k'
# the map is not read (nor are types and ids), as in QEMU
make_dmg --tables=rsrc t.dmg t.raw zlib:8 raw:3 zlib:2
poke fork 4 I 0xfffffff0
poke fork 12 I 0xfffffff0
same_io "a fork's map is not read" t.dmg -c 'read -v 0 6k'
# a fork of no mish block: no chunk, every read fails (QEMU's crashes)
make_dmg --tables=rsrc t.dmg t.raw zlib:8
poke data 4 I 0x6d697369
"$QB_IO" -r -f dmg -c 'read 0 512' t.dmg > out.txt 2>&1
check "a fork of no mish block: reads fail" grep -q 'lies in no chunk' out.txt

make_dmg t.dmg t.raw zlib:8 zero:4 raw:3 zlib:2
same_io "reads across chunks" t.dmg -c 'read -v 3k 3k' -c 'read -v 7k 2k'
same_io "a pattern read of a zero chunk" t.dmg -c 'read -P 0 4k 2k'
same_io "a read past the end" t.dmg -c 'read 8704 512'
make_dmg t.dmg t.raw zlib:8 gap:4 raw:3
same_io "a read of sectors no chunk holds fails" t.dmg \
    -c 'read 0 4k' -c 'read 4k 2k' -c 'read -v 6k 1k'

# bzip2 chunks: the generator's disk is the reference
make_dmg t.dmg t.raw zlib:8 bzip2:5 raw:3 bzip2:200
check "bzip2 chunks: the generator's disk" \
    quiet "$QB_IMG" compare -f dmg -F raw t.dmg t.raw

# QEMU's sample image
sample=${UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/qblock}
sample=$sample/qemu-iotests-7.2/sample_images/simple-dmg.dmg.bz2
if [ -f "$sample" ]; then
    bzcat "$sample" > sample.dmg
    same "QEMU's sample: info" \
        sh -c "$Q_IMG info sample.dmg 2>&1 | grep -v '^qemu: module'" -- \
        "$QB_IMG" info sample.dmg
    qemu_quiet "$Q_IMG" convert -f dmg -O raw sample.dmg q.raw >/dev/null
    "$QB_IMG" convert -f dmg -O raw sample.dmg b.raw
    check "QEMU's sample: qemu-img's bytes" cmp -s q.raw b.raw
else
    skip "QEMU's sample image" "the upstream tests are not fetched ($sample)"
fi

# ---- refusals: the driver only reads ----
make_dmg t.dmg t.raw zlib:8
refused "read-write open refused" "Image is read-only" \
    "$QB_IO" -f dmg -c 'read 0 512' t.dmg
refused "create refused" "Format driver 'dmg' does not support image creation" \
    "$QB_IMG" create -f dmg x.dmg 1M
refused "check refused" "This image format does not support checks" \
    "$QB_IMG" check -f dmg t.dmg

# ---- hostile tables ----
make_dmg t.dmg t.raw zlib:2 lzfse:2
refused "an LZFSE chunk" "is LZFSE-compressed" \
    "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg
# poke_chunk FIELD VALUE: a field of the first chunk of the first mish
# block (type, sector, count, offset, length) set, the base64 rewritten
poke_chunk() {
    python3 - t.dmg "$@" <<'PY'
import base64, re, struct, sys
path, field, value = sys.argv[1], sys.argv[2], int(sys.argv[3], 0)
d = bytearray(open(path, 'rb').read())
koly = len(d) - 512
po, pl = struct.unpack('>QQ', d[koly + 0xd8:koly + 0xe8])
xml = d[po:po + pl].decode()
m = re.search(r'<data>(.*?)</data>', xml, re.S)
mish = bytearray(base64.b64decode(''.join(m.group(1).split())))
at = 204 + {'type': 0, 'sector': 8, 'count': 16, 'offset': 24,
            'length': 32}[field]
fmt = '>I' if field == 'type' else '>Q'
struct.pack_into(fmt, mish, at, value)
xml = xml[:m.start(1)] + base64.b64encode(bytes(mish)).decode() + \
      xml[m.end(1):]
plist = xml.encode()
tail = bytearray(d[koly:])
struct.pack_into('>Q', tail, 0xe0, len(plist))
open(path, 'wb').write(bytes(d[:po]) + plist + bytes(tail))
PY
}
make_dmg t.dmg t.raw zlib:2 zlib:2
poke_chunk type 0x12345678
refused "an unknown chunk type" "has the unknown type 0x12345678" \
    "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg
make_dmg t.dmg t.raw zlib:2 raw:2 zlib:2
poke_chunk sector 3
refused "overlapping chunks" "overlaps the one before it" \
    "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg
make_dmg t.dmg t.raw zlib:2 zlib:2
poke_chunk offset 0x100000
refused "a chunk past the end of the file" "lies past the end of the file" \
    "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg
make_dmg t.dmg t.raw zlib:2 zlib:2
poke_chunk length 0x10000000
refused "a chunk longer than 64 MiB" "is larger than max" \
    "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg
make_dmg t.dmg t.raw zlib:2 zlib:2
poke_chunk count 0x1000000
refused "a chunk of more than 64 MiB of sectors" "is larger than max" \
    "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg
make_dmg t.dmg t.raw zlib:2 zlib:2
poke_chunk length 3
refused "a stream that does not inflate fails the read" \
    "does not decompress to its 2 sectors" \
    "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg
head -c 4096 /dev/zero > t.dmg
refused "no trailer" "no koly trailer" \
    "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg
make_dmg t.dmg t.raw zlib:2
python3 - <<'PY'
import struct
d = bytearray(open('t.dmg', 'rb').read())
struct.pack_into('>Q', d, len(d) - 512 + 0xd8, 1 << 40)
open('t.dmg', 'wb').write(d)
PY
refused "a property list past the file" "lies past the end of the file" \
    "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg

# ---- hostile forks ----
# both_refused NAME WANT: qemu-io refuses to open t.dmg (without a
# crash), and qblock-io too, with a message holding WANT
both_refused() {
    local out rc
    out=$("$Q_IO" -r -f dmg -c 'read 0 512' t.dmg 2>&1)
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] &&
        grep -q "can't open device" <<<"$out"; then
        ok "$1: qemu-io refuses it"
    else
        fail "$1: qemu-io refuses it" "rc $rc: $out"
    fi
    refused "$1" "$2" "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg
}
# fork_case NAME WANT BASE OFFSET FORMAT VALUE: a fork-only image with one
# field poked (see poke), refused by both
fork_case() {
    make_dmg --tables=rsrc t.dmg t.raw zlib:2 zlib:2
    poke "$3" "$4" "$5" "$6"
    both_refused "$1" "$2"
}
fork_case "a fork past the end of the file" "runs past the trailer" \
    koly 0x30 Q 0x10000000000
fork_case "a fork that runs into the trailer" "runs past the trailer" \
    koly 0x30 Q 0x10000
fork_case "a fork shorter than its header" "shorter than its 16-byte header" \
    koly 0x30 Q 8
fork_case "a fork's data offset out of the fork" \
    "lies past the end of the fork" fork 0 I 0x7fffffff
fork_case "a fork's data length out of the fork" \
    "lies past the end of the fork" fork 8 I 0x7fffffff
fork_case "a resource past the fork's data" "runs past the end of the data" \
    data 0 I 0x7fffffff
fork_case "an empty resource" "is empty" data 0 I 0
make_dmg --tables=rsrc t.dmg t.raw zlib:2 zlib:2
python3 - <<'PY'
import struct
d = bytearray(open('t.dmg', 'rb').read())
fork = struct.unpack_from('>Q', d, len(d) - 512 + 0x28)[0]
# the data two bytes longer: the last "resource" has no room for a length
length = struct.unpack_from('>I', d, fork + 8)[0]
struct.pack_into('>I', d, fork + 8, length + 2)
open('t.dmg', 'wb').write(bytes(d))
PY
both_refused "a resource with no room for its length" "no room for its length"
make_dmg t.dmg t.raw zlib:2
poke koly 0xe0 Q 0
both_refused "neither a property list nor a fork" \
    "neither a property list nor a resource fork"
# QEMU reads these; qblock refuses them
make_dmg --tables=rsrc t.dmg t.raw zlib:2 zlib:2
poke data 204 I 0x10000000
refused "a fork's mish block that cannot hold its chunk count" \
    "cannot hold its 268435456 chunks" "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg
# fork data of 65 MiB (a sparse resource that is no mish block)
python3 - <<'PY'
import struct
big = 65 << 20
fork = struct.pack('>IIIII', 16, 16 + 4 + big, 4 + big, 0, big)
with open('t.dmg', 'wb') as f:
    f.write(fork)
    f.seek(16 + 4 + big)
    koly = struct.pack('>IIII', 0x6b6f6c79, 4, 512, 1) + bytes(24)
    koly += struct.pack('>QQ', 0, 16 + 4 + big)
    f.write(koly.ljust(512, b'\0'))
PY
refused "a fork's data of more than 64 MiB" "is larger than 64 MiB" \
    "$QB_IO" -r -f dmg -c 'read 0 512' t.dmg

summary
