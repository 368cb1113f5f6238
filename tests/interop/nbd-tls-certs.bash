# Shared by tests/interop/nbd-tls.sh (sourced): makes TLS credentials
# with GnuTLS's certtool and psktool, in QEMU's directory layout.
#
#   tls_make_ca NAME                  $tls_dir/NAME-ca-{key,cert}.pem
#   tls_make_creds CA DIR CN ROLE     DIR/ca-cert.pem and DIR/ROLE-{cert,key}.pem
#                                     (ROLE: server or client), signed by CA
#   tls_make_psk DIR USER             DIR/keys.psk with a random key for USER
#
# Before sourcing: tls_dir=FOLDER.

tls_make_ca() {
    cat > "$tls_dir/$1-ca.info" <<EOT
cn = qblock test CA $1
ca
cert_signing_key
expiration_days = 2
EOT
    certtool --generate-privkey --outfile "$tls_dir/$1-ca-key.pem" \
        >/dev/null 2>&1 &&
    certtool --generate-self-signed --load-privkey "$tls_dir/$1-ca-key.pem" \
        --template "$tls_dir/$1-ca.info" \
        --outfile "$tls_dir/$1-ca-cert.pem" >/dev/null 2>&1
}

tls_make_creds() {
    local ca=$1 dir=$2 cn=$3 role=$4 usage=tls_www_server
    [ "$role" = client ] && usage=tls_www_client
    mkdir -p "$dir"
    cat > "$dir/$role.info" <<EOT
organization = qblock tests
cn = $cn
dns_name = $cn
ip_address = 127.0.0.1
$usage
encryption_key
signing_key
expiration_days = 2
EOT
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
