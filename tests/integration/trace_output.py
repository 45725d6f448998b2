#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: trace_output.py UPROBE FAST_REC

Output for people and for programs (issue 30, item 4):

  - json: with a ring too small to keep up (--ring-size 64), every line of the output
    parses with json.loads; the last one is {"type":"summary",...} with the records
    lost per probe, which with the hit lines make every call; stderr says the same per
    probe; with nothing lost there is no summary line;
  - text: the same '# records lost' lines end the output, per probe;
  - -c with a command: stdout is the command's alone (the counts are on stderr), with
    --format json each count a {"type":"count",...} line; -o /dev/stdout asks for them
    on stdout.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

UPROBE, PROG = sys.argv[1], sys.argv[2]
N = 200000
ARGS = "p:o/args %s:rec_args a=%%di b=%%si c=%%dx d=%%cx e=%%r8 f=%%r9" % PROG
AGAIN = "p:o/again %s:rec_args x=%%di" % PROG
CMD = [PROG, "args", str(N), "1"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def trace(opts, cmd=CMD):
    return subprocess.run([UPROBE, "trace"] + opts + ["--"] + cmd, capture_output=True,
                          text=True, timeout=240)


def stderr_lost(err):
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^uprobe trace:\s+(o/\w+): (\d+) lost$", err, re.M)}


plain = subprocess.run(CMD, capture_output=True, text=True)
with tempfile.TemporaryDirectory() as d:
    # json, records lost
    path = os.path.join(d, "t.json")
    p = trace(["--format", "json", "--ring-size", "64", "--when-full=drop", "--spool-size", "0", "-o", path, "-e", ARGS, "-e", AGAIN])
    if p.returncode != plain.returncode or p.stdout != plain.stdout:
        fail("json: exit %d, stdout %r (unprobed %r)\n%s" % (p.returncode, p.stdout[:200],
                                                              plain.stdout, p.stderr[-2000:]))
    with open(path) as f:
        lines = f.read().splitlines()
    objs = []
    for i, line in enumerate(lines):
        try:
            objs.append(json.loads(line))
        except ValueError as e:
            fail("json: line %d of %d does not parse (%s): %r" % (i + 1, len(lines), e, line[:200]))
    last = objs[-1]
    if last.get("type") != "summary" or any(o.get("type") == "summary" for o in objs[:-1]):
        fail("json: the last line is not the one summary: %r" % lines[-1][:300])
    lost = last.get("lost", {})
    hits = {}
    for o in objs[:-1]:
        hits[o["event"]] = hits.get(o["event"], 0) + 1
    for ev in ("o/args", "o/again"):
        if hits.get(ev, 0) + lost.get(ev, 0) != N:
            fail("json: %s: %d lines + %d lost, expected %d calls" % (
                ev, hits.get(ev, 0), lost.get(ev, 0), N))
    if not sum(lost.values()) or last.get("records_lost") != sum(lost.values()):
        fail("json: a ring of 64 KiB lost nothing, or the total is not the sum: %r" % last)
    if stderr_lost(p.stderr) != lost:
        fail("json: stderr says %r lost, the output %r\n%s" % (stderr_lost(p.stderr), lost,
                                                               p.stderr[-1000:]))
    print("json: %d lines, each parses; %r" % (len(lines), last))

    # json, nothing lost: no summary
    p = trace(["--format", "json", "-o", path, "-e", ARGS], [PROG, "args", "1000", "1"])
    with open(path) as f:
        objs = [json.loads(line) for line in f.read().splitlines()]
    if len(objs) != 1000 or any("type" in o for o in objs) or "lost" in p.stderr:
        fail("json, nothing lost: %d lines, %r" % (len(objs), objs[-1:]))

    # text: the output ends with the lost records, per probe
    p = trace(["--ring-size", "64", "--when-full=drop", "--spool-size", "0", "-o", path, "-e", ARGS])
    with open(path) as f:
        tail = [l for l in f.read().splitlines() if l.startswith("# records lost")]
    m = [re.match(r"# records lost: (\d+) of o/args$", l) for l in tail]
    if len(tail) != 2 or not m[1] or int(m[1].group(1)) != stderr_lost(p.stderr).get("o/args"):
        fail("text: lost lines %r, stderr %r" % (tail, p.stderr[-500:]))
    print("text: %r" % tail)

# -c with a command: the counts never among its output
p = trace(["-c", "-e", ARGS])
if p.returncode != plain.returncode or p.stdout != plain.stdout:
    fail("-c: stdout %r, the command's alone was %r" % (p.stdout[-300:], plain.stdout))
if not re.search(r"^\s+\S+\s+o/args\s+%d$" % N, p.stderr, re.M):
    fail("-c: no count on stderr:\n" + p.stderr[-1000:])
p = trace(["-c", "-o", "/dev/stdout", "-e", ARGS])
if not p.stdout.startswith(plain.stdout) or \
        not re.search(r"^\s+\S+\s+o/args\s+%d$" % N, p.stdout[len(plain.stdout):], re.M):
    fail("-c -o /dev/stdout: %r" % p.stdout[-300:])
p = trace(["-c", "--format", "json", "-e", ARGS])
rows = [json.loads(l) for l in p.stderr.splitlines() if l.startswith("{")]
if p.stdout != plain.stdout or rows != [{"type": "count", "where": PROG, "event": "o/args",
                                         "hits": N}]:
    fail("-c --format json: %r\n%s" % (rows, p.stderr[-500:]))
print("-c: stdout the command's alone; counts on stderr (%r as json); -o /dev/stdout asks"
      % rows[0])
print("PASS")
