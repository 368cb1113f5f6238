#!/usr/bin/env bash
# Regenerates the seed images of fuzz-qcow2 with the real qemu-img and
# qemu-io: small clusters keep every image within fuzz-qcow2's longest
# input (128 KiB, tests/fuzz/run.sh), and each seed reaches a different
# part of the driver (plain allocation, internal snapshots, compressed
# clusters, 1-bit refcounts, compat=0.10, zero clusters, persistent dirty
# bitmaps with and without dirty bits, extended L2 entries).
#
# The LUKS-encrypted seed is make-corpus-qcow2-luks.py's: QEMU reserves
# the key material of all eight key slots (over 500 KiB), far over the
# limit, and that script trims it to the one active slot.
#
# Usage: make-corpus-qcow2.sh [OUT_DIR]   (default: corpus/fuzz-qcow2)
set -euo pipefail
out=${1:-$(cd "$(dirname "$0")" && pwd)/corpus/fuzz-qcow2}
max_len=131072
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mk() {
    local name=$1 opts=$2
    shift 2
    qemu-img create -q -f qcow2 -o "$opts" "$tmp/$name" 1M
    for cmd in "$@"; do
        qemu-io -f qcow2 -c "$cmd" "$tmp/$name" >/dev/null
    done
}

mk empty-4k.qcow2       cluster_size=4096
mk data-4k.qcow2        cluster_size=4096 "write -P 0x11 0 8k" \
                        "write -P 0x22 512k 4k"
mk snapshot-1k.qcow2    cluster_size=1024 "write -P 0x33 0 4k"
qemu-img snapshot -c snap1 "$tmp/snapshot-1k.qcow2"
qemu-io -f qcow2 -c "write -P 0x44 0 2k" "$tmp/snapshot-1k.qcow2" >/dev/null
mk compressed-4k.qcow2  cluster_size=4096 "write -c -P 0x55 0 4k" \
                        "write -c -P 0x66 8k 4k"
mk refcount1-512.qcow2  cluster_size=512,refcount_bits=1 "write -P 0x77 0 2k"
mk compat010-4k.qcow2   cluster_size=4096,compat=0.10 "write -P 0x99 4k 4k"
mk zero-4k.qcow2        cluster_size=4096 "write -P 0xaa 0 16k" \
                        "write -z 4k 8k" "discard 12k 4k"
mk bitmap-4k.qcow2      cluster_size=4096 "write -P 0xbb 0 4k"
qemu-img bitmap --add "$tmp/bitmap-4k.qcow2" b0
# two bitmaps, one disabled; the writes after them set bits in the enabled
# one, which is stored with a bitmap table and a data cluster at close
mk bitmaps-dirty-512.qcow2 cluster_size=512 "write -P 0xcc 0 1k"
qemu-img bitmap --add -g 4096 "$tmp/bitmaps-dirty-512.qcow2" live
qemu-img bitmap --add --disable "$tmp/bitmaps-dirty-512.qcow2" frozen
qemu-io -f qcow2 -c "write -P 0xcd 64k 8k" -c "write -P 0xce 900k 1k" \
    "$tmp/bitmaps-dirty-512.qcow2" >/dev/null
# two internal snapshots sharing clusters with the active layer (refcount
# 2 and 3), with copy-on-write after each
mk snapshots-512.qcow2  cluster_size=512 "write -P 0x12 0 2k"
qemu-img snapshot -c s1 "$tmp/snapshots-512.qcow2"
qemu-io -f qcow2 -c "write -P 0x13 512 512" "$tmp/snapshots-512.qcow2" \
    >/dev/null
qemu-img snapshot -c s2 "$tmp/snapshots-512.qcow2"
qemu-io -f qcow2 -c "write -P 0x14 1k 1k" -c "write -z 0 512" \
    "$tmp/snapshots-512.qcow2" >/dev/null
# extended L2 entries (16 KiB is the smallest cluster QEMU allows them
# with): allocated, zero and unallocated subclusters within one cluster
mk extended-l2-16k.qcow2 cluster_size=16384,extended_l2=on \
                        "write -P 0x21 0 1k" "write -z 2k 1k" \
                        "write -P 0x22 32k 512"

for f in "$tmp"/*.qcow2; do
    size=$(stat -c %s "$f")
    if [ "$size" -gt "$max_len" ]; then
        echo "make-corpus-qcow2: $(basename "$f") is $size bytes, over $max_len" >&2
        exit 1
    fi
    cp "$f" "$out/"
done
