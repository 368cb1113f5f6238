#!/usr/bin/env bash
# qblock-io against the real qemu-io: the same command lines, run on fresh
# raw images, must print the same output (stdout and stderr together, in
# the order they appear), exit with the same status and leave the same
# image content.  Timing figures and the program name are filtered out.
#
#   tests/interop/qemu-io-compat.sh BUILD_DIR
#
# Prints one "ok NAME" or "FAIL NAME" line per case (with a diff on
# failure) and "N passed, N failed" at the end; exits 1 if a case failed,
# 77 if qemu-io is not installed.
set -u

build=${1:?usage: qemu-io-compat.sh BUILD_DIR}
qblock_io=$(cd "$build" && pwd)/qblock-io

if ! command -v qemu-io >/dev/null 2>&1; then
    echo "skip: qemu-io is not installed (Debian package qemu-utils)"
    exit 77
fi
if [ ! -x "$qblock_io" ]; then
    echo "FAIL: $qblock_io has not been built"
    echo "0 passed, 1 failed"
    exit 1
fi
qemu_io=$(command -v qemu-io)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
image_size=1M
# 1: compare the images only (where qblock-io refuses what qemu-io does)
images_only=0

# Program names (with or without a path) and timing figures vary between
# runs and tools; everything else must match byte for byte, except the
# line by which "help" lists qblock-io's own "stats" command.
filter() {
    sed -e '/^stats -- prints I\/O statistics of the image and of each/d' \
        -e 's#^\([^ ]*/\)\{0,1\}qblock-io:#qemu-io:#' \
        -e 's#^\([^ ]*/\)\{0,1\}qemu-io:#qemu-io:#' \
        -e 's#^\(.*ops; \)[0-9:.]*\( sec\)\{0,1\} (.*)$#\1TIME (RATES)#' \
        -e 's#^\([0-9]*,[0-9]*\),[0-9:.]*,[-0-9.naif]*,[-0-9.naif]*$#\1,T,R#'
}

# A directory holding a fresh image t.raw of $image_size bytes whose
# first MiB has a recognisable content, and a pattern file for write -s.
fresh_dir() {
    local dir=$1
    rm -rf "$dir"
    mkdir -p "$dir"
    truncate -s "$image_size" "$dir/t.raw"
    printf 'qblock pattern file: 0123456789 abcdef\n' > "$dir/pattern.txt"
}

# Runs "$@" (with PROG standing for the tool) in $dir; output and status
# to $dir/out.
run_tool() {
    local dir=$1 tool=$2 input=$3
    shift 3
    local args=() a
    for a in "$@"; do
        args+=("${a//PROG/$tool}")
    done
    (
        cd "$dir" || exit 1
        if [ -n "$input" ]; then
            printf '%b' "$input" | "$tool" "${args[@]}" > out 2>&1
        else
            "$tool" "${args[@]}" < /dev/null > out 2>&1
        fi
        echo "exit status $?" >> out
    )
    filter < "$dir/out" > "$dir/out.filtered"
}

# compare NAME INPUT ARGS...: runs both tools with ARGS (commands on stdin
# when INPUT is not empty) and compares output, status and image.
compare() {
    local name=$1 input=$2
    shift 2
    local ref=$work/ref our=$work/our
    fresh_dir "$ref"
    fresh_dir "$our"
    run_tool "$ref" "$qemu_io" "$input" "$@"
    run_tool "$our" "$qblock_io" "$input" "$@"
    if [ "$images_only" = 1 ]; then
        : > "$ref/out.filtered"
        : > "$our/out.filtered"
    fi
    if ! diff -u "$ref/out.filtered" "$our/out.filtered" > "$work/diff"; then
        echo "FAIL $name: output differs (- qemu-io, + qblock-io)"
        cat "$work/diff"
        failed=$((failed + 1))
    elif ! cmp -s "$ref/t.raw" "$our/t.raw"; then
        echo "FAIL $name: the images differ afterwards"
        cmp "$ref/t.raw" "$our/t.raw" | head -n 3
        failed=$((failed + 1))
    else
        echo "ok $name"
        passed=$((passed + 1))
    fi
}

# Like compare, with the commands given as -c options on a raw image.
io() {
    local name=$1
    shift
    local args=(-f raw) c
    for c in "$@"; do
        args+=(-c "$c")
    done
    compare "$name" "" "${args[@]}" t.raw
}

# --- reads and writes with patterns ---
io write-read-pattern "write -P 0xab 0 4k" "read -P 0xab 0 4k"
io write-unaligned "write -P 7 100 1000" "read -P 7 100 1000" "read -P 0 0 100"
io write-default-pattern "write 512 512" "read -P 0xcd 512 512"
io write-suffixes "write -P 1 1k 1.5k" "read -P 1 0x400 0x600"
io write-zeroes "write -P 5 0 8k" "write -z 1k 2k" "read -P 0 1k 2k" \
    "read -P 5 0 1k" "read -P 5 3k 5k"
io write-zeroes-unmap "write -P 5 0 64k" "write -zu 0 64k" "read -P 0 0 64k"
io write-fua "write -f -P 3 0 4k" "read -P 3 0 4k"
io write-from-file "write -s pattern.txt 10 100" "read -v 0 128"
io write-quiet "write -q -P 9 0 512" "read -q -P 9 0 512" "read -P 9 0 512"
io write-terse "write -C 0 512" "read -C 0 512" "discard -C 0 512"
io read-pattern-range "write -P 1 4k 4k" "read -P 1 -s 512 -l 1k 4k 4k" \
    "read -P 0 -s 0x10 -l 1k 4096 4k" "read -P 1 -s 4096 -l 0 0 4096"
io read-zero-length "read 0 0" "write 0 0"
io read-p-ignored "read -p 0 512" "write -p 0 512"

# --- hex dumps ---
io dump-aligned "write -P 0x41 0 16" "read -v 0 48"
io dump-partial "write -s pattern.txt 3 40" "read -v 1 37" "read -v 5 1"
io dump-all-bytes "write -s pattern.txt 0 64" "read -v 0 64"
io dump-quiet "read -v -q 0 16"

# --- vectored I/O ---
io writev-readv "writev -P 0x11 0 512 1k" "readv -P 0x11 0 512 1k" \
    "readv -v 0 8 8"
io writev-options "writev -q 0 512" "writev -f -P 2 4k 1k 1k" \
    "readv -C 4k 2k" "readv -q -P 2 4k 2k"
io readv-mismatch "readv -P 0x12 0 512 1k"
io vectors-too-big "writev 0 3G" "writev 0 1G 1G 1G" "readv 0 abc"

# --- asynchronous I/O ---
io aio-write-read "aio_write -P 0x22 0 512 512" "aio_flush" \
    "aio_read -P 0x22 0 1k" "aio_flush" "aio_read -v 0 16" "aio_flush"
io aio-mismatch "aio_read -P 0x23 0 1k" "aio_flush"
io aio-quiet-terse "aio_write -q 0 16" "aio_flush" "aio_read -C 0 16" \
    "aio_flush"
io aio-invalid "aio_read -i 0 16" "aio_write -i 0 16" "aio_flush"
io aio-zeroes "write -P 1 0 4k" "aio_write -z -q 0 4k" "aio_flush" \
    "read -P 0 0 4k"
io aio-errors "aio_read 1M 512" "aio_flush" "aio_write 1M 512" "aio_flush"
io aio-misuse "aio_write -u 0 16" "aio_write -z 0 1k 1k" "aio_read 0" \
    "aio_read 0 3G" "aio_read -x 0 1" "aio_flush x"
io aio-completes-later "aio_write -P 1 0 512" "length" "aio_flush" \
    "read -P 1 0 512"

# --- flush, discard, truncate, length, info, map, alloc ---
io flush "write 0 512" "flush" "flush x"
io discard "write -P 1 0 64k" "discard 0 64k" "discard -q 0 4k" \
    "discard 1M 4k" "discard 0" "discard 0 3G" "discard 0 1 2"
io length-info "length" "info" "length x" "info x"
io map-alloc "map" "alloc 0" "alloc 0 1M" "alloc 1M" "alloc 0 2M" \
    "alloc 512 100" "alloc 1048575 100" "alloc 2M 1" "map x"
io truncate "truncate 2M" "length" "truncate 512k" "length" "map" \
    "truncate -m bogus 1M" "truncate" "truncate abc" "truncate -m full 1M" \
    "length"

# --- errors ---
io past-end "read 1M 512" "read 1048000 1024" "write 1M 512" \
    "writev 1M 512" "readv 1M 512"
io pattern-mismatch "write -P 1 0 4k" "read -P 2 0 4k" \
    "read -P 1 -s 512 4k 4k" \
    "read -P 1 -l 100 4096 4k"
io bad-numbers "read abc 512" "read 0 abc" "read 0 0x" "read 0 1.5" \
    "read 0 16E" "read 0 99999999999999999999" "alloc -1" "read 8E 1"
io too-long "read 0 3G" "read 0 2147483647" "write 0 3G" "write -z 0 3G" \
    "read 0 1e"
io bad-patterns "read -P 300 0 1" "read -P abc 0 1" "read -P -1 0 1" \
    "read -P 0x1ff 0 1" "read -P 077 0 1" "read -P 08 0 1"
io pattern-range "read -s 5 0 1" "read -l 5 0 1" \
    "read -P 0 -s 100 -l 100 0 50" "read -P 0 -s 10 -l 100 0 50"
io bad-options "read -x 0 1" "read -1 512" "read 0 -5" "write -v 0 1" \
    "writev -z 0 1" "discard -z 0 1" "truncate -1" "readv 0 1 -x"
io bad-counts "read" "read 0" "read 0 1 2" "length x" "map x" \
    "alloc 0 1 2" "truncate 1 2 3 4" "sleep" "sleep 1 2" "break a" \
    "help a b" "abort x" "close x"
io write-conflicts "write -z -P 1 0 512" "write -u 0 512" "write -n 0 512" \
    "write -b -z 0 1" "write -f -c 0 64k" "write -s pattern.txt -P 1 0 5" \
    "write -zn 0 512" "write -zf 0 512"
io write-from-missing-file "write -s nonexist 0 512" \
    "write -s /dev/null 0 100"
io sector-alignment "read -b 1 512" "read -b 0 1" "write -c 0 1" \
    "write -c 1 512"
io unknown-command "bogus" "length" "#comment"
io spaces "read  0   512" " length" "length " "read	0	1"
io sleep "sleep 10" "sleep 0x10" "sleep abc" "sleep -1" "sleep 1k"

# --- help ---
io help "help"
for cmd in abort aio_flush aio_read aio_write alloc break close discard \
    flush help info length map open quit read readv remove_break reopen \
    resume sigraise sleep truncate wait_break write writev; do
    io "help-$cmd" "help $cmd"
done
io help-unknown "help bogus" "help -x"

# --- open, close, reopen ---
compare no-image "" -c "read 0 1" -c "length" -c "info" -c "quit"
compare open-close "" -c "open -o driver=raw t.raw" -c "length" -c "close" \
    -c "length" -c "open -r -o driver=raw t.raw" -c "write 0 1" \
    -c "read 0 1"
compare open-errors "" -c "open -o driver=raw nonexist" -c "open" \
    -c "open -x" -c "open -t bogus t.raw" -c "open -d bogus t.raw" \
    -c "open -i bogus t.raw" -c "open -o driver=raw t.raw t.raw" \
    -c "open -o driver=raw,foo=bar t.raw"
compare open-options "" -c "open -n -o driver=raw t.raw" -c "close" \
    -c "open -C -d unmap -t writethrough -o driver=raw t.raw" \
    -c "write -P 4 0 512" -c "close" \
    -c "open -o driver=raw -o file.filename=t.raw" -c "read -P 4 0 512"
io open-twice "open -o driver=raw t.raw"
io reopen "reopen" "reopen -r" "write 0 1" "reopen -w" "write 0 1" \
    "reopen -r -w" "reopen -c bogus" "reopen -c none" "write 0 1" \
    "reopen x" "reopen -x" "reopen -o"
io reopen-options "reopen -c writethrough" "reopen -o discard=unmap" \
    "reopen -o cache.direct=on" "write -P 6 0 4k" "read -P 6 0 4k"
compare read-only "" -r -f raw -c "write 0 1" -c "writev 0 1" \
    -c "discard 0 1" -c "truncate 2M" -c "read 0 1" t.raw
compare image-opts "" --image-opts -c "read 0 1" \
    driver=raw,file.filename=t.raw
compare image-opts-bad "" --image-opts \
    "driver=raw,file.filename=t.raw,bogus=1"
compare image-opts-format "" --image-opts -f raw \
    driver=raw,file.filename=t.raw

# --- the command line ---
compare missing-image "" -f raw -c "read 0 1" nonexist
compare unknown-format "" -f foo t.raw
compare bad-cache "" -t bogus -f raw t.raw
compare bad-aio "" -i bogus -f raw t.raw
compare bad-discard "" -d bogus -f raw t.raw
compare force-share-rw "" -U -f raw -c "read 0 1" t.raw
compare force-share-ro "" -U -r -f raw -c "read 0 1" t.raw
compare misalign "" -m -f raw -c "write -P 8 3 1000" -c "read -P 8 3 1000" \
    t.raw
compare nocache "" -n -f raw -c "write -P 8 0 4k" -c "read -P 8 0 4k" t.raw
compare cache-modes "" -t unsafe -f raw -c "write 0 4k" -c "flush" t.raw
compare options-after-image "" t.raw -f raw -c length
compare native-aio-needs-direct "" -k -f raw -c "read 0 1" t.raw
compare native-aio-direct "" -k -n -f raw -c "write -P 2 0 4k" \
    -c "read -P 2 0 4k" t.raw
compare aio-modes "" -i threads -f raw -c "write -P 2 0 4k" \
    -c "open -i io_uring -o driver=raw t.raw" -c "close" \
    -c "open -i native -n -o driver=raw t.raw" -c "read -P 2 0 4k" t.raw
compare probed-raw "" -c "write -P 1 0 512" -c "write -P 1 512 512" \
    -c "read -P 1 512 512" t.raw
# qblock's block layer builds no temporary overlay: qblock-io refuses -s
# rather than write to the image, which must stay untouched either way.
images_only=1
compare snapshot "" -s -f raw -c "write -P 3 0 4k" -c "read -P 3 0 4k" t.raw
images_only=0
compare signals "" -f raw -c "length" -c "sigraise 15" -c "length" t.raw
compare signal-numbers "" -f raw -c "sigraise abc" \
    -c "sigraise 999999999999" -c "sigraise 0" t.raw
compare abort "" -f raw -c "write 0 512" -c "abort" t.raw
io compressed-raw "write -c 0 64k" "write -c -z 0 64k" "read -b 0 512"
io request-limit "read 0 2147483136" "read 1 2147483136" \
    "write -zn 0 3G"
compare quit-stops "" -f raw -c quit -c length t.raw
compare failure-then-quit "" -f raw -c "read 1M 1" -c quit t.raw

# --- blkdebug: break points and injected errors ---
compare blkdebug-break "" -f raw -c "break write_aio A" \
    -c "aio_write -P 9 0 512" -c "wait_break A" -c "resume A" -c "aio_flush" \
    -c "break read_aio B" -c "aio_read -P 9 0 512" -c "wait_break B" \
    -c "resume B" -c "aio_flush" blkdebug::t.raw
compare blkdebug-break-errors "" -f raw -c "break bogus B" -c "resume Z" \
    -c "remove_break Z" -c "break write_aio C" -c "remove_break C" \
    -c "break write_aio C" -c "break write_aio C" blkdebug::t.raw
blkdebug=driver=raw,file.driver=blkdebug,file.image.filename=t.raw
compare blkdebug-read-error "" --image-opts -c "read 0 512" \
    -c "aio_read 0 512" -c "aio_flush" -c "readv 0 512" -c "write 0 512" \
    "$blkdebug,file.inject-error.0.event=read_aio"
compare blkdebug-write-error "" --image-opts -c "write 0 512" \
    -c "aio_write 0 512" -c "aio_flush" -c "writev 0 512" \
    "$blkdebug,file.inject-error.0.event=write_aio,file.inject-error.0.errno=5"
compare no-blkdebug-below "" -f raw -c "break write_aio A" -c "resume A" \
    -c "remove_break A" t.raw

# --- commands from stdin ---
compare stdin-basic 'write -P 3 0 512\nread -P 3 0 512\nlength\n' -f raw t.raw
compare stdin-errors 'read 2M 1\nbogus\nlength\nread -x 0 1\n' -f raw t.raw
compare stdin-quit 'read 0 1\nquit\nlength\n' -f raw t.raw
compare stdin-blank-lines '\n\nlength\n  \n' -f raw t.raw
compare stdin-no-newline 'length' -f raw t.raw
compare stdin-aio 'aio_write -P 1 0 512\nlength\naio_flush\n' -f raw t.raw

# --- qcow2 images (made by the real qemu-img in both directories) ---
qcow2_io() {
    local name=$1
    shift
    local args=(-f qcow2) c dir
    for c in "$@"; do
        args+=(-c "$c")
    done
    for dir in "$work/ref" "$work/our"; do
        fresh_dir "$dir"
        qemu-img create -q -f qcow2 "$dir/t.qcow2" 4M
        "$qemu_io" -f qcow2 -c "write -q -P 0x5 1M 64k" "$dir/t.qcow2"
    done
    run_tool "$work/ref" "$qemu_io" "" "${args[@]}" t.qcow2
    run_tool "$work/our" "$qblock_io" "" "${args[@]}" t.qcow2
    if ! diff -u "$work/ref/out.filtered" "$work/our/out.filtered" \
            > "$work/diff"; then
        echo "FAIL $name: output differs (- qemu-io, + qblock-io)"
        cat "$work/diff"
        failed=$((failed + 1))
    else
        echo "ok $name"
        passed=$((passed + 1))
    fi
}
qcow2_io qcow2-info "info"
qcow2_io qcow2-map "write -P 1 0 4k" "write -z 2M 64k" "map" "alloc 0 4M"
qcow2_io qcow2-rw "write -P 2 100 5000" "read -P 2 100 5000" \
    "read -P 0 0 100" "read -P 5 1M 64k" "discard 1M 64k" "read -P 0 1M 64k"
qcow2_io qcow2-compressed "write -c -P 3 0 64k" "read -P 3 0 64k" \
    "write -c 100 512"
qcow2_io qcow2-snapshot-overlay "open -s t.qcow2" "write -P 9 1M 4k" \
    "read -P 9 1M 4k" "close" "open t.qcow2" "read -P 5 1M 64k"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
