#!/usr/bin/env bash
# VDI (VirtualBox) images against QEMU 7.2: reading, writing, creating,
# check.
#
#   tests/interop/vdi-interop.sh BUILD_DIR
#
# Creation: qblock-img create -f vdi writes what qemu-img writes (the
# Formatting line, the file byte for byte but for the image and
# modification UUIDs, which both tools make random; the same file size),
# dynamic and static, for sizes from 0 to 2 TiB; the -o help text, and the
# refusals of a size past QEMU's maximum and of a bad static=.  Reading:
# images qemu-io wrote (data across block boundaries, zeroes, holes),
# dynamic and static, give the same info (human and JSON), map (human and
# JSON) and check, and qblock reads the bytes qemu-img reads.  Writing:
# the same qemu-io commands run by qemu-io and by qblock-io on new images
# leave the same files; each tool reads what the other wrote; convert -O
# vdi (dynamic and static) gives qemu-img's file; resize, amend and
# measure are refused as by qemu-img.  Check: a block used
# twice, an index past the blocks of the disk, a wrong count, each the
# errors and the exit status qemu-img gives; -r refused as by qemu-img.
# Hostile headers: each of QEMU's refusals with QEMU's message, compared
# with qemu-img's; a block map past the end of the file read as QEMU
# reads it; and a layout whose data area overlaps the block map refused
# read-write (QEMU accepts it).  Prints "ok NAME" / "FAIL NAME", ends
# with "N passed, N failed, N skipped"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: vdi-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
# same, refused and patch
. "$here/vmdk-lib.bash"

# vdi_same A B: the same size and bytes but for the UUIDs of the image
# and of its last modification (bytes 0x188-0x1a7, random in both tools);
# past the header only the files' data ranges are read (a static image of
# 2 TiB is holes), a run of zeroes as good as a hole
vdi_same() {
    python3 - "$1" "$2" <<'EOF'
import os, sys

def parts(path):
    with open(path, 'rb') as f:
        size = os.fstat(f.fileno()).st_size
        head = bytearray(f.read(512))
        head[0x188:0x1a8] = bytes(32)
        chunks, at = [], 512
        while at < size:
            try:
                start = os.lseek(f.fileno(), at, os.SEEK_DATA)
            except OSError:
                break
            end = os.lseek(f.fileno(), start, os.SEEK_HOLE)
            f.seek(start)
            while start < end:
                n = min(end - start, 1 << 20)
                data = f.read(n)
                if data.strip(b'\0'):
                    chunks.append((start, data))
                start += n
            at = end
        return size, bytes(head), chunks

a, b = parts(sys.argv[1]), parts(sys.argv[2])
for what, x, y in zip(('size', 'header', 'data'), a, b):
    if x != y:
        sys.exit(f'{sys.argv[1]} and {sys.argv[2]} differ in their {what}')
EOF
}

# both tools' Formatting lines and files for one create
for opts in "" "-o static=on"; do
    for size in 0 1 511 100000 5M 1G 2T; do
        name="create $opts $size"
        q=$(qemu-img create -f vdi $opts q.vdi $size 2>&1)
        b=$("$QB_IMG" create -f vdi $opts b.vdi $size 2>&1)
        if [ "${q/q.vdi/X}" = "${b/b.vdi/X}" ]; then
            ok "$name: the Formatting line"
        else
            fail "$name: the Formatting line" "$q" "$b"
        fi
        check "$name: the file (but for its UUIDs)" vdi_same q.vdi b.vdi
        rm -f q.vdi b.vdi
    done
done
same "create -o help" qemu-img create -f vdi -o help -- \
    "$QB_IMG" create -f vdi -o help
# as QEMU: the file made first stays, empty
for size in 0x1fffff80000001 0x1fffff8000001; do
    echo old > q.vdi
    echo old > t.vdi
    q=$(qemu-img create -f vdi q.vdi $size 2>&1 | sed 's/q\.vdi/X/g')
    b=$("$QB_IMG" create -f vdi t.vdi $size 2>&1 | sed 's/t\.vdi/X/g')
    if [ "${q//qemu-img/Y}" = "${b//qblock-img/Y}" ] &&
       [ -e t.vdi ] && [ ! -s t.vdi ] && [ ! -s q.vdi ] &&
       grep -q "Unsupported VDI image size" <<<"$b"; then
        ok "create $size: past the maximum size"
    else
        fail "create $size: past the maximum size" "$q" "$b"
    fi
done
rm -f q.vdi t.vdi
refused "create -o static=maybe" "Parameter 'static' expects 'on' or 'off'" \
    "$QB_IMG" create -f vdi -o static=maybe t.vdi 1M
rm -f t.vdi

# ---- reading what qemu-io wrote ----

writes=(-c 'write -P 0x11 2M 4k' -c 'write -P 0x22 0 512'
        -c 'write -P 0x33 3M 1M' -c 'write -P 0x44 4095k 2M'
        -c 'write -z 7M 4k' -c 'write -P 0x55 9215k 1k')
qemu-img create -q -f vdi dynamic.vdi 9M
qemu-io -f vdi "${writes[@]}" dynamic.vdi >/dev/null
qemu-img create -q -f vdi -o static=on static.vdi 9M
qemu-io -f vdi "${writes[@]}" static.vdi >/dev/null
# an odd size, as VBoxManage convertfromraw writes: rounded up to a sector
cp dynamic.vdi odd.vdi
patch odd.vdi $((0x170)) Q 9437000
for img in dynamic static odd; do
    f=$img.vdi
    same "$img: info" qemu-img info "$f" -- "$QB_IMG" info "$f"
    same "$img: info --output=json" qemu-img info --output=json "$f" -- \
        "$QB_IMG" info --output=json "$f"
    same "$img: map" qemu-img map "$f" -- "$QB_IMG" map "$f"
    same "$img: map --output=json" qemu-img map --output=json "$f" -- \
        "$QB_IMG" map --output=json "$f"
    same "$img: check" qemu-img check "$f" -- "$QB_IMG" check "$f"
    qemu-img convert -f vdi -O raw "$f" "$img.ref"
    check "$img: convert to raw gives qemu-img's bytes" \
        quiet sh -c "'$QB_IMG' convert -f vdi -O raw '$f' '$img.raw' &&
                     cmp '$img.raw' '$img.ref'"
    check "$img: converted to qcow2 by qblock-img, byte-identical" \
        quiet sh -c "'$QB_IMG' convert -f vdi -O qcow2 '$f' '$img.qcow2' &&
                     qemu-img convert -f vdi -O qcow2 '$f' '$img.q.qcow2' &&
                     cmp '$img.qcow2' '$img.q.qcow2'"
done
check "the format is probed" \
    sh -c "'$QB_IMG' info dynamic.vdi | grep -qx 'file format: vdi'"
check "qblock-io reads the patterns qemu-io wrote" \
    quiet "$QB_IO" -r -f vdi -c 'read -P 0x22 0 512' -c 'read -P 0 512 511k' \
    -c 'read -P 0x11 2M 4k' -c 'read -P 0x44 4095k 2M' \
    -c 'read -P 0 7M 1M' -c 'read -P 0x55 9215k 1k' dynamic.vdi

# ---- writing ----

"$QB_IMG" create -q -f vdi ours.vdi 9M
"$QB_IO" -f vdi "${writes[@]}" ours.vdi >/dev/null
check "qblock-io's writes leave qemu-io's file" vdi_same dynamic.vdi ours.vdi
"$QB_IMG" create -q -f vdi -o static=on ours-static.vdi 9M
"$QB_IO" -f vdi "${writes[@]}" ours-static.vdi >/dev/null
check "... and on a static image" vdi_same static.vdi ours-static.vdi
check "qemu-io reads what qblock-io wrote" \
    quiet qemu-io -r -f vdi -c 'read -P 0x22 0 512' \
    -c 'read -P 0x44 4095k 2M' -c 'read -P 0 7M 1M' \
    -c 'read -P 0x55 9215k 1k' ours.vdi
same "qemu-img check on qblock's file" qemu-img check dynamic.vdi -- \
    qemu-img check ours.vdi
qemu-io -f vdi -c 'write -P 0x66 5M 64k' ours.vdi >/dev/null
"$QB_IO" -f vdi -c 'write -P 0x77 6M 64k' ours.vdi >/dev/null
check "each reads what the other wrote after it" \
    quiet sh -c "'$QB_IO' -r -f vdi -c 'read -P 0x66 5M 64k' \
                     -c 'read -P 0x77 6M 64k' ours.vdi &&
                 qemu-io -r -f vdi -c 'read -P 0x66 5M 64k' \
                     -c 'read -P 0x77 6M 64k' ours.vdi"
# an odd size: the header written back holds the rounded one, as QEMU's
cp odd.vdi odd-q.vdi
cp odd.vdi odd-b.vdi
qemu-io -f vdi -c 'write -P 0x66 6M 4k' odd-q.vdi >/dev/null
"$QB_IO" -f vdi -c 'write -P 0x66 6M 4k' odd-b.vdi >/dev/null
check "a write to an image of an odd size: qemu-io's file" \
    cmp odd-q.vdi odd-b.vdi
for opts in "" "-o static=on"; do
    qemu-img convert -f raw -O vdi $opts dynamic.ref q.vdi
    "$QB_IMG" convert -f raw -O vdi $opts dynamic.ref b.vdi
    check "convert -O vdi $opts: qemu-img's file" vdi_same q.vdi b.vdi
done
# as QEMU: no resize, no amendment
refused "resize" "Image format driver does not support resize" \
    "$QB_IMG" resize ours.vdi 20M
refused "resize (qemu-img)" "Image format driver does not support resize" \
    qemu-img resize ours.vdi 20M

for cmd in "amend -o static=on ours.vdi" "measure -O vdi --size 10M"; do
    same "$cmd: refused as by qemu-img" \
        sh -c "qemu-img $cmd 2>&1 | sed 's/^qemu-img: //'; true" -- \
        sh -c "'$QB_IMG' $cmd 2>&1 | sed 's/^qblock-img: //'; true"
done

# ---- check ----

# block map of dynamic.vdi: 0:1 1:- 2:0 3:2 4:3 5:4 6:5 7:6 8:7, 8 allocated
damaged() {
    cp dynamic.vdi x.vdi
    patch x.vdi "$@"
}
check_same() {
    local name=$1 q b qrc brc
    q=$(qemu-img check x.vdi 2>&1)
    qrc=$?
    b=$("$QB_IMG" check x.vdi 2>&1)
    brc=$?
    if [ "$q" = "$b" ] && [ "$qrc" = "$brc" ] && [ "$brc" -ne 0 ]; then
        ok "$name"
    else
        fail "$name" "qemu-img (exit $qrc): $q" "qblock-img (exit $brc): $b"
    fi
}
damaged $((0x204)) I 0
check_same "check: a block used twice"
damaged $((0x204)) I 9
check_same "check: an index past the blocks of the disk"
damaged $((0x204)) I 0xfffffffd
check_same "check: an index that is almost a marker"
damaged $((0x184)) I 5
check_same "check: a wrong count of blocks allocated"
damaged $((0x200)) I 2
patch x.vdi $((0x204)) I 2
check_same "check: three entries on one block"
same "check --output=json on a damaged image" \
    sh -c "qemu-img check --output=json x.vdi 2>&1; true" -- \
    sh -c "'$QB_IMG' check --output=json x.vdi 2>&1; true"
out=$("$QB_IMG" check -r all dynamic.vdi 2>&1)
rc=$?
[ "$rc" -eq 63 ] && [ "$out" = "qblock-img: This image format does not \
support checks" ] && ok "check -r: no repair, as QEMU" ||
    fail "check -r: no repair, as QEMU" "exit $rc: $out"

# ---- hostile images ----

# both_refuse NAME OFFSET FMT VALUE...: qemu-img and qblock-img refuse the
# patched header with the same message
both_refuse() {
    local name=$1 q b
    shift
    cp dynamic.vdi h.vdi
    while [ $# -gt 0 ]; do patch h.vdi "$1" "$2" "$3"; shift 3; done
    q=$(qemu-img info h.vdi 2>&1)
    b=$("$QB_IMG" info h.vdi 2>&1)
    if [ $? -eq 1 ] && [ "${q#qemu-img: }" = "${b#qblock-img: }" ] &&
       grep -q "Could not open" <<<"$b"; then
        ok "$name"
    else
        fail "$name" "qemu-img: $q" "qblock-img: $b"
    fi
}
both_refuse "a size past 512 TiB" $((0x170)) Q 0xffffffffffffffff
both_refuse "version 1.0" $((0x44)) I 0x10000
both_refuse "version 1.2" $((0x44)) I 0x10002
both_refuse "an unaligned block map" $((0x154)) I 0x201
both_refuse "an unaligned data area" $((0x158)) I 0x401
both_refuse "sectors of 4 KiB" $((0x168)) I 4096
both_refuse "blocks of 2 MiB" $((0x178)) I 0x200000
both_refuse "blocks of 512 bytes" $((0x178)) I 512
both_refuse "a disk larger than its blocks" $((0x170)) Q 0xa00000
both_refuse "a disk a sector larger than its blocks" $((0x170)) Q 0x900001
both_refuse "no blocks" $((0x180)) I 0
both_refuse "a link UUID" $((0x1a8)) I 1
both_refuse "a parent UUID" $((0x1c7)) B 1
both_refuse "too many blocks" $((0x180)) I 536870785
cp dynamic.vdi h.vdi
patch h.vdi $((0x40)) I 0x12345678
refused "-f vdi on a bad signature" \
    "Image not in VDI format (bad signature 12345678)" \
    "$QB_IMG" info -f vdi h.vdi
head -c 300 dynamic.vdi > h.vdi
same "a file shorter than the header" \
    sh -c "qemu-img info -f vdi h.vdi 2>&1 | sed 's/^qemu-img: //'" -- \
    sh -c "'$QB_IMG' info -f vdi h.vdi 2>&1 | sed 's/^qblock-img: //'"
# 2^29 blocks, the map far past the end of the file: QEMU reads zeroes
# there (every block at index 0); qblock does without 2 GiB of memory
cp dynamic.vdi h.vdi
patch h.vdi $((0x180)) I 536870784
patch h.vdi $((0x154)) I 0xfffffe00
same "the largest block map, past the end of the file: map" \
    qemu-img map --output=json h.vdi -- "$QB_IMG" map --output=json h.vdi
# at most about 1 GB: address space (ulimit -v), or under ASan, whose
# shadow reserves terabytes of it, the largest allocation
if ldd "$QB_IO" 2>/dev/null | grep -q libasan; then
    bound="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_allocation_size_mb=1000"
else
    bound="ulimit -v 1000000 &&"
fi
check "... read in bounded memory" \
    sh -c "$bound '$QB_IO' -r -f vdi -c 'read 0 1M' h.vdi >/dev/null"
cp dynamic.vdi h.vdi
patch h.vdi $((0x154)) I 0x200000
same "a block map past the end of the file: map" \
    qemu-img map --output=json h.vdi -- "$QB_IMG" map --output=json h.vdi
cp dynamic.vdi h.vdi
patch h.vdi $((0x204)) I 0xfffff000
check "a block far past the end of the file reads as zeroes, as in QEMU" \
    quiet sh -c "qemu-io -r -f vdi -c 'read -P 0 1M 1M' h.vdi &&
                 '$QB_IO' -r -f vdi -c 'read -P 0 1M 1M' h.vdi"
# the data area on the block map: QEMU would write blocks over the map
cp dynamic.vdi h.vdi
patch h.vdi $((0x158)) I 0x200
refused "a data area over the block map, read-write" \
    "overlaps the header or the block map" \
    "$QB_IO" -f vdi -c 'write 1M 512' h.vdi
check "... read-only, as QEMU" quiet "$QB_IMG" info h.vdi
cp dynamic.vdi h.vdi
patch h.vdi $((0x154)) I 0
refused "a block map over the header, read-write" \
    "overlaps the header" "$QB_IO" -f vdi -c 'write 1M 512' h.vdi

summary
