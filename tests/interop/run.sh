#!/usr/bin/env bash
# Runs every interop script in this folder against the real QEMU tools.
#   tests/interop/run.sh BUILD_DIR
# Each script prints "N passed, N failed[, N skipped]" as its last summary
# line (the skipped part counts groups of cases it could not run) and exits
# 77 when the QEMU tool it compares against is missing.  The scripts run
# in three lanes (tests/lanes.bash; QBLOCK_TEST_LANES=1: one at a time):
# each works in its own mktemp folder and picks free ports.  Three on two
# cores, because most scripts wait on a peer for part of their time (rbd,
# jobs-vs-qsd, qsd-objects and tls-x509-check a third to a half of it):
# the layer took 606 s with two lanes and 532 s with three, its CPU time
# the same (1,000 s).
set -u
build=${1:?usage: run.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../timing.bash"
lanes_default=3
. "$here/../lanes.bash"
# a failed script runs once more (tests/lanes.bash); 0: never
lanes_retries=${QBLOCK_TEST_RETRIES:-1}

lane_job() { timeout 900 bash "$here/$1.sh" "$build"; }

pass=0 fail=0 skip=0
# The summary line of a finished script, its skips, and on a failure the
# end of its output.
lane_report() {
    local name=$1 out line p f s
    out=$(< "$lane_out")
    lanes_retry_note "$name"
    if [ "$lane_rc" -eq 77 ]; then
        echo "$name: skipped: $(tail -n 1 <<<"$out") ($lane_time)"
        skip=$((skip + 1))
        return
    fi
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
    p=$(sed -n 's/^\([0-9]*\) passed.*/\1/p' <<<"$line")
    f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
    s=$(sed -n 's/.* \([0-9]*\) skipped.*/\1/p' <<<"$line")
    if [ -z "$line" ]; then
        p=0 f=1
    elif [ "$lane_rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
        f=1
    fi
    echo "$name: ${p:-0} passed, ${f:-0} failed, ${s:-0} skipped ($lane_time)"
    grep -E '^skip' <<<"$out"
    if [ "${f:-0}" -ne 0 ]; then
        [ "$lane_rc" -eq 124 ] && echo "$name: killed after 900 s"
        grep -v '^ok' <<<"$out" | tail -n 60
    fi
    pass=$((pass + ${p:-0})) fail=$((fail + ${f:-0})) skip=$((skip + ${s:-0}))
}

names=()
for script in "$here"/*.sh; do
    name=$(basename "$script" .sh)
    [ "$name" = run ] || names+=("$name")
done
# the longest first (measured: tests/run-all.sh prints the slowest);
# nbd-client-timeout waits out a 60 s deadline
lanes_first=(rbd luks-interop qcow2-interop luks-qcow2-interop jobs-vs-qsd
             qcow2-measure-interop)
# CPU time under a fifth of the wall time (tests/lanes.bash):
# nbd-client-timeout waits out QEMU's 60 s handshake deadline, the others
# a server's reconnect delay and a hostile server's silences
lanes_waiting=(nbd-client-timeout nbd-client-reconnect nbd-hostile)
lanes_run "${names[@]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
