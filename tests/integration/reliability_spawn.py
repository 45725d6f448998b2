#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: reliability_spawn.py UPROBE FAULT_SO REQUESTS [follow STEP]

A tracer killed while it starts its program (uprobe trace -- COMMAND) leaves the program
to run as it would have: the tracer (FAULT_SO preloaded, tests/tools/fault_inject.c)
SIGKILLs itself just before, or just after, its Nth ptrace request, for N = 1 (the seize
of the new child) .. REQUESTS: the child's start, its exec, the arming at the exec.
Each time the program (a shell writing a word to a file, then exiting 7) must run to
its end: the word written, exit status 7, no process of it left stopped.  This test is
the program's parent's parent: it takes the orphaned program as a subreaper.

With `follow`, the shell first runs two children (/bin/true, then env running true),
each exec'd and followed, and ends with status 9 or 8 if one of them did not exit 0:
the tracer is killed at every STEP-th request up to REQUESTS, the children's own
set-ups (the safety net's calls at their exec, their probes) among them.

Before the child waited for its tracer in a read (it waited in a SIGSTOP of its own),
a death then left it stopped for good: 4 of 11 such kills by time.  Past request 25
(the agent's set-up, on the fast path) 30 of 170 deaths killed the program, by SIGILL
(the page toucher's trap reaped, the thread on past its int3) and SIGSEGV (the code of
up_task_syscalls still in the quiesce's text cache at the death): 0 since.
"""
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time

uprobe, so, requests = sys.argv[1], sys.argv[2], int(sys.argv[3])
follow = len(sys.argv) > 5 and sys.argv[4] == "follow"
step = int(sys.argv[5]) if follow else 1
PR_SET_CHILD_SUBREAPER = 36
if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0):
    print("SKIP: cannot be a subreaper (prctl)")
    sys.exit(77)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def reap(pid, timeout):
    """The wait status of pid (a child, or an orphan handed to us), or None."""
    end = time.time() + timeout
    while time.time() < end:
        got, st = os.waitpid(pid, os.WNOHANG)
        if got:
            return st
        time.sleep(0.01)
    return None


def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"


# a probe in the shell's libc: armed at the exec, where the program is stopped for it
libc = next((w for line in subprocess.run(["ldd", "/bin/sh"], capture_output=True,
                                          text=True).stdout.splitlines()
             for w in line.split() if "/libc.so" in w), None)
if not libc:
    print("SKIP: no libc found for /bin/sh (ldd)")
    sys.exit(77)
out = tempfile.mkdtemp(prefix="uprobe-spawn-")
word = os.path.join(out, "word")
seen = 0
script = "echo ok > %s; exit 7" % word
if follow:
    script = "/bin/true || exit 9; env true || exit 8; " + script
for n in range(1, requests + 1, step):
    for how in ("kill", "killafter"):
        if os.path.exists(word):
            os.unlink(word)
        env = dict(os.environ, LD_PRELOAD=so, UPROBE_FAULT="%s:%d" % (how, n))
        tracer = subprocess.Popen(
            [uprobe, "trace", "-o", "/dev/null", "-e", "p:s/malloc %s:malloc" % libc,
             "--", "sh", "-c", script],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        # the program: the tracer's one child, known before the tracer is gone
        prog = None
        end = time.time() + 10
        while prog is None and tracer.poll() is None and time.time() < end:
            try:
                with open("/proc/%d/task/%d/children" % (tracer.pid, tracer.pid)) as f:
                    kids = f.read().split()
                prog = int(kids[0]) if kids else None
            except OSError:
                pass
            if prog is None:
                time.sleep(0.0005)
        try:
            tracer.wait(timeout=20)
        except subprocess.TimeoutExpired:
            tracer.kill()  # it got no further than request n: the sweep's end
            tracer.wait()
        if tracer.returncode != -signal.SIGKILL:
            continue  # the program ran to its end before request n: nothing to survive
        if prog is None:
            continue  # killed before it started the program
        st = reap(prog, 10)
        if st is None:
            s = state(prog)
            os.kill(prog, signal.SIGKILL)
            reap(prog, 5)
            fail("%s:%d: the program is left %s (not ended in 10 s)" % (how, n, s))
        if not os.WIFEXITED(st) or os.WEXITSTATUS(st) != 7:
            fail("%s:%d: the program ended with status 0x%x, not exit 7" % (how, n, st))
        with open(word) as f:
            if f.read() != "ok\n":
                fail("%s:%d: the program's word is not there" % (how, n))
        seen += 1
os.rmdir(out) if not os.path.exists(word) else (os.unlink(word), os.rmdir(out))
if not seen:
    fail("no death came while the program was there: nothing was tested")
print("ok: %d tracer deaths during the start (before and after each %sof its first %d "
      "ptrace requests%s): the program ran to its end each time (its word, exit 7)"
      % (seen, "%dth " % step if step > 1 else "", requests,
         ", its two children followed" if follow else ""))
print("PASS")
