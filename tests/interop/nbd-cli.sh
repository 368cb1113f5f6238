#!/usr/bin/env bash
# qblock-nbd's command line against the real qemu-nbd: command lines that
# qemu-nbd refuses must be refused by qblock-nbd with the same message
# and exit status (the program name aside).  Options qblock-nbd does not
# support must fail with a message saying so, never start a server.  The
# main-loop object: one at most, its values checked, and data served with
# the loop's busy-polling on (the default), off and set.
#
#   tests/interop/nbd-cli.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed"; exits
# 77 if qemu-nbd is not installed.
set -u
build=${1:?usage: nbd-cli.sh BUILD_DIR}
source "$(dirname "$0")/nbd-lib.bash"

cd "$work" || exit 1
truncate -s 1M r.img
qemu-img create -q -f qcow2 q.qcow2 1M
long=$(head -c 4097 /dev/zero | tr '\0' a)

# run PROG ARGS...: output (stdout and stderr) and exit status, with the
# program's name normalised; a server that starts is stopped after 3 s.
run() {
    local prog=$1
    shift
    timeout 3 "$prog" "$@" 2>&1 | sed -e "s#$qnbd#qemu-nbd#g" \
        -e 's#qblock-nbd#qemu-nbd#g'
    echo "exit status ${PIPESTATUS[0]}"
}

same() {
    local name=$1
    shift
    local want got
    want=$(run qemu-nbd "$@")
    got=$(run "$qnbd" "$@")
    if [ "$want" = "$got" ]; then
        ok "$name"
    else
        fail "$name" "$(diff <(echo "$want") <(echo "$got"))"
    fi
}

same "no file" 
same "two files" r.img q.qcow2
same "unknown option" --bogus r.img
same "missing argument" -p
same "bad cache mode" --cache=foo r.img
same "bad aio mode" --aio=foo r.img
same "bad discard mode" --discard=foo r.img
same "bad detect-zeroes mode" --detect-zeroes=foo r.img
same "detect-zeroes=unmap without discard=unmap" --detect-zeroes=unmap r.img
same "bad shared count" -e 1x r.img
same "negative shared count" -e -1 r.img
same "bad offset" -o foo r.img
same "offset past the end" -o 99999999 -f raw -k "$work/x.sock" r.img
same "export name too long" -x "$long" r.img
same "description too long" -D "$long" r.img
same "unknown format" -f foo r.img
same "wrong format" -f qcow2 r.img
same "missing image" nonexistent.img
same "bad image option" --image-opts driver=raw,file.filename=r.img,foo=bar
# QemuOpts syntax: a bare first value is the file, keys are not a tree
same "--image-opts with a bare file name" --image-opts nonexistent.img
same "--image-opts with a key also a prefix" \
    --image-opts driver=raw,file.filename=nonexistent.img,a.b=1,a=2
same "--image-opts with -f" --image-opts -f raw r.img
same "--list with a file" -L r.img
same "--list with -x" -L -x foo
same "--list with -f" -L -f raw
same "--list with --fork" -L --fork
# Every per-device setting is refused with --list, and the others are not
# (those go on to connect to a socket that is not there).
for opt in -A "-B b" "-c /dev/nbd0" -d "-D x" "-l s" -n --cache=none \
           --aio=threads --discard=unmap "-o 512"; do
    same "--list with $opt" -L -k "$work/none.sock" $opt
done
for opt in "-o 0" -r -s -t --detect-zeroes=on "-e 2" --image-opts; do
    same "--list with $opt (not per-device)" -L -k "$work/none.sock" $opt
done
same "--list with no server on the socket" -L -k "$work/none.sock"
same "--list with no server on the port" -L -b 127.0.0.1 -p 1
same "bad bind address" -b nonexistent.invalid r.img
same "-l on a raw image" -l snap -f raw r.img

# refused by qblock-nbd where qemu-nbd would need a kernel module or TLS
# authorization, a bad --object or --tls-creds as qemu-nbd refuses it; a
# bitmap the image does not have is refused by both
refused() {
    local name=$1 pattern=$2
    shift 2
    local got
    got=$(run "$qnbd" "$@")
    if grep -q "exit status 1" <<<"$got" && grep -qi "$pattern" <<<"$got"
    then
        ok "$name"
    else
        fail "$name" "$got"
    fi
}
refused "-c DEV is refused" "not supported" -c /dev/nbd0 r.img
refused "-d is refused" "not supported" -d /dev/nbd0
refused "--object with a bad secret is refused" \
    "Either 'file' or 'data' must be provided" --object secret,id=s r.img
refused "a second main-loop object is refused" \
    "only one main-loop instance allowed" \
    --object main-loop,id=a --object main-loop,id=b r.img
refused "a main-loop object with a negative poll-max-ns is refused" \
    "poll-max-ns value must be in range" \
    --object main-loop,id=a,poll-max-ns=-1 r.img
refused "--tls-authz needs --tls-creds" \
    "tls-authz is not permitted without --tls-creds" --tls-authz=a r.img
refused "--tls-creds names no object" "No TLS credentials with id 't'" \
    --tls-creds=t r.img
refused "-B of a missing bitmap is refused" "Bitmap 'bitmap' is not found" \
    -B bitmap -f raw -k "$work/y.sock" r.img
refused "a port past 65535 is refused" "65535" -p 99999 r.img
refused "-k on a regular file is refused, the file kept" "not a socket" \
    -k r.img q.qcow2
check "the regular file is still there" test -f r.img

# the server's loop busy-polls by default; a main-loop object turns that
# off (or sets its window), and either way the data is served
for poll in "" "--object main-loop,id=ml,poll-max-ns=0" \
            "--object main-loop,id=ml,poll-max-ns=200000"; do
    if start_server ml "$qnbd" -f raw $poll r.img; then
        check "a read through qblock-nbd ${poll:-polling by default}" \
            bash -c "qemu-io -f raw -r -c 'read -P 0 0 4k' '$(uri ml)' |
                     grep -q 'read 4096/4096'"
        stop_server
    else
        fail "qblock-nbd starts ${poll:-polling by default}"
    fi
done

"$qnbd" --help > help.out
rc=$?
missing=
for opt in port bind socket shared persistent export-name description \
           offset allocation-depth list fork pid-file format read-only \
           snapshot load-snapshot nocache cache aio discard detect-zeroes \
           image-opts connect; do
    grep -q -- "--$opt" help.out || missing="$missing --$opt"
done
check "--help exits 0 and lists every option${missing:+ (missing:$missing)}" \
    test $rc = 0 -a -z "$missing"
check "-V prints the version" bash -c "'$qnbd' -V | grep -q 'qemu-nbd 7.2'"
summary
