#!/usr/bin/env bash
# Regenerates the seed images of fuzz-qcow2 with the real qemu-img and
# qemu-io: small clusters keep every image well under 64 KiB, and each seed
# reaches a different part of the driver (plain allocation, an internal
# snapshot, compressed clusters, 1-bit refcounts, compat=0.10,
# zero clusters and a dirty bitmap).
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)/corpus/fuzz-qcow2
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

for f in "$tmp"/*.qcow2; do
    size=$(stat -c %s "$f")
    if [ "$size" -gt 65536 ]; then
        echo "make-corpus-qcow2: $(basename "$f") is $size bytes, over 64 KiB" >&2
        exit 1
    fi
    cp "$f" "$out/"
done
