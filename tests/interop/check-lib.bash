# The result counters of the tests/interop shell scripts (sourced, not
# run): ok/fail/skip count a check each, check runs one, summary prints
# the line tests/run-all.sh reads and fails if any check failed.

passed=0
failed=0
skipped=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
# skip WHAT WHY: a group of cases that cannot run here, counted
skip() { echo "skip $1: $2"; skipped=$((skipped + 1)); }
# fail NAME [DETAIL...]: the details indented below the name
fail() {
    echo "FAIL $1"
    shift
    [ $# -gt 0 ] && printf '%s\n' "$@" | sed 's/^/    /'
    failed=$((failed + 1))
}
# check NAME CMD...: ok if CMD succeeds
check() {
    local name=$1
    shift
    if "$@"; then ok "$name"; else fail "$name"; fi
}
# quiet CMD...: CMD with its output dropped (for check)
quiet() { "$@" >/dev/null 2>&1; }
summary() {
    echo "$passed passed, $failed failed, $skipped skipped"
    [ "$failed" -eq 0 ]
}

# same_as_qemu NAME QEMU_TOOL ARGS...: QEMU's tool and ours given ARGS,
# the same output and exit status, both passed through the script's norm
# (which names our tools as QEMU's and drops what differs by run); ours
# is $qimg, $qio, $qnbd or $qsd, which the script sets; each is stopped
# after 60 s (SIGKILL 20 s after the SIGTERM)
same_as_qemu() {
    local name=$1 tool=$2 ours want got
    shift 2
    case $tool in
    qemu-img) ours=$qimg ;;
    qemu-io) ours=$qio ;;
    qemu-nbd) ours=$qnbd ;;
    qemu-storage-daemon) ours=$qsd ;;
    esac
    want=$(timeout -k 20 60 "$tool" "$@" 2>&1 | norm; echo "exit ${PIPESTATUS[0]}")
    got=$(timeout -k 20 60 "$ours" "$@" 2>&1 | norm; echo "exit ${PIPESTATUS[0]}")
    if [ "$want" = "$got" ]; then
        ok "$name"
    else
        fail "$name" "$(diff <(echo "$want") <(echo "$got"))"
    fi
}

# wait_socket SOCKET PID: waits (up to 10 s) until unix socket SOCKET
# exists or process PID is gone; false if it did not appear
wait_socket() {
    local i
    for i in $(seq 100); do
        [ -S "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# start_qmp_daemon BIN NAME [ARG...]: starts BIN (a storage daemon) with
# ARGs and a QMP monitor on $work/NAME.sock, its stderr in $work/NAME.err;
# sets $daemon_pid (also added to $pids) and waits for the socket; false
# if it did not appear
start_qmp_daemon() {
    local bin=$1 name=$2
    shift 2
    rm -f "$work/$name.sock"
    "$bin" "$@" \
        --chardev socket,id=qmp0,path="$work/$name.sock",server=on,wait=off \
        --monitor chardev=qmp0 2> "$work/$name.err" &
    daemon_pid=$!
    pids+=($daemon_pid)
    wait_socket "$work/$name.sock" $daemon_pid
}

# work_dir [TEMPLATE]: $work, a new temporary directory (mktemp's
# TEMPLATE), and an exit trap that kills each pid the script added to
# $pids, waits, runs the script's extra_cleanup if it defines one, and
# removes the directory
work_dir() {
    work=$(mktemp -d ${1:+"$1"}) || exit 1
    pids=()
    trap check_lib_cleanup EXIT
}
check_lib_cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null
    done
    wait 2>/dev/null
    if declare -F extra_cleanup >/dev/null; then
        extra_cleanup
    fi
    rm -rf "$work"
}

# qsd_scenario BUILD SCENARIO: a scenario of jobs-vs-qsd.py that runs only
# when named (the same QMP script against qemu-storage-daemon and ours),
# its checks counted here
check_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
qsd_scenario() {
    local out line
    if ! command -v qemu-storage-daemon >/dev/null; then
        skip "$2 against qemu-storage-daemon" \
            "not installed (Debian qemu-system-common)"
        return
    fi
    out=$(python3 "$check_lib_dir/jobs-vs-qsd.py" "$1" "$2" 2>&1)
    sed '$d' <<<"$out"
    line=$(tail -n 1 <<<"$out")
    if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
        skipped=$((skipped + BASH_REMATCH[3]))
    else
        fail "$2 against qemu-storage-daemon" "$out"
    fi
}
