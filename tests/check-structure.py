#!/usr/bin/env python3
"""The structure rules of docs/architecture.md, checked over the source tree.

    tests/check-structure.py [SOURCE_DIR]

Each rule is one check; a check prints "ok RULE" or "FAIL RULE" followed by
the places that break it, and the last line is "structure: N passed, N
failed".  The tree is the files git tracks or would (the working tree's
contents, new files included), tests/ left out: test code may do what the product must not.
"""
import os
import re
import subprocess
import sys

# A hand-written file past this many lines holds more than one concern.
MAX_LINES = 1500

# A declarator's parameter list: a name or a closing parenthesis (a pointer
# to function) then "(...)", one level of nested parentheses allowed; the
# list is a lookahead, so that "(*fn)" does not hide the "(...)" after it.
PARAMS = re.compile(r'(?:\b[A-Za-z_]\w*|\))\s*(?=\(((?:[^()]|\([^()]*\))*)\))')
# One bool parameter, named or not.
BOOL_PARAM = re.compile(r'\s*(?:const\s+)?bool(?:\s+\w+)?\s*$')
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)


def tracked_files(src):
    """The files of the tree; outside a git checkout (an unpacked release),
    every file below @src but the build folders."""
    try:
        out = subprocess.run(['git', '-C', src, 'ls-files', '-z', '--cached',
                              '--others', '--exclude-standard'],
                             capture_output=True, text=True,
                             check=True).stdout
        files = out.split('\0')
    except (OSError, subprocess.CalledProcessError):
        files = []
        for root, dirs, names in os.walk(src):
            dirs[:] = [d for d in dirs
                       if not d.startswith(('.', 'build'))]
            files += [os.path.relpath(os.path.join(root, n), src)
                      for n in names]
    return [f for f in files
            if f and not f.startswith('tests/')
            and os.path.isfile(os.path.join(src, f))]


def read(src, path):
    with open(os.path.join(src, path), encoding='utf-8',
              errors='replace') as f:
        return f.read()


def without_comments(text):
    """@text with comments blanked out, keeping its line numbers."""
    return COMMENT.sub(lambda m: re.sub(r'[^\n]', ' ', m.group()), text)


def two_bool_functions(src, files):
    """Call sites of f(x, true, false) can't be read without the prototype:
    two or more flags become a flags enum or an options struct."""
    for path in files:
        if not path.endswith(('.c', '.h')):
            continue
        text = without_comments(read(src, path))
        for m in PARAMS.finditer(text):
            params = m.group(1).split(',')
            if sum(1 for p in params if BOOL_PARAM.match(p)) >= 2:
                line = text.count('\n', 0, m.start()) + 1
                yield f'{path}:{line}: ({" ".join(m.group(1).split())})'


def long_files(src, files):
    """A file that grows past MAX_LINES is split by concern."""
    for path in files:
        if path.endswith(('.c', '.h')):
            n = read(src, path).count('\n')
            if n > MAX_LINES:
                yield f'{path}: {n} lines'


def block_int_in_tools(src, files):
    """Tools and the daemon use the public API only."""
    for path in files:
        if path.startswith(('tools/', 'storage-daemon/')) and \
                path.endswith(('.c', '.h')):
            for n, line in enumerate(read(src, path).splitlines(), 1):
                if re.match(r'\s*#\s*include\s*[<"]block/block_int\.h[">]',
                            line):
                    yield f'{path}:{n}: {line.strip()}'


def block_backend_in_io(src, files):
    """The request path reaches its parents through callbacks only."""
    path = 'block/io.c'
    if path in files:
        text = without_comments(read(src, path))
        for n, line in enumerate(text.splitlines(), 1):
            if re.search(r'\bBlockBackend\b|\bblk_\w+\s*\(', line):
                yield f'{path}:{n}: {line.strip()}'


def json_reparsed_in_tools(src, files):
    """Nothing re-parses JSON that the project itself printed."""
    for path in files:
        if path.startswith('tools/') and path.endswith('.c'):
            text = without_comments(read(src, path))
            for n, line in enumerate(text.splitlines(), 1):
                if 'json_from_string' in line:
                    yield f'{path}:{n}: {line.strip()}'


CHECKS = [
    ('no function takes two or more bool parameters', two_bool_functions),
    (f'no .c or .h file over {MAX_LINES} lines', long_files),
    ('no include of block_int.h under tools/ or storage-daemon/',
     block_int_in_tools),
    ('block/io.c does not name BlockBackend', block_backend_in_io),
    ('no json_from_string under tools/', json_reparsed_in_tools),
]


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    files = set(tracked_files(src))
    passed = failed = 0
    for rule, check in CHECKS:
        hits = list(check(src, sorted(files)))
        if hits:
            failed += 1
            print(f'FAIL {rule}:')
            for hit in hits:
                print(f'  {hit}')
        else:
            passed += 1
            print(f'ok {rule}')
    print(f'structure: {passed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
