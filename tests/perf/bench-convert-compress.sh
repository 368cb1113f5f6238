#!/usr/bin/env bash
# qblock-img convert -c against the real qemu-img convert -c, same input,
# same machine, same run: a 1 GiB raw image of mixed data (a third random,
# a third compressible text, a third zeroes, in 64 MiB stripes), converted
# to qcow2 with zlib and with zstd.
#   tests/perf/bench-convert-compress.sh BUILD_DIR [SIZE_MIB]
# Prints wall-clock seconds per tool and the speed-up.  Each figure is the
# best of $RUNS runs (default 1: a run takes tens of seconds).  It also
# says whether both outputs are byte-identical (they should be).  This
# script prints figures; it never fails on them.
set -u
build=${1:?usage: bench-convert-compress.sh BUILD_DIR [SIZE_MIB]}
size_mib=${2:-1024}
runs=${RUNS:-1}
. "$(dirname "$0")/lib.sh"
perf_require "convert -c benchmark" qemu-img
qblock=$build/qblock-img
qemu=$(command -v qemu-img)
perf_workdir bench
src=$dir/mixed.raw

perf_mixed_disk "$src" "$size_mib"

seconds() {  # command...: wall-clock seconds of the best of $runs runs
    local best= t i
    for ((i = 0; i < runs; i++)); do
        rm -f "$dir/out.qcow2"
        t=$( { TIMEFORMAT=%R; time "$@" >/dev/null 2>&1; } 2>&1 )
        if [ -z "$best" ] ||
           awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then
            best=$t
        fi
    done
    echo "$best"
}

printf '%-34s %10s %10s %8s %s\n' "case (${size_mib} MiB, $(nproc) CPUs)" \
    "qemu-img" "qblock-img" "speed-up" "outputs"
for ctype in zlib zstd; do
    args=(convert -c -O qcow2 -o compression_type=$ctype "$src"
          "$dir/out.qcow2")
    a=$(seconds "$qemu" "${args[@]}")
    mv "$dir/out.qcow2" "$dir/qemu.qcow2"
    b=$(seconds "$qblock" "${args[@]}")
    same=differ
    cmp -s "$dir/out.qcow2" "$dir/qemu.qcow2" && same=identical
    ratio=$(awk -v a="$a" -v b="$b" \
            'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
    printf '%-34s %9ss %9ss %7sx %s\n' "convert -c compression_type=$ctype" \
        "$a" "$b" "$ratio" "$same"
    rm -f "$dir/qemu.qcow2" "$dir/out.qcow2"
done
