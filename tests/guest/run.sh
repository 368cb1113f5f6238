#!/usr/bin/env bash
# The guest layer: a real Linux guest under QEMU (TCG) on
# qblock-storage-daemon's vhost-user-blk export, and one writing with
# Linux's vfat driver to a vvfat disk with rw (vvfat-guest.py).
#   tests/guest/run.sh BUILD_DIR
# Builds the guest (kernel + busybox initramfs, see build-guest.py) into
# BUILD_DIR/tests/guest when it is missing or older than its sources, then
# runs vhost-user-blk.py, then vvfat-guest.py (which builds its own
# initramfs from the same kernel), and sums both up.  A missing dependency is a skip, with the reason;
# where CI is set (CI=true, as CI runs) it is a failure, so that the layer
# cannot vanish from the runs that are meant to prove it.
set -u
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../timing.bash"
out=$build/tests/guest
# the system python: the guest test needs only its standard library
py=/usr/bin/python3
[ -x "$py" ] || py=python3

skip() {
    if [ -n "${CI:-}" ] && [ "$CI" != false ]; then
        echo "guest: cannot run under CI=$CI: $*"
        echo "0 passed, 1 failed"
        exit 1
    fi
    echo "guest: skipped: $*"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
}

[ -x "$build/qblock-storage-daemon" ] ||
    skip "qblock-storage-daemon is not built"
command -v qemu-system-x86_64 >/dev/null ||
    skip "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"

stale=0
for f in vmlinux initramfs.cpio.gz; do
    [ -f "$out/$f" ] || stale=1
done
for src in "$here/build-guest.py" "$here/guest-init.sh"; do
    [ "$src" -nt "$out/initramfs.cpio.gz" ] && stale=1
done
if [ "$stale" = 1 ]; then
    timing_start
    "$py" "$here/build-guest.py" "$out"
    rc=$?
    timing_stop
    echo "build-guest: exit $rc ($timing)"
    [ "$rc" = 77 ] && skip "no guest could be built (see the message above)"
    if [ "$rc" != 0 ]; then
        echo "guest: build-guest.py failed (exit $rc)"
        echo "0 passed, 1 failed"
        exit 1
    fi
fi
# counts SUMMARY-LINE: its passed and failed counts, "P F"
counts() {
    sed -nE 's/^([0-9]+) passed, ([0-9]+) failed.*/\1 \2/p' <<<"$1"
}
timing_start
timeout 900 "$py" "$here/vhost-user-blk.py" "$build" "$out" > "$out/run.log" 2>&1
rc=$?
timing_stop
# its lines, the summary named and timed as the other runners' are
sed -E "s/^([0-9]+ passed, [0-9]+ failed.*)$/vhost-user-blk: \1 ($timing)/" \
    "$out/run.log"
case $rc in
124) echo "guest: timed out after 900 s"; echo "0 passed, 1 failed"; exit 1 ;;
77) [ -n "${CI:-}" ] && [ "$CI" != false ] &&
        skip "vhost-user-blk.py skipped (see its reason above)"
    exit 0 ;;                   # skipped; it printed why and the counts
esac
read -r p1 f1 <<<"$(counts "$(grep -E '^[0-9]+ passed' "$out/run.log" | tail -n 1)")"
# vvfat's rw mode under a Linux guest's own vfat driver (its own
# initramfs, built from the same kernel)
timing_start
timeout 900 "$py" "$here/vvfat-guest.py" "$build" "$out" > "$out/vvfat.log" 2>&1
rc2=$?
timing_stop
sed -E "s/^([0-9]+ passed, [0-9]+ failed.*)$/vvfat-guest: \1 ($timing)/" \
    "$out/vvfat.log"
p2=0 f2=0
case $rc2 in
77) ;;                          # it printed why
124) echo "vvfat-guest: timed out after 900 s"; f2=1 ;;
*) read -r p2 f2 <<<"$(counts "$(grep -E '^[0-9]+ passed' "$out/vvfat.log" | tail -n 1)")"
   [ -z "$p2" ] && p2=0 f2=1
   [ "$rc2" -ne 0 ] && [ "$f2" -eq 0 ] && f2=1 ;;
esac
echo "guest: $((${p1:-0} + p2)) passed, $((${f1:-0} + f2)) failed"
[ "$rc" -eq 0 ] && [ "$((f2))" -eq 0 ]
