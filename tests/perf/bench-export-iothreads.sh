#!/usr/bin/env bash
# What a second iothread adds to ONE export: a vhost-user-blk export with
# two queues (tests/perf/vhost-user-bench, 2 queues, each its own thread
# and depth 32) or an NBD export with two connections (fio's nbd engine,
# two jobs of depth 32), served by qblock-storage-daemon with
# iothread=io0 (everything in one iothread) and with
# iothread.0=io0,iothread.1=io1 (queue or connection 1 in the second
# iothread, handing its requests to the node's in batches:
# docs/iothreads.md), and by qemu-storage-daemon 7.2 with iothread=io0
# (it cannot spread one export).  qemu-storage-daemon 7.2 aborts when an
# NBD client of an export on an iothread disconnects (fio's nbd engine
# probes the size first): its NBD rows say "aborts".  Nothing is pinned:
# the point is which CPUs the daemon can use.
#   tests/perf/bench-export-iothreads.sh BUILD_DIR
# Devices ($DEVICES): qcow2, an image of $SIZE (default 1G), fully
# preallocated, on the file system of $TMPDIR (default /var/tmp), with
# cache=none, aio=io_uring; null, a null-co node of that size.  Cases
# ($CASES): 4 KiB random read and write.  Each row: the median IOPS (sum
# of both queues or connections) of $RUNS runs (default 3) of
# $SECONDS_PER_CASE seconds (default 3), the three servers alternating
# within each run, and the daemon's CPU time per request (user + system,
# from /proc, in microseconds), which the load of other processes
# changes less than the IOPS.  $POLL (default 32768, QEMU's) is the
# iothreads' poll-max-ns: the CPU time includes the busy-polling, which
# POLL=0 leaves out.  Prints figures; never fails on them.
set -u
build=${1:?usage: bench-export-iothreads.sh BUILD_DIR}
runs=${RUNS:-3}
secs=${SECONDS_PER_CASE:-3}
size=${SIZE:-1G}
cases=${CASES:-randread randwrite}
kinds=${KINDS:-vhost nbd}
devices=${DEVICES:-null qcow2}
servers="qblock:one qblock:two qemu:one"
poll=${POLL:-32768}
. "$(dirname "$0")/lib.sh"
perf_require "export iothread benchmark" fio qemu-img qemu-storage-daemon
perf_require_fio_nbd "export iothread benchmark"
perf_workdir bench-export-iothreads
sock=$dir/nbd.sock
vsock=$dir/vu.sock
qemu-img create -q -f qcow2 -o preallocation=full "$dir/d.qcow2" "$size"
# The daemon IMPL with one export of KIND on DEVICE, in one iothread
# (LAYOUT one) or spread over two (two).
server_cmd() {  # impl kind device layout
    local it=iothread=io0
    [ "$4" = two ] && it=iothread.0=io0,iothread.1=io1
    [ "$2" = vhost ] && it=num-queues=2,$it
    perf_export_daemon_cmd "$1" "$2" "$3" \
        "--object iothread,id=io0,poll-max-ns=$poll --object iothread,id=io1,poll-max-ns=$poll" \
        "$it"
}

echo "one export, two queues (vhost-user-bench) or two connections (fio nbd),"
echo "depth 32 each, 4 KiB; qcow2: $size preallocated, cache=none aio=io_uring;"
echo "null: null-co; poll-max-ns=$poll; nothing pinned; $(nproc) CPUs; median of $runs runs of"
echo "${secs}s, the servers alternating; CPU = the daemon's user+system"
echo "microseconds per request"
printf '%-6s %-6s %-10s %-26s %10s %8s\n' export device case server IOPS \
    "CPU us"
for kind in $kinds; do
  for dev in $devices; do
    for c in $cases; do
        declare -A iops=() cpu=() aborted=()
        for r in $(seq "$runs"); do
            for key in $servers; do
                set -- $(perf_export_run "$kind" "$c" 32 2 \
                         $(server_cmd "${key%:*}" "$kind" "$dev" "${key#*:}"))
                if [ "$1" = aborts ]; then
                    aborted[$key]=1
                else
                    iops[$key]+=" $1" cpu[$key]+=" $2"
                fi
            done
        done
        for key in $servers; do
            case $key in
            qblock:one) what="qblock, iothread=io0" ;;
            qblock:two) what="qblock, iothread=[io0,io1]" ;;
            qemu:one)   what="QEMU 7.2, iothread=io0" ;;
            esac
            if [ -n "${aborted[$key]:-}" ]; then
                i=aborts c_med=-
            else
                i=$(median ${iops[$key]})
                c_med=$(middle ${cpu[$key]})
            fi
            printf '%-6s %-6s %-10s %-26s %10s %8s\n' "$kind" "$dev" "$c" \
                "$what" "$i" "$c_med"
        done
        unset iops cpu aborted
    done
  done
done
