#!/usr/bin/env python3
"""Alternate two commands on the same input (A B A B ...) and report min/median CPU seconds.

usage: side_by_side.py ROUNDS INPUT -- CMD_A ... -- CMD_B ...
CPU time (user + sys of the child) is quoted rather than wall time: the machine may be shared.
Each command reads INPUT on stdin; its output is discarded.
"""
import os, resource, statistics, subprocess, sys

rounds, path = int(sys.argv[1]), sys.argv[2]
rest = sys.argv[3:]
cut = [i for i, a in enumerate(rest) if a == "--"]
a_cmd, b_cmd = rest[cut[0] + 1:cut[1]], rest[cut[1] + 1:]


def cpu(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(path, "rb") as stdin:
        subprocess.run(cmd, stdin=stdin, stdout=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


a, b = [], []
for _ in range(rounds):
    a.append(cpu(a_cmd))
    b.append(cpu(b_cmd))
ma, mb = statistics.median(a), statistics.median(b)
print(f"A min {min(a):.3f} median {ma:.3f} s | B min {min(b):.3f} median {mb:.3f} s | "
      f"B/A median {mb / ma:.2f}x, min {min(b) / min(a):.2f}x")
