#!/usr/bin/env bash
# NBD over TLS (STARTTLS), both ways, with the real QEMU tools as the
# oracle: x509 credentials made by certtool and pre-shared keys made by
# psktool, in QEMU's directory layout.
#
#  - qemu-nbd --tls-creds serving qblock-io/qblock-img (our client), and
#    qblock-nbd --tls-creds serving qemu-io/qemu-img and our client: the
#    same output and data as qemu-io/qemu-img give;
#  - the refusals, each with QEMU's message (compared with qemu-img's
#    against the same server): a TLS client and a plain server, a plain
#    client and a TLS server, a certificate of an unknown CA, a server
#    name the certificate does not carry, a unix socket without
#    tls-hostname, a wrong pre-shared key;
#  - --tls-authz with an authz-list object: rules in order, exact and
#    glob;
#  - --tls-authz with an authz-simple object: the client it names gets
#    in, another of the same CA does not;
#  - qblock-nbd --list over TLS, and its refusals, as qemu-nbd --list;
#  - qblock-storage-daemon's --nbd-server tls-creds=.
#
#   tests/interop/nbd-tls.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed,
# N skipped"; exits 77 if certtool/psktool (gnutls-bin) or the QEMU
# tools are not installed.
set -u
build=${1:?usage: nbd-tls.sh BUILD_DIR}
source "$(dirname "$0")/nbd-lib.bash"
for tool in certtool psktool; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "skip: $tool is not installed (Debian package gnutls-bin)"
        exit 77
    fi
done

cd "$work" || exit 1

tls_dir=$work/tls
mkdir -p "$tls_dir"
source "$here/nbd-tls-certs.bash"
if ! { tls_make_ca ca1 && tls_make_ca ca2 &&
       tls_make_creds ca1 "$tls_dir/server" localhost server &&
       tls_make_creds ca1 "$tls_dir/client1" client1 client &&
       tls_make_creds ca2 "$tls_dir/client2" client2 client &&
       tls_make_creds ca1 "$tls_dir/client3" client3 client &&
       tls_make_psk "$tls_dir/psk1" user1 &&
       tls_make_psk "$tls_dir/psk2" user1; }; then
    fail "certtool/psktool could not make the credentials"
    summary
    exit 1
fi

norm() {
    sed -e "s#$qimg#qemu-img#g" -e "s#$qio#qemu-io#g" \
        -e "s#$qnbd#qemu-nbd#g" -e 's#qblock-nbd#qemu-nbd#g' \
        -e 's#qblock-img#qemu-img#g' -e 's#qblock-io#qemu-io#g' \
        -e "s#$work#WORK#g" -e '/ ops; /d' -e 's#:[0-9]\{4,5\}\([/,]\)#:PORT\1#g'
}

# authz_case NAME OBJECT: $server (run as $prog) with --tls-authz the
# authorization OBJECT (id authz0), which must let client1 in and keep
# client3 (same CA) out: the real clients and ours alike, and the real
# qemu-io reading as client1 and refused as client3 (what "same" alone
# would not see: both clients getting in alike would pass it).
authz_case() {
    local name=$1 object=$2 tcp
    cp src.raw exp.raw
    start_tcp "$server-$name" "$prog" -t -f raw \
        --object "$(x509 server server verify-peer=on)" --object "$object" \
        --tls-authz authz0 --tls-creds tls0 exp.raw ||
        { fail "$server: start with $name"; return; }
    tcp="driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=$port"
    same_as_qemu "$server: $name lets client1 in" qemu-io --image-opts \
        --object "$(x509 client1 client)" -c 'read -P 1 0 64k' \
        "$tcp,tls-creds=tls0"
    same_as_qemu "$server: $name keeps client3 out" qemu-img info --image-opts \
        --object "$(x509 client3 client)" "$tcp,tls-creds=tls0"
    check "$server: $name: client1 reads" quiet qemu-io --image-opts \
        --object "$(x509 client1 client)" -c 'read -P 1 0 64k' \
        "$tcp,tls-creds=tls0"
    check "$server: $name: client3 is refused" eval '! quiet qemu-img info \
        --image-opts --object "$(x509 client3 client)" "$tcp,tls-creds=tls0"'
    stop_server
}

# A free TCP port for a server, from the kernel's ephemeral range.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_tcp NAME PROG ARGS...: the server on 127.0.0.1:$port.
start_tcp() {
    local name=$1 prog=$2 i
    shift 2
    port=$(free_port)
    "$prog" -b 127.0.0.1 -p "$port" "$@" 2> "$work/$name.err" &
    server_pid=$!
    pids+=("$server_pid")
    for i in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "server $name did not start:" >&2
    cat "$work/$name.err" >&2
    return 1
}

x509() {    # x509 DIR ENDPOINT [MORE]: an --object argument
    echo "tls-creds-x509,id=tls0,dir=$tls_dir/$1,endpoint=$2${3:+,$3}"
}
psk() {     # psk DIR ENDPOINT [MORE]
    echo "tls-creds-psk,id=tls0,dir=$tls_dir/$1,endpoint=$2${3:+,$3}"
}

qemu-img create -q -f raw src.raw 4M
qemu-io -f raw -c 'write -P 1 0 1M' src.raw >/dev/null
# (one aio request at a time: the order of completions is the server's)
io=(-c 'read -P 1 0 1M' -c 'write -P 2 1M 64k' -c 'aio_write -P 3 2M 64k'
    -c 'aio_flush' -c 'write -z 3M 64k' -c 'read -P 2 1M 64k'
    -c 'read -P 3 2M 64k' -c 'read -P 0 3M 64k')

for server in qemu-nbd qblock-nbd; do
    prog=$server
    [ $server = qblock-nbd ] && prog=$qnbd

    # x509 over TCP: the certificate names localhost and 127.0.0.1
    cp src.raw exp.raw
    start_tcp $server "$prog" -t -f raw --object "$(x509 server server)" \
        --tls-creds tls0 exp.raw || { fail "$server: start"; continue; }
    tcp="driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=$port"
    same_as_qemu "$server: x509: I/O" qemu-io --image-opts \
        --object "$(x509 client1 client)" "${io[@]}" "$tcp,tls-creds=tls0"
    same_as_qemu "$server: x509: info by host name" qemu-img info --image-opts \
        --object "$(x509 client1 client)" \
        "driver=nbd,server.type=inet,server.host=localhost,server.port=$port,tls-creds=tls0"
    same_as_qemu "$server: x509: convert" qemu-img convert -O raw --image-opts \
        --object "$(x509 client1 client)" "$tcp,tls-creds=tls0" \
        "$work/copy-$server.raw"
    same_as_qemu "$server: plain client, TLS server" qemu-img info \
        "nbd://127.0.0.1:$port"
    same_as_qemu "$server: certificate of an unknown CA" qemu-img info \
        --image-opts --object "$(x509 client2 client)" "$tcp,tls-creds=tls0"
    same_as_qemu "$server: name not on the certificate" qemu-img info \
        --image-opts --object "$(x509 client1 client)" \
        "$tcp,tls-creds=tls0,tls-hostname=other.example"
    same_as_qemu "$server: server credentials on the client" qemu-img info \
        --image-opts --object "$(x509 server server)" "$tcp,tls-creds=tls0"
    same_as_qemu "$server: --list over TLS" qemu-nbd -L -b 127.0.0.1 -p $port \
        --object "$(x509 client1 client)" --tls-creds tls0
    same_as_qemu "$server: --list over TLS, name not on the certificate" qemu-nbd \
        -L -b 127.0.0.1 -p $port --object "$(x509 client1 client)" \
        --tls-creds tls0 --tls-hostname other.example
    same_as_qemu "$server: --list without TLS" qemu-nbd -L -b 127.0.0.1 -p $port
    stop_server

    # --tls-authz: client1's name (as GnuTLS writes a certificate's DN) is
    # let in, client3's (signed by the same CA) is not
    authz_case authz-simple \
        "authz-simple,id=authz0,identity=O=qblock tests,,CN=client1"
    # an authz-list: the first rule that matches decides (client3 is
    # denied by name, everyone else of the CA allowed by a glob), then the
    # list's policy (deny)
    authz_case authz-list \
        "authz-list,id=authz0,policy=deny,rules.0.match=O=qblock tests,,CN=client3,rules.0.policy=deny,rules.1.match=O=qblock tests,,CN=*,rules.1.policy=allow,rules.1.format=glob"

    # x509 over a unix socket: no host name unless tls-hostname gives one
    cp src.raw exp.raw
    start_server $server "$prog" -t -f raw --object "$(x509 server server)" \
        --tls-creds tls0 exp.raw
    unix="driver=nbd,server.type=unix,server.path=$work/$server.sock"
    same_as_qemu "$server: unix socket without tls-hostname" qemu-img info \
        --image-opts --object "$(x509 client1 client)" "$unix,tls-creds=tls0"
    same_as_qemu "$server: unix socket with tls-hostname" qemu-io --image-opts \
        --object "$(x509 client1 client)" -c 'read -P 1 0 64k' \
        "$unix,tls-creds=tls0,tls-hostname=localhost"
    stop_server

    # PSK over a unix socket
    cp src.raw exp.raw
    start_server $server "$prog" -t -f raw --object "$(psk psk1 server)" \
        --tls-creds tls0 exp.raw
    same_as_qemu "$server: psk: I/O" qemu-io --image-opts \
        --object "$(psk psk1 client username=user1)" "${io[@]}" \
        "$unix,tls-creds=tls0"
    same_as_qemu "$server: psk: wrong key" qemu-img info --image-opts \
        --object "$(psk psk2 client username=user1)" "$unix,tls-creds=tls0"
    stop_server

    # TLS client, plain server
    cp src.raw exp.raw
    start_server $server "$prog" -t -f raw exp.raw
    same_as_qemu "$server: TLS client, plain server" qemu-img info --image-opts \
        --object "$(x509 client1 client)" \
        "$unix,tls-creds=tls0,tls-hostname=localhost"
    same_as_qemu "$server: --list with TLS, plain server" qemu-nbd -L \
        -k "$work/$server.sock" --object "$(x509 client1 client)" \
        --tls-creds tls0 --tls-hostname localhost
    stop_server
done

# The data a TLS client wrote reached the image (our client, our server)
cp src.raw exp.raw
start_server data "$qnbd" -t -f raw --object "$(x509 server server)" \
    --tls-creds tls0 exp.raw
timeout 60 "$qio" --image-opts --object "$(x509 client1 client)" \
    "${io[@]}" "driver=nbd,server.type=unix,server.path=$work/data.sock,tls-creds=tls0,tls-hostname=localhost" \
    >/dev/null 2>&1
stop_server
cp src.raw ref.raw
qemu-io -f raw "${io[@]}" ref.raw >/dev/null 2>&1
check "qblock-io over TLS to qblock-nbd: data as on a local copy" \
    cmp exp.raw ref.raw

# The storage daemon's NBD server with TLS, read by qemu-io
cp src.raw exp.raw
rm -f "$work/qsd.sock"
"$qsd" --object "$(x509 server server)" \
    --blockdev driver=file,node-name=f,filename="$work/exp.raw" \
    --nbd-server addr.type=unix,addr.path="$work/qsd.sock",tls-creds=tls0 \
    --export type=nbd,id=e,node-name=f,name=exp 2> qsd.err &
qsd_pid=$!
pids+=($qsd_pid)
if wait_socket "$work/qsd.sock" $qsd_pid &&
   qemu-io -r --image-opts --object "$(x509 client1 client)" \
       -c 'read -P 1 0 1M' \
       "driver=nbd,server.type=unix,server.path=$work/qsd.sock,export=exp,tls-creds=tls0,tls-hostname=localhost" \
       >qsd.out 2>&1 &&
   ! qemu-io -r -f raw -c 'read 0 4k' \
       "nbd+unix:///exp?socket=$work/qsd.sock" >>qsd.out 2>&1; then
    ok "qblock-storage-daemon --nbd-server tls-creds"
else
    fail "qblock-storage-daemon --nbd-server tls-creds" "$(cat qsd.out qsd.err)"
fi
kill $qsd_pid 2>/dev/null

summary
