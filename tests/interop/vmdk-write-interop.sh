#!/usr/bin/env bash
# Creating and writing VMDK images against QEMU 7.2.
#
#   tests/interop/vmdk-write-interop.sh BUILD_DIR
#
# qblock-img create and convert -O vmdk, for every subformat and the
# options that change the layout, write the files qemu-img writes (byte
# for byte, but for the descriptor's random CID) and print its
# Formatting line; the same writes through qblock-io and qemu-io (partial
# grains over a base, zeroes with and without zeroed grains, flat
# extents) leave the same files; what qblock writes, qemu-img reads and
# checks clean.  A stream-optimized grain is taken once, as in QEMU; the
# first write after open gives the disk a new CID, and a delta does not
# read through to a parent whose CID changed; concurrent writes into
# grains never written are all kept; a commit reopens a base read-write.  Then what creation and writing
# refuse, each with a message.  Prints "ok NAME" / "FAIL NAME", ends
# with "N passed, N failed, N skipped"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: vmdk-write-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
. "$here/vmdk-lib.bash"

subformats="monolithicSparse monolithicFlat twoGbMaxExtentSparse
            twoGbMaxExtentFlat streamOptimized"
mkdir q b

# same_files NAME FILE...: each FILE in q/ (qemu's) and b/ (qblock's)
same_files() {
    local name=$1 f out
    shift
    for f in "$@"; do
        if ! out=$(vmdk_same "q/$f" "b/$f" 2>&1); then
            fail "$name" "$out"
            return
        fi
    done
    ok "$name"
}
# the files of image NAME in q/
files_of() { (cd q && ls "$1"*); }

# ---- creation ----
for sub in $subformats; do
    for opts in "" ",adapter_type=lsilogic" ",compat6=on" \
                ",hwversion=7,toolsversion=1234" ",adapter_type=legacyESX"; do
        o="subformat=$sub$opts"
        # 5 GiB: three extents of the twoGbMaxExtent subformats
        same "create $o: Formatting line" \
            env -C q "$Q_IMG" create -f vmdk -o "$o" c.vmdk 5G -- \
            env -C b "$QB_IMG" create -f vmdk -o "$o" c.vmdk 5G
        # shellcheck disable=SC2046
        same_files "create $o: the files qemu-img writes" $(files_of c)
        rm -f q/c* b/c*
    done
done
for sub in monolithicSparse twoGbMaxExtentSparse streamOptimized; do
    "$Q_IMG" create -q -f vmdk -o subformat=$sub,zeroed_grain=on q/z.vmdk 3G
    "$QB_IMG" create -q -f vmdk -o subformat=$sub,zeroed_grain=on b/z.vmdk 3G
    # shellcheck disable=SC2046
    same_files "create $sub,zeroed_grain=on" $(files_of z)
    rm -f q/z* b/z*
done
for size in 1000 1M 100G 3000G; do
    "$Q_IMG" create -q -f vmdk q/s.vmdk $size
    "$QB_IMG" create -q -f vmdk b/s.vmdk $size
    same_files "create monolithicSparse of $size" s.vmdk
done
# a file name without an extension: extents NAME-s001, as in QEMU
"$Q_IMG" create -q -f vmdk -o subformat=twoGbMaxExtentSparse q/noext 3G
"$QB_IMG" create -q -f vmdk -o subformat=twoGbMaxExtentSparse b/noext 3G
# shellcheck disable=SC2046
same_files "create: extents of a name without an extension" \
    $(files_of noext)

# ---- convert -O vmdk ----
# the disk: random data, a run of one byte, scattered sectors, zeroes,
# and a last grain that ends inside the disk
head -c $((64 << 20)) /dev/zero > src.raw
dd if=/dev/urandom of=src.raw bs=1M count=1 conv=notrunc 2>/dev/null
"$Q_IO" -f raw -c 'write -P 0xab 5M 300k' -c 'write -P 0x5c 40M 3584' \
    -c 'write -P 0x11 64508k 4k' src.raw >/dev/null
truncate -s $(((64 << 20) + 3584)) src.raw
"$Q_IO" -f raw -c 'write -P 0x3c 64M 3584' src.raw >/dev/null
for sub in $subformats; do
    "$Q_IMG" convert -f raw -O vmdk -o subformat=$sub src.raw q/$sub.vmdk
    check "convert -O vmdk -o subformat=$sub" \
        quiet "$QB_IMG" convert -f raw -O vmdk -o subformat=$sub src.raw \
        b/$sub.vmdk
    # shellcheck disable=SC2046
    same_files "$sub: the files qemu-img's convert writes" $(files_of $sub)
    check "$sub: qemu-img reads the disk converted" \
        quiet "$Q_IMG" compare -f raw -F vmdk src.raw b/$sub.vmdk
    check "$sub: qemu-img check finds no error" \
        quiet "$Q_IMG" check b/$sub.vmdk
    # the last grain holds 3584 bytes of the disk; deflated, only those
    check "$sub: qblock reads qemu-img's" \
        quiet "$QB_IMG" compare -f raw -F vmdk src.raw q/$sub.vmdk
done

# convert -c: a sparse extent writes the same file, a stream-optimized
# one too (every grain is deflated anyway), a flat one has no grains
for sub in monolithicSparse twoGbMaxExtentSparse streamOptimized; do
    rm -f q/* b/*
    "$Q_IMG" convert -c -f raw -O vmdk -o subformat=$sub src.raw q/c.vmdk
    check "convert -c -O vmdk -o subformat=$sub" \
        quiet "$QB_IMG" convert -c -f raw -O vmdk -o subformat=$sub \
        src.raw b/c.vmdk
    # shellcheck disable=SC2046
    same_files "$sub: the files qemu-img's convert -c writes" $(files_of c)
done
refused "convert -c -O vmdk -o subformat=monolithicFlat" \
    "invalid cluster size" \
    "$QB_IMG" convert -c -f raw -O vmdk -o subformat=monolithicFlat \
    src.raw b/cf.vmdk

# ---- the same writes through both tools ----
ops=(-c 'write -P 0x11 0 4k' -c 'write -P 0x22 100k 8k'
     -c 'write -P 0x33 1020k 8k' -c 'write -z 2M 64k'
     -c 'write -P 0x44 2M 512' -c 'write -P 0x55 0 64k'
     -c 'write -z 4M 128k' -c 'write -P 0x66 3M 1M' -c 'write -z 5M 4k'
     -c 'write -P 0x77 7M 1M')
for sub in monolithicSparse twoGbMaxExtentSparse; do
    for zg in off on; do
        name="$sub, zeroed_grain=$zg, over a base"
        rm -f q/* b/*
        "$Q_IMG" create -q -f vmdk -o zeroed_grain=$zg q/base.vmdk 8M
        "$Q_IO" -f vmdk -c 'write -P 0xaa 0 8M' q/base.vmdk >/dev/null
        cp q/base.vmdk b/base.vmdk
        "$Q_IMG" create -q -f vmdk -o subformat=$sub,zeroed_grain=$zg \
            -b base.vmdk -F vmdk q/d.vmdk
        "$QB_IMG" create -q -f vmdk -o subformat=$sub,zeroed_grain=$zg \
            -b base.vmdk -F vmdk b/d.vmdk
        # shellcheck disable=SC2046
        same_files "$name: the delta qemu-img creates" $(files_of d)
        "$Q_IO" -f vmdk "${ops[@]}" q/d.vmdk >/dev/null
        check "$name: qblock-io writes" \
            quiet "$QB_IO" -f vmdk "${ops[@]}" b/d.vmdk
        # shellcheck disable=SC2046
        same_files "$name: the files qemu-io leaves" $(files_of d)
        check "$name: the disk qemu-io leaves" \
            quiet "$Q_IMG" compare q/d.vmdk b/d.vmdk
        same "$name: map" "$Q_IMG" map --output=json q/d.vmdk -- \
            "$QB_IMG" map --output=json b/d.vmdk
        check "$name: qemu-img check" quiet "$Q_IMG" check b/d.vmdk
    done
done
for sub in monolithicFlat twoGbMaxExtentFlat; do
    rm -f q/* b/*
    "$Q_IMG" create -q -f vmdk -o subformat=$sub q/f.vmdk 8M
    "$QB_IMG" create -q -f vmdk -o subformat=$sub b/f.vmdk 8M
    "$Q_IO" -f vmdk "${ops[@]}" q/f.vmdk >/dev/null
    check "$sub: qblock-io writes" quiet "$QB_IO" -f vmdk "${ops[@]}" b/f.vmdk
    # shellcheck disable=SC2046
    same_files "$sub: the files qemu-io leaves" $(files_of f)
done

# ---- stream-optimized: each grain once ----
rm -f q/* b/*
"$Q_IMG" create -q -f vmdk -o subformat=streamOptimized q/s.vmdk 1M
"$QB_IMG" create -q -f vmdk -o subformat=streamOptimized b/s.vmdk 1M
sops=(-c 'write -P 0x12 64k 64k' -c 'write -P 0x34 192k 128k')
"$Q_IO" -f vmdk "${sops[@]}" q/s.vmdk >/dev/null
check "streamOptimized: whole grains written" \
    quiet "$QB_IO" -f vmdk "${sops[@]}" b/s.vmdk
same_files "streamOptimized: the file qemu-io leaves" s.vmdk
refused "streamOptimized: a grain written twice" \
    "Could not write to allocated cluster for streamOptimized" \
    "$QB_IO" -f vmdk -c 'write 64k 4k' b/s.vmdk
# QEMU refuses a part of a grain (EINVAL); qblock completes it with
# zeroes, or the backing file's data, and deflates the whole grain
check "streamOptimized: a part of a grain never written" \
    quiet "$QB_IO" -f vmdk -c 'write -P 0x56 516k 4k' b/s.vmdk
check "... reads back for qemu-io, zeroes around it" \
    quiet "$Q_IO" -r -f vmdk -c 'read -P 0 512k 4k' \
    -c 'read -P 0x56 516k 4k' -c 'read -P 0 520k 56k' \
    -c 'read -P 0x12 64k 64k' b/s.vmdk

# ---- a qcow2 overlay committed into a vmdk base (a reopen read-write) ----
"$QB_IMG" create -q -f vmdk -o subformat=streamOptimized b/cbase.vmdk 4M
"$QB_IMG" create -q -f qcow2 -b cbase.vmdk -F vmdk b/top.qcow2
"$QB_IO" -f qcow2 -c 'write -P 0x42 1M 64k' b/top.qcow2 >/dev/null
check "commit of a qcow2 overlay into a stream-optimized base" \
    quiet "$QB_IMG" commit b/top.qcow2
check "... which qemu-io reads" \
    quiet "$Q_IO" -r -f vmdk -c 'read -P 0x42 1M 64k' -c 'read -P 0 0 1M' \
    b/cbase.vmdk
check "... and qemu-img checks clean" quiet "$Q_IMG" check b/cbase.vmdk

# ---- the CID ----
cid() { grep -a '^CID=' "$1" | head -n 1; }
"$QB_IMG" create -q -f vmdk b/cid.vmdk 1M
before=$(cid b/cid.vmdk)
"$QB_IO" -r -f vmdk -c 'read 0 4k' b/cid.vmdk >/dev/null
[ "$(cid b/cid.vmdk)" = "$before" ] && ok "a read leaves the CID" ||
    fail "a read leaves the CID"
"$QB_IO" -f vmdk -c 'write 0 4k' -c 'write 64k 4k' b/cid.vmdk >/dev/null
after=$(cid b/cid.vmdk)
[ "$after" != "$before" ] && ok "a write gives a new CID" ||
    fail "a write gives a new CID" "$before / $after"
"$QB_IMG" create -q -f vmdk -b cid.vmdk -F vmdk b/child.vmdk
grep -aqx "parentCID=${after#CID=}" b/child.vmdk &&
    ok "a delta names its base's CID" ||
    fail "a delta names its base's CID" "$(grep -a CID b/child.vmdk)"

"$QB_IO" -f vmdk -c 'write -P 9 0 64k' b/child.vmdk >/dev/null
"$QB_IO" -f vmdk -c 'write 512k 4k' b/cid.vmdk >/dev/null
check "a delta's own grains read after its parent changed" \
    quiet "$QB_IO" -r -f vmdk -c 'read -P 9 0 64k' b/child.vmdk
refused "... but not its parent's (as in QEMU)" \
    "was made on a parent of CID ${after#CID=}, but" \
    "$QB_IO" -r -f vmdk -c 'read 64k 4k' b/child.vmdk
refused "... nor for qemu-io" "Invalid argument" \
    "$Q_IO" -r -f vmdk -c 'read 64k 4k' b/child.vmdk

# ---- concurrent writes into new grains ----
"$QB_IMG" create -q -f vmdk b/aio.vmdk 4M
aio=()
for i in $(seq 0 63); do
    aio+=(-c "aio_write -P $((i + 1)) $((i * 32))k 32k")
done
check "64 concurrent writes, two a grain" \
    quiet "$QB_IO" -f vmdk "${aio[@]}" -c aio_flush b/aio.vmdk
reads=()
for i in $(seq 0 63); do
    reads+=(-c "read -P $((i + 1)) $((i * 32))k 32k")
done
check "... each reads back for qemu-io" \
    quiet "$Q_IO" -r -f vmdk "${reads[@]}" b/aio.vmdk
check "... and qemu-img check finds no leak" quiet "$Q_IMG" check b/aio.vmdk
# runs of whole grains, at once, in both kinds of sparse extent
for sub in monolithicSparse streamOptimized; do
    "$QB_IMG" create -q -f vmdk -o subformat=$sub b/run.vmdk 8M
    aio=() reads=()
    for i in $(seq 0 15); do
        aio+=(-c "aio_write -P $((i + 1)) $((i * 512))k 512k")
        reads+=(-c "read -P $((i + 1)) $((i * 512))k 512k")
    done
    check "$sub: 16 concurrent writes of 8 grains each" \
        quiet "$QB_IO" -f vmdk "${aio[@]}" -c aio_flush b/run.vmdk
    check "... each reads back for qemu-io" \
        quiet "$Q_IO" -r -f vmdk "${reads[@]}" b/run.vmdk
    check "... and qemu-img check finds no error" \
        quiet "$Q_IMG" check b/run.vmdk
    rm -f b/run.vmdk
done

# ---- what is refused ----
refused "create: a flat image with a backing file" \
    "Flat image can't have backing file" \
    "$QB_IMG" create -f vmdk -o subformat=monolithicFlat \
    -b aio.vmdk -F vmdk b/x.vmdk
refused "create: a flat image with zeroed grains" \
    "Flat image can't enable zeroed grain" \
    "$QB_IMG" create -f vmdk -o subformat=twoGbMaxExtentFlat,zeroed_grain=on \
    b/x.vmdk 1M
refused "create: an unknown subformat" "Unknown subformat: 'foo'" \
    "$QB_IMG" create -f vmdk -o subformat=foo b/x.vmdk 1M
refused "create: an unknown adapter" "Unknown adapter type: 'scsi'" \
    "$QB_IMG" create -f vmdk -o adapter_type=scsi b/x.vmdk 1M
refused "create: compat6 and hwversion" \
    "compat6 cannot be enabled with hwversion set" \
    "$QB_IMG" create -f vmdk -o compat6=on,hwversion=7 b/x.vmdk 1M
refused "create: a backing file of another format" \
    "backing_file must be a vmdk image" \
    "$QB_IMG" create -f vmdk -b ../src.raw -F raw b/x.vmdk
[ ! -e b/x.vmdk ] && ok "a refused creation leaves no file" ||
    fail "a refused creation leaves no file"
# hostile tables: a grain, or a grain table, placed in the metadata
"$QB_IMG" create -q -f vmdk b/h.vmdk 1M
"$QB_IO" -f vmdk -c 'write -P 1 0 64k' b/h.vmdk >/dev/null
gd=$(python3 -c "
import struct
d = open('b/h.vmdk', 'rb').read()
gd = struct.unpack_from('<Q', d, 56)[0]
print(gd, struct.unpack_from('<I', d, gd * 512)[0])")
gt=${gd#* } gd=${gd% *}
cp b/h.vmdk b/h1.vmdk
patch b/h1.vmdk $((gt * 512)) I 2
refused "a grain placed in the descriptor is not written" \
    "grain 0 lies at sector 2, in the extent's metadata: not written" \
    "$QB_IO" -f vmdk -c 'write 0 4k' b/h1.vmdk
cp b/h.vmdk b/h2.vmdk
patch b/h2.vmdk $((gd * 512)) I "$gd"
refused "a grain table placed on the directory is not written" \
    "grain table 0 lies in the extent's metadata: not written" \
    "$QB_IO" -f vmdk -c 'write 64k 4k' b/h2.vmdk
check "... neither image's metadata changed" \
    quiet sh -c "'$QB_IMG' info b/h1.vmdk && '$QB_IMG' info b/h2.vmdk &&
                 cmp -n 512 b/h.vmdk b/h1.vmdk"

# a ZERO extent reads as zeroes and cannot be written
head -c 1M /dev/zero > b/zx-flat.vmdk
printf '%s\n' '# Disk DescriptorFile' version=1 CID=1 parentCID=ffffffff \
    'createType="monolithicFlat"' 'RW 2048 FLAT "zx-flat.vmdk" 0' \
    'RW 2048 ZERO' > b/zx.vmdk
check "a ZERO extent: the flat one before it is written" \
    quiet "$QB_IO" -f vmdk -c 'write -P 7 0 4k' b/zx.vmdk
refused "a ZERO extent is not written" "lies in a ZERO extent" \
    "$QB_IO" -f vmdk -c 'write 1M 4k' b/zx.vmdk

summary
