#!/usr/bin/env bash
# Runs every interop script in this folder against the real QEMU tools.
#   tests/interop/run.sh BUILD_DIR
# Each script prints "N passed, N failed[, N skipped]" as its last summary
# line (the skipped part counts groups of cases it could not run) and exits
# 77 when the QEMU tool it compares against is missing.
set -u
build=${1:?usage: run.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0 skip=0
for script in "$here"/*.sh; do
    [ "$(basename "$script")" = run.sh ] && continue
    name=$(basename "$script" .sh)
    out=$(timeout 900 bash "$script" "$build" 2>&1)
    rc=$?
    if [ $rc -eq 77 ]; then
        echo "$name: skipped: $(tail -n 1 <<<"$out")"
        skip=$((skip + 1))
        continue
    fi
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
    p=$(sed -n 's/^\([0-9]*\) passed.*/\1/p' <<<"$line")
    f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
    s=$(sed -n 's/.* \([0-9]*\) skipped.*/\1/p' <<<"$line")
    if [ -z "$line" ]; then
        p=0 f=1
    elif [ $rc -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
        f=1
    fi
    echo "$name: ${p:-0} passed, ${f:-0} failed, ${s:-0} skipped"
    grep -E '^skip' <<<"$out"
    if [ "${f:-0}" -ne 0 ]; then
        grep -v '^ok' <<<"$out" | tail -n 60
    fi
    pass=$((pass + ${p:-0})) fail=$((fail + ${f:-0})) skip=$((skip + ${s:-0}))
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
