#!/usr/bin/env bash
# The NBD client (the nbd driver) against real servers: qemu-nbd and
# qblock-nbd.  For each server, qblock-img info/map/convert/compare and
# qblock-io reads, writes and errors must give the output and data that
# qemu-img and qemu-io give against the same server (program names and
# timings aside).  Then the faults: a server that dies with a request in
# flight, one that sends garbage, and a hostile server sending every kind
# of malformed reply in turn (nbd-client-badserver.py) must each end in a
# clear error naming the fault, never a hang.
#
#   tests/interop/nbd-client.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed,
# N skipped"; exits 77 if the QEMU tools are not installed.
set -u
build=${1:?usage: nbd-client.sh BUILD_DIR}
source "$(dirname "$0")/nbd-lib.bash"

cd "$work" || exit 1

# The image every server exports a copy of: data, a zeroed range and
# holes, so that map and convert have something to skip.
qemu-img create -q -f qcow2 src.qcow2 4M
qemu-io -f qcow2 -c 'write -P 1 0 64k' -c 'write -P 2 1M 192k' \
    -c 'write -z 2M 64k' -c 'write -P 3 3M 4k' src.qcow2 >/dev/null

# norm: program names and timings out of a tool's output.
norm() {
    sed -e "s#$qimg#qemu-img#g" -e "s#$qio#qemu-io#g" \
        -e 's#qblock-img#qemu-img#g' -e 's#qblock-io#qemu-io#g' \
        -e '/ops; [0-9.]* sec/d'
}

# The same write sequence, through the client and on a local reference.
writes=(-c 'write -P 9 512k 64k' -c 'write -f -P 10 520k 4k'
        -c 'write -z 1M 64k' -c 'write -z -u 1088k 64k' -c 'flush'
        -c 'aio_write -P 11 3M 4k' -c 'aio_write -P 12 3076k 4k'
        -c 'aio_flush')

for server in qemu-nbd qblock-nbd; do
    prog=$server
    [ $server = qblock-nbd ] && prog=$qnbd
    cp src.qcow2 $server.qcow2
    cp src.qcow2 $server-ro.qcow2
    start_server $server "$prog" -t -x exp -f qcow2 $server.qcow2 || {
        fail "$server: start"; continue; }
    rw_pid=$server_pid
    u=$(uri $server exp)
    # a second server, read-only, for the refusals
    start_server $server-ro "$prog" -t -r -x ro -f qcow2 $server-ro.qcow2 || {
        fail "$server: start read-only"; continue; }
    ro=$(uri $server-ro ro)

    same_as_qemu "$server: info" qemu-img info "$u"
    same_as_qemu "$server: info json" qemu-img info --output=json -f raw "$u"
    same_as_qemu "$server: map" qemu-img map -f raw "$u"
    same_as_qemu "$server: map json" qemu-img map --output=json -f raw "$u"
    same_as_qemu "$server: compare equal" qemu-img compare -f raw -F qcow2 "$u" \
        src.qcow2
    same_as_qemu "$server: read patterns" qemu-io -f raw -r -c 'read -P 1 0 64k' \
        -c 'read -P 2 1M 192k' -c 'read -P 0 2M 64k' -c 'read -P 0 3M 1' \
        -c 'read -v 3M 64' "$u"
    same_as_qemu "$server: legacy name" qemu-io -f raw -r -c 'read -P 3 3M 4k' \
        "nbd:unix:$work/$server.sock:exportname=exp"
    same_as_qemu "$server: image-opts" qemu-io -r --image-opts -c 'read -P 2 1M 4k' \
        "driver=nbd,server.type=unix,server.path=$work/$server.sock,export=exp"
    same_as_qemu "$server: missing export" qemu-io -f raw -c 'read 0 4k' \
        "$(uri $server nope)"
    same_as_qemu "$server: read-only export" qemu-io -f raw -c 'write 0 4k' "$ro"
    same_as_qemu "$server: read past end" qemu-io -f raw -r -c 'read 4M 4k' "$u"

    # convert from the export: same data, and the holes skipped, so the
    # result maps like qemu-img's own copy
    rm -f ours.qcow2 theirs.qcow2
    if timeout 60 "$qimg" convert -f raw -O qcow2 "$u" ours.qcow2 &&
       qemu-img convert -f raw -O qcow2 "$u" theirs.qcow2 &&
       quiet qemu-img compare ours.qcow2 src.qcow2 &&
       [ "$(qemu-img map --output=json ours.qcow2 | sed 's/"offset": [0-9]*//')" = \
         "$(qemu-img map --output=json theirs.qcow2 | sed 's/"offset": [0-9]*//')" ]; then
        ok "$server: convert from export"
    else
        fail "$server: convert from export"
    fi

    # writes through our client equal qemu-io's on a local copy
    cp src.qcow2 ref.qcow2
    qemu-io -f qcow2 "${writes[@]}" ref.qcow2 >/dev/null
    got=$(timeout 60 "$qio" -f raw "${writes[@]}" "$u" 2>&1 | norm)
    if quiet qemu-img compare -f raw -F qcow2 "$u" ref.qcow2; then
        ok "$server: writes"
    else
        fail "$server: writes" "$got"
    fi

    # convert -n into the export, from an image with holes: the export
    # ends up equal to it
    if timeout 60 "$qimg" convert -n -f qcow2 -O raw src.qcow2 "$u" &&
       quiet qemu-img compare -f raw -F qcow2 "$u" src.qcow2; then
        ok "$server: convert -n into export"
    else
        fail "$server: convert -n into export"
    fi

    # convert without -n onto the export, and create on it: the export is
    # opened and checked as QEMU does for a protocol that cannot create;
    # one that would have to grow is refused with QEMU's message
    if timeout 60 "$qimg" convert -f qcow2 -O raw src.qcow2 "$u" &&
       quiet qemu-img compare -f raw -F qcow2 "$u" src.qcow2; then
        ok "$server: convert onto export"
    else
        fail "$server: convert onto export"
    fi
    same_as_qemu "$server: create that would grow the export" qemu-img \
        create -f raw "$u" 1G

    # the server goes away between two reads: the second fails with EIO,
    # and the tool ends
    timeout 20 "$qio" -f raw -r -c 'read 0 4k' -c 'sleep 1500' \
        -c 'read 0 4k' "$u" > dies.out 2>&1 &
    pid=$!
    wait_connected "$work/$server.sock"
    kill $rw_pid
    if wait_exit $pid && grep -q 'read failed: Input/output error' dies.out
    then
        ok "$server: server dies"
    else
        fail "$server: server dies" "$(cat dies.out)"
    fi
    stop_server
done

# A "server" that answers the handshake with garbage: a clear error.
py=$(command -v python3)
if [ -n "$py" ]; then
    "$py" - "$work/garbage.sock" <<'PYEOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
c, _ = s.accept()
c.sendall(b"this is no NBD server at all\r\n")
try:
    c.recv(100)
except OSError:
    pass
PYEOF
    pids+=($!)
    wait_socket "$work/garbage.sock" $!
    out=$(timeout 10 "$qimg" info "nbd+unix:///?socket=$work/garbage.sock" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && grep -q 'bad magic' <<<"$out"; then
        ok "garbage greeting"
    else
        fail "garbage greeting" "exit $rc" "$out"
    fi
else
    skip "garbage greeting" "python3 is not installed"
fi

# A hostile server (nbd-client-badserver.py) sends each malformed reply
# in turn, in the handshake or at the first request of its command; each
# must end in an error that names the fault once, with every request
# failing and the tool ending.  Reads: four in flight and one after, all
# failing with EIO.  A hang-up is named by the EIO alone, as QEMU does
# (its iotest 083 compares the output).
declare -A why=(
    [close]=""
    [magic]="reply with a bad magic"
    [cookie]="reply to a request that is not in flight"
    [structured]="structured reply that was not negotiated"
    [short]="read reply that leaves part of the range without data"
    [simple-data]="simple reply with data after structured replies"
    [data-to-flush]="data chunk in the reply to a request that is no read"
    [hole-size]="hole chunk of the wrong size"
    [data-size]="data chunk of the wrong size"
    [data-long]="data chunk longer than the read"
    [outside]="chunk outside the range that was read"
    [overlap]="chunks that overlap in a read"
    [error-size]="error chunk of the wrong size"
    [error-message]="error chunk whose message is longer than the chunk"
    [error-zero]="error chunk without an error"
    [huge-chunk]="chunk larger than any the protocol allows"
    [none-payload]="NBD_REPLY_TYPE_NONE with a payload or not final"
    [unknown-type]="chunk of an unknown type"
    [status-to-read]="block status chunk in the reply to another command"
    [status-size]="block status chunk of the wrong size"
    [status-context]="block status for a context that was not selected"
    [status-twice]="more than one block status chunk"
    [status-none]="block status at offset 0 without an extent"
    [hs-reply-magic]="option reply with the bad magic 0x1234"
    [hs-reply-option]="answered NBD_OPT_GO with a reply to"
    [hs-reply-long]="sent a reply of 1073741824 bytes to NBD_OPT_GO"
    [hs-no-size]="ended NBD_OPT_GO without sending the export's size"
    [hs-block-size]="impossible block sizes: minimum 3"
    [hs-info-size]="NBD_INFO_EXPORT of 10 bytes (expected 12)"
)
if [ -n "$py" ]; then
    "$py" "$here/nbd-client-badserver.py" --list > faults.txt
    while read -r fault cmd; do
        if [ -z "${why[$fault]+set}" ]; then
            fail "bad server: $fault" "no expected message in nbd-client.sh"
            continue
        fi
        sock=$work/bad-$fault.sock
        "$py" "$here/nbd-client-badserver.py" "$sock" $fault &
        pids+=($!)
        wait_socket "$sock" $!
        u="nbd+unix:///?socket=$sock"
        case $cmd in
        read)
            out=$(timeout 20 "$qio" -f raw -c 'aio_read 0 4k' \
                  -c 'aio_read 4k 4k' -c 'aio_read 8k 4k' \
                  -c 'aio_read 12k 4k' -c 'aio_flush' -c 'read 0 4k' \
                  "$u" 2>&1)
            rc=$? want_rc=1 want_eio=5 ;;
        flush)
            # qemu-io writes through: a flush follows the write
            out=$(timeout 20 "$qio" -f raw -c 'write 0 4k' -c 'read 0 4k' \
                  "$u" 2>&1)
            rc=$? want_rc=1 want_eio=2 ;;
        block-status)
            out=$(timeout 20 "$qimg" map -f raw "$u" 2>&1)
            rc=$? want_rc=1 want_eio=1 ;;
        handshake)
            out=$(timeout 20 "$qio" -f raw -c 'read 0 4k' "$u" 2>&1)
            rc=$? want_rc=1 want_eio=0 ;;
        esac
        eio=$(grep -c 'Input/output error' <<<"$out")
        if [ $fault = close ]; then
            named=$((1 - $(grep -c 'NBD server' <<<"$out")))
        else
            named=$(grep -cF "${why[$fault]}" <<<"$out")
        fi
        if [ $rc -eq $want_rc ] && [ "$eio" -eq $want_eio ] &&
           [ "$named" -eq 1 ]; then
            ok "bad server: $fault"
        else
            fail "bad server: $fault" "exit $rc, $eio errors" "$out"
        fi
    done < faults.txt
fi

summary
