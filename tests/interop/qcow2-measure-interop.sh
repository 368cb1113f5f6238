#!/usr/bin/env bash
# measure, map and info of qcow2 images against the real qemu-img.
#
#   tests/interop/qcow2-measure-interop.sh BUILD_DIR
#
# For a matrix of source images (sparse and full raw, qcow2 with data,
# zeroes, compressed clusters, a backing chain, snapshots, v2) and of
# target options (cluster sizes, refcount widths, preallocation modes,
# extended L2, compat), qblock-img measure prints what qemu-img measure
# prints, human and JSON, for --size too.  For a matrix of images made
# twice, once by each tool, qblock-img and qemu-img print the same info
# and map for both.  Prints "ok NAME" / "FAIL NAME", ends with
# "N passed, N failed"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: qcow2-measure-interop.sh BUILD_DIR}" && pwd)
. "$(dirname "$0")/qemu-utils.bash"
pass=0 fail=0

# same NAME COMMAND...: COMMAND with qemu-img then qblock-img as $IMG
# prints the same (program names aside).
same() {
    local name=$1 a b
    shift
    a=$(IMG=$Q_IMG; eval "$@" 2>&1 | sed 's/qemu-img/PROG/g')
    b=$(IMG=$QB_IMG; eval "$@" 2>&1 | sed 's/qblock-img/PROG/g')
    if [ "$a" = "$b" ]; then
        echo "ok $name"
        pass=$((pass + 1))
    else
        echo "FAIL $name"
        diff <(echo "$a") <(echo "$b") | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}

# --- measure ---
truncate -s 10M sparse.raw
dd if=/dev/urandom of=sparse.raw bs=4k count=3 seek=5 conv=notrunc status=none
dd if=/dev/urandom of=sparse.raw bs=1k count=1 seek=9000 conv=notrunc \
    status=none
head -c 3M /dev/urandom > full.raw
"$Q_IMG" create -q -f qcow2 data.qcow2 20M
"$Q_IO" -c "write 0 1M" -c "write -z 2M 1M" -c "write -c 5M 64k" \
    -c "write 19M 4k" data.qcow2 >/dev/null
"$Q_IMG" create -q -f qcow2 -b data.qcow2 -F qcow2 top.qcow2
"$Q_IO" -c "write 3M 128k" top.qcow2 >/dev/null
"$Q_IMG" snapshot -c sn data.qcow2
"$Q_IO" -c "write 10M 1M" data.qcow2 >/dev/null
"$Q_IMG" create -q -f qcow2 -o compat=0.10 v2.qcow2 5M
"$Q_IO" -c "write 1M 1M" v2.qcow2 >/dev/null

for o in "" cluster_size=512 cluster_size=2M refcount_bits=1 \
         refcount_bits=64 extended_l2=on preallocation=metadata \
         preallocation=full compat=0.10; do
    for sz in 0 1 1G 100T 9223372036854775807; do
        same "measure --size $sz ${o:--}" \
            '"$IMG" measure -O qcow2 ${o:+-o $o} --size $sz'
    done
done
for src in sparse.raw full.raw data.qcow2 top.qcow2 v2.qcow2; do
    for o in "" cluster_size=4k preallocation=falloc extended_l2=on \
             compat=0.10; do
        same "measure $src ${o:--}" '"$IMG" measure -O qcow2 ${o:+-o $o} $src'
        same "measure json $src ${o:--}" \
            '"$IMG" measure --output=json -O qcow2 ${o:+-o $o} $src'
    done
    same "measure -O raw $src" '"$IMG" measure -O raw $src'
done
same "measure -l snapshot" '"$IMG" measure -O qcow2 -l sn data.qcow2'
same "measure -l missing" '"$IMG" measure -O qcow2 -l nope data.qcow2'
same "measure errors" '"$IMG" measure; "$IMG" measure -f raw --size 1;
    "$IMG" measure --size 1 data.qcow2; "$IMG" measure -O qcow2 \
    -o cluster_size=3k --size 1; "$IMG" measure -O qcow2 -o foo=1 --size 1;
    "$IMG" measure -O qcow2 -o extended_l2=on,cluster_size=8k --size 1'

# --- info and map of images each tool made ---
BF=backing_fmt=qcow2
BACKING=backing_file=base.qcow2,$BF
PREALLOC=preallocation=metadata
# make IMG IO FILE OPTS: the same image by either tool
make_image() {
    local img=$1 io=$2 f=$3 opts=$4 c=-c
    # QEMU 7.2 cannot compress into allocated clusters
    case $opts in *preallocation*) c= ;; esac
    rm -f "$f"
    "$img" create -q -f qcow2 ${opts:+-o $opts} "$f" 6M &&
    "$io" -f qcow2 -c "write -q -P 1 0 1M" -c "write -q -z 1M 512k" \
        -c "write -q $c -P 2 2M 2M" -c "write -q -P 3 4200k 5k" \
        -c "discard -q 0 64k" "$f" &&
    # The file's extents settle as the kernel writes it back (an
    # unwritten extent with dirty pages is data until then, a hole
    # after), and the two tools map it one after the other: fsync it
    # first, so that both see the same file.
    sync "$f"
}
for opts in "" cluster_size=4k cluster_size=2M compat=0.10 \
            compression_type=zstd refcount_bits=8 lazy_refcounts=on \
            preallocation=metadata "backing_file=base.qcow2,backing_fmt=qcow2" \
            extended_l2=on "extended_l2=on,backing_file=base.qcow2,$BF" \
            "extended_l2=on,cluster_size=32k,$PREALLOC,$BACKING"; do
    for side in q b; do
        mkdir -p $side
        (cd $side && "$Q_IMG" create -q -f qcow2 base.qcow2 6M &&
         "$Q_IO" -c "write -q -P 9 0 6M" base.qcow2)
    done
    (cd q && make_image "$Q_IMG" "$Q_IO" t.qcow2 "$opts")
    (cd b && make_image "$QB_IMG" "$QB_IO" t.qcow2 "$opts")
    for side in q b; do
        same "info ($side, ${opts:--})" \
            'cd $side && "$IMG" info t.qcow2 | grep -v "^disk size"'
        same "info json ($side, ${opts:--})" \
            'cd $side && "$IMG" info --output=json t.qcow2 |
             grep -v actual-size'
        same "map ($side, ${opts:--})" 'cd $side && "$IMG" map t.qcow2'
        same "map json ($side, ${opts:--})" \
            'cd $side && "$IMG" map --output=json t.qcow2'
    done
    same "qblock's image maps as QEMU's (${opts:--})" \
        '"$IMG" map --output=json q/t.qcow2 | sed s#q/##;
         "$IMG" map --output=json b/t.qcow2 | sed s#b/##'
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
