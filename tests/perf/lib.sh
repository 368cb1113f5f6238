# What the export benchmarks share (sourced, not run): their dependencies,
# a work folder, one server at a time, fio's IOPS and the median of runs,
# and one run against a storage daemon's export.
#   . "$(dirname "$0")/lib.sh"
# A script sets $secs (seconds per fio run) before it calls perf_fio_iops,
# and may set perf_client (an array, e.g. taskset -c 1) to prefix fio.
# The export helpers also use $build, $size, $sock and $vsock.

# Exits 77 (skip) with WHAT in the message unless every TOOL is installed.
perf_require() {  # what tool...
    local what=$1 tool
    shift
    for tool in "$@"; do
        command -v "$tool" > /dev/null ||
            { echo "$tool is not installed: skipping the $what"; exit 77; }
    done
}

# Exits 77 unless fio has its nbd engine (libnbd).
perf_require_fio_nbd() {  # what
    fio --enghelp 2>/dev/null | grep -qx '[[:space:]]*nbd' ||
        { echo "this fio has no nbd engine: skipping the $1"; exit 77; }
}

# Sets $dir to a new folder under $TMPDIR (default /var/tmp: tmpfs has no
# O_DIRECT) that goes, with the server, when the script exits.
perf_workdir() {  # name
    dir=$(mktemp -d "${TMPDIR:-/var/tmp}/qblock-$1.XXXXXX")
    pid=
    trap perf_cleanup EXIT
}

perf_cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$dir"
}

# Runs the server COMMAND in the background ($pid) with its output in LOG,
# and waits up to 10 s for the socket READY to appear.
perf_start_server() {  # ready log command...
    local ready=$1 log=$2 i
    shift 2
    "$@" > "$log" 2>&1 &
    pid=$!
    for i in $(seq 100); do
        [ -S "$ready" ] && return 0
        sleep 0.1
    done
    echo "server did not start: $*" >&2
    cat "$log" >&2
    return 1
}

# Stops the server; false if it had died (an abort) before.
perf_stop_server() {
    local alive=0
    kill "$pid" 2>/dev/null || alive=1
    wait "$pid" 2>/dev/null
    pid=
    return $alive
}

# IOPS of one fio run of $secs seconds with ARGS (reads and writes added),
# from its JSON report (which the nbd engine's "connected" line precedes);
# 0 if fio failed.
perf_fio_iops() {  # fio args...
    "${perf_client[@]}" fio --name=bench --output-format=json \
        --time_based --runtime="$secs" --ramp_time=0 --norandommap \
        --randrepeat=0 "$@" 2>/dev/null |
        python3 -c 'import json, sys
text = sys.stdin.read()
try:
    j = json.loads(text[text.index("{"):])["jobs"][0]
    print(int(j["read"]["iops"] + j["write"]["iops"]))
except Exception:
    print(0)'
}

# The command line of a storage daemon, IMPL qblock (BUILD's) or qemu,
# serving DEVICE through one export of KIND: nbd on $sock or vhost
# (vhost-user-blk) on $vsock.  DEVICE null is a null-co node of $size,
# qcow2 the image $dir/d.qcow2 with cache=none, aio=io_uring.  OBJECTS are
# the daemon's --object options (its iothreads), EXPORT_OPTS what the
# export's options end with (its iothread settings).  Printed as words
# for an unquoted $(...).
perf_export_daemon_cmd() {  # impl kind device objects export-opts
    local bin=qemu-storage-daemon
    [ "$1" = qblock ] && bin=$build/qblock-storage-daemon
    echo "$bin $4"
    [ "$2" = nbd ] && echo "--nbd-server addr.type=unix,addr.path=$sock"
    if [ "$3" = null ]; then
        echo "--blockdev driver=null-co,node-name=d,size=$(numfmt --from=iec "$size")"
    else
        echo "--blockdev driver=file,node-name=f,filename=$dir/d.qcow2,cache.direct=on,aio=io_uring"
        echo "--blockdev driver=qcow2,node-name=d,file=f"
    fi
    if [ "$2" = nbd ]; then
        echo "--export type=nbd,id=e,node-name=d,writable=on,$5"
    else
        echo "--export type=vhost-user-blk,id=e,node-name=d,addr.type=unix,addr.path=$vsock,writable=on,$5"
    fi
}

# The server's CPU time so far, in clock ticks (utime + stime).
perf_server_cpu_ticks() {
    awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0
}

# One run of $secs seconds against the export daemon COMMAND (made by
# perf_export_daemon_cmd), which it starts and stops: 4 KiB requests of
# RW (randread, randwrite) from QUEUES queues (vhost-user-bench) or NBD
# connections (fio's nbd engine) of depth DEPTH each, perf_client before
# the client.  Prints "IOPS CPU_US_PER_REQUEST" (IOPS summed over the
# queues; the daemon's user + system time per request), "0 0" if the
# daemon did not start, or "aborts" if it died under the client.
perf_export_run() {  # kind rw depth queues command...
    local kind=$1 rw=$2 depth=$3 queues=$4 ready=$sock iops t0 t1
    shift 4
    [ "$kind" = vhost ] && ready=$vsock
    rm -f "$sock" "$vsock"
    perf_start_server "$ready" "$dir/server.log" "$@" ||
        { echo "0 0"; return; }
    t0=$(perf_server_cpu_ticks)
    if [ "$kind" = nbd ]; then
        iops=$(perf_fio_iops --ioengine=nbd --uri="nbd+unix:///d?socket=$sock" \
            --rw="$rw" --bs=4k --iodepth="$depth" --numjobs="$queues" \
            --group_reporting)
    else
        iops=$("${perf_client[@]}" "$build/tests/perf/vhost-user-bench" \
            "$vsock" "$rw" 4096 "$depth" "$secs" "$queues" 2>/dev/null |
            sed -n 's/^IOPS //p' | grep . || echo 0)
    fi
    t1=$(perf_server_cpu_ticks)
    perf_stop_server || { echo aborts; return; }
    awk -v i="$iops" -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
        -v s="$secs" 'BEGIN {
        n = i * s; printf "%d %.2f\n", i, (n > 0 ? t / hz * 1e6 / n : 0) }'
}

# Operations per second of one `qemu-img bench` or `qblock-img bench` run:
# COUNT over the seconds of its "Run completed in X seconds." line; 0 if
# the command printed none (it failed).
perf_bench_ops() {  # count command...
    local count=$1 s
    shift
    s=$("$@" 2>&1 | sed -n 's/^Run completed in \([0-9.]*\) seconds\./\1/p')
    awk -v c="$count" -v s="${s:-0}" 'BEGIN { if (s > 0) printf "%d", c / s; else print 0 }'
}

# Median of the numbers given (of an even count, the mean of the middle two).
median() {
    printf '%s\n' "$@" | grep . | sort -n | awk '{ v[NR] = $1 } END {
        if (NR % 2) print v[(NR + 1) / 2]; else printf "%d\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# The middle one of the numbers given, decimals kept (of an even count,
# the lower of the middle two).
middle() {
    printf '%s\n' "$@" | grep . | sort -n |
        awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# A / B as "1.23x", or "-" when B is 0.
ratio() {  # a b
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'
}

# A as a percentage of B ("65%"), or "-" when B is 0.
frac() {  # a b
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%3.0f%%", 100 * a / b; else print "-" }'
}

# A disk of mixed data in FILE, SIZE_MIB MiB: 64 MiB stripes of random
# bytes, base64 text (compresses to about three quarters) and zeroes (a
# hole), in turn.
perf_mixed_disk() {  # file size_mib
    local file=$1 size_mib=$2 i
    truncate -s "${size_mib}M" "$file"
    for ((i = 0; i < size_mib / 64; i++)); do
        case $((i % 3)) in
        0) head -c 64M /dev/urandom ;;
        1) head -c 48M /dev/urandom | base64 -w 76 | head -c 64M ;;
        2) continue ;;
        esac > "$file.stripe"
        dd if="$file.stripe" of="$file" bs=1M seek=$((i * 64)) \
            conv=notrunc status=none
    done
    rm -f "$file.stripe"
}
