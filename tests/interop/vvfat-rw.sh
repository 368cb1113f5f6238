#!/usr/bin/env bash
# vvfat with rw (fat:rw:DIR): guest writes carried back to the host
# directory, against QEMU 7.2's qemu-io where QEMU gets it right.
#
#   tests/interop/vvfat-rw.sh BUILD_DIR
#
# Each scenario builds a host directory, reads its vvfat disk to a raw
# file, changes a copy of that file with mtools (a FAT writer of its own:
# new, changed, deleted, renamed and moved files, new and removed
# directories), and writes exactly the 512-byte sectors that differ, in
# runs, to a fat:rw: node with qblock-io (write -s); then the host
# directory must hold the tree the changed disk holds (fat-read.py reads
# both; a name with no long-name entry comes to the host in lower case, as
# QEMU gives it).  The same is done with qemu-io on a copy of the tree
# (its own disk, its own sectors) and both host trees must be the same,
# but for the scenarios where QEMU 7.2 fails (said below and in
# docs/vvfat.md); twice the runs go last first, so that directory
# entries come before the FAT that gives them clusters and nothing may be
# carried until it does.  The scenarios again on a FAT32 disk (qblock's
# own: not compared with QEMU's).  Times and the read-only attribute, the
# host's mtimes and modes after the commits.  Then hostile writes: a FAT
# chain that loops, two files sharing a cluster, names with '/' or "..",
# FAT32's root chain looped or cross-linked, a directory that is a link
# out of DIR: no crash, the host left as it was, a message (FAT12 hard
# disks, quicker to read whole, and FAT32 ones).  Host names that are no UTF-8 (shown by
# their 8.3 names) changed, renamed, removed; a change the host refuses
# (a directory that holds a dangling link) said with its path.  And the
# refusals (a write to the boot sector, rw on a read-only open), an
# overlay that leaves nothing behind, and through qblock-nbd the disk read
# back after the commits (pinned clusters of moved files included).
# Prints "ok NAME" / "FAIL NAME", ends with "N passed, N failed, N
# skipped"; exits 77 without qemu-io or mtools.
set -u

build=$(cd "${1:?usage: vvfat-rw.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
QB_IMG=$build/qblock-img
QB_IO=$build/qblock-io
QB_NBD=$build/qblock-nbd

for tool in qemu-io qemu-img mcopy; do
    if ! command -v $tool >/dev/null; then
        echo "$tool is not installed (Debian qemu-utils, mtools)"
        exit 77
    fi
done
export MTOOLS_SKIP_CHECK=1 MTOOLS_NO_VFAT=0 LC_ALL=C
w=$(mktemp -d /tmp/vvfat-rw.XXXXXX)
export TMPDIR=$w/tmp
mkdir "$TMPDIR"
nbd_pid=
cleanup() {
    [ -n "$nbd_pid" ] && kill "$nbd_pid" 2>/dev/null
    rm -rf "$w"
}
trap cleanup EXIT
cd "$w" || exit 1

fat() { python3 "$here/fat-read.py" "$@"; }
# the byte offset of the volume in the disk: a hard disk's first track
OFF=32256

# base_tree DIR: what every scenario starts from
base_tree() {
    mkdir -p "$1/sub/deeper" "$1/emptydir" "$1/full"
    echo hello > "$1/a.txt"
    echo "inside sub" > "$1/sub/b.txt"
    echo deep > "$1/sub/deeper/c.txt"
    head -c 20000 /dev/urandom > "$1/three-clusters.bin"
    echo "a long line of old content, longer than its rewrite" > "$1/over.txt"
    echo same > "$1/same-size.txt"
    echo f1 > "$1/full/one"
    echo f2 > "$1/full/two"
    : > "$1/empty"
}

# changed_runs ORIG CHANGED PREFIX: the runs of sectors that differ, one
# "offset file" line each, their bytes in PREFIX.N.  Only the MiBs where
# either file has data are compared: a hole in both reads as zeroes in
# both (the hard disks are 504 MiB, mostly holes)
changed_runs() {
    python3 - "$@" <<'EOF'
import errno, mmap, os, sys
fa, fb = open(sys.argv[1], 'rb'), open(sys.argv[2], 'rb')
a = mmap.mmap(fa.fileno(), 0, access=mmap.ACCESS_READ)
b = mmap.mmap(fb.fileno(), 0, access=mmap.ACCESS_READ)
run, n = None, 0
def mibs_with_data(f):
    fd, pos, out = f.fileno(), 0, set()
    size = os.fstat(fd).st_size
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                break
            return set(range(0, size, 1 << 20))
        pos = os.lseek(fd, start, os.SEEK_HOLE)
        out.update(range(start >> 20 << 20, pos, 1 << 20))
    return out
def flush():
    global n
    if run:
        name = '%s.%d' % (sys.argv[3], n)
        open(name, 'wb').write(b[run[0]:run[1]])
        print(run[0], name)
        n += 1
assert len(a) == len(b)
# 1 MiB at a time, sector by sector only where they differ
for big in sorted(mibs_with_data(fa) | mibs_with_data(fb)):
    if a[big:big + (1 << 20)] == b[big:big + (1 << 20)]:
        continue
    for i in range(big, min(len(a), big + (1 << 20)), 512):
        if a[i:i + 512] != b[i:i + 512]:
            if run and run[1] == i:
                run[1] = i + 512
            else:
                flush()
                run = [i, i + 512]
flush()
EOF
}

# apply IO DIR RUNS [SPEC]: writes the runs to fat:rw:DIR with IO; its
# output (the write lines left out) in DIR.out, its status returned
apply() {
    local io=$1 dir=$2 runs=$3 spec=${4:-fat:rw:$2} args=() off file
    while read -r off file; do
        args+=(-c "write -s $file $off $(stat -c %s "$file")")
    done < "$runs"
    "$io" -f vvfat "${args[@]}" "$spec" > "$dir.out" 2>&1
    local rc=$?
    grep -av -e '^wrote ' -e ' ops; ' "$dir.out" > "$dir.msg"
    return $rc
}

# one TOOL-IMG TOOL-IO DIR OPS [FAT-PREFIX]: DIR's disk changed by OPS
# (a function given the image and mtools' -i argument), written back
prepare_and_apply() {
    local img=$1 io=$2 dir=$3 ops=$4 pre=${5:-} off=$OFF
    [[ $pre == floppy* ]] && off=0
    # (what it says of names that are no UTF-8 is not what is tested)
    "$img" convert -f vvfat -O raw "fat:$pre$dir" "$dir.disk" \
        2> "$dir.convert.err" || return 1
    cp "$dir.disk" "$dir.new"
    "$ops" "$dir.new@@$off" > "$dir.mtools" 2>&1 || return 1
    changed_runs "$dir.disk" "$dir.new" "$dir.run" > "$dir.runs"
    # REVERSE=1: the last sectors first (data, directories, then the FATs)
    if [ -n "${REVERSE:-}" ]; then
        tac "$dir.runs" > "$dir.runs.rev" && mv "$dir.runs.rev" "$dir.runs"
    fi
    apply "$io" "$dir" "$dir.runs" "fat:${pre}rw:$dir"
}

# scenario NAME OPS QEMU [FAT-PREFIX]: QEMU is "same" when qemu-io must
# leave the same tree, else why it is not compared; a FAT12 hard disk
# (31.5 MiB, quicker to read whole than the FAT16 one) unless said
scenario() {
    local name=$1 ops=$2 qemu=$3 pre=${4-12:} rc
    rm -rf q e q.* e.*
    base_tree q
    cp -a q e
    prepare_and_apply "$QB_IMG" "$QB_IO" q "$ops" "$pre"
    rc=$?
    if [ $rc -ne 0 ]; then
        fail "$name: qblock-io" "status $rc" "$(cat q.msg q.mtools 2>/dev/null)"
        return
    fi
    if [ ! -s q.runs ]; then
        fail "$name: mtools changed nothing" "$(cat q.mtools)"
        return
    fi
    fat tree q.new --host-names | cut -f1-3 > q.want
    fat host q > q.got
    if cmp -s q.want q.got; then
        ok "$name: the host tree is the changed disk's ($(wc -l < q.runs) runs)"
    else
        fail "$name: the host tree is the changed disk's" \
            "$(diff q.want q.got)" "$(cat q.msg)"
    fi
    if [ -s q.msg ]; then
        fail "$name: qblock-io said nothing" "$(cat q.msg)"
    else
        ok "$name: qblock-io said nothing"
    fi
    if [ "$qemu" != same ]; then
        skip "$name against qemu-io" "$qemu"
        return
    fi
    prepare_and_apply qemu-img qemu-io e "$ops" "$pre"
    rc=$?
    fat host e > e.got
    if [ $rc -ne 0 ]; then
        fail "$name: qemu-io" "status $rc" "$(cat e.msg)"
    elif cmp -s q.got e.got; then
        ok "$name: the same host tree as qemu-io's"
    else
        fail "$name: the same host tree as qemu-io's" "$(diff e.got q.got)"
    fi
}

# poke IMAGE@@OFFSET PYTHON: a FAT12 or FAT32 volume changed by hand, in
# place, by PYTHON given img (the file mapped: bytes written stay where
# they are, holes stay holes), root, data (offsets), entry(NAME11): a
# root entry's offset, cluster(NAME11), setfat(C, V) (both FATs), csize,
# eoc (FAT32: the root is the chain from cluster 2, at data)
poke() {
    python3 - "${1%@@*}" "${1#*@@}" <<EOF
import mmap, struct, sys
img_file = open(sys.argv[1], 'r+b')
img = mmap.mmap(img_file.fileno(), 0)
vol = int(sys.argv[2])
fat32 = struct.unpack_from('<H', img, vol + 17)[0] == 0
spf = struct.unpack_from('<I' if fat32 else '<H', img,
                         vol + (36 if fat32 else 22))[0]
fat = vol + struct.unpack_from('<H', img, vol + 14)[0] * 512
root = fat + 2 * spf * 512
data = root if fat32 else root + 512 * 32
csize = img[vol + 13] * 512
eoc = 0x0fffffff if fat32 else 0xfff
def entry(name):
    e = img.find(name.encode(), root)
    assert e >= 0, name
    return e
def cluster(name):
    e = entry(name)
    hi = struct.unpack_from('<H', img, e + 20)[0] if fat32 else 0
    return struct.unpack_from('<H', img, e + 26)[0] | hi << 16
def getfat(c):
    if fat32:
        return struct.unpack_from('<I', img, fat + c * 4)[0] & 0x0fffffff
    v = struct.unpack_from('<H', img, fat + c * 3 // 2)[0]
    return v >> 4 if c & 1 else v & 0xfff
def setfat(c, v):
    if fat32:
        for f in (fat, fat + spf * 512):
            struct.pack_into('<I', img, f + c * 4, v)
        return
    # FAT12: two entries in three bytes
    for f in (fat, fat + spf * 512):
        o = f + c * 3 // 2
        if c & 1:
            img[o] = (img[o] & 0x0f) | ((v << 4) & 0xf0)
            img[o + 1] = (v >> 4) & 0xff
        else:
            img[o] = v & 0xff
            img[o + 1] = (img[o + 1] & 0xf0) | ((v >> 8) & 0x0f)
def free():
    return next(c for c in range(2, 4000) if getfat(c) == 0)
$2
img.flush()
EOF
}

# The scenarios: mtools on IMAGE@@OFFSET, the same files for both tools
head -c 20000 /dev/urandom > big
head -c 30000 /dev/urandom > grown
echo "long name" > lfn
echo "short" > short
: > nothing
echo inner > inner
echo short > shorter
echo SAME > samesize
ops_new() {
    mcopy -i "$1" big ::/big.bin &&
    mcopy -i "$1" lfn "::/A Long Name With Case.Txt" &&
    mcopy -i "$1" short ::/SHORT.TXT
}
ops_new_empty() {
    mcopy -i "$1" nothing ::/new-empty
}
ops_subdir() {
    mcopy -i "$1" inner ::/sub/deeper/inner.txt &&
    mmd -i "$1" ::/made &&
    mcopy -i "$1" inner ::/made/Made.Inner
}
ops_shorter() {
    mcopy -o -i "$1" shorter ::/over.txt
}
ops_longer() {
    mcopy -o -i "$1" grown ::/a.txt
}
ops_same_size() {
    mcopy -o -i "$1" samesize ::/same-size.txt
}
ops_change() {
    ops_shorter "$1" && ops_longer "$1" && ops_same_size "$1"
}
ops_delete() {
    mdel -i "$1" ::/a.txt ::/sub/b.txt ::/three-clusters.bin ::/empty
}
ops_rename() {
    mren -i "$1" ::/a.txt ::/Renamed.TXT &&
    mren -i "$1" ::/three-clusters.bin ::/moved-name.bin
}
ops_rename_dir() {
    mren -i "$1" ::/sub ::/Sub-Renamed
}
ops_dirs() {
    mmd -i "$1" ::/newdir ::/newdir/nested &&
    mrd -i "$1" ::/emptydir &&
    mdeltree -i "$1" ::/full
}
ops_move() {
    mmove -i "$1" ::/a.txt ::/sub/deeper/a.txt &&
    mmove -i "$1" ::/sub/deeper ::/deeper-up
}
ops_combo() {
    ops_new "$1" && ops_change "$1" && ops_delete_rest "$1" &&
    ops_rename "$1" && ops_dirs "$1" &&
    mmove -i "$1" ::/sub/b.txt ::/newdir/b.txt &&
    mren -i "$1" ::/sub ::/sub2
}
# in place: a file grown into a new cluster (its chain kept as the start
# of the new one), one shrunk from three clusters to two
ops_append() {
    poke "$1" "
e = entry('A       TXT'); c = cluster('A       TXT'); f = free()
setfat(c, f); setfat(f, eoc)
struct.pack_into('<I', img, e + 28, csize + 808)
o = data + (c - 2) * csize
img[o + 6:o + csize] = b'x' * (csize - 6)
o = data + (f - 2) * csize
img[o:o + 808] = b'y' * 808
"
}
ops_truncate() {
    poke "$1" "
e = entry('THREE-~1BIN'); c = cluster('THREE-~1BIN')
rest = getfat(c + 1); setfat(c + 1, eoc)
while rest < eoc - 7:
    nxt = getfat(rest); setfat(rest, 0); rest = nxt
struct.pack_into('<I', img, e + 28, csize + 808)
"
}
ops_delete_rest() {
    mdel -i "$1" ::/empty ::/sub/deeper/c.txt
}

scenario "new files (several clusters, long name, 8.3, empty)" ops_new same
scenario "FAT16 hard disk: new files" ops_new same ""
# a directory entry before the FAT that gives it clusters: nothing is
# carried until the FAT is written, then all of it
REVERSE=1 scenario "new files, the FAT written last" ops_new same
REVERSE=1 scenario "new files in subdirectories, the FAT written last" \
    ops_subdir same
scenario "FAT12 floppy: new files" ops_new same floppy:12:
scenario "new files in a subdirectory and a new one" ops_subdir same
scenario "a new empty file" ops_new_empty \
    "QEMU 7.2 does not make a new empty file"
scenario "a file rewritten shorter" ops_shorter \
    "QEMU 7.2 keeps the old, longer contents"
scenario "a file rewritten longer" ops_longer \
    "QEMU 7.2 aborts (assertion in commit_one_file)"
scenario "a file rewritten, the same size" ops_same_size same
scenario "changed files (shorter, longer, same size)" ops_change \
    "QEMU 7.2 aborts (assertion in commit_one_file)"
scenario "a file appended to (in place)" ops_append same
scenario "a file truncated (in place)" ops_truncate \
    "QEMU 7.2 keeps a truncated file at its old size"
scenario "deleted files" ops_delete \
    "QEMU 7.2 leaves deleted files on the host"
scenario "renamed files" ops_rename same
scenario "a renamed directory" ops_rename_dir \
    "QEMU 7.2 aborts (assertion in handle_renames_and_mkdirs)"
scenario "mkdir, rmdir, deltree" ops_dirs \
    "QEMU 7.2 leaves removed directories (cluster 0 used more than once)"
scenario "moves between directories" ops_move \
    "QEMU 7.2 moves no file between directories (Error handling renames)"
scenario "all of it in one disk" ops_combo \
    "QEMU 7.2 aborts (assertion in get_cluster_count_for_direntry)"

# FAT32 (fat:32:rw:): the same scenarios on a FAT32 disk (the root a
# cluster chain, 4 KiB clusters, the entries' high cluster halves, and
# mtools' FSInfo updates written too), and a root that grows past its
# first cluster; QEMU 7.2's FAT32 volume is none (its boot sector says
# FAT16): not compared
no32="QEMU 7.2's FAT32 volume says FAT16, which mtools cannot write"
ops_root_grows() {
    local i
    for i in $(seq 1 150); do echo "$i" > "root-file-$i"; done
    mcopy -i "$1" root-file-* ::/
}
scenario "FAT32: new files" ops_new "$no32" 32:
REVERSE=1 scenario "FAT32: new files, the FAT written last" ops_new "$no32" 32:
scenario "FAT32: the root grows past its first cluster" ops_root_grows \
    "$no32" 32:
for ops in ops_subdir ops_new_empty ops_change ops_append ops_truncate \
    ops_delete ops_rename ops_rename_dir ops_dirs ops_move ops_combo; do
    scenario "FAT32: ${ops#ops_}" $ops "$no32" 32:
done

# Host names that are no UTF-8 are shown by their 8.3 names alone: the
# commit still finds the host's files (changed, renamed, removed)
nonutf8() {
    local name=$1 ops=$2 want=$3 got
    rm -rf u u.* && mkdir u
    echo "old content" > "u/$(printf 'caf\xe9')"
    : > "u/$(printf 'emp\xe9')"
    echo x > u/plain.txt
    prepare_and_apply "$QB_IMG" "$QB_IO" u "$ops" 12:
    got=$(cd u && for f in *; do printf '%s=%s;' "$f" "$(cat "$f")"; done |
          od -An -c | tr -s ' \n' ' ')
    want=$(printf "$want" | od -An -c | tr -s ' \n' ' ')
    if [ "$got" != "$want" ]; then
        fail "names no UTF-8: $name" "want: $want" "got:  $got"
    elif grep -av 'invalid UTF-8 name' u.msg | grep -q .; then
        fail "names no UTF-8: $name: nothing said" "$(cat u.msg)"
    else
        ok "names no UTF-8: $name"
    fi
}
echo "new content" > newcontent
echo y > yfile
ops_nonutf8_change() {
    mcopy -o -i "$1" newcontent ::/CAF~1 && mcopy -o -i "$1" yfile ::/plain.txt
}
ops_nonutf8_rename() {
    mren -i "$1" ::/CAF~1 ::/cafe.txt && mren -i "$1" ::/EMP~1 ::/Empty.Txt
}
ops_nonutf8_delete() {
    mdel -i "$1" ::/CAF~1 ::/EMP~1
}
nonutf8 "a file changed in place, another beside it" ops_nonutf8_change \
    'caf\351=new content;emp\351=;plain.txt=y;'
nonutf8 "renamed" ops_nonutf8_rename \
    'Empty.Txt=;cafe.txt=old content;plain.txt=x;'
nonutf8 "removed" ops_nonutf8_delete 'plain.txt=x;'

# Times and the read-only attribute: two stages of changes written in one
# qblock-io run (each write a commit of its own, the second stage after
# the first was carried).  The host's mtime of each file and directory
# must then be its entry's (what the guest changed, and what the commit
# wrote or made, gets the guest's time; the rest kept its own, which the
# disk showed down to two seconds), a file is read-only on the host when
# its entry is, hidden/system/archive change nothing and stop nothing,
# and a directory's read-only attribute is not carried.  QEMU 7.2 carries
# no time (a new file has the commit's) and aborts on a changed attribute
# (an assertion in array_get): not compared.
umask 022
echo old > old && touch -d '2003-04-05 06:07:08' old
ops_attrs1() {
    mattrib -i "$1" +r ::/a.txt ::/same-size.txt ::/emptydir &&
    mattrib -i "$1" +h +s -a ::/sub/b.txt &&
    mcopy -m -i "$1" old ::/sub/deeper/old.txt &&
    mcopy -m -i "$1" old ::/New-RO.txt && mattrib -i "$1" +r ::/New-RO.txt &&
    poke "$1" "
for n in ('OVER    TXT', 'FULL       '):
    # 2001-02-03 04:05:06
    struct.pack_into('<HH', img, entry(n) + 22, (4 << 11) | (5 << 5) | 3,
                     (21 << 9) | (2 << 5) | 3)
"
}
ops_attrs2() {
    mattrib -i "$1" -r ::/same-size.txt
}
# attrs_test NAME FAT-PREFIX: the two stages on such a disk, checked
attrs_test() {
    local name=$1 pre=$2 rc modes want
    rm -rf t t.* && base_tree t
    chmod 0640 t/same-size.txt
    "$QB_IMG" convert -f vvfat -O raw "fat:${pre}t" t.disk
    cp t.disk t.mid
    ops_attrs1 "t.mid@@$OFF" > t.mtools 2>&1
    cp t.mid t.new
    ops_attrs2 "t.new@@$OFF" >> t.mtools 2>&1
    changed_runs t.disk t.mid t.run1 > t.runs
    changed_runs t.mid t.new t.run2 >> t.runs
    apply "$QB_IO" t t.runs "fat:${pre}rw:t"
    rc=$?
    fat tree t.new --host-names --times | cut -f1-2,4 > t.want
    fat host t --times | cut -f1-2,4 > t.got
    if [ $rc -ne 0 ] || [ -s t.msg ]; then
        fail "$name: qblock-io" "status $rc" "$(cat t.msg t.mtools)"
    elif ! grep -q 'ro=1' t.want || [ "$(wc -l < t.runs)" -lt 2 ]; then
        fail "$name: mtools changed them" "$(cat t.mtools t.want)"
    elif cmp -s t.want t.got; then
        ok "$name: each host mtime and read-only file is the disk's"
    else
        fail "$name: each host mtime and read-only file is the disk's" \
            "$(diff t.want t.got)"
    fi
    modes=$(cd t && stat -c '%n=%a' a.txt same-size.txt New-RO.txt emptydir \
            sub/b.txt sub/deeper/old.txt | tr '\n' ' ')
    want='a.txt=444 same-size.txt=640 New-RO.txt=444 emptydir=755 '
    want+='sub/b.txt=644 sub/deeper/old.txt=644 '
    if [ "$modes" = "$want" ]; then
        ok "$name: modes (read-only set, cleared under umask 022)"
    else
        fail "$name: modes" "want: $want" "got:  $modes"
    fi
    check "$name: a new file has its entry's time (mcopy -m)" \
        test "$(stat -c %Y t/sub/deeper/old.txt)" = "$(stat -c %Y old)"
}
attrs_test "times and attributes" 12:
attrs_test "FAT32: times and attributes" 32:
skip "times and attributes against qemu-io" \
    "QEMU 7.2 carries no time and aborts on a changed attribute"

# A file shown through a link out of DIR: its read-only attribute and
# time change nothing outside (the link's own time is DIR's to set)
rm -rf lr lr.* outside2 && mkdir lr outside2 && echo target > outside2/target
ln -s ../outside2/target lr/linkfile
before=$(stat -c '%a %Y' outside2/target)
ops_link_attrs() {
    mattrib -i "$1" +r ::/linkfile &&
    poke "$1" "struct.pack_into('<H', img, entry('LINKFILE   ') + 24,
                                (21 << 9) | (2 << 5) | 3)"
}
prepare_and_apply "$QB_IMG" "$QB_IO" lr ops_link_attrs 12:
if [ "$(stat -c '%a %Y' outside2/target)" != "$before" ] ||
   [ ! -L lr/linkfile ]; then
    fail "attributes through a link: nothing changed outside" \
        "$before / $(stat -c '%a %Y' outside2/target)" "$(ls -l lr)"
elif ! grep -qF "read-only attribute of lr/linkfile" lr.msg; then
    fail "attributes through a link: says why" "$(cat lr.msg)"
else
    ok "attributes through a link: nothing changed outside, says why"
fi

# A host file its owner may not write (mode 0444) is kept when the guest
# rewrites it, in place or through a new chain, or removes it, even for
# root; the others in the same commit are written
rm -rf ro ro.* && mkdir ro && echo "keep me" > ro/keep.txt &&
    head -c 9000 /dev/urandom > ro/moved.bin && echo old > ro/free.txt &&
    echo "not gone" > ro/gone.txt && chmod 0444 ro/keep.txt ro/moved.bin ro/gone.txt
cp ro/keep.txt ro-keep.want && cp ro/moved.bin ro-moved.want
ops_ro_rewrite() {
    echo "the guest's" > rw-new && head -c 30000 /dev/urandom > rw-big &&
    mcopy -o -i "$1" rw-new ::/keep.txt && mcopy -o -i "$1" rw-big ::/moved.bin &&
    mcopy -o -i "$1" rw-new ::/free.txt && mdel -i "$1" ::/gone.txt
}
prepare_and_apply "$QB_IMG" "$QB_IO" ro ops_ro_rewrite 12:
if ! cmp -s ro/keep.txt ro-keep.want || ! cmp -s ro/moved.bin ro-moved.want ||
   [ "$(cat ro/gone.txt 2>&1)" != "not gone" ] ||
   [ "$(stat -c %a ro/keep.txt ro/moved.bin | tr '\n' ' ')" != "444 444 " ]; then
    fail "a host file without write permission: kept" "$(ls -l ro)"
elif ! cmp -s ro/free.txt rw-new; then
    fail "a host file without write permission: the others written" \
        "$(cat ro/free.txt)"
elif ! grep -qF "could not write ro/keep.txt: Permission denied" ro.msg ||
     ! grep -qF "could not write ro/moved.bin: Permission denied" ro.msg ||
     ! grep -qF "could not remove ro/gone.txt: Permission denied" ro.msg; then
    fail "a host file without write permission: says why" "$(cat ro.msg)"
else
    ok "a host file without write permission: kept, says why, others written"
fi

# Hostile writes: the host must stay as it was, a message must name why.
# hostile NAME WANT PYTHON: PYTHON changes the disk d.new (variables:
# img, fat, root, data: offsets), its sectors go to fat:rw:h
# (HPRE=32: on a FAT32 disk)
hostile() {
    local name=$1 want=$2 code=$3 rc pre=${HPRE:-12:}
    rm -rf h h.* && base_tree h
    fat host h > h.before
    "$QB_IMG" convert -f vvfat -O raw "fat:${pre}h" h.disk
    cp h.disk h.new
    poke "h.new@@$OFF" "$code"
    changed_runs h.disk h.new h.run > h.runs
    apply "$QB_IO" h h.runs "fat:${pre}rw:h"
    rc=$?
    fat host h > h.after
    if [ $rc -ge 128 ]; then
        fail "hostile: $name" "killed by signal $((rc - 128))" "$(cat h.msg)"
    elif ! cmp -s h.before h.after; then
        fail "hostile: $name: the host is unchanged" "$(diff h.before h.after)"
    elif ! grep -qF -- "$want" h.msg; then
        fail "hostile: $name: says '$want'" "$(cat h.msg)"
    else
        ok "hostile: $name: host unchanged, says why"
    fi
}
hostile "a chain that loops" "a loop or a cross-link" \
    "c = cluster('THREE-~1BIN'); setfat(c + 2, c)"
hostile "two files sharing a cluster" "a loop or a cross-link" \
    "struct.pack_into('<H', img, entry('OVER    TXT') + 26, cluster('A       TXT'))"
hostile "a name with a slash" "is named 'a/b.txt'" \
    "e = entry('A       TXT'); img[e:e + 11] = b'A/B     TXT'"
hostile "a directory named .." "is named '..'" \
    "e = entry('SUB        '); img[e:e + 11] = b'..         '"
hostile "a file that outgrows its chain" "bytes in 1 clusters" \
    "struct.pack_into('<I', img, entry('A       TXT') + 28, 9000)"
HPRE=32: hostile "FAT32: a chain that loops" "a loop or a cross-link" \
    "c = cluster('THREE-~1BIN'); setfat(c + 2, c)"
HPRE=32: hostile "FAT32: a file cross-linked into the root's chain" \
    "cluster 2 is in two chains" \
    "struct.pack_into('<H', img, entry('OVER    TXT') + 26, 2)"
HPRE=32: hostile "FAT32: the root's chain loops" "chain from 2" \
    "setfat(2, 2)"
HPRE=32: hostile "FAT32: a first cluster's high half past the volume" \
    "is not a data cluster" \
    "struct.pack_into('<H', img, entry('A       TXT') + 20, 0x100)"

# A directory (and a file) that are links out of DIR: nothing is written
# through them
rm -rf l outside l.* && mkdir -p l outside/in && echo target > outside/target
ln -s ../outside/in l/linkdir
ln -s ../outside/target l/linkfile
fat host outside > outside.before
ops_links() {
    echo evil > evil
    mcopy -i "$1" evil ::/linkdir/evil.txt &&
    mcopy -o -i "$1" evil ::/linkfile
}
prepare_and_apply "$QB_IMG" "$QB_IO" l ops_links 12:
rc=$?
fat host outside > outside.after
if [ $rc -ge 128 ]; then
    fail "links out of DIR" "killed by signal $((rc - 128))"
elif ! cmp -s outside.before outside.after; then
    fail "links out of DIR: nothing written outside" \
        "$(diff outside.before outside.after)"
else
    ok "links out of DIR: nothing written outside"
fi
check "links out of DIR: says the directory is a link" \
    grep -qF "no directory of l (a symbolic link?)" l.msg
if [ -f l/linkfile ] && [ ! -L l/linkfile ] &&
   [ "$(cat l/linkfile)" = evil ]; then
    ok "links out of DIR: a file link rewritten is replaced, not followed"
else
    fail "links out of DIR: a file link rewritten is replaced, not followed" \
        "$(ls -l l)"
fi

# A change the host cannot make is said, with its path and reason, and
# the others still go on: a directory the guest removed that holds what
# the disk does not show (a dangling link)
rm -rf x x.* && base_tree x
ln -s nowhere x/emptydir/dangling
ops_rmdir_and_more() {
    mrd -i "$1" ::/emptydir && mdel -i "$1" ::/a.txt
}
prepare_and_apply "$QB_IMG" "$QB_IO" x ops_rmdir_and_more 12:
rc=$?
if [ $rc -ne 0 ]; then
    fail "a change the host refuses" "status $rc" "$(cat x.msg)"
elif ! grep -qF "could not remove x/emptydir: Directory not empty" x.msg; then
    fail "a change the host refuses: said with path and reason" "$(cat x.msg)"
elif [ ! -L x/emptydir/dangling ] || [ -e x/a.txt ]; then
    fail "a change the host refuses: the link kept, the rest done" "$(ls -lR x)"
else
    ok "a change the host refuses: said with path and reason, the rest done"
fi

# Refusals, as QEMU's
rm -rf r && base_tree r
for spec in "0 512" "32256 512" "1024 512"; do
    set -- $spec
    a=$(qemu-io -f vvfat -c "write $1 $2" fat:rw:r 2>&1)
    b=$("$QB_IO" -f vvfat -c "write $1 $2" fat:rw:r 2>&1 | sed 's/^qblock-io: //')
    if [ "$a" = "$b" ]; then
        ok "a write at $1 below the first FAT: refused as QEMU does"
    else
        fail "a write at $1 below the first FAT: refused as QEMU does" \
            "qemu: $a" "qblock: $b"
    fi
done
a=$(qemu-io -r -f vvfat -c 'read 0 512' fat:rw:r 2>&1)
b=$("$QB_IO" -r -f vvfat -c 'read 0 512' fat:rw:r 2>&1 |
    sed 's/^qblock-io: /qemu-io: /')
if [ "$a" = "$b" ]; then
    ok "rw on a read-only open: refused as QEMU does"
else
    fail "rw on a read-only open: refused as QEMU does" "qemu: $a" "qblock: $b"
fi
check "the overlay leaves nothing in TMPDIR" test -z "$(ls -A "$TMPDIR")"

# Through qblock-nbd: after the commits the disk reads back as written,
# the clusters of moved and deleted files included (pinned)
rm -rf n n.* && base_tree n
"$QB_IMG" convert -f vvfat -O raw fat:12:n n.disk
cp n.disk n.new
ops_nbd() { ops_rename "$1" && ops_rename_dir "$1" && ops_delete_rest "$1"; }
ops_nbd "n.new@@$OFF" > n.mtools 2>&1
changed_runs n.disk n.new n.run > n.runs
"$QB_NBD" -t -k "$w/nbd.sock" -f vvfat fat:12:rw:n 2> n.nbd.err &
nbd_pid=$!
for _ in $(seq 50); do [ -S "$w/nbd.sock" ] && break; sleep 0.1; done
uri="nbd+unix:///?socket=$w/nbd.sock"
args=()
while read -r off file; do
    args+=(-c "write -s $file $off $(stat -c %s "$file")")
done < n.runs
qemu-io -f raw "${args[@]}" "$uri" > n.out 2>&1
qemu-img convert -f raw -O raw "$uri" n.back
kill "$nbd_pid" && wait "$nbd_pid" 2>/dev/null
nbd_pid=
fat tree n.new --host-names | cut -f1-3 > n.want
fat host n > n.got
check "through qblock-nbd: the host tree is the changed disk's" cmp -s n.want n.got
fat tree n.back | cut -f1-3 > n.back.tree
fat tree n.new | cut -f1-3 > n.new.tree
check "through qblock-nbd: the disk reads back as written after the commits" \
    cmp -s n.new.tree n.back.tree

summary
