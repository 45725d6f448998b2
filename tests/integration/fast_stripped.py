#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: fast_stripped.py UPROBE PROG

A stripped copy of a C program (strip: no .symtab; .eh_frame stays): where no symbol
says where a function begins and ends, its unwind information (FDE) does, so

  - `uprobe decode -t` finds succ, pad and hop sites in the stripped copy as in the
    original (at least 80% as many succ sites: a few functions have no FDE);
  - every function entry (by file offset, the stripped copy having no names) counted
    while it runs: the output as unprobed, the counts the trap path's, at least 90% on
    the fast path, succ among the tactics (it needs to know where a function ends);
  - every instruction of mix, dispatch and fp_work likewise (at least half on the
    fast path: in a file loaded at 4 MiB, punned jmps through short neighbours often
    point below zero);
  - a probe in the middle of an instruction is refused, as in the original.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

UPROBE, PROG = sys.argv[1], sys.argv[2]
FUNCS = ["mix", "dispatch", "fp_work"]
ARGS = ["2", "300"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def tactics(path):
    out = subprocess.run([UPROBE, "decode", "-t", "-s", path], capture_output=True,
                         text=True, check=True).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^tactic (\w+) (\d+)$", out, re.M)}


tmp = tempfile.mkdtemp(prefix="upt_strip.")
try:
    stripped = os.path.join(tmp, "prog")
    subprocess.run(["strip", "-o", stripped, PROG], check=True)
    if subprocess.run(["nm", stripped], capture_output=True).returncode == 0 and \
            subprocess.run(["nm", stripped], capture_output=True, text=True).stdout.strip():
        fail("strip left symbols")
    full, bare = tactics(PROG), tactics(stripped)
    if bare.get("succ", 0) < 0.8 * full.get("succ", 0) or not full.get("succ"):
        fail("succ sites: %s stripped, %s with symbols" % (bare, full))
    print("decode -t: with symbols %s; stripped %s" % (full, bare))

    plain = subprocess.run([stripped] + ARGS, capture_output=True, text=True)

    def run(specs, opts):
        path = os.path.join(tmp, "specs")
        with open(path, "w") as fh:
            fh.write("\n".join(specs) + "\n")
        p = subprocess.run([UPROBE, "trace", "-c"] + opts + ["-f", path, "--", stripped] + ARGS,
                           capture_output=True, text=True, timeout=300)
        if p.returncode != plain.returncode or p.stdout != plain.stdout:
            fail("%s: the program's output or status changed\n%s" % (opts, p.stderr[-2000:]))
        return p, {m.group(1): int(m.group(2)) for m in
                   re.finditer(r"^\s+\S+\s+(s/\S+)\s+(\d+)$", p.stderr, re.M)}

    def check(what, specs, want, succ):
        p, ours = run(specs, ["-v"])
        _, trap = run(specs, ["--no-fast"])
        if len(ours) != len(specs) or ours != trap:
            fail("%s: %d counts for %d probes; differing from the trap path: %s" % (
                what, len(ours), len(specs), [(k, ours.get(k), v) for k, v in trap.items()
                                              if ours.get(k) != v][:10]))
        kinds = {}
        for t in re.findall(r"on the fast path \((\w+):", p.stderr):
            kinds[t] = kinds.get(t, 0) + 1
        fast = sum(kinds.values()) - p.stderr.count("leaves the fast path")
        if fast < want * len(specs) or (succ and not kinds.get("succ")):
            fail("%s: %d of %d on the fast path %s" % (what, fast, len(specs), kinds))
        print("%s of the stripped copy: %d probes, %d (%.0f%%) fast %s, output as unprobed, every "
              "count the trap path's (%d hits)" % (what, len(specs), fast, 100.0 * fast / len(specs),
                                                  kinds, sum(ours.values())))

    # by file offset: the original's symbols name them (a non-PIE file: vaddr - 0x400000)
    syms = {}
    for line in subprocess.run(["nm", PROG], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tT" and re.match(r"[A-Za-z]\w*$", f[2]):
            syms[f[2]] = int(f[0], 16) - 0x400000
    # every function's entry: succ where the FDE says where the function ends
    check("every function entry", ["p:s/%s %s:0x%x" % (n, stripped, o) for n, o in syms.items()],
          0.9, True)
    # every instruction of three functions: punned jmps through their neighbours
    specs = []
    for f in FUNCS:
        for l in subprocess.run([UPROBE, "decode", PROG, f], capture_output=True, text=True,
                                check=True).stdout.splitlines():
            if l.strip() and " reject " not in l:
                off = int(l.split()[0], 16) - 0x400000
                specs.append("p:s/%s_%x %s:0x%x" % (f, off, stripped, off))
    check("every instruction of %s" % ", ".join(FUNCS), specs, 0.5, False)

    # inside an instruction: refused, as in the original
    for l in subprocess.run([UPROBE, "decode", PROG, "fp_work"], capture_output=True, text=True,
                            check=True).stdout.splitlines():
        if int(l.split()[1]) >= 2:
            mid = int(l.split()[0], 16) + 1 - 0x400000
            break
    r = subprocess.run([UPROBE, "trace", "-c", "-e", "p:s/mid %s:0x%x" % (stripped, mid),
                        "--", stripped] + ARGS, capture_output=True, text=True, timeout=120)
    if "boundary" not in r.stderr:
        fail("a probe inside an instruction of fp_work: exit %d\n%s" % (r.returncode,
                                                                       r.stderr[-1000:]))
    print("inside an instruction of the stripped copy: refused (%s)" %
          [l for l in r.stderr.splitlines() if "boundary" in l][0][:140])
finally:
    shutil.rmtree(tmp, True)
