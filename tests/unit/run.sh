#!/usr/bin/env bash
# Runs every GTest program of tests/unit in TAP mode and counts the results.
#   tests/unit/run.sh BUILD_DIR
set -u
build=${1:?usage: run.sh BUILD_DIR}
pass=0 fail=0 skip=0 programs=0
for exe in "$build"/tests/unit/test-*; do
    [ -x "$exe" ] && [ -f "$exe" ] || continue
    programs=$((programs + 1))
    name=$(basename "$exe")
    out=$(timeout 300 "$exe" --tap 2>&1)
    rc=$?
    p=$(grep -cE '^ok [0-9]+' <<<"$out" | tr -d ' ')
    s=$(grep -cE '^ok [0-9]+ .*# SKIP' <<<"$out" | tr -d ' ')
    f=$(grep -cE '^not ok [0-9]+' <<<"$out" | tr -d ' ')
    p=$((p - s))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        # a crash or an abort outside a test case
        f=1
    fi
    printf '%-28s %3d passed, %d failed, %d skipped\n' "$name" "$p" "$f" "$s"
    if [ "$f" -ne 0 ]; then
        echo "--- output of $name ---"
        tail -n 40 <<<"$out"
    fi
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
done
# No program at all is a layer that vanished (an unbuilt tree), not a pass.
if [ "$programs" -eq 0 ]; then
    echo "unit: no test programs in $build/tests/unit"
    fail=1
fi
echo "unit: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
