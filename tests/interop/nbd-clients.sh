#!/usr/bin/env bash
# qblock-nbd against real NBD clients (nbdinfo, nbdcopy, qemu-img,
# qemu-io, libnbd) and against the real qemu-nbd as the oracle:
#
#  - export size, flags and block sizes (nbdinfo --json) and --list
#    output, equal to qemu-nbd's for the same options;
#  - nbdinfo --map (base:allocation and qemu:allocation-depth) equal to
#    qemu-nbd's and to the image's allocation as qemu-img map reports it,
#    for raw, qcow2 and a qcow2 backing chain;
#  - nbdcopy and qemu-img convert round trips, byte for byte;
#  - flush and FUA observed on the image (the I/O statistics qblock-nbd
#    writes at exit under QBLOCK_NBD_STATS) and durable afterwards;
#  - a read-only export refuses writes with EPERM;
#  - many requests in flight, concurrent clients, a client killed
#    mid-transfer;
#  - the server's life: exit after the last client without -t, -e,
#    --fork/--pid-file, TCP, -s, -o, image locking.
#
#   tests/interop/nbd-clients.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed"; exits
# 77 if the client tools are not installed.
set -u
build=${1:?usage: nbd-clients.sh BUILD_DIR}
source "$(dirname "$0")/nbd-lib.bash"

# nbdinfo's output for export $2 of server $1, with the socket path gone.
info_json() {
    nbdinfo --json "$(uri "$1" "${2:-}")" 2>&1 | sed "s#$work#WORK#g"
}

# Runs "$@" against qemu-nbd then against qblock-nbd, each serving with
# the options in $server_args on socket "cmp", and compares the outputs.
# Both servers are persistent (-t) so that one client does not end them.
compare_servers() {
    local name=$1
    shift
    local out_q out_b
    start_server cmp qemu-nbd -t $server_args || { fail "$name"; return; }
    out_q=$("$@" 2>&1)
    stop_server
    start_server cmp "$qnbd" -t $server_args || { fail "$name"; return; }
    out_b=$("$@" 2>&1)
    stop_server
    if [ "$out_q" = "$out_b" ] && [ -n "$out_b" ]; then
        ok "$name"
    else
        fail "$name" "$(diff <(echo "$out_q") <(echo "$out_b"))"
    fi
}

# nbdinfo --map as "OFFSET LENGTH TYPE" lines, neighbours merged.
map_lines() {
    nbdinfo --map${2:+=$2} "$1" | awk '
        { if (n && $3 == t) { len += $2 } else {
              if (n) print off, len, t; off = $1; len = $2; t = $3; n = 1 } }
        END { if (n) print off, len, t }'
}

# ---- images ----

img=$work/img
mkdir -p "$img"
# raw: data, a hole, data written as zeroes, data at the end
truncate -s 16M "$img/sparse.raw"
qemu-io -f raw -c "write -P 0x11 0 1M" -c "write -P 0x22 8M 512k" \
    -c "write -P 0 12M 1M" -c "write -P 0x33 15M 1M" "$img/sparse.raw" \
    >/dev/null
# qcow2: data, zero clusters, unallocated
qemu-img create -q -f qcow2 "$img/t.qcow2" 64M
qemu-io -f qcow2 -c "write -P 0x44 0 1M" -c "write -z 4M 1M" \
    -c "write -P 0x55 9M 64k" -c "write -P 0x66 60M 4M" "$img/t.qcow2" \
    >/dev/null
# a backing chain: base has [0, 2M) and [6M, 7M), top has [1M, 3M)
qemu-img create -q -f qcow2 "$img/base.qcow2" 8M
qemu-io -f qcow2 -c "write -P 0x77 0 2M" -c "write -P 0x78 6M 1M" \
    "$img/base.qcow2" >/dev/null
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 "$img/top.qcow2"
qemu-io -f qcow2 -c "write -P 0x88 1M 2M" "$img/top.qcow2" >/dev/null

# ---- size, flags, block sizes, --list ----

for args in "-f qcow2" "-f qcow2 -r" "-f qcow2 -e 0" "-f qcow2 -e 2 -r" \
            "-f qcow2 -A -D desc" "-f raw" "--cache=writethrough -f raw" \
            ""; do
    image=$img/t.qcow2
    [[ "$args" == *raw* || -z "$args" ]] && image=$img/sparse.raw
    server_args="$args $image"
    compare_servers \
        "nbdinfo --json equal to qemu-nbd's: ${args:-(probed raw)}" \
        info_json cmp
done
server_args="-f qcow2 -x exp1 -D described -A $img/t.qcow2"
compare_servers "nbdinfo --json of a named export equal to qemu-nbd's" \
    info_json cmp exp1
compare_servers "qemu-nbd --list of qblock-nbd equal to qemu-nbd's" \
    qemu-nbd -L -k "$work/cmp.sock"
start_server lst qemu-nbd -t -A -x named -D "a description" -f qcow2 \
    "$img/t.qcow2"
out_q=$(qemu-nbd -L -k "$work/lst.sock" 2>&1)
out_b=$("$qnbd" -L -k "$work/lst.sock" 2>&1)
stop_server
if [ "$out_q" = "$out_b" ]; then
    ok "qblock-nbd --list prints what qemu-nbd --list prints"
else
    fail "qblock-nbd --list prints what qemu-nbd --list prints" \
        "$(diff <(echo "$out_q") <(echo "$out_b"))"
fi

# ---- maps ----

for spec in "raw:sparse.raw:base" "qcow2:t.qcow2:base" \
            "qcow2:t.qcow2:depth" "qcow2:top.qcow2:base" \
            "qcow2:top.qcow2:depth"; do
    IFS=: read -r fmt file ctx <<<"$spec"
    ctxname=
    [ "$ctx" = depth ] && ctxname=qemu:allocation-depth
    what="nbdinfo --map${ctxname:+=$ctxname} of $file"
    server_args="-r -A -f $fmt $img/$file"
    compare_servers "$what equal to qemu-nbd's" \
        nbdinfo --map${ctxname:+=$ctxname} "$(uri cmp)"
    start_server map "$qnbd" -r -A -f "$fmt" "$img/$file"
    got=$(map_lines "$(uri map)" "$ctxname")
    stop_server
    want=$(qemu-img map --output=json -f "$fmt" "$img/$file" |
           python3 "$here/nbd-map-expect.py" "$ctx")
    if [ "$got" = "$want" ] && [ -n "$got" ]; then
        ok "$what is the image's allocation"
    else
        fail "$what is the image's allocation" \
            "$(diff <(echo "$want") <(echo "$got"))"
    fi
done
start_server map "$qnbd" -r -A -f qcow2 "$img/top.qcow2"
depths=$(map_lines "$(uri map)" qemu:allocation-depth | awk '{print $3}' |
         sort -u | tr '\n' ' ')
stop_server
check "the chain's depth map has absent, local and backing extents" \
    test "$depths" = "0 1 2 "

# ---- round trips ----

head -c 6M /dev/urandom > "$work/src.raw"
truncate -s 16M "$work/src.raw"
for fmt in raw qcow2; do
    qemu-img create -q -f $fmt "$work/exp.$fmt" 16M
    start_server rt "$qnbd" -t -e 0 -f $fmt "$work/exp.$fmt"
    check "nbdcopy into a $fmt export" nbdcopy "$work/src.raw" "$(uri rt)"
    check "nbdcopy out of a $fmt export is byte-identical" \
        bash -c "nbdcopy '$(uri rt)' '$work/out1.raw' &&
                 cmp '$work/src.raw' '$work/out1.raw'"
    check "nbdcopy with 4 connections out of a $fmt export" \
        bash -c "nbdcopy --connections=4 '$(uri rt)' '$work/out2.raw' &&
                 cmp '$work/src.raw' '$work/out2.raw'"
    check "qemu-img convert out of a $fmt export is byte-identical" \
        bash -c "qemu-img convert -f raw -O qcow2 '$(uri rt)' \
                     '$work/out3.qcow2' &&
                 qemu-img compare -q '$work/src.raw' '$work/out3.qcow2'"
    check "qemu-img convert into a $fmt export" \
        bash -c "qemu-img convert -n -f qcow2 -O raw '$work/out3.qcow2' \
                     '$(uri rt)' &&
                 qemu-img compare -q -f raw -F raw '$work/src.raw' '$(uri rt)'"
    stop_server
    check "the $fmt image holds the data afterwards" \
        quiet qemu-img compare -f raw -F $fmt "$work/src.raw" "$work/exp.$fmt"
    if [ $fmt = qcow2 ]; then
        check "the qcow2 image checks clean with qemu-img check" \
            quiet qemu-img check "$work/exp.qcow2"
    fi
done

# ---- flush and FUA on the image ----

# stat_of FILE FIELD NODE: a counter from QBLOCK_NBD_STATS' output
stat_of() {
    local line
    if [ "$3" = backend ]; then
        line=$(grep '^backend:' "$1")
    else
        line=$(grep "^node $3 " "$1")
    fi
    sed -n "s/.* $2=\([0-9]*\).*/\1/p" <<<"$line"
}

# fua_case NAME ACTION "SERVER OPTIONS" "NODE FIELD VALUE"...: one client
# action against a fresh server; the counters at its exit must match.
fua_case() {
    local name=$1 action=$2 sargs=$3
    shift 3
    local want got node field value bad=""
    qemu-img create -q -f raw "$work/fua.raw" 1M
    QBLOCK_NBD_STATS=$work/stats start_server fua "$qnbd" -f raw $sargs \
        "$work/fua.raw" || { fail "$name"; return; }
    "$py_nbd" "$here/nbd-client.py" "$action" "$(uri fua)" || bad=client
    wait_exit "$server_pid" || bad="$bad server-did-not-exit"
    for want in "$@"; do
        read -r node field value <<<"$want"
        got=$(stat_of "$work/stats" "$field" "$node")
        [ "$got" = "$value" ] || bad="$bad $node.$field=$got(want $value)"
    done
    if [ -z "$bad" ]; then
        ok "$name"
    else
        fail "$name" "$bad" "$(cat "$work/stats" "$work/fua.err")"
    fi
}

if [ -z "$py_nbd" ]; then
    skip "flush/FUA/read-only/in-flight cases" \
        "python3-libnbd is not installed"
else
    fua_case "a plain write reaches the file without a flush" write "" \
        "root.file writes 1" "root.file flushes 0" "backend flush_operations 0"
    fua_case "a FUA write is flushed to the file before its reply" \
        write-fua "" "root.file writes 1" "root.file flushes 1" \
        "backend flush_operations 0"
    check "the FUA write's data is in the image after the server exited" \
        quiet qemu-io -f raw -c "read -P 0x22 0 64k" "$work/fua.raw"
    fua_case "NBD_CMD_FLUSH after a write flushes the file" write-flush "" \
        "backend flush_operations 1" "root.file flushes 1"
    fua_case "a FUA write-zeroes is flushed" zero-fua "" \
        "root.file flushes 1"
    fua_case "a FUA trim is flushed" trim-fua "--discard=unmap" \
        "root.file discards 1" "root.file flushes 1"
    fua_case "--cache=writethrough flushes after a plain write" write \
        "--cache=writethrough" "root.file flushes 1"
    fua_case "--cache=unsafe ignores flushes" write-flush "--cache=unsafe" \
        "backend flush_operations 1" "root.file flushes 0"
    fua_case "NBD_CMD_FLAG_FAST_ZERO succeeds or says ENOTSUP" fast-zero ""

    truncate -s 4M "$work/ro.raw"
    start_server ro "$qnbd" -r -f raw "$work/ro.raw"
    check "a read-only export refuses write, zero and trim with EPERM" \
        "$py_nbd" "$here/nbd-client.py" read-only "$(uri ro)"
    stop_server

    truncate -s 4M "$work/inflight.raw"
    start_server inflight "$qnbd" -f raw "$work/inflight.raw"
    check "64 writes and 64 reads in flight on one connection" \
        "$py_nbd" "$here/nbd-client.py" in-flight "$(uri inflight)"
    stop_server
fi

# ---- concurrency and disconnects ----

truncate -s 64M "$work/conc.raw"
# data everywhere, so that a full copy takes a while
qemu-io -f raw -c "write -P 0x99 0 64M" "$work/conc.raw" >/dev/null
start_server conc "$qnbd" -t -e 0 -f raw "$work/conc.raw"
client_pids=()
for i in 1 2 3 4 5 6; do
    qemu-io -f raw -c "write -P $((i * 16)) $((i * 4))M 4M" \
        -c "read -P $((i * 16)) $((i * 4))M 4M" "$(uri conc)" \
        > "$work/conc.$i.out" 2>&1 &
    client_pids+=($!)
done
bad=0
for pid in "${client_pids[@]}"; do
    wait "$pid" || bad=1
done
check "six qemu-io clients writing and reading at once" test $bad = 0
# clients killed in the middle of a large transfer
timeout -s KILL 0.3 nbdcopy "$(uri conc)" null: 2>/dev/null
timeout -s KILL 0.3 qemu-img convert -f raw -O raw "$(uri conc)" \
    "$work/killed.raw" 2>/dev/null
check "the server survives clients killed mid-transfer" kill -0 "$server_pid"
check "and serves the next one" \
    bash -c "nbdcopy '$(uri conc)' '$work/conc.out' &&
             cmp '$work/conc.raw' '$work/conc.out'"
stop_server

# ---- the server's life ----

truncate -s 1M "$work/life.raw"
start_server life "$qnbd" -f raw "$work/life.raw"
"$qnbd" -L -k "$work/life.sock" >/dev/null 2>&1
check "a --list client does not end a server without -t" \
    kill -0 "$server_pid"
nbdinfo --size "$(uri life)" >/dev/null
check "without -t the server exits when its client leaves" \
    wait_exit "$server_pid"
check "and removes its socket" test ! -e "$work/life.sock"

# -e 1: a second client is accepted only when the first has left
start_server one "$qnbd" -t -f raw "$work/life.raw"
check "-e 1 serves one client at a time" python3 - "$work/one.sock" <<'EOF'
import socket, sys
a = socket.socket(socket.AF_UNIX); a.connect(sys.argv[1])
assert len(a.recv(18)) == 18
b = socket.socket(socket.AF_UNIX); b.connect(sys.argv[1]); b.settimeout(1)
try:
    b.recv(18)
    sys.exit('second client greeted while the first is connected')
except socket.timeout:
    pass
a.close()
b.settimeout(5)
assert len(b.recv(18)) == 18, 'second client not served after the first'
EOF
stop_server

rm -f "$work/fork.pid" "$work/fork.sock"
"$qnbd" --fork --pid-file="$work/fork.pid" -k "$work/fork.sock" \
    "$work/life.raw" 2> "$work/fork.err"
rc=$?
pid=$(cat "$work/fork.pid" 2>/dev/null)
check "--fork returns 0 once the server listens, even after a warning" \
    test $rc = 0 -a -S "$work/fork.sock"
check "--pid-file names the running server" kill -0 "${pid:-0}"
truncate -s 1M "$work/fork-b.raw"
"$qnbd" --fork --pid-file="$work/fork.pid" -k "$work/fork-b.sock" -f raw \
    "$work/fork-b.raw" 2> "$work/fork-b.err"
rc=$?
check "a second server on a locked pid file exits 1 and says so" \
    bash -c "test $rc = 1 && grep -q 'Cannot lock pid file' '$work/fork-b.err' &&
             test \"\$(cat '$work/fork.pid')\" = '$pid'"
check "the forked server serves" \
    test "$(nbdinfo --size "$(uri fork)")" = 1048576
for i in $(seq 50); do
    kill -0 "${pid:-0}" 2>/dev/null || break
    sleep 0.1
done
# qemu-nbd 7.2 leaves its pid file behind (upstream's block-status-cache
# removes it after a SIGTERM and fails if the server raced it there)
check "the forked server exits after its client, leaving the pid file" \
    bash -c "! kill -0 ${pid:-0} 2>/dev/null && test -s '$work/fork.pid'"
"$qnbd" --fork -k "$work/fork2.sock" "$work/nonexistent" 2> "$work/fork2.err"
rc=$?
check "--fork with a bad image exits 1 and passes the error on" \
    bash -c "test $rc = 1 && grep -q 'Could not open' '$work/fork2.err'"

# a port that is free now (the kernel picks it)
port=$(python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$qnbd" -b 127.0.0.1 -p "$port" -f raw "$work/life.raw" 2>/dev/null &
tcp_pid=$!
pids+=("$tcp_pid")
for i in $(seq 50); do
    nbdinfo --size "nbd://127.0.0.1:$port" > "$work/tcp.out" 2>/dev/null &&
        break
    sleep 0.1
done
check "TCP: -b 127.0.0.1 -p PORT serves nbd://127.0.0.1:PORT" \
    test "$(cat "$work/tcp.out")" = 1048576
wait_exit "$tcp_pid"

# -s: writes go to a temporary overlay, the image is left as it was
qemu-io -f raw -c "write -P 0x42 0 1M" "$work/life.raw" >/dev/null
sum_before=$(md5sum < "$work/life.raw")
mkdir -p "$work/tmp"
TMPDIR=$work/tmp start_server snap "$qnbd" -s -t -f raw "$work/life.raw"
check "-s: a write through the export reads back" \
    quiet qemu-io -f raw -c "write -P 0x17 4k 8k" -c "read -P 0x17 4k 8k" \
    -c "read -P 0x42 16k 8k" "$(uri snap)"
check "-s: the temporary overlay is already unlinked" \
    test -z "$(ls -A "$work/tmp")"
stop_server
check "-s: the image itself is unchanged" \
    test "$(md5sum < "$work/life.raw")" = "$sum_before"

# -o: the export starts at OFFSET into the image
qemu-io -f raw -c "write -P 0x63 512k 512k" "$work/life.raw" >/dev/null
start_server off "$qnbd" -t -o 524288 -f raw "$work/life.raw"
check "-o OFFSET exposes the image from OFFSET on" \
    bash -c "test \"\$(nbdinfo --size '$(uri off)')\" = 524288 &&
             qemu-io -f raw -c 'read -P 0x63 0 512k' '$(uri off)' >/dev/null"
stop_server

# locks: like qemu-nbd, a writable export keeps other writers out
start_server lock "$qnbd" -t -f raw "$work/life.raw"
check "a writable export holds the image's write lock" \
    bash -c "! qemu-io -f raw -c 'write 0 512' '$work/life.raw' 2>&1 |
             grep -q wrote"
stop_server

summary
