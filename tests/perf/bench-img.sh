#!/usr/bin/env bash
# qblock-img bench against the real qemu-img bench, side by side, same
# options, same machine, same run.
#   tests/perf/bench-img.sh BUILD_DIR [COUNT_SCALE]
# Prints one row per case: ops/s for QEMU, ops/s for qblock and the ratio.
# Each figure is the best of $RUNS runs (default 3), to damp noise on a
# shared machine.  This script prints figures; it never fails on them.
set -u
build=${1:?usage: bench-img.sh BUILD_DIR}
scale=${2:-1}
runs=${RUNS:-3}
. "$(dirname "$0")/lib.sh"
qblock=$build/qblock-img
qemu=$(command -v qemu-img) || { echo "qemu-img is not installed; nothing to compare against"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/qblock-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
img=$dir/bench.raw
"$qemu" create -f raw -o preallocation=full "$img" 1G > /dev/null

best_of() {
    local best=0 v i
    for i in $(seq "$runs"); do
        v=$(perf_bench_ops "$@")
        [ "$v" -gt "$best" ] && best=$v
    done
    echo "$best"
}

printf '%-44s %12s %12s %7s\n' "case" "qemu-img" "qblock-img" "ratio"
row() {  # label count args...
    local label=$1 count=$2; shift 2
    local a b
    a=$(best_of "$count" "$qemu" bench -c "$count" "$@")
    b=$(best_of "$count" "$qblock" bench -c "$count" "$@")
    printf '%-44s %12s %12s %7s\n' "$label" "$a" "$b" \
        "$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else print "-" }')"
}

n=$((200000 * scale))
for depth in 1 64; do
    for rw in read write; do
        w=; [ $rw = write ] && w=-w
        row "null-co $rw depth $depth" $n $w -d $depth --image-opts driver=null-co,size=1G
    done
done
n=$((100000 * scale))
for aio in threads io_uring; do
    for depth in 1 64; do
        for rw in read write; do
            w=; [ $rw = write ] && w=-w
            row "raw file 4k $rw depth $depth aio=$aio" $n $w -d $depth -i $aio -f raw "$img"
        done
    done
done
