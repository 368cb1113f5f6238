# The python3 that the tests start (sourced, not run; tests/timing.bash
# sources it, so every runner has it).
#
# Debian's /usr/bin/python3 where there is one: the Makefile installs it,
# with the one package the tests import beyond the standard library
# (python3-libnbd, which only it can import).  Not simply the first
# python3 on PATH: under pyenv that is a shim, a shell script that asks
# pyenv which interpreter to run (about half a second per start on a
# 2-CPU machine), in front of an interpreter whose site-packages import
# more at every start (a start that imports json, subprocess and socket:
# 118 ms of CPU there, 70 ms with Debian's), and the tests start python3
# thousands of times: the helpers, the QMP clients, the
# #!/usr/bin/env python3 scripts, QEMU's iotests.  So once per run a
# folder that holds only a python3 link to it goes first in PATH (the
# rest of PATH finds what it found before); the runners' children
# inherit it.  Without /usr/bin/python3, the interpreter that the first
# python3 on PATH chooses goes first, started directly, as `pyenv exec`
# itself does.
if [ -z "${QBLOCK_PYTHON_DIRECT:-}" ]; then
    export QBLOCK_PYTHON_DIRECT=1
    if [ -x /usr/bin/python3 ]; then
        qblock_python_dir=${TMPDIR:-/tmp}/qblock-python-$(id -u)
        mkdir -p -m 700 "$qblock_python_dir"
        # another runner may make the same link at the same moment
        [ -e "$qblock_python_dir/python3" ] ||
            ln -s /usr/bin/python3 "$qblock_python_dir/python3" 2>/dev/null
        # only a folder of ours whose python3 is that link
        if [ -O "$qblock_python_dir" ] &&
           [ "$(readlink "$qblock_python_dir/python3")" = /usr/bin/python3 ]; then
            PATH=$qblock_python_dir:$PATH
        fi
        unset qblock_python_dir
    else
        qblock_python=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
        if [ -n "$qblock_python" ] && [ -x "$qblock_python" ] &&
           [ "$(command -v python3)" != "$qblock_python" ]; then
            PATH=$(dirname "$qblock_python"):$PATH
        fi
        unset qblock_python
    fi
fi
