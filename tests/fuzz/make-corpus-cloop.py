#!/usr/bin/env python3
"""Writes the seed images of fuzz-cloop with tests/interop/cloop-make.py's
layout: 512-byte and 4 KiB blocks, an empty disk, a block of zeroes.
Usage: make-corpus-cloop.py DIR"""
import os
import subprocess
import sys

MAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    '..', 'interop', 'cloop-make.py')
SEEDS = {'blocks-512': (512, 6), 'blocks-4k': (4096, 3), 'empty': (512, 0)}

for name, (size, count) in SEEDS.items():
    subprocess.run([sys.executable, MAKE, os.path.join(sys.argv[1], name),
                    str(size), str(count)], check=True)
