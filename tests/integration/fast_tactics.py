#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: fast_tactics.py UPROBE TACTICS

The fast path's tactics on the code shapes of tests/targets/tactics.c, hit by 2 threads
and by a timer's signal handler (which interrupts them anywhere, inside a punned
window too):

  placed   each site gets the tactic its shape calls for (-v): a 3-byte function its
           padding (pad), a push or a 2-byte instruction at a loop head and an
           instruction before a jump-table case a punned jmp (pun), a 2-byte indirect
           call too, a 5-byte call and a 7-byte lea a plain jmp, two instructions
           nothing branches into succ
  counts   every count is the number of times the program ran that instruction (known
           from its rounds, the handler's included), and the output is the unprobed one
  removal  a tracer attached to a running copy (its threads at full speed, no timer)
           places its sites (most on the fast path) and, stopped (SIGINT), leaves every byte
           of every site as the file has it; the program ends as unprobed
"""
import os
import re
import signal
import subprocess
import sys
import time

UPROBE, PROG = sys.argv[1], os.path.abspath(sys.argv[2])
N, THREADS = 3000, 2
SITES = {  # symbol: the tactic it should get
    "tiny3": "pad",
    "loop_push_site": "pun",
    "loop_xor_site": "pun",
    "table_mov_site": "pun",
    "call_ind_site": "pun",
    "call_rel_site": "jmp",
    "succ_pair": "succ",
    "wide_lea": "jmp",
    "hop_site": "hop",
}
target = None


def fail(msg):
    print("FAIL: " + msg)
    if target is not None and target.poll() is None:
        target.kill()
    sys.exit(1)


def loop_push_hits(n):
    """How often loop_push(n) runs its push at the head (tactics.c's loop)."""
    rax, hits, at_head = n, 0, True
    while True:
        if at_head:
            hits += 1
        rax -= 1
        if rax == 0:
            return hits
        at_head = rax % 2 == 0


def per_round(i):
    return {
        "tiny3": 3,  # called, through call *%rax, and by call_rel's call
        "loop_push_site": loop_push_hits(4 + (i & 3)),
        "loop_xor_site": 2 + (i & 1),
        "table_mov_site": 1 if i & 3 == 0 else 0,
        "call_ind_site": 1,
        "call_rel_site": 1,
        "succ_pair": 1,
        "wide_lea": 1,
        "hop_site": 1,
    }


def expected(rounds, threads, handler):
    want = {s: 0 for s in SITES}
    for i in list(range(rounds)) * threads + list(range(handler)):
        for s, n in per_round(i).items():
            want[s] += n
    return want


# a site label is no function: FUNCTION+OFFSET names it
syms = {}
for line in subprocess.run(["nm", PROG], capture_output=True, text=True).stdout.splitlines():
    f = line.split()
    if len(f) == 3 and f[1] in "tT":
        syms[f[2]] = int(f[0], 16)
funcs = ["tiny3", "loop_push", "loop_xor", "table_mov", "call_ind", "call_rel", "succ_pair",
         "wide_lea", "hop_xor"]
specs = []
for s in SITES:
    f = max((fn for fn in funcs if syms[fn] <= syms[s]), key=lambda fn: syms[fn])
    specs += ["-e", "p:t/%s %s:%s+0x%x" % (s, PROG, f, syms[s] - syms[f])]

plain = subprocess.run([PROG, str(N), str(THREADS)], capture_output=True, text=True)

# placed, counts ----------------------------------------------------------------------
p = subprocess.run([UPROBE, "trace", "-c", "-v"] + specs + ["--", PROG, str(N), str(THREADS)],
                   capture_output=True, text=True, timeout=300)
if p.returncode != 0 or p.stdout != plain.stdout:
    fail("exit %d, output %r (unprobed %r)\n%s" % (p.returncode, p.stdout[:200], plain.stdout,
                                                    p.stderr[-2000:]))
addr_of = {m.group(1): m.group(2) for m in
           re.finditer(r"'p:t/(\w+) \S+': armed at 0x([0-9a-f]+)", p.stderr)}
tactic_at = {m.group(1): m.group(2) for m in
             re.finditer(r"0x([0-9a-f]+) on the fast path \((\w+):", p.stderr)}
got = {s: tactic_at.get(addr_of.get(s, "?"), "int3") for s in SITES}
if got != SITES:
    fail("tactics %s, want %s\n%s" % (got, SITES, p.stderr[-3000:]))
m = re.search(r"handler rounds (\d+)", p.stderr)
if not m:
    fail("no handler count in %r" % p.stderr[-500:])
counts = {m2.group(1): int(m2.group(2)) for m2 in
          re.finditer(r"^\s+\S+\s+t/(\w+)\s+(\d+)$", p.stderr, re.M)}  # -c: stderr
want = expected(N, THREADS, int(m.group(1)))
if counts != want:
    fail("counts %s, want %s" % (counts, want))
print("placed: %s; counts exact over %d rounds x %d threads + %s handler rounds" % (
    ", ".join("%s %s" % kv for kv in got.items()), N, THREADS, m.group(1)))

# removal -------------------------------------------------------------------------------
long_n = "40000000"
# quiet: no timer while the tracer attaches (its remote system calls wait for threads
# that a signal every 200 us keeps busy); the threads hit the sites at full speed
target = subprocess.Popen([PROG, long_n, str(THREADS), "quiet"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
time.sleep(0.1)
tracer = subprocess.Popen([UPROBE, "trace", "-c", "-v", "-p", str(target.pid)] + specs,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
deadline = time.time() + 20
armed = 0
while time.time() < deadline and armed < len(SITES):
    with open("/proc/%d/status" % target.pid) as f:
        traced = re.search(r"TracerPid:\s*%d\b" % tracer.pid, f.read())
    time.sleep(0.2)
    if traced:
        armed = len(SITES)  # attached: the probes go in before it lets the threads run
if not armed:
    fail("uprobe never attached")
time.sleep(0.5)
tracer.send_signal(signal.SIGINT)
try:
    err = tracer.communicate(timeout=30)[1]
except subprocess.TimeoutExpired:
    tracer.kill()
    fail("uprobe did not exit after SIGINT")
os.kill(target.pid, signal.SIGSTOP)
# on the fast path as they can be (a site is refused while a thread runs in the
# trampolines placed just before it: it could come back inside its bytes), a punned
# one and a padded one among them at least
kinds = re.findall(r"on the fast path \((pad|pun|jmp|succ|hop):", err)
if "pun" not in kinds or "pad" not in kinds:
    fail("%s on the fast path while attached:\n%s" % (kinds, err[-2000:]))
elf = open(PROG, "rb").read()
checked = 0
with open("/proc/%d/mem" % target.pid, "rb") as mem:
    for s in SITES:
        a = int(addr_of[s], 16)
        mem.seek(a)
        if mem.read(8) != elf[a - 0x400000:a - 0x400000 + 8]:
            fail("%s at 0x%x: not the file's bytes after the tracer left" % (s, a))
        checked += 1
    # and the padding after it, where the hop wrote its jmp
    lo = syms["hop_xor"]
    mem.seek(lo)
    if mem.read(128) != elf[lo - 0x400000:lo - 0x400000 + 128]:
        fail("hop_xor and the padding after it: not the file's bytes after the tracer left")
maps = open("/proc/%d/maps" % target.pid).read()
os.kill(target.pid, signal.SIGCONT)
out = target.communicate(timeout=120)[0]
if target.returncode != 0 or not out.startswith("rounds %s threads %d sum " % (long_n, THREADS)):
    fail("the program ended %d %r" % (target.returncode, out))
print("removal: %d sites back to the file's bytes, the program ran on to its end (%s)"
      % (checked, out.strip()))
