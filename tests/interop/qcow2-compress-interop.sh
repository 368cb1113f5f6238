#!/usr/bin/env bash
# qcow2 compressed clusters (zlib and zstd) against the real QEMU.
#
#   tests/interop/qcow2-compress-interop.sh BUILD_DIR
#
# convert -c of the same mixed input by both tools gives byte-identical
# images (same deflate/zstd parameters, same cluster order, the file end
# rounded to a sector); qemu-io write -c by both tools leaves images that
# qemu-img checks clean and compares identical; each tool reads the other's
# compressed images.  Prints "ok NAME" / "FAIL NAME", ends with
# "N passed, N failed"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: qcow2-compress-interop.sh BUILD_DIR}" && pwd)
. "$(dirname "$0")/qemu-utils.bash"
pass=0 fail=0

ok() { echo "ok $1"; pass=$((pass + 1)); }
bad() {
    echo "FAIL $1"
    [ -n "${2:-}" ] && sed 's/^/    /' <<<"$2"
    fail=$((fail + 1))
}
expect() {
    local name=$1 out
    shift
    if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$out"; fi
}

# 12 MiB: random, compressible text, zeroes, a partial last cluster.
truncate -s $((12 * 1024 * 1024 - 3 * 512)) in.raw
head -c 3M /dev/urandom | dd of=in.raw conv=notrunc status=none
head -c 3M /dev/urandom | base64 -w 60 | head -c 4M |
    dd of=in.raw bs=1M seek=4 conv=notrunc status=none
head -c 70000 /dev/urandom | dd of=in.raw bs=1k seek=$((12 * 1024 - 80)) \
    conv=notrunc status=none

for ctype in zlib zstd; do
    for cs in 64k 4k 2M 64k,extended_l2=on; do
        o="compression_type=$ctype,cluster_size=$cs"
        rm -f q.qcow2 b.qcow2
        "$Q_IMG" convert -c -O qcow2 -o "$o" in.raw q.qcow2
        "$QB_IMG" convert -c -O qcow2 -o "$o" in.raw b.qcow2
        expect "convert -c byte-identical to QEMU's ($o)" cmp q.qcow2 b.qcow2
        expect "convert -c content ($o)" "$Q_IMG" compare in.raw b.qcow2
    done
    rm -f q.qcow2 b.qcow2
    "$Q_IMG" convert -c -O qcow2 -o compression_type=$ctype in.raw q.qcow2
    "$QB_IMG" convert -c -O qcow2 -o compression_type=$ctype,cluster_size=4k \
        -m 16 in.raw b.qcow2
    expect "qblock reads QEMU's compressed image ($ctype)" \
        "$QB_IMG" compare -f raw in.raw q.qcow2
    expect "qblock-img check of QEMU's compressed image ($ctype)" \
        "$QB_IMG" check q.qcow2
    expect "qemu-img check of qblock's -m 16 image ($ctype)" \
        "$Q_IMG" check b.qcow2

    for side in q b; do
        io=$Q_IO
        [ $side = b ] && io=$QB_IO
        rm -f w$side.qcow2
        "$Q_IMG" create -q -f qcow2 -o compression_type=$ctype w$side.qcow2 2M
        "$io" -c "write -q -c -P 1 0 64k" -c "write -q -c -P 2 128k 192k" \
            -c "write -q -c 1M 64k" -c "write -q -P 3 130k 1k" \
            w$side.qcow2 >/dev/null
    done
    expect "qblock-io write -c passes qemu-img check ($ctype)" \
        "$Q_IMG" check wb.qcow2
    expect "qblock-io write -c equals qemu-io write -c ($ctype)" \
        "$Q_IMG" compare wq.qcow2 wb.qcow2
    expect "same map as QEMU's ($ctype)" \
        cmp <("$Q_IMG" map --output=json wq.qcow2) \
            <("$Q_IMG" map --output=json wb.qcow2)
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
