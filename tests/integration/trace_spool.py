#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: trace_spool.py UPROBE FAST_REC BENCH_TARGET

Every event, none lost, in every format (issue 30, items 1 and 2; design.md section 14):

  formats   1,000,000 hits of a hot six-argument function (bench_target args) traced to
            a file at default settings as text, JSON and raw (then uprobe report): one
            line a hit, exactly, each the call it is, in order; the spool spilled to its
            temporary file and says so; with --spool-size 1M (no file) and 2 threads the
            same: every record, in order per thread
  block     --when-full=block (the default) holds a thread: a tracer that cannot write
            (its standard output a pipe nobody reads) stops draining, the program's
            thread fills its ring and waits in the agent's futex (its /proc syscall is
            202); once the pipe is read the thread goes on, and every record is there:
            the calls 0, 1, 2, ... without a gap
  death     a tracer killed (SIGKILL) while the thread waits does not leave it waiting:
            the program goes on (its CPU time grows) within ~1 s, and ends when told
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

UPROBE, FAST_REC, BENCH = sys.argv[1], sys.argv[2], sys.argv[3]
TMP = "/tmp/trace_spool.%d" % os.getpid()
ARGS6 = "p:s/args %s:hot_args a=%%di b=%%si c=%%dx d=%%cx e=%%r8 f=%%r9" % BENCH
SPIN = "p:s/spin %s:rec_args a=%%di b=%%si" % FAST_REC


def fail(msg):
    print("FAIL: " + msg)
    for suffix in ("", ".raw"):
        if os.path.exists(TMP + suffix):
            os.unlink(TMP + suffix)
    sys.exit(1)


def check_calls(what, lines, n, pat):
    """lines: one a call, call i's a= is i"""
    if len(lines) != n:
        fail("%s: %d lines of %d hits" % (what, len(lines), n))
    for i in range(0, n, 1):
        m = pat.search(lines[i])
        if not m or int(m.group(1), 16) != i:
            fail("%s: line %d is not call %d: %r" % (what, i, i, lines[i][:200]))


# formats --------------------------------------------------------------------------------
N = 1000000
TEXT = re.compile(rb" a=(0x[0-9a-f]+) b=0x2 c=0x3 d=0x4 e=0x5 f=0x6$")
JSON = re.compile(rb'"args":\{"a":"(0x[0-9a-f]+)","b":"0x2","c":"0x3","d":"0x4","e":"0x5",'
                  rb'"f":"0x6"\}\}$')
for fmt in ("text", "json", "raw"):
    out = TMP + (".raw" if fmt == "raw" else "")
    t0 = time.monotonic()
    p = subprocess.run([UPROBE, "trace", "--format", fmt, "-o", out, "-e", ARGS6, "--",
                        BENCH, "args", str(N)], capture_output=True, timeout=600)
    secs = time.monotonic() - t0
    err = p.stderr.decode(errors="replace")
    if p.returncode != 0 or "lost" in err:
        fail("%s: exit %d\n%s" % (fmt, p.returncode, err))
    if fmt == "raw":
        r = subprocess.run([UPROBE, "report", out], capture_output=True, timeout=600)
        if r.returncode:
            fail("report: exit %d: %s" % (r.returncode, r.stderr.decode()))
        data = r.stdout
        os.unlink(out)
    else:
        with open(out, "rb") as f:
            data = f.read()
        if not re.search(r"spool: at most [0-9.]+ MiB of records in memory, [1-9][0-9.]* MiB "
                         r"in its temporary file", err):
            fail("%s: 96 MB of records and the spool's file is not said:\n%s" % (fmt, err))
    lines = [l for l in data.split(b"\n") if l and not l.startswith(b"#")]
    check_calls(fmt, lines, N, JSON if fmt == "json" else TEXT)
    print("ok: %s: %d hits, %d lines, each its call, in order (%.1f s)" % (fmt, N, len(lines),
                                                                      secs))

# a spool of 1 MiB, all in memory, and 2 threads: the threads wait, nothing is lost
N2 = 100000
spec = "p:s/two %s:rec_args a=%%di" % FAST_REC
p = subprocess.run([UPROBE, "trace", "--spool-size", "1M", "--ring-size", "64", "-o", TMP,
                    "-e", spec, "--", FAST_REC, "args", str(N2), "2"], capture_output=True,
                   timeout=600)
err = p.stderr.decode(errors="replace")
if p.returncode != 0 or "lost" in err or "temporary file" in err:
    fail("1M spool: exit %d\n%s" % (p.returncode, err))
per = {}
with open(TMP, "rb") as f:
    for l in f:
        if l.startswith(b"#"):
            continue
        m = re.match(rb"\s*\S+?-(\d+)\s.* a=(0x[0-9a-f]+)$", l.rstrip(b"\n"))
        if not m:
            fail("1M spool: line %r" % l)
        per.setdefault(m.group(1), []).append(int(m.group(2), 16))
os.unlink(TMP)
if len(per) != 2 or any(v != list(range(N2)) for v in per.values()):
    fail("1M spool: not every call of each thread in order: %r" %
         {k: (len(v), v[:3]) for k, v in per.items()})
print("ok: --spool-size 1M, a 64 KiB ring, 2 threads: %d records each, in order" % N2)


# block, death -----------------------------------------------------------------------------
def target_of(tracer):
    """the traced program: the tracer's child"""
    for _ in range(500):
        try:
            with open("/proc/%d/task/%d/children" % (tracer, tracer)) as f:
                kids = f.read().split()
            if kids:
                return int(kids[0])
        except OSError:
            pass
        time.sleep(0.01)
    fail("the tracer has no child")


def waiting(pid):
    """a thread of pid is in the futex wait (syscall 202)"""
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/syscall" % (pid, tid)) as f:
                if f.read().split(" ", 1)[0] == "202" and tid != str(pid):
                    return True
    except OSError:
        pass
    return False


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def held(tracer, target, what):
    """until the spinning thread waits in the agent (the tracer writes into a pipe nobody
    reads): within 0.8 s, before it would give up on the tracer (1 s)"""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 5:
        if waiting(target):
            return
        time.sleep(0.005)
    tracer.kill()
    fail("%s: the thread never waited for room" % what)


def spin(extra=()):
    p = subprocess.Popen([UPROBE, "trace", "--ring-size", "64", "--spool-size", "1M"] +
                         list(extra) + ["-e", SPIN, "--", FAST_REC, "spin", "0", "1"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    return p, target_of(p.pid)


# block: held while the tracer cannot write, let go once it can
p, target = spin()
held(p, target, "block")
time.sleep(0.2)
# each wait is 10 ms, then a look at the ring: one sample can fall between two waits
if not any(waiting(target) or time.sleep(0.01) for _ in range(20)):
    p.kill()
    fail("block: the thread did not stay waiting")
chunks = []
reader = threading.Thread(target=lambda: chunks.append(p.stdout.read()))
reader.start()
time.sleep(0.5)
p.stdin.close()
reader.join(120)
err = p.stderr.read().decode(errors="replace")
p.wait(60)
out = chunks[0] if chunks else b""
seq = [int(m.group(1), 16) for m in re.finditer(rb" a=(0x[0-9a-f]+) b=", out)]
if p.returncode != 0 or "lost" in err or not seq or seq != list(range(len(seq))):
    fail("block: exit %d, %d records, a gap at %r\n%s" % (
        p.returncode, len(seq),
        next((i for i, v in enumerate(seq) if v != i), None), err[-2000:]))
if len(seq) < 10000:
    fail("block: the thread did not go on once let go: %d records" % len(seq))
print("ok: block: the thread waited in the agent while the tracer could not write, then "
      "went on: %d calls, every one recorded, in order" % len(seq))

# death: a tracer killed while the thread waits
p, target = spin()
held(p, target, "death")
os.kill(p.pid, signal.SIGKILL)
p.wait(10)
# the pipe the tracer filled is the program's standard output too: read on
threading.Thread(target=p.stdout.read, daemon=True).start()
ticks = cpu_ticks(target)
t0 = time.monotonic()
while time.monotonic() - t0 < 10 and cpu_ticks(target) - ticks < 20:
    time.sleep(0.05)
spent = time.monotonic() - t0
if cpu_ticks(target) - ticks < 20:
    os.kill(target, signal.SIGKILL)
    fail("death: the program does not go on after its tracer died (%.1f s)" % spent)
p.stdin.close()  # the program's standard input: it stops spinning and exits
for _ in range(1000):
    if not os.path.exists("/proc/%d" % target):
        break
    try:
        with open("/proc/%d/stat" % target) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
    except OSError:
        break
    time.sleep(0.01)
else:
    os.kill(target, signal.SIGKILL)
    fail("death: the program did not end when told")
print("ok: death: the tracer killed while the thread waited: the program went on after "
      "%.1f s and ended when told" % spent)


# the kernel's counts ---------------------------------------------------------------------
# The same hot loop through the kernel's uprobe tracer (--backend kernel, its buffer at its
# default size): its lines and the events it says it lost make its count of hits; ours, in
# JSON, is a line for every one, and each line the kernel kept is one of ours.
def kernel_usable():
    if os.geteuid() != 0:
        return "not root"
    if not os.path.isdir("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"],
                       capture_output=True)
    if not os.access("/sys/kernel/tracing/uprobe_events", os.W_OK):
        return "no writable /sys/kernel/tracing/uprobe_events"
    return None


why = kernel_usable()
if why:
    print("skip: the kernel's counts: %s" % why)
    sys.exit(0)
NK = 300000
copy = TMP + ".bt"  # a private copy: the kernel's int3s land in no other test's process
with open(BENCH, "rb") as f, open(copy, "wb") as g:
    g.write(f.read())
os.chmod(copy, 0o755)
spec = "p:upsp%d/args %s:hot_args a=%%di b=%%si c=%%dx d=%%cx e=%%r8 f=%%r9" % (os.getpid(),
                                                                               copy)
got = {}
for b in ("kernel", "ptrace"):
    p = subprocess.run([UPROBE, "trace", "-b", b, "--format", "json", "-o", TMP, "-e", spec,
                        "--", copy, "args", str(NK)], capture_output=True, timeout=600)
    err = p.stderr.decode(errors="replace")
    if p.returncode:
        os.unlink(copy)
        fail("kernel: -b %s exited %d\n%s" % (b, p.returncode, err[-2000:]))
    with open(TMP, "rb") as f:
        vals = [int(m.group(1), 16) for m in re.finditer(rb'"a":"(0x[0-9a-f]+)"', f.read())]
    os.unlink(TMP)
    lost = sum(int(n) for n in re.findall(r"LOST (\d+) EVENTS", err))
    if b == "ptrace" and "lost" in err:
        lost = -1
    got[b] = (vals, lost)
os.unlink(copy)
(kv, kl), (pv, pl) = got["kernel"], got["ptrace"]
if len(kv) + kl != NK or pl or pv != list(range(NK)) or not set(kv) <= set(pv):
    fail("kernel: the kernel kept %d and lost %d of %d; we kept %d (%s)" % (
        len(kv), kl, NK, len(pv), "lost some" if pl else "none lost"))
print("ok: the kernel's counts: %d hits -- the kernel kept %d lines and lost %d, JSON here "
      "has all %d, each line the kernel kept among them" % (NK, len(kv), kl, len(pv)))
