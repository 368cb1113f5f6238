#!/usr/bin/env bash
# make run: qblock-storage-daemon serving a qcow2 image over NBD on
# localhost and over vhost-user-blk (for a QEMU guest) on a socket in the
# build directory, with a QMP monitor on a socket there too.  The
# image is created the first time (and kept, with what was written to it).
# Ctrl-C (SIGINT) stops the daemon, which flushes and closes the image.
#   scripts/run-daemon.sh [BUILD_DIR]
# Environment: QBLOCK_RUN_PORT (NBD port, default 10809, NBD's own),
# QBLOCK_RUN_SIZE (size of a new image, default 1G).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
dir=$build/run
img=$dir/disk.qcow2
qmp=$dir/qmp.sock
vub=$dir/vhost-user-blk.sock
port=${QBLOCK_RUN_PORT:-10809}
size=${QBLOCK_RUN_SIZE:-1G}

mkdir -p "$dir"
if [ ! -e "$img" ]; then
    "$build/qblock-img" create -q -f qcow2 "$img" "$size"
fi
cat <<EOT
qblock-storage-daemon serves $img over NBD on localhost:$port
(export "disk", writable, write cache on) and QMP on $qmp.

  nbdinfo nbd://localhost:$port/disk
  qemu-io -f raw -c 'write -P 0x5a 0 1M' nbd://localhost:$port/disk
  qemu-img info nbd://localhost:$port/disk

The same image goes to a QEMU guest as a virtio-blk disk over
vhost-user-blk on $vub (export "vdisk"; use one export at a time, since
both write the same image):

  qemu-system-x86_64 -m 1G \\
    -object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem \\
    -chardev socket,id=vu0,path=$vub -device vhost-user-blk-pci,chardev=vu0 ...

QMP (raw JSON, one request per line), for example with socat:
  socat - UNIX-CONNECT:$qmp
  {"execute": "qmp_capabilities"}
  {"execute": "query-block-exports"}
  {"execute": "query-blockstats"}
  {"execute": "x-blockdev-set-write-cache", "arguments": {"id": "disk", "writeback": false}}
  {"execute": "quit"}

Press Ctrl-C to stop; the image is flushed and closed.
EOT
exec "$build/qblock-storage-daemon" \
    --chardev "socket,id=qmp0,path=$qmp,server=on,wait=off" \
    --monitor chardev=qmp0 \
    --blockdev "driver=file,node-name=disk-file,filename=$img" \
    --blockdev driver=qcow2,node-name=disk-qcow2,file=disk-file \
    --nbd-server "addr.type=inet,addr.host=localhost,addr.port=$port" \
    --export type=nbd,id=disk,node-name=disk-qcow2,name=disk,writable=on \
    --export "type=vhost-user-blk,id=vdisk,node-name=disk-qcow2,addr.type=unix,addr.path=$vub,writable=on"
