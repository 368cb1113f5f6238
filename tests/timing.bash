# The time a test script or program took, for the runners' summary lines
# (sourced, not run).  Every runner ends a script's or program's line with
# "(12.3 s, CPU 4.5 s)": the wall time, then the user + system time of the
# processes it ran.  A script whose CPU time is far below its wall time
# waits (sleeps, timeouts, a server it polls); one whose CPU time is near
# or above it works.  tests/run-all.sh reads these endings back for its
# "slowest" lists, so that a test that grows slow is seen, not guessed.
#
#   timing_start            before the run, in the shell that waits for it
#   timing_stop             after it: sets $timing to "12.3 s, CPU 4.5 s"
#
# The CPU time counts the processes this shell (or a subshell: BASHPID)
# has waited for, and theirs in turn; a daemon a script leaves running
# is not counted.

. "$(dirname "${BASH_SOURCE[0]}")/python.bash"

timing_hz=$(getconf CLK_TCK 2>/dev/null || echo 100)

# Sets timing_cpu to the CPU milliseconds (user + system) of the children
# this shell waited for: fields 16 and 17 of /proc/PID/stat, in clock
# ticks.  Not a command substitution, whose subshell has no children yet.
# The second field, the command name in parentheses, may hold spaces.
timing_read_cpu() {
    local stat
    local -a f
    timing_cpu=0
    read -r stat < "/proc/$BASHPID/stat" || return
    stat=${stat##*) }
    read -r -a f <<<"$stat"
    # f[0] is field 3 (the state): fields 16 and 17 are f[13] and f[14]
    timing_cpu=$(( (f[13] + f[14]) * 1000 / timing_hz ))
}

timing_start() {
    timing_t0=${EPOCHREALTIME/./}
    timing_read_cpu
    timing_cpu0=$timing_cpu
}

# MS -> "12.3"
timing_secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }

# Sets $timing to "12.3 s, CPU 4.5 s", the time since timing_start.
timing_stop() {
    local wall=$(( (${EPOCHREALTIME/./} - timing_t0) / 1000 ))
    timing_read_cpu
    timing="$(timing_secs $wall) s, CPU $(timing_secs $((timing_cpu - timing_cpu0))) s"
}
