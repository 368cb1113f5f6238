#!/usr/bin/env bash
# Parallels images against QEMU 7.2: creating, writing, reading, check.
#
#   tests/interop/parallels-interop.sh BUILD_DIR
#
# Creation: qblock-img create -f parallels writes qemu-img's Formatting
# line and file byte for byte (nothing in the format is random), for
# cluster sizes from 512 bytes to 1 MiB and odd ones, and refuses what
# qemu-img refuses (cluster too large, disk too large for the cluster, a
# backing file); blockdev-create against qemu-storage-daemon.  Writing:
# the same qemu-io commands (writes within and across clusters, zero
# writes, discards) by qemu-io and qblock-io on new images leave the same
# files; each tool reads what the other wrote; convert -O parallels gives
# qemu-img's file; resize, amend and measure are refused as by qemu-img;
# a backing node given by options supplies what a new cluster does not
# write.  Reading: QEMU's own sample images (both layouts) give the same
# info, map and bytes.  Check: an image not closed, an entry outside the
# file, space leaked past the last cluster, each with qemu-img's output
# and exit status, repaired by -r as by qemu-img; the in-use refusal of a
# read-write open.  Hostile headers: QEMU's refusals with QEMU's words;
# an entry pointing into the table is refused for writing and repaired by
# check (QEMU would write over its table).  Prints "ok NAME" / "FAIL
# NAME", ends with "N passed, N failed, N skipped"; exits 77 without
# qemu-img.
set -u

build=$(cd "${1:?usage: parallels-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
# same and refused
. "$here/vmdk-lib.bash"

# poke FILE OFFSET HEX [OFFSET HEX]...: bytes written over the file's
poke() {
    python3 - "$@" <<'EOF'
import sys
path, args = sys.argv[1], sys.argv[2:]
with open(path, 'r+b') as f:
    for off, hexbytes in zip(args[::2], args[1::2]):
        f.seek(int(off, 0))
        f.write(bytes.fromhex(hexbytes))
EOF
}

# both_say NAME CMD...: the same output and exit status from the qemu
# tool and from qblock's ("qemu-" in CMD's first word swapped), tool
# names and timings aside; CMD runs on a copy of h.img for each
squash() {
    sed 's/^qemu-\(img\|io\): //; s/^qblock-\(img\|io\): //;
         s/[0-9.]* [KMG]\?i\?B\/sec and [0-9.]* ops\/sec/X/; s/[0-9.]* sec/X/'
}
both_say() {
    local name=$1 tool=$2 q b qrc brc
    shift 2
    cp h.img hq.img
    cp h.img hb.img
    q=$("qemu-$tool" "${@/#h.img/hq.img}" 2>&1 | squash; echo "rc ${PIPESTATUS[0]}")
    b=$("$build/qblock-$tool" "${@/#h.img/hb.img}" 2>&1 | squash; echo "rc ${PIPESTATUS[0]}")
    q=${q//hq.img/h.img}
    b=${b//hb.img/h.img}
    if [ "$q" = "$b" ]; then
        ok "$name"
    else
        fail "$name" "$(diff <(echo "$q") <(echo "$b"))"
    fi
}

# ---- creation ----
for spec in "64M" "4M cluster_size=64k" "1000 cluster_size=1000" \
            "5M cluster_size=4096" "1M cluster_size=512" \
            "100T" "3G cluster_size=1536"; do
    set -- $spec
    opts=${2:+-o $2}
    # shellcheck disable=SC2086
    q=$(qemu-img create -f parallels $opts q.img "$1" 2>&1)
    # shellcheck disable=SC2086
    b=$("$QB_IMG" create -f parallels $opts b.img "$1" 2>&1)
    if [ "${q/q.img/X}" = "${b/b.img/X}" ]; then
        ok "create $spec: the Formatting line"
    else
        fail "create $spec: the Formatting line" "qemu: $q" "qblock: $b"
    fi
    check "create $spec: qemu-img's file" cmp -s q.img b.img
done
for spec in "1M cluster_size=4G" "1M cluster_size=2G" "10P" \
            "1M cluster_size=0"; do
    set -- $spec
    opts=${2:+-o $2}
    # shellcheck disable=SC2086
    same "create $spec refused as by qemu-img" \
        sh -c "qemu-img create -f parallels $opts x.img $1 2>&1 | sed 's/^qemu-img: //'; true" -- \
        sh -c "'$QB_IMG' create -f parallels $opts x.img $1 2>&1 | sed 's/^qblock-img: //'; true"
done
"$QB_IMG" create -f parallels h.img 4M >/dev/null
both_say "create with a backing file refused" img create -f parallels \
    -b h.img -F parallels x.img
both_say "resize refused" img resize -f parallels h.img 8M
both_say "amend refused" img amend -f parallels -o size=8M h.img
both_say "measure refused" img measure -O parallels h.img

# blockdev-create over QMP, against qemu-storage-daemon
qsd_scenario "$build" create-parallels

# ---- writing ----
writes=(-c 'write -P 1 100k 3k' -c 'write -P 2 0 512' -c 'write -z 1M 64k'
        -c 'discard 0 64k' -c 'write -P 3 2M 200k' -c 'write -P 4 130k 1k'
        -c 'write -P 5 4095k 1k')
for cl in 64k 1M 4096; do
    qemu-img create -f parallels -o cluster_size=$cl q.img 4M >/dev/null
    "$QB_IMG" create -f parallels -o cluster_size=$cl b.img 4M >/dev/null
    qemu-io -f parallels "${writes[@]}" q.img >/dev/null
    "$QB_IO" -f parallels "${writes[@]}" b.img >/dev/null
    check "writes, $cl clusters: qemu-io's file" cmp -s q.img b.img
    same "writes, $cl clusters: map" "$Q_IMG" map --output=json q.img -- \
        "$QB_IMG" map --output=json b.img
    same "writes, $cl clusters: check" "$Q_IMG" check q.img -- \
        "$QB_IMG" check b.img
    # each reads what the other wrote
    "$QB_IO" -f parallels -c 'write -P 7 3M 70k' q.img >/dev/null
    qemu-io -f parallels -c 'write -P 7 3M 70k' b.img >/dev/null
    check "writes, $cl clusters: each tool's write on the other's image" \
        quiet "$Q_IMG" compare -f parallels -F parallels q.img b.img
    check "writes, $cl clusters: qemu-img check of qblock's write" \
        quiet "$Q_IMG" check q.img
done
head -c 3M /dev/urandom > src.raw
truncate -s 5M src.raw
"$Q_IMG" convert -f raw -O parallels -o cluster_size=64k src.raw q.img
"$QB_IMG" convert -f raw -O parallels -o cluster_size=64k src.raw b.img
check "convert -O parallels: qemu-img's file" cmp -s q.img b.img
check "convert -f parallels: the source's bytes" \
    quiet "$QB_IMG" compare -f parallels -F raw b.img src.raw

# a backing node by options: a new cluster takes what the write leaves
"$QB_IMG" create -f parallels -o cluster_size=64k base.img 1M >/dev/null
"$QB_IO" -f parallels -c 'write -P 42 0 64k' base.img >/dev/null
"$QB_IMG" create -f parallels -o cluster_size=64k top.img 1M >/dev/null
opts="driver=parallels,file.filename=top.img,backing.driver=parallels"
opts+=",backing.file.filename=base.img"
check "backing by options: a 64-byte write keeps the rest of the cluster" \
    quiet "$QB_IO" --image-opts -c 'write -P 1 0 64' -c 'read -P 1 0 64' \
    -c 'read -P 42 64 65472' -c 'read -P 0 64k 960k' "$opts"
check "backing by options: qemu-io reads the same" \
    quiet qemu-io --image-opts -c 'read -P 1 0 64' -c 'read -P 42 64 65472' \
    "$opts"

# ---- QEMU's sample images ----
samples=${UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/qblock}
samples=$samples/qemu-iotests-7.2/sample_images
if [ -f "$samples/parallels-v1.bz2" ]; then
    for v in v1 v2; do
        bzcat "$samples/parallels-$v.bz2" > $v.img
        same "sample $v: info" "$Q_IMG" info $v.img -- "$QB_IMG" info $v.img
        same "sample $v: map" "$Q_IMG" map --output=json $v.img -- \
            "$QB_IMG" map --output=json $v.img
        "$Q_IMG" convert -O raw $v.img q.raw
        "$QB_IMG" convert -O raw $v.img b.raw
        check "sample $v: qemu-img's bytes" cmp -s q.raw b.raw
    done
    # the format extension's dirty bitmap, exported by each NBD server
    bzcat "$samples/parallels-with-bitmap.bz2" > wb.img
    uuid=e4f2eed0-37fe-4539-b50b-85d2e7fd235f
    for who in qemu qblock; do
        srv=qemu-nbd
        [ $who = qblock ] && srv=$build/qblock-nbd
        rm -f "$work/$who.sock"
        "$srv" --read-only --socket="$work/$who.sock" --bitmap=$uuid \
            -f parallels wb.img 2>"$who-nbd.err" &
        pid=$!
        for _ in $(seq 100); do
            [ -S "$work/$who.sock" ] && break
            sleep 0.1
        done
        "$Q_IMG" map --output=json --image-opts "driver=nbd,server.type=unix,server.path=$work/$who.sock,x-dirty-bitmap=qemu:dirty-bitmap:$uuid" \
            > "map-$who.json" 2>&1
        kill $pid 2>/dev/null
        wait $pid 2>/dev/null
    done
    if cmp -s map-qemu.json map-qblock.json && grep -q '"data": false' map-qblock.json; then
        ok "sample with a bitmap: qemu-nbd's dirty map over NBD"
    else
        fail "sample with a bitmap: qemu-nbd's dirty map over NBD" \
            "$(diff map-qemu.json map-qblock.json)" "$(cat qblock-nbd.err)"
    fi
    cp wb.img h.img
    poke h.img 0x200060 01
    both_say "sample with a bitmap: a wrong extension checksum" \
        io -r -c 'read 0 512' h.img
else
    skip "QEMU's sample images" "the upstream tests are not fetched"
fi

# ---- check ----
make_h() {
    "$QB_IMG" create -f parallels -o cluster_size=64k h.img 1M >/dev/null
    "$QB_IO" -f parallels -c 'write -P 1 0 256k' h.img >/dev/null
}
make_h; poke h.img 0x2c 596e6f74
both_say "in use: a read-write open refused" io -c 'read 0 512' h.img
both_say "in use: a read-only open reads" io -r -c 'read -P 1 0 512' h.img
both_say "in use: check" img check h.img
both_say "in use: check -r all" img check -r all h.img
make_h; poke h.img 0x44 00100000
both_say "an entry outside the file: check" img check h.img
both_say "an entry outside the file: check -r all" img check -r all h.img
make_h; truncate -s +200k h.img
both_say "space leaked: check" img check h.img
both_say "space leaked: check -r leaks" img check -r leaks h.img
make_h; poke h.img 0x40 00000000
both_say "a cluster without its entry: check" img check h.img

# ---- hostile headers ----
make_h; poke h.img 0x1c 00000000
both_say "hostile: zero sectors per track" io -c 'read 0 512' h.img
make_h; poke h.img 0x1c ffffff7f
both_say "hostile: too big a cluster" io -c 'read 0 512' h.img
make_h; poke h.img 0x20 ffffffff
both_say "hostile: a negative table size" io -c 'read 0 512' h.img
make_h; poke h.img 0x24 ffffffffffffff7f
both_say "hostile: a disk too large" io -c 'read 0 512' h.img
make_h; poke h.img 0x38 0100000000000000
both_say "hostile: a format extension without its magic, read-only" \
    io -r -c 'read 0 512' h.img
both_say "hostile: a format extension, read-write" io -c 'read 0 512' h.img
make_h; poke h.img 0x10 03000000
refused "hostile: version 3 is no parallels image" \
    "Image not in Parallels format" \
    "$QB_IO" -f parallels -c 'read 0 512' h.img
make_h; poke h.img 0x20 00001000
refused "hostile: a table longer than the file" "Image file is truncated" \
    "$QB_IO" -f parallels -c 'read 0 512' h.img
# an entry into the table itself: the old layout's entries count sectors,
# so the first cluster's entry (1) names the file's second sector
"$QB_IMG" create -f parallels -o cluster_size=4096 h.img 1M >/dev/null
"$QB_IO" -f parallels -c 'write -P 1 0 4k' h.img >/dev/null
poke h.img 0 576974686f7574467265655370616365
refused "hostile: a write into the table refused" "not written" \
    "$QB_IO" -f parallels -c 'write -P 9 0 512' h.img
refused "hostile: check names an entry into the table" \
    "ERROR cluster 0 overlaps the header or the allocation table" \
    "$QB_IMG" check h.img
check "hostile: check -r all drops that entry" \
    quiet "$QB_IMG" check -r all h.img
check "hostile: then the write lands in a new cluster" \
    quiet "$QB_IO" -f parallels -c 'write -P 9 0 512' -c 'read -P 9 0 512' \
    h.img
check "hostile: and qemu-img check finds no error" quiet "$Q_IMG" check h.img

summary
