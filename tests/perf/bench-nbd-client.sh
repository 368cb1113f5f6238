#!/usr/bin/env bash
# The NBD client against the real qemu-img's, same server, same images,
# same run: a qcow2 image of SIZE_MIB (default 1024) with data in half of
# it (random 64 MiB stripes) and holes in the other half, served by the
# real qemu-nbd on a unix socket.
#
#   convert from an export   convert -f raw -O raw nbd+unix://... out.raw
#   convert to an export     convert -n -f qcow2 -O raw src.qcow2 nbd+unix://...
#   bench read / write       bench -d 16 -s 64k over the export (-c COUNT)
#
#   tests/perf/bench-nbd-client.sh BUILD_DIR [SIZE_MIB]
#
# The two tools alternate run by run (qemu-img, then qblock-img), and each
# figure is the best of $RUNS runs (default 3).  Prints seconds per tool
# and the speed-up (qemu-img's time over qblock-img's: above 1 is faster).
# This script prints figures; it never fails on them.
set -u
build=${1:?usage: bench-nbd-client.sh BUILD_DIR [SIZE_MIB]}
size_mib=${2:-1024}
runs=${RUNS:-3}
qblock=$(cd "$build" && pwd)/qblock-img
for tool in qemu-img qemu-nbd; do
    command -v $tool >/dev/null 2>&1 || {
        echo "$tool is not installed; nothing to compare against"
        exit 77
    }
done
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/qblock-bench.XXXXXX")
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

# Half data, half holes, in 64 MiB stripes.
truncate -s "${size_mib}M" "$dir/src.raw"
for ((i = 0; i < size_mib / 64; i += 2)); do
    head -c 64M /dev/urandom |
        dd of="$dir/src.raw" bs=1M seek=$((i * 64)) conv=notrunc status=none
done
qemu-img convert -f raw -O qcow2 "$dir/src.raw" "$dir/src.qcow2"
rm -f "$dir/src.raw"
# the target allocated beforehand, so that the first tool to write does
# not pay for the file system's allocation alone
dd if=/dev/zero of="$dir/dst.raw" bs=1M count="$size_mib" status=none

serve() {   # serve NAME ARGS...: qemu-nbd on $dir/NAME.sock
    local name=$1 i
    shift
    qemu-nbd -t -k "$dir/$name.sock" "$@" 2>/dev/null &
    pids+=($!)
    for i in $(seq 100); do
        [ -S "$dir/$name.sock" ] && return 0
        sleep 0.1
    done
    echo "qemu-nbd $name did not start"
    exit 1
}
serve src -r -f qcow2 "$dir/src.qcow2"
serve dst -f raw --cache=writeback "$dir/dst.raw"
src="nbd+unix:///?socket=$dir/src.sock"
dst="nbd+unix:///?socket=$dir/dst.sock"

# seconds TOOL ARGS...: wall-clock seconds of one run
seconds() {
    local t
    rm -f "$dir/out.raw"
    t=$( { TIMEFORMAT=%R; time "$@" >/dev/null 2>&1; } 2>&1 )
    echo "$t"
}

# row NAME ARGS...: alternating runs of both tools, the best of each
row() {
    local name=$1 a= b= t i
    shift
    for ((i = 0; i < runs; i++)); do
        t=$(seconds qemu-img "$@")
        if [ -z "$a" ] || awk -v x="$t" -v y="$a" 'BEGIN { exit !(x < y) }'
        then
            a=$t
        fi
        t=$(seconds "$qblock" "$@")
        if [ -z "$b" ] || awk -v x="$t" -v y="$b" 'BEGIN { exit !(x < y) }'
        then
            b=$t
        fi
    done
    printf '%-36s %9ss %9ss %7sx\n' "$name" "$a" "$b" \
        "$(awk -v a="$a" -v b="$b" \
           'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
}

count=$((size_mib * 16 / 4))    # a quarter of the image in 64 KiB requests
printf '%-36s %10s %10s %8s\n' "case (${size_mib} MiB, $(nproc) CPUs)" \
    "qemu-img" "qblock-img" "speed-up"
row "convert from an export" convert -f raw -O raw "$src" "$dir/out.raw"
row "convert to an export (-n)" convert -n -f qcow2 -O raw \
    "$dir/src.qcow2" "$dst"
row "bench read, depth 16, 64k" bench -f raw -d 16 -s 64k -c $count "$src"
row "bench write, depth 16, 64k" bench -f raw -w -d 16 -s 64k -c $count \
    "$dst"
