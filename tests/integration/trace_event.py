#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""trace.event.*: p:/r: specs with fetch arguments on tests/targets/trace_args.

usage: trace_event.py --uprobe UPROBE --target TRACE_ARGS [--libc LIBC] MODE

trace_args calls work(int n, unsigned long mask, const char *name, struct rec *r) N times
and getppid() G times, printing "call N MASK NAME ID VAL RET RETADDR" per work() call.
Every mode checks the trace against what the program printed:
  text    %di:s32 %si:x64 +0(%dx):string +8(%cx):u32 +0(%cx):x64 $arg1 $stack0 $comm,
          named and unnamed (argN) arguments, one line per call
  retval  r: with $retval:s32 and $retval (x64): the return values, "(RET <- FUNC)"
  json    --format json: every line parses, same values as text
  output  -o FILE: the trace in FILE, only the program's own output on stdout
  count   -c: hits per probe = N and G
  libc    p: on LIBC:getppid: exactly G hits
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

N, G = 6, 7
LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<tid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<ts>\d+\.\d+): "
                  r"(?P<event>\S+): \((?P<addr>0x[0-9a-f]+)(?: <- (?P<func>0x[0-9a-f]+))?\)"
                  r"(?P<args>.*)$")
ARG = re.compile(r' (\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def nm(path):
    out = subprocess.run(["nm", "-S", path], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4:
            syms[f[3]] = (int(f[0], 16), int(f[1], 16))
    return syms


def run(cmd, stderr=False):
    print("$", " ".join("'%s'" % c if " " in c else c for c in cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=15)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        fail("exit status %d" % r.returncode)
    return (r.stdout, r.stderr) if stderr else r.stdout


def split(out):
    """(trace lines parsed, the program's call lines as dicts, the program's other lines)"""
    trace, calls, rest = [], [], []
    for l in out.splitlines():
        m = LINE.match(l)
        if m:
            d = m.groupdict()
            d["args"] = dict(ARG.findall(d["args"]))
            trace.append(d)
        elif l.startswith("call "):
            f = l.split()
            calls.append({"n": int(f[1]), "mask": int(f[2], 16), "name": f[3],
                          "id": int(f[4], 16), "val": int(f[5]), "ret": int(f[6]),
                          "ra": int(f[7], 16)})
        else:
            rest.append(l)
    return trace, calls, rest


def want_args(c):
    """What the text line shows for one call, as the formats print them."""
    return {"n": str(c["n"]), "m": "0x%x" % c["mask"], "name": '"%s"' % c["name"],
            "v": str(c["val"]), "id": "0x%x" % c["id"], "arg6": "0x%x" % c["id"],
            "a1": "0x%x" % (c["n"] & 0xffffffff), "s0": "0x%x" % c["ra"],
            "c": '"trace_args"'}


def entry_specs(target):
    return ["p:t/work %s:work n=%%di:s32 m=%%si:x64 name=+0(%%dx):string v=+8(%%cx):u32 "
            "id=+0(%%cx):x64 +0(%%cx):x64 a1=$arg1:x32 s0=$stack0 c=$comm" % target]


def check_entries(trace, calls, work_addr, what):
    if len(calls) != N:
        fail("the program made %d calls, expected %d" % (len(calls), N))
    if len(trace) != N:
        fail("%s: %d trace lines, expected %d" % (what, len(trace), N))
    for i, (t, c) in enumerate(zip(trace, calls)):
        if t["event"] != "work" or int(t["addr"], 16) != work_addr:
            fail("line %d: event %s at %s, expected work at 0x%x" % (i, t["event"], t["addr"],
                                                                     work_addr))
        if t["comm"].strip() != "trace_args":
            fail("line %d: comm %r" % (i, t["comm"]))
        w = want_args(c)
        if t["args"] != w:
            fail("line %d: args %s\n      expected %s" % (i, t["args"], w))
    print("%s: %d lines, every value as the program saw it" % (what, N))


def mode_text(a, syms):
    out = run([a.uprobe, "trace", "-e", entry_specs(a.target)[0], "--", a.target, str(N), "0"])
    trace, calls, _ = split(out)
    check_entries(trace, calls, syms["work"][0], "text")


def mode_retval(a, syms):
    spec = "r:t/workr %s:work rv=$retval:s32 rx=$retval" % a.target
    out = run([a.uprobe, "trace", "-e", spec, "--", a.target, str(N), "0"])
    trace, calls, _ = split(out)
    if len(trace) != N or len(calls) != N:
        fail("%d return lines, %d calls, expected %d" % (len(trace), len(calls), N))
    main_lo, main_size = syms["main"]
    for i, (t, c) in enumerate(zip(trace, calls)):
        if t["event"] != "workr" or int(t["func"], 16) != syms["work"][0]:
            fail("line %d: %s (%s <- %s), expected workr from work" % (i, t["event"], t["addr"],
                                                                       t["func"]))
        ret = int(t["addr"], 16)
        if not main_lo <= ret < main_lo + main_size:
            fail("line %d: returns to 0x%x, not into main" % (i, ret))
        w = {"rv": str(c["ret"]), "rx": "0x%x" % (c["ret"] & 0xffffffff)}
        if t["args"] != w and t["args"] != dict(w, rx="0x%x" % (c["ret"] & (2**64 - 1))):
            fail("line %d: %s, expected %s" % (i, t["args"], w))
    print("retval: %d return lines with the values work() returned" % N)


def mode_json(a, syms):
    out = run([a.uprobe, "trace", "--format", "json", "-e", entry_specs(a.target)[0],
               "-e", "r:t/workr %s:work rv=$retval:s32" % a.target,
               "--", a.target, str(N), "0"])
    events, calls = [], []
    for l in out.splitlines():
        if l.startswith("{"):
            try:
                events.append(json.loads(l))
            except ValueError as e:
                fail("not JSON: %r (%s)" % (l, e))
        elif l.startswith("call "):
            f = l.split()
            calls.append({"n": int(f[1]), "mask": int(f[2], 16), "name": f[3],
                          "id": int(f[4], 16), "val": int(f[5]), "ret": int(f[6])})
    entries = [e for e in events if e["event"] == "t/work"]
    rets = [e for e in events if e["event"] == "t/workr"]
    if len(entries) != N or len(rets) != N or len(events) != 2 * N or len(calls) != N:
        fail("%d entries, %d returns, %d calls; expected %d each" % (len(entries), len(rets),
                                                                    len(calls), N))
    first_ra = None
    for i, (e, r, c) in enumerate(zip(entries, rets, calls)):
        for k in ("time_ns", "pid", "tid", "cpu", "comm", "event", "addr", "args"):
            if k not in e:
                fail("event %d has no %r: %s" % (i, k, e))
        if e["comm"] != "trace_args" or int(e["addr"], 16) != syms["work"][0]:
            fail("event %d: comm/addr %r %r" % (i, e["comm"], e["addr"]))
        g = e["args"]
        w = {"n": c["n"], "m": "0x%x" % c["mask"], "name": c["name"], "v": c["val"],
             "id": "0x%x" % c["id"], "arg6": "0x%x" % c["id"],
             "a1": "0x%x" % (c["n"] & 0xffffffff), "c": "trace_args"}
        s0 = g.pop("s0", None)
        if g != w:
            fail("event %d: args %s\n       expected %s" % (i, g, w))
        if first_ra is None:
            first_ra = s0
        if s0 != first_ra or s0 != r.get("ret_addr"):
            fail("event %d: $stack0 %s, the return went to %s" % (i, s0, r.get("ret_addr")))
        if r["args"] != {"rv": c["ret"]}:
            fail("return %d: %s, expected rv %d" % (i, r["args"], c["ret"]))
    print("json: %d entry and %d return events, valid JSON, values as the program saw them"
          % (N, N))


def mode_output(a, syms):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.txt")
        out = run([a.uprobe, "trace", "-o", path, "-e", entry_specs(a.target)[0],
                   "--", a.target, str(N), "0"])
        ptrace, calls, rest = split(out)
        if ptrace:
            fail("trace lines on stdout with -o")
        trace, fcalls, frest = split(open(path).read())
        if fcalls or frest:
            fail("the program's output went to the -o file: %s" % (fcalls or frest))
        print(open(path).read(), end="")
    check_entries(trace, calls, syms["work"][0], "-o FILE")


def counts(out):
    c = {}
    for l in out.splitlines():
        f = l.split()
        if len(f) == 3 and f[2].isdigit() and "/" in f[1]:
            c[f[1]] = (f[0], int(f[2]))
    return c


def mode_count(a, syms):
    out, err = run([a.uprobe, "trace", "-c", "-e", "p:t/work %s:work n=%%di:s32" % a.target,
                    "-e", "p:t/getppid %s:getppid" % a.libc, "--", a.target, str(N), str(G)],
                   stderr=True)
    trace, calls, _ = split(out)
    if trace:
        fail("-c printed trace lines")
    # stdout is the command's too: the table goes to stderr, never among its output
    if counts(out):
        fail("-c with a command: the counts went to stdout")
    c = counts(err)
    want = {"t/work": (a.target, N), "t/getppid": (a.libc, G)}
    if c != want:
        fail("counts %s, expected %s" % (c, want))
    # with -o the table goes to the file, and stdout is the program's alone
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "counts.txt")
        out = run([a.uprobe, "trace", "-c", "-o", path,
                   "-e", "p:t/work %s:work n=%%di:s32" % a.target, "--", a.target, str(N), "0"])
        if counts(out):
            fail("-c -o FILE: the counts went to stdout")
        with open(path) as f:
            got = counts(f.read())
        if got != {"t/work": (a.target, N)}:
            fail("-c -o FILE: the file holds %s" % got)
    print("count: t/work %d, t/getppid %d; -c -o FILE: the table in the file" % (N, G))


def mode_libc(a, syms):
    out = run([a.uprobe, "trace", "-e", "p:t/getppid %s:getppid" % a.libc,
               "--", a.target, "0", str(G)])
    trace, _, rest = split(out)
    if len(trace) != G or any(t["event"] != "getppid" for t in trace):
        fail("%d getppid lines, expected %d" % (len(trace), G))
    if len({t["addr"] for t in trace}) != 1 or len({t["tid"] for t in trace}) != 1:
        fail("getppid hits at several addresses or threads")
    if rest[-1:] != ["done %d" % G]:
        fail("the program's output is %s" % rest)
    print("libc: getppid hit %d times at %s" % (G, trace[0]["addr"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uprobe", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--libc", default="/lib/x86_64-linux-gnu/libc.so.6")
    ap.add_argument("mode", choices=["text", "retval", "json", "output", "count", "libc"])
    a = ap.parse_args()
    if a.mode in ("count", "libc") and not os.path.exists(a.libc):
        print("SKIP: %s is not there" % a.libc)
        sys.exit(77)
    syms = nm(a.target)
    globals()["mode_" + a.mode](a, syms)
    print("PASS")


if __name__ == "__main__":
    main()
