#!/usr/bin/env bash
# Runs the storage daemon tests (tests/daemon/test-*.py) and sums them up.
#   tests/daemon/run.sh BUILD_DIR
# Each script prints "NAME: N passed, N failed, N skipped"; a script that
# dies without that line, or exits non-zero with no failure counted, counts
# as one failure.
set -u
build=${1:?usage: run.sh BUILD_DIR}
build=$(cd "$build" && pwd)
dir=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0 skip=0
if [ ! -x "$build/qblock-storage-daemon" ]; then
    echo "daemon: $build/qblock-storage-daemon is missing"
    echo "daemon: 0 passed, 1 failed, 0 skipped"
    exit 1
fi
for t in "$dir"/test-*.py; do
    out=$(cd "$dir" && timeout 600 python3 "$t" "$build" 2>&1)
    rc=$?
    line=$(grep -E '^[a-z-]+: [0-9]+ passed, [0-9]+ failed' <<<"$out" |
           tail -n 1)
    if [ -z "$line" ]; then
        echo "--- $(basename "$t") printed no summary ---"
        tail -n 30 <<<"$out"
        fail=$((fail + 1))
        continue
    fi
    grep -E '^(FAIL|skip) ' <<<"$out"
    echo "$line"
    p=$(sed -n 's/.* \([0-9]\+\) passed.*/\1/p' <<<"$line")
    f=$(sed -n 's/.* \([0-9]\+\) failed.*/\1/p' <<<"$line")
    s=$(sed -n 's/.* \([0-9]\+\) skipped.*/\1/p' <<<"$line")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "--- $(basename "$t") exited $rc with no failure counted ---"
        tail -n 30 <<<"$out"
        f=1
    fi
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + ${s:-0}))
done
echo "daemon: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
