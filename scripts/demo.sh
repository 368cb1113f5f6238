#!/usr/bin/env bash
# A short tour of qblock on a new image: the commands a user types, each
# shown before its output.  Every step checks what it shows; the script
# stops with an error at the first step that does not hold.
#   scripts/demo.sh [BUILD_DIR]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
img_tool=$build/qblock-img
io_tool=$build/qblock-io
dir=$(mktemp -d "${TMPDIR:-/tmp}/qblock-demo.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# Shows a command as one would type it (arguments with spaces quoted), then
# runs it.
run() {
    local shown=() a
    for a in "$@"; do
        case $a in *' '*) shown+=("\"$a\"") ;; *) shown+=("$a") ;; esac
    done
    printf '$ %s\n' "${shown[*]}" | sed "s#$build/##g"
    "$@"
}
fail() { echo "demo: $*" >&2; exit 1; }

# Number of flushes that reached the file node (qblock-io's stats command).
file_flushes() {
    "$io_tool" "$@" -c stats |
        sed -n 's/^node root\.file file [^:]*: .* flushes=\([0-9]*\) .*/\1/p'
}

step "Create a 64 MiB raw image"
run "$img_tool" create -f raw disk.img 64M

step "Write two patterns, read them back and verify them"
run "$io_tool" -f raw -c "write -P 0xa5 0 1M" -c "write -P 0x5a 8M 64k" \
    disk.img
run "$io_tool" -f raw -c "read -P 0xa5 0 1M" -c "read -P 0x5a 8M 64k" \
    -c "read -P 0 1M 7M" disk.img | tee read.log
grep -q "Pattern verification failed" read.log &&
    fail "the data read back differs from what was written"

step "What the image looks like: info, allocation map, check"
run "$img_tool" info -f raw disk.img
run "$img_tool" map -f raw --output=json disk.img | tee map.json
grep -q '"start": 8388608, "length": 65536, .*"data": true' map.json ||
    fail "map does not show the 64 KiB written at 8 MiB as data"
run "$img_tool" check -f raw disk.img || true

step "Convert to a sparse copy and compare"
run "$img_tool" convert -f raw -O raw disk.img copy.img
run "$img_tool" compare -f raw -F raw disk.img copy.img
du -k disk.img copy.img

if "$img_tool" --help | grep -q '^Supported formats:.* qcow2'; then
    step "The same data in qcow2"
    run "$img_tool" convert -f raw -O qcow2 disk.img disk.qcow2
    run "$img_tool" info disk.qcow2
    run "$img_tool" check disk.qcow2
    run "$img_tool" compare -f raw -F qcow2 disk.img disk.qcow2
fi

step "Writethrough is a flush after every write; writeback flushes on request"
wt=$(file_flushes -f raw -t writethrough -c "write -q 0 4k" \
     -c "write -q 4k 4k" -c "write -q 8k 4k" disk.img)
wb=$(file_flushes -f raw -t writeback -c "write -q 0 4k" \
     -c "write -q 4k 4k" -c "write -q 8k 4k" disk.img)
sw=$(file_flushes -f raw -t writeback -c "write -q 0 4k" \
     -c "reopen -c writethrough" -c "write -q 4k 4k" disk.img)
echo "3 writes, cache=writethrough: $wt flushes of the file"
echo "3 writes, cache=writeback:    $wb flushes of the file"
echo "1 write in writeback, switch to writethrough, 1 write: $sw flush"
[ "$wt" = 3 ] && [ "$wb" = 0 ] && [ "$sw" = 1 ] ||
    fail "unexpected flush counts ($wt, $wb, $sw)"

step "A quick benchmark: 4 KiB random-ish reads, 64 in flight"
run "$img_tool" bench -f raw -c 20000 -d 64 -S 1M disk.img

step "Done"
echo "Every step held.  The manuals are in docs/ (qblock-img.md, qblock-io.md)."
