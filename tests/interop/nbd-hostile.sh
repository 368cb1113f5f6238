#!/usr/bin/env bash
# qblock-nbd against hostile clients: nbd-hostile.py breaks the protocol
# in many ways over raw sockets (bad magic, unknown and oversized options,
# truncated packets, requests past the end and too big, clients that
# vanish mid-request or never read, a handshake that never ends) and
# checks each answer; a good client must be served after every case.
# Then the server must still be alive, serve nbdinfo and qemu-io, and
# exit cleanly on SIGTERM.
#
#   tests/interop/nbd-hostile.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed"; exits
# 77 if the NBD client tools are not installed.
set -u
build=${1:?usage: nbd-hostile.sh BUILD_DIR}
source "$(dirname "$0")/nbd-lib.bash"

size=$((64 * 1024 * 1024))
truncate -s $size "$work/h.raw"
start_server h "$qnbd" -f raw -t -e 0 "$work/h.raw" || {
    fail "server starts"
    summary
    exit 1
}

# qblock-nbd's handshake limit (NBD_DEFAULT_HANDSHAKE_MAX_SECS)
out=$(python3 "$here/nbd-hostile.py" "$work/h.sock" $size 10 2>&1)
echo "$out" | grep -v 'passed, .* failed$'
line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
if [ -z "$line" ]; then
    fail "nbd-hostile.py ran to the end" "$out"
else
    passed=$((passed + ${line%% passed*}))
    f=${line#* passed, }
    failed=$((failed + ${f%% failed}))
fi

check "the server survived every hostile client" kill -0 "$server_pid"
check "nbdinfo still gets the size" \
    test "$(nbdinfo --size "$(uri h)" 2>&1)" = $size
check "qemu-io still writes and reads back" \
    quiet qemu-io -f raw -c "write -P 0x5a 1M 64k" \
    -c "read -P 0x5a 1M 64k" "$(uri h)"
kill "$server_pid"
if wait_exit "$server_pid"; then
    ok "SIGTERM ends the server"
else
    fail "SIGTERM ends the server"
fi
check "no crash or assertion in the server's messages" \
    bash -c "! grep -Eiq 'assert|abort|segmentation|sanitizer' '$work/h.err'"
check "the socket is removed at exit" test ! -e "$work/h.sock"
summary
