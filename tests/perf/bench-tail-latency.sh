#!/usr/bin/env bash
# The latency one client sees while another writes heavily through the
# same storage daemon: qblock-storage-daemon with its in-place page-cache
# writes on and off (the file driver's x-in-place-writes), and
# qemu-storage-daemon for reference.
#   tests/perf/bench-tail-latency.sh BUILD_DIR
# One daemon (pinned to CPU 0) exports two qcow2 images, 1 GiB each, fully
# preallocated, cache=writeback (the page cache), aio=threads: "a" is read
# by a depth-1 client doing 4 KiB random reads, "b" is written by a
# second client doing 64 KiB sequential writes at depth 8, both fio jobs
# of one run (nbd engine, CPU 1).  Figures: the reader's completion
# latency at p50, p99 and p99.9 (microseconds) and its IOPS, the writer's
# MiB/s; medians of $RUNS runs (default 3) of $SECONDS_PER_CASE seconds
# (default 10), the configurations alternating run by run.
# QUICK=1: one run of 3 seconds.
# This script prints figures; it never fails on them.
set -u
build=${1:?usage: bench-tail-latency.sh BUILD_DIR}
runs=${RUNS:-3}
secs=${SECONDS_PER_CASE:-10}
if [ "${QUICK:-0}" != 0 ]; then
    runs=1 secs=3
fi
. "$(dirname "$0")/lib.sh"
perf_require "latency benchmark" fio qemu-img qemu-storage-daemon taskset \
    python3
perf_require_fio_nbd "latency benchmark"
server_cpu=0 client_cpu=1
[ "$(nproc)" -ge 2 ] || client_cpu=0
perf_workdir bench-tail
sock=$dir/nbd.sock
for img in a b; do
    qemu-img create -q -f qcow2 -o preallocation=full "$dir/$img.qcow2" 1G
done

start_daemon() {  # qblock-on | qblock-off | qemu
    local bin=qemu-storage-daemon extra=
    case $1 in
    qblock-on)  bin=$build/qblock-storage-daemon extra=,x-in-place-writes=on ;;
    qblock-off) bin=$build/qblock-storage-daemon extra=,x-in-place-writes=off ;;
    esac
    rm -f "$sock"
    perf_start_server "$sock" "$dir/daemon.log" taskset -c $server_cpu "$bin" \
        --blockdev driver=file,node-name=fa,filename=$dir/a.qcow2,cache.direct=off,aio=threads$extra \
        --blockdev driver=qcow2,node-name=a,file=fa \
        --blockdev driver=file,node-name=fb,filename=$dir/b.qcow2,cache.direct=off,aio=threads$extra \
        --blockdev driver=qcow2,node-name=b,file=fb \
        --nbd-server addr.type=unix,addr.path=$sock \
        --export type=nbd,id=ea,node-name=a,name=a,writable=on \
        --export type=nbd,id=eb,node-name=b,name=b,writable=on
}

# "P50 P99 P99.9 READ_IOPS WRITE_MIBS" of one run.
one_run() {
    taskset -c $client_cpu fio --output-format=json --time_based \
        --runtime="$secs" --ioengine=nbd --norandommap --randrepeat=0 \
        --name=reader --uri="nbd+unix:///a?socket=$sock" --rw=randread \
        --bs=4k --iodepth=1 \
        --name=writer --uri="nbd+unix:///b?socket=$sock" --rw=write \
        --bs=64k --iodepth=8 2>/dev/null |
        python3 -c 'import json, sys
text = sys.stdin.read()
try:
    jobs = json.loads(text[text.index("{"):])["jobs"]
    r = jobs[0]["read"]
    p = r["clat_ns"]["percentile"]
    print("%d %d %d %d %d" % (p["50.000000"] / 1000, p["99.000000"] / 1000,
                              p["99.900000"] / 1000, r["iops"],
                              jobs[1]["write"]["bw"] / 1024))
except Exception:
    print("0 0 0 0 0")'
}

configs="qblock-on qblock-off qemu"
declare -A got=()
for r in $(seq "$runs"); do
    for c in $configs; do
        start_daemon "$c" || continue
        got[$c]+="$(one_run)
"
        perf_stop_server
    done
    configs="${configs#* } ${configs%% *}"
done
echo "Machine: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg);" \
     "runs=$runs, ${secs}s each; daemon on CPU $server_cpu, fio on CPU $client_cpu"
echo
echo "| daemon, in-place writes        | read p50 us | p99 us | p99.9 us | read IOPS | write MiB/s |"
echo "|--------------------------------|------------:|-------:|---------:|----------:|------------:|"
for c in qblock-on qblock-off qemu; do
    case $c in
    qblock-on)  label="qblock, x-in-place-writes=on" ;;
    qblock-off) label="qblock, x-in-place-writes=off" ;;
    qemu)       label="qemu-storage-daemon 7.2" ;;
    esac
    cols=()
    for f in 1 2 3 4 5; do
        cols+=("$(median $(printf '%s' "${got[$c]:-}" | awk -v f=$f 'NF { print $f }'))")
    done
    printf '| %-30s | %11s | %6s | %8s | %9s | %11s |\n' "$label" "${cols[@]}"
done
