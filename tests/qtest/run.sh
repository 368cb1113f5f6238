#!/usr/bin/env bash
# Runs every qtest program (device models driven as a guest would) in TAP
# mode and counts the results.
#   tests/qtest/run.sh BUILD_DIR
# The programs run two at a time (tests/lanes.bash; QBLOCK_TEST_LANES=1:
# one at a time); each works on mkstemp files of its own.
set -u
build=${1:?usage: run.sh BUILD_DIR}
. "$(dirname "$0")/../timing.bash"
. "$(dirname "$0")/../lanes.bash"
# a program that failed runs once more (tests/lanes.bash): a few cases
# time what the kernel or the scheduler does; 0: never
lanes_retries=${QBLOCK_TEST_RETRIES:-1}
pass=0 fail=0 skip=0 names=()
for exe in "$build"/tests/qtest/test-*; do
    [ -x "$exe" ] && [ -f "$exe" ] && names+=("$(basename "$exe")")
done
programs=${#names[@]}

lane_job() { timeout 300 "$build/tests/qtest/$1" --tap; }

lane_report() {
    local name=$1 out p s f
    out=$(< "$lane_out")
    lanes_retry_note "$name"
    p=$(grep -cE '^ok [0-9]+' <<<"$out" | tr -d ' ')
    s=$(grep -cE '^ok [0-9]+ .*# SKIP' <<<"$out" | tr -d ' ')
    f=$(grep -cE '^not ok [0-9]+' <<<"$out" | tr -d ' ')
    p=$((p - s))
    if [ "$lane_rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        # a crash or an abort: the test that was running failed
        f=1
    fi
    printf '%-28s %3d passed, %d failed, %d skipped (%s)\n' \
        "$name" "$p" "$f" "$s" "$lane_time"
    if [ "$f" -ne 0 ]; then
        echo "--- output of $name ---"
        tail -n 40 <<<"$out"
    fi
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
}

lanes_run "${names[@]}"
# No program at all is a layer that vanished (an unbuilt tree), not a pass.
if [ "$programs" -eq 0 ]; then
    echo "qtest: no test programs in $build/tests/qtest"
    fail=1
fi
echo "qtest: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
