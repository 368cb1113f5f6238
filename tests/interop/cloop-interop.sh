#!/usr/bin/env bash
# cloop (Linux compressed loop) images against QEMU 7.2: reading and
# refusing.
#
#   tests/interop/cloop-interop.sh BUILD_DIR
#
# Images made here (cloop-make.py: zlib blocks of 512 bytes to 1 MiB, an
# empty disk, a block of zeroes, streams of unequal lengths) and QEMU's own
# sample image give the same info (human and JSON), map and the same bytes
# converted to raw as with qemu-img; qemu-io's pattern reads pass on
# qblock-io, across block boundaries.  A read-write open, create, convert
# -O cloop and check are refused as by QEMU.  Hostile headers: each of
# QEMU's refusals (block size, block count, offsets) with QEMU's message; a
# stream that does not inflate fails the read that reaches it, as QEMU's;
# an offset table longer than the file is refused at open (QEMU reads it
# as zeroes and refuses it for its order).  Prints "ok NAME" / "FAIL
# NAME", ends with "N passed, N failed, N skipped"; exits 77 without
# qemu-img.
set -u

build=$(cd "${1:?usage: cloop-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
# same and refused
. "$here/vmdk-lib.bash"

make_cloop() { python3 "$here/cloop-make.py" "$@"; }
# poke FILE OFFSET HEX [OFFSET HEX]...: bytes written over the file's
poke() {
    python3 - "$@" <<'EOF2'
import sys
path, args = sys.argv[1], sys.argv[2:]
with open(path, 'r+b') as f:
    for off, hexbytes in zip(args[::2], args[1::2]):
        f.seek(int(off))
        f.write(bytes.fromhex(hexbytes))
EOF2
}

# the same answer from both tools, tool names and file names aside
same_io() {
    local name=$1 img=$2 q b
    shift 2
    q=$("$Q_IO" -r -f cloop "$@" "$img" 2>&1 | sed 's/^qemu-io: //;
        s/[0-9.]* [KMG]\?i\?B\/sec and [0-9.]* ops\/sec/X/; s/[0-9.]* sec/X/')
    b=$("$QB_IO" -r -f cloop "$@" "$img" 2>&1 | sed 's/^qblock-io: //;
        s/[0-9.]* [KMG]\?i\?B\/sec and [0-9.]* ops\/sec/X/; s/[0-9.]* sec/X/')
    if [ "$q" = "$b" ]; then
        ok "$name"
    else
        fail "$name" "$(diff <(echo "$q") <(echo "$b"))"
    fi
}

# reading: images of every block size, an empty disk, a last odd block
for spec in "512 9" "4096 3" "65536 5" "1048576 2" "65536 0" "131072 1"; do
    set -- $spec
    img=c-$1-$2.cloop
    make_cloop "$img" "$1" "$2"
    same "info $spec" "$Q_IMG" info "$img" -- "$QB_IMG" info "$img"
    same "info --output=json $spec" "$Q_IMG" info --output=json "$img" -- \
        "$QB_IMG" info --output=json "$img"
    same "map $spec" "$Q_IMG" map --output=json "$img" -- \
        "$QB_IMG" map --output=json "$img"
    "$Q_IMG" convert -O raw "$img" q.raw
    "$QB_IMG" convert -O raw "$img" b.raw
    check "convert to raw $spec: qemu-img's bytes" cmp -s q.raw b.raw
    check "compare with qemu-img's raw $spec" \
        quiet "$QB_IMG" compare -f cloop -F raw "$img" q.raw
done

# pattern reads: block 0 holds 7 * sector-in-block % 251 ..., block 1
# zeroes; reads across a block's end and inside one
img=c-65536-5.cloop
same_io "read -P of block 0's first sector" "$img" -c "read -P 0 0 512"
same_io "read -P 0 of the zero block" "$img" -c "read -P 0 65536 65536"
same_io "read across blocks 1 and 2" "$img" -c "read -v 131000 1200"
same_io "read of the last sector" "$img" -c "read -v 327168 512"
same_io "read past the end" "$img" -c "read 327680 512"
img=c-512-9.cloop
same_io "read of every 512-byte block at once" "$img" -c "read -v 0 4608"

# QEMU's sample image, when the upstream tests are at hand
sample=${UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/qblock}
sample=$sample/qemu-iotests-7.2/sample_images/simple-pattern.cloop.bz2
if [ -f "$sample" ]; then
    bzcat "$sample" > sample.cloop
    same "info of QEMU's sample" "$Q_IMG" info sample.cloop -- \
        "$QB_IMG" info sample.cloop
    "$Q_IMG" convert -O raw sample.cloop q.raw
    "$QB_IMG" convert -O raw sample.cloop b.raw
    check "QEMU's sample converted to qemu-img's bytes" cmp -s q.raw b.raw
else
    skip "QEMU's sample image" "the upstream tests are not fetched ($sample)"
fi

# refusals: the driver only reads
img=c-4096-3.cloop
refused "read-write open refused" "Image is read-only" \
    "$QB_IO" -f cloop -c "read 0 512" "$img"
q=$("$Q_IO" --image-opts -c "read -P 0 0 512" \
    "driver=cloop,file.filename=$img,auto-read-only=on" 2>&1)
b=$("$QB_IO" --image-opts -c "read -P 0 0 512" \
    "driver=cloop,file.filename=$img,auto-read-only=on" 2>&1)
if [ "${q#qemu-io: }" = "${b#qblock-io: }" ]; then
    ok "auto-read-only: as qemu-io (${b#qblock-io: })"
else
    fail "auto-read-only: as qemu-io" "qemu-io: $q" "qblock-io: $b"
fi
refused "create refused" "Format driver 'cloop' does not support image creation" \
    "$QB_IMG" create -f cloop x.cloop 1M
refused "convert -O cloop refused" \
    "Format driver 'cloop' does not support image creation" \
    "$QB_IMG" convert -O cloop "$img" y.cloop
refused "check refused" "This image format does not support checks" \
    "$QB_IMG" check -f cloop "$img"

# hostile headers: QEMU's messages, word for word
hostile() {
    local name=$1
    shift
    make_cloop h.cloop 65536 5
    poke h.cloop "$@"
    same_io "hostile: $name" h.cloop -c "read 0 512"
}
hostile "block size not a multiple of 512" 128 "00000201"
hostile "block size zero" 128 "00000000"
hostile "block size over 64 MiB" 128 "fffffe00"
hostile "block count whose offsets overflow" 132 "ffffffff"
hostile "more than 512 MiB of offsets" 132 "04000001"
hostile "offsets decreasing" 136 "00000000ffffffff" 144 "00000000fffe0000"
hostile "a stream longer than any block's" 136 "0000000000000000" \
    144 "ffffffffffffffff"
hostile "a last offset far past the file" 176 "00000000ffff0000"

# a stream that does not inflate, or that the file cuts short, fails the
# read that reaches it, as QEMU's; qblock names the block
broken() {
    local name=$1 q b
    q=$("$Q_IO" -r -f cloop -c "read 0 512" h.cloop 2>&1)
    b=$("$QB_IO" -r -f cloop -c "read 0 512" h.cloop 2>&1)
    if [ "$q" = "read failed: Input/output error" ] &&
       grep -qx "read failed: Input/output error" <<<"$b" &&
       grep -q "^qblock-io: cloop: block 0 (.*) does not inflate" <<<"$b"; then
        ok "$name"
    else
        fail "$name" "qemu-io: $q" "qblock-io: $b"
    fi
}
make_cloop h.cloop 65536 1
poke h.cloop 190 "deadbeefdeadbeef"
broken "a stream that does not inflate"
make_cloop h.cloop 65536 1
truncate -s -100 h.cloop
broken "a stream that the end of the file cuts short"

make_cloop h.cloop 512 4
poke h.cloop 132 "00100000"
refused "an offset table longer than the file" \
    "image file is truncated: its 1048577 offsets end past its" \
    "$QB_IO" -r -f cloop -c "read 0 512" h.cloop

summary
