#!/usr/bin/env bash
# The storage daemon's operations on live nodes (block_resize, snapshots,
# transaction) against the real qemu-storage-daemon 7.2: the same QMP
# script, the same replies, identical images (daemon-ops-vs-qsd.py).
#
#   tests/interop/daemon-ops-vs-qsd.sh BUILD_DIR
#
# Exits 77 if qemu-storage-daemon is not installed.
set -u
build=${1:?usage: daemon-ops-vs-qsd.sh BUILD_DIR}
exec python3 "$(dirname "$0")/daemon-ops-vs-qsd.py" "$build"
