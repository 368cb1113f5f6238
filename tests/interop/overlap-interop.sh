#!/usr/bin/env bash
# qcow2 overlap checks across tools: an image that qblock marked corrupt is
# corrupt for the real qemu-img too, and the real qemu-img check -r all
# repairs it; an image that the real QEMU marked corrupt is refused for
# writing by qblock and repaired by qblock-img check -r all.
#   tests/interop/overlap-interop.sh BUILD_DIR
# Prints "ok NAME" or "FAIL NAME" per case, then "N passed, N failed";
# exits 77 when the real qemu-img is not installed.
set -u
build=$(cd "${1:?usage: overlap-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
qemu_img=$(command -v qemu-img) || {
    echo "skipped: qemu-img is not installed (Debian package qemu-utils)"
    exit 77; }
qemu_io=$(command -v qemu-io) || {
    echo "skipped: qemu-io is not installed"; exit 77; }
meta="python3 $here/../qemu-iotests/qcow2_meta.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0

ok() { echo "ok $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; shift; printf '    %s\n' "$@"; fail=$((fail + 1)); }
expect() {  # name command... : the command must succeed
    local name=$1; shift
    local out
    if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$out"; fi
}

# An image with data at 0 and 64k whose guest cluster at 128k is mapped
# onto STRUCT, written at 128k by WRITER (a qemu-io compatible tool).
damaged_write() {  # img struct writer
    "$qemu_img" create -q -f qcow2 "$1" 4M
    "$qemu_io" -c "write -q -P 0x11 0 64k" -c "write -q -P 0x22 64k 64k" "$1"
    $meta "$1" point 131072 "$2"
    "$3" -c "write -q 128k 4k" "$1" >/dev/null 2>&1
}

for st in active-l1 active-l2 refcount-table refcount-block; do
    img=$work/ours-$st.qcow2
    damaged_write "$img" $st "$build/qblock-io"
    expect "qblock marked $st damage: qemu-img info says corrupt" \
        bash -c "'$qemu_img' info --output=json '$img' |
                 grep -q '\"corrupt\": true'"
    expect "qblock marked $st damage: qemu-io refuses to open it read/write" \
        bash -c "! '$qemu_io' -c 'write 1M 4k' '$img' 2>&1 | grep -q wrote"
    expect "qblock marked $st damage: qemu-img check -r all repairs it" \
        "$qemu_img" check -r all "$img"
    expect "qblock marked $st damage: after qemu's repair, qblock checks clean" \
        "$build/qblock-img" check "$img"
    expect "qblock marked $st damage: the data is intact" \
        "$build/qblock-io" -c "read -q -P 0x11 0 64k" -c "read -q -P 0x22 64k 64k" "$img"

    img=$work/qemu-$st.qcow2
    damaged_write "$img" $st "$qemu_io"
    expect "qemu marked $st damage: qblock-img info says corrupt" \
        bash -c "'$build/qblock-img' info '$img' | grep -q 'corrupt: true'"
    expect "qemu marked $st damage: qblock-io opens it read-only only" \
        bash -c "'$build/qblock-io' -c 'write 1M 4k' '$img' 2>&1 |
                 grep -q 'Image is corrupt; cannot be opened read/write'"
    expect "qemu marked $st damage: qblock-img check -r all repairs it" \
        "$build/qblock-img" check -r all "$img"
    expect "qemu marked $st damage: after qblock's repair, qemu-img checks clean" \
        "$qemu_img" check "$img"
    expect "qemu marked $st damage: writable again" \
        "$qemu_io" -c "write -q 1M 4k" "$img"
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
