#!/usr/bin/env python3
"""x-blockdev-amend, as QEMU's: a job of type amend changes the key slots
of an open LUKS image (driver luks, or qcow2 with encrypt.format=luks)
while it is exported and written; the job ends in concluded with 1 of 1
progress and its error, if any, in query-jobs; the refusals and the
errors of the job are QEMU's.  Afterwards the image opens with the new
passphrases only."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic, nbd_uri, qemu_io     # noqa: E402

t = qsd.Tests('test-amend')
SECRETS = {'s0': 'abc', 's1': 'def', 's2': 'xyz'}
OBJECTS = ['secret,id=%s,data=%s' % kv for kv in SECRETS.items()]


def create(name, fmt):
    """A LUKS (or qcow2-in-LUKS) image of 1 MiB with passphrase s0 in
    slot 0, and fast key slots (iter-time 10 ms)."""
    prefix = 'encrypt.' if fmt == 'qcow2' else ''
    opts = '%skey-secret=s0,%siter-time=10' % (prefix, prefix)
    if fmt == 'qcow2':
        opts += ',encrypt.format=luks'
    rc, out, err = t.run([t.img_bin, 'create', '-q', '--object', OBJECTS[0],
                          '-f', fmt, '-o', opts, t.path(name), '1M'])
    if rc:
        raise RuntimeError('create failed: ' + err)


def node(name, fmt, secret='s0'):
    opts = {'driver': fmt, 'node-name': name,
            'file': {'driver': 'file', 'filename': t.path(name)}}
    if fmt == 'qcow2':
        opts['encrypt'] = {'format': 'luks', 'key-secret': secret}
    else:
        opts['key-secret'] = secret
    return opts


def opens_with(name, fmt, secret):
    """Whether the image opens (a slot takes @secret's passphrase)."""
    key = 'encrypt.key-secret' if fmt == 'qcow2' else 'key-secret'
    rc, out, err = t.run(['qemu-io', '--object',
                          'secret,id=%s,data=%s' % (secret, SECRETS[secret]),
                          '--image-opts', '-c', 'read 0 512',
                          'driver=%s,%s=%s,file.filename=%s'
                          % (fmt, key, secret, t.path(name))])
    return rc == 0 and 'read 512/512 bytes' in out


def amend(c, job, node_name, options, force=None):
    """Runs the job to its end; returns its query-jobs entry (dismissed
    after), or the command's error reply."""
    args = {'job-id': job, 'node-name': node_name, 'options': options}
    if force is not None:
        args['force'] = force
    r = c.cmd('x-blockdev-amend', args)
    if 'return' not in r:
        return r
    seen = []
    while not seen or seen[-1] != 'concluded':
        e = c.event('JOB_STATUS_CHANGE', timeout=60)
        if e is None:
            break
        seen.append(e['data']['status'])
    info = [j for j in c.cmd('query-jobs')['return'] if j['id'] == job]
    c.ok('job-dismiss', {'id': job})
    if not info:
        return None
    info[0]['seen'] = seen
    return info[0]


def luks(**kw):
    return dict(kw, driver='luks')


def test_luks_while_exported():
    create('l.img', 'luks')
    d = t.daemon(sum([['--object', o] for o in OBJECTS], []))
    c = d.qmp()
    c.ok('blockdev-add', node('l.img', 'luks'))
    c.ok('nbd-server-start', {'addr': {'type': 'unix', 'data': {
        'path': t.path('nbd.sock')}}})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e0', 'node-name':
                              'l.img', 'name': 'disk', 'writable': True})
    uri = nbd_uri(t.path('nbd.sock'), 'disk')
    rc, out = qemu_io(t, uri, 'write -P 0x5a 0 64k')
    t.equal('a write through the export', rc, 0)

    j = amend(c, 'add', 'l.img', luks(state='active', **{
        'new-secret': 's1', 'iter-time': 10}))
    t.equal('adding a slot: the job goes through QEMU\'s states',
            j['seen'], ['created', 'running', 'waiting', 'pending',
                        'concluded'])
    t.equal('adding a slot: type amend, 1 of 1, no error',
            {k: j.get(k) for k in ('type', 'current-progress',
                                   'total-progress', 'error')},
            {'type': 'amend', 'current-progress': 1, 'total-progress': 1,
             'error': None})
    j = amend(c, 'erase', 'l.img', luks(state='inactive', **{
        'old-secret': 's0'}))
    t.equal('erasing the slot of s0', j.get('error'), None)
    rc, out = qemu_io(t, uri, 'read -P 0x5a 0 64k')
    t.check('the data reads back through the export', rc == 0 and
            'Pattern verification failed' not in out, out)

    # the passphrase the node was opened with no longer opens a slot
    j = amend(c, 'add2', 'l.img', luks(state='active', **{
        'new-secret': 's2', 'iter-time': 10}))
    t.equal('adding needs a passphrase that opens a slot now',
            j.get('error'), 'Invalid password, cannot unlock any keyslot')
    j = amend(c, 'add3', 'l.img', luks(state='active', **{
        'new-secret': 's2', 'iter-time': 10, 'secret': 's1'}))
    t.equal('with secret naming one that does, it is added',
            j.get('error'), None)
    j = amend(c, 'erase2', 'l.img', luks(state='inactive', **{
        'old-secret': 's2'}))
    t.equal('erasing the slot of s2', j.get('error'), None)

    cases = [
        ('the last slots', luks(state='inactive', **{'old-secret': 's1'}),
         None),
        ('an active slot', luks(state='active', keyslot=1, **{
            'new-secret': 's2', 'secret': 's1'}), None),
        ('a keyslot out of range', luks(state='inactive', keyslot=9), None),
        ('a negative keyslot', luks(state='active', keyslot=-1, **{
            'new-secret': 's2', 'secret': 's1'}), None),
        ('old-secret when adding', luks(state='active', **{
            'new-secret': 's2', 'old-secret': 's1'}), None),
        ('new-secret when erasing', luks(state='inactive', keyslot=1, **{
            'new-secret': 's2'}), None),
        ('an erase without slot or passphrase', luks(state='inactive'),
         None),
        ('an unknown secret object', luks(state='active', **{
            'new-secret': 'nosuch', 'secret': 's1'}), None),
    ]
    expect = [
        'All the active keyslots match the (old) password that was given '
        'and erasing them will erase all the data in the image '
        'irreversibly - refusing operation',
        'Refusing to overwrite active keyslot 1 - please erase it first',
        'Invalid keyslot 9 specified, must be between 0 and 7',
        'Invalid keyslot 4294967295 specified, must be between 0 and 7',
        "'old-secret' must not be given when activating keyslots",
        "'new-secret' must not be given when erasing keyslots",
        'To erase keyslot(s), either explicit keyslot index or the '
        'password currently contained in them must be given',
        "No secret with id 'nosuch'",
    ]
    for (what, opts, force), msg in zip(cases, expect):
        j = amend(c, 'bad', 'l.img', opts, force)
        t.equal('the job fails on %s' % what, j.get('error'), msg)

    c.ok('block-export-del', {'id': 'e0'})
    c.event('BLOCK_EXPORT_DELETED', timeout=10)
    c.ok('blockdev-del', {'node-name': 'l.img'})
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    t.equal('afterwards the image opens with s1 only',
            [opens_with('l.img', 'luks', s) for s in ('s0', 's1', 's2')],
            [False, True, False])


def test_qcow2():
    create('q.qcow2', 'qcow2')
    create('ro.img', 'luks')
    t.create_image('plain.qcow2', size='1M')
    d = t.daemon(sum([['--object', o] for o in OBJECTS], []))
    c = d.qmp()
    c.ok('blockdev-add', node('q.qcow2', 'qcow2'))
    c.ok('blockdev-add', dict(node('ro.img', 'luks'), **{'read-only': True}))
    c.ok('blockdev-add', {'driver': 'qcow2', 'node-name': 'plain',
                          'file': {'driver': 'file', 'node-name': 'pf',
                                   'filename': t.path('plain.qcow2')}})

    def enc(**kw):
        return {'driver': 'qcow2', 'encrypt': dict({'format': 'luks'}, **kw)}

    j = amend(c, 'add', 'q.qcow2', enc(state='active', keyslot=3, **{
        'new-secret': 's1', 'iter-time': 10}))
    t.equal('qcow2: a slot added in keyslot 3', j.get('error'), None)
    j = amend(c, 'erase', 'q.qcow2', enc(state='inactive', keyslot=0))
    t.equal('qcow2: slot 0 erased', j.get('error'), None)
    j = amend(c, 'none', 'q.qcow2', {'driver': 'qcow2'})
    t.equal('qcow2 without encrypt: nothing to do', j.get('error'), None)
    j = amend(c, 'fmt', 'q.qcow2', {'driver': 'qcow2', 'encrypt': {
        'format': 'qcow'}})
    t.equal('qcow2: the format cannot change', j.get('error'),
            "Amend can't be used to change the qcow2 encryption format")
    j = amend(c, 'plain', 'plain', enc(state='active', **{
        'new-secret': 's1'}))
    t.equal('qcow2: an image without encryption', j.get('error'),
            "image is not encrypted, can't amend")

    refusals = [
        ('another driver', 'q.qcow2', luks(state='active'),
         "x-blockdev-amend doesn't support changing the block driver"),
        ('an unknown node', 'nope', luks(state='active'),
         "Cannot find device='' nor node-name='nope'"),
        ('a driver without amend', 'pf', {'driver': 'file'},
         'Driver does not support x-blockdev-amend'),
        ('a read-only node', 'ro.img', luks(state='inactive', keyslot=0),
         'Block node is read-only'),
    ]
    for what, name, opts, msg in refusals:
        t.equal('refused: %s' % what, error_of(amend(c, 'r', name, opts)),
                generic(msg))
    r = c.cmd('x-blockdev-amend', {'job-id': 'x', 'node-name': 'q.qcow2'})
    t.equal('refused: no options', error_of(r),
            generic("Parameter 'options' is missing"))
    r = c.cmd('x-blockdev-amend', {'job-id': 'x', 'node-name': 'q.qcow2',
                                   'options': {'driver': 'luks'}})
    t.equal('refused: luks options without state', error_of(r),
            generic("Parameter 'options.state' is missing"))
    t.equal('no job is left', c.cmd('query-jobs'), {'return': []})
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    t.equal('afterwards the qcow2 image opens with s1 only',
            [opens_with('q.qcow2', 'qcow2', s) for s in ('s0', 's1')],
            [False, True])


test_luks_while_exported()
test_qcow2()
t.finish()
