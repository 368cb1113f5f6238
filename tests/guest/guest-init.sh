#!/bin/sh
# /init of the test guest (busybox sh), put into the initramfs by
# build-guest.py.  It drives the guest side of tests/guest/vhost-user-blk.py.
#
# The host talks to it on the second serial port (/dev/ttyS1): the guest
# writes one line per event,
#   @@SYNC TAG KEY=VALUE...   a checkpoint: the host checks the export, then
#                             answers a line "go" (or "stop" to give up)
#   @@RESULT PASS | @@RESULT FAIL WHY
# and powers off at the end.  The console (ttyS0) only carries the kernel's
# messages and this script's errors, for the log.
#
# The steps on /dev/vda (each write is 1 MiB of one byte value); the host
# checks the export at each checkpoint named here:
#   initial     what the driver found: cache_type, size, serial, logical
#               block size, number of queues
#   direct-1    0xa1 at 0 MiB, O_DIRECT writes of 64 KiB, no flush
#   fsync-1     an fsync of the disk (a flush if the cache is on)
#   set-wt      cache_type set to "write through"
#   direct-2    0xb2 at 1 MiB, O_DIRECT (the guest sends no flush now)
#   set-wb      cache_type set to "write back"
#   direct-3    0xc3 at 2 MiB, O_DIRECT, no flush
#   buffered    0xd4 at 3 MiB through the page cache, then fsync
#   readback    every pattern read back with O_DIRECT and compared
PATH=/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

DEV=vda
ATTR=/sys/block/$DEV/cache_type
FAIL=""

# the control channel: raw, no echo, opened once so nothing is lost
stty -F /dev/ttyS1 raw -echo
exec 3<>/dev/ttyS1

say() { echo "$*" >&3; }
fail() { echo "guest: $*" >/dev/console; FAIL="${FAIL:+$FAIL; }$*"; }

finish() {
    if [ -z "$FAIL" ]; then
        say "@@RESULT PASS"
    else
        say "@@RESULT FAIL $FAIL"
    fi
    sync
    poweroff -f
}

sync_point() { # TAG [KEY=VALUE...]
    say "@@SYNC $*"
    while read -r line <&3; do
        case "$line" in
            *go*) return 0 ;;
            *stop*) fail "host stopped at $1"; finish ;;
        esac
    done
    fail "control channel closed at $1"
    finish
}

for m in $(cat /lib/modules/order); do
    insmod /lib/modules/$m.ko || fail "insmod $m"
done
i=0
while [ ! -b /dev/$DEV ] && [ $i -lt 200 ]; do
    sleep 0.1
    i=$((i + 1))
done
[ -b /dev/$DEV ] || { fail "no /dev/$DEV"; finish; }

# pattern NAME OCTAL: a 1 MiB file of one byte value in /tmp
pattern() {
    dd if=/dev/zero bs=65536 count=16 2>/dev/null | tr '\000' "\\$2" > /tmp/$1
}
# write_direct NAME MIB: O_DIRECT writes of 64 KiB, one after the other
write_direct() {
    dd if=/tmp/$1 of=/dev/$DEV bs=65536 seek=$(($2 * 16)) oflag=direct \
        conv=notrunc 2>/tmp/dd.err || fail "write $1: $(cat /tmp/dd.err)"
}
flush_disk() {
    dd if=/dev/null of=/dev/$DEV bs=512 count=0 conv=notrunc,fsync \
        2>/tmp/dd.err || fail "fsync: $(cat /tmp/dd.err)"
}
set_cache() {
    echo "$1" > $ATTR || fail "writing '$1' to $ATTR"
    got=$(cat $ATTR)
    [ "$got" = "$1" ] || fail "$ATTR reads '$got' after writing '$1'"
}

# h.mode=migrate: the guest of the live migration scenario, whose
# steps the host checks (each a checkpoint):
#   migrate-ready  a background writer keeps dirtying guest memory, so
#                  that the host's migration cannot converge until the
#                  host lets it (the host then migrates, and waits for
#                  the first pass over guest memory to end)
#   read-during    the first READ_MIB MiB of the disk read through the
#                  page cache: pages the export writes after the
#                  migration copied them once (md5 as read)
#   quiet          the writer stopped (the host lets the migration end)
#   cached-after   on the destination: the same bytes from the page
#                  cache, as the source's export wrote them; a page the
#                  export did not mark in the dirty log reads stale
#   reread-after   the same read through the destination's export
#   written        0xe5 written at WRITE_MIB MiB with O_DIRECT, read back
READ_MIB=48
WRITE_MIB=56
migrate() {
    # not zeroes: a zero page is sent as a marker, at no cost
    dd if=/dev/zero bs=65536 count=64 2>/dev/null | tr '\000' '\132' \
        > /tmp/busy
    (while [ ! -e /tmp/quiet ]; do
        dd if=/tmp/busy of=/tmp/dirt bs=65536 conv=notrunc 2>/dev/null
    done) &
    writer=$!
    # the page cache of a block device goes at its last close: held open
    exec 4< /dev/$DEV
    sync_point migrate-ready
    echo 3 > /proc/sys/vm/drop_caches
    sum=$(dd if=/dev/$DEV bs=1048576 count=$READ_MIB 2>/dev/null | md5sum)
    sync_point read-during "md5=${sum%% *}"
    touch /tmp/quiet
    wait $writer
    sync_point quiet
    sum=$(dd if=/dev/$DEV bs=1048576 count=$READ_MIB 2>/dev/null | md5sum)
    sync_point cached-after "md5=${sum%% *}"
    exec 4<&-
    echo 3 > /proc/sys/vm/drop_caches
    sum=$(dd if=/dev/$DEV bs=1048576 count=$READ_MIB 2>/dev/null | md5sum)
    sync_point reread-after "md5=${sum%% *}"
    pattern e 345
    write_direct e $WRITE_MIB
    want=$(md5sum < /tmp/e)
    got=$(dd if=/dev/$DEV bs=65536 skip=$((WRITE_MIB * 16)) count=16 \
          iflag=direct 2>/dev/null | md5sum)
    [ "$got" = "$want" ] || fail "the write after the migration reads back wrong"
    sync_point written
    finish
}
# h.mode=restart: the guest of the daemon restart scenario.  WRITERS
# writers in parallel, each its own byte value over its own WRITER_MIB
# MiB with O_DIRECT, so that the export has requests in flight when the
# host kills the daemon (and completes them in any order); checkpoints:
#   restart-ready  the patterns are made (the host throttles the export)
#   written        every writer finished without an error (the host
#                  killed the daemon and started it again meanwhile)
#   readback       every writer's range read back with O_DIRECT
WRITERS=8
WRITER_MIB=2
restart() {
    i=1
    while [ $i -le $WRITERS ]; do
        pattern w$i $(printf '%o' $((0x30 + i)))
        i=$((i + 1))
    done
    sync_point restart-ready
    i=1
    while [ $i -le $WRITERS ]; do
        (m=0
         while [ $m -lt $WRITER_MIB ]; do
             dd if=/tmp/w$i of=/dev/$DEV bs=65536 oflag=direct conv=notrunc \
                 seek=$((((i - 1) * WRITER_MIB + m) * 16)) 2>/tmp/err$i ||
                 cp /tmp/err$i /tmp/fail$i
             m=$((m + 1))
         done) &
        i=$((i + 1))
    done
    wait
    i=1
    while [ $i -le $WRITERS ]; do
        [ -e /tmp/fail$i ] && fail "writer $i: $(cat /tmp/fail$i)"
        i=$((i + 1))
    done
    sync_point written
    i=1
    while [ $i -le $WRITERS ]; do
        want=$(md5sum < /tmp/w$i)
        m=0
        while [ $m -lt $WRITER_MIB ]; do
            got=$(dd if=/dev/$DEV bs=65536 count=16 iflag=direct \
                  skip=$((((i - 1) * WRITER_MIB + m) * 16)) 2>/dev/null |
                  md5sum)
            [ "$got" = "$want" ] ||
                fail "writer $i's MiB $m reads back wrong"
            m=$((m + 1))
        done
        i=$((i + 1))
    done
    sync_point readback
    finish
}
case " $(cat /proc/cmdline) " in
    *" h.mode=migrate "*) migrate ;;
    *" h.mode=restart "*) restart ;;
esac

pattern a 241; pattern b 262; pattern c 303; pattern d 324

sync_point initial "cache_type=$(tr ' ' _ < $ATTR)" \
    "size=$(cat /sys/block/$DEV/size)" \
    "serial=$(cat /sys/block/$DEV/serial)" \
    "lbs=$(cat /sys/block/$DEV/queue/logical_block_size)" \
    "queues=$(ls /sys/block/$DEV/mq | wc -l)"

write_direct a 0
sync_point direct-1
flush_disk
sync_point fsync-1

set_cache "write through"
sync_point set-wt "cache_type=$(tr ' ' _ < $ATTR)"
write_direct b 1
sync_point direct-2

set_cache "write back"
sync_point set-wb "cache_type=$(tr ' ' _ < $ATTR)"
write_direct c 2
sync_point direct-3

dd if=/tmp/d of=/dev/$DEV bs=65536 seek=48 conv=notrunc,fsync 2>/tmp/dd.err ||
    fail "buffered write: $(cat /tmp/dd.err)"
sync_point buffered

for spec in "a 0" "b 1" "c 2" "d 3"; do
    set -- $spec
    want=$(md5sum < /tmp/$1)
    got=$(dd if=/dev/$DEV bs=65536 skip=$(($2 * 16)) count=16 iflag=direct \
          2>/dev/null | md5sum)
    [ "$got" = "$want" ] || fail "pattern $1 at $2 MiB reads back wrong"
done
sync_point readback
finish
