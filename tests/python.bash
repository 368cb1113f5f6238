# The python3 that the tests start, without a launcher in between (sourced,
# not run; tests/timing.bash sources it, so every runner has it).
#
# Under pyenv, "python3" on PATH is a shim: a shell script that asks pyenv
# which interpreter to run and then runs it, about half a second per start
# on a 2-CPU machine (python3 itself starts in 50 ms), and the tests start
# python3 thousands of times: the helpers, the QMP clients, the
# #!/usr/bin/env python3 scripts.  So once per run, the folder of the
# interpreter the shim chooses goes first in PATH, as `pyenv exec` itself
# does: the same python3, with the same packages, started directly.  The
# runners' children inherit it; with no shim in front (Debian's python3, a
# virtualenv) nothing changes.
if [ -z "${QBLOCK_PYTHON_DIRECT:-}" ]; then
    export QBLOCK_PYTHON_DIRECT=1
    qblock_python=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
    if [ -n "$qblock_python" ] && [ -x "$qblock_python" ] &&
       [ "$(command -v python3)" != "$qblock_python" ]; then
        PATH=$(dirname "$qblock_python"):$PATH
    fi
    unset qblock_python
fi
