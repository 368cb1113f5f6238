#!/usr/bin/env bash
# Encryption throughput, qblock against the real QEMU tools, same input,
# same machine, runs alternating between the two:
#  - convert -W of a raw image of random data into an encrypted qcow2
#    (encrypt.format=luks, aes-256-xts) and into a raw luks image;
#  - the same qcow2 convert pinned to 1 and to 2 CPUs (taskset): how the
#    encryption spreads over worker threads;
#  - 64 KiB writes over an encrypted qcow2 at queue depth 1 (write) and 64
#    (64 aio_write, then aio_flush), cache=writeback, through qemu-io /
#    qblock-io, since qemu-img bench cannot take the secret (--object)
#    that the image needs.
#   tests/perf/bench-encryption.sh BUILD_DIR [SIZE_MIB]
# The targets are created once (by qemu-img) and copied before each run,
# which converts into them with -n --target-image-opts: key derivation
# (PBKDF2 calibration) is not what is measured.  Each figure is the best of $RUNS runs
# (default 1).  Prints figures; never fails on them.
set -u
build=$(cd "${1:?usage: bench-encryption.sh BUILD_DIR [SIZE_MIB]}" && pwd)
size_mib=${2:-1024}
runs=${RUNS:-1}
QB_IMG=$build/qblock-img
QB_IO=$build/qblock-io
command -v qemu-img >/dev/null && command -v qemu-io >/dev/null || {
    echo "qemu-img/qemu-io are not installed; nothing to compare against"
    exit 77
}
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/qblock-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
SEC="--object secret,id=sec0,data=benchmark-passphrase"
head -c "${size_mib}M" /dev/urandom > src.raw

# QEMU 7.2 may fail to calibrate PBKDF2 ("Unable to get accurate CPU
# usage") on a loaded machine: retry it, that is not what is measured.
retry() {
    local out
    for _ in 1 2 3 4 5 6 7 8; do
        out=$("$@" 2>&1) && return 0
        grep -q "accurate CPU usage" <<<"$out" || break
    done
    echo "$out" >&2
    return 1
}

now() { date +%s.%N; }

# best wall-clock seconds of $runs runs of a command (a failure: "fail"),
# each into a fresh copy of $tmpl as out.img
seconds() {
    local best= t0 t1 t
    for _ in $(seq "$runs"); do
        cp "$tmpl" out.img
        t0=$(now)
        retry "$@" || { echo fail; return; }
        t1=$(now)
        t=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
        if [ -z "$best" ] || awk -v t="$t" -v b="$best" 'BEGIN { exit !(t < b) }'; then
            best=$t
        fi
    done
    echo "$best"
}

ratio() { awk -v q="$1" -v b="$2" 'BEGIN { if (b > 0 && q != "fail") printf "%.2f", q / b; else print "-" }'; }
printf '%-48s %10s %10s %8s\n' "case (${size_mib} MiB)" "qemu s" "qblock s" "speed-up"
row() {     # LABEL ARGS... (qemu-img and qblock-img alternate per run)
    local label=$1 q b
    shift
    q=$(seconds qemu-img "$@")
    b=$(seconds "$QB_IMG" "$@")
    printf '%-48s %10s %10s %8s\n' "$label" "$q" "$b" "$(ratio "$q" "$b")"
}
QCOW2_OPTS="encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time=10"
retry qemu-img create -q -f qcow2 $SEC -o "$QCOW2_OPTS" tmpl.qcow2 \
    "${size_mib}M"
retry qemu-img create -q -f luks $SEC -o key-secret=sec0,iter-time=10 \
    tmpl.luks "${size_mib}M"
TQ="driver=qcow2,encrypt.key-secret=sec0,file.filename=out.img"
TL="driver=luks,key-secret=sec0,file.filename=out.img"
tmpl=tmpl.qcow2
row "convert -n -W raw -> qcow2 luks" convert -n -W $SEC \
    --target-image-opts src.raw "$TQ"
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    for cpus in 0 0,1; do
        n=$(tr ',' '\n' <<<"$cpus" | wc -l)
        q=$(seconds taskset -c "$cpus" qemu-img convert -n -W $SEC \
            --target-image-opts src.raw "$TQ")
        b=$(seconds taskset -c "$cpus" "$QB_IMG" convert -n -W $SEC \
            --target-image-opts src.raw "$TQ")
        printf '%-48s %10s %10s %8s\n' "  the same on $n CPU(s)" \
            "$q" "$b" "$(ratio "$q" "$b")"
    done
fi
tmpl=tmpl.luks
row "convert -n -W raw -> luks" convert -n -W $SEC \
    --target-image-opts src.raw "$TL"

# 64 KiB writes over the whole disk of an encrypted qcow2 made by qemu-img
writes() {  # DEPTH: qemu-io commands on stdin
    local depth=$1 n=$((size_mib * 16)) i
    for ((i = 0; i < n; i++)); do
        if [ "$depth" -eq 1 ]; then
            echo "write -q -P 0x5a $((i * 65536)) 64k"
        else
            echo "aio_write -q -P 0x5a $((i * 65536)) 64k"
            [ $(((i + 1) % depth)) -eq 0 ] && echo "aio_flush"
        fi
    done
    echo "aio_flush"
}
io_row() {  # DEPTH
    local depth=$1 q b t0
    writes "$depth" > cmds
    io_time() {
        cp tmpl.qcow2 w.qcow2
        t0=$(now)
        "$1" $SEC -t writeback --image-opts \
            "driver=qcow2,encrypt.key-secret=sec0,file.filename=w.qcow2" \
            < cmds > /dev/null 2>&1
        awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'
    }
    q=$(io_time qemu-io)
    b=$(io_time "$QB_IO")
    printf '%-48s %10s %10s %8s\n' "64k writes, queue depth $depth" \
        "$q" "$b" "$(ratio "$q" "$b")"
}
io_row 1
io_row 64
