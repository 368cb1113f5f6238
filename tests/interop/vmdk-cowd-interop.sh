#!/usr/bin/env bash
# ESX sparse extents ("COWD", VMFSSPARSE) and raw device maps against
# QEMU 7.2.
#
#   tests/interop/vmdk-cowd-interop.sh BUILD_DIR
#
# make-vmdk-cowd.py writes COWD extents (grains in two grain tables, a
# disk that ends inside a grain) named by a vmfsSparse descriptor, and
# a COWD file opened alone (descriptor text at byte 512, as QEMU reads
# one), and an ESX snapshot (a vmfsSparse delta on a vmfs base).  For
# each, qblock-img info (human and JSON), map and check print
# what qemu-img prints, both tools convert it to the same raw file, and
# the same writes by qemu-io and qblock-io leave the same files byte for
# byte (but for the random CID), each read back by the other tool.  Then
# what QEMU does that is odd and qblock does too (a directory with fewer
# entries than the extent needs, a table entry of 1, a descriptor line
# whose size is not the header's), where qblock differs on purpose (a
# grain table missing from the directory is allocated, not the write
# dropped), hostile headers (each refused with a message, qemu-img's
# where it has one; a grain of 0 crashes QEMU and is not run there), and
# raw device maps (create types refused by both as "Unsupported image
# type", a VMFSRDM extent line by qblock).  Prints "ok NAME" / "FAIL
# NAME", ends with "N passed, N failed, N skipped"; exits 77 without
# qemu-img.
set -u

build=$(cd "${1:?usage: vmdk-cowd-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
. "$here/vmdk-lib.bash"

make() { python3 "$here/make-vmdk-cowd.py" "$@"; }

# same_out NAME CMD1 -- CMD2: the same output (the tool's name masked)
# and the same exit status, success or not
same_out() {
    local name=$1 a=() b=() out1 out2 rc1 rc2
    shift
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    out1=$("${a[@]}" 2>&1); rc1=$?
    out2=$("${b[@]}" 2>&1); rc2=$?
    out1=$(sed 's/^qemu-\(img\|io\):/TOOL:/' <<<"$out1")
    out2=$(sed 's/^qblock-\(img\|io\):/TOOL:/' <<<"$out2")
    if [ "$rc1" -ge 128 ] || [ "$rc2" -ge 128 ]; then
        fail "$name" "killed: qemu $rc1, qblock $rc2"
    elif [ "$out1" = "$out2" ] && [ "$rc1" -eq "$rc2" ]; then
        ok "$name"
    else
        fail "$name" "exit $rc1 / $rc2" \
            "$(diff <(echo "$out1") <(echo "$out2"))"
    fi
}

# the disk: 32 MiB and 50 KiB, grains of 4 KiB, two grain tables
sectors=65636
make e.vmdk --sectors $sectors --grains 0:0x11,5:0x22,4096:0x33,8204:0x44 \
    --descriptor d.vmdk
make s.vmdk --sectors $sectors --grains 0:0x11,5:0x22,4096:0x33 \
    --desc-text 'CID=abcdef01\nparentCID=ffffffff\n'
# a larger grain, a directory with room to spare, grains not in order
make g.vmdk --sectors 200000 --grain 64 --gd-entries 9 \
    --grains 700:0x55,3:0x66,2:0x77 --descriptor dg.vmdk

for f in d.vmdk s.vmdk dg.vmdk; do
    same "$f: info" qemu-img info "$f" -- "$QB_IMG" info "$f"
    same "$f: info --output=json" qemu-img info --output=json "$f" -- \
        "$QB_IMG" info --output=json "$f"
    same "$f: map --output=json" qemu-img map --output=json "$f" -- \
        "$QB_IMG" map --output=json "$f"
    same "$f: check" qemu-img check "$f" -- "$QB_IMG" check "$f"
    check "$f: converted to raw, the same as qemu-img's" \
        quiet sh -c "qemu-img convert -O raw '$f' q.raw &&
                     '$QB_IMG' convert -O raw '$f' b.raw && cmp q.raw b.raw"
done
check "d.vmdk: qblock-io reads the patterns" \
    quiet "$QB_IO" -r -c 'read -P 0x11 0 4k' -c 'read -P 0x22 20k 4k' \
    -c 'read -P 0x33 16M 4k' -c 'read -P 0x44 32816k 2k' \
    -c 'read -P 0 4k 16k' -c 'read -P 0 32k 16k' d.vmdk
check "s.vmdk (opened alone): qblock-io reads the patterns" \
    quiet "$QB_IO" -r -c 'read -P 0x11 0 4k' -c 'read -P 0x33 16M 4k' s.vmdk
check "the format is probed from the COWD magic" \
    sh -c "'$QB_IMG' info s.vmdk | grep -qx 'file format: vmdk'"

# ---- writes: the same commands by each tool, the same files ----

writes=(-c 'write -P 0x61 8k 4k' -c 'write -P 0x62 512 1k'
        -c 'write -P 0x63 24M 64k' -c 'write -P 0x64 31M 1M'
        -c 'write -P 0x65 32816k 2k' -c 'write -z 5M 8k')
# each in a folder of its own: the descriptors name the same file
mkdir q b
for t in q b; do
    cp e.vmdk d.vmdk s.vmdk $t/
done
check "qemu-io writes the extent" quiet qemu-io "${writes[@]}" q/d.vmdk
check "qblock-io writes the extent" quiet "$QB_IO" "${writes[@]}" b/d.vmdk
check "the extents are the same byte for byte" cmp q/e.vmdk b/e.vmdk
check "the descriptors are the same but for the CID" vmdk_same q/d.vmdk \
    b/d.vmdk
check "qemu-io wrote a new CID" \
    sh -c "! grep -q '^CID=12345678' q/d.vmdk"
check "qblock-io wrote a new CID" \
    sh -c "! grep -q '^CID=12345678' b/d.vmdk"
reads=(-c 'read -P 0x61 8k 4k' -c 'read -P 0x62 512 1k'
       -c 'read -P 0x11 1536 2560' -c 'read -P 0x63 24M 64k'
       -c 'read -P 0x64 31M 1M' -c 'read -P 0x65 32816k 2k'
       -c 'read -P 0 5M 8k')
check "qblock-io reads what qemu-io wrote" quiet "$QB_IO" -r "${reads[@]}" \
    q/d.vmdk
check "qemu-io reads what qblock-io wrote" quiet qemu-io -r "${reads[@]}" \
    b/d.vmdk
same "written: check" qemu-img check b/d.vmdk -- "$QB_IMG" check q/d.vmdk
same "written: map" qemu-img map --output=json b/d.vmdk -- \
    "$QB_IMG" map --output=json q/d.vmdk

check "qemu-io writes the COWD file opened alone" \
    quiet qemu-io "${writes[@]}" q/s.vmdk
check "qblock-io writes the COWD file opened alone" \
    quiet "$QB_IO" "${writes[@]}" b/s.vmdk
# the new CID is random and printed without leading zeroes, so the text
# after it moves when it is shorter: the header's first sector, the text
# up to its end with the CID taken out, and everything past the header
# must be the same; the bytes between the text's end and the header's
# end (what the old text leaves) only when the two CIDs are as long.
check "... the same files but for the CID in the header" python3 -c "
import re, sys
a, b = open('q/s.vmdk', 'rb').read(), open('b/s.vmdk', 'rb').read()
end = b'parentCID=ffffffff\\n'
def no_cid(d):
    return re.sub(rb'(?<!parent)CID=[0-9a-f]{1,8}\\n', b'CID=\\n', d)
def text(d):
    return no_cid(d[512:d.index(end, 512) + len(end)])
same = (len(a) == len(b) and a[:512] == b[:512] and a[2048:] == b[2048:]
        and text(a) == text(b))
if a.index(end) == b.index(end):
    same = same and no_cid(a[:2048]) == no_cid(b[:2048])
sys.exit(not same)"
check "... qemu-io reads what qblock-io wrote" \
    quiet qemu-io -r "${reads[@]}" b/s.vmdk

# ---- an ESX snapshot: a vmfsSparse delta on a vmfs base ----

mkdir qs bs
head -c 32M /dev/urandom > qs/base-flat.vmdk
printf '# Disk DescriptorFile\nversion=1\nCID=11111111\n%s\n%s\n\n%s\n' \
    'parentCID=ffffffff' 'createType="vmfs"' 'RW 65536 VMFS "base-flat.vmdk"' \
    > qs/base.vmdk
make qs/delta-delta.vmdk --sectors 65536 --grains 0:0x11,4096:0x33 \
    --descriptor qs/delta.vmdk
sed -i 's/^parentCID=.*/parentCID=11111111\nparentFileNameHint="base.vmdk"/' \
    qs/delta.vmdk
cp qs/* bs/
for c in info "info --output=json" "map --output=json" check; do
    same "a delta on its base: $c" qemu-img $c qs/delta.vmdk -- \
        "$QB_IMG" $c qs/delta.vmdk
done
check "... converted to raw, the same as qemu-img's" \
    quiet sh -c "qemu-img convert -O raw qs/delta.vmdk q.raw &&
                 '$QB_IMG' convert -O raw qs/delta.vmdk b.raw && cmp q.raw b.raw"
cow=(-c 'write -P 0x55 8k 1k' -c 'write -P 0x56 20M 4k')
check "... written by qemu-io (part of a grain: the rest from the base)" \
    quiet qemu-io "${cow[@]}" qs/delta.vmdk
check "... and by qblock-io" quiet "$QB_IO" "${cow[@]}" bs/delta.vmdk
check "... the same deltas byte for byte" \
    cmp qs/delta-delta.vmdk bs/delta-delta.vmdk
check "... the base untouched" cmp qs/base-flat.vmdk bs/base-flat.vmdk

# ---- QEMU's odd cases, done as QEMU does them ----

# a directory of 1 entry for an extent that needs 2
make short.vmdk --sectors $sectors --gd-entries 1 --grains 0:0x11 \
    --descriptor dshort.vmdk
same "a directory that ends early: info" qemu-img info dshort.vmdk -- \
    "$QB_IMG" info dshort.vmdk
same_out "... map fails past it" qemu-img map --output=json dshort.vmdk -- \
    "$QB_IMG" map --output=json dshort.vmdk
same_out "... check stops there" qemu-img check dshort.vmdk -- \
    "$QB_IMG" check dshort.vmdk
check "... reads past it give zeroes" quiet "$QB_IO" -r \
    -c 'read -P 0x11 0 4k' -c 'read -P 0 16M 1M' dshort.vmdk
cp short.vmdk short0.vmdk
refused "... a write past it fails (EINVAL)" "write failed: Invalid argument" \
    "$QB_IO" -c 'write 16M 4k' dshort.vmdk
refused "... (qemu-io)" "write failed: Invalid argument" \
    qemu-io -c 'write 16M 4k' dshort.vmdk
check "... and the file is as it was" cmp short.vmdk short0.vmdk

# a table entry of 1: a grain at sector 1, in the header, read as such
cp e.vmdk one.vmdk
sed 's/"e.vmdk"/"one.vmdk"/' d.vmdk > done.vmdk
patch one.vmdk $((5 * 512 + 4)) I 1
same "a grain at sector 1: map" qemu-img map --output=json done.vmdk -- \
    "$QB_IMG" map --output=json done.vmdk
check "... read as qemu-img reads it" \
    quiet sh -c "qemu-img convert -O raw done.vmdk q.raw &&
                 '$QB_IMG' convert -O raw done.vmdk b.raw && cmp q.raw b.raw"
refused "... not written over (QEMU writes the header)" \
    "grain 1 lies at sector 1, in the extent's metadata" \
    "$QB_IO" -c 'write 4k 4k' done.vmdk

# the descriptor's size for the extent is not the header's
sed "s/^RW $sectors /RW 2048 /" d.vmdk > dsize.vmdk
same "a descriptor line of another size: the header's counts" \
    qemu-img info dsize.vmdk -- "$QB_IMG" info dsize.vmdk
sed 's/VMFSSPARSE/SPARSE/' d.vmdk > dsparse.vmdk
same "a SPARSE line naming a COWD file" qemu-img info dsparse.vmdk -- \
    "$QB_IMG" info dsparse.vmdk

# ---- where qblock differs on purpose ----

# only the first grain table: QEMU says it wrote 16M and drops it
make half.vmdk --sectors $sectors --tables 1 --grains 0:0x11 \
    --descriptor dhalf.vmdk
check "a grain table left out is allocated by a write" \
    quiet "$QB_IO" -c 'write -P 0x71 16M 4k' dhalf.vmdk
check "... qemu-io reads the grain" \
    quiet qemu-io -r -c 'read -P 0x71 16M 4k' -c 'read -P 0x11 0 4k' \
    dhalf.vmdk
check "... qemu-img check finds no error" quiet qemu-img check dhalf.vmdk

# ---- hostile headers ----

hostile() {
    cp e.vmdk h.vmdk
    patch h.vmdk "$@"
}
sed 's/"e.vmdk"/"h.vmdk"/' d.vmdk > dh.vmdk
# both_refuse NAME WANT: qemu-img and qblock-img refuse dh.vmdk with WANT
both_refuse() {
    refused "$1" "$2" "$QB_IMG" info dh.vmdk
    refused "$1 (qemu-img)" "$2" "$Q_IMG" info dh.vmdk
}
hostile 16 I 0
refused "a grain of 0 sectors (QEMU: SIGFPE on a read)" \
    "Invalid granularity, image may be corrupt" "$QB_IO" -c 'read 0 4k' \
    dh.vmdk
hostile 16 I 0x200000
refused "a grain of 1 GiB (QEMU: SIGFPE on a read)" \
    "Unsupported granularity of 2097152 sectors" "$QB_IMG" info dh.vmdk
hostile 16 I 0x200001
both_refuse "a grain of 1 GiB and a sector" \
    "Invalid granularity, image may be corrupt"
hostile 16 I 3
refused "a grain of 3 sectors" "Unsupported granularity of 3 sectors" \
    "$QB_IMG" info dh.vmdk
hostile 24 I 0x2000001
both_refuse "a directory of 2^25 + 1 entries" "L1 size too big"
hostile 24 I 0xffffffff
both_refuse "a directory of 2^32 - 1 entries" "L1 size too big"
hostile 24 I 0x2000000
refused "a directory of 2^25 entries that the file does not hold" \
    "Grain directory of 33554432 entries at sector 4 lies past the end" \
    "$QB_IMG" info dh.vmdk
hostile 20 I 0xffffffff
refused "a directory past the end of the file" \
    "Grain directory of 3 entries at sector 4294967295 lies past the end" \
    "$QB_IMG" info dh.vmdk
hostile 12 I 0
refused "an extent of 0 sectors" "Invalid extent size 0" \
    "$QB_IMG" info dh.vmdk
# the first grain table's second entry: a grain far past the end
hostile $((5 * 512 + 4)) I 100000
out=$("$QB_IMG" check dh.vmdk 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && grep -qx "ERROR: cluster offset for sector 8 points \
after EOF" <<<"$out"; then
    ok "a grain past the end of the file: check says so"
else
    fail "a grain past the end of the file: check says so" "exit $rc: $out"
fi
refused "... (qemu-img, which fails with EINVAL)" \
    "ERROR: cluster offset for sector 8 points after EOF" \
    "$Q_IMG" check dh.vmdk
# the first directory entry: a grain table at 2 TiB
hostile $((4 * 512)) I 0xffffffff
check "a grain table past the end of the file reads as zeroes" \
    quiet "$QB_IO" -r -c 'read -P 0 0 64k' dh.vmdk
refused "... and is not written (QEMU writes at 2 TiB)" \
    "grain table 0 lies past the end of the file: not written" \
    "$QB_IO" -c 'write 0 4k' dh.vmdk
check "... the file stays small" \
    test "$(stat -c %s h.vmdk)" -lt $((1 << 20))
make n.vmdk --sectors $sectors --grains 0:0x11
refused "a COWD file alone without descriptor text" \
    "needs descriptor text with CID= and parentCID=" "$QB_IMG" info n.vmdk
refused "... (qemu-img)" "Invalid argument" "$Q_IMG" info n.vmdk
sed 's/VMFSSPARSE "e.vmdk"/VMFSSPARSE "e.vmdk" 0/' d.vmdk > dl.vmdk
refused "a VMFSSPARSE line with an offset" "Invalid extent line" \
    "$QB_IMG" info dl.vmdk
refused "... (qemu-img)" "Invalid extent line" "$Q_IMG" info dl.vmdk
head -c 1M /dev/zero > r-flat.vmdk
sed 's/VMFSSPARSE "e.vmdk"/VMFSSPARSE "r-flat.vmdk"/' d.vmdk > dr.vmdk
same_out "a VMFSSPARSE line naming a plain file" qemu-img info dr.vmdk -- \
    "$QB_IMG" info dr.vmdk

# ---- raw device maps ----

for type in vmfsRaw vmfsRDM vmfsRawDeviceMap vmfsPassthroughRawDeviceMap; do
    printf '# Disk DescriptorFile\nversion=1\nCID=12345678\n%s\n%s\n\n%s\n' \
        'parentCID=ffffffff' "createType=\"$type\"" \
        'RW 2048 VMFSRDM "r-flat.vmdk"' > rdm.vmdk
    same_out "create type $type" qemu-img info rdm.vmdk -- \
        "$QB_IMG" info rdm.vmdk
done
printf '# Disk DescriptorFile\nversion=1\nCID=12345678\n%s\n%s\n\n%s\n' \
    'parentCID=ffffffff' 'createType="vmfs"' \
    'RW 2048 VMFSRDM "r-flat.vmdk"' > rdm.vmdk
refused "a VMFSRDM extent (QEMU skips it, then fails an assertion)" \
    "Unsupported extent type 'VMFSRDM'" "$QB_IMG" info rdm.vmdk

summary
