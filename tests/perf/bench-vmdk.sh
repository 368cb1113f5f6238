#!/usr/bin/env bash
# Importing and exporting a VMDK: qblock-img convert against the real
# qemu-img convert, same images, same machine, runs alternating.
# qemu-img writes a 1 GiB disk of mixed data (64 MiB stripes: random,
# base64 text that deflates to about three quarters, zeroes) as
# monolithicSparse and as streamOptimized (deflated grains), and as qcow2
# for comparison (the copy engine alone); each tool converts each to raw,
# in order (no -W).  Then each tool converts the raw disk to both
# subformats.
#   tests/perf/bench-vmdk.sh BUILD_DIR [SIZE_MIB]
# Prints the median wall-clock seconds of $RUNS runs per tool (default 5)
# and qemu-img's time over qblock-img's (above 1.00x: qblock is faster),
# and whether the outputs are identical (they must be: byte for byte, a
# VMDK's but for the descriptor's random CID).  This script prints
# figures; it never fails on them.
set -u
build=${1:?usage: bench-vmdk.sh BUILD_DIR [SIZE_MIB]}
size_mib=${2:-1024}
runs=${RUNS:-5}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
perf_require "VMDK import benchmark" qemu-img
qblock=$build/qblock-img
qemu=$(command -v qemu-img)
perf_workdir bench
src=$dir/mixed.raw

perf_mixed_disk "$src" "$size_mib"

secs() {  # command...: wall-clock seconds of one run
    local t
    t=$( { TIMEFORMAT=%R; time "$@" >/dev/null 2>&1; } 2>&1 )
    echo "$t"
}

printf '%-34s %10s %10s %8s %s\n' "convert -O raw (${size_mib} MiB, $(nproc) CPUs)" \
    "qemu-img" "qblock-img" "speed-up" "outputs"
# the same disk as qcow2 too: the copy engine without the vmdk driver
for sub in monolithicSparse streamOptimized qcow2; do
    if [ "$sub" = qcow2 ]; then
        fmt=qcow2 img=$dir/disk.qcow2
        "$qemu" convert -f raw -O qcow2 "$src" "$img"
    else
        fmt=vmdk img=$dir/$sub.vmdk
        "$qemu" convert -f raw -O vmdk -o subformat=$sub "$src" "$img"
    fi
    a=() b=()
    for ((r = 0; r < runs; r++)); do
        a+=("$(secs "$qemu" convert -f $fmt -O raw "$img" "$dir/qemu.raw")")
        b+=("$(secs "$qblock" convert -f $fmt -O raw "$img" \
               "$dir/qblock.raw")")
    done
    same=differ
    cmp -s "$dir/qemu.raw" "$dir/qblock.raw" && same=identical
    ma=$(middle "${a[@]}")
    mb=$(middle "${b[@]}")
    printf '%-34s %9ss %9ss %8s %s\n' "$sub" "$ma" "$mb" "$(ratio "$ma" "$mb")" \
        "$same"
    rm -f "$img" "$dir/qemu.raw" "$dir/qblock.raw"
done

# vmdk_same: the files but for the descriptor's random CID
. "$here/../interop/vmdk-lib.bash"
printf '%-34s %10s %10s %8s %s\n' "convert -f raw -O vmdk" "qemu-img" \
    "qblock-img" "speed-up" "outputs"
mkdir -p "$dir/q" "$dir/b"        # the same name: the descriptor holds it
for sub in monolithicSparse streamOptimized; do
    a=() b=()
    for ((r = 0; r < runs; r++)); do
        rm -f "$dir/q/disk.vmdk" "$dir/b/disk.vmdk"
        a+=("$(secs "$qemu" convert -f raw -O vmdk -o subformat=$sub "$src" \
               "$dir/q/disk.vmdk")")
        b+=("$(secs "$qblock" convert -f raw -O vmdk -o subformat=$sub \
               "$src" "$dir/b/disk.vmdk")")
    done
    same=differ
    vmdk_same "$dir/q/disk.vmdk" "$dir/b/disk.vmdk" >/dev/null &&
        same=identical
    ma=$(middle "${a[@]}")
    mb=$(middle "${b[@]}")
    printf '%-34s %9ss %9ss %8s %s\n' "$sub" "$ma" "$mb" \
        "$(ratio "$ma" "$mb")" "$same"
    rm -f "$dir/q/disk.vmdk" "$dir/b/disk.vmdk"
done
