#!/usr/bin/env bash
# What a second iothread adds: two exports of one storage daemon, two
# clients at once, one on each export; the exports in the main loop, both
# on one iothread, or each on its own iothread; the same for
# qblock-storage-daemon and qemu-storage-daemon, in the same run.  NBD
# exports are driven by fio (nbd engine), vhost-user-blk exports by
# tests/perf/vhost-user-bench (the same front-end for both servers).
# qemu-storage-daemon 7.2 aborts when an NBD client of an export on an
# iothread disconnects (nbd_blockdev_client_closed: Assertion
# `qemu_in_main_thread() && nbd_server' failed): its NBD rows with
# iothreads say "aborts".  Nothing is pinned: the point is which CPUs the
# daemon can use.
# It ends with the cost of one cross-thread handoff (handoff-bench).
#   tests/perf/bench-iothreads.sh BUILD_DIR
# Cases: 4 KiB random read and write at depth 32, cache=none,
# aio=io_uring, two qcow2 images of $SIZE (default 1G), fully
# preallocated, on the file system of $TMPDIR (default /var/tmp).  Each
# figure is the sum of the two clients' IOPS, the median of $RUNS runs
# (default 3) of $SECONDS_PER_CASE seconds (default 3), the two servers
# alternating.  This script prints figures; it never fails on them.
set -u
build=${1:?usage: bench-iothreads.sh BUILD_DIR}
runs=${RUNS:-3}
secs=${SECONDS_PER_CASE:-3}
size=${SIZE:-1G}
cases=${CASES:-randread randwrite}
kinds=${KINDS:-nbd vhost}
. "$(dirname "$0")/lib.sh"
perf_require "iothread benchmark" fio qemu-img qemu-storage-daemon
perf_require_fio_nbd "iothread benchmark"
perf_workdir bench-iothreads
sock=$dir/nbd.sock
for i in 0 1; do
    qemu-img create -q -f qcow2 -o preallocation=full "$dir/d$i.qcow2" "$size"
done

# The daemon's command line for IMPL (qemu, qblock), KIND (nbd, vhost)
# and LAYOUT (main, one, two: where the two exports run).
server_cmd() {  # impl kind layout
    local bin=qemu-storage-daemon i it
    [ "$1" = qblock ] && bin=$build/qblock-storage-daemon
    echo "$bin --object iothread,id=io0 --object iothread,id=io1"
    [ "$2" = nbd ] && echo "--nbd-server addr.type=unix,addr.path=$sock"
    for i in 0 1; do
        case $3 in
        main) it= ;;
        one)  it=,iothread=io0 ;;
        two)  it=,iothread=io$i ;;
        esac
        echo "--blockdev driver=file,node-name=f$i,filename=$dir/d$i.qcow2,cache.direct=on,aio=io_uring"
        echo "--blockdev driver=qcow2,node-name=d$i,file=f$i"
        if [ "$2" = nbd ]; then
            echo "--export type=nbd,id=e$i,node-name=d$i,writable=on$it"
        else
            echo "--export type=vhost-user-blk,id=e$i,node-name=d$i,addr.type=unix,addr.path=$dir/vu$i.sock,writable=on$it"
        fi
    done
}

start_server() {  # impl kind layout
    local ready=$sock
    [ "$2" = vhost ] && ready=$dir/vu1.sock
    rm -f "$sock" "$dir"/vu*.sock
    perf_start_server "$ready" "$dir/server.log" $(server_cmd "$@")
}

# IOPS of one fio client on export NAME.
fio_iops() {  # name rw
    perf_fio_iops --ioengine=nbd --uri="nbd+unix:///$1?socket=$sock" \
        --rw="$2" --bs=4k --iodepth=32
}

# IOPS of one vhost-user-bench run on export I's socket.
vhost_iops() {  # i rw
    "$build/tests/perf/vhost-user-bench" "$dir/vu$1.sock" "$2" 4096 32 \
        "$secs" 2>/dev/null | sed -n 's/^IOPS //p' | grep . || echo 0
}

# Both clients at once; prints the sum.
two_clients() {  # kind rw
    local p0
    if [ "$1" = nbd ]; then
        fio_iops d0 "$2" > "$dir/c0" &
        p0=$!
        fio_iops d1 "$2" > "$dir/c1"
    else
        vhost_iops 0 "$2" > "$dir/c0" &
        p0=$!
        vhost_iops 1 "$2" > "$dir/c1"
    fi
    wait $p0
    echo $(( $(cat "$dir/c0") + $(cat "$dir/c1") ))
}

echo "two exports, two clients at once (4k, depth 32 each; NBD: fio's nbd engine,"
echo "vhost-user-blk: vhost-user-bench), cache=none aio=io_uring, qcow2 $size"
echo "preallocated; $(nproc) CPUs; sum of both clients' IOPS, median of $runs"
printf '%-7s %-10s %-26s %10s %10s %7s\n' export case "exports run in" qblock qemu ratio
for kind in $kinds; do
    for c in $cases; do
        for layout in main one two; do
            declare -A got=([qblock]= [qemu]=)
            declare -A aborted=([qblock]=0 [qemu]=0)
            for r in $(seq "$runs"); do
                for impl in qblock qemu; do
                    start_server $impl $kind $layout || continue
                    got[$impl]+=" $(two_clients $kind "$c")"
                    sleep 0.2
                    perf_stop_server || aborted[$impl]=1
                done
            done
            q=$(median ${got[qblock]}) e=$(median ${got[qemu]})
            ratio=$(ratio "$q" "$e")
            [ "${aborted[qblock]}" = 1 ] && q=aborts ratio=-
            [ "${aborted[qemu]}" = 1 ] && e=aborts ratio=-
            case $layout in
            main) what="the main loop" ;;
            one)  what="one iothread (both)" ;;
            two)  what="two iothreads (one each)" ;;
            esac
            printf '%-7s %-10s %-26s %10s %10s %7s\n' "$kind" "$c" "$what" \
                "$q" "$e" "$ratio"
        done
    done
done

# What a request of one export on several iothreads would pay if it
# moved to its node's thread and back alone (the exports batch these
# moves: docs/iothreads.md, bench-export-iothreads.sh): one coroutine
# handed between two threads' contexts, both threads on one CPU and on
# two.
echo
echo "cross-thread handoff (tests/perf/handoff-bench), one CPU:  $(taskset -c 0 "$build/tests/perf/handoff-bench" | sed -n 's/^ns per handoff //p') ns"
echo "cross-thread handoff (tests/perf/handoff-bench), two CPUs: $(taskset -c 0,1 "$build/tests/perf/handoff-bench" | sed -n 's/^ns per handoff //p') ns"
