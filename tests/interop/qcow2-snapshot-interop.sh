#!/usr/bin/env bash
# qcow2 internal snapshots and the VM state area against the real QEMU.
#
#   tests/interop/qcow2-snapshot-interop.sh BUILD_DIR
#
# Forward: the same sequence of writes and snapshot operations runs once
# with qblock's tools and once with QEMU's, each on its own image; the real
# qemu-img then checks qblock's image, lists its snapshots (same columns,
# same VM SIZE) and compares both images, at the top and at each snapshot
# (convert -l).  Reverse: on images QEMU made, qblock lists, converts and
# checks the same as qemu-img, and its snapshot operations leave images
# that qemu-img checks clean and that hold what QEMU's would.  With
# qemu-system-x86_64 installed, snapshots with VM state saved by QEMU
# (savevm) are read by qblock, and VM state saved by qblock through the
# block layer API (tests/interop/vmstate-snapshot) is loaded by QEMU.
# Prints "ok NAME" / "FAIL NAME" and ends with "N passed, N failed";
# exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: qcow2-snapshot-interop.sh BUILD_DIR}" && pwd)
QB_IMG=$build/qblock-img
QB_IO=$build/qblock-io
HELPER=$build/tests/interop/vmstate-snapshot
if ! Q_IMG=$(command -v qemu-img) || ! Q_IO=$(command -v qemu-io); then
    echo "skipped: qemu-img/qemu-io are not installed (Debian qemu-utils)"
    exit 77
fi
Q_SYS=$(command -v qemu-system-x86_64 || true)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
pass=0 fail=0

ok() { echo "ok $1"; pass=$((pass + 1)); }
bad() {
    echo "FAIL $1"
    [ -n "${2:-}" ] && sed 's/^/    /' <<<"$2"
    fail=$((fail + 1))
}
# expect NAME COMMAND...: passes if the command succeeds.
expect() {
    local name=$1 out
    shift
    if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$out"; fi
}
# same NAME A B: passes if the two strings are equal.
same() {
    if [ "$2" = "$3" ]; then
        ok "$1"
    else
        bad "$1" "$(diff <(echo "$2") <(echo "$3"))"
    fi
}
nodate() {
    sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}/DATE/'
}
snapshot_names() {
    "$Q_IMG" snapshot -l "$1" | awk 'NR > 2 { print $2 }'
}
# compare_at NAME A B: the images are identical at the top and at every
# snapshot of A (by name), as the real qemu-img sees them.
compare_at() {
    local name=$1 a=$2 b=$3 sn out
    if ! out=$("$Q_IMG" compare -q "$a" "$b" 2>&1); then
        bad "$name: top" "$out"
        return
    fi
    for sn in $(snapshot_names "$a"); do
        "$Q_IMG" convert -l "$sn" -O raw "$a" a.raw &&
        "$Q_IMG" convert -l "$sn" -O raw "$b" b.raw &&
        out=$("$Q_IMG" compare -q -f raw -F raw a.raw b.raw 2>&1)
        if [ $? -ne 0 ]; then
            bad "$name: snapshot $sn" "$out"
            rm -f a.raw b.raw
            return
        fi
    done
    rm -f a.raw b.raw
    ok "$name"
}

# The sequence both sides run: $1 qemu-img, $2 qemu-io, $3 image, $4 -o.
sequence() {
    local img=$1 io=$2 f=$3 opts=$4
    "$img" create -q -f qcow2 -o "$opts" "$f" 4M &&
    "$io" -f qcow2 -c "write -q -P 1 0 1M" -c "write -q -c -P 2 1M 128k" \
        -c "write -q -b -P 3 0 64k" "$f" &&
    "$img" snapshot -c one "$f" &&
    "$io" -f qcow2 -c "write -q -P 4 512k 1M" -c "write -q -z 2M 64k" \
        -c "write -q -c -P 5 3M 64k" "$f" &&
    "$img" snapshot -c two "$f" &&
    "$io" -f qcow2 -c "discard -q 0 64k" -c "write -q -P 6 128k 4k" "$f" &&
    "$img" snapshot -c three "$f" &&
    "$img" snapshot -a one "$f" &&
    "$io" -f qcow2 -c "write -q -P 7 64k 64k" "$f" &&
    "$img" snapshot -c four "$f" &&
    "$img" snapshot -d two "$f"
}

# --- forward: qblock's images judged by QEMU ---
for opts in "compat=1.1" "compat=0.10" "compression_type=zstd" \
            "cluster_size=4k,refcount_bits=64" "lazy_refcounts=on" \
            "extended_l2=on" "extended_l2=on,cluster_size=16k"; do
    rm -f q.qcow2 b.qcow2
    if ! out=$(sequence "$QB_IMG" "$QB_IO" q.qcow2 "$opts" 2>&1); then
        bad "qblock sequence ($opts)" "$out"
        continue
    fi
    sequence "$Q_IMG" "$Q_IO" b.qcow2 "$opts" >/dev/null 2>&1
    expect "qemu-img check on qblock's snapshots ($opts)" \
        "$Q_IMG" check q.qcow2
    same "qemu-img snapshot -l on qblock's image ($opts)" \
        "$("$Q_IMG" snapshot -l q.qcow2 | nodate)" \
        "$("$Q_IMG" snapshot -l b.qcow2 | nodate)"
    same "qblock-img snapshot -l equals qemu-img's ($opts)" \
        "$("$QB_IMG" snapshot -l q.qcow2)" "$("$Q_IMG" snapshot -l q.qcow2)"
    compare_at "same content as QEMU's, at each snapshot ($opts)" \
        q.qcow2 b.qcow2
    same "VM state after snapshot -a, read by qemu-io ($opts)" \
        "$("$Q_IO" -c "read -b -v 0 64k" q.qcow2 | head -n 4096 | md5sum)" \
        "$("$Q_IO" -c "read -b -v 0 64k" b.qcow2 | head -n 4096 | md5sum)"
done

# --- reverse: QEMU's images read and changed by qblock ---
rm -f b.qcow2
sequence "$Q_IMG" "$Q_IO" b.qcow2 "compat=1.1" >/dev/null 2>&1
same "snapshot -l of QEMU's image" "$("$QB_IMG" snapshot -l b.qcow2)" \
    "$("$Q_IMG" snapshot -l b.qcow2)"
same "info of QEMU's image" "$("$QB_IMG" info b.qcow2 | grep -v '^disk size')" \
    "$("$Q_IMG" info b.qcow2 | grep -v '^disk size')"
same "info json of QEMU's image" \
    "$("$QB_IMG" info --output=json b.qcow2 | grep -v actual-size)" \
    "$("$Q_IMG" info --output=json b.qcow2 | grep -v actual-size)"
same "check of QEMU's image" "$("$QB_IMG" check b.qcow2 2>&1)" \
    "$("$Q_IMG" check b.qcow2 2>&1)"
for sn in one 3 snapshot.name=four; do
    "$QB_IMG" convert -l "$sn" -O raw b.qcow2 ours.raw
    "$Q_IMG" convert -l "$sn" -O raw b.qcow2 theirs.raw
    expect "convert -l $sn of QEMU's image" cmp ours.raw theirs.raw
done
rm -f ours.raw theirs.raw
cp b.qcow2 q.qcow2
cp b.qcow2 r.qcow2
for op in "-a four" "-c five" "-d one" "-a 3" "-d four" "-c six"; do
    "$QB_IMG" snapshot $op q.qcow2
    "$Q_IMG" snapshot $op r.qcow2
done
expect "qemu-img check after qblock's operations on QEMU's image" \
    "$Q_IMG" check q.qcow2
same "the same snapshots as QEMU would leave" \
    "$("$Q_IMG" snapshot -l q.qcow2 | nodate)" \
    "$("$Q_IMG" snapshot -l r.qcow2 | nodate)"
compare_at "the same content as QEMU would leave" q.qcow2 r.qcow2

# --- VM state saved by QEMU itself ---
if [ -z "$Q_SYS" ]; then
    echo "skip savevm/loadvm cases: qemu-system-x86_64 is not installed"
    skipped=1
else
    # hmp IMAGE COMMAND...: runs monitor commands on a machine with no
    # devices that has IMAGE as its only drive.
    hmp() {
        local f=$1
        shift
        printf '%s\n' "$@" quit |
            timeout 60 "$Q_SYS" -M none -nodefaults -display none \
                -monitor stdio -drive "file=$f,if=none,id=d0" 2>&1 |
            tr -d '\r' | sed 's/\x1b\[[0-9;]*[A-Za-z]//g'
    }
    # The monitor prints nothing but its prompt when a command works.
    hmp_ok() {
        hmp "$@" | grep -v -e '^(qemu)' -e '^QEMU .* monitor' \
            -e '^$' -e 'quit' | grep -q . && return 1
        return 0
    }
    rm -f v.qcow2
    "$Q_IMG" create -q -f qcow2 v.qcow2 64M
    "$Q_IO" -c "write -q -P 8 0 1M" v.qcow2
    hmp v.qcow2 "savevm vm1" >/dev/null
    "$Q_IO" -c "write -q -P 9 0 64k" v.qcow2
    hmp v.qcow2 "savevm vm2" >/dev/null
    same "snapshot -l of savevm snapshots (VM SIZE, VM CLOCK, ICOUNT)" \
        "$("$QB_IMG" snapshot -l v.qcow2)" "$("$Q_IMG" snapshot -l v.qcow2)"
    same "info json of savevm snapshots" \
        "$("$QB_IMG" info --output=json v.qcow2 | grep -v actual-size)" \
        "$("$Q_IMG" info --output=json v.qcow2 | grep -v actual-size)"
    cp v.qcow2 w.qcow2
    "$QB_IMG" snapshot -a vm1 v.qcow2
    "$Q_IMG" snapshot -a vm1 w.qcow2
    same "VM state of a savevm snapshot, read by qblock-io" \
        "$("$QB_IO" -c "read -b -v 0 4k" v.qcow2 | grep -v 'ops;')" \
        "$("$Q_IO" -c "read -b -v 0 4k" w.qcow2 | grep -v 'ops;')"
    "$QB_IMG" snapshot -c mine v.qcow2
    "$QB_IMG" snapshot -d vm2 v.qcow2
    expect "qemu-img check after qblock's operations on savevm snapshots" \
        "$Q_IMG" check v.qcow2
    expect "QEMU loadvm of its snapshot after qblock's operations" \
        hmp_ok v.qcow2 "loadvm vm1"

    if [ ! -x "$HELPER" ]; then
        bad "VM state saved by qblock" "$HELPER was not built"
    else
        # QEMU's own VM state, saved again by qblock into a fresh image
        "$QB_IO" -c "read -b -v 0 64k" w.qcow2 |
            sed -n 's/^[0-9a-f]*:  \(\([0-9a-f][0-9a-f] \)*\).*/\1/p' |
            xxd -r -p > state.bin
        size=$("$Q_IMG" info --output=json w.qcow2 |
               sed -n 's/.*"vm-state-size": \([0-9]*\).*/\1/p' | head -n 1)
        head -c "$size" state.bin > state.cut
        rm -f n.qcow2
        "$QB_IMG" create -q -f qcow2 n.qcow2 64M
        if out=$("$HELPER" n.qcow2 saved state.cut 2>&1); then
            ok "vmstate-snapshot saves through the block layer"
        else
            bad "vmstate-snapshot saves through the block layer" "$out"
        fi
        vm_size() {
            "$Q_IMG" snapshot -l "$1" | awk -v n="$2" '$2 == n { print $3, $4 }'
        }
        same "qemu-img snapshot -l shows qblock's VM SIZE as QEMU's" \
            "$(vm_size n.qcow2 saved)" "$(vm_size w.qcow2 vm1)"
        expect "qemu-img check of qblock's VM state snapshot" \
            "$Q_IMG" check n.qcow2
        expect "QEMU loadvm of the VM state qblock saved" \
            hmp_ok n.qcow2 "loadvm saved"
    fi
fi

echo "$pass passed, $fail failed, ${skipped:-0} skipped"
[ $fail -eq 0 ]
