#!/usr/bin/env bash
# The cost of dirty tracking on the write path in instructions, which
# timings on a shared machine cannot resolve: valgrind's callgrind counts,
# for qblock-img bench (4 KiB overwrites scattered over a 1 GiB qcow2
# image in RAM, depth 1), the instructions per write of
#   process      the whole process (start-up included, over COUNT writes)
#   marking      bdrv_set_dirty and what it calls (the bitmaps' share)
# with no bitmap, one enabled bitmap of 64 KiB granularity, and four (64
# KiB, 4 KiB, 512 B, 1 MiB): the persistent bitmaps the image keeps are
# loaded at open and record every write.
#   tests/perf/bench-dirty-bitmap-cost.sh BUILD_DIR
# The script prints figures; it never fails on them.
set -u
build=${1:?usage: bench-dirty-bitmap-cost.sh BUILD_DIR}
qblock=$build/qblock-img
count=${COUNT:-20000}
if ! command -v valgrind > /dev/null ||
   ! command -v callgrind_annotate > /dev/null; then
    echo "valgrind is not installed: no instruction counts"; exit 77
fi
ram=${BENCH_RAM_DIR:-/dev/shm}
[ -d "$ram" ] && [ -w "$ram" ] || ram=${TMPDIR:-/tmp}
dir=$(mktemp -d "$ram/qblock-bitmap-cost.XXXXXX")
trap 'rm -rf "$dir"' EXIT

write_args() {  # depth
    echo "-w -d $1 -s 4k -S 1028k"
}

# inclusive instructions of bdrv_set_dirty (0 when it was never called)
marking() {
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
    awk '/ \*? *[^ ]*dirty-bitmap\.c:bdrv_set_dirty( |$)/ {
             v = $1; gsub(",", "", v); print v; found = 1; exit }
         END { if (!found) print 0 }'
}

printf '%-22s %10s %10s %11s\n' "instructions per write" "process" \
    "marking" "of process"
for bitmaps in 0 1 4; do
    img=$dir/cost$bitmaps.qcow2
    "$qblock" create -q -f qcow2 "$img" 1G
    grans=(64k 4k 512 1M)
    for i in $(seq 0 $((bitmaps - 1))); do
        "$qblock" bitmap --add -g "${grans[$i]}" "$img" "b$i"
    done
    # every cluster the writes touch is the image's own before counting
    "$qblock" bench $(write_args 64) -c "$count" -q -f qcow2 "$img" \
        > /dev/null 2>&1
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
        "$qblock" bench -c "$count" $(write_args 1) -f qcow2 "$img" \
        > /dev/null 2>&1
    total=$(callgrind_annotate "$dir/cg.out" 2>/dev/null |
            awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
    mark=$(marking "$dir/cg.out")
    awk -v l="$bitmaps bitmap(s)" -v t="$total" -v m="$mark" \
        -v c="$count" 'BEGIN {
        printf "%-22s %10.0f %10.1f %10.2f%%\n", l, t / c, m / c,
            100 * m / t }'
done
echo "('marking': what recording the writes in the bitmaps adds to a" \
     "write; 'of process': that as a share of the instructions of a write)"
