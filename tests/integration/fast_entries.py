#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: fast_entries.py UPROBE

Every function entry of libc (a wildcard: ~3,650 probes) counted while `ls -l` runs:

  - the program's output and status are the unprobed ones;
  - at least 99% of the entries are on the fast path (-v names each site's tactic:
    jmp, succ, pad, pun), every tactic that applies to entries used;
  - every count equals the trap path's (--no-fast: int3 stops, which the kernel's own
    counts are checked against in probes.glob and fast.every).
"""
import re
import subprocess
import sys

UPROBE = sys.argv[1]
SPEC = "p:l/* /lib/x86_64-linux-gnu/libc.so.6:*"
CMD = ["ls", "-l", "/usr/share/doc", "/etc"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def counts(text):
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^\s+\S+\s+(l/\S+)\s+(\d+)$", text, re.M)}


def run(opts):
    return subprocess.run([UPROBE, "trace", "-c"] + opts + ["-e", SPEC, "--"] + CMD,
                          capture_output=True, text=True, timeout=300)


plain = subprocess.run(CMD, capture_output=True, text=True)
fast = run(["-v"])
if fast.returncode != plain.returncode or fast.stdout != plain.stdout:
    fail("the program's output or status changed: %d (unprobed %d)\n%s" % (
        fast.returncode, plain.returncode, fast.stderr[-3000:]))
ours = counts(fast.stderr)  # -c with a command: on stderr
armed = len(re.findall(r"': armed at", fast.stderr))
tactics = {}
for t in re.findall(r"on the fast path \((\w+):", fast.stderr):
    tactics[t] = tactics.get(t, 0) + 1
nfast = sum(tactics.values())
if armed < 3000 or len(ours) != armed:
    fail("%d probes armed, %d counted" % (armed, len(ours)))
if nfast < 0.99 * armed or any(not tactics.get(t) for t in ("jmp", "succ", "pad", "pun")):
    fail("%d of %d on the fast path: %s\n%s" % (nfast, armed, tactics,
                                                "\n".join(l for l in fast.stderr.splitlines()
                                                          if "stays on" in l)[:3000]))
trap = run(["--no-fast"])
if trap.returncode != plain.returncode:
    fail("--no-fast: exit %d" % trap.returncode)
theirs = counts(trap.stderr)
diff = [(k, ours.get(k), theirs.get(k)) for k in set(ours) | set(theirs)
        if ours.get(k) != theirs.get(k)]
if diff:
    fail("%d counts differ from the trap path's: %s" % (len(diff), diff[:10]))
print("%d libc entries: %d (%.2f%%) on the fast path %s, output as unprobed, %d hits, "
      "every count the trap path's" % (armed, nfast, 100.0 * nfast / armed, tactics,
                                       sum(ours.values())))
