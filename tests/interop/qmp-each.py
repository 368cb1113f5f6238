#!/usr/bin/env python3
"""qmp-each.py SOCKET CMD...: runs each QMP command (JSON text) on the
monitor at the unix SOCKET, after qmp_capabilities, and prints each
command's reply (events skipped) as a line of JSON."""
import json
import socket
import sys

s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
f = s.makefile('rw')
f.readline()
for cmd in ['{"execute": "qmp_capabilities"}'] + sys.argv[2:]:
    f.write(cmd + '\n')
    f.flush()
    while True:
        r = json.loads(f.readline())
        if 'event' not in r:
            break
    print(json.dumps(r))
