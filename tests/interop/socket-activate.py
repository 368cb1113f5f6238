#!/usr/bin/env python3
"""Starts a program as a service manager with socket activation would
(systemd's sd_listen_fds(3) protocol): descriptor 3 is a socket that
listens already, LISTEN_PID is the program's pid and LISTEN_FDS counts
the descriptors.  The program replaces this process, so its pid is the
one set.

    socket-activate.py [options] -- PROG ARGS...
      --unix PATH      a unix socket bound at PATH (the default kind)
      --tcp PORTFILE   a TCP socket on 127.0.0.1, its port written to
                       PORTFILE
      --file PATH      descriptor 3 is the file PATH, not a socket
      --fds N          LISTEN_FDS (default 1); descriptors 4.. are more
                       copies of the socket unless --closed
      --closed         descriptors past 3 are left closed
      --other-pid      LISTEN_PID names another process
"""
import argparse
import os
import socket
import sys


def main():
    argv = sys.argv[1:]
    if '--' not in argv:
        sys.exit(__doc__)
    split = argv.index('--')
    p = argparse.ArgumentParser()
    p.add_argument('--unix')
    p.add_argument('--tcp')
    p.add_argument('--file')
    p.add_argument('--fds', type=int, default=1)
    p.add_argument('--closed', action='store_true')
    p.add_argument('--other-pid', action='store_true')
    opts = p.parse_args(argv[:split])
    prog = argv[split + 1:]

    if opts.file:
        fd = os.open(opts.file, os.O_RDONLY)
    elif opts.tcp:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(('127.0.0.1', 0))
        s.listen(16)
        with open(opts.tcp, 'w') as f:
            f.write('%d\n' % s.getsockname()[1])
        fd = s.detach()
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(opts.unix)
        s.listen(16)
        fd = s.detach()
    if fd != 3:
        os.dup2(fd, 3)
    os.set_inheritable(3, True)
    for i in range(1, opts.fds):
        if opts.closed:
            try:
                os.close(3 + i)
            except OSError:
                pass
        else:
            os.dup2(fd, 3 + i)
    if fd >= 3 + max(opts.fds, 1):
        os.close(fd)
    os.environ['LISTEN_PID'] = '1' if opts.other_pid else str(os.getpid())
    os.environ['LISTEN_FDS'] = str(opts.fds)
    os.execvp(prog[0], prog)


main()
