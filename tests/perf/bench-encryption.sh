#!/usr/bin/env bash
# Encryption throughput, qblock against the real QEMU tools, same input,
# same machine, runs alternating between the two:
#  - convert -W of a raw image of random data into an encrypted qcow2
#    (encrypt.format=luks, aes-256-xts) and into a raw luks image;
#  - the qcow2 convert pinned to 1 and to 2 CPUs (taskset; neither tool
#    has a knob for its number of worker threads), with aes-256-xts and
#    with serpent-256-xts: AES-NI makes AES a small part of a convert's
#    CPU time, serpent makes the cipher the bulk of it, which is where the
#    worker threads' scaling shows;
#  - 64 KiB writes over an encrypted qcow2 at queue depth 1 (write) and 64
#    (64 aio_write, then aio_flush), cache=writeback, through qemu-io /
#    qblock-io, since qemu-img bench cannot take the secret (--object)
#    that the image needs.
#   tests/perf/bench-encryption.sh BUILD_DIR [SIZE_MIB]
#
# What is measured is the encryption, not the disk: the files live in
# /dev/shm (a tmpfs) when it has room for them, so that no run pays for
# the dirty pages of the one before; otherwise in $TMPDIR, with a sync
# (and, as root, the page cache dropped) before every run, which the
# output says.  The targets are created once (by qemu-img) and copied
# before each run, which converts into them with -n --target-image-opts:
# key derivation (PBKDF2 calibration) is not what is measured.  Each
# figure is the median of $RUNS runs (default 5): wall-clock seconds and
# CPU seconds (user + sys of the tool and its threads), the latter being
# what other load on the machine disturbs least.  Prints figures; never
# fails on them.
set -u
build=$(cd "${1:?usage: bench-encryption.sh BUILD_DIR [SIZE_MIB]}" && pwd)
size_mib=${2:-1024}
runs=${RUNS:-5}
QB_IMG=$build/qblock-img
QB_IO=$build/qblock-io
command -v qemu-img >/dev/null && command -v qemu-io >/dev/null || {
    echo "qemu-img/qemu-io are not installed; nothing to compare against"
    exit 77
}

# source, two templates, the target, the depth-test copies: 3 x size and
# some room for the luks headers
need_kib=$(((size_mib * 3 + 64) * 1024))
shm_kib=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
if [ -n "$shm_kib" ] && [ "$shm_kib" -ge "$need_kib" ]; then
    dir=$(mktemp -d /dev/shm/qblock-bench.XXXXXX)
    on_tmpfs=true
    echo "files in /dev/shm (tmpfs): the page cache's writeback is not timed"
else
    dir=$(mktemp -d "${TMPDIR:-/var/tmp}/qblock-bench.XXXXXX")
    on_tmpfs=false
    echo "/dev/shm has ${shm_kib:-no} KiB free, ${need_kib} KiB needed:" \
         "files in $(dirname "$dir"), synced before each run" \
         "$([ -w /proc/sys/vm/drop_caches ] && echo "and the cache dropped")"
fi
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
SEC="--object secret,id=sec0,data=benchmark-passphrase"
head -c "${size_mib}M" /dev/urandom > src.raw

# Outside tmpfs, the dirty pages of the last run are written back now,
# not during the next one.
settle() {
    $on_tmpfs && return
    sync
    [ -w /proc/sys/vm/drop_caches ] && echo 3 > /proc/sys/vm/drop_caches
}

# Runs a command once; prints "WALL CPU" (seconds) on success.  QEMU 7.2
# may fail to calibrate PBKDF2 ("Unable to get accurate CPU usage") on a
# loaded machine: that run is retried, it is not what is measured.
timed() {
    local out t
    for _ in 1 2 3 4 5 6 7 8; do
        t=$( { TIMEFORMAT='%R %U %S'; time "$@" > out.log 2>&1; } 2>&1 ) &&
            { awk '{ printf "%.2f %.2f\n", $1, $2 + $3 }' <<<"$t"; return 0; }
        out=$(cat out.log)
        grep -q "accurate CPU usage" <<<"$out" || break
    done
    echo "$out" >&2
    return 1
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

# Medians of $runs runs of qemu's and qblock's command, alternating so
# that both meet the same load: "QWALL QCPU BWALL BCPU" ("fail" for a
# tool whose run failed).  Each run starts from a fresh copy of $tmpl as
# out.img; $pin (taskset -c CPUS, or nothing) runs before the tool.
measure() {     # QEMU_TOOL QBLOCK_TOOL ARGS...
    local q=$1 b=$2 r
    local qw=() qc=() bw=() bc=()
    shift 2
    for _ in $(seq "$runs"); do
        cp "$tmpl" out.img
        settle
        r=$(timed $pin "$q" "$@") && { qw+=("${r% *}"); qc+=("${r#* }"); }
        cp "$tmpl" out.img
        settle
        r=$(timed $pin "$b" "$@") && { bw+=("${r% *}"); bc+=("${r#* }"); }
    done
    echo "$(med "${qw[@]}") $(med "${qc[@]}") $(med "${bw[@]}")" \
         "$(med "${bc[@]}")"
}
med() {     # VALUES...: their median, "fail" unless all $runs are there
    if [ $# -eq "$runs" ]; then printf '%s\n' "$@" | median; else echo fail; fi
}

ratio() { awk -v q="$1" -v b="$2" 'BEGIN { if (b > 0 && q != "fail") printf "%.2f", q / b; else print "-" }'; }
fmt='%-44s %7s %7s %7s %7s %7s %7s\n'
printf "$fmt" "case (${size_mib} MiB, median of $runs)" "qemu" "qblock" \
    "speedup" "qemu" "qblock" "speedup"
printf "$fmt" "" "wall s" "wall s" "wall" "CPU s" "CPU s" "CPU"
line() {    # LABEL QWALL QCPU BWALL BCPU
    printf "$fmt" "$1" "$2" "$4" "$(ratio "$2" "$4")" "$3" "$5" \
        "$(ratio "$3" "$5")"
}
pin=
row() {     # LABEL ARGS... of qemu-img / qblock-img
    local label=$1
    shift
    line "$label" $(measure qemu-img "$QB_IMG" "$@")
}

TQ="driver=qcow2,encrypt.key-secret=sec0,file.filename=out.img"
TL="driver=luks,key-secret=sec0,file.filename=out.img"
QCOW2_OPTS="encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time=10"
retry_create() { timed qemu-img create -q "$@" > /dev/null; }
retry_create -f qcow2 $SEC -o "$QCOW2_OPTS" tmpl.qcow2 "${size_mib}M"
retry_create -f qcow2 $SEC -o "$QCOW2_OPTS,encrypt.cipher-alg=serpent-256" \
    tmpl-serpent.qcow2 "${size_mib}M"
retry_create -f luks $SEC -o key-secret=sec0,iter-time=10 tmpl.luks \
    "${size_mib}M"

CONVERT=(convert -n -W $SEC --target-image-opts src.raw)
tmpl=tmpl.qcow2
row "convert -n -W raw -> qcow2 luks (aes)" "${CONVERT[@]}" "$TQ"
pinned() {  # the rows of one template on 1 and 2 CPUs
    local cpus n
    command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ] || {
        echo "  (no 1 vs 2 CPU rows: taskset or a second CPU is missing)"
        return
    }
    for cpus in 0 0,1; do
        n=$(tr ',' '\n' <<<"$cpus" | wc -l)
        pin="taskset -c $cpus"
        row "  $1 on $n CPU(s)" "${CONVERT[@]}" "$TQ"
    done
    pin=
}
pinned "the same"
tmpl=tmpl-serpent.qcow2
pinned "serpent-256 xts"
tmpl=tmpl.luks
row "convert -n -W raw -> luks (aes)" "${CONVERT[@]}" "$TL"

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
io_opts="driver=qcow2,encrypt.key-secret=sec0,file.filename=out.img"
io_qemu() { qemu-io $SEC -t writeback --image-opts "$io_opts" < cmds; }
io_qblock() { "$QB_IO" $SEC -t writeback --image-opts "$io_opts" < cmds; }
tmpl=tmpl.qcow2
for depth in 1 64; do
    writes "$depth" > cmds
    line "64k writes, queue depth $depth" $(measure io_qemu io_qblock)
done
