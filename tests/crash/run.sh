#!/usr/bin/env bash
# The crash-consistency layer: power cuts at every request of every qcow2
# metadata operation (test-qcow2-crash) and of qblock-img commit and rebase
# (test-qcow2-crash-tools); docs/reliability.md shows the matrix.
#   tests/crash/run.sh BUILD_DIR
# A case marked as a known bug (TAP "not ok ... # TODO") is counted as an
# expected failure and its reason printed; any other failure fails.
#
# Each case (one operation's whole matrix) runs as a process of its own
# (the program's -p CASE), the longest split in shards, in three lanes
# (tests/lanes.bash; QBLOCK_TEST_LANES overrides): the cases share
# nothing but the program, each image is a mkstemp file.  A case spends
# a fifth of its time in the kernel between its bursts of CPU, so that
# two lanes kept 1.6 of the two CPUs busy and three keep 1.8 (measured:
# 205 s against 168 s for the layer).
set -u
build=${1:?usage: run.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../timing.bash"
lanes_default=3
. "$here/../lanes.bash"
pass=0 fail=0 skip=0 xfail=0

# The images live in memory (/dev/shm) where there is one: the power cuts
# are played by blkcrash and powercut.so, so the real file's durability
# plays no part, while each of the thousands of flushes would otherwise
# wait for the disk (an fdatasync takes milliseconds on a virtual disk:
# one operation's matrix took 9.5 s in /tmp, 2.9 s in /dev/shm).  Three
# lanes hold at most about 30 MiB of images; a container's small
# /dev/shm (64 MiB by default) is left alone below 256 MiB free.
shm_free=$(df --output=avail -k /dev/shm 2>/dev/null | tail -n 1)
if [ -w /dev/shm ] && [ "${shm_free:-0}" -ge $((256 * 1024)) ] &&
   shm=$(mktemp -d /dev/shm/qblock-crash.XXXXXX); then
    export TMPDIR=$shm
    trap 'rm -rf "$shm"' EXIT
fi
programs=(test-qcow2-crash test-qcow2-crash-tools test-bitmap-crash)

# The longest matrices, split between processes (QBLOCK_CRASH_SHARD of
# test-qcow2-crash): reftable-grow makes 207 requests, 624 runs, five
# times the next longest.
declare -A shards_of=([test-qcow2-crash:/qcow2-crash/reftable-grow]=4)

# The jobs: j0, j1, ... each one case of one program, or one shard of it
# ("i/n" in job_shard).
job_exe=() job_case=() job_shard=() jobs=()
for name in "${programs[@]}"; do
    exe=$build/tests/crash/$name
    if [ ! -x "$exe" ]; then
        echo "$name: not built (looked for $exe)"
        fail=$((fail + 1))
        continue
    fi
    # -l prints TAP comments too; the cases are the paths
    listing=$("$exe" -l 2>&1)
    cases=$(grep '^/' <<<"$listing")
    if [ $? -ne 0 ] || [ -z "$cases" ]; then
        echo "$name: cannot list its cases: $listing"
        fail=$((fail + 1))
        continue
    fi
    for c in $cases; do
        n=${shards_of[$name:$c]:-1}
        for ((k = 0; k < n; k++)); do
            jobs+=("j${#jobs[@]}")
            job_exe+=("$exe") job_case+=("$c")
            if [ "$n" -gt 1 ]; then
                job_shard+=("$k/$n")
            else
                job_shard+=("")
            fi
        done
    done
done

lane_job() {
    local i=${1#j}
    [ -n "${job_shard[i]}" ] && export QBLOCK_CRASH_SHARD=${job_shard[i]}
    timeout 1800 "${job_exe[i]}" --tap --keep-going -p "${job_case[i]}"
}

# The crash-matrix lines of a case's shards, added up into the line the
# whole case prints.
merge_matrix() {
    sed -E 's/^# crash-matrix ([^ ]+) \[shard [0-9]+\/[0-9]+\]: ([0-9]+) requests, ([0-9]+) cut points x ([0-9]+) modes = ([0-9]+) runs, ([0-9]+) leaked, ([0-9]+) OFLAG_COPIED, ([0-9]+) failed$/\1 \2 \3 \4 \5 \6 \7 \8/' |
    awk '{ name = $1; req = $2; modes = $4; cuts += $3; runs += $5;
           leaked += $6; copied += $7; failed += $8 }
         END { printf "# crash-matrix %s: %d requests, %d cut points x %d modes = %d runs, %d leaked, %d OFLAG_COPIED, %d failed\n",
               name, req, cuts, modes, runs, leaked, copied, failed }'
}
shard_counts=() shard_matrix=

# One line per case with its counts and time; the crash-matrix figures;
# the expected failures with their reasons; a failure's output.
lane_report() {
    local i=${1#j} out rc=$lane_rc p s x f shard
    shard=${job_shard[i]}
    out=$(< "$lane_out")
    if [ -n "$shard" ]; then
        shard_matrix+=$(grep -E '^# crash-matrix' <<<"$out")$'\n'
        grep -E '^# .* failed at' <<<"$out"
    else
        grep -E '^# (crash-matrix|.* failed at)' <<<"$out"
    fi
    p=$(grep -cE '^ok [0-9]+' <<<"$out")
    s=$(grep -cE '^ok [0-9]+ .*# SKIP' <<<"$out")
    x=$(grep -cE '^not ok [0-9]+ .*# TODO' <<<"$out")
    f=$(grep -cE '^not ok [0-9]+' <<<"$out")
    p=$((p - s)) f=$((f - x))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        # a crash, an abort or the timeout outside a test case
        f=1
    fi
    if [ $((p + s + f + x)) -eq 0 ]; then
        # -p named no case: the listing and the run disagree
        f=1
    fi
    if [ -n "$shard" ]; then
        printf '%-40s shard %s: %d passed, %d failed (%s)\n' \
            "$(basename "${job_exe[i]}")${job_case[i]}" "$shard" "$p" "$f" \
            "$lane_time"
    else
        printf '%-40s %3d passed, %d failed, %d skipped, %d expected failures (%s)\n' \
            "$(basename "${job_exe[i]}")${job_case[i]}" "$p" "$f" "$s" "$x" \
            "$lane_time"
    fi
    grep -E '^not ok [0-9]+ .*# TODO' <<<"$out" | sed 's/^/  expected failure: /'
    if [ "$f" -ne 0 ]; then
        echo "--- output of $(basename "${job_exe[i]}") -p ${job_case[i]} ---"
        tail -n 60 <<<"$out"
    fi
    if [ -n "$shard" ]; then
        # a case split in shards counts once, when its last shard is in:
        # failed if one failed, skipped if all skipped
        shard_counts=($((${shard_counts[0]:-0} + p)) $((${shard_counts[1]:-0} + f))
                      $((${shard_counts[2]:-0} + s)) $((${shard_counts[3]:-0} + x)))
        [ "${shard#*/}" -eq $((${shard%/*} + 1)) ] || return
        p=${shard_counts[0]} f=${shard_counts[1]} s=${shard_counts[2]} x=${shard_counts[3]}
        shard_counts=()
        merge_matrix <<<"${shard_matrix%$'\n'}"
        shard_matrix=
        if [ "$f" -gt 0 ]; then p=0 f=1 s=0 x=0
        elif [ "$x" -gt 0 ]; then p=0 s=0 x=1
        elif [ "$p" -eq 0 ]; then s=1
        else p=1 s=0
        fi
    fi
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s)) xfail=$((xfail + x))
}

lanes_run "${jobs[@]}"
echo "crash: $pass passed, $fail failed, $skip skipped, $xfail expected failures"
[ "$fail" -eq 0 ]
