#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: unwind_gdb.py UPROBE UNWIND_PROG [ROUNDS [prog-only]]

Stacks by the unwind tables equal gdb's bt, frame by frame up to main, on
tests/targets/unwind_prog.c (built -O2 -fomit-frame-pointer: large frames, a call
through a pointer, recursion, a tail call, a PLT call into a shared library that calls
back, a realigned stack, a signal handler): `uprobe trace` counts stacks at leaf() with
a stacktrace hist key, on the fast path (the agent walks the tables in the process) and
with --no-fast (the tracer walks them), which must count the same stacks; gdb prints its bt at every hit of a breakpoint at
leaf in a run with the same argument; the two multisets of stacks must be equal; and
again with return probes on c2, c3 and lib_call (the return addresses they hijack are
shown as the callers they hide).
gdb's tail-call frames (made from DWARF call-site information: tail's, jumped
from, and libc's pthread_kill's) are left out: they are on no stack.  Frames compare
as (file, file offset): where gdb names a frame by a symbol uprobe's
names have none (a zero-size __restore_rt), and the other way round, an offset is the
one name both have.

UNWIND_PROG may be built without unwind tables (-fno-asynchronous-unwind-tables
-fno-unwind-tables -g) and stripped, its CFI in a separate debug file's .debug_frame
that its .gnu_debuglink names (tests/unwind.cmake's unwind_dbgframe): then the stacks
must also come out otherwise with the program alone, without its debug file.

Also (not with prog-only) Debian's ls -lR, bash (tests/targets/unwind_bash.sh) and python3.11 -S into libc's
malloc: every hit gdb stops at is a stack uprobe counted (as file offsets: none of the
programs has symbols; 16 frames, a stacktrace key's depth).  bash binds its whole
environment as variables and $BASH as the path it was run by: gdb's inferior gets
neither the gdb script's variables nor a /bin that gdb would resolve to /usr/bin.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

UPROBE, PROG = sys.argv[1], os.path.abspath(sys.argv[2])
# the programs run by gdb and by uprobe see the same small environment: bash and
# python read theirs (gdb's own LINES and COLUMNS are unset below)
DEPTH = 16  # src/trace/hist.h UP_HIST_STACK_DEPTH
ENV = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "LC_ALL": "C"}
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
PROG_ONLY = len(sys.argv) > 4 and sys.argv[4] == "prog-only"

GDB_PY = r'''
import gdb, os, re

def maps():
    pid = gdb.selected_inferior().pid
    out = []
    for ln in open("/proc/%d/maps" % pid):
        f = ln.split()
        if len(f) >= 6 and "x" in f[1] and f[5].startswith("/"):
            a, b = (int(x, 16) for x in f[0].split("-"))
            out.append((a, b, int(f[2], 16), f[5]))
    return out

def where(pc, mp):
    for a, b, off, path in mp:
        if a <= pc < b:
            return "%s+0x%x" % (path, pc - a + off)
    return "0x%x" % pc

class Leaf(gdb.Breakpoint):
    def stop(self):
        mp = maps()
        f, out = gdb.newest_frame(), []
        if "/" + os.environ["UNWIND_GDB_IN"] + "+" not in where(f.pc(), mp):
            return False  # ld.so's own malloc, before libc's is there
        while f is not None:
            if f.name() == "__libc_start_call_main":
                break  # a program without symbols: gdb knows no main to stop at
            # a tail call's frame gdb makes from DWARF call sites is on no stack
            # and an inlined function's frame shares its caller's pc and stack slot
            if f.type() not in (gdb.TAILCALL_FRAME, gdb.INLINE_FRAME):
                out.append(where(f.pc(), mp))
            if f.name() == "main":
                break
            f = f.older()
        print("GDBSTACK " + " ".join(out))
        return False

Leaf(os.environ["UNWIND_GDB_AT"])
'''


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def gdb_stacks(argv, at, infile):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(GDB_PY)
        script = f.name
    try:
        env = dict(ENV, UNWIND_GDB_AT=at, UNWIND_GDB_IN=infile)
        cmd = ["gdb", "-batch", "-nx", "-ex", "set pagination off",
               "-ex", "set debuginfod enabled off",
               "-ex", "handle SIGUSR1 nostop noprint pass",
               "-ex", "set breakpoint pending on",
               # gdb sets them in the inferior's environment: ls would read them
               "-ex", "unset environment LINES", "-ex", "unset environment COLUMNS",
               # nor the script's own two, which bash would bind as variables
               "-ex", "unset environment UNWIND_GDB_AT",
               "-ex", "unset environment UNWIND_GDB_IN",
               # exec'd as uprobe execs it, not by a shell that adds to the environment
               "-ex", "set startup-with-shell off",
               "-x", script, "-ex", "run", "--args"] + argv
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    finally:
        os.unlink(script)
    st = [tuple(l.split()[1:]) for l in p.stdout.splitlines() if l.startswith("GDBSTACK ")]
    if not st:
        fail("gdb saw no hit of %s:\n%s%s" % (at, p.stdout[-2000:], p.stderr[-2000:]))
    return st


_syms = {}


def symbols(path):
    """name -> vaddr of path's function symbols (.symtab and .dynsym)."""
    if path not in _syms:
        d = {}
        note = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
        m = re.search(r"Build ID: ([0-9a-f]{2})([0-9a-f]+)", note)
        debug = m and "/usr/lib/debug/.build-id/%s/%s.debug" % (m.group(1), m.group(2))
        link = re.search(r"\]\s+(\S+)", subprocess.run(
            ["readelf", "-p", ".gnu_debuglink", path],
            capture_output=True).stdout.decode(errors="replace"))
        link = link and os.path.join(os.path.dirname(path), link.group(1))
        for opt, f in (([], path), (["-D"], path), ([], debug), ([], link)):
            if not f or not os.path.exists(f):
                continue  # the debug file's symbols: uprobe names by them too
            out = subprocess.run(["nm"] + opt + [f], capture_output=True, text=True).stdout
            for ln in out.splitlines():
                f = ln.split()
                if len(f) == 3 and f[1] in "tTwWiI":
                    d.setdefault(f[2].split("@")[0], int(f[0], 16))
        _syms[path] = d
    return _syms[path]


_loads = {}


def vaddr_to_off(path, va):
    if path not in _loads:
        out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
        _loads[path] = [(int(f[1], 16), int(f[2], 16), int(f[4], 16))
                        for f in (l.split() for l in out.splitlines())
                        if f and f[0] == "LOAD"]
    for off, vaddr, filesz in _loads[path]:
        if vaddr <= va < vaddr + filesz:
            return va - vaddr + off
    return None


def uprobe_frame(text, paths):
    """'sym+0xN [file]' or '[file]+0xN' -> 'path+0xfileoffset'."""
    m = re.fullmatch(r"\[(.+)\]\+0x([0-9a-f]+)", text)
    if m and m.group(1) in paths:
        return "%s+0x%x" % (paths[m.group(1)], int(m.group(2), 16))
    m = re.fullmatch(r"(\S+)\+0x([0-9a-f]+) \[(.+)\]", text)
    if m and m.group(3) in paths:
        path = paths[m.group(3)]
        va = symbols(path).get(m.group(1))
        if va is not None:
            off = vaddr_to_off(path, va + int(m.group(2), 16))
            if off is not None:
                return "%s+0x%x" % (path, off)
    return text


def uprobe_stacks(argv, event, more=()):
    """The stacks a stacktrace key counts on the fast path (the agent walks them in
    the process) and with --no-fast (the tracer walks them): the same, or a failure."""
    fast = uprobe_stacks_in(argv, event, (), more)
    slow = uprobe_stacks_in(argv, event, ("--no-fast",), more)
    a = collections.Counter({tuple(f): n for f, n in fast})
    b = collections.Counter({tuple(f): n for f, n in slow})
    if a != b:
        fail("%s: the fast path's stacks are not --no-fast's\n fast only: %s\n"
             " --no-fast only: %s" % (event, list((a - b).items())[:3],
                                      list((b - a).items())[:3]))
    print("%s: the fast path and --no-fast count the same %d stacks (%d distinct)" %
          (event, sum(a.values()), len(a)))
    return slow


def uprobe_stacks_in(argv, event, opts, more=()):
    cmd = [UPROBE, "trace"] + list(opts) + [x for e in more for x in ("-e", e)]
    cmd += ["-e", event, "-t",
                                            "%s:hist:keys=stacktrace:size=16384" %
                                            event.split()[0].split("/")[1]]
    cmd += ["--"] + argv
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
    if p.returncode != 0:
        fail("%s exited %d\n%s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    ents = re.findall(r"^\{ common_stacktrace:\n((?:         .*\n)+)\} hitcount:\s+(\d+)",
                      p.stdout, re.M)
    if not ents:
        fail("no stacks:\n" + p.stdout[-2000:])
    return [([l.strip() for l in f.splitlines()], int(h)) for f, h in ents]


def upto_main(frames, main_at):
    """Frames up to main's (inclusive), as gdb's bt stops there."""
    out = []
    for f in frames:
        out.append(f)
        if main_at(f):
            break
    return tuple(out)


def compare(label, ours, theirs):
    """Multisets of stacks: equal, or the differences shown."""
    a, b = collections.Counter(ours), collections.Counter(theirs)
    if a != b:
        only_a = list((a - b).items())[:4]
        only_b = list((b - a).items())[:4]
        fail("%s: stacks differ\n uprobe only: %s\n gdb only: %s" % (label, only_a, only_b))
    frames = sum(len(s) * n for s, n in b.items())
    print("%s: %d stacks (%d distinct), %d frames, equal to gdb's bt" %
          (label, sum(b.values()), len(b), frames))


def paths_of(stacks):
    d = {}
    for s in stacks:
        for f in s:
            p = f.rsplit("+", 1)[0]
            d[os.path.basename(p)] = p
    return d


# unwind_prog ---------------------------------------------------------------------------
g = gdb_stacks([PROG, str(ROUNDS)], "leaf", os.path.basename(PROG))
paths = paths_of(g)
u = uprobe_stacks([PROG, str(ROUNDS)], "p:u/leaf %s:leaf" % PROG)
ours = []
for frames, n in u:
    s = upto_main(frames, lambda f: f.startswith("main+"))
    ours += [tuple(uprobe_frame(f, paths) for f in s)] * n
compare("unwind_prog", ours, g)

# the same under return probes on c2, c3 and lib_call: their callers' return addresses
# are the trampoline's while leaf runs, and the stack shows the callers they hide
u = uprobe_stacks([PROG, str(ROUNDS)], "p:u/leaf %s:leaf" % PROG,
                  more=["r:u/r%d %s:%s" % (i, PROG if f != "lib_call" else
                                           paths["libunwind_lib.so"], f)
                        for i, f in enumerate(("c2", "c3", "lib_call"))])
ours = []
for frames, n in u:
    s = upto_main(frames, lambda f: f.startswith("main+"))
    ours += [tuple(uprobe_frame(f, paths) for f in s)] * n
compare("unwind_prog under return probes", ours, g)
# mixed: the stack key on the trap path (a common_pid key, which the agent cannot
# compute) while the return probes are on the fast path: the tracer's walk sees the
# agent's return stubs and shows the callers they hide, as gdb does
cmd = [UPROBE, "trace"] + [x for e in ["r:u/r%d %s:%s" % (i, PROG if f != "lib_call" else
                                                         paths["libunwind_lib.so"], f)
                                       for i, f in enumerate(("c2", "c3", "lib_call"))]
                           for x in ("-e", e)]
cmd += ["-e", "p:u/leaf %s:leaf" % PROG, "-t", "leaf:hist:keys=stacktrace,common_pid",
        "--", PROG, str(ROUNDS)]
p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
mixed = re.findall(r"^\{ common_stacktrace:\n((?:         .*\n)+), common_pid:\s+\d+\} "
                   r"hitcount:\s+(\d+)", p.stdout, re.M)
if p.returncode != 0 or not mixed:
    fail("mixed: %s exited %d\n%s" % (cmd, p.returncode, p.stdout[-1000:] + p.stderr[-1000:]))
ours = []
for f, n in mixed:
    s = upto_main([l.strip() for l in f.splitlines()], lambda f: f.startswith("main+"))
    ours += [tuple(uprobe_frame(x, paths) for x in s)] * int(n)
compare("unwind_prog, trap-path stacks under fast-path return probes", ours, g)

want = {"c1", "c1b", "big", "via_ptr", "rec", "via_tail", "via_lib", "realign", "handler",
        "lib_call", "twin_a", "twin_b"}
seen = {f.split("+")[0] for frames, _ in u for f in frames}
if not want <= seen:
    fail("frames never seen: %s" % (want - seen))
if any(f == "[unknown]" for frames, _ in u for f in frames):
    fail("an [unknown] frame in a program with tables everywhere")

if symbols(PROG) and not subprocess.run(["nm", PROG], capture_output=True).stdout:
    # its symbols and CFI are in its debug file: the program alone, with nothing beside
    # it (leaf probed at its file offset), has no table for its own code, and its
    # stacks stop at [unknown] (no frame pointers either) -- the debug file made them
    with tempfile.TemporaryDirectory() as d:
        alone = os.path.join(d, os.path.basename(PROG))
        with open(PROG, "rb") as src, open(alone, "wb") as dst:
            dst.write(src.read())
        os.chmod(alone, 0o755)
        off = vaddr_to_off(PROG, symbols(PROG)["leaf"])
        u = uprobe_stacks_in([alone, str(ROUNDS)], "p:u/leaf %s:0x%x" % (alone, off), ())
        if any(frames[-1] != "[unknown]" for frames, _ in u):
            fail("without its debug file a stack did not stop at [unknown]: %s" % u[:3])
        print("without its debug file: %d stacks (%d distinct) each stop at [unknown]" %
              (sum(n for _, n in u), len(u)))

if PROG_ONLY:
    sys.exit(0)

# Debian's ls, bash and python3.11 into malloc ------------------------------------------
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def into_malloc(label, argv):
    g = gdb_stacks(argv, "malloc", "libc.so.6")
    # libselinux's constructors, run by ld.so before the probes are armed (and gdb's
    # bt past ld.so's _dl_start_user is junk): not compared
    g = [s for s in g if not any("/ld-linux" in f for f in s)]
    paths = paths_of(g)
    g = [s[:DEPTH] for s in g]  # a stacktrace key keeps 16 frames, as the kernel's
    u = uprobe_stacks(argv, "p:u/malloc %s:malloc" % LIBC)
    ours = []
    for frames, n in u:
        # a program without symbols: its main is where gdb's bt stops, the frame
        # before libc's __libc_start_call_main
        s = []
        for f in frames:
            if f.startswith("__libc_start_call_main+") or f.startswith("main+"):
                if f.startswith("main+"):
                    s.append(f)
                break
            s.append(f)
        if not any("[ld-linux" in f for f in s):  # as gdb's early ones above
            ours += [tuple(uprobe_frame(f, paths) for f in s)] * n
    # every hit gdb stopped at is a stack uprobe counted, as many times; gdb's python
    # breakpoint has been seen to miss one of ls's 7 opendir mallocs that uprobe counts
    a, b = collections.Counter(ours), collections.Counter(g)
    if b - a or sum((a - b).values()) > max(2, sum(b.values()) // 100):
        compare(label, ours, g)
    if not any(len(x) > 3 for x in b):
        fail("%s: no stack deeper than 3 frames: %s" % (label, g[:3]))
    print("%s: %d of gdb's %d stacks (%d distinct, %d frames) equal ours; "
          "uprobe counted %d hits more" % (label, sum(b.values()), sum(b.values()), len(b),
                                           sum(len(x) * n for x, n in b.items()),
                                           sum((a - b).values())))


for label, argv in (
        # output to a pipe, no colour, no terminal width: the same mallocs in both runs
        ("ls -lR into malloc",
         ["/bin/ls", "-l", "-R", "--color=never", "/usr/share/doc/gdb", "/etc/ssl"]),
        # /usr/bin's: gdb runs the path resolved, and bash's $BASH is it
        ("bash into malloc", ["/usr/bin/bash", "--norc", "--noprofile",
                              os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "..", "targets", "unwind_bash.sh")]),
        ("python3.11 into malloc", ["/usr/bin/python3.11", "-S", "-c", "pass"])):
    if os.path.exists(argv[0]) and os.path.exists(LIBC):
        into_malloc(label, argv)
    else:
        print("SKIP %s: no %s or %s" % (label, argv[0], LIBC))
