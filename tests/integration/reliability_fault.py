#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: reliability_fault.py UPROBE CORE_FAST FAULT_SO malloc|ptrace [RUNS]

Fault injection into the tracer (tests/tools/fault_inject.c, LD_PRELOAD): one allocation
fails (malloc), or one ptrace request fails with ESRCH as if the thread had gone (ptrace),
at a different call in each run, while `uprobe trace -c -p PID` has int3 and fast-path
probes on 4 threads of tests/targets/core_fast hitting them flat out.  In every run: the
tracer ends (by itself, or at the SIGINT sent after 0.6 s) within 20 s and is not killed
by a signal of its own; afterwards every probed byte in the target equals the file's, the
target is no longer traced, and it finishes with the output and exit status of an
unprobed run.  The calls failed come from a seed printed at the start (REL_SEED=N)."""
import os, random, re, signal, subprocess, sys, tempfile, time

uprobe, prog, so, kind = sys.argv[1:5]
runs = int(sys.argv[5]) if len(sys.argv) > 5 else 16
N = "40000000"
seed = int(os.environ.get("REL_SEED", int(time.time()) ^ os.getpid()))
print("seed %d (REL_SEED=%d repeats it)" % (seed, seed))
rng = random.Random(seed)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def func_addrs(name):
    out = subprocess.run([uprobe, "decode", prog, name], capture_output=True, text=True,
                         check=True).stdout
    return [int(l.split()[0], 16) for l in out.splitlines() if " reject" not in l]


specs = []
for a in func_addrs("fast_flags"):
    specs += ["-e", "p:r/f%x 0x%x" % (a, a)]
for name in ("fast_nop5", "fast_mov", "fast_lea"):
    specs += ["-e", "p:r/%s %s:%s" % (name, prog, name)]
probed = [a for name in ("fast_flags", "fast_nop5", "fast_mov", "fast_lea")
          for a in (func_addrs(name) if name == "fast_flags" else func_addrs(name)[:1])]
elf = open(prog, "rb").read()
plain = subprocess.run([prog, "count", N, "4"], capture_output=True, text=True)


def traced(pid, tracer_pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return re.search(r"TracerPid:\s*%d\b" % tracer_pid, f.read()) is not None
    except OSError:
        return False


def one_run(fault, report=None):
    """returns (tracer exit code, its stderr, bytes checked)"""
    target = subprocess.Popen([prog, "count", N, "4"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.05)
    env = dict(os.environ, LD_PRELOAD=so)
    if fault:
        env["UPROBE_FAULT"] = fault
    if report:
        env["UPROBE_FAULT_REPORT"] = report
    tracer = subprocess.Popen([uprobe, "trace", "-c", "-p", str(target.pid)] + specs,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=env)
    deadline = time.time() + 0.6
    while time.time() < deadline and tracer.poll() is None:
        time.sleep(0.01)
    if tracer.poll() is None:
        tracer.send_signal(signal.SIGINT)
    try:
        tracer.wait(timeout=20)
    except subprocess.TimeoutExpired:
        tracer.kill()
        target.kill()
        fail("%s: uprobe did not end 20 s after its SIGINT" % fault)
    err = tracer.stderr.read()
    if tracer.returncode < 0 and tracer.returncode != -signal.SIGINT:
        target.kill()
        fail("%s: uprobe killed by signal %d:\n%s" % (fault, -tracer.returncode, err))
    if traced(target.pid, tracer.pid):
        fail("%s: the target is still traced" % fault)
    checked = 0
    try:
        mem = open("/proc/%d/mem" % target.pid, "rb")
        for a in probed:
            mem.seek(a)
            try:
                got = mem.read(8)
            except OSError:
                got = b""
            if not got and target.poll() is not None:
                continue
            want = elf[a - 0x400000:a - 0x400000 + 8]
            if got != want:
                fail("%s: 0x%x: %s in memory, %s in the file" % (fault, a, got.hex(),
                                                                  want.hex()))
            checked += 1
    except OSError:
        pass  # finished already: its output says the rest
    out, _ = target.communicate(timeout=120)
    if target.returncode != plain.returncode or out != plain.stdout:
        fail("%s: the target ended with %d %r, unprobed %d %r\n%s" % (
            fault, target.returncode, out, plain.returncode, plain.stdout, err))
    return tracer.returncode, err, checked


# how many calls a run makes, then failures spread over them (the start-up's densely)
with tempfile.NamedTemporaryFile(prefix="fault", delete=False) as tf:
    rep = tf.name
one_run(None, rep)
counts = open(rep).read().split()
os.unlink(rep)
total = int(counts[1] if kind == "malloc" else counts[3])
print("an undisturbed run: %s calls of %s" % (total, kind))
if total < 2:
    fail("no %s calls counted: is the fault library loaded?" % kind)
picks = sorted(set([1, 2, 3] + [rng.randint(1, min(total, 3000)) for _ in range(runs // 2)] +
                   [rng.randint(1, total) for _ in range(runs - runs // 2 - 3)]))
by_self = 0
for n in picks:
    rc, err, checked = one_run("%s:%d" % (kind, n))
    msg = err.strip().splitlines()[-1] if err.strip() else ""
    by_self += rc not in (0, 130)
    print("%s:%d: uprobe exited %d, %d probed sites checked; %s" % (kind, n, rc, checked,
                                                                   msg[:150]))
print("%d runs, one %s call failed in each; uprobe ended with an error by itself in %d; "
      "no hang, the target unharmed in every run" % (len(picks), kind, by_self))
print("PASS")
