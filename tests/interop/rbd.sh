#!/usr/bin/env bash
# The rbd driver against a real one-node Ceph cluster (tests/ceph/), with
# QEMU's own rbd driver (qemu-block-extra) as the oracle: convert both
# ways, info, map, create, resize, snapshot reads, discard and zero
# writes, the legacy file name and the blockdev options, QEMU's errors
# for a bad pool, image, user or key; the daemon exporting an RBD image
# over NBD (its map before and after a discard through it) and
# vhost-user-blk; and last the faults: the OSD stopped under
# I/O must end in errors within librados's (short) timeouts, never a hang.
#
#   tests/interop/rbd.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed,
# N skipped".  Exits 77 when Ceph or QEMU's rbd driver is not installed,
# except under CI=true, where that is a failure.  The cluster is stopped
# whatever happens.
set -u
build=$(cd "${1:?usage: rbd.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
qimg=$build/qblock-img
qio=$build/qblock-io
qsd=$build/qblock-storage-daemon

# missing WHY: skip, or fail under CI
missing() {
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $1 (CI=true: the rbd tests must run)"
        echo "0 passed, 1 failed"
        exit 1
    fi
    echo "skip: $1"
    exit 77
}
for tool in ceph-mon ceph-osd ceph rbd uuidgen qemu-img qemu-io nbdcopy; do
    command -v $tool >/dev/null 2>&1 ||
        missing "$tool is not installed (make test-deps installs ceph-mon, ceph-osd, ceph-common, uuid-runtime, qemu-utils, libnbd-bin)"
done
qemu-img --help | grep -q '^Supported formats:.* rbd' ||
    missing "qemu-img has no rbd driver (Debian package qemu-block-extra)"

. "$(dirname "${BASH_SOURCE[0]}")/check-lib.bash"

work_dir
extra_cleanup() {
    if [ -f "$work/ceph/ceph.conf" ]; then
        bash "$src/tests/ceph/stop.sh" "$work/ceph"
    fi
}
cd "$work" || exit 1

if ! bash "$src/tests/ceph/start.sh" "$work/ceph" > start.log 2>&1; then
    fail "start the test cluster" "$(tail -n 20 start.log)"
    summary
    exit 1
fi
conf=$work/ceph/ceph.conf
# Short timeouts for every client (ours, QEMU's, the rbd tool), so that a
# dead OSD or monitor ends in an error soon rather than in 300 s.
cat >> "$conf" <<'EOF'
[client]
rados osd op timeout = 10
rados mon op timeout = 10
client mount timeout = 10
EOF
export CEPH_CONF=$conf
img() { echo "rbd:rbd/$1:conf=$conf"; }

if "$qimg" info "rbd:rbd/x" 2>&1 | grep -q 'not built in'; then
    fail "qblock was built without librbd" \
         "$("$qimg" info "rbd:rbd/x" 2>&1)"
    summary
    exit 1
fi

# librados and librbd are loaded when an rbd image is first used, never
# at start (block/rbd-lib.c): the loader's trace shows librbd for an rbd
# image and not for a local one.
qemu-img create -q -f qcow2 local.qcow2 1M
loaded() { LD_DEBUG=libs "$@" 2>&1 >/dev/null | grep -c 'calling init: .*librbd\.so'; }
if [ "$(loaded "$qimg" info local.qcow2)" -eq 0 ] &&
   [ "$(loaded "$qimg" info "$(img absent)")" -gt 0 ]; then
    ok "librbd loaded only for rbd images"
else
    fail "librbd loaded only for rbd images" \
         "local: $(loaded "$qimg" info local.qcow2)," \
         "rbd: $(loaded "$qimg" info "$(img absent)")"
fi
# A library that cannot be loaded is named, not a crash: librados hidden
# behind an empty file in a mount namespace of our own.
lib=$(ldconfig -p | sed -n 's/.*librados\.so\.2 .*=> //p' | head -n 1)
if [ -n "$lib" ] &&
   unshare -m true 2>/dev/null; then
    out=$(unshare -m sh -c "mount --bind /dev/null '$lib' && \
          '$qimg' info '$(img x)'" 2>&1)
    if grep -q "rbd support could not be loaded: $lib" <<<"$out"; then
        ok "librados missing: named"
    else
        fail "librados missing: named" "$out"
    fi
else
    echo "skip librados missing: no librados.so.2 found or no mount namespaces"
    skipped=$((skipped + 1))
fi

# norm: program names, timings and the scratch folder out of the output
norm() {
    sed -e "s#$qimg#qemu-img#g" -e "s#$qio#qemu-io#g" \
        -e 's#qblock-img#qemu-img#g' -e 's#qblock-io#qemu-io#g' \
        -e '/ops; [0-9.]* sec/d' -e '/^Run completed in/d'
}

# A source with data, a zeroed range and holes spread over several 4 MiB
# objects, so that convert and map have something to skip.
qemu-img create -q -f qcow2 src.qcow2 24M
qemu-io -f qcow2 -c 'write -P 1 0 64k' -c 'write -P 2 1M 3M' \
    -c 'write -z 8M 1M' -c 'write -P 3 13M 4k' -c 'write -P 4 24M-512 512' \
    src.qcow2 >/dev/null

# --- convert, both ways, QEMU's compare as the judge ---------------------
if timeout 60 "$qimg" convert -O raw src.qcow2 "$(img conv)" &&
   quiet qemu-img compare -f qcow2 -F raw src.qcow2 "$(img conv)"; then
    ok "convert qcow2 -> rbd, qemu-img compare identical"
else
    fail "convert qcow2 -> rbd, qemu-img compare identical"
fi
if timeout 60 "$qimg" convert -m 8 -W -O raw src.qcow2 "$(img convw)" &&
   quiet qemu-img compare -f qcow2 -F raw src.qcow2 "$(img convw)"; then
    ok "convert -m 8 -W qcow2 -> rbd"
else
    fail "convert -m 8 -W qcow2 -> rbd"
fi
qemu-img convert -O raw src.qcow2 "$(img qconv)"
if timeout 60 "$qimg" convert -m 8 -W -f raw -O qcow2 "$(img qconv)" \
       backw.qcow2 &&
   quiet qemu-img compare -f qcow2 -F qcow2 src.qcow2 backw.qcow2; then
    ok "convert -m 8 -W rbd (written by qemu-img) -> qcow2"
else
    fail "convert -m 8 -W rbd (written by qemu-img) -> qcow2"
fi
# the holes were skipped: the copy maps like qemu-img's own (in order,
# so that the extents come out the same)
timeout 60 "$qimg" convert -f raw -O qcow2 "$(img qconv)" back.qcow2
qemu-img convert -f raw -O qcow2 "$(img qconv)" qback.qcow2
check "convert rbd -> qcow2 skips what is not allocated" \
    [ "$(qemu-img map --output=json back.qcow2 | sed 's/"offset": [0-9]*//')" = \
      "$(qemu-img map --output=json qback.qcow2 | sed 's/"offset": [0-9]*//')" ]
same_as_qemu "compare rbd with qcow2" qemu-img compare -f raw -F qcow2 \
    "$(img conv)" src.qcow2
qemu-io -f raw -c 'write -P 9 2M 4k' "$(img qconv)" >/dev/null
same_as_qemu "compare finds a difference" qemu-img compare -f raw -F qcow2 \
    "$(img qconv)" src.qcow2

# --- info and map ---------------------------------------------------------
same_as_qemu "info" qemu-img info -f raw "$(img conv)"
same_as_qemu "info json" qemu-img info --output=json -f raw "$(img conv)"
same_as_qemu "info, probed" qemu-img info "$(img conv)"
same_as_qemu "map" qemu-img map -f raw "$(img conv)"
same_as_qemu "map json" qemu-img map --output=json -f raw "$(img conv)"

# --- create and resize ----------------------------------------------------
for size in 4M 1M; do
    timeout 60 "$qimg" create -q -f raw -o cluster_size=$size \
        "$(img ours$size)" 20M
    qemu-img create -q -f raw -o cluster_size=$size "$(img theirs$size)" 20M
    check "create cluster_size=$size: object size as qemu-img's" \
        [ "$(rbd info rbd/ours$size | grep -E '^\s*(size|order)')" = \
          "$(rbd info rbd/theirs$size | grep -E '^\s*(size|order)')" ]
done
same_as_qemu "info of a created image" qemu-img info --output=json -f raw \
    "$(img ours1M)"
same_as_qemu "create with a bad object size" qemu-img create -f raw \
    -o cluster_size=3000 "$(img bad)" 4M
same_as_qemu "create over an existing image" qemu-img create -f raw \
    "$(img ours1M)" 4M
timeout 60 "$qimg" resize -f raw "$(img ours1M)" 36M >/dev/null
same_as_qemu "resize: grown" qemu-img info --output=json -f raw "$(img ours1M)"
same_as_qemu "resize: shrinking needs --shrink" qemu-img resize -f raw \
    "$(img ours1M)" 4M
timeout 60 "$qimg" resize -f raw --shrink "$(img ours1M)" 12M >/dev/null
check "resize: shrunk to 12M (rbd info)" \
    quiet grep -q 'size 12 MiB' <(rbd info rbd/ours1M)

# --- snapshots: read-only, and they read what was there -----------------
qemu-img convert -O raw src.qcow2 "$(img snapimg)"
rbd snap create rbd/snapimg@s1 >/dev/null 2>&1
qemu-io -f raw -c 'write -P 7 0 2M' "$(img snapimg)" >/dev/null
same_as_qemu "snapshot reads the old data" qemu-io -f raw -c 'read -P 1 0 64k' \
    -c 'read -P 2 1M 1M' "rbd:rbd/snapimg@s1:conf=$conf"
same_as_qemu "the image reads the new data" qemu-io -f raw -c 'read -P 7 0 2M' \
    "$(img snapimg)"
same_as_qemu "snapshot opened for writing" qemu-io -f raw -c 'write 0 4k' \
    "rbd:rbd/snapimg@s1:conf=$conf"
same_as_qemu "snapshot compares to the source" qemu-img compare -f raw -F qcow2 \
    "rbd:rbd/snapimg@s1:conf=$conf" src.qcow2
same_as_qemu "snapshot -l lists RBD's snapshots" qemu-img snapshot -l \
    "$(img snapimg)"
same_as_qemu "info lists them" qemu-img info -f raw "$(img snapimg)"
same_as_qemu "info --image-opts: format rbd, specific information" qemu-img info \
    --image-opts "driver=rbd,pool=rbd,image=snapimg,conf=$conf"
timeout 60 "$qimg" snapshot -c s2 "$(img snapimg)" 2>/dev/null
check "snapshot -c creates an RBD snapshot" \
    quiet grep -qw s2 <(rbd snap ls rbd/snapimg)
qemu-io -f raw -c 'write -P 8 0 64k' "$(img snapimg)" >/dev/null
timeout 60 "$qimg" snapshot -a s2 "$(img snapimg)" 2>/dev/null
check "snapshot -a rolls the image back" quiet qemu-io -f raw -r \
    -c 'read -P 7 0 64k' "$(img snapimg)"
timeout 60 "$qimg" snapshot -d s2 "$(img snapimg)" 2>/dev/null
check "snapshot -d removes it" \
    eval '! grep -qw s2 <(rbd snap ls rbd/snapimg)'
same_as_qemu "snapshot -c over an existing one" qemu-img snapshot -f raw -c s1 \
    "$(img snapimg)"
same_as_qemu "snapshot -d of a missing one" qemu-img snapshot -f raw -d nosuch \
    "$(img snapimg)"

# --- discard and zero writes: same data and same map as QEMU's ----------
writes=(-c 'write -P 5 0 12M' -c 'discard 4M 4M' -c 'write -z -u 8M 4M'
        -c 'write -z -u 1M 64k' -c 'write -z -u 16M 4M' -c 'discard 100k 8k'
        -c 'aio_write -P 6 12M 4k' -c 'aio_write -P 6 13M 4k' -c 'aio_flush'
        -c 'write -P 8 20M 1000' -c 'flush')
for t in ours theirs; do
    qemu-img create -q -f raw "$(img w$t)" 24M
done
# (sorted: the two aio_writes to different objects complete in any order)
got=$(timeout 60 "$qio" -f raw "${writes[@]}" "$(img wours)" 2>&1 | norm |
      sort)
want=$(qemu-io -f raw "${writes[@]}" "$(img wtheirs)" 2>&1 | norm | sort)
if [ "$got" = "$want" ]; then
    ok "discard and zero writes: same output"
else
    fail "discard and zero writes: same output" \
        "$(diff <(echo "$want") <(echo "$got"))"
fi
check "discard and zero writes: same data" \
    quiet qemu-img compare -f raw -F raw "$(img wours)" "$(img wtheirs)"
check "discard and zero writes: same map" \
    [ "$(qemu-img map --output=json -f raw "$(img wours)" | sed 's/wours/w/g')" = \
      "$(qemu-img map --output=json -f raw "$(img wtheirs)" | sed 's/wtheirs/w/g')" ]

# without -u (no BDRV_REQ_MAY_UNMAP) the zeroes stay allocated, as the
# flag means; QEMU 7.2's driver deallocates them (docs/rbd.md)
qemu-img create -q -f raw "$(img thick)" 8M
timeout 60 "$qio" -f raw -c 'write -P 1 0 8M' -c 'write -z 0 4M' \
    -c 'write -z -u 4M 4M' "$(img thick)" >/dev/null 2>&1
check "write -z keeps the object allocated, write -z -u drops it" \
    [ "$(qemu-img map --output=json -f raw "$(img thick)" |
         grep -o '"zero": [a-z]*, "data": [a-z]*' | tr -d '\n')" = \
      '"zero": false, "data": true"zero": true, "data": false' ]
check "... and both read as zeroes" quiet qemu-io -f raw -r \
    -c 'read -P 0 0 8M' "$(img thick)"

# --- file names and options -----------------------------------------------
mon=$(sed -n 's/^mon host = .*v1:\([0-9.]*\):\([0-9]*\).*/\1 \2/p' "$conf")
read -r mon_ip mon_port <<<"$mon"
key=$(awk '/client.admin/ {f = 1} f && /key =/ {print $3; exit}' \
      "$work/ceph/keyring")
printf '[global]\nkeyring = %s\n' "$work/ceph/keyring" > keyring-only.conf
same_as_qemu "legacy name: mon_host, key, id" qemu-io -f raw -r \
    -c 'read -P 3 13M 4k' \
    "rbd:rbd/conv:conf=/dev/null:mon_host=$mon_ip\\:$mon_port:id=admin:key=$key"
same_as_qemu "blockdev options: server.0, user, auth-client-required" qemu-io -r \
    --image-opts -c 'read -P 2 1M 4k' \
    "driver=rbd,pool=rbd,image=conv,conf=$work/keyring-only.conf,user=admin,server.0.host=$mon_ip,server.0.port=$mon_port,auth-client-required.0=cephx"
same_as_qemu "blockdev options: a snapshot" qemu-io --image-opts \
    -c 'read -P 1 0 64k' \
    "driver=rbd,pool=rbd,image=snapimg,snapshot=s1,conf=$conf"
# the key from a secret object, with a configuration that has none
{
    printf '[global]\nmon host = [v2:%s:%s,v1:%s:%s]\n' "$mon_ip" \
        $((mon_port - 1)) "$mon_ip" "$mon_port"
    sed -n '/^\[client\]/,$p' "$conf"
} > nokey.conf
same_as_qemu "key-secret: the key from --object secret" qemu-io -r \
    --object "secret,id=sec0,data=$key,format=base64" --image-opts \
    -c 'read -P 2 1M 4k' \
    "driver=rbd,pool=rbd,image=conv,conf=$work/nokey.conf,user=admin,key-secret=sec0"
same_as_qemu "key-secret: a secret that is not the key" qemu-img info \
    --object "secret,id=sec0,data=$key" --image-opts \
    "driver=rbd,pool=rbd,image=conv,conf=$work/nokey.conf,key-secret=sec0"
same_as_qemu "key-secret: no such secret" qemu-img info --image-opts \
    "driver=rbd,pool=rbd,image=conv,conf=$work/nokey.conf,key-secret=sec0"

# QEMU 7.2's deprecated password-secret: key-secret by its legacy name, a
# creation option and an open option (--image-opts, json:), but not a
# key of an rbd: file name (librados is told it, and knows no such key)
sec="secret,id=sec0,data=$key,format=base64"
if timeout 60 "$qimg" create -q -f raw --object "$sec" \
       -o password-secret=sec0 "rbd:rbd/pw-ours:conf=$work/nokey.conf" 16M &&
   qemu-img create -q -f raw --object "$sec" -o password-secret=sec0 \
       "rbd:rbd/pw-theirs:conf=$work/nokey.conf" 16M &&
   quiet qemu-img compare -f raw -F raw "$(img pw-ours)" "$(img pw-theirs)"
then
    ok "password-secret: create with the key of the secret"
else
    fail "password-secret: create with the key of the secret"
fi
same_as_qemu "password-secret: create without it, no key" qemu-img create -f raw \
    "rbd:rbd/pw-none:conf=$work/nokey.conf" 16M
same_as_qemu "password-secret: create, no such secret" qemu-img create -f raw \
    -o password-secret=nosuch "rbd:rbd/pw-none:conf=$work/nokey.conf" 16M
same_as_qemu "password-secret: open with --image-opts" qemu-io -r \
    --object "$sec" --image-opts -c 'read -P 2 1M 4k' \
    "driver=rbd,pool=rbd,image=conv,conf=$work/nokey.conf,user=admin,password-secret=sec0"
same_as_qemu "password-secret: clashes with key-secret" qemu-img info \
    --object "$sec" --image-opts \
    "driver=rbd,pool=rbd,image=conv,conf=$work/nokey.conf,password-secret=sec0,key-secret=sec0"
same_as_qemu "password-secret: the schema's checks first" qemu-img info \
    --image-opts "driver=rbd,pool=rbd,conf=$work/nokey.conf,password-secret=a,key-secret=b"
same_as_qemu "password-secret: not in an rbd: file name" qemu-img info \
    --object "$sec" "rbd:rbd/conv:conf=$work/nokey.conf:password-secret=sec0"

# --- librbd's LUKS: each tool reads what the other wrote ------------------
# (every open derives the key, a second or more each on a loaded machine:
# as few opens as the cases need)
pw="--object secret,id=pw0,data=hunter2"
for f in luks luks2; do
    timeout 60 "$qimg" create -q -f raw $pw \
        -o encrypt.format=$f,encrypt.key-secret=pw0 "$(img ours-$f)" 64M
    qemu-img create -q -f raw $pw -o encrypt.format=$f,encrypt.key-secret=pw0 \
        "$(img theirs-$f)" 64M
    check "encrypt.format=$f: the image grows by the header as qemu-img's" \
        [ "$(rbd info rbd/ours-$f | grep -E '^\s*size')" = \
          "$(rbd info rbd/theirs-$f | grep -E '^\s*size')" ]
    e="driver=rbd,pool=rbd,conf=$conf,encrypt.format=$f,encrypt.key-secret=pw0"
    timeout 60 "$qio" $pw --image-opts -c 'write -P 21 1M 64k' \
        "$e,image=ours-$f" >/dev/null 2>&1
    check "encrypt.format=$f: qemu-io reads what qblock-io wrote" \
        quiet qemu-io $pw --image-opts -c 'read -P 21 1M 64k' \
        -c 'read -P 0 4M 64k' "$e,image=ours-$f"
    qemu-io $pw --image-opts -c 'write -P 22 2M 64k' "$e,image=theirs-$f" \
        >/dev/null 2>&1
    check "encrypt.format=$f: qblock-io reads what qemu-io wrote" \
        quiet timeout 60 "$qio" $pw --image-opts -c 'read -P 22 2M 64k' \
        -c 'read -P 0 4M 64k' "$e,image=theirs-$f"
done
same_as_qemu "encrypt.format=luks: info" qemu-img info $pw --image-opts \
    "driver=rbd,pool=rbd,image=ours-luks,conf=$conf,encrypt.format=luks,encrypt.key-secret=pw0"
e="driver=rbd,pool=rbd,image=ours-luks,conf=$conf,encrypt.format=luks"
same_as_qemu "encryption: a wrong passphrase" qemu-img info \
    --object secret,id=pw0,data=wrong --image-opts "$e,encrypt.key-secret=pw0"
same_as_qemu "encryption: the wrong format" qemu-img info $pw --image-opts \
    "driver=rbd,pool=rbd,image=ours-luks,conf=$conf,encrypt.format=luks2,encrypt.key-secret=pw0"
same_as_qemu "encryption: no key-secret" qemu-img info --image-opts "$e"
same_as_qemu "encryption: create without key-secret" qemu-img create -f raw \
    -o encrypt.format=luks "$(img enc-nokey)" 16M
same_as_qemu "encryption: a luks2 image too small for its header" qemu-img create \
    -f raw $pw -o encrypt.format=luks2,encrypt.key-secret=pw0 \
    "$(img enc-small)" 4M
check "... leaves no image behind" eval '! rbd ls | grep -qx enc-small'

# --- QEMU's errors ---------------------------------------------------------
same_as_qemu "error: bad pool" qemu-img info -f raw "rbd:nopool/conv:conf=$conf"
same_as_qemu "error: bad image" qemu-img info -f raw "$(img nosuchimage)"
same_as_qemu "error: bad user" qemu-img info -f raw "$(img conv):id=nobody"
same_as_qemu "error: bad key" qemu-img info -f raw \
    "$(img conv):key=AQBnUtZnAAAAABAAzzzzzzzzzzzzzzzzzzzzzz=="
same_as_qemu "error: malformed key" qemu-img info -f raw "$(img conv):key=garbage"
same_as_qemu "error: no pool" qemu-img info -f raw "rbd:conv"
same_as_qemu "error: option without value" qemu-img info -f raw "$(img conv):foo"
same_as_qemu "error: unknown librados option" qemu-img info -f raw \
    "$(img conv):no_such_option=1"
same_as_qemu "error: bad conf file" qemu-img info -f raw "rbd:rbd/conv:conf=/nonexist"
same_as_qemu "error: no namespace" qemu-img info -f raw "rbd:rbd/ns/conv:conf=$conf"
same_as_qemu "error: no snapshot" qemu-img info -f raw "rbd:rbd/conv@nosnap:conf=$conf"

# --- blockdev-create at an rbd location, against qemu-storage-daemon -------
qsd_scenario "$build" create-rbd

# --- bench ----------------------------------------------------------------
check "bench: writes, 16 in flight" quiet timeout 60 "$qimg" bench -w \
    -c 2000 -d 16 -s 4k -f raw "$(img conv)"
check "bench: reads" quiet timeout 60 "$qimg" bench -c 2000 -d 16 -s 4k \
    -f raw "$(img conv)"

# --- the daemon exports an RBD image that 'rbd import' wrote --------------
head -c 12M /dev/urandom > imported.raw
dd if=/dev/zero of=imported.raw bs=1M seek=4 count=4 conv=notrunc 2>/dev/null
rbd import imported.raw rbd/imported >/dev/null 2>&1
# the OSD stops under this daemon at the end (the faults below): each
# request then ends at librados's op timeout, half the others' here
sed 's/^rados osd op timeout = .*/rados osd op timeout = 5/' nokey.conf > export.conf
"$qsd" --object "secret,id=sec0,data=$key,format=base64" \
    --blockdev "driver=rbd,node-name=r0,pool=rbd,image=imported,conf=$work/export.conf,key-secret=sec0,discard=unmap" \
    --nbd-server addr.type=unix,addr.path=$work/nbd.sock \
    --export type=nbd,id=e0,node-name=r0,name=imported,writable=on \
    --export type=vhost-user-blk,id=v0,node-name=r0,addr.type=unix,addr.path=$work/vub.sock \
    2> qsd.err &
qsd_pid=$!
pids+=("$qsd_pid")
for i in $(seq 100); do
    [ -S nbd.sock ] && [ -S vub.sock ] && break
    sleep 0.1
done
u="nbd+unix:///imported?socket=$work/nbd.sock"
check "export over NBD: nbdcopy reads what rbd import wrote" \
    eval 'timeout 60 nbdcopy "$u" exported.raw && cmp -s exported.raw imported.raw'
check "export over NBD: qemu-img compare" quiet timeout 60 qemu-img compare \
    -f raw -F raw "$u" imported.raw
qemu-io -f raw -c 'write -P 4 100k 4k' "$u" >/dev/null 2>&1
check "export over NBD: a write reaches the image" \
    quiet qemu-io -f raw -r -c 'read -P 4 100k 4k' "$(img imported)"
check "export over vhost-user-blk: the capacity is the image's" \
    [ "$(python3 - "$work/vub.sock" <<'EOF'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
def req(r, payload=b'', flags=1):
    s.sendall(struct.pack('<III', r, flags, len(payload)) + payload)
def reply():
    hdr = b''
    while len(hdr) < 12:
        hdr += s.recv(12 - len(hdr))
    size = struct.unpack('<III', hdr)[2]
    data = b''
    while len(data) < size:
        data += s.recv(size - len(data))
    return data
req(1); reply()                       # GET_FEATURES
req(15); pf = struct.unpack('<Q', reply())[0]
req(16, struct.pack('<Q', pf & (1 << 9)))   # SET_PROTOCOL_FEATURES: CONFIG
req(3)                                # SET_OWNER
req(24, struct.pack('<III', 0, 8, 0) + bytes(8))   # GET_CONFIG: capacity
print(struct.unpack('<Q', reply()[12:20])[0] * 512)
EOF
)" = $((12 * 1024 * 1024)) ]

# The export's block status (a map through NBD) against QEMU's driver on
# the image itself; the daemon remembers the objects it found allocated
# (block/rbd-alloc-cache.c), and a discard and a zeroing with unmap
# through the export must make it forget them.
nbdmap() { qemu-img map --output=json -f raw "$1" | sed 's/"offset": [0-9]*//'; }
check "export over NBD: the map is the image's" \
    [ "$(nbdmap "$u")" = "$(nbdmap "$(img imported)")" ]
qemu-io -f raw -c 'discard 0 4M' -c 'write -z -u 8M 4M' "$u" >/dev/null 2>&1
check "export over NBD: a discard and a zeroing show as holes at once" \
    [ "$(nbdmap "$u")" = "$(nbdmap "$(img imported)")" -a \
      "$(nbdmap "$u" | grep -c '"zero": true, "data": false')" -ge 1 -a \
      "$(nbdmap "$u" | grep -c '"data": true')" -eq 0 ]

# --- the node in an iothread ----------------------------------------------
# An export in an iothread takes the rbd node there (its completions are
# then reaped in that thread); deleting the export brings it back to the
# main loop, so the iothread can go.
rbd create --size 8M rbd/threaded >/dev/null 2>&1
"$qsd" --object "secret,id=sec0,data=$key,format=base64" \
    --object iothread,id=io0 \
    --blockdev "driver=rbd,node-name=r1,pool=rbd,image=threaded,conf=$work/nokey.conf,key-secret=sec0" \
    --nbd-server addr.type=unix,addr.path=$work/nbd-io.sock \
    --export type=nbd,id=e1,node-name=r1,name=t,writable=on,iothread=io0,fixed-iothread=on \
    --chardev socket,id=qmp1,path=$work/qmp-io.sock,server=on,wait=off \
    --monitor chardev=qmp1 2> qsd-io.err &
qsd_io_pid=$!
pids+=("$qsd_io_pid")
for i in $(seq 100); do
    [ -S nbd-io.sock ] && [ -S qmp-io.sock ] && break
    sleep 0.1
done
ut="nbd+unix:///t?socket=$work/nbd-io.sock"
head -c 8M /dev/urandom > threaded.raw
check "iothread: an export in an iothread writes the whole image" \
    quiet timeout 60 qemu-img convert -n -f raw -O raw threaded.raw "$ut"
check "iothread: QEMU's driver reads it back" \
    quiet timeout 60 qemu-img compare -f raw -F raw threaded.raw "$(img threaded)"
# qmp_io CMD...: runs each QMP command on the daemon, prints each reply
qmp_io() {
    python3 "$src/tests/interop/qmp-each.py" "$work/qmp-io.sock" "$@"
}
qmp_io '{"execute": "block-export-del", "arguments": {"id": "e1"}}' \
    '{"execute": "object-del", "arguments": {"id": "io0"}}' \
    '{"execute": "block-export-add", "arguments": {"type": "nbd", "id": "e2", "node-name": "r1", "name": "m"}}' \
    > qmp-io.out
check "iothread: the node comes back to the main loop, the iothread goes" \
    [ "$(grep -c '"return": {}' qmp-io.out)" = 4 ]
check "iothread: ... and serves from there" \
    quiet timeout 60 qemu-img compare -f raw -F raw threaded.raw \
    "nbd+unix:///m?socket=$work/nbd-io.sock"
kill "$qsd_io_pid"
wait "$qsd_io_pid"

# --- faults: the OSD stops under I/O --------------------------------------
# (last: the cluster does not come back)
osd_pid=$(cat "$work/ceph/osd.0.pid")
start=$(date +%s)
timeout 120 "$qimg" bench -w -c 1000000 -d 16 -s 4k -f raw \
    "$(img conv):rados_osd_op_timeout=5" > fault.out 2>&1 &
bench_pid=$!
sleep 1
kill "$osd_pid"
wait "$bench_pid"
rc=$?
took=$(($(date +%s) - start))
check "OSD stopped under bench: an error, not a hang (exit $rc, ${took}s)" \
    [ $rc -ne 0 -a $rc -ne 124 -a $rc -lt 128 ]
check "... the error names the timeout" \
    quiet grep -q 'Failed request: Connection timed out' fault.out
# the daemon's export: a write and flush fail (librbd's cache may take
# the write, never the flush), and the daemon lives on and answers
start=$(date +%s)
timeout 60 qemu-io -f raw -c 'write -P 1 8M 4k' -c 'flush' "$u" \
    > fault-nbd.out 2>&1
rc=$?
took=$(($(date +%s) - start))
check "OSD stopped: write and flush through the export fail (${took}s)" \
    [ $rc -ne 124 -a "$(grep -c 'failed' fault-nbd.out)" -ge 1 ]
check "... and the daemon still serves: nbdinfo answers" \
    quiet timeout 20 nbdinfo --size "$u"
# stops within its librados timeouts (closing flushes librbd's cache)
stopped() {
    local i
    kill "$qsd_pid"
    for i in $(seq 300); do
        kill -0 "$qsd_pid" 2>/dev/null || { wait "$qsd_pid"; return; }
        sleep 0.1
    done
    kill -9 "$qsd_pid"
    return 1
}
check "... and stops when asked, within 30 s" stopped

summary
