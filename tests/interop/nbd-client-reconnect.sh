#!/usr/bin/env bash
# The NBD client's options beyond the connection itself, each against
# qemu-nbd and qblock-nbd with qemu-img/qemu-io as the oracle (same
# output, same data):
#
#  - reconnect-delay: a server that goes away and comes back within the
#    delay; requests issued meanwhile are held and then done; one that
#    stays away fails them after the delay, not before;
#  - open-timeout: a server that starts after the client; one that never
#    does fails the open after the timeout, with QEMU's message;
#  - x-dirty-bitmap=qemu:allocation-depth (qemu-nbd -A, qblock-nbd -A)
#    and x-dirty-bitmap=qemu:dirty-bitmap:NAME (qemu-nbd -B, on an image
#    whose bitmap the real qemu-img made): qemu-img map output, and the
#    message for a context the server does not offer;
#  - resize: shrinking within the export, and the refusal to grow it.
#
#   tests/interop/nbd-client-reconnect.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed,
# N skipped"; exits 77 if the QEMU tools are not installed.
set -u
build=${1:?usage: nbd-client-reconnect.sh BUILD_DIR}
source "$(dirname "$0")/nbd-lib.bash"

cd "$work" || exit 1

norm() {
    sed -e "s#$qimg#qemu-img#g" -e "s#$qio#qemu-io#g" \
        -e 's#qblock-img#qemu-img#g' -e 's#qblock-io#qemu-io#g' \
        -e "s#$work#WORK#g" -e '/ ops; /d'
}

# The seconds since the epoch, with fractions.
now() { date +%s.%N; }
# elapsed_in START MIN MAX: whether now - START lies in [MIN, MAX].
elapsed_in() {
    awk -v s="$1" -v e="$(now)" -v lo="$2" -v hi="$3" \
        'BEGIN { d = e - s; exit !(d >= lo && d <= hi) }'
}

qemu-img create -q -f qcow2 src.qcow2 4M
qemu-io -f qcow2 -c 'write -P 1 0 1M' src.qcow2 >/dev/null

for server in qemu-nbd qblock-nbd; do
    prog=$server
    [ $server = qblock-nbd ] && prog=$qnbd
    opts="driver=nbd,server.type=unix,server.path=$work/rc.sock"

    # reconnect-delay: the server dies while the client sleeps and comes
    # back 2 s later; the write issued in between waits for it.  Each
    # client runs the same scenario, ours and qemu-io, on a fresh copy.
    for tool in qemu-io "$qio"; do
        cp src.qcow2 rc.qcow2
        start_server rc "$prog" -t -f qcow2 rc.qcow2 || {
            fail "$server: start"; continue 2; }
        timeout 30 "$tool" --image-opts -c 'read -P 1 0 64k' \
            -c 'sleep 1500' -c 'write -P 5 0 64k' -c 'read -P 5 0 64k' \
            "$opts,reconnect-delay=10" > "rc-$(basename "$tool").out" 2>&1 &
        client=$!
        wait_connected "$work/rc.sock"
        stop_server
        sleep 2
        start_server rc "$prog" -t -f qcow2 rc.qcow2
        wait $client
        echo "exit $?" >> "rc-$(basename "$tool").out"
        stop_server
        qemu-io -f qcow2 -c 'read -P 5 0 64k' rc.qcow2 >/dev/null 2>&1 ||
            echo "data not written" >> "rc-$(basename "$tool").out"
    done
    want=$(norm < rc-qemu-io.out)
    got=$(norm < rc-qblock-io.out)
    if [ "$want" = "$got" ] && grep -q '^exit 0' <<<"$got"; then
        ok "$server: reconnect-delay, server back in time"
    else
        fail "$server: reconnect-delay, server back in time" \
            "$(diff <(echo "$want") <(echo "$got"))"
    fi

    # reconnect-delay=3 with the server gone for good: the write, issued
    # within the delay, fails with EIO once it is over (not at once, not
    # much later).  The client sleeps 1.5 s so that the server is surely
    # gone before it writes, even on a loaded machine.
    cp src.qcow2 rc.qcow2
    start_server rc "$prog" -t -f qcow2 rc.qcow2
    timeout 30 "$qio" --image-opts -c 'read -P 1 0 64k' -c 'sleep 1500' \
        -c 'write -P 5 0 64k' "$opts,reconnect-delay=3" > gone.out 2>&1 &
    client=$!
    wait_connected "$work/rc.sock"
    stop_server
    start=$(now)
    wait $client
    rc=$?
    if [ $rc -eq 1 ] && elapsed_in "$start" 2.9 6 &&
       grep -q '^write failed: Input/output error$' gone.out; then
        ok "$server: reconnect-delay, server gone"
    else
        fail "$server: reconnect-delay, server gone" "exit $rc" \
            "$(cat gone.out)"
    fi

    # open-timeout: the server starts 1 s after the client
    cp src.qcow2 ot.qcow2
    rm -f "$work/ot.sock"
    timeout 30 "$qio" --image-opts -c 'read -P 1 0 64k' \
        "driver=nbd,server.type=unix,server.path=$work/ot.sock,open-timeout=5" \
        > ot.out 2>&1 &
    client=$!
    sleep 1
    start_server ot "$prog" -t -f qcow2 ot.qcow2
    wait $client
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^read 65536/65536 bytes' ot.out; then
        ok "$server: open-timeout, server starts late"
    else
        fail "$server: open-timeout, server starts late" "exit $rc" \
            "$(cat ot.out)"
    fi
    stop_server

    # x-dirty-bitmap=qemu:allocation-depth: a backing chain, served with
    # -A, mapped through the context as qemu-img maps it
    qemu-img create -q -f qcow2 base.qcow2 4M
    qemu-io -f qcow2 -c 'write 0 2M' base.qcow2 >/dev/null
    qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2 4M
    qemu-io -f qcow2 -c 'write 1M 2M' top.qcow2 >/dev/null
    start_server ad "$prog" -t -r -A -f qcow2 top.qcow2
    ad="driver=nbd,server.type=unix,server.path=$work/ad.sock"
    same_as_qemu "$server: x-dirty-bitmap=qemu:allocation-depth" qemu-img map \
        --output=json --image-opts "$ad,x-dirty-bitmap=qemu:allocation-depth"
    # (QEMU 7.2 says only "Could not open image: Invalid argument")
    out=$(timeout 20 "$qimg" map --output=json --image-opts \
          "$ad,x-dirty-bitmap=qemu:dirty-bitmap:b0" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && grep -q 'requested x-dirty-bitmap qemu:dirty-bitmap:b0 not found' <<<"$out"; then
        ok "$server: x-dirty-bitmap not offered"
    else
        fail "$server: x-dirty-bitmap not offered" "exit $rc" "$out"
    fi
    stop_server

    # resize within the export, and beyond it
    cp src.qcow2 rs.qcow2
    start_server rs "$prog" -t -f qcow2 rs.qcow2
    same_as_qemu "$server: resize --shrink within the export" qemu-img resize \
        --shrink -f raw "$(uri rs)" 2M
    same_as_qemu "$server: resize beyond the export" qemu-img resize -f raw \
        "$(uri rs)" 8M
    stop_server
done

# open-timeout with no server at all: QEMU's message, after the timeout
rm -f "$work/none.sock"
start=$(now)
same_as_qemu "open-timeout=1, no server" qemu-io --image-opts -c 'read 0 4k' \
    "driver=nbd,server.type=unix,server.path=$work/none.sock,open-timeout=1"
start=$(now)
timeout 10 "$qio" --image-opts -c 'read 0 4k' \
    "driver=nbd,server.type=unix,server.path=$work/none.sock,open-timeout=1" \
    >/dev/null 2>&1
if elapsed_in "$start" 0.9 2.5; then
    ok "open-timeout=1 waits one second"
else
    fail "open-timeout=1 waits one second" \
        "$(awk -v s="$start" -v e="$(now)" 'BEGIN { print e - s " s" }')"
fi

# x-dirty-bitmap=qemu:dirty-bitmap:NAME: a bitmap the real qemu-img added,
# dirtied by the real qemu-io, served by the real qemu-nbd -B (qblock-nbd
# has no -B yet)
qemu-img create -q -f qcow2 bm.qcow2 4M
qemu-img bitmap --add bm.qcow2 b0
qemu-io -f qcow2 -c 'write 1M 64k' -c 'write 3M 1M' bm.qcow2 >/dev/null
start_server bm qemu-nbd -t -r -B b0 -f qcow2 bm.qcow2
same_as_qemu "qemu-nbd -B: x-dirty-bitmap=qemu:dirty-bitmap:b0" qemu-img map \
    --output=json --image-opts \
    "driver=nbd,server.type=unix,server.path=$work/bm.sock,x-dirty-bitmap=qemu:dirty-bitmap:b0"
stop_server

summary
