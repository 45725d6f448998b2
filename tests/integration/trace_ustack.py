#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: trace_ustack.py UPROBE HIST_PROG

$ustack, the user stack as a fetch argument of a printed event, on
tests/targets/hist_prog.c's "stacks N" mode: leaf() is called from via_a() N times and
from via_b() 3 N times, in a known order (a, b, b, b, a, ...).

  oracle   the kernel's uprobe events with options/userstacktrace (a frame-pointer walk
           of its own) give, event for event, the frames ours begin with (ours go on
           past libc, which has no frame pointers, to _start, as gdb's bt does), but
           for the caller: leaf() has no frame of its own, so at its entry and at its
           ret (leaf+4) the kernel's walk skips via_a/via_b, which ours (by the unwind
           tables) has.  Frames in the program compare as addresses (it is not PIE).
  paths    the fast path and the trap path (--no-fast) print the same stacks; JSON
           gives the frames as an array; a return probe's stack starts where it
           returned to; --format raw + report gives the same named stacks
  output   the program's own output is the unprobed one
  errors   a type, a dereference, a filter, a hist key and --backend kernel on a
           $ustack are refused with a reason
"""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys

UPROBE = sys.argv[1]
# a private copy: the kernel's uprobe on it then fires in no other test's process (the
# same bytes at the same addresses: the program is not PIE)
PROG = "/tmp/upt_ustack_prog.%d" % os.getpid()
shutil.copy(os.path.abspath(sys.argv[2]), PROG)
atexit.register(lambda: os.path.exists(PROG) and os.unlink(PROG))
N = 20
TRACEFS = "/sys/kernel/tracing"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(opts, events, args=("stacks", N), expect_rc=0):
    cmd = [UPROBE, "trace"] + list(opts)
    for e in events:
        cmd += ["-e", e]
    cmd += ["--", PROG] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != expect_rc:
        fail("%s exited %d\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def symbols():
    """The program's function symbols: [(addr, size, name)]."""
    out = subprocess.run(["nm", "-S", PROG], capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tT":
            syms.append((int(f[0], 16), int(f[1], 16), f[3]))
    return syms


SYMS = symbols()
LEAF = [a for a, _, n in SYMS if n == "leaf"][0]


def name(addr):
    """An address in the program as our tracer names it, else None."""
    for a, size, n in SYMS:
        if a <= addr < a + size:
            return "%s+0x%x [%s]" % (n, addr - a, os.path.basename(PROG))
    return None


def text_stacks(out, event):
    """Per event line of ours: its frames (the ' => ' lines under it)."""
    stacks, cur = [], None
    for line in out.splitlines():
        if line.startswith(" => "):
            if cur is not None:
                cur.append(line[4:])
            continue
        cur = None
        if re.search(r": %s: \(" % event, line):
            cur = []
            stacks.append(cur)
    return stacks


def tracefs_write(path, text):
    """One write(2), as echo does (a buffered file's seek is refused by tracefs)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def kernel_stacks(offset):
    """The kernel's user stacks of its uprobe at leaf+offset, event by event."""
    if not os.path.isdir(TRACEFS + "/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True)
    if not os.path.exists(TRACEFS + "/uprobe_events"):
        print("SKIP kernel oracle: no tracefs with uprobe_events here")
        return None
    inst = TRACEFS + "/instances/upt_ustack"
    ev = "ustk%d" % offset
    try:
        tracefs_write(TRACEFS + "/uprobe_events",
                      "p:upt_ustack/%s %s:0x%x\n" % (ev, PROG, LEAF - 0x400000 + offset))
    except OSError as e:
        print("SKIP kernel oracle: cannot add a uprobe event: %s" % e)
        return None
    try:
        os.makedirs(inst, exist_ok=True)
        tracefs_write(inst + "/options/userstacktrace", "1")
        tracefs_write(inst + "/events/upt_ustack/%s/enable" % ev, "1")
        subprocess.run([PROG, "stacks", str(N)], capture_output=True, timeout=60)
        tracefs_write(inst + "/events/upt_ustack/%s/enable" % ev, "0")
        text = open(inst + "/trace").read()
    finally:
        try:
            os.rmdir(inst)
        except OSError:
            pass
        tracefs_write(TRACEFS + "/uprobe_events", "-:upt_ustack/%s\n" % ev)
    stacks, cur = [], None
    for line in text.splitlines():
        if "<user stack trace>" in line:
            cur = []
            stacks.append(cur)
        elif line.startswith(" => ") and cur is not None:
            m = re.search(r"<([0-9a-f]+)>", line)
            if m:
                cur.append(int(m.group(1), 16))
        else:
            cur = None
    return stacks


def ours_vs_kernel(ours, kern, at_entry):
    """Event by event: frames in the program equal, the rest in libc, one more at entry."""
    if len(ours) != len(kern):
        fail("%d stacks here, %d from the kernel" % (len(ours), len(kern)))
    for i, (o, k) in enumerate(zip(ours, kern)):
        caller = "via_a" if i % 4 == 0 else "via_b"
        if at_entry:
            if len(o) < 2 or not o[1].startswith(caller + "+"):
                fail("stack %d: frame 1 is not the caller %s: %s" % (i, caller, o))
            o = o[:1] + o[2:]
        # the kernel's frame-pointer walk ends in libc (built without them); ours, by
        # the unwind tables, goes on to _start, as gdb's bt does
        if len(o) < len(k) or (len(o) > len(k) and not o[-1].startswith("_start+")):
            fail("stack %d: %s here, %s from the kernel" % (i, o, [hex(a) for a in k]))
        for got, addr in zip(o, k):
            want = name(addr)
            if want is None and not got.endswith("[libc.so.6]"):
                fail("stack %d: %s where the kernel has 0x%x (libc)" % (i, got, addr))
            if want is not None and got != want:
                fail("stack %d: %s where the kernel has %s" % (i, got, want))


plain = subprocess.run([PROG, "stacks", str(N)], capture_output=True, text=True).stdout
ENTRY = "p:h/leaf %s:leaf st=$ustack x=%%di:u64" % PROG
INSIDE = "p:h/ret %s:leaf+4 st=$ustack" % PROG

# paths ---------------------------------------------------------------------------------
fast = run([], [ENTRY, INSIDE])
trap = run(["--no-fast"], [ENTRY, INSIDE])
for p in (fast, trap):
    own = [l for l in p.stdout.splitlines() if not l.startswith(" => ") and ": (0x" not in l]
    if own != plain.splitlines():
        fail("the program's output changed: %r, unprobed %r" % (own, plain))
ents = {}
for label, p in (("fast", fast), ("trap", trap)):
    ents[label] = (text_stacks(p.stdout, "leaf"), text_stacks(p.stdout, "ret"))
    if len(ents[label][0]) != 4 * N or len(ents[label][1]) != 4 * N:
        fail("%s: %d and %d events, want %d each\n%s" % (
            label, len(ents[label][0]), len(ents[label][1]), 4 * N, p.stdout[:2000]))
if ents["fast"] != ents["trap"]:
    fail("the fast and the trap path differ:\n%s\n%s" % (ents["fast"][0][:4], ents["trap"][0][:4]))
for i, s in enumerate(ents["fast"][0]):
    want = ["leaf+0x0", "via_a+" if i % 4 == 0 else "via_b+", "main+"]
    if len(s) < 4 or any(not f.startswith(w) for f, w in zip(s, want)):
        fail("entry stack %d: %s" % (i, s))
print("paths: %d stacks at the entry and %d inside, fast == trap, named" % (4 * N, 4 * N))

# oracle ---------------------------------------------------------------------------------
k_entry = kernel_stacks(0)
if k_entry is not None:
    k_inside = kernel_stacks(4)
    ours_vs_kernel(ents["fast"][0], k_entry, True)
    # leaf has no frame of its own: at its ret too the kernel's walk skips the caller
    ours_vs_kernel(ents["fast"][1], k_inside, True)
    print("oracle: %d + %d stacks equal the kernel's userstacktrace (entry: + the caller)"
          % (len(k_entry), len(k_inside)))

# output forms ---------------------------------------------------------------------------
js = run(["--format", "json"], [ENTRY])
recs = [json.loads(l) for l in js.stdout.splitlines() if l.startswith("{")]
if len(recs) != 4 * N or recs[0]["args"]["st"] != ents["fast"][0][0] or recs[0]["args"]["x"] != 0:
    fail("JSON: %d records, first %s" % (len(recs), recs[:1]))
ret = run([], ["r:h/lr %s:leaf st=$ustack" % PROG])
rs = text_stacks(ret.stdout, "lr")
if len(rs) != 4 * N or not rs[0][0].startswith("via_a+") or not rs[1][0].startswith("via_b+"):
    fail("return stacks: %s" % rs[:2])
raw = "/tmp/upt_ustack.%d.raw" % os.getpid()
try:
    run(["--format", "raw", "-o", raw], [ENTRY])
    rep = subprocess.run([UPROBE, "report", raw], capture_output=True, text=True, timeout=60)
    hs = text_stacks(rep.stdout, "leaf")
    if len(hs) != 4 * N:
        fail("report: %d stacks\n%s" % (len(hs), rep.stdout[:1000]))
    # a raw file's $ustack: the walk the agent made by the unwind tables, walked again
    # and named by report with the maps the file holds, as trace prints it live
    for i, (h, named) in enumerate(zip(hs, ents["fast"][0])):
        if h != named:
            fail("report stack %d: %s, live %s" % (i, h, named))
finally:
    if os.path.exists(raw):
        os.unlink(raw)
print("output: JSON arrays, return stacks from the return site, raw + report named as live")

# errors ---------------------------------------------------------------------------------
bad = [
    (["-e", "p:h/l %s:leaf st=$ustack:u64" % PROG], "takes no type"),
    (["-e", "p:h/l %s:leaf st=+0($ustack)" % PROG], "can not be dereferenced"),
    (["-e", "p:h/l %s:leaf st=$ustack" % PROG, "--filter", "st > 1"], "is a stack"),
    (["-e", "p:h/l %s:leaf st=$ustack" % PROG, "-t", "h/l:hist:keys=st"], "stacktrace"),
    (["--backend", "kernel", "-e", "p:h/l %s:leaf st=$ustack" % PROG], "no user stack"),
]
for args, why in bad:
    p = subprocess.run([UPROBE, "trace"] + args + ["--", PROG, "stacks", "1"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode == 0 or why not in p.stderr or p.stdout:
        fail("%s: exit %d, stderr %r, stdout %r" % (args, p.returncode, p.stderr, p.stdout))
print("errors: %d refused with a reason, the program never started" % len(bad))
