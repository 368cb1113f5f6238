#!/usr/bin/env bash
# Virtual PC / Hyper-V images (VHD, format vpc) against QEMU 7.2: reading,
# creating and writing them.
#
#   tests/interop/vpc-interop.sh BUILD_DIR
#
# qemu-img converts one disk (data, zeroes, holes) to a dynamic and a
# fixed image; for each, qblock-img info (human and JSON) and map print
# what qemu-img prints, check says what qemu-img says (vpc has none),
# qblock reads the bytes qemu-img reads and converts them to the qcow2
# qemu-img writes.  The size a footer gives, by creator application and
# geometry, is the one qemu-img shows; a differencing disk reads as
# QEMU reads it (its own blocks only); the runtime option
# force_size_calc overrides the creator as in QEMU.  qblock-img create
# and convert -O vpc write qemu-img's files byte for byte but for the
# footer's timestamp and UUID (the clock and random in both: they are
# masked, with the checksum that covers them, which qemu-img then
# verifies); blockdev-create makes the disks, sizes and errors
# qemu-storage-daemon makes (jobs-vs-qsd.py's create-vpc scenario);
# the same writes through qblock-io and qemu-io leave the same files,
# and each tool reads what the other wrote.  Then what both refuse,
# each with QEMU's message (hostile footers, headers, BATs, sizes), and
# what qblock alone refuses: a block over the metadata, a write onto a
# fixed disk's footer.  Prints "ok NAME" / "FAIL NAME", ends with "N
# passed, N failed, N skipped"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: vpc-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
. "$here/vmdk-lib.bash"

# vhd_patch FILE AT FIELD FORMAT VALUE [keep]: a big-endian field of the
# footer (AT is its offset; negative from the end) or dynamic header at
# AT, whose checksum is then made right again unless "keep"
vhd_patch() {
    python3 - "$@" <<'EOF'
import struct, sys
path, at, field, fmt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
val = sys.argv[5]
d = bytearray(open(path, 'rb').read())
if at < 0:
    at += len(d)
v = val.encode().ljust(4, b'\0') if fmt.endswith('s') else int(val, 0)
struct.pack_into('>' + fmt, d, at + field, v)
header = d[at:at + 8] == b'cxsparse'
csum, length = (36, 1024) if header else (64, 512)
if len(sys.argv) < 7:
    struct.pack_into('>I', d, at + csum, 0)
    struct.pack_into('>I', d, at + csum, ~sum(d[at:at + length]) & 0xffffffff)
open(path, 'wb').write(d)
EOF
}

# vhd_same A B: the same size and bytes but for the footers' timestamp,
# UUID and checksum; each footer's checksum is right and its timestamp
# is within a minute of now.  Only the files' data is read (a fixed disk
# is a hole of up to 2040 GiB), in 4 KiB pieces, a piece of zeroes being
# as good as a hole.
vhd_same() {
    python3 - "$1" "$2" <<'EOF'
import os, struct, sys, time
PIECE = 4096
def masked(path):
    with open(path, 'rb') as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        spots = sorted({size - 512, 0} if head == b'conectix' else
                       {size - 512}) if size >= 512 else []
        footers = {}
        for at in spots:
            f.seek(at)
            d = bytearray(f.read(512))
            want = struct.unpack_from('>I', d, 64)[0]
            d[64:68] = bytes(4)
            if ~sum(d) & 0xffffffff != want:
                sys.exit(f'{path}: footer at {at}: bad checksum')
            stamp = struct.unpack_from('>I', d, 24)[0] + 946684800
            if abs(stamp - time.time()) > 60:
                sys.exit(f'{path}: footer at {at}: timestamp {stamp} is '
                         'not now')
            d[24:28] = bytes(4)
            d[68:84] = bytes(16)
            footers[at] = bytes(d)
        pieces, at = {}, 0
        while at < size:
            try:
                start = os.lseek(f.fileno(), at, os.SEEK_DATA)
            except OSError:
                break
            end = os.lseek(f.fileno(), start, os.SEEK_HOLE)
            start -= start % PIECE
            f.seek(start)
            while start < end:
                pieces[start] = f.read(PIECE)
                start += PIECE
            at = end
    # the footers, masked, over the pieces that hold them
    for fat, d in footers.items():
        for p in range(fat - fat % PIECE, fat + 512, PIECE):
            b = bytearray(pieces.get(p, bytes(min(PIECE, size - p))))
            lo, hi = max(fat, p), min(fat + 512, p + len(b))
            b[lo - p:hi - p] = d[lo - fat:hi - fat]
            pieces[p] = bytes(b)
    return size, {p: d for p, d in pieces.items() if d.strip(b'\0')}
a, b = masked(sys.argv[1]), masked(sys.argv[2])
if a[0] != b[0]:
    sys.exit(f'{sys.argv[1]} and {sys.argv[2]} differ in size')
for p in sorted(set(a[1]) | set(b[1])):
    if a[1].get(p) != b[1].get(p):
        sys.exit(f'{sys.argv[1]} and {sys.argv[2]} differ at {p}')
EOF
}

# both_say NAME CMD...: qemu-img and qblock-img (or qemu-io and
# qblock-io: Q_ and QB_ swapped in) give the same output and exit code
both_say() {
    local name=$1 out1 out2 rc1 rc2
    shift
    out1=$("$@" 2>&1 | sed 's/^qemu-\(img\|io\)/TOOL/')
    rc1=${PIPESTATUS[0]}
    local cmd=("$@")
    case ${cmd[0]} in
    "$Q_IMG") cmd[0]=$QB_IMG ;;
    "$Q_IO") cmd[0]=$QB_IO ;;
    esac
    out2=$("${cmd[@]}" 2>&1 | sed 's/^qblock-\(img\|io\)/TOOL/')
    rc2=${PIPESTATUS[0]}
    if [ "$rc1" = "$rc2" ] && [ "$out1" = "$out2" ]; then
        ok "$name"
    else
        fail "$name" "qemu exit $rc1, qblock exit $rc2" \
            "$(diff <(echo "$out1") <(echo "$out2"))"
    fi
}

# ---- reading ----

head -c $((24 << 20)) /dev/zero > src.raw
dd if=/dev/urandom of=src.raw bs=1M count=1 conv=notrunc 2>/dev/null
qemu-io -f raw -c 'write -P 0xab 5M 300k' -c 'write -P 0x5c 13M 3584' \
    -c 'write -P 0x11 24572k 4k' src.raw >/dev/null
qemu-img convert -f raw -O vpc src.raw dynamic.vhd
qemu-img convert -f raw -O vpc -o subformat=fixed src.raw fixed.vhd
qemu-img convert -f raw -O vpc -o subformat=fixed,force_size src.raw \
    forced.vhd

for img in dynamic fixed forced; do
    f=$img.vhd
    # a fixed disk's footer is at its end: QEMU probes it as raw
    fmt=(-f vpc)
    same "$img: info" qemu-img info "${fmt[@]}" "$f" -- \
        "$QB_IMG" info "${fmt[@]}" "$f"
    same "$img: info --output=json" qemu-img info --output=json \
        "${fmt[@]}" "$f" -- "$QB_IMG" info --output=json "${fmt[@]}" "$f"
    same "$img: map" qemu-img map "${fmt[@]}" "$f" -- \
        "$QB_IMG" map "${fmt[@]}" "$f"
    same "$img: map --output=json" qemu-img map --output=json \
        "${fmt[@]}" "$f" -- "$QB_IMG" map --output=json "${fmt[@]}" "$f"
    both_say "$img: check (vpc has none)" "$Q_IMG" check -f vpc "$f"
    qemu-img convert -f vpc -O raw "$f" "$img.ref"
    check "$img: qblock reads what qemu-img reads" \
        quiet "$QB_IMG" compare -f vpc -F raw "$f" "$img.ref"
    check "$img: converted to qcow2 by qblock-img, qemu-img's bytes" \
        quiet sh -c "
        '$QB_IMG' convert -f vpc -O qcow2 '$f' '$img.qcow2' &&
        qemu-img convert -f vpc -O qcow2 '$f' '$img.q.qcow2' &&
        cmp '$img.qcow2' '$img.q.qcow2'"
done
check "dynamic: qblock-io reads the patterns" \
    quiet "$QB_IO" -r -f vpc -c 'read -P 0xab 5M 300k' \
    -c 'read -P 0x5c 13M 3584' -c 'read -P 0 14M 1M' dynamic.vhd
both_say "a dynamic image is probed" "$Q_IMG" info dynamic.vhd
both_say "a fixed image is probed as raw" "$Q_IMG" info fixed.vhd

# the size: CHS unless the creator uses the byte count or the geometry
# is the largest; QEMU truncates a byte count to whole sectors
qemu-img create -q -f vpc small.vhd 100M
for creator in 'vpc ' qemu qem2 'win ' 'd2v ' CTXS tap xxxx; do
    cp small.vhd c.vhd
    vhd_patch c.vhd 0 28 4s "$creator"
    vhd_patch c.vhd 0 48 Q 50000000
    both_say "creator '$creator': the size" "$Q_IMG" info --output=json c.vhd
done
cp small.vhd c.vhd
vhd_patch c.vhd 0 48 Q 50000000
vhd_patch c.vhd 0 56 H 65535
vhd_patch c.vhd 0 58 H $(((16 << 8) | 255))
both_say "the largest geometry: the byte count" \
    "$Q_IMG" info --output=json c.vhd
for size in 0x1fe00000000 0x1fe00000200; do
    cp small.vhd c.vhd
    vhd_patch c.vhd 0 28 4s 'win '
    vhd_patch c.vhd 0 48 Q $size
    vhd_patch c.vhd 512 28 I 0x100000
    both_say "a dynamic disk of $size bytes" "$Q_IMG" info c.vhd
done
cp fixed.vhd c.vhd
vhd_patch c.vhd -512 28 4s 'win '
vhd_patch c.vhd -512 48 Q $((64 << 20))
both_say "a fixed disk larger than its file: info" \
    "$Q_IMG" info -f vpc --output=json c.vhd
check "... reads zeroes past the file" \
    quiet "$QB_IO" -r -f vpc -c 'read -P 0 40M 1M' c.vhd
for calc in chs current_size foo; do
    for creator in qemu 'win '; do
        cp small.vhd c.vhd
        vhd_patch c.vhd 0 28 4s "$creator"
        vhd_patch c.vhd 0 48 Q 50000000
        both_say "force_size_calc=$calc, creator '$creator'" \
            "$Q_IMG" info --output=json --image-opts \
            "driver=vpc,force_size_calc=$calc,file.filename=c.vhd"
    done
done
for bs in 0x40000000 0x80000000; do
    cp small.vhd c.vhd
    vhd_patch c.vhd 512 32 I $bs
    both_say "blocks of $bs bytes" "$Q_IMG" info c.vhd
done
# a differencing disk: read as QEMU reads it, without its parent
cp dynamic.vhd diff.vhd
vhd_patch diff.vhd 0 60 I 4
both_say "a differencing disk: info" "$Q_IMG" info diff.vhd
check "a differencing disk: its own blocks read" \
    quiet "$QB_IMG" compare -f vpc -F raw diff.vhd dynamic.ref

# ---- creating ----

mkdir q b
create_same() {
    local name=$1 out1 out2 f
    shift
    for f in "$@"; do
        case $f in *.vhd) break ;; esac
    done
    rm -f "q/$f" "b/$f"
    out1=$(cd q && qemu-img create -f vpc "$@" 2>&1 | sed 's/^qemu-img/TOOL/')
    out2=$(cd b && "$QB_IMG" create -f vpc "$@" 2>&1 |
           sed 's/^qblock-img/TOOL/')
    if [ "$out1" != "$out2" ]; then
        fail "create $name" "$(diff <(echo "$out1") <(echo "$out2"))"
    elif [ "$(test -e "q/$f" && echo y)" != \
           "$(test -e "b/$f" && echo y)" ]; then
        fail "create $name" "one tool left q/$f or b/$f, the other not"
    elif [ -e "q/$f" ] && ! out1=$(vhd_same "q/$f" "b/$f" 2>&1); then
        fail "create $name" "$out1"
    else
        ok "create $name"
    fi
}
for size in 0 1000 1M 10M 100M 1G 32G 127G 200G 2040G 2041G; do
    create_same "$size" x.vhd "$size"
    create_same "$size, fixed" -o subformat=fixed x.vhd "$size"
    create_same "$size, force_size" -o force_size=on x.vhd "$size"
    create_same "$size, fixed, force_size" -o subformat=fixed,force_size \
        x.vhd "$size"
done
create_same "subformat=dynamic,force_size=off" \
    -o subformat=dynamic,force_size=off x.vhd 5M
create_same "an unknown subformat" -o subformat=foo x.vhd 5M
create_same "force_size=maybe" -o force_size=maybe x.vhd 5M
create_same "no size" x.vhd
both_say "create -o help" "$Q_IMG" create -f vpc -o help x.vhd
for sub in dynamic fixed; do
    for opts in "subformat=$sub" "subformat=$sub,force_size"; do
        qemu-img convert -f raw -O vpc -o "$opts" src.raw q/c.vhd
        "$QB_IMG" convert -f raw -O vpc -o "$opts" src.raw b/c.vhd
        check "convert -O vpc -o $opts: qemu-img's file" \
            vhd_same q/c.vhd b/c.vhd
    done
done

# blockdev-create over QMP, against qemu-storage-daemon
qsd_scenario "$build" create-vpc

# ---- writing ----

writes=(-c 'write -P 1 3M 4k' -c 'write -P 2 0 512' -c 'write -z 5M 64k'
        -c 'discard 0 512' -c 'write -P 3 2M 4M' -c 'write -P 4 3M 512'
        -c 'write -P 5 19M 2M')
for sub in dynamic fixed; do
    qemu-img create -q -f vpc -o subformat=$sub q/w.vhd 24M
    cp q/w.vhd b/w.vhd
    qemu-io -f vpc "${writes[@]}" q/w.vhd >/dev/null
    "$QB_IO" -f vpc "${writes[@]}" b/w.vhd >/dev/null
    check "$sub: qblock-io's writes leave qemu-io's file" cmp q/w.vhd b/w.vhd
    check "$sub: qemu-io reads what qblock-io wrote" \
        quiet qemu-io -r -f vpc -c 'read -P 2 0 512' -c 'read -P 3 2M 1M' \
        -c 'read -P 4 3M 512' -c 'read -P 3 5M 64k' \
        -c 'read -P 5 19M 2M' b/w.vhd
    # ... and the other way: qemu-io writes over qblock-io's
    qemu-io -f vpc -c 'write -P 6 1M 3M' -c 'write -P 7 22M 512' \
        b/w.vhd >/dev/null
    check "$sub: qblock-io reads what qemu-io wrote" \
        quiet "$QB_IO" -r -f vpc -c 'read -P 2 0 512' \
        -c 'read -P 6 1M 3M' -c 'read -P 3 4M 2M' -c 'read -P 7 22M 512' \
        b/w.vhd
    both_say "$sub: map after writes" "$Q_IMG" map --output=json -f vpc \
        q/w.vhd
done
# a block allocated by a foreign tool, its bitmap partly set: a write
# sets it all, as QEMU does
qemu-img create -q -f vpc q/m.vhd 8M
qemu-io -f vpc -c 'write -P 1 2M 4k' q/m.vhd >/dev/null
bitmap=$(python3 -c "
import struct
d = open('q/m.vhd', 'rb').read()
print(struct.unpack_from('>I', d, 1536 + 4)[0] * 512)")
printf '\x0f' | dd of=q/m.vhd bs=1 seek="$bitmap" conv=notrunc 2>/dev/null
cp q/m.vhd b/m.vhd
qemu-io -f vpc -c 'write -P 2 3M 512' q/m.vhd >/dev/null
"$QB_IO" -f vpc -c 'write -P 2 3M 512' b/m.vhd >/dev/null
check "a partial bitmap is set whole by a write" cmp q/m.vhd b/m.vhd

# what vpc does not have, said as qemu-img says it
qemu-img create -q -f vpc n.vhd 10M
for cmd in "measure -O vpc --size 1G" "resize -f vpc n.vhd 20M" \
           "amend -f vpc -o force_size=on n.vhd" "snapshot -l n.vhd"; do
    # shellcheck disable=SC2086
    both_say "$cmd" "$Q_IMG" $cmd
done
# discard keeps the data (VHD cannot free a block)
for tool in "$Q_IO" "$QB_IO"; do
    qemu-img create -q -f vpc n.vhd 10M
    "$tool" -f vpc -c 'write -P 9 0 1M' -c 'discard 0 1M' n.vhd >/dev/null
    check "discard by $(basename "$tool") keeps the data" \
        quiet qemu-io -r -f vpc -c 'read -P 9 0 1M' n.vhd
done

# ---- refused by both, with QEMU's message ----

# hostile NAME WANT SOURCE PATCH...: SOURCE patched (vhd_patch
# arguments, ';' between patches), then qemu-img and qblock-img refuse it
# saying WANT
hostile() {
    local name=$1 want=$2 src=$3
    shift 3
    cp "$src" h.vhd
    local args=()
    for a in "$@" ';'; do
        if [ "$a" = ';' ]; then
            [ ${#args[@]} -gt 0 ] && vhd_patch h.vhd "${args[@]}"
            args=()
        else
            args+=("$a")
        fi
    done
    refused "$name" "$want" "$QB_IMG" info -f vpc h.vhd
    refused "$name (qemu-img)" "$want" "$Q_IMG" info -f vpc h.vhd
}
hostile "a bad footer checksum" "Incorrect header checksum" small.vhd \
    0 64 I 5 keep
hostile "a bad fixed footer checksum" "Incorrect header checksum" \
    fixed.vhd -512 64 I 5 keep
hostile "a fixed footer that says dynamic" "invalid VPC image" fixed.vhd \
    -512 60 I 3
hostile "no footer" "invalid VPC image" fixed.vhd -512 0 8s xxxxxxxx
hostile "a bad dynamic header magic" "Invalid header magic" small.vhd \
    512 0 8s xxxxxxxx
hostile "a header past the end of the file" "Invalid header magic" \
    small.vhd 0 16 Q 0x100000
hostile "a header beyond any file" "Error reading dynamic VHD header" \
    small.vhd 0 16 Q 0xffffffffffffffff
for bs in 0 256 3000; do
    hostile "blocks of $bs bytes" "Invalid block size $bs" small.vhd \
        512 32 I $bs
done
hostile "blocks of 512 bytes" "Page table too small" small.vhd 512 32 I 512
hostile "no BAT entries" "Page table too small" small.vhd 512 28 I 0
hostile "2^29 BAT entries" "Max Table Entries too large (536870912)" \
    small.vhd 512 28 I 0x20000000
hostile "2^32-1 BAT entries" "Max Table Entries too large (-1)" \
    small.vhd 512 28 I 0xffffffff
hostile "a BAT beyond any file" "Error reading pagetable" small.vhd \
    512 16 Q 0xffffffffffffffff
hostile "a BAT entry past the end" "free_data_block_offset points after" \
    dynamic.vhd 1536 0 I 0x100000 keep
hostile "a BAT running into the footer" "free_data_block_offset points" \
    small.vhd 512 28 I 200
hostile "a disk of 2040 GiB and a sector" "File too large" small.vhd \
    0 28 4s 'win ' ';' 0 48 Q 0x1fe00000200
hostile "a fixed disk of 2^63 bytes" "File too large" fixed.vhd \
    -512 28 4s 'win ' ';' -512 48 Q 0x7fffffffffffffff
: > h.vhd
refused "an empty file" "File too small for a VHD header" \
    "$QB_IMG" info -f vpc h.vhd
head -c 100 /dev/zero > h.vhd
refused "a file of 100 bytes" "invalid VPC image" "$QB_IMG" info -f vpc h.vhd

# ---- refused by qblock alone ----

# block 1's BAT entry pointing at block 0's: QEMU opens it, then writes
# a block over the BAT
cp dynamic.vhd h.vhd
vhd_patch h.vhd 1536 4 I 3 keep
refused "a block over the metadata" "puts its block over the image's" \
    "$QB_IMG" info h.vhd
cp fixed.vhd h.vhd
vhd_patch h.vhd -512 28 4s 'win '
vhd_patch h.vhd -512 48 Q $((64 << 20))
refused "a write onto a fixed disk's footer" "would reach the footer" \
    "$QB_IO" -f vpc -c 'write 30M 4k' h.vhd

summary
