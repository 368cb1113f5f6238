#!/usr/bin/env bash
# qcow (version 1) images against QEMU 7.2: creating, reading, writing,
# compressed clusters, backing files, legacy AES encryption.
#
#   tests/interop/qcow-interop.sh BUILD_DIR
#
# Creation: qblock-img create -f qcow writes qemu-img's file byte for
# byte and the same Formatting line, for sizes from a sector to 2 TiB,
# with and without a backing file, encrypted or not; the -o help text;
# QEMU's refusals (size 0, a missing or unknown secret, an unknown or
# unsupported encrypt.format, encryption= with encrypt.format=), the file
# left empty as QEMU leaves it.  Reading: images qemu-io wrote give the
# same info (human and JSON), map (human and JSON) and bytes; through a
# backing file; compressed clusters qemu-img convert -c wrote.  Writing:
# the same qemu-io commands (data, zeroes, compressed clusters, partial
# clusters, over a backing file, encrypted) run by qemu-io and qblock-io
# leave the same files; convert -O qcow and convert -c -O qcow give
# qemu-img's file; commit empties the image as QEMU does; each tool reads
# what the other wrote.  Refusals as QEMU's: resize, check, rebase -u,
# amend.  Hostile headers: each of QEMU's refusals with its message, and
# offsets the image gives checked (-EIO, never a crash or a hang).
# Prints "ok NAME" / "FAIL NAME", ends with "N passed, N failed, N
# skipped"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: qcow-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
# same and refused
. "$here/vmdk-lib.bash"

# bepatch FILE OFFSET FORMAT VALUE: a big-endian field of FILE (qcow's)
bepatch() {
    python3 - "$@" <<'EOF'
import struct, sys
path, off, fmt, val = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4], 0)
with open(path, 'r+b') as f:
    f.seek(off)
    f.write(struct.pack('>' + fmt, val))
EOF
}

# both_say NAME CMD...: qemu-img and qblock-img (CMD's first word is
# replaced) print the same, but for the tools' names, and exit alike
both_say() {
    local name=$1 q b qrc brc
    shift
    q=$(qemu-img "$@" 2>&1)
    qrc=$?
    b=$("$QB_IMG" "$@" 2>&1)
    brc=$?
    if [ "${q//qemu-img/X}" = "${b//qblock-img/X}" ] && [ $qrc = $brc ]; then
        ok "$name"
    else
        fail "$name" "qemu-img (exit $qrc): $q" "qblock-img (exit $brc): $b"
    fi
}

S=(--object secret,id=s0,data=passw0rd)
qemu-img create -q -f raw base.raw 4M
qemu-io -f raw -c 'write -P 0xaa 0 4M' base.raw >/dev/null

# ---- creation ----

create_same() {
    local name="create $*" q b
    rm -f q.qcow b.qcow
    q=$(qemu-img create -f qcow "${S[@]}" q.qcow "$@" 2>&1)
    b=$("$QB_IMG" create -f qcow "${S[@]}" b.qcow "$@" 2>&1)
    if [ "${q/q.qcow/X}" = "${b/b.qcow/X}" ]; then
        ok "$name: the Formatting line"
    else
        fail "$name: the Formatting line" "$q" "$b"
    fi
    check "$name: the file" cmp q.qcow b.qcow
}
for size in 1 511 100000 5M 1G 2T; do
    create_same $size
done
create_same -b base.raw -F raw
create_same -b base.raw -F raw 8M
create_same -o backing_file=base.raw,backing_fmt=raw 1M
create_same -o encryption=on,encrypt.key-secret=s0 3M
create_same -o encrypt.format=aes,encrypt.key-secret=s0 3M
create_same -o encrypt.format=qcow,encrypt.key-secret=s0 -b base.raw -F raw
same "create -o help" qemu-img create -f qcow -o help -- \
    "$QB_IMG" create -f qcow -o help
# as QEMU: the refusals after the file is made leave it, empty
for opts in "x.qcow 0" "-o encryption=on x.qcow 1M" \
            "-o encrypt.format=luks x.qcow 1M" \
            "-o encrypt.format=foo x.qcow 1M" \
            "-o encrypt.format=aes,encrypt.key-secret=s9 x.qcow 1M" \
            "-o encryption=on,encrypt.format=aes x.qcow 1M" \
            "-b base.raw x.qcow 1M" "-u -b base.raw -F garbage x.qcow 1M"; do
    rm -f x.qcow
    q=$(qemu-img create -f qcow $opts 2>&1; echo "exit $?"; ls x.qcow 2>&1 &&
        wc -c < x.qcow)
    rm -f x.qcow
    b=$("$QB_IMG" create -f qcow $opts 2>&1; echo "exit $?"; ls x.qcow 2>&1 &&
        wc -c < x.qcow)
    if [ "${q//qemu-img/X}" = "${b//qblock-img/X}" ]; then
        ok "create $opts: refused as by qemu-img"
    else
        fail "create $opts: refused as by qemu-img" "$q" "$b"
    fi
done
rm -f x.qcow

# ---- reading what qemu-io wrote ----

# writes_for CLUSTER BYTES: the same writes; QEMU compresses one cluster a write
writes_for() {
    writes=(-c 'write -P 0x11 0 4k' -c 'write -P 0x22 1000 100'
            -c 'write -P 0x33 1M 100k' -c 'write -z 3M 64k'
            -c "write -c -P 0x44 2M $1" -c "write -c -P 0x55 2109440 $1"
            -c "write -c -P 0x55 $((2109440 + $2)) $1"
            -c 'write -P 0x66 2109440 512' -c 'write -P 0x77 4190208 4k')
}
writes_for 4k 4096
qemu-img create -q -f qcow plain.qcow 4M
qemu-io -f qcow "${writes[@]}" plain.qcow >/dev/null
writes_for 512 512
qemu-img create -q -f qcow -b base.raw -F raw over.qcow
qemu-io -f qcow "${writes[@]}" over.qcow >/dev/null
for img in plain over; do
    f=$img.qcow
    same "$img: info" qemu-img info "$f" -- "$QB_IMG" info "$f"
    same "$img: info --output=json" qemu-img info --output=json "$f" -- \
        "$QB_IMG" info --output=json "$f"
    # compressed clusters: qemu-img map refuses the human format
    both_say "$img: map" map "$f"
    same "$img: map --output=json" qemu-img map --output=json "$f" -- \
        "$QB_IMG" map --output=json "$f"
    qemu-img convert -O raw "$f" "$img.ref"
    check "$img: convert to raw gives qemu-img's bytes" \
        quiet sh -c "'$QB_IMG' convert -O raw '$f' '$img.raw' &&
                     cmp '$img.raw' '$img.ref'"
    check "$img: convert -O qcow2, byte-identical" \
        quiet sh -c "'$QB_IMG' convert -O qcow2 '$f' '$img.qcow2' &&
                     qemu-img convert -O qcow2 '$f' '$img.q.qcow2' &&
                     cmp '$img.qcow2' '$img.q.qcow2'"
done
check "the format is probed" \
    sh -c "'$QB_IMG' info plain.qcow | grep -qx 'file format: qcow'"
check "qblock-io reads through the backing file" \
    quiet "$QB_IO" -r -c 'read -P 0xaa 4k 508k' -c 'read -P 0x22 1000 100' \
    -c 'read -P 0x44 2M 512' -c 'read -P 0xaa 2097664 3584' \
    -c 'read -P 0x66 2109440 512' -c 'read -P 0x55 2109952 512' \
    -c 'read -P 0 3M 64k' -c 'read -P 0xaa 3211264 64k' over.qcow

# ---- writing ----

for img in plain over; do
    if [ $img = plain ]; then
        "$QB_IMG" create -q -f qcow ours-$img.qcow 4M
    else
        "$QB_IMG" create -q -f qcow -b base.raw -F raw ours-$img.qcow
    fi
    writes_for $([ $img = plain ] && echo 4k 4096 || echo 512 512)
    "$QB_IO" -f qcow "${writes[@]}" ours-$img.qcow >/dev/null
    check "$img: qblock-io's writes leave qemu-io's file" \
        cmp $img.qcow ours-$img.qcow
done
qemu-io -f qcow -c 'write -P 0x88 512k 64k' ours-plain.qcow >/dev/null
"$QB_IO" -f qcow -c 'write -P 0x99 600k 64k' ours-plain.qcow >/dev/null
check "each reads what the other wrote after it" \
    quiet sh -c "'$QB_IO' -r -c 'read -P 0x88 512k 64k' \
                     -c 'read -P 0x99 600k 64k' -c 'read -P 0x44 2M 4k' \
                     ours-plain.qcow &&
                 qemu-io -r -c 'read -P 0x88 512k 64k' \
                     -c 'read -P 0x99 600k 64k' -c 'read -P 0x44 2M 4k' \
                     ours-plain.qcow"
head -c 300000 /dev/urandom > mixed.raw
cat base.raw >> mixed.raw
for c in "" "-c"; do
    rm -f q.qcow b.qcow
    qemu-img convert $c -O qcow mixed.raw q.qcow
    "$QB_IMG" convert $c -O qcow mixed.raw b.qcow
    check "convert $c -O qcow (an odd size): qemu-img's file" cmp q.qcow b.qcow
done
check "... compare" quiet "$QB_IMG" compare mixed.raw b.qcow
same "compressed: map --output=json" qemu-img map --output=json b.qcow -- \
    "$QB_IMG" map --output=json b.qcow
for t in q b; do
    cp base.raw $t.base
    qemu-img create -q -f qcow -b $t.base -F raw $t.top
    qemu-io -c 'write -P 0x55 1000 5000' -c 'write -P 0x56 2M 1M' $t.top \
        >/dev/null
done
qemu-img commit -q q.top
"$QB_IMG" commit -q b.top
check "commit: the base as qemu-img leaves it" cmp q.base b.base
check "commit: the image emptied as by qemu-img" \
    sh -c "cmp -i 56 q.top b.top && [ \$(wc -c < q.top) = \$(wc -c < b.top) ]"

# encryption: qemu-io's and qblock-io's writes leave the same file
enc=(--image-opts "driver=qcow,file.filename=E,encrypt.key-secret=s0")
for t in q b; do
    qemu-img create -q -f qcow "${S[@]}" \
        -o encrypt.format=aes,encrypt.key-secret=s0 $t.enc 4M
done
ew=(-c 'write -P 0x11 1000 100' -c 'write -P 0x22 8k 12k'
    -c 'write -P 0x33 9k 1k' -c 'write -z 64k 4k')
qemu-io "${S[@]}" "${enc[@]/E/q.enc}" "${ew[@]}" >/dev/null
"$QB_IO" "${S[@]}" "${enc[@]/E/b.enc}" "${ew[@]}" >/dev/null
check "encrypted: qblock-io's writes leave qemu-io's file" cmp q.enc b.enc
check "encrypted: qemu-io reads what qblock-io wrote" \
    quiet qemu-io -r "${S[@]}" "${enc[@]/E/b.enc}" \
    -c 'read -P 0x22 8k 1k' -c 'read -P 0x33 9k 1k' -c 'read -P 0 0 1000'
qemu-img convert "${S[@]}" "${enc[@]/E/q.enc}" -O raw q.dec
check "encrypted: convert to raw gives qemu-img's bytes" \
    quiet sh -c "'$QB_IMG' convert ${S[*]} ${enc[*]/E/q.enc} -O raw b.dec &&
                 cmp q.dec b.dec"
same "encrypted: info without the secret" qemu-img info q.enc -- \
    "$QB_IMG" info q.enc
same "encrypted: map --output=json" \
    qemu-img map --output=json "${S[@]}" "${enc[@]/E/q.enc}" -- \
    "$QB_IMG" map --output=json "${S[@]}" "${enc[@]/E/q.enc}"
both_say "encrypted: opened without the secret" map q.enc
both_say "encrypted: the wrong encrypt.format" map --image-opts \
    driver=qcow,file.filename=q.enc,encrypt.format=luks
both_say "not encrypted: encrypt.format=aes" map --image-opts \
    driver=qcow,file.filename=plain.qcow,encrypt.format=aes

# ---- refusals as QEMU's ----

both_say "resize" resize plain.qcow 8M
both_say "check" check plain.qcow
both_say "rebase -u" rebase -u -b base.raw -F raw plain.qcow
both_say "amend" amend -o size=8M plain.qcow

# ---- hostile images ----

hostile() {
    local name=$1
    shift
    cp plain.qcow h.qcow
    while [ $# -gt 0 ]; do bepatch h.qcow "$1" "$2" "$3"; shift 3; done
    both_say "$name" info h.qcow
}
hostile "version 2" 4 I 2
hostile "version 0" 4 I 0
hostile "size 1" 24 Q 1
hostile "size 0" 24 Q 0
hostile "clusters of 256 bytes" 32 B 8
hostile "clusters of 128 KiB" 32 B 17
hostile "L2 tables of 256 bytes" 33 B 5
hostile "L2 tables of 128 KiB" 33 B 14
hostile "the largest size" 24 Q 0xffffffffffffffff
hostile "an L1 table past INT_MAX bytes" 24 Q 0x10000000000000 33 B 6 32 B 9
hostile "crypt_method 2" 36 I 2
hostile "a backing name of 1024 bytes" 8 Q 48 16 I 1024
cp plain.qcow h.qcow
bepatch h.qcow 0 I 0x12345678
both_say "-f qcow on a bad magic" info -f qcow h.qcow
# an L1 table far past the end of the file: QEMU reads zeroes there
cp plain.qcow h.qcow
bepatch h.qcow 40 Q 0xfffffff000
same "an L1 table past the end of the file: map" \
    qemu-img map --output=json h.qcow -- "$QB_IMG" map --output=json h.qcow
# a 2^50-byte disk whose L1 table the file does not hold: no 2 GiB of it
cp plain.qcow h.qcow
bepatch h.qcow 24 Q 0x4000000000000
bepatch h.qcow 32 B 16
bepatch h.qcow 33 B 13
if ldd "$QB_IO" 2>/dev/null | grep -q libasan; then
    bound="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_allocation_size_mb=1000"
else
    bound="ulimit -v 1000000 &&"
fi
check "a huge L1 table is read in bounded memory" \
    sh -c "$bound '$QB_IO' -r -c 'read 0 1M' h.qcow >/dev/null"
check "... and written at its last entry, bounded too" \
    sh -c "$bound '$QB_IO' -c 'write -P 0x11 1125899906777088 64k' \
           h.qcow >/dev/null"
check "... which qemu-io reads back" quiet qemu-io -r \
    -c 'read -P 0x11 1125899906777088 64k' h.qcow
# entries pointing nowhere sensible: an error, not a crash
cp plain.qcow h.qcow
bepatch h.qcow 48 Q 0x7fffffffffffff00
refused "an L2 table at 2^63: reading" "Input/output error" \
    "$QB_IO" -r -c 'read 0 4k' h.qcow
cp plain.qcow h.qcow
l2=$(python3 -c "import struct;print(struct.unpack('>Q',open('plain.qcow','rb').read()[48:56])[0])")
bepatch h.qcow "$l2" Q 0x1001
refused "an unaligned data cluster: reading" "Input/output error" \
    "$QB_IO" -r -c 'read 0 4k' h.qcow
check "... as in QEMU" \
    sh -c "! qemu-io -r -c 'read 0 4k' h.qcow 2>&1 | grep -q '^read [0-9]'"
refused "an unaligned data cluster: writing" "Input/output error" \
    "$QB_IO" -c 'write 0 4k' h.qcow
# tables on the header: QEMU would write over it; refused, the header kept
cp plain.qcow h.qcow
bepatch h.qcow 40 Q 0
cp h.qcow h0.qcow
refused "an L1 table on the header: writing a new table" "lies on the header" \
    "$QB_IO" -c 'write 3M 4k' h.qcow
check "... the header unchanged" cmp -n 48 h0.qcow h.qcow
# the L2 table at 8: cluster 1's entry is bytes 16-23 (zero: unallocated)
cp plain.qcow h.qcow
bepatch h.qcow 48 Q 8
cp h.qcow h0.qcow
refused "an L2 table on the header: writing a new cluster" \
    "lies on the header" "$QB_IO" -c 'write 4k 4k' h.qcow
check "... the header unchanged" cmp -n 48 h0.qcow h.qcow
check "... which reads as QEMU reads it" \
    bash -c "qemu-io -r -c 'read -v 0 8k' h.qcow > q.out 2>&1;
           '$QB_IO' -r -c 'read -v 0 8k' h.qcow > b.out 2>&1;
           diff <(sed '/ops/d' q.out) <(sed '/ops/d' b.out)"

# 2M: the first entry of the second L2 table
l2b=$(python3 -c "import struct;print(struct.unpack('>Q',open('plain.qcow','rb').read()[56:64])[0])")
cp plain.qcow h.qcow
bepatch h.qcow "$l2b" Q 0xfff0000000001000
refused "a compressed cluster that does not inflate" "Input/output error" \
    "$QB_IO" -r -c 'read 2M 4k' h.qcow

summary
