#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: raw_forged.py UPROBE FAST_REC

uprobe report on a raw trace with forged records and blocks in the middle
(src/trace/raw.c): what cannot be read is skipped, every real record before and after
it is printed, line for line as in the untouched file, stderr says how many of each
kind were skipped and where the first was, and the exit status is 1.
  regs    a record too short for its site's registers (the one that used to end the
          report: "a record of 32 bytes too short for its registers", status 2)
  probe   a record of a probe the file never named
  len     a record whose length runs past its slot
  many    five forged records of one kind, in different blocks: one line, a count of 5
  blocks  a block of unknown type and a SITE block of the wrong size between blocks
  rest    a record of impossible size: the rest of its block goes, all else is printed
Text and JSON agree.
"""
import os
import re
import struct
import subprocess
import sys

UPROBE, PROG = sys.argv[1], sys.argv[2]
TMP = "/tmp/raw_forged.%d" % os.getpid()
REC = struct.Struct("<IIIIiiQ")  # struct uprobe_raw_rec
BLK = struct.Struct("<II")       # struct up_raw_block
RECORDS, SITE = 4, 2


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def pad8(b):
    return b + b"\0" * (-len(b) % 8)


def blocks(data):
    """[(type, payload)] of a raw file (after its 8-byte magic)."""
    out, at = [], 8
    while at < len(data):
        t, n = BLK.unpack_from(data, at)
        out.append((t, data[at + 8:at + 8 + n]))
        at += 8 + n + (-n % 8)
    return out


def join(bl):
    return b"UPRAWv1\n" + b"".join(BLK.pack(t, len(p)) + pad8(p) for t, p in bl)


def records(payload):
    """The records of a RECORDS block, as byte strings."""
    out, at = [], 0
    while at < len(payload):
        size = struct.unpack_from("<I", payload, at)[0]
        out.append(payload[at:at + size])
        at += size
    return out


def report(path, fmt="text"):
    p = subprocess.run([UPROBE, "report", "--format", fmt, path], capture_output=True,
                       timeout=120)
    return p.returncode, p.stdout.decode().splitlines(), p.stderr.decode()


raw = TMP + ".raw"
p = subprocess.run([UPROBE, "trace", "--format", "raw", "-o", raw, "--ring-size", "64",
                    "-e", "p:r/args %s:rec_args a=%%di b=%%si:s64 f=%%r9:u32" % PROG,
                    "-e", "r:r/ret %s:rec_args rv=$retval:s64" % PROG,
                    "--", PROG, "args", "200", "2"], capture_output=True, timeout=120)
if p.returncode:
    fail("the raw trace failed: %s" % p.stderr.decode())
data = open(raw, "rb").read()
rc, want, err = report(raw)
_, want_json, _ = report(raw, "json")
if rc or len(want) != 800:
    fail("the untouched file: status %d, %d lines (800 expected): %s" % (rc, len(want), err))
bl = blocks(data)
rec_blocks = [i for i, (t, p) in enumerate(bl) if t == RECORDS and len(records(p)) >= 4]
if len(rec_blocks) < 2:
    fail("the trace has %d RECORDS blocks of 4 records or more (2 wanted)" % len(rec_blocks))
sample = REC.unpack_from(records(bl[rec_blocks[0]][1])[0])
probe, pid, tid, t_ns = sample[1], sample[4], sample[5], sample[6]


def forged(kind):
    if kind == "regs":  # a header and nothing else: no room for rip and the arguments
        return REC.pack(32, probe, 32, 0, pid, tid, t_ns)
    if kind == "probe":
        return REC.pack(40, 99999, 40, 0, pid, tid, t_ns) + b"\0" * 8
    if kind == "len":
        return REC.pack(40, probe, 4000, 0, pid, tid, t_ns) + b"\0" * 8
    raise ValueError(kind)


def insert(bl, i, rec):
    """bl with rec inserted in the middle of RECORDS block i: (blocks, real before)."""
    global before
    recs = records(bl[i][1])
    mid = len(recs) // 2
    nb = list(bl)
    nb[i] = (RECORDS, b"".join(recs[:mid]) + rec + b"".join(recs[mid:]))
    before = sum(len(records(p)) for t, p in bl[:i] if t == RECORDS) + mid
    return nb


def check(name, nb, want_lines, skips):
    path = TMP + "." + name
    with open(path, "wb") as f:
        f.write(join(nb))
    rc, got, err = report(path)
    _, got_json, _ = report(path, "json")
    os.unlink(path)
    if rc != 1:
        fail("%s: status %d (1 expected): %s" % (name, rc, err))
    if got != want_lines:
        first = next((i for i, (a, b) in enumerate(zip(got, want_lines)) if a != b),
                     min(len(got), len(want_lines)))
        fail("%s: %d lines, %d expected; first difference at line %d:\n %r\n %r\n%s" %
             (name, len(got), len(want_lines), first, got[first:first + 1],
              want_lines[first:first + 1], err))
    if len(got_json) != len(got):
        fail("%s: %d JSON lines, %d text" % (name, len(got_json), len(got)))
    lines = [l for l in err.splitlines() if "skipped as unreadable" in l]
    if len(lines) != len(skips):
        fail("%s: %d skip lines, %d expected:\n%s" % (name, len(lines), len(skips), err))
    for line, (count, what, why) in zip(lines, skips):
        if not re.search(r": %d %s skipped as unreadable, the first at byte \d+: %s" %
                         (count, re.escape(what), re.escape(why)), line):
            fail("%s: %r does not say %d %s: %s" % (name, line, count, what, why))
    print("%-6s %d lines printed of %d real records, %s" %
          (name, len(got), len(want), "; ".join(lines)))


for kind, why in (("regs", "a record of 32 bytes too short for its registers"),
                  ("probe", "a record of probe 99999, which the file has not named"),
                  ("len", "a record of 4000 bytes in a slot of 40")):
    check(kind, insert(bl, rec_blocks[0], forged(kind)), want, [(1, "record", why)])
    print("       (the forged record after %d real ones, %d after it)" %
          (before, len(want) - before))

nb = bl
for n in range(5):
    nb = insert(nb, rec_blocks[n % len(rec_blocks)], forged("regs"))
check("many", nb, want, [(5, "records", "a record of 32 bytes too short for its registers")])

nb = list(bl)
site = next(i for i, (t, _) in enumerate(bl) if t == SITE)
nb[site + 1:site + 1] = [(77, b"forged block"), (SITE, b"\0" * 12)]
check("blocks", nb, want, [(2, "blocks", "a block of unknown type 77")])

# a record whose size says 12: no framing left in its block past it
i = rec_blocks[-1]
recs = records(bl[i][1])
mid = len(recs) // 2
bad = struct.pack("<I", 12) + recs[mid][4:]
nb = list(bl)
nb[i] = (RECORDS, b"".join(recs[:mid]) + bad + b"".join(recs[mid + 1:]))
# the records before that one, and every block after, are printed
whole = join(bl[:i] + [(RECORDS, b"".join(recs[:mid]))] + bl[i + 1:])
with open(TMP + ".cut", "wb") as f:
    f.write(whole)
_, want_rest, _ = report(TMP + ".cut")
os.unlink(TMP + ".cut")
if len(want_rest) != len(want) - (len(recs) - mid):
    fail("rest: the reference has %d lines" % len(want_rest))
check("rest", nb, want_rest,
      [(1, "rest of a block", "a record of size 12 with %d bytes left, the rest of its block" %
        sum(len(r) for r in recs[mid:]))])
os.unlink(raw)
print("PASS: forged records and blocks skipped, every real record around them reported")
