#!/usr/bin/env bash
# blockdev-reopen and discards on snapshot-access, run by the same QMP
# scripts against the real qemu-storage-daemon 7.2 and ours; the
# scenarios are in reopen-vs-qsd.py, the comparison is jobs-vs-qsd.py's.
exec python3 "$(dirname "$0")/reopen-vs-qsd.py" "$@"
