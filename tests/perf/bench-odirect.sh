#!/usr/bin/env bash
# The O_DIRECT request path without any export: qemu-img bench against
# qblock-img bench with -t none (cache=none) on a fully preallocated 1 GiB
# qcow2 image, as a new user would try it:
#   qemu-img bench -f qcow2 -t none -i AIO -d DEPTH -s 4096 -S 24576 -c N IMG
#   tests/perf/bench-odirect.sh BUILD_DIR
# Cases: reads and writes (-w), -i io_uring and -i native, depth 1 and 32.
# Both tools run pinned to CPU 0, alternating, $RUNS times (default 5);
# each figure is the median.  The "device" column is fio on a preallocated
# raw file beside the image with the same pattern (4 KiB every 24 KiB),
# O_DIRECT and io_uring at the same depth, pinned to CPU 0 too: what the
# disk gives one process.  Prints figures; never fails on them.
set -u
build=${1:?usage: bench-odirect.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
runs=${RUNS:-5}
perf_require "O_DIRECT benchmark" qemu-img fio taskset
perf_workdir odirect
img=$dir/bench.qcow2
qemu-img create -q -f qcow2 -o preallocation=full "$img" 1G
qemu-img create -q -f raw -o preallocation=full "$dir/device.raw" 1G
if ! qemu-img bench -f qcow2 -t none -c 1 "$img" > /dev/null 2>&1; then
    echo "this file system has no O_DIRECT ($dir): skipping the O_DIRECT benchmark"
    exit 77
fi

# The disk's own figure: fio, 4 KiB every 24 KiB as the benches step.
device_iops() {  # rw depth
    local secs=3 perf_client=(taskset -c 0)
    perf_fio_iops --filename="$dir/device.raw" --direct=1 --ioengine=io_uring \
        --size=1g --bs=4k --rw="$1:20k" --iodepth="$2"
}

echo "qcow2 (preallocation=full, 1 GiB), -t none, -s 4096 -S 24576;" \
     "median of $runs alternating runs, both tools on CPU 0 ($(date -u +%Y-%m-%d), load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| case                     |   qemu | qblock | ratio  | device | qemu/dev | qblock/dev |"
echo "|--------------------------|-------:|-------:|-------:|-------:|---------:|-----------:|"
for aio in io_uring native; do
    for rw in read write; do
        for depth in 1 32; do
            count=$((depth == 1 ? 10000 : 40000))
            w=
            [ "$rw" = write ] && w=-w
            args=(bench -f qcow2 -t none -i "$aio" -d "$depth" -s 4096 -S 24576 -c "$count" $w "$img")
            a=() b=() d=()
            for i in $(seq "$runs"); do
                a+=("$(perf_bench_ops "$count" taskset -c 0 qemu-img "${args[@]}")")
                b+=("$(perf_bench_ops "$count" taskset -c 0 "$build/qblock-img" "${args[@]}")")
            done
            for i in 1 2 3; do
                d+=("$(device_iops "$rw" "$depth")")
            done
            qa=$(median "${a[@]}") qb=$(median "${b[@]}") dev=$(median "${d[@]}")
            printf '| %-24s | %6s | %6s | %6s | %6s | %8s | %10s |\n' \
                "$rw $aio depth $depth" "$qa" "$qb" "$(ratio "$qb" "$qa")" "$dev" \
                "$(frac "$qa" "$dev")" "$(frac "$qb" "$dev")"
        done
    done
done
