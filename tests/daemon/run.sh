#!/usr/bin/env bash
# Runs the storage daemon tests (tests/daemon/test-*.py) and sums them up.
#   tests/daemon/run.sh BUILD_DIR
# Each script prints "NAME: N passed, N failed, N skipped"; a script that
# dies without that line, or exits non-zero with no failure counted, counts
# as one failure.  The scripts run in two lanes (tests/lanes.bash;
# QBLOCK_TEST_LANES=1: one at a time), each daemon in its own mktemp
# folder.
set -u
build=${1:?usage: run.sh BUILD_DIR}
build=$(cd "$build" && pwd)
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../timing.bash"
. "$dir/../lanes.bash"
# a failed script runs once more (tests/lanes.bash); 0: never
lanes_retries=${QBLOCK_TEST_RETRIES:-1}
pass=0 fail=0 skip=0
if [ ! -x "$build/qblock-storage-daemon" ]; then
    echo "daemon: $build/qblock-storage-daemon is missing"
    echo "daemon: 0 passed, 1 failed, 0 skipped"
    exit 1
fi
lane_job() { cd "$dir" && timeout 600 python3 "$dir/$1.py" "$build"; }

# A script's FAIL and skip lines and its summary; if it died without one,
# or exited non-zero with no failure counted, the end of its output.
lane_report() {
    local name=$1 out line p f s
    out=$(< "$lane_out")
    lanes_retry_note "$name"
    line=$(grep -E '^[a-z-]+: [0-9]+ passed, [0-9]+ failed' <<<"$out" |
           tail -n 1)
    if [ -z "$line" ]; then
        echo "--- $name.py printed no summary ($lane_time) ---"
        tail -n 30 <<<"$out"
        fail=$((fail + 1))
        return
    fi
    grep -E '^(FAIL|skip) ' <<<"$out"
    echo "$line ($lane_time)"
    p=$(sed -n 's/.* \([0-9]\+\) passed.*/\1/p' <<<"$line")
    f=$(sed -n 's/.* \([0-9]\+\) failed.*/\1/p' <<<"$line")
    s=$(sed -n 's/.* \([0-9]\+\) skipped.*/\1/p' <<<"$line")
    if [ "$lane_rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "--- $name.py exited $lane_rc with no failure counted ---"
        tail -n 30 <<<"$out"
        f=1
    fi
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + ${s:-0}))
}

names=()
for t in "$dir"/test-*.py; do
    names+=("$(basename "$t" .py)")
done
# the longest first (measured: tests/run-all.sh prints the slowest)
lanes_first=(test-jobs test-nbd-security)
# CPU time under a fifth of the wall time (tests/lanes.bash): they wait
# on a front-end's timers, a throttled job's rate or a throttle group's
lanes_waiting=(test-vhost-user-blk test-backup test-fd-exhaustion
               test-throttle test-write-threshold test-quorum)
lanes_run "${names[@]}"
echo "daemon: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
