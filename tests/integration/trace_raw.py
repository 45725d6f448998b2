#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: trace_raw.py UPROBE FAST_REC BENCH_TARGET

Raw records (uprobe trace --format raw -o FILE, then uprobe report FILE):
  same     what report prints of a raw trace is what trace prints live, line for line
           (time stamps aside), text and JSON: entry and return probes, strings, faulting
           reads ("(fault)"), threads named; on the fast path and on the trap path
           (--no-fast: the tracer writes the agent's record form itself)
  program  the traced program's output and exit status as unprobed
  nothing lost  1,000,000 hits of a hot function with six arguments reach the file at
           default settings: report prints 1,000,000 lines, the arguments in sequence
  bad input  a file that is not a raw trace (exit 2, where and why), a file cut short
           (exit 1, the lines before the cut printed), --format raw refusals
"""
import json
import os
import re
import subprocess
import sys

UPROBE, PROG, BENCH = sys.argv[1], sys.argv[2], sys.argv[3]
TMP = "/tmp/trace_raw.%d" % os.getpid()


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def sh(cmd, expect_rc=0, timeout=120):
    p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    if expect_rc is not None and p.returncode != expect_rc:
        fail("%s exited %d (expected %d)\n%s" % (" ".join(cmd), p.returncode, expect_rc,
                                                 p.stderr.decode(errors="replace")))
    return p


def trace(args, specs, opts, out):
    cmd = ["setarch", "x86_64", "-R", UPROBE, "trace", "-v", "-o", out] + list(opts)
    for s in specs:
        cmd += ["-e", s]
    return sh(cmd + ["--", PROG] + [str(a) for a in args])


def untimed(text):
    """Each thread's lines, in order, without time stamp, cpu, pid and tid (two runs get
    different ones, and threads interleave differently): a sorted list of lists."""
    threads = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"\s*\S+-(\d+) ", line) or re.search(r"\"tid\":(\d+)", line)
        line = re.sub(r"\[\d+\]\s+[0-9.]+: ", "[C] T: ", line)
        line = re.sub(r"-\d+ ", "-TID ", line, count=1)
        line = re.sub(r"\"(time_ns|pid|tid|cpu)\":\d+", "\"\\1\":X", line)
        threads.setdefault(m.group(1) if m else "?", []).append(line)
    return sorted(threads.values())


def same_as_live(name, args, specs, opts=(), fmt="text"):
    live, raw = TMP + ".live", TMP + ".raw"
    ref = sh(["setarch", "x86_64", "-R", PROG] + [str(a) for a in args])
    fopt = ["--format", fmt] if fmt != "text" else []
    p1 = trace(args, specs, list(opts) + fopt, live)
    p2 = trace(args, specs, list(opts) + ["--format", "raw"], raw)
    for p in (p1, p2):
        if p.stdout != ref.stdout:
            fail("%s: the program's output changed under the probes" % name)
    if "on the fast path" in p2.stderr.decode() and "--no-fast" in opts:
        fail("%s: --no-fast took the fast path" % name)
    rep = sh([UPROBE, "report"] + fopt + [raw])
    with open(live) as f:
        want = untimed(f.read())
    got = untimed(rep.stdout.decode())
    if not want:
        fail("%s: the live trace is empty" % name)
    if got != want:
        for t, (gt, wt) in enumerate(zip(got, want)):
            for i, (a, b) in enumerate(zip(gt, wt)):
                if a != b:
                    fail("%s: thread %d, line %d differs:\n report: %s\n live:   %s" %
                         (name, t, i, a, b))
        fail("%s: %s lines reported, %s live" % (name, [len(t) for t in got],
                                                 [len(t) for t in want]))
    if fmt == "json":
        for line in rep.stdout.decode().splitlines():
            json.loads(line)
    os.unlink(live)
    os.unlink(raw)
    return sum(len(t) for t in got), p2.stderr.decode()


ARGS = "p:r/args %s:rec_args a=%%di b=%%si:s64 f=%%r9:u32" % PROG
RET = "r:r/ret %s:rec_args rv=$retval:s64" % PROG
PTR = "p:r/ptr %s:rec_ptr v=+0(%%di):u64 s=+0(%%si):string w=+8(+0(%%di)):x32" % PROG
for opts in ([], ["--no-fast"]):
    n, err = same_as_live("args %s" % opts, ["args", 200, 2], [ARGS, RET], opts)
    if n != 2 * 2 * 200:
        fail("args %s: %d lines, expected 800" % (opts, n))
    if not opts and len(re.findall(r"on the fast path", err)) < 2:
        fail("args: not on the fast path:\n" + err)
    n, _ = same_as_live("ptr %s" % opts, ["bad", 5], [PTR], opts)
    same_as_live("json %s" % opts, ["args", 50, 1], [ARGS, RET], opts, fmt="json")
with open(TMP + ".live", "w"):
    pass
print("same: report prints what trace prints live (args, return values, strings, faults,"
      " 2 threads; text and JSON), fast path and trap path")

# nothing lost ----------------------------------------------------------------------------
N = 1000000
raw = TMP + ".big"
p = sh([UPROBE, "trace", "--format", "raw", "-o", raw, "-e",
        "p:b/args %s:hot_args a=%%di b=%%si c=%%dx d=%%cx e=%%r8 f=%%r9" % BENCH,
        "--", BENCH, "args", str(N)])
err = p.stderr.decode()
if "lost" in err:
    fail("records lost at default settings: " + err)
size = os.path.getsize(raw)
rep = subprocess.run([UPROBE, "report", raw], capture_output=True, timeout=300)
if rep.returncode != 0:
    fail("report exited %d: %s" % (rep.returncode, rep.stderr.decode()))
lines = rep.stdout.split(b"\n")[:-1]
if len(lines) != N:
    fail("%d lines reported of %d hits" % (len(lines), N))
for i in (0, 1, N // 2, N - 1):
    m = re.search(rb" a=(0x[0-9a-f]+) b=0x2 c=0x3 d=0x4 e=0x5 f=0x6$", lines[i])
    if not m or int(m.group(1), 16) != i:
        fail("line %d is not call %d: %s" % (i, i, lines[i]))
seq = [int(re.search(rb" a=(0x[0-9a-f]+) ", l).group(1), 16) for l in lines[::997]]
if seq != list(range(0, N, 997)):
    fail("the records are not the calls in order")
print("nothing lost: %d hits, %d lines, a %d-byte file" % (N, len(lines), size))

# bad input -------------------------------------------------------------------------------
with open(TMP + ".bad", "wb") as f:
    f.write(b"hello, this is not a trace\n")
p = sh([UPROBE, "report", TMP + ".bad"], expect_rc=2)
if b"not a raw trace" not in p.stderr:
    fail("a text file: " + p.stderr.decode())
with open(raw, "rb") as f:
    head = f.read(size // 3)
with open(TMP + ".cut", "wb") as f:
    f.write(head)
p = sh([UPROBE, "report", TMP + ".cut"], expect_rc=1)
if b"cut short" not in p.stderr:
    fail("a cut file: " + p.stderr.decode())
# every whole record before the cut (a third of the file: a third of the records)
if abs(p.stdout.count(b"\n") - N // 3) > N // 100:
    fail("a cut file: %d lines before the cut, not ~%d" % (p.stdout.count(b"\n"), N // 3))
p = sh([UPROBE, "trace", "--format", "raw", "-o", TMP + ".x", "-e", "up 0 0x401126 A 2",
        "--", PROG, "args", "1", "1"], expect_rc=2)
if b"--format raw records p:/r: events" not in p.stderr:
    fail("a seed spec with --format raw: " + p.stderr.decode())
p = sh([UPROBE, "trace", "--format", "raw", "-e", ARGS, "--", PROG, "args", "1", "1"],
       expect_rc=2)
if b"give -o FILE" not in p.stderr:
    fail("--format raw to standard output, the command's too: " + p.stderr.decode())
p = sh([UPROBE, "trace", "--format", "raw", "-c", "-o", TMP + ".x", "-e", ARGS, "--", PROG,
        "args", "1", "1"], expect_rc=2)
if b"not with -c" not in p.stderr:
    fail("-c with --format raw: " + p.stderr.decode())
for f in (raw, TMP + ".bad", TMP + ".cut", TMP + ".x", TMP + ".live"):
    if os.path.exists(f):
        os.unlink(f)
print("bad input: refused with where and why")
print("PASS")
