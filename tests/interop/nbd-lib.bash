# Shared by the tests/interop/nbd-*.sh scripts (sourced, not run).
#
# Before sourcing: build=BUILD_DIR.  Provides $qnbd (our server), $qimg,
# $qio and $qsd (our other tools), $work (a scratch folder removed at
# exit), check-lib.bash's counters and same_as_qemu, and helpers to start
# a server in the background and to stop it.  A server's stderr goes to
# $work/NAME.err; start_server waits until its socket exists.

qnbd=$(cd "$build" && pwd)/qblock-nbd
qimg=$(cd "$build" && pwd)/qblock-img
qio=$(cd "$build" && pwd)/qblock-io
qsd=$(cd "$build" && pwd)/qblock-storage-daemon
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

for tool in qemu-nbd qemu-img qemu-io nbdinfo nbdcopy; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "skip: $tool is not installed (Debian packages qemu-utils," \
             "libnbd-bin)"
        exit 77
    fi
done
if [ ! -x "$qnbd" ]; then
    echo "FAIL: $qnbd has not been built"
    echo "0 passed, 1 failed"
    exit 1
fi

# python3-libnbd is built for Debian's python3, which need not be first
# in PATH.
py_nbd=
for py in /usr/bin/python3 python3; do
    if "$py" -c 'import nbd' 2>/dev/null; then
        py_nbd=$py
        break
    fi
done

. "$here/check-lib.bash"
work_dir

# start_server NAME PROG ARGS...: runs PROG (qemu-nbd or $qnbd) on the
# unix socket $work/NAME.sock in the background; sets $server_pid.
start_server() {
    local name=$1 prog=$2
    shift 2
    rm -f "$work/$name.sock"
    "$prog" -k "$work/$name.sock" "$@" 2> "$work/$name.err" &
    server_pid=$!
    pids+=("$server_pid")
    if ! wait_socket "$work/$name.sock" "$server_pid"; then
        echo "server $name did not start:" >&2
        cat "$work/$name.err" >&2
        return 1
    fi
}

# Stops the last server started and waits for it to exit.
stop_server() {
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
}

# Waits (up to 10 s) for process $1 to exit by itself; fails if it does not.
wait_exit() {
    local i
    for i in $(seq 100); do
        kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
        sleep 0.1
    done
    return 1
}

# wait_connected SOCKET: waits (up to 20 s) until a client is connected
# to the unix socket SOCKET (a server-side socket in state connected,
# /proc/net/unix), then 0.3 s more for its handshake; fails if none
# comes.  For a test that must cut a client off after it has opened its
# export: a fixed sleep is too short on a loaded machine.
wait_connected() {
    local i
    for i in $(seq 200); do
        # qblock-nbd binds SOCKET.PID.tmp and renames it: the kernel
        # keeps the name it was bound to
        if awk -v p="$1" '$6 == "03" && ($8 == p || index($8, p ".") == 1) {
                              found = 1 } END { exit !found }' /proc/net/unix; then
            sleep 0.3
            return 0
        fi
        sleep 0.1
    done
    return 1
}

uri() { echo "nbd+unix:///${2:-}?socket=$work/$1.sock"; }
