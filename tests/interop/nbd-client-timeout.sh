#!/usr/bin/env bash
# The NBD client's time limits against a server that goes silent
# (nbd-client-badserver.py's SILENT_FAULTS): a handshake that never ends
# (open-timeout), requests that get no reply (x-request-timeout), each
# ending qblock-img info/convert and qblock-io with an error naming the
# server and the phase, in bounded time; a server that is slow but never
# silent for long is waited for; with reconnect-delay a silent connection
# is replaced as a dropped one would be; x-request-timeout=0 waits.
# And a server that never accepts the connection (a TCP host that drops
# the SYNs, a unix listener whose backlog is full): connect() is bounded
# by open-timeout, or by the handshake's 60 s without it, at open and
# when reconnecting, as qemu-img's is by open-timeout.
#
#   tests/interop/nbd-client-timeout.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed,
# N skipped"; exits 77 if the QEMU tools are not installed (nbd-lib.bash).
set -u
build=${1:?usage: nbd-client-timeout.sh BUILD_DIR}
source "$(dirname "$0")/nbd-lib.bash"

cd "$work" || exit 1

py=$(command -v python3)
if [ -z "$py" ]; then
    skip "silent servers" "python3 is not installed"
    summary
    exit
fi

# --- Started first, checked last: without open-timeout a connect to a
# host that is away ends with the handshake's 60 s deadline, not after
# the kernel's two minutes of SYN retries.
serve_tcp_early() {
    local portfile=$work/early.port i
    "$py" "$here/nbd-client-badserver.py" "tcp:$portfile" blackhole &
    pids+=($!)
    for i in $(seq 100); do
        [ -s "$portfile" ] && break
        sleep 0.1
    done
    early_port=$(cat "$portfile")
    (
        start=$(date +%s)
        timeout 90 "$qimg" info --image-opts \
            "driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=$early_port" \
            >"$work/early.out" 2>&1
        echo "$? $(( $(date +%s) - start ))" >"$work/early.rc"
    ) &
    early_pid=$!
}
serve_tcp_early

# serve FAULT: starts the bad server on $work/FAULT.sock; sets $sock.
serve() {
    sock=$work/$1-$RANDOM.sock
    "$py" "$here/nbd-client-badserver.py" "$sock" "$1" &
    pids+=($!)
    wait_socket "$sock" $!
}

# serve_tcp FAULT: the bad server on a TCP port of 127.0.0.1; sets $port
# and $tcp (the --image-opts of the nbd node on it, open-timeout aside).
serve_tcp() {
    local portfile=$work/$1-$RANDOM.port i
    "$py" "$here/nbd-client-badserver.py" "tcp:$portfile" "$1" &
    pids+=($!)
    for i in $(seq 100); do
        [ -s "$portfile" ] && break
        sleep 0.1
    done
    port=$(cat "$portfile")
    tcp="driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=$port"
}

# opts [KEY=VAL...]: --image-opts of the nbd node on $sock.
opts() {
    local IFS=,
    echo "driver=nbd,server.type=unix,server.path=$sock,$*"
}

# run NAME MAX_SECONDS CMD...: runs CMD (killed after 30 s), sets $out,
# $rc and $secs, and fails NAME if it took MAX_SECONDS or more.
run() {
    local name=$1 max=$2 start end
    shift 2
    start=$(date +%s%N)
    out=$(timeout 30 "$@" 2>&1)
    rc=$?
    end=$(date +%s%N)
    secs=$(( (end - start) / 1000000000 ))
    if [ $secs -ge "$max" ]; then
        fail "$name" "took $secs s (limit $max s)" "$out"
        return 1
    fi
}

# expect NAME WANT_RC TEXT...: ok if $rc is WANT_RC and $out has each TEXT.
expect() {
    local name=$1 want_rc=$2 t
    shift 2
    if [ $rc -ne "$want_rc" ]; then
        fail "$name" "exit $rc (expected $want_rc)" "$out"
        return
    fi
    for t in "$@"; do
        if ! grep -qF -- "$t" <<<"$out"; then
            fail "$name" "no '$t' in the output" "$out"
            return
        fi
    done
    ok "$name"
}

# --- The handshake: open-timeout bounds it; the message names the server
# and what the client waited for.
hs_msg="did not complete the handshake within open-timeout=2 s"

serve hs-silent-greeting
if run "info: silent before the greeting" 6 \
       "$qimg" info --image-opts "$(opts open-timeout=2)"; then
    expect "info: silent before the greeting" 1 \
        "NBD server '$sock' $hs_msg" "Failed to read initial magic"
fi

serve hs-silent
if run "qblock-io: no reply to NBD_OPT_GO" 6 \
       "$qio" -c 'read 0 4k' --image-opts "$(opts open-timeout=2)"; then
    expect "qblock-io: no reply to NBD_OPT_GO" 1 \
        "NBD server '$sock' $hs_msg" "Failed to read option reply"
fi

serve hs-silent
if run "convert: no reply to NBD_OPT_GO" 6 \
       "$qimg" convert -O raw --image-opts "$(opts open-timeout=2)" \
       out.raw; then
    expect "convert: no reply to NBD_OPT_GO" 1 "NBD server '$sock' $hs_msg"
fi

# --- Transmission: requests in flight and not a byte for
# x-request-timeout: the connection is lost, every request fails with EIO
# (the message says so once), and the tool ends.
rq_msg="sent nothing for 1 s with"

serve silent
if run "qblock-io: silent with reads in flight" 6 \
       "$qio" -c 'aio_read 0 4k' -c 'aio_read 4k 4k' \
       -c 'aio_read 8k 4k' -c 'aio_flush' -c 'read 0 4k' \
       --image-opts "$(opts x-request-timeout=1)"; then
    if [ "$(grep -c 'Input/output error' <<<"$out")" -ne 4 ] ||
       [ "$(grep -c 'x-request-timeout' <<<"$out")" -ne 1 ]; then
        fail "qblock-io: silent with reads in flight" \
            "expected 4 EIO and one timeout message" "$out"
    else
        expect "qblock-io: silent with reads in flight" 1 \
            "$rq_msg 3 requests in flight (x-request-timeout): connection taken as lost"
    fi
fi

serve silent
if run "convert: silent source" 6 \
       "$qimg" convert -O raw --image-opts "$(opts x-request-timeout=1)" \
       out.raw; then
    expect "convert: silent source" 1 "$rq_msg" \
        "error while reading at byte 0: Input/output error"
fi

# probing the format reads the first sector
serve silent
json="{\"file\":{\"driver\":\"nbd\",\"server\":{\"type\":\"unix\",\"path\":\"$sock\"},\"x-request-timeout\":1}}"
if run "info: silent while probing" 6 "$qimg" info "json:$json"; then
    expect "info: silent while probing" 1 "$rq_msg" \
        "Could not read image for determining its format: Input/output error"
fi

# --- A slow server that is never silent for long: each reply in four
# parts 0.3 s apart, three requests in flight; 3.6 s in all, longer than
# x-request-timeout=1, is no timeout since bytes keep coming.
serve slow
if run "slow but alive server" 15 \
       "$qio" -c 'aio_read -P 0 0 4k' -c 'aio_read -P 0 4k 4k' \
       -c 'aio_read -P 0 8k 4k' -c 'aio_flush' \
       --image-opts "$(opts x-request-timeout=1)"; then
    if grep -q 'x-request-timeout\|error' <<<"$out" ||
       [ "$(grep -c '^read 4096/4096' <<<"$out")" -ne 3 ]; then
        fail "slow but alive server" "$out"
    else
        expect "slow but alive server" 0 "read 4096/4096 bytes at offset 8192"
    fi
fi

# --- With reconnect-delay, a silent connection is lost as a dropped one:
# the read waits, the client reconnects and the server's second
# connection answers it.
serve silent-once
if run "reconnect after a silent connection" 8 \
       "$qio" -c 'read -P 0 0 4k' \
       --image-opts "$(opts x-request-timeout=1 reconnect-delay=10)"; then
    expect "reconnect after a silent connection" 0 "$rq_msg" \
        "read 4096/4096 bytes at offset 0"
fi

# --- x-request-timeout=0: no limit, the read still waits after 3 s.
serve silent
start=$(date +%s)
out=$(timeout 3 "$qio" -c 'read 0 4k' \
      --image-opts "$(opts x-request-timeout=0)" 2>&1)
rc=$?
if [ $rc -eq 124 ] && [ -z "$out" ]; then
    ok "x-request-timeout=0 waits"
else
    fail "x-request-timeout=0 waits" "exit $rc (expected 124)" "$out"
fi

# --- connect(): a TCP host that drops the SYNs, a unix listener whose
# backlog is full.  open-timeout bounds the connect as it bounds the
# handshake; qemu-img, the oracle, gives up by open-timeout as well.
serve_tcp blackhole
if run "connect: TCP host away, open-timeout=2" 5 \
       "$qimg" info --image-opts "$tcp,open-timeout=2"; then
    expect "connect: TCP host away, open-timeout=2" 1 \
        "Connection attempt cancelled by timeout (open-timeout=2 s): Failed to connect to '127.0.0.1:$port': Connection timed out"
fi
if run "qemu-img: TCP host away, open-timeout=2" 5 \
       qemu-img info --image-opts "$tcp,open-timeout=2"; then
    expect "qemu-img: TCP host away, open-timeout=2" 1 \
        "Connection attempt cancelled by timeout"
fi

serve blackhole
if run "connect: unix backlog full, open-timeout=2" 5 \
       "$qio" -c 'read 0 4k' --image-opts "$(opts open-timeout=2)"; then
    expect "connect: unix backlog full, open-timeout=2" 1 \
        "Connection attempt cancelled by timeout (open-timeout=2 s): Failed to connect to '$sock': Connection timed out"
fi

# a healthy server over TCP: the non-blocking connect still connects
serve_tcp healthy
if run "connect: healthy TCP server" 5 \
       "$qio" -c 'read -P 0 0 4k' --image-opts "$tcp,open-timeout=2"; then
    expect "connect: healthy TCP server" 0 "read 4096/4096 bytes at offset 0"
fi

# --- Reconnecting to a host that went away: the read waits out
# reconnect-delay and fails, and the tool ends at once (the connect in
# progress is abandoned, not waited for), as qemu-io does.
for tool in "$qio" qemu-io; do
    name="reconnect to a host away: $(basename "$tool")"
    serve_tcp vanish
    if run "$name" 6 "$tool" -c 'read -P 0 0 4k' -c 'read -P 0 4k 4k' \
           --image-opts "$tcp,reconnect-delay=2"; then
        expect "$name" 1 "read 4096/4096 bytes at offset 0" \
            "read failed: Input/output error"
    fi
done

# the case started first
wait "$early_pid"
read -r rc secs <"$work/early.rc"
out=$(cat "$work/early.out")
if [ $secs -lt 58 ] || [ $secs -gt 70 ]; then
    fail "connect: TCP host away, no open-timeout" \
        "took $secs s (expected 60)" "$out"
else
    expect "connect: TCP host away, no open-timeout" 1 \
        "Failed to connect to '127.0.0.1:$early_port': Connection timed out"
fi

summary
