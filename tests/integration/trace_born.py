#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: trace_born.py UPROBE FAST_REC

Threads born after a recording probe was placed (issue 30 item 3), tests/targets/
fast_rec.c born: THREADS threads made at once, each calling rec_args() N times (six
arguments fetched: 2-3 MiB of records each, more than the 1 MiB a thread's ring gets
at its birth), from a barrier, so that they all start recording together.

  records  every call of every thread is a line, each thread's in order, none lost,
           with the values of its call -- as text and as raw (uprobe report)
  names    every line names its thread as the kernel does (fast_rec), also the lines
           formatted after their thread exited: its name was noted at its exit, which
           no longer waits for its records to be formatted; and so with 6 waves of 32
           threads (waves), more than the tracer's cache of live threads' names holds,
           as text and raw: each thread's records under its own id, though they wait in
           its ring after its exit and a thread born later takes over its TLS block and
           stack (the key its records carry)
  present  the rings of the first threads to record were made present before they
           were born (at the probe's placement): at least two threads take at most a
           few page faults in all their calls (their stacks, the agent's first hit),
           where a ring faulted in by its writer takes one a page (500-700 here); the
           program's own count (getrusage RUSAGE_THREAD), not a time
"""
import os
import re
import subprocess
import sys

UPROBE, PROG = sys.argv[1], sys.argv[2]
N = 20000
THREADS = 3
FEW = 16  # page faults a thread whose ring was present may still take
SPEC = "p:b/args %s:rec_args a=%%di b=%%si c=%%dx d=%%cx e=%%r8 f=$arg6:u64" % PROG


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def traced(fmt, args=("born", str(N), str(THREADS))):
    """(program stdout, trace lines, their thread ids, stderr) of one traced run."""
    tfile = "/tmp/trace_born.%d" % os.getpid()
    cmd = [UPROBE, "trace", "-v", "-o", tfile, "-e", SPEC]
    if fmt == "raw":
        cmd += ["--format", "raw"]
    cmd += ["--", PROG] + list(args)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        if p.returncode:
            fail("%s exited %d\n%s" % (" ".join(cmd), p.returncode, p.stderr))
        if fmt == "raw":
            r = subprocess.run([UPROBE, "report", tfile], capture_output=True, text=True,
                               timeout=180)
            if r.returncode:
                fail("uprobe report exited %d\n%s" % (r.returncode, r.stderr))
            text = r.stdout
        else:
            with open(tfile) as f:
                text = f.read()
    except subprocess.TimeoutExpired:
        fail("%s did not finish in 180 s" % " ".join(cmd))
    finally:
        if os.path.exists(tfile):
            os.unlink(tfile)
    raw = [line for line in text.splitlines() if line and not line.startswith("#")]
    tids = [int(re.match(r"\s*\S+?-(\d+)\s", line).group(1)) for line in raw]
    return p.stdout, raw, tids, p.stderr


faults_seen = []
for fmt in ("text", "raw"):
    out, lines, tids, err = traced(fmt)
    if "on the fast path" not in err:
        fail("%s: not on the fast path\n%s" % (fmt, err))
    if "lost" in err:
        fail("%s: records lost\n%s" % (fmt, err))
    if len(lines) != THREADS * N:
        fail("%s: %d records, not %d\n%s" % (fmt, len(lines), THREADS * N, err))
    per = {}
    for t, line in zip(tids, lines):
        m = re.search(r"a=0x([0-9a-f]+) b=0x([0-9a-f]+) c=0x([0-9a-f]+) d=0x([0-9a-f]+) "
                      r"e=0x([0-9a-f]+) f=(\d+)", line)
        if not m:
            fail("%s: bad line %s" % (fmt, line))
        i = int(m.group(1), 16)
        vals = [int(m.group(k), 16) for k in range(1, 6)] + [int(m.group(6))]
        if vals != [i * k for k in range(1, 7)]:
            fail("%s: wrong values %s" % (fmt, line))
        per.setdefault(t, []).append(i)
    names = {line.split()[0].rsplit("-", 1)[0] for line in lines}
    if names != {os.path.basename(PROG)[:15]}:
        fail("%s: threads named %s, not only %s" % (fmt, names, os.path.basename(PROG)))
    if len(per) != THREADS or any(v != list(range(N)) for v in per.values()):
        fail("%s: not %d threads with their %d calls each in order: %s" %
             (fmt, THREADS, N, {t: len(v) for t, v in per.items()}))
    faults = [int(x) for x in re.findall(r"thread \d+ faults (\d+)", out)]
    if len(faults) != THREADS:
        fail("%s: the program said %r" % (fmt, out))
    faults_seen.append(faults)
    print("ok: %s: %d records from %d threads born after the probe, each thread's %d in "
          "order, none lost, every one named; page faults in each thread's calls: %s" %
          (fmt, len(lines), THREADS, N, faults))

for faults in faults_seen:
    if sum(f <= FEW for f in faults) < 2:
        fail("fewer than 2 threads found their ring present: page faults %s" % faults_seen)
print("ok: at least 2 threads of %d took <= %d page faults in their calls: %s" %
      (THREADS, FEW, faults_seen))

# names, past the cache: 6 waves of 32 threads, 2000 calls each; a thread's records wait in
# its ring after its exit, and a thread born later takes over its TLS block and stack
for fmt in ("text", "raw"):
    out, lines, tids, err = traced(fmt, ("waves", "2000", "32", "6"))
    if "waves 6" not in out:
        fail("waves, %s: the program said %r" % (fmt, out))
    per, names = {}, {}
    for t, line in zip(tids, lines):
        m = re.match(r"\s*(\S+?)-\d+\s.*a=0x([0-9a-f]+)", line)
        if not m:
            fail("waves, %s: bad line %s" % (fmt, line))
        names[m.group(1)] = names.get(m.group(1), 0) + 1
        per.setdefault(t, []).append(int(m.group(2), 16))
    if list(names) != [os.path.basename(PROG)[:15]]:
        fail("waves, %s: lines by name %s" % (fmt, names))
    if len(per) != 6 * 32 or any(v != list(range(2000)) for v in per.values()):
        odd = {t: (len(v), v[:2], v[-2:]) for t, v in per.items() if v != list(range(2000))}
        fail("waves, %s: not 192 threads with their 2000 calls in order: %d threads, %d "
             "lines; those not: %s\n%s" % (fmt, len(per), len(lines), list(odd.items())[:6],
                                            err[-1500:]))
    print("ok: waves, %s: 192 threads in 6 waves, 384000 records, each thread's in order "
          "under its own id, every one named %s" % (fmt, list(names)))
