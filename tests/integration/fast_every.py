#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: fast_every.py UPROBE

Every instruction of four real libc functions (malloc, free, qsort_r: ~560
probes) counted while `ls -lR` of 40 folders of /usr/share/doc runs, the fast path on:

  - the program's output is byte for byte the unprobed one, its status the same;
  - the planner's tactics (-v) place jmps of every kind that applies when every
    instruction is probed (jmp, pun: a punned jmp ends in its neighbour's jmp or int3),
    and at least 95% of the probes are on the fast path in the end;
  - every count equals the kernel's uprobe events' count for the same run (tracefs,
    --backend kernel), for each instruction the kernel can probe (it refuses lock- and
    segment-prefixed ones, and says which others).

Then every instruction of 25 of the hottest libc functions of `ls -lR` (~10,000
probes): the output as unprobed, at least 95% on the fast path, every count equal to
the trap path's (--no-fast) for the same run.
"""
import atexit
import glob
import os
import re
import subprocess
import shutil
import sys
import tempfile

UPROBE = sys.argv[1]
# a private copy of libc, which the command loads through LD_LIBRARY_PATH: the kernel's
# uprobes on it then land in no other process (valgrind's, another test's)
LIBDIR = tempfile.mkdtemp(prefix="upt_every.")
LIBC = LIBDIR + "/libc.so.6"
shutil.copy("/lib/x86_64-linux-gnu/libc.so.6", LIBC)
atexit.register(shutil.rmtree, LIBDIR, True)
os.environ["LD_LIBRARY_PATH"] = LIBDIR
FUNCS = ["__libc_malloc", "cfree", "malloc_consolidate", "qsort_r"]
HOT = FUNCS + ["_int_malloc", "_int_free", "__strlen_avx2", "__memmove_avx_unaligned_erms",
               "__strcoll_l", "__memchr_avx2", "__strchr_avx2", "__strcmp_avx2", "getenv",
               "__readdir64", "__fstatat64", "_IO_file_xsputn", "__vfprintf_internal",
               "__printf_fp_l", "__memset_avx2_unaligned_erms", "realloc", "__libc_calloc",
               "__mbrtowc", "__wcwidth", "__strncmp_avx2", "__mempcpy_avx_unaligned_erms"]
# a few thousand calls of each: enough for every kind of site, few enough that the
# instructions left on int3s (each hit a stop of ~20 us) keep the run short
CMD = ["ls", "-lR"] + sorted(glob.glob("/usr/share/doc/[a-c]*"))[:40]
TRACEFS = "/sys/kernel/tracing"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def specs(funcs=FUNCS):
    out, asm = [], {}
    for f in funcs:
        lines = subprocess.run([UPROBE, "decode", "--asm", LIBC, f], capture_output=True,
                               text=True, check=True).stdout.splitlines()
        addrs = [(int(l.split()[0], 16), l.split("\t", 1)[-1]) for l in lines if l.strip()]
        for a, text in addrs:
            s = "p:e/%s_%x %s:%s+0x%x" % (f, a - addrs[0][0], LIBC, f, a - addrs[0][0])
            out.append(s)
            asm[s] = text
    return out, asm


def counts(text):
    d = {}
    for l in text.splitlines():
        m = re.match(r"\s+\S+\s+(e/\S+)\s+(\d+)$", l)
        if m:
            d[m.group(1)] = int(m.group(2))
    return d


def placed(log):
    """Tactics placed (-v), sites taken back to int3, probes on the fast path in the end."""
    tactics = {}
    for t in re.findall(r"on the fast path \((\w+):", log):
        tactics[t] = tactics.get(t, 0) + 1
    left = log.count("leaves the fast path")
    return tactics, sum(tactics.values()) - left, left


def hot_phase(path):
    """Every instruction of HOT: as unprobed, >= 95% fast, counts = the trap path's."""
    hot, _ = specs([f for f in HOT if subprocess.run(
        [UPROBE, "decode", LIBC, f], capture_output=True).returncode == 0])
    with open(path, "w") as f:
        f.write("\n".join(hot) + "\n")
    p = run_as_unprobed(path, "hot: ")
    tactics, fast, left = placed(p.stderr)
    ours = counts(p.stderr)
    t = run(["--no-fast"], path)
    trap = counts(t.stderr)
    diff = [(e, ours.get(e), n) for e, n in trap.items() if ours.get(e) != n]
    if t.returncode != plain.returncode or len(trap) != len(hot) or len(ours) != len(hot) or diff:
        fail("hot: %d counts, %d on the trap path, for %d probes; differing: %s" % (
            len(ours), len(trap), len(hot), diff[:10]))
    print("hot: %d probes over %d functions, output as unprobed, placed %s, %d fast in the end "
          "(%.1f%%), every count the trap path's (%d hits)" % (
              len(hot), len(HOT), tactics, fast, 100.0 * fast / len(hot), sum(ours.values())))
    if fast < 0.95 * len(hot):
        fail("hot: fewer than 95% on the fast path")


def run_as_unprobed(spec_file, what):
    """The probes in spec_file on the fast path (-v): the program's output and status
    must be the unprobed ones."""
    p = run(["-v"], spec_file)
    if p.returncode != plain.returncode or p.stdout != plain.stdout:
        fail("%sthe program's output or status changed (%d, unprobed %d)\n%s" % (
            what, p.returncode, plain.returncode, p.stderr[-2000:]))
    return p


def run(extra, spec_file):
    p = subprocess.run([UPROBE, "trace", "-c"] + extra + ["-f", spec_file, "--"] + CMD,
                       capture_output=True, text=True, timeout=500)
    return p


def kernel_run(kspecs, path):
    """--backend kernel over kspecs; a probe the kernel refuses (it takes no lock- or
    segment-prefixed instruction, and a few more) is left out and the run made again."""
    for _ in range(8):
        with open(path, "w") as f:
            f.write("\n".join(kspecs) + "\n")
        k = run(["--backend", "kernel"], path)
        m = re.search(r"cannot enable (e/\S+): ", k.stderr)
        if not m:
            return k, kspecs
        kspecs = [s for s in kspecs if not s.startswith("p:%s " % m.group(1))]
    fail("the kernel refused too many: " + k.stderr[-500:])


def kernel_takes(spec, asm):
    """The kernel's uprobes refuse instructions with a lock or segment prefix."""
    return not re.search(r"\b(lock|cs|ds|es|ss)\b", asm.get(spec, ""))


plain = subprocess.run(CMD, capture_output=True, text=True)
all_specs, asm = specs()
path = "/tmp/upt_every.%d" % os.getpid()
try:
    with open(path, "w") as f:
        f.write("\n".join(all_specs) + "\n")
    p = run_as_unprobed(path, "")
    ours = counts(p.stderr)
    if len(ours) != len(all_specs):
        fail("%d counts for %d probes" % (len(ours), len(all_specs)))
    tactics, fast, left = placed(p.stderr)
    for t in ("jmp", "pun"):
        if not tactics.get(t):
            fail("no site placed by %s: %s" % (t, tactics))
    print("%d probes: output as unprobed; placed %s, %d taken back to int3, %d fast in the "
          "end (%.1f%%)" % (len(all_specs), tactics, left, fast, 100.0 * fast / len(all_specs)))
    if fast < 0.95 * len(all_specs):
        fail("fewer than 95%% on the fast path:\n" + "\n".join(
            l for l in p.stderr.splitlines() if "trap path" in l)[:3000])

    hot_phase(path)

    if not os.path.isdir(TRACEFS + "/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True)
    if not os.path.exists(TRACEFS + "/uprobe_events"):
        print("SKIP kernel oracle: no tracefs with uprobe_events here")
        sys.exit(0)
    k, kspecs = kernel_run([s for s in all_specs if kernel_takes(s, asm)], path)
    if k.returncode != plain.returncode:
        fail("the kernel backend's run: %d\n%s" % (k.returncode, k.stderr[-2000:]))
    theirs = counts(k.stderr)
    diff = [(e, ours.get(e), n) for e, n in theirs.items() if ours.get(e) != n]
    if len(theirs) != len(kspecs) or diff:
        fail("%d kernel counts for %d probes; differing: %s" % (len(theirs), len(kspecs),
                                                                diff[:10]))
    print("kernel: %d of the probes (the rest it refuses), every count equal, %d hits in all"
          % (len(kspecs), sum(theirs.values())))
finally:
    if os.path.exists(path):
        os.unlink(path)
