#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""trace.seed.*: the seed's sample traced with seed 008's four commands.

usage: trace_seed.py --uprobe UPROBE --sample SAMPLE --golden FILE (launch|pid|badaddr)

  launch   `uprobe trace -e 'up 0 FOO S 100' ... -- SAMPLE` with "ab" on stdin: A lines
           exactly the seed's, D global_str is "Global String", D global_str_p is the
           address of the string literal (found in the file's .rodata), two hits; the
           output, normalized, equals the golden FILE (UPROBE_REGEN=1 rewrites it).
  pid      the seed's own form: a running sample (fed through a fifo), `-p PID` and
           `up PID ...` specs.
  badaddr  `up 0 FOO D 0x10 8`: "Data capture failed. Invalid address".
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

SEED_ARGS = ["0000000000000004", "00000000000000c8", "00000000ff0000ed",
             "ffffffffffffffff", "0000000000000048"]
LINE = re.compile(r"^\s*(?P<comm>\S+)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<ts>\d+\.\d+): : "
                  r"0x(?P<addr>[0-9a-f]+): (?P<type>[SDA]) (?P<rest>.*)$")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(cmd, **kw):
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=15, **kw)


def nm_syms(path):
    out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3:
            syms[f[2]] = int(f[0], 16)
    return syms


def foo_addr(uprobe, sample):
    out = subprocess.run([uprobe, "list", sample, "foo"], capture_output=True, text=True,
                         check=True).stdout.split()
    # "VADDR FILE-OFFSET SIZE NAME"
    if len(out) < 4 or out[3] != "foo":
        fail("uprobe list %s foo printed %r" % (sample, out))
    return int(out[0], 16)


def literal_addr(sample, text):
    """The address of the NUL-terminated text in the sample's .rodata (objdump -h)."""
    out = subprocess.run(["objdump", "-h", sample], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 6 and f[1] == ".rodata":
            size, vma, off = int(f[2], 16), int(f[3], 16), int(f[5], 16)
            data = open(sample, "rb").read()[off:off + size]
            i = data.find(text.encode() + b"\0")
            if i < 0:
                fail("%r is not in %s's .rodata" % (text, sample))
            return vma + i
    fail("no .rodata in objdump -h %s" % sample)


def parse(out):
    lines = []
    for l in out.splitlines():
        m = LINE.match(l)
        if not m:
            fail("not a seed trace line: %r" % l)
        lines.append(m)
    return lines


def dump_bytes(lines, typ):
    """Per hit, the (address, bytes) dumps of one type, from the text lines."""
    res = []
    for m in lines:
        if m["type"] != typ:
            continue
        a, rest = m["rest"].split(": ", 1)
        hexpart = rest[:24].split()
        res.append((int(a, 16), bytes(int(h, 16) for h in hexpart), rest))
    return res


def check(out, uprobe, sample, hits, pid=None):
    syms = nm_syms(sample)
    foo = foo_addr(uprobe, sample)
    if syms.get("foo") != foo:
        fail("uprobe list says foo is at 0x%x, nm says 0x%x" % (foo, syms.get("foo", 0)))
    lines = parse(out)
    pids = {m["pid"] for m in lines}
    if pid is not None and pids != {str(pid)}:
        fail("lines from pids %s, expected only %d" % (pids, pid))
    if any(int(m["addr"], 16) != foo for m in lines):
        fail("a line does not name foo's address 0x%x" % foo)
    # per hit: 13 S lines (100 bytes), 2 D lines (15 bytes), 1 D line (8 bytes), 5 A lines
    per_hit = 13 + 2 + 1 + 5
    if len(lines) != hits * per_hit:
        fail("%d lines, expected %d hits x %d" % (len(lines), hits, per_hit))
    for h in range(hits):
        hit = lines[h * per_hit:(h + 1) * per_hit]
        kinds = "".join(m["type"] for m in hit)
        if kinds != "S" * 13 + "DDD" + "A" * 5:
            fail("hit %d: line types %s" % (h + 1, kinds))
        args = [m["rest"] for m in hit if m["type"] == "A"]
        want = ["ARG %d: %s" % (i + 1, v) for i, v in enumerate(SEED_ARGS)]
        if args != want:
            fail("hit %d: A lines %r, expected the seed's %r" % (h + 1, args, want))
        s = dump_bytes(hit, "S")
        sdata = b"".join(d for _, d, _ in s)
        if len(sdata) != 100 or any(s[i][0] != s[0][0] + 8 * i for i in range(len(s))):
            fail("hit %d: S dump is not 100 contiguous bytes" % (h + 1))
        if b"This string is on the stack in main\0" not in sdata:
            fail("hit %d: main's stack string is not in the S dump" % (h + 1))
        d = dump_bytes(hit, "D")
        gs = syms["global_str"]
        if [a for a, _, _ in d[:2]] != [gs, gs + 8]:
            fail("hit %d: D global_str lines at %s, expected 0x%x" % (h + 1, d[:2], gs))
        if d[0][1] + d[1][1] != b"Global String\0\0":
            fail("hit %d: global_str dumped as %r" % (h + 1, d[0][1] + d[1][1]))
        if "Global S" not in d[0][2] or "tring.." not in d[1][2]:
            fail("hit %d: the ASCII column of global_str is wrong" % (h + 1))
        if d[2][0] != syms["global_str_p"]:
            fail("hit %d: D global_str_p at 0x%x, expected 0x%x" % (h + 1, d[2][0],
                                                                     syms["global_str_p"]))
        ptr = int.from_bytes(d[2][1], "little")
        lit = literal_addr(sample, "Global String pointer")
        if len(d[2][1]) != 8 or ptr != lit:
            fail("hit %d: global_str_p holds 0x%x, the literal is at 0x%x" % (h + 1, ptr, lit))
        print("hit %d: A = seed's values, global_str = \"Global String\", global_str_p = "
              "0x%x = &\"Global String pointer\"" % (h + 1, ptr))
    return lines


def normalize(lines):
    """The variable parts out: comm-pid, cpu, timestamp, stack addresses (as offsets from
    the hit's first S line) and any stack word that points into the stack or a library
    (0x7e.. to 0x7f.., placed by ASLR)."""
    out = []
    base = None
    for m in lines:
        rest = m["rest"]
        if m["type"] == "S":
            a, data = rest.split(": ", 1)
            if base is None:
                base = int(a, 16)
            b = bytes(int(h, 16) for h in data[:24].split())
            if len(b) == 8 and 0x7e0000000000 <= int.from_bytes(b, "little") < 0x800000000000:
                data = " ".join(["XX"] * 8) + "  " + "?" * 8
            rest = "SP+0x%02x: %s" % (int(a, 16) - base, data)
        else:
            base = None
        out.append("%s-PID [CPU] TIMESTAMP: : 0x%s: %s %s" % (m["comm"], m["addr"], m["type"],
                                                              rest))
    return "\n".join(out) + "\n"


def seed_specs(pid, foo, syms):
    return ["up %d 0x%016x S 100" % (pid, foo),
            "up %d 0x%016x D %016x 15" % (pid, foo, syms["global_str"]),
            "up %d 0x%016x D %016x 8" % (pid, foo, syms["global_str_p"]),
            "up %d 0x%016x A 5" % (pid, foo)]


def mode_launch(a):
    syms = nm_syms(a.sample)
    foo = foo_addr(a.uprobe, a.sample)
    cmd = [a.uprobe, "trace"]
    for s in seed_specs(0, foo, syms):
        cmd += ["-e", s]
    r = run(cmd + ["--", a.sample], input="ab")
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        fail("uprobe trace exited %d" % r.returncode)
    lines = check(r.stdout, a.uprobe, a.sample, 2)
    got = normalize(lines)
    if os.environ.get("UPROBE_REGEN") == "1":
        with open(a.golden, "w") as f:
            f.write(got)
        print("regenerated %s (%d lines)" % (a.golden, got.count("\n")))
    elif not os.path.exists(a.golden):
        fail("%s is missing; create it with UPROBE_REGEN=1 ctest -R trace.seed.sample" % a.golden)
    else:
        want = open(a.golden).read()
        if want != got:
            import difflib
            sys.stdout.writelines(difflib.unified_diff(want.splitlines(True),
                                                       got.splitlines(True), a.golden, "now"))
            fail("normalized trace differs from %s; if intended, rerun with UPROBE_REGEN=1"
                 % a.golden)
        print("ok: matches %s (%d lines)" % (a.golden, got.count("\n")))


def mode_pid(a):
    syms = nm_syms(a.sample)
    foo = foo_addr(a.uprobe, a.sample)
    with tempfile.TemporaryDirectory() as tmp:
        fifo = os.path.join(tmp, "in")
        os.mkfifo(fifo)
        target = subprocess.Popen(["sh", "-c", 'exec "$0" < "$1"', a.sample, fifo],
                                  stdout=subprocess.PIPE)
        wfd = os.open(fifo, os.O_WRONLY)  # sh has opened the fifo: it execs the sample
        pid = target.pid
        want = os.path.realpath(a.sample)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                if os.readlink("/proc/%d/exe" % pid) == want:
                    break
            except OSError:
                pass
            time.sleep(0.01)
        else:
            fail("the sample did not start")
        cmd = [a.uprobe, "trace", "-v", "-p", str(pid)]
        for s in seed_specs(pid, foo, syms):
            cmd += ["-e", s]
        print("$", " ".join(cmd), flush=True)
        tr = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 10
        armed = False
        while time.time() < deadline:  # wait until the tracer says the probes are in
            with open("/proc/%d/status" % pid) as f:
                traced = re.search(r"TracerPid:\s*(\d+)", f.read()).group(1) == str(tr.pid)
            if traced and tr.poll() is None:
                armed = True
                break
            if tr.poll() is not None:
                break
            time.sleep(0.05)
        # "armed at" comes on stderr before the tracer runs the process; read it now
        # (-v also says which probes stay on the trap path: skip those lines)
        line = tr.stderr.readline() if armed else ""
        while armed and line and "armed at" not in line:
            line = tr.stderr.readline()
        if not armed or "armed at" not in line:
            os.close(wfd)
            target.kill()
            out, err = tr.communicate(timeout=10)
            fail("tracer did not attach and arm: %r %r %r" % (line, out, err))
        left = 3  # the other three "armed" lines; -v says more (fast path, trap path)
        while left:
            line = tr.stderr.readline()
            if not line:
                break
            left -= "armed at" in line
        os.write(wfd, b"ab")
        os.close(wfd)  # EOF: the sample returns from main
        tout, terr = tr.communicate(timeout=10)
        target.wait(timeout=10)
    sys.stdout.write(tout)
    sys.stderr.write(terr)
    if tr.returncode != 0 or target.returncode != 0:
        fail("uprobe trace exited %d, the sample %d" % (tr.returncode, target.returncode))
    check(tout, a.uprobe, a.sample, 2, pid=pid)


def mode_badaddr(a):
    foo = foo_addr(a.uprobe, a.sample)
    r = run([a.uprobe, "trace", "-e", "up 0 %x D 0x10 8" % foo, "--", a.sample], input="x")
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        fail("uprobe trace exited %d" % r.returncode)
    lines = parse(r.stdout)
    want = "0x10: Data capture failed. Invalid address"
    if len(lines) != 1 or lines[0]["type"] != "D" or lines[0]["rest"] != want:
        fail("expected one line '... D %s'" % want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uprobe", required=True)
    ap.add_argument("--sample", required=True)
    ap.add_argument("--golden")
    ap.add_argument("mode", choices=["launch", "pid", "badaddr"])
    a = ap.parse_args()
    {"launch": mode_launch, "pid": mode_pid, "badaddr": mode_badaddr}[a.mode](a)
    print("PASS")


if __name__ == "__main__":
    main()
