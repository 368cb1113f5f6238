#!/usr/bin/env bash
# Prefetch through the NBD client: an NBD_CMD_CACHE that reaches
# qblock-nbd is a prefetch of its export (BDRV_REQ_PREFETCH); where that
# export is itself the nbd driver of a server that advertises
# NBD_FLAG_SEND_CACHE, the prefetch goes on as NBD_CMD_CACHE (no data
# crosses the network), and the server behind must see exactly the
# CACHE requests the client sent, and no READ.  Behind: qemu-nbd (its
# request trace counts them), then qblock-nbd (its I/O statistics: a
# cache is a prefetch there, read from the file).
#
#   tests/interop/nbd-client-cache.sh BUILD_DIR
#
# Prints "ok NAME" / "FAIL NAME" per case and "N passed, N failed,
# N skipped"; exits 77 if the QEMU tools or python3-libnbd are missing.
set -u
build=${1:?usage: nbd-client-cache.sh BUILD_DIR}
source "$(dirname "$0")/nbd-lib.bash"
cd "$work" || exit 1
if [ -z "$py_nbd" ]; then
    echo "skip: python3-libnbd is not installed"
    exit 77
fi

qemu-img create -q -f raw disk.raw 4M
qemu-io -f raw -c 'write -P 7 0 4M' disk.raw >/dev/null

# client SOCKET: three CACHE requests (one unaligned, one past 2 MiB)
# and nothing else through the front server.
client() {
    "$py_nbd" - "$1" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_unix(sys.argv[1])
assert h.can_cache(), "the front server does not offer NBD_CMD_CACHE"
h.cache(65536, 0)
h.cache(3000, 100000)
h.cache(1048576, 2097152)
h.shutdown()
PY
}

# behind qemu-nbd: its trace names each request's type
start_server back qemu-nbd -T nbd_co_receive_request_decode_type -f raw \
    disk.raw || exit 1
start_server front "$qnbd" -f raw "$(uri back)" || exit 1
if client "$work/front.sock" 2> client.err; then
    ok "cache through qblock-nbd and the nbd driver to qemu-nbd"
else
    fail "cache through qblock-nbd and the nbd driver to qemu-nbd" \
         "$(cat client.err)"
fi
stop_server
sleep 0.5
caches=$(grep -c 'type = 5 (cache)' back.err)
reads=$(grep -c 'type = 0 (read)' back.err)
if [ "$caches" = 3 ] && [ "$reads" = 0 ]; then
    ok "qemu-nbd saw 3 NBD_CMD_CACHE and no NBD_CMD_READ"
else
    fail "qemu-nbd saw 3 NBD_CMD_CACHE and no NBD_CMD_READ" \
         "$caches CACHE and $reads READ requests: $(cat back.err)"
fi
kill "${pids[0]}" 2>/dev/null

# behind qblock-nbd: each CACHE is a prefetch there, which raw over a
# file does as a read of the file: its statistics count exactly 3
QBLOCK_NBD_STATS=$work/back.stats start_server back "$qnbd" -f raw \
    disk.raw || exit 1
start_server front "$qnbd" -f raw "$(uri back)" || exit 1
if client "$work/front.sock" 2> client.err; then
    ok "cache through qblock-nbd and the nbd driver to qblock-nbd"
else
    fail "cache through qblock-nbd and the nbd driver to qblock-nbd" \
         "$(cat client.err)"
fi
stop_server
kill "${pids[-2]}" 2>/dev/null
wait 2>/dev/null
if grep -q '^backend: .* rd_operations=3 ' back.stats 2>/dev/null; then
    ok "qblock-nbd behind saw the 3 prefetches"
else
    fail "qblock-nbd behind saw the 3 prefetches" "$(cat back.stats 2>&1)"
fi
summary
