#!/usr/bin/env bash
# Reading VMDK images against QEMU 7.2 (writing and creating them:
# vmdk-write-interop.sh).
#
#   tests/interop/vmdk-interop.sh BUILD_DIR
#
# qemu-img writes one disk (data, zeroes, holes) in every subformat it
# has (monolithicSparse, monolithicFlat, twoGbMaxExtentSparse and -Flat,
# streamOptimized), a sparse one with zeroed grains and a snapshot delta
# on a base; the stream-optimized one is also rewritten with its grain
# directory in a footer, as VMware writes it; for each, qblock-img info (human and JSON) and map
# print what qemu-img prints, qblock reads the bytes qemu-img reads, and
# a qcow2 that qblock-img converts it to holds the same disk for
# qemu-img.  Then what qblock refuses, each with a message and without
# a crash: VMware's stream layout opened read-write, and hostile images (a truncated
# file, headers with absurd sizes, a corrupted compressed grain, a grain
# marker for another sector, a descriptor naming a missing file or an
# unsupported extent type; ESX sparse extents: vmdk-cowd-interop.sh).
# Prints "ok NAME" / "FAIL NAME", ends with "N passed, N failed, N
# skipped"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: vmdk-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
. "$here/vmdk-lib.bash"

# the disk: random data, a run of one byte, scattered sectors, zeroes
head -c $((64 << 20)) /dev/zero > src.raw
dd if=/dev/urandom of=src.raw bs=1M count=1 conv=notrunc 2>/dev/null
qemu-io -f raw -c 'write -P 0xab 5M 300k' -c 'write -P 0x5c 40M 3584' \
    -c 'write -P 0x11 64508k 4k' src.raw >/dev/null
subformats="monolithicSparse monolithicFlat twoGbMaxExtentSparse
            twoGbMaxExtentFlat streamOptimized"
for sub in $subformats; do
    qemu-img convert -f raw -O vmdk -o subformat=$sub src.raw $sub.vmdk
done
# zeroed grains: QEMU marks a grain written as zeroes in its table
qemu-img create -q -f vmdk -o zeroed_grain=on zeroed.vmdk 64M
qemu-io -f vmdk -c 'write -P 0x21 0 256k' -c 'write -z 64k 64k' \
    -c 'write -z 1M 1M' zeroed.vmdk >/dev/null
# VMware's stream-optimized layout: the header says "directory at the
# end", a footer marker, the footer (the header with the directory's
# place) and an end-of-stream marker close the file
python3 - <<'EOF'
import struct
d = bytearray(open('streamOptimized.vmdk', 'rb').read())
footer = bytes(d[:512])
struct.pack_into('<Q', d, 56, 0xffffffffffffffff)
marker = struct.pack('<QII', 1, 0, 3).ljust(512, b'\0')
d += marker + footer + bytes(512)
open('footer.vmdk', 'wb').write(d)
EOF
# a snapshot: the delta names its base in the descriptor
cp monolithicSparse.vmdk base.vmdk
qemu-img create -q -f vmdk -b base.vmdk -F vmdk delta.vmdk
qemu-io -f vmdk -c 'write -P 0x77 64k 64k' -c 'write -P 0x88 63M 4k' \
    delta.vmdk >/dev/null

for img in $subformats footer zeroed delta; do
    f=$img.vmdk
    same "$img: info" qemu-img info "$f" -- "$QB_IMG" info "$f"
    same "$img: info --output=json" qemu-img info --output=json "$f" -- \
        "$QB_IMG" info --output=json "$f"
    same "$img: map --output=json" qemu-img map --output=json "$f" -- \
        "$QB_IMG" map --output=json "$f"
    same "$img: check" qemu-img check "$f" -- "$QB_IMG" check "$f"
    qemu-img convert -f vmdk -O raw "$f" "$img.ref"
    check "$img: qblock reads what qemu-img reads" \
        quiet "$QB_IMG" compare -f vmdk -F raw "$f" "$img.ref"
    check "$img: converted to qcow2 by qblock-img, the same for qemu-img" \
        quiet sh -c "'$QB_IMG' convert -f vmdk -O qcow2 '$f' '$img.qcow2' &&
                     qemu-img compare -f vmdk -F qcow2 '$f' '$img.qcow2'"
    # the copy engine's writes start in order: the layout is qemu-img's
    check "$img: that qcow2 is byte-identical to qemu-img's" \
        quiet sh -c "qemu-img convert -f vmdk -O qcow2 '$f' '$img.q.qcow2' &&
                     cmp '$img.qcow2' '$img.q.qcow2'"
done
check "monolithicSparse: qblock-io reads the pattern" \
    quiet "$QB_IO" -r -f vmdk -c 'read -P 0xab 5M 300k' \
    -c 'read -P 0x5c 40M 3584' -c 'read -P 0 41M 1M' monolithicSparse.vmdk
check "streamOptimized: a read across grains of compressed data" \
    quiet "$QB_IO" -r -f vmdk -c 'read -P 0xab 5M 300k' \
    -c 'read -P 0x11 64508k 4k' streamOptimized.vmdk
check "delta: its own data over the base's" \
    quiet "$QB_IO" -r -f vmdk -c 'read -P 0x77 64k 64k' \
    -c 'read -P 0xab 5M 300k' delta.vmdk
check "the format is probed" \
    sh -c "'$QB_IMG' info streamOptimized.vmdk | grep -qx 'file format: vmdk'"

# ---- what qblock refuses ----

refused "VMware's stream layout opened read-write" \
    "directory in a footer can only be opened read-only" \
    "$QB_IO" -f vmdk -c 'read 0 512' footer.vmdk
# why: qemu-io writes a grain past the footer, and the file is lost to
# both tools
cp footer.vmdk qfooter.vmdk
qemu-io -f vmdk -c 'write -P 0x33 63M 64k' qfooter.vmdk >/dev/null 2>&1
refused "... which QEMU writes into a file it cannot open" "Invalid footer" \
    "$Q_IMG" info qfooter.vmdk

hostile() {
    cp monolithicSparse.vmdk h.vmdk
    patch h.vmdk "$@"
}

cp monolithicSparse.vmdk h.vmdk
truncate -s 1024 h.vmdk
refused "a truncated sparse file" \
    "File truncated, expecting at least 65536 bytes" "$QB_IMG" info h.vmdk
# both_refuse NAME WANT: qemu-img and qblock-img refuse h.vmdk with WANT
both_refuse() {
    refused "$1" "$2" "$QB_IMG" info h.vmdk
    refused "$1 (qemu-img)" "$2" "$Q_IMG" info h.vmdk
}
hostile 20 Q 3
refused "a grain of 3 sectors" "Unsupported granularity of 3 sectors" \
    "$QB_IMG" info h.vmdk
hostile 20 Q 4096
refused "a grain of 2 MiB" "Unsupported granularity of 4096 sectors" \
    "$QB_IMG" info h.vmdk
hostile 20 Q 0x200001
both_refuse "a grain of 1 GiB and a sector" \
    "Invalid granularity, image may be corrupt"
hostile 44 I 0
both_refuse "no entries per grain table" "L1 entry size is invalid"
hostile 20 Q 0
both_refuse "grains of no sectors" "L1 entry size is invalid"
hostile 44 I 513
both_refuse "513 entries per grain table" "L2 table size too big"
hostile 4 I 7
refused "version 7" "Unsupported VMDK version 7" "$QB_IMG" info h.vmdk
# (QEMU's 32-bit count of entries wraps to 0 here; it then refuses the
# size, "Could not refresh total sector count")
hostile 12 Q 0x7fffffffffffff
refused "a capacity of 2^55 sectors" "L1 size too big" "$QB_IMG" info h.vmdk
hostile 12 Q $((1 << 26))
patch h.vmdk 20 Q 1
patch h.vmdk 44 I 1
both_refuse "a grain directory of 2^26 entries" "L1 size too big"
hostile 12 Q $((1 << 25))
patch h.vmdk 20 Q 1
patch h.vmdk 44 I 1
refused "a grain directory of 2^25 entries that the file does not hold" \
    "Grain directory of 33554432 entries at sector 30 lies past the end" \
    "$QB_IMG" info h.vmdk
hostile 56 Q 0x7fffffffffffffff
refused "a grain directory beyond any file" "Grain directory offset" \
    "$QB_IMG" info h.vmdk
hostile 56 Q 100000
refused "a grain directory past the end of the file" \
    "Grain directory of 2 entries at sector 100000 lies past the end" \
    "$QB_IMG" info h.vmdk
# the first grain table entry of the first table: a grain far away
gt=$(python3 -c "
import struct
d = open('monolithicSparse.vmdk', 'rb').read()
gd = struct.unpack_from('<Q', d, 56)[0]
print(struct.unpack_from('<I', d, gd * 512)[0] * 512)")
hostile "$gt" I 0xfffffff0
out=$("$QB_IO" -r -f vmdk -c 'read 0 64k' h.vmdk 2>&1)
rc=$?
[ "$rc" -lt 128 ] && ok "a grain past the end of the file: no crash" ||
    fail "a grain past the end of the file: no crash" "$out"
out=$("$QB_IMG" check h.vmdk 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && grep -qx "ERROR: cluster offset for sector 0 points \
after EOF" <<<"$out"; then
    ok "check: a grain past the end of the file is a corruption"
else
    fail "check: a grain past the end of the file is a corruption" \
        "exit $rc: $out"
fi

# streamOptimized: the first grain's deflated bytes, then its marker
first=$(python3 -c "
import struct
d = open('streamOptimized.vmdk', 'rb').read()
gd = struct.unpack_from('<Q', d, 56)[0]
gt = struct.unpack_from('<I', d, gd * 512)[0]
print(struct.unpack_from('<I', d, gt * 512)[0] * 512)")
cp streamOptimized.vmdk s.vmdk
patch s.vmdk $((first + 20)) Q 0x0123456789abcdef
refused "a corrupted compressed grain" "does not inflate to a grain" \
    "$QB_IO" -r -f vmdk -c 'read 0 4k' s.vmdk
cp streamOptimized.vmdk s.vmdk
patch s.vmdk "$first" Q 128
refused "a compressed grain for another sector" "is for sector 128, not 0" \
    "$QB_IO" -r -f vmdk -c 'read 0 4k' s.vmdk
cp streamOptimized.vmdk s.vmdk
patch s.vmdk $((first + 8)) I 0x7fffffff
refused "a compressed grain of 2 GiB" "has a size of 2147483647 bytes" \
    "$QB_IO" -r -f vmdk -c 'read 0 4k' s.vmdk

sed 's/monolithicFlat-flat.vmdk/missing-flat.vmdk/' monolithicFlat.vmdk \
    > d.vmdk
refused "a descriptor naming a missing file" "missing-flat.vmdk" \
    "$QB_IMG" info d.vmdk
# (QEMU skips the line: a disk without the extent, or a crash if it was
# the only one)
sed 's/ FLAT / VMFSRDM /' monolithicFlat.vmdk > d.vmdk
refused "an unsupported extent type" "Unsupported extent type 'VMFSRDM'" \
    "$QB_IMG" info d.vmdk
# as QEMU: FLAT gives an offset, VMFS and SPARSE give none
for line in 'RW 8 FLAT "monolithicFlat-flat.vmdk"' \
            'RW 8 VMFS "monolithicFlat-flat.vmdk" 1' \
            'RW 8 SPARSE "monolithicSparse.vmdk" 0'; do
    sed "s/^RW .*/$line/" monolithicFlat.vmdk > d.vmdk
    refused "an extent line $line" "Invalid extent line: $line" \
        "$QB_IMG" info d.vmdk
    refused "... (qemu-img)" "Invalid extent line: $line" \
        "$Q_IMG" info d.vmdk
done
# as QEMU: a sparse extent has its header's size, not its line's
sed 's/^RW .*/RW 2048 SPARSE "monolithicSparse.vmdk"/' monolithicFlat.vmdk \
    > d.vmdk
same "a SPARSE line of another size than the header's" \
    qemu-img info d.vmdk -- "$QB_IMG" info d.vmdk
sed 's/^RW .*/RW 0 FLAT "monolithicFlat-flat.vmdk" 0/' monolithicFlat.vmdk \
    > d.vmdk
refused "an empty extent" "Invalid extent size 0" "$QB_IMG" info d.vmdk
grep -av '^RW ' monolithicFlat.vmdk > d.vmdk
refused "a descriptor without extents" "lists no extent" \
    "$QB_IMG" info d.vmdk
sed 's/^parentCID=.*/parentCID=12345678/' monolithicFlat.vmdk > d.vmdk
refused "a parent without a file name" "no parentFileNameHint" \
    "$QB_IMG" info d.vmdk

summary
