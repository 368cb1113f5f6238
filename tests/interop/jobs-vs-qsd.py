#!/usr/bin/env python3
"""Jobs against the real qemu-storage-daemon: each scenario is one QMP
script run against QEMU 7.2's daemon and against ours, each in a
directory of its own prepared the same way (with the real qemu-img and
qemu-io).  The replies and the events must match once paths, timestamps
and (where a scenario says so) progress figures are filtered; then the
images each daemon left are compared with the real `qemu-img compare`
and must pass the real `qemu-img check`.

    jobs-vs-qsd.py BUILD_DIR
Prints "N passed, N failed, N skipped" last; exits 77 when
qemu-storage-daemon is not installed.  Names of scenarios after BUILD_DIR
run only those.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'daemon'))
from qsd import QmpClient, wait_for  # noqa: E402

TIMEOUT = 60
PROGRESS = ('len', 'offset', 'current-progress', 'total-progress')


class Run:
    """One daemon running one scenario in directory @d."""

    def __init__(self, binary, d):
        self.d = d
        self.replies = []
        self.events = []
        sock = os.path.join(d, 'qmp.sock')
        self.proc = subprocess.Popen(
            [binary, '--chardev',
             'socket,id=m0,path=%s,server=on,wait=off' % sock,
             '--monitor', 'chardev=m0'], cwd=d,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if not wait_for(lambda: os.path.exists(sock) or
                        self.proc.poll() is not None):
            raise RuntimeError('%s: no QMP socket' % binary)
        self.qmp = QmpClient(sock)
        self.qmp.negotiate()

    def cmd(self, name, args):
        r = self.qmp.cmd(name, args)
        # a qemu-io client that just exited may not have been seen to go
        # yet (either daemon, more often under load), and the export
        # would stay: what is compared is the reply once it has gone
        for _ in range(50):
            if name != 'block-export-del' or \
                    'still in use' not in str(r.get('error', '')):
                break
            time.sleep(0.1)
            r = self.qmp.cmd(name, args)
        self.replies.append((name, r))
        self._take_events()

    def _take_events(self):
        self.events += self.qmp.events
        self.qmp.events = []

    def wait(self, job, status):
        """Reads events until JOB_STATUS_CHANGE of @job to @status."""
        end = time.monotonic() + TIMEOUT
        while time.monotonic() < end:
            for e in self.events:
                if e['event'] == 'JOB_STATUS_CHANGE' and \
                        e['data'] == {'id': job, 'status': status}:
                    return True
            msg = self.qmp.recv(end - time.monotonic())
            if msg is None:
                break
            if 'event' in msg:
                self.events.append(msg)
        raise RuntimeError('job %s never reached %s' % (job, status))

    def nodes(self):
        """query-named-block-nodes, as the graph's shape: each node's
        name (automatic ones as '#block'), driver and read-only flag."""
        r = self.qmp.cmd('query-named-block-nodes', {'flat': True})
        shape = sorted([re.sub(r'^#block\d+$', '#block', n['node-name']),
                        n['drv'], n['ro']] for n in r.get('return', []))
        self.replies.append(('query-named-block-nodes', shape))
        self._take_events()

    def wait_event(self, name, data):
        """Reads events until @name with @data (the events stay recorded)."""
        end = time.monotonic() + TIMEOUT
        while time.monotonic() < end:
            if any(e['event'] == name and e.get('data') == data
                   for e in self.events):
                return True
            msg = self.qmp.recv(end - time.monotonic())
            if msg is None:
                break
            if 'event' in msg:
                self.events.append(msg)
        raise RuntimeError('no event %s %r' % (name, data))

    def quit(self):
        self.qmp.cmd('quit')
        self.proc.wait(timeout=TIMEOUT)
        self.qmp.close()


def normalise(value, d, progress):
    if isinstance(value, dict):
        return {k: ('N' if progress and k in PROGRESS else
                    normalise(v, d, progress))
                for k, v in value.items() if k != 'timestamp'}
    if isinstance(value, (list, tuple)):
        return [normalise(v, d, progress) for v in value]
    if isinstance(value, str):
        # automatic node names count differently in the two daemons
        value = value.replace(d, '$DIR')
        value = value.replace('-' + os.path.basename(d), '-$RUN')
        return re.sub(r"'#block\d+'", "'#block'", value)
    return value


DAEMON_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            '..', 'daemon')


def sh(d, line):
    """Runs @line in @d; $TESTS is tests/daemon (its helpers)."""
    p = subprocess.run(line.replace('$TESTS', DAEMON_TESTS), shell=True,
                       cwd=d, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if p.returncode:
        raise RuntimeError('%s: exit %d: %s' % (line, p.returncode,
                                                p.stderr.decode()[-1000:]))


def substitute(value, d):
    if isinstance(value, dict):
        return {k: substitute(v, d) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, d) for v in value]
    if isinstance(value, str):
        # $RUN: the daemon's label (qemu, qblock), for names outside $DIR
        return value.replace('$DIR', d).replace('$RUN', os.path.basename(d))
    return value


def run_scenario(binary, d, steps):
    run = None
    try:
        run = run_steps(binary, d, steps)
    except Exception:
        # a daemon left running would outlive the suite
        if run_steps.current and run_steps.current.proc.poll() is None:
            run_steps.current.proc.kill()
        raise
    return run


def run_steps(binary, d, steps):
    run = run_steps.current = None
    for step in steps:
        if step[0] == 'sh':
            sh(d, step[1])
        elif step[0] == 'start':
            run = run_steps.current = Run(binary, d)
        elif step[0] == 'qmp':
            run.cmd(step[1], substitute(step[2], d) if len(step) > 2
                    else None)
        elif step[0] == 'wait':
            run.wait(step[1], step[2])
        elif step[0] == 'event':
            run.wait_event(step[1], step[2])
        elif step[0] == 'sleep':
            time.sleep(step[1])
        elif step[0] == 'nodes':
            run.nodes()
        elif step[0] == 'call':
            step[1](run)
    run.quit()
    return run


run_steps.current = None


class Tests:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def check(self, what, cond, detail=''):
        if cond:
            self.passed += 1
            print('ok %s' % what)
        else:
            self.failed += 1
            print('FAIL %s%s' % (what, '\n' + detail if detail else ''))


def diff_lists(a, b):
    out = []
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x != y:
            out.append('  qemu:   %s\n  qblock: %s' % (json.dumps(x),
                                                       json.dumps(y)))
    return '\n'.join(out)


def is_pause(event):
    """A pause (and its resume) of a running job by a drained section."""
    return event['event'] == 'JOB_STATUS_CHANGE' and \
        event['data']['status'] in ('paused', 'running')


def job_of(event):
    """The job an event is about ('' for none): the key that keeps each
    job's events in order when a scenario's jobs may interleave."""
    data = event.get('data') or {}
    return str(data.get('id', data.get('device', '')))


def vmdk_without_cids(data):
    """A VMDK file with its descriptor's CIDs masked: random, and of 7 or
    8 digits, so that an embedded descriptor's padding differs too."""
    def mask(text):
        return re.sub(rb'CID=[0-9a-f]+', b'CID=X', text)
    if data[:4] != b'KDMV':
        return mask(data)
    # the hosted sparse header: descriptor offset and size, in sectors
    start = int.from_bytes(data[28:36], 'little') * 512
    end = start + int.from_bytes(data[36:44], 'little') * 512
    return (data[:start] + mask(data[start:end].split(b'\0')[0]) +
            data[end:])


def vdi_without_uuids(data):
    """A VDI file with the image and modification UUIDs (bytes 0x188 to
    0x1a7) masked: random in both tools."""
    return data[:0x188] + bytes(32) + data[0x1a8:]


def qemu_flaked(label, run):
    """QEMU 7.2 sometimes fails to calibrate PBKDF2 on a loaded machine
    (it times its calibration with the thread's CPU ticks, which a thread
    that shares its CPU may not get): its bug, so its run is retried."""
    return (label == 'qemu' and
            'Unable to get accurate CPU usage' in json.dumps(run.replies))


def compare(tests, name, scenario, build, top):
    ours = os.path.join(build, 'qblock-storage-daemon')
    progress = scenario.get('filter_progress', False)
    runs = {}
    for label, binary in (('qemu', 'qemu-storage-daemon'), ('qblock', ours)):
        d = os.path.join(top, name, label)
        for attempt in range(10):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            runs[label] = (d, run_scenario(binary, d, scenario['steps']))
            if not qemu_flaked(label, runs[label][1]):
                break
            time.sleep(1)
    (dq, rq), (db, rb) = runs['qemu'], runs['qblock']
    rep_q = normalise(rq.replies, dq, progress)
    rep_b = normalise(rb.replies, db, progress)
    # where qblock's message is better on purpose, or differs for a
    # reason docs/jobs.md gives (the scenario says which)
    for key in ('better_messages', 'differing_messages'):
        for ours, qemu in scenario.get(key, {}).items():
            rep_b = json.loads(json.dumps(rep_b).replace(ours, qemu))
    tests.check('%s: replies' % name, rep_q == rep_b,
                diff_lists(rep_q, rep_b))
    ev_q = normalise(rq.events, dq, progress)
    ev_b = normalise(rb.events, db, progress)
    if scenario.get('ignore_pauses'):
        ev_q, ev_b = ([e for e in ev if not is_pause(e)]
                      for ev in (ev_q, ev_b))
    # events a scenario says differ on purpose (it says why)
    drop = scenario.get('drop_events', [])
    ev_q = [e for e in ev_q if [e['event'], e.get('data')] not in drop]
    ev_b = [e for e in ev_b if [e['event'], e.get('data')] not in drop]
    # jobs that run side by side finish in either order: compare each
    # job's own sequence of events, not how the jobs' interleave
    if scenario.get('per_job_order'):
        ev_q, ev_b = (sorted(ev, key=job_of) for ev in (ev_q, ev_b))
    tests.check('%s: events' % name, ev_q == ev_b, diff_lists(ev_q, ev_b))
    for f in scenario.get('same_files', []):
        with open(os.path.join(dq, f)) as a, open(os.path.join(db, f)) as b:
            fa, fb = a.read(), b.read()
        tests.check('%s: %s is the same' % (name, f), fa == fb,
                    'qemu:   %s\n  qblock: %s' % (fa, fb))
    # VMDK files alike byte for byte but for the descriptor's random CIDs
    for f in scenario.get('same_vmdk', []):
        fa, fb = (vmdk_without_cids(open(os.path.join(x, f), 'rb').read())
                  for x in (dq, db))
        tests.check('%s: %s is the same' % (name, f), fa == fb,
                    '%d bytes against %d' % (len(fa), len(fb)))
    # VDI files alike byte for byte but for their random UUIDs
    for f in scenario.get('same_vdi', []):
        fa, fb = (vdi_without_uuids(open(os.path.join(x, f), 'rb').read())
                  for x in (dq, db))
        tests.check('%s: %s is the same' % (name, f), fa == fb,
                    '%d bytes against %d' % (len(fa), len(fb)))
    # files alike byte for byte (qed, parallels and qcow have nothing
    # random in them)
    for f in scenario.get('same_bytes', []):
        fa, fb = (open(os.path.join(x, f), 'rb').read() for x in (dq, db))
        tests.check('%s: %s is the same' % (name, f), fa == fb,
                    '%d bytes against %d' % (len(fa), len(fb)))
    # VHDX files alike but for what QEMU makes random (vhdx-same.py)
    for f in scenario.get('same_vhdx', []):
        p = subprocess.run([sys.executable,
                            os.path.join(os.path.dirname(
                                os.path.abspath(__file__)), 'vhdx-same.py'),
                            os.path.join(dq, f), os.path.join(db, f)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        tests.check('%s: %s is the same' % (name, f), p.returncode == 0,
                    p.stdout.decode())
    # where qblock does better than QEMU (the scenario says why)
    for what, line in scenario.get('qblock_after', []):
        p = subprocess.run(line, shell=True, cwd=db, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        tests.check('%s: %s' % (name, what), p.returncode == 0,
                    p.stdout.decode())
    for what, line in scenario.get('after', []):
        for label, d in (('qemu', dq), ('qblock', db)):
            p = subprocess.run(line.replace('$TESTS', DAEMON_TESTS)
                               .replace('$RUN', label),
                               shell=True, cwd=d, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            tests.check('%s: %s (%s)' % (name, what, label),
                        p.returncode == 0, p.stdout.decode())
    for img in scenario.get('images', []):
        a, b = (image_args(scenario, img, x) for x in (dq, db))
        # (a LUKS payload never written reads as what zeroes decrypt to
        # under the image's own random key)
        if not img.endswith('.luks'):
            p = subprocess.run(['qemu-img', 'compare'] + a + b[-1:],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            tests.check('%s: %s compares identical' % (name, img),
                        p.returncode == 0, p.stdout.decode())
        if img.endswith(('.qcow2', '.vmdk', '.vdi', '.qed')):
            p = subprocess.run(['qemu-img', 'check'] + b,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            tests.check('%s: %s passes qemu-img check' % (name, img),
                        p.returncode == 0, p.stdout.decode())
        for key in scenario.get('info_keys', []):
            infos = []
            for args, d in ((a, dq), (b, db)):
                out = subprocess.run(['qemu-img', 'info', '-U',
                                      '--output=json'] + args,
                                     stdout=subprocess.PIPE).stdout
                info = normalise(json.loads(out).get(key), d, False)
                infos.append(drop_keys(info, scenario.get('info_drop', [])))
            tests.check('%s: %s %s' % (name, img, key), infos[0] == infos[1],
                        'qemu %r, qblock %r' % tuple(infos))


SECRET = 'secret,id=sec0,data=foo'


def image_args(scenario, img, d):
    """qemu-img's arguments for image @img of directory @d: its path, or
    the secret and image options of an encrypted one (image_opts)."""
    path = os.path.join(d, img)
    opts = scenario.get('image_opts', {}).get(img)
    if opts is None:
        return [path]
    return ['--object', SECRET, '--image-opts', opts + path]


def drop_keys(value, keys):
    """@value without the members named @keys, at any depth: what is
    random by nature (a VMDK's CIDs, a LUKS header's UUID and the
    iteration counts that its benchmark sets)."""
    if isinstance(value, dict):
        return {k: drop_keys(v, keys) for k, v in value.items()
                if k not in keys}
    if isinstance(value, list):
        return [drop_keys(v, keys) for v in value]
    return value


# ---------------------------------------------------------------------------
# The scenarios

def node(name, filename, backing=None, fmt='qcow2'):
    opts = {'driver': fmt, 'node-name': name,
            'file': {'driver': 'file', 'filename': '$DIR/' + filename}}
    if backing is not None:
        opts['backing'] = backing
    return ('qmp', 'blockdev-add', opts)


CREATE = {
    'steps': [
        ('sh', 'qemu-img create -q -f raw base.img 64M'),
        ('start',),
        ('qmp', 'blockdev-create', {'job-id': 'c1', 'options': {
            'driver': 'file', 'filename': '$DIR/a.qcow2', 'size': 0}}),
        ('wait', 'c1', 'concluded'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-dismiss', {'id': 'c1'}),
        ('qmp', 'blockdev-add', {'driver': 'file', 'node-name': 'fa',
                                 'filename': '$DIR/a.qcow2'}),
        ('qmp', 'blockdev-create', {'job-id': 'c2', 'options': {
            'driver': 'qcow2', 'file': 'fa', 'size': 64 << 20,
            'cluster-size': 16384, 'lazy-refcounts': True,
            'refcount-bits': 8, 'extended-l2': True,
            'backing-file': 'base.img', 'backing-fmt': 'raw'}}),
        ('wait', 'c2', 'concluded'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-dismiss', {'id': 'c2'}),
        ('qmp', 'blockdev-create', {'job-id': 'c3', 'options': {
            'driver': 'file', 'filename': '$DIR/b.qcow2', 'size': 0}}),
        ('wait', 'c3', 'concluded'),
        ('qmp', 'job-dismiss', {'id': 'c3'}),
        ('qmp', 'blockdev-add', {'driver': 'file', 'node-name': 'fb',
                                 'filename': '$DIR/b.qcow2'}),
        ('qmp', 'blockdev-create', {'job-id': 'c4', 'options': {
            'driver': 'qcow2', 'file': 'fb', 'size': 1 << 30,
            'version': 'v2', 'preallocation': 'metadata'}}),
        ('wait', 'c4', 'concluded'),
        ('qmp', 'job-dismiss', {'id': 'c4'}),
        # failures: in the job, and before it
        ('qmp', 'blockdev-create', {'job-id': 'c5', 'options': {
            'driver': 'qcow2', 'file': 'nonexistent', 'size': 1 << 20}}),
        ('wait', 'c5', 'concluded'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-dismiss', {'id': 'c5'}),
        ('qmp', 'blockdev-create', {'job-id': 'c6', 'options': {
            'driver': 'qcow2', 'file': 'fb', 'size': 1 << 20,
            'cluster-size': 1000}}),
        ('wait', 'c6', 'concluded'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-dismiss', {'id': 'c6'}),
        ('qmp', 'blockdev-create', {'job-id': 'c7', 'options': {
            'driver': 'qcow2', 'file': 'fb', 'size': 1 << 20,
            'version': 'v2', 'lazy-refcounts': True}}),
        ('wait', 'c7', 'concluded'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-dismiss', {'id': 'c7'}),
        ('qmp', 'blockdev-create', {'job-id': 'c8', 'options': {
            'driver': 'raw'}}),
        ('qmp', 'blockdev-create', {'job-id': '8c', 'options': {
            'driver': 'file', 'filename': '$DIR/x', 'size': 0}}),
        ('qmp', 'blockdev-create', {'job-id': 'c9', 'options': {
            'driver': 'file', 'size': 0}}),
        ('qmp', 'job-dismiss', {'id': 'nope'}),
        ('qmp', 'job-cancel', {'id': 'nope'}),
        ('qmp', 'block-job-cancel', {'device': 'nope'}),
        ('qmp', 'query-jobs'),
    ],
    'images': ['a.qcow2', 'b.qcow2'],
    'info_keys': ['format-specific', 'backing-filename', 'cluster-size'],
}


def create_vmdk_job(job, **options):
    options['driver'] = 'vmdk'
    return [('qmp', 'blockdev-create', {'job-id': job, 'options': options}),
            ('wait', job, 'concluded'),
            ('qmp', 'query-jobs'),
            ('qmp', 'job-dismiss', {'id': job})]


def file_nodes(files):
    """For each of @files: blockdev-create of an empty file, then a file
    node named after it, less its extension."""
    return [step for i, f in enumerate(files) for step in (
        ('qmp', 'blockdev-create', {'job-id': 'f%d' % i, 'options': {
            'driver': 'file', 'filename': '$DIR/' + f, 'size': 0}}),
        ('wait', 'f%d' % i, 'concluded'),
        ('qmp', 'job-dismiss', {'id': 'f%d' % i}),
        ('qmp', 'blockdev-add', {'driver': 'file',
                                 'node-name': f.rsplit('.', 1)[0],
                                 'filename': '$DIR/' + f}))]


VMDK_FILES = ['a.vmdk', 'b.vmdk', 'c.vmdk', 's1.vmdk', 's2.vmdk', 'd.vmdk',
              'f1.vmdk', 'f2.vmdk', 'g.vmdk', 'h.vmdk', 's3.vmdk', 'i.vmdk']

# Every subformat, on nodes the daemon creates and adds, and the errors;
# the files must be qemu-img's but for the CIDs.  junk.vmdk held data:
# QEMU's daemon leaves it in the new grain tables (qemu-img check then
# fails: "cluster offset for sector 0 points after EOF"), qblock's empties
# the node first.
CREATE_VMDK = {
    'steps': [
        ('sh', 'qemu-img create -q -f vmdk base.vmdk 1M && '
               'head -c 300000 /dev/urandom > junk.vmdk && '
               'head -c 3000000 /dev/urandom > x.img && '
               'head -c 1M x.img | sha256sum > x.sum'),
        ('start',),
    ] + file_nodes(VMDK_FILES) + [
        ('qmp', 'blockdev-add', {'driver': 'file', 'node-name': 'junk',
                                 'filename': '$DIR/junk.vmdk'}),
    ] + create_vmdk_job('j1', file='a', size=64 << 20)
      + create_vmdk_job('j2', file='b', size=64 << 20,
                        subformat='streamOptimized', hwversion='6',
                        toolsversion='123', **{'adapter-type': 'lsilogic'})
      + create_vmdk_job('j3', file='c', size=3 << 30,
                        subformat='twoGbMaxExtentSparse',
                        extents=['s1', 's2'], **{'zeroed-grain': True})
      + create_vmdk_job('j4', file='d', size=(3 << 30) + 512,
                        subformat='twoGbMaxExtentFlat',
                        extents=['f1', 'f2'], **{'adapter-type': 'buslogic'})
      + create_vmdk_job('j5', file='g', size=1 << 20,
                        **{'backing-file': 'base.vmdk'})
      + create_vmdk_job('j6', file='i', size=1 << 20,
                        subformat='monolithicFlat',
                        extents=[{'driver': 'file',
                                  'filename': '$DIR/x.img'}])
      + create_vmdk_job('j7', file='junk', size=1 << 20)
      # failures: in the job, and before it
      + create_vmdk_job('e1', file='h', size=3 << 30,
                        subformat='twoGbMaxExtentSparse', extents=['s3'])
      + create_vmdk_job('e2', file='h', size=1 << 20,
                        subformat='monolithicFlat')
      + create_vmdk_job('e3', file='h', size=1 << 20,
                        subformat='twoGbMaxExtentFlat', extents=['s3'],
                        **{'backing-file': 'base.vmdk'})
      + create_vmdk_job('e4', file='h', size=1000)
      + create_vmdk_job('e5', file='h', size=1 << 20,
                        **{'backing-file': '$DIR/none.vmdk'})
      + create_vmdk_job('e6', file='h', size=1 << 20,
                        extents=['s3'], **{'zeroed-grain': True,
                                           'backing-file': 'x.img'})
      + create_vmdk_job('e7', file='nonexistent', size=1 << 20) + [
        ('qmp', 'blockdev-create', {'job-id': 'e8', 'options': {
            'driver': 'vmdk', 'file': 'h', 'size': 1 << 20,
            'adapter-type': 'scsi'}}),
        ('qmp', 'blockdev-create', {'job-id': 'e9', 'options': {
            'driver': 'vmdk', 'file': 'h', 'size': 1 << 20,
            'subformat': 'monolithic'}}),
        ('qmp', 'query-jobs'),
    ],
    # (i.vmdk's flat extent, x.img, is random data made in each directory)
    'images': ['a.vmdk', 'b.vmdk', 'c.vmdk', 'd.vmdk', 'g.vmdk'],
    'info_drop': ['cid', 'parent-cid'],
    'same_vmdk': ['a.vmdk', 'b.vmdk', 'c.vmdk', 's1.vmdk', 's2.vmdk',
                  'd.vmdk', 'g.vmdk', 'i.vmdk'],
    'info_keys': ['format-specific', 'backing-filename', 'virtual-size'],
    'qblock_after': [
        ('junk.vmdk passes qemu-img check', 'qemu-img check junk.vmdk'),
    ],
    'after': [
        ('x.img keeps its data as a flat extent',
         'test $(stat -c %s x.img) = 1048576 && sha256sum < x.img | '
         'cmp - x.sum'),
    ],
}

LUKS_FILES = ['a.luks', 'b.luks', 'c.qcow2', 'e.qcow2', 'd.luks',
              'f.qcow2']
LUKS_OPTS = 'driver=luks,key-secret=sec0,file.filename='
QCOW2_CRYPT_OPTS = 'driver=qcow2,encrypt.key-secret=sec0,file.filename='


def create_job(job, **options):
    return [('qmp', 'blockdev-create', {'job-id': job, 'options': options}),
            ('wait', job, 'concluded'),
            ('qmp', 'query-jobs'),
            ('qmp', 'job-dismiss', {'id': job})]


VDI_FILES = ['a.vdi', 'b.vdi', 'c.vdi', 'd.vdi', 'h.vdi']

# Dynamic and static (preallocation=metadata), an odd size, a node that
# held data, and the errors; the files must be qemu-img's but for the
# UUIDs.  junk.vdi held data: QEMU's daemon writes the image over it and
# leaves the rest (never read: blocks are written whole), qblock's
# empties the node first, so only the disks are compared.
CREATE_VDI = {
    'steps': [
        ('sh', 'head -c 3000000 /dev/urandom > junk.vdi'),
        ('start',),
    ] + file_nodes(VDI_FILES) + [
        ('qmp', 'blockdev-add', {'driver': 'file', 'node-name': 'junk',
                                 'filename': '$DIR/junk.vdi'}),
    ] + create_job('j1', driver='vdi', file='a', size=64 << 20)
      + create_job('j2', driver='vdi', file='b', size=5 << 20,
                   preallocation='metadata')
      + create_job('j3', driver='vdi', file='c', size=1000)
      + create_job('j4', driver='vdi', file='d', size=3 << 20,
                   preallocation='off')
      + create_job('j5', driver='vdi', file='junk', size=1 << 20)
      # failures: in the job, and before it
      + create_job('e1', driver='vdi', file='h', size=1 << 20,
                   preallocation='full')
      + create_job('e2', driver='vdi', file='h', size=0x1fffff8000001)
      + create_job('e3', driver='vdi', file='nonexistent', size=1 << 20)
      + [
        ('qmp', 'blockdev-create', {'job-id': 'e4', 'options': {
            'driver': 'vdi', 'file': 'h', 'size': 1 << 20,
            'static': True}}),
        ('qmp', 'query-jobs'),
    ],
    'images': ['a.vdi', 'b.vdi', 'c.vdi', 'd.vdi', 'junk.vdi'],
    'same_vdi': ['a.vdi', 'b.vdi', 'c.vdi', 'd.vdi', 'h.vdi'],
    'info_keys': ['virtual-size', 'cluster-size'],
}

QED_FILES = ['a.qed', 'b.qed', 'c.qed', 'd.qed', 'h.qed']

# Default and small clusters and tables, backing files (raw, recorded as
# such, and qcow2, only named), a node that held data (emptied first by
# both daemons), and the errors: QEMU's checks in the job (a size no
# sector, bad cluster and table sizes, a size past the tables' reach), a
# missing node, a backing format that is no driver.  The files must be
# qemu's byte for byte.
CREATE_QED = {
    'steps': [
        ('sh', 'head -c 3000000 /dev/urandom > junk.qed'),
        ('start',),
    ] + file_nodes(QED_FILES) + [
        ('qmp', 'blockdev-add', {'driver': 'file', 'node-name': 'junk',
                                 'filename': '$DIR/junk.qed'}),
    ] + create_job('j1', driver='qed', file='a', size=64 << 20)
      + create_job('j2', driver='qed', file='b', size=5 << 20,
                   **{'cluster-size': 4096, 'table-size': 2})
      + create_job('j3', driver='qed', file='c', size=1 << 20,
                   **{'backing-file': 'base.raw', 'backing-fmt': 'raw'})
      + create_job('j4', driver='qed', file='d', size=3 << 20,
                   **{'backing-file': 'x.qcow2', 'backing-fmt': 'qcow2',
                      'cluster-size': 1 << 20})
      + create_job('j5', driver='qed', file='junk', size=1 << 20)
      # failures: in the job, and before it
      + create_job('e1', driver='qed', file='h', size=1000)
      + create_job('e2', driver='qed', file='h', size=1 << 20,
                   **{'cluster-size': 1000})
      + create_job('e3', driver='qed', file='h', size=1 << 20,
                   **{'table-size': 3})
      + create_job('e4', driver='qed', file='h', size=1 << 50,
                   **{'cluster-size': 4096})
      + create_job('e5', driver='qed', file='nonexistent', size=1 << 20)
      + [
        ('qmp', 'blockdev-create', {'job-id': 'e6', 'options': {
            'driver': 'qed', 'file': 'h', 'size': 1 << 20,
            'backing-file': 'b', 'backing-fmt': 'nonsense'}}),
        ('qmp', 'query-jobs'),
    ],
    'images': ['a.qed', 'b.qed', 'junk.qed'],
    'same_bytes': ['a.qed', 'b.qed', 'c.qed', 'd.qed', 'h.qed', 'junk.qed'],
    'info_keys': ['virtual-size', 'cluster-size', 'format'],
}

QCOW_FILES = ['a.qcow', 'b.qcow', 'c.qcow', 'd.qcow', 'h.qcow']

# qcow (version 1): plain, with a backing file (512-byte clusters), an
# odd size (kept as it is, unlike qemu-img create's), encrypted with the
# legacy AES method, and QEMU's refusals; nothing in the files is random.
CREATE_QCOW = {
    'steps': [
        ('start',),
        ('qmp', 'object-add', {'qom-type': 'secret', 'id': 'sec0',
                               'data': 'passw0rd'}),
    ] + [step for i, f in enumerate(QCOW_FILES) for step in (
        ('qmp', 'blockdev-create', {'job-id': 'f%d' % i, 'options': {
            'driver': 'file', 'filename': '$DIR/' + f, 'size': 0}}),
        ('wait', 'f%d' % i, 'concluded'),
        ('qmp', 'job-dismiss', {'id': 'f%d' % i}),
        ('qmp', 'blockdev-add', {'driver': 'file', 'node-name': f[:-5],
                                 'filename': '$DIR/' + f}))
    ] + create_job('j1', driver='qcow', file='a', size=64 << 20)
      + create_job('j2', driver='qcow', file='b', size=5 << 20,
                   **{'backing-file': 'a.qcow'})
      + create_job('j3', driver='qcow', file='c', size=1000)
      + create_job('j4', driver='qcow', file='d', size=3 << 20,
                   encrypt={'format': 'qcow', 'key-secret': 'sec0'})
      # failures: in the job, and before it
      + create_job('e1', driver='qcow', file='h', size=0)
      + create_job('e2', driver='qcow', file='h', size=1 << 20,
                   encrypt={'format': 'luks', 'key-secret': 'sec0'})
      + create_job('e3', driver='qcow', file='h', size=1 << 20,
                   encrypt={'format': 'qcow', 'key-secret': 'nosuch'})
      + create_job('e4', driver='qcow', file='nonexistent', size=1 << 20)
      + [
        ('qmp', 'blockdev-create', {'job-id': 'e5', 'options': {
            'driver': 'qcow', 'file': 'h', 'size': 1 << 20,
            'cluster-size': 512}}),
        ('qmp', 'query-jobs'),
    ],
    'same_bytes': QCOW_FILES,
}

# LUKS images and encrypted qcow2 ones; the images are random (keys,
# salts), so what is compared is what qemu-img info shows but for the
# UUID and the iteration counts, and the data the real qemu-io writes
# and reads through each.  j.luks held data: qblock empties the node
# first (no old bytes left in the file), QEMU's daemon does not.
CREATE_LUKS = {
    'steps': [
        ('sh', 'head -c 3M /dev/urandom > j.luks'),
        ('start',),
        ('qmp', 'object-add', {'qom-type': 'secret', 'id': 'sec0',
                               'data': 'foo'}),
    ] + [step for i, f in enumerate(LUKS_FILES) for step in (
        ('qmp', 'blockdev-create', {'job-id': 'f%d' % i, 'options': {
            'driver': 'file', 'filename': '$DIR/' + f, 'size': 0}}),
        ('wait', 'f%d' % i, 'concluded'),
        ('qmp', 'job-dismiss', {'id': 'f%d' % i}),
        ('qmp', 'blockdev-add', {'driver': 'file', 'node-name': f[0],
                                 'filename': '$DIR/' + f}))
    ] + [
        ('qmp', 'blockdev-add', {'driver': 'file', 'node-name': 'j',
                                 'filename': '$DIR/j.luks'}),
    ] + create_job('j1', driver='luks', file='a', size=16 << 20,
                   **{'key-secret': 'sec0', 'iter-time': 10})
      + create_job('j2', driver='luks', file='b', size=16 << 20,
                   preallocation='full',
                   **{'key-secret': 'sec0', 'iter-time': 10,
                      'cipher-alg': 'aes-128', 'cipher-mode': 'cbc',
                      'ivgen-alg': 'essiv', 'ivgen-hash-alg': 'sha256',
                      'hash-alg': 'sha1'})
      + create_job('j3', driver='qcow2', file='c', size=16 << 20,
                   encrypt={'format': 'luks', 'key-secret': 'sec0',
                            'iter-time': 10, 'cipher-alg': 'twofish-256'})
      + create_job('j4', driver='qcow2', file='e', size=16 << 20,
                   encrypt={'format': 'qcow', 'key-secret': 'sec0'})
      + create_job('j5', driver='luks', file='j', size=1 << 20,
                   **{'key-secret': 'sec0', 'iter-time': 10})
      # failures: in the job, and before it
      + create_job('e1', driver='luks', file='d', size=1 << 20)
      + create_job('e2', driver='luks', file='d', size=1 << 20,
                   **{'key-secret': 'nosuch'})
      + create_job('e3', driver='luks', file='d', size=1 << 20,
                   **{'key-secret': 'sec0', 'cipher-alg': 'des'})
      + create_job('e4', driver='qcow2', file='f', size=1 << 20,
                   encrypt={'format': 'luks'})
      + create_job('e5', driver='luks', file='nonexistent', size=1 << 20,
                   **{'key-secret': 'sec0'}) + [
        ('qmp', 'blockdev-create', {'job-id': 'e6', 'options': {
            'driver': 'luks', 'file': 'd', 'size': 1 << 20,
            'key-secret': 'sec0', 'cipher-alg': 'rot13'}}),
        ('qmp', 'blockdev-create', {'job-id': 'e7', 'options': {
            'driver': 'qcow2', 'file': 'f', 'size': 1 << 20,
            'encrypt': {'format': 'aes', 'key-secret': 'sec0'}}}),
        ('qmp', 'query-jobs'),
    ],
    'images': ['a.luks', 'b.luks', 'c.qcow2', 'e.qcow2', 'j.luks'],
    'image_opts': {'a.luks': LUKS_OPTS, 'b.luks': LUKS_OPTS,
                   'j.luks': LUKS_OPTS, 'c.qcow2': QCOW2_CRYPT_OPTS,
                   'e.qcow2': QCOW2_CRYPT_OPTS},
    'info_keys': ['format-specific', 'virtual-size', 'encrypted'],
    'info_drop': ['uuid', 'iters', 'master-key-iters'],
    'after': [
        ('the real qemu-io writes and reads through each image',
         'for i in a.luks b.luks j.luks; do qemu-io --object %s '
         '--image-opts %s$i -c "write -P 0x5a 512k 64k" '
         '-c "read -P 0x5a 512k 64k" || exit 1; done; '
         'for i in c.qcow2 e.qcow2; do qemu-io --object %s --image-opts '
         '%s$i -c "write -P 0x5a 512k 64k" -c "read -P 0x5a 512k 64k" '
         '|| exit 1; done' % (SECRET, LUKS_OPTS, SECRET, QCOW2_CRYPT_OPTS)),
        ('preallocation=full allocates b.luks',
         'test $(du -k b.luks | cut -f1) -gt 16000'),
    ],
    'qblock_after': [
        ('j.luks holds nothing of what the node held',
         'test $(stat -c %s j.luks) = $((2068480 + 1048576)) && '
         'cmp -n 1M -i 2068480 j.luks /dev/zero'),
    ],
}

# base (0..1M) <- mid (2M..3M) <- top (4M..5M): every layer holds data
CHAIN = [
    ('sh', 'qemu-img create -q -f qcow2 base.qcow2 8M && '
           'qemu-io -f qcow2 -c "write -P 0x11 0 1M" base.qcow2 && '
           'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 mid.qcow2 && '
           'qemu-io -f qcow2 -c "write -P 0x22 2M 1M" mid.qcow2 && '
           'qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 top.qcow2 && '
           'qemu-io -f qcow2 -c "write -P 0x33 4M 1M" top.qcow2'),
    ('start',),
    node('base', 'base.qcow2'),
    node('mid', 'mid.qcow2', 'base'),
    node('top', 'top.qcow2', 'mid'),
]

STREAM = {
    'steps': CHAIN + [
        ('qmp', 'block-stream', {'device': 'top', 'base-node': 'base',
                                 'job-id': 's1'}),
        ('wait', 's1', 'null'),
        ('qmp', 'query-block-jobs'),
        ('qmp', 'block-stream', {'device': 'top', 'job-id': 's2'}),
        ('wait', 's2', 'null'),
        ('qmp', 'query-jobs'),
    ],
    'images': ['top.qcow2'],
    'info_keys': ['backing-filename'],
}

STREAM_PARTIAL = {
    'steps': CHAIN + [
        ('qmp', 'block-stream', {'device': 'top', 'base': 'base.qcow2',
                                 'job-id': 's0'}),
        ('qmp', 'block-stream', {'device': 'top',
                                 'base': '$DIR/base.qcow2',
                                 'job-id': 's1', 'auto-finalize': False,
                                 'auto-dismiss': False,
                                 'backing-file': 'base.qcow2'}),
        ('wait', 's1', 'pending'),
        ('qmp', 'query-block-jobs'),
        ('qmp', 'block-job-complete', {'device': 's1'}),
        ('qmp', 'job-pause', {'id': 's1'}),
        ('qmp', 'job-dismiss', {'id': 's1'}),
        ('qmp', 'job-finalize', {'id': 's1'}),
        ('wait', 's1', 'concluded'),
        ('qmp', 'query-jobs'),
        ('qmp', 'block-job-dismiss', {'id': 's1'}),
    ],
    'images': ['top.qcow2', 'mid.qcow2'],
    'info_keys': ['backing-filename'],
}

STREAM_ERRORS = {
    'steps': CHAIN + [
        ('qmp', 'block-stream', {'device': 'nope'}),
        ('qmp', 'block-stream', {'device': 'top', 'base': 'x',
                                 'base-node': 'base'}),
        ('qmp', 'block-stream', {'device': 'top', 'base-node': 'base',
                                 'bottom': 'mid'}),
        ('qmp', 'block-stream', {'device': 'top', 'base': 'x',
                                 'bottom': 'mid'}),
        ('qmp', 'block-stream', {'device': 'top', 'base': 'nope.qcow2'}),
        ('qmp', 'block-stream', {'device': 'top', 'base-node': 'top'}),
        ('qmp', 'block-stream', {'device': 'mid', 'base-node': 'nope'}),
        ('qmp', 'block-stream', {'device': 'top',
                                 'backing-file': 'foo'}),
        ('qmp', 'block-stream', {'device': 'top', 'job-id': '0bad'}),
        ('qmp', 'block-stream', {'device': 'top', 'speed': -1}),
        ('qmp', 'block-stream', {'device': 'base'}),
        ('qmp', 'block-stream', {'device': 'base', 'job-id': 'b0'}),
        ('wait', 'b0', 'null'),
    ],
    'images': ['top.qcow2'],
}

# a slow stream, paused, resumed and cancelled while it runs
STREAM_VERBS = {
    'filter_progress': True,
    'steps': [
        ('sh', 'qemu-img create -q -f qcow2 base.qcow2 8M && '
               'qemu-io -f qcow2 -c "write -P 0x11 0 8M" base.qcow2 && '
               'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 '
               'top.qcow2'),
        ('start',),
        node('base', 'base.qcow2'),
        node('top', 'top.qcow2', 'base'),
        ('qmp', 'block-stream', {'device': 'top', 'job-id': 's1',
                                 'speed': 65536}),
        ('qmp', 'block-stream', {'device': 'top', 'job-id': 's2'}),
        ('qmp', 'job-resume', {'id': 's1'}),
        ('qmp', 'block-job-pause', {'device': 's1'}),
        ('wait', 's1', 'paused'),
        ('qmp', 'block-job-pause', {'device': 's1'}),
        ('qmp', 'block-job-cancel', {'device': 's1'}),
        ('qmp', 'job-complete', {'id': 's1'}),
        ('qmp', 'block-job-set-speed', {'device': 's1', 'speed': -5}),
        ('qmp', 'block-job-set-speed', {'device': 's1', 'speed': 131072}),
        ('qmp', 'block-job-resume', {'device': 's1'}),
        ('wait', 's1', 'running'),
        ('qmp', 'block-job-cancel', {'device': 's1'}),
        ('wait', 's1', 'null'),
        ('qmp', 'query-block-jobs'),
    ],
    'images': ['top.qcow2'],
    'info_keys': ['backing-filename'],
}

# a source with data and zeroes, mirrored to an empty target
MIRROR_PREP = [
    ('sh', 'qemu-img create -q -f qcow2 src.qcow2 16M && '
           'qemu-io -f qcow2 -c "write -P 0x5a 0 3M" '
           '-c "write -z 4M 1M" -c "write -P 0xa5 9M 1M" src.qcow2 && '
           'qemu-img create -q -f qcow2 dst.qcow2 16M'),
    ('start',),
    node('src', 'src.qcow2'),
    node('dst', 'dst.qcow2'),
]

MIRROR = {
    'filter_progress': True,
    'steps': MIRROR_PREP + [
        ('qmp', 'blockdev-mirror', {'job-id': 'm1', 'device': 'src',
                                    'target': 'dst', 'sync': 'full'}),
        ('wait', 'm1', 'ready'),
        ('qmp', 'job-complete', {'id': 'm1'}),
        ('wait', 'm1', 'null'),
        ('qmp', 'query-block-jobs'),
    ],
    'images': ['dst.qcow2'],
}

MIRROR_SOFT_CANCEL = {
    'filter_progress': True,
    'steps': MIRROR_PREP + [
        ('qmp', 'blockdev-mirror', {'job-id': 'm1', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'granularity': 65536,
                                    'buf-size': 1 << 20,
                                    'copy-mode': 'write-blocking',
                                    'auto-dismiss': False}),
        ('wait', 'm1', 'ready'),
        ('qmp', 'block-job-complete', {'device': 'nope'}),
        ('qmp', 'block-job-cancel', {'device': 'm1'}),
        ('wait', 'm1', 'concluded'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-dismiss', {'id': 'm1'}),
    ],
    'images': ['dst.qcow2'],
}

MIRROR_ERRORS = {
    'steps': MIRROR_PREP + [
        ('qmp', 'blockdev-mirror', {'device': 'src', 'target': 'src',
                                    'sync': 'full', 'job-id': 'm'}),
        ('qmp', 'blockdev-mirror', {'device': 'src', 'target': 'dst',
                                    'sync': 'full', 'job-id': 'm',
                                    'granularity': 1000}),
        ('qmp', 'blockdev-mirror', {'device': 'src', 'target': 'dst',
                                    'sync': 'full', 'job-id': 'm',
                                    'granularity': 256}),
        ('qmp', 'blockdev-mirror', {'device': 'src', 'target': 'dst',
                                    'sync': 'incremental', 'job-id': 'm'}),
        ('qmp', 'blockdev-mirror', {'device': 'src', 'target': 'nope',
                                    'sync': 'full', 'job-id': 'm'}),
        ('qmp', 'blockdev-mirror', {'device': 'src', 'target': 'dst',
                                    'sync': 'full'}),
        ('qmp', 'blockdev-mirror', {'device': 'src', 'target': 'dst',
                                    'sync': 'full', 'job-id': 'm',
                                    'speed': -1}),
    ],
}

# base (0..2M) <- src (1M..3M), and an empty dst on the same base: a
# sync=top job copies only what src holds itself
TOP_PAIR = [
    ('sh', 'qemu-img create -q -f qcow2 base.qcow2 8M && '
           'qemu-io -f qcow2 -c "write -P 0x11 0 2M" base.qcow2 && '
           'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 '
           'src.qcow2 && '
           'qemu-io -f qcow2 -c "write -P 0x22 1M 2M" src.qcow2 && '
           'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 '
           'dst.qcow2'),
    ('start',),
    node('base', 'base.qcow2'),
    node('src', 'src.qcow2', 'base'),
    node('dst', 'dst.qcow2', 'base'),
]

# sync=top: the target has the source's backing file already
MIRROR_TOP = {
    'filter_progress': True,
    'steps': TOP_PAIR + [
        ('qmp', 'blockdev-mirror', {'job-id': 'm1', 'device': 'src',
                                    'target': 'dst', 'sync': 'top'}),
        ('wait', 'm1', 'ready'),
        ('qmp', 'job-complete', {'id': 'm1'}),
        ('wait', 'm1', 'null'),
    ],
    'images': ['dst.qcow2'],
    'info_keys': ['backing-filename'],
}

# sync=none through an export: only what is written during the job
MIRROR_NONE = {
    'filter_progress': True,
    'steps': [
        ('sh', 'qemu-img create -q -f qcow2 src.qcow2 8M && '
               'qemu-io -f qcow2 -c "write -P 0x11 0 8M" src.qcow2 && '
               'qemu-img create -q -f qcow2 -b src.qcow2 -F qcow2 '
               'dst.qcow2'),
        ('start',),
        node('src', 'src.qcow2'),
        node('dst', 'dst.qcow2', 'src'),
        ('qmp', 'blockdev-mirror', {'job-id': 'm0', 'device': 'src',
                                    'target': 'dst', 'sync': 'none'}),
        ('qmp', 'blockdev-del', {'node-name': 'dst'}),
        ('qmp', 'blockdev-add', {'driver': 'qcow2', 'node-name': 'dst',
                                 'backing': None, 'file': {
                                     'driver': 'file',
                                     'filename': '$DIR/dst.qcow2'}}),
        ('qmp', 'nbd-server-start', {'addr': {'type': 'unix', 'data': {
            'path': '$DIR/nbd.sock'}}}),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'e0',
                                     'node-name': 'src', 'name': 'disk',
                                     'writable': True}),
        ('qmp', 'blockdev-mirror', {'job-id': 'm1', 'device': 'src',
                                    'target': 'dst', 'sync': 'none'}),
        ('wait', 'm1', 'ready'),
        ('sh', 'qemu-io -f raw -c "write -P 0x33 1M 64k" '
               '-c "write -z 3M 64k" "nbd+unix:///disk?socket=nbd.sock"'),
        ('qmp', 'job-complete', {'id': 'm1'}),
        ('wait', 'm1', 'null'),
        ('qmp', 'query-block-exports'),
    ],
    'images': ['dst.qcow2', 'src.qcow2'],
}

COMMIT_ACTIVE = {
    'filter_progress': True,
    'steps': CHAIN + [
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'c1'}),
        ('wait', 'c1', 'ready'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-complete', {'id': 'c1'}),
        ('wait', 'c1', 'null'),
    ],
    'images': ['base.qcow2'],
}

COMMIT_INTERMEDIATE = {
    'steps': CHAIN + [
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'c1',
                                 'top-node': 'mid', 'base-node': 'base'}),
        ('wait', 'c1', 'null'),
        ('qmp', 'query-jobs'),
    ],
    'images': ['top.qcow2', 'base.qcow2'],
    'info_keys': ['backing-filename'],
}

COMMIT_ERRORS = {
    'steps': CHAIN + [
        ('qmp', 'block-commit', {'device': 'nope'}),
        ('qmp', 'block-commit', {'device': 'base', 'job-id': 'x'}),
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'x',
                                 'top-node': 'mid', 'base-node': 'mid'}),
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'x',
                                 'top-node': 'base', 'base-node': 'mid'}),
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'x',
                                 'backing-file': 'foo'}),
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'x',
                                 'top': 'nope'}),
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'x',
                                 'top': 'a', 'top-node': 'mid'}),
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'x',
                                 'base': 'a', 'base-node': 'base'}),
    ],
}

# blockdev-create of VHD images on file nodes: both subformats, sizes
# that are a CHS geometry, past the largest one, a forced one, a node
# that held data; then the errors (a size that is no geometry among
# them: QMP does not round it as qemu-img create does).  The footers' timestamps and UUIDs differ (clock, random):
# the images are compared as disks, and qemu-img info must agree.
VPC_FILES = ['a.vhd', 'b.vhd', 'c.vhd', 'd.vhd', 'h.vhd']
CREATE_VPC = {
    'steps': [
        ('sh', 'head -c 300000 /dev/urandom > d.vhd'),
        ('start',),
    ] + file_nodes(VPC_FILES)
      + create_job('j1', driver='vpc', file='a', size=104865792)
      + create_job('j2', driver='vpc', file='b', size=10514432,
                   subformat='fixed')
      + create_job('j3', driver='vpc', file='c', size=(10 << 20) + 512,
                   subformat='fixed', **{'force-size': True})
      + create_job('j4', driver='vpc', file='d', size=200 << 30,
                   **{'force-size': False, 'subformat': 'dynamic'})
      + create_job('e0', driver='vpc', file='h', size=64 << 20)
      + create_job('e1', driver='vpc', file='h', size=2041 << 30)
      + create_job('e2', driver='vpc', file='nonexistent', size=1 << 20)
      + [
        ('qmp', 'blockdev-create', {'job-id': 'e3', 'options': {
            'driver': 'vpc', 'file': 'h', 'size': 1 << 20,
            'subformat': 'sparse'}}),
        ('qmp', 'query-jobs'),
    ],
    'images': ['a.vhd', 'b.vhd', 'c.vhd', 'd.vhd'],
    'image_opts': {f: 'driver=vpc,file.filename=' for f in VPC_FILES},
    'info_keys': ['virtual-size', 'cluster-size', 'format'],
    'after': [
        # d.vhd held 300000 bytes: emptied first
        ('the files have qemu-img create\'s sizes',
         'test "$(stat -c %s a.vhd b.vhd c.vhd d.vhd | tr "\\n" " ")" = '
         '"2560 10514944 10486784 411648 "'),
    ],
}

PARALLELS_FILES = ['a.parallels', 'b.parallels', 'c.parallels',
                   'd.parallels']

# The default cluster size, a small and an odd one (rounded up to 512), an
# odd disk size; the errors.  The files must be qemu-img's byte for byte.
# (qemu-img check is not asked: QEMU's reports a leak in its own new
# image when the table takes more than one cluster.)
CREATE_PARALLELS = {
    'steps': [('start',)] + file_nodes(PARALLELS_FILES)
      + create_job('j1', driver='parallels', file='a', size=64 << 20)
      + create_job('j2', driver='parallels', file='b', size=5 << 20,
                   **{'cluster-size': 4096})
      + create_job('j3', driver='parallels', file='c', size=1024,
                   **{'cluster-size': 1000})
      + create_job('j4', driver='parallels', file='d', size=1000)
      # failures: in the job, and before it
      + create_job('e1', driver='parallels', file='d', size=1 << 20,
                   **{'cluster-size': 1 << 31})
      + create_job('e2', driver='parallels', file='d', size=1 << 42,
                   **{'cluster-size': 512})
      + create_job('e3', driver='parallels', file='nonexistent',
                   size=1 << 20)
      + [
        ('qmp', 'blockdev-create', {'job-id': 'e4', 'options': {
            'driver': 'parallels', 'file': 'd', 'size': 1 << 20,
            'cluster_size': 4096}}),
        ('qmp', 'query-jobs'),
    ],
    'images': ['a.parallels', 'b.parallels', 'c.parallels'],
    'same_bytes': PARALLELS_FILES,
    'info_keys': ['virtual-size'],
}

VHDX_FILES = ['a.vhdx', 'b.vhdx', 'c.vhdx', 'd.vhdx', 'e.vhdx', 'h.vhdx']

# Dynamic with its automatic block size, fixed with and without
# block-state-zero, explicit log and block sizes, a node that held data,
# and QEMU's refusals (QAPI's sizes are not rounded, unlike qemu-img's);
# the files must be qemu-img's but for GUIDs, sequence numbers and the
# creator (vhdx-same.py).
CREATE_VHDX = {
    'steps': [
        ('sh', 'head -c 3000000 /dev/urandom > e.vhdx'),
        ('start',),
    ] + file_nodes(VHDX_FILES)
      + create_job('j1', driver='vhdx', file='a', size=64 << 20)
      + create_job('j2', driver='vhdx', file='b', size=20 << 20,
                   subformat='fixed', **{'block-state-zero': False})
      + create_job('j3', driver='vhdx', file='c', size=5 << 30,
                   subformat='fixed')
      + create_job('j4', driver='vhdx', file='d', size=100 << 20,
                   **{'log-size': 4 << 20, 'block-size': 1 << 20,
                      'subformat': 'dynamic', 'block-state-zero': False})
      + create_job('j5', driver='vhdx', file='e', size=1 << 20)
      # failures
      + create_job('e1', driver='vhdx', file='h', size=1 << 20,
                   **{'block-size': 3 << 20})
      + create_job('e2', driver='vhdx', file='h', size=1 << 20,
                   **{'block-size': 1536 << 10})
      + create_job('e3', driver='vhdx', file='h', size=1 << 20,
                   **{'block-size': 512 << 20})
      + create_job('e4', driver='vhdx', file='h', size=1 << 20,
                   **{'log-size': 1536 << 10})
      + create_job('e5', driver='vhdx', file='h', size=1 << 20,
                   **{'log-size': 8 << 30})
      + create_job('e6', driver='vhdx', file='h', size=65 << 40)
      + create_job('e7', driver='vhdx', file='h', size=1 << 20,
                   **{'block-size': 0})
      + create_job('e8', driver='vhdx', file='nonexistent', size=1 << 20)
      + [
        ('qmp', 'blockdev-create', {'job-id': 'e9', 'options': {
            'driver': 'vhdx', 'file': 'h', 'size': 1 << 20,
            'subformat': 'sparse'}}),
        ('qmp', 'query-jobs'),
    ],
    'images': ['a.vhdx', 'b.vhdx', 'c.vhdx', 'd.vhdx', 'e.vhdx'],
    'same_vhdx': ['a.vhdx', 'b.vhdx', 'c.vhdx', 'd.vhdx', 'e.vhdx'],
    'info_keys': ['virtual-size', 'cluster-size', 'format'],
}

SCENARIOS = {
    'create': CREATE,
    'create-parallels': CREATE_PARALLELS,
    'create-vhdx': CREATE_VHDX,
    'create-vmdk': CREATE_VMDK,
    'create-vdi': CREATE_VDI,
    'create-qed': CREATE_QED,
    'create-qcow': CREATE_QCOW,
    'create-luks': CREATE_LUKS,
    'create-vpc': CREATE_VPC,
    'stream': STREAM,
    'stream-partial': STREAM_PARTIAL,
    'stream-errors': STREAM_ERRORS,
    'stream-verbs': STREAM_VERBS,
    'mirror': MIRROR,
    'mirror-soft-cancel': MIRROR_SOFT_CANCEL,
    'mirror-errors': MIRROR_ERRORS,
    'mirror-top': MIRROR_TOP,
    'mirror-none': MIRROR_NONE,
    'commit-active': COMMIT_ACTIVE,
    'commit-intermediate': COMMIT_INTERMEDIATE,
    'commit-errors': COMMIT_ERRORS,
}


# ---------------------------------------------------------------------------
# blockdev-backup: the copy-before-write filter above the source for the
# job's life, sync modes, bitmaps and their modes, errors, cancel

def export_src():
    return [
        ('qmp', 'nbd-server-start', {'addr': {'type': 'unix', 'data': {
            'path': '$DIR/nbd.sock'}}}),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'e0',
                                     'node-name': 'src', 'name': 'disk',
                                     'writable': True}),
    ]


NBD_IO = 'qemu-io -f raw %s "nbd+unix:///disk?socket=nbd.sock"'

BACKUP_FULL = {
    'steps': MIRROR_PREP + [
        ('qmp', 'blockdev-backup', {'job-id': 'b1', 'device': 'src',
                                    'target': 'dst', 'sync': 'full'}),
        ('wait', 'b1', 'null'),
        ('qmp', 'query-block-jobs'),
        # the filter is gone: the source takes a new job
        ('sh', 'qemu-img create -q -f qcow2 dst2.qcow2 16M'),
        node('dst2', 'dst2.qcow2'),
        ('qmp', 'blockdev-backup', {'job-id': 'b2', 'device': 'src',
                                    'target': 'dst2', 'sync': 'full',
                                    'compress': True,
                                    'auto-finalize': False,
                                    'auto-dismiss': False,
                                    'x-perf': {'max-workers': 3,
                                               'max-chunk': 65536}}),
        ('wait', 'b2', 'pending'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-finalize', {'id': 'b2'}),
        ('wait', 'b2', 'concluded'),
        ('qmp', 'job-dismiss', {'id': 'b2'}),
    ],
    'images': ['dst.qcow2', 'dst2.qcow2'],
}

BACKUP_TOP = {
    'steps': TOP_PAIR + [
        ('qmp', 'blockdev-backup', {'job-id': 'b1', 'device': 'src',
                                    'target': 'dst', 'sync': 'top'}),
        ('wait', 'b1', 'null'),
    ],
    'images': ['dst.qcow2'],
    'info_keys': ['backing-filename'],
}

# sync=none: the target gets the old data of what guests write, until
# the job is cancelled; the filter is named and shows in the graph
BACKUP_NONE = {
    'filter_progress': True,
    'steps': MIRROR_PREP + export_src() + [
        ('qmp', 'blockdev-backup', {'job-id': 'b1', 'device': 'src',
                                    'target': 'dst', 'sync': 'none',
                                    'filter-node-name': 'fl'}),
        ('wait', 'b1', 'running'),
        ('sh', NBD_IO % '-c "write -P 0x33 1M 64k" -c "write -z 9M 64k" '
                        '-c "write -P 0x44 12M 128k"'),
        ('qmp', 'query-block-exports'),
        ('qmp', 'block-job-cancel', {'device': 'b1'}),
        ('wait', 'b1', 'null'),
        ('qmp', 'query-block-exports'),
    ],
    'images': ['dst.qcow2', 'src.qcow2'],
}

# incremental: a bitmap records guest writes; the backup copies them
BACKUP_INCREMENTAL = {
    'steps': MIRROR_PREP + export_src() + [
        ('qmp', 'block-dirty-bitmap-add', {'node': 'src', 'name': 'b0'}),
        ('sh', NBD_IO % '-c "write -P 0x66 2M 64k" -c "write -P 0x67 10M 1M"'),
        ('qmp', 'blockdev-backup', {'job-id': 'i1', 'device': 'src',
                                    'target': 'dst', 'sync': 'incremental',
                                    'bitmap': 'b0'}),
        ('wait', 'i1', 'null'),
        ('qmp', 'x-debug-block-dirty-bitmap-sha256', {'node': 'src',
                                                      'name': 'b0'}),
        ('sh', NBD_IO % '-c "write -P 0x68 5M 64k"'),
        # never: the bitmap keeps its bits (and the new ones)
        ('qmp', 'blockdev-backup', {'job-id': 'i2', 'device': 'src',
                                    'target': 'dst', 'sync': 'bitmap',
                                    'bitmap': 'b0', 'bitmap-mode': 'never'}),
        ('wait', 'i2', 'null'),
        ('qmp', 'x-debug-block-dirty-bitmap-sha256', {'node': 'src',
                                                      'name': 'b0'}),
        # full with a bitmap: the bitmap starts again
        ('qmp', 'blockdev-backup', {'job-id': 'i3', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'bitmap': 'b0',
                                    'bitmap-mode': 'on-success'}),
        ('wait', 'i3', 'null'),
        ('qmp', 'x-debug-block-dirty-bitmap-sha256', {'node': 'src',
                                                      'name': 'b0'}),
    ],
    'images': ['dst.qcow2', 'src.qcow2'],
}

BACKUP_ERRORS = {
    'steps': MIRROR_PREP + [
        ('sh', 'qemu-img create -q -f qcow2 small.qcow2 8M && '
               'qemu-img create -q -f raw raw.img 16M'),
        node('small', 'small.qcow2'),
        node('raw', 'raw.img', fmt='raw'),
        ('qmp', 'block-dirty-bitmap-add', {'node': 'src', 'name': 'b0'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'nope',
                                    'target': 'dst', 'sync': 'full'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'nope', 'sync': 'full'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'src', 'sync': 'full'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'small', 'sync': 'full'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'bitmap'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst',
                                    'sync': 'incremental'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'incremental',
                                    'bitmap': 'b0',
                                    'bitmap-mode': 'always'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'bitmap',
                                    'bitmap': 'nope',
                                    'bitmap-mode': 'always'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'bitmap',
                                    'bitmap': 'b0'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'none',
                                    'bitmap': 'b0',
                                    'bitmap-mode': 'always'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'bitmap': 'b0', 'bitmap-mode': 'never'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'bitmap-mode': 'always'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'raw', 'sync': 'full',
                                    'compress': True}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'x-perf': {'max-workers': 0}}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'x-perf': {'max-chunk': -1}}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'x-perf': {'max-chunk': 4096}}),
        ('qmp', 'blockdev-backup', {'device': 'src', 'target': 'dst',
                                    'sync': 'full'}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'speed': -1}),
        ('qmp', 'blockdev-backup', {'job-id': 'x', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'filter-node-name': 'dst'}),
        # the bitmap is left as it was by every refusal
        ('qmp', 'x-debug-block-dirty-bitmap-sha256', {'node': 'src',
                                                      'name': 'b0'}),
        ('qmp', 'blockdev-backup', {'job-id': 'z', 'device': 'src',
                                    'target': 'dst', 'sync': 'none'}),
        ('qmp', 'blockdev-backup', {'job-id': 'y', 'device': 'src',
                                    'target': 'dst', 'sync': 'full'}),
        ('qmp', 'block-dirty-bitmap-remove', {'node': 'src', 'name': 'b0'}),
        ('qmp', 'job-cancel', {'id': 'z'}),
        ('wait', 'z', 'null'),
    ],
    # QEMU names the target's device, which the daemon's nodes lack
    'better_messages': {'supported for this drive raw':
                        'supported for this drive '},
}

# a slow backup, paused, resumed and cancelled
BACKUP_CANCEL = {
    'filter_progress': True,
    'steps': MIRROR_PREP + [
        ('qmp', 'blockdev-backup', {'job-id': 'b1', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'speed': 65536}),
        # past the pause of the command's drained section
        ('sleep', 0.5),
        ('qmp', 'job-pause', {'id': 'b1'}),
        ('wait', 'b1', 'paused'),
        ('qmp', 'job-resume', {'id': 'b1'}),
        ('wait', 'b1', 'running'),
        ('qmp', 'block-job-cancel', {'device': 'b1'}),
        ('wait', 'b1', 'null'),
        ('qmp', 'query-block-jobs'),
    ],
}

# the target fails (blkdebug): report fails the job, stop pauses it
BLKDEBUG_DST = {'driver': 'qcow2', 'node-name': 'dst', 'file': {
    'driver': 'blkdebug', 'image': {'driver': 'file',
                                    'filename': '$DIR/dst.qcow2'},
    'inject-error': [{'event': 'write_aio', 'errno': 5, 'once': True}]}}

BACKUP_TARGET_ERROR = {
    'filter_progress': True,
    'steps': MIRROR_PREP[:-1] + [
        ('qmp', 'blockdev-add', BLKDEBUG_DST),
        ('qmp', 'block-dirty-bitmap-add', {'node': 'src', 'name': 'b0'}),
        ('qmp', 'block-dirty-bitmap-add', {'node': 'src', 'name': 'b1',
                                           'disabled': True}),
        ('qmp', 'block-dirty-bitmap-merge', {'node': 'src', 'target': 'b1',
                                             'bitmaps': ['b0']}),
        ('qmp', 'blockdev-backup', {'job-id': 'j1', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'bitmap': 'b0',
                                    'bitmap-mode': 'on-success'}),
        ('wait', 'j1', 'null'),
        # on-success after a failure: the bitmap is as it was
        ('qmp', 'x-debug-block-dirty-bitmap-sha256', {'node': 'src',
                                                      'name': 'b0'}),
    ],
}

BACKUP_TARGET_STOP = {
    'filter_progress': True,
    'steps': MIRROR_PREP[:-1] + [
        ('qmp', 'blockdev-add', BLKDEBUG_DST),
        ('qmp', 'blockdev-backup', {'job-id': 'b1', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'on-target-error': 'stop',
                                    'auto-dismiss': False}),
        # the first write fails: BLOCK_JOB_ERROR, and the job pauses
        ('sleep', 2),
        ('qmp', 'query-block-jobs'),
        ('qmp', 'job-resume', {'id': 'b1'}),
        ('wait', 'b1', 'concluded'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-dismiss', {'id': 'b1'}),
    ],
    'images': ['dst.qcow2'],
}

def sha(name):
    return ('qmp', 'x-debug-block-dirty-bitmap-sha256', {'node': 'src',
                                                          'name': name})


def act(kind, **data):
    return {'type': kind, 'data': data}


# the bitmap actions and blockdev-backup in transactions: all or nothing
BACKUP_TRANSACTION = {
    'steps': MIRROR_PREP + export_src() + [
        ('sh', 'qemu-img create -q -f qcow2 inc.qcow2 16M'),
        node('inc', 'inc.qcow2'),
        ('qmp', 'block-dirty-bitmap-add', {'node': 'src', 'name': 'old'}),
        ('sh', NBD_IO % '-c "write -P 0x71 0 64k"'),
        # a full backup and a new bitmap at the same point in time
        ('qmp', 'transaction', {'actions': [
            act('block-dirty-bitmap-add', node='src', name='b0'),
            act('block-dirty-bitmap-disable', node='src', name='old'),
            act('blockdev-backup', device='src', target='dst',
                sync='full', **{'job-id': 'full'})]}),
        ('wait', 'full', 'null'),
        sha('b0'), sha('old'),
        ('sh', NBD_IO % '-c "write -P 0x72 1M 64k" -c "write -P 0x73 7M 4k"'),
        sha('b0'), sha('old'),
        # one action fails: nothing happened
        ('qmp', 'transaction', {'actions': [
            act('block-dirty-bitmap-add', node='src', name='b1'),
            act('block-dirty-bitmap-clear', node='src', name='b0'),
            act('block-dirty-bitmap-enable', node='src', name='old'),
            act('block-dirty-bitmap-merge', node='src', target='old',
                bitmaps=['b0']),
            act('block-dirty-bitmap-remove', node='src', name='old'),
            act('blockdev-backup', device='src', target='inc',
                sync='incremental', bitmap='b0', **{'job-id': 'x'}),
            act('abort')]}),
        sha('b0'), sha('old'), sha('b1'),
        ('qmp', 'query-jobs'),
        # and then for real: the incremental backup, the bitmap merged
        ('qmp', 'transaction', {'actions': [
            act('block-dirty-bitmap-enable', node='src', name='old'),
            act('block-dirty-bitmap-merge', node='src', target='old',
                bitmaps=['b0']),
            act('blockdev-backup', device='src', target='inc',
                sync='incremental', bitmap='b0', **{'job-id': 'inc'})]}),
        ('wait', 'inc', 'null'),
        sha('b0'), sha('old'),
        ('qmp', 'transaction', {'actions': [
            act('block-dirty-bitmap-clear', node='src', name='old'),
            act('block-dirty-bitmap-remove', node='src', name='b0')]}),
        sha('b0'), sha('old'),
        ('qmp', 'transaction', {'actions': [
            act('block-dirty-bitmap-remove', node='src', name='nope')]}),
    ],
    'images': ['dst.qcow2', 'inc.qcow2', 'src.qcow2'],
}

# bitmap-mode on failure: a raw target fails at 4M, copies go one 64k
# chunk at a time from the start; always clears what was copied before,
# on-success keeps every bit, never too
def backup_fails_at_4m(mode):
    return {
        'filter_progress': True,
        'steps': MIRROR_PREP[:-1] + export_src() + [
            ('sh', 'qemu-img create -q -f raw dst.raw 16M'),
            ('qmp', 'blockdev-add', {'driver': 'raw', 'node-name': 'dst',
                                     'file': {
                'driver': 'blkdebug', 'image': {
                    'driver': 'file', 'filename': '$DIR/dst.raw'},
                'inject-error': [{'event': 'pwritev', 'errno': 5,
                                  'sector': 8192, 'once': True}]}}),
            ('qmp', 'block-dirty-bitmap-add', {'node': 'src', 'name': 'b0'}),
            ('sh', NBD_IO % '-c "write -P 0x61 0 3M" -c "write -P 0x62 4M 1M" '
                            '-c "write -P 0x63 9M 64k"'),
            sha('b0'),
            ('qmp', 'blockdev-backup', {'job-id': 'j1', 'device': 'src',
                                        'target': 'dst', 'sync': 'bitmap',
                                        'bitmap': 'b0', 'bitmap-mode': mode,
                                        'x-perf': {'max-workers': 1,
                                                   'max-chunk': 65536}}),
            ('wait', 'j1', 'null'),
            sha('b0'),
        ],
    }


# the source fails a read once: report fails the job, ignore retries it
def backup_source_error(policy):
    return {
        'filter_progress': True,
        'steps': MIRROR_PREP[:2] + [
            ('qmp', 'blockdev-add', {'driver': 'qcow2', 'node-name': 'src',
                                     'file': {
                'driver': 'blkdebug', 'image': {
                    'driver': 'file', 'filename': '$DIR/src.qcow2'},
                'inject-error': [{'event': 'read_aio', 'errno': 5,
                                  'once': True}]}}),
            node('dst', 'dst.qcow2'),
            ('qmp', 'blockdev-backup', {'job-id': 'j1', 'device': 'src',
                                        'target': 'dst', 'sync': 'full',
                                        'on-source-error': policy,
                                        'auto-dismiss': False}),
            ('wait', 'j1', 'concluded'),
            ('qmp', 'query-jobs'),
            ('qmp', 'job-dismiss', {'id': 'j1'}),
        ],
        'images': ['dst.qcow2'] if policy == 'ignore' else [],
    }


# the daemon quits while a slow backup runs: the job is cancelled, the
# filter goes, the images are consistent
BACKUP_QUIT = {
    'filter_progress': True,
    'steps': MIRROR_PREP + export_src() + [
        ('qmp', 'blockdev-backup', {'job-id': 'b1', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'speed': 1 << 20}),
        ('sleep', 0.5),
        ('sh', NBD_IO % '-c "write -P 0x77 8M 64k"'),
    ],
    'images': ['src.qcow2'],
}

SCENARIOS.update({
    'backup-source-report': backup_source_error('report'),
    'backup-source-ignore': backup_source_error('ignore'),
    'backup-quit': BACKUP_QUIT,
    'backup-fail-always': backup_fails_at_4m('always'),
    'backup-fail-on-success': backup_fails_at_4m('on-success'),
    'backup-fail-never': backup_fails_at_4m('never'),
    'backup-transaction': BACKUP_TRANSACTION,
    'backup-full': BACKUP_FULL,
    'backup-top': BACKUP_TOP,
    'backup-none': BACKUP_NONE,
    'backup-incremental': BACKUP_INCREMENTAL,
    'backup-errors': BACKUP_ERRORS,
    'backup-cancel': BACKUP_CANCEL,
    'backup-target-error': BACKUP_TARGET_ERROR,
    'backup-target-stop': BACKUP_TARGET_STOP,
})


# ---------------------------------------------------------------------------
# The filter nodes of stream (copy-on-read), commit (commit_top, and
# mirror_top for the active layer) and mirror (mirror_top), named by
# filter-node-name or automatic, in the graph for the job's life only;
# an export of the node writes through the filter meanwhile

def export_node(name):
    return [
        ('qmp', 'nbd-server-start', {'addr': {'type': 'unix', 'data': {
            'path': '$DIR/nbd.sock'}}}),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'e0',
                                     'node-name': name, 'name': 'disk',
                                     'writable': True}),
    ]


STREAM_FILTER = {
    'filter_progress': True,
    'steps': CHAIN + export_node('top') + [
        ('qmp', 'block-stream', {'device': 'top', 'job-id': 's0',
                                 'filter-node-name': 'base'}),
        ('qmp', 'block-stream', {'device': 'top', 'job-id': 's0',
                                 'filter-node-name': '#x'}),
        ('nodes',),
        ('qmp', 'block-stream', {'device': 'top', 'job-id': 's1',
                                 'base-node': 'base', 'speed': 65536,
                                 'filter-node-name': 'cor'}),
        ('nodes',),
        ('qmp', 'block-stream', {'device': 'top', 'job-id': 's2',
                                 'filter-node-name': 'cor'}),
        ('sh', NBD_IO % '-c "write -P 0x44 2M 64k" -c "read -P 0x11 0 64k"'),
        ('qmp', 'block-job-set-speed', {'device': 's1', 'speed': 0}),
        ('wait', 's1', 'null'),
        ('nodes',),
        ('sh', NBD_IO % '-c "read -P 0x44 2M 64k"'),
        # automatic name, the rest of the chain, cancelled
        ('qmp', 'block-stream', {'device': 'top', 'job-id': 's3',
                                 'speed': 65536}),
        ('nodes',),
        ('qmp', 'block-job-cancel', {'device': 's3'}),
        ('wait', 's3', 'null'),
        ('nodes',),
    ],
    'images': ['top.qcow2', 'mid.qcow2', 'base.qcow2'],
    'info_keys': ['backing-filename'],
}

COMMIT_FILTER = {
    'filter_progress': True,
    'steps': CHAIN + export_node('top') + [
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'c0',
                                 'top-node': 'mid',
                                 'filter-node-name': 'top'}),
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'c1',
                                 'top-node': 'mid', 'speed': 65536,
                                 'filter-node-name': 'ct'}),
        ('nodes',),
        ('sh', NBD_IO % '-c "read -P 0x22 2M 64k" -c "write -P 0x55 6M 1M"'),
        ('qmp', 'block-job-set-speed', {'device': 'c1', 'speed': 0}),
        ('wait', 'c1', 'null'),
        ('nodes',),
        # the active layer: mirror_top above it, ready, then the pivot
        ('qmp', 'block-commit', {'device': 'top', 'job-id': 'c2',
                                 'filter-node-name': 'act'}),
        ('wait', 'c2', 'ready'),
        ('nodes',),
        ('sh', NBD_IO % '-c "write -P 0x66 7M 64k"'),
        ('qmp', 'query-block-exports'),
        ('qmp', 'job-complete', {'id': 'c2'}),
        ('wait', 'c2', 'null'),
        ('nodes',),
        ('qmp', 'query-block-exports'),
        ('sh', NBD_IO % '-c "read -P 0x66 7M 64k" -c "read -P 0x55 6M 64k"'),
    ],
    'images': ['base.qcow2', 'top.qcow2'],
    'info_keys': ['backing-filename'],
}

MIRROR_FILTER = {
    'filter_progress': True,
    'steps': MIRROR_PREP + export_node('src') + [
        ('qmp', 'blockdev-mirror', {'job-id': 'm0', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'filter-node-name': 'dst'}),
        ('qmp', 'blockdev-mirror', {'job-id': 'm1', 'device': 'src',
                                    'target': 'dst', 'sync': 'full',
                                    'copy-mode': 'write-blocking',
                                    'filter-node-name': 'mt'}),
        ('wait', 'm1', 'ready'),
        ('nodes',),
        ('qmp', 'blockdev-mirror', {'job-id': 'm2', 'device': 'src',
                                    'target': 'dst', 'sync': 'full'}),
        ('sh', NBD_IO % '-c "write -P 0x77 5M 1M" -c "write -z 9M 64k"'),
        ('qmp', 'query-block-exports'),
        ('qmp', 'job-complete', {'id': 'm1'}),
        ('wait', 'm1', 'null'),
        ('nodes',),
        ('qmp', 'query-block-exports'),
        ('sh', NBD_IO % '-c "read -P 0x77 5M 1M"'),
        # automatic name, cancelled: the graph is as it was
        ('sh', 'qemu-img create -q -f qcow2 dst2.qcow2 16M'),
        node('dst2', 'dst2.qcow2'),
        ('qmp', 'blockdev-mirror', {'job-id': 'm3', 'device': 'dst',
                                    'target': 'dst2', 'sync': 'full'}),
        ('wait', 'm3', 'ready'),
        ('nodes',),
        ('qmp', 'job-cancel', {'id': 'm3'}),
        ('wait', 'm3', 'null'),
        ('nodes',),
    ],
    'images': ['dst.qcow2', 'src.qcow2', 'dst2.qcow2'],
}

# two backups of one source at once: the second filter goes between the
# first and the source; the second (inner) one ends first here.  qblock
# drains the source while it puts a filter in, which pauses the first
# job for a moment; QEMU 7.2 drains nothing there: the pauses differ.
BACKUP_STACKED = {
    'filter_progress': True,
    'ignore_pauses': True,
    'steps': MIRROR_PREP + export_src() + [
        ('sh', 'qemu-img create -q -f qcow2 dst2.qcow2 16M'),
        node('dst2', 'dst2.qcow2'),
        ('qmp', 'blockdev-backup', {'job-id': 'b1', 'device': 'src',
                                    'target': 'dst', 'sync': 'none',
                                    'filter-node-name': 'f1'}),
        ('wait', 'b1', 'running'),
        ('sh', NBD_IO % '-c "write -P 0x33 1M 64k"'),
        ('qmp', 'blockdev-backup', {'job-id': 'b2', 'device': 'src',
                                    'target': 'dst', 'sync': 'none'}),
        ('qmp', 'blockdev-backup', {'job-id': 'b2', 'device': 'src',
                                    'target': 'dst2', 'sync': 'none',
                                    'filter-node-name': 'f2'}),
        ('wait', 'b2', 'running'),
        ('nodes',),
        ('sh', NBD_IO % '-c "write -P 0x44 1M 128k" -c "write -z 9M 64k"'),
        ('qmp', 'query-block-exports'),
        ('qmp', 'block-job-cancel', {'device': 'b2'}),
        ('wait', 'b2', 'null'),
        ('nodes',),
        ('sh', NBD_IO % '-c "write -P 0x55 12M 64k"'),
        ('qmp', 'block-job-cancel', {'device': 'b1'}),
        ('wait', 'b1', 'null'),
        ('nodes',),
        ('qmp', 'query-block-exports'),
    ],
    'images': ['dst.qcow2', 'dst2.qcow2', 'src.qcow2'],
}

# transaction completion-mode grouped: the backups of one transaction
# finalize together; one failing or cancelled cancels the others.  The
# transaction's drained sections pause the jobs in another order in
# qblock (it ends them first to last, QEMU last to first).
GROUP_PREP = MIRROR_PREP[:-1] + [
    ('sh', 'qemu-img create -q -f qcow2 src2.qcow2 16M && '
           'qemu-io -f qcow2 -c "write -P 0x3c 2M 6M" src2.qcow2 && '
           'qemu-img create -q -f qcow2 dst2.qcow2 16M && '
           'qemu-img create -q -f qcow2 dst3.qcow2 16M'),
    node('src2', 'src2.qcow2'),
    node('dst2', 'dst2.qcow2'),
    node('dst3', 'dst3.qcow2'),
]
GROUPED = {'completion-mode': 'grouped'}


def backup_act(job, device, target, **more):
    more.update({'job-id': job, 'device': device, 'target': target,
                 'sync': 'full'})
    return {'type': 'blockdev-backup', 'data': more}


BACKUP_GROUPED = {
    'filter_progress': True,
    'ignore_pauses': True,
    # f1 and f2 copy at full speed: either may reach "waiting" first
    'per_job_order': True,
    'steps': GROUP_PREP + [
        node('dst', 'dst.qcow2'),
        # both succeed: the quick one waits for the slow one
        ('qmp', 'transaction', {'properties': GROUPED, 'actions': [
            backup_act('g1', 'src', 'dst'),
            backup_act('g2', 'src2', 'dst2', speed=4 << 20)]}),
        ('wait', 'g1', 'null'),
        # one waits for job-finalize: job-finalize of the other ends both
        ('qmp', 'transaction', {'properties': GROUPED, 'actions': [
            backup_act('f1', 'src', 'dst3'),
            backup_act('f2', 'src2', 'dst', **{'auto-finalize': False})]}),
        ('wait', 'f1', 'pending'),
        ('wait', 'f2', 'pending'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-finalize', {'id': 'f1'}),
        ('wait', 'f2', 'null'),
        # one cancelled: the other is cancelled too
        ('qmp', 'transaction', {'properties': GROUPED, 'actions': [
            backup_act('c1', 'src', 'dst2', speed=1 << 20),
            backup_act('c2', 'src2', 'dst3', speed=1 << 20,
                       **{'auto-dismiss': False})]}),
        ('wait', 'c1', 'running'),
        ('sleep', 0.5),
        ('qmp', 'block-job-cancel', {'device': 'c2'}),
        ('wait', 'c1', 'null'),
        ('qmp', 'query-jobs'),
        ('qmp', 'job-dismiss', {'id': 'c2'}),
        # grouped is refused for an action that starts no job
        ('qmp', 'transaction', {'properties': GROUPED, 'actions': [
            backup_act('x1', 'src', 'dst'),
            {'type': 'block-dirty-bitmap-add', 'data': {
                'node': 'src', 'name': 'b0'}}]}),
        ('qmp', 'query-jobs'),
    ],
    'images': ['dst.qcow2', 'dst2.qcow2', 'dst3.qcow2'],
}

# one fails (its target's first write): the other is cancelled
BACKUP_GROUPED_FAIL = {
    'filter_progress': True,
    'ignore_pauses': True,
    'steps': GROUP_PREP + [
        ('qmp', 'blockdev-add', BLKDEBUG_DST),
        ('qmp', 'transaction', {'properties': GROUPED, 'actions': [
            backup_act('e1', 'src2', 'dst2', speed=1 << 20),
            backup_act('e2', 'src', 'dst')]}),
        ('wait', 'e1', 'null'),
        ('wait', 'e2', 'null'),
        ('qmp', 'query-jobs'),
    ],
}

SCENARIOS.update({
    'backup-grouped': BACKUP_GROUPED,
    'backup-grouped-fail': BACKUP_GROUPED_FAIL,
    'backup-stacked': BACKUP_STACKED,
    'stream-filter': STREAM_FILTER,
    'commit-filter': COMMIT_FILTER,
    'mirror-filter': MIRROR_FILTER,
})


# Pull-mode incremental backup (image fleecing), the libvirt way on QEMU
# 7.2: a copy-before-write filter with the "bitmap" option over the disk,
# a snapshot-access node over it exported by NBD with the bitmap, a backup
# tool that copies the bitmap's dirty extents of the point-in-time view
# into an overlay of the full backup while the guest writes on.  The
# guest's export moves onto the filter, and back at the end (the other
# way, blockdev-reopen of a node above the disk, is reopen-vs-qsd.py's
# scenario reopen-fleece).

GUEST_IO = 'qemu-io -f raw %s "nbd+unix:///guest?socket=nbd.sock"'


def guest_export(node_name):
    return ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'guest',
                                        'node-name': node_name,
                                        'name': 'guest', 'writable': True})


def guest_export_del():
    return [('qmp', 'block-export-del', {'id': 'guest'}),
            ('event', 'BLOCK_EXPORT_DELETED', {'id': 'guest'})]


# The checkpoint of a pull-mode backup, at one instant: the next
# checkpoint c2, and "backup", a frozen copy of c1 for this backup.
CHECKPOINT_ACTIONS = [
            {'type': 'block-dirty-bitmap-add',
             'data': {'node': 'disk', 'name': 'c2', 'persistent': True}},
            {'type': 'block-dirty-bitmap-add',
             'data': {'node': 'disk', 'name': 'backup', 'disabled': True}},
            {'type': 'block-dirty-bitmap-merge',
             'data': {'node': 'disk', 'target': 'backup',
                      'bitmaps': ['c1']}},
            {'type': 'block-dirty-bitmap-disable',
             'data': {'node': 'disk', 'name': 'c1'}},
]

FLEECE = {
    'steps': [
        ('sh', 'qemu-img create -q -f qcow2 disk.qcow2 64M && '
               'qemu-io -f qcow2 -c "write -P 0x11 0 64M" disk.qcow2 && '
               # the full backup, of the disk as the checkpoint c1 starts
               'qemu-img convert -O qcow2 disk.qcow2 full.qcow2 && '
               'qemu-img create -q -f qcow2 fleece.qcow2 64M && '
               'qemu-img create -q -f qcow2 -b full.qcow2 -F qcow2 '
               'inc.qcow2'),
        ('start',),
        node('disk', 'disk.qcow2'),
        ('qmp', 'block-dirty-bitmap-add', {'node': 'disk', 'name': 'c1',
                                           'persistent': True}),
        ('qmp', 'nbd-server-start', {'addr': {'type': 'unix', 'data': {
            'path': '$DIR/nbd.sock'}}}),
        guest_export('disk'),
        # the guest writes: what the incremental backup must hold
        ('sh', GUEST_IO % '-c "write -P 0x21 0 64k" '
                          '-c "write -P 0x22 1M 192k" '
                          '-c "write -P 0x23 10M 4k" '
                          '-c "write -z 20M 1M" -c "discard 30M 64k"'),
        # the fleecing point: the next checkpoint c2 and a frozen copy of
        # c1 for this backup, at one instant
        ] + guest_export_del() + [
        node('fleece', 'fleece.qcow2'),
        ('qmp', 'transaction', {'actions': CHECKPOINT_ACTIONS}),
        # the disk at the fleecing point, for the check at the end
        ('qmp', 'blockdev-snapshot-internal-sync', {'device': 'disk',
                                                    'name': 'point'}),
        ('qmp', 'blockdev-add', {'driver': 'copy-before-write',
                                 'node-name': 'cbw', 'file': 'disk',
                                 'target': 'fleece',
                                 'bitmap': {'node': 'disk',
                                            'name': 'backup'}}),
        guest_export('cbw'),
        ('qmp', 'blockdev-add', {'driver': 'snapshot-access',
                                 'node-name': 'snap', 'file': 'cbw'}),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'snap',
                                     'node-name': 'snap', 'name': 'snap',
                                     'bitmaps': [{'node': 'disk',
                                                  'name': 'backup'}]}),
        ('qmp', 'query-block-exports'),
    ] + [('qmp', 'block-export-add', {'type': 'nbd', 'id': 'bad',
                                      'node-name': 'snap', 'bitmaps': [bm]})
         for bm in ({'node': 'nope', 'name': 'backup'},
                    {'node': 'disk', 'name': 'nope'}, {'node': 'disk'},
                    {'node': 'disk', 'name': 'c2', 'x': 1}, 'backup')] + [
        # the guest writes on: over dirty clusters (copied to the fleecing
        # image first) and clean ones (not copied)
        ('sh', GUEST_IO % '-c "write -P 0x31 0 128k" '
                          '-c "write -P 0x32 1M 64k" '
                          '-c "write -P 0x33 40M 64k" '
                          '-c "write -z 20M 64k"'),
        # the backup tool pulls the dirty extents into inc.qcow2
        node('inc', 'inc.qcow2'),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'inc',
                                     'node-name': 'inc', 'name': 'inc',
                                     'writable': True}),
        ('sh', '/usr/bin/python3 $TESTS/nbd_pull.py '
               '"nbd+unix:///snap?socket=nbd.sock" backup '
               '"nbd+unix:///inc?socket=nbd.sock" > pull.json'),
        # bitmaps in use by the export stay put
        ('qmp', 'block-dirty-bitmap-remove', {'node': 'disk',
                                              'name': 'backup'}),
        # teardown: the guest back on the disk, the fleecing nodes gone
        ('qmp', 'block-export-del', {'id': 'snap'}),
        ('event', 'BLOCK_EXPORT_DELETED', {'id': 'snap'}),
        ('qmp', 'block-export-del', {'id': 'inc'}),
        ('event', 'BLOCK_EXPORT_DELETED', {'id': 'inc'}),
        ] + guest_export_del() + [
        ('qmp', 'blockdev-del', {'node-name': 'snap'}),
        ('qmp', 'blockdev-del', {'node-name': 'cbw'}),
        ('qmp', 'blockdev-del', {'node-name': 'fleece'}),
        ('qmp', 'blockdev-del', {'node-name': 'inc'}),
        guest_export('disk'),
        ('qmp', 'block-dirty-bitmap-remove', {'node': 'disk',
                                              'name': 'backup'}),
        ('qmp', 'block-dirty-bitmap-remove', {'node': 'disk',
                                              'name': 'c1'}),
        # c2 holds the writes since the fleecing point
        ('qmp', 'x-debug-block-dirty-bitmap-sha256', {'node': 'disk',
                                                      'name': 'c2'}),
    ],
    'same_files': ['pull.json'],
    'after': [
        # the zeroed megabyte at 20M reads as zeroes in the snapshot's
        # status: its first cluster from the fleecing image, the rest
        # from the disk
        ('the pull read only dirty extents, zeroes as such, and a clean '
         'read was refused',
         '/usr/bin/python3 -c "import json, sys; '
         'p = json.load(open(\'pull.json\')); '
         'sys.exit(not (p[\'clean_read_refused\'] and 0 < p[\'bytes\'] '
         '< 4 << 20 and p[\'zero_bytes\'] == 1 << 20))"'),
        ('full + incremental is the disk at the fleecing point',
         'qemu-img convert -f qcow2 -l snapshot.name=point -O raw '
         'disk.qcow2 point.raw && qemu-img compare -f qcow2 -F raw '
         'inc.qcow2 point.raw'),
        # the clusters at 0 and 1M: dirty, then overwritten; 64k and 40M
        # were overwritten too but are clean, 20M was zeroed
        ('the fleecing image holds the old data of dirty clusters only',
         'test "$(qemu-img map --output=json fleece.qcow2 | /usr/bin/python3 '
         '-c "import json, sys; print(sum(e[\'length\'] for e in '
         'json.load(sys.stdin) if e[\'data\']))")" = $((128 << 10))'),
    ],
    'images': ['inc.qcow2', 'disk.qcow2', 'fleece.qcow2'],
}

# the same with the filter of a sync=none backup job (libvirt's pull mode
# before the filter had a bitmap): the whole fleecing point is one
# transaction, and the guest's export stays where it is
FLEECE_JOB = {
    'steps': FLEECE['steps'][:6] + [
        ('sh', GUEST_IO % '-c "write -P 0x21 0 64k" '
                          '-c "write -P 0x22 1M 192k"'),
        node('fleece', 'fleece.qcow2'),
        ('qmp', 'transaction', {'actions': CHECKPOINT_ACTIONS + [
            {'type': 'blockdev-snapshot-internal-sync',
             'data': {'device': 'disk', 'name': 'point'}},
            {'type': 'blockdev-backup',
             'data': {'job-id': 'fl', 'device': 'disk', 'target': 'fleece',
                      'sync': 'none', 'filter-node-name': 'cbw'}}]}),
        ('wait', 'fl', 'running'),
        ('qmp', 'blockdev-add', {'driver': 'snapshot-access',
                                 'node-name': 'snap', 'file': 'cbw'}),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'snap',
                                     'node-name': 'snap', 'name': 'snap',
                                     'bitmaps': [{'node': 'disk',
                                                  'name': 'backup'}]}),
        ('sh', GUEST_IO % '-c "write -P 0x31 0 128k" '
                          '-c "write -P 0x33 40M 64k"'),
        node('inc', 'inc.qcow2'),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'inc',
                                     'node-name': 'inc', 'name': 'inc',
                                     'writable': True}),
        ('sh', '/usr/bin/python3 $TESTS/nbd_pull.py '
               '"nbd+unix:///snap?socket=nbd.sock" backup '
               '"nbd+unix:///inc?socket=nbd.sock" > pull.json'),
        ('qmp', 'block-export-del', {'id': 'snap'}),
        ('event', 'BLOCK_EXPORT_DELETED', {'id': 'snap'}),
        ('qmp', 'block-export-del', {'id': 'inc'}),
        ('event', 'BLOCK_EXPORT_DELETED', {'id': 'inc'}),
        ('qmp', 'blockdev-del', {'node-name': 'snap'}),
        ('qmp', 'job-cancel', {'id': 'fl'}),
        ('wait', 'fl', 'null'),
        ('qmp', 'blockdev-del', {'node-name': 'fleece'}),
        ('qmp', 'blockdev-del', {'node-name': 'inc'}),
        ('qmp', 'block-dirty-bitmap-remove', {'node': 'disk',
                                              'name': 'backup'}),
        ('qmp', 'x-debug-block-dirty-bitmap-sha256', {'node': 'disk',
                                                      'name': 'c2'}),
    ],
    'same_files': ['pull.json'],
    'after': [FLEECE['after'][1]],
    # QEMU drains the job's filter when a node or an export is attached
    # above it (snapshot-access, its export), pausing the job for that
    # instant; qblock attaches without a drain, so the job never pauses
    'drop_events': [['JOB_STATUS_CHANGE', {'id': 'fl', 'status': s}]
                    for s in ('paused', 'running')],
    'images': ['inc.qcow2', 'disk.qcow2', 'fleece.qcow2'],
}


def cbw_policy(policy, timeout=False):
    """on-cbw-error (and cbw-timeout) of a fleecing filter whose copies
    fail (blkdebug) or take too long (null-co's latency): what the
    guest's writes and the view's reads get, and the images left."""
    if timeout:
        target = {'driver': 'null-co', 'node-name': 'slow',
                  'size': 64 << 20, 'latency-ns': 3 * 10 ** 9}
    else:
        target = {'driver': 'blkdebug', 'node-name': 'bad',
                  'image': 'fleece',
                  'inject-error': [{'event': 'none', 'iotype': 'write',
                                    'errno': 5}]}
    # what failed, not why: an EACCES reaches an NBD client as EPERM from
    # qblock, EINVAL from QEMU (block/nbd-proto.c says why)
    outcome = ('%s 2>&1 | grep -E "failed|^wrote|^read" | '
               'sed "s/failed: .*/failed/" > %s || true')
    steps = FLEECE['steps'][:4] + [
        node('fleece', 'fleece.qcow2'),
        ('qmp', 'blockdev-add', target),
        ('qmp', 'blockdev-add', {'driver': 'copy-before-write',
                                 'node-name': 'cbw', 'file': 'disk',
                                 'target': target['node-name'],
                                 'on-cbw-error': policy,
                                 **({'cbw-timeout': 1} if timeout else {})}),
        ('qmp', 'nbd-server-start', {'addr': {'type': 'unix', 'data': {
            'path': '$DIR/nbd.sock'}}}),
        guest_export('cbw'),
        ('qmp', 'blockdev-add', {'driver': 'snapshot-access',
                                 'node-name': 'snap', 'file': 'cbw'}),
        ('qmp', 'block-export-add', {'type': 'nbd', 'id': 'snap',
                                     'node-name': 'snap', 'name': 'snap'}),
        ('sh', outcome % (GUEST_IO % '-c "write -P 0x41 0 64k" '
                                     '-c "write -P 0x42 2M 4k"',
                          'writes.txt')),
        ('sh', outcome % ('qemu-io -r -f raw -c "read -P 0x11 4M 64k" '
                          '"nbd+unix:///snap?socket=nbd.sock"',
                          'reads.txt')),
        ('qmp', 'block-export-del', {'id': 'snap'}),
        ('event', 'BLOCK_EXPORT_DELETED', {'id': 'snap'}),
    ] + guest_export_del() + [
        ('qmp', 'blockdev-del', {'node-name': 'snap'}),
        ('qmp', 'blockdev-del', {'node-name': 'cbw'}),
    ]
    return {'steps': steps, 'same_files': ['writes.txt', 'reads.txt'],
            'images': ['disk.qcow2']}


SCENARIOS['fleece'] = FLEECE
SCENARIOS['cbw-break-guest-write'] = cbw_policy('break-guest-write')
SCENARIOS['cbw-break-snapshot'] = cbw_policy('break-snapshot')
SCENARIOS['cbw-timeout'] = cbw_policy('break-snapshot', timeout=True)
SCENARIOS['fleece-job'] = FLEECE_JOB


# ---------------------------------------------------------------------------
# blockdev-create at a location, ssh and rbd: run only when named, by the
# scripts that start their server (ssh.sh: QSSH_PORT, QSSH_USER; rbd.sh:
# CEPH_CONF, the test cluster's).  The images are made under names of
# each daemon's own directory ($DIR) or with its label in the name ($RUN).

def create_ssh():
    def loc(path, **extra):
        location = {'server': {'host': '127.0.0.1',
                               'port': os.environ['QSSH_PORT']},
                    'path': '$DIR/' + path, 'user': os.environ['QSSH_USER']}
        location.update(extra)
        return location
    return {
        'steps': [
            ('sh', 'head -c 3M /dev/urandom > c.raw'),
            ('start',),
        ] + create_job('j1', driver='ssh', location=loc('a.raw'),
                       size=4 << 20)
          + create_job('j2', driver='ssh', size=0,
                       location=loc('b.raw',
                                    **{'host-key-check': {'mode': 'none'}}))
          + create_job('j3', driver='ssh', location=loc('c.raw'),
                       size=1 << 20)
          # failures: in the job, and before it
          + create_job('e1', driver='ssh', location=loc('none/x.raw'),
                       size=1 << 20)
          + create_job('e3', driver='ssh', size=1 << 20,
                       location=loc('d.raw', **{'host-key-check': {
                           'mode': 'hash', 'type': 'sha256',
                           'hash': '00' * 32}})) + [
            ('qmp', 'blockdev-create', {'job-id': 'e4', 'options': {
                'driver': 'ssh', 'size': 1 << 20}}),
            ('qmp', 'blockdev-create', {'job-id': 'e5', 'options': {
                'driver': 'ssh', 'size': 1 << 20,
                'location': {'server': {'host': '127.0.0.1'},
                             'path': '/x'}}}),
            ('qmp', 'blockdev-create', {'job-id': 'e6', 'options': {
                'driver': 'ssh', 'size': 1 << 20,
                'location': loc('x.raw', bogus=1)}}),
            ('qmp', 'blockdev-create', {'job-id': 'e7', 'options': {
                'driver': 'ssh', 'size': 1 << 20,
                'location': loc('x.raw', **{'host-key-check': {
                    'mode': 'hash', 'type': 'sha256'}})}}),
            ('qmp', 'query-jobs'),
        ],
        'after': [
            ('the files have the sizes asked for, c.raw emptied first',
             'test $(stat -c %s a.raw) = 4194304 && '
             'test $(stat -c %s b.raw) = 0 && '
             'cmp -n 1048576 c.raw /dev/zero && '
             'test $(stat -c %s c.raw) = 1048576 && test ! -e d.raw'),
        ],
    }


def create_rbd():
    conf = os.environ['CEPH_CONF']

    def loc(image):
        return {'pool': 'rbd', 'image': image + '-$RUN', 'conf': conf}
    info = 'rbd info --format json rbd/%s-$RUN | ' \
           'python3 -c "import json, sys; i = json.load(sys.stdin); ' \
           'sys.exit(i[\'size\'] != %d or i[\'order\'] != %d)"'
    return {
        'steps': [
            ('start',),
            ('qmp', 'object-add', {'qom-type': 'secret', 'id': 'sec0',
                                   'data': 'foo'}),
        ] + create_job('j1', driver='rbd', location=loc('a'), size=4 << 20)
          + create_job('j2', driver='rbd', location=loc('b'), size=8 << 20,
                       **{'cluster-size': 1 << 20})
          + create_job('j3', driver='rbd', location=loc('c'), size=8 << 20,
                       encrypt={'format': 'luks', 'key-secret': 'sec0'})
          # failures: in the job, and before it
          + create_job('e1', driver='rbd', location=loc('e'), size=1 << 20,
                       **{'cluster-size': 1000})
          + create_job('e2', driver='rbd', location=loc('e'), size=1 << 20,
                       **{'cluster-size': 2048})
          + create_job('e3', driver='rbd', size=1 << 20,
                       location={'pool': 'nosuchpool', 'image': 'x',
                                 'conf': conf})
          + create_job('e4', driver='rbd', location=loc('a'), size=1 << 20)
          + create_job('e5', driver='rbd', location=loc('f'), size=1 << 20,
                       encrypt={'format': 'luks', 'key-secret': 'nosuch'})
          + [
            ('qmp', 'blockdev-create', {'job-id': 'e6', 'options': {
                'driver': 'rbd', 'location': loc('g'), 'size': 1 << 20,
                'encrypt': {'format': 'luks3', 'key-secret': 'sec0'}}}),
            ('qmp', 'blockdev-create', {'job-id': 'e7', 'options': {
                'driver': 'rbd', 'size': 1 << 20,
                'location': {'pool': 'rbd', 'conf': conf}}}),
            ('qmp', 'blockdev-create', {'job-id': 'e8', 'options': {
                'driver': 'rbd', 'size': 1 << 20,
                'location': dict(loc('g'), bogus='x')}}),
            ('qmp', 'blockdev-create', {'job-id': 'e9', 'options': {
                'driver': 'rbd', 'size': 1 << 20,
                'location': dict(loc('g'),
                                 **{'auth-client-required': ['krb']})}}),
            ('qmp', 'query-jobs'),
        ],
        # QEMU names a list element 'null'; qblock gives its path
        'better_messages': {
            "Parameter 'options.location.auth-client-required[0]'":
            "Parameter 'null'"},
        'after': [
            ('the images are what was asked for',
             (info % ('a', 4 << 20, 22)) + ' && ' +
             (info % ('b', 8 << 20, 20)) + ' && ' +
             'qemu-img info --object %s --image-opts driver=rbd,pool=rbd,'
             'image=c-$RUN,encrypt.format=luks,encrypt.key-secret=sec0 '
             '| grep -q "virtual size: 8 MiB"' % SECRET),
            ('no image is left where creation failed',
             '! rbd info rbd/e-$RUN 2>/dev/null && '
             '! rbd info rbd/f-$RUN 2>/dev/null'),
        ],
    }


NAMED_ONLY = {'create-ssh': create_ssh, 'create-rbd': create_rbd}


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else 'build')
    only = sys.argv[2:]
    tests = Tests()
    if not shutil.which('qemu-storage-daemon'):
        print('qemu-storage-daemon is not installed (Debian '
              'qemu-system-common)')
        return 77
    top = tempfile.mkdtemp(prefix='jobs-vs-qsd-')
    scenarios = dict(SCENARIOS)
    scenarios.update({name: make() for name, make in NAMED_ONLY.items()
                      if name in only})
    for name, scenario in scenarios.items():
        if only and name not in only:
            continue
        try:
            compare(tests, name, scenario, build, top)
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
