#!/usr/bin/env bash
# vvfat (a host directory as a FAT disk, fat:[floppy:][12:|16:|32:][rw:]DIR)
# against QEMU 7.2: the same disk from the same tree, read only.
#
#   tests/interop/vvfat-interop.sh BUILD_DIR
#
# A tree with small files, a file of several clusters, an empty file, long
# names, names that need a long-name entry for their case or characters,
# 8.3 clashes up to ~12 and a plain name a tail would give, hidden files,
# nested directories and a directory of 1100 entries (several clusters,
# tails up to ~1100), a symbolic link, is shown by both tools as a hard
# disk (FAT16, FAT12) and as floppies, and:
#  - qemu-img info (human, JSON), map and measure are the same on both
#    sides;
#  - both converted to raw hold, read by fat-read.py (a FAT reader of its
#    own), the same MBR and boot sector fields, the same tree with the
#    same 8.3 names and dates, and the host's names and contents; the two
#    images are the same bytes but for what follows each file's end in
#    its last cluster (QEMU leaves whatever its buffer held there);
#  - qemu-io -r reads the same metadata sectors as qblock-io, and through
#    qblock-nbd qemu-img reads the bytes qblock-img converts;
#  - fsck.fat -n finds nothing wrong with ours (when dosfstools is here);
#  - FAT32 (qblock's own volume: QEMU's says FAT16): info, map and the MBR
#    as QEMU's, the FAT32 boot sector, FSInfo and backup, the host's tree
#    read back by fat-read.py and copied out by mcopy, fsck.fat -n;
#  - the refusals: rw on a read-only open, a missing directory, a tree too
#    large for a floppy or a root directory, a FAT32 floppy, bad options,
#    with QEMU's messages where QEMU refuses the same way.
# Prints "ok NAME" / "FAIL NAME", ends with "N passed, N failed, N
# skipped"; exits 77 without qemu-img.
set -u

build=$(cd "${1:?usage: vvfat-interop.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
. "$here/qemu-utils.bash"
# same and refused
. "$here/vmdk-lib.bash"
QB_NBD=$build/qblock-nbd

fat() { python3 "$here/fat-read.py" "$@"; }
# fsck_out IMAGE: what fsck.fat -n says, the image's name left out
fsck_out() { fsck.fat -n "$1" 2>&1 | sed "s|$1|IMAGE|"; true; }

# make_tree DIR: the tree every case reads
make_tree() {
    local d=$1 i
    mkdir -p "$d/sub/deeper/deepest" "$d/Dir With Spaces" "$d/many"
    echo hello > "$d/a.txt"
    echo upper > "$d/UPPER.TXT"
    : > "$d/empty"
    head -c 30000 /dev/urandom > "$d/four-clusters.bin"
    head -c 8192 /dev/urandom > "$d/one-exact-cluster.bin"
    echo lfn > "$d/A name that is long enough for three pieces.text"
    echo case > "$d/MixedCase.Txt"
    # long names that fill their last piece: no NUL, no padding
    echo 13 > "$d/thirteen1.txt"
    echo 26 > "$d/twenty-six-characters.text"
    echo dots > "$d/a.b.c"
    echo hidden > "$d/.hidden"
    echo chars > "$d/x+y;z=w[1].dat"
    echo utf > "$d/Ümlaut-ñ.txt"
    echo abc > "$d/abc.TXT"
    echo ABC > "$d/ABC.txt"
    for i in $(seq 1 12); do echo "$i" > "$d/longprefix$i.txt"; done
    # a plain name that a ~N tail would also give
    echo literal > "$d/LONGPR~2.TXT"
    echo nested > "$d/sub/deeper/deepest/file"
    head -c 20000 /dev/urandom > "$d/sub/deeper/mid.bin"
    echo spaced > "$d/Dir With Spaces/inner file"
    # tails up to ~1000, where the base keeps 2 characters
    for i in $(seq 1 1100); do echo "$i" > "$d/many/entry-number-$i"; done
    ln -s ../a.txt "$d/sub/link-to-a"
    # an access time ahead of the change time: reading the tree does not
    # move it (relatime), so both tools see the same dates
    find "$d" -exec touch -h -m -d '2024-02-29 13:14:15' {} +
    find "$d" -exec touch -h -a -d '+2 hours' {} +
}

make_tree tree
mkdir small
echo small > small/file
head -c 3000000 /dev/zero > toobig
mkdir big && mv toobig big/
mkdir root
for i in $(seq 1 300); do : > "root/f$i"; done

# the disk kinds: name and file name
kinds=(
    "hd16 fat:tree"
    "hd12 fat:12:tree"
    "floppy fat:floppy:small"
    "floppy12 fat:floppy:12:small"
    "floppy16 fat:16:floppy:small"
    "label json:{\"driver\":\"vvfat\",\"dir\":\"small\",\"label\":\"My Disk\",\"floppy\":true}"
)
for kind in "${kinds[@]}"; do
    name=${kind%% *}
    spec=${kind#* }
    dir=tree
    [[ $spec == *small* ]] && dir=small
    same "$name: info" "$Q_IMG" info "$spec" -- "$QB_IMG" info "$spec"
    same "$name: info --output=json" "$Q_IMG" info --output=json "$spec" \
        -- "$QB_IMG" info --output=json "$spec"
    same "$name: map" "$Q_IMG" map --output=json "$spec" -- \
        "$QB_IMG" map --output=json "$spec"
    same "$name: measure -O qcow2" "$Q_IMG" measure -O qcow2 "$spec" -- \
        "$QB_IMG" measure -O qcow2 "$spec"
    "$Q_IMG" convert -O raw "$spec" q.raw
    "$QB_IMG" convert -O raw "$spec" b.raw
    same "$name: MBR and boot sector fields" fat bpb q.raw -- fat bpb b.raw
    same "$name: the tree, 8.3 names and dates" fat tree q.raw --detail -- \
        fat tree b.raw --detail
    same "$name: the host's names and contents" fat host "$dir" -- \
        fat tree b.raw
    same "$name: the same bytes but past files' ends" fat masked q.raw -- \
        fat masked b.raw
    check "$name: compare with our own convert" \
        quiet "$QB_IMG" compare -F raw "$spec" b.raw
    if command -v fsck.fat >/dev/null; then
        # a hard disk's volume starts at sector 63
        skip=0
        [[ $name == hd* ]] && skip=63
        dd if=b.raw of=vol.raw bs=512 skip=$skip status=none
        if [ "$name" != floppy16 ]; then
            check "$name: fsck.fat -n finds nothing wrong" \
                quiet fsck.fat -n vol.raw
        else
            # QEMU's FAT16 floppy has 357 clusters, which a FAT reader
            # takes for FAT12 by their count: fsck.fat finds the same
            # faults in QEMU's volume and ours
            dd if=q.raw of=qvol.raw bs=512 status=none
            same "$name: fsck.fat -n reads QEMU's and ours alike" \
                fsck_out qvol.raw -- fsck_out vol.raw
            rm -f qvol.raw
        fi
        rm -f vol.raw
    fi
    rm -f q.raw
    if [ "$name" = hd16 ]; then mv b.raw hd16.raw; else rm -f b.raw; fi
done
command -v fsck.fat >/dev/null ||
    skip "fsck.fat -n" "not installed (Debian dosfstools)"

# qemu-io's timing line, which no two runs share
rate='s/[0-9.]* [KMG]\?i\?B\/sec and [0-9.]* ops\/sec/X/; s/[0-9.]* sec/X/'
# same_msg NAME CMD1 -- CMD2: both print the same, tool names aside,
# whether they succeed or not (for refusals both tools make alike)
same_msg() {
    local name=$1 a=() q b
    shift
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    q=$("${a[@]}" 2>&1 | sed 's/^qemu-\(img\|io\): //; '"$rate")
    b=$("$@" 2>&1 | sed 's/^qblock-\(img\|io\): //; '"$rate")
    if [ -n "$b" ] && [ "$q" = "$b" ]; then
        ok "$name ($(tail -n 1 <<<"$b" | cat -v))"
    else
        fail "$name" "$(diff <(echo "$q") <(echo "$b"))"
    fi
}

# qemu-io -r and qblock-io read the same metadata: MBR, the rest of the
# first track, boot sector, FAT, both FATs' ends, the root directory
for at in "0 512" "512 31744" "32256 512" "32768 4096" "290304 1024" \
          "290816 16384"; do
    same_msg "read -v $at" "$Q_IO" -r -c "read -v $at" fat:tree -- \
        "$QB_IO" -r -c "read -v $at" fat:tree
done

# through qblock-nbd: qemu-img and qemu-io read what qblock-img converts,
# and a file's content comes from the host when it is read, not at open
sock=$work/nbd.sock
"$QB_NBD" -r -t -k "$sock" fat:tree 2> nbd.err &
nbd_pid=$!
for i in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
uri="nbd+unix:///?socket=$sock"
"$Q_IMG" convert -f raw -O raw "$uri" n.raw
check "qemu-img through qblock-nbd reads qblock-img's bytes" \
    cmp -s n.raw hd16.raw
same_msg "qemu-io through qblock-nbd reads what qblock-io reads" \
    "$Q_IO" -r -f raw -c "read -v 32256 1024" "$uri" -- \
    "$QB_IO" -r -c "read -v 32256 1024" fat:tree
echo HELLO > tree/a.txt
touch -m -d '2024-02-29 13:14:15' tree/a.txt
"$Q_IMG" convert -f raw -O raw "$uri" n.raw
check "a file changed after open reads as it is now" \
    cmp -s <(fat extract n.raw /a.txt) tree/a.txt
kill "$nbd_pid" 2>/dev/null
wait "$nbd_pid" 2>/dev/null
# blockdev-add's options through qblock-storage-daemon's NBD export
qsock=$work/qsd.sock
"$build/qblock-storage-daemon" \
    --blockdev driver=vvfat,dir=tree,node-name=v,read-only=on \
    --nbd-server addr.type=unix,addr.path="$qsock" \
    --export type=nbd,id=e,node-name=v,name=v 2> qsd.err &
qsd_pid=$!
for i in $(seq 100); do [ -S "$qsock" ] && break; sleep 0.1; done
"$Q_IMG" convert -f raw -O raw "nbd+unix:///v?socket=$qsock" n.raw
# a.txt's change time moved: compared with a convert of the tree as now
"$QB_IMG" convert -O raw fat:tree hd16.raw
check "driver=vvfat in qblock-storage-daemon, read through NBD" \
    cmp -s n.raw hd16.raw
kill "$qsd_pid" 2>/dev/null
wait "$qsd_pid" 2>/dev/null
rm -f n.raw hd16.raw

# names that are no UTF-8: QEMU says so and gives them no long name
mkdir latin1
echo a > "latin1/$(printf 'caf\xe9')"
echo b > "latin1/$(printf 'x\xffy.txt')"
same_msg "names that are no UTF-8: the warnings" \
    "$Q_IMG" convert -O raw fat:floppy:latin1 q.raw -- \
    "$QB_IMG" convert -O raw fat:floppy:latin1 b.raw
# QEMU's short name for such a name takes characters from memory it
# never set (CAF~1, CAF@~1 or CAFA~1 from one run to the next), so only
# the rest of the entries is compared with QEMU's, and qblock's names
# with what it documents: the valid characters, then ~1
fat_but_names() {
    fat tree "$1" --detail | awk -F'\t' '{ print $2 "\t" $3 "\t" substr($4, 13) }'
}
same "names that are no UTF-8: entries and contents as QEMU's" \
    fat_but_names q.raw -- fat_but_names b.raw
check "names that are no UTF-8: 8.3 names alone, of the valid characters" \
    [ "$(fat tree b.raw | cut -f1 | tr '\n' ' ')" = "/CAF~1 /XY~1.TXT " ]
rm -f q.raw b.raw

# a qcow2 overlay over the directory: the writable disk the read-only
# driver leaves room for (the host directory is not written)
"$Q_IMG" create -q -f qcow2 -F vvfat -b "fat:$work/small" oq.qcow2
"$QB_IMG" create -q -f qcow2 -F vvfat -b "fat:$work/small" ob.qcow2
check "a qcow2 overlay over fat:DIR: the file qemu-img creates" \
    cmp -s oq.qcow2 ob.qcow2
same_msg "the overlay reads the boot sector from the directory" \
    "$Q_IO" -r -c "read -v 0 512" oq.qcow2 -- \
    "$QB_IO" -r -c "read -v 0 512" ob.qcow2
check "the overlay takes writes, the directory stays as it was" \
    quiet "$QB_IO" -c "write -P 7 0 64k" -c "read -P 7 0 64k" ob.qcow2
same "the directory after the overlay's write" fat host small -- \
    bash -c "'$QB_IMG' convert -O raw 'fat:small' s.raw &&
             python3 '$here/fat-read.py' tree s.raw"
rm -f oq.qcow2 ob.qcow2 s.raw

# refusals, with QEMU's messages where QEMU refuses alike
same_msg "a write to a read-only open" \
    "$Q_IO" -r -c "write 0 512" fat:small -- \
    "$QB_IO" -r -c "write 0 512" fat:small
same_msg "a read-write open" "$Q_IO" -c "read 0 512" fat:small -- \
    "$QB_IO" -c "read 0 512" fat:small
same_msg "auto-read-only, then qemu-io's write permission" \
    "$Q_IO" --image-opts -c "read 0 512" \
    driver=vvfat,dir=small,auto-read-only=on -- \
    "$QB_IO" --image-opts -c "read 0 512" \
    driver=vvfat,dir=small,auto-read-only=on
same_msg "map, human: no offsets to show" "$Q_IMG" map fat:small -- \
    "$QB_IMG" map fat:small
same_msg "check: not for this driver" "$Q_IMG" check fat:small -- \
    "$QB_IMG" check fat:small
same_msg "compare of the same tree" "$Q_IMG" compare fat:small fat:small -- \
    "$QB_IMG" compare fat:small fat:small
for spec in fat:nonexistent fat:small/file fat:floppy:big fat:floppy:12:big \
            fat:root 'json:{"driver":"vvfat","dir":"small","fat-type":13}' \
            'json:{"driver":"vvfat","dir":"small","label":"twelve bytes"}' \
            'json:{"driver":"vvfat"}'; do
    same_msg "refused: $spec" "$Q_IMG" info "$spec" -- "$QB_IMG" info "$spec"
done
# the most clusters a tree may fill, and one more: QEMU's limits (a hard
# disk's is 4 clusters below what its volume holds); sparse files
for edge in "floppy:12: 177" "floppy: 357" "12: 4020" "16: 64470"; do
    set -- $edge
    rm -rf edge && mkdir edge
    truncate -s $(($2 * 8192)) edge/f
    same "fat:${1}DIR: a tree of $2 clusters fits" "$Q_IMG" info "fat:${1}edge" \
        -- "$QB_IMG" info "fat:${1}edge"
    truncate -s $((($2 + 1) * 8192)) edge/f
    same_msg "fat:${1}DIR: a tree of $(($2 + 1)) clusters does not" \
        "$Q_IMG" info "fat:${1}edge" -- "$QB_IMG" info "fat:${1}edge"
done
rm -rf edge && mkdir -p edge/sub && truncate -s 2147483648 edge/sub/f
same_msg "a file of 2 GiB" "$Q_IMG" info fat:edge -- "$QB_IMG" info fat:edge
rm -rf edge
# rw on a node opened read-only (qemu-img info): QEMU's refusal; what rw
# writes is tests/interop/vvfat-rw.sh's
same_msg "rw refused on a read-only open" "$Q_IMG" info fat:rw:small -- \
    "$QB_IMG" info fat:rw:small
refused "rw refused on a read-only open: the message" \
    "Unable to set VVFAT to 'rw' when drive is read-only" \
    "$QB_IMG" info fat:rw:small

# FAT32 (fat:32:): QEMU 7.2's volume is no FAT32 one (its boot sector
# says FAT16 over FATs of 32-bit entries, which no reader takes), so only
# what the disk is outside the volume is compared with QEMU: info, map
# and the MBR (size, geometry, partition); the volume is checked against
# the host tree with fat-read.py, fsck.fat and mtools (mcopy of it all)
qemu32() { "$Q_IMG" "$@" 2>&1 | grep -v 'FAT32 has not been tested'; }
same "hd32: info as QEMU's" qemu32 info fat:32:tree -- \
    "$QB_IMG" info fat:32:tree
same "hd32: map as QEMU's" qemu32 map --output=json fat:32:tree -- \
    "$QB_IMG" map --output=json fat:32:tree
"$Q_IMG" convert -O raw fat:32:tree q.raw 2>/dev/null
"$QB_IMG" convert -O raw fat:32:tree b.raw
same "hd32: the MBR as QEMU's" eval "fat bpb q.raw | grep ^mbr" -- \
    eval "fat bpb b.raw | grep ^mbr"
rm -f q.raw
fat bpb b.raw > bpb32
missing=
for field in fs_type='FAT32   ' root_entries=0 sectors_per_fat=1008 \
    sectors_per_cluster=8 reserved_sectors=32 root_cluster=2 \
    fsinfo_sector=1 backup_boot_sector=6 \
    "fsinfo.signatures=b'RRaArrAa\\x00\\x00U\\xaa'"; do
    grep -qxF "$field" bpb32 || missing+="$field; "
done
if [ -z "$missing" ]; then
    ok "hd32: a FAT32 boot sector and FSInfo (root cluster 2, 4 KiB clusters)"
else
    fail "hd32: a FAT32 boot sector and FSInfo" "missing: $missing" \
        "$(cat bpb32)"
fi
dd if=b.raw of=vol.raw bs=512 skip=63 status=none
check "hd32: the backup boot sector is the boot sector" \
    cmp -s <(dd if=vol.raw bs=512 count=2 status=none) \
    <(dd if=vol.raw bs=512 skip=6 count=2 status=none)
same "hd32: the host's names and contents" fat host tree -- fat tree b.raw
check "hd32: compare with our own convert" \
    quiet "$QB_IMG" compare -F raw fat:32:tree b.raw
if command -v fsck.fat >/dev/null; then
    check "hd32: fsck.fat -n finds nothing wrong" quiet fsck.fat -n vol.raw
    check "hd32: fsck.fat takes it for FAT32 with 128760 clusters" \
        eval "fsck.fat -n -v vol.raw | grep -q '32 bit entries' &&
              fsck.fat -n vol.raw | grep -q '/128760 clusters'"
fi
if command -v mcopy >/dev/null; then
    rm -rf out32 && mkdir out32
    MTOOLS_SKIP_CHECK=1 mcopy -s -i vol.raw '::/*' out32/ 2>/dev/null
    same "hd32: mtools copies out the host's tree" fat host tree -- \
        fat host out32
    rm -rf out32
else
    skip "hd32: mtools" "not installed (Debian mtools)"
fi
rm -f vol.raw b.raw bpb32
# a tree as large as FAT32's clusters hold on the 504 MiB disk: QEMU's
# count would refuse it as FAT16's
rm -rf edge && mkdir edge && truncate -s $((70000 * 4096)) edge/f
check "hd32: a tree of 70000 clusters (more than FAT16 holds)" \
    quiet "$QB_IMG" info fat:32:edge
rm -rf edge
refused "FAT32 floppy refused" "a floppy cannot hold FAT32's 65525 clusters" \
    "$QB_IMG" info fat:floppy:32:small

summary
