#!/usr/bin/env bash
# The NBD client against nbdkit (Debian's nbdkit): the memory and file
# plugins, and the error and delay filters for faults.  Every case runs
# the same command through qemu-img/qemu-io (the oracle) and through
# qblock-img/qblock-io, each against a fresh server, and wants the same
# output, exit status and data.
#
#   tests/interop/nbd-client-nbdkit.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed,
# N skipped"; exits 77 if nbdkit or the QEMU tools are not installed.
set -u
build=${1:?usage: nbd-client-nbdkit.sh BUILD_DIR}
source "$(dirname "$0")/nbd-lib.bash"
if ! command -v nbdkit >/dev/null 2>&1; then
    echo "skip: nbdkit is not installed (Debian package nbdkit)"
    exit 77
fi

cd "$work" || exit 1

norm() {
    sed -e "s#$qimg#qemu-img#g" -e "s#$qio#qemu-io#g" \
        -e 's#qblock-img#qemu-img#g' -e 's#qblock-io#qemu-io#g' \
        -e "s#$work#WORK#g" -e '/ ops; /d'
}

# start_nbdkit NAME ARGS...: nbdkit in the foreground on $work/NAME.sock.
start_nbdkit() {
    local name=$1
    shift
    rm -f "$work/$name.sock"
    nbdkit -f -U "$work/$name.sock" "$@" 2> "$work/$name.err" &
    server_pid=$!
    pids+=("$server_pid")
    wait_socket "$work/$name.sock" "$server_pid"
}

# prepare: run before each server starts (fresh files for the file
# plugin); a no-op unless set.
prepare() { :; }

# fresh NAME "NBDKIT ARGS" TOOL ARGS...: for each of the oracle and ours,
# prepares, starts nbdkit with NBDKIT ARGS, runs TOOL ARGS (with @URI@ as
# the export) and then $after (a command whose output joins the tool's:
# the data left behind), and compares the outputs, passed through
# $order (sort, where the order of completions is the server's).
after=true
order=cat
fresh() {
    local name=$1 srv=$2 tool=$3
    shift 3
    local out=() t args=() a
    for t in "$tool" ours; do
        [ "$t" = ours ] && case $tool in
            qemu-img) t=$qimg ;;
            qemu-io) t=$qio ;;
        esac
        prepare
        # shellcheck disable=SC2086
        start_nbdkit k $srv || { fail "$name: nbdkit did not start" \
            "$(cat "$work/k.err")"; return; }
        args=()
        for a in "$@"; do args+=("${a//@URI@/$(uri k)}"); done
        out+=("$(timeout 60 "$t" "${args[@]}" 2>&1 | norm | $order
                 echo "exit ${PIPESTATUS[0]}"; $after 2>&1)")
        stop_server
    done
    if [ "${out[0]}" = "${out[1]}" ]; then
        ok "$name"
    else
        fail "$name" "$(diff <(echo "${out[0]}") <(echo "${out[1]}"))"
    fi
}

# The I/O sequence both clients run: writes, zeroes, trim, FUA, flush,
# reads checking what they left, requests in flight.
io=(-f raw -c 'write -P 1 0 64k' -c 'write -z 1M 64k' -c 'discard 1088k 64k'
    -c 'write -f -P 2 2M 4k' -c 'flush' -c 'aio_write -P 3 3M 4k'
    -c 'aio_write -P 4 3076k 4k' -c 'aio_flush' -c 'read -P 1 0 64k'
    -c 'read -P 0 1M 128k' -c 'read -P 2 2M 4k' -c 'read -P 4 3076k 4k'
    -c 'read -P 0 4M 4k')

# --- memory plugin -------------------------------------------------------

# (the two aio_writes complete in the order nbdkit's threads finish them)
order=sort
fresh "memory: I/O" "memory size=8M" qemu-io "${io[@]}" @URI@
after="qemu-img map --output=json -f raw $(uri k)"
fresh "memory: map after writes" "memory size=8M" qemu-io "${io[@]}" @URI@
after=true
order=cat
fresh "memory: info" "memory size=8M" qemu-img info @URI@
fresh "memory: read past the end" "memory size=8M" qemu-io -f raw \
    -c 'read 8M 4k' @URI@
fresh "memory: read-only" "-r memory size=8M" qemu-io -f raw \
    -c 'write 0 4k' @URI@

# --- file plugin ---------------------------------------------------------

# A sparse raw file with data, zeroes and holes, copied fresh for each run.
qemu-img create -q -f raw src.raw 4M
qemu-io -f raw -c 'write -P 1 0 64k' -c 'write -P 2 1M 192k' \
    -c 'write -P 3 3M 4k' src.raw >/dev/null
prepare() { cp --sparse=always src.raw exp.raw; rm -f out.qcow2; }
file="file file=$work/exp.raw"

fresh "file: info" "$file" qemu-img info -f raw @URI@
fresh "file: map" "$file" qemu-img map --output=json -f raw @URI@
fresh "file: compare" "$file" qemu-img compare -f raw -F raw @URI@ \
    "$work/src.raw"
after="qemu-img map --output=json $work/out.qcow2"
fresh "file: convert from the export" "$file" qemu-img convert -f raw \
    -O qcow2 @URI@ "$work/out.qcow2"
after="qemu-img compare -f raw -F raw $work/exp.raw $work/src2.raw"
qemu-img create -q -f raw src2.raw 4M
qemu-io -f raw -c 'write -P 7 512k 1M' src2.raw >/dev/null
fresh "file: convert -n into the export" "$file" qemu-img convert -n \
    -f raw -O raw "$work/src2.raw" @URI@
after="cmp $work/exp.raw $work/ref.raw"
cp --sparse=always src.raw ref.raw
qemu-io "${io[@]}" ref.raw >/dev/null 2>&1
order=sort
fresh "file: I/O, data as on a local copy" "$file" qemu-io "${io[@]}" @URI@
order=cat
after=true
prepare() { :; }

# --- error filter: the server's errors reach the caller as QEMU's -------

fresh "error: reads fail with EIO" \
    "--filter=error memory size=4M error-pread=EIO error-pread-rate=100%" \
    qemu-io -f raw -c 'write -P 1 0 4k' -c 'read 0 4k' -c 'read -P 1 0 4k' \
    @URI@
fresh "error: writes fail with ENOSPC" \
    "--filter=error memory size=4M error-pwrite=ENOSPC error-pwrite-rate=100%" \
    qemu-io -f raw -c 'write 0 4k' -c 'aio_write 4k 4k' -c 'aio_flush' \
    -c 'read -P 0 0 8k' @URI@
fresh "error: zeroes and trim fail with EPERM" \
    "--filter=error memory size=4M error-zero=EPERM error-zero-rate=100% error-trim=EPERM error-trim-rate=100%" \
    qemu-io -f raw -c 'write -z 0 64k' -c 'discard 0 64k' @URI@
fresh "error: block status fails" \
    "--filter=error memory size=4M error-extents=EIO error-extents-rate=100%" \
    qemu-img map --output=json -f raw @URI@
fresh "error: convert from a failing export" \
    "--filter=error memory size=4M error-pread=EIO error-pread-rate=100%" \
    qemu-img convert -f raw -O raw @URI@ "$work/failed.raw"

# --- delay filter: requests in flight overlap --------------------------

order=sort
fresh "delay: aio reads of a slow server" \
    "--filter=delay memory size=4M rdelay=300ms" \
    qemu-io -f raw -c 'aio_read 0 4k' -c 'aio_read 4k 4k' \
    -c 'aio_read 8k 4k' -c 'aio_read 12k 4k' -c 'aio_read 16k 4k' \
    -c 'aio_read 20k 4k' -c 'aio_read 24k 4k' -c 'aio_read 28k 4k' \
    -c 'aio_flush' @URI@
order=cat
# eight reads of 300 ms each, in flight at once: about 0.3 s, not 2.4 s
start_nbdkit k --filter=delay memory size=4M rdelay=300ms
start=$(date +%s%N)
timeout 30 "$qio" -f raw -c 'aio_read 0 4k' -c 'aio_read 4k 4k' \
    -c 'aio_read 8k 4k' -c 'aio_read 12k 4k' -c 'aio_read 16k 4k' \
    -c 'aio_read 20k 4k' -c 'aio_read 24k 4k' -c 'aio_read 28k 4k' \
    -c 'aio_flush' "$(uri k)" >/dev/null 2>&1
ms=$(( ($(date +%s%N) - start) / 1000000 ))
stop_server
if [ $ms -lt 1500 ]; then
    ok "delay: eight slow reads overlap (${ms} ms)"
else
    fail "delay: eight slow reads overlap" "${ms} ms (more than 1500)"
fi
fresh "delay: convert from a slow export" \
    "--filter=delay memory size=4M rdelay=10ms" \
    qemu-img convert -f raw -O raw @URI@ "$work/slow.raw"

summary
