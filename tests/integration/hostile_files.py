#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: hostile_files.py UPROBE HOSTILE_FILES LIB

A target running as nobody maps LIB (a copy), unlinks it and puts a FIFO, a device node
or a symlink to /dev/zero in its place, under its name and under "NAME (deleted)" (what
/proc/PID/maps shows); NAME lib.so or ld-hostile.so (the dynamic linker's name, which
the tracer opens to follow dlopen).  For each, `uprobe trace -p PID` with a probe in
that library (and $ustack, which names its frames from the mapped file):
  root      the tracer reaches the deleted library through /proc/PID/map_files: the
            probe hits, the frame is named lib_func [lib.so (deleted)]
  no caps   without CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE (no map_files) the path is
            refused, not opened: the probe still hits, the frame is unnamed
and the tracer ends within seconds of Ctrl-C (it used to hang in open(2) for ever), the
target's output and exit status are as unprobed.  `uprobe list` of the planted file
refuses it at once with the reason ("not a regular file (FIFO)").
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

UPROBE, HOSTILE, LIB = sys.argv[1:4]
CALLS = 2500
NOCAPS = ["setpriv", "--bounding-set=-sys_admin,-checkpoint_restore",
          "--inh-caps=-sys_admin,-checkpoint_restore"]
KIND = {"fifo": "FIFO", "chr": "character device", "symlink": "character device"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def one(mode, name, prefix):
    tag = "%s %s %s" % (mode, name, "no caps" if prefix else "root")
    d = tempfile.mkdtemp(prefix="hostile.", dir="/tmp")
    os.chmod(d, 0o755)
    try:
        tgt = subprocess.Popen([HOSTILE, LIB, d, mode, name, str(CALLS)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = tgt.stdout.readline().split()
        if len(ready) != 3 or ready[0] != "ready":
            fail("%s: the target did not start: %s %s" % (tag, ready, tgt.stderr.read()))
        pid, addr = ready[1], ready[2]
        out = os.path.join(d, "trace.out")
        t0 = time.monotonic()
        tr = subprocess.Popen(prefix + [UPROBE, "trace", "-o", out, "-p", pid,
                                        "-e", "p:h/f %s" % addr,
                                        "-e", "p:h/u %s $ustack" % addr],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        t1 = time.monotonic()
        tr.send_signal(signal.SIGINT)
        try:
            _, err = tr.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            tr.kill()
            tr.communicate()
            tgt.kill()
            fail("%s: the tracer still runs 5 s after Ctrl-C (hung opening the file?)" % tag)
        took, stop = time.monotonic() - t0, time.monotonic() - t1
        if tr.returncode != 0:
            fail("%s: uprobe trace exited %d:\n%s" % (tag, tr.returncode, err))
        rest, terr = tgt.communicate(timeout=30)
        if tgt.returncode != 0 or rest != "calls %d sum %d\n" % (CALLS, CALLS * CALLS):
            fail("%s: the target changed: status %d, output %r %r" %
                 (tag, tgt.returncode, rest, terr))
        with open(out) as f:
            text = f.read()
        hits = len(re.findall(r": f: \(", text))
        frames = re.findall(r"^ => (.*)$", text, re.M)
        if not hits or not frames:
            fail("%s: %d hits, %d frames in 1.5 s:\n%s" % (tag, hits, len(frames), text[:2000]))
        want = ("lib_func+0x0 [%s (deleted)]" % name if not prefix
                else "[%s (deleted)]+0x" % name)
        if not frames[0].startswith(want):
            fail("%s: the frame reads %r, expected %r..." % (tag, frames[0], want))
        # what a user names: refused at once, with the reason
        t1 = time.monotonic()
        p = subprocess.run([UPROBE, "list", os.path.join(d, name)], capture_output=True,
                           text=True, timeout=10)
        ltook = time.monotonic() - t1
        why = "not a regular file (%s)" % KIND[mode]
        if p.returncode != 2 or why not in p.stderr or ltook > 2:
            fail("%s: uprobe list of the planted file: status %d in %.2f s: %s" %
                 (tag, p.returncode, ltook, p.stderr))
        return took, stop, hits, ltook
    finally:
        shutil.rmtree(d, ignore_errors=True)


worst = 0
for mode in ("fifo", "chr", "symlink"):
    for name in ("lib.so", "ld-hostile.so"):
        for prefix in ([], NOCAPS):
            took, stop, hits, ltook = one(mode, name, prefix)
            worst = max(worst, stop)
            print("%-8s %-14s %-8s trace ran %.2f s, ended %.3f s after Ctrl-C, %d hits; "
                  "list refused in %.3f s" % (mode, name, "no caps" if prefix else "root",
                                              took, stop, hits, ltook))
print("PASS: 12 hostile targets traced, none hung (slowest end %.3f s after Ctrl-C), "
      "all unharmed" % worst)
