# Runs a layer's test scripts or programs several at once, in lanes
# (sourced, not run; needs tests/timing.bash).  Most of a test's time is
# spent waiting (for a server, for a timeout it tests, for the disk) or
# on one CPU (a script runs one program after another), so that two
# lanes on two cores finish a layer in little more than half the time.
#
#   lanes_run NAME...       runs `lane_job NAME` for each NAME, at most
#                           $QBLOCK_TEST_LANES (default 2) at once, and
#                           calls `lane_report NAME` for each, in the
#                           order given, as soon as it and every NAME
#                           before it are done
#
# lane_job runs in a subshell whose output goes to a file; lane_report
# runs in the caller's shell (it may count) and finds:
#   $lane_out     the file holding lane_job's output (stdout and stderr)
#   $lane_rc      lane_job's exit status
#   $lane_time    "12.3 s, CPU 4.5 s" (tests/timing.bash)
# so that each test's output stays together, never interleaved with
# another's, and the layer prints as if its tests had run one by one.
#
# lanes_first: NAMEs to start before the others (the longest, so that
# the lanes end together instead of one long test running alone at the
# end); they are still reported in their place.
#
# lanes_retries (0 unless the caller sets it): a test that failed (its
# exit status other than 0 and 77, or a "N failed" line with N > 0) runs
# once more, alone in its lane, and lane_report sees the second run, with
# $lane_first_out naming the first one's output (empty when there was no
# second run).  For the layers whose tests talk to other programs over
# sockets and timeouts (interop, daemon) or time what the kernel does
# (unit, qtest), where a loaded machine can make one case late; the
# report names every test that needed it.
#
# lanes_waiting: NAMEs that spend nearly all their time waiting (on a
# deadline they test, a peer's timer), measured as CPU time under a
# fifth of the wall time.  They run in lanes of their own,
# $QBLOCK_TEST_WAIT_LANES (default 2) beside the others, so that a 60 s
# wait does not hold one of the lanes the CPU-bound tests share.
#
# lanes_default (set before sourcing; 2 when unset): the layer's number
# of lanes when QBLOCK_TEST_LANES does not say.  A layer whose tests
# wait on their peers for part of their time (a server's reply, a TLS
# handshake, a storage daemon's job) but are not waiting ones sets 3:
# the third lane fills the other two's waits.
#
# QBLOCK_TEST_LANES=1 runs one test at a time, as before lanes (and
# then the waiting ones too, in the same single lane).  The
# tests of a layer that runs in lanes must share no fixed port, socket
# or scratch path (each works in a mktemp folder and picks free ports).

lanes=${QBLOCK_TEST_LANES:-${lanes_default:-2}}
wait_lanes=${QBLOCK_TEST_WAIT_LANES:-2}
[ "$lanes" -gt 1 ] || wait_lanes=0
lanes_first=()
lanes_waiting=()
lanes_retries=0

# Whether the test whose output is $lane_out and exit status $lane_rc
# failed.
lanes_failed() {
    { [ "$lane_rc" -ne 0 ] && [ "$lane_rc" -ne 77 ]; } ||
        grep -qE '\b[1-9][0-9]* failed' "$lane_out"
}

# lanes_job_in NAME: lane_job NAME with its output, time and exit status
# in $lanes_dir/NAME.{out,time,rc}; the exit status last, since its
# presence says that the test is done.
lanes_job_in() {
    local name=$1 rc
    timing_start
    lane_job "$name" > "$lanes_dir/$name.out" 2>&1
    rc=$?
    timing_stop
    echo "$timing" > "$lanes_dir/$name.time"
    echo "$rc" > "$lanes_dir/$name.rc.part"
    mv "$lanes_dir/$name.rc.part" "$lanes_dir/$name.rc"
}

# For lane_report: what the first run of a test run twice said, and
# whether the second passed ("flaky NAME: ..." lines, which
# tests/run-all.sh lists at the end of the run).
lanes_retry_note() {
    [ -n "$lane_first_out" ] || return 0
    if lanes_failed; then
        echo "$1: failed, and failed again when run again; the first run ended:"
    else
        echo "flaky $1: failed, then passed when run again; the first run ended:"
    fi
    grep -vE '^(ok|skip)\b' "$lane_first_out" | tail -n 20 | sed 's/^/    /'
}

# Whether NAME runs in a waiting lane.
lanes_is_waiting() {
    [ "$wait_lanes" -gt 0 ] && [[ " ${lanes_waiting[*]} " == *" $1 "* ]]
}

# lanes_start_next WAITING: starts the first test of $order not yet
# started that is (WAITING=1) or is not (WAITING=0) a waiting one, and
# says whether there was one.
lanes_start_next() {
    local name w
    for name in "${order[@]}"; do
        [ -e "$lanes_dir/$name.started" ] && continue
        w=0
        lanes_is_waiting "$name" && w=1
        [ "$w" -eq "$1" ] || continue
        : > "$lanes_dir/$name.started"
        lanes_job_in "$name" &
        return 0
    done
    return 1
}

lanes_run() {
    local names=("$@") order=() name printed=0 running running_wait
    for name in "${lanes_first[@]}"; do
        [[ " ${names[*]} " == *" $name "* ]] && order+=("$name")
    done
    for name in "${names[@]}"; do
        [[ " ${lanes_first[*]} " == *" $name "* ]] || order+=("$name")
    done
    lanes_dir=$(mktemp -d)
    while [ $printed -lt ${#names[@]} ]; do
        running=0 running_wait=0
        for name in "${order[@]}"; do
            [ -e "$lanes_dir/$name.started" ] || continue
            [ -f "$lanes_dir/$name.rc" ] && continue
            if lanes_is_waiting "$name"; then
                running_wait=$((running_wait + 1))
            else
                running=$((running + 1))
            fi
        done
        while [ $running -lt "$lanes" ] && lanes_start_next 0; do
            running=$((running + 1))
        done
        while [ $running_wait -lt "$wait_lanes" ] && lanes_start_next 1; do
            running_wait=$((running_wait + 1))
        done
        while [ $printed -lt ${#names[@]} ] &&
              [ -f "$lanes_dir/${names[printed]}.rc" ]; do
            name=${names[printed]}
            lane_out=$lanes_dir/$name.out
            lane_rc=$(< "$lanes_dir/$name.rc")
            lane_time=$(< "$lanes_dir/$name.time")
            lane_first_out=
            if [ "$lanes_retries" -gt 0 ] && lanes_failed; then
                lane_first_out=$lanes_dir/$name.first.out
                mv "$lane_out" "$lane_first_out"
                rm -f "$lanes_dir/$name.rc"
                lanes_job_in "$name"
                lane_rc=$(< "$lanes_dir/$name.rc")
                lane_time=$(< "$lanes_dir/$name.time")
            fi
            lane_report "$name"
            printed=$((printed + 1))
        done
        [ $printed -lt ${#names[@]} ] || break
        wait -n
        if [ $? -eq 127 ]; then
            # no lane is left, yet a started test has no exit status:
            # its lane died.  It counts as failed rather than waited for.
            for name in "${order[@]}"; do
                [ -e "$lanes_dir/$name.started" ] || continue
                [ -f "$lanes_dir/$name.rc" ] && continue
                echo "lane of $name died" > "$lanes_dir/$name.out"
                echo "? s, CPU ? s" > "$lanes_dir/$name.time"
                echo 255 > "$lanes_dir/$name.rc"
            done
        fi
    done
    rm -rf "$lanes_dir"
}
