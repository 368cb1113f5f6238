#!/usr/bin/env python3
"""x-debug-query-block-graph, as QEMU's: every BlockBackend, block job and
node, numbered from 1 in QEMU's order (backends, jobs, nodes), and the
edges between them with the permissions each parent takes and shares,
with an NBD export (its anonymous BlockBackend) and a running backup job
(its copy-before-write filter and the job's own edges)."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402

t = qsd.Tests('test-block-graph')
ALL = ['resize', 'write-unchanged', 'write', 'consistent-read']


def graph(c):
    """(vertices as (type, name) in order, {id: vertex}, edges as
    (parent vertex, child vertex, name, perm, shared-perm)); generated
    node names are folded to #blockN."""
    r = c.ok('x-debug-query-block-graph')
    ids = {}
    order = []
    for n in r['nodes']:
        v = (n['type'], re.sub(r'^#block\d+$', '#blockN', n['name']))
        ids[n['id']] = v
        order.append(v)
    edges = [(ids.get(e['parent']), ids.get(e['child']), e['name'],
              e['perm'], e['shared-perm']) for e in r['edges']]
    return order, r, edges


def test_export():
    t.create_image('a.qcow2', size='1M')
    d, c = t.start([t.qcow2('a')], export='a')
    order, raw, edges = graph(c)
    t.equal('vertices: the node, its file, the export\'s BlockBackend',
            order, [('block-driver', 'a'), ('block-driver', '#blockN'),
                    ('block-backend', '')])
    t.equal('ids are numbered from 1, the backend first',
            sorted((n['id'], n['type']) for n in raw['nodes']),
            [(1, 'block-backend'), (2, 'block-driver'),
             (3, 'block-driver')])
    t.equal('the qcow2 node\'s file edge and its permissions', edges[0],
            (('block-driver', 'a'), ('block-driver', '#blockN'), 'file',
             ['resize', 'write', 'consistent-read'],
             ['write-unchanged', 'consistent-read']))
    root = edges[1]
    t.equal('the writable export\'s root edge',
            root[:4], (('block-backend', ''), ('block-driver', 'a'), 'root',
                       ['write', 'consistent-read']))
    # QEMU's NBD export shares no resize; qblock's lets block_resize in
    t.check('the export shares writes and reads',
            {'write-unchanged', 'write', 'consistent-read'} <= set(root[4]),
            root[4])
    t.equal('two edges', len(edges), 2)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_backup_job():
    t.create_image('src.qcow2', size='64M')
    t.create_image('dst.qcow2', size='64M')
    t.sh('qemu-io -c "write 0 32M" src.qcow2')
    d, c = t.start([t.qcow2('src'), t.qcow2('dst')])
    # 1 KiB/s: the job stays running while the graph is read
    c.ok('blockdev-backup', {'job-id': 'bk', 'device': 'src',
                             'target': 'dst', 'sync': 'full',
                             'speed': 1024})
    order, raw, edges = graph(c)
    t.equal('vertices, newest node first, the job last', order,
            [('block-driver', '#blockN'), ('block-driver', 'dst'),
             ('block-driver', '#blockN'), ('block-driver', 'src'),
             ('block-driver', '#blockN'), ('block-job', 'bk')])
    t.equal('the job is numbered first (no backend)',
            [n['id'] for n in raw['nodes'] if n['type'] == 'block-job'],
            [1])
    cbw = order[0]
    t.equal('the filter\'s edges, its file first', edges[:2],
            [(cbw, ('block-driver', 'src'), 'file', [],
              ['write-unchanged', 'consistent-read']),
             (cbw, ('block-driver', 'dst'), 'target', ['write'],
              ['write-unchanged', 'write', 'consistent-read'])])
    job = [e for e in edges if e[0] == ('block-job', 'bk')]
    t.check('the job holds its main node (the filter) and the target, '
            'taking nothing and sharing everything',
            (cbw, 'main node', [], ALL) in [e[1:] for e in job] and
            (('block-driver', 'dst'), 'target', [], ALL) in
            [e[1:] for e in job], job)
    c.ok('job-cancel', {'id': 'bk'})
    qsd.wait_job_status(c, 'bk', 'null')
    order, raw, edges = graph(c)
    t.equal('after the job: the two images and their files', order,
            [('block-driver', 'dst'), ('block-driver', '#blockN'),
             ('block-driver', 'src'), ('block-driver', '#blockN')])
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


test_export()
test_backup_job()
t.finish()
