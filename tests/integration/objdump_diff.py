#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Differential test of `uprobe decode` against `objdump -d` (the kernel's insn_decoder_test
idea): for every instruction objdump decodes in FILE's executable sections, uprobe must
find an instruction at the same address with the same length.

objdump is run as `objdump -d -w -z`: -w keeps a long instruction on one line (without it
objdump continues the raw bytes on a second line), -z disassembles runs of zeroes instead
of printing "...".  The length is the count of raw bytes.  "(bad)" lines are not compared,
and addresses objdump reaches just after one (while the two decoders resynchronise) are
counted apart.

It also checks that every line uprobe prints has a plan and a reason, that length 0 goes
with exactly the invalid/truncated reasons, and, with --max-slow-pct, that step + reject
stay under that share of all instructions.

Exit status: 0 pass, 1 fail, 77 skip (FILE or objdump missing).
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import time

SKIP = 77
PLANS = ("emulate", "xol", "step", "reject")
BAD_REASONS = ("invalid", "truncated")

# "  401126:\t55                   \tpush   %rbp" (the bytes column is padded with spaces)
INSN_RE = re.compile(r"^\s*([0-9a-f]+):\t((?:[0-9a-f]{2} )*[0-9a-f]{2}) *(?:\t(.*))?$")
SECTION_RE = re.compile(r"^Disassembly of section (\S+):")
# What objdump prints on a line of its own when it cannot attach a prefix to the next
# instruction ("47 47 c9" is one 3-byte instruction to the CPU and to Zydis; objdump
# prints "rex.RXB" and then "rex.RXB leave").
PREFIX_RE = re.compile(r"^(rex(\.[WRXB]+)?|data(16|32)|addr(16|32)|lock|rep|repz|repnz|repe|"
                       r"repne|[c-gs]s|notrack|bnd|xacquire|xrelease)$")


# Instructions a lock prefix is allowed on, with a memory destination; on anything else
# the CPU raises #UD, which Zydis reports as invalid and objdump decodes anyway.
LOCKABLE = {"add", "adc", "and", "btc", "btr", "bts", "cmpxchg", "cmpxchg8b", "cmpxchg16b",
            "dec", "inc", "neg", "not", "or", "sbb", "sub", "xor", "xadd", "xchg"}


def objdump_decodes_ud(asm):
    """True when objdump's text is of an encoding the CPU refuses with #UD."""
    if "%?" in asm:  # objdump's name for a segment/control register that does not exist
        return True
    if re.match(r"^mov\s.*,%cs$", asm):  # mov to cs: #UD
        return True
    words = asm.split()
    if "lock" not in words:
        return False
    rest = [w for w in words if not PREFIX_RE.match(w)]
    if not rest:
        return True
    mnemonic = re.sub(r"[bwlq]$", "", rest[0])
    dest = asm.rsplit(",", 1)[-1]  # AT&T: the destination is the last operand
    return (rest[0] not in LOCKABLE and mnemonic not in LOCKABLE) or "(" not in dest


def prefix_only(asm):
    words = asm.split()
    return bool(words) and all(PREFIX_RE.match(w) for w in words)


def objdump_insns(path):
    """[(vaddr, length, bytes_text, asm, is_bad, section)] in objdump's order."""
    out = subprocess.run(["objdump", "-d", "-w", "-z", path], check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    insns = []
    section = "?"
    for line in out.splitlines():
        m = SECTION_RE.match(line)
        if m:
            section = m.group(1)
            continue
        m = INSN_RE.match(line)
        if not m:
            continue
        raw = m.group(2)
        asm = (m.group(3) or "").strip()
        insns.append((int(m.group(1), 16), (len(raw) + 1) // 3, raw, asm,
                      "(bad)" in asm, section))
    return insns


def uprobe_insns(uprobe, path):
    """({vaddr: (length, plan, reason)}, [lines that do not parse], seconds)."""
    start = time.monotonic()
    proc = subprocess.run([uprobe, "decode", path], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit("FAIL: uprobe decode %s exited %d: %s" % (path, proc.returncode,
                                                          proc.stderr.strip()))
    insns = {}
    malformed = []
    for line in proc.stdout.splitlines():
        f = line.split()
        try:
            vaddr, length = int(f[0], 16), int(f[1])
            plan, reason = f[2], f[3]
        except (IndexError, ValueError):
            malformed.append(line)
            continue
        if len(f) != 4 or plan not in PLANS or not reason or reason in ("none", "?"):
            malformed.append(line)
        if (length == 0) != (reason in BAD_REASONS) or (length == 0 and plan != "reject"):
            malformed.append(line)
        if vaddr in insns:
            malformed.append(line + "   <- address printed twice")
        insns[vaddr] = (length, plan, reason)
    return insns, malformed, elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--uprobe", required=True, help="the uprobe binary")
    ap.add_argument("--max-slow-pct", type=float,
                    help="fail when step+reject exceed this %% of all instructions")
    ap.add_argument("--max-seconds", type=float,
                    help="fail when `uprobe decode FILE` takes longer (by default the time "
                    "is printed, not judged: ctest's timeout catches a hang)")
    ap.add_argument("file")
    args = ap.parse_args()

    if not os.path.exists(args.file):
        print("SKIP: %s does not exist" % args.file)
        return SKIP
    if not shutil.which("objdump"):
        print("SKIP: objdump not found (Debian package binutils)")
        return SKIP

    theirs = objdump_insns(args.file)
    ours, malformed, elapsed = uprobe_insns(args.uprobe, args.file)
    failed = False

    compared = 0
    skipped_bad = 0
    resync = 0
    resync_until = -1
    quirks = collections.Counter()
    disagree = []
    i = 0
    while i < len(theirs):
        vaddr, length, raw, asm, bad, section = theirs[i]
        i += 1
        if bad:
            skipped_bad += 1
            resync_until = vaddr + 15
            continue
        mine = ours.get(vaddr)
        if mine is None and vaddr < resync_until:
            resync += 1
            continue
        compared += 1
        if mine is not None and mine[0] == length:
            continue
        if mine is None:
            # what we have instead: the instruction that covers vaddr
            cover = next((a for a in range(vaddr - 1, vaddr - 16, -1)
                          if a in ours and a + ours[a][0] > vaddr), None)
            why = ("no instruction starts here; uprobe has 0x%x len %d over it" %
                   (cover, ours[cover][0]) if cover is not None else
                   "no instruction starts here")
            disagree.append((vaddr, raw, asm, section, why))
            continue
        ulen = mine[0]
        if ulen == 0 and objdump_decodes_ud(asm):
            quirks["objdump decoded an encoding that raises #UD"] += 1
            continue
        if ulen > length and prefix_only(asm):
            # objdump split leading prefixes off one instruction: its lines from here
            # must end exactly where ours does, all but the last being prefixes
            j = i
            while j < len(theirs) and theirs[j][0] < vaddr + ulen:
                j += 1
            last = theirs[j - 1]
            if (j > i and last[0] + last[1] == vaddr + ulen and not last[4] and
                    all(prefix_only(t[3]) for t in theirs[i:j - 1])):
                quirks["objdump printed a prefix apart"] += 1
                i = j
                continue
        if (raw.startswith("9b ") and ulen == 1 and
                ours.get(vaddr + 1, (0,))[0] == length - 1):
            # objdump shows fwait (9b) + fnstcw/fnstsw/... as one fstcw/fstsw/...
            quirks["objdump merged fwait into the next instruction"] += 1
            continue
        disagree.append((vaddr, raw, asm, section, "uprobe length %d (%s %s)" %
                         (ulen, mine[1], mine[2])))

    print("%s: objdump decoded %d instructions, uprobe %d; compared %d, disagreed %d"
          % (args.file, len(theirs), len(ours), compared, len(disagree)))
    if skipped_bad or resync:
        print("  not compared: %d objdump (bad) lines, %d addresses while resynchronising"
              % (skipped_bad, resync))
    for what, n in sorted(quirks.items()):
        print("  agreed up to a known objdump quirk: %d times %s" % (n, what))
    if disagree:
        failed = True
        print("FAIL: first %d disagreements (objdump's bytes and text):" %
              min(20, len(disagree)))
        for vaddr, raw, asm, section, why in disagree[:20]:
            print("  %s 0x%x: %s  [%s]  objdump len %d: %s" %
                  (section, vaddr, raw, asm, (len(raw) + 1) // 3, why))
    if compared == 0:
        failed = True
        print("FAIL: nothing was compared")

    if malformed:
        failed = True
        print("FAIL: %d uprobe decode lines without a proper plan/reason/length, first ones:"
              % len(malformed))
        for line in malformed[:20]:
            print("  " + line)

    plans = collections.Counter(p for _, p, _ in ours.values())
    reasons = collections.Counter(r for _, _, r in ours.values())
    total = len(ours)
    print("  plans: " + ", ".join("%s %d" % (p, plans[p]) for p in PLANS))
    print("  reasons: " + ", ".join("%s %d" % kv for kv in sorted(reasons.items())))
    slow = plans["step"] + plans["reject"]
    pct = 100.0 * slow / total if total else 0.0
    print("  step+reject: %d of %d = %.3f%%" % (slow, total, pct))
    if args.max_slow_pct is not None and pct >= args.max_slow_pct:
        failed = True
        print("FAIL: step+reject %.3f%% is not under %.3f%%" % (pct, args.max_slow_pct))

    print("  uprobe decode took %.2f s" % elapsed)
    if args.max_seconds is not None and elapsed > args.max_seconds:
        failed = True
        print("FAIL: uprobe decode took more than %.1f s" % args.max_seconds)

    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
