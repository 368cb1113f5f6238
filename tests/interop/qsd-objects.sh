#!/usr/bin/env bash
# The user-creatable objects tls-cipher-suites, thread-context and
# pr-manager-helper, and the properties of the others (secrets', TLS
# credentials' and throttle groups' listing, qom-get and the deprecated
# "loaded"; event loops' thread pools), against qemu-storage-daemon (and, where the storage
# daemon never computes what the object is for, qemu-system-x86_64):
#
#  - --object TYPE,help and --object help, output and exit status alike,
#    also before and after an argument that is no option;
#    the same for qemu-io, qemu-nbd and qemu-img, with the type named by
#    qom-type=, unknown, or one the tool is built without (iothread in
#    qemu-io and qemu-img, whose creation fails too);
#  - command-line errors (--object) alike, message for message;
#  - a QMP session run on both daemons (object-add, qom-get of each
#    readable property, qom-set, qom-list, qom-list-properties,
#    qom-list-types, object-del, the errors) with the same replies
#    (thread ids aside);
#  - tls-cipher-suites: the cipher-suite bytes of a dozen GnuTLS priority
#    strings, ours (qom-get cipher-suites) against those qemu-system hands
#    to the firmware (its trace of each suite), and its messages for the
#    strings GnuTLS refuses (qemu-storage-daemon takes any string, never
#    computing the list);
#  - thread-context: the thread's affinity as /proc shows it, in both
#    daemons, after object-add and qom-set;
#  - pr-manager-helper: a real qemu-pr-helper (skipped, saying why, if it
#    does not start here), and fake helpers whose handshake is short or
#    missing; the bytes each daemon answers a helper with; a reconnection
#    after the helper went away and came back (ours: qom-get connected);
#  - thread-pool-min and thread-pool-max of iothread and main-loop: the
#    errors for limits no pool can take (command line and QMP), qom-get
#    and qom-set, and what they do: the workers a daemon's main loop
#    keeps after a write through its pool and the idle timeout, and how
#    many are left at once when qom-set lowers the limits;
#  - secrets, secret_keyring, TLS credentials: the deprecated read-only
#    "loaded" (its type checked in QEMU's order of members, then refused
#    as not writable; read by qom-get), qom-get of a secret's properties
#    (not its data), and qom-list-properties of these types and of
#    throttle-group in QEMU's order;
#  - the same objects on qemu-img's command line (info).
#
#   tests/interop/qsd-objects.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed,
# N skipped"; exits 77 if qemu-storage-daemon is not installed.
set -u
build=${1:?usage: qsd-objects.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
if ! command -v qemu-storage-daemon >/dev/null 2>&1; then
    echo "skip: qemu-storage-daemon is not installed (Debian package" \
         "qemu-system-common)"
    exit 77
fi
qsd=$(cd "$build" && pwd)/qblock-storage-daemon
qimg=$(cd "$build" && pwd)/qblock-img
qio=$(cd "$build" && pwd)/qblock-io
qnbd=$(cd "$build" && pwd)/qblock-nbd
py=/usr/bin/python3
command -v $py >/dev/null || py=python3

work_dir /tmp/qsd-objects.XXXXXX
cd "$work" || exit 1

norm() {
    sed -e "s#$qsd#qemu-storage-daemon#g" \
        -e 's#qblock-storage-daemon#qemu-storage-daemon#g' \
        -e "s#$qimg#qemu-img#g; s#$qio#qemu-io#g; s#$qnbd#qemu-nbd#g" \
        -e 's#qblock-\(img\|io\|nbd\)#qemu-\1#g' \
        -e "s#$work#WORK#g"
}

stop_daemon() {
    kill "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

qmp() { $py "$here/qmp-each.py" "$@"; }

# The replies of a session, a thread id (the one bare number above 99 a
# session returns) made TID, and the types of qom-list-types sorted by
# name (QEMU lists them in the order of a hash table).
norm_qmp() {
    norm | sed -E 's/^\{"return": [0-9]{3,}\}$/{"return": "TID"}/' |
    $py -c '
import json, sys
for line in sys.stdin:
    try:
        r = json.loads(line).get("return")
    except ValueError:
        r = None
    if isinstance(r, list) and r and isinstance(r[0], dict) and \
            "parent" in r[0]:
        line = json.dumps({"return": sorted(r, key=lambda t: t["name"])}) \
            + "\n"
    sys.stdout.write(line)'
}

# qmp_both NAME CMD...: the commands on a fresh daemon of each, the same
# replies.
qmp_both() {
    local name=$1 want got pid
    shift
    start_qmp_daemon qemu-storage-daemon qemu
    pid=$daemon_pid
    want=$(qmp "$work/qemu.sock" "$@" 2>&1 | norm_qmp)
    stop_daemon $pid
    start_qmp_daemon "$qsd" ours
    pid=$daemon_pid
    got=$(qmp "$work/ours.sock" "$@" 2>&1 | norm_qmp)
    stop_daemon $pid
    # a reply for qmp_capabilities and for each command
    if [ "$(grep -c '^{"return\|^{"error' <<<"$want")" -ne $(($# + 1)) ]; then
        fail "$name" "qemu-storage-daemon's session broke off:" "$want"
    elif [ "$want" = "$got" ]; then
        ok "$name"
    else
        fail "$name" "$(diff <(echo "$want") <(echo "$got"))"
    fi
}

add() {     # add TYPE ID JSON-MEMBERS: an object-add command
    echo '{"execute": "object-add", "arguments": {"qom-type": "'"$1"'", "id": "'"$2"'"'"${3:+, $3}"'}}'
}
get() {     # get ID PROPERTY
    echo '{"execute": "qom-get", "arguments": {"path": "/objects/'"$1"'", "property": "'"$2"'"}}'
}
set_() {    # set_ ID PROPERTY JSON-VALUE
    echo '{"execute": "qom-set", "arguments": {"path": "/objects/'"$1"'", "property": "'"$2"'", "value": '"$3"'}}'
}
del() { echo '{"execute": "object-del", "arguments": {"id": "'"$1"'"}}'; }
list() { echo '{"execute": "qom-list", "arguments": {"path": "'"$1"'"}}'; }
props() {
    echo '{"execute": "qom-list-properties", "arguments": {"typename": "'"$1"'"}}'
}
types() {
    echo '{"execute": "qom-list-types", "arguments": {"implements": "'"$1"'", "abstract": true}}'
}

# --- help -------------------------------------------------------------
same_as_qemu "--object help" qemu-storage-daemon --object help
for t in tls-cipher-suites thread-context pr-manager-helper; do
    same_as_qemu "--object $t,help" qemu-storage-daemon --object "$t,help"
done
# An argument that is no option stops the daemon where it stands: what
# came before it is done (help printed, an error reported), what follows
# is not.
for args in "--object help extra" "extra --object help" \
            "--object foo,id=x extra" "extra --object foo,id=x" \
            "--blockdev null-co,node-name=n extra --object help"; do
    # shellcheck disable=SC2086 # the words of $args are the arguments
    same_as_qemu "$args" qemu-storage-daemon $args
done
# The type as keyval reads it; a type this tool is built without (QEMU's
# qemu-io and qemu-img have no iothread class) is left out of the list,
# and creating one fails.
qemu-img create -q -f qcow2 "$work/t.qcow2" 1M
for tool in qemu-io qemu-nbd "qemu-img info" qemu-storage-daemon; do
    for o in help qom-type=secret,help id=x,qom-type=secret,help \
             secret,id=x,help foo,help iothread,help iothread,id=io0 \
             '{"qom-type":"iothread","id":"io0"}'; do
        case "$tool $o" in
        # a server that would start: not the point here
        "qemu-nbd "*io0*|"qemu-storage-daemon "*io0*)
            continue ;;
        esac
        img=$work/t.qcow2
        [ "$tool" = qemu-storage-daemon ] && img=
        # shellcheck disable=SC2086 # $tool is a command and its verb
        same_as_qemu "$tool --object $o" $tool --object "$o" ${img:+"$img"}
    done
done

# --- tls-cipher-suites --------------------------------------------------
same_as_qemu "tls-cipher-suites without priority" qemu-storage-daemon \
    --object tls-cipher-suites,id=c0
same_as_qemu "tls-cipher-suites: an unknown property" qemu-storage-daemon \
    --object tls-cipher-suites,id=c0,priority=NORMAL,username=x
same_as_qemu "tls-cipher-suites: a bad endpoint" qemu-storage-daemon \
    --object tls-cipher-suites,id=c0,priority=NORMAL,endpoint=both
qmp_both "tls-cipher-suites over QMP" \
    "$(add tls-cipher-suites c0 '"priority": "NORMAL"')" \
    "$(get c0 priority)" "$(get c0 dir)" "$(get c0 endpoint)" \
    "$(get c0 verify-peer)" "$(get c0 username)" \
    "$(add tls-cipher-suites c1 '"priority": "SECURE128", "dir": "/nonexistent", "endpoint": "server", "verify-peer": false')" \
    "$(get c1 dir)" "$(get c1 endpoint)" "$(get c1 verify-peer)" \
    "$(set_ c1 priority '"SECURE256"')" "$(get c1 priority)" \
    "$(set_ c1 dir '"/elsewhere"')" "$(get c1 dir)" \
    "$(set_ c1 verify-peer true)" "$(get c1 verify-peer)" \
    "$(set_ c1 endpoint '"both"')" "$(set_ c1 priority 5)" \
    "$(set_ c1 nope 1)" \
    "$(add tls-cipher-suites c2)" \
    "$(add tls-cipher-suites c2 '"priority": 5')" \
    "$(list /objects/c0)" "$(props tls-cipher-suites)" \
    "$(types tls-creds)" "$(types tls-cipher-suites)" \
    "$(del c0)" "$(del c1)" "$(del c0)" "$(list /objects)"

# The suites qemu-system hands the firmware for priority $1 (its trace of
# each suite), as the decimal bytes qom-get gives: "19,2,19,3,...".
qemu_suites() {
    echo quit | timeout 30 qemu-system-x86_64 -M pc -accel tcg -S \
        -nodefaults -display none -monitor stdio \
        -object "tls-cipher-suites,id=t0,priority=$1" \
        -fw_cfg name=etc/edk2/https/ciphers,gen_id=t0 \
        -trace qcrypto_tls_cipher_suite_info 2>&1 |
    sed -n 's/.*data=\[0x\(..\),0x\(..\)\].*/\1 \2/p' |
    while read -r a b; do printf '%d,%d,' "0x$a" "0x$b"; done
}
# qemu-system's message for a priority GnuTLS refuses, after its prefix
qemu_refusal() {
    echo quit | timeout 30 qemu-system-x86_64 -M pc -accel tcg -S \
        -nodefaults -display none -monitor stdio \
        -object "tls-cipher-suites,id=t0,priority=$1" \
        -fw_cfg name=etc/edk2/https/ciphers,gen_id=t0 2>&1 |
    sed -n 's/.*qemu-system-x86_64: -fw_cfg [^ ]*: //p'
}

priorities=(NORMAL SECURE128 SECURE192 SECURE256 PERFORMANCE PFS
            NORMAL:-VERS-TLS1.3 NORMAL:-VERS-ALL:+VERS-TLS1.0
            NORMAL:+ANON-ECDH:+ANON-DH NORMAL:+PSK:+DHE-PSK:+ECDHE-PSK
            NORMAL:-CIPHER-ALL:+CHACHA20-POLY1305:+AES-256-CBC
            NONE:+VERS-TLS1.2:+AES-128-GCM:+AEAD:+ECDHE-RSA:+SIGN-ALL:+GROUP-ALL:+COMP-NULL
            LEGACY)
refused=(@@BOGUS NONE NORMAL:-VERS-ALL NORMAL:%NO_SUCH_FLAG @SYSTEM)
if ! command -v qemu-system-x86_64 >/dev/null 2>&1 ||
   [ -z "$(qemu_suites NORMAL)" ]; then
    skip "cipher-suite lists against qemu-system-x86_64" \
        "it is not installed (Debian qemu-system-x86) or traces nothing"
else
    start_qmp_daemon "$qsd" ours
    pid=$daemon_pid
    for i in "${!priorities[@]}"; do
        want=$(qemu_suites "${priorities[$i]}")
        got=$(qmp "$work/ours.sock" \
                  "$(add tls-cipher-suites s$i '"priority": "'"${priorities[$i]}"'"')" \
                  "$(get s$i cipher-suites)" |
              tail -n 1 | sed -e 's/{"return": \[//' -e 's/\]}//' \
                              -e 's/ //g' -e 's/$/,/')
        if [ -n "$want" ] && [ "$want" = "$got" ]; then
            ok "cipher suites of ${priorities[$i]} ($((${#want} > 0 ?
                $(tr -cd , <<<"$want" | wc -c) / 2 : 0)) suites)"
        else
            fail "cipher suites of ${priorities[$i]}" "qemu: $want" \
                "ours: $got"
        fi
    done
    for p in "${refused[@]}"; do
        want=$(qemu_refusal "$p")
        got=$(qmp "$work/ours.sock" \
                  "$(add tls-cipher-suites r '"priority": "'"$p"'"')" |
              tail -n 1 | sed -n 's/.*"desc": "\(.*\)"}}$/\1/p')
        if [ -n "$want" ] && [ "$want" = "$got" ]; then
            ok "priority $p refused as qemu-system refuses it"
        else
            fail "priority $p refused" "qemu: $want" "ours: $got"
        fi
    done
    # a qom-set that GnuTLS refuses keeps the list it had
    got=$(qmp "$work/ours.sock" "$(add tls-cipher-suites k '"priority": "NONE:+VERS-TLS1.2:+AES-128-GCM:+AEAD:+ECDHE-RSA:+SIGN-ALL:+GROUP-ALL:+COMP-NULL"')" \
              "$(set_ k priority '"@@BOGUS"')" "$(get k cipher-suites)" \
              "$(get k priority)" | tail -n 3)
    if [ "$got" = '{"error": {"class": "GenericError", "desc": "Syntax error using priority '"'@@BOGUS'"': The request is invalid."}}
{"return": [192, 47]}
{"return": "NONE:+VERS-TLS1.2:+AES-128-GCM:+AEAD:+ECDHE-RSA:+SIGN-ALL:+GROUP-ALL:+COMP-NULL"}' ]; then
        ok "a refused qom-set of priority keeps the list"
    else
        fail "a refused qom-set of priority keeps the list" "$got"
    fi
    stop_daemon $pid
fi

# --- thread-context -----------------------------------------------------
ncpus=$(getconf _NPROCESSORS_ONLN)
last=$((ncpus - 1))
for opt in cpu-affinity=0 cpu-affinity.0=4095 cpu-affinity.0=65535 \
           cpu-affinity.0=65536 cpu-affinity.0=-1 cpu-affinity.0=abc \
           cpu-affinity.1=1 node-affinity.0=4096 node-affinity.0=65535 \
           node-affinity.0=0,cpu-affinity.0=0 thread-id=5; do
    same_as_qemu "thread-context,$opt" qemu-storage-daemon --object "thread-context,id=tc0,$opt"
done
for json in '"cpu-affinity": []' '"node-affinity": []' \
            '"cpu-affinity": [4095], "node-affinity": [0]' \
            '"node-affinity": [], "cpu-affinity": [4095]' \
            '"node-affinity": [0], "cpu-affinity": []' \
            '"cpu-affinity": ["a"]' '"cpu-affinity": 5' \
            '"cpu-affinity": [0, 70000]'; do
    same_as_qemu "thread-context {$json}" qemu-storage-daemon \
        --object '{"qom-type": "thread-context", "id": "tc0", '"$json"'}'
done
qmp_both "thread-context over QMP" \
    "$(add thread-context tc0 '"cpu-affinity": ['$last']')" \
    "$(get tc0 thread-id)" "$(get tc0 cpu-affinity)" \
    "$(get tc0 node-affinity)" "$(list /objects/tc0)" \
    "$(set_ tc0 cpu-affinity '[0]')" "$(get tc0 cpu-affinity)" \
    "$(set_ tc0 thread-id 5)" "$(set_ tc0 cpu-affinity '[70000]')" \
    "$(set_ tc0 cpu-affinity '["x"]')" "$(set_ tc0 cpu-affinity '[]')" \
    "$(set_ tc0 cpu-affinity '[4095]')" "$(get tc0 cpu-affinity)" \
    "$(set_ tc0 node-affinity '[]')" "$(set_ tc0 node-affinity '[0]')" \
    "$(get tc0 cpu-affinity)" "$(set_ tc0 node-affinity '[4096]')" \
    "$(add thread-context tc1)" "$(get tc1 cpu-affinity)" \
    "$(add thread-context tc2 '"node-affinity": [0]')" \
    "$(get tc2 cpu-affinity)" \
    "$(props thread-context)" "$(types thread-context)" \
    "$(del tc0)" "$(del tc1)" "$(del tc2)" "$(list /objects)"

# The Cpus_allowed_list of thread-context tc0's thread in daemon $1 (the
# pid) at QMP socket $2, after the commands that follow.
thread_cpus() {
    local pid=$1 sock=$2 tid
    shift 2
    tid=$(qmp "$sock" "$@" "$(get tc0 thread-id)" | tail -n 1 |
          sed -n 's/{"return": \([0-9]*\)}/\1/p')
    [ -n "$tid" ] &&
        sed -n 's/^Cpus_allowed_list:\s*//p' /proc/$pid/task/$tid/status
}
if [ "$ncpus" -lt 2 ]; then
    skip "thread-context affinity in /proc" "one CPU online: nothing to pin"
else
    for bin in qemu-storage-daemon "$qsd"; do
        start_qmp_daemon "$bin" aff
        pid=$daemon_pid
        a=$(thread_cpus $pid "$work/aff.sock" \
                "$(add thread-context tc0 '"cpu-affinity": ['$last']')")
        b=$(thread_cpus $pid "$work/aff.sock" \
                "$(set_ tc0 cpu-affinity '[0]')")
        c=$(thread_cpus $pid "$work/aff.sock" \
                "$(set_ tc0 node-affinity '[0]')")
        # the thread lives until object-del
        tid=$(qmp "$work/aff.sock" "$(get tc0 thread-id)" | tail -n 1 |
              sed -n 's/{"return": \([0-9]*\)}/\1/p')
        qmp "$work/aff.sock" "$(del tc0)" >/dev/null
        sleep 0.2
        gone=yes
        [ -n "$tid" ] && [ -e /proc/$pid/task/$tid ] && gone=no
        stop_daemon $pid
        node0=$(cat /sys/devices/system/node/node0/cpulist 2>/dev/null)
        if [ "$a" = "$last" ] && [ "$b" = 0 ] && [ "$c" = "$node0" ] &&
           [ -n "$tid" ] && [ $gone = yes ]; then
            ok "$(basename "$bin"): the thread's affinity in /proc ($a, $b, node 0: $c), gone after object-del"
        else
            fail "$(basename "$bin"): the thread's affinity in /proc" \
                "after add: $a (want $last)" "after qom-set: $b (want 0)" \
                "after node-affinity: $c (want $node0)" "gone: $gone"
        fi
    done
fi

# --- pr-manager-helper ---------------------------------------------------
touch "$work/plain"
long=$work/$(printf 'x%.0s' $(seq 110))
for opt in "" ",path=$work/nosock" ",path=$work/plain" ",path=$long" \
           ",path=" ",path=$work/pr.sock,verbose=on"; do
    same_as_qemu "pr-manager-helper${opt:-, no path}" qemu-storage-daemon \
        --object "pr-manager-helper,id=pr0$opt"
done

# A fake helper at $work/fake.sock that sends the hex bytes $1 to each
# client, then logs what the client sent (hex) to $work/fake.log.
start_fake() {
    rm -f "$work/fake.sock" "$work/fake.log"
    $py - "$work/fake.sock" "$1" > "$work/fake.log" 2>&1 <<'EOF' &
import socket, sys, time
l = socket.socket(socket.AF_UNIX)
l.bind(sys.argv[1])
l.listen(5)
while True:
    c, _ = l.accept()
    c.sendall(bytes.fromhex(sys.argv[2]))
    if len(sys.argv[2]) < 8:
        # less than the four bytes of features: the client waits for more
        print('-', flush=True)
        c.close()
        continue
    c.settimeout(1)
    got = b''
    try:
        while len(got) < 4:
            d = c.recv(4 - len(got))
            if not d:
                break
            got += d
    except OSError:
        pass
    print(got.hex() or '-', flush=True)
    time.sleep(0.2)
    c.close()
EOF
    fake_pid=$!
    pids+=($fake_pid)
    for i in $(seq 50); do
        [ -S "$work/fake.sock" ] && return
        sleep 0.1
    done
}

# first_two_seconds CMD...: CMD's output (normalised) and "exit N", or
# "running" when it still ran after two seconds; then it is stopped with
# SIGTERM alone (timeout(1) would follow it with a SIGCONT, which can
# stall LeakSanitizer's exit check in an ASan build), and with SIGKILL
# if it has not exited 20 s later.
first_two_seconds() {
    local pid status i
    "$@" > "$work/two.out" 2>&1 &
    pid=$!
    sleep 2
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for ((i = 0; i < 200; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        status=running
    else
        wait "$pid"
        status="exit $?"
    fi
    norm < "$work/two.out"
    echo "$status"
}

# A successful creation leaves the daemon running: judged by its first
# two seconds (still running, nothing on stderr) and by the helper's log.
fake_case() {
    local name=$1 bytes=$2 bin out log want=
    for bin in qemu-storage-daemon "$qsd"; do
        start_fake "$bytes"
        out=$(first_two_seconds "$bin" --object \
                  "pr-manager-helper,id=pr0,path=$work/fake.sock")
        sleep 0.3
        log=$(cat "$work/fake.log")
        kill $fake_pid 2>/dev/null
        wait $fake_pid 2>/dev/null
        if [ -z "$want" ]; then
            want="$out / helper got $log"
        fi
    done
    if [ "$want" = "$out / helper got $log" ]; then
        ok "$name ($(tr '\n' ' ' <<<"$want"))"
    else
        fail "$name" "qemu: $want" "ours: $out / helper got $log"
    fi
}
fake_case "a helper that closes at once" ""
fake_case "a helper with half a handshake" "0000"
fake_case "a helper with no features" "00000000"
fake_case "a helper with a feature neither knows" "00000001"

if ! command -v qemu-pr-helper >/dev/null 2>&1; then
    skip "pr-manager-helper with qemu-pr-helper" \
        "it is not installed (Debian qemu-system-common)"
else
    start_helper() {
        rm -f "$work/pr.sock"
        qemu-pr-helper -k "$work/pr.sock" > "$work/pr.log" 2>&1 &
        helper_pid=$!
        pids+=($helper_pid)
        for i in $(seq 50); do
            [ -S "$work/pr.sock" ] && return 0
            kill -0 $helper_pid 2>/dev/null || return 1
            sleep 0.1
        done
        return 1
    }
    if ! start_helper; then
        skip "pr-manager-helper with qemu-pr-helper" \
            "it did not start here: $(head -c 300 "$work/pr.log")"
    else
        qmp_both "pr-manager-helper over QMP, a real qemu-pr-helper" \
            "$(add pr-manager-helper pr0 '"path": "'"$work/pr.sock"'"')" \
            "$(get pr0 path)" "$(list /objects/pr0)" \
            "$(set_ pr0 path 5)" "$(set_ pr0 path '"'"$work/pr2.sock"'"')" \
            "$(get pr0 path)" "$(set_ pr0 nope 1)" \
            "$(add pr-manager-helper pr1 '"path": "'"$work/nosock"'"')" \
            "$(add pr-manager-helper pr1)" \
            "$(props pr-manager-helper)" "$(types pr-manager)" \
            "$(del pr0)" "$(list /objects)"
        # ours: connected, then not while the helper is away, then
        # connected again (a new connection) once it is back
        start_qmp_daemon "$qsd" ours
        pid=$daemon_pid
        a=$(qmp "$work/ours.sock" \
                "$(add pr-manager-helper pr0 '"path": "'"$work/pr.sock"'"')" \
                "$(get pr0 connected)" | tail -n 1)
        kill $helper_pid
        wait $helper_pid 2>/dev/null
        b=$(qmp "$work/ours.sock" "$(get pr0 connected)" | tail -n 1)
        start_helper
        c=$(qmp "$work/ours.sock" "$(get pr0 connected)" \
                "$(get pr0 connected)" | tail -n 2 | tr '\n' ' ')
        stop_daemon $pid
        if [ "$a" = '{"return": true}' ] && [ "$b" = '{"return": false}' ] &&
           [ "$c" = '{"return": true} {"return": true} ' ]; then
            ok "pr-manager-helper reconnects when qemu-pr-helper comes back"
        else
            fail "pr-manager-helper reconnects" "first: $a" \
                "helper away: $b" "helper back: $c"
        fi
    fi
fi

# --- thread-pool-min and thread-pool-max (iothread, main-loop) ---------
for t in iothread main-loop; do
    for o in thread-pool-max=0 thread-pool-min=5,thread-pool-max=4 \
             thread-pool-min=-1 thread-pool-max=-1 \
             thread-pool-max=2147483648 thread-pool-min=x; do
        same_as_qemu "$t,$o" qemu-storage-daemon --object "$t,id=o0,$o"
    done
done
# A refused qom-set last for each object: QEMU keeps the refused value
# (qom-get shows it, the pool does not have it), qblock the one before.
qmp_both "thread pool limits over QMP" \
    "$(add iothread io0 '"thread-pool-min": 2, "thread-pool-max": 8')" \
    "$(get io0 thread-pool-min)" "$(get io0 thread-pool-max)" \
    "$(set_ io0 thread-pool-max 3)" "$(get io0 thread-pool-max)" \
    "$(set_ io0 thread-pool-min 3)" "$(get io0 thread-pool-min)" \
    "$(set_ io0 thread-pool-min -1)" "$(set_ io0 thread-pool-max '"x"')" \
    "$(set_ io0 thread-pool-min 4)" "$(list /objects/io0)" \
    "$(props iothread)" \
    "$(add iothread io1 '"thread-pool-min": 3, "thread-pool-max": 2')" \
    "$(add iothread io1 '"thread-pool-max": 0')" \
    "$(add main-loop m0 '"thread-pool-max": 2')" \
    "$(get m0 thread-pool-min)" "$(get m0 thread-pool-max)" \
    "$(set_ m0 thread-pool-max 1)" "$(set_ m0 thread-pool-max 2147483648)" \
    "$(del io0)"

# pool_threads BIN NAME: how many threads daemon BIN has more than at its
# start, whose main loop keeps 4 workers (main-loop thread-pool-min=4):
# 11 s after a write and a flush through a file node with aio=threads
# (past the 10 s idle timeout, so what is left is the minimum), then a
# second after qom-set lowered the limits to 0 and 1 (the idle workers
# above the maximum exit at once).  Written to $work/NAME.threads.
pool_threads() {
    local bin=$1 name=$2 pid base after lowered
    qemu-img create -q -f raw "$work/$name.img" 1M
    start_qmp_daemon "$bin" "$name" \
        --object main-loop,id=ml,thread-pool-min=4 \
        --blockdev file,node-name=f,filename="$work/$name.img",aio=threads \
        --nbd-server addr.type=unix,addr.path="$work/$name.nbd" \
        --export nbd,id=e,node-name=f,writable=on
    pid=$daemon_pid
    wait_socket "$work/$name.nbd" $pid
    base=$(ls "/proc/$pid/task" | wc -l)
    qemu-io -f raw -c 'write 0 64k' -c flush \
        "nbd+unix:///f?socket=$work/$name.nbd" > /dev/null
    sleep 11
    after=$(($(ls "/proc/$pid/task" | wc -l) - base))
    qmp "$work/$name.sock" "$(set_ ml thread-pool-min 0)" \
        "$(set_ ml thread-pool-max 1)" > /dev/null
    sleep 1
    lowered=$(($(ls "/proc/$pid/task" | wc -l) - base))
    stop_daemon $pid
    echo "$after workers kept, $lowered after lowering" > "$work/$name.threads"
}
pool_threads qemu-storage-daemon qemu &
qemu_job=$!
pool_threads "$qsd" ours &
wait $qemu_job $!
want=$(cat "$work/qemu.threads")
got=$(cat "$work/ours.threads")
if [ "$want" = "$got" ] && [ "$got" = "4 workers kept, 1 after lowering" ]; then
    ok "thread-pool-min: $got"
else
    fail "thread-pool-min" "qemu: $want" "ours: $got"
fi

# --- secrets' and TLS credentials' properties (loaded) ---------------
# QEMU's deprecated read-only "loaded": its type is checked with the other
# members, in QEMU's order, then giving it is refused; qom-get reads it.
for o in secret,help secret_keyring,help tls-creds-psk,help \
         secret,id=s0,loaded=bogus,format=bogus \
         secret,id=s0,loaded=on,data=x,file=y secret_keyring,id=s0,loaded=on \
         secret_keyring,id=s0,serial=x,format=bogus \
         tls-creds-x509,id=t0,loaded=bogus,sanity-check=bogus \
         tls-creds-x509,id=t0,endpoint=bogus,verify-peer=bogus \
         tls-creds-anon,id=t0,loaded=off \
         tls-cipher-suites,id=c0,endpoint=bogus,verify-peer=bogus; do
    same_as_qemu "--object $o" qemu-storage-daemon --object "$o"
done
printf 'abcdefghijklmnop' | base64 | tr -d '\n' > "$work/secret.b64"
secret_props=()
for p in loaded format keyid iv file serial type; do
    secret_props+=("$(get s0 $p)" "$(get s2 $p)")
done
# qom-get of a secret's data is the one difference, deliberate: QEMU
# shows it to every client, qblock says it is not readable
qmp_both "secrets' and TLS credentials' properties over QMP" \
    "$(add secret s0 '"data": "x"')" \
    "$(add secret s1 '"data": "12345678901234567890123456789012"')" \
    "$(add secret s2 '"file": "'"$work/secret.b64"'", "format": "base64", "keyid": "s1", "iv": "AAAAAAAAAAAAAAAAAAAAAA=="')" \
    "$(add secret s0 '"data": "x", "loaded": true')" \
    "$(add secret 9s '"data": "x", "loaded": true')" \
    "$(add secret s3 '"data": "x", "loaded": false')" \
    "$(add secret s3 '"data": "x", "loaded": "x"')" \
    "$(add secret s3 '"data": "x", "loaded": true, "format": "bogus"')" \
    "$(add secret_keyring k0 '"loaded": true')" \
    "$(add secret_keyring k0 '"loaded": true, "serial": 1')" \
    "$(add tls-creds-anon t0 '"loaded": true')" \
    "$(add tls-creds-anon t1)" "$(get t1 loaded)" "$(list /objects/t1)" \
    "$(set_ s0 loaded true)" "$(set_ t1 loaded false)" \
    "$(list /objects/s0)" "${secret_props[@]}" \
    "$(props secret)" "$(props secret_keyring)" "$(props tls-creds-x509)" \
    "$(props tls-creds-psk)" "$(props tls-creds-anon)" \
    "$(props throttle-group)"

# --- the other tools: qemu-img's --object takes the same types ---------
if ! command -v qemu-img >/dev/null 2>&1; then
    skip "the objects in qemu-img" "it is not installed (Debian qemu-utils)"
else
    qemu-img create -q -f raw "$work/disk.raw" 1M
    for o in thread-context,id=t0,cpu-affinity.0=0 \
             thread-context,id=t0,cpu-affinity.0=4095 \
             "pr-manager-helper,id=p0,path=$work/nosock" \
             tls-cipher-suites,id=c0,priority=NORMAL \
             tls-cipher-suites,id=c0; do
        want=$(qemu-img info --object "$o" "$work/disk.raw" 2>&1 | norm
               echo "exit ${PIPESTATUS[0]}")
        got=$("$qimg" info --object "$o" "$work/disk.raw" 2>&1 | norm |
              sed "s#$qimg#qemu-img#g; s#qblock-img#qemu-img#g"
              echo "exit ${PIPESTATUS[0]}")
        if [ "$want" = "$got" ]; then
            ok "qemu-img info --object ${o%%,*}: $(tail -n 1 <<<"$want")"
        else
            fail "qemu-img info --object $o" \
                "$(diff <(echo "$want") <(echo "$got"))"
        fi
    done
fi

summary
