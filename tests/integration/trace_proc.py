#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""trace.dlopen, trace.fork*, trace.exec, trace.signals.*, trace.exit.*, trace.output:
`uprobe trace` on processes that load libraries, fork, exec, get signals and die.

usage: trace_proc.py --uprobe UPROBE --targets DIR MODE
  dlopen      trace_dlopen loads trace_lib.so after starting, calls lib_func K times:
              `p:t/libf SO:lib_func` -> K hits, x = 0..K-1
  fork        trace_fork: tick() in the parent twice, once in a forked child -> hits
              from both pids (matching the pids the program prints)
  nofork      the same with --no-follow: only the parent's two, the child unharmed
  exec        -- sh -c 'trace_fork nofork; trace_fork nofork': a hit in each exec
  sigterm     -p PID of a running trace_loop, SIGTERM to uprobe after the first hit:
  sigint      (SIGINT) uprobe exits 0, TracerPid back to 0, the target finishes with
              its full output and status 0
  exit3       -- sh -c 'exit 3' -> 3
  segv        -- trace_loop segv (dies of SIGSEGV) -> 139, its output intact
  ls          `-o /dev/null -e 'p: libc malloc' -- ls -la /usr/bin` prints exactly
              what ls -la /usr/bin does unprobed (LC_ALL=C, same environment)
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<tid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<ts>\d+\.\d+): "
                  r"(?P<event>\S+): \((?P<addr>0x[0-9a-f]+)(?: <- 0x[0-9a-f]+)?\)(?P<args>.*)$")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def show(cmd):
    print("$", " ".join("'%s'" % c if " " in c or not c else c for c in cmd), flush=True)


def run(cmd, want=0, **kw):
    show(cmd)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=15, **kw)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    print("[exit %d]" % r.returncode)
    if want is not None and r.returncode != want:
        fail("exit status %d, expected %d" % (r.returncode, want))
    return r


def split(out):
    trace, rest = [], []
    for l in out.splitlines():
        m = LINE.match(l)
        (trace if m else rest).append(m.groupdict() if m else l)
    return trace, rest


def mode_dlopen(a):
    so = os.path.join(a.targets, "trace_lib.so")
    k = 5
    r = run([a.uprobe, "trace", "-e", "p:t/libf %s:lib_func x=%%di:s32" % so,
             "--", os.path.join(a.targets, "trace_dlopen"), so, str(k)])
    trace, rest = split(r.stdout)
    if [t["args"] for t in trace] != [" x=%d" % i for i in range(k)]:
        fail("lib_func hits %s, expected x=0..%d" % ([t["args"] for t in trace], k - 1))
    if rest != ["started"] + ["lib_func(%d) = %d" % (i, 2 * i + 1) for i in range(k)]:
        fail("the program printed %s" % rest)
    print("dlopen: %d hits in the library loaded after start" % k)


def ticks(rest):
    """the program's 'tick WHO PID' lines as [(who, pid)]"""
    return [(int(l.split()[1]), l.split()[2]) for l in rest if l.startswith("tick ")]


def mode_fork(a, follow=True):
    cmd = [a.uprobe, "trace"] + ([] if follow else ["--no-follow"])
    cmd += ["-e", "p %s:tick w=%%di:s32" % os.path.join(a.targets, "trace_fork"),
            "--", os.path.join(a.targets, "trace_fork")]
    r = run(cmd)
    trace, rest = split(r.stdout)
    tk = ticks(rest)
    parent = {p for w, p in tk if w == 0}
    child = {p for w, p in tk if w == 1}
    if len(tk) != 3 or len(parent) != 1 or len(child) != 1 or parent == child:
        fail("the program's ticks: %s" % tk)
    got = sorted((t["args"], t["tid"]) for t in trace)
    want = sorted([(" w=0", p) for w, p in tk if w == 0] +
                  ([(" w=1", p) for w, p in tk if w == 1] if follow else []))
    if got != want:
        fail("hits %s, expected %s" % (got, want))
    print("%s: %d hits, pids %s" % ("fork" if follow else "--no-follow", len(got),
                                     sorted({p for _, p in got})))


def mode_exec(a):
    t = os.path.join(a.targets, "trace_fork")
    r = run([a.uprobe, "trace", "-e", "p %s:tick w=%%di:s32" % t,
             "--", "sh", "-c", '"$0" nofork; "$0" nofork', t])
    trace, rest = split(r.stdout)
    tk = ticks(rest)
    if len(tk) != 2:
        fail("the program's ticks: %s" % tk)
    if sorted(t["tid"] for t in trace) != sorted(p for _, p in tk):
        fail("hits from %s, the two execs were %s" % ([t["tid"] for t in trace], tk))
    print("exec: a hit in each of the two execs (pids %s)" % [p for _, p in tk])


def tracer_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"TracerPid:\s*(\d+)", f.read()).group(1))


def mode_signal(a, sig):
    loop = os.path.join(a.targets, "trace_loop")
    n = 30
    target = subprocess.Popen([loop, str(n), "50"], stdout=subprocess.PIPE, text=True)
    cmd = [a.uprobe, "trace", "-p", str(target.pid), "-e", "p %s:step i=%%di:s64" % loop]
    show(cmd)
    tr = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = tr.stdout.readline()  # the first hit: tracing is on
    print(first, end="")
    if not LINE.match(first):
        target.kill()
        fail("no hit from uprobe: %r %r" % (first, tr.communicate(timeout=10)))
    if tracer_of(target.pid) != tr.pid:
        fail("TracerPid of the target is not uprobe's pid")
    print("sending %s to uprobe (pid %d) only" % (signal.Signals(sig).name, tr.pid))
    os.kill(tr.pid, sig)
    try:
        out, err = tr.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        tr.kill()
        target.kill()
        fail("uprobe did not exit on %s" % signal.Signals(sig).name)
    sys.stdout.write(out)
    sys.stderr.write(err)
    print("uprobe exited %d" % tr.returncode)
    alive = target.poll() is None
    if alive and tracer_of(target.pid) != 0:
        fail("the target is still traced after uprobe exited")
    tout, _ = target.communicate(timeout=15)
    print("target exited %d (%s when uprobe left); its last lines: %s"
          % (target.returncode, "running" if alive else "already done",
             tout.splitlines()[-2:]))
    if tr.returncode != 0:
        fail("uprobe exited %d, expected 0" % tr.returncode)
    want = ["step %d" % i for i in range(n)] + ["sum %d" % sum(i * i for i in range(n))]
    if target.returncode != 0 or tout.splitlines() != want:
        fail("the target's output or status is not what it is untraced")
    hits = [l for l in (first + out).splitlines() if LINE.match(l)]
    if not 1 <= len(hits) <= n:
        fail("%d hits" % len(hits))
    print("%s: uprobe left after %d hits, the target ran on untraced to the end"
          % (signal.Signals(sig).name, len(hits)))


def mode_exit3(a):
    run([a.uprobe, "trace", "-e", "p %s:step" % os.path.join(a.targets, "trace_loop"),
         "--", "sh", "-c", "exit 3"], want=3)


def mode_segv(a):
    loop = os.path.join(a.targets, "trace_loop")
    r = run([a.uprobe, "trace", "-e", "p %s:step i=%%di:s64" % loop, "--", loop, "segv"],
            want=128 + signal.SIGSEGV)
    trace, rest = split(r.stdout)
    if rest != ["about to crash"] or [t["args"] for t in trace] != [" i=1"]:
        fail("output %s, hits %s" % (rest, trace))


def mode_ls(a):
    if not os.path.exists(LIBC):
        print("SKIP: %s is not there" % LIBC)
        sys.exit(77)
    env = dict(os.environ, LC_ALL="C")
    ls = ["ls", "-la", "/usr/bin"]
    plain = subprocess.run(ls, capture_output=True, env=env, timeout=15)
    r = subprocess.run([a.uprobe, "trace", "-o", "/dev/null", "-e",
                        "p:libc/malloc %s:malloc size=%%di:u64" % LIBC, "--"] + ls,
                       capture_output=True, env=env, timeout=15)
    print("$ LC_ALL=C uprobe trace -o /dev/null -e 'p:libc/malloc LIBC:malloc size=%%di:u64'"
          " -- ls -la /usr/bin: exit %d, %d bytes; unprobed: exit %d, %d bytes"
          % (r.returncode, len(r.stdout), plain.returncode, len(plain.stdout)))
    sys.stderr.write(r.stderr.decode(errors="replace"))
    if r.returncode != plain.returncode or r.stdout != plain.stdout:
        fail("the probed ls printed something else")
    if r.stderr != plain.stderr:
        fail("the probed ls wrote something else on stderr")
    # and the probe did fire: count the hits
    c = subprocess.run([a.uprobe, "trace", "-c", "-e", "p:libc/malloc %s:malloc" % LIBC,
                        "--", "sh", "-c", 'ls -la /usr/bin > /dev/null'],
                       capture_output=True, text=True, env=env, timeout=15)
    hits = [l.split()[-1] for l in c.stderr.splitlines() if "libc/malloc" in l]
    print("malloc hits in ls -la /usr/bin: %s" % hits)
    if len(hits) != 1 or int(hits[0]) < 10:
        fail("malloc probe counts %s" % hits)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uprobe", required=True)
    ap.add_argument("--targets", required=True)
    ap.add_argument("mode", choices=["dlopen", "fork", "nofork", "exec", "sigterm", "sigint",
                                     "exit3", "segv", "ls"])
    a = ap.parse_args()
    m = a.mode
    if m == "fork":
        mode_fork(a, True)
    elif m == "nofork":
        mode_fork(a, False)
    elif m in ("sigterm", "sigint"):
        mode_signal(a, signal.SIGTERM if m == "sigterm" else signal.SIGINT)
    else:
        globals()["mode_" + m](a)
    print("PASS")


if __name__ == "__main__":
    main()
