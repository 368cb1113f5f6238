#!/usr/bin/env python3
"""Writes the seed images of fuzz-dmg with tests/interop/dmg-make.py's
layout: every chunk type over several partitions, a gap, bzip2 chunks;
the tables in a resource fork alone or beside the property list.
Usage: make-corpus-dmg.py DIR"""
import os
import subprocess
import sys
import tempfile

MAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    '..', 'interop', 'dmg-make.py')
SEEDS = {
    'all-types': ['zlib:8', 'zero:4', 'raw:3', 'bzip2:5', 'ignore:2',
                  'comment', 'zlib:1'],
    'gap': ['zlib:4', 'gap:4', 'raw:2'],
    'bzip2': ['bzip2:16', 'bzip2:1'],
    'rsrc': ['--tables=rsrc', 'zlib:8', 'zero:4', 'raw:3', 'bzip2:5',
             'ignore:2', 'comment', 'zlib:1'],
    'rsrc-gap': ['--tables=rsrc', 'zlib:4', 'gap:4', 'raw:2'],
    'both': ['--tables=both', 'zlib:4', 'raw:2', 'zero:3'],
}

with tempfile.TemporaryDirectory() as tmp:
    for name, chunks in SEEDS.items():
        opts = [c for c in chunks if c.startswith('--')]
        chunks = [c for c in chunks if not c.startswith('--')]
        subprocess.run([sys.executable, MAKE] + opts +
                       [os.path.join(sys.argv[1], name),
                        os.path.join(tmp, 'disk.raw')] + chunks, check=True)
