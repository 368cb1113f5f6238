#!/usr/bin/env python3
"""Start-up cost of the tools: qemu-img and qblock-img, alternating.

    tests/perf/bench-startup.py BUILD_DIR [ROUNDS] [RUNS]

A script that calls the tools once per image (a backup script, a cloud
agent, the test suites) pays each program's start-up every time.  Per
command, each round runs it RUNS times (default 200) with QEMU's tool,
then RUNS times with qblock's, ROUNDS times (default 5); the rows give
the median over the rounds of the wall time, the CPU time (user and
system) and the page faults per run (getrusage of the children).
Prints figures; never fails on them.
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def per_run(argv, runs):
    """Wall ms, CPU ms and minor page faults per run of argv."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    for _ in range(runs):
        subprocess.run(argv, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((after.ru_utime - before.ru_utime) +
           (after.ru_stime - before.ru_stime))
    faults = after.ru_minflt - before.ru_minflt
    return wall * 1000 / runs, cpu * 1000 / runs, faults / runs


def main():
    build = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    qemu = shutil.which("qemu-img")
    if not qemu:
        print("qemu-img is not installed; nothing to compare against")
        sys.exit(77)
    ours = os.path.join(build, "qblock-img")
    with tempfile.TemporaryDirectory() as tmp:
        img = os.path.join(tmp, "a.qcow2")
        subprocess.run([qemu, "create", "-q", "-f", "qcow2", img, "1G"],
                       check=True)
        new = os.path.join(tmp, "new.qcow2")
        cases = [
            ("--version", ["--version"]),
            ("info (qcow2)", ["info", img]),
            ("create -f qcow2 1G", ["create", "-q", "-f", "qcow2", new, "1G"]),
        ]
        print(f"{'command':<20} {'tool':<10} {'wall ms':>8} {'CPU ms':>7} "
              f"{'faults':>6}   (median of {rounds} rounds of {runs} runs)")
        for label, args in cases:
            rows = {"qemu-img": [], "qblock-img": []}
            for _ in range(rounds):
                for name, prog in (("qemu-img", qemu), ("qblock-img", ours)):
                    rows[name].append(per_run([prog] + args, runs))
            for name, samples in rows.items():
                wall, cpu, faults = (statistics.median(col)
                                     for col in zip(*samples))
                print(f"{label:<20} {name:<10} {wall:8.2f} {cpu:7.2f} "
                      f"{faults:6.0f}")


if __name__ == "__main__":
    main()
