#!/usr/bin/env bash
# QEMU's own qemu-iotests (QEMU 7.2, fetched from Debian's source package at
# test time and cached; nothing of QEMU's is kept in this repository) run
# against the tools just built, or with QEMU=1 against the real QEMU tools.
#
#   tests/upstream/run.sh BUILD_DIR [SET...]
#       SET: qcow2 raw nbd-raw vmdk vpc vdi vhdx luks bochs cloop parallels qed
#            qcow dmg
#
# The vmdk set is the tests that name vmdk among their formats and drive
# only the tools (not a VM: 099, 216, 225 and 237 fail for QEMU's own
# tools in this harness too); the vpc set likewise (not 099).  The vdi set
# is the tests that name vdi or "generic" and pass for QEMU's own tools
# here (094, 231 and 232 skip for QEMU, 181 and 251 exclude vdi, the rest
# need a VM or fail for QEMU too: 120 140 143 145 157 192 227 308).  The
# vhdx set is the tests whose formats include vhdx (by name or as
# "generic") and that drive only the tools (not 099), less those QEMU's
# own tools fail in this harness (the same eight).  The luks set is the
# tests that name luks or "generic" and pass for QEMU's own tools here (the
# others skip, need a VM or the storage daemon, or fail for QEMU too: 094
# 120 140 143 145 149 157 159 170 181 192 197 208 210 215 226 227 231 232
# 236 251 295 296 307 308).  The bochs and cloop sets are the one test
# each that names them (078, 075: hostile headers of QEMU's sample
# images); the parallels set the three tools-only ones that name it (076,
# 131, parallels-read-bitmap; 118 and 212 start a VM).  The qed set is
# the 45 tests, of the 80 numbered ones whose formats include qed (by name
# or as "generic"), that QEMU's own tools pass in this harness (094 and
# 231 skip for the file protocol, 232 as root; the rest need a VM or fail
# for QEMU too: 028 030 040 041 056 099 118 120 140 141 143 145 156 157 161
# 181 183 192 194 200 208 216 224 227 228 229 236 247 249 258 307 308).
# The qcow set is the 24 tests that name qcow (version 1) among their
# formats, less 099, which QEMU's own tools fail here too, and the 20
# "generic" ones that drive only the tools and that QEMU's tools pass
# with qcow (094, 231 and 232 skip, 181 excludes qcow).  The dmg set is
# the one test that names dmg (239: QEMU's own tools fail it here only
# because Debian ships no module for dmg's bzip2 and LZFSE chunks, which
# QEMU then says on every open).  shared/'s list covers qcow2 and raw.
#
# Environment:
#   QEMU=1          run the real qemu-img/qemu-io/qemu-nbd from /usr/bin
#   UPSTREAM_JOBS   tests of one set run in parallel (default: the number
#                   of CPUs)
#   UPSTREAM_SET_JOBS  sets run at once (default 2)
#   UPSTREAM_CACHE  where the fetched tests are kept
#                   (default ${XDG_CACHE_HOME:-$HOME/.cache}/qblock)
#   UPSTREAM_TESTS  run only these tests (space-separated names)
#
# Prints one line per test that did not pass with its reason, one
# "SET: N passed, N failed, N skipped (TIME)" line per set and a last line
# "N passed, N failed, N skipped" over all sets.  A test that fails and is
# listed in known-failures.txt (next to this script, with the reason) is
# "known"; the exit status is non-zero only for a failure that is not
# listed there, so a regression fails CI while the list documents the
# distance to QEMU.  A listed test that now passes is reported, so that the
# list is kept short.  Each set works in a folder under /tmp, removed at
# the end of the set unless it had such a failure (its logs are there).
set -u
build=${1:?usage: run.sh BUILD_DIR [qcow2|raw|nbd-raw|vmdk|vpc|vdi|vhdx|luks|bochs|cloop|parallels|qed|qcow|dmg]...}
shift
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
. "$src/tests/timing.bash"
all_sets=(qcow2 raw nbd-raw vmdk vpc vdi vhdx luks bochs cloop parallels qed qcow dmg)
[ $# -eq 0 ] && set -- "${all_sets[@]}"
sets=()
for set in "$@"; do
    case " ${all_sets[*]} " in
    *" $set "*) ;;
    *) echo "check-upstream: unknown set '$set'" >&2; exit 2 ;;
    esac
    case " ${sets[*]} " in *" $set "*) ;; *) sets+=("$set") ;; esac
done
vmdk_tests="004 017 018 019 020 027 034 037 059 063 069 072 104 105 110 111
            126 279"
vpc_tests="072 088 135 146"
vdi_tests="001 002 003 004 005 008 009 010 011 012 021 032 033 052 072 084 104
           159 162 170 197 215 226"
qed_tests="001 002 003 004 005 008 009 010 011 012 017 018 019 020 021 024 025
           027 032 033 034 037 038 042 043 048 050 052 063 069 072 104 105 110
           111 116 126 159 162 170 197 215 226 251 279"
qcow_tests="001 002 003 004 005 008 009 010 011 012 013 017 018 019 020 021
            023 027 032 033 034 037 052 053 063 069 072 092 097 104 110 111
            126 134 158 159 162 170 197 215 226 251 279 301"
vhdx_tests="001 002 003 004 005 008 009 010 011 012 021 032 033 052 064 070
            072 094 104 105 159 162 170 181 197 215 226 231 232 251"
luks_tests="001 002 003 004 005 008 009 010 011 012 021 025 032 033 048 052 162
            282 288 293 294"

shared=$src/../shared/upstream-iotests
if [ ! -x "$shared/run-upstream.sh" ]; then
    echo "check-upstream: $shared/run-upstream.sh is missing" \
         "(shared/ must sit next to the repository)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi

cache=${UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/qblock}
iotests=$cache/qemu-iotests-7.2
want_sha=$(sed -n 's/^WANT_TREE_SHA=//p' "$shared/prepare-iotests-7.2.sh")
tree_sha() {
    (cd "$1" && find . -type f | LC_ALL=C sort | xargs sha256sum |
     sha256sum | cut -d' ' -f1)
}
# The cached tree is used only while its hash is still the recorded one: a
# partly extracted or edited tree is fetched again.
if [ ! -f "$iotests/check" ] || [ "$(tree_sha "$iotests")" != "$want_sha" ]; then
    mkdir -p "$cache"
    echo "check-upstream: fetching QEMU 7.2's qemu-iotests into $iotests"
    if ! bash "$shared/prepare-iotests-7.2.sh" "$iotests" > "$cache/prepare.log" 2>&1 ||
       [ "$(tree_sha "$iotests")" != "$want_sha" ]; then
        cat "$cache/prepare.log"
        echo "check-upstream: could not fetch the tests"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    fi
fi

if [ "${QEMU:-0}" = 1 ]; then
    bindir=/usr/bin names=(--img qemu-img --io qemu-io --nbd qemu-nbd)
    who="real QEMU ($(qemu-img --version | head -n 1))"
else
    bindir=$build names=(--img qblock-img --io qblock-io --nbd qblock-nbd)
    who="qblock ($build)"
fi
jobs=${UPSTREAM_JOBS:-$(nproc)}
known=$here/known-failures.txt
[ "${QEMU:-0}" = 1 ] && known=$here/known-failures-qemu.txt

# known_reason SET TEST: the reason a test is listed as known to fail in
# SET, empty if it is not listed.
known_reason() {
    awk -v set="$1" -v t="$2" '
        /^#/ || NF < 3 { next }
        $1 == t && ($2 == set || $2 == "*") {
            $1 = ""; $2 = ""; sub(/^  */, ""); print; exit }' "$known"
}

# run_set SET: runs one set; prints its lines and "SET: N passed, N
# failed, N skipped", and last "counts P F S UNEXPECTED" for the sum.
run_set() {
    local set=$1 tests=${UPSTREAM_TESTS:-} fmt proto
    case $set in
    qcow2) fmt=qcow2 proto=() ;;
    raw) fmt=raw proto=() ;;
    nbd-raw) fmt=raw proto=(--proto nbd) ;;
    vmdk) fmt=vmdk proto=() tests=${UPSTREAM_TESTS:-$vmdk_tests} ;;
    vpc) fmt=vpc proto=() tests=${UPSTREAM_TESTS:-$vpc_tests} ;;
    vdi) fmt=vdi proto=() tests=${UPSTREAM_TESTS:-$vdi_tests} ;;
    vhdx) fmt=vhdx proto=() tests=${UPSTREAM_TESTS:-$vhdx_tests} ;;
    luks) fmt=luks proto=() tests=${UPSTREAM_TESTS:-$luks_tests} ;;
    bochs) fmt=bochs proto=() tests=${UPSTREAM_TESTS:-078} ;;
    cloop) fmt=cloop proto=() tests=${UPSTREAM_TESTS:-075} ;;
    parallels) fmt=parallels proto=()
               tests=${UPSTREAM_TESTS:-076 131 tests/parallels-read-bitmap} ;;
    qed) fmt=qed proto=() tests=${UPSTREAM_TESTS:-$qed_tests} ;;
    qcow) fmt=qcow proto=() tests=${UPSTREAM_TESTS:-$qcow_tests} ;;
    dmg) fmt=dmg proto=() tests=${UPSTREAM_TESTS:-239} ;;
    esac
    local work p=0 f=0 s=0 unexpected=0 status name reason why
    work=$(mktemp -d "/tmp/qblock_upstream_${set//-/_}_XXXXXX")
    echo "=== upstream $set: $who ==="
    timing_start
    # shellcheck disable=SC2086
    "$shared/run-upstream.sh" "${names[@]}" "${proto[@]}" -j "$jobs" \
        --retry 1 --timeout 600 --work "$work" \
        "$iotests" "$bindir" "$fmt" $tests > "$work/results.txt" 2>&1
    timing_stop
    while read -r status name reason; do
        case $status in
        pass) p=$((p + 1)) ;;
        skip) s=$((s + 1)); echo "skip     $name  $reason" ;;
        fail|not-run)
            f=$((f + 1))
            why=$(known_reason "$set" "$name")
            if [ -n "$why" ]; then
                echo "known    $name  $why"
            else
                unexpected=$((unexpected + 1))
                echo "FAIL     $name  $reason (log: $work/logs/$name.log)"
            fi ;;
        esac
        if [ "$status" = pass ] && [ -n "$(known_reason "$set" "$name")" ]; then
            echo "fixed    $name  passes now: remove it from $(basename "$known")"
        fi
    done < <(grep -E '^(pass|fail|skip|not-run) ' "$work/results.txt")
    if [ $((p + f + s)) -eq 0 ]; then
        cat "$work/results.txt"
        echo "check-upstream: the $set set ran no test"
        f=1 unexpected=1
    fi
    # a set's work folder (its copy of the tests, scratch images, logs:
    # 12 MB and more) is kept only for the failures that need reading
    if [ "$unexpected" -eq 0 ]; then
        rm -rf "$work"
    else
        echo "$set: logs kept in $work/logs"
    fi
    echo "$set: $p passed, $f failed, $s skipped ($timing)"
    echo "counts $p $f $s $unexpected"
}

# A set's last tests leave cores idle while they finish, so
# UPSTREAM_SET_JOBS sets (default 2) run at once, each with its own work
# folder and UPSTREAM_JOBS tests; the longest sets (by their CPU time)
# start first.  Each set's lines are printed whole when it ends.
set_jobs=${UPSTREAM_SET_JOBS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
longest_first=(qcow2 qcow raw qed vhdx vdi vmdk luks nbd-raw)
order=()
for set in "${longest_first[@]}" "${sets[@]}"; do
    case " ${sets[*]} " in *" $set "*) ;; *) continue ;; esac
    case " ${order[*]} " in *" $set "*) continue ;; esac
    order+=("$set")
done
tp=0 tf=0 ts=0 unexpected=0
# print_ended: prints the sets that have ended since the last call and
# adds up their counts
print_ended() {
    local set p f s u
    for set in "${order[@]}"; do
        [ -f "$out/$set.ended" ] && [ ! -f "$out/$set.printed" ] || continue
        grep -v '^counts ' "$out/$set"
        read -r _ p f s u < <(grep '^counts ' "$out/$set" | tail -n 1)
        tp=$((tp + ${p:-0})) tf=$((tf + ${f:-1})) ts=$((ts + ${s:-0}))
        unexpected=$((unexpected + ${u:-1}))
        : > "$out/$set.printed"
    done
}
running=0
for set in "${order[@]}"; do
    if [ "$running" -ge "$set_jobs" ]; then
        wait -n
        running=$((running - 1))
        print_ended
    fi
    { run_set "$set" > "$out/$set" 2>&1; : > "$out/$set.ended"; } &
    running=$((running + 1))
done
wait
print_ended
echo "=== upstream total: $who ==="
echo "$unexpected failed that known-failures.txt does not list"
echo "upstream: $tp passed, $tf failed, $ts skipped"
[ "$unexpected" -eq 0 ]
