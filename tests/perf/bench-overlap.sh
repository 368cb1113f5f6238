#!/usr/bin/env bash
# The cost of qcow2 metadata overlap checks: qblock-img bench and the real
# qemu-img bench, side by side, on the same qcow2 images in RAM, with
# overlap-check=none, cached and all, with 0 and with 100 internal
# snapshots.
#   tests/perf/bench-overlap.sh BUILD_DIR [COUNT_SCALE]
# Cases (4 KiB requests unless said otherwise):
#   overwrite d1/d64  writes to allocated clusters, scattered over the
#                     disk (step 1 MiB + 4 KiB, wrapping at its end), at
#                     queue depth 1 / 64; an untimed pass of the same
#                     writes allocates the clusters first
#   allocate d1       8000 sequential 64 KiB writes from 512 MiB on, each
#                     allocating a new cluster
# Each figure is ops/s, the best of $RUNS runs (default 3).  The script
# prints figures; it never fails on them.
set -u
. "$(dirname "$0")/lib.sh"
build=${1:?usage: bench-overlap.sh BUILD_DIR}
scale=${2:-1}
runs=${RUNS:-3}
qblock=$build/qblock-img
qemu=$(command -v qemu-img) || {
    echo "qemu-img is not installed; nothing to compare against"; exit 77; }
ram=${BENCH_RAM_DIR:-/dev/shm}
[ -d "$ram" ] && [ -w "$ram" ] || ram=${TMPDIR:-/tmp}
dir=$(mktemp -d "$ram/qblock-overlap.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# base images: 1 GiB, the first 256 MiB written, SNAPS snapshots after
for snaps in 0 100; do
    img=$dir/base$snaps.qcow2
    "$qemu" create -q -f qcow2 "$img" 1G
    "$qemu" bench -w -q -c 256 -s 1M "$img" > /dev/null
    for i in $(seq "$snaps"); do
        "$qemu" snapshot -c "s$i" "$img"
    done
done

overwrite_args() {  # depth
    echo "-w -d $1 -s 4k -S 1028k"
}

# best_of TOOL IMAGE OPTS COUNT ARGS...: a fresh copy of IMAGE per run;
# for overwrites a first, untimed pass makes every cluster the image's
# own (with snapshots, the first write to a cluster copies it).
best_of() {
    local tool=$1 base=$2 opts=$3 count=$4; shift 4
    local best=0 v i img=$dir/run.qcow2
    for i in $(seq "$runs"); do
        cp "$base" "$img"
        if [ "$1" = overwrite ]; then
            "$tool" bench $(overwrite_args 64) -c "$count" -q \
                -f qcow2 "$img" > /dev/null 2>&1
        fi
        v=$(perf_bench_ops "$count" "$tool" bench -c "$count" "${@:2}" \
            --image-opts "driver=qcow2,file.filename=$img,overlap-check=$opts")
        [ "$v" -gt "$best" ] && best=$v
    done
    echo "$best"
}

printf '%-34s %10s %10s %10s %10s %10s %10s\n' "case" \
    "qemu none" "qemu cach" "qemu all" "qbl none" "qbl cach" "qbl all"
row() {  # label base count kind args...
    local label=$1 base=$2 count=$3; shift 3
    local out=() tool opts
    for tool in "$qemu" "$qblock"; do
        for opts in none cached all; do
            local c=$count
            # QEMU's "all" reads every snapshot's L1 table for each write:
            # a twentieth of the requests keeps the run within minutes
            if [ "$tool" = "$qemu" ] && [ $opts = all ] &&
               [ "$base" = "$dir/base100.qcow2" ]; then
                c=$((count / 20))
            fi
            out+=("$(best_of "$tool" "$base" "$opts" "$c" "$@")")
        done
    done
    printf '%-34s %10s %10s %10s %10s %10s %10s\n' "$label" "${out[@]}"
}

n=$((100000 * scale))
for snaps in 0 100; do
    base=$dir/base$snaps.qcow2
    row "overwrite d1, $snaps snapshots" "$base" $n overwrite \
        $(overwrite_args 1)
    row "overwrite d64, $snaps snapshots" "$base" $n overwrite \
        $(overwrite_args 64)
    row "allocate 64k d1, $snaps snapshots" "$base" 8000 allocate \
        -w -d 1 -s 64k -o 512M
done
echo "(ops/s, best of $runs; 'qbl all' over 'qbl none' is the cost of" \
     "every check qblock makes)"

