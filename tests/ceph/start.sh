#!/bin/bash
# tests/ceph/start.sh DIR [PORT] -- a throw-away Ceph cluster for the rbd
# tests: one monitor and one memstore OSD (no mgr), on 127.0.0.1 only, with
# cephx and a pool "rbd".  Writes DIR/ceph.conf and DIR/keyring and prints
# the CEPH_CONF line to use; tests/ceph/stop.sh DIR stops it.
#
# PORT is the monitor's msgr2 port and PORT+1 its msgr1 port; without PORT
# a free pair is picked, so that several clusters (several engineers'
# make check) run side by side.  The OSD takes ports in 6800-7300 itself.
#
# memstore keeps every object in RAM (about 2.4 times what was written, not
# given back after rbd rm): keep test images small.  The settings below
# each avoid a pitfall; see tests/ceph/README.md.
set -euo pipefail; unset CEPH_ARGS
export CEPH_CONF=/dev/null   # tools without -c (ceph-authtool) must not pick up a caller's CEPH_CONF
DIR=$(realpath -m "${1:?usage: start.sh DIR [PORT]}")
[ -e "$DIR" ] && { echo "$DIR exists" >&2; exit 1; }
if [ -n "${2:-}" ]; then
  PORT=$2
else
  # two consecutive free ports on 127.0.0.1 (bound and released: a race
  # with another starter is possible but then ceph-mon fails, loudly)
  PORT=$(python3 -c '
import random, socket
for _ in range(200):
    p = random.randrange(20000, 60000, 2)
    try:
        socks = []
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("127.0.0.1", q)); socks.append(s)
        print(p); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
')
fi
mkdir -p "$DIR"/mon.a "$DIR"/osd.0 "$DIR"/crash
FSID=$(uuidgen); OSD_UUID=$(uuidgen); C="$DIR/ceph.conf"
cat > "$C" <<CONF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$PORT,v1:127.0.0.1:$((PORT+1))]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $DIR/keyring
run dir = $DIR
admin socket = $DIR/\$name.asok
pid file = $DIR/\$name.pid
log file = $DIR/\$name.log
crash dir = $DIR/crash
mon data = $DIR/\$name
osd data = $DIR/\$name
osd objectstore = memstore
memstore device bytes = 8589934592
memstore page set = true
memstore page size = 4096
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim allowed = false
mon data avail warn = 1
mon data avail crit = 0
paxos propose interval = 0.05
client mount timeout = 30
mon mgr mkfs grace = 31536000
CONF
K="$DIR/keyring"
ceph-authtool "$K" --create-keyring --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$K" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *'
ceph-authtool "$K" --gen-key -n osd.0 --cap mon 'allow profile osd' --cap osd 'allow *' --cap mgr 'allow profile osd'
monmaptool -c "$C" --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$PORT,v1:127.0.0.1:$((PORT+1))]" "$DIR/monmap" >/dev/null
ceph-mon -c "$C" -i a --mkfs --monmap "$DIR/monmap" --keyring "$K"
ceph-mon -c "$C" -i a                        # daemonizes, writes $DIR/mon.a.pid
timeout 60 ceph -c "$C" osd new "$OSD_UUID" 0 >/dev/null &
ceph-osd -c "$C" -i 0 --mkfs --osd-uuid "$OSD_UUID" 2>>"$DIR/osd.0.mkfs.log" && wait
ceph-osd -c "$C" -i 0 2>>"$DIR/osd.0.log"   # daemonizes, writes $DIR/osd.0.pid
timeout 60 ceph -c "$C" osd pool create rbd 8 8 >/dev/null 2>&1
timeout 60 rbd -c "$C" pool init rbd
timeout 60 rbd -c "$C" ls rbd >/dev/null   # first OSD I/O: returns once the PGs are active
echo "export CEPH_CONF=$C   # keyring: $K  qemu: rbd:rbd/IMG:conf=$C"
