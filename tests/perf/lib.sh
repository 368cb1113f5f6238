# What the export benchmarks share (sourced, not run): their dependencies,
# a work folder, one server at a time, fio's IOPS and the median of runs.
#   . "$(dirname "$0")/lib.sh"
# A script sets $secs (seconds per fio run) before it calls perf_fio_iops,
# and may set perf_client (an array, e.g. taskset -c 1) to prefix fio.

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

# Median of the numbers given (of an even count, the mean of the middle two).
median() {
    printf '%s\n' "$@" | grep . | sort -n | awk '{ v[NR] = $1 } END {
        if (NR % 2) print v[(NR + 1) / 2]; else printf "%d\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# A / B as "1.23x", or "-" when B is 0.
ratio() {  # a b
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'
}
