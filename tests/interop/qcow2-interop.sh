#!/usr/bin/env bash
# qcow2 images between qblock and the real QEMU tools, both ways.
#
#   tests/interop/qcow2-interop.sh BUILD_DIR
#
# For every cluster size from 512 B to 2 MiB, refcount_bits 1, 16 and 64
# (compat=1.1) and compat=0.10, the same workload (data, partial-cluster
# and cross-L2-table writes, zero writes with and without unmap,
# compressed clusters, a discard, copy-on-write from a shorter backing
# file) is run once with qblock's tools and once with QEMU's, each making
# its own backing file and overlay.  Then:
#
#   - the real qemu-img check finds no error and no leak in qblock's
#     images, and qemu-img compare finds them identical to QEMU's;
#   - qblock-img compare finds QEMU's images identical to qblock's, and
#     qblock-io reads QEMU's overlay back pattern by pattern;
#   - qblock-img check, info and map print what qemu-img prints for
#     QEMU's overlay (human and json) and for qblock's, with the same exit
#     status.
#
# Finally images QEMU wrote are damaged in known ways, and qblock-img
# check (also -r leaks and -r all, on copies) must print what qemu-img
# check prints and exit as it does; both repaired copies must then pass
# the real qemu-img check alike.
#
# QBLOCK_MATRIX_STRIDE=K runs every K-th cluster size only (make
# check-asan: 2, 512 B to 2 MiB still, all four variants each; the whole
# matrix runs in make check): under ASan the script looks for memory
# errors on the paths the matrix takes, and the sizes between take the
# same ones.  The sizes left out are one skip line.
#
# Prints "ok NAME" or "FAIL NAME" (with details) per case and ends with
# "N passed, N failed, N skipped"; exits 77 when qemu-img or qemu-io is
# missing.
set -u

build=${1:?usage: qcow2-interop.sh BUILD_DIR}
build=$(cd "$build" && pwd)
our_img=$build/qblock-img our_io=$build/qblock-io
here=$(cd "$(dirname "$0")" && pwd)
edit="python3 $here/../qemu-iotests/qcow2-edit"
if ! qemu_img=$(command -v qemu-img) || ! qemu_io=$(command -v qemu-io); then
    echo "skipped: qemu-img/qemu-io are not installed (Debian package qemu-utils)"
    exit 77
fi
if [ ! -x "$our_img" ] || [ ! -x "$our_io" ]; then
    echo "FAIL: qblock-img or qblock-io was not built"
    echo "0 passed, 1 failed"
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0 skip=0

ok() { echo "ok $1"; pass=$((pass + 1)); }
not_ok() {
    echo "FAIL $1"
    [ -n "${2:-}" ] && sed 's/^/    /' "$2" | head -n 40
    fail=$((fail + 1))
}

# Program names, the scratch directory and timings may differ.
filter() {
    sed -e 's/qemu-img/PROG/g' -e 's/qblock-img/PROG/g' \
        -e 's/qemu-io/PROG/g' -e 's/qblock-io/PROG/g' \
        -e "s#$work#WORK#g" \
        -e 's/ops; [0-9:.]* sec (.*)$/ops; T/'
}

# same NAME CMD...: runs CMD with QEMU's tool and with ours ($TOOL in the
# command line stands for qemu-img / qblock-img) and compares stdout,
# stderr and exit status.
same() {
    local name=$1 cmd=$2 side
    for side in qemu ours; do
        local tool=$qemu_img
        [ $side = ours ] && tool=$our_img
        { TOOL=$tool bash -c "$cmd" 2>&1; echo "exit $?"; } | filter > "$work/$side.txt"
    done
    if diff -u "$work/qemu.txt" "$work/ours.txt" > "$work/diff"; then
        ok "$name"
    else
        not_ok "$name" "$work/diff"
    fi
}

# ---------------------------------------------------------------------------
# The workload

# Writes the qemu-io commands of the workload for cluster size $1 and disk
# size $2 into the array "cmds", and the reads that verify it into
# "reads".  $3 is the compat level: a v2 discard over a backing file does
# nothing, so it is left out there.
workload() {
    local cs=$1 size=$2 compat=$3
    local l2span=$(( cs * cs / 8 ))
    local cross=$(( l2span < size - 2 * cs ? l2span - cs / 2 : 15 * cs ))
    cmds=(
        -c "write -P 0x11 0 $((3 * cs + 100))"
        -c "write -P 0x12 $((5 * cs + cs / 2)) $((cs + 7))"
        -c "write -z $((8 * cs)) $((2 * cs))"
        -c "write -z -u $((10 * cs)) $cs"
        -c "write -c -P 0x13 $((12 * cs)) $((2 * cs))"
        -c "write -P 0x14 $((12 * cs + 1)) 100"
        -c "write -P 0x15 $cross $cs"
    )
    reads=(
        -c "read -q -P 0x11 0 $((3 * cs))"
        -c "read -q -P 0x12 $((5 * cs + cs / 2)) $((cs + 7))"
        -c "read -q -P 0 $((8 * cs)) $((3 * cs))"
        -c "read -q -P 0x13 $((12 * cs)) 1"
        -c "read -q -P 0x14 $((12 * cs + 1)) 100"
        -c "read -q -P 0x13 $((12 * cs + 101)) $((2 * cs - 101))"
        -c "read -q -P 0x15 $cross $cs"
    )
    if [ "$compat" = 1.1 ]; then
        cmds+=(-c "discard $((3 * cs)) $((2 * cs))")
        reads+=(-c "read -q -P 0 $((3 * cs)) $((2 * cs))")
    else
        reads+=(-c "read -q -P 0x11 $((3 * cs)) 100")
    fi
}

# make DIR IMG IO OPTS SIZE: a backing file (three quarters of the disk,
# its first half written) and an overlay with the workload, made with the
# tools IMG and IO.
make_images() {
    local dir=$1 img=$2 io=$3 opts=$4 size=$5 cs=$6 compat=$7
    local bsize=$(( size * 3 / 4 / 512 * 512 ))
    mkdir -p "$dir"
    "$img" create -q -f qcow2 -o "$opts" "$dir/base.qcow2" "$bsize" &&
    "$io" -c "write -P 0x21 0 $(( bsize / 2 / 512 * 512 ))" "$dir/base.qcow2" > /dev/null &&
    "$img" create -q -f qcow2 -o "$opts" -b base.qcow2 -F qcow2 "$dir/top.qcow2" "$size" &&
    workload "$cs" "$size" "$compat" &&
    "$io" "${cmds[@]}" "$dir/top.qcow2" > "$dir/io.log" 2>&1
}

# qemu_check_clean NAME IMAGE: the real qemu-img check is content.
qemu_check_clean() {
    local out rc
    out=$("$qemu_img" check "$2" 2>&1)
    rc=$?
    if [ $rc = 0 ] && grep -q '^No errors were found' <<<"$out" &&
       ! grep -q -i 'leak' <<<"$out"; then
        ok "$1"
    else
        echo "$out" > "$work/out"
        echo "exit $rc" >> "$work/out"
        not_ok "$1" "$work/out"
    fi
}

compare_ok() {  # NAME TOOL A B
    local out
    if out=$("$2" compare "$3" "$4" 2>&1) && [ "$out" = "Images are identical." ]; then
        ok "$1"
    else
        echo "$out" > "$work/out"
        not_ok "$1" "$work/out"
    fi
}

matrix_case() {
    local cs=$1 bits=$2 compat=$3
    local name="cs=$cs refcount_bits=$bits compat=$compat"
    local opts="cluster_size=$cs,refcount_bits=$bits,compat=$compat"
    local size=$(( cs * 24 ))
    local l2span=$(( cs * cs / 8 ))
    # small clusters: big enough to cross an L2 table, within 16 MiB
    [ $l2span -le $(( 16 * 1024 * 1024 )) ] && size=$(( l2span + 4 * cs ))
    [ $size -lt $(( cs * 24 )) ] && size=$(( cs * 24 ))
    local ours=$work/ours/$cs-$bits-$compat theirs=$work/qemu/$cs-$bits-$compat

    if ! make_images "$ours" "$our_img" "$our_io" "$opts" $size $cs $compat; then
        not_ok "$name: qblock makes the images" "$ours/io.log"
        return
    fi
    if ! make_images "$theirs" "$qemu_img" "$qemu_io" "$opts" $size $cs $compat; then
        not_ok "$name: QEMU makes the images" "$theirs/io.log"
        return
    fi

    # qblock -> QEMU
    qemu_check_clean "$name: qemu-img check of qblock's backing file" "$ours/base.qcow2"
    qemu_check_clean "$name: qemu-img check of qblock's overlay" "$ours/top.qcow2"
    compare_ok "$name: qemu-img compare, backing files" "$qemu_img" \
        "$ours/base.qcow2" "$theirs/base.qcow2"
    compare_ok "$name: qemu-img compare, overlays" "$qemu_img" \
        "$ours/top.qcow2" "$theirs/top.qcow2"

    # QEMU -> qblock
    compare_ok "$name: qblock-img compare, overlays" "$our_img" \
        "$theirs/top.qcow2" "$ours/top.qcow2"
    if "$our_io" -r "${reads[@]}" "$theirs/top.qcow2" > "$work/out" 2>&1 &&
       [ ! -s "$work/out" ]; then
        ok "$name: qblock-io reads QEMU's overlay"
    else
        not_ok "$name: qblock-io reads QEMU's overlay" "$work/out"
    fi
    same "$name: check" "\$TOOL check '$theirs/top.qcow2'"
    same "$name: check --output=json" "\$TOOL check --output=json '$theirs/top.qcow2'"
    same "$name: info --backing-chain" "\$TOOL info --backing-chain '$theirs/top.qcow2'"
    same "$name: info --output=json" "\$TOOL info --output=json '$theirs/top.qcow2'"
    same "$name: map" "\$TOOL map '$theirs/top.qcow2'"
    same "$name: map --output=json" "\$TOOL map --output=json '$theirs/top.qcow2'"
    # and both tools describe qblock's overlay alike
    same "$name: info of qblock's overlay" "\$TOOL info --output=json '$ours/top.qcow2'"
    same "$name: map of qblock's overlay" "\$TOOL map --output=json '$ours/top.qcow2'"
    same "$name: check of qblock's overlay" "\$TOOL check '$ours/top.qcow2'"
    rm -rf "$ours" "$theirs"
}

stride=${QBLOCK_MATRIX_STRIDE:-1} i=0 left_out=()
for cs in 512 1024 2048 4096 8192 16384 32768 65536 131072 262144 524288 \
          1048576 2097152; do
    if [ $((i++ % stride)) -ne 0 ]; then
        left_out+=("$cs")
        continue
    fi
    for bits in 1 16 64; do
        matrix_case $cs $bits 1.1
    done
    matrix_case $cs 16 0.10
done
if [ ${#left_out[@]} -gt 0 ]; then
    echo "skip cluster sizes ${left_out[*]}: QBLOCK_MATRIX_STRIDE=$stride"
    skip=$((skip + 1))
fi

# ---------------------------------------------------------------------------
# Damaged images: check and repair as qemu-img does them

# damage NAME EDIT...: a 64 KiB-cluster image QEMU wrote (data, a shared
# compressed cluster, zero clusters), damaged with qcow2-edit, then both
# tools check it, and repair copies of it each.
damaged() {
    local name=$1 d=$work/damaged
    shift
    rm -rf "$d"
    mkdir -p "$d"
    "$qemu_img" create -q -f qcow2 "$d/img.qcow2" 4M
    "$qemu_io" -c "write -P 0x31 0 192k" -c "write -c -P 0x32 1M 64k" \
        -c "write -c -P 0x33 1088k 64k" -c "write -z 2M 64k" "$d/img.qcow2" > /dev/null
    truncate -s 2M "$d/img.qcow2"
    local e
    for e in "$@"; do
        $edit "$d/img.qcow2" $e
    done
    same "damaged, $name: check" "\$TOOL check '$d/img.qcow2'"
    same "damaged, $name: check --output=json" "\$TOOL check --output=json '$d/img.qcow2'"
    local mode
    for mode in leaks all; do
        local side
        for side in qemu ours; do
            cp "$d/img.qcow2" "$d/$side.qcow2"
        done
        # each tool repairs its own copy; the outputs must match, and then
        # so must what the real qemu-img check says of either copy
        same "damaged, $name: check -r $mode" \
            "f=$d/qemu.qcow2; [ \"\$TOOL\" = '$our_img' ] && f=$d/ours.qcow2; \$TOOL check -r $mode \$f"
        same "damaged, $name: qemu-img check after -r $mode" \
            "f=$d/qemu.qcow2; [ \"\$TOOL\" = '$our_img' ] && f=$d/ours.qcow2; '$qemu_img' check \$f"
    done
}

# host clusters: 0 header, 1 reftable, 2 refblock, 3 L1, 4 L2, 5-7 data,
# 8 the shared compressed cluster; the file is 2 MiB (32 clusters)
damaged "leaked cluster" "refcount 20 1"
damaged "refcount above the references" "refcount 6 2"
damaged "refcount below the references" "refcount 8 1"
damaged "data cluster with refcount 0" "refcount 5 0"
damaged "L2 table with refcount 0" "refcount 4 0"
damaged "L2 entry without OFLAG_COPIED" "l2 0 0x50000"
damaged "L1 entry without OFLAG_COPIED" "l1 0 0x40000"
damaged "unaligned data cluster" "l2 64k 0x8000000000060200"
damaged "unaligned zero cluster" "l2 2M 0x8000000000090201"
damaged "reserved bits in an L2 entry" "l2 128k 0x8000000000070100"
damaged "reserved bits in an L1 entry" "l1 0 0x8000000000040002"
damaged "refcount block outside the file" "reftable 3 0x10000000"
damaged "refcount block of a cluster past the end" "refcount 40 1"

echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
