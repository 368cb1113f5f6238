#!/usr/bin/env bash
# The ssh driver against a throw-away OpenSSH server, with QEMU's own ssh
# driver (qemu-block-extra's block-ssh.so) as the oracle: create, info,
# convert both ways, compare, map, resize and qemu-io reads and writes on
# ssh:// images, each result checked by the real qemu-img; host key
# checking (known_hosts, hashes, off) and QEMU's errors for a changed or
# unknown host key, a bad path, user or port; the daemon exporting an
# ssh node over NBD; and last a server that dies under a read, which
# must end in an error, never a crash or a hang, in a tool and under the
# daemon's export (which serves on and stops when asked).
#
#   tests/interop/ssh.sh BUILD_DIR
#
# Runs as root: sshd runs on 127.0.0.1 on a free port with its own host
# key, configuration and authorized_keys in a temporary folder.  libssh
# finds ~/.ssh through the password database, not $HOME, so the script
# runs in a mount namespace of its own where a temporary home is bound
# over the real one: the user's ~/.ssh is never read or written.
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed,
# N skipped".  Exits 77 when sshd, QEMU's ssh driver or mount namespaces
# are missing, except under CI=true, where that is a failure.
set -u

# missing WHY: skip, or fail under CI
missing() {
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $1 (CI=true: the ssh tests must run)"
        echo "0 passed, 1 failed"
        exit 1
    fi
    echo "skip: $1"
    exit 77
}
[ "$(id -u)" = 0 ] || missing "not root (sshd and the mount namespace need it)"
for tool in /usr/sbin/sshd ssh-keygen ssh-agent ssh-add unshare qemu-img \
            qemu-io; do
    command -v $tool >/dev/null 2>&1 ||
        missing "$tool is not installed (make test-deps installs openssh-server, openssh-client, qemu-utils)"
done
qemu-img --help | grep -q '^Supported formats:.* ssh' ||
    missing "qemu-img has no ssh driver (Debian package qemu-block-extra)"
if [ -z "${QSSH_TEST_NS:-}" ]; then
    QSSH_TEST_NS=1 exec unshare -m --propagation private bash "$0" "$@"
    missing "cannot make a mount namespace (unshare -m)"
fi

build=$(cd "${1:?usage: ssh.sh BUILD_DIR}" && pwd)
qimg=$build/qblock-img
qio=$build/qblock-io
qsd=$build/qblock-storage-daemon

if "$qimg" info ssh://127.0.0.1/x 2>&1 | grep -q 'not built in'; then
    echo "FAIL qblock was built without libssh"
    echo "0 passed, 1 failed"
    exit 1
fi

. "$(dirname "${BASH_SOURCE[0]}")/check-lib.bash"

work=$(mktemp -d)
sshd_pid=
qsd_pid=
cleanup() {
    [ -n "$qsd_pid" ] && kill "$qsd_pid" 2>/dev/null
    [ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null
    [ -n "${SSH_AGENT_PID:-}" ] && kill "$SSH_AGENT_PID" 2>/dev/null
    wait 2>/dev/null
    umount "$home" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1

# --- the server -----------------------------------------------------------
home=$(getent passwd "$(id -u)" | cut -d: -f6)
user=$(id -un)
mkdir -p home/.ssh && chmod 700 home home/.ssh
mount --bind "$work/home" "$home" || missing "cannot bind a home over $home"
unset SSH_AUTH_SOCK SSH_AGENT_PID
ssh-keygen -q -t ed25519 -N '' -C qblock-test -f "$home/.ssh/id_ed25519"
ssh-keygen -q -t ed25519 -N '' -C host -f hostkey
ssh-keygen -q -t ed25519 -N '' -C other -f otherkey
cp "$home/.ssh/id_ed25519.pub" authorized_keys
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > sshd_config <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $work/hostkey
PidFile $work/sshd.pid
AuthorizedKeysFile $work/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
Subsystem sftp internal-sftp
LogLevel VERBOSE
EOF
# sshd's privilege separation directory, which its package's service makes
mkdir -p /run/sshd
/usr/sbin/sshd -D -f "$work/sshd_config" -E "$work/sshd.log" &
sshd_pid=$!
for i in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
    sleep 0.1
done
if ! kill -0 "$sshd_pid" 2>/dev/null; then
    fail "start sshd" "$(tail -n 20 sshd.log)"
    summary
    exit 1
fi
known() { echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$1")" > "$home/.ssh/known_hosts"; }
known hostkey.pub

url() { echo "ssh://$user@127.0.0.1:$port$work/$1"; }
# an error of qblock-img and of qemu-img, without the program's name
err_of() { "$@" 2>&1 >/dev/null | sed -e 's/^[a-z-]*: //'; }
same_error() {
    local name=$1 ours theirs
    shift
    ours=$(err_of "$qimg" "$@")
    theirs=$(err_of qemu-img "$@")
    if [ -n "$ours" ] && [ "$ours" = "$theirs" ]; then
        ok "$name"
    else
        fail "$name" "qblock: $ours" "qemu:   $theirs"
    fi
}
same_output() {
    local name=$1 ours theirs
    shift
    ours=$("$qimg" "$@" 2>&1)
    theirs=$(qemu-img "$@" 2>&1)
    if [ "$ours" = "$theirs" ]; then
        ok "$name"
    else
        fail "$name" "qblock:" "$ours" "qemu:" "$theirs"
    fi
}

# --- images ---------------------------------------------------------------
qemu-img create -q -f qcow2 local.qcow2 8M
qemu-io -f qcow2 -c 'write -P 0x11 0 1M' -c 'write -P 0x22 3M 64k' \
    -c 'write -z 5M 1M' local.qcow2 >/dev/null

# libssh is loaded at the first connection, never at start
# (block/ssh-lib.c): the loader's trace shows it for an ssh:// image and
# not for a local one.
loaded() { LD_DEBUG=libs "$@" 2>&1 >/dev/null | grep -c 'calling init: .*libssh\.so'; }
local_loads=$(loaded "$qimg" info local.qcow2)
ssh_loads=$(loaded "$qimg" info -f raw "$(url absent.raw)")
check "libssh loaded only for ssh:// images (local $local_loads, ssh $ssh_loads)" \
    [ "$local_loads" -eq 0 -a "$ssh_loads" -gt 0 ]
# A libssh that cannot be loaded is named, not a crash: hidden behind an
# empty file in a mount namespace of our own (unshare is checked above).
lib=$(ldconfig -p | sed -n 's/.*libssh\.so\.4 .*=> //p' | head -n 1)
out=$(unshare -m sh -c "mount --bind /dev/null '$lib' &&
      '$qimg' info -f raw '$(url a.raw)'" 2>&1)
check "libssh missing: named" \
    grep -q "ssh support could not be loaded: $lib: .*(install Debian's libssh-4)" <<<"$out"

check "create -f raw over ssh" quiet "$qimg" create -f raw "$(url a.raw)" 4M
check "... the file has the size asked for" \
    [ "$(stat -c %s a.raw)" = $((4 * 1024 * 1024)) ]
same_output "info: as qemu-img shows it" info -f raw "$(url a.raw)"
same_output "info --output=json: as qemu-img shows it" \
    info --output=json -f raw "$(url a.raw)"
check "qblock-io writes over ssh" quiet "$qio" -f raw \
    -c 'write -P 0x5a 0 1M' -c 'write -P 0xa5 1536k 300k' -c flush \
    "$(url a.raw)"
check "... qemu-io reads them from the file" quiet qemu-io -f raw -r \
    -c 'read -P 0x5a 0 1M' -c 'read -P 0xa5 1536k 300k' \
    -c 'read -P 0 1M 512k' a.raw
qemu-io -f raw -c 'write -P 0x77 2M 1M' a.raw >/dev/null
check "qblock-io reads what qemu-io wrote" quiet "$qio" -f raw -r \
    -c 'read -P 0x77 2M 1M' -c 'read -P 0x5a 0 1M' "$(url a.raw)"
check "... and qemu-io over ssh reads the same" quiet qemu-io -f raw -r \
    -c 'read -P 0x77 2M 1M' -c 'read -P 0x5a 0 1M' "$(url a.raw)"

check "convert -O qcow2 to ssh" quiet "$qimg" convert -f qcow2 -O qcow2 \
    local.qcow2 "$(url c.qcow2)"
check "... qemu-img check finds it clean" quiet qemu-img check c.qcow2
check "... qemu-img compare: the same data" quiet qemu-img compare \
    local.qcow2 c.qcow2
check "compare over ssh" quiet "$qimg" compare -f qcow2 -F qcow2 \
    "$(url c.qcow2)" local.qcow2
same_output "map over ssh: as qemu-img maps it" map --output=json \
    -f qcow2 "$(url c.qcow2)"
check "convert from ssh to a local raw file" quiet "$qimg" convert \
    -f qcow2 -O raw "$(url c.qcow2)" back.raw
check "... qemu-img compare: the same data" quiet qemu-img compare \
    -f qcow2 -F raw local.qcow2 back.raw
qemu-img convert -f qcow2 -O qcow2 local.qcow2 "$(url q.qcow2)"
check "what qemu-img wrote over ssh, qblock-img compares equal" \
    quiet "$qimg" compare -f qcow2 -F qcow2 "$(url q.qcow2)" local.qcow2
check "create -f qcow2 over ssh" quiet "$qimg" create -f qcow2 \
    "$(url d.qcow2)" 16M
check "... qemu-img check finds it clean" quiet qemu-img check d.qcow2
same_output "... info as qemu-img shows it" info "$(url d.qcow2)"
check "resize: grow over ssh" quiet "$qimg" resize -f raw "$(url a.raw)" 6M
check "... the file grew" [ "$(stat -c %s a.raw)" = $((6 * 1024 * 1024)) ]
check "... and kept its data" quiet qemu-io -f raw -r \
    -c 'read -P 0x77 2M 1M' -c 'read -P 0 4M 2M' a.raw
same_error "resize: shrinking refused as qemu-img does" \
    resize --shrink -f raw "$(url a.raw)" 1M

# --- blockdev-create at an ssh location, against qemu-storage-daemon -------
# (jobs-vs-qsd.py makes a directory for each daemon, which the path names)
QSSH_PORT=$port QSSH_USER=$user qsd_scenario "$build" create-ssh

# --- options and file names -----------------------------------------------
opts="driver=ssh,server.host=127.0.0.1,server.port=$port,path=$work/a.raw"
check "--image-opts with server.host and server.port" quiet "$qio" \
    --image-opts -r -c 'read -P 0x77 2M 1M' "$opts"
check "json: with the older host and port" quiet "$qio" -r \
    -c 'read -P 0x77 2M 1M' \
    "json:{\"driver\": \"ssh\", \"host\": \"127.0.0.1\", \"port\": \"$port\", \"path\": \"$work/a.raw\"}"
same_error "port 0.42 refused as qemu-img does" info \
    "json:{\"driver\": \"ssh\", \"host\": \"127.0.0.1\", \"port\": 0.42, \"path\": \"/x\"}"
same_error "a closed port: QEMU's error" info \
    "ssh://$user@127.0.0.1:1/x"
same_error "a missing file: QEMU's error" info -f raw "$(url nothere.raw)"
same_error "an unknown user: QEMU's error" info -f raw \
    "ssh://nosuchuser@127.0.0.1:$port$work/a.raw"
same_error "a URI without a path: QEMU's error" info \
    "ssh://127.0.0.1:$port"

# every open's socket is closed again (libssh owns it once it is given)
cmds=()
for i in 1 2 3 4 5; do
    cmds+=(-c "open -r -o driver=raw $(url a.raw)" -c 'read -P 0x77 2M 4k' -c close)
done
# LeakSanitizer refuses to run under ptrace and would fail the program in
# an ASan build; the leak check is not what this case is about.
if ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
       strace -f -o fds.log -e trace=socket,close "$qio" "${cmds[@]}" \
       >/dev/null 2>&1; then
    opened=$(grep -c 'socket(AF_INET' fds.log)
    leaked=$(python3 - fds.log <<'EOF2'
import re, sys
live = set()
for line in open(sys.argv[1]):
    m = re.search(r'socket\(AF_INET.*= (\d+)$', line)
    if m:
        live.add(m.group(1))
    m = re.search(r'close\((\d+)\)\s+= 0', line)
    if m:
        live.discard(m.group(1))
print(len(live))
EOF2
)
    check "5 opens and closes: $opened sockets, $leaked left open" \
        [ "$opened" -eq 5 -a "$leaked" -eq 0 ]
else
    fail "5 opens and closes under strace" "$(tail -n 5 fds.log)"
fi

# --- host keys ------------------------------------------------------------
known otherkey.pub
same_error "changed host key refused as qemu-img does" info -f raw \
    "$(url a.raw)"
check "... but host_key_check=no opens it" quiet "$qimg" info -f raw \
    "$(url a.raw)?host_key_check=no"
: > "$home/.ssh/known_hosts"
same_error "unknown host refused as qemu-img does" info -f raw \
    "$(url a.raw)"
rm -f "$home/.ssh/known_hosts"
same_error "no known_hosts refused as qemu-img does" info -f raw \
    "$(url a.raw)"
for t in md5 sha1 sha256; do
    hash=$(ssh-keygen -l -E $t -f hostkey.pub | cut -d' ' -f2 | cut -d: -f2-)
    if [ $t != md5 ]; then
        # ssh-keygen prints base64 but for md5; the option takes hex
        hash=$(python3 -c 'import base64, sys; s = sys.argv[1]; print(base64.b64decode(s + "=" * (-len(s) % 4)).hex())' "$hash")
    fi
    check "host_key_check=$t: the right hash opens" quiet "$qimg" info \
        -f raw "$(url a.raw)?host_key_check=$t:$hash"
    check "host-key-check.mode=hash,type=$t opens" quiet "$qio" -r \
        --image-opts -c 'read -P 0x77 2M 1M' \
        "$opts,host-key-check.mode=hash,host-key-check.type=$t,host-key-check.hash=$hash"
    same_error "host_key_check=$t: a wrong hash refused as qemu-img does" \
        info -f raw "$(url a.raw)?host_key_check=$t:0123456789abcdef"
done
known hostkey.pub
same_output "info names the host key check as qemu-img does" info -f raw \
    "$(url a.raw)?host_key_check=yes"

# --- authentication by ssh-agent ------------------------------------------
mv "$home/.ssh/id_ed25519" agent_key
eval "$(ssh-agent -s)" >/dev/null
ssh-add -q agent_key 2>/dev/null
check "a key held by ssh-agent logs in" quiet "$qimg" info -f raw \
    "$(url a.raw)"
kill "$SSH_AGENT_PID" 2>/dev/null
unset SSH_AUTH_SOCK SSH_AGENT_PID
same_error "no key at all: QEMU's error" info -f raw "$(url a.raw)"
mv agent_key "$home/.ssh/id_ed25519"

# --- the daemon exports an ssh node over NBD -----------------------------
"$qsd" --blockdev "$opts,node-name=s0" \
    --nbd-server addr.type=unix,addr.path=$work/nbd.sock \
    --export type=nbd,id=e0,node-name=s0,name=s0,writable=on \
    2> qsd.err &
qsd_pid=$!
for i in $(seq 100); do
    [ -S nbd.sock ] && break
    sleep 0.1
done
u="nbd+unix:///s0?socket=$work/nbd.sock"
check "export over NBD: qemu-img compare with the file" quiet timeout 60 \
    qemu-img compare -f raw -F raw "$u" a.raw
check "export over NBD: qemu-io writes through it" quiet timeout 60 \
    qemu-io -f raw -c 'write -P 0x66 4M 1M' -c flush "$u"
check "... and they reach the file" quiet qemu-io -f raw -r \
    -c 'read -P 0x66 4M 1M' a.raw
kill "$qsd_pid"
wait "$qsd_pid"
check "the daemon stops cleanly" [ $? -eq 0 ]
qsd_pid=

# --- the file shrinks under the node --------------------------------------
head -c 64M /dev/urandom > big.raw
cp big.raw shrunk.raw
(sleep 1; truncate -s 1M shrunk.raw) &
shrink_pid=$!
timeout 60 "$qio" -f raw -r -c 'sleep 3000' -c 'read -P 0 32M 16M' \
    -c 'read -P 0 1M 3M' -c 'read -v 1040000 16384' "$(url shrunk.raw)" \
    > shrunk.out 2>&1
rc=$?
wait "$shrink_pid"
tail_ok=$(python3 - big.raw <<'EOF2'
import sys
d = open(sys.argv[1], 'rb').read()[1040000:1048576] + bytes(16384 - 8576)
print(''.join('%02x' % b for b in d))
EOF2
)
got=$(sed -n 's/^[0-9a-f]*:  \(\([0-9a-f][0-9a-f] \)*\).*/\1/p' shrunk.out | tr -d ' \n')
if [ $rc -eq 0 ] && [ "$got" = "$tail_ok" ]; then
    ok "the file shrinks under a reader: zeroes past its new end, no hang"
else
    fail "the file shrinks under a reader: zeroes past its new end, no hang (exit $rc)" \
         "$(grep -v '^[0-9a-f]*: ' shrunk.out | tail -n 5)"
fi

# --- the server dies under a read -----------------------------------------
session_pids() { ps --ppid "$sshd_pid" -o pid= 2>/dev/null; }
start=$(date +%s)
timeout 60 "$qio" -f raw -r -c 'read 0 64M' -c 'read 0 64M' \
    -c 'read 0 64M' -c 'read 0 64M' -c 'read 0 64M' -c 'read 0 64M' \
    "$(url big.raw)" > dying.out 2>&1 &
io_pid=$!
for i in $(seq 100); do
    [ -n "$(session_pids)" ] && break
    sleep 0.05
done
sleep 0.5
for pid in $(session_pids); do
    kill -9 "$pid"
done
wait "$io_pid"
rc=$?
took=$(($(date +%s) - start))
if grep -q 'read failed: Input/output error' dying.out &&
   [ $rc -lt 124 ]; then
    ok "sshd's session killed under a read: EIO (exit $rc, ${took}s)"
else
    fail "sshd's session killed under a read: EIO (exit $rc, ${took}s)" \
         "$(tail -n 5 dying.out)"
fi

# the daemon's ssh node loses its server: requests through the export
# fail, the daemon serves on and stops when asked
"$qsd" --blockdev "$opts,node-name=s0" \
    --nbd-server addr.type=unix,addr.path=$work/nbd2.sock \
    --export type=nbd,id=e0,node-name=s0,name=s0,writable=on \
    2> qsd2.err &
qsd_pid=$!
for i in $(seq 100); do
    [ -S nbd2.sock ] && break
    sleep 0.1
done
u="nbd+unix:///s0?socket=$work/nbd2.sock"
check "export of an ssh node: reads before the server goes" quiet \
    timeout 60 qemu-io -f raw -r -c 'read -P 0x66 4M 1M' "$u"
for pid in $(session_pids); do
    kill -9 "$pid"
done
timeout 60 qemu-io -f raw -c 'read 0 1M' -c 'write 0 64k' "$u" \
    > dead-export.out 2>&1
rc=$?
check "... then reads and writes fail with EIO (exit $rc)" \
    [ $rc -ne 124 -a "$(grep -c 'failed: Input/output error' dead-export.out)" -eq 2 ]
check "... and the daemon still serves: qemu-img info answers" quiet \
    timeout 20 qemu-img info -f raw "$u"
# (its flush at shutdown fails, since a write failed: said, not hidden)
stopped() {
    local i
    kill "$qsd_pid"
    for i in $(seq 100); do
        if ! kill -0 "$qsd_pid" 2>/dev/null; then
            wait "$qsd_pid"
            [ $? -lt 128 ]
            return
        fi
        sleep 0.1
    done
    kill -9 "$qsd_pid"
    return 1
}
check "... and stops when asked, within 10 s" stopped
check "... saying that its last flush failed" quiet \
    grep -q "Failed to flush node 's0' at shutdown: Input/output error" \
    qsd2.err
qsd_pid=

summary
