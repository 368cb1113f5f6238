#!/usr/bin/env bash
# Persistent dirty bitmaps against the real QEMU tools, both ways.
#
#   tests/interop/bitmaps-interop.sh BUILD_DIR
#
# - qblock-img bitmap prints and exits as qemu-img bitmap for a matrix of
#   command lines, good and bad, and leaves the same bitmaps (info);
# - bitmaps written by qemu-img/qemu-io: qblock-img info (human, json),
#   measure and check print what qemu-img prints, and qblock-nbd -B
#   exports the same extents as qemu-nbd -B (nbdinfo --map, and the real
#   qemu-img map with x-dirty-bitmap);
# - bitmaps written by qblock-img/qblock-io: qemu-img check finds no
#   error, qemu-img info agrees, qemu-nbd -B exports what qblock-nbd -B
#   does, and qemu-img bitmap --merge works on them;
# - an image closed uncleanly (qemu-io/qblock-io abort) after an
#   unflushed write has in-use bitmaps for both, and convert --bitmaps
#   (--skip-broken-bitmaps) does the same with both (after a flush
#   qblock's are clean: bitmaps-checkpoint.sh);
# - reopened read-write and written the bitmaps are in use on disk,
#   reopened read-only they are stored, as with qemu-io;
# - convert --bitmaps by qblock-img gives an image qemu-img checks clean,
#   whose bitmaps export the same extents as the source's;
# - the header extensions come in QEMU's order.
# Prints "ok NAME" / "FAIL NAME", ends with "N passed, N failed"; exits 77
# without qemu-img, qemu-io, qemu-nbd or nbdinfo.
set -u

build=$(cd "${1:?usage: bitmaps-interop.sh BUILD_DIR}" && pwd)
QB_IMG=$build/qblock-img
QB_IO=$build/qblock-io
QB_NBD=$build/qblock-nbd
for t in qemu-img qemu-io qemu-nbd nbdinfo; do
    if ! command -v "$t" > /dev/null; then
        echo "skipped: $t is not installed (qemu-utils, libnbd-bin)"
        exit 77
    fi
done
Q_IMG=$(command -v qemu-img) Q_IO=$(command -v qemu-io)
Q_NBD=$(command -v qemu-nbd)
work=$(mktemp -d)
server_pid=
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' \
    EXIT
cd "$work" || exit 1
pass=0 fail=0

check_eq() {    # NAME EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then
        echo "ok $1"
        pass=$((pass + 1))
    else
        echo "FAIL $1"
        diff <(echo "$2") <(echo "$3") | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}

# Program names, node names and paths differ; the rest must not.
norm() {
    sed -e 's/qblock-img/PROG/g' -e 's/qemu-img/PROG/g' \
        -e 's/qblock-nbd/NBD/g' -e 's/qemu-nbd/NBD/g' \
        -e "s#$work/##g" -e 's/#block[0-9]*/#blockN/g'
}

# serve TOOL IMG BITMAP...: starts TOOL read-only on a socket with -B each
serve() {
    local tool=$1 img=$2 args=()
    shift 2
    for b in "$@"; do args+=(-B "$b"); done
    rm -f "$work/nbd.sock"
    "$tool" -r -t -f qcow2 -k "$work/nbd.sock" "${args[@]}" "$img" \
        > "$work/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do
        [ -S "$work/nbd.sock" ] && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.05
    done
    cat "$work/server.log"
    return 1
}

unserve() {
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=
}

# export_map TOOL IMG BITMAP: nbdinfo's map of qemu:dirty-bitmap:BITMAP
export_map() {
    serve "$1" "$2" "$3" || { echo "no server"; return; }
    nbdinfo --map="qemu:dirty-bitmap:$3" "nbd+unix:///?socket=$work/nbd.sock"
    unserve
}

# qemu_map TOOL IMG BITMAP: the real qemu-img map through x-dirty-bitmap
qemu_map() {
    serve "$1" "$2" "$3" || { echo "no server"; return; }
    "$Q_IMG" map --output=json --image-opts \
        "driver=nbd,server.type=unix,server.path=$work/nbd.sock,x-dirty-bitmap=qemu:dirty-bitmap:$3"
    unserve
}

info_bitmaps() {    # IMG-TOOL IMG
    "$1" info "$2" | sed -n '/bitmaps:/,/refcount bits/p'
}

# --- qblock-img bitmap and qemu-img bitmap: command lines ---
lines=(
    "" "--add t.qcow2" "--add t.qcow2 b0" "--add t.qcow2 b0"
    "-g 256 --add t.qcow2 b1" "-g 3000 --add t.qcow2 b1"
    "-g 4G --add t.qcow2 b1" "-g 1k t.qcow2 b1" "-b x t.qcow2 b1"
    "--remove t.qcow2 nope" "--clear t.qcow2 nope"
    "--merge nope t.qcow2 b0" "--add -f raw r.raw b0"
    "--enable --disable t.qcow2 b0" "--merge b0 -b r.raw -F raw t.qcow2 b0"
    "--add t.qcow2 b0 extra" "-g x --add t.qcow2 b7"
    "--add -b x t.qcow2 b1" "--add -F raw t.qcow2 b1"
    "--merge b0 -g 1k t.qcow2 b1" "-g 2G --add t.qcow2 b2"
    "--remove t.qcow2 b2" "-g 0 --add t.qcow2 b2"
    "--add --image-opts driver=qcow2,file.filename=t.qcow2 b5"
    "--enable --merge b0 --add t.qcow2 order" "--add --merge b0 t.qcow2 m"
    "--add -g 1G t.qcow2 big" "--add -F qcow2 -b t.qcow2 --merge m t.qcow2 x"
    "--add t.qcow2 $(printf 'n%.0s' $(seq 1024))"
    "--remove --add t.qcow2 b2"
)
cmdline_run() {    # IMG-TOOL
    rm -f t.qcow2 r.raw
    "$1" create -q -f qcow2 t.qcow2 10M
    "$1" create -q -f raw r.raw 10M
    for l in "${lines[@]}"; do
        # shellcheck disable=SC2086
        "$1" bitmap $l 2>&1
        echo "rc=$?"
    done
    "$1" info t.qcow2 | sed -n '/bitmaps:/,$p'
    "$1" check t.qcow2 2>&1
}
check_eq "bitmap command lines, outputs and the bitmaps left" \
    "$(cmdline_run "$Q_IMG" | norm)" "$(cmdline_run "$QB_IMG" | norm)"

# --- bitmaps written by QEMU, read by qblock ---
"$Q_IMG" create -q -f qcow2 q.qcow2 64M
"$Q_IMG" bitmap --add q.qcow2 all
"$Q_IO" -c "write 1M 64k" -c "write 10M 1M" -c "write -z 30M 512" \
    q.qcow2 > /dev/null
"$Q_IMG" bitmap --add -g 512k q.qcow2 coarse
"$Q_IMG" bitmap --add -g 4k --disable q.qcow2 frozen
"$Q_IO" -c "write 20M 4k" -c "discard 10M 64k" q.qcow2 > /dev/null
"$Q_IMG" bitmap --merge coarse q.qcow2 frozen
for fmt in human json; do
    check_eq "info --output=$fmt of qemu-img's bitmaps" \
        "$("$Q_IMG" info --output=$fmt q.qcow2 | norm)" \
        "$("$QB_IMG" info --output=$fmt q.qcow2 | norm)"
done
for o in "" "-o cluster_size=4k" "-o compat=0.10"; do
    # shellcheck disable=SC2086
    check_eq "measure $o of qemu-img's bitmaps" \
        "$("$Q_IMG" measure -O qcow2 $o q.qcow2)" \
        "$("$QB_IMG" measure -O qcow2 $o q.qcow2)"
done
check_eq "check of qemu-img's bitmaps" \
    "$("$Q_IMG" check q.qcow2 2>&1)" "$("$QB_IMG" check q.qcow2 2>&1)"
for b in all coarse frozen; do
    check_eq "qblock-nbd -B $b exports what qemu-nbd -B $b does" \
        "$(export_map "$Q_NBD" q.qcow2 $b)" \
        "$(export_map "$QB_NBD" q.qcow2 $b)"
done
check_eq "qemu-img map x-dirty-bitmap through qblock-nbd" \
    "$(qemu_map "$Q_NBD" q.qcow2 coarse)" \
    "$(qemu_map "$QB_NBD" q.qcow2 coarse)"

# --- bitmaps written by qblock, read by QEMU ---
"$QB_IMG" create -q -f qcow2 b.qcow2 64M
"$QB_IMG" bitmap --add b.qcow2 all
"$QB_IO" -c "write 1M 64k" -c "write 10M 1M" -c "write -z 30M 512" \
    b.qcow2 > /dev/null
"$QB_IMG" bitmap --add -g 512k b.qcow2 coarse
"$QB_IMG" bitmap --add -g 4k --disable b.qcow2 frozen
"$QB_IO" -c "write 20M 4k" -c "discard 10M 64k" b.qcow2 > /dev/null
"$QB_IMG" bitmap --merge coarse b.qcow2 frozen
check_eq "qemu-img check of qblock's bitmaps" \
    "No errors were found on the image." \
    "$("$Q_IMG" check b.qcow2 2>&1 | head -n 1)"
check_eq "info of qblock's bitmaps as of qemu-img's" \
    "$(info_bitmaps "$Q_IMG" q.qcow2)" "$(info_bitmaps "$Q_IMG" b.qcow2)"
for b in all coarse frozen; do
    check_eq "qemu-nbd -B $b of qblock's image exports the same extents" \
        "$(export_map "$Q_NBD" q.qcow2 $b)" \
        "$(export_map "$Q_NBD" b.qcow2 $b)"
done
"$Q_IMG" bitmap --add --merge all --merge coarse b.qcow2 merged
check_eq "qemu-img bitmap --merge of qblock's bitmaps, checked clean" \
    "No errors were found on the image." \
    "$("$Q_IMG" check b.qcow2 2>&1 | head -n 1)"
check_eq "qblock-img reads the bitmap qemu-img merged" \
    "$(export_map "$Q_NBD" b.qcow2 merged)" \
    "$(export_map "$QB_NBD" b.qcow2 merged)"

# --- uncleanly closed, and convert --bitmaps ---
unclean_run() {    # IMG-TOOL IO-TOOL
    rm -f u.qcow2 u2.qcow2 u3.qcow2
    "$1" create -q -f qcow2 u.qcow2 16M
    "$1" bitmap --add u.qcow2 b0
    "$1" bitmap --add u.qcow2 b1
    # writeback: no flush, whose checkpoint would leave qblock's clean
    ("$2" -t writeback -c "write 0 64k" -c abort u.qcow2) > /dev/null 2>&1
    "$1" bitmap --add u.qcow2 b2
    "$1" bitmap --remove u.qcow2 b1
    info_bitmaps "$1" u.qcow2
    "$1" convert --bitmaps -O qcow2 u.qcow2 u2.qcow2 2>&1
    echo "rc=$?"
    "$1" convert --bitmaps --skip-broken-bitmaps -O qcow2 u.qcow2 u3.qcow2 \
        2>&1
    echo "rc=$?"
    info_bitmaps "$1" u3.qcow2
    "$1" convert --skip-broken-bitmaps -O qcow2 u.qcow2 u2.qcow2 2>&1
    "$1" convert --bitmaps -O raw u3.qcow2 u2.raw 2>&1
    "$1" convert --bitmaps -O qcow2 u.qcow2 u.qcow2 u2.qcow2 2>&1
    "$1" convert --bitmaps -O qcow2 u2.raw u2.qcow2 2>&1
    "$Q_IMG" check u.qcow2 2>&1 | head -n 1
}
check_eq "unclean close: in-use bitmaps, convert --bitmaps" \
    "$(unclean_run "$Q_IMG" "$Q_IO" | norm)" \
    "$(unclean_run "$QB_IMG" "$QB_IO" | norm)"

# --- reopen: read-write and a write mark them in use, read-only stores
# them ---
reopen_run() {    # IMG-TOOL IO-TOOL
    rm -f r.qcow2 r2.qcow2
    "$1" create -q -f qcow2 r.qcow2 16M
    "$1" bitmap --add r.qcow2 b0
    cp r.qcow2 r2.qcow2
    ("$2" -r -t writeback -c "reopen -w" -c "write 0 64k" -c abort \
        r.qcow2) > /dev/null 2>&1
    info_bitmaps "$Q_IMG" r.qcow2
    "$2" -c "write 1M 64k" -c "reopen -r" -c "read 1M 64k" r2.qcow2 \
        > /dev/null
    info_bitmaps "$Q_IMG" r2.qcow2
    export_map "$Q_NBD" r2.qcow2 b0
    "$Q_IMG" check r2.qcow2 2>&1 | head -n 1
}
check_eq "reopen read-write marks bitmaps in use, read-only stores them" \
    "$(reopen_run "$Q_IMG" "$Q_IO")" "$(reopen_run "$QB_IMG" "$QB_IO")"

"$QB_IMG" convert --bitmaps -O qcow2 q.qcow2 qc.qcow2
check_eq "qemu-img check of qblock-img convert --bitmaps" \
    "No errors were found on the image." \
    "$("$Q_IMG" check qc.qcow2 2>&1 | head -n 1)"
for b in all coarse frozen; do
    check_eq "convert --bitmaps keeps the bits of $b" \
        "$(export_map "$Q_NBD" q.qcow2 $b)" \
        "$(export_map "$Q_NBD" qc.qcow2 $b)"
done
check_eq "info of convert --bitmaps" \
    "$(info_bitmaps "$Q_IMG" q.qcow2)" "$(info_bitmaps "$Q_IMG" qc.qcow2)"

# The header extensions' order, as QEMU writes it (the feature table
# before the bitmaps): scripts that dump the header see the same bytes.
ext_magics() {
    python3 - "$1" <<'PY'
import struct, sys
f = open(sys.argv[1], 'rb').read()
pos = struct.unpack('>I', f[100:104])[0]
while True:
    magic, length = struct.unpack('>II', f[pos:pos + 8])
    if magic == 0:
        break
    print('%#x' % magic)
    pos += 8 + ((length + 7) & ~7)
PY
}
ext_run() {     # IMG-TOOL
    rm -f ext.qcow2
    "$1" create -q -f qcow2 -F raw -b /dev/null -u ext.qcow2 1M
    "$1" bitmap --add ext.qcow2 b0
    ext_magics ext.qcow2
}
check_eq "header extensions in QEMU's order after bitmap --add" \
    "$(ext_run "$Q_IMG")" "$(ext_run "$QB_IMG")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
