#!/usr/bin/env python3
"""What a running block job forbids, against the real qemu-storage-daemon
7.2: each scenario starts one slow job (stream, intermediate and active
commit, mirror, backup) and pauses it, then tries on every node the job
involves (its filter, source or top, intermediate nodes, base, target)
the operations QEMU refuses on a node a job uses: block_resize,
blockdev-del, external and internal snapshots (alone and in a
transaction), a second job with the node as source or target, and
exports of it.  The replies and events must match those of QEMU's
daemon (jobs-vs-qsd.py's comparison), the images whose contents do not
depend on the job's progress must compare identical, and every image
must pass qemu-img check.

    job-blockers-vs-qsd.py BUILD_DIR [SCENARIO...]
Prints "N passed, N failed, N skipped" last; exits 77 when
qemu-storage-daemon is not installed.
"""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    'jobs_vs_qsd', os.path.join(HERE, 'jobs-vs-qsd.py'))
jvq = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jvq)

# slow enough that no job ends before it is cancelled
SLOW = 65536
MiB = 1 << 20


def cancel_all(run):
    """Cancels every job left (a probe that QEMU accepts starts one) and
    waits until each is gone; records the ids cancelled."""
    jobs = sorted(j['id'] for j in run.qmp.cmd('query-jobs')['return'])
    for j in jobs:
        run.qmp.cmd('job-cancel', {'id': j})
        run._take_events()
    for j in jobs:
        run.wait(j, 'null')
    run.replies.append(('cancelled', jobs))


def hold(job):
    """A step that pauses @job if a probe started it and it still runs:
    a drain wakes a sleeping job, which copies a chunk before it sleeps
    again, so that the later probes would end it sooner or later in one
    daemon than in the other.  Records nothing: whether an empty job
    ended before the pause arrived is a race in either daemon."""
    def pause(run):
        for j in run.qmp.cmd('query-jobs')['return']:
            if j['id'] == job and j['status'] == 'running':
                run.qmp.cmd('job-pause', {'id': job})
        run._take_events()
    return ('call', pause)


def probes(name, spare='spare'):
    """The operations tried on node @name while a job uses it; @spare is
    a node no job uses, the other end of a second job."""
    return [
        ('qmp', 'block_resize', {'node-name': name, 'size': 32 * MiB}),
        ('qmp', 'blockdev-del', {'node-name': name}),
        ('qmp', 'blockdev-snapshot-sync', {
            'node-name': name, 'snapshot-file': '$DIR/ov-%s.qcow2' % name,
            'snapshot-node-name': 'ov-' + name, 'format': 'qcow2'}),
        ('qmp', 'blockdev-snapshot-internal-sync', {'device': name,
                                                    'name': 'i1'}),
        # a transaction's actions ask as the commands do
        ('qmp', 'transaction', {'actions': [
            {'type': 'blockdev-snapshot-sync', 'data': {
                'node-name': name,
                'snapshot-file': '$DIR/tx-%s.qcow2' % name,
                'snapshot-node-name': 'tx-' + name, 'format': 'qcow2'}},
            {'type': 'blockdev-backup', 'data': {
                'device': name, 'target': spare, 'sync': 'full',
                'speed': SLOW, 'job-id': 't2-' + name}}]}),
        hold('t2-' + name),
        ('qmp', 'block-stream', {'device': name, 'job-id': 's2-' + name,
                                 'speed': SLOW}),
        hold('s2-' + name),
        ('qmp', 'block-commit', {'device': name, 'job-id': 'c2-' + name,
                                 'speed': SLOW}),
        hold('c2-' + name),
        ('qmp', 'blockdev-mirror', {'device': name, 'target': spare,
                                    'sync': 'full', 'speed': SLOW,
                                    'job-id': 'm2-' + name}),
        hold('m2-' + name),
        ('qmp', 'blockdev-mirror', {'device': spare, 'target': name,
                                    'sync': 'full', 'speed': SLOW,
                                    'job-id': 'm3-' + name}),
        hold('m3-' + name),
        ('qmp', 'blockdev-backup', {'device': name, 'target': spare,
                                    'sync': 'full', 'speed': SLOW,
                                    'job-id': 'b2-' + name}),
        hold('b2-' + name),
        ('qmp', 'blockdev-backup', {'device': spare, 'target': name,
                                    'sync': 'full', 'speed': SLOW,
                                    'job-id': 'b3-' + name}),
        hold('b3-' + name),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'w-' + name,
                                     'node-name': name, 'name': 'w-' + name,
                                     'writable': True}),
        ('qmp', 'block-export-del', {'id': 'w-' + name}),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'r-' + name,
                                     'node-name': name,
                                     'name': 'r-' + name}),
        ('qmp', 'block-export-del', {'id': 'r-' + name}),
    ]


def spare():
    return [
        ('sh', 'qemu-img create -q -f qcow2 spare.qcow2 8M'),
        jvq.node('spare', 'spare.qcow2'),
        ('qmp', 'nbd-server-start', {'addr': {'type': 'unix', 'data': {
            'path': '$DIR/nbd.sock'}}}),
    ]


def scenario(prep, job, nodes, same, images, mirror_type=None):
    """@same: the images whose contents do not depend on how far the
    job got before it was cancelled; all of @images pass qemu-img check.
    @mirror_type: the job type of a mirror job (mirror, or commit for an
    active commit)."""
    # paused: a drain wakes a sleeping job, which copies a chunk before
    # it sleeps again, so that a running one would end among the probes
    steps = prep + spare() + [job, ('qmp', 'job-pause', {'id': 'j1'}),
                              ('wait', 'j1', 'paused')]
    for n in nodes:
        steps += probes(n)
    steps += [('qmp', 'query-jobs'), ('call', cancel_all), ('nodes',)]
    # the jobs gone, their blocks are too (a backing node stays blocked)
    steps += [('qmp', 'block_resize', {'node-name': n, 'size': 8 * MiB})
              for n in nodes]
    return {
        # a mirror (and an active commit) reads through a BlockBackend on
        # its filter, where QEMU's reads through the filter's edge
        # (docs/jobs.md): blockdev-del of the filter says so first
        'differing_messages': {
            'Node flt is in use':
            "Node 'flt' is busy: block device is in use by block job: " +
            mirror_type} if mirror_type else {},
        'images': same,
        'after': [('%s passes qemu-img check' % i,
                   'qemu-img check -q %s' % i) for i in images],
        'filter_progress': True,
        # drains pause a running second job for an instant, in either
        'ignore_pauses': True,
        # the jobs and exports a probe starts end in either order
        'per_job_order': True,
        'steps': steps,
    }


# base (0..8M) <- mid (0..8M) <- top (0..4M): a slow job has megabytes
# to copy whichever way it goes
CHAIN = [
    ('sh', 'qemu-img create -q -f qcow2 base.qcow2 8M && '
           'qemu-io -f qcow2 -c "write -P 0x11 0 8M" base.qcow2 && '
           'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 mid.qcow2 && '
           'qemu-io -f qcow2 -c "write -P 0x22 0 8M" mid.qcow2 && '
           'qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 top.qcow2 && '
           'qemu-io -f qcow2 -c "write -P 0x33 0 4M" top.qcow2'),
    ('start',),
    jvq.node('base', 'base.qcow2'),
    jvq.node('mid', 'mid.qcow2', 'base'),
    jvq.node('top', 'top.qcow2', 'mid'),
]

PAIR = [
    ('sh', 'qemu-img create -q -f qcow2 src.qcow2 8M && '
           'qemu-io -f qcow2 -c "write -P 0x5a 0 8M" src.qcow2 && '
           'qemu-img create -q -f qcow2 dst.qcow2 8M'),
    ('start',),
    jvq.node('src', 'src.qcow2'),
    jvq.node('dst', 'dst.qcow2'),
]

CHAIN_NODES = ['flt', 'top', 'mid', 'base']
CHAIN_IMAGES = ['top.qcow2', 'mid.qcow2', 'base.qcow2']
PAIR_IMAGES = ['src.qcow2', 'dst.qcow2']

SCENARIOS = {
    'stream-blocks': scenario(
        CHAIN, ('qmp', 'block-stream', {
            'device': 'top', 'base-node': 'base', 'job-id': 'j1',
            'speed': SLOW, 'filter-node-name': 'flt'}), CHAIN_NODES,
        CHAIN_IMAGES, CHAIN_IMAGES),
    'commit-blocks': scenario(
        CHAIN, ('qmp', 'block-commit', {
            'device': 'top', 'top-node': 'mid', 'base-node': 'base',
            'job-id': 'j1', 'speed': SLOW, 'filter-node-name': 'flt'}),
        CHAIN_NODES, ['top.qcow2', 'mid.qcow2'], CHAIN_IMAGES),
    'active-commit-blocks': scenario(
        CHAIN, ('qmp', 'block-commit', {
            'device': 'top', 'job-id': 'j1', 'speed': SLOW,
            'filter-node-name': 'flt'}), CHAIN_NODES, ['top.qcow2'],
        CHAIN_IMAGES, 'commit'),
    'mirror-blocks': scenario(
        PAIR, ('qmp', 'blockdev-mirror', {
            'device': 'src', 'target': 'dst', 'sync': 'full',
            'job-id': 'j1', 'speed': SLOW, 'filter-node-name': 'flt'}),
        ['flt', 'src', 'dst'], ['src.qcow2'], PAIR_IMAGES, 'mirror'),
    'backup-blocks': scenario(
        PAIR, ('qmp', 'blockdev-backup', {
            'device': 'src', 'target': 'dst', 'sync': 'full',
            'job-id': 'j1', 'speed': SLOW, 'filter-node-name': 'flt'}),
        ['flt', 'src', 'dst'], ['src.qcow2'], PAIR_IMAGES),
}


def main():
    jvq.SCENARIOS = SCENARIOS
    return jvq.main()


if __name__ == '__main__':
    sys.exit(main())
