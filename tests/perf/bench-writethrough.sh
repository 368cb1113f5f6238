#!/usr/bin/env bash
# Writethrough against writeback on qcow2, qblock-img bench and the real
# qemu-img bench side by side, same options, same machine, same run.
#   tests/perf/bench-writethrough.sh BUILD_DIR [COUNT_SCALE]
# Workload: 4 KiB writes at depth 1 and 16, scattered by a 68 KiB stride
# (qemu-img bench has no random pattern; the stride puts every write in a
# cluster of its own):
#   overwrite  - into clusters that are already allocated
#   allocate   - each write allocates a new 64 KiB cluster (fresh image)
# Per case: write ops/s for each tool, and the host flushes (fdatasync)
# per write, counted with strace in a separate, shorter run so that the
# timed run is not traced.  Each ops/s figure is the best of $RUNS runs
# (default 3), the two tools' runs alternating so that a slow spell of the
# host's disk does not fall on one tool only.  This script prints
# figures; it never fails on them.
set -u
. "$(dirname "$0")/lib.sh"
build=${1:?usage: bench-writethrough.sh BUILD_DIR}
scale=${2:-1}
runs=${RUNS:-3}
qblock=$build/qblock-img
qemu=$(command -v qemu-img) || { echo "qemu-img is not installed; nothing to compare against"; exit 77; }
have_strace=true
command -v strace > /dev/null || have_strace=false
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/qblock-bench-wt.XXXXXX")
trap 'rm -rf "$dir"' EXIT
img=$dir/bench.qcow2
stride=$((68 * 1024))

# A fresh image for each run: overwrite gets its 64 MiB written first.
prepare() {  # case
    rm -f "$img"
    if [ "$1" = overwrite ]; then
        "$qemu" create -q -f qcow2 "$img" 64M
        "$build/qblock-io" -f qcow2 -c "write -q 0 64M" "$img"
    else
        "$qemu" create -q -f qcow2 "$img" 64G
    fi
}

# ops/s of one run of case CASE, prepared first.
ops_per_sec() {  # case count tool args...
    prepare "$1"
    shift
    perf_bench_ops "$@"
}

# "QEMU_BEST QBLOCK_BEST" over $runs alternating runs of each tool.
best_of_both() {  # case count args...
    local case=$1 count=$2; shift 2
    local a=0 b=0 v i
    for i in $(seq "$runs"); do
        v=$(ops_per_sec "$case" "$count" "$qemu" "$@")
        [ "$v" -gt "$a" ] && a=$v
        v=$(ops_per_sec "$case" "$count" "$qblock" "$@")
        [ "$v" -gt "$b" ] && b=$v
    done
    echo "$a $b"
}

# fdatasync/fsync calls per write over a run of COUNT writes.
flushes_per_write() {  # case count tool args...
    local case=$1 count=$2; shift 2
    local n
    $have_strace || { echo "-"; return; }
    prepare "$case"
    n=$(strace -f -qq -e trace=fdatasync,fsync -o "$dir/strace.log" "$@" > /dev/null 2>&1;
        grep -c 'sync(' "$dir/strace.log")
    awk -v n="$n" -v c="$count" 'BEGIN { printf "%.2f", n / c }'
}

printf '%-36s %10s %10s %7s %9s %9s\n' "case" "qemu-img" "qblock-img" "ratio" \
    "qemu f/w" "qblock f/w"
for case in overwrite allocate; do
    for depth in 1 16; do
        for mode in writethrough writeback; do
            [ "$mode" = writethrough ] && n=$((2000 * scale)) || n=$((20000 * scale))
            args=(bench -w -f qcow2 -t "$mode" -d "$depth" -s 4k -S "$stride")
            read -r a b < <(best_of_both "$case" "$n" "${args[@]}" -c "$n" "$img")
            fa=$(flushes_per_write "$case" 500 "$qemu" "${args[@]}" -c 500 "$img")
            fb=$(flushes_per_write "$case" 500 "$qblock" "${args[@]}" -c 500 "$img")
            printf '%-36s %10s %10s %7s %9s %9s\n' \
                "$case, depth $depth, $mode" "$a" "$b" \
                "$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else print "-" }')" \
                "$fa" "$fb"
        done
    done
done
$have_strace || echo "(strace is not installed: no flush counts)"
