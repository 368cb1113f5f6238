#!/usr/bin/env bash
# The FUSE export end to end: fio with psync on the mounted file of a
# qcow2 image (cache=none, aio=io_uring below), qemu-storage-daemon
# against qblock-storage-daemon, alternating in the same run.  Cases:
# 4 KiB random reads and writes with one and with four fio jobs (each
# job one request at a time: what the kernel hands a FUSE server in
# parallel), and 64 KiB sequential reads and writes.  The file goes
# through the kernel's page cache (neither export offers FUSE direct
# I/O); fio's invalidate=1 drops its cached pages before each run, and a
# fresh daemon (a fresh mount) serves every run.
#   tests/perf/bench-fuse.sh BUILD_DIR
# CASES (the list above), RUNS (default 3) runs per case and server,
# SECS (default 5) seconds
# each; the median is printed.  Mounting needs root and /dev/fuse (else
# it skips, exit 77).  Figures are printed, never asserted.
set -u
build=$(cd "${1:?usage: bench-fuse.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
perf_require "FUSE export benchmark" fio qemu-storage-daemon qemu-img
[ "$(id -u)" = 0 ] && [ -e /dev/fuse ] ||
    { echo "mounting FUSE needs root and /dev/fuse: skipping"; exit 77; }
secs=${SECS:-5}
runs=${RUNS:-3}
size=${SIZE:-1G}
perf_workdir fuse
qemu-img create -q -f qcow2 "$dir/d.qcow2" "$size"
# every cluster allocated, so that reads and rewrites touch data
qemu-io -f qcow2 -c "write -P 0x5a 0 $size" "$dir/d.qcow2" >/dev/null
mnt=$dir/mnt
touch "$mnt"

start() {  # impl
    local bin=qemu-storage-daemon
    [ "$1" = qblock ] && bin=$build/qblock-storage-daemon
    $bin --blockdev driver=file,node-name=f,filename=$dir/d.qcow2,cache.direct=on,aio=io_uring \
        --blockdev driver=qcow2,node-name=d,file=f \
        --export type=fuse,id=e,node-name=d,mountpoint=$mnt,writable=on \
        > "$dir/server.log" 2>&1 &
    pid=$!
    for i in $(seq 100); do
        grep -q " $mnt fuse" /proc/mounts && return 0
        sleep 0.1
    done
    echo "the $1 daemon did not mount: $(cat "$dir/server.log")" >&2
    return 1
}

stop() {
    perf_stop_server || echo "the daemon had died" >&2
    grep -q " $mnt fuse" /proc/mounts && umount -l "$mnt"
}

declare -A iops
cases=${CASES:-"randread-4k-1 randwrite-4k-1 randread-4k-4 randwrite-4k-4 read-64k-1 write-64k-1"}
printf '%-16s %10s %10s %7s\n' case qemu qblock ratio
for c in $cases; do
    IFS=- read -r rw bs jobs <<< "$c"
    for r in $(seq "$runs"); do
        for impl in qemu qblock; do
            start $impl || exit 1
            iops[$c,$impl,$r]=$(perf_fio_iops --filename="$mnt" \
                --ioengine=psync --rw=$rw --bs=$bs --numjobs=$jobs \
                --group_reporting --invalidate=1 --size="$size")
            stop
        done
    done
    q=$(median $(for r in $(seq "$runs"); do echo "${iops[$c,qemu,$r]}"; done))
    b=$(median $(for r in $(seq "$runs"); do echo "${iops[$c,qblock,$r]}"; done))
    printf '%-16s %10s %10s %7s\n' "$c" "$q" "$b" "$(ratio "$b" "$q")"
done
