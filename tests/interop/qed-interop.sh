#!/usr/bin/env bash
# QED (QEMU Enhanced Disk) images against QEMU 7.2: creating, reading,
# writing, backing files, the need-check flag, check and repair, rebase,
# resize, hostile headers.
#
#   tests/interop/qed-interop.sh BUILD_DIR
#
# QED is deterministic, so files are compared byte for byte throughout.
# Creation: qblock-img create -f qed writes qemu-img's Formatting line and
# file, for sizes from 0 to 1 TiB, cluster and table sizes, backing files
# (raw, recorded as such, and qcow2); the -o help text; QEMU's refusals
# of bad cluster sizes, table sizes and image sizes, with the file left
# empty.  Writing: the same qemu-io commands (data within and across
# clusters and L2 tables, aligned zero writes that make zero clusters,
# unaligned ones that write zeroes, discard, which QED ignores) run by
# qemu-io and qblock-io leave the same files, without and with a backing
# file (copy-on-write); convert -O qed gives qemu-img's file.  Reading:
# info (human, JSON), map (human, JSON), check, compare and convert of
# qemu's images agree; each tool reads what the other wrote.  Need-check:
# a writer killed after an allocating write leaves the same flagged file
# (which info does not report, as QEMU); a read-write open repairs as
# QEMU's does, a read-only one and check without -r leave it; served by
# qblock-nbd, the flag goes off 5 s after the last allocating write and
# when the client leaves (qemu-nbd: only the latter).
# Check: invalid L1 and L2 entries, a cluster used twice, leaks: the
# same report and exit status, and -r all the same repaired file.
# A run of clusters that leaves the file fails where it leaves (QEMU reads
# on past the end); a write to a data cluster or through an L2 table on
# the L1 table fails (QEMU overwrites the table).  rebase (-u and safe), commit, resize (grow; shrink and bad sizes
# refused) and amend (refused) as qemu-img.  Hostile headers: each of
# QEMU's refusals with QEMU's message.  blockdev-create: the files and
# replies qemu-storage-daemon gives (jobs-vs-qsd.py's create-qed
# scenario).  Prints "ok NAME" / "FAIL NAME",
# ends with "N passed, N failed, N skipped"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: qed-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
# same, refused and patch
. "$here/vmdk-lib.bash"

# both NAME ARGS...: qemu-img ARGS and qblock-img ARGS print the same
# (tool names and the two file names aside) with the same exit status
both_img() {
    local name=$1 q b qrc brc
    shift
    q=$(qemu-img "$@" 2>&1 | sed 's/^qemu-img: //')
    qrc=${PIPESTATUS[0]}
    b=$("$QB_IMG" "$@" 2>&1 | sed 's/^qblock-img: //')
    brc=${PIPESTATUS[0]}
    if [ "$q" = "$b" ] && [ "$qrc" = "$brc" ]; then
        ok "$name"
    else
        fail "$name" "qemu-img (exit $qrc): $q" "qblock-img (exit $brc): $b"
    fi
}

# ---- creation ----

for opts in "" "-o cluster_size=4k" "-o cluster_size=4k,table_size=2" \
            "-o table_size=16" "-o cluster_size=1M,table_size=8"; do
    for size in 0 1 511 100000 5M 1G 1T; do
        name="create $opts $size"
        q=$(qemu-img create -f qed $opts q.qed $size 2>&1 |
            sed 's/q\.qed/X/g; s/^qemu-img: //')
        b=$("$QB_IMG" create -f qed $opts b.qed $size 2>&1 |
            sed 's/b\.qed/X/g; s/^qblock-img: //')
        if [ "$q" = "$b" ]; then
            ok "$name: the Formatting line"
        else
            fail "$name: the Formatting line" "$q" "$b"
        fi
        check "$name: the file" cmp q.qed b.qed
        rm -f q.qed b.qed
    done
done
same "create -o help" qemu-img create -f qed -o help -- \
    "$QB_IMG" create -f qed -o help
# as QEMU: the file is made first and stays, empty
for opts in "cluster_size=1000" "cluster_size=128M" "table_size=3" \
            "table_size=32" "cluster_size=4k,table_size=1:100T" \
            "cluster_size=64M,table_size=16:1M"; do
    size=1M
    case $opts in *:*) size=${opts#*:}; opts=${opts%:*} ;; esac
    echo old > q.qed
    echo old > t.qed
    q=$(qemu-img create -f qed -o "$opts" q.qed $size 2>&1 |
        sed 's/q\.qed/X/g; s/^qemu-img: //')
    b=$("$QB_IMG" create -f qed -o "$opts" t.qed $size 2>&1 |
        sed 's/t\.qed/X/g; s/^qblock-img: //')
    if [ "$q" = "$b" ] && [ -e t.qed ] && [ ! -s t.qed ] && [ ! -s q.qed ]
    then
        ok "create -o $opts $size: refused, the file left empty"
    else
        fail "create -o $opts $size: refused, the file left empty" "$q" "$b"
    fi
done
rm -f q.qed t.qed

qemu-img create -q -f raw base.raw 3M
qemu-io -f raw -c 'write -P 0xaa 0 3M' base.raw >/dev/null
qemu-img create -q -f qcow2 base.qcow2 3M
qemu-io -f qcow2 -c 'write -P 0xbb 0 3M' base.qcow2 >/dev/null
for b in "base.raw raw" "base.qcow2 qcow2"; do
    set -- $b
    qemu-img create -q -f qed -b "$1" -F "$2" q.qed
    "$QB_IMG" create -q -f qed -b "$1" -F "$2" b.qed
    check "create -b $1 -F $2: the file" cmp q.qed b.qed
    same "create -b $1 -F $2: info" qemu-img info q.qed -- \
        "$QB_IMG" info q.qed
done
both_img "create -b without -F" create -f qed -b base.qcow2 x.qed
rm -f q.qed b.qed x.qed

# ---- writing ----

writes=(-c 'write -P 0x11 4k 4k' -c 'write -P 0x22 60k 10k'
        -c 'write -z 128k 64k' -c 'write -z 200k 4k'
        -c 'write -P 0x33 1020k 8k' -c 'write -P 0x44 2044k 12k'
        -c 'write -z 128k 8k' -c 'write -P 0x55 4k 512'
        -c 'discard 0 64k' -c 'write -z 0 192k' -c 'write -P 0x66 3M 1k')
# img_pair OPTS...: q.qed and b.qed made by each tool with OPTS, written
# by each tool's io with $writes
img_pair() {
    qemu-img create -q -f qed "$@" q.qed 4M
    "$QB_IMG" create -q -f qed "$@" b.qed 4M
    qemu-io -f qed "${writes[@]}" q.qed >/dev/null
    "$QB_IO" -f qed "${writes[@]}" b.qed >/dev/null
}
for opts in "" "-o cluster_size=4k,table_size=2" \
            "-b base.raw -F raw -o cluster_size=4k,table_size=2" \
            "-b base.qcow2 -F qcow2"; do
    img_pair $opts
    check "writes, $opts: qemu-io's file" cmp q.qed b.qed
    same "writes, $opts: map" qemu-img map q.qed -- "$QB_IMG" map q.qed
    same "writes, $opts: map --output=json" qemu-img map --output=json \
        q.qed -- "$QB_IMG" map --output=json q.qed
    same "writes, $opts: info --output=json" \
        qemu-img info --output=json q.qed -- \
        "$QB_IMG" info --output=json q.qed
    same "writes, $opts: check" qemu-img check q.qed -- \
        "$QB_IMG" check q.qed
    same "writes, $opts: check --output=json" \
        qemu-img check --output=json q.qed -- \
        "$QB_IMG" check --output=json q.qed
    qemu-img convert -O raw q.qed q.raw
    check "writes, $opts: convert to raw" \
        quiet sh -c "'$QB_IMG' convert -O raw q.qed b.raw &&
                     cmp q.raw b.raw"
    check "writes, $opts: qemu-img compare with qblock's" \
        quiet qemu-img compare q.qed b.qed
    check "writes, $opts: qemu-io reads qblock's" \
        quiet qemu-io -r -c 'read -P 0 4k 512' -c 'read -P 0 128k 4k' \
        -c 'read -P 0x33 1020k 8k' -c 'read -P 0x44 2044k 12k' b.qed
    check "writes, $opts: qblock-io reads qemu's" \
        quiet "$QB_IO" -r -c 'read -P 0 4k 512' -c 'read -P 0 128k 4k' \
        -c 'read -P 0x33 1020k 8k' -c 'read -P 0x44 2044k 12k' q.qed
done
check "the format is probed" \
    sh -c "'$QB_IMG' info q.qed | grep -qx 'file format: qed'"
qemu-io -c 'write -P 0x77 2M 64k' b.qed >/dev/null
"$QB_IO" -c 'write -P 0x78 2176k 64k' b.qed >/dev/null
check "each reads what the other wrote after it" \
    quiet sh -c "'$QB_IO' -r -c 'read -P 0x77 2M 64k' \
                     -c 'read -P 0x78 2176k 64k' b.qed &&
                 qemu-io -r -c 'read -P 0x77 2M 64k' \
                     -c 'read -P 0x78 2176k 64k' b.qed"
for opts in "" "-o cluster_size=4k"; do
    qemu-img convert -O qed $opts q.raw q-conv.qed
    "$QB_IMG" convert -O qed $opts q.raw b-conv.qed
    check "convert -O qed $opts: qemu-img's file" cmp q-conv.qed b-conv.qed
done

# ---- need-check ----

for opts in "" "-b base.raw -F raw"; do
    qemu-img create -q -f qed $opts q.qed 4M
    cp q.qed b.qed
    qemu-io -c 'write -P 1 0 100k' -c 'sigraise 9' q.qed >/dev/null 2>&1
    "$QB_IO" -c 'write -P 1 0 100k' -c 'sigraise 9' b.qed >/dev/null 2>&1
    check "killed after writing, $opts: the same file" cmp q.qed b.qed
    same "killed after writing, $opts: info --output=json" \
        qemu-img info --output=json q.qed -- \
        "$QB_IMG" info --output=json q.qed
    same "killed after writing, $opts: check" qemu-img check q.qed -- \
        "$QB_IMG" check q.qed
done
qemu-img create -q -f qed q.qed 4M
qemu-io -c 'write -P 1 0 100k' -c 'sigraise 9' q.qed >/dev/null 2>&1
# an L2 entry past the end of the file: the open's repair clears it
patch q.qed $((0x60008)) Q 0x7000000
cp q.qed b.qed
qemu-io -c 'read 0 4k' q.qed >/dev/null
"$QB_IO" -c 'read 0 4k' b.qed >/dev/null
check "a read-write open repairs as QEMU's" cmp q.qed b.qed
cp q.qed d.qed
patch q.qed 16 Q 2
patch d.qed 16 Q 2
patch q.qed $((0x60010)) Q 0x7000000
patch d.qed $((0x60010)) Q 0x7000000
"$QB_IO" -r -c 'read 0 4k' d.qed >/dev/null
check "a read-only open leaves the flag" cmp q.qed d.qed
both_img "check (no -r) leaves it too" check d.qed
check "... and the file" cmp q.qed d.qed

# ---- the need-check timer ----
# An image served by a long-running process: the flag goes off 5 s after
# the last allocating write (the timer QEMU arms; it fires in qemu-system,
# whose virtual clock runs, but never in qemu-nbd, whose clock stands
# still), and at once when the node is drained (the client going away),
# which both servers do.

# need_check FILE: the need-check bit of FILE's header features
need_check() {
    python3 -c 'import struct,sys; f=open(sys.argv[1],"rb"); f.seek(16); print(struct.unpack("<Q", f.read(8))[0] >> 1 & 1)' "$1"
}
# serve TOOL FILE SOCKET: TOOL (qemu-nbd or qblock-nbd) exports FILE
serve() {
    "$1" -f qed -k "$PWD/$3" "$2" >/dev/null 2>&1 &
    server=$!
    for _ in $(seq 50); do [ -S "$3" ] && return; sleep 0.1; done
}
qemu-img create -q -f qed t.qed 4M
serve "$build/qblock-nbd" t.qed t.sock
qemu-io -f raw -c 'write -P 1 0 100k' -c 'sleep 8000' \
    "nbd+unix:///?socket=$PWD/t.sock" >/dev/null 2>&1 &
client=$!
sleep 2
flag_early=$(need_check t.qed)
sleep 5
flag_late=$(need_check t.qed)
check "an allocating write through qblock-nbd sets the flag at once" \
    [ "$flag_early" = 1 ]
check "... and 5 s later it is off, the client still connected" \
    [ "$flag_late" = 0 ]
wait $client
kill $server 2>/dev/null; wait $server 2>/dev/null
check "... and the image is clean" quiet "$QB_IMG" check t.qed
for tool in qemu-nbd "$build/qblock-nbd"; do
    rm -f d.qed d.sock
    qemu-img create -q -f qed d.qed 4M
    serve "$tool" d.qed d.sock
    qemu-io -f raw -c 'write -P 1 0 100k' \
        "nbd+unix:///?socket=$PWD/d.sock" >/dev/null 2>&1
    sleep 0.5
    flag=$(need_check d.qed)
    kill -9 $server 2>/dev/null; wait $server 2>/dev/null
    check "${tool##*/}: the client's leaving clears the flag" [ "$flag" = 0 ]
done

# ---- check ----

qemu-img create -q -f qed -o cluster_size=4k c.qed 1M
qemu-io -c 'write -P 1 0 8k' -c 'write -P 2 512k 4k' c.qed >/dev/null
# L1 at 0x1000, data 0x5000 and 0x6000, L2 at 0x7000, data 0xb000
damaged() {
    cp c.qed x.qed
    while [ $# -gt 0 ]; do patch x.qed "$1" "$2" "$3"; shift 3; done
}
repair_same() {
    cp x.qed y.qed
    both_img "$1: check" check x.qed
    both_img "$1: check --output=json" check --output=json x.qed
    qemu-img check -r all x.qed >/dev/null 2>&1
    "$QB_IMG" check -r all y.qed >/dev/null 2>&1
    check "$1: check -r all, qemu-img's file" cmp x.qed y.qed
    cp y.qed x.qed
    both_img "$1: check -r all, again" check -r all x.qed
}
damaged $((0x7000)) Q 0x100000
repair_same "an L2 entry past the file"
damaged $((0x7008)) Q 0x5000
repair_same "a cluster used twice"
damaged $((0x1008)) Q 3
repair_same "an unaligned L1 entry"
damaged $((0x1008)) Q 0x5000
repair_same "an L1 entry on a data cluster"
damaged $((0x7000)) Q 0x5001
repair_same "an unaligned L2 entry"
damaged
truncate -s +8192 x.qed
repair_same "leaked clusters"
damaged $((0x7000)) Q 0x100000 $((0x1008)) Q 0x3000
truncate -s +8192 x.qed
repair_same "errors and leaks"
damaged $((0x7000)) Q 0x100000
refused "reading through a bad L2 entry fails" "Invalid argument" \
    "$QB_IO" -r -c 'read 0 4k' x.qed
# a run of contiguous clusters whose last lies past the file (48 KiB):
# QEMU checks only the first and reads on past the end; qblock stops
# there (inv. 2) and fails on that cluster alone
damaged $((0x7400)) Q 0xa000 $((0x7408)) Q 0xb000 $((0x7410)) Q 0xc000
check "a run of clusters leaving the file: the ones inside read" \
    quiet "$QB_IO" -r -c 'read 512k 8k' x.qed
refused "... the one past the end fails (QEMU reads it)" "Invalid argument" \
    "$QB_IO" -r -c 'read 512k 12k' x.qed
# a data cluster on the L1 table (0x1000-0x4fff): QEMU writes over the
# table; qblock refuses the write and leaves the file as it was
damaged $((0x7000)) Q 0x2000
cp x.qed y.qed
refused "a write to a data cluster on the L1 table fails" "Invalid argument" \
    "$QB_IO" -c 'write -P 9 0 4k' x.qed
check "... and the table stays as it was" cmp x.qed y.qed
# an L1 entry naming the L1 table itself as an L2 table: an allocating
# write would write its entries over the L1 table; refused the same way
damaged $((0x1000)) Q 0x1000
cp x.qed y.qed
refused "an allocating write through an L2 table on the L1 table fails" \
    "Invalid argument" "$QB_IO" -c 'write -P 9 64k 4k' x.qed
check "... and the table stays as it was" cmp x.qed y.qed

# ---- rebase, commit, resize, amend ----

for flags in "-u -b base.qcow2 -F qcow2" "-u -b base.raw -F raw" "-u -b ''" \
             "-b base.raw -F raw" "-b ''"; do
    qemu-img create -q -f qed -b base.qcow2 -F qcow2 q.qed
    qemu-io -c 'write -P 5 100k 100k' q.qed >/dev/null
    cp q.qed b.qed
    eval qemu-img rebase $flags q.qed
    eval "'$QB_IMG'" rebase $flags b.qed
    check "rebase $flags: qemu-img's file" cmp q.qed b.qed
done
# commit: each tool in a folder of its own, with the same base
for d in qc bc; do
    mkdir -p $d
    cp base.raw $d/base.raw
    qemu-img create -q -f qed -b base.raw -F raw $d/o.qed
    qemu-io -c 'write -P 5 100k 100k' $d/o.qed >/dev/null
done
qemu-img commit -q qc/o.qed
"$QB_IMG" commit -q bc/o.qed
check "commit into a raw base: qemu-img's base" cmp qc/base.raw bc/base.raw
check "... and overlay" cmp qc/o.qed bc/o.qed
qemu-img create -q -f qed q.qed 1M
cp q.qed b.qed
qemu-img resize -q q.qed 10M
"$QB_IMG" resize -q b.qed 10M
check "resize to 10M: qemu-img's file" cmp q.qed b.qed
both_img "resize: shrinking refused" resize --shrink b.qed 1M
both_img "resize: a size no sector refused" resize b.qed 10000001
both_img "resize: past the tables' reach" resize b.qed 1P
both_img "amend: refused" amend -o cluster_size=4k b.qed

# ---- hostile headers ----

qemu-img create -q -f qed h0.qed 1M
# both_refuse NAME [OFFSET FMT VALUE]...: both refuse the patched header
# with the same message
both_refuse() {
    local name=$1 q b
    shift
    cp h0.qed h.qed
    while [ $# -gt 0 ]; do patch h.qed "$1" "$2" "$3"; shift 3; done
    q=$(qemu-img info -f qed h.qed 2>&1)
    b=$("$QB_IMG" info -f qed h.qed 2>&1)
    if [ $? -eq 1 ] && [ "${q#qemu-img: }" = "${b#qblock-img: }" ] &&
       grep -q "Could not open" <<<"$b"; then
        ok "$name"
    else
        fail "$name" "qemu-img: $q" "qblock-img: $b"
    fi
}
both_refuse "a bad magic" 0 I 0x12345678
both_refuse "an unknown feature" 16 Q 0x10
both_refuse "clusters of 1 KiB" 4 I 1024
both_refuse "clusters of 128 MiB" 4 I 0x8000000
both_refuse "clusters of 12 KiB" 4 I 12288
both_refuse "a table of 0 clusters" 8 I 0
both_refuse "a table of 3 clusters" 8 I 3
both_refuse "a table of 1 cluster" 8 I 1
both_refuse "a size no sector" 48 Q 1000001
both_refuse "a size past the tables' reach" 48 Q 0x4000000000000
both_refuse "an L1 table past the file" 40 Q 0x100000
both_refuse "an unaligned L1 table" 40 Q 0x10001
both_refuse "an L1 table on the header" 40 Q 0
both_refuse "a huge header" 12 I 0x10000
both_refuse "a backing name past the header" 16 Q 1 56 I 0xfff0 60 I 0x20
both_refuse "a backing name longer than a path" 12 I 2 16 Q 1 56 I 64 \
    60 I 0x1ff00 40 Q 0x20000
head -c 40 h0.qed > h.qed
both_img "a file shorter than the header" info -f qed h.qed
# an L1 entry far past the file: no read through it, in bounded memory
cp h0.qed h.qed
patch h.qed $((0x10000)) Q 0x7fff0000
both_img "an L1 entry past the file: map" map --output=json h.qed
both_img "... and check" check h.qed

qsd_scenario "$build" create-qed

summary
