#!/usr/bin/env bash
# The guest layer: a real Linux guest under QEMU (TCG) on
# qblock-storage-daemon's vhost-user-blk export, and one writing with
# Linux's vfat driver to a vvfat disk with rw (vvfat-guest.py).
#   tests/guest/run.sh BUILD_DIR
# Builds the guest (kernel + busybox initramfs, see build-guest.py) into
# BUILD_DIR/tests/guest when it is missing or older than its sources, then
# runs vhost-user-blk.py's scenarios (in two jobs) and vvfat-guest.py
# (which builds its own initramfs from the same kernel) two at a time,
# and sums them up.  A missing dependency is a skip, with the reason;
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
# Three jobs in two lanes (tests/lanes.bash): each boots its own guests,
# one TCG vCPU on one core, in a folder of its own, so that the layer
# takes the time of its slower lane, not the sum of all (82 s on two
# cores when they ran one after another).  vhost-user-blk.py's scenarios
# are split in two: the two long ones (migration, restart) start first.
. "$here/../lanes.bash"
declare -A job_cmd=(
    [vhost-user-blk-1]="vhost-user-blk.py migration restart"
    [vhost-user-blk-2]="vhost-user-blk.py writeback writethrough hotplug reconnect"
    [vvfat-guest]="vvfat-guest.py"
)
lane_job() {
    local script args
    read -r script args <<<"${job_cmd[$1]}"
    # shellcheck disable=SC2086
    timeout 900 "$py" "$here/$script" "$build" "$out" $args
}
pass=0 fail=0 skipped=0
# A job's lines, its summary named and timed as the other runners' are;
# a timeout, or an exit status other than 0 with no failure counted, is
# a failure, and a skip under CI too (the skip() above).
lane_report() {
    local name=$1 p f
    sed -E "s/^([0-9]+ passed, [0-9]+ failed.*)$/$name: \1 ($lane_time)/" \
        "$lane_out"
    case $lane_rc in
    124) echo "$name: timed out after 900 s"; fail=$((fail + 1)); return ;;
    77) if [ -n "${CI:-}" ] && [ "$CI" != false ]; then
            echo "guest: cannot run under CI=$CI: $name skipped (see its reason above)"
            fail=$((fail + 1))
        else
            skipped=$((skipped + 1))
        fi
        return ;;
    esac
    read -r p f <<<"$(counts "$(grep -E '^[0-9]+ passed' "$lane_out" | tail -n 1)")"
    [ -z "$p" ] && p=0 f=1
    [ "$lane_rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    pass=$((pass + p)) fail=$((fail + f))
}
lanes_first=(vhost-user-blk-1)
lanes_run vhost-user-blk-1 vhost-user-blk-2 vvfat-guest
echo "guest: $pass passed, $fail failed, $skipped skipped"
[ "$fail" -eq 0 ]
