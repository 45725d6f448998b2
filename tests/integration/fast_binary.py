#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: fast_binary.py UPROBE CASE

The fast path on a real Debian program other than libc (CASE: bash, or postgres in
single-user mode), while it does some work:

  1. every function entry the file's symbols name (a wildcard): the output and status
     as unprobed, at least 99% on the fast path, every count the trap path's
     (--no-fast);
  2. every instruction of its hottest functions (by the entry counts of 1): the output
     and status as unprobed, at least 95% on the fast path in the end, every count the
     trap path's.

Prints the figures; skips (exit 0, with the reason) where the program is missing.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

UPROBE, CASE = os.path.abspath(sys.argv[1]), sys.argv[2]
PG = "/usr/lib/postgresql/15/bin"
# instructions probed in phase 2, at most: their trap-path run stays a few seconds
MAX_HOT_INSNS = 3000
MAX_HOT_HITS = 50000


def fail(msg):
    print("FAIL: %s: %s" % (CASE, msg))
    sys.exit(1)


def skip(msg):
    print("SKIP %s: %s" % (CASE, msg))
    sys.exit(0)


def setup():
    """The file probed, the command, its stdin."""
    if CASE == "bash":
        script = ('s=; for i in $(seq 1 300); do x=$((i * 7 % 13)); s="$s$x"; '
                  'case $x in 1*) s=${s%?};; esac; done; '
                  'f() { local a=$1; echo "${a//3/three}" | tr a-z A-Z; }; '
                  'for w in one two three; do f "$w$w" >/dev/null; done; '
                  'printf "%s %d\\n" "${#s}" "$(( ${#s} * 2 ))"; declare -p BASH_VERSINFO')
        return "/usr/bin/bash", ["/usr/bin/bash", "--norc", "-c", script], None
    if CASE == "postgres":
        if not os.access(PG + "/postgres", os.X_OK) or not shutil.which("setpriv"):
            skip("no %s/postgres or setpriv" % PG)
        d = tempfile.mkdtemp(prefix="upt_pg.")
        os.chmod(d, 0o755)
        shutil.chown(d, "nobody")
        drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        r = subprocess.run(drop + [PG + "/initdb", "-D", d + "/template", "-A", "trust", "-U",
                                   "postgres"], capture_output=True, text=True, cwd=d)
        if r.returncode:
            skip("initdb failed: " + r.stderr[-500:])
        sql = ("select count(*), sum(length(md5(i::text))) from generate_series(1, 1000) i;\n"
               "select string_agg(relname, ',' order by relname) from pg_class "
               "where relname like 'pg_ty%';\n")
        # no statistics: their flushes go by the clock, which a trap-path run slows
        return (PG + "/postgres", drop + [PG + "/postgres", "--single", "-D", d + "/data",
                                          "-c", "track_counts=off", "-c",
                                          "track_activities=off", "postgres"], sql)
    skip("unknown case")


BIN, CMD, STDIN = setup()
DATA = next((a for a in CMD if a.endswith("/data")), None)
if DATA:
    import atexit
    atexit.register(shutil.rmtree, os.path.dirname(DATA), True)


def fresh():
    """postgres: each run from the same data directory (a run leaves its statistics to
    the next one's start)."""
    if CASE == "postgres":
        subprocess.run(["rm", "-rf", DATA], check=True)
        subprocess.run(["cp", "-a", os.path.dirname(DATA) + "/template", DATA], check=True)


def run(opts, specs):
    fresh()
    path = "/tmp/upt_bin.%d" % os.getpid()
    with open(path, "w") as f:
        f.write("\n".join(specs) + "\n")
    try:
        return subprocess.run([UPROBE, "trace", "-c"] + opts + ["-f", path, "--"] + CMD,
                              input=STDIN, capture_output=True, text=True, timeout=600,
                              cwd="/tmp")
    finally:
        os.unlink(path)


def counts(text, group):
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^\s+\S+\s+(%s/\S+)\s+(\d+)$" % group, text, re.M)}


def placed(log):
    tactics = {}
    for t in re.findall(r"on the fast path \((\w+):", log):
        tactics[t] = tactics.get(t, 0) + 1
    return tactics, sum(tactics.values()) - log.count("leaves the fast path")


def phase(name, specs, group, want):
    """Runs specs fast and on the trap path; checks; returns (ours, armed, fast, tactics)."""
    p = run(["-v"], specs)
    if p.returncode != plain.returncode or p.stdout != plain.stdout:
        fail("%s: the program's output or status changed: %d (unprobed %d)\n%s" % (
            name, p.returncode, plain.returncode, p.stderr[-3000:]))
    ours = counts(p.stderr, group)  # -c with a command: on stderr
    armed = len(re.findall(r"': armed at", p.stderr))
    tactics, fast = placed(p.stderr)
    if not armed or len(ours) != len(specs if group == "h" else ours) or fast < want * armed:
        fail("%s: %d armed, %d counted, %d on the fast path %s\n%s" % (
            name, armed, len(ours), fast, tactics,
            "\n".join(l for l in p.stderr.splitlines() if "trap path" in l)[:3000]))
    t = run(["--no-fast"], specs)
    theirs = counts(t.stderr, group)
    diff = [(k, ours.get(k), theirs.get(k)) for k in set(ours) | set(theirs)
            if ours.get(k) != theirs.get(k)]
    if t.returncode != plain.returncode or diff:
        fail("%s: --no-fast exit %d; %d counts differ from the trap path's: %s" % (
            name, t.returncode, len(diff), diff[:10]))
    why = {}
    for m in re.finditer(r"stays on the trap path: (.*)|leaves the fast path: (.*)", p.stderr):
        r = re.sub(r"0x[0-9a-f]+", "X", m.group(1) or m.group(2))[:90]
        why[r] = why.get(r, 0) + 1
    for r, n in sorted(why.items(), key=lambda kv: -kv[1])[:4]:
        print("  %s: %d on int3: %s" % (name, n, r))
    return ours, armed, fast, tactics


fresh()
plain = subprocess.run(CMD, input=STDIN, capture_output=True, text=True, cwd="/tmp")
if plain.returncode:
    skip("the program fails unprobed: %s" % plain.stderr[-300:])

# 1. every entry
ents, armed, fast, tactics = phase("entries", ["p:b/* %s:*" % BIN], "b", 0.99)
print("%s: %d entries, %d (%.2f%%) on the fast path %s, output as unprobed, %d hits, every "
      "count the trap path's" % (CASE, armed, fast, 100.0 * fast / armed, tactics,
                                 sum(ents.values())))

# 2. every instruction of the hottest functions
hot, insns = [], 0
for name, n in sorted(ents.items(), key=lambda kv: -kv[1]):
    func = name.split("/", 1)[1]
    d = subprocess.run([UPROBE, "decode", "--asm", BIN, func], capture_output=True, text=True)
    addrs = [int(l.split()[0], 16) for l in d.stdout.splitlines() if l.strip()]
    if d.returncode or not addrs or n * len(addrs) > MAX_HOT_HITS:
        continue
    if insns + len(addrs) > MAX_HOT_INSNS:
        break
    hot += ["p:h/%s_%x %s:%s+0x%x" % (func, a - addrs[0], BIN, func, a - addrs[0])
            for a in addrs]
    insns += len(addrs)
if not hot:
    fail("no hot function to probe")
ours, armed, fast, tactics = phase("every instruction", hot, "h", 0.95)
nfunc = len({s.split()[0].rsplit("_", 1)[0] for s in hot})
print("%s: every instruction of %d hot functions, %d probes: %d (%.2f%%) on the fast path %s, "
      "output as unprobed, %d hits, every count the trap path's" % (
          CASE, nfunc, armed, fast, 100.0 * fast / armed, tactics, sum(ours.values())))
