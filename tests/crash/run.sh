#!/usr/bin/env bash
# The crash-consistency layer: power cuts at every request of every qcow2
# metadata operation (test-qcow2-crash) and of qblock-img commit and rebase
# (test-qcow2-crash-tools); docs/reliability.md shows the matrix.
#   tests/crash/run.sh BUILD_DIR
# A case marked as a known bug (TAP "not ok ... # TODO") is counted as an
# expected failure and its reason printed; any other failure fails.
set -u
build=${1:?usage: run.sh BUILD_DIR}
pass=0 fail=0 skip=0 xfail=0
for name in test-qcow2-crash test-qcow2-crash-tools test-bitmap-crash; do
    exe=$build/tests/crash/$name
    if [ ! -x "$exe" ]; then
        echo "$name: not built (looked for $exe)"
        fail=$((fail + 1))
        continue
    fi
    out=$(timeout 1800 "$exe" --tap --keep-going 2>&1)
    rc=$?
    grep -E '^# (crash-matrix|.* failed at)' <<<"$out"
    p=$(grep -cE '^ok [0-9]+' <<<"$out")
    s=$(grep -cE '^ok [0-9]+ .*# SKIP' <<<"$out")
    x=$(grep -cE '^not ok [0-9]+ .*# TODO' <<<"$out")
    f=$(grep -cE '^not ok [0-9]+' <<<"$out")
    p=$((p - s)) f=$((f - x))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        # a crash, an abort or the timeout outside a test case
        f=1
    fi
    printf '%-24s %3d passed, %d failed, %d skipped, %d expected failures\n' \
        "$name" "$p" "$f" "$s" "$x"
    grep -E '^not ok [0-9]+ .*# TODO' <<<"$out" | sed 's/^/  expected failure: /'
    if [ "$f" -ne 0 ]; then
        echo "--- output of $name ---"
        tail -n 60 <<<"$out"
    fi
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s)) xfail=$((xfail + x))
done
echo "crash: $pass passed, $fail failed, $skip skipped, $xfail expected failures"
[ "$fail" -eq 0 ]
