#!/usr/bin/env bash
# Persistent bitmaps checkpointed at a flush, seen by the real QEMU tools
# (block/qcow2-bitmap.c, docs/bitmaps.md "Crashes").
#
#   tests/interop/bitmaps-checkpoint.sh BUILD_DIR
#
# qblock-io writes and flushes, then kills itself (sigraise 9) so that no
# close stores anything:
# - after the flush, qemu-img info -U shows the bitmap not in use, a copy
#   of the image (cp) passes qemu-img check, qemu-img bitmap merges the
#   bitmap and qemu-nbd -B exports the extents written;
# - the open marks it in use, as QEMU's; after a flush, a rewrite of a
#   granule the bitmap has leaves it clean;
# - a write to a new granule leaves it in use, for qemu-img and for qblock
#   (inconsistent on the next open);
# - qemu-io, which keeps bitmaps in use while the image is open, leaves
#   them in use where qblock-io leaves them clean: the one difference.
# Ends with "N passed, N failed, N skipped"; exits 77 without qemu-img,
# qemu-io, qemu-nbd or nbdinfo.
set -u

build=$(cd "${1:?usage: bitmaps-checkpoint.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
QB_IMG=$build/qblock-img
QB_IO=$build/qblock-io
missing=$(for t in qemu-img qemu-io qemu-nbd nbdinfo; do
              command -v "$t" > /dev/null || echo "$t"
          done)
[ -z "$missing" ] || {
    echo "skipped:" $missing "not installed (qemu-utils, libnbd-bin)"
    exit 77
}
. "$here/check-lib.bash"
work=$(mktemp -d)
server_pid=
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' \
    EXIT
cd "$work" || exit 1

# expect NAME EXPECTED ACTUAL
expect() {
    if [ "$2" = "$3" ]; then
        ok "$1"
    else
        fail "$1" "expected: $2" "got:      $3"
    fi
}

# flags IMG: the flags of its bitmap b0 as qemu-img info -U shows them
flags() {
    qemu-img info -U --output=json "$1" |
        python3 -c 'import json, sys
d = json.load(sys.stdin)["format-specific"]["data"]
print(" ".join(b["flags"] and ",".join(b["flags"]) or "-"
               for b in d.get("bitmaps", []) if b["name"] == "b0"))'
}

# session TOOL IMG CMD...: the commands, then the tool kills itself
session() {
    local tool=$1 img=$2 args=()
    shift 2
    for c in "$@"; do args+=(-c "$c"); done
    { ("$tool" -t writeback "${args[@]}" -c "sigraise 9" "$img") \
        > /dev/null 2>&1; } 2> /dev/null
}

# dirty_map IMG: the extents qemu-nbd -B b0 exports as dirty
dirty_map() {
    rm -f nbd.sock
    qemu-nbd -r -t -f qcow2 -k "$work/nbd.sock" -B b0 "$1" \
        > server.log 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do
        [ -S nbd.sock ] && break
        sleep 0.05
    done
    nbdinfo --map=qemu:dirty-bitmap:b0 "nbd+unix:///?socket=$work/nbd.sock" |
        awk '$3 == 1 { print $1, $2 }'
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=
}

"$QB_IMG" create -q -f qcow2 a.qcow2 16M
"$QB_IMG" bitmap --add a.qcow2 b0
session "$QB_IO" a.qcow2 "write 0 64k" "write 1M 64k" flush
expect "after a flush the bitmap is clean on disk" "auto" "$(flags a.qcow2)"
cp a.qcow2 copy.qcow2
check "qemu-img check of a copy taken after the flush" \
    quiet qemu-img check copy.qcow2
expect "qemu-nbd -B exports the extents written before the flush" \
    "$(printf '0 65536\n1048576 65536')" "$(dirty_map copy.qcow2)"
qemu-img bitmap --add copy.qcow2 b1 &&
    qemu-img bitmap --merge b0 copy.qcow2 b1 > merge.log 2>&1
check "qemu-img bitmap --merge uses it" test $? -eq 0

# the open marks the bitmaps in use, as QEMU's does: a flush first
session "$QB_IO" a.qcow2 flush "write 4k 4k" "write 1M 64k"
expect "a rewrite of dirty granules after a flush leaves it clean" "auto" \
    "$(flags a.qcow2)"
session "$QB_IO" a.qcow2 flush "write 2M 4k"
expect "a write to a new granule leaves it in use" "in-use,auto" \
    "$(flags a.qcow2)"
expect "qblock-img info agrees" "in-use,auto" \
    "$("$QB_IMG" info -U --output=json a.qcow2 |
       python3 -c 'import json, sys
d = json.load(sys.stdin)["format-specific"]["data"]
print(",".join(d["bitmaps"][0]["flags"]))')"
check "and the next open finds it inconsistent" \
    quiet sh -c "'$QB_IMG' convert --bitmaps -O qcow2 a.qcow2 c.qcow2 2>&1 |
                 grep -q inconsistent"

# the difference from QEMU 7.2, after the same write and flush
for tool in "$QB_IO" qemu-io; do
    rm -f q.qcow2
    qemu-img create -q -f qcow2 q.qcow2 16M
    qemu-img bitmap --add q.qcow2 b0
    session "$tool" q.qcow2 "write 0 64k" flush
    echo "$(basename "$tool"): $(flags q.qcow2)"
done > diff.log
expect "qblock-io stores the bitmap at the flush, qemu-io keeps it in use" \
    "$(printf 'qblock-io: auto\nqemu-io: in-use,auto')" "$(cat diff.log)"
summary
