#!/usr/bin/env bash
# qemu-img command-line compatibility: qblock-img against the real qemu-img.
#
#   tests/interop/qemu-img-compat.sh BUILD_DIR
#
# Each case runs the same command line with both tools, each in its own
# directory prepared identically, and compares stdout, stderr and the exit
# status after filtering what may differ: the program name, timings and
# progress percentages.  "effect" cases then inspect what a command left
# behind (an image's map, its size, its bytes) with the real qemu-img in
# both directories, so that the result is judged by the same oracle.
# Prints "ok NAME" or "FAIL NAME" (with the diff) per case and ends with
# "N passed, N failed"; exits 77 when qemu-img is not installed.
set -u

build=${1:?usage: qemu-img-compat.sh BUILD_DIR}
ours=$(cd "$build" && pwd)/qblock-img
if ! qemu_img=$(command -v qemu-img); then
    echo "skipped: qemu-img is not installed (Debian package qemu-utils)"
    exit 77
fi
if [ ! -x "$ours" ]; then
    echo "FAIL: $ours was not built"
    echo "0 passed, 1 failed"
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/qemu" "$work/ours"
pass=0
fail=0

# Program names, timings and progress figures are allowed to differ.
filter() {
    sed -e 's/qemu-img/PROG/g' -e 's/qblock-img/PROG/g' \
        -e 's/^\(Run completed in \)[0-9.]*\( seconds\.\)$/\1T\2/' \
        -e 's/    ([0-9.]*\/100%)\r//g'
}

# Runs "$@" (a shell command line, the tool as $IMG) in both directories.
run_both() {
    local side
    for side in qemu ours; do
        local img=$qemu_img
        [ $side = ours ] && img=$ours
        (cd "$work/$side" && IMG=$img bash -c "$1" \
            >"$work/$side.out" 2>"$work/$side.err"
         echo "exit status $?" >>"$work/$side.err")
        {
            filter <"$work/$side.out"
            echo "--- stderr"
            filter <"$work/$side.err"
        } >"$work/$side.all"
    done
}

report() {
    local name=$1
    if [ -n "${better:-}" ]; then
        sed -i -e "$better" "$work/qemu.all"
        better=
    fi
    if diff -u "$work/qemu.all" "$work/ours.all" >"$work/diff"; then
        echo "ok $name"
        pass=$((pass + 1))
    else
        echo "FAIL $name"
        sed 's/^/    /' "$work/diff"
        fail=$((fail + 1))
    fi
}

# case NAME ARGS...: the tool with ARGS in both directories.
case_() {
    local name=$1
    shift
    run_both "\"\$IMG\" $*"
    report "$name"
}

# better NAME SED ARGS...: like case_, where qblock deliberately prints a
# clearer message than qemu-img (listed in docs/compatibility.md); SED turns
# qemu-img's output into what qblock prints, and everything else must
# still be equal.
better() {
    local name=$1 sed_expr=$2
    shift 2
    run_both "\"\$IMG\" $*"
    better=$sed_expr
    report "$name"
}

# effect NAME COMMAND: a shell command (real qemu-img as $IMG, or any
# tool) run in both directories to compare what earlier cases left.
effect() {
    local name=$1
    local cmd=$2
    local side
    for side in qemu ours; do
        (cd "$work/$side" && IMG=$qemu_img bash -c "$cmd" \
            >"$work/$side.out" 2>"$work/$side.err"
         echo "exit status $?" >>"$work/$side.err")
        { filter <"$work/$side.out"; echo "--- stderr";
          filter <"$work/$side.err"; } >"$work/$side.all"
    done
    report "effect: $name"
}

# prep COMMAND: the same setup in both directories (no tool involved, so
# that a case sees byte-identical inputs).
prep() {
    (cd "$work/qemu" && bash -c "$1") &&
    (cd "$work/ours" && bash -c "$1")
}

# A sparse raw image: data at 0, 1M (64k), zeroes written at 3M, 1M at 9M.
sparse_image() {
    local f=$1
    echo "truncate -s 10M $f &&
          dd if=/dev/urandom of=$f.data bs=64k count=16 status=none &&
          dd if=$f.data of=$f bs=64k count=1 conv=notrunc status=none &&
          dd if=$f.data of=$f bs=64k count=1 seek=16 conv=notrunc status=none &&
          dd if=/dev/zero of=$f bs=64k count=1 seek=48 conv=notrunc \
    status=none &&
          dd if=$f.data of=$f bs=64k count=16 seek=144 conv=notrunc \
    status=none &&
          rm $f.data"
}

# --- global command line ---
case_ "no arguments"
case_ "unknown command" frobnicate
case_ "unknown global option" -x info
case_ "missing argument of -T" -T
case_ "help: usage line" "--help | sed -n 3p"
case_ "help of a sub-command" "info -h | sed -n 3,10p"
case_ "help exit status" "map --help >/dev/null"

# --- create ---
case_ "create 1M" create c1.img 1M
case_ "create -f raw 1.5M" create -f raw c2.img 1.5M
case_ "create 0" create c3.img 0
case_ "create 100b" create c4.img 100b
case_ "create hex size" create c5.img 0x10
case_ "create -q" create -q c6.img 1G
case_ "create preallocation=full" create -f raw -o preallocation=full c7.img 1M
case_ "create preallocation=falloc" create -o preallocation=falloc c8.img 2M
case_ "create -o size" create -f raw -o size=3k c9.img
effect "created sizes" "stat -c '%n %s' c1.img c2.img c3.img c4.img c5.img \
    c6.img c7.img c8.img c9.img"
effect "create preallocation=full allocates" "du -k c7.img"
case_ "create -o help" create -o help
case_ "create -f raw -o help" create -f raw -o help
case_ "create -o help with file" create -f raw -o help x.img
case_ "create -o help among options" create -f raw -o \
    preallocation=off,help x.img 1M
case_ "create file options order" create -f raw -o \
    nocow=on,extent_size_hint=2M,preallocation=off c10.img 1.5M
better "create bad preallocation" \
    "s/invalid parameter value: bad/Parameter 'preallocation' does not accept value 'bad'/" \
    create -f raw -o preallocation=bad x.img 1M
case_ "create bad bool" create -f raw -o nocow=maybe x.img 1M
case_ "create bad -o size" create -f raw -o size=1x x.img
case_ "create negative size" create x.img -5
case_ "create bad suffix" create x.img 1x
case_ "create fraction in bytes" create x.img 1.5
case_ "create 8E" create x.img 8E
case_ "create size twice" create -f raw -o size=2M x.img 3M
case_ "create no size" create x.img
case_ "create no file" create
case_ "create extra argument" create x.img 1M 2M
case_ "create unknown format" create -f nope x.img 1M
case_ "create unknown option" create -f raw -o foo=bar x.img 1M
case_ "create backing for raw" create -f raw -b c1.img x.img 1M
case_ "create missing -f argument" create -f
case_ "create unknown flag" create -Z x.img 1M

# --- info ---
prep "$(sparse_image sp.img)"
prep "truncate -s 1M a.img"
case_ "info" info a.img
case_ "info -f raw" info -f raw a.img
case_ "info json" info --output=json a.img
case_ "info json sparse" info --output=json -f raw sp.img
case_ "info backing chain json" info --backing-chain --output=json a.img
case_ "info backing chain human" info --backing-chain -U a.img
case_ "info image-opts" info --image-opts driver=raw,file.filename=a.img
case_ "info image-opts json" info --output=json --image-opts \
    driver=raw,file.driver=file,file.filename=a.img
case_ "info bad output" info --output=xml a.img
case_ "info no such file" info nonexist.img
case_ "info no file" info
case_ "info two files" info a.img a.img
case_ "info wrong format" info -f null-co a.img

# --- check ---
case_ "check raw" check a.img
case_ "check raw json" check --output=json -f raw a.img
case_ "check -r bad" check -r bad a.img
case_ "check -T bad" check -T bad a.img
case_ "check no such file" check nonexist.img

# --- map ---
case_ "map human" map -f raw sp.img
case_ "map json" map -f raw --output=json sp.img
case_ "map window" map -f raw --output=json --start-offset=1M \
    --max-length=2M sp.img
case_ "map window human" map -f raw --start-offset=64k --max-length=3M sp.img
case_ "map bad start" map --start-offset=-1 sp.img
case_ "map bad length" map --max-length=x sp.img
case_ "map bad output" map --output=foo sp.img

# --- compare ---
prep "cp --sparse=always sp.img sp2.img && truncate -s 10M z.img &&
      truncate -s 12M z2.img && cp --sparse=always z2.img z3.img &&
      printf x | dd of=z3.img bs=1 seek=11534337 conv=notrunc status=none"
case_ "compare equal" compare -f raw -F raw sp.img sp2.img
case_ "compare different" compare -f raw -F raw sp.img z.img
case_ "compare -q different" compare -q -f raw -F raw sp.img z.img
case_ "compare size mismatch" compare -f raw -F raw z.img z2.img
case_ "compare size mismatch reversed" compare -f raw -F raw z2.img z.img
case_ "compare strict size" compare -s -f raw -F raw z.img z2.img
case_ "compare tail differs" compare -f raw -F raw z.img z3.img
case_ "compare one file" compare sp.img
case_ "compare no such file" compare -f raw -F raw sp.img nonexist
case_ "compare bad cache" compare -T bad sp.img sp2.img
case_ "compare -p" compare -p -f raw -F raw sp.img sp2.img
# byte 5000 is random: write its complement, so that it always changes
prep "cp --sparse=always sp.img sp3.img &&
      b=\$(od -An -tu1 -j5000 -N1 sp.img) &&
      printf \"\\\\\$(printf %o \$((b ^ 255)))\" |
      dd of=sp3.img bs=1 seek=5000 conv=notrunc status=none"
case_ "compare mismatch inside a sector" compare -f raw -F raw sp.img sp3.img

# --- convert ---
case_ "convert" convert -f raw sp.img cv1.img
effect "convert keeps holes" "\$IMG map -f raw --output=json cv1.img && cmp \
    sp.img cv1.img"
case_ "convert -S 0" convert -f raw -O raw -S 0 sp.img cv2.img
effect "convert -S 0 allocates" "\$IMG map -f raw --output=json cv2.img && \
    cmp sp.img cv2.img"
case_ "convert -S 64k -m 16 -W" convert -f raw -S 64k -m 16 -W sp.img cv3.img
effect "convert -S 64k" "cmp sp.img cv3.img"
prep "truncate -s 10M cv4.img && truncate -s 1M small.img"
case_ "convert -n" convert -f raw -n sp.img cv4.img
effect "convert -n content" "cmp sp.img cv4.img"
case_ "convert -n smaller target" convert -n -f raw sp.img small.img
case_ "convert -n missing target" convert -n -f raw sp.img none.img
case_ "convert two sources" convert -f raw sp.img a.img cv5.img
effect "convert two sources content" "cat sp.img a.img | cmp - cv5.img"
case_ "convert -c raw" convert -c -O raw sp.img cv6.img
case_ "convert -S 7" convert -S 7 sp.img cv6.img
case_ "convert -S x" convert -S x sp.img cv6.img
case_ "convert -m 0" convert -m 0 sp.img cv6.img
case_ "convert -m 17" convert -m 17 sp.img cv6.img
case_ "convert unknown format" convert -O nope sp.img cv6.img
case_ "convert -t bad" convert -t bad sp.img cv6.img
case_ "convert -T bad" convert -T bad sp.img cv6.img
case_ "convert no target" convert sp.img
case_ "convert -o help" convert -O raw -o help
case_ "convert -n with -o" convert -n -o preallocation=full sp.img cv4.img
case_ "convert target-image-opts without -n" convert --image-opts \
    driver=raw,file.filename=sp.img --target-image-opts \
    driver=raw,file.filename=cv4.img
case_ "convert image-opts -n" convert -n --image-opts \
    driver=raw,file.filename=sp.img --target-image-opts \
    driver=raw,file.filename=cv4.img
case_ "convert -p" convert -p -f raw sp.img cv7.img
case_ "convert preallocation=full" convert -f raw -O raw -o \
    preallocation=full sp.img cv8.img
effect "convert preallocation=full allocates" "\$IMG map -f raw \
    --output=json cv8.img && cmp sp.img cv8.img"
case_ "convert -o help, format by default" convert -o help sp.img cv9.img
case_ "convert -B for raw" convert -B a.img sp.img cv9.img
case_ "convert -q -S 0 -m 1" convert -q -S 0 -m 1 -f raw sp.img cv10.img
effect "convert -m 1 content" "cmp sp.img cv10.img"
prep "truncate -s 1000 odd.img"
case_ "convert unaligned size" convert -f raw odd.img odd2.img
effect "convert unaligned size rounds up" "stat -c %s odd2.img"

# --- resize ---
prep "truncate -s 1M r.img"
case_ "resize grow" resize -f raw r.img 2M
case_ "resize relative grow" resize -f raw r.img +1M
case_ "resize shrink refused" resize -f raw r.img -- -1M
case_ "resize shrink" resize -f raw --shrink r.img -1M
case_ "resize -q" resize -f raw -q r.img 4M
effect "resized size" "stat -c %s r.img"
case_ "resize probed raw warns" resize r.img 5M
case_ "resize bad preallocation" resize --preallocation=bad r.img 3M
case_ "resize not positive" resize -f raw --shrink r.img -- -10M
case_ "resize bad size" resize -f raw r.img x
case_ "resize no size" resize r.img
case_ "resize too many" resize r.img 1M 2M
case_ "resize preallocation=full" resize -f raw --preallocation=full r.img 6M
effect "resize preallocation=full size" "stat -c %s r.img"

# --- dd ---
case_ "dd" dd -f raw if=sp.img of=dd1.img
effect "dd content" "cmp sp.img dd1.img"
case_ "dd bs count skip" dd -f raw -O raw if=sp.img of=dd2.img bs=1M \
    count=2 skip=1
effect "dd bs count skip content" "stat -c %s dd2.img && dd if=sp.img bs=1M \
    skip=1 count=1 status=none | cmp - dd2.img"
case_ "dd skip past end" dd -f raw if=sp.img of=dd3.img skip=100M
case_ "dd missing output" dd if=sp.img
case_ "dd bad bs" dd if=sp.img of=dd4.img bs=0
case_ "dd bad count" dd if=sp.img of=dd4.img count=-1
case_ "dd unknown operand" dd if=sp.img of=dd4.img foo=1
case_ "dd operand without value" dd if=sp.img of=dd4.img bs

# --- bench ---
prep "truncate -s 64M bn.img"
case_ "bench read" bench -f raw -c 1000 bn.img
case_ "bench write options" bench -f raw -c 100 -d 4 -s 8k -o 1M -S 64k -w \
    bn.img
case_ "bench flush interval" bench -f raw -c 100 -d 2 -w --flush-interval=3 \
    bn.img
case_ "bench flush no drain" bench -f raw -c 100 -d 2 -w --flush-interval=3 \
    --no-drain --pattern=7 bn.img
case_ "bench -q prints" bench -f raw -q -c 10 -t none -i io_uring bn.img
case_ "bench flush interval read" bench -f raw -c 10 --flush-interval=10 bn.img
case_ "bench flush interval too small" bench -f raw -c 10 -w \
    --flush-interval=10 bn.img
case_ "bench beyond end" bench -f raw -c 1 -o 64M bn.img
case_ "bench bad count" bench -c x bn.img
case_ "bench bad depth" bench -d -1 bn.img
case_ "bench bad size" bench -s 3G bn.img
case_ "bench bad offset" bench -o x bn.img
case_ "bench bad pattern" bench --pattern=256 bn.img
case_ "bench bad aio" bench -i bad bn.img
case_ "bench bad cache" bench -t bad bn.img
case_ "bench no file" bench

# --- qcow2, through the same generic paths; inputs made by real QEMU ---
# Every build has the qcow2 driver: without it these cases fail, they are
# not skipped.
if ! "$ours" --help | grep -q '^Supported formats:.* qcow2'; then
    echo "FAIL qcow2 cases: qblock-img lists no qcow2 driver"
    fail=$((fail + 1))
else
    case_ "info raw file as qcow2" info -f qcow2 a.img
    prep "\"$qemu_img\" create -q -f qcow2 base.qcow2 1M &&
          qemu-io -f qcow2 -c 'write -P 1 0 128k' base.qcow2 >/dev/null &&
          \"$qemu_img\" create -q -f qcow2 -b base.qcow2 -F qcow2 \
              top.qcow2 &&
          qemu-io -f qcow2 -c 'write -P 2 512k 64k' -c 'write -z 0 64k' \
              top.qcow2 >/dev/null &&
          \"$qemu_img\" convert -f qcow2 -O raw top.qcow2 top.raw"
    case_ "qcow2 create" create -f qcow2 q1.qcow2 1M
    case_ "qcow2 create options" create -f qcow2 \
        -o cluster_size=4k,compat=1.1 q2.qcow2 1M
    case_ "qcow2 create with backing" create -f qcow2 -b base.qcow2 \
        -F qcow2 q3.qcow2
    case_ "qcow2 create backing without format" create -f qcow2 \
        -b base.qcow2 q4.qcow2
    case_ "qcow2 create missing backing" create -f qcow2 -b nonex \
        -F qcow2 q4.qcow2
    case_ "qcow2 create -o help" create -f qcow2 -o help
    effect "qcow2 created images pass check" \
        "\$IMG check q1.qcow2 && \$IMG check q2.qcow2 && \$IMG check q3.qcow2"
    case_ "qcow2 info" info base.qcow2
    case_ "qcow2 info json" info --output=json base.qcow2
    case_ "qcow2 info chain" info --backing-chain top.qcow2
    case_ "qcow2 info chain json" info --backing-chain --output=json top.qcow2
    case_ "qcow2 map" map top.qcow2
    case_ "qcow2 map json" map --output=json top.qcow2
    case_ "qcow2 check" check base.qcow2
    case_ "qcow2 check json" check --output=json base.qcow2
    case_ "qcow2 compare chain" compare base.qcow2 top.qcow2
    case_ "qcow2 compare with raw" compare top.qcow2 top.raw
    case_ "qcow2 compare strict" compare -s top.qcow2 top.raw
    case_ "qcow2 convert to raw" convert -O raw top.qcow2 qc1.raw
    effect "qcow2 convert to raw content" "cmp top.raw qc1.raw"
    case_ "qcow2 convert from raw" convert -f raw -O qcow2 sp.img qc2.qcow2
    effect "qcow2 convert from raw result" \
        "\$IMG check qc2.qcow2 && \$IMG compare -f raw sp.img qc2.qcow2"
    case_ "qcow2 convert -c" convert -c -f raw -O qcow2 sp.img qc3.qcow2
    effect "qcow2 convert -c result" \
        "\$IMG check qc3.qcow2 && \$IMG compare -f raw sp.img qc3.qcow2"
    case_ "qcow2 convert -B" convert -O qcow2 -B base.qcow2 -F qcow2 \
        top.qcow2 qc4.qcow2
    effect "qcow2 convert -B result" \
        "\$IMG compare top.qcow2 qc4.qcow2 && \$IMG map --output=json qc4.qcow2"
    case_ "qcow2 resize" resize q1.qcow2 2M
    effect "qcow2 resized" "\$IMG info --output=json q1.qcow2 | grep virtual"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
