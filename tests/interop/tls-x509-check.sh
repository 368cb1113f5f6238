#!/usr/bin/env bash
# tls-creds-x509's sanity-check and passwordid, against qemu-storage-daemon:
#
#  - sanity-check (on by default): for each of a server's and a client's
#    certificates made to break one rule (expired, not yet active, a CA,
#    a critical key usage without digital signature, a critical purpose
#    for the other end, signed by another CA, not PEM) and each CA
#    certificate made to break one (expired, not yet active, not a CA, no
#    basic constraints, a critical key usage without certificate signing,
#    not PEM), the message and exit status of both daemons alike; the
#    certificates that pass (non-critical usage and purpose, no key usage,
#    a revoking CRL, two CAs) pass in both; sanity-check=off lets an
#    expired certificate through in both;
#  - passwordid: an encrypted private key (PKCS#8) loads with the secret
#    that holds its password, and fails as QEMU's does without it, with a
#    wrong one or with a secret that does not exist; then our server with
#    that key serves qemu-io over NBD with TLS;
#  - qom-get of each property of tls-creds-x509, -psk and -anon, given
#    and not, the same in both daemons.
#
#   tests/interop/tls-x509-check.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed,
# N skipped"; exits 77 if certtool (gnutls-bin) or qemu-storage-daemon
# is not installed.  The cases that need openssl (a critical purpose, a
# CA without extensions) are skipped, saying why, without it.
set -u
build=${1:?usage: tls-x509-check.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check-lib.bash"
for tool in certtool qemu-storage-daemon qemu-io; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "skip: $tool is not installed (Debian packages gnutls-bin," \
             "qemu-system-common, qemu-utils)"
        exit 77
    fi
done
qsd=$(cd "$build" && pwd)/qblock-storage-daemon
work_dir /tmp/tls-x509-check.XXXXXX
cd "$work" || exit 1
tls_dir=$work
. "$here/nbd-tls-certs.bash"

norm() {
    sed -e "s#$qsd#qemu-storage-daemon#g" \
        -e 's#qblock-storage-daemon#qemu-storage-daemon#g' \
        -e "s#$work#WORK#g"
}

# A validity period in the past and one in the future (certtool dates).
past=('activation_date = "2019-01-01 00:00:00"'
      'expiration_date = "2020-01-01 00:00:00"')
future=('activation_date = "2030-01-01 00:00:00"'
        'expiration_date = "2031-01-01 00:00:00"')
ok_days='expiration_days = 2'

# make_cert DIR ROLE CA TEMPLATE-LINE...: DIR/ROLE-{key,cert}.pem for
# localhost signed by CA, and CA's certificate as DIR/ca-cert.pem
make_cert() {
    local dir=$1 role=$2 ca=$3
    shift 3
    tls_make_cert "$ca" "$dir" "$role" "organization = qblock tests" \
        "cn = localhost" "dns_name = localhost" "$@"
}

# run_daemon BIN DIR ENDPOINT OPTS: BIN's message and exit status
run_daemon() {
    # shellcheck disable=SC2086 # $secret_opt is an option and its value
    timeout 2 "$1" $secret_opt \
        --object "tls-creds-x509,id=t0,endpoint=$3,dir=$2$4" 2>&1 | norm
    echo "exit ${PIPESTATUS[0]}"
}

# x509_case NAME DIR ENDPOINT [OPTIONS]: both daemons (side by side)
# given the credentials in DIR; the same message and exit status.  A
# daemon that accepted them runs until timeout(1) stops it (124).
x509_case() {
    local name=$1 dir=$2 endpoint=$3 opts=${4:+,$4} want got
    run_daemon qemu-storage-daemon "$dir" "$endpoint" "$opts" > want.out &
    got=$(run_daemon "$qsd" "$dir" "$endpoint" "$opts")
    wait $!
    want=$(< want.out)
    if [ "$want" = "$got" ]; then
        ok "$name: $(tail -n 1 <<<"$want")"
    else
        fail "$name" "$(diff <(echo "$want") <(echo "$got"))"
    fi
}
secret_opt=

S="encryption_key signing_key"
if ! { tls_make_ca good &&
       tls_make_ca other &&
       tls_make_ca expired ca cert_signing_key "${past[@]}" &&
       tls_make_ca future ca cert_signing_key "${future[@]}" &&
       tls_make_ca notca cert_signing_key "$ok_days" &&
       tls_make_ca nosign ca signing_key "$ok_days"; }; then
    fail "certtool could not make the CAs"
    summary
    exit 1
fi

for end in server client; do
    www=tls_www_$end
    [ $end = server ] && other=tls_www_client || other=tls_www_server
    d=$work/$end
    if ! { make_cert "$d/ok" $end good $www $S "$ok_days" &&
           make_cert "$d/expired" $end good $www $S "${past[@]}" &&
           make_cert "$d/future" $end good $www $S "${future[@]}" &&
           make_cert "$d/ca" $end good $www $S ca cert_signing_key \
               "$ok_days" &&
           make_cert "$d/no-signature" $end good $www encryption_key \
               "$ok_days" &&
           make_cert "$d/no-encipherment" $end good $www signing_key \
               "$ok_days" &&
           make_cert "$d/no-usage" $end good $www "$ok_days" &&
           make_cert "$d/other-purpose" $end good $other $S "$ok_days" &&
           make_cert "$d/other-ca" $end other $www $S "$ok_days" &&
           make_cert "$d/ca-expired" $end expired $www $S "$ok_days" &&
           make_cert "$d/ca-future" $end future $www $S "$ok_days" &&
           make_cert "$d/ca-not-ca" $end notca $www $S "$ok_days" &&
           make_cert "$d/ca-no-sign" $end nosign $www $S "$ok_days"; }; then
        fail "$end: certtool could not make the certificates"
        continue
    fi
    cp good-ca-cert.pem "$d/other-ca/ca-cert.pem"
    mkdir -p "$d/two-cas" "$d/cas-one-expired" "$d/not-pem" \
        "$d/ca-not-pem" "$d/revoked"
    cp "$d/ok/$end-"*.pem "$d/two-cas/"
    cat other-ca-cert.pem good-ca-cert.pem > "$d/two-cas/ca-cert.pem"
    cp "$d/ok/$end-"*.pem "$d/cas-one-expired/"
    cat expired-ca-cert.pem good-ca-cert.pem \
        > "$d/cas-one-expired/ca-cert.pem"
    cp "$d/ok/"*.pem "$d/not-pem/"
    echo "not a certificate" > "$d/not-pem/$end-cert.pem"
    cp "$d/ok/"*.pem "$d/ca-not-pem/"
    echo "not a certificate" > "$d/ca-not-pem/ca-cert.pem"
    # a CRL that revokes the certificate: the check does not read it
    cp "$d/ok/"*.pem "$d/revoked/"
    echo "$ok_days" > crl.info
    certtool --generate-crl --load-ca-privkey good-ca-key.pem \
        --load-ca-certificate good-ca-cert.pem \
        --load-certificate "$d/ok/$end-cert.pem" --template crl.info \
        --outfile "$d/revoked/ca-crl.pem" >/dev/null 2>&1
    for c in ok expired future ca no-signature no-encipherment no-usage \
             other-purpose other-ca ca-expired ca-future ca-not-ca \
             ca-no-sign two-cas cas-one-expired not-pem ca-not-pem \
             revoked; do
        x509_case "$end: $c" "$d/$c" $end
    done
    x509_case "$end: expired, sanity-check=off" "$d/expired" $end \
        sanity-check=off
done
# a client without a certificate of its own: the CA is still checked
mkdir -p "$work/client/ca-only"
cp expired-ca-cert.pem "$work/client/ca-only/ca-cert.pem"
x509_case "client: an expired CA alone" "$work/client/ca-only" client

# What certtool cannot make: a critical purpose, a CA without extensions.
if ! command -v openssl >/dev/null 2>&1; then
    skip "a critical key purpose; a CA without basic constraints" \
        "openssl is not installed"
else
    for end in server client; do
        [ $end = server ] && eku=clientAuth || eku=serverAuth
        d=$work/$end/critical-purpose
        mkdir -p "$d"
        cp good-ca-cert.pem "$d/ca-cert.pem"
        printf '%s\n' "extendedKeyUsage=critical,$eku" \
            "keyUsage=critical,digitalSignature,keyEncipherment" > "$d/ext"
        openssl req -new -newkey rsa:2048 -nodes -subj /CN=localhost \
            -keyout "$d/$end-key.pem" -out "$d/req.csr" 2>/dev/null &&
        openssl x509 -req -in "$d/req.csr" -CA good-ca-cert.pem \
            -CAkey good-ca-key.pem -CAcreateserial -days 2 \
            -extfile "$d/ext" -out "$d/$end-cert.pem" 2>/dev/null
        x509_case "$end: a critical purpose for the other end" "$d" $end
    done
    # openssl x509 -req adds no extension without -extfile
    d=$work/server/ca-no-extensions
    mkdir -p "$d"
    openssl req -new -newkey rsa:2048 -nodes -subj "/CN=bare CA" \
        -keyout bare-ca-key.pem -out bare-ca.csr 2>/dev/null &&
    openssl x509 -req -in bare-ca.csr -signkey bare-ca-key.pem -days 2 \
        -out "$d/ca-cert.pem" 2>/dev/null &&
    openssl req -new -newkey rsa:2048 -nodes -subj /CN=localhost \
        -keyout "$d/server-key.pem" -out "$d/req.csr" 2>/dev/null &&
    openssl x509 -req -in "$d/req.csr" -CA "$d/ca-cert.pem" \
        -CAkey bare-ca-key.pem -CAcreateserial -days 2 \
        -out "$d/server-cert.pem" 2>/dev/null
    x509_case "server: a CA without basic constraints" "$d" server
fi

# --- passwordid --------------------------------------------------------
d=$work/encrypted
mkdir -p "$d"
printf 'sekrit' > password
printf 'wrong' > wrong-password
cp good-ca-cert.pem "$d/ca-cert.pem"
printf '%s\n' "organization = qblock tests" "cn = localhost" \
    "dns_name = localhost" tls_www_server $S "$ok_days" > "$d/server.info"
if ! { certtool --generate-privkey --pkcs8 --password sekrit \
           --outfile "$d/server-key.pem" >/dev/null 2>&1 &&
       certtool --generate-certificate --load-privkey "$d/server-key.pem" \
           --password sekrit --load-ca-certificate good-ca-cert.pem \
           --load-ca-privkey good-ca-key.pem --template "$d/server.info" \
           --outfile "$d/server-cert.pem" >/dev/null 2>&1 &&
       grep -q "ENCRYPTED PRIVATE KEY" "$d/server-key.pem"; }; then
    fail "certtool could not make an encrypted key"
else
    x509_case "encrypted key, no passwordid" "$d" server
    secret_opt="--object secret,id=pw,file=$work/password"
    x509_case "encrypted key, passwordid" "$d" server passwordid=pw
    x509_case "encrypted key, no such secret" "$d" server passwordid=nope
    secret_opt="--object secret,id=pw,file=$work/wrong-password"
    x509_case "encrypted key, wrong password" "$d" server passwordid=pw
    secret_opt=
    x509_case "plain key, passwordid of no secret" "$work/server/ok" \
        server passwordid=nope

    # The key in use: qemu-io reads through our TLS server.
    mkdir -p client
    cp good-ca-cert.pem client/ca-cert.pem
    qemu-img create -q -f raw disk.raw 1M
    qemu-io -f raw -c 'write -P 0x5a 0 64k' disk.raw > /dev/null
    "$qsd" --object secret,id=pw,file="$work/password" \
        --object "tls-creds-x509,id=t0,endpoint=server,dir=$d,passwordid=pw,verify-peer=off" \
        --blockdev file,node-name=disk,filename="$work/disk.raw" \
        --nbd-server addr.type=unix,addr.path="$work/nbd.sock",tls-creds=t0 \
        --export nbd,id=e0,node-name=disk 2> qsd.err &
    pids+=($!)
    wait_socket nbd.sock $!
    out=$(qemu-io --object "tls-creds-x509,id=c0,endpoint=client,dir=$work/client" \
        --image-opts "driver=nbd,path=$work/nbd.sock,export=disk,tls-creds=c0,tls-hostname=localhost" \
        -r -c 'read -P 0x5a 0 64k' 2>&1)
    if grep -q "read 65536/65536 bytes" <<<"$out"; then
        ok "encrypted key: qemu-io reads over TLS"
    else
        fail "encrypted key: qemu-io reads over TLS" "$out" \
            "$(cat qsd.err)"
    fi
fi

# --- qom-get --------------------------------------------------------------
# qom_session BIN NAME: the replies of BIN to object-add of the three
# kinds of credentials and qom-get of each property
qom_session() {
    local cmds=() o p
    start_qmp_daemon "$1" "$2"
    cmds+=('{"execute": "object-add", "arguments": {"qom-type": "tls-creds-x509", "id": "x", "dir": "'"$work/server/ok"'", "endpoint": "server", "sanity-check": false}}'
           '{"execute": "object-add", "arguments": {"qom-type": "tls-creds-psk", "id": "p", "dir": "'"$work/psk"'", "priority": "NORMAL", "username": "u1"}}'
           '{"execute": "object-add", "arguments": {"qom-type": "tls-creds-psk", "id": "p2", "dir": "'"$work/psk"'", "endpoint": "server"}}'
           '{"execute": "object-add", "arguments": {"qom-type": "tls-creds-anon", "id": "a"}}')
    for o in x p p2 a; do
        for p in endpoint dir verify-peer priority sanity-check passwordid \
                 username; do
            cmds+=('{"execute": "qom-get", "arguments": {"path": "/objects/'$o'", "property": "'$p'"}}')
        done
    done
    $py "$here/qmp-each.py" "$work/$2.sock" "${cmds[@]}" 2>&1 | norm
    kill $daemon_pid
    wait $daemon_pid 2>/dev/null
}
py=/usr/bin/python3
command -v $py >/dev/null || py=python3
mkdir -p psk
if ! command -v psktool >/dev/null 2>&1 ||
        ! psktool -u u1 -p psk/keys.psk >/dev/null 2>&1; then
    skip "qom-get of the credentials" "psktool (gnutls-bin) cannot make keys"
else
    want=$(qom_session qemu-storage-daemon qemu)
    got=$(qom_session "$qsd" ours)
    if [ "$(grep -c '"return"' <<<"$want")" -lt 20 ]; then
        fail "qom-get of the credentials" "qemu-storage-daemon's session:" \
            "$want"
    elif [ "$want" = "$got" ]; then
        ok "qom-get of the credentials' properties"
    else
        fail "qom-get of the credentials' properties" \
            "$(diff <(echo "$want") <(echo "$got"))"
    fi
fi

summary
