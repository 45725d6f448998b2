#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: trace_foreign_int3.py UPROBE TRACE_LOOP

An int3 that is not ours at the probed address (here the kernel's own uprobe, placed
through tracefs on trace_loop's step): `uprobe trace` says what is there and where to
look, in one line per probe, not "File exists"; nothing of ours is written over it, and
the program runs with its unprobed output and exit status (the kernel's event still
counts its hits).  On the fast path and with --no-fast.  SKIP (77) without root or
tracefs."""
import os, re, subprocess, sys

uprobe, prog = sys.argv[1], os.path.realpath(sys.argv[2])
TRACEFS = "/sys/kernel/tracing"
GROUP = "upt_foreign"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def tw(path, s):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # no seek: tracefs refuses it
    try:
        os.write(fd, s.encode())
    finally:
        os.close(fd)


if os.geteuid() != 0:
    print("SKIP: needs root for the kernel's uprobe")
    sys.exit(77)
if not os.path.exists(TRACEFS + "/uprobe_events"):
    subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], stderr=subprocess.DEVNULL)
if not os.path.exists(TRACEFS + "/uprobe_events"):
    print("SKIP: no tracefs with uprobe_events at " + TRACEFS)
    sys.exit(77)

# step's file offset: -no-pie, its text segment maps offset = vaddr - 0x400000
nm = subprocess.run(["nm", prog], capture_output=True, text=True).stdout
m = re.search(r"^([0-9a-f]+) T step$", nm, re.M)
if not m:
    fail("no step in nm %s" % prog)
vaddr = int(m.group(1), 16)
ph = subprocess.run(["readelf", "-lW", prog], capture_output=True, text=True).stdout
off = None
for l in ph.splitlines():
    f = l.split()
    if f[:1] == ["LOAD"] and "E" in f[6:-1]:
        o, va, sz = int(f[1], 16), int(f[2], 16), int(f[5], 16)
        if va <= vaddr < va + sz:
            off = vaddr - va + o
if off is None:
    fail("step at 0x%x is in no executable segment" % vaddr)

plain = subprocess.run([prog, "5", "1"], capture_output=True, text=True)
tw(TRACEFS + "/uprobe_events", "p:%s/step %s:0x%x\n" % (GROUP, prog, off))
try:
    tw(TRACEFS + "/events/%s/step/enable" % GROUP, "1")
    want = re.compile(r"'p:t/step [^']*': cannot probe 0x[0-9a-f]+ in process \d+: an "
                      r"int3 is already there: the program's own, a debugger's, or a "
                      r"kernel uprobe's \(listed in /sys/kernel/tracing/uprobe_events\)")
    for mode in ([], ["--no-fast"]):
        name = "fast path" if not mode else "--no-fast"
        for also in ([], ["-e", "p:t/main %s:main" % prog]):
            r = subprocess.run([uprobe, "trace", "-o", os.devnull] + mode +
                               ["-e", "p:t/step %s:step" % prog] + also + ["--", prog, "5", "1"],
                               capture_output=True, text=True, timeout=60)
            if "File exists" in r.stderr:
                fail("%s: 'File exists' said, not what is there:\n%s" % (name, r.stderr))
            if not want.search(r.stderr):
                fail("%s: no line saying an int3 is already there:\n%s" % (name, r.stderr))
            if not also:
                # the only probe cannot be placed: status 2, the command never ran
                if r.returncode != 2 or r.stdout or "no probe could be armed" not in r.stderr:
                    fail("%s: the one probe refused: status %d (2 expected), printed %r\n%s" %
                         (name, r.returncode, r.stdout, r.stderr))
                continue
            if r.stdout != plain.stdout or r.returncode != plain.returncode:
                fail("%s: the program printed %r, status %d (unprobed: %r, %d)\n%s" %
                     (name, r.stdout, r.returncode, plain.stdout, plain.returncode, r.stderr))
            if "1 of 2 probes armed" not in r.stderr:
                fail("%s: no '1 of 2 probes armed'\n%s" % (name, r.stderr))
        print("ok: %s: %s; alone: status 2, nothing run; beside another probe: 1 of 2 "
              "armed, the program's output and status as unprobed" %
              (name, want.search(r.stderr).group(0)))
    tw(TRACEFS + "/events/%s/step/enable" % GROUP, "0")
finally:
    try:
        tw(TRACEFS + "/events/%s/step/enable" % GROUP, "0")
    except OSError:
        pass
    tw(TRACEFS + "/uprobe_events", "-:%s/step\n" % GROUP)
print("PASS")
