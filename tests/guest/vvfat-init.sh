#!/bin/sh
# /init of the vvfat guest (busybox sh), put into its initramfs by
# vvfat-guest.py: Linux's own vfat driver changes the FAT16 volume of a
# fat:rw: disk (/dev/vda1) as a user would, then unmounts it (every write
# reaches the disk) and powers off.  The host applies the same steps to a
# copy of the directory and compares.  Keep the two lists the same: the
# steps here and STEPS in vvfat-guest.py.
PATH=/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
FAIL=""
fail() { echo "guest: $*" >/dev/console; FAIL="${FAIL:+$FAIL; }$*"; }

for m in $(cat /lib/modules/order); do
    insmod /lib/modules/$m.ko || fail "insmod $m"
done
mkdir -p /mnt
i=0
while [ ! -b /dev/vda1 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
if mount -t vfat -o iocharset=utf8 /dev/vda1 /mnt; then
    cd /mnt || fail "cd /mnt"
    # a file of four clusters and more, a long name with case
    i=0
    while [ $i -lt 3000 ]; do echo "line $i of the big file"; i=$((i + 1)); done \
        > "Big File.Txt" || fail "big file"
    echo "a new file" > newfile.txt || fail "newfile"
    : > empty-new || fail "empty-new"
    mkdir "New Dir" || fail "mkdir"
    echo inner > "New Dir/inner.txt" || fail "inner"
    rm a.txt || fail "rm a.txt"
    mv sub/b.txt "New Dir/b.txt" || fail "mv b.txt"
    mv over.txt Renamed.txt || fail "mv over.txt"
    echo short > Renamed.txt || fail "rewrite shorter"
    echo "one more line" >> appended.txt || fail "append"
    rmdir emptydir || fail "rmdir"
    rm -r full || fail "rm -r full"
    mv sub "Sub Renamed" || fail "mv sub"
    # 3 MB through the page cache, written back in large requests
    yes "a line of the large file" | head -c 3000000 > large.txt ||
        fail "large"
    # a time and the read-only attribute, set and (after a sync, so
    # that the host sees both) cleared
    touch -d "2001-02-03 04:05:06" newfile.txt || fail "touch -d"
    chmod a-w appended.txt || fail "chmod a-w"
    chmod a-w Renamed.txt && sync && chmod u+w Renamed.txt ||
        fail "chmod u+w"
    # what the disk now holds, read back past the page cache: the
    # overlay and the clusters of moved files the commit kept for it
    sync
    echo 3 > /proc/sys/vm/drop_caches
    yes "a line of the large file" | head -c 3000000 > /tmp/large
    cmp large.txt /tmp/large || fail "large.txt read back"
    [ "$(cat "New Dir/b.txt")" = "inside sub" ] || fail "b.txt read back"
    [ "$(tail -n 1 appended.txt)" = "one more line" ] ||
        fail "appended.txt read back"
    [ "$(wc -l < "Big File.Txt")" = 3000 ] || fail "Big File.Txt read back"
    cd /
    umount /mnt || fail "umount"
else
    fail "mount /dev/vda1"
fi
sync
if [ -z "$FAIL" ]; then
    echo "@@RESULT PASS" >/dev/console
else
    echo "@@RESULT FAIL $FAIL" >/dev/console
fi
poweroff -f
