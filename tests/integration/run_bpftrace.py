#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`uprobe run` against bpftrace (tests/run.cmake).

  compare   bpftrace one-liners of every feature, run by bpftrace and by `uprobe run`
            on the same deterministic workload (tests/targets/run_work.c): standard
            outputs byte for byte equal (maps, hist and lhist bars, stats, printf),
            as text and as -f json
  fast      bodies of one aggregation, run in the process: the trap path's maps; the
            entry/return latency pair (gethostlatency.bt's shape, with and without a
            scratch variable, an END that clears @start) as the return's in-process
            $duration; @[comm] and @[tid] in the process against --no-fast and
            bpftrace on threads renamed while they run (tids compared as counts)
  tools     Debian's bpftrace tools, read from the installed package: bashreadline.bt
            on an interactive bash fed commands, gethostlatency.bt on getaddrinfo
            calls, threadsnoop.bt on thread creation, sslsnoop.bt and ssllatency.bt on
            a TLS client and server (tests/targets/run_ssl.c); their lines equal
            bpftrace's but for the clock, the pid and tid, the latencies (and the
            buckets they fall in) and the functions bpftrace names by address
  nonroot   `uprobe run` as the user nobody on its own command: the same maps as root
  errors    bpftrace's caret errors, the kernel's probes refused by name
  tracecomm `uprobe trace -t` keyed by $comm (and a comm filter) on threads renamed
            while they run (prctl, pthread_setname_np): the counts by name
            bpftrace's @[comm] = count() gives, in the process and on the trap path
  misc      -l against bpftrace -l, a '#!/usr/bin/env -S uprobe run' script with $1,
            interval probes with exit(), -o FILE, -p PID

Exit 77 (skip) with the reason when bpftrace is missing or cannot load programs here.
"""
import os
import re
import shutil
import subprocess
import time
import sys
import tempfile

SKIP = 77


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def run(cmd, timeout=60, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, **kw)


def have_bpftrace():
    bt = shutil.which("bpftrace")
    if not bt:
        return None, "bpftrace not installed (Debian package bpftrace)"
    if os.geteuid() != 0:
        return None, "bpftrace needs root"
    r = run([bt, "-e", "BEGIN { exit(); }"])
    if r.returncode != 0 or b"Attaching 1 probe" not in r.stdout:
        return None, "bpftrace cannot load programs here: " + \
            r.stderr.decode(errors="replace").strip().splitlines()[-1:][0:1].__str__()
    return bt, None


def need_bpftrace():
    bt, why = have_bpftrace()
    if not bt:
        skip(why)
    return bt


FAILS = []


def check(cond, what):
    if cond:
        print("ok   " + what)
    else:
        print("FAIL " + what)
        FAILS.append(what)


def finish():
    if FAILS:
        print("%d failed" % len(FAILS))
        sys.exit(1)
    print("all passed")
    sys.exit(0)


def diff(a, b):
    import difflib
    return "".join(difflib.unified_diff(a.decode(errors="replace").splitlines(True),
                                        b.decode(errors="replace").splitlines(True),
                                        "bpftrace", "uprobe run", n=1))


def one_liners(w):
    f = lambda s: s.replace("W", w)
    return [
        # counts by one and by several keys, strings as keys
        f('uprobe:W:work_key { @[arg0] = count(); @n[str(arg1)] = count(); '
          '@b[arg0, str(arg1)] = sum(arg0); }'),
        # hist and lhist, keyed hists, stats, avg, min, max, sum
        f('uprobe:W:work_size { @h = hist(arg0); @l = lhist(arg0, 0, 70000, 5000); '
          '@s = stats(arg0); @a = avg(arg0); @mx = max(arg0); @mn = min(arg0); '
          '@su = sum(arg0); }'),
        f('uprobe:W:work_key { @hk[arg0] = hist(arg0 * 100); @lk[str(arg1)] = '
          'lhist(arg0, 0, 10, 2); @sk[arg0] = stats(arg0 * 3); }'),
        # printf events, uretprobe retval, casts, predicates
        f('uretprobe:W:work_ret /(int32)retval < 0/ { printf("%d %d %ld %u %x|%5s|%-4d|\\n", '
          '(int8)retval, retval, retval, retval, retval, "ab", 7); @neg = count(); } '
          'uretprobe:W:work_ret /retval > 20 && retval != 26/ { @pos[retval % 4] = count(); }'),
        f('uprobe:W:work_key /str(arg1) == "key3" || arg0 == 5/ { @[comm, arg0] = count(); '
          '$x = arg0 * 2; @v = $x; }'),
        # if/else, !, scratch variables, arithmetic, delete, ++, +=
        f('uprobe:W:work_size { $b = arg0 > 1000 ? 1 : 0; if (!$b) { @small++; } '
          'else if (arg0 % 2 == 0) { @even += 2; } else { @odd = @odd + 1; } '
          '@last[1] = arg0; delete(@last[1]); }'),
        # BEGIN and END, several probes sharing a body, wildcards, probe (not func:
        # bpftrace 0.17 names it once the process is gone, and prints addresses)
        f('BEGIN { printf("begin\\n"); } uprobe:W:work_key, uprobe:W:work_ret '
          '{ @[probe] = count(); } uprobe:W:work_s* { @w[probe] = count(); } '
          'END { printf("end\\n"); }'),
        # keyed by the thread's name, in the process: threads named by prctl and by
        # pthread_setname_np from another thread
        f('uprobe:W:named_call { @[comm] = count(); }'),
        # zero, clear, print in END, exit
        f('uprobe:W:work_key { @c[arg0] = count(); @d = count(); } '
          'uprobe:W:work_ret /arg0 == 29/ { exit(); } '
          'END { print(@c); clear(@c); zero(@d); print(@d); print(5); print("x"); }'),
        # print(@m, top, div): the biggest entries, values divided (a hist's counts;
        # bpftrace 0.17 divides neither lhist's nor stats', nor takes stats' top)
        f('uprobe:W:work_key { @c[arg0] = count(); @s[arg0] = sum(arg0); @a[arg0] = '
          'avg(arg0); @st[arg0] = stats(arg0); @g = count(); @m[arg0 % 5] = '
          'min((int32)arg0 - 9); @k[str(arg1)] = count(); } END { print(@c, 3); '
          'print(@s, 0, 3); print(@a, 2, 2); print(@st, 2); print(@g, 0, 2); '
          'print(@m, 3, 7); print(@k, 2); print(@c, 50, 0); }'),
        f('uprobe:W:work_size { @h[arg0 % 2] = hist(arg0); @l[arg0 % 3] = '
          'lhist(arg0, 0, 70000, 5000); } END { print(@h, 1, 3); print(@l, 2, 4); }'),
        # ntop, strftime (a fixed time after boot: the boot's wall clock, in minutes),
        # usym of addresses without a symbol (0 as bpftrace prints a null pointer)
        f('uprobe:W:work_key { @n[ntop(arg0 + 0x0100007f)] = count(); @s[ntop(10, arg0)] = '
          'count(); @t[ntop(arg0 % 2 ? 2 : 10, arg0)] = count(); @u[usym(arg0)] = count(); } '
          'BEGIN { printf("%s|%s|%s\\n", strftime("%Y-%m-%d %H:%M", 1500), '
          'strftime("%H:%M", 86400000000000), strftime("", 5)); $t = strftime("%Y", 0); '
          'printf("%s\\n", $t); }'),
        # the builtins whose values differ run to run, as facts about them; u: and ur:;
        # a library by its name (libc: the linker's, then the mapping's); time()
        f('uprobe:W:work_key { @[pid == tid, cpu >= 0, nsecs > elapsed, uid, gid] = count(); '
          '@a[arg2 == arg2, arg5 >= 0] = count(); } u:W:work_ret { @r = count(); } '
          'ur:W:work_ret { @rr = sum(retval); } uprobe:libc:nanosleep /comm == "run_work"/ '
          '{ @sl = count(); } BEGIN { time("%Y\\n"); }'),
    ]


def fast_liners(w):
    f = lambda s: s.replace("W", w)
    return f('uprobe:W:work_size { @h = hist(arg0); } uprobe:W:work_size '
             '{ @l = lhist(arg0, 0, 70000, 5000); } uprobe:W:work_size '
             '{ @l2 = lhist(arg0, 3, 70000, 5000); } uprobe:W:work_key { @[arg0] = count(); } '
             'uprobe:W:work_key { @s[arg0] = sum(arg0); } uretprobe:W:work_ret '
             '{ @r = hist(retval); } uprobe:W:work_size { @st = stats(arg0); } '
             'uprobe:W:work_size { @mx = max(arg0); } uprobe:W:work_size { @mn = min(arg0); } '
             'uprobe:W:work_key { @c = count(); } uprobe:W:work_key { @a[arg0] = avg(arg0); } '
             'uprobe:W:work_key { @k2[arg0, arg0 % 2] = count(); } '
             'uprobe:W:work_key { @m7[arg0 & 7] = count(); } '
             'uprobe:W:neg_call { @neg = hist(arg0); }')


def cmd_fast(uprobe, work):
    """Bodies of one aggregation run in the process (hist triggers): the same maps as
    the trap path's (--no-fast) and as bpftrace's."""
    prog = fast_liners(work)
    a = run([uprobe, "run", "-v", "-e", prog, "-c", work])
    b = run([uprobe, "run", "--no-fast", "-e", prog, "-c", work])
    inproc = a.stderr.count(b": in the process (")
    check(inproc == 13, "13 of the 14 probes in the process (-v says so): %d" % inproc)
    if inproc != 13:
        print(a.stderr.decode(errors="replace"))
    check(a.returncode == 0 and a.stdout == b.stdout, "in the process: the trap path's maps")
    if a.stdout != b.stdout:
        print(diff(b.stdout, a.stdout))
    bt, why = have_bpftrace()
    if bt:
        c = run([bt, "-e", prog, "-c", work])
        check(c.stdout == a.stdout, "in the process: bpftrace's maps")
        if c.stdout != a.stdout:
            print(diff(c.stdout, a.stdout))
    else:
        print("note: " + why)
    # @[comm] and @[tid] in the process: named_call's threads, named by prctl and by
    # pthread_setname_np from another thread (the renames the agent must see)
    for prog, by_tid in thread_liners(work):
        a = run([uprobe, "run", "-v", "-e", prog, "-c", work])
        b = run([uprobe, "run", "--no-fast", "-e", prog, "-c", work])
        c = run([bt, "-e", prog, "-c", work]) if bt else None
        check(a.stderr.count(b": in the process (") == 1, "in the process (-v): " + prog)
        outs = [("--no-fast", b)] + ([("bpftrace", c)] if c else [])
        for name, r in outs:
            if by_tid:
                # the tids are each run's own: the counts by thread, and how many threads
                ca, cr = tid_counts(a.stdout), tid_counts(r.stdout)
                check(a.returncode == 0 and ca == cr and len(ca) == 5,
                      "%s: the counts by thread as %s's: %s, %s" % (prog, name, ca, cr))
            else:
                check(a.returncode == 0 and a.stdout == r.stdout,
                      "%s: %s's map, names set by prctl and pthread_setname_np" % (prog, name))
                if a.stdout != r.stdout:
                    print(diff(r.stdout, a.stdout))
        if not c:
            print("note: " + why)
    for prog in latency_liners(work):
        # the durations are the clock's: under load a sleep overshoots by milliseconds
        # (up to hundreds, on every path, bpftrace's too), so the hists are compared
        # exactly where a run lets them (3 tries, else a note) and asserted where the
        # clock cannot move them: 6 returns counted, none below its sleep's bucket
        for attempt in range(3):
            a = run([uprobe, "run", "-v", "-e", prog, "-c", work])
            b = run([uprobe, "run", "--no-fast", "-e", prog, "-c", work])
            c = run([bt, "-e", prog, "-c", work]) if bt else b
            same = a.stdout == b.stdout and c.stdout == a.stdout
            if same:
                break
        err = a.stderr.decode(errors="replace")
        check(err.count(": in the process (") == 1 and "$duration.log2floor" in err and
              "the entry of @ns's latency pair" in err,
              "the latency pair in the process (-v): %s" % prog[-60:])
        for name, r in (("in the process", a), ("--no-fast", b), ("bpftrace", c)):
            h = buckets(r.stdout)
            check(r.returncode == 0 and sum(h.values()) == 6 and
                  sum(n for lo, n in h.items() if lo >= 1 << 20) == 6 and
                  sum(n for lo, n in h.items() if lo >= 4 << 20) >= 2,
                  "the latency pair, %s: 6 returns, 4 of 1.1 ms at [1M, ...), 2 of 5 ms "
                  "at [4M, ...): %s" % (name, sorted(h.items())))
        if same:
            check(b"[1M, 2M)" in a.stdout, "the latency pair: the trap path's and "
                  "bpftrace's hist, bucket for bucket")
        else:
            print("note: the hists differ in 3 runs (sleeps moved by the load):")
            print(diff(b.stdout, a.stdout))
            print(diff(c.stdout, a.stdout))
    finish()


def thread_liners(w):
    return [("uprobe:%s:named_call { @[comm] = count(); }" % w, False),
            ("uprobe:%s:named_call { @t[tid] = count(); }" % w, True)]


def tid_counts(out):
    """@t[TID]: N lines: the counts, sorted, and that every tid is a distinct number."""
    rows = re.findall(rb"^@t\[(\d+)\]: (\d+)$", out, re.M)
    if len(set(t for t, _ in rows)) != len(rows):
        return None
    return sorted(int(n) for _, n in rows)


UNITS = {b"": 1, b"K": 1 << 10, b"M": 1 << 20, b"G": 1 << 30, b"T": 1 << 40}


def buckets(out):
    """A printed log2 hist: {bucket's low bound: count}."""
    h = {}
    for lo, unit, n in re.findall(rb"^\[(\d+)([KMGT]?)[,\]][^|\n]*?\s(\d+) \|", out, re.M):
        h[int(lo) * UNITS[unit]] = h.get(int(lo) * UNITS[unit], 0) + int(n)
    return h


def latency_liners(w):
    """The entry/return pair of gethostlatency.bt's shape on work_wait (4 calls of
    1.1 ms, 2 of 5 ms: mid-way in their buckets whichever path measures them)."""
    e = "uprobe:%s:work_wait { @start[tid] = nsecs; } " % w
    return [e + "uretprobe:%s:work_wait /@start[tid]/ { @ns = hist(nsecs - @start[tid]); "
            "delete(@start[tid]); }" % w,
            "uretprobe:%s:work_wait /@start[tid]/ { $d = nsecs - @start[tid]; "
            "@ns = hist($d); delete(@start[tid]); } " % w + e + "END { clear(@start); }"]


def cmd_compare(uprobe, work):
    bt = need_bpftrace()
    for fmt in ("text", "json"):
        for prog in one_liners(work):
            a = run([bt, "-f", fmt, "-e", prog, "-c", work])
            b = run([uprobe, "run", "-f", fmt, "-e", prog, "-c", work])
            ok = a.returncode == 0 and b.returncode == 0 and a.stdout == b.stdout
            check(ok, "same output (-f %s): %s" % (fmt, prog[:80]))
            if not ok:
                print(diff(a.stdout, b.stdout))
                print(b.stderr.decode(errors="replace"))
    finish()


TIME = re.compile(rb"^\d\d:\d\d:\d\d  ")


def mask(out, pid_col=True):
    lines = []
    for line in out.splitlines():
        line = TIME.sub(b"HH:MM:SS  ", line)
        if pid_col:
            line = re.sub(rb"^(HH:MM:SS  )\d+ +", rb"\1PID    ", line)
        lines.append(line)
    return lines


def cmd_tools(uprobe, work, th, gh, ssl=None):
    bt, why = have_bpftrace()
    tools = "/usr/sbin"
    br = os.path.join(tools, "bashreadline.bt")
    if not os.path.exists(br):
        skip("Debian's bpftrace tools not installed (" + br + ")")
    cmds = b"echo one\necho two\nexit\n"
    bash = "/bin/bash --norc --noprofile -i"
    b = run([uprobe, "run", br, "-c", bash], input=cmds)
    ours = mask(b.stdout)
    want = [b"Attaching 2 probes...", b"Tracing bash commands... Hit Ctrl-C to end.",
            b"TIME      PID    COMMAND", b"HH:MM:SS  PID    echo one", b"one",
            b"HH:MM:SS  PID    echo two", b"two", b"HH:MM:SS  PID    exit", b"", b""]
    check(ours == want, "bashreadline.bt, unchanged: the commands bash read")
    if ours != want:
        print(b.stdout.decode(errors="replace"), b.stderr.decode(errors="replace"))
    if bt:
        # bash's own output ("one") goes to the same terminal: where it falls among
        # bpftrace's lines is a race (bpftrace prints after the fact), so only the
        # tools' lines are compared
        a = run([bt, br, "-c", bash], input=cmds)
        tool = lambda ls: [l for l in ls if l not in (b"one", b"two")]
        check(tool(mask(a.stdout)) == tool(ours), "bashreadline.bt: bpftrace's lines, "
              "clock and pid aside")
        if tool(mask(a.stdout)) != tool(ours):
            print(diff(a.stdout, b.stdout))
    # gethostlatency.bt: three getaddrinfo("localhost") calls; bpftrace sees every
    # process's, so its lines are compared for our workload's comm only
    gl = os.path.join(tools, "gethostlatency.bt")
    b = run([uprobe, "run", gl, "-c", gh])
    rows = [l for l in mask(b.stdout, False) if l.startswith(b"HH:MM:SS")]
    shape = re.compile(rb"^HH:MM:SS  \d+ +run_host +\d+ localhost$")
    check(len(rows) == 3 and all(shape.match(r) for r in rows),
          "gethostlatency.bt, unchanged: 3 lookups of localhost, their latency")
    check(b.stdout.startswith(b"Attaching 7 probes...\nTracing getaddr/gethost calls... "
                              b"Hit Ctrl-C to end.\n") and
          b.stdout.endswith(b"\n\n\n\n\n"), "gethostlatency.bt: its header, and its two "
          "maps printed empty at the end as bpftrace prints them")
    if bt:
        a = run([bt, gl, "-c", gh])
        theirs = [re.sub(rb"^(HH:MM:SS  )\d+", rb"\1PID", l)
                  for l in mask(a.stdout, False) if b" run_host " in l]
        check(len(theirs) == 3 and [re.sub(rb" +\d+ localhost$", b"", t) for t in theirs] ==
              [re.sub(rb"^(HH:MM:SS  )\d+", rb"\1PID", re.sub(rb" +\d+ localhost$", b"", r))
               for r in rows], "gethostlatency.bt: bpftrace's lines for the workload")
    # threadsnoop.bt: uprobe:libpthread:pthread_create.  Debian's glibc keeps
    # pthread_create in libc.so.6 (libpthread.so.0 is a stub), so bpftrace attaches
    # BEGIN alone and prints the header; so must we
    ts = os.path.join(tools, "threadsnoop.bt")
    b = run([uprobe, "run", ts, "-c", th])
    want = b"Attaching 1 probe...\nTIME(ms)   PID    COMM             FUNC\n\n\n"
    if bt:
        a = run([bt, ts, "-c", th])
        want = a.stdout
    check(b.stdout == want, "threadsnoop.bt, unchanged: as bpftrace (libpthread has no "
          "pthread_create here)")
    if b.stdout != want:
        print(diff(want, b.stdout), b.stderr.decode(errors="replace"))
    ssl_tools(uprobe, bt, why, tools, ssl)
    finish()


SSL_FUNCS = (b"SSL_read", b"SSL_write", b"SSL_do_handshake")


def sslsnoop_rows(out):
    """sslsnoop.bt's event lines: TIME(us) TID COMM LAT(us) RET FUNC, with the clock,
    the tid and the latency masked; FUNC None where bpftrace printed an address (it
    names a usym once the process is gone, and then gives the address)."""
    rows = []
    for line in out.splitlines()[3:]:
        f = line.split()
        if len(f) != 6 or not f[0].isdigit():
            rows.append(line)
            continue
        rows.append((f[2], f[4], None if f[5].startswith(b"0x") else f[5]))
    return rows


def ssllatency_norm(out):
    """ssllatency.bt's output with what timing decides left out: each map's keys
    masked (bpftrace prints its func keys as addresses), a hist as its total count (its
    buckets are latencies), a stats line as its count; the lines and their order
    otherwise.  Also the keys themselves, for a check that ours are named."""
    lines, keys, cur = [], [], None
    for line in out.splitlines():
        m = re.match(rb"^(@\w+)\[(.*)\]: (.*)$", line)
        if m:
            keys.append(m.group(2))
            st = re.match(rb"count (\d+), average \d+, total \d+$", m.group(3))
            if st:
                lines.append([m.group(1), b"count", int(st.group(1))])
                cur = None
            else:
                cur = [m.group(1), b"hist", 0]
                lines.append(cur)
            continue
        b = re.match(rb"^[\[(].*\s(\d+) \|", line)
        if b and cur:
            cur[2] += int(b.group(1))
            continue
        lines.append(line)
        cur = None
    # a map's entries print in the order of their values (stats: the average, a
    # latency) and equal ones in no fixed order: per map, its counts sorted
    out = []
    for l in lines:
        if isinstance(l, list) and out and isinstance(out[-1], tuple) and \
                out[-1][0] == l[0] and out[-1][1] == l[1]:
            out[-1] = (l[0], l[1], tuple(sorted(out[-1][2] + (l[2],))))
        elif isinstance(l, list):
            out.append((l[0], l[1], (l[2],)))
        else:
            out.append(l)
    return out, keys


def ssl_tools(uprobe, bt, why, tools, ssl):
    if not ssl or not os.path.exists(ssl):
        print("note: sslsnoop.bt, ssllatency.bt not run: no run_ssl (Debian package "
              "libssl-dev)")
        return
    if not shutil.which("openssl"):
        print("note: sslsnoop.bt, ssllatency.bt not run: no openssl command to make "
              "the server's certificate (Debian package openssl)")
        return
    tmp = tempfile.mkdtemp(prefix="uprobe-run-ssl-")
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    r = run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
             "-out", cert, "-days", "2", "-subj", "/CN=localhost"])
    check(r.returncode == 0, "a certificate for run_ssl (openssl req)")
    cmd = "%s %s %s" % (ssl, cert, key)
    sn = os.path.join(tools, "sslsnoop.bt")
    sl = os.path.join(tools, "ssllatency.bt")
    # the calls run_ssl.c makes: 2 + 2 handshake steps (-1, -1, 1, 1), 3 x (write, read)
    # twice, the last read with nothing to read
    want = [(b"run_ssl", b"-1", b"SSL_do_handshake")] * 2 + \
        [(b"run_ssl", b"1", b"SSL_do_handshake")] * 2 + \
        [(b"run_ssl", b"4", f) for f in (b"SSL_write", b"SSL_read")] * 6 + \
        [(b"run_ssl", b"-1", b"SSL_read")]
    b = run([uprobe, "run", sn, "-c", cmd])
    ours = sslsnoop_rows(b.stdout)
    check(b.returncode == 0 and b.stdout.startswith(
        b"Attaching 11 probes...\nTracing SSL/TLS handshake... Hit Ctrl-C to end.\n"
        b"TIME(us)   TID      COMM     LAT(us)   RET FUNC\n") and
        [r for r in ours if isinstance(r, tuple)] == want,
        "sslsnoop.bt, unchanged: run_ssl's 17 calls, their return values and names")
    if [r for r in ours if isinstance(r, tuple)] != want:
        print(b.stdout.decode(errors="replace"), b.stderr.decode(errors="replace"))
    if bt:
        # the oracle, run again where it saw none of the calls (under load its first
        # events are sometimes not there at all: its header, then nothing)
        for _ in range(3):
            a = run([bt, sn, "-c", cmd])
            theirs = sslsnoop_rows(a.stdout)
            if theirs:
                break
            print("note: bpftrace %s saw no call; run again" % sn)
        same = a.stdout.splitlines()[:3] == b.stdout.splitlines()[:3] and \
            len(theirs) == len(ours) and \
            all(t == o or (isinstance(t, tuple) and t[2] is None and t[:2] == o[:2])
                for t, o in zip(theirs, ours))
        check(same, "sslsnoop.bt: bpftrace's lines, clock, tid and latency aside")
        if not same:
            print(diff(a.stdout, b.stdout))
    b = run([uprobe, "run", sl, "-c", cmd])
    ours, keys = ssllatency_norm(b.stdout)
    check(b.returncode == 0 and b.stdout.startswith(b"Attaching 12 probes...\n") and
          set(keys) <= set(SSL_FUNCS) and (b"@stat", b"count", (2, 6, 6)) in ours and
          (b"@statF", b"count", (1, 2)) in ours,
          "ssllatency.bt, unchanged: its maps by function, 6 reads and writes, a failed read")
    if bt:
        for _ in range(3):   # see sslsnoop's
            a = run([bt, sl, "-c", cmd])
            theirs, _ = ssllatency_norm(a.stdout)
            if any(isinstance(x, tuple) for x in theirs):  # a map printed
                break
            print("note: bpftrace %s saw no call; run again" % sl)
        check(theirs == ours, "ssllatency.bt: bpftrace's maps, their counts and lines, "
              "the latencies' buckets and the keys' addresses aside")
        if theirs != ours:
            print(diff(a.stdout, b.stdout))
            print(theirs, ours)
    else:
        print("note: " + why)
    shutil.rmtree(tmp, ignore_errors=True)


def cmd_nonroot(uprobe, work, host=None):
    if os.geteuid() != 0:
        user_run = [uprobe, "run"]
        tmp = None
    else:
        if not shutil.which("setpriv"):
            skip("setpriv not found (Debian package util-linux)")
        # the binaries where nobody can read them
        tmp = tempfile.mkdtemp(prefix="uprobe-run-")
        os.chmod(tmp, 0o755)
        for f in (uprobe, work) + ((host,) if host else ()):
            shutil.copy(f, tmp)
        uprobe = os.path.join(tmp, os.path.basename(uprobe))
        work = os.path.join(tmp, os.path.basename(work))
        host = os.path.join(tmp, os.path.basename(host)) if host else None
        user_run = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
                    uprobe, "run"]
    try:
        scope = open("/proc/sys/kernel/yama/ptrace_scope").read().strip()
    except OSError:
        scope = "0"
    if scope == "3":
        skip("kernel.yama.ptrace_scope is 3: no process may be traced")
    prog = ('uprobe:%s:work_key { @[arg0] = count(); } uretprobe:%s:work_ret '
            '{ @r = hist(retval); } END { printf("uid %%d\\n", uid); }' % (work, work))
    b = run(user_run + ["-e", prog, "-c", work], cwd="/")
    whoami = run(["setpriv", "--reuid", "nobody", "id", "-u"]).stdout.strip() \
        if os.geteuid() == 0 else str(os.getuid()).encode()
    ok = b.returncode == 0 and b.stdout.startswith(b"Attaching 3 probes...\nuid ") and \
        b"@[6]: 21\n" in b.stdout and b"@[0]: 3\n" in b.stdout and b"@r: \n" in b.stdout
    check(ok, "uprobe run as uid %s on its own command: counts and a hist" %
          whoami.decode())
    if not ok:
        print(b.stdout.decode(errors="replace"), b.stderr.decode(errors="replace"))
    # Debian's gethostlatency.bt (libc by its name) and renamed threads' comm, as nobody
    gl = "/usr/sbin/gethostlatency.bt"
    if host and os.path.exists(gl):
        b = run(user_run + [gl, "-c", host], cwd="/")
        rows = [l for l in b.stdout.splitlines() if re.match(rb"^\d\d:\d\d:\d\d  \d+ +run_host "
                                                             rb"+\d+ localhost$", l)]
        check(b.returncode == 0 and len(rows) == 3, "gethostlatency.bt as uid %s: 3 lookups"
              % whoami.decode())
    b = run(user_run + ["-e", "uprobe:%s:named_call { @[comm] = count(); }" % work, "-c", work],
            cwd="/")
    check(b.returncode == 0 and b.stdout.endswith(
        b"@[run_work]: 2\n@[worker0]: 5\n@[renamed]: 7\n@[worker1]: 10\n@[other]: 11\n"
        b"@[worker2]: 15\n"), "@[comm] as uid %s: renames seen (the watch of libc's prctl)"
        % whoami.decode())
    if os.geteuid() == 0 and shutil.which("bpftrace"):
        a = run(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
                 "bpftrace", "-e", prog, "-c", work], cwd="/")
        print("note: bpftrace as nobody: exit %d (%s)" % (
            a.returncode, a.stderr.decode(errors="replace").strip().splitlines()[-1:]))
        check(a.returncode != 0, "bpftrace cannot run as nobody (what uprobe run is for)")
    # -p PID: a process of the same user, started apart (not uprobe run's child), that
    # execs the workload once traced
    as_user = user_run[:-2] if os.geteuid() == 0 else []
    p = subprocess.Popen(as_user + ["sh", "-c", "read x; exec %s" % work],
                         stdin=subprocess.PIPE, cwd="/")
    try:
        q = subprocess.Popen(user_run + ["-p", str(p.pid), "-e",
                                         "uprobe:%s:work_key { @[arg0] = count(); }" % work],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/")
        import time
        for _ in range(100):
            try:
                st = open("/proc/%d/status" % p.pid, "rb").read()
            except OSError:
                break
            if b"TracerPid:\t0" not in st:
                break
            time.sleep(0.05)
        time.sleep(0.2)
        p.stdin.write(b"\n")
        p.stdin.close()
        p.wait(timeout=30)
        o, e = q.communicate(timeout=30)
        check(q.returncode == 0 and o.endswith(b"@[5]: 18\n@[6]: 21\n"),
              "uprobe run -p PID as uid %s on its own process: the counts" % whoami.decode())
        if not o.endswith(b"@[6]: 21\n"):
            print(o, e)
    finally:
        if p.poll() is None:
            p.kill()
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    finish()


def cmd_errors(uprobe, work):
    bt, why = have_bpftrace()
    cases = [
        'uprobe:%s:work_key { @x = 1 + ; }' % work,
        'uprobe:%s:work_key { @x = foo(1); }' % work,
        'uprobe:%s:work_key { @x = count(); if (@x == 1) { } }' % work,
    ]
    for prog in cases:
        b = run([uprobe, "run", "-e", prog, "-c", work])
        check(b.returncode == 1 and b.stdout == b"" and b.stderr.startswith(b"stdin:1:") and
              b": ERROR: " in b.stderr and b.stderr.rstrip().endswith(b"~"),
              "refused in the caret form: " + prog)
        if bt:
            a = run([bt, "-e", prog, "-c", work])
            theirs = [l for l in a.stderr.splitlines() if b"RLIMIT" not in l]
            ours = b.stderr.splitlines()
            # the same message and line; bpftrace's columns are its parser's
            same = len(theirs) == 3 and len(ours) == 3 and theirs[1] == ours[1] and \
                theirs[0].split(b"ERROR: ")[1] == ours[0].split(b"ERROR: ")[1]
            check(same, "the same error as bpftrace's: " + prog)
            if not same:
                print(a.stderr.decode(errors="replace"), b.stderr.decode(errors="replace"))
    # a call's errors: the same text, place and span as bpftrace's, byte for byte
    for prog in ['uprobe:%s:work_size { @h = hist(arg0, 2); }' % work,
                 'uprobe:%s:work_size { @x = count(1); }' % work,
                 'uprobe:%s:work_size { @x = lhist(arg0, 1, 2); }' % work,
                 'uprobe:%s:work_size { $x = count(); }' % work,
                 'uprobe:%s:work_key { @[arg0] = count(); } END { $t = 2; print(@, $t); }' % work]:
        b = run([uprobe, "run", "-e", prog, "-c", work])
        check(b.returncode == 1 and b.stdout == b"" and b": ERROR: " in b.stderr,
              "refused: " + prog[-50:])
        if bt:
            a = run([bt, "-e", prog, "-c", work])
            theirs = [l for l in a.stderr.splitlines() if b"RLIMIT" not in l]
            check(theirs == b.stderr.splitlines(), "bpftrace's error, its span too: " +
                  prog[-50:])
            if theirs != b.stderr.splitlines():
                print(a.stderr.decode(errors="replace"), b.stderr.decode(errors="replace"))
    for prog, word in [("kprobe:do_nanosleep { @ = count(); }", b"kprobe probes are the kernel's"),
                       ("tracepoint:syscalls:sys_enter_read { }", b"tracepoint probes are the kernel's"),
                       ("uprobe:%s:work_key { @ = kstack; }" % work, b"kstack"),
                       ("uprobe:%s:work_key { @ = join(arg0); }" % work, b"join()"),
                       ("uprobe:%s:work_key { while (1) { } }" % work, b"'while'")]:
        b = run([uprobe, "run", "-e", prog, "-c", work])
        check(b.returncode == 1 and word in b.stderr, "refused by name: " + prog)
    # $N read as a number, given a string: bpftrace's error; str($N) takes it
    for prog, args in (('BEGIN { printf("%d\\n", $1 + 1); exit(); }', ["abc"]),
                       ('BEGIN { printf("%d %s\\n", $2, str($1)); exit(); }', ["abc", "5 "])):
        b = run([uprobe, "run", "-e", prog] + args)
        check(b.returncode == 1 and b"used numerically but given" in b.stderr and
              b"Try using str($" in b.stderr, "$N used numerically: refused: %s %s" %
              (prog, args))
        if bt:
            a = run([bt, "-e", prog] + args)
            theirs = [l for l in a.stderr.splitlines() if b"RLIMIT" not in l]
            check(theirs == b.stderr.splitlines(), "$N used numerically: bpftrace's error")
            if theirs != b.stderr.splitlines():
                print(a.stderr.decode(errors="replace"), b.stderr.decode(errors="replace"))
    b = run([uprobe, "run", "-e", 'BEGIN { printf("%d|%s|\\n", $1, str($2)); exit(); }',
             "0x1f", "text"])
    check(b.stdout.startswith(b"Attaching 1 probe...\n31|text|\n"), "$1 a number, str($2)")
    b = run([uprobe, "run", "-e", "uprobe:%s:work_key { }" % work])
    check(b.returncode == 2 and b"-p PID or -c" in b.stderr, "uprobes without a process: "
          "refused with the reason")
    finish()


def cmd_misc(uprobe, work, usdt=None):
    bt, why = have_bpftrace()
    # -l
    b = run([uprobe, "run", "-l", "uprobe:%s:work_*" % work])
    want = "".join("uprobe:%s:%s\n" % (work, f)
                   for f in ("work_key", "work_ret", "work_size", "work_wait"))
    check(b.stdout.decode() == want, "-l uprobe:WORK:work_*")
    if bt:
        a = run([bt, "-l", "uprobe:%s:*" % work])
        c = run([uprobe, "run", "-l", "uprobe:%s:*" % work])
        check(a.stdout == c.stdout, "-l uprobe:WORK:* as bpftrace -l")
    # a script run as a command, with $1
    tmp = tempfile.mkdtemp(prefix="uprobe-run-")
    script = os.path.join(tmp, "count.bt")
    with open(script, "w") as f:
        f.write("#!/usr/bin/env -S uprobe run\n// counts one key\n"
                "uprobe:%s:work_key /arg0 == $1/ { @[arg0] = count(); }\n" % work)
    os.chmod(script, 0o755)
    env = dict(os.environ, PATH=os.path.dirname(uprobe) + ":" + os.environ.get("PATH", ""))
    b = run([script, "4", "-c", work], env=env)
    check(b.stdout == b"Attaching 1 probe...\n\n\n@[4]: 15\n", "#!/usr/bin/env -S uprobe "
          "run script with $1")
    if b.stdout != b"Attaching 1 probe...\n\n\n@[4]: 15\n":
        print(b.stdout, b.stderr)
    # -o FILE: bpftrace writes all but the "\n\n" before the maps there (that goes to
    # its standard output)
    out = os.path.join(tmp, "out.txt")
    for fmt in ("text", "json"):
        prog = "uprobe:%s:work_ret { @ = count(); } END { printf(\"end\\n\"); }" % work
        b = run([uprobe, "run", "-f", fmt, "-o", out, "-e", prog, "-c", work])
        ours = open(out, "rb").read()
        if fmt == "text":
            check(b.stdout == b"\n\n" and ours == b"Attaching 2 probes...\nend\n@: 30\n",
                  "-o FILE: the program's output there, the maps' blank lines on stdout")
        if bt:
            a = run([bt, "-f", fmt, "-o", out, "-e", prog, "-c", work])
            theirs = open(out, "rb").read()
            check(a.stdout == b.stdout and theirs == ours, "-f %s -o FILE: as bpftrace's "
                  "(the file and the standard output)" % fmt)
            if theirs != ours:
                print(diff(theirs, ours))
    # a map holds BPFTRACE_MAP_KEYS_MAX keys: a process cannot grow the tracer unbounded
    b = run([uprobe, "run", "--no-fast", "-e", "uprobe:%s:work_size { @[arg0] = count(); }" % work,
             "-c", work], env=dict(os.environ, BPFTRACE_MAP_KEYS_MAX="5"))
    check(b.stdout.count(b"\n@[") + b.stdout.startswith(b"@[") == 5 and
          b"995 updates of new keys dropped: the map holds 5 keys" in b.stderr,
          "BPFTRACE_MAP_KEYS_MAX=5: 5 keys kept, the rest said dropped")
    # intervals, exit(), no process
    prog = 'interval:ms:50 { @n++; if (@n == 3) { exit(); } } END { printf("end\\n"); }'
    b = run([uprobe, "run", "-e", prog])
    want = b"Attaching 2 probes...\nend\n\n\n@n: 3\n"
    if bt:
        want = run([bt, "-e", prog]).stdout
    check(b.stdout == want, "interval:ms:50 with exit() and END, as bpftrace")
    # -c with no user-space probe: the command runs (untraced) and the program ends
    # with it, BEGIN and END around it, as bpftrace's
    prog = 'BEGIN { printf("begin\\n"); } interval:ms:100 { @n++; } END { printf("end\\n"); '\
        'clear(@n); }'
    b = run([uprobe, "run", "-e", prog, "-c", "/bin/sleep 0.5"], timeout=30)
    want = b"Attaching 3 probes...\nbegin\nend\n\n\n\n"
    if bt:
        want = run([bt, "-e", prog, "-c", "/bin/sleep 0.5"], timeout=30).stdout
    check(b.returncode == 0 and b.stdout == want, "-c CMD with BEGIN, END and an interval "
          "only: ends with the command, as bpftrace")
    if b.stdout != want:
        print(diff(want, b.stdout))
    b = run([uprobe, "run", "-e", prog, "-c", "/nonexistent/cmd"], timeout=30)
    check(b.returncode == 1 and b.stdout == b"" and b"cannot run /nonexistent/cmd" in b.stderr,
          "-c with a command that does not exist: refused before anything runs")
    if bt:
        a = run([bt, "-e", prog, "-c", "/nonexistent/cmd"], timeout=30)
        check(a.returncode != 0 and a.stdout == b"", "bpftrace refuses it too")
    # -p PID: a process that waits to be traced
    p = subprocess.Popen(["sh", "-c", "read x; exec %s" % work], stdin=subprocess.PIPE)
    try:
        q = subprocess.Popen([uprobe, "run", "-p", str(p.pid), "-e",
                              "uprobe:%s:work_key { @[arg0] = count(); }" % work],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # the shell execs the workload once uprobe run has attached
        import time
        for _ in range(100):
            if os.path.exists("/proc/%d/status" % p.pid) and \
               b"TracerPid:\t0" not in open("/proc/%d/status" % p.pid, "rb").read():
                break
            time.sleep(0.05)
        time.sleep(0.2)
        p.stdin.write(b"\n")
        p.stdin.close()
        p.wait(timeout=30)
        o, e = q.communicate(timeout=30)
        check(o.endswith(b"@[0]: 3\n@[1]: 6\n@[2]: 9\n@[3]: 12\n@[4]: 15\n@[5]: 18\n@[6]: 21\n"),
              "-p PID, through its exec")
        if not o.endswith(b"@[6]: 21\n"):
            print(o, e)
    finally:
        if p.poll() is None:
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)
    # usdt: the project's USDT target (tests/targets/usdt_prog.c), its operands as
    # arg0..argN (bpftrace 0.17 cannot read test:plain's memory operand; we can)
    if usdt and os.path.exists(usdt):
        prog = ('usdt:%s:test:tick { @[arg0] = count(); @l[str(arg2)] = count(); '
                '@n = sum(arg3); @m = sum((int16)arg3); } U:%s:plain { @p = lhist(arg0, 100, '
                '110, 1); }' % (usdt, usdt))
        b = run([uprobe, "run", "-e", prog, "-c", usdt + " 5"])
        want = (b"@[1]: 1\n@[2]: 1\n@[3]: 1\n@[4]: 1\n@[5]: 1\n@l[alpha]: 1\n@l[beta]: 2\n"
                b"@l[gamma]: 2\n@m: -15\n@n: 18446744073709551601\n@p: \n"
                b"[101, 102)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
                b"[102, 103)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
                b"[103, 104)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
                b"[104, 105)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
                b"[105, 106)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\n")
        ok = b.stdout.startswith(b"Attaching 2 probes...\n") and b.stdout.endswith(b"\n\n\n" + want)
        check(ok, "usdt:BIN:PROVIDER:NAME and U:BIN:NAME, their operands")
        if not ok:
            print(b.stdout.decode(errors="replace"), b.stderr.decode(errors="replace"))
    finish()


def comm_counts_bt(out):
    return {k.decode(): int(n) for k, n in re.findall(rb"^@\[(.*)\]: (\d+)$", out, re.M)}


def comm_counts_hist(out):
    return {k.decode(): int(n) for k, n in
            re.findall(rb"^\{ cm: (\S+) +\} hitcount: +(\d+)$", out, re.M)}


def cmd_tracecomm(uprobe, work):
    """`uprobe trace` sees renames as `uprobe run` does (the session's watch of prctl
    and pthread_setname_np): a $comm-keyed trigger and a comm filter, on named_call's
    threads (renamed by prctl, and one by pthread_setname_np from another thread)."""
    # what run_work.c's named_threads does: by comm 2 5 10 15 7 11
    want = {"run_work": 2, "worker0": 5, "worker1": 10, "worker2": 15, "renamed": 7,
            "other": 11}
    bt, why = have_bpftrace()
    if bt:
        a = run([bt, "-e", "uprobe:%s:named_call /comm != \"bpftrace\"/ "
                 "{ @[comm] = count(); }" % work, "-c", work])
        want = comm_counts_bt(a.stdout)
        check(len(want) == 6, "bpftrace: six names: %s" % want)
    else:
        print("note: %s: compared with run_work.c's own counts" % why)
    spec = "p:w/named %s:named_call cm=$comm" % work
    for mode in ([], ["--no-fast"]):
        b = run([uprobe, "trace", "-v"] + mode + ["-e", spec, "-t", "w/named:hist:keys=cm",
                                                 "--", work])
        got = comm_counts_hist(b.stdout)
        err = b.stderr.decode(errors="replace")
        check(b.returncode == 0 and got == want,
              "trace -t keys=cm %s: the counts by name bpftrace gives: %s" %
              (" ".join(mode) or "(in the process)", got))
        if got != want:
            print(err)
        check("comm: renames watched at r:upcomm/prctl" in err and
              "1 of 1 probes armed" in err, "trace -v: renames watched, not counted as the "
              "user's probes")
        # a comm filter: the events of the renamed main thread only
        b = run([uprobe, "trace"] + mode + ["--filter", 'comm == "renamed"', "-e",
                                            "p:w/named %s:named_call k=%%di:s32" % work,
                                            "--", work])
        lines = [l for l in b.stdout.splitlines() if b" named: " in l]
        check(len(lines) == want["renamed"] and all(l.strip().startswith(b"renamed-") and
                                                     l.endswith(b"k=-2") for l in lines),
              "trace --filter 'comm == \"renamed\"' %s: the renamed thread's %d calls: %d" %
              (" ".join(mode), want["renamed"], len(lines)))
    tracecomm_two_libcs(uprobe, work, want)
    finish()


def tracecomm_two_libcs(uprobe, work, want):
    """`trace -p A -p B` where B maps a libc of its own (a copy, by LD_LIBRARY_PATH): the
    renames of both are watched (each libc once), so each name counts twice."""
    libc = [l.split()[-1] for l in open("/proc/self/maps") if "/libc.so" in l][0]
    d = tempfile.mkdtemp(prefix="tracecomm.")
    try:
        shutil.copy(libc, os.path.join(d, os.path.basename(libc)))
        env = dict(os.environ, LD_LIBRARY_PATH=d)
        procs = [subprocess.Popen(["sh", "-c", 'read x; exec "$0"', work], stdin=subprocess.PIPE,
                                  env=e) for e in (None, env)]
        time.sleep(0.3)
        spec = "p:w/named %s:named_call cm=$comm" % work
        tr = subprocess.Popen([uprobe, "trace", "-v", "-e", spec, "-t", "w/named:hist:keys=cm",
                               "-p", str(procs[0].pid), "-p", str(procs[1].pid)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(2)
        for p in procs:
            p.stdin.write(b"go\n")
            p.stdin.close()
        for p in procs:
            p.wait(timeout=60)
        out, err = tr.communicate(timeout=60)
        got = comm_counts_hist(out)
        err = err.decode(errors="replace")
        check(tr.returncode == 0 and got == {k: 2 * v for k, v in want.items()},
              "trace -p A -p B, B with a libc copy: every rename seen in both: %s" % got)
        check("comm: renames watched at r:upcomm/prctl2 %s" % os.path.join(
            d, os.path.basename(libc)) in err, "trace -v: the copy's renames watched too")
        if tr.returncode or got != {k: 2 * v for k, v in want.items()}:
            print(err)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    mode, uprobe, work = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "compare":
        cmd_compare(uprobe, work)
    elif mode == "tools":
        ssl = [a for a in sys.argv[5:] if os.path.basename(a) == "run_ssl"]
        cmd_tools(uprobe, work, sys.argv[4], sys.argv[4], ssl[0] if ssl else None)
    elif mode == "fast":
        cmd_fast(uprobe, work)
    elif mode == "nonroot":
        cmd_nonroot(uprobe, work, sys.argv[4] if len(sys.argv) > 4 else None)
    elif mode == "errors":
        cmd_errors(uprobe, work)
    elif mode == "tracecomm":
        cmd_tracecomm(uprobe, work)
    elif mode == "misc":
        usdt = [a for a in sys.argv[5:] if os.path.basename(a) != "run_ssl"]
        cmd_misc(uprobe, work, usdt[0] if usdt else None)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
