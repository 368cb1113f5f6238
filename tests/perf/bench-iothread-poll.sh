#!/usr/bin/env bash
# What an iothread's adaptive busy-poll gives: one export on an iothread,
# one client, the iothread with poll-max-ns=0 (no polling) and with the
# default (32768), qblock-storage-daemon and qemu-storage-daemon with the
# same settings, in one run.  vhost-user-blk exports are driven by
# tests/perf/vhost-user-bench, NBD exports by fio (nbd engine).  The
# daemon is pinned to CPU 0, the client to CPU 1 (on a host with fewer
# than two CPUs nothing is pinned).
#   tests/perf/bench-iothread-poll.sh BUILD_DIR
# Devices ($DEVICES): qcow2, an image of $SIZE (default 1G), fully
# preallocated, on the file system of $TMPDIR (default /var/tmp), with
# cache=none, aio=io_uring; and null, a null-co node of the same size (a
# device that completes at once: what polling saves where the device is
# fast).  Cases ($CASES): 4 KiB random read and write at depth 1 and 32.
# qemu-storage-daemon 7.2 aborts when an NBD client of an export on an
# iothread disconnects (fio's nbd engine probes the size first): its NBD
# rows say "aborts".  Each
# row: the median IOPS of $RUNS runs (default 3) of $SECONDS_PER_CASE
# seconds (default 3), the four servers alternating within each run, and
# the daemon's CPU time per request (user + system, from /proc, in
# microseconds: what the polling costs).  Prints figures; never fails on
# them.
# LOOP=main: the export in the daemon's main loop instead, qblock's with
# --object main-loop,poll-max-ns=0 and with its default (32768), against
# qemu-storage-daemon's main loop, which never polls.
set -u
build=${1:?usage: bench-iothread-poll.sh BUILD_DIR}
runs=${RUNS:-3}
secs=${SECONDS_PER_CASE:-3}
size=${SIZE:-1G}
cases=${CASES:-randread-1 randread-32 randwrite-1 randwrite-32}
kinds=${KINDS:-vhost nbd}
devices=${DEVICES:-qcow2 null}
loop=${LOOP:-iothread}
keys="qblock:0 qblock:32768 qemu:0 qemu:32768" where="on an iothread"
[ "$loop" = main ] && keys="qblock:0 qblock:32768 qemu:-" where="in the main loop"
. "$(dirname "$0")/lib.sh"
perf_require "iothread poll benchmark" fio qemu-img qemu-storage-daemon
perf_require_fio_nbd "iothread poll benchmark"
perf_workdir bench-iothread-poll
sock=$dir/nbd.sock
vsock=$dir/vu.sock
server_pin=() perf_client=()
if [ "$(nproc)" -ge 2 ]; then
    server_pin=(taskset -c 0) perf_client=(taskset -c 1)
fi
qemu-img create -q -f qcow2 -o preallocation=full "$dir/d.qcow2" "$size"

# perf_export_daemon_cmd's objects for KEY (impl:poll) and KIND's export
# options.
loop_objects() {  # key
    if [ "$loop" != main ]; then
        echo "--object iothread,id=io0,poll-max-ns=${1#*:}"
    elif [ "${1%:*}" = qblock ]; then
        echo "--object main-loop,id=ml,poll-max-ns=${1#*:}"
    fi
}
loop_export_opts() {  # kind
    if [ "$loop" != main ]; then
        echo iothread=io0
    elif [ "$1" = vhost ]; then
        echo num-queues=1
    else
        echo name=d
    fi
}
echo "one export $where, one client; qcow2: $size preallocated,"
echo "cache=none aio=io_uring; null: null-co; 4 KiB; daemon on CPU 0, client on"
echo "CPU 1; $(nproc) CPUs;"
echo "median of $runs runs of ${secs}s, the servers alternating;"
echo "CPU = the daemon's user+system microseconds per request"
printf '%-6s %-6s %-13s %-17s %10s %8s\n' export device case "server, poll" \
    IOPS "CPU us"
for kind in $kinds; do
  for dev in $devices; do
    for c in $cases; do
        rw=${c%-*} depth=${c##*-}
        declare -A iops=() cpu=() aborted=()
        for r in $(seq "$runs"); do
            for key in $keys; do
                set -- $(perf_export_run "$kind" "$rw" "$depth" 1 \
                         "${server_pin[@]}" \
                         $(perf_export_daemon_cmd "${key%:*}" "$kind" "$dev" \
                           "$(loop_objects "$key")" \
                           "$(loop_export_opts "$kind")"))
                if [ "$1" = aborts ]; then
                    aborted[$key]=1
                else
                    iops[$key]+=" $1" cpu[$key]+=" $2"
                fi
            done
        done
        for key in $keys; do
            if [ -n "${aborted[$key]:-}" ]; then
                i=aborts c_med=-
            else
                i=$(median ${iops[$key]})
                c_med=$(middle ${cpu[$key]})
            fi
            printf '%-6s %-6s %-13s %-17s %10s %8s\n' "$kind" "$dev" "$c" \
                "${key%:*}, ${key#*:}" "$i" "$c_med"
        done
        unset iops cpu aborted
    done
  done
done
