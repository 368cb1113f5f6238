#!/usr/bin/env python3
"""What `nbdinfo --map` must print for an image, from `qemu-img map`.

    nbd-map-expect.py base|depth < qemu-img-map.json

Reads qemu-img map --output=json of the image and prints one
"OFFSET LENGTH TYPE" line per extent, neighbours with the same type
merged: for base:allocation TYPE is hole (1, not data) | zero (2); for
qemu:allocation-depth it is 0 where no layer has the data, else the depth
of the layer that has it (1 for the image itself).
"""
import json
import sys

mode = sys.argv[1]
extents = []
for e in json.load(sys.stdin):
    if mode == 'base':
        t = (0 if e['data'] else 1) | (2 if e['zero'] else 0)
    else:
        t = e['depth'] + 1 if e['present'] else 0
    if extents and extents[-1][2] == t:
        extents[-1][1] += e['length']
    else:
        extents.append([e['start'], e['length'], t])
for off, length, t in extents:
    print(off, length, t)
