#!/usr/bin/env python3
"""qblock-storage-daemon's QMP monitor driven with raw JSON over its unix
socket: the greeting and negotiation, every command, the envelope and
argument checks, bad JSON, unknown commands, several clients, clients that
go away, oversized input, and the errors QEMU 7.2's qemu-storage-daemon
sends for the same requests (observed through its own QMP socket).

  tests/daemon/test-qmp.py BUILD_DIR
"""
import json
import os
import re
import socket
import time

import qsd
from qsd import error_of, generic

t = qsd.Tests('test-qmp')

def schema_commands():
    """Every command the QMP schema (qapi/*.json) declares, sorted: the
    daemon must implement each one (and registers nothing undeclared)."""
    names = []
    qapi = os.path.join(qsd.SRC, 'qapi')
    for f in sorted(os.listdir(qapi)):
        if f.endswith('.json'):
            names += re.findall(r'\{"command": "([^"]+)"',
                                open(os.path.join(qapi, f)).read())
    return sorted(names)


EXPECTED_COMMANDS = schema_commands()


def test_greeting_and_negotiation(d):
    c = d.qmp(negotiate=False)
    g = c.greeting
    t.check('greeting has QMP version and capabilities',
            g and set(g['QMP']) == {'version', 'capabilities'}, g)
    v = g['QMP']['version']
    t.equal('greeting version', sorted(v['qemu']), ['major', 'micro', 'minor'])
    t.check('greeting package names qblock', v['package'].startswith('qblock'))
    t.equal('oob offered, as qemu-storage-daemon offers it',
            g['QMP']['capabilities'], ['oob'])

    r = c.cmd('query-version')
    t.equal('commands are refused before negotiation', error_of(r),
            ('CommandNotFound',
             "Expecting capabilities negotiation with 'qmp_capabilities'"))
    r = c.cmd('nosuch')
    t.equal('unknown commands too', error_of(r)[0], 'CommandNotFound')
    r = c.cmd('qmp_capabilities', {'enable': 'oob'})
    t.equal('enable must be an array', error_of(r),
            generic("Invalid parameter type for 'enable', expected: array"))
    r = c.cmd('qmp_capabilities', {'enable': ['bogus']})
    t.equal('enable takes only QMPCapability values', error_of(r),
            generic("Parameter 'enable[0]' does not accept value 'bogus'"))
    r = c.cmd('qmp_capabilities', id=5)
    t.equal('qmp_capabilities succeeds, id echoed', r,
            {'return': {}, 'id': 5})
    r = c.cmd('qmp_capabilities')
    t.equal('a second qmp_capabilities is refused', error_of(r),
            ('CommandNotFound',
             'Capabilities negotiation is already complete, command '
             'ignored'))
    r = c.cmd('query-version', id={'a': [1, 'x']})
    t.equal('query-version matches the greeting, any id echoed', r,
            {'return': v, 'id': {'a': [1, 'x']}})
    cmds = c.ok('query-commands')
    names = [x['name'] for x in cmds]
    t.equal('query-commands lists every command, sorted', names,
            EXPECTED_COMMANDS)
    c.send_raw(b'{"execute":"query-version"}\n')
    raw = c.sock.recv(65536) if not c.buf else c.buf
    # members in QEMU's order (its QDict's), not the schema's
    t.check('replies are one line ending in CRLF, spaced and ordered as '
            'QEMU does',
            raw.startswith(b'{"return": {"qemu": {"micro": 0, "minor": 2, '
                           b'"major": 7}, "package": ') and
            raw.endswith(b'\r\n') and raw.count(b'\r\n') == 1, raw)
    c.buf = b''
    c.close()


def test_oob(d):
    """With oob enabled a request may say exec-oob; no command of the
    daemon runs out of band (none of qemu-storage-daemon's does), so each
    is refused, in QEMU's words and checks; in-band requests go on."""
    c = d.qmp(negotiate=False)
    t.equal('qmp_capabilities enables oob',
            c.cmd('qmp_capabilities', {'enable': ['oob']}, id=1),
            {'return': {}, 'id': 1})
    for raw, want in [
        (b'{"exec-oob":"query-version","id":2}\n',
         {'id': 2, 'error': {'class': 'GenericError', 'desc':
                             'The command query-version does not support '
                             'OOB'}}),
        (b'{"exec-oob":"nosuch","id":3}\n',
         {'id': 3, 'error': {'class': 'CommandNotFound', 'desc':
                             'The command nosuch has not been found'}}),
        (b'{"exec-oob":"qmp_capabilities"}\n',
         generic_reply('The command qmp_capabilities does not support '
                       'OOB')),
        (b'{"exec-oob":5}\n',
         generic_reply("QMP input member 'exec-oob' must be a string")),
        (b'{"exec-oob":"query-version","execute":"query-version"}\n',
         generic_reply("QMP input member 'execute' clashes with "
                       "'exec-oob'")),
    ]:
        c.send_raw(raw)
        t.equal('oob: %s' % raw.strip().decode(), c.reply(), want)
    r = c.cmd('query-version', id=4)
    t.check('in-band commands still run', 'return' in r and
            r.get('id') == 4, r)
    c.close()


def generic_reply(desc):
    return {'error': {'class': 'GenericError', 'desc': desc}}


def test_envelope(d):
    c = d.qmp()
    for raw, desc in [
        (b'1\n', 'QMP input must be a JSON object'),
        (b'[1]\n', 'QMP input must be a JSON object'),
        (b'"abc"\n', 'QMP input must be a JSON object'),
        (b'null\n', 'QMP input must be a JSON object'),
        (b'{"foo":1}\n', "QMP input member 'foo' is unexpected"),
        (b'{"arguments":{}}\n', "QMP input lacks member 'execute'"),
        (b'{"execute":5}\n', "QMP input member 'execute' must be a string"),
        (b'{"execute":"query-version","arguments":[]}\n',
         "QMP input member 'arguments' must be an object"),
        (b'{"execute":"query-version","arguments":null}\n',
         "QMP input member 'arguments' must be an object"),
        (b'{"exec-oob":"query-version"}\n',
         "QMP input member 'exec-oob' is unexpected"),
        (b'{"execute":"query-version","control":{}}\n',
         "QMP input member 'control' is unexpected"),
    ]:
        c.send_raw(raw)
        t.equal('envelope %s' % raw.strip().decode(), error_of(c.reply()),
                generic(desc))
    c.send_raw(b'{"execute":"query-version","foo":1,"id":"x"}\n')
    r = c.reply()
    t.equal('the id comes back with an envelope error', r.get('id'), 'x')
    r = c.cmd('no-such-command', id=7)
    t.equal('unknown command', error_of(r),
            ('CommandNotFound', 'The command no-such-command has not been '
             'found'))
    t.equal('unknown command keeps the id', r.get('id'), 7)
    c.close()


def test_bad_json(d):
    c = d.qmp()
    for raw, desc in [
        (b'{"a":}\n', 'JSON parse error, expecting value'),
        (b'{"a" 1}\n', 'JSON parse error, missing : in object pair'),
        (b'{"a":1,}\n', 'JSON parse error, expecting value'),
        (b'{"a":0x10}\n', 'JSON parse error, expected separator in dict'),
        (b'{"execute":"query-version","id":[1 2]}\n',
         'JSON parse error, expected separator in list'),
        (b'{1:2}\n', 'JSON parse error, key is not a string in object'),
        (b'{"execute":"query-version","execute":"quit"}\n',
         'JSON parse error, duplicate key'),
        (b'{"execute":"query-version","id":tru}\n',
         "JSON parse error, invalid keyword 'tru'"),
        (b'{"a":/*x*/1}\n', "JSON parse error, stray '/'"),
        (b'{"execute":"query-version","id":"\\q"}\n',
         'JSON parse error, invalid escape sequence in string'),
        (b'{"execute":"query-version","id":"\\ud800"}\n',
         'JSON parse error, \\ud800 is not a valid Unicode character'),
        (b'{"execute":"query-version","id":"abc\n',
         'JSON parse error, control character 0x0a in string'),
        (b']\n', 'JSON parse error, expecting value'),
        (b'{"execute":"query-version","id":01}\n',
         "JSON parse error, invalid number '01'"),
    ]:
        c.send_raw(raw)
        t.equal('bad JSON %r' % raw.strip(), error_of(c.reply()),
                generic(desc))
    # 0xff (never in UTF-8) discards a partial message: QEMU's resync byte
    c.send_raw(b'{"execute":"query-version","id":[1,\xff'
               b'{"execute":"query-version","id":"synced"}')
    t.equal('0xff discards the partial message', c.reply().get('id'),
            'synced')
    c.send_raw(b'{"execute":"query-version","id":18446744073709551616}\n')
    t.equal('a number beyond int64 comes back as a double',
            c.reply().get('id'), 1.8446744073709552e+19)
    # a message split over many writes and lines, then two in one write
    for piece in [b'{"exe', b'cute"\n:', b' "query-', b'version", "id"',
                  b':1}']:
        c.send_raw(piece)
        time.sleep(0.01)
    t.equal('a request split over writes and lines', c.reply().get('id'), 1)
    c.send_raw(b'{"execute":"query-version","id":2}'
               b'{"execute":"query-version","id":3}')
    t.equal('two requests in one write', [c.reply().get('id'),
                                          c.reply().get('id')], [2, 3])
    c.close()


def test_limits(d):
    c = d.qmp()
    big = b'{"execute":"query-version","id":"' + b'x' * (2 << 20) + b'"}\n'
    c.send_raw(big)
    t.equal('an oversized request gets one error', error_of(c.reply()),
            generic('JSON message longer than 1048576 bytes'))
    r = c.cmd('query-version', id='after')
    t.equal('and the next request works', r.get('id'), 'after')
    deep = b'{"execute":"query-version","id":' + b'[' * 5000 + \
        b']' * 5000 + b'}\n'
    c.send_raw(deep)
    t.equal('deep nesting gets one error', error_of(c.reply()),
            generic('JSON nesting depth limit exceeded'))
    r = c.cmd('query-version', id='after-deep')
    t.equal('and the next request works again', r.get('id'), 'after-deep')
    # a top-level token without end is bounded too
    c.send_raw(b'y' * (3 << 20) + b'\n')
    t.equal('an endless bare word gets one error', error_of(c.reply()),
            generic('JSON message longer than 1048576 bytes'))
    t.check('daemon alive after oversized input',
            c.cmd('query-version').get('return'))
    c.close()


def test_argument_checks(d):
    c = d.qmp()
    for cmd, args, desc in [
        ('query-version', {'a': 1}, "Parameter 'a' is unexpected"),
        ('blockdev-del', {}, "Parameter 'node-name' is missing"),
        ('blockdev-del', {'node-name': 3},
         "Invalid parameter type for 'node-name', expected: string"),
        ('blockdev-del', {'node-name': None},
         "Invalid parameter type for 'node-name', expected: string"),
        ('query-named-block-nodes', {'flat': 'yes'},
         "Invalid parameter type for 'flat', expected: boolean"),
        ('block-export-add', {'type': 'nbd'}, "Parameter 'id' is missing"),
        ('block-export-add', {'type': 'bogus', 'id': 'e', 'node-name': 'n'},
         "Parameter 'type' does not accept value 'bogus'"),
        ('block-export-add', {'type': 'nbd', 'id': 'e', 'node-name': 'n',
                              'num-queues': 1},
         "Parameter 'num-queues' is unexpected"),
        ('block-export-del', {'id': 'e', 'mode': 'soft'},
         "Parameter 'mode' does not accept value 'soft'"),
        ('nbd-server-start', {'addr': {'type': 'unix', 'path': '/x'}},
         "Parameter 'addr.data' is missing"),
        ('nbd-server-start', {'addr': {'type': 'unix', 'data':
                                       {'path': '/x'}},
                              'max-connections': -1},
         "Parameter 'max-connections' expects uint32_t"),
        ('x-blockdev-set-write-cache', {'writeback': 1},
         "Invalid parameter type for 'writeback', expected: boolean"),
    ]:
        r = c.cmd(cmd, args)
        t.equal('%s %s' % (cmd, json.dumps(args)), error_of(r),
                generic(desc))
    c.close()


def test_blockdev(d):
    c = d.qmp()
    img = t.create_image('a.qcow2')
    ok = c.cmd('blockdev-add', {'driver': 'file', 'node-name': 'file0',
                                'filename': img})
    t.equal('blockdev-add file', ok, {'return': {}})
    ok = c.cmd('blockdev-add', {'driver': 'qcow2', 'node-name': 'fmt0',
                                'file': 'file0'})
    t.equal('blockdev-add qcow2 over it by reference', ok, {'return': {}})
    for args, desc in [
        ({'driver': 'qcow2', 'node-name': 'fmt0', 'file': 'file0'},
         "Duplicate nodes with node-name='fmt0'"),
        # QEMU names fmt0 first, then fmt1: the conflict is symmetric and
        # the block layer names the new user first
        ({'driver': 'qcow2', 'node-name': 'fmt1', 'file': 'file0'},
         "Permission conflict on node 'file0': permissions 'write, resize' "
         "are both required by node 'fmt1' (uses node 'file0' as 'file' "
         "child) and unshared by node 'fmt0' (uses node 'file0' as 'file' "
         "child)."),
        ({'driver': 'file', 'node-name': 'f2', 'filename': '/nonexist/x'},
         "Could not open '/nonexist/x': No such file or directory"),
        ({'driver': 'file', 'node-name': 'f2', 'filename': 5},
         "Invalid parameter type for 'filename', expected: string"),
        ({'driver': 'file', 'node-name': 'f2', 'filename': img,
          'read-only': 'on'},
         "Invalid parameter type for 'read-only', expected: boolean"),
        ({'driver': 'qcow2', 'node-name': 'f2',
          'file': {'driver': 'file', 'filename': img, 'locking': 1}},
         "Invalid parameter type for 'file.locking', expected: string"),
        ({'driver': 'qcow2', 'node-name': 'f2',
          'file': {'filename': img}},
         "Parameter 'file.driver' is missing"),
        ({'driver': 'file', 'node-name': 'f2', 'filename': img,
          'cache': {'direct': 'on'}},
         "Invalid parameter type for 'cache.direct', expected: boolean"),
        ({'driver': 'file', 'node-name': 'f2', 'filename': img, 'bogus': 1},
         "Block protocol 'file' doesn't support the option 'bogus'"),
        ({'node-name': 'f2', 'filename': img}, "Parameter 'driver' is missing"),
        ({'driver': 'nosuch', 'node-name': 'f2'},
         "Parameter 'driver' does not accept value 'nosuch'"),
        ({'driver': 'file', 'filename': img},
         "'node-name' must be specified for the root node"),
    ]:
        r = c.cmd('blockdev-add', args)
        t.equal('blockdev-add refuses %s' % json.dumps(args)[:60],
                error_of(r), generic(desc))
    nodes = c.ok('query-named-block-nodes')
    by_name = {n['node-name']: n for n in nodes}
    t.equal('query-named-block-nodes lists both', sorted(by_name),
            ['file0', 'fmt0'])
    fmt = by_name.get('fmt0', {})
    t.equal('qcow2 node fields', (fmt.get('drv'), fmt.get('ro'),
                                  fmt.get('file'), fmt.get('detect_zeroes'),
                                  fmt.get('backing_file_depth')),
            ('qcow2', False, img, 'off', 0))
    t.equal('cache fields (writeback, direct, no-flush)', fmt.get('cache'),
            {'writeback': True, 'direct': False, 'no-flush': False})
    image = fmt.get('image', {})
    t.equal('image info', (image.get('format'), image.get('virtual-size'),
                           image.get('cluster-size')),
            ('qcow2', 64 << 20, 65536))
    t.equal('format-specific says not corrupt',
            image.get('format-specific', {}).get('data', {}).get('corrupt'),
            False)
    c.ok('blockdev-add', {'driver': 'file', 'node-name': 'direct0',
                          'filename': t.create_image('b.raw', '1M', 'raw'),
                          'cache': {'direct': True, 'no-flush': True},
                          'read-only': True})
    info = [n for n in c.ok('query-named-block-nodes', {'flat': True})
            if n['node-name'] == 'direct0'][0]
    t.equal('cache.direct and cache.no-flush reported', info['cache'],
            {'writeback': True, 'direct': True, 'no-flush': True})
    t.equal('read-only reported', info['ro'], True)
    c.ok('blockdev-add', {'driver': 'qcow2', 'node-name': 'fmt2',
                          'file': {'driver': 'file', 'node-name': 'file2',
                                   'filename': t.create_image('c.qcow2')}})
    # QEMU's order: newest first, a node before the file opened with it
    t.equal('query-block: no BlockBackend has a name, as in QEMU',
            c.ok('query-block'), [])
    t.equal('query-named-block-nodes lists the newest first',
            [n['node-name'] for n in c.ok('query-named-block-nodes')],
            ['fmt2', 'file2', 'direct0', 'fmt0', 'file0'])

    r = c.cmd('blockdev-del', {'node-name': 'file0'})
    t.equal('a node used by another is in use', error_of(r),
            generic('Block device file0 is in use'))
    r = c.cmd('blockdev-del', {'node-name': 'nosuch'})
    t.equal('blockdev-del of a missing node', error_of(r),
            generic("Failed to find node with node-name='nosuch'"))
    t.equal('blockdev-del of the read-only node',
            c.cmd('blockdev-del', {'node-name': 'direct0'}), {'return': {}})
    c.close()


def test_object_types(c):
    """qom-list-types and qom-list-properties: qblock's types with QEMU's
    parents and the properties the schema declares (QEMU lists more types
    and a few more properties, such as a secret's 'loaded')."""
    types = {(x['name'], x.get('parent')) for x in
             c.ok('qom-list-types', {'implements': 'user-creatable'})}
    t.check('qom-list-types: the object types with QEMU\'s parents',
            {('authz-simple', 'authz'), ('authz-list', 'authz'),
             ('iothread', 'event-loop-base'),
             ('main-loop', 'event-loop-base'), ('secret', 'secret_common'),
             ('throttle-group', 'object'), ('tls-creds-psk', 'tls-creds'),
             ('tls-creds-x509', 'tls-creds')} <= types, types)
    t.equal('qom-list-types: implements one type',
            c.ok('qom-list-types', {'implements': 'secret'}),
            [{'name': 'secret', 'parent': 'secret_common'}])
    abstract = c.ok('qom-list-types', {'implements': 'secret_common',
                                       'abstract': True})
    t.check('qom-list-types: abstract parents on request',
            {'name': 'secret_common', 'parent': 'object',
             'abstract': True} in abstract, abstract)
    props = c.ok('qom-list-properties', {'typename': 'authz-simple'})
    t.equal('qom-list-properties of authz-simple',
            sorted((p['name'], p['type']) for p in props),
            [('identity', 'string'), ('type', 'string')])
    props = c.ok('qom-list-properties', {'typename': 'authz-list'})
    t.equal('qom-list-properties of authz-list, as QEMU\'s',
            props, [{'name': 'type', 'type': 'string'},
                    {'name': 'policy', 'type': 'QAuthZListPolicy'},
                    {'name': 'rules', 'type': 'QAuthZListRule'}])
    props = {(p['name'], p['type']) for p in
             c.ok('qom-list-properties', {'typename': 'iothread'})}
    t.check('qom-list-properties of iothread: its poll properties',
            {('type', 'string'), ('poll-max-ns', 'int'), ('poll-grow', 'int'),
             ('poll-shrink', 'int'), ('aio-max-batch', 'int')} <= props,
            props)
    props = {(p['name'], p['type']) for p in
             c.ok('qom-list-properties', {'typename': 'secret'})}
    t.check('qom-list-properties of secret: enums by their type name',
            ('format', 'QCryptoSecretFormat') in props, props)
    t.equal('qom-list-properties of an unknown type',
            error_of(c.cmd('qom-list-properties', {'typename': 'nosuch'})),
            ('DeviceNotFound', "Class 'nosuch' not found"))


def test_schema(c):
    """query-qmp-schema: QEMU's SchemaInfo list, closed under the type
    references, with a command entry for each command the daemon runs."""
    r = c.ok('query-qmp-schema')
    ents = {e['name']: e for e in r}
    commands = {e['name'] for e in r if e['meta-type'] == 'command'}
    t.equal('query-qmp-schema: one command entry per command it runs',
            commands, {x['name'] for x in c.ok('query-commands')})

    def refs(e):
        out = [e.get(k) for k in ('arg-type', 'ret-type', 'element-type')]
        out += [m['type'] for m in e.get('members', []) if 'type' in m]
        out += [v['type'] for v in e.get('variants', [])]
        return [x for x in out if x]
    dangling = [(e['name'], x) for e in r for x in refs(e) if x not in ents]
    t.equal('query-qmp-schema: every type it refers to is described',
            dangling, [])
    t.check('query-qmp-schema: builtins have their JSON type',
            ents.get('str', {}).get('json-type') == 'string' and
            ents.get('int', {}).get('json-type') == 'int', ents.get('str'))
    args = ents[ents['blockdev-mirror']['arg-type']]
    t.equal('query-qmp-schema: blockdev-mirror\'s arguments, required '
            'and optional', sorted((m['name'], 'default' in m)
                                   for m in args['members']),
            [('auto-dismiss', True), ('auto-finalize', True),
             ('buf-size', True), ('copy-mode', True), ('device', False),
             ('filter-node-name', True), ('granularity', True),
             ('job-id', True), ('on-source-error', True),
             ('on-target-error', True), ('replaces', True), ('speed', True),
             ('sync', False), ('target', False)])
    ret = ents[ents['query-jobs']['ret-type']]
    t.equal('query-qmp-schema: query-jobs returns an array',
            ret['meta-type'], 'array')


def test_objects(d):
    c = d.qmp()
    test_object_types(c)
    test_schema(c)
    secret = {'qom-type': 'secret', 'id': 'sec0', 'data': 'pw'}
    t.equal('object-add secret', c.cmd('object-add', secret), {'return': {}})
    t.equal('object-add: a duplicate id',
            error_of(c.cmd('object-add', secret)),
            generic("An object with id 'sec0' already exists"))
    for args, msg in [
        ({'qom-type': 'secret', 'id': 's1'},
         "Either 'file' or 'data' must be provided"),
        ({'qom-type': 'secret', 'id': 's1', 'data': 'a', 'file': 'b'},
         "'file' and 'data' are mutually exclusive"),
        ({'qom-type': 'secret', 'id': 's1', 'data': 'a', 'format': 'hex'},
         "Parameter 'format' does not accept value 'hex'"),
        ({'qom-type': 'secret', 'id': 's1', 'data': 5},
         "Invalid parameter type for 'data', expected: string"),
        ({'qom-type': 'nosuch', 'id': 's1'},
         "Parameter 'qom-type' does not accept value 'nosuch'"),
        ({'qom-type': 'secret', 'id': '1s', 'data': 'a'},
         "Parameter 'id' expects an identifier"),
    ]:
        t.equal('object-add refused: %s' % msg,
                error_of(c.cmd('object-add', args)), generic(msg))
    t.equal('object-del', c.cmd('object-del', {'id': 'sec0'}), {'return': {}})
    t.equal('object-del of an unknown id',
            error_of(c.cmd('object-del', {'id': 'sec0'})),
            generic("object 'sec0' not found"))
    c.close()


def test_exports(d):
    c = d.qmp()
    sock = t.path('nbd.sock')
    r = c.cmd('block-export-add', {'type': 'nbd', 'id': 'e0',
                                   'node-name': 'fmt0'})
    t.equal('an NBD export needs the server', error_of(r),
            generic('NBD server not running'))
    t.equal('nbd-server-stop before start', error_of(c.cmd('nbd-server-stop')),
            generic('NBD server not running'))
    r = c.cmd('nbd-server-start', {'addr': {'type': 'unix',
                                            'data': {'path': sock}}})
    t.equal('nbd-server-start', r, {'return': {}})
    r = c.cmd('nbd-server-start', {'addr': {'type': 'unix',
                                            'data': {'path': sock}}})
    t.equal('only one NBD server', error_of(r),
            generic('NBD server already running'))
    r = c.cmd('nbd-server-start', {'addr': {'type': 'unix',
                                            'data': {'path': sock}},
                                   'tls-authz': 'a0'})
    t.equal('tls-authz needs tls-creds', error_of(r),
            generic('tls-authz is not permitted without tls-creds'))
    r = c.cmd('block-export-add', {'type': 'nbd', 'id': 'e0',
                                   'node-name': 'fmt0', 'name': 'disk',
                                   'writable': True})
    t.equal('block-export-add nbd', r, {'return': {}})
    for args, desc in [
        ({'type': 'nbd', 'id': 'e0', 'node-name': 'fmt0'},
         "Block export id 'e0' is already in use"),
        ({'type': 'nbd', 'id': 'e1', 'node-name': 'nosuch'},
         "Cannot find device='' nor node-name='nosuch'"),
        ({'type': 'nbd', 'id': 'e1', 'node-name': 'fmt0', 'name': 'disk'},
         "NBD server already has export named 'disk'"),
        ({'type': 'nbd', 'id': 'e1', 'node-name': 'fmt0', 'bitmaps': ['b']},
         "Bitmap 'b' is not found"),
        ({'type': 'nbd', 'id': 'e1', 'node-name': 'fmt0', 'iothread': 'io0'},
         'iothread "io0" not found'),
        ({'type': 'vhost-user-blk', 'id': 'e1', 'node-name': 'fmt0',
          'addr': {'type': 'inet', 'host': '127.0.0.1', 'port': '0'}},
         "Only socket address types 'unix' and 'fd' are supported"),
        ({'type': 'vhost-user-blk', 'id': 'e1', 'node-name': 'fmt0',
          'addr': {'type': 'unix', 'path': t.path('vhost.sock')},
          'logical-block-size': 1000},
         "vhost-user-blk export 'e1': logical-block-size 1000 is not a "
         "power of 2 from 512 to 65536"),
        ({'type': 'vhost-user-blk', 'id': 'e1', 'node-name': 'fmt0',
          'addr': {'type': 'unix', 'path': t.path('vhost.sock')},
          'num-queues': 0},
         "vhost-user-blk export 'e1': num-queues 0 is not from 1 to 256"),
    ]:
        t.equal('block-export-add refuses %s' % json.dumps(args)[:60],
                error_of(c.cmd('block-export-add', args)), generic(desc))
    t.equal('query-block-exports', c.ok('query-block-exports'),
            [{'id': 'e0', 'type': 'nbd', 'node-name': 'fmt0',
              'shutting-down': False}])
    r = c.cmd('blockdev-del', {'node-name': 'fmt0'})
    t.equal('an exported node is in use', error_of(r),
            generic('Node fmt0 is in use'))
    uri = qsd.nbd_uri(sock, 'disk')
    rc, out = qsd.qemu_io(t, uri, 'write -P 0x5a 0 64k', 'read -P 0x5a 0 64k')
    t.check('the real qemu-io writes and reads through the export', rc == 0,
            out)
    stats = c.ok('query-blockstats')
    t.equal('query-blockstats has the export', [(s.get('device'),
                                                 s.get('x-export'),
                                                 s.get('node-name'))
                                                for s in stats],
            [('', 'e0', 'fmt0')])
    s = stats[0]['stats'] if stats else {}
    t.check('its counters saw the I/O', s.get('wr_operations', 0) >= 1 and
            s.get('wr_bytes', 0) >= 65536 and s.get('rd_bytes', 0) >= 65536
            and s.get('wr_highest_offset') == 65536, s)
    t.equal('and the root node below it', stats[0].get('parent', {})
            .get('node-name'), 'fmt0')
    nodes = c.ok('query-blockstats', {'query-nodes': True})
    file0 = [n for n in nodes if n.get('node-name') == 'file0']
    t.check('query-nodes reports the file node\'s own requests',
            file0 and file0[0]['stats']['wr_operations'] >= 1, nodes)
    fmt0 = [n for n in nodes if n.get('node-name') == 'fmt0']
    t.equal('a format node has its file below as parent',
            fmt0 and fmt0[0].get('parent', {}).get('node-name'), 'file0')

    test_write_cache(c, uri)

    r = c.cmd('nbd-server-add', {'device': 'fmt0', 'name': 'legacy'})
    t.equal('nbd-server-add', r, {'return': {}})
    ids = [e['id'] for e in c.ok('query-block-exports')]
    # newest first, as qemu-storage-daemon lists them
    t.equal('its export id is its name', ids, ['legacy', 'e0'])
    r = c.cmd('nbd-server-remove', {'name': 'legacy'})
    t.equal('nbd-server-remove', r, {'return': {}})
    ev = c.event('BLOCK_EXPORT_DELETED')
    t.equal('BLOCK_EXPORT_DELETED for it', ev and ev['data'], {'id': 'legacy'})
    t.check('events carry a timestamp', ev and
            set(ev['timestamp']) == {'seconds', 'microseconds'} and
            abs(ev['timestamp']['seconds'] - time.time()) < 60, ev)
    r = c.cmd('nbd-server-remove', {'name': 'legacy'})
    t.equal('nbd-server-remove of a removed export', error_of(r),
            generic("Export 'legacy' is not found"))
    test_export_del_in_use(c, uri)
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e2', 'node-name': 'fmt0'})
    r = c.cmd('nbd-server-stop')
    t.equal('nbd-server-stop', r, {'return': {}})
    ev = c.event('BLOCK_EXPORT_DELETED')
    t.equal('it removes the NBD exports', ev and ev['data'], {'id': 'e2'})
    t.equal('no export left', c.ok('query-block-exports'), [])
    t.check('the NBD socket is gone', not os.path.exists(sock))
    t.equal('blockdev-del qcow2 then file',
            [c.cmd('blockdev-del', {'node-name': n}) for n in
             ('fmt0', 'file0')], [{'return': {}}] * 2)
    rc, out, err = t.run(['qemu-img', 'check', t.path('a.qcow2')])
    t.check('the image checks clean after blockdev-del', rc == 0, out + err)
    c.close()


def flushes(c, export_id):
    """Flush counts of the export's BlockBackend and of its file node."""
    stats = c.ok('query-blockstats')
    blk = [s for s in stats if s.get('x-export') == export_id][0]
    return (blk['stats']['flush_operations'],
            blk['parent']['parent']['stats']['flush_operations'])


def test_write_cache(c, uri):
    r = c.cmd('x-blockdev-set-write-cache', {'id': 'e0'})
    t.equal('an export starts in writeback', r, {'return': {'writeback': True}})
    writes = ['write -P %d %dk 4k' % (i, 64 + 4 * i) for i in range(4)]
    # allocate first, so that the rounds measured are plain overwrites
    # (allocating qcow2 writes flush metadata of their own)
    qsd.qemu_io(t, uri, *writes)
    before = flushes(c, 'e0')
    rc, out = qsd.qemu_io(t, uri, *writes)
    wb = flushes(c, 'e0')
    t.check('writes in writeback', rc == 0, out)
    r = c.cmd('x-blockdev-set-write-cache', {'id': 'e0', 'writeback': False})
    t.equal('switch the export to writethrough', r,
            {'return': {'writeback': False}})
    node = [n for n in c.ok('query-named-block-nodes')
            if n['node-name'] == 'fmt0'][0]
    t.equal('query-named-block-nodes shows it on the node',
            node['cache']['writeback'], False)
    rc, out = qsd.qemu_io(t, uri, *writes)
    wt = flushes(c, 'e0')
    t.check('writes in writethrough', rc == 0, out)
    # qemu-io flushes once when it closes the image; writethrough adds a
    # flush of the graph after each of the 4 writes
    d_wb = (wb[0] - before[0], wb[1] - before[1])
    d_wt = (wt[0] - wb[0], wt[1] - wb[1])
    t.check('writethrough flushes after every write (BlockBackend)',
            d_wt[0] >= d_wb[0] + 4, (d_wb, d_wt))
    # the closing flush reaches the file only if something is unflushed
    t.check('and the flushes reach the file (node statistics): one per '
            'write in writethrough, at most the closing one in writeback',
            d_wt[1] >= 4 and d_wb[1] <= 1, (d_wb, d_wt))
    r = c.cmd('x-blockdev-set-write-cache', {'node-name': 'fmt0',
                                             'writeback': True})
    t.equal('set back by node name', r, {'return': {'writeback': True}})
    after = flushes(c, 'e0')
    qsd.qemu_io(t, uri, *writes)
    again = flushes(c, 'e0')
    t.equal('writeback again: only the closing flush',
            again[0] - after[0], d_wb[0])
    for args, desc in [
        ({}, "Exactly one of 'id' and 'node-name' must be given"),
        ({'id': 'e0', 'node-name': 'fmt0'},
         "Exactly one of 'id' and 'node-name' must be given"),
        ({'id': 'nosuch'}, "Export 'nosuch' is not found"),
        ({'node-name': 'file0'},
         "Node 'file0' has no user with a write cache (export it first)"),
    ]:
        t.equal('x-blockdev-set-write-cache refuses %s' % json.dumps(args),
                error_of(c.cmd('x-blockdev-set-write-cache', args)),
                generic(desc))


def nbd_client(uri):
    """A real libnbd client that stays connected until stdin closes, or
    None when python3-libnbd is missing."""
    import subprocess
    code = ('import nbd, sys\n'
            'h = nbd.NBD()\n'
            'h.connect_uri(sys.argv[1])\n'
            'print("connected", flush=True)\n'
            'sys.stdin.read()\n')
    py = '/usr/bin/python3'
    if subprocess.run([py, '-c', 'import nbd'],
                      stderr=subprocess.DEVNULL).returncode:
        return None
    p = subprocess.Popen([py, '-c', code, uri], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.stdout.readline().strip() != b'connected':
        p.kill()
        return None
    return p


def test_export_del_in_use(c, uri):
    client = nbd_client(uri)
    if not client:
        t.skip('block-export-del of an export in use',
               'python3-libnbd (/usr/bin/python3 -c "import nbd") missing')
        return
    r = c.cmd('block-export-del', {'id': 'e0'})
    t.equal('a safe block-export-del is refused while a client is connected',
            error_of(r), generic("export 'e0' still in use"))
    r = c.cmd('block-export-del', {'id': 'e0', 'mode': 'hard'})
    t.equal('mode=hard disconnects it', r, {'return': {}})
    ev = c.event('BLOCK_EXPORT_DELETED')
    t.equal('BLOCK_EXPORT_DELETED once the client is gone',
            ev and ev['data'], {'id': 'e0'})
    client.stdin.close()
    client.wait(timeout=qsd.TIMEOUT)
    r = c.cmd('block-export-del', {'id': 'e0'})
    t.equal('block-export-del of a removed export', error_of(r),
            generic("Export 'e0' is not found"))


def test_corrupted_event(d):
    img = t.create_image('corrupt.qcow2')
    rc, out, err = t.run(['qemu-io', '-f', 'qcow2', '-c', 'write 0 64k', img])
    meta = os.path.join(qsd.SRC, 'tests', 'qemu-iotests', 'qcow2_meta.py')
    rc2, out2, err2 = t.run(['python3', meta, img, 'point', '131072',
                             'active-l1'])
    rc3, out3, err3 = t.run(['python3', meta, img, 'locate', 'active-l1'])
    if not t.check('prepare an L2 entry that points at the L1 table',
                   rc == 0 and rc2 == 0 and rc3 == 0,
                   out + err + out2 + err2 + err3):
        return
    l1_offset = int(out3.strip(), 0)
    c = d.qmp()
    watcher = d.qmp()
    unnegotiated = d.qmp(negotiate=False)
    sock = t.path('nbd2.sock')
    c.ok('blockdev-add', {'driver': 'qcow2', 'node-name': 'bad',
                          'file': {'driver': 'file', 'filename': img}})
    c.ok('nbd-server-start', {'addr': {'type': 'unix', 'data': {'path': sock}}})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'ebad', 'node-name': 'bad',
                              'writable': True})
    rc, out = qsd.qemu_io(t, qsd.nbd_uri(sock, 'bad'), 'write 131072 4k')
    t.check('the write that would hit the L1 table fails', rc != 0 or
            'error' in out.lower(), out)
    for who, client in (('the client', c), ('a second client', watcher)):
        ev = client.event('BLOCK_IMAGE_CORRUPTED')
        data = ev['data'] if ev else {}
        t.equal('BLOCK_IMAGE_CORRUPTED reaches %s' % who,
                (data.get('node-name'), data.get('fatal'),
                 data.get('msg')),
                ('bad', True, 'Preventing invalid write on metadata '
                 '(overlaps with active L1 table)'))
    t.equal('with the host offset and size of the refused write',
            (data.get('offset'), data.get('size')), (l1_offset, 4096))
    t.equal('an unnegotiated client gets no event',
            unnegotiated.recv(timeout=0.5), None)
    node = [n for n in c.ok('query-named-block-nodes')
            if n['node-name'] == 'bad'][0]
    t.equal('the node is read-only now', node['ro'], True)
    t.equal('and marked corrupt',
            node['image']['format-specific']['data']['corrupt'], True)
    c.ok('nbd-server-stop')
    c.ok('blockdev-del', {'node-name': 'bad'})
    for x in (c, watcher, unnegotiated):
        x.close()


def test_several_clients(d):
    clients = [d.qmp() for _ in range(5)]
    for i, c in enumerate(clients):
        c.send_raw(b'{"execute":"query-version","id":%d}\n' % i)
    t.equal('five clients at once each get their reply',
            [c.reply().get('id') for c in clients], list(range(5)))
    # requests and no reading, then a disconnect: the daemon must drop it
    gone = d.qmp()
    gone.send_raw(b'{"execute":"query-named-block-nodes"}\n' * 2000)
    gone.sock.shutdown(socket.SHUT_RDWR)
    gone.close()
    rude = d.qmp(negotiate=False)
    rude.send_raw(b'{"execute":"qmp_capabilities"}\n{"execute":"query-vers')
    rude.close()
    time.sleep(0.3)
    t.check('a client that leaves mid-request does not disturb the others',
            clients[0].cmd('query-version').get('return'))
    t.check('daemon alive', d.alive())
    for c in clients:
        c.close()


def fd_count(d):
    return len(os.listdir('/proc/%d/fd' % d.proc.pid))


def test_event_backlog_dropped():
    """Issue 14: a client that does not read its events is dropped once
    16 MiB are queued for it, and its session (its descriptor) goes too.
    Events of 256 KiB each: BLOCK_EXPORT_DELETED of an export whose id is
    that long."""
    img = t.path('backlog.raw')
    with open(img, 'wb') as f:
        f.truncate(1 << 20)
    sock = t.path('backlog-nbd.sock')
    d = t.daemon(['--blockdev', 'driver=file,filename=%s,node-name=bk0' % img,
                  '--nbd-server', 'addr.type=unix,addr.path=%s' % sock])
    c = d.qmp()
    before = fd_count(d)
    lazy = d.qmp()
    lazy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    t.equal('a second session costs one descriptor', fd_count(d), before + 1)
    long_id = 'x' * (256 << 10)
    for _ in range(80):
        c.ok('block-export-add', {'type': 'nbd', 'id': long_id,
                                  'node-name': 'bk0'})
        c.ok('block-export-del', {'id': long_id})
        c.event('BLOCK_EXPORT_DELETED')
    t.check('the session that read no events is closed, its descriptor '
            'freed', qsd.wait_for(lambda: fd_count(d) == before),
            '%d descriptors, %d before it connected' % (fd_count(d), before))
    t.check('the other session goes on', c.cmd('query-version').get('return'))
    lazy.close()
    c.cmd('quit')
    t.equal('that daemon exits 0', d.wait(), 0)
    t.check('it said why it dropped the client',
            'does not read its output: disconnecting it' in d.stderr,
            d.stderr)


def test_quit(d):
    c = d.qmp()
    other = d.qmp()
    c.send_raw(b'{"execute":"quit","id":"q"}\n{"execute":"query-version"}\n')
    t.equal('quit replies', c.reply(), {'return': {}, 'id': 'q'})
    # reply() keeps the events that came before the reply
    t.check('last: SHUTDOWN came before the reply',
            [e['event'] for e in c.events] == ['SHUTDOWN'], c.events)
    ev = c.event('SHUTDOWN')
    t.equal('SHUTDOWN says why', ev and ev['data'],
            {'guest': False, 'reason': 'host-qmp-quit'})
    t.check('and nothing queued behind quit runs', not c.buf.strip() and
            c.recv(timeout=5) is None, c.buf)
    ev = other.event('SHUTDOWN')
    t.check('other clients get SHUTDOWN too', ev is not None)
    t.equal('the daemon exits 0', d.wait(), 0)
    t.check('the QMP socket is removed', not os.path.exists(d.qmp_path))
    # every event sent matched its schema declaration (the monitor warns
    # otherwise); qcow2's own corruption report is the only other line
    lines = [x for x in d.stderr.splitlines()
             if not x.startswith('qcow2: Marking image as corrupt')]
    t.equal('nothing else on stderr', lines, [])


d = t.daemon([])
test_greeting_and_negotiation(d)
test_envelope(d)
test_oob(d)
test_bad_json(d)
test_limits(d)
test_argument_checks(d)
test_blockdev(d)
test_objects(d)
test_exports(d)
test_corrupted_event(d)
test_several_clients(d)
test_event_backlog_dropped()
test_quit(d)
t.finish()
