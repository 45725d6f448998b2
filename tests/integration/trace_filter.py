#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: trace_filter.py UPROBE TRACE_ARGS

--filter in the kernel's filter language against the same expression evaluated in Python
over an unfiltered run of tests/targets/trace_args.c (work(n, mask, name, rec) called N
times with names cycling alpha..foxtrot): for ||, !, parentheses, string == and ~ on a
string argument and on comm, the lines kept are exactly those Python keeps, on the fast
path (the tracer filtering the agent's records) and with --no-fast (the trap path); a
numeric conjunction is the agent's (-v says which probes filter where).  A hist trigger
whose `if` the agent cannot evaluate stays on the trap path and counts the same hits.
With root and tracefs, the kernel's own filter on the same uprobe event keeps as many.
"""
import os
import re
import subprocess
import sys

UPROBE, PROG = sys.argv[1], sys.argv[2]
N = 60
ARGS = "n=%di:s32 mask=%si:x64 name=+0(%dx):string"
SPEC = "p:uf/work %s:work %s" % (PROG, ARGS)
LINE = re.compile(r'^\s*(\S+)-(\d+)\s.*?: work: \(0x[0-9a-f]+\) n=(-?\d+) mask=(0x[0-9a-f]+) '
                  r'name="([^"]*)"$')


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(opts):
    """The trace's hits as (comm, n, mask, name) tuples, and stderr."""
    cmd = [UPROBE, "trace", "-v", "-e", SPEC] + opts + ["--", PROG, str(N), "0"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail("%s exited %d\n%s" % (" ".join(cmd), p.returncode, p.stderr))
    hits = []
    for line in p.stdout.splitlines():
        m = LINE.match(line)
        if m:
            hits.append((m.group(1), int(m.group(3)), int(m.group(4), 16), m.group(5)))
        elif not line.startswith(("call ", "done ")):
            fail("unexpected line %r" % line)
    return hits, p.stderr


def glob(pat, s):
    """The kernel's glob_match: * ? [...] (ranges, [!...]), no escapes."""
    rx = ""
    i = 0
    while i < len(pat):
        c = pat[i]
        if c == "*":
            rx += ".*"
        elif c == "?":
            rx += "."
        elif c == "[":
            j = pat.index("]", i + 1)
            body = pat[i + 1:j]
            rx += "[" + ("^" + body[1:] if body.startswith("!") else body) + "]"
            i = j
        else:
            rx += re.escape(c)
        i += 1
    return re.fullmatch(rx, s, re.S) is not None


# the filter, and the same in Python over (comm, n, mask, name)
CASES = [
    ('n < 3 || name == "bravo"', lambda c, n, m, s: n < 3 or s == "bravo"),
    ('!(name ~ "*a*")', lambda c, n, m, s: not glob("*a*", s)),
    ('(n > 10 && n < 20) || !(mask & 1)', lambda c, n, m, s: (10 < n < 20) or not m & 1),
    ('name ~ "[cd]*" && n != 5', lambda c, n, m, s: glob("[cd]*", s) and n != 5),
    ('name ~ "?ravo" || name ~ "*trot" || name == "echo"',
     lambda c, n, m, s: glob("?ravo", s) or glob("*trot", s) or s == "echo"),
    ('comm == "trace_args" && name ~ "*l*"', lambda c, n, m, s: c == "trace_args" and glob("*l*", s)),
    ('comm ~ "trace*" && !(n >= 0) || n == 40', lambda c, n, m, s: (glob("trace*", c) and n < 0) or n == 40),
    ('comm != "trace_args" || name == "delta"', lambda c, n, m, s: c != "trace_args" or s == "delta"),
    ('common_comm ~ "x*" || mask & 0x4 && name != "alpha"',
     lambda c, n, m, s: glob("x*", c) or (m & 4 and s != "alpha")),
    # a numeric conjunction: the agent's
    ('n >= 10 && n < 30 && mask & 2', lambda c, n, m, s: 10 <= n < 30 and m & 2),
]

all_hits, err = run([])
if len(all_hits) != N:
    fail("unfiltered: %d hits, expected %d\n%s" % (len(all_hits), N, err))
if "on the fast path" not in err:
    fail("unfiltered: the probe is not on the fast path\n" + err)
for text, py in CASES:
    want = [h for h in all_hits if py(*h)]
    if not want or len(want) == N:
        fail("%r: Python keeps %d of %d: not a useful case" % (text, len(want), N))
    agent = "&&" in text and not re.search(r'\|\||!\(|"|comm', text)
    for path in ([], ["--no-fast"]):
        got, err = run(["--filter", text] + path)
        where = ("in the process by the agent" if agent and not path else
                 "by the tracer on the fast path's records" if not path else
                 "by the tracer on the trap path")
        if got != want:
            fail("%r %s: %d hits, Python keeps %d\n%s\n%s" %
                 (text, path, len(got), len(want), got, want))
        if "filtered " + where not in err:
            fail("%r %s: -v does not say 'filtered %s'\n%s" % (text, path, where, err))
    print("ok: %-55s %2d of %d hits, fast and trap" % (text, len(want), N))

# a hist trigger whose `if` the agent cannot evaluate: the trap path, the same hits
text, py = CASES[0]
want = len([h for h in all_hits if py(*h)])
p = subprocess.run([UPROBE, "trace", "-v", "-e", SPEC, "-t", "uf/work:hist:keys=name if " + text,
                    "--", PROG, str(N), "0"], capture_output=True, text=True, timeout=120)
m = re.search(r"Hits: (\d+)", p.stdout)
if p.returncode or not m or int(m.group(1)) != want:
    fail("hist if %r: %s hits, expected %d\n%s\n%s" % (text, m and m.group(1), want, p.stdout,
                                                       p.stderr))
if "stays on the trap path" not in p.stderr or "a filter the agent cannot evaluate" not in p.stderr:
    fail("hist if %r: -v does not say it stays on the trap path\n%s" % (text, p.stderr))
print("ok: hist:keys=name if %s: %d hits on the trap path" % (text, want))

# the kernel's filter on the same uprobe event
TRACEFS = "/sys/kernel/tracing"


def tracefs_write(path, s):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, s.encode())
    finally:
        os.close(fd)


def file_offset(sym):
    out = subprocess.run(["nm", PROG], capture_output=True, text=True).stdout
    addr = int(next(l.split()[0] for l in out.splitlines() if l.endswith(" " + sym)), 16)
    out = subprocess.run(["readelf", "-lW", PROG], capture_output=True, text=True).stdout
    for l in out.splitlines():
        f = l.split()
        if f and f[0] == "LOAD":
            off, va, sz = int(f[1], 16), int(f[2], 16), int(f[5], 16)
            if va <= addr < va + sz:
                return addr - va + off
    raise ValueError(sym)


if os.geteuid() != 0 or not os.path.exists(TRACEFS + "/uprobe_events"):
    print("SKIP kernel oracle: needs root and tracefs with uprobe_events")
    sys.exit(0)
inst = TRACEFS + "/instances/upt_filter"
try:
    tracefs_write(TRACEFS + "/uprobe_events", "p:upt_filter/work %s:0x%x %s\n" %
                  (PROG, file_offset("work"), ARGS))
except (OSError, ValueError) as e:
    print("SKIP kernel oracle: cannot add a uprobe event: %s" % e)
    sys.exit(0)
try:
    os.makedirs(inst, exist_ok=True)
    for text, py in CASES:
        if "common_comm" in text:
            continue  # the kernel's is comm; uprobe takes common_comm too
        want = len([h for h in all_hits if py(*h)])
        os.close(os.open(inst + "/trace", os.O_WRONLY | os.O_TRUNC))  # emptied
        tracefs_write(inst + "/events/upt_filter/work/filter", text)
        tracefs_write(inst + "/events/upt_filter/work/enable", "1")
        subprocess.run([PROG, str(N), "0"], capture_output=True, timeout=60)
        tracefs_write(inst + "/events/upt_filter/work/enable", "0")
        got = len([l for l in open(inst + "/trace").read().splitlines()
                   if not l.startswith("#") and " work: " in l])
        if got != want:
            fail("kernel filter %r: %d hits, we keep %d" % (text, got, want))
        print("ok: the kernel's filter %r keeps %d, as ours" % (text, got))
finally:
    try:
        os.rmdir(inst)
    except OSError:
        pass
    tracefs_write(TRACEFS + "/uprobe_events", "-:upt_filter/work\n")
