#!/usr/bin/env bash
# The exports end to end, as a guest's client sees them: fio with its nbd
# engine (libnbd) against qblock-nbd and qemu-nbd, and against
# qblock-storage-daemon's and qemu-storage-daemon's NBD exports; and the
# storage daemons' vhost-user-blk exports driven by one front-end of ours
# (tests/perf/vhost-user-bench, the same for both, depth and pattern as
# fio's); on the same preallocated image, in the same run.
#   tests/perf/bench-export.sh BUILD_DIR
# Cases (one job, one connection): 4 KiB random read and write at
# depth 1 and 32, 64 KiB sequential read and write at depth 8.
# Cache modes: cache=none with aio=io_uring and aio=native, writeback and
# writethrough (aio=threads); images: qcow2 and raw, 1 GiB, fully
# preallocated, on the file system of $TMPDIR (default /var/tmp: tmpfs has
# no O_DIRECT).
# The server runs pinned to CPU 0, fio to CPU 1 (taskset), over a unix
# socket.  Each figure is the median of $RUNS runs (default 3) of
# $SECONDS_PER_CASE seconds (default 3), the two servers alternating run by
# run so that a slow spell of the host's disk does not fall on one only.
# For cache=none the table also shows the device's own ceiling: fio on the
# image file itself, O_DIRECT, io_uring, same block size, pattern and depth
# (a preallocated raw file of the same size beside the image, so that the
# image itself is not overwritten), and the fraction of it each server
# reaches.
# QUICK=1: qcow2 only, cache=none,aio=io_uring and writeback, the 4 KiB
# cases, one run of 2 seconds each (a smoke test of the script, not
# figures to quote).  KINDS="nbd daemon vhost", FORMATS, MODES and CASES
# (words as above) pick a part of the matrix.
# This script prints figures; it never fails on them.
set -u
build=${1:?usage: bench-export.sh BUILD_DIR}
runs=${RUNS:-3}
secs=${SECONDS_PER_CASE:-3}
formats=${FORMATS:-qcow2 raw}
modes=${MODES:-none-io_uring none-native writeback writethrough}
cases=${CASES:-randread-4k-1 randread-4k-32 randwrite-4k-1 randwrite-4k-32 read-64k-8 write-64k-8}
kinds=${KINDS:-nbd daemon vhost}
if [ "${QUICK:-0}" != 0 ]; then
    runs=1 secs=2 formats=qcow2 modes="none-io_uring writeback"
    cases="randread-4k-1 randread-4k-32 randwrite-4k-1 randwrite-4k-32"
fi
. "$(dirname "$0")/lib.sh"
perf_require "export benchmarks" fio qemu-img qemu-nbd qemu-storage-daemon \
    taskset
perf_require_fio_nbd "export benchmarks"
server_cpu=0 client_cpu=1
[ "$(nproc)" -ge 2 ] || server_cpu=0 client_cpu=0
perf_client=(taskset -c $client_cpu)
perf_workdir bench-export
sock=$dir/nbd.sock

# fio's options for a case name PATTERN-BS-DEPTH.
fio_case() {  # case
    local IFS=-
    set -- $1
    echo "--rw=$1 --bs=$2 --iodepth=$3"
}

# IOPS of one run of tests/perf/vhost-user-bench (the front-end both
# vhost-user-blk servers are driven with) for a case name.
vhost_iops() {  # case
    local IFS=- bs
    set -- $1
    bs=$(( ${2%k} * 1024 ))
    taskset -c $client_cpu "$build/tests/perf/vhost-user-bench" "$sock" \
        "$1" "$bs" "$3" "$secs" 2>/dev/null | sed -n 's/^IOPS //p' |
        grep . || echo 0
}

# The server command line for IMPL (qemu, qblock), KIND, FORMAT, MODE.
server_cmd() {  # impl kind format mode
    local impl=$1 kind=$2 fmt=$3 mode=$4 img=$dir/bench.$3
    local cache aio direct wt
    case $mode in
    none-io_uring) cache=none aio=io_uring direct=on wt=off ;;
    none-native)   cache=none aio=native direct=on wt=off ;;
    writeback)     cache=writeback aio=threads direct=off wt=off ;;
    writethrough)  cache=writethrough aio=threads direct=off wt=on ;;
    esac
    if [ "$kind" = nbd ]; then
        local bin=qemu-nbd
        [ "$impl" = qblock ] && bin=$build/qblock-nbd
        echo "$bin -k $sock -f $fmt --cache=$cache --aio=$aio -t $img"
    else
        local bin=qemu-storage-daemon export
        [ "$impl" = qblock ] && bin=$build/qblock-storage-daemon
        if [ "$kind" = vhost ]; then
            export="--export type=vhost-user-blk,id=exp0,node-name=disk0,addr.type=unix,addr.path=$sock,writable=on,writethrough=$wt"
        else
            export="--nbd-server addr.type=unix,addr.path=$sock --export type=nbd,id=exp0,node-name=disk0,name=,writable=on,writethrough=$wt"
        fi
        echo "$bin --blockdev driver=file,node-name=file0,filename=$img,cache.direct=$direct,aio=$aio" \
             "--blockdev driver=$fmt,node-name=disk0,file=file0 $export"
    fi
}

start_server() {  # impl kind format mode
    rm -f "$sock"
    perf_start_server "$sock" "$dir/server.log" \
        taskset -c $server_cpu $(server_cmd "$@")
}

echo "Machine: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg);" \
     "runs=$runs, ${secs}s per case; server on CPU $server_cpu, fio on CPU $client_cpu"
for fmt in $formats; do
    img=$dir/bench.$fmt
    qemu-img create -q -f "$fmt" -o preallocation=full "$img" 1G
    qemu-img create -q -f raw -o preallocation=full "$dir/device.raw" 1G
    declare -A device=()
    for mode in $modes; do
        case $mode in none-*) ;; *) continue ;; esac
        for c in $cases; do
            [ -n "${device[$c]:-}" ] && continue
            vals=()
            for r in $(seq "$runs"); do
                vals+=("$(perf_fio_iops --filename="$dir/device.raw" --direct=1 \
                          --ioengine=io_uring --size=1g $(fio_case "$c"))")
            done
            device[$c]=$(median "${vals[@]}")
        done
    done
    for kind in $kinds; do
        for mode in $modes; do
            declare -A got=()
            for r in $(seq "$runs"); do
                order="qemu qblock"
                [ $((r % 2)) = 0 ] && order="qblock qemu"
                for impl in $order; do
                    start_server "$impl" "$kind" "$fmt" "$mode" || continue
                    for c in $cases; do
                        if [ "$kind" = vhost ]; then
                            got[$impl,$c]+=" $(vhost_iops "$c")"
                        else
                            got[$impl,$c]+=" $(perf_fio_iops --ioengine=nbd \
                                --uri="nbd+unix:///?socket=$sock" $(fio_case "$c"))"
                        fi
                    done
                    perf_stop_server
                done
            done
            echo
            case $kind in
            nbd)    title="qblock-nbd vs qemu-nbd" ;;
            daemon) title="storage daemons, NBD export" ;;
            vhost)  title="storage daemons, vhost-user-blk export (tests/perf/vhost-user-bench)" ;;
            esac
            echo "### $title, $fmt, $mode (IOPS, median of $runs)"
            echo
            if [ "${mode#none-}" != "$mode" ]; then
                echo "| case             |   qemu | qblock | ratio  | device | qemu/dev | qblock/dev |"
                echo "|------------------|-------:|-------:|-------:|-------:|---------:|-----------:|"
            else
                echo "| case             |   qemu | qblock | ratio  |"
                echo "|------------------|-------:|-------:|-------:|"
            fi
            for c in $cases; do
                a=$(median ${got[qemu,$c]:-0})
                b=$(median ${got[qblock,$c]:-0})
                if [ "${mode#none-}" != "$mode" ]; then
                    d=${device[$c]}
                    printf '| %-16s | %6d | %6d | %6s | %6d | %8s | %10s |\n' \
                        "$c" "$a" "$b" "$(ratio "$b" "$a")" "$d" \
                        "$(frac "$a" "$d")" "$(frac "$b" "$d")"
                else
                    printf '| %-16s | %6d | %6d | %6s |\n' "$c" "$a" "$b" \
                        "$(ratio "$b" "$a")"
                fi
            done
            unset got
        done
    done
    unset device
    rm -f "$img" "$dir/device.raw"
done
