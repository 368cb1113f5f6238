#!/usr/bin/env bash
# Runs the test layers and sums them up (the guest layer boots a Linux
# guest under QEMU TCG, in about 15 s).
#   tests/run-all.sh BUILD_DIR [unit|qtest|crash|iotests|iotests-qemu|interop|daemon|guest|docs|structure|demo]...
# Every layer prints its own "N passed, N failed" line; the last line is the
# total.  Exits non-zero if anything failed.  A layer that cannot run (its
# runner is missing, the qcow2 driver is not built) is a failure, never a
# silent omission.
# Each script or program a layer runs ends its line with its time,
# "(12.3 s, CPU 4.5 s)" (tests/timing.bash); before the total come each
# layer's time and the ten slowest scripts and programs of the run, so
# that a test that grows slow is seen; then the scripts that failed once
# and passed when run again (the unit, qtest, interop and daemon layers
# run a failed one a second time: QBLOCK_TEST_RETRIES=0 says never), and, if
# anything failed, the scripts and cases that failed, so that the last
# lines of a run (all that a CI log may keep) name them.
set -u
build=${1:?usage: run-all.sh BUILD_DIR [layer...]}
shift
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
layers=("$@")
# iotests-qemu runs none of qblock's code (our iotests against the real
# QEMU tools): make check-upstream runs it, beside QEMU's own iotests
[ ${#layers[@]} -eq 0 ] && layers=(unit qtest crash iotests interop daemon guest docs structure demo)

. "$src/tests/timing.bash"
total_pass=0 total_fail=0 total_skip=0
# "SECONDS<tab>LAYER: NAME (TIME)" of every timed script or program, and
# "LAYER (TIME)" of every layer
times_log=$(mktemp)
# "LAYER: LINE" of every script that failed and of its first failed cases
failures_log=$(mktemp)
# "LAYER: NAME: ..." of every script that failed, then passed when run
# again (tests/lanes.bash)
flaky_log=$(mktemp)
layer_times=()
trap 'rm -f "$times_log" "$failures_log" "$flaky_log"' EXIT

# Adds the counts from a runner's "N passed, N failed[, N skipped]" line.
count_line() {
    local line=$1
    local p f s
    p=$(sed -n 's/.*\b\([0-9]\+\) passed.*/\1/p' <<<"$line")
    f=$(sed -n 's/.*\b\([0-9]\+\) failed.*/\1/p' <<<"$line")
    s=$(sed -n 's/.*\b\([0-9]\+\) skipped.*/\1/p' <<<"$line")
    total_pass=$((total_pass + ${p:-0}))
    total_fail=$((total_fail + ${f:-0}))
    total_skip=$((total_skip + ${s:-0}))
}

# collect_times LAYER LOG: the timed lines of a layer's output, as
# "SECONDS<tab>LAYER: NAME (TIME)"; NAME is the line's first word.
collect_times() {
    sed -n -E 's/^ *([^ :]+):? .*\(([0-9]+)\.([0-9]) s(, CPU [0-9.]+ s)\).*/\2.\3\t'"$1"': \1 (\2.\3 s\4)/p' \
        "$2" >> "$times_log"
}

# collect_failures LAYER LOG SUMMARY: the lines of a layer's output that
# name a failure: a script's or program's count with failures (not the
# layer's own SUMMARY line), a script that printed no summary or was
# killed, and the first ten failed cases (FAIL, "not ok" other than an
# expected failure).
collect_failures() {
    local layer=$1 log=$2
    {
        grep -E '^[A-Za-z0-9_./()-]+:? +[0-9]+ passed, [1-9][0-9]* failed|^[^ ].*(printed no summary|killed after|exited [0-9]+ with no failure|lane of .* died)' "$log" |
            grep -vxF -- "$3"
        grep -E '^(FAIL\b|not ok |Failures: )|  \[failed\] ' "$log" | grep -v '# TODO' | head -n 10
    } | sed "s/^/$layer: /" >> "$failures_log"
}

run_layer() {
    local name=$1; shift
    local log
    log=$(mktemp)
    echo "=== $name ==="
    timing_start
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    timing_stop
    layer_times+=("$name ($timing)")
    collect_times "$name" "$log"
    sed -n "s/^flaky \([^:]*\):.*/$name: \1/p" "$log" >> "$flaky_log"
    local line
    line=$(grep -E '^([A-Za-z]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "$name: runner printed no summary (exit $rc); counting it as one failure" |
            tee -a "$failures_log"
        total_fail=$((total_fail + 1))
    else
        count_line "$line"
        grep -qE '\b[1-9][0-9]* failed' <<<"$line" && collect_failures "$name" "$log" "$line"
        if [ "$rc" -ne 0 ] && ! grep -qE '[1-9][0-9]* failed' <<<"$line"; then
            echo "$name: runner exited $rc; counting it as one failure" |
                tee -a "$failures_log"
            total_fail=$((total_fail + 1))
        fi
    fi
    rm -f "$log"
}

# A layer that cannot run counts as one failure, with the reason.
cannot_run() {
    echo "=== $1 ==="
    echo "$1: cannot run: $2; counting it as one failure" | tee -a "$failures_log"
    total_fail=$((total_fail + 1))
}

# The iotests in one format, against qblock's tools (or with -qemu, the
# real QEMU tools); qcow2 needs the driver, which every build has.
iotests() {
    local fmt=$1 name=$2 opt=${3:-}
    if [ ! -x "$src/tests/qemu-iotests/check" ]; then
        cannot_run "$name" "tests/qemu-iotests/check is not executable"
    elif [ "$fmt" = qcow2 ] &&
         ! "$build/qblock-img" --help | grep -q '^Supported formats:.* qcow2'; then
        cannot_run "$name" "qblock-img lists no qcow2 driver"
    else
        run_layer "$name" bash -c "cd '$src/tests/qemu-iotests' && QBLOCK_BUILD='$build' ./check -$fmt $opt"
    fi
}

# The demo layer: scripts/demo.sh, its output kept in BUILD/demo.log.
demo() {
    local rc
    timing_start
    bash "$src/scripts/demo.sh" "$build" > "$build/demo.log" 2>&1
    rc=$?
    timing_stop
    if [ $rc -eq 0 ]; then
        echo "demo: 1 passed, 0 failed ($timing)"
    else
        tail -n 20 "$build/demo.log"
        echo "demo: 0 passed, 1 failed ($timing)"
    fi
}

for layer in "${layers[@]}"; do
    case $layer in
    unit) run_layer unit bash "$src/tests/unit/run.sh" "$build" ;;
    qtest) run_layer qtest bash "$src/tests/qtest/run.sh" "$build" ;;
    crash) run_layer crash bash "$src/tests/crash/run.sh" "$build" ;;
    iotests)
        iotests raw "iotests (raw)"
        iotests qcow2 "iotests (qcow2)" ;;
    iotests-qemu)
        iotests raw "iotests against QEMU (raw)" -qemu
        iotests qcow2 "iotests against QEMU (qcow2)" -qemu ;;
    interop)
        if [ -x "$src/tests/interop/run.sh" ]; then
            run_layer interop "$src/tests/interop/run.sh" "$build"
        else
            cannot_run interop "tests/interop/run.sh is not executable"
        fi ;;
    daemon) run_layer daemon bash "$src/tests/daemon/run.sh" "$build" ;;
    guest) run_layer guest bash "$src/tests/guest/run.sh" "$build" ;;
    docs) run_layer docs bash "$src/tests/check-docs.sh" "$build" ;;
    structure) run_layer structure python3 "$src/tests/check-structure.py" "$src" ;;
    demo) run_layer demo demo ;;
    *) echo "unknown test layer '$layer'" >&2; exit 2 ;;
    esac
done

echo "=== times ==="
printf '%s\n' "${layer_times[@]}"
echo "slowest 10:"
sort -t "$(printf '\t')" -k1,1 -rn "$times_log" | head -n 10 | cut -f 2- |
    sed 's/^/  /'
if [ -s "$flaky_log" ]; then
    echo "failed once, passed when run again (see each one's first run above):"
    cut -c 1-200 "$flaky_log" | sed 's/^/  /'
fi
if [ -s "$failures_log" ]; then
    echo "failed:"
    head -n 40 "$failures_log" | cut -c 1-200 | sed 's/^/  /'
fi
echo "=== total ==="
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
