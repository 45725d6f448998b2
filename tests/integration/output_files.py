#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: output_files.py UPROBE TRACE_ARGS  (as root)

-o FILE as root in a sticky world-writable directory another user (nobody) prepared
(tools/uprobe/main.c, cli_open_output), for `uprobe trace` and `uprobe report`:
  refused   nobody's symlink to a root-owned file (the file keeps its bytes), nobody's
            regular file, nobody's FIFO (at once, not waited on): status 2, the message
            names the file and why -- ours, whatever fs.protected_symlinks says (the
            kernel's refusal would be 'Permission denied')
  followed  root's own symlink there; a symlink elsewhere (/dev/stdout)
  works     -o - and -o /dev/stdout (standard output), -o /dev/null
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

UPROBE, PROG = sys.argv[1], sys.argv[2]
SPEC = "p:o/main %s:main" % PROG
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, timeout=60):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


if os.geteuid() != 0:
    print("SKIP: needs root (another user's files in a sticky directory)")
    sys.exit(77)

top = tempfile.mkdtemp(prefix="output_files.")
os.chmod(top, 0o755)
try:
    shared = os.path.join(top, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    precious = os.path.join(top, "precious")
    with open(precious, "w") as f:
        f.write("root's data\n")
    raw = os.path.join(top, "t.raw")
    p = run([UPROBE, "trace", "--format", "raw", "-o", raw, "-e", SPEC, "--", PROG])
    if p.returncode != 0:
        fail("the raw trace failed: %s" % p.stderr)

    link, theirs, fifo = (os.path.join(shared, n) for n in ("out", "theirs", "fifo"))
    p = run(NOBODY + ["sh", "-c", 'ln -s "$1" "$2" && echo theirs > "$3" && mkfifo "$4"',
                      "sh", precious, link, theirs, fifo])
    if p.returncode != 0:
        fail("nobody could not prepare %s: %s" % (shared, p.stderr))
    cases = [(link, "a symbolic link of uid 65534 in the sticky world-writable directory"),
             (theirs, "owned by uid 65534 in the sticky world-writable directory"),
             (fifo, "owned by uid 65534 in the sticky world-writable directory")]
    for path, why in cases:
        for cmd in ([UPROBE, "trace", "-o", path, "-e", SPEC, "--", PROG],
                    [UPROBE, "report", "-o", path, raw]):
            t0 = time.monotonic()
            p = run(cmd, timeout=20)
            took = time.monotonic() - t0
            if p.returncode != 2 or "%s: %s" % (path, why) not in p.stderr:
                fail("%s: status %d, %r" % (" ".join(cmd[:4]), p.returncode, p.stderr))
            if p.stdout:
                fail("%s: the command ran: %r" % (" ".join(cmd[:4]), p.stdout))
            print("refused in %.3f s: %s" % (took, p.stderr.strip()))
    with open(precious) as f:
        if f.read() != "root's data\n":
            fail("the root-owned file behind nobody's link was written")
    with open(theirs) as f:
        if f.read() != "theirs\n":
            fail("nobody's file was written")

    # root's own link in the same directory, and the standard streams
    mine = os.path.join(top, "mine.txt")
    os.symlink(mine, os.path.join(shared, "mylink"))
    p = run([UPROBE, "trace", "-o", os.path.join(shared, "mylink"), "-e", SPEC, "--", PROG])
    with open(mine) as f:
        text = f.read()
    if p.returncode != 0 or " main: (" not in text:
        fail("-o through root's own link: status %d, %r %r" % (p.returncode, p.stderr, text))
    for out in ("-", "/dev/stdout"):
        p = run([UPROBE, "trace", "-o", out, "-e", SPEC, "--", PROG])
        if p.returncode != 0 or " main: (" not in p.stdout or "done" not in p.stdout:
            fail("-o %s: status %d, %r %r" % (out, p.returncode, p.stdout, p.stderr))
        p = run([UPROBE, "report", "-o", out, raw])
        if p.returncode != 0 or " main: (" not in p.stdout:
            fail("report -o %s: status %d, %r %r" % (out, p.returncode, p.stdout, p.stderr))
    p = run([UPROBE, "trace", "-o", "/dev/null", "-e", SPEC, "--", PROG])
    if p.returncode != 0 or " main: (" in p.stdout or "done" not in p.stdout:
        fail("-o /dev/null: status %d, %r %r" % (p.returncode, p.stdout, p.stderr))
    print("PASS: 3 files of another user refused for trace and report (the root-owned file "
          "intact); root's link, -o -, /dev/stdout and /dev/null work")
finally:
    shutil.rmtree(top, ignore_errors=True)
