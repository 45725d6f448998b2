#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: unwind_signal.py UPROBE UNWIND_SIG [SIGNALS]

A signal that interrupts one of uprobe's trampolines (its saves, the agent's C code,
the relocated instructions) shows the program's frames (issue 31).  tests/targets/
unwind_sig.c: a second thread tgkills the main thread with SIGUSR1 in a loop while
main -> outer -> middle calls hot() in a loop; the handler calls on_signal().  hot() is
probed on the fast path (a stack key: the agent's walk, the signals land mostly in
the agent's C code; a count key: mostly in the trampoline and the relocated
instructions; an instruction inside hot: a trampoline whose relocated instructions
are hot's), on_signal with a stacktrace hist key walked in the process (fast), by
the tracer (the key's filter has ||, which keeps that probe on the trap path while
hot stays on the fast path: mixed; hot also with a return probe, whose return runs
through the agent's return trampoline), with $ustack in its events (the agent's walk
logged, walked again by the tracer) (--no-fast: see the loop).

Every stack at on_signal must be on_signal <- handler <- (libc's __restore_rt) <- the
interrupted frame <- its callers, with
  - the interrupted frame in hot at an instruction boundary (objdump's), with middle's
    return address after it, or in middle at an instruction boundary of its loop;
  - the callers up to main gdb's bt at a breakpoint in hot (its return addresses);
  - no [unknown], no frame of uprobe's own (the agent, a trampoline).
"""
import collections
import re
import subprocess
import sys

UPROBE, PROG = sys.argv[1], sys.argv[2]
SIGNALS = sys.argv[3] if len(sys.argv) > 3 else "10000"
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def insn_starts(func):
    """The offsets of func's instructions from its start (objdump)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", PROG],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"^([0-9a-f]+) <%s>:\n(.*?)(?:\n\n|\Z)" % func, out, re.M | re.S)
    if not m:
        fail("objdump has no %s" % func)
    base = int(m.group(1), 16)
    return {int(l.split(":")[0], 16) - base
            for l in m.group(2).splitlines() if re.match(r"\s+[0-9a-f]+:", l)}


def gdb_chain():
    """hot's callers by gdb's bt, as 'func+0xoff' up to main."""
    py = ("import gdb\n"
          "f = gdb.newest_frame().older()\n"
          "while f is not None:\n"
          "    s = gdb.execute('info symbol %d' % f.pc(), to_string=True).split()\n"
          "    print('GDBFRAME %s+0x%x' % (s[0], int(s[2]) if s[1] == '+' else 0))\n"
          "    if f.name() == 'main':\n"
          "        break\n"
          "    f = f.older()\n")
    p = subprocess.run(["gdb", "-batch", "-nx", "-ex", "set debuginfod enabled off",
                        "-ex", "handle SIGUSR1 nostop noprint pass",
                        "-ex", "break hot", "-ex", "run", "-ex", "python\n" + py + "end",
                        "--args", PROG, "1", "10"],
                       capture_output=True, text=True, timeout=120, env=ENV)
    chain = [l.split()[1] for l in p.stdout.splitlines() if l.startswith("GDBFRAME ")]
    if not chain or not chain[-1].startswith("main+"):
        fail("gdb's bt at hot:\n" + p.stdout[-2000:] + p.stderr[-2000:])
    return chain


def run(label, events, opts=(), signals=SIGNALS):
    cmd = [UPROBE, "trace", "-v"] + list(opts)
    for e, t in events:
        cmd += ["-e", e] + (["-t", t] if t else [])
    cmd += ["--", PROG, signals]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
    if p.returncode != 0:
        fail("%s: %s exited %d\n%s" % (label, " ".join(cmd), p.returncode, p.stderr[-2000:]))
    if events[-1][1] is None:  # $ustack in each event printed: frames under its line
        st = collections.Counter()
        cur = None
        for ln in p.stdout.splitlines():
            if ln.startswith(" => "):
                if cur is not None:
                    cur.append(ln[4:].strip())
                continue
            if cur:
                st[tuple(cur)] += 1
            cur = [] if " sig: " in ln else None
        if cur:
            st[tuple(cur)] += 1
        return [(list(f), n) for f, n in st.items()], p.stderr
    parts = p.stdout.split("# u/sig\n")
    if len(parts) != 2:
        fail("%s: no table of u/sig:\n%s" % (label, p.stdout[-3000:]))
    ents = re.findall(r"^\{ common_stacktrace:\n((?:         .*\n)+)\} hitcount:\s+(\d+)",
                      parts[1], re.M)
    return [([l.strip() for l in f.splitlines()], int(h)) for f, h in ents], p.stderr


def check(label, stacks, chain, hot_at, mid_at):
    total = sum(n for _, n in stacks)
    where, offs = collections.Counter(), collections.Counter()
    bad = []
    restore = set()
    for frames, n in stacks:
        names = [re.sub(r" \[.*\]$", "", f) for f in frames]
        ok = (len(names) > 4 and names[0] == "on_signal+0x0" and
              names[1].startswith("handler+") and "[libc.so.6]" in frames[2])
        i = 3
        if ok and names[3].startswith("hot+"):
            ok = int(names[3].split("+")[1], 16) in hot_at
            offs[names[3]] += n
            where["hot"] += n
            i = 4
            ok = ok and names[4:4 + len(chain)] == chain
        elif ok and names[3].startswith("middle+"):
            off = int(names[3].split("+")[1], 16)
            ok = off in mid_at and names[4:4 + len(chain) - 1] == chain[1:]
            where["middle"] += n
        else:
            ok = False
        if any("unknown" in f or "uprobe" in f or f.startswith("0x") for f in frames):
            ok = False
        if ok:
            restore.add(frames[2])
        else:
            bad.append((frames, n))
    unknown = sum(n for f, n in stacks if any("[unknown]" in x for x in f))
    print("%s: %d stacks at on_signal (%d distinct), interrupted in hot %d, in middle %d; "
          "%d end [unknown], %d not the expected chain" %
          (label, total, len(stacks), where["hot"], where["middle"], unknown,
           sum(n for _, n in bad)))
    print("  interrupted at: " + ", ".join("%s %d" % kv for kv in sorted(offs.items())))
    for frames, n in bad[:4]:
        print("  %d x %s" % (n, " <- ".join(frames)))
    if len(restore) > 1:
        bad.append((sorted(restore), 0))
        print("  more than one signal frame: %s" % sorted(restore))
    return total, unknown, bad


chain = gdb_chain()
print("gdb's bt at hot: hot <- " + " <- ".join(chain))
hot_at, mid_at = insn_starts("hot"), insn_starts("middle")
sig = "p:u/sig %s:on_signal sig=%%di:s32" % PROG
key = "sig:hist:keys=stacktrace:size=16384"
# a filter the agent cannot take: that probe stays on the trap path (the tracer walks)
tkey = key + " if sig == 10 || sig == 12"
hot_stack = ("p:u/hot %s:hot" % PROG, "hot:hist:keys=stacktrace")
hot_count = ("p:u/hot %s:hot" % PROG, "hot:hist:keys=common_pid")
# an instruction inside hot (its second): a trampoline of its own, hot's own
# instructions relocated
second = sorted(hot_at)[1]
# a return probe: its entry trampoline hijacks hot's return into the agent's return
# trampoline, whose asm and upa_return run after hot has returned (middle's frame)
hot_ret = ("r:u/hotr %s:hot" % PROG, "hotr:hist:keys=common_pid")
hot_mid = ("p:u/hotm %s:hot+%d" % (PROG, second), "hotm:hist:keys=common_pid")

failed = False
for label, events, opts in (
        ("fast, hot with a stack key", [hot_stack, (sig, key)], ()),
        ("fast, hot counted", [hot_count, hot_mid, (sig, key)], ()),
        ("mixed (on_signal on the trap path), hot with a stack key",
         [hot_stack, (sig, tkey)], ()),
        ("mixed, hot counted", [hot_count, hot_mid, (sig, tkey)], ()),
        ("fast, a return probe on hot", [hot_ret, (sig, key)], ()),
        ("mixed, a return probe on hot", [hot_ret, (sig, tkey)], ()),
        ("fast, $ustack in on_signal's events (the agent's reads walked again by the "
         "tracer), hot counted", [hot_count, hot_mid, (sig + " $ustack", None)], ())):
    # (no --no-fast case: with hot on the trap path the signalling thread's tgkills
    # outrun main's progress and a run of even 500 signals did not end in 60 s here;
    # the tracer's walk is the mixed cases', and trace.unwind_gdb compares --no-fast)
    # two stops a hit on the trap path: fewer signals
    stacks, err = run(label, events, opts,
                      str(int(SIGNALS) // 10) if opts or "$ustack" in label else SIGNALS)
    # where each probe went, as -v says: hot's on the fast path but with --no-fast,
    # on_signal's on the trap path only where mixed
    nfast = len(re.findall(r"on the fast path \(", err))
    sig_trap = re.search(r"u/sig .*stays on the trap path", err) is not None
    if opts:
        want = nfast == 0
    else:
        want = nfast >= len(events) - 1 and sig_trap == label.startswith("mixed")
    if not want:
        failed = True
        print("  not where the case wants its probes (%d on the fast path, on_signal's "
              "%s the trap path):\n%s" % (nfast, "on" if sig_trap else "not on", err[-1500:]))
    total, unknown, bad = check(label, stacks, chain, hot_at, mid_at)
    if not total or bad:
        failed = True
if failed:
    fail("stacks at on_signal that are not the program's")
print("PASS")
