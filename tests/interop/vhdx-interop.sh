#!/usr/bin/env bash
# VHDX images against QEMU 7.2: reading, writing, creating.
#
#   tests/interop/vhdx-interop.sh BUILD_DIR
#
# qemu-img and qemu-io write VHDX images of every kind QEMU makes
# (dynamic with its default, 1 MiB and 256 MiB blocks, block_state_zero
# off, fixed, a 4 MiB log, a size that is not a whole block, a 5 GiB disk
# whose BAT has a sector bitmap entry) holding data, zeroes and holes; for
# each, qblock-img info (human and JSON) and check print what qemu-img
# prints, map refuses as qemu-img's does (QEMU's driver gives no
# offsets), qblock reads the bytes qemu-img reads, and convert to raw and
# qcow2 gives qemu-img's bytes.
#
# The log: a dirty log (the header names the GUID of a valid log entry)
# is refused read-only with QEMU's message; qblock-img check -r all (and
# -r leaks) replays it as qemu-img's does (same output, same file but for
# the random GUIDs), also a log of a zero and a data descriptor
# (fuzz-vhdx's seed); it refuses a log entry that would write into the
# header section (which qemu-img replays, over its header), and a log of
# corrupt entries in bounded time.
#
# Then images edited with vhdx-craft.py (checksums recomputed): a
# physical sector of 4096 bytes and a BAT past the end of the file read
# as QEMU reads them; hostile images are refused by both tools, qblock
# with QEMU's message where QEMU has one, never crashing.
#
# Writing and creating: qblock-img create -f vhdx writes qemu-img's file
# (vhdx-same.py: but for GUIDs, sequence numbers and the creator) for
# every kind and refuses what qemu-img refuses with its messages; the
# same writes through qemu-io and qblock-io on copies of an image give
# the same file, log entries included; images each side wrote are read
# and checked by the other; convert -O vhdx gives qemu-img's file.  A
# crash in the middle (blkdebug fails the BAT's sector write, after the
# log entry holding it) leaves the file QEMU leaves; qemu-img check -r
# all replays ours and qblock-img check -r all QEMU's, a read-write open
# replays as qemu-io's; a crash before the log entry leaves the old BAT.
# Prints "ok NAME" / "FAIL NAME", ends
# with "N passed, N failed, N skipped"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: vhdx-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
. "$here/vmdk-lib.bash"
craft() { python3 "$here/vhdx-craft.py" "$@"; }

# the disk's writes: data, a pattern, a zeroed range, scattered sectors
fill() {
    qemu-io -f vhdx -c 'write -P 0xab 0 1M' -c 'write -P 0x5c 5M 300k' \
        -c 'write -z 9M 1M' -c 'write -P 0x11 40M 3584' "$1" >/dev/null
}
qemu-img create -q -f vhdx dynamic.vhdx 64M && fill dynamic.vhdx
qemu-img create -q -f vhdx -o block_size=1M b1m.vhdx 64M && fill b1m.vhdx
qemu-img create -q -f vhdx -o block_size=256M b256m.vhdx 300M &&
    fill b256m.vhdx
qemu-img create -q -f vhdx -o block_state_zero=off nozero.vhdx 64M &&
    fill nozero.vhdx
qemu-img create -q -f vhdx -o subformat=fixed fixed.vhdx 48M &&
    fill fixed.vhdx
qemu-img create -q -f vhdx -o log_size=4M log4m.vhdx 64M && fill log4m.vhdx
qemu-img create -q -f vhdx odd.vhdx $((50 * 1048576 + 1536)) &&
    fill odd.vhdx
qemu-io -f vhdx -c 'write -P 0x33 50M 1536' odd.vhdx >/dev/null
# 256 MiB blocks: 16 per chunk; block 17 is past the sector bitmap entry
qemu-img create -q -f vhdx -o block_size=256M big.vhdx 5G
qemu-io -f vhdx -c 'write -P 0x42 4352M 64k' -c 'write -P 0x43 4095M 2M' \
    big.vhdx >/dev/null
images="dynamic b1m b256m nozero fixed log4m odd"

for img in $images big; do
    f=$img.vhdx
    same "$img: info" qemu-img info "$f" -- "$QB_IMG" info "$f"
    same "$img: info --output=json" qemu-img info --output=json "$f" -- \
        "$QB_IMG" info --output=json "$f"
    same "$img: check" qemu-img check "$f" -- "$QB_IMG" check "$f"
    same "$img: check --output=json" qemu-img check --output=json "$f" -- \
        "$QB_IMG" check --output=json "$f"
    refused "$img: map (no offsets, as qemu-img)" \
        "File contains external, encrypted or compressed clusters" \
        "$QB_IMG" map "$f"
    same "$img: qblock-io reads what qemu-io reads" \
        qemu-io -r -f vhdx -c 'read -q -v 5M 512' -c 'read -q -v 40M 4k' "$f" -- \
        "$QB_IO" -r -f vhdx -c 'read -q -v 5M 512' -c 'read -q -v 40M 4k' "$f"
done
same "big: block 17, past the sector bitmap entry" \
    qemu-io -r -c 'read -q -v 4352M 1k' -c 'read -q -v 4096M 512' big.vhdx -- \
    "$QB_IO" -r -c 'read -q -v 4352M 1k' -c 'read -q -v 4096M 512' big.vhdx
check "big: reads the pattern written across blocks 15 and 16" \
    quiet "$QB_IO" -r -c 'read -P 0x43 4095M 2M' -c 'read -P 0 4097M 1M' \
    big.vhdx
for img in $images; do
    f=$img.vhdx
    qemu-img convert -f vhdx -O raw "$f" "$img.ref"
    check "$img: convert to raw gives qemu-img's bytes" \
        quiet sh -c "'$QB_IMG' convert -f vhdx -O raw '$f' '$img.raw' &&
                     cmp '$img.raw' '$img.ref'"
    check "$img: convert to qcow2 is byte-identical to qemu-img's" \
        quiet sh -c "'$QB_IMG' convert -f vhdx -O qcow2 '$f' '$img.qcow2' &&
                     qemu-img convert -f vhdx -O qcow2 '$f' '$img.q.qcow2' &&
                     cmp '$img.qcow2' '$img.q.qcow2'"
done
check "probing: no -f needed" \
    quiet sh -c "'$QB_IMG' info dynamic.vhdx | grep -qx 'file format: vhdx'"

# a dirty log: the header names the log GUID of the last valid entry
# that qemu-io's writes left in the log (the BAT update of its last one)
craft_dirty() {
    local guid
    guid=$(python3 -c "
import struct, sys
d = open(sys.argv[1], 'rb').read()
off = struct.unpack_from('<Q', d, 0x10048)[0]
best = None
for pos in range(off, off + struct.unpack_from('<I', d, 0x10044)[0], 4096):
    if d[pos:pos + 4] == b'loge':
        seq = struct.unpack_from('<Q', d, pos + 16)[0]
        if best is None or seq > best[0]:
            best = (seq, d[pos + 32:pos + 48].hex())
print(best[1])" "$1")
    craft "$1" 0x10030:16s=x$guid crc:0x10000:4096 \
        0x20030:16s=x$guid crc:0x20000:4096
}
cp dynamic.vhdx dirty.vhdx && craft_dirty dirty.vhdx
msg="VHDX image file 'dirty.vhdx' opened read-only, but contains a log that needs to be replayed"
refused "a dirty log (qemu-img)" "$msg" qemu-img info dirty.vhdx
refused "a dirty log: refused read-only, QEMU's message" "$msg" \
    "$QB_IMG" info dirty.vhdx
refused "... with QEMU's hint" "qemu-img check -r all 'dirty.vhdx'" \
    "$QB_IMG" info dirty.vhdx
refused "a dirty log: check without -r refused too" "$msg" \
    "$QB_IMG" check dirty.vhdx
cp dirty.vhdx dirty-q.vhdx
same "check -r all replays the log, as qemu-img check -r all" \
    qemu-img check -r all dirty-q.vhdx -- "$QB_IMG" check -r all dirty.vhdx
check "the replayed file is qemu-img's but for GUIDs and checksums" \
    python3 - dirty.vhdx dirty-q.vhdx <<'PY'
import sys
a, b = (bytearray(open(f, 'rb').read()) for f in sys.argv[1:])
for h in (0x10000, 0x20000):
    for x in (a, b):
        x[h + 4:h + 8] = bytes(4)           # checksum
        x[h + 16:h + 48] = bytes(32)        # file and data write GUIDs
sys.exit(a != b)
PY
same "the replayed file: qemu-img check" qemu-img check dirty-q.vhdx -- \
    qemu-img check dirty.vhdx
check "the replayed file: qblock reads the disk" \
    quiet sh -c "'$QB_IMG' convert -O raw dirty.vhdx dirty.raw &&
                 cmp dirty.raw dynamic.ref"
# a log of two descriptors, zero and data (fuzz-vhdx's seed, expanded)
python3 "$here/../fuzz/make-corpus-vhdx.py" seeds
python3 "$here/../fuzz/make-corpus-vhdx.py" --expand seeds/dirty-log \
    two.vhdx
cp two.vhdx two-q.vhdx
same "a zero and a data descriptor: check -r all as qemu-img's" \
    qemu-img check -r all two-q.vhdx -- "$QB_IMG" check -r all two.vhdx
check "... the same file but for GUIDs and checksums" \
    python3 - two.vhdx two-q.vhdx <<'PY'
import sys
a, b = (bytearray(open(f, 'rb').read()) for f in sys.argv[1:])
for h in (0x10000, 0x20000):
    for x in (a, b):
        x[h + 4:h + 8] = bytes(4)
        x[h + 16:h + 48] = bytes(32)
sys.exit(a != b)
PY
same "... and read as qemu-io reads it (blocks 0 and 1 swapped)" \
    qemu-io -r -c 'read -q -v 0 512' -c 'read -q -v 1M 512' two-q.vhdx -- \
    "$QB_IO" -r -c 'read -q -v 0 512' -c 'read -q -v 1M 512' two.vhdx
check "... block 1 now the zeroed one" \
    quiet "$QB_IO" -r -c 'read -P 0 1M 1M' -c 'read -P 0 0 512' two.vhdx
cp dynamic.vhdx leaks.vhdx && craft_dirty leaks.vhdx
cp leaks.vhdx leaks-q.vhdx
same "check -r leaks replays it too, as qemu-img's" \
    qemu-img check -r leaks leaks-q.vhdx -- \
    "$QB_IMG" check -r leaks leaks.vhdx
cp dynamic.vhdx clean.vhdx
check "check -r all on a clean image writes nothing" \
    quiet sh -c "'$QB_IMG' check -r all clean.vhdx && cmp clean.vhdx dynamic.vhdx"
# a log entry whose data descriptor writes into the header section
cp dynamic.vhdx bad.vhdx && craft_dirty bad.vhdx
entry=$(python3 -c "
import struct, sys
d = open(sys.argv[1], 'rb').read()
guid = d[0x10030:0x10040]
off = struct.unpack_from('<Q', d, 0x10048)[0]
for pos in range(off, off + 0x100000, 4096):
    if d[pos:pos + 4] == b'loge' and d[pos + 32:pos + 48] == guid:
        print(pos, struct.unpack_from('<I', d, pos + 8)[0])
        break" bad.vhdx)
set -- $entry
craft bad.vhdx $(($1 + 64 + 16)):Q=0x10000 crc:$1:$2
# (qemu-img replays it, over its own header 1: qblock refuses)
cp bad.vhdx bad-before.vhdx
refused "a log entry writing into the header section: replay refused" \
    "outside the image's structures and blocks" \
    "$QB_IMG" check -r all bad.vhdx
check "... and nothing written" cmp bad.vhdx bad-before.vhdx
# a log GUID with no entry of it: nothing to replay, both open it
cp dynamic.vhdx h.vhdx
craft h.vhdx 0x10030:Q=0x1234 crc:0x10000:4096 0x20030:Q=0x1234 \
    crc:0x20000:4096
same "a log GUID without entries: opened" qemu-img info h.vhdx -- \
    "$QB_IMG" info h.vhdx

h1=crc:0x10000:4096 h2=crc:0x20000:4096
# a BAT region past the end of the file: every block reads as absent in
# QEMU, and qblock allocates none of it; 1 TiB over a 4 MiB BAT region
cp dynamic.vhdx h.vhdx
craft h.vhdx 0x30020:Q=0x4000000 0x30028:I=0x400000 crc:0x30000:65536 \
    0x310008:Q=0x10000000000
same "a BAT past the end of the file: info" qemu-img info h.vhdx -- \
    "$QB_IMG" info h.vhdx
same "a BAT past the end of the file: reads zeroes" \
    qemu-io -r -c 'read -q -P 0 0 1M' -c 'read -q -P 0 1023G 1M' h.vhdx -- \
    "$QB_IO" -r -c 'read -q -P 0 0 1M' -c 'read -q -P 0 1023G 1M' h.vhdx

# Hyper-V's usual physical sector of 4096 bytes (QEMU writes 512)
cp dynamic.vhdx phys4k.vhdx
craft phys4k.vhdx 0x310024:I=4096
same "physical sectors of 4096 bytes: info" qemu-img info phys4k.vhdx -- \
    "$QB_IMG" info phys4k.vhdx
check "physical sectors of 4096 bytes: read as before" \
    quiet sh -c "'$QB_IMG' convert -O raw phys4k.vhdx phys4k.raw &&
                 cmp phys4k.raw dynamic.ref"

# a log GUID whose every log sector starts an entry of the whole log's
# length with a bad checksum: the scan stops at its budget (16 times the
# log) instead of checksumming 256 MiB (QEMU opens it: no valid entry)
cp dynamic.vhdx h.vhdx
edits=(0x10030:Q=0x77 $h1 0x20030:Q=0x77 $h2)
for ((pos = 0x100000; pos < 0x200000; pos += 4096)); do
    edits+=($pos:4s=x6c6f6765 $((pos + 8)):I=0x100000 $((pos + 32)):Q=0x77)
done
craft h.vhdx "${edits[@]}"
refused "a log of corrupt entries: the scan is bounded" \
    "VHDX log holds too many corrupt entries to scan" \
    timeout 20 "$QB_IMG" info h.vhdx

# hostile DESC WANT EDIT...: dynamic.vhdx edited; both tools refuse it,
# qblock saying WANT (QEMU's message where it has one) without a crash
hostile() {
    local desc=$1 want=$2
    shift 2
    cp dynamic.vhdx h.vhdx
    craft h.vhdx "$@"
    refused "$desc (qemu-img)" "" qemu-img info -f vhdx h.vhdx
    refused "$desc" "$want" "$QB_IMG" info -f vhdx h.vhdx
}
r1=crc:0x30000:65536
hostile "no file identifier" "no \"vhdxfile\" identifier" 0:8s=x00
hostile "both headers' signatures" "No valid VHDX header found" \
    0x10000:4s=x00000000 0x20000:4s=x00000000
hostile "both headers' checksums" "No valid VHDX header found" \
    0x10004:I=5 0x20004:I=5
hostile "header version 2" "No valid VHDX header found" \
    0x10042:H=2 $h1 0x20042:H=2 $h2
hostile "log version 1" "log version 1 is not supported" \
    0x10040:H=1 $h1 0x20040:H=1 $h2
hostile "a log offset not in MiB" "is not a multiple of 1 MiB" \
    0x10048:Q=0x1000 $h1 0x20048:Q=0x1000 $h2
hostile "the region table's checksum" "bad signature or checksum" \
    0x30004:I=1
hostile "5000 region entries" "has 5000 entries" 0x30008:I=5000 $r1
hostile "no metadata region" "has no metadata region" 0x30008:I=1 $r1
hostile "a required region of unknown type" "required region of unknown" \
    0x30008:I=3 0x30050:I=7 0x3006c:I=1 $r1
hostile "the BAT over the metadata" \
    "VHDX region 3145728-4194304 overlaps with region 3145729-4194305" \
    0x30020:Q=0x300001 $r1
hostile "the BAT over the log" \
    "VHDX region 65536-1114112 overlaps with region 1048576-2097152" \
    0x30020:Q=0x10000 $r1
hostile "the metadata over the log" \
    "VHDX region 1048576-2097152 overlaps with region 1048576-2097152" \
    0x30040:Q=0x100000 $r1
hostile "the metadata table's signature" "metadata table has a bad" \
    0x300000:8s=x00
hostile "a missing metadata item" "lacks required item 2" \
    0x300060:I=7
hostile "3000 metadata entries" "has 3000 entries" 0x30000a:H=3000
hostile "block size 128 KiB" "is not a power of two between" \
    0x310000:I=0x20000
hostile "block size not a power of two" "is not a power of two between" \
    0x310000:I=0xff0000
hostile "an item past the metadata region" "is outside the metadata" \
    0x300030:I=0x10000000
hostile "a parent without a locator" "has a parent but no parent locator" \
    0x310004:I=2
hostile "a differencing image" "differencing images (with a parent) are" \
    0x310004:I=2 0x30000a:H=6 0x3000c0:Q=0x454db30ba8d35f2d \
    0x3000c8:Q=0x0cab3448d8d3f7ab 0x3000d0:I=0x10100 0x3000d4:I=0x100
hostile "a virtual disk size of 0 with a 1 MiB BAT (QEMU's: 64 MiB)" \
    "is too small for" 0x310008:Q=0
hostile "a virtual disk size over 64 TiB" "is more than 64 TiB" \
    0x310008:Q=0x400000000001
hostile "a BAT too small for the disk" "is too small for" \
    0x310008:Q=0x3ffffffffe00
hostile "logical sectors of 4096 bytes" "logical sector size 4096 is not" \
    0x310020:I=4096
hostile "a block past the end of the file" \
    "VHDX BAT entry 0 start offset 67108864 points after end of file (33554432). Image has probably been truncated." \
    0x200000:Q=0x4000006
hostile "a block ending past the end of the file" \
    "VHDX BAT entry 0 end offset 40894463 points after end of file (33554432). Image has probably been truncated." \
    0x200000:Q=0x1f00006
hostile "a block over the metadata" \
    "VHDX region 0-8388608 overlaps with region 3145728-4194304" \
    0x200000:Q=0x6
cp dynamic.vhdx h.vhdx
craft h.vhdx 0x200000:Q=0x800007
refused "a partially present block reads as an error (qemu-io)" \
    "Input/output error" qemu-io -r -c 'read 0 512' h.vhdx
refused "a partially present block reads as an error" \
    "Input/output error" "$QB_IO" -r -c 'read 0 512' h.vhdx
craft h.vhdx 0x200000:Q=0x800005
same "state 5 (the draft's unmapped) reads as zeroes" \
    qemu-io -r -c 'read -q -v 0 512' h.vhdx -- \
    "$QB_IO" -r -c 'read -q -v 0 512' h.vhdx
cp dynamic.vhdx h.vhdx
craft h.vhdx trunc:0x300000
refused "a file cut inside the metadata region" "" \
    "$QB_IMG" info h.vhdx

# ---- writing and creating ----
vsame() { python3 "$here/vhdx-same.py" "$@"; }
# refusal CMD...: CMD fails; its output with the tool's name taken out
refusal() {
    local out
    out=$("$@" 2>&1) && { echo "succeeded: $out"; return 1; }
    sed 's/^\(qemu-img\|qblock-img\): /IMG: /' <<<"$out"
}
mkdir -p cq cb
# creation: the Formatting line and the file (but for GUIDs, sequence
# numbers and the creator) as qemu-img's, for each kind QEMU makes
for spec in ":64M" "block_size=1M:64M" "block_size=256M:300M" \
    "log_size=4M:64M" "subformat=fixed:48M" "block_state_zero=off:64M" \
    "subformat=fixed,block_state_zero=off:20M" ":5G" ":200G" \
    "block_size=1M:1T" "log_size=1536K,block_size=1536K:100M" \
    "block_size=512M:1G" "subformat=dynamic:1000" ":0" \
    "block_size=1M,subformat=fixed,block_state_zero=off:5G"; do
    o=${spec%:*} sz=${spec#*:}
    rm -f cq/n.vhdx cb/n.vhdx
    same "create ${o:-default} $sz: qemu-img's Formatting line" \
        sh -c "cd cq && qemu-img create -f vhdx ${o:+-o $o} n.vhdx $sz" -- \
        sh -c "cd cb && '$QB_IMG' create -f vhdx ${o:+-o $o} n.vhdx $sz"
    check "create ${o:-default} $sz: qemu-img's file" \
        vsame cq/n.vhdx cb/n.vhdx
done
"$QB_IMG" create -q -f vhdx cb/z.vhdx 0
same "an empty disk (size 0): info as qemu-img's" \
    qemu-img info --output=json cb/z.vhdx -- \
    "$QB_IMG" info --output=json cb/z.vhdx
same "an empty disk (size 0): check as qemu-img's" \
    qemu-img check cb/z.vhdx -- "$QB_IMG" check cb/z.vhdx
for spec in "block_size=3M:Block size must be a power of two" \
    "log_size=0:Log size must be a multiple of 1 MB" \
    "log_size=8G:Log size must be smaller than 4 GB" \
    "subformat=foo:Parameter 'subformat' does not accept value 'foo'"; do
    o=${spec%%:*}
    same "create -o $o refused as qemu-img" \
        refusal sh -c "cd cq && qemu-img create -q -f vhdx -o $o n.vhdx 64M" \
        -- refusal sh -c "cd cb && '$QB_IMG' create -q -f vhdx -o $o n.vhdx 64M"
done
same "a size over 64 TiB refused as qemu-img" \
    refusal sh -c "cd cq && qemu-img create -q -f vhdx n.vhdx 65T" -- \
    refusal sh -c "cd cb && '$QB_IMG' create -q -f vhdx n.vhdx 65T"
same "resize refused as qemu-img (QEMU's vhdx cannot)" \
    refusal qemu-img resize dynamic.vhdx 128M -- \
    refusal "$QB_IMG" resize dynamic.vhdx 128M

# writes: the same requests through qemu-io and qblock-io on copies of
# one new image give the same file (log entries included), for each kind
wcmds=(-c 'write -q -P 0xab 0 4k' -c 'write -q -P 0xcd 1M 4k'
       -c 'write -q -P 0x5c 5M 300k' -c 'write -q -z 9M 1M'
       -c 'write -q -P 0x11 40M 3584' -c 'write -q -P 0x22 20M 12M'
       -c 'write -q -P 0x33 63M 1M' -c 'read -q -P 0x22 20M 12M')
for o in "" block_size=1M block_size=256M block_state_zero=off \
    subformat=fixed "subformat=fixed,block_state_zero=off" log_size=4M; do
    qemu-img create -q -f vhdx ${o:+-o $o} wq.vhdx 64M
    cp wq.vhdx wb.vhdx
    same "writes (${o:-default}): qblock-io prints what qemu-io prints" \
        qemu-io -f vhdx "${wcmds[@]}" wq.vhdx -- \
        "$QB_IO" -f vhdx "${wcmds[@]}" wb.vhdx
    check "writes (${o:-default}): the file is qemu-io's" vsame wq.vhdx wb.vhdx
    same "writes (${o:-default}): qemu-img check of both" \
        qemu-img check wq.vhdx -- qemu-img check wb.vhdx
    check "writes (${o:-default}): qemu-img compare" \
        quiet qemu-img compare wq.vhdx wb.vhdx
done
# 256 MiB blocks over 5 GiB: block 17 has the sector bitmap entry before
qemu-img create -q -f vhdx -o block_size=256M wq.vhdx 5G
cp wq.vhdx wb.vhdx
bcmds=(-c 'write -P 0x42 4352M 64k' -c 'write -P 0x43 4095M 2M')
qemu-io -f vhdx "${bcmds[@]}" wq.vhdx >/dev/null
"$QB_IO" -f vhdx "${bcmds[@]}" wb.vhdx >/dev/null
check "writes past a sector bitmap entry: the file is qemu-io's" \
    vsame wq.vhdx wb.vhdx
# each side's images read and checked by the other
qemu-img create -q -f vhdx -o block_size=1M x1.vhdx 64M
"$QB_IO" -f vhdx -c 'write -P 0x61 3M 1536k' -c 'write -P 0x62 32M 512' \
    x1.vhdx >/dev/null
qemu-io -f vhdx -c 'write -P 0x63 33M 4k' x1.vhdx >/dev/null
"$QB_IMG" create -q -f vhdx x2.vhdx 64M
qemu-io -f vhdx -c 'write -P 0x61 3M 1536k' -c 'write -P 0x62 32M 512' \
    x2.vhdx >/dev/null
"$QB_IO" -f vhdx -c 'write -P 0x63 33M 4k' x2.vhdx >/dev/null
for x in x1 x2; do
    same "$x: both tools' writes: qemu-img check" \
        qemu-img check $x.vhdx -- "$QB_IMG" check $x.vhdx
    same "$x: both tools' writes: read alike" \
        qemu-io -r -c 'read -q -P 0x61 3M 1536k' \
        -c 'read -q -P 0x62 32M 512' -c 'read -q -P 0x63 33M 4k' \
        -c 'read -q -P 0 0 3M' -c 'read -q -v 32M 1k' $x.vhdx -- \
        "$QB_IO" -r -c 'read -q -P 0x61 3M 1536k' \
        -c 'read -q -P 0x62 32M 512' -c 'read -q -P 0x63 33M 4k' \
        -c 'read -q -P 0 0 3M' -c 'read -q -v 32M 1k' $x.vhdx
done
# convert -O vhdx: qemu-img's file, and its disk
qemu-img convert -O vhdx dynamic.vhdx cq.vhdx
"$QB_IMG" convert -O vhdx dynamic.vhdx cb.vhdx
check "convert -O vhdx: qemu-img's file" vsame cq.vhdx cb.vhdx
check "convert -O vhdx: the same disk" quiet qemu-img compare cb.vhdx \
    dynamic.vhdx
qemu-img convert -O vhdx -o subformat=fixed,block_state_zero=off \
    dynamic.vhdx cq.vhdx
"$QB_IMG" convert -O vhdx -o subformat=fixed,block_state_zero=off \
    dynamic.vhdx cb.vhdx
check "convert -O vhdx fixed: qemu-img's file" vsame cq.vhdx cb.vhdx

# a crash in the middle: the BAT's sector write fails (blkdebug) after
# the log entry holding it is flushed, so the log is left to replay
printf '[inject-error]\nevent = "pwritev"\niotype = "write"\nsector = "4096"\n' \
    >bat.conf
qemu-img create -q -f vhdx -o block_size=1M crq.vhdx 64M
cp crq.vhdx crb.vhdx
refused "crash: qemu-io's BAT write fails" "Input/output error" \
    qemu-io -c 'write -P 0x77 3M 64k' blkdebug:bat.conf:crq.vhdx
refused "crash: qblock-io's BAT write fails" "Input/output error" \
    "$QB_IO" -c 'write -P 0x77 3M 64k' blkdebug:bat.conf:crb.vhdx
check "crash: the same file, log and headers, as QEMU leaves" \
    vsame crq.vhdx crb.vhdx
refused "crash: qemu-img refuses our dirty image read-only" \
    "contains a log that needs to be replayed" qemu-img info crb.vhdx
cp crq.vhdx crq2.vhdx
cp crb.vhdx crb2.vhdx
same "crash: check -r all replays the other's log, as each its own" \
    qemu-img check -r all crb.vhdx -- "$QB_IMG" check -r all crq.vhdx
check "crash: ... both replayed files the same" vsame crq.vhdx crb.vhdx
same "crash: qemu-img check -r all of QEMU's: as ours of QEMU's" \
    qemu-img check -r all crq2.vhdx -- "$QB_IMG" check -r all crb2.vhdx
for f in crq crb; do
    check "crash: $f: the write's data is there after the replay" \
        quiet "$QB_IO" -r -c 'read -P 0x77 3M 64k' -c 'read -P 0 0 3M' \
        $f.vhdx
done
# a read-write open replays, as qemu-io's (upstream test 070)
qemu-img create -q -f vhdx -o block_size=1M crq.vhdx 64M
qemu-io -c 'write -P 0x77 3M 64k' blkdebug:bat.conf:crq.vhdx >/dev/null 2>&1
cp crq.vhdx crb.vhdx
same "crash: a read-write open replays the log, as qemu-io's" \
    qemu-io -c 'read -q -P 0x77 3M 64k' crq.vhdx -- \
    "$QB_IO" -c 'read -q -P 0x77 3M 64k' crb.vhdx
check "crash: ... leaving qemu-io's file" vsame crq.vhdx crb.vhdx
# a write in the open that replayed: its log entry numbered after the
# replayed ones, at the log's start, as QEMU's
qemu-img create -q -f vhdx -o block_size=1M crq.vhdx 64M
qemu-io -c 'write -P 0x77 3M 64k' blkdebug:bat.conf:crq.vhdx >/dev/null 2>&1
cp crq.vhdx crb.vhdx
qemu-io -c 'write -q -P 0x79 5M 64k' crq.vhdx
"$QB_IO" -c 'write -q -P 0x79 5M 64k' crb.vhdx
check "crash: a write after the replay of a read-write open: qemu-io's file" \
    vsame crq.vhdx crb.vhdx
# a crash before the log entry is complete: the headers name a log GUID
# no entry carries, so there is nothing to replay and the BAT is the old
qemu-img create -q -f vhdx -o block_size=1M crb.vhdx 64M
printf '[inject-error]\nevent = "pwritev"\niotype = "write"\nsector = "2048"\n' \
    >log.conf
refused "crash before the log entry: the write fails" "Input/output error" \
    "$QB_IO" -c 'write -P 0x77 3M 64k' blkdebug:log.conf:crb.vhdx
same "crash before the log entry: info as qemu-img's" \
    qemu-img info crb.vhdx -- "$QB_IMG" info crb.vhdx
same "crash before the log entry: the block reads as before" \
    qemu-io -r -c 'read -q -P 0 3M 64k' crb.vhdx -- \
    "$QB_IO" -r -c 'read -q -P 0 3M 64k' crb.vhdx

summary
