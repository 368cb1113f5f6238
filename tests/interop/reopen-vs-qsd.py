#!/usr/bin/env python3
"""blockdev-reopen against the real qemu-storage-daemon: read-only
toggles of an exported node, backing changes, a copy-before-write filter
with a bitmap put under the node a writable NBD export serves while the
guest writes (then the fleecing snapshot pulled over NBD), QEMU's refusals;
and discards on a snapshot-access export.  Each scenario is one QMP
script run against QEMU 7.2's daemon and against ours; replies, events,
files and images are compared as tests/interop/jobs-vs-qsd.py compares
them (its machinery is used here).

    reopen-vs-qsd.py BUILD_DIR [SCENARIO...]
Prints "N passed, N failed, N skipped" last; exits 77 when
qemu-storage-daemon is not installed.
"""
import importlib.util
import os
import shutil
import sys
import tempfile

_spec = importlib.util.spec_from_file_location(
    'jobs_vs_qsd', os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                'jobs-vs-qsd.py'))
jobs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jobs)

GUEST_IO = jobs.GUEST_IO
# what failed, not why: errno texts differ between the two NBD servers
OUTCOME = ('%s 2>&1 | grep -E "failed|^wrote|^read|^discard" | '
           'sed "s/failed: .*/failed/" > %s || true')


def qcow2_node(name, filename, **extra):
    """A qcow2 node over a file node named NAME-file (named, so that the
    scripts can give it by name: automatic names differ)."""
    opts = {'driver': 'qcow2', 'node-name': name,
            'file': {'driver': 'file', 'node-name': name + '-file',
                     'filename': '$DIR/' + filename}}
    opts.update(extra)
    return opts


def reopen(*options):
    return ('qmp', 'blockdev-reopen', {'options': list(options)})


def export(node_name, name='guest', writable=True):
    return ('qmp', 'block-export-add', {'type': 'nbd', 'id': name,
                                        'node-name': node_name,
                                        'name': name, 'writable': writable})


def export_del(name='guest'):
    return [('qmp', 'block-export-del', {'id': name}),
            ('event', 'BLOCK_EXPORT_DELETED', {'id': name})]


NBD_START = ('qmp', 'nbd-server-start', {'addr': {'type': 'unix', 'data': {
    'path': '$DIR/nbd.sock'}}})

DISK = qcow2_node('disk', 'disk.qcow2')

# read-only toggles of a node a writable export serves, and the options
# that cannot change
READ_ONLY = {
    'steps': [
        ('sh', 'qemu-img create -q -f qcow2 disk.qcow2 16M'),
        ('start',),
        ('qmp', 'blockdev-add', DISK),
        NBD_START,
        export('disk'),
        # the writable export holds the node writable
        reopen(dict(DISK, **{'read-only': True})),
        ('nodes',),
        # the same options: nothing changes
        reopen(DISK),
        ('sh', OUTCOME % (GUEST_IO % '-c "write -P 0x21 0 64k"',
                          'w1.txt')),
    ] + export_del() + [
        reopen(dict(DISK, **{'read-only': True})),
        ('nodes',),
        export('disk'),
        # (another id: a second BLOCK_EXPORT_DELETED of "guest" could not
        # be told from the first)
        export('disk', name='ro', writable=False),
        reopen(DISK),
        ('nodes',),
        reopen(dict(DISK, **{'auto-read-only': True})),
        ('nodes',),
        # what cannot change, or is not there
        reopen(dict(DISK, driver='raw')),
        reopen(dict(DISK, **{'node-name': 'nope'})),
        reopen({'driver': 'qcow2', 'file': 'disk-file'}),
        reopen(dict(DISK, file={'driver': 'file', 'node-name': 'disk-file',
                                'filename': '$DIR/other.qcow2'})),
        reopen(dict(DISK, file={'driver': 'file', 'node-name': 'other',
                                'filename': '$DIR/disk.qcow2'})),
        reopen(dict(DISK, **{'lazy-refcounts': True})),
        reopen(dict(DISK, file='disk-file')),
        reopen(dict(DISK, file='nope')),
        reopen(dict(DISK, file='disk')),
        reopen(dict(DISK, file=None)),
        reopen(dict(DISK, backing='disk-file')),
        reopen(dict(DISK, **{'detect-zeroes': 'unmap'})),
        reopen(dict(DISK, discard='unmap', **{'detect-zeroes': 'unmap'})),
        ('nodes',),
        reopen(DISK, dict(DISK, **{'read-only': True})),
        # (an empty list crashes qemu-storage-daemon 7.2: an assertion)
        ('nodes',),
    ] + export_del('ro'),
    'same_files': ['w1.txt'],
    'images': ['disk.qcow2'],
}

READ_BACK = ('qemu-io -r -f raw -c "read -P 0x11 0 1M" -c "read -P 0 2M 1M" '
             '-c "read -P 0x33 4M 1M" "nbd+unix:///guest?socket=nbd.sock"')

# a backing node given, changed and taken away under an export
BACKING = {
    'steps': [
        ('sh', 'qemu-img create -q -f qcow2 base.qcow2 8M && '
               'qemu-io -f qcow2 -c "write -P 0x11 0 1M" base.qcow2 && '
               'qemu-img create -q -f qcow2 other.qcow2 8M && '
               'qemu-io -f qcow2 -c "write -P 0x22 0 1M" other.qcow2 && '
               'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 '
               'top.qcow2 && '
               'qemu-io -f qcow2 -c "write -P 0x33 4M 1M" top.qcow2'),
        ('start',),
        ('qmp', 'blockdev-add', qcow2_node('base', 'base.qcow2')),
        ('qmp', 'blockdev-add', qcow2_node('other', 'other.qcow2')),
        ('qmp', 'blockdev-add', qcow2_node('top', 'top.qcow2',
                                           backing=None)),
        NBD_START,
        export('top', writable=False),
        ('sh', OUTCOME % (READ_BACK, 'r0.txt')),
        # the image names a backing file: "backing" must be given
        reopen(qcow2_node('top', 'top.qcow2')),
        reopen(qcow2_node('top', 'top.qcow2', backing='base')),
        ('sh', OUTCOME % (READ_BACK, 'r1.txt')),
        ('nodes',),
        reopen(qcow2_node('top', 'top.qcow2', backing='other')),
        ('sh', OUTCOME % (READ_BACK, 'r2.txt')),
        # refusals
        reopen(qcow2_node('other', 'other.qcow2', backing='top')),
        reopen(qcow2_node('top', 'top.qcow2', backing='top')),
        reopen(qcow2_node('top', 'top.qcow2', backing='nope')),
        reopen({'driver': 'file', 'node-name': 'top-file',
                'filename': '$DIR/top.qcow2', 'backing': 'base'}),
        # one transaction: the second node's refusal undoes the first's
        reopen(qcow2_node('top', 'top.qcow2', backing='base'),
               qcow2_node('base', 'base.qcow2', backing='top')),
        ('sh', OUTCOME % (READ_BACK, 'r3.txt')),
        ('qmp', 'blockdev-del', {'node-name': 'other'}),
        reopen(qcow2_node('top', 'top.qcow2', backing=None)),
        ('sh', OUTCOME % (READ_BACK, 'r4.txt')),
        ('qmp', 'blockdev-del', {'node-name': 'other'}),
        ('nodes',),
    ] + export_del(),
    'same_files': ['r0.txt', 'r1.txt', 'r2.txt', 'r3.txt', 'r4.txt'],
    'images': ['top.qcow2', 'base.qcow2', 'other.qcow2'],
    'info_keys': ['backing-filename'],
}

TOP = {'driver': 'raw', 'node-name': 'top', 'file': 'disk'}
WRITES_BEFORE = ('-c "write -P 0x21 0 64k" -c "write -P 0x22 1M 192k" '
                 '-c "write -P 0x23 10M 4k" -c "write -z 20M 1M"')

# Pull-mode backup with the filter put under the guest's export by
# blockdev-reopen: the export serves a raw node "top" over the disk; the
# copy-before-write filter with the checkpoint's frozen bitmap goes
# between them while the guest stays connected, and the backup tool pulls
# the snapshot's dirty extents into an overlay of the full backup.  The
# result must be the full backup with the guest's writes before the
# insert point applied (expected.qcow2, made offline), whatever the guest
# wrote after.
FLEECE = {
    'steps': [
        ('sh', 'qemu-img create -q -f qcow2 disk.qcow2 64M && '
               'qemu-io -f qcow2 -c "write -P 0x11 0 64M" disk.qcow2 && '
               'qemu-img convert -O qcow2 disk.qcow2 full.qcow2 && '
               'qemu-img create -q -f qcow2 fleece.qcow2 64M && '
               'qemu-img create -q -f qcow2 -b full.qcow2 -F qcow2 '
               'inc.qcow2 && '
               'qemu-img create -q -f qcow2 -b full.qcow2 -F qcow2 '
               'expected.qcow2 && '
               'qemu-io -f qcow2 %s expected.qcow2' % WRITES_BEFORE),
        ('start',),
        ('qmp', 'blockdev-add', DISK),
        ('qmp', 'blockdev-add', TOP),
        ('qmp', 'block-dirty-bitmap-add', {'node': 'disk', 'name': 'c1',
                                           'persistent': True}),
        NBD_START,
        export('top'),
        ('sh', GUEST_IO % WRITES_BEFORE),
        ('qmp', 'blockdev-add', qcow2_node('fleece', 'fleece.qcow2')),
        ('qmp', 'transaction', {'actions': jobs.CHECKPOINT_ACTIONS}),
        ('qmp', 'blockdev-add', {'driver': 'copy-before-write',
                                 'node-name': 'cbw', 'file': 'disk',
                                 'target': 'fleece',
                                 'bitmap': {'node': 'disk',
                                            'name': 'backup'}}),
        # the insert point: the guest's export goes on as it was
        reopen(dict(TOP, file='cbw')),
        ('nodes',),
        # the filter is in use: it cannot go
        ('qmp', 'blockdev-del', {'node-name': 'cbw'}),
        ('qmp', 'blockdev-add', {'driver': 'snapshot-access',
                                 'node-name': 'snap', 'file': 'cbw'}),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'snap',
                                     'node-name': 'snap', 'name': 'snap',
                                     'bitmaps': [{'node': 'disk',
                                                  'name': 'backup'}]}),
        # the guest writes on, over dirty clusters and clean ones
        ('sh', GUEST_IO % '-c "write -P 0x31 0 128k" '
                          '-c "write -P 0x32 1M 64k" '
                          '-c "write -P 0x33 40M 64k" '
                          '-c "write -z 20M 64k"'),
        ('qmp', 'blockdev-add', qcow2_node('inc', 'inc.qcow2')),
        export('inc', name='inc'),
        ('sh', '/usr/bin/python3 $TESTS/nbd_pull.py '
               '"nbd+unix:///snap?socket=nbd.sock" backup '
               '"nbd+unix:///inc?socket=nbd.sock" > pull.json'),
    ] + export_del('snap') + export_del('inc') + [
        ('qmp', 'blockdev-del', {'node-name': 'snap'}),
        # the filter leaves as it came, under the live export
        reopen(TOP),
        ('nodes',),
        ('qmp', 'blockdev-del', {'node-name': 'cbw'}),
        ('qmp', 'blockdev-del', {'node-name': 'fleece'}),
        ('qmp', 'blockdev-del', {'node-name': 'inc'}),
        ('sh', OUTCOME % (GUEST_IO % '-c "read -P 0x31 0 128k" '
                                     '-c "write -P 0x41 0 64k"',
                          'after.txt')),
    ] + export_del() + [
        ('qmp', 'block-dirty-bitmap-remove', {'node': 'disk',
                                              'name': 'backup'}),
        ('qmp', 'x-debug-block-dirty-bitmap-sha256', {'node': 'disk',
                                                      'name': 'c2'}),
    ],
    'same_files': ['pull.json', 'after.txt'],
    'after': [
        ('full + incremental is the disk at the insert point',
         'qemu-img compare -f qcow2 -F qcow2 inc.qcow2 expected.qcow2'),
    ],
    'images': ['inc.qcow2', 'disk.qcow2', 'fleece.qcow2'],
}

SNAP_URI = '"nbd+unix:///snap?socket=nbd.sock"'
# what the fleecing image holds, seen live through an export of it (its
# file on disk lags behind the daemon's metadata cache)
FLEECE_DATA = ('qemu-img map --output=json -f raw '
               '"nbd+unix:///fleece?socket=nbd.sock" | /usr/bin/python3 '
               '-c "import json, sys; print(sum(e[\'length\'] for e in '
               'json.load(sys.stdin) if e[\'data\']))" >> %s')

# Discards on the snapshot-access export: the backup tool drops what it
# has read; the filter then copies no guest write there, drops the
# fleecing image's copies, and the snapshot reads fail there alone.
SNAPSHOT_DISCARD = {
    'steps': [
        ('sh', 'qemu-img create -q -f qcow2 disk.qcow2 16M && '
               'qemu-io -f qcow2 -c "write -P 0x11 0 16M" disk.qcow2 && '
               'qemu-img create -q -f qcow2 fleece.qcow2 16M'),
        ('start',),
        ('qmp', 'blockdev-add', DISK),
        ('qmp', 'blockdev-add', TOP),
        NBD_START,
        export('top'),
        ('qmp', 'blockdev-add', qcow2_node('fleece', 'fleece.qcow2',
                                           discard='unmap')),
        ('qmp', 'blockdev-add', {'driver': 'copy-before-write',
                                 'node-name': 'cbw', 'file': 'disk',
                                 'target': 'fleece'}),
        reopen(dict(TOP, file='cbw')),
        ('qmp', 'blockdev-add', {'driver': 'snapshot-access',
                                 'node-name': 'snap', 'file': 'cbw',
                                 'discard': 'unmap'}),
        export('snap', name='snap'),
        export('fleece', name='fleece', writable=False),
        # the guest overwrites 0..1M: copied to the fleecing image
        ('sh', GUEST_IO % '-c "write -P 0x21 0 1M"'),
        ('sh', FLEECE_DATA % 'fleece.txt'),
        # the backup tool reads 0..2M, then is done with 0..1M and the
        # cluster after it (QEMU 7.2 fails an assertion on a discard that
        # ends within a cluster, which qblock rounds in)
        ('sh', OUTCOME % ('qemu-io -f raw -c "read -P 0x11 0 2M" '
                          '-c "discard 0 1M" -c "discard 1M 64k" ' +
                          SNAP_URI, 'discard.txt')),
        ('sh', FLEECE_DATA % 'fleece.txt'),
        # the guest writes over what was discarded: nothing is copied;
        # elsewhere copies go on
        ('sh', GUEST_IO % '-c "write -P 0x22 0 1088k" '
                          '-c "write -P 0x23 2M 64k"'),
        ('sh', FLEECE_DATA % 'fleece.txt'),
        # discarded clusters fail to read; the rest is the snapshot
        ('sh', OUTCOME % ('qemu-io -r -f raw -c "read 0 4k" '
                          '-c "read 1M 4k" -c "read -P 0x11 1088k 64k" '
                          '-c "read -P 0x11 2M 1M" ' + SNAP_URI,
                          'reads.txt')),
    ] + export_del('snap') + export_del('fleece') + [
        ('qmp', 'blockdev-del', {'node-name': 'snap'}),
        reopen(TOP),
        ('qmp', 'blockdev-del', {'node-name': 'cbw'}),
        ('qmp', 'blockdev-del', {'node-name': 'fleece'}),
    ] + export_del(),
    'same_files': ['fleece.txt', 'discard.txt', 'reads.txt'],
    'images': ['disk.qcow2'],
}

# what a job's implicit filter refuses
REFUSALS = {
    'steps': [
        ('sh', 'qemu-img create -q -f qcow2 base.qcow2 16M && '
               'qemu-io -f qcow2 -c "write -P 0x11 0 16M" base.qcow2 && '
               'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 '
               'disk.qcow2 && '
               'qemu-img create -q -f qcow2 target.qcow2 16M && '
               'qemu-img create -q -f qcow2 other.qcow2 16M'),
        ('start',),
        ('qmp', 'blockdev-add', qcow2_node('base', 'base.qcow2')),
        ('qmp', 'blockdev-add', qcow2_node('disk', 'disk.qcow2',
                                           backing='base')),
        ('qmp', 'blockdev-add', TOP),
        ('qmp', 'blockdev-add', qcow2_node('target', 'target.qcow2')),
        # a slow stream: its implicit filter stays between top and disk
        ('qmp', 'block-stream', {'job-id': 's', 'device': 'disk',
                                 'speed': 1}),
        ('wait', 's', 'running'),
        ('nodes',),
        # naming disk keeps the filter, naming another node would take it
        # out under the job
        reopen(TOP),
        reopen(dict(TOP, file='target')),
        ('qmp', 'job-cancel', {'id': 's'}),
        ('wait', 's', 'null'),
        ('nodes',),
        # options of a child the node did not open: not the reopen's
        reopen(dict(TOP, file={'driver': 'qcow2', 'node-name': 'disk',
                               'file': 'disk-file', 'backing': 'base'})),
        # a copy-before-write filter's source cannot change under its
        # snapshot (QEMU 7.2 refuses every reopen of the filter; qblock
        # only this one, and changes of its options)
        ('qmp', 'blockdev-add', {'driver': 'copy-before-write',
                                 'node-name': 'cbw', 'file': 'target',
                                 'target': 'other-t'}),
        ('qmp', 'blockdev-add', qcow2_node('other-t', 'other.qcow2')),
        ('qmp', 'blockdev-add', {'driver': 'copy-before-write',
                                 'node-name': 'cbw', 'file': 'target',
                                 'target': 'other-t',
                                 'on-cbw-error': 'break-snapshot'}),
        reopen({'driver': 'copy-before-write', 'node-name': 'cbw',
                'file': 'disk', 'target': 'other-t',
                'on-cbw-error': 'break-snapshot'}),
        ('nodes',),
        ('qmp', 'blockdev-del', {'node-name': 'cbw'}),
        # (a child in another iothread crashes qemu-storage-daemon 7.2:
        # tests/daemon/test-reopen.py has qblock's refusal)
    ],
    # QEMU drains the nodes below a reopened one too, pausing the job
    # there for the instant; qblock drains the reopened nodes, where no
    # job runs, and a slow job's progress depends on timing
    'ignore_pauses': True,
    'filter_progress': True,
    'images': ['disk.qcow2'],
}

# which options a reopen may leave out (back to their default) and which
# it may not, and force-share, which cannot change
RESET = {
    'steps': [
        ('sh', 'qemu-img create -q -f qcow2 disk.qcow2 16M'),
        ('start',),
        ('qmp', 'blockdev-add', {'driver': 'file', 'node-name': 'f',
                                 'filename': '$DIR/disk.qcow2',
                                 'locking': 'off', 'aio': 'threads'}),
        reopen({'driver': 'file', 'node-name': 'f',
                'filename': '$DIR/disk.qcow2'}),
        reopen({'driver': 'file', 'node-name': 'f',
                'filename': '$DIR/disk.qcow2', 'locking': 'off'}),
        reopen({'driver': 'file', 'node-name': 'f',
                'filename': '$DIR/disk.qcow2', 'locking': 'off',
                'aio': 'threads'}),
        ('qmp', 'blockdev-add', {'driver': 'qcow2', 'node-name': 'q',
                                 'file': 'f', 'cache-size': 1048576,
                                 'overlap-check': 'all'}),
        reopen({'driver': 'qcow2', 'node-name': 'q', 'file': 'f'}),
        reopen({'driver': 'qcow2', 'node-name': 'q', 'file': 'f',
                'cache-size': 1048576}),
        reopen({'driver': 'qcow2', 'node-name': 'q', 'file': 'f',
                'force-share': True, 'read-only': True}),
        reopen({'driver': 'qcow2', 'node-name': 'q', 'file': 'f',
                'cache': {'direct': True}}),
        ('nodes',),
        ('qmp', 'blockdev-add', {'driver': 'null-co', 'node-name': 'n',
                                 'size': 1048576}),
        reopen({'driver': 'null-co', 'node-name': 'n'}),
        reopen({'driver': 'null-co', 'node-name': 'n', 'size': 4096}),
    ],
}

def sha256(name):
    return ('qmp', 'x-debug-block-dirty-bitmap-sha256', {'node': 'disk',
                                                         'name': name})


BITMAP_INFO = ('qemu-img info -U --output=json disk.qcow2 | /usr/bin/python3 '
               '-c "import json, sys; print(json.load(sys.stdin)'
               '[\'format-specific\'][\'data\'].get(\'bitmaps\'))" >> %s')

# Dirty bitmaps across reopens: they survive, keep recording; a
# read-only reopen stores the persistent ones in the image (no longer
# in use), a read-write one marks them in use again
BITMAPS = {
    'steps': [
        ('sh', 'qemu-img create -q -f qcow2 disk.qcow2 64M'),
        ('start',),
        ('qmp', 'blockdev-add', DISK),
        ('qmp', 'block-dirty-bitmap-add', {'node': 'disk', 'name': 'p',
                                           'persistent': True}),
        ('qmp', 'block-dirty-bitmap-add', {'node': 'disk', 'name': 't',
                                           'granularity': 4096}),
        ('qmp', 'block-dirty-bitmap-add', {'node': 'disk', 'name': 'off',
                                           'persistent': True,
                                           'disabled': True}),
        NBD_START,
        export('disk'),
        ('sh', GUEST_IO % '-c "write -P 0x21 0 64k" -c "write 10M 4k" '
                          '-c "write -z 20M 1M"'),
        sha256('p'), sha256('t'), sha256('off'),
        # not compared: the guest's flushes stored the new bitmaps in
        # qblock's image (a checkpoint, docs/bitmaps.md), QEMU's has none
        ('sh', BITMAP_INFO % 'info-flushed.txt'),
    ] + export_del() + [
        reopen(dict(DISK, **{'read-only': True})),
        sha256('p'), sha256('t'),
        ('sh', BITMAP_INFO % 'info.txt'),
        # a read-only node's bitmaps cannot change
        ('qmp', 'block-dirty-bitmap-clear', {'node': 'disk', 'name': 'p'}),
        ('qmp', 'block-dirty-bitmap-add', {'node': 'disk', 'name': 'n',
                                           'persistent': True}),
        reopen(DISK),
        ('sh', BITMAP_INFO % 'info.txt'),
        # (another export id: a second BLOCK_EXPORT_DELETED of "guest"
        # could not be told from the first)
        export('disk', name='g2'),
        ('sh', 'qemu-io -f raw -c "write -P 0x22 30M 64k" '
               '"nbd+unix:///g2?socket=nbd.sock"'),
        sha256('p'), sha256('t'), sha256('off'),
        ('qmp', 'block-dirty-bitmap-clear', {'node': 'disk', 'name': 'p'}),
        sha256('p'),
    ] + export_del('g2'),
    'same_files': ['info.txt'],
    'images': ['disk.qcow2'],
    'info_keys': ['format-specific'],
}

SCENARIOS = {
    'reopen-read-only': READ_ONLY,
    'reopen-backing': BACKING,
    'reopen-fleece': FLEECE,
    'snapshot-discard': SNAPSHOT_DISCARD,
    'reopen-refusals': REFUSALS,
    'reopen-reset': RESET,
    'reopen-bitmaps': BITMAPS,
}


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else 'build')
    only = sys.argv[2:]
    tests = jobs.Tests()
    if not shutil.which('qemu-storage-daemon'):
        print('qemu-storage-daemon is not installed (Debian '
              'qemu-system-common)')
        return 77
    top = tempfile.mkdtemp(prefix='reopen-vs-qsd-')
    for name, scenario in SCENARIOS.items():
        if only and name not in only:
            continue
        try:
            jobs.compare(tests, name, scenario, build, top)
        except Exception as e:      # a hang or a crash is a failure too
            tests.check('%s: runs' % name, False, repr(e))
    if tests.failed:
        print('(files kept in %s)' % top)
    else:
        shutil.rmtree(top, ignore_errors=True)
    print('%d passed, %d failed, %d skipped' %
          (tests.passed, tests.failed, tests.skipped))
    return 1 if tests.failed else 0


if __name__ == '__main__':
    sys.exit(main())
