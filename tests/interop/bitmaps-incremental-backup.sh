#!/usr/bin/env bash
# The incremental backup path of docs/incremental-backup.md, run as a user
# would, with qblock's tools and with QEMU's on either side:
#   1. a full backup of a disk at rest, and a persistent bitmap added at
#      the same moment (qblock-img convert, qblock-img bitmap --add);
#   2. the "guest" writes (qblock-io: writes, zero writes, a discard);
#   3. the disk at rest again: its bitmap is exported (qblock-nbd -r -B),
#      a client asks which extents are dirty (NBD block status on
#      qemu:dirty-bitmap:NAME, as nbdinfo --map does) and copies only
#      those into a new overlay of the full backup, served writable by an
#      NBD server;
#   4. the overlay restored (convert) is identical to the disk (qemu-img
#      compare), the bytes copied are the dirty extents only, and every
#      image passes the real qemu-img check.
# Steps 3 and 4 run with qblock-nbd serving both ends, with qemu-nbd
# serving the source (the bitmap qblock wrote) and with qemu-nbd serving
# the overlay.  Prints "ok NAME" / "FAIL NAME", ends with "N passed, N
# failed"; exits 77 without qemu-img, qemu-nbd or python3-libnbd.
set -u

build=$(cd "${1:?usage: bitmaps-incremental-backup.sh BUILD_DIR}" && pwd)
QB_IMG=$build/qblock-img
QB_IO=$build/qblock-io
QB_NBD=$build/qblock-nbd
for t in qemu-img qemu-nbd nbdinfo; do
    if ! command -v "$t" > /dev/null; then
        echo "skipped: $t is not installed (qemu-utils, libnbd-bin)"
        exit 77
    fi
done
# python3-libnbd is built for Debian's python3, which need not be first
# in PATH.
py_nbd=
for py in /usr/bin/python3 python3; do
    if "$py" -c 'import nbd' 2>/dev/null; then
        py_nbd=$py
        break
    fi
done
if [ -z "$py_nbd" ]; then
    echo "skipped: python3-libnbd is not installed"
    exit 77
fi
Q_IMG=$(command -v qemu-img) Q_NBD=$(command -v qemu-nbd)
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1
pass=0 fail=0

check() {   # NAME COMMAND...
    local name=$1 out
    shift
    if out=$("$@" 2>&1); then
        echo "ok $name"
        pass=$((pass + 1))
    else
        echo "FAIL $name"
        sed 's/^/    /' <<<"$out"
        fail=$((fail + 1))
    fi
}

# serve SOCK TOOL ARGS...: an NBD server on the unix socket SOCK
serve() {
    local sock=$1 tool=$2
    shift 2
    rm -f "$sock"
    "$tool" -t -k "$sock" "$@" > "$sock.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        [ -S "$sock" ] && return 0
        sleep 0.05
    done
    cat "$sock.log"
    return 1
}

unserve_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    pids=()
}

# pull SRC_SOCK DST_SOCK BITMAP: copies the dirty extents of the source
# export into the destination export; prints the bytes copied.
pull() {
    "$py_nbd" -c "
import nbd
import sys
src = nbd.NBD()
src.add_meta_context('qemu:dirty-bitmap:$3')
src.connect_unix('$1')
dst = nbd.NBD()
dst.connect_unix('$2')
size = src.get_size()
dirty = []
done = [0]
def extents(ctx, offset, entries, err):
    if ctx != 'qemu:dirty-bitmap:$3':
        return 0
    pos = offset
    for i in range(0, len(entries), 2):
        if entries[i + 1] & 1:
            dirty.append((pos, entries[i]))
        pos += entries[i]
    done[0] = pos
    return 0
off = 0
while off < size:
    src.block_status(min(size - off, 1 << 30), off, extents)
    if done[0] <= off:
        sys.exit('block status made no progress at %d' % off)
    off = done[0]
copied = 0
for pos, length in dirty:
    length = min(length, size - pos)
    for o in range(pos, pos + length, 1 << 22):
        n = min(1 << 22, pos + length - o)
        dst.pwrite(src.pread(n, o), o)
        copied += n
dst.flush()
src.shutdown()
dst.shutdown()
print(copied)
"
}

# --- 1. full backup and the bitmap, the disk at rest ---
"$QB_IMG" create -q -f qcow2 disk.qcow2 64M
"$QB_IO" -c "write -P 1 0 8M" -c "write -P 2 30M 2M" disk.qcow2 > /dev/null
"$QB_IMG" convert -O qcow2 disk.qcow2 full.qcow2
"$QB_IMG" bitmap --add disk.qcow2 inc0
check "the full backup is the disk" "$Q_IMG" compare disk.qcow2 full.qcow2

# --- 2. the guest writes ---
"$QB_IO" -c "write -P 3 1M 64k" -c "write -P 4 40M 300k" \
    -c "write -z 31M 128k" -c "write -P 5 63M 4k" -c "write -P 6 7M 1k" \
    disk.qcow2 > /dev/null
"$QB_IO" -d unmap -c "discard 2M 1M" disk.qcow2 > /dev/null
# 64k at 1M, 320k at 40M (300k over granules), 128k at 31M, 64k at 63M,
# 64k at 7M, 1M at 2M
want=$(( (64 + 320 + 128 + 64 + 64 + 1024) * 1024 ))

# --- 3 and 4, three ways ---
round() {   # NAME SRC-NBD DST-NBD
    local name=$1 src=$2 dst=$3 copied
    rm -f inc.qcow2 restored.qcow2
    "$QB_IMG" create -q -f qcow2 -b full.qcow2 -F qcow2 inc.qcow2
    if ! serve "$work/src.sock" "$src" -r -f qcow2 -B inc0 disk.qcow2 ||
       ! serve "$work/dst.sock" "$dst" -f qcow2 inc.qcow2; then
        echo "FAIL $name: a server did not start"
        fail=$((fail + 1))
        unserve_all
        return
    fi
    copied=$(pull "$work/src.sock" "$work/dst.sock" inc0 2>&1)
    unserve_all
    check "$name: only the dirty extents were pulled ($copied bytes)" \
        test "$copied" = "$want"
    check "$name: the backup chain reads as the disk" \
        "$Q_IMG" compare disk.qcow2 inc.qcow2
    "$QB_IMG" convert -O qcow2 inc.qcow2 restored.qcow2
    check "$name: restored, it is identical to the disk" \
        "$Q_IMG" compare disk.qcow2 restored.qcow2
    check "$name: qemu-img check of the incremental image" \
        "$Q_IMG" check inc.qcow2
}
round "qblock-nbd to qblock-nbd" "$QB_NBD" "$QB_NBD"
round "qemu-nbd (qblock's bitmap) to qblock-nbd" "$Q_NBD" "$QB_NBD"
round "qblock-nbd to qemu-nbd" "$QB_NBD" "$Q_NBD"

check "qemu-img check of the disk and its bitmap" "$Q_IMG" check disk.qcow2
# the next increment starts from a clear bitmap
"$QB_IMG" bitmap --clear disk.qcow2 inc0
check "cleared, the bitmap exports no dirty extent" \
    bash -c "'$QB_NBD' -r -t -f qcow2 -B inc0 -k '$work/c.sock' disk.qcow2 &
             p=\$!; for i in \$(seq 100); do [ -S '$work/c.sock' ] && break;
             sleep 0.05; done
             m=\$(nbdinfo --map=qemu:dirty-bitmap:inc0 \
                  'nbd+unix:///?socket=$work/c.sock'); kill \$p
             ! grep -q dirty <<<\"\$m\""

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
