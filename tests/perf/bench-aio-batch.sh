#!/usr/bin/env bash
# When the file driver hands queued requests to the kernel: qblock's
# default (as soon as 4 requests or 128 KiB wait, the rest at the end of
# the loop iteration) against aio-max-batch=32 and =256 (a submission per
# loop iteration, up to 32 or 256 requests: linux-aio's and io_uring's
# batch before 2026-12-04), and qemu-storage-daemon 7.2 (a submission
# per request), all serving one vhost-user-blk export driven by
# tests/perf/vhost-user-bench.
#   tests/perf/bench-aio-batch.sh BUILD_DIR
# qcow2, 1 GiB, fully preallocated, on the file system of $TMPDIR
# (default /var/tmp), cache=none with aio=io_uring and aio=native ($AIOS).
# Cases ($CASES): 4 KiB random read and write at depth 32, 64 KiB
# sequential read and write at depth 8.  The daemon runs on CPU 0, the
# front-end on CPU 1; each figure is the median of $RUNS runs (default 3)
# of $SECONDS_PER_CASE seconds (default 3), the servers alternating case
# by case, each run on a fresh daemon.  Prints figures; never fails on them.
set -u
build=${1:?usage: bench-aio-batch.sh BUILD_DIR}
runs=${RUNS:-3}
secs=${SECONDS_PER_CASE:-3}
aios=${AIOS:-io_uring native}
cases=${CASES:-randread-4k-32 randwrite-4k-32 read-64k-8 write-64k-8}
servers="qblock qblock:32 qblock:256 qemu"
. "$(dirname "$0")/lib.sh"
perf_require "submission batch benchmark" qemu-img qemu-storage-daemon \
    taskset
perf_workdir bench-aio-batch
vsock=$dir/vu.sock
img=$dir/d.qcow2
qemu-img create -q -f qcow2 -o preallocation=full "$img" 1G

# The daemon command line for SERVER (qblock[:BATCH] or qemu) and AIO.
server_cmd() {  # server aio
    local bin=$build/qblock-storage-daemon batch=
    case $1 in
    qemu) bin=qemu-storage-daemon ;;
    qblock:*) batch=,aio-max-batch=${1#qblock:} ;;
    esac
    echo "$bin --blockdev driver=file,node-name=f,filename=$img,cache.direct=on,aio=$2$batch" \
         "--blockdev driver=qcow2,node-name=d,file=f" \
         "--export type=vhost-user-blk,id=e,node-name=d,addr.type=unix,addr.path=$vsock,writable=on"
}

# IOPS of one front-end run of case PATTERN-BS-DEPTH.
case_iops() {  # case
    local IFS=-
    set -- $1
    taskset -c 1 "$build/tests/perf/vhost-user-bench" "$vsock" "$1" \
        $(( ${2%k} * 1024 )) "$3" "$secs" 2>/dev/null |
        sed -n 's/^IOPS //p' | grep . || echo 0
}

echo "vhost-user-blk export, qcow2 1 GiB preallocated, cache=none;" \
     "daemon on CPU 0, front-end on CPU 1; median of $runs runs of ${secs}s;" \
     "$(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
for aio in $aios; do
    declare -A got=()
    for r in $(seq "$runs"); do
        for c in $cases; do
            for server in $servers; do
                rm -f "$vsock"
                if perf_start_server "$vsock" "$dir/server.log" \
                       taskset -c 0 $(server_cmd "$server" "$aio"); then
                    got[$server,$c]+=" $(case_iops "$c")"
                    perf_stop_server
                else
                    got[$server,$c]+=" 0"
                fi
            done
        done
    done
    echo
    echo "aio=$aio (IOPS):"
    echo
    echo "| case            | qblock | aio-max-batch=32 | aio-max-batch=256 | QEMU 7.2 | default / 256 |"
    echo "|-----------------|-------:|-----------------:|------------------:|---------:|--------------:|"
    for c in $cases; do
        a=$(median ${got[qblock,$c]}) b=$(median ${got[qblock:32,$c]})
        d=$(median ${got[qblock:256,$c]}) q=$(median ${got[qemu,$c]})
        printf '| %-15s | %6d | %16d | %17d | %8d | %13s |\n' "$c" "$a" "$b" \
            "$d" "$q" "$(ratio "$a" "$d")"
    done
    unset got
done
