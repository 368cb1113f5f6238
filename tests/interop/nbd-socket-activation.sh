#!/usr/bin/env bash
# qblock-nbd started with systemd's socket activation (LISTEN_PID,
# LISTEN_FDS, the socket as descriptor 3; tests/interop/socket-activate.py
# plays the service manager), against the real qemu-nbd: both serve the
# image on the socket handed over, unix or TCP; both refuse what
# conflicts with it (-k, -b, -p, --list, more than one socket, a
# descriptor that is not open) with the same message and exit status;
# variables that name another process are ignored.
#
#   tests/interop/nbd-socket-activation.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed"; exits
# 77 if qemu-nbd is not installed.
set -u
build=${1:?usage: nbd-socket-activation.sh BUILD_DIR}
source "$(dirname "$0")/nbd-lib.bash"
activate="python3 $here/socket-activate.py"

cd "$work" || exit 1
qemu-img create -q -f raw r.img 1M
qemu-io -f raw -c "write -P 0x5a 0 64k" r.img >/dev/null

# serves NAME PROG unix|tcp: PROG, activated on a socket of that kind,
# serves the image
serves() {
    local name=$1 prog=$2 kind=$3 pid out uri i
    rm -f "$work/act.sock" "$work/port"
    if [ "$kind" = unix ]; then
        $activate --unix "$work/act.sock" -- "$prog" -f raw r.img \
            2> "$work/act.err" &
        uri="nbd+unix:///?socket=$work/act.sock"
    else
        $activate --tcp "$work/port" -- "$prog" -f raw r.img \
            2> "$work/act.err" &
    fi
    pid=$!
    pids+=("$pid")
    # the socket listens before the program runs: wait for it to exist
    for i in $(seq 100); do
        [ -S "$work/act.sock" ] || [ -s "$work/port" ] && break
        sleep 0.1
    done
    [ "$kind" = tcp ] && uri="nbd://127.0.0.1:$(cat "$work/port")/"
    out=$(qemu-io -f raw -r -c "read -P 0x5a 0 64k" "$uri" 2>&1)
    if grep -q "read 65536/65536" <<<"$out"; then
        ok "$name"
    else
        fail "$name" "$out" "$(cat "$work/act.err")"
    fi
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

for prog in qemu-nbd "$qnbd"; do
    tag=$(basename "$prog")
    serves "$tag serves on an activated unix socket" "$prog" unix
    serves "$tag serves on an activated TCP socket" "$prog" tcp
done

# run ACTIVATE-OPTIONS -- PROG ARGS...: output and exit status, the
# program's name normalised; a server that starts is stopped after 3 s
run() {
    local args=()
    while [ "$1" != -- ]; do
        args+=("$1")
        shift
    done
    shift
    rm -f "$work/act.sock"
    timeout 3 $activate --unix "$work/act.sock" "${args[@]}" -- "$@" 2>&1 |
        sed -e "s#$qnbd#qemu-nbd#g" -e 's#qblock-nbd#qemu-nbd#g'
    echo "exit status ${PIPESTATUS[0]}"
}

same() {
    local name=$1
    shift
    local before=() want got
    while [ "$1" != -- ]; do
        before+=("$1")
        shift
    done
    shift
    want=$(run "${before[@]}" -- qemu-nbd "$@")
    got=$(run "${before[@]}" -- "$qnbd" "$@")
    if [ "$want" = "$got" ]; then
        ok "$name"
    else
        fail "$name" "$(diff <(echo "$want") <(echo "$got"))"
    fi
}

same "-k with socket activation" -- -k "$work/x.sock" -f raw r.img
same "-b with socket activation" -- -b 127.0.0.1 -f raw r.img
same "-p with socket activation" -- -p 10999 -f raw r.img
same "--list with socket activation" -- -L
same "two sockets" --fds 2 -- -f raw r.img
same "a descriptor that is not open" --fds 2 --closed -- -f raw r.img
same "no image" -- 

# LISTEN_PID of another process: not activated, so -k is the address
rm -f "$work/own.sock" "$work/act.sock"
$activate --unix "$work/act.sock" --other-pid -- "$qnbd" -k \
    "$work/own.sock" -f raw r.img 2> "$work/other.err" &
pid=$!
pids+=("$pid")
if wait_socket "$work/own.sock" "$pid" &&
   qemu-io -f raw -r -c "read -P 0x5a 0 64k" \
       "nbd+unix:///?socket=$work/own.sock" | grep -q "read 65536/65536"
then
    ok "variables of another process are ignored"
else
    fail "variables of another process are ignored" "$(cat "$work/other.err")"
fi
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null

# descriptor 3 is not a socket: refused, naming socket activation (the
# rest of qemu-nbd's message is what its socket layer failed at)
out=$(timeout 3 $activate --file r.img -- "$qnbd" -f raw r.img 2>&1)
rc=$?
if [ $rc -eq 1 ] &&
   grep -q "Failed to use socket activation: File descriptor '3' is not a socket" <<<"$out"
then
    ok "descriptor 3 is not a socket: refused"
else
    fail "descriptor 3 is not a socket: refused" "exit $rc" "$out"
fi

summary
