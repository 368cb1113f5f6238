#!/usr/bin/env bash
# make bench: every benchmark, each comparing qblock with the real QEMU
# tools in the same run.  Figures are printed, never asserted.
set -u
build=${1:?usage: run-all.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
echo "== qemu-img bench vs qblock-img bench ($(nproc) CPUs, $(date -u +%Y-%m-%d)) =="
bash "$here/bench-img.sh" "$build"
echo "== qcow2 metadata overlap checks: none / cached / all, qemu-img and qblock-img =="
bash "$here/bench-overlap.sh" "$build"
echo "== qcow2 metadata overlap checks: instructions per write (valgrind) =="
bash "$here/bench-overlap-cost.sh" "$build"
echo "== qemu-img convert -c vs qblock-img convert -c =="
bash "$here/bench-convert-compress.sh" "$build"
echo "== qcow2 writethrough vs writeback, qemu-img bench vs qblock-img bench =="
bash "$here/bench-writethrough.sh" "$build"
echo "== encryption: convert -W and writes to LUKS qcow2 / luks, qemu vs qblock =="
bash "$here/bench-encryption.sh" "$build"
echo "== blockdev-mirror, qemu-storage-daemon vs qblock-storage-daemon =="
bash "$here/bench-jobs.sh" "$build"
echo "== blockdev-backup: instructions, syscalls, page faults per MiB, qemu-storage-daemon vs qblock =="
bash "$here/bench-backup-cost.sh" "$build"
echo "== rbd: convert to RBD and bench, direct and through an NBD export, QEMU vs qblock =="
bash "$here/bench-rbd.sh" "$build"
echo "== the exports end to end: fio (nbd engine) against qblock and QEMU servers =="
bash "$here/bench-export.sh" "$build"
echo "== iothreads: two exports, two clients, main loop / one / two iothreads, QEMU vs qblock =="
bash "$here/bench-iothreads.sh" "$build"
echo "== iothread busy-polling: poll-max-ns=0 vs 32768, vhost-user-blk and NBD, QEMU vs qblock =="
bash "$here/bench-iothread-poll.sh" "$build"
echo "== tail latency of a reader while another client writes (in-place writes on/off, QEMU) =="
bash "$here/bench-tail-latency.sh" "$build"
echo "== the NBD client: convert to and from an export, bench over NBD, qemu-img vs qblock-img =="
bash "$here/bench-nbd-client.sh" "$build"
