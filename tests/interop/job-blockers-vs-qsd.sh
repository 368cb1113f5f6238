#!/usr/bin/env bash
# What a running block job forbids on its nodes (block_resize,
# blockdev-del, snapshots, second jobs, exports), against the real
# qemu-storage-daemon; the scenarios are in job-blockers-vs-qsd.py.
exec python3 "$(dirname "$0")/job-blockers-vs-qsd.py" "$@"
