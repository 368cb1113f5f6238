#!/usr/bin/env bash
# Runs each libFuzzer harness for a while and sums up (make fuzz).
# Usage: run.sh BUILD_DIR SECONDS [HARNESS...]   (default: all harnesses)
#
# Per harness: the corpus it grows is BUILD_DIR/fuzz-corpus/HARNESS (the
# committed seeds of tests/fuzz/corpus/HARNESS are read as well, never
# written), its log BUILD_DIR/fuzz-logs/HARNESS.log, and what a crash, a
# leak or a hang leaves BUILD_DIR/artifacts/HARNESS/.  A harness that
# stops on any of these has failed.  Prints per harness the runs, the
# coverage (libFuzzer's cov: edges and ft: features) and the result, then
# "N passed, N failed"; exits 1 if any failed.
set -uo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
seconds=$2
shift 2
all="fuzz-qcow2 fuzz-nbd-server fuzz-vhost-user fuzz-qmp fuzz-options
     fuzz-blkdebug fuzz-vmstate fuzz-luks fuzz-nbd-client fuzz-nbd-tls
     fuzz-bochs fuzz-cloop fuzz-parallels fuzz-vmdk fuzz-vpc fuzz-vdi
     fuzz-vhdx fuzz-qed fuzz-qcow fuzz-dmg fuzz-vvfat-parse"
harnesses=${*:-$all}

# Longest input per harness: a seed image or stream must fit.
max_len() {
    case $1 in
    fuzz-qcow2) echo 131072 ;;
    fuzz-qed) echo 32768 ;;
    fuzz-vmstate) echo 32768 ;;
    fuzz-nbd-client|fuzz-bochs|fuzz-cloop|fuzz-parallels|fuzz-vmdk|\
    fuzz-vpc|fuzz-vdi|fuzz-vhdx|fuzz-qcow|fuzz-dmg|fuzz-vvfat-parse)
        echo 16384 ;;
    *) echo 4096 ;;
    esac
}

# fuzz_one HARNESS: runs it, prints its one-line result; exits 0 when it
# passed.
fuzz_one() {
    local h=$1
    local bin=$build/tests/fuzz/$h
    local corpus=$build/fuzz-corpus/$h
    local artifacts=$build/artifacts/$h
    local log=$build/fuzz-logs/$h.log
    if [ ! -x "$bin" ]; then
        echo "$h: not built ($bin)"
        return 1
    fi
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
    # -timeout: one input running longer is a hang; the outer timeout
    # catches a harness that hangs outside any input.  Only the end of
    # the output is kept: what the code under test prints about hostile
    # input (qemu-img check's report of a broken image) runs to gigabytes
    # in 30 minutes, and the statistics and any crash report come last.
    timeout $((seconds + 300)) nice -n 10 "$bin" \
        -max_total_time="$seconds" -max_len="$(max_len "$h")" \
        -timeout=30 -rss_limit_mb=2560 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" \
        "$corpus" "$src/tests/fuzz/corpus/$h" 2>&1 | tail -n 20000 >"$log"
    local rc=${PIPESTATUS[0]} result
    local runs cov ft units
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    units=$(find "$corpus" -type f | wc -l)
    if [ "$rc" = 0 ]; then
        result=passed
    else
        local found summary
        found=$(grep -o "Test unit written to .*" "$log" | tail -1 |
                sed 's/Test unit written to //')
        # the first line that names the failure: an assertion, a sanitizer
        summary=$(grep -m1 -E "Assertion .* failed|runtime error:|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)" "$log")
        result="FAILED (exit $rc): ${summary:-see $log}${found:+; input $found}"
    fi
    echo "$h: ${seconds} s, ${runs:-0} runs, cov ${cov:-?}, ft ${ft:-?}, corpus $units: $result"
    [ "$rc" = 0 ]
}

# Each harness is one process on one core: FUZZ_JOBS (default: the
# number of cores) run at once, each to a result file of its own, and
# the results are printed in the order the harnesses were given.
jobs=${FUZZ_JOBS:-$(nproc)}
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
running=0
for h in $harnesses; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
    { fuzz_one "$h" > "$results/$h"; echo $? > "$results/$h.rc"; } &
    running=$((running + 1))
done
wait
passed=0
failed=0
for h in $harnesses; do
    cat "$results/$h"
    if [ "$(cat "$results/$h.rc")" = 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
