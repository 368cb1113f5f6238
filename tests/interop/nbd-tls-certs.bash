# Shared by the TLS tests of tests/interop (sourced): makes TLS credentials
# with GnuTLS's certtool and psktool, in QEMU's directory layout.
#
#   tls_make_ca NAME [LINE...]        $tls_dir/NAME-ca-{key,cert}.pem, a CA
#                                     for two days, or with the certtool
#                                     template LINEs after its name
#   tls_make_creds CA DIR CN ROLE     DIR/ca-cert.pem and DIR/ROLE-{cert,key}.pem
#                                     (ROLE: server or client), signed by CA
#   tls_make_cert CA DIR ROLE LINE... the same with the template LINEs
#   tls_make_psk DIR USER             DIR/keys.psk with a random key for USER
#
# Before sourcing: tls_dir=FOLDER.

tls_make_ca() {
    local name=$1
    shift
    [ $# -eq 0 ] && set -- ca cert_signing_key "expiration_days = 2"
    printf '%s\n' "cn = qblock test CA $name" "$@" > "$tls_dir/$name-ca.info"
    certtool --generate-privkey --outfile "$tls_dir/$name-ca-key.pem" \
        >/dev/null 2>&1 &&
    certtool --generate-self-signed \
        --load-privkey "$tls_dir/$name-ca-key.pem" \
        --template "$tls_dir/$name-ca.info" \
        --outfile "$tls_dir/$name-ca-cert.pem" >/dev/null 2>&1
}

tls_make_creds() {
    local usage=tls_www_server
    [ "$4" = client ] && usage=tls_www_client
    tls_make_cert "$1" "$2" "$4" "organization = qblock tests" "cn = $3" \
        "dns_name = $3" "ip_address = 127.0.0.1" $usage encryption_key \
        signing_key "expiration_days = 2"
}

tls_make_cert() {
    local ca=$1 dir=$2 role=$3
    shift 3
    mkdir -p "$dir"
    printf '%s\n' "$@" > "$dir/$role.info"
    cp "$tls_dir/$ca-ca-cert.pem" "$dir/ca-cert.pem"
    certtool --generate-privkey --outfile "$dir/$role-key.pem" \
        >/dev/null 2>&1 &&
    certtool --generate-certificate --load-privkey "$dir/$role-key.pem" \
        --load-ca-certificate "$tls_dir/$ca-ca-cert.pem" \
        --load-ca-privkey "$tls_dir/$ca-ca-key.pem" \
        --template "$dir/$role.info" --outfile "$dir/$role-cert.pem" \
        >/dev/null 2>&1
}

tls_make_psk() {
    mkdir -p "$1"
    psktool -u "$2" -p "$1/keys.psk" >/dev/null 2>&1
}
