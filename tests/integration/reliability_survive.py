#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: reliability_survive.py UPROBE REL_SURVIVE MODE RUNS [SEED] [FAULT_SO]

The tracer killed with SIGKILL at a random moment while 4 threads of
tests/targets/rel_survive hit its probes flat out (issue 29 item 2): the target must
finish with the output and exit status of an unprobed run, RUNS times of RUNS.

MODE:
  nofast   every probe on an int3 (--no-fast): every instruction of sv_mix, entry and
           return probes on sv_leaf, a return probe on the recursive sv_rec (returns in
           flight), sv_sig (hit inside the target's SIGALRM handler)
  fast     the same probes on the fast path where they can be (-c: counting)
  own      nofast, and the target has a SIGTRAP handler of its own and raises SIGTRAP
           and runs int3s of its own, before and after the kill: its count as unprobed
  die      nofast, and the target ends with an int3 of its own at SIGTRAP's default:
           killed by SIGTRAP as unprobed (the net's chaining to SIG_DFL)
  detach   nofast, the tracer stopped with SIGINT instead: the target's SIGTRAP
           disposition is its own again afterwards (its handler's address in
           /proc/PID/status SigCgt unchanged: caught or not as before)
  blocked  not killed at random: the target (one thread, its own SIGTRAP handler)
           hits sv_leaf's probe with SIGTRAP and SIGUSR1 blocked -- each hit a forced
           SIGTRAP that finds SIGTRAP blocked, which resets its disposition to SIG_DFL,
           the safety net's with it --; once the tracer says it saw that, the target
           is told (SIGUSR2), and when it hits the probe unblocked the tracer is killed; then the target raises
           SIGTRAP and runs an int3 of its own: its handler counts both, as unprobed
           (the tracer put the net back at each blocked hit).  A hit with SIGTRAP
           blocked after the tracer's death kills, net or not: the kernel resets the
           disposition before any handler runs (docs/design.md section 9)

  sweep    nofast, but not at random: the tracer (FAULT_SO preloaded, tests/tools/
           fault_inject.c) SIGKILLs itself just before, or just after, its Nth ptrace
           request, for N = SWEEP_FROM (1), then every STEP (SEED here, 1 by default)
           up to RUNS: every point of the attach and the safety net's installation --
           its first remote system calls, run before any code of ours is in the
           process (docs/design.md section 9) -- and whatever comes after it.  The
           target's mode is SWEEP_TARGET (plain; own by hand: a program's own SIGTRAP
           that a tracer's wait reaped during the attach is lost at its death, see
           the design), without its SIGALRM timer unless SWEEP_TIMER=1: on a loaded
           host every thread can be in a SIGALRM stop when the attach's interrupts
           land, no thread can run the net's calls, and int3s go in before the net
           (design section 9, "Left": a death then kills, 4-6 of 76 deaths with two
           sweeps at once); SWEEP_FAST=1 (by hand) keeps the fast path

A run whose kill came before the tracer had attached (nothing to survive) is counted
apart and not in RUNS.  SEED makes the kill times reproducible."""
import os, random, re, signal, subprocess, sys, tempfile, time

uprobe, prog, mode, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if mode == "blocked":
    plain = subprocess.run([prog, "0", "1", "blocked"], capture_output=True, text=True)
    if plain.returncode != 3 or plain.stdout != "own traps: 2\n":
        print("FAIL: the unprobed run: %d %r" % (plain.returncode, plain.stdout))
        sys.exit(1)
    for run in range(runs):
        target = subprocess.Popen([prog, "60", "1", "blocked"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        # SIGINT as it should be, whatever the shell that started us left it at
        errf = tempfile.TemporaryFile(mode="w+")
        tracer = subprocess.Popen([uprobe, "trace", "-c", "-v", "--no-fast", "-p",
                                   str(target.pid), "-e", "p:s/leaf %s:sv_leaf" % prog],
                                  stdout=subprocess.DEVNULL, stderr=errf, text=True,
                                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        # "traced": it has seen its tracer; once the tracer has seen a hit with
        # SIGTRAP blocked (or 30 s), SIGUSR2; "unblocked": its hits go on unblocked
        first = target.stdout.readline()
        for _ in range(3000):
            errf.seek(0)
            if "trapped with SIGTRAP blocked" in errf.read():
                break
            time.sleep(0.01)
        os.kill(target.pid, signal.SIGUSR2)
        first += target.stdout.readline()
        tracer.kill()
        tracer.wait()
        try:
            out, _ = target.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            target.kill()
            print("FAIL: run %d: the target hung" % run)
            sys.exit(1)
        errf.seek(0)
        err = errf.read()
        out = first + out
        if target.returncode != 3 or out != "traced\nunblocked\n" + plain.stdout:
            print("FAIL: run %d: the target ended %d, printed %r (unprobed 3, %r)\n%s"
                  % (run, target.returncode, out, plain.stdout, err[-2000:]))
            sys.exit(1)
        if "trapped with SIGTRAP blocked" not in err:
            print("FAIL: run %d: no reset seen by the tracer\n%s" % (run, err[-2000:]))
            sys.exit(1)
    print("blocked: %d runs: probe hits with SIGTRAP blocked, the tracer killed, the "
          "target's own SIGTRAPs reached its handler" % runs)
    print("PASS")
    sys.exit(0)
rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 and mode != "sweep" else None)
N, THREADS = "100000000", "4"
tmode = {"own": "own", "die": "die"}.get(mode, "plain")
if mode == "sweep":
    tmode = os.environ.get("SWEEP_TARGET", "plain")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def addrs(name):
    out = subprocess.run([uprobe, "decode", prog, name], capture_output=True, text=True,
                         check=True).stdout
    return [int(l.split()[0], 16) for l in out.splitlines() if " reject" not in l]


specs = []
for a in addrs("sv_mix"):
    specs += ["-e", "p:s/m%x 0x%x" % (a, a)]
specs += ["-e", "p:s/leaf %s:sv_leaf" % prog, "-e", "r:s/leafr %s:sv_leaf" % prog,
          "-e", "r:s/rec %s:sv_rec" % prog, "-e", "p:s/sig %s:sv_sig" % prog]
opts = ["-c"] + (["--no-fast"] if mode != "fast" else [])
if mode == "sweep" and os.environ.get("SWEEP_FAST") == "1":
    opts = ["-c"]  # by hand: the fast path's agent, its remote calls in a running process

plain = subprocess.run([prog, N, THREADS, tmode], capture_output=True, text=True)
if plain.returncode not in (3, -signal.SIGTRAP):
    fail("the unprobed run ended with %d" % plain.returncode)


def sigcgt(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"SigCgt:\s*([0-9a-f]+)", f.read()).group(1), 16)


if mode == "sweep":
    # a shorter run (~0.15 s unprobed): a death comes within the tracer's first requests
    SWEEP_N = os.environ.get("SWEEP_N", "30000000")
    tenv = dict(os.environ)
    if os.environ.get("SWEEP_TIMER") != "1":
        tenv["REL_SURVIVE_NOTIMER"] = "1"
    plain = subprocess.run([prog, SWEEP_N, THREADS, tmode], capture_output=True, text=True,
                           env=tenv)
    step = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    so = sys.argv[6]
    first = int(os.environ.get("SWEEP_FROM", "1"))  # by hand: a later part alone
    points = [(how, n) for n in range(first, runs + 1, step) for how in ("kill", "killafter")]
    bad = []
    for how, n in points:
        target = subprocess.Popen([prog, SWEEP_N, THREADS, tmode], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=tenv)
        time.sleep(0.02)
        env = dict(os.environ, LD_PRELOAD=so, UPROBE_FAULT="%s:%d" % (how, n))
        if os.environ.get("SWEEP_TRAIL"):  # by hand: each run's requests, kept if it fails
            env["UPROBE_FAULT_LOG"] = "%s.%s.%d" % (os.environ["SWEEP_TRAIL"], how, n)
        tracer = subprocess.Popen([uprobe, "trace"] + opts + ["-p", str(target.pid)] + specs,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=env)
        try:
            tracer.wait(timeout=20)
        except subprocess.TimeoutExpired:
            tracer.kill()  # it got no further than request n: the end of the sweep
            tracer.wait()
        try:
            out, err = target.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            target.kill()
            out, err = target.communicate()
            fail("%s:%d: the target hung after its tracer's death" % (how, n))
        if target.returncode != plain.returncode or out != plain.stdout:
            print("%s:%d: the target ended with %d (unprobed %d)\n%s%s"
                  % (how, n, target.returncode, plain.returncode, out, err))
            bad.append("%s:%d" % (how, n))
        elif os.environ.get("SWEEP_TRAIL"):
            os.unlink(env["UPROBE_FAULT_LOG"])
    print("sweep: %d of %d deaths intact (the tracer killed before and after each of "
          "its ptrace requests 1..%d, step %d)" % (len(points) - len(bad), len(points),
                                                  runs, step))
    if bad:
        fail("the target did not outlive its tracer at " + " ".join(bad))
    print("PASS")
    sys.exit(0)

survived = early = 0
for run in range(runs):
    target = subprocess.Popen([prog, N, THREADS, tmode], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    time.sleep(0.02)
    cgt0 = sigcgt(target.pid)
    # SIGINT at its default however we were started (a shell's background job has it
    # ignored, and a SIGINT before the tracer's handler would be lost)
    tracer = subprocess.Popen([uprobe, "trace"] + opts + ["-p", str(target.pid)] + specs,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # kill it anywhere from its attaching and arming to its steady state
    time.sleep(rng.uniform(0.0, 0.6))
    if mode == "detach":
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=30)
        try:
            os.kill(target.pid, signal.SIGSTOP)
            cgt1 = sigcgt(target.pid)
            os.kill(target.pid, signal.SIGCONT)
        except (ProcessLookupError, FileNotFoundError):
            cgt1 = cgt0  # done already
        if (cgt0 ^ cgt1) & (1 << (signal.SIGTRAP - 1)):
            target.kill()
            fail("run %d: SIGTRAP caught before the attach %s, after the detach %s"
                 % (run, bool(cgt0 & 16), bool(cgt1 & 16)))
    else:
        tracer.kill()
        tracer.wait()
    try:
        out, err = target.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        target.kill()
        out, err = target.communicate()
        fail("run %d: the target hung after its tracer's death" % run)
    if target.returncode != plain.returncode or out != plain.stdout:
        print("run %d: the target ended with %d (unprobed %d)\n%s%s"
              % (run, target.returncode, plain.returncode, out, err))
    else:
        survived += 1
print("%s: %d of %d runs intact (the tracer killed at random in its first 0.6 s)"
      % (mode, survived, runs))
if survived != runs:
    fail("the target did not outlive its tracer every time")
print("PASS")
