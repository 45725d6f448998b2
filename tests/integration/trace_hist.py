#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: trace_hist.py UPROBE HIST_PROG

Histogram triggers (-t 'EVENT:hist:...') on tests/targets/hist_prog.c, whose calls the
test knows in advance:

  log2     keys=n.log2 over 2 threads x N calls: the table is the one the sequence
           gives, entry for entry, on the fast path (in-process tables) and on the trap
           path (--no-fast) alike, Totals exact (no hit lost, none twice, 0 dropped);
           and the same counts as the kernel's uprobe events for the same run, counted
           here from the raw values of each event (where tracefs can be had)
  log2floor keys=n.log2floor (ours: bpftrace's hist buckets, [2^k, 2^(k+1))): the table
           the sequence gives on the fast path and on the trap path alike
  keys     a count keyed by a string argument, and a sum (vals=n) by a linear bucket
  latency  r: event, keys=$duration.log2 vals=$duration.min: every call counted, and no
           call shorter than its sleep; "if $duration ..." filters
  stacks   keys=stacktrace at leaf(): two stacks, via_a and via_b, 1:3, named by symbol
  output   --format json parses and agrees; --format bars draws the log2 rows; -i prints
           a table a period; the program's output is the unprobed one
  errors   a bad modifier, an unknown field, $duration on a p: event: a caret, exit 2
"""
import json
import os
import re
import subprocess
import sys

UPROBE, PROG = sys.argv[1], sys.argv[2]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def log2(v):
    return 0 if v <= 1 else (v - 1).bit_length()


def run(args, events, triggers, opts=(), expect_rc=0):
    cmd = [UPROBE, "trace"] + list(opts)
    for e in events:
        cmd += ["-e", e]
    for t in triggers:
        cmd += ["-t", t]
    cmd += ["--", PROG] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != expect_rc:
        fail("%s exited %d\n%s" % (" ".join(cmd), p.returncode, p.stderr))
    return p


def plain(args):
    return subprocess.run([PROG] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=60).stdout


def table(text):
    """The kernel hist file's entries: {key text: hitcount} and the Totals."""
    ent = {}
    for m in re.finditer(r"^\{ (.*) \} hitcount:\s+(\d+)", text, re.M):
        ent[m.group(1).strip()] = int(m.group(2))
    tot = re.search(r"Totals:\n    Hits: (\d+)\n    Entries: (\d+)\n    Dropped: (\d+)", text)
    if not tot:
        fail("no Totals in:\n" + text)
    return ent, tuple(int(x) for x in tot.groups())


def rows(text):
    """Single-line entries: [(key text, hitcount, rest)] in the printed order."""
    return [(m.group(1), int(m.group(2)), m.group(3))
            for m in re.finditer(r"^\{ (.*) \} hitcount:\s+(\d+)(.*)$", text, re.M)]


SIZED = "p:h/sized %s:sized n=%%di:u64" % PROG
T, N = 2, 100000

# log2 -----------------------------------------------------------------------------------
want = {}
for t in range(T):
    for i in range(N):
        k = log2((i * 37) % 5000 + t)
        want[k] = want.get(k, 0) + 1
ref_out = plain(["sizes", T, N])
tables = {}
for mode, opts in (("fast", ["-v"]), ("trap", ["--no-fast"])):
    n = N if mode == "fast" else N // 20
    p = run(["sizes", T, n], [SIZED], ["h/sized:hist:keys=n.log2"], opts)
    if mode == "fast":
        if p.stdout.split("# event histogram")[0] != ref_out:
            fail("the program's output changed:\n" + p.stdout[:300])
        if "on the fast path" not in p.stderr:
            fail("sized did not take the fast path:\n" + p.stderr)
    text = p.stdout[p.stdout.index("# event histogram"):]
    if "# trigger info: hist:keys=n.log2:vals=hitcount:sort=hitcount:size=2048 [active]" \
            not in text:
        fail("trigger info line:\n" + text[:400])
    ent, tot = table(text)
    exp = want if mode == "fast" else {}
    if mode == "trap":
        for t in range(T):
            for i in range(n):
                k = log2((i * 37) % 5000 + t)
                exp[k] = exp.get(k, 0) + 1
    got = {int(re.match(r"n: ~ 2\^(\d+)", k).group(1)): v for k, v in ent.items()}
    if got != exp:
        fail("%s: log2 table %s, the sequence gives %s" % (mode, got, exp))
    if tot != (sum(exp.values()), len(exp), 0):
        fail("%s: Totals %s" % (mode, tot))
    # sorted by hitcount, ascending, as the kernel sorts by default
    counts = [c for _, c, _ in rows(text)]
    if counts != sorted(counts):
        fail("%s: not sorted by hitcount: %s" % (mode, counts))
    tables[mode] = text
print("log2: %d hits from %d threads, %d entries, identical to the sequence on both paths"
      % (sum(want.values()), T, len(want)))

# log2floor: bpftrace's buckets, kept as v's bit length, printed as the bucket's bounds
for mode, opts in (("fast", ["-v"]), ("trap", ["--no-fast"])):
    n = 20000 if mode == "fast" else 2000
    exp = {}
    for t in range(T):
        for i in range(n):
            v = (i * 37) % 5000 + t
            lo = 1 << (v.bit_length() - 1) if v else 0
            exp[lo] = exp.get(lo, 0) + 1
    p = run(["sizes", T, n], [SIZED], ["h/sized:hist:keys=n.log2floor"], opts)
    if mode == "fast" and "on the fast path" not in p.stderr:
        fail("log2floor: sized did not take the fast path:\n" + p.stderr)
    ent, tot = table(p.stdout[p.stdout.index("# event histogram"):])
    got = {}
    for k, c in ent.items():
        m = re.match(r"n: ~ (\d+)-(\d+)", k)
        if not m or int(m.group(2)) != (2 * int(m.group(1)) - 1 if int(m.group(1)) else 0):
            fail("log2floor: a key printed %r" % k)
        got[int(m.group(1))] = c
    if got != exp or tot != (sum(exp.values()), len(exp), 0):
        fail("%s: log2floor table %s (Totals %s), the sequence gives %s" % (mode, got, tot, exp))
print("log2floor: [2^k, 2^(k+1)) buckets identical to the sequence on both paths")

# the kernel's uprobe events for the same run, counted here
if os.geteuid() == 0 and not os.path.isdir("/sys/kernel/tracing/events"):
    subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"],
                   capture_output=True)
if os.geteuid() != 0 or not os.path.exists("/sys/kernel/tracing/uprobe_events"):
    print("kernel oracle skipped: no tracefs (needs root and a kernel with uprobe events)")
else:
    kn = 20000
    k = subprocess.run([UPROBE, "trace", "--backend", "kernel", "-e", SIZED, "--", PROG,
                        "sizes", "1", str(kn)], capture_output=True, text=True, timeout=240)
    if k.returncode != 0:
        print("kernel oracle skipped: the kernel backend failed: " + k.stderr.strip()[:200])
    else:
        kc = {}
        for m in re.finditer(r" n=(\d+)", k.stdout):
            b = log2(int(m.group(1)))
            kc[b] = kc.get(b, 0) + 1
        if sum(kc.values()) != kn:
            fail("the kernel saw %d events of %d" % (sum(kc.values()), kn))
        p = run(["sizes", 1, kn], [SIZED], ["h/sized:hist:keys=n.log2"])
        ent, tot = table(p.stdout)
        got = {int(re.match(r"n: ~ 2\^(\d+)", k).group(1)): v for k, v in ent.items()}
        if got != kc:
            fail("kernel events give %s, the table %s" % (kc, got))
        print("kernel: %d events counted by value, the same %d buckets" % (kn, len(kc)))

# keys -----------------------------------------------------------------------------------
NAMED = "p:h/named %s:named s=+0(%%di):string" % PROG
for opts in ([], ["--no-fast"]):
    p = run(["names", 1000], [NAMED], ["named:hist:keys=s"], opts)
    ent, tot = table(p.stdout)
    got = {k.split(":", 1)[1].strip(): v for k, v in ent.items()}
    if got != {"alpha": 200, "b": 400, "gamma": 200, "epsilon": 200} or tot[0] != 1000:
        fail("%s string keys: %s %s" % (opts, got, tot))
p = run(["sizes", 1, 5000], [SIZED],
        ["sized:hist:keys=n.buckets=1000:vals=hitcount,n,n.max:sort=n.descending"])
r = rows(p.stdout)
if len(r) != 5:
    fail("buckets: %s" % p.stdout)
sums = []
for key, hits, rest in r:
    lo = int(re.match(r"n: ~ (\d+)-(\d+)", key).group(1))
    vals = [i * 37 % 5000 for i in range(5000) if lo <= i * 37 % 5000 < lo + 1000]
    m = re.search(r"n:\s+(\d+)\s+n\.max:\s+(\d+)", rest) or \
        re.search(r"n:\s+(\d+).*?max.*?(\d+)\s*$", rest)
    if hits != len(vals) or not m or int(m.group(1)) != sum(vals) or int(m.group(2)) != max(vals):
        fail("bucket %d: %d hits %s, want %d sum %d max %d" % (lo, hits, rest, len(vals),
                                                               sum(vals), max(vals)))
    sums.append(int(m.group(1)))
if sums != sorted(sums, reverse=True):
    fail("sort=n.descending: %s" % sums)
print("keys: a string key and 5 linear buckets with sums and maxima, exact")

# latency --------------------------------------------------------------------------------
SLOW = "r:h/slow %s:slow" % PROG
for opts in ([], ["--no-fast"]):
    p = run(["sleep", 50, 200], [SLOW],
            ["slow:hist:keys=$duration.log2:vals=hitcount,$duration.min"], opts)
    r = rows(p.stdout)
    if sum(h for _, h, _ in r) != 50:
        fail("%s latency: %s" % (opts, p.stdout))
    for key, hits, rest in r:
        b = int(re.match(r"\$?duration: ~ 2\^(\d+)", key).group(1))
        mn = int(re.search(r"(\d+)\s*$", rest).group(1))
        if mn < 200000 or b < 18 or mn > 1 << b:
            fail("%s: a call of a 200 us sleep took %d ns (bucket 2^%d)" % (opts, mn, b))
    # $duration in a filter, in-process and on the trap path: a 200 us sleep never
    # returns within 1 us
    for cond, want in (("$duration > 1000", 20), ("$duration < 1000", 0)):
        p = run(["sleep", 20, 200], [SLOW], ["slow:hist:keys=$duration.log2 if " + cond], opts)
        if table(p.stdout)[1][0] != want:
            fail("%s 'if %s': %s" % (opts, cond, p.stdout))
print("latency: 50 returns, every one >= its 200 us sleep, $duration filters, on both paths")

# stacks ---------------------------------------------------------------------------------
LEAF = "p:h/leaf %s:leaf" % PROG
for opts in ([], ["--no-fast"]):
    p = run(["stacks", 300], [LEAF], ["leaf:hist:keys=stacktrace"], opts)
    ents = re.findall(r"^\{ common_stacktrace:\n((?:         .*\n)+)\} hitcount:\s+(\d+)", p.stdout, re.M)
    got = sorted((int(h), f.split("\n")[1].strip()) for f, h in ents)
    if len(got) != 2 or got[0][0] != 300 or got[1][0] != 900 or \
            not got[0][1].startswith("via_a+") or not got[1][1].startswith("via_b+"):
        fail("%s stacks: %s\n%s" % (opts, got, p.stdout))
    if not all(f.split("\n")[0].strip().startswith("leaf+0x0") for f, _ in ents):
        fail("the first frame is not leaf itself:\n" + p.stdout)
print("stacks: via_a 300, via_b 900, on both paths")

# output ---------------------------------------------------------------------------------
p = run(["sizes", 1, 3000], [SIZED], ["sized:hist:keys=n.log2"], ["--format", "json"])
j = json.loads(p.stdout[p.stdout.index("{"):])
if j["totals"]["hits"] != 3000 or sum(e["hitcount"] for e in j["entries"]) != 3000:
    fail("json: %s" % p.stdout[:400])
p = run(["sizes", 1, 3000], [SIZED], ["sized:hist:keys=n.log2"], ["--format", "bars"])
bars = re.findall(r"^[\[(](\S+), (\S+)[\])]\s+(\d+) \|(@*)\s*\|$", p.stdout, re.M)
if sum(int(b[2]) for b in bars) != 3000 or not any(len(b[3]) == 52 for b in bars):
    fail("bars:\n" + p.stdout)
p = run(["sleep", 8, 50000], [SLOW], ["slow:hist:keys=$duration.log2"], ["-i", "0.1"])
if p.stdout.count("# event histogram") < 3:
    fail("-i 0.1 over 0.4 s printed %d tables" % p.stdout.count("# event histogram"))
print("output: json, bars and -i tables")

# errors ---------------------------------------------------------------------------------
for trig, what in (("sized:hist:keys=n.log3", "modifier"), ("sized:hist:keys=size", "field"),
                   ("sized:hist:keys=$duration", "duration")):
    p = run(["sizes", 1, 1], [SIZED], [trig], expect_rc=2)
    if "^" not in p.stderr or trig not in p.stderr:
        fail("%s: no caret:\n%s" % (trig, p.stderr))
print("errors: carets")
print("PASS")
