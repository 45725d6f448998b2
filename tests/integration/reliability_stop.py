#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: reliability_stop.py UPROBE CORE_FAST SIGNAL

The tracer stopped by SIGNAL (INT, TERM, HUP) while 4 threads of tests/targets/core_fast
hit its probes at full speed -- int3 probes and counting probes on the fast path: after uprobe has gone every probed byte in the target's memory equals the file's,
the target is no longer traced, and it finishes with the output and exit status of an
unprobed run."""
import os, re, signal, subprocess, sys, time

uprobe, prog, signame = sys.argv[1], sys.argv[2], sys.argv[3]
sig = getattr(signal, "SIG" + signame)
N = "150000000"


target = None


def fail(msg):
    print("FAIL:", msg)
    if target is not None and target.poll() is None:
        target.kill()  # held stopped, it would keep the test's output open
    sys.exit(1)


def func_addrs(name):
    out = subprocess.run([uprobe, "decode", prog, name], capture_output=True, text=True,
                         check=True).stdout
    return [int(l.split()[0], 16) for l in out.splitlines() if " reject" not in l]


plain = subprocess.run([prog, "count", N, "4"], capture_output=True, text=True)
target = subprocess.Popen([prog, "count", N, "4"], stdout=subprocess.PIPE, text=True)
time.sleep(0.05)
specs = []
# int3 probes on every instruction of fast_flags, fast-path ones elsewhere
for a in func_addrs("fast_flags"):
    specs += ["-e", "p:r/f%x 0x%x" % (a, a)]
for name in ("fast_nop5", "fast_mov", "fast_lea"):
    specs += ["-e", "p:r/%s %s:%s" % (name, prog, name)]
# -c: the short instructions count through int3 stops, the five of 5 bytes or more
# on the fast path (jmps to trampolines): both kinds must be undone
tracer = subprocess.Popen([uprobe, "trace", "-c", "-v", "-p", str(target.pid)] + specs,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
# until it is attached and hits come in
deadline = time.time() + 10
while time.time() < deadline:
    with open("/proc/%d/status" % target.pid) as f:
        if re.search(r"TracerPid:\s*%d\b" % tracer.pid, f.read()):
            break
    time.sleep(0.01)
else:
    fail("uprobe never attached")
time.sleep(0.3)
tracer.send_signal(sig)
try:
    tracer.wait(timeout=20)
except subprocess.TimeoutExpired:
    tracer.kill()
    fail("uprobe did not exit after SIG%s" % signame)
# held still while its memory is read: once untraced it runs at full speed, and under a
# sanitizer (whose exit checks take a while) it could finish before the reads
try:
    os.kill(target.pid, signal.SIGSTOP)
except ProcessLookupError:
    pass
err = tracer.stderr.read()
nfast = err.count("on the fast path")
narmed = err.count("': armed at")
# the three of 5 bytes or more at least; fast_flags's short ones by the planner's
# tactics or on int3s, some on each
if nfast < 3 or nfast >= narmed:
    fail("%d sites on the fast path of %d armed: expected both kinds:\n%s"
         % (nfast, narmed, err))
with open("/proc/%d/status" % target.pid) as f:
    if not re.search(r"TracerPid:\s*0\b", f.read()):
        fail("the target is still traced")
# every probed byte is the file's again
try:
    mem = open("/proc/%d/mem" % target.pid, "rb")
    maps = open("/proc/%d/maps" % target.pid).read().splitlines()
except (ProcessLookupError, FileNotFoundError):
    mem, maps = None, []  # it finished already: its output and status say the rest
exe = os.path.realpath(prog)
elf = open(prog, "rb").read()
checked = 0
for name in ("fast_flags", "fast_nop5", "fast_mov", "fast_lea") if mem else ():
    for a in func_addrs(name)[:1] if name != "fast_flags" else func_addrs(name):
        # the file offset of the vaddr: non-PIE target, its text mapping says how
        for m in maps:
            f = m.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if len(f) >= 6 and os.path.realpath(f[5]) == exe and "x" in f[1]:
                break
        off = a - lo + int(f[2], 16) if a >= lo and a < hi else a - 0x400000
        mem.seek(a)
        try:
            got = mem.read(8)
        except OSError:
            got = b""
        want = elf[off:off + 8]
        if not got and target.poll() is not None:
            continue  # it has already finished (a slow machine): its output says the rest
        if got != want:
            fail("0x%x: %s in memory, %s in the file" % (a, got.hex(), want.hex()))
        checked += 1
try:
    os.kill(target.pid, signal.SIGCONT)
except ProcessLookupError:
    pass
out, _ = target.communicate(timeout=60)
if target.returncode != plain.returncode or out != plain.stdout:
    fail("the target ended with %d %r, unprobed %d %r" % (target.returncode, out,
                                                          plain.returncode, plain.stdout))
print("SIG%s: uprobe exited %d; %d probed sites back to the file's bytes; target output "
      "and status as unprobed" % (signame, tracer.returncode, checked))
print("PASS")
