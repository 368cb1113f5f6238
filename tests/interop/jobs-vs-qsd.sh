#!/usr/bin/env bash
# Jobs (blockdev-create, block-stream, block-commit, blockdev-mirror) run
# by the same QMP scripts against the real qemu-storage-daemon and ours;
# the scenarios and the comparison are in jobs-vs-qsd.py.
exec python3 "$(dirname "$0")/jobs-vs-qsd.py" "$@"
