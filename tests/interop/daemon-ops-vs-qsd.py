#!/usr/bin/env python3
"""The operations on live nodes against the real qemu-storage-daemon 7.2:
one QMP script (block_resize, internal and external snapshots,
blockdev-snapshot, transactions that commit and that abort, and the
errors of each), with data written through the NBD export between the
steps (and a copy-before-write filter that an export writes through,
with a snapshot-access node that another export reads),
runs against both daemons, each in a directory of its own.  The
replies and events must match once ids, times and the directory are
filtered out; then the images left behind must compare identical with
the real qemu-img compare, have the same clusters allocated, record
the same backing files and internal snapshots, and pass the real qemu-img check.

    daemon-ops-vs-qsd.py BUILD_DIR      (V=1: each step and QEMU's reply)

Prints "ok NAME" / "FAIL NAME" and "N passed, N failed, N skipped";
exits 77 when qemu-storage-daemon is missing."""
import json
import os
import shutil
import subprocess
import time
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'daemon'))
import qsd                                              # noqa: E402

MiB = 1 << 20
IMAGES = ['a.qcow2', 'b.qcow2', 's1.qcow2', 'o.qcow2', 's2.qcow2',
          't.qcow2']

# The script: QMP commands (compared), and ("io", qemu-io commands) run
# through the export (their output compared too).  The export e0 serves
# node n0, then each overlay that replaces it.
SCRIPT = [
    ('io', 'write -P 1 0 1M'),
    # block_resize of a node no export uses (QEMU's NBD exports do not
    # share the resize permission; docs/storage-daemon.md)
    {'execute': 'block_resize', 'arguments': {'node-name': 'm0',
                                              'size': 128 * MiB}},
    {'execute': 'block_resize', 'arguments': {'node-name': 'm0',
                                              'size': 1000}},
    {'execute': 'block_resize', 'arguments': {'node-name': 'm0',
                                              'size': -1}},
    {'execute': 'block_resize', 'arguments': {'device': 'm0',
                                              'size': MiB}},
    {'execute': 'block_resize', 'arguments': {'node-name': 'mf',
                                              'size': MiB}},
    {'execute': 'block_resize', 'arguments': {'node-name': 'm0',
                                              'size': 32 * MiB}},
    # internal snapshots
    {'execute': 'blockdev-snapshot-internal-sync',
     'arguments': {'device': 'n0', 'name': 'snap1'}},
    {'execute': 'blockdev-snapshot-internal-sync',
     'arguments': {'device': 'n0', 'name': 'snap1'}},
    {'execute': 'blockdev-snapshot-internal-sync',
     'arguments': {'device': 'n0', 'name': ''}},
    {'execute': 'blockdev-snapshot-internal-sync',
     'arguments': {'device': 'f0', 'name': 'x'}},
    {'execute': 'blockdev-snapshot-internal-sync',
     'arguments': {'device': 'zz', 'name': 'x'}},
    ('io', 'write -P 2 1M 1M'),
    {'execute': 'blockdev-snapshot-internal-sync',
     'arguments': {'device': 'n0', 'name': 'snap2'}},
    {'execute': 'blockdev-snapshot-delete-internal-sync',
     'arguments': {'device': 'n0'}},
    {'execute': 'blockdev-snapshot-delete-internal-sync',
     'arguments': {'device': 'n0', 'name': 'zz'}},
    {'execute': 'blockdev-snapshot-delete-internal-sync',
     'arguments': {'device': 'n0', 'id': '1', 'name': 'snap2'}},
    {'execute': 'blockdev-snapshot-delete-internal-sync',
     'arguments': {'device': 'n0', 'id': '1'}},
    # external snapshot into a new image: the export moves to it
    {'execute': 'blockdev-snapshot-sync',
     'arguments': {'node-name': 'n0', 'snapshot-file': 'DIR/s1.qcow2'}},
    {'execute': 'blockdev-snapshot-sync',
     'arguments': {'node-name': 'n0', 'snapshot-file': 'DIR/s1.qcow2',
                   'snapshot-node-name': 'f0'}},
    {'execute': 'blockdev-snapshot-sync',
     'arguments': {'device': 'n0', 'snapshot-file': 'DIR/s1.qcow2',
                   'snapshot-node-name': 's1'}},
    {'execute': 'blockdev-snapshot-sync',
     'arguments': {'node-name': 'n0', 'snapshot-file': 'DIR/none.qcow2',
                   'snapshot-node-name': 's1', 'mode': 'existing'}},
    {'execute': 'blockdev-snapshot-sync',
     'arguments': {'node-name': 'n0', 'snapshot-file': 'DIR/s1.qcow2',
                   'snapshot-node-name': 's1', 'format': 'bogus'}},
    {'execute': 'blockdev-snapshot-sync',
     'arguments': {'node-name': 'n0', 'snapshot-file': 'DIR/s1.qcow2',
                   'snapshot-node-name': 's1'}},
    {'execute': 'query-block-exports'},
    {'execute': 'blockdev-snapshot-sync',
     'arguments': {'node-name': 'n0', 'snapshot-file': 'DIR/x.qcow2',
                   'snapshot-node-name': 'x'}},
    {'execute': 'blockdev-snapshot-internal-sync',
     'arguments': {'device': 'n0', 'name': 'x'}},
    ('io', 'write -P 3 2M 1M'),
    # external snapshot onto a node added before
    {'execute': 'blockdev-add',
     'arguments': {'driver': 'qcow2', 'node-name': 'o1', 'backing': None,
                   'file': {'driver': 'file',
                            'filename': 'DIR/o.qcow2'}}},
    {'execute': 'blockdev-snapshot', 'arguments': {'node': 's1',
                                                   'overlay': 'zz'}},
    {'execute': 'blockdev-snapshot', 'arguments': {'node': 'zz',
                                                   'overlay': 'o1'}},
    {'execute': 'blockdev-snapshot', 'arguments': {'node': 's1',
                                                   'overlay': 'mf'}},
    {'execute': 'blockdev-snapshot', 'arguments': {'node': 's1',
                                                   'overlay': 's1'}},
    {'execute': 'blockdev-snapshot', 'arguments': {'node': 's1',
                                                   'overlay': 'o1'}},
    {'execute': 'query-block-exports'},
    ('io', 'write -P 4 3M 1M'),
    # transactions
    {'execute': 'transaction', 'arguments': {'actions': []}},
    {'execute': 'transaction', 'arguments': {'actions': [
        {'type': 'blockdev-snapshot-internal-sync',
         'data': {'device': 'o1', 'name': 't1'}},
        {'type': 'abort', 'data': {}}]}},
    {'execute': 'transaction', 'arguments': {'actions': [
        {'type': 'blockdev-snapshot-sync',
         'data': {'node-name': 'o1', 'snapshot-file': 'DIR/s2.qcow2',
                  'snapshot-node-name': 's2'}}],
        'properties': {'completion-mode': 'grouped'}}},
    {'execute': 'transaction', 'arguments': {'actions': [
        {'type': 'blockdev-snapshot-internal-sync',
         'data': {'device': 'o1', 'name': 't2'}},
        {'type': 'blockdev-snapshot-sync',
         'data': {'node-name': 'o1', 'snapshot-file': 'DIR/s2.qcow2',
                  'snapshot-node-name': 's2'}}]}},
    {'execute': 'query-block-exports'},
    ('io', 'write -P 5 4M 1M'),
    {'execute': 'blockdev-snapshot-delete-internal-sync',
     'arguments': {'device': 'o1', 'name': 't2'}},
    {'execute': 'blockdev-snapshot-internal-sync',
     'arguments': {'device': 's2', 'name': 'top'}},
    {'execute': 'blockdev-snapshot-delete-internal-sync',
     'arguments': {'device': 's2', 'name': 'top'}},
    {'execute': 'blockdev-del', 'arguments': {'node-name': 'o1'}},
    ('io', 'read -P 1 0 1M', 'read -P 2 1M 1M', 'read -P 3 2M 1M',
     'read -P 4 3M 1M', 'read -P 5 4M 1M', 'read -P 0 5M 1M'),
    # copy-before-write over m0 (32M by now), into t0
    {'execute': 'block-export-add',
     'arguments': {'type': 'nbd', 'id': 'e1', 'node-name': 'm0',
                   'writable': True}},
    ('io@m0', 'write -P 6 0 2M', 'write -P 7 4M 64k'),
    {'execute': 'block-export-del', 'arguments': {'id': 'e1'}},
    {'execute': 'blockdev-add',
     'arguments': {'driver': 'qcow2', 'node-name': 't0',
                   'file': {'driver': 'file', 'filename': 'DIR/t.qcow2'}}},
    {'execute': 'blockdev-add',
     'arguments': {'driver': 'copy-before-write', 'node-name': 'c0',
                   'file': 'm0', 'target': 'zz'}},
    {'execute': 'blockdev-add',
     'arguments': {'driver': 'copy-before-write', 'node-name': 'c0',
                   'file': 'm0', 'target': 't0', 'on-cbw-error': 'bogus'}},
    {'execute': 'blockdev-add',
     'arguments': {'driver': 'copy-before-write', 'node-name': 'c0',
                   'file': 'm0', 'target': 't0',
                   'bitmap': {'node': 'm0', 'name': 'b0'}}},
    {'execute': 'blockdev-add',
     'arguments': {'driver': 'copy-before-write', 'node-name': 'c0',
                   'file': 'm0', 'target': 't0',
                   'on-cbw-error': 'break-guest-write', 'cbw-timeout': 30}},
    {'execute': 'block-export-add',
     'arguments': {'type': 'nbd', 'id': 'e2', 'node-name': 'c0',
                   'writable': True}},
    {'execute': 'blockdev-add',
     'arguments': {'driver': 'snapshot-access', 'node-name': 'sa0',
                   'file': 'c0'}},
    {'execute': 'block-export-add',
     'arguments': {'type': 'nbd', 'id': 'e3', 'node-name': 'sa0'}},
    ('io@c0', 'write -P 8 4k 4k', 'write -P 9 1M 64k', 'write -z 4M 8k',
     'write -P 10 70k 4k', 'write -P 11 8M 1k', 'read -P 8 4k 4k'),
    # the snapshot reads as m0 was when c0 was added
    ('ior@sa0', 'read -P 6 0 2M', 'read -P 0 2M 2M', 'read -P 7 4M 64k',
     'read -P 0 8M 64k'),
    {'execute': 'block-export-del', 'arguments': {'id': 'e3'}},
    {'execute': 'blockdev-del', 'arguments': {'node-name': 'sa0'}},
    {'execute': 'block-export-del', 'arguments': {'id': 'e2'}},
    {'execute': 'blockdev-del', 'arguments': {'node-name': 'c0'}},
    {'execute': 'blockdev-del', 'arguments': {'node-name': 't0'}},
]

passed = failed = 0


def check(what, cond, detail=''):
    global passed, failed
    if cond:
        passed += 1
        print('ok %s' % what)
    else:
        failed += 1
        print('FAIL %s%s' % (what, ': ' + str(detail) if detail else ''))


def subst(obj, d):
    """The script's DIR placeholders, made @d."""
    return json.loads(json.dumps(obj).replace('DIR', d))


def normalize(obj, d):
    """What may differ between runs: the directory, times, ids, the order
    of members (JSON objects are compared as dicts)."""
    text = json.dumps(obj).replace(d, 'DIR')
    obj = json.loads(text)

    def walk(o):
        if isinstance(o, dict):
            for k in ('timestamp', 'date-sec', 'date-nsec', 'vm-clock-sec',
                      'vm-clock-nsec', 'id'):
                if k in o and k != 'id' or (k == 'id' and 'date-sec' in o):
                    o[k] = k.upper()
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(obj)
    return obj


def io_output(out):
    """qemu-io's output without its timings."""
    return [line.split(';')[0] for line in out.splitlines()
            if not line.startswith('Formatting')]


def run_daemon(binary, d):
    """Runs SCRIPT against @binary in directory @d; returns the
    normalized transcript."""
    subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2',
                    os.path.join(d, 'a.qcow2'), '64M'], check=True)
    subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2',
                    os.path.join(d, 'b.qcow2'), '64M'], check=True)
    subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2',
                    os.path.join(d, 't.qcow2'), '32M'], check=True)
    subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', '-F', 'qcow2',
                    '-b', os.path.join(d, 's1.qcow2'), '-u',
                    os.path.join(d, 'o.qcow2'), '64M'], check=True)
    qmp_path = os.path.join(d, 'qmp.sock')
    nbd_path = os.path.join(d, 'nbd.sock')
    args = [binary,
            '--chardev', 'socket,id=q,path=%s,server=on,wait=off' % qmp_path,
            '--monitor', 'chardev=q',
            '--blockdev', 'driver=file,node-name=f0,filename=%s/a.qcow2' % d,
            '--blockdev', 'driver=qcow2,node-name=n0,file=f0',
            '--blockdev', 'driver=file,node-name=mf,filename=%s/b.qcow2' % d,
            '--blockdev', 'driver=qcow2,node-name=m0,file=mf',
            '--nbd-server', 'addr.type=unix,addr.path=%s' % nbd_path,
            '--export', 'type=nbd,id=e0,node-name=n0,writable=on']
    with open(os.path.join(d, 'daemon.log'), 'wb') as log:
        p = subprocess.Popen(args, cwd=d, stdout=log, stderr=log)
    transcript = []
    try:
        if not qsd.wait_for(lambda: os.path.exists(qmp_path)):
            raise RuntimeError('%s did not start' % binary)
        c = qsd.QmpClient(qmp_path)
        c.negotiate()
        uri = qsd.nbd_uri(nbd_path, 'n0')
        for step in SCRIPT:
            if isinstance(step, tuple):
                cmd = ['qemu-io', '-f', 'raw', '-t', 'writeback'] + \
                    (['-r'] if step[0].startswith('ior@') else [])
                for s in step[1:]:
                    cmd += ['-c', s]
                target = uri if step[0] == 'io' else \
                    qsd.nbd_uri(nbd_path, step[0].split('@')[1])
                r = subprocess.run(cmd + [target], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True,
                                   timeout=qsd.TIMEOUT * 2)
                transcript.append((list(step[1:]), io_output(r.stdout)))
                continue
            req = subst(step, d)
            reply = c.cmd(req['execute'], req.get('arguments'))
            # a qemu-io client that just exited may not have been seen to
            # go yet (either daemon, more often under load): what is
            # compared is the reply once it has
            tries = 0
            while req['execute'] == 'block-export-del' and \
                    'still in use' in str(reply) and tries < 50:
                time.sleep(0.1)
                tries += 1
                reply = c.cmd(req['execute'], req.get('arguments'))
            transcript.append((step, normalize(reply, d)))
        events = [normalize(e, d) for e in c.events]
        transcript.append(('events', events))
        c.ok('quit')
        c.close()
        p.wait(timeout=qsd.TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return transcript


def img_info(path, d):
    r = subprocess.run(['qemu-img', 'info', '--output=json', path],
                       stdout=subprocess.PIPE, text=True)
    info = json.loads(r.stdout.replace(d, 'DIR'))
    return {k: info.get(k) for k in ('virtual-size', 'backing-filename',
                                     'backing-filename-format')}, \
        [s['name'] for s in info.get('snapshots', [])]


def img_map(path):
    """What is allocated in the image itself (not where)."""
    r = subprocess.run(['qemu-img', 'map', '--output=json', path],
                       stdout=subprocess.PIPE, text=True)
    return [(e['start'], e['length'], e['depth'], e['zero'], e['data'])
            for e in json.loads(r.stdout) if e['depth'] == 0]


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else 'build')
    ours = os.path.join(build, 'qblock-storage-daemon')
    if not shutil.which('qemu-storage-daemon') or \
            not shutil.which('qemu-img'):
        print('qemu-storage-daemon or qemu-img is not installed')
        sys.exit(77)
    work = os.path.join(os.environ.get('TMPDIR', '/tmp'),
                        'daemon-ops-vs-qsd.%d' % os.getpid())
    dq, do = os.path.join(work, 'qsd'), os.path.join(work, 'qblock')
    os.makedirs(dq)
    os.makedirs(do)
    tq = run_daemon('qemu-storage-daemon', dq)
    to = run_daemon(ours, do)
    check('both ran the whole script', len(tq) == len(to),
          '%d and %d steps' % (len(tq), len(to)))
    for (step, rq), (_, ro) in zip(tq, to):
        if os.environ.get('V'):
            print('  %s\n    -> %s' % (json.dumps(step)[:200], rq))
        check('%s: same reply' % json.dumps(step)[:150], rq == ro,
              'qsd %r, qblock %r' % (rq, ro))
    for name in IMAGES:
        a, b = os.path.join(dq, name), os.path.join(do, name)
        r = subprocess.run(['qemu-img', 'compare', a, b],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        check('%s: qemu-img compare' % name, r.returncode == 0, r.stdout)
        check('%s: same size, backing file and snapshots' % name,
              img_info(a, dq) == img_info(b, do),
              '%r, %r' % (img_info(a, dq), img_info(b, do)))
        check('%s: the same clusters allocated' % name,
              img_map(a) == img_map(b), '%r, %r' % (img_map(a), img_map(b)))
        r = subprocess.run(['qemu-img', 'check', b], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        check('%s: qemu-img check' % name, r.returncode == 0, r.stdout)
    if not failed:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print('(files kept in %s)' % work)
    print('%d passed, %d failed, 0 skipped' % (passed, failed))
    sys.exit(1 if failed else 0)


main()
