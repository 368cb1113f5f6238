#!/usr/bin/env bash
# The cost of qcow2 metadata overlap checks in instructions, which timings
# on a shared machine cannot resolve: valgrind's callgrind counts, for
# qblock-img bench (4 KiB overwrites scattered over a 1 GiB qcow2 image in
# RAM, depth 1), the instructions per write of
#   process      the whole process (start-up included, over COUNT writes)
#   qcow2 path   qcow2_co_pwritev and what it calls, less the write to the
#                file below (whose cost depends on whether the kernel took
#                it in place or a worker did, not on the check)
# with overlap-check=none, cached and all, with 0 and 100 snapshots.
# qemu-img is left out: Debian's build has no symbols to count by (its
# throughput with each template is in bench-overlap.sh).
#   tests/perf/bench-overlap-cost.sh BUILD_DIR
# The script prints figures; it never fails on them.
set -u
build=${1:?usage: bench-overlap-cost.sh BUILD_DIR}
qblock=$build/qblock-img
count=${COUNT:-20000}
qemu=$(command -v qemu-img) || {
    echo "qemu-img is not installed (it makes the snapshots)"; exit 77; }
if ! command -v valgrind > /dev/null ||
   ! command -v callgrind_annotate > /dev/null; then
    echo "valgrind is not installed: no instruction counts"; exit 77
fi
ram=${BENCH_RAM_DIR:-/dev/shm}
[ -d "$ram" ] && [ -w "$ram" ] || ram=${TMPDIR:-/tmp}
dir=$(mktemp -d "$ram/qblock-overlap-cost.XXXXXX")
trap 'rm -rf "$dir"' EXIT

write_args() {  # depth
    echo "-w -d $1 -s 4k -S 1028k"
}

# instructions of qcow2_co_pwritev and its callees, less the file writes
qcow2_path() {
    callgrind_annotate --tree=calling --inclusive=yes "$1" 2>/dev/null |
    awk '/\*  .*qcow2\.c:qcow2_co_pwritev \[/ {
             inb = 1; v = $1; gsub(",", "", v); total = v; next }
         inb && /^$/ { inb = 0 }
         inb && /io\.c:bdrv_(co|driver)_pwritev/ {
             v = $1; gsub(",", "", v); file += v }
         END { print total - file }'
}

printf '%-26s %10s %12s %11s %11s\n' "instructions per write" "process" \
    "qcow2 path" "over none" "of process"
for snaps in 0 100; do
    img=$dir/cost$snaps.qcow2
    "$qemu" create -q -f qcow2 "$img" 1G
    "$qemu" bench -w -q -c 256 -s 1M "$img" > /dev/null
    for i in $(seq "$snaps"); do
        "$qemu" snapshot -c "s$i" "$img"
    done
    # every cluster the writes touch is the image's own before counting
    "$qblock" bench $(write_args 64) -c "$count" -q -f qcow2 "$img" \
        > /dev/null 2>&1
    none_path=
    for opts in none cached all; do
        valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
            "$qblock" bench -c "$count" $(write_args 1) --image-opts \
            "driver=qcow2,file.filename=$img,overlap-check=$opts" \
            > /dev/null 2>&1
        total=$(callgrind_annotate "$dir/cg.out" 2>/dev/null |
                awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
        path=$(qcow2_path "$dir/cg.out")
        [ -n "$none_path" ] || none_path=$path
        awk -v l="$opts, $snaps snapshots" -v t="$total" -v p="$path" \
            -v n="$none_path" -v c="$count" 'BEGIN {
            printf "%-26s %10.0f %12.1f %11.1f %10.2f%%\n", l, t / c,
                p / c, (p - n) / c, 100 * (p - n) / t }'
    done
done
echo "('over none': what the checks add to a write; 'of process': that" \
     "as a share of the instructions of a write)"
