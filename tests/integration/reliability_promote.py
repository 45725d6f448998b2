#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: reliability_promote.py UPROBE FAST_REC RUNS [SEED]

A tracer killed (SIGKILL) while a followed process's probe moves from its int3 to the
fast path (docs/design.md section 14, "item 6, the third step") leaves the process to
run on as unprobed: a shell runs fast_rec's args mode (2 threads, 100,000 calls of the
probed rec_args each) with --fast-after 50, and the tracer is killed at a random moment
0.03-0.15 s in -- before, during or after the move.  Each run whose program had
started must print what it prints unprobed and exit 0.

Before the int3's removal reached the process ahead of the safety net forgetting it
(a quiesce's page cache held the byte back), such deaths ended in SIGTRAP's default or
SIGSEGV: 1-3 runs of 30.
"""
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

uprobe, prog, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else None)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


plain = subprocess.run([prog, "args", "100000", "2"], capture_output=True, text=True,
                       timeout=60).stdout
tmp = tempfile.mkdtemp(prefix="uprobe-promote-")
out = os.path.join(tmp, "out")
started = 0
for run in range(runs):
    if os.path.exists(out):
        os.unlink(out)
    delay = rng.uniform(0.03, 0.15)
    tracer = subprocess.Popen(
        [uprobe, "trace", "-o", "/dev/null", "--fast-after", "50",
         "-e", "p:a/args %s:rec_args a=%%di" % prog, "--",
         "sh", "-c", '"$0" args 100000 2 > %s; echo rc=$? >> %s' % (out, out), prog],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    tracer.send_signal(signal.SIGKILL)
    tracer.wait()
    if not os.path.exists(out):
        continue  # killed before the shell ran the program: nothing to survive
    started += 1
    end = time.time() + 30
    text = ""
    while time.time() < end:
        with open(out) as f:
            text = f.read()
        if "rc=" in text:
            break
        time.sleep(0.05)
    if text != plain + "rc=0\n":
        fail("run %d, killed after %.3f s: the program printed %r, not %r" %
             (run, delay, text[-120:], plain + "rc=0\n"))
if os.path.exists(out):
    os.unlink(out)
os.rmdir(tmp)
if not started:
    fail("no run got as far as the program: nothing was tested")
print("ok: %d of %d tracer deaths around a followed process's promotion found its "
      "program running: each ran on to its unprobed output, exit 0" % (started, runs))
print("PASS")
