# What the VMDK interop scripts share (sourced, after check-lib.bash):
# comparisons of both tools' output and files, refusals.

# same NAME CMD1 -- CMD2: both succeed and print the same
same() {
    local name=$1 a=() b=()
    shift
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    local out1 out2
    if ! out1=$("${a[@]}" 2>&1); then
        fail "$name" "qemu: $out1"
        return
    fi
    if ! out2=$("${b[@]}" 2>&1); then
        fail "$name" "qblock: $out2"
        return
    fi
    if [ "$out1" = "$out2" ]; then
        ok "$name"
    else
        fail "$name" "$(diff <(echo "$out1") <(echo "$out2"))"
    fi
}

# refused NAME WANT CMD...: CMD fails (no crash) saying WANT
refused() {
    local name=$1 want=$2 out rc
    shift 2
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" -eq 0 ]; then
        fail "$name" "succeeded: $out"
    elif [ "$rc" -ge 128 ]; then
        fail "$name" "killed by signal $((rc - 128)): $out"
    elif ! grep -qF -- "$want" <<<"$out"; then
        fail "$name" "expected '$want' in: $out"
    else
        ok "$name"
    fi
}

# vmdk_same A B: the VMDK files A and B hold the same bytes but for the
# descriptor's CIDs (random in both tools): a sparse extent's header and
# everything after its descriptor area byte for byte, the descriptor's
# text with its CIDs masked, and the same size (a descriptor file's in
# sectors).  A flat extent's holes
# are not read (they may be gigabytes): its data must lie in the same
# places.
vmdk_same() {
    python3 - "$1" "$2" <<'EOF'
import os, re, struct, sys

def data_ranges(f, size):
    """The (start, end) ranges of f that are not holes."""
    out, at = [], 0
    while at < size:
        try:
            start = os.lseek(f.fileno(), at, os.SEEK_DATA)
        except OSError:
            break
        end = os.lseek(f.fileno(), start, os.SEEK_HOLE)
        out.append((start, end))
        at = end
    return out

def parts(path):
    with open(path, 'rb') as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(32)
        if head[:4] != b'KDMV' and not head.startswith(b'# Disk Descriptor'):
            chunks = []
            for start, end in data_ranges(f, size):
                f.seek(start)
                chunks.append((start, f.read(end - start).rstrip(b'\0')))
            # a range of zeroes is as good as a hole
            return size, b'', repr([c for c in chunks if c[1]]), b''
        f.seek(0)
        d = f.read()
    if d[:4] == b'KDMV':
        off, dsize = struct.unpack_from('<QQ', d, 28)
        start, end = off * 512, (off + dsize) * 512
    else:
        # a descriptor file's size moves with the CIDs' digits
        start, end = 0, len(d)
        size = -(-size // 512)
    text = d[start:end].split(b'\0')[0]
    return (size, d[:start], d[end:],
            re.sub(rb'CID=[0-9a-f]+', b'CID=X', text))

a, b = parts(sys.argv[1]), parts(sys.argv[2])
for what, x, y in zip(('size', 'header', 'data', 'descriptor'), a, b):
    if x != y:
        print(f'{sys.argv[1]} and {sys.argv[2]} differ in their {what}')
        sys.exit(1)
EOF
}

# patch FILE OFFSET FORMAT VALUE: a little-endian field of FILE
patch() {
    python3 - "$@" <<'EOF'
import struct, sys
path, off, fmt, val = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4], 0)
with open(path, 'r+b') as f:
    f.seek(off)
    f.write(struct.pack('<' + fmt, val))
EOF
}
